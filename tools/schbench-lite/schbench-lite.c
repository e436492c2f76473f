// SPDX-License-Identifier: GPL-2.0-only
/*
 * schbench-lite: a small wake-up latency benchmark in the spirit of Chris Mason's schbench
 * (which no Debian package ships). Used by tools/bench for the kernel patches' schbench tables.
 *
 *   schbench-lite -m MTHREADS -t WORKERS_PER_MTHREAD -r SECONDS [-s SLEEP_US] [-c CPU_US]
 *
 * Each message thread loops: sleep SLEEP_US, then wake each of its workers that is waiting
 * (stamping the wake time, then FUTEX_WAKE). A worker blocks in FUTEX_WAIT; when it runs
 * again it records now - wake time (the wake-up latency the scheduler's placement decides),
 * spins CPU_US of "work" and waits again. At the end it prints one JSON line:
 *   {"p50":..,"p90":..,"p99":..,"max":..,"samples":N,"wakeups_per_s":..}   (usec)
 * Percentiles come from a log-linear histogram (1 usec resolution below 1 ms, ~1% above).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { WAITING = 0, WOKEN = 1, STOP = 2 };

/* Histogram: buckets 0..1023 are 1 usec wide; above, 64 sub-buckets per power of two. */
#define LIN 1024
#define SUB 64
#define NBUCKETS (LIN + 40 * SUB)

struct worker {
	_Atomic uint32_t state;		/* futex word */
	_Atomic uint64_t wake_ns;	/* when the message thread woke us */
	uint64_t hist[NBUCKETS];
	uint64_t samples;
	pthread_t tid;
} __attribute__((aligned(64)));

static int nr_mthreads = 1, nr_workers = 4, runtime_s = 5, sleep_us = 2000, cpu_us = 1000;
static _Atomic int stopping;
static struct worker *workers;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static int bucket_of(uint64_t us)
{
	int msb, b;

	if (us < LIN)
		return (int)us;
	msb = 63 - __builtin_clzll(us);		/* >= 10 */
	b = LIN + (msb - 10) * SUB + (int)((us >> (msb - 6)) & (SUB - 1));
	return b < NBUCKETS ? b : NBUCKETS - 1;
}

/* Lower edge of a bucket, in usec. */
static uint64_t bucket_value(int b)
{
	int msb;

	if (b < LIN)
		return (uint64_t)b;
	msb = 10 + (b - LIN) / SUB;
	return (1ull << msb) + ((uint64_t)((b - LIN) % SUB) << (msb - 6));
}

/* Burn about us microseconds of CPU time, the worker's "request". */
static void spin_us(int us)
{
	uint64_t end = now_ns() + (uint64_t)us * 1000;

	while (now_ns() < end)
		__asm__ __volatile__("pause" ::: "memory");
}

static void *worker_fn(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		uint32_t s = atomic_load(&w->state);

		if (s == STOP)
			break;
		if (s == WAITING) {
			futex(&w->state, FUTEX_WAIT_PRIVATE, WAITING);
			continue;
		}
		/* WOKEN: the latency from the wake to running here. */
		uint64_t lat = (now_ns() - atomic_load(&w->wake_ns)) / 1000;

		w->hist[bucket_of(lat)]++;
		w->samples++;
		spin_us(cpu_us);
		/* Only go back to WAITING if nobody asked us to stop meanwhile. */
		uint32_t expect = WOKEN;

		atomic_compare_exchange_strong(&w->state, &expect, WAITING);
	}
	return NULL;
}

static void *mthread_fn(void *arg)
{
	struct worker *mine = &workers[(long)arg * nr_workers];
	struct timespec ts = { .tv_sec = sleep_us / 1000000, .tv_nsec = (sleep_us % 1000000) * 1000L };

	while (!atomic_load(&stopping)) {
		nanosleep(&ts, NULL);
		for (int i = 0; i < nr_workers; i++) {
			struct worker *w = &mine[i];

			if (atomic_load(&w->state) != WAITING)
				continue;	/* still busy with the last request */
			atomic_store(&w->wake_ns, now_ns());
			atomic_store(&w->state, WOKEN);
			futex(&w->state, FUTEX_WAKE_PRIVATE, 1);
		}
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: schbench-lite -m MTHREADS -t WORKERS -r SECONDS [-s SLEEP_US] [-c CPU_US]\n");
	exit(2);
}

static int num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < 0 || v > INT_MAX)
		usage();
	return (int)v;
}

int main(int argc, char **argv)
{
	int opt, n;
	pthread_t *mt;
	uint64_t total = 0, t0, elapsed;
	static uint64_t hist[NBUCKETS];

	while ((opt = getopt(argc, argv, "m:t:r:s:c:")) != -1) {
		switch (opt) {
		case 'm': nr_mthreads = num(optarg); break;
		case 't': nr_workers = num(optarg); break;
		case 'r': runtime_s = num(optarg); break;
		case 's': sleep_us = num(optarg); break;
		case 'c': cpu_us = num(optarg); break;
		default: usage();
		}
	}
	if (nr_mthreads < 1 || nr_workers < 1 || runtime_s < 1)
		usage();
	n = nr_mthreads * nr_workers;
	workers = aligned_alloc(64, sizeof(*workers) * n);
	mt = calloc(nr_mthreads, sizeof(*mt));
	if (!workers || !mt) {
		perror("schbench-lite: alloc");
		return 1;
	}
	memset(workers, 0, sizeof(*workers) * n);
	for (int i = 0; i < n; i++)
		if (pthread_create(&workers[i].tid, NULL, worker_fn, &workers[i])) {
			perror("schbench-lite: pthread_create");
			return 1;
		}
	t0 = now_ns();
	for (long i = 0; i < nr_mthreads; i++)
		if (pthread_create(&mt[i], NULL, mthread_fn, (void *)i)) {
			perror("schbench-lite: pthread_create");
			return 1;
		}
	sleep(runtime_s);
	atomic_store(&stopping, 1);
	for (int i = 0; i < nr_mthreads; i++)
		pthread_join(mt[i], NULL);
	elapsed = now_ns() - t0;
	for (int i = 0; i < n; i++) {
		atomic_store(&workers[i].state, STOP);
		futex(&workers[i].state, FUTEX_WAKE_PRIVATE, 1);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(workers[i].tid, NULL);
		for (int b = 0; b < NBUCKETS; b++)
			hist[b] += workers[i].hist[b];
		total += workers[i].samples;
	}
	if (!total) {
		fprintf(stderr, "schbench-lite: no wake-up recorded\n");
		return 1;
	}

	const double pcts[] = { 50, 90, 99, 100 };
	uint64_t vals[4] = { 0 }, seen = 0;
	int k = 0;

	for (int b = 0; b < NBUCKETS && k < 4; b++) {
		seen += hist[b];
		while (k < 4 && hist[b] && seen * 100.0 >= pcts[k] * total)
			vals[k++] = bucket_value(b);
	}
	printf("{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"max\":%llu,\"samples\":%llu,\"wakeups_per_s\":%.1f}\n",
	       (unsigned long long)vals[0], (unsigned long long)vals[1],
	       (unsigned long long)vals[2], (unsigned long long)vals[3],
	       (unsigned long long)total, total / (elapsed / 1e9));
	return 0;
}
