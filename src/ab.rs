// SPDX-License-Identifier: GPL-2.0-only
//! `scx_sisutil ab`: A/B two feature sets on the running scheduler in one boot.
//!
//! CMD runs round after round; before each round the feature word is switched live to the
//! round's side, in ABBA order (A B B A A B B A ...), so that a drift of the machine over
//! time (thermal, page cache, other load) weighs on both sides alike. Each round yields one
//! figure (CMD's wall time, or the number `--metric` extracts from its output) and the
//! scheduler's statistics over that round (a delta from the stats server). The sides are
//! compared by their medians; the 95 % interval of the difference is a percentile bootstrap
//! (10,000 resamples of each side, fixed seed, so a rerun on the same figures gives the same
//! interval). The original feature word is restored at the end, on an error and on Ctrl-C.

use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::features;

#[derive(clap::Args, Debug)]
pub struct AbOpts {
    /// Side A: a preset name (see --preset), a feature list (X,NO_Y) applied to
    /// the features in force when `ab` starts, or both: PRESET,FEATURE,...
    #[arg(long)]
    pub a: String,
    /// Side B, in the same form as --a
    #[arg(long)]
    pub b: String,
    /// Rounds in all, split evenly between the sides (even, 2..=1000)
    #[arg(long, default_value_t = 8, value_parser = parse_rounds)]
    pub rounds: u32,
    /// Take each round's figure from CMD's output: the first number matched by REGEX (its
    /// first capture group if it has one) instead of CMD's wall time in seconds
    #[arg(long)]
    pub metric: Option<String>,
    /// Lower figures are better (the default for wall time); with --metric, say which way
    #[arg(long, value_enum)]
    pub better: Option<Better>,
    /// Seconds to let the scheduler settle after each switch (the loader rewrites each
    /// LLC's scan depth every --interval-ms)
    #[arg(long, default_value_t = 0.5)]
    pub settle: f64,
    /// One JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// The command to run each round (after `--`)
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

fn parse_rounds(s: &str) -> std::result::Result<u32, String> {
    let n: u32 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !(2..=1000).contains(&n) || n % 2 != 0 {
        return Err(format!("rounds must be even and 2..=1000, got {n}"));
    }
    Ok(n)
}

/// A side's feature word from SPEC: `[PRESET,]FEATURE,...` on top of `base`.
pub fn spec_word(spec: &str, base: u64) -> Result<u64> {
    let mut parts: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        bail!("empty side '{spec}': give a preset or features");
    }
    let mut word = base;
    if let Some(p) = features::Preset::by_name(parts[0]) {
        word = features::preset(p);
        parts.remove(0);
    }
    features::apply(word, &parts)
}

/// ABBA: round i belongs to side A when i mod 4 is 0 or 3.
pub fn side_of(round: u32) -> usize {
    match round % 4 {
        0 | 3 => 0,
        _ => 1,
    }
}

pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// 100 * (b - a) / a
pub fn diff_pct(a: f64, b: f64) -> f64 {
    100.0 * (b - a) / a
}

/// Percentile bootstrap of diff_pct(median(A*), median(B*)): (2.5 %, 97.5 %).
pub fn bootstrap_ci95(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut draw = |v: &[f64]| -> f64 {
        let s: Vec<f64> = (0..v.len()).map(|_| v[rng.gen_range(0..v.len())]).collect();
        median(&s)
    };
    let mut d: Vec<f64> = (0..resamples)
        .map(|_| {
            let ma = draw(a);
            let mb = draw(b);
            diff_pct(ma, mb)
        })
        .filter(|x| x.is_finite())
        .collect();
    if d.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    d.sort_by(f64::total_cmp);
    let at = |q: f64| d[((q * (d.len() - 1) as f64).round() as usize).min(d.len() - 1)];
    (at(0.025), at(0.975))
}

/// One line a person can act on.
pub fn verdict(diff: f64, lo: f64, hi: f64, better: Better, what: &str) -> String {
    if !(lo.is_finite() && hi.is_finite()) {
        return "no verdict: the figures do not allow an interval (a median of 0?)".into();
    }
    if lo <= 0.0 && hi >= 0.0 {
        return format!(
            "no significant difference: B is {diff:+.2} % against A in {what}, and the 95 % interval [{lo:+.2} %, {hi:+.2} %] contains 0"
        );
    }
    let b_better = (diff < 0.0) == (better == Better::Lower);
    format!(
        "B is {} than A: {diff:+.2} % in {what} (95 % interval [{lo:+.2} %, {hi:+.2} %], {} is better)",
        if b_better { "better" } else { "worse" },
        match better {
            Better::Lower => "lower",
            Better::Higher => "higher",
        }
    )
}

/// The first number REGEX finds in `out` (its first group if it has one).
pub fn extract_metric(re: &regex::Regex, out: &str) -> Option<f64> {
    let c = re.captures(out)?;
    let m = c.get(1).or_else(|| c.get(0))?;
    let num = regex::Regex::new(r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?").ok()?;
    num.find(m.as_str())?.as_str().parse().ok()
}

#[derive(Serialize)]
struct Round {
    round: u32,
    side: &'static str,
    value: f64,
    wall_s: f64,
    /// the scheduler's statistics over the round (numbers of the top-level report)
    stats: BTreeMap<String, f64>,
}

#[derive(Serialize)]
struct Report {
    a: String,
    b: String,
    a_features: String,
    b_features: String,
    cmd: Vec<String>,
    metric: String,
    better: Better,
    rounds: u32,
    order: &'static str,
    a_median: f64,
    b_median: f64,
    diff_pct: f64,
    ci95_low: f64,
    ci95_high: f64,
    ci_method: &'static str,
    verdict: String,
    /// median over each side's rounds of every statistic the scheduler reports
    a_stats: BTreeMap<String, f64>,
    b_stats: BTreeMap<String, f64>,
    per_round: Vec<Round>,
}

/// Top-level numbers of one stats report (per-LLC maps and strings left out).
fn numbers(v: &serde_json::Value) -> BTreeMap<String, f64> {
    v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
                .collect()
        })
        .unwrap_or_default()
}

fn side_stats(rounds: &[Round], side: &str) -> BTreeMap<String, f64> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rounds.iter().filter(|r| r.side == side) {
        for (k, v) in &r.stats {
            by.entry(k.clone()).or_default().push(*v);
        }
    }
    by.into_iter().map(|(k, v)| (k, median(&v))).collect()
}

/// Run CMD once; its wall time and its output (stdout then stderr).
fn run_cmd(cmd: &[String], shutdown: &AtomicBool) -> Result<(f64, String, i32)> {
    let start = Instant::now();
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run '{}'", cmd[0]))?;
    let mut out_pipe = child.stdout.take().context("no stdout")?;
    let mut err_pipe = child.stderr.take().context("no stderr")?;
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if shutdown.load(Ordering::Relaxed) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("interrupted");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = start.elapsed().as_secs_f64();
    let out = out_t.join().unwrap_or_default() + &err_t.join().unwrap_or_default();
    Ok((wall, out, status.code().unwrap_or(-1)))
}

pub fn ab_main(opts: &AbOpts, shutdown: Arc<AtomicBool>) -> Result<()> {
    if !(0.0..=60.0).contains(&opts.settle) {
        bail!("--settle must be 0..=60 seconds, got {}", opts.settle);
    }
    let re = match &opts.metric {
        Some(r) => Some(regex::Regex::new(r).with_context(|| format!("--metric '{r}'"))?),
        None => None,
    };
    let better = opts.better.unwrap_or(Better::Lower);
    let orig = features::read_live()?;
    features::check_running()?;
    let words = [spec_word(&opts.a, orig)?, spec_word(&opts.b, orig)?];
    if words[0] == words[1] {
        bail!(
            "--a and --b are the same feature set ({}): nothing to compare",
            features::to_words(words[0]).join(" ")
        );
    }
    let mut client = crate::stats::connect_once()?;
    let res = rounds(opts, &words, re.as_ref(), &mut client, &shutdown);
    // whatever happened, the scheduler goes back to what it ran with
    let restored = features::write_live(orig);
    let per_round = res?;
    restored.context("restoring the original features")?;

    let vals = |s: &str| -> Vec<f64> {
        per_round
            .iter()
            .filter(|r| r.side == s)
            .map(|r| r.value)
            .collect()
    };
    let (va, vb) = (vals("a"), vals("b"));
    let (ma, mb) = (median(&va), median(&vb));
    let d = diff_pct(ma, mb);
    let (lo, hi) = bootstrap_ci95(&va, &vb, 10_000, 0x5157_5e11);
    let what = if opts.metric.is_some() {
        "the metric"
    } else {
        "wall time"
    };
    let report = Report {
        a: opts.a.clone(),
        b: opts.b.clone(),
        a_features: features::to_words(words[0]).join(" "),
        b_features: features::to_words(words[1]).join(" "),
        cmd: opts.cmd.clone(),
        metric: opts.metric.clone().unwrap_or_else(|| "wall_s".into()),
        better,
        rounds: opts.rounds,
        order: "ABBA",
        a_median: ma,
        b_median: mb,
        diff_pct: d,
        ci95_low: lo,
        ci95_high: hi,
        ci_method: "percentile bootstrap of the difference of medians, 10000 resamples",
        verdict: verdict(d, lo, hi, better, what),
        a_stats: side_stats(&per_round, "a"),
        b_stats: side_stats(&per_round, "b"),
        per_round,
    };
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("A: {}  ({})", report.a, report.a_features);
    println!("B: {}  ({})", report.b, report.b_features);
    println!(
        "{} rounds, ABBA; {} per round ({} is better)",
        report.rounds,
        report.metric,
        if better == Better::Lower {
            "lower"
        } else {
            "higher"
        }
    );
    println!("{:<24} {:>14} {:>14}", "", "A", "B");
    println!("{:<24} {:>14.4} {:>14.4}", "median", ma, mb);
    for k in [
        "success_rate",
        "se_eff",
        "dom_eff",
        "fast_rate",
        "search",
        "scanned",
    ]
    .iter()
    .chain(["wait_p99_us", "wait_max_us"].iter())
    {
        if let (Some(x), Some(y)) = (report.a_stats.get(*k), report.b_stats.get(*k)) {
            println!(
                "{:<24} {:>14.2} {:>14.2}",
                format!("{k} (median/round)"),
                x,
                y
            );
        }
    }
    println!(
        "diff B vs A: {:+.2} %  95 % interval [{:+.2} %, {:+.2} %] ({})",
        d, lo, hi, report.ci_method
    );
    println!("{}", report.verdict);
    Ok(())
}

fn rounds(
    opts: &AbOpts,
    words: &[u64; 2],
    re: Option<&regex::Regex>,
    client: &mut scx_stats::prelude::StatsClient,
    shutdown: &AtomicBool,
) -> Result<Vec<Round>> {
    let mut out = vec![];
    for round in 0..opts.rounds {
        if shutdown.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let side = side_of(round);
        features::write_live(words[side])?;
        std::thread::sleep(Duration::from_secs_f64(opts.settle));
        // opens this client's delta window: the next report covers the round alone
        client
            .request::<serde_json::Value>("stats", vec![])
            .context("reading statistics (did scx_sisutil exit?)")?;
        let (wall, text, rc) = run_cmd(&opts.cmd, shutdown)?;
        let stats = client
            .request::<serde_json::Value>("stats", vec![])
            .context("reading statistics (did scx_sisutil exit?)")?;
        if rc != 0 {
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "round {}: '{}' exited with status {rc}{}",
                round + 1,
                opts.cmd.join(" "),
                if tail.is_empty() {
                    " (no output)".to_string()
                } else {
                    format!("; its output ends:\n{}", tail.join("\n"))
                }
            );
        }
        let value = match re {
            None => wall,
            Some(re) => extract_metric(re, &text).with_context(|| {
                format!(
                    "round {}: --metric '{}' matched no number in the output of '{}'",
                    round + 1,
                    re.as_str(),
                    opts.cmd.join(" ")
                )
            })?,
        };
        let name = if side == 0 { "a" } else { "b" };
        eprintln!(
            "ab: round {}/{} side {}: {} = {value:.4} ({wall:.2} s)",
            round + 1,
            opts.rounds,
            name.to_uppercase(),
            opts.metric.as_deref().map(|_| "metric").unwrap_or("wall_s")
        );
        out.push(Round {
            round: round + 1,
            side: name,
            value,
            wall_s: wall,
            stats: numbers(&stats),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_order() {
        let s: Vec<usize> = (0..8).map(side_of).collect();
        assert_eq!(s, [0, 1, 1, 0, 0, 1, 1, 0]);
    }

    #[test]
    fn medians_and_diff() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((diff_pct(2.0, 2.5) - 25.0).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_separates_and_overlaps() {
        // clearly apart: the interval excludes 0 and contains the point estimate
        let a = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8];
        let b = [12.0, 12.1, 11.9, 12.2, 12.0, 11.8];
        let (lo, hi) = bootstrap_ci95(&a, &b, 10_000, 1);
        let d = diff_pct(median(&a), median(&b));
        assert!(lo > 0.0 && lo <= d && d <= hi, "{lo} {d} {hi}");
        assert!(verdict(d, lo, hi, Better::Lower, "wall time").starts_with("B is worse"));
        assert!(verdict(d, lo, hi, Better::Higher, "x").starts_with("B is better"));
        // the same distribution: the interval contains 0
        let c = [10.1, 9.9, 10.0, 10.2, 9.8, 10.0];
        let (lo, hi) = bootstrap_ci95(&a, &c, 10_000, 1);
        assert!(lo <= 0.0 && hi >= 0.0, "{lo} {hi}");
        assert!(verdict(0.0, lo, hi, Better::Lower, "x").starts_with("no significant"));
        // deterministic for a seed
        assert_eq!(
            bootstrap_ci95(&a, &b, 1000, 7),
            bootstrap_ci95(&a, &b, 1000, 7)
        );
    }

    #[test]
    fn specs_and_metric() {
        let base = features::preset(features::Preset::patched());
        let w = spec_word("NO_SIS_UTIL,SIS_PROP", base).unwrap();
        assert!(!features::is_on(w, "SIS_UTIL") && features::is_on(w, "SIS_PROP"));
        assert_eq!(
            spec_word("vanilla", base).unwrap(),
            features::preset(features::Preset::vanilla())
        );
        let w = spec_word("vanilla,SIS_UTIL", base).unwrap();
        assert!(features::is_on(w, "SIS_UTIL"));
        assert!(spec_word("BOGUS", base).is_err());
        assert!(spec_word(" , ", base).is_err());
        let re = regex::Regex::new(r"Time: *([0-9.]+)").unwrap();
        assert_eq!(
            extract_metric(&re, "Running...\nTime: 1.234\n"),
            Some(1.234)
        );
        let re = regex::Regex::new(r"ops/s").unwrap();
        assert_eq!(extract_metric(&re, "x"), None);
        assert!(
            parse_rounds("3").is_err() && parse_rounds("0").is_err() && parse_rounds("4").is_ok()
        );
    }
}
