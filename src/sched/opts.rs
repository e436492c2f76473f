// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler's options (`scx_sisutil [run] ...`) and its version line. Their defaults
//! are intf.h's (DEFAULT_*), the values the BPF side starts with.

use crate::bpf_intf as bi;
use crate::sched::features::Preset;
use crate::sched::stats;

/// The time slice, microseconds (intf.h).
pub const DEFAULT_SLICE_US: u64 = bi::sis_consts_DEFAULT_SLICE_US as u64;
/// The loader's util/depth update period, ms (intf.h).
pub const DEFAULT_INTERVAL_MS: u64 = bi::sis_consts_DEFAULT_INTERVAL_MS as u64;
/// The LLC domain's imbalance_pct, SIS_UTIL's depth (intf.h).
pub const DEFAULT_IMBALANCE_PCT: u64 = bi::sis_consts_DEFAULT_IMBALANCE_PCT as u64;
/// LLC_SHARDS' CPUs per shard (intf.h)
pub const DEFAULT_SHARD_CPUS: u32 = bi::sis_consts_DEFAULT_SHARD_CPUS;

#[derive(clap::Args, Debug, Clone)]
pub struct RunOpts {
    /// Feature preset: patched = every patch on; vanilla = every patch off; X-base / X = the
    /// kernel patch X was measured on, without / with X (`--help` lists them)
    #[arg(long, value_enum, default_value_t = Preset::patched())]
    pub preset: Preset,
    /// Features applied after the preset: X turns X on, NO_X off, comma separated
    #[arg(long, value_delimiter = ',')]
    pub features: Vec<String>,
    /// Time slice in microseconds (100..=100000)
    #[arg(long, default_value_t = DEFAULT_SLICE_US, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub slice_us: u64,
    /// How often the loader samples CPU busy time and rewrites each LLC's scan
    /// depth, in ms (1..=1000). 20 ms: well under PELT's 33.55 ms half-life and
    /// within the kernel's LLC balance interval (about llc_weight ms)
    #[arg(long, default_value_t = DEFAULT_INTERVAL_MS, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub interval_ms: u64,
    /// imbalance_pct of the LLC domain: the utilization-based depth is 0 from 100/pct
    /// utilization on (100..=200)
    #[arg(long, default_value_t = DEFAULT_IMBALANCE_PCT, value_parser = clap::value_parser!(u64).range(100..=200))]
    pub imbalance_pct: u64,
    /// LLC_SHARDS: CPUs per shard of an LLC's queue (1..=512): an LLC of n CPUs has
    /// ceil(n / k) shards (at most 16; k is raised to fit), one when n <= k. Read at start;
    /// the feature itself switches live
    #[arg(long, default_value_t = DEFAULT_SHARD_CPUS, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub shard_cpus: u32,
    /// Let the kernel's TTWU_QUEUE wake list run for this scheduler's tasks
    /// (SCX_OPS_ALLOW_QUEUED_WAKEUP, Linux 6.15+): a wakee still on its CPU is queued on
    /// that CPU's wake list without ops.select_cpu, so the waker does not wait for it to
    /// leave the CPU (TTWU_QUEUE_DESCHED's mechanism), and a wake-up to another LLC or to an
    /// idle CPU is handed to that CPU (the rest of TTWU_QUEUE, beyond the patch). Fixed when
    /// the scheduler attaches: it cannot switch live, and it changes which wake-ups reach
    /// select_cpu (those are not searched or counted as searches). Counted in wake_list /
    /// wake_spun. Refused on a kernel without it
    #[arg(long)]
    pub allow_queued_wakeup: bool,
    /// Also print statistics every SECS seconds while running
    #[arg(long, value_parser = stats::parse_interval)]
    pub stats: Option<f64>,
    /// Report each callback's (select_cpu, enqueue, dispatch, tick, ...) calls and mean ns
    /// per call from the kernel's BPF run-time statistics, in --stats and `monitor` (its
    /// kfuncs included). Turns the kernel's statistics on (BPF_ENABLE_STATS) while running,
    /// which costs a little on every call of every BPF program (two clock reads); off by
    /// default. Needs root and Linux 5.8+
    #[arg(long)]
    pub prog_stats: bool,
    /// Bytes of the kernel's debug dump on an error exit (0 = kernel default)
    #[arg(long, default_value_t = 0)]
    pub exit_dump_len: u32,
    /// Describe every statistic and exit
    #[arg(long)]
    pub help_stats: bool,
    /// With --help-stats: the same as JSON (counters, derived formulas)
    #[arg(long, requires = "help_stats")]
    pub json: bool,
    /// Only print the running scheduler's statistics every SECS seconds (no scheduler is
    /// started; the same as `scx_sisutil monitor --interval SECS`)
    #[arg(long, value_parser = stats::parse_interval)]
    pub monitor: Option<f64>,
    /// Print the version with its build id and exit
    #[arg(short = 'V', long)]
    pub version: bool,
    /// -v / -vv (the global option; set from it)
    #[arg(skip)]
    pub verbose: u8,
    #[command(flatten, next_help_heading = "Libbpf options")]
    pub libbpf: scx_utils::libbpf_clap_opts::LibbpfOpts,
}

/// `scx_sisutil 1.2.3 (build id)`, as every scx scheduler prints it.
pub fn full_version() -> String {
    let id = option_env!("SISUTIL_BUILD_ID").unwrap_or("");
    scx_utils::build_id::full_version(&format!("{}{id}", env!("CARGO_PKG_VERSION")))
}
