// SPDX-License-Identifier: GPL-2.0-only
//! scx_sisutil: the kernel's CFS wake-up placement and five kernel patches as
//! live-switchable, measurable sched_ext policies.

mod bpf_intf;
mod bpf_skel;

/// The scheduler: what runs while `scx_sisutil` schedules (and the monitor).
mod sched {
    pub mod bpf_maps;
    pub mod clock;
    pub mod features;
    pub mod loader;
    pub mod opts;
    pub mod pelt;
    pub mod scheduler;
    pub mod sis_fit;
    pub mod sis_util_depth;
    pub mod stats;
    pub mod text;
    pub mod topology;
    pub mod wait_hist;
}

/// The shipped tools: `ab`, `calibrate`, `placement-cost`, `latency`, `plot`, `shadow`.
/// The scheduler never imports them (src/testing/layout_test.rs holds to it).
mod tools {
    pub mod ab;
    pub mod calibrate;
    pub mod cost;
    pub mod latency;
    pub mod plot;
    pub mod safe_io;
    pub mod shadow;
    pub mod tool_intf;
}

/// Test-only code: the host BPF tests and their models.
#[cfg(test)]
mod testing {
    pub mod calib_test;
    pub mod decide_test;
    mod layout_test;
    mod object_test;
    mod queue_test;
    pub mod sis_model;
    pub mod sis_test;
    pub mod stats_server;
    pub mod test_intf;
    pub mod vtime_model;
}

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sched::features::Preset;
use sched::opts::{full_version, RunOpts};

/// `--help`'s epilogue: the features from intf.h's table, then examples.
fn after_help() -> String {
    let names: Vec<_> = sched::features::FEATURES.iter().map(|f| f.name).collect();
    let mut list = String::new();
    let mut line = String::from(" ");
    for n in names {
        if line.len() + n.len() + 2 > 80 {
            list += &line;
            list += "\n";
            line = String::from(" ");
        }
        line += &format!(" {n},");
    }
    list += line.trim_end_matches(',');
    format!(
        "Features (kernel sched_feat names; NO_X turns X off):\n{list}\n  \
         `scx_sisutil features` lists them with their state on the running scheduler.\n\n{EXAMPLES}"
    )
}

const EXAMPLES: &str = "\
Examples:
  sudo scx_sisutil                              run with --preset patched
  sudo scx_sisutil --preset vanilla --stats 1   every patch off, stats each second
  sudo scx_sisutil --preset sis-util-base       a kernel patch's own baseline (v5.19-rc1)
  sudo scx_sisutil --preset sis-util            ... with the patch: the two differ by it alone
  scx_sisutil presets                           every preset, its features and its kernel
  sudo scx_sisutil features NO_X Y              switch features X off and Y on live, no reload
  sudo scx_sisutil features --preset vanilla    switch the running scheduler to a preset live
  sudo scx_sisutil monitor --json --count 5     SIS statistics of the running scheduler
  scx_sisutil scan-table --llc-weight 112       the scan depth per utilization (its commit's table)
  sudo scx_sisutil latency --duration 30        wake-up latency per nice level, any scheduler
  tools/vm -- 'scx_sisutil & sleep 5; scx_sisutil monitor --count 1'   on a host without sched_ext";

#[derive(Parser, Debug)]
#[command(name = "scx_sisutil", about, after_help = after_help(), args_conflicts_with_subcommands = true,
          disable_version_flag = true)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunOpts,
    /// More output (-vv: libbpf debug); accepted by every subcommand
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the scheduler (the default)
    Run(RunOpts),
    /// Print the running scheduler's SIS statistics every interval
    Monitor(sched::stats::MonitorOpts),
    /// List the running scheduler's features, or switch them: `features NO_X Y`
    #[command(after_help = sched::features::LOAD_TIME_NOTE)]
    Features {
        /// X turns X on, NO_X off; comma or space separated
        names: Vec<String>,
        /// Switch to this preset's feature word first (then NAMES apply on top), live
        #[arg(long, value_enum)]
        preset: Option<Preset>,
        /// Every feature's name, bit, help and presets as JSON (no scheduler needed; with a
        /// running one, also its state there)
        #[arg(long)]
        json: bool,
        /// Put back the features an `ab` that was killed left switched (its record of the
        /// features it started from, in the pin directory)
        #[arg(long, conflicts_with_all = ["json", "preset", "names"])]
        restore: bool,
    },
    /// A/B two feature sets on the running scheduler: run CMD round after round, switching
    /// live between rounds in ABBA order; medians, their difference in %, the exact
    /// rank-sum test's p-value and a verdict at p <= 0.05
    Ab(tools::ab::AbOpts),
    /// Measure the LLC scan on the running scheduler: per utilization bucket, the depth the
    /// policy allowed against the distance to the nearest idle CPU (found, missed, wasted,
    /// depth_p95), optionally plotted against the policy's depth curve
    Calibrate(tools::calibrate::CalibrateOpts),
    /// Print the utilization-based scan depth for each utilization (the table of
    /// \"sched/fair: Introduce SIS_UTIL to search idle CPU based on sum of util_avg\")
    ScanTable(sched::sis_util_depth::ScanTableOpts),
    /// Wake-up latency (runnable -> running) per nice level under any scheduler (BPF tracer)
    Latency(tools::latency::LatencyOpts),
    /// What one wake-up placement costs on this CPU per policy, LLC size and load (the
    /// scheduler's own BPF path, run natively; root, no sched_ext needed); --loader: the
    /// loader's per-interval work
    PlacementCost(tools::cost::CostOpts),
    /// The kernel as the oracle: record every wake-up placement the fair class makes and
    /// replay it through the scheduler's own wake path (agreement, races, the step of each
    /// disagreement) and under each preset (root; no sched_ext needed, none attached)
    Shadow(tools::shadow::ShadowOpts),
    /// List the presets: features on and the kernel each stands for
    Presets {
        /// JSON instead of the table
        #[arg(long)]
        json: bool,
    },
}

fn init_log(verbose: u8) {
    let level = if verbose > 0 {
        simplelog::LevelFilter::Debug
    } else {
        simplelog::LevelFilter::Info
    };
    let cfg = simplelog::ConfigBuilder::new()
        .set_time_level(simplelog::LevelFilter::Off)
        .set_target_level(simplelog::LevelFilter::Off)
        .set_thread_level(simplelog::LevelFilter::Off)
        .set_location_level(simplelog::LevelFilter::Off)
        .build();
    let _ = simplelog::TermLogger::init(
        level,
        cfg,
        simplelog::TerminalMode::Stderr,
        simplelog::ColorChoice::Never,
    );
}

/// The checks a user deserves one clear line for, before libbpf says anything.
fn preflight() -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("must run as root: a sched_ext scheduler is loaded through bpf() (try sudo)");
    }
    if !Path::new("/sys/kernel/sched_ext").exists() {
        bail!(
            "this kernel has no sched_ext (/sys/kernel/sched_ext is missing; needs CONFIG_SCHED_CLASS_EXT=y, Linux 6.12+); \
             tools/vm runs scx_sisutil in a VM with a sched_ext kernel"
        );
    }
    let state = std::fs::read_to_string("/sys/kernel/sched_ext/state").unwrap_or_default();
    if state.trim() != "disabled" {
        let ops = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default();
        bail!(
            "another sched_ext scheduler is already running ({}, state {})",
            ops.trim(),
            state.trim()
        );
    }
    Ok(())
}

fn shutdown_flag() -> Result<Arc<AtomicBool>> {
    let shutdown = Arc::new(AtomicBool::new(false));
    let s = shutdown.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))?;
    Ok(shutdown)
}

fn run(opts: RunOpts) -> Result<()> {
    if opts.version {
        println!("scx_sisutil {}", full_version());
        return Ok(());
    }
    if opts.help_stats {
        return sched::stats::help_stats(opts.json);
    }
    if let Some(secs) = opts.monitor {
        let mopts = sched::stats::MonitorOpts::every(secs);
        let s = shutdown_flag()?;
        return sched::stats::monitor(&mopts, &|| s.load(Ordering::Relaxed));
    }
    let feat = sched::features::apply(sched::features::preset(opts.preset), &opts.features)?;
    preflight()?;
    // held until run() returns: the kernel counts while the fd is open
    let _prog_stats = if opts.prog_stats {
        Some(sched::loader::ProgStats::enable()?)
    } else {
        None
    };
    scx_utils::try_set_rlimit_infinity();
    let shutdown = shutdown_flag()?;

    if let Some(secs) = opts.stats {
        let s = shutdown.clone();
        let mopts = sched::stats::MonitorOpts::every(secs);
        std::thread::spawn(move || {
            if let Err(e) = sched::stats::monitor(&mopts, &|| s.load(Ordering::Relaxed)) {
                log::warn!("stats monitor: {e:#}");
            }
        });
    }

    let mut open_object = MaybeUninit::uninit();
    let mut feat = feat;
    loop {
        let mut sched = sched::scheduler::Scheduler::init(&opts, feat, &mut open_object)?;
        let uei = sched.run(shutdown.clone())?;
        // the kernel asks for a restart itself (ext.c: SCX_ECODE_ACT_RESTART with
        // SCX_ECODE_RSN_HOTPLUG when a CPU comes or goes and ops.cpu_online is not set)
        if !uei.should_restart() {
            break;
        }
        // a restart keeps the features the user switched live
        feat = sched::features::read_live().unwrap_or(feat);
        drop(sched);
        log::info!("restarting (CPU hotplug): re-reading the topology");
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    let verbose = cli.verbose;
    init_log(verbose);
    let res = match cli.cmd {
        None => run(RunOpts { verbose, ..cli.run }),
        Some(Cmd::Run(o)) => run(RunOpts { verbose, ..o }),
        Some(Cmd::Monitor(o)) => {
            shutdown_flag().and_then(|s| sched::stats::monitor(&o, &|| s.load(Ordering::Relaxed)))
        }
        Some(Cmd::Features {
            names,
            preset,
            json,
            restore,
        }) => sched::features::features_main(&names, preset, json, restore),
        Some(Cmd::Ab(o)) => shutdown_flag().and_then(|s| tools::ab::ab_main(&o, s)),
        Some(Cmd::Calibrate(o)) => {
            shutdown_flag().and_then(|s| tools::calibrate::calibrate_main(&o, &s))
        }
        Some(Cmd::ScanTable(o)) => sched::sis_util_depth::scan_table_main(&o),
        Some(Cmd::Latency(o)) => shutdown_flag()
            .and_then(|s| tools::latency::latency_main(&o, &|| s.load(Ordering::Relaxed))),
        Some(Cmd::PlacementCost(o)) => tools::cost::cost_main(&o),
        Some(Cmd::Shadow(o)) => shutdown_flag().and_then(|s| tools::shadow::shadow_main(&o, &s)),
        Some(Cmd::Presets { json }) => sched::features::presets_main(json),
    };
    if let Err(e) = res {
        eprintln!("scx_sisutil: error: {e:#}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// -v after any subcommand (and alone), counted once per v.
    #[test]
    fn verbose_accepted_by_every_subcommand() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("scx_sisutil").chain(args.iter().copied()))
                .map(|c| c.verbose)
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse(&["-vv"]), Ok(2));
        assert_eq!(parse(&["run", "-v"]), Ok(1));
        for sub in [
            &["monitor"][..],
            &["features"],
            &["ab", "--a", "SIS_UTIL", "--b", "NO_SIS_UTIL", "--", "true"],
            &["calibrate"],
            &["scan-table", "--llc-weight", "8"],
            &["latency"],
            &["placement-cost"],
            &["presets"],
        ] {
            let mut after = sub.to_vec();
            after.insert(1, "-v");
            assert_eq!(parse(&after), Ok(1), "{after:?}");
            after.insert(1, "-v");
            assert_eq!(parse(&after), Ok(2), "{after:?}");
        }
    }
}
