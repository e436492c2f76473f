/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kick, whole: asking an idle CPU to come and take work queued on an
 * LLC, as kick_ilb() asks the idle load balancer. In the order it is used:
 * the kick-pending flag word and its atomics (kick_ilb()'s nohz_flags()),
 * the search, its two decisions
 * (KICK_SKIP_REDUNDANT, KICK_WRAP_NEXT), and kick_for_work(), which runs
 * them for the enqueue and the tick (queue.bpf.h).
 *
 * The search for an idle CPU to kick (the analog of kick_ilb()'s
 * find_new_ilb()) looks in the task's LLC first, then in the other LLCs,
 * nearest first.
 *
 * The search jumps, it does not walk: for each word of the LLC's CPUs, in
 * the wrap order from its start CPU, the AND of the idle mask, the task's
 * allowed mask and the LLC's CPUs (64 CPUs per test, only the words the LLC
 * spans); the first word with a bit set gives the CPU, its first set bit at
 * or after the start (cpumask_first_and() in find_new_ilb(); for the wrap,
 * for_each_cpu_wrap()'s order: the bits at or after the start CPU, then the
 * LLC's words from its first, then the start word's bits below the start).
 * The LLC's CPUs ascend by id (topology.rs), so the bit order is the LLC's
 * position order the walk used: the same CPU as the walk, in O(words), not
 * O(CPUs) - at 99 % busy, one idle CPU in a 256-CPU LLC costs four word
 * tests, not a walk of up to 256 CPUs. Before the other LLCs, one test over
 * the machine's words: nothing idle and allowed anywhere ends the search
 * there. The tests read the very mask the kernel keeps, so they are exact on
 * 6.12 (ops.update_idle before the idle masks change) and on 7.x alike, and
 * need no count to keep.
 *
 * The search reads the machine through the seam's primitives (sis_ctx.bpf.h):
 * kick_idle_word() and kick_allowed_word() over struct kick_env, and the kick
 * itself is sis_kick_idle(): sched_ext's idle mask, p->cpus_ptr and
 * scx_bpf_kick_cpu() in the scheduler (scx_prims.bpf.h), a synthetic machine
 * in the host objects (tools/synth.bpf.h: the host test and the cost benchmark
 * run this very kick, kick_for_work() included).
 * The object calls kick_llc_words_init() once the topology is set.
 */
#pragma once

#include "sis_ctx.bpf.h"

/* the kick-pending flag word (nohz_flags() of kick_ilb()): CPUs asked to come and take queued work */
u64 kick_pending[MAX_CPUS / 64];

/* is @cpu's bit set: the read KICK_SKIP_REDUNDANT adds before the atomic (kick_already_asked()) */
static __always_inline bool kick_test(s32 cpu)
{
	return kick_pending[mask_word(cpu)] & mask_bit(cpu);
}

/*
 * Clear this CPU's kick-pending bit; true if it was set (woken for work):
 * ops.dispatch's kicked flag, which NEWIDLE_SKIP_IPI reads (queue.bpf.h).
 * In every object: the host test runs it over the same word.
 */
static __always_inline bool take_kick(s32 cpu)
{
	u64 bit = mask_bit(cpu);
	u64 *word = &kick_pending[mask_word(cpu)];

	if (!(READ_ONCE(*word) & bit))
		return false;
	__sync_fetch_and_and(word, ~bit);
	return true;
}


/* ---- the search, over the primitives ---- */

/* each LLC's CPUs as a mask, for the word-parallel test, and the words it spans */
static u64 kick_llc_words[MAX_LLCS][MAX_CPUS / 64];
static u8 kick_llc_first[MAX_LLCS], kick_llc_last[MAX_LLCS];

static __attribute__((unused)) void kick_llc_words_init(void)
{
	u32 cpu, i, w;
	s32 l;

	bpf_for(i, 0, MAX_LLCS * (MAX_CPUS / 64))
		kick_llc_words[(i / (MAX_CPUS / 64)) & (MAX_LLCS - 1)][i & (MAX_CPUS / 64 - 1)] = 0;
	bpf_for(i, 0, MAX_LLCS) {
		kick_llc_first[i & (MAX_LLCS - 1)] = MAX_CPUS / 64;
		kick_llc_last[i & (MAX_LLCS - 1)] = 0;
	}
	bpf_for(cpu, 0, MAX_CPUS) {
		if (cpu >= sis_topo()->nr_cpu_ids)
			break;
		l = sis_topo()->cpu_llc[cpu & (MAX_CPUS - 1)];
		if (l < 0 || l >= MAX_LLCS)
			continue;
		w = mask_word(cpu);
		kick_llc_words[l & (MAX_LLCS - 1)][w] |= mask_bit(cpu);
		if (w < kick_llc_first[l & (MAX_LLCS - 1)])
			kick_llc_first[l & (MAX_LLCS - 1)] = w;
		if (w > kick_llc_last[l & (MAX_LLCS - 1)])
			kick_llc_last[l & (MAX_LLCS - 1)] = w;
	}
}

/* word @w of idle & allowed: the task's mask read only when the idle word has a CPU */
static __always_inline u64 kick_idle_allowed(struct kick_env *e, u32 w)
{
	u64 m = kick_idle_word(e, w);

	return m ? m & kick_allowed_word(e, w) : 0;
}

/*
 * The index of @m's lowest set bit (@m != 0), __ffs() of cpumask_first():
 * BPF has no count-trailing-zeros, so the popcount of the bits below it
 * (calib_popcount()'s arithmetic, spelled out).
 */
static __always_inline u32 kick_first_bit(u64 m)
{
	u64 x = (m & -m) - 1;

	x = x - ((x >> 1) & 0x5555555555555555ULL);
	x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (x * 0x0101010101010101ULL) >> 56;
}

/*
 * Is any CPU of the machine idle and allowed? One pass over the machine's
 * words, before the walk of the other LLCs: at full load the search ends
 * here, whatever the number of LLCs (O(CPUs / 64) word tests, not O(LLCs x
 * CPUs / 64)). It reads the very mask the walk reads (the builtin idle mask
 * the kernel keeps, even while sched_ext bypasses and skips
 * ops.update_idle), so it cannot disagree with the walk: no summary to keep.
 */
static __always_inline bool kick_machine_has_idle(struct kick_env *e)
{
	u32 w;

	/* unrolled (MAX_CPUS / 64 words): no iterator call per word */
#pragma unroll
	for (w = 0; w < MAX_CPUS / 64; w++) {
		if (w * 64 >= sis_topo()->nr_cpu_ids)
			break;
		if (kick_idle_allowed(e, w))
			return true;
	}
	return false;
}

/*
 * KICK_SKIP_REDUNDANT: Tim Chen, "sched/balance: Skip unnecessary updates
 * to idle load balancer's flags" (2024-06). Its one decision:
 *
 * kick_ilb() reads the target's flags before its atomic_fetch_or():
 *   if ((atomic_read(nohz_flags(ilb_cpu)) & flags) == flags) return;
 * kick_already_asked(): @asked is the target's bit of the kick-pending word;
 * true (the atomic and the kick skipped, the hit counted in the target's
 * LLC @llc) when it is already set.
 */
static __always_inline bool kick_already_asked(u64 feat, bool asked, s32 llc)
{
	if (!feat_on(feat, FEAT_KICK_SKIP_REDUNDANT) || !asked)
		return false;
	stat_inc(llc, STAT_HIT_KICK_SKIP_REDUNDANT);
	return true;
}

/*
 * KICK_WRAP_NEXT: Chen Yu's review of that patch, "for_each_cpu_wrap(ilb_cpu,
 * ..., this_cpu+1) so different ilb_cpu might be found by different CPUs" -
 * not in the merged commit, so a feature of its own. kick_search_first():
 * the LLC position the walk of @llc starts at: this_cpu + 1 when this_cpu
 * is in the LLC, else its first CPU (find_new_ilb()'s for_each_cpu_and).
 */
static __always_inline u32 kick_search_first(u64 feat, s32 llc, s32 this_cpu)
{
	if (feat_on(feat, FEAT_KICK_WRAP_NEXT) && sis_cpu_llc(this_cpu) == llc)
		return sis_topo()->cpu_llc_pos[this_cpu & (MAX_CPUS - 1)] + 1;
	return 0;
}

/*
 * One LLC: the first idle allowed CPU in the wrap order from the CPU at
 * kick_search_first()'s position (@s): the words of idle & allowed & the
 * LLC's CPUs from @s's word to the LLC's last, then from its first back to
 * @s's; the first word that is not empty gives its first set bit, in @s's
 * word on the first visit only at or after @s, at the wrap's end the rest
 * of it (read once: m0). for_each_cpu_wrap(cpu, mask, start) visits the
 * same order: the CPUs at or after start, then those before it.
 * *probed counts the CPUs the walk in that order passes before it stops
 * (find_new_ilb()'s for_each_cpu_and: the CPU found is the last of them),
 * from the positions, not by walking them; an LLC with no idle allowed
 * CPU counts none. The word tests are the search's work (kick_idle_word()).
 */
static s32 kick_search_llc(struct kick_env *e, s32 llc, s32 this_cpu, u64 feat, u32 *probed)
{
	u32 l = llc & (MAX_LLCS - 1), nr, pos, first, last, nw, w0, w, k, at;
	u64 m, m0 = 0;
	s32 s, cpu;

	if (llc < 0 || llc >= MAX_LLCS)
		return -1;
	nr = sis_topo()->llc_nr[l];
	first = kick_llc_first[l];
	last = kick_llc_last[l];
	if (!nr || first > last || last >= MAX_CPUS / 64)
		return -1;
	pos = kick_search_first(feat, llc, this_cpu);
	/* this_cpu is the LLC's last CPU: the wrap starts at its first */
	if (pos >= nr)
		pos = 0;
	s = sis_topo()->llc_cpus[(sis_topo()->llc_start[l] + pos) & (MAX_CPUS - 1)];
	w0 = mask_word(s);
	nw = last - first + 1;
	/*
	 * unrolled (MAX_CPUS / 64 steps, the words past the LLC's span skipped):
	 * no iterator call per word, and no back-edge (7.3's verifier refused
	 * the scheduler with plain bounded loops, DESIGN.md); m: the word found
	 */
	m = 0;
#pragma unroll
	for (k = 0; k < MAX_CPUS / 64; k++) {
		if (m || k >= nw)
			continue;
		w = w0 + k;
		if (w > last)
			w -= nw;
		m = kick_llc_words[l][w & (MAX_CPUS / 64 - 1)];
		if (!m)
			continue;
		m &= kick_idle_allowed(e, w);
		if (!k) {
			m0 = m;
			m &= ~0ULL << (s & 63);
		}
	}
	if (!m) {
		/* the wrap's end: the start word's CPUs before @s (none at or after it: tested first) */
		if (!m0)
			return -1;
		m = m0;
		w = w0;
	}
	cpu = w * 64 + kick_first_bit(m);
	at = sis_topo()->cpu_llc_pos[cpu & (MAX_CPUS - 1)];
	*probed += (at >= pos ? at - pos : at + nr - pos) + 1;
	return cpu;
}

/*
 * The task's LLC @llc, then the others nearest first (topo.llc_steal): the
 * first idle allowed CPU, or -1. *probed counts the CPUs tested.
 */
static __always_inline s32 kick_search(struct kick_env *e, s32 llc, s32 this_cpu, u64 feat,
				       u32 *probed)
{
	s32 cpu;
	u32 k;

	cpu = kick_search_llc(e, llc, this_cpu, feat, probed);
	if (cpu >= 0 || llc < 0 || llc >= MAX_LLCS)
		return cpu;
	/*
	 * no other LLC, or nothing idle anywhere: no walk of the other LLCs (and
	 * no iterator set up for none: its three kfunc calls cost a one-LLC
	 * machine's tick at 100 % busy ~20 ns, placement-cost)
	 */
	if (sis_topo()->nr_llcs <= 1 || !kick_machine_has_idle(e))
		return -1;
	bpf_for(k, 0, sis_topo()->nr_llcs - 1) {
		if (k >= MAX_LLCS)
			break;
		cpu = kick_search_llc(e, sis_topo()->llc_steal[llc & (MAX_LLCS - 1)][k & (MAX_LLCS - 1)],
				      this_cpu, feat, probed);
		if (cpu >= 0)
			return cpu;
	}
	return -1;
}

/*
 * The search from @this_cpu for the work queued on @llc, its CPUs counted
 * (KICK_SCANNED) against @llc: the CPU to ask, or -1.
 */
static __always_inline s32 kick_search_counted(struct kick_env *e, s32 llc, s32 this_cpu, u64 feat)
{
	u32 probed = 0;
	s32 cpu;

	cpu = kick_search(e, llc, this_cpu, feat, &probed);
	stat_add(llc, STAT_KICK_SCANNED, probed);
	return cpu;
}

/*
 * kick_ilb()'s flags for the CPU the search found:
 *   flags = atomic_fetch_or(flags, nohz_flags(ilb_cpu));
 *   if (flags & NOHZ_KICK_MASK) return;       already asked: no second IPI
 * Tim Chen's patch adds only the read before the atomic ("if ((atomic_read(
 * nohz_flags(ilb_cpu)) & flags) == flags) return;", KICK_SKIP_REDUNDANT,
 * above). True when @cpu is to be kicked (counted in its LLC's STAT_KICK:
 * the caller sends the IPI, smp_call_function_single_async()'s analog).
 */
static __always_inline bool kick_ask(s32 cpu, u64 feat)
{
	u64 bit, old;
	u64 *word;
	s32 llc;

	if (cpu < 0 || cpu >= MAX_CPUS)
		return false;
	/* the kicked CPU's LLC counts the kick */
	llc = sis_cpu_llc(cpu);
	if (kick_already_asked(feat, kick_test(cpu), llc))
		return false;
	bit = mask_bit(cpu);
	word = &kick_pending[mask_word(cpu)];
	old = __sync_fetch_and_or(word, bit);
	stat_inc(llc, STAT_KICK_ATOMIC);
	if (old & bit)
		return false;
	stat_inc(llc, STAT_KICK);
	return true;
}

/* ---- the kick: the search, the decision, the atomic, the IPI ---- */

/*
 * Ask an idle CPU to come and take the work just queued on @llc (its own
 * LLC first, then the nearest LLC that has one: that CPU will steal), as
 * kick_ilb() asks the idle load balancer: the search under the idle mask's
 * reference (kick_search_counted()), the flag word (kick_ask()), the IPI
 * (sis_kick_idle()), all over the seam's primitives. Every CPU the search
 * passes is counted (KICK_SCANNED), against the enqueue's LLC. True when a
 * CPU was kicked.
 */
static bool kick_for_work(s32 llc, const struct task_struct *p, u64 feat)
{
	struct kick_env e = { .p = p };
	s32 cpu;

	if (llc < 0 || llc >= MAX_LLCS)
		return false;
	e.idle = sis_idle_get(NULL);
	cpu = kick_search_counted(&e, llc, sis_this_cpu(), feat);
	sis_idle_put(NULL, e.idle);
	if (!kick_ask(cpu, feat))
		return false;
	sis_kick_idle(cpu);
	return true;
}
