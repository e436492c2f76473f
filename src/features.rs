// SPDX-License-Identifier: GPL-2.0-only
//! The live-switchable policies: kernel sched_feat names, presets, `NO_X` parsing,
//! and the pinned BPF map through which a running scheduler is switched.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::Path;

use crate::bpf_intf;

/// Where the running scheduler pins its feature word (root-only, 0600).
pub const PIN_DIR: &str = "/sys/fs/bpf/scx_sisutil";
pub const PIN_PATH: &str = "/sys/fs/bpf/scx_sisutil/features";

pub struct Feature {
    pub name: &'static str,
    pub bit: u64,
    /// on in `--preset patched` (the kernel's defaults with every patch applied)
    pub patched: bool,
    /// on in `--preset vanilla` (every patch off: the oldest baseline)
    pub vanilla: bool,
    pub help: &'static str,
}

pub const FEATURES: &[Feature] = &[
    Feature {
        name: "SIS_UTIL",
        bit: bpf_intf::sis_feature_FEAT_SIS_UTIL as u64,
        patched: true,
        vanilla: false,
        help: "Chen Yu 2022, SIS_UTIL: bound the LLC scan by nr_idle_scan, from the LLC's util sum",
    },
    Feature {
        name: "SIS_PROP",
        bit: bpf_intf::sis_feature_FEAT_SIS_PROP as u64,
        patched: false,
        vanilla: true,
        help: "6.6 fair.c: legacy scan depth from avg_idle / avg_scan_cost (min 4)",
    },
    Feature {
        name: "SIS_CORE",
        bit: bpf_intf::sis_feature_FEAT_SIS_CORE as u64,
        patched: true,
        vanilla: true,
        help: "fair.c: has_idle_cores hint, idle-core scan and idle SMT sibling of prev",
    },
    Feature {
        name: "WA_IDLE_PREV",
        bit: bpf_intf::sis_feature_FEAT_WA_IDLE_PREV as u64,
        patched: true,
        vanilla: false,
        help: "Julia Lawall 2020, check for idle core: wake_affine_idle returns prev when it is idle",
    },
    Feature {
        name: "WA_WEIGHT",
        bit: bpf_intf::sis_feature_FEAT_WA_WEIGHT as u64,
        patched: true,
        vanilla: true,
        help: "fair.c: wake_affine_weight compares this_cpu's and prev's utilization",
    },
    Feature {
        name: "TTWU_QUEUE_DESCHED",
        bit: bpf_intf::sis_feature_FEAT_TTWU_QUEUE_DESCHED as u64,
        patched: true,
        vanilla: false,
        help: "Mel Gorman 2020, offload wakee activation: the wakee is still on its CPU when woken (seen at sched_waking) and that CPU, in the waker's LLC, has nothing running: placed there without a search",
    },
    Feature {
        name: "NEWIDLE_SKIP_IPI",
        bit: bpf_intf::sis_feature_FEAT_NEWIDLE_SKIP_IPI as u64,
        patched: true,
        vanilla: false,
        help: "K Prateek Nayak 2024, skip newidle_balance() on IPI: an idle CPU woken without being asked to take work does not steal from other LLCs (its own LLC queue is still served; the kernel skips the whole newidle balance)",
    },
    Feature {
        name: "KICK_SKIP_REDUNDANT",
        bit: bpf_intf::sis_feature_FEAT_KICK_SKIP_REDUNDANT as u64,
        patched: true,
        vanilla: false,
        help: "Tim Chen 2024, skip unnecessary ILB flag updates: read shared flags before writing them; kick targets wrap from this_cpu+1",
    },
    Feature {
        name: "SIS_SMALL_LLC",
        bit: bpf_intf::sis_feature_FEAT_SIS_SMALL_LLC as u64,
        patched: false,
        vanilla: false,
        help: "SIS_UTIL review (K Prateek Nayak): for LLCs of <= 16 CPUs, depth * 32 / llc_weight",
    },
    Feature {
        name: "SIS_FIT",
        bit: bpf_intf::sis_feature_FEAT_SIS_FIT as u64,
        patched: false,
        vanilla: false,
        help: "with SIS_UTIL: each LLC's depth is the measured depth_p95 of its utilization (calibrate)",
    },
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// every patch on: SIS_UTIL, WA_IDLE_PREV, TTWU_QUEUE_DESCHED, NEWIDLE_SKIP_IPI, KICK_SKIP_REDUNDANT (+ SIS_CORE, WA_WEIGHT)
    Patched,
    /// the oldest baseline, every patch off: SIS_PROP, SIS_CORE, WA_WEIGHT (a v5.7 kernel)
    Vanilla,
    /// v5.7, before "sched/core: Offload wakee task activation if the wakee is descheduling" (= vanilla)
    TtwuQueueDeschedBase,
    /// v5.7 + TTWU_QUEUE_DESCHED
    TtwuQueueDesched,
    /// v5.9, before "sched/fair: check for idle core": SIS_PROP, TTWU_QUEUE_DESCHED
    WaIdlePrevBase,
    /// v5.9 + WA_IDLE_PREV
    WaIdlePrev,
    /// v5.19-rc1, before "sched/fair: Introduce SIS_UTIL ...": SIS_PROP, TTWU_QUEUE_DESCHED, WA_IDLE_PREV
    SisUtilBase,
    /// v5.19-rc1 + SIS_UTIL, SIS_PROP off (as the merged commit set them)
    SisUtil,
    /// tip of 2024-01 (v6.8-rc), before "sched/fair: Skip newidle_balance() when an idle CPU is woken up to process an IPI": SIS_UTIL, TTWU_QUEUE_DESCHED, WA_IDLE_PREV
    NewidleSkipIpiBase,
    /// v6.8-rc + NEWIDLE_SKIP_IPI
    NewidleSkipIpi,
    /// v6.8, before "sched/balance: Skip unnecessary updates to idle load balancer's flags": SIS_UTIL, TTWU_QUEUE_DESCHED, WA_IDLE_PREV
    KickSkipRedundantBase,
    /// v6.8 + KICK_SKIP_REDUNDANT
    KickSkipRedundant,
}

/// One kernel patch against the kernel it was measured on: `base` is that kernel's
/// feature set, the patched side is `base` + `feature` - `replaces`, so the two differ by
/// that patch alone. Chronology: each base holds the patches merged before it (the
/// newidle IPI patch was posted in 2024-01 but not merged in that form, so the 2024-06
/// kick patch's v6.8 base does not have it).
pub struct SeedPair {
    /// the feature the patch becomes
    pub feature: &'static str,
    /// author, title and date of the patch
    pub patch: &'static str,
    /// the kernel the patch's own numbers were measured on
    pub kernel: &'static str,
    /// features on in that kernel (SIS_CORE and WA_WEIGHT: the kernel's defaults throughout)
    pub base: &'static [&'static str],
    /// features the patch turned off
    pub replaces: &'static [&'static str],
    pub base_preset: Preset,
    pub preset: Preset,
}

pub const SEED_PAIRS: &[SeedPair] = &[
    SeedPair {
        feature: "TTWU_QUEUE_DESCHED",
        patch: "Mel Gorman, \"sched/core: Offload wakee task activation if the wakee is descheduling\" (2020-05, commit 2ebb17717550)",
        kernel: "v5.7-rc6",
        base: &["SIS_PROP", "SIS_CORE", "WA_WEIGHT"],
        replaces: &[],
        base_preset: Preset::TtwuQueueDeschedBase,
        preset: Preset::TtwuQueueDesched,
    },
    SeedPair {
        feature: "WA_IDLE_PREV",
        patch: "Julia Lawall, \"sched/fair: check for idle core\" (2020-10)",
        kernel: "v5.9",
        base: &["SIS_PROP", "SIS_CORE", "WA_WEIGHT", "TTWU_QUEUE_DESCHED"],
        replaces: &[],
        base_preset: Preset::WaIdlePrevBase,
        preset: Preset::WaIdlePrev,
    },
    SeedPair {
        feature: "SIS_UTIL",
        patch: "Chen Yu, \"sched/fair: Introduce SIS_UTIL to search idle CPU based on sum of util_avg\" (2022-06)",
        kernel: "v5.19-rc1",
        base: &["SIS_PROP", "SIS_CORE", "WA_WEIGHT", "TTWU_QUEUE_DESCHED", "WA_IDLE_PREV"],
        replaces: &["SIS_PROP"],
        base_preset: Preset::SisUtilBase,
        preset: Preset::SisUtil,
    },
    SeedPair {
        feature: "NEWIDLE_SKIP_IPI",
        patch: "K Prateek Nayak, \"sched/fair: Skip newidle_balance() when an idle CPU is woken up to process an IPI\" (2024-01)",
        kernel: "tip:sched/core sched-core-2024-01-08 (v6.8-rc; SIS_PROP removed in v6.7)",
        base: &["SIS_UTIL", "SIS_CORE", "WA_WEIGHT", "TTWU_QUEUE_DESCHED", "WA_IDLE_PREV"],
        replaces: &[],
        base_preset: Preset::NewidleSkipIpiBase,
        preset: Preset::NewidleSkipIpi,
    },
    SeedPair {
        feature: "KICK_SKIP_REDUNDANT",
        patch: "Tim Chen / Chen Yu, \"sched/balance: Skip unnecessary updates to idle load balancer's flags\" (2024-06)",
        kernel: "v6.8",
        base: &["SIS_UTIL", "SIS_CORE", "WA_WEIGHT", "TTWU_QUEUE_DESCHED", "WA_IDLE_PREV"],
        replaces: &[],
        base_preset: Preset::KickSkipRedundantBase,
        preset: Preset::KickSkipRedundant,
    },
];

fn word_of(names: &[&str]) -> u64 {
    names.iter().fold(0, |w, n| {
        w | FEATURES.iter().find(|f| f.name == *n).map_or(0, |f| f.bit)
    })
}

impl SeedPair {
    pub fn base_word(&self) -> u64 {
        word_of(self.base)
    }
    pub fn patched_word(&self) -> u64 {
        (self.base_word() | word_of(&[self.feature])) & !word_of(self.replaces)
    }
}

pub fn preset(p: Preset) -> u64 {
    let flag =
        |on: fn(&Feature) -> bool| FEATURES.iter().filter(|f| on(f)).fold(0, |w, f| w | f.bit);
    match p {
        Preset::Patched => flag(|f| f.patched),
        Preset::Vanilla => flag(|f| f.vanilla),
        _ => SEED_PAIRS
            .iter()
            .find_map(|s| {
                if s.base_preset == p {
                    Some(s.base_word())
                } else if s.preset == p {
                    Some(s.patched_word())
                } else {
                    None
                }
            })
            .expect("every preset is vanilla, patched or in SEED_PAIRS"),
    }
}

/// `scx_sisutil presets [--json]`: every preset, its features and what it stands for.
pub fn presets_main(json: bool) -> Result<()> {
    use clap::ValueEnum;
    let name = |p: Preset| {
        p.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    };
    let on = |w: u64| {
        FEATURES
            .iter()
            .filter(|f| w & f.bit != 0)
            .map(|f| f.name)
            .collect::<Vec<_>>()
    };
    let mut rows = vec![];
    for p in Preset::value_variants() {
        let pair = SEED_PAIRS
            .iter()
            .find(|s| s.base_preset == *p || s.preset == *p);
        let meaning = match (p, pair) {
            (Preset::Patched, _) => "every patch on (the default)".to_string(),
            (Preset::Vanilla, _) => "every patch off: the oldest baseline".to_string(),
            (_, Some(s)) if s.base_preset == *p => {
                format!("{}, before {}", s.kernel, s.patch)
            }
            (_, Some(s)) => format!("{} + {} ({})", s.kernel, s.feature, s.patch),
            (_, None) => String::new(),
        };
        let pair_json = pair.map(|s| {
            serde_json::json!({"feature": s.feature, "base": name(s.base_preset),
                               "patched": name(s.preset), "kernel": s.kernel, "patch": s.patch})
        });
        rows.push((name(*p), on(preset(*p)), meaning, pair_json));
    }
    // writeln!, not println!: a closed pipe (`| head`) is an error line, not a panic
    use std::io::Write;
    let mut w = std::io::stdout().lock();
    if json {
        let v: Vec<_> = rows
            .iter()
            .map(|(n, f, m, pair)| serde_json::json!({"name": n, "features": f, "meaning": m, "pair": pair}))
            .collect();
        writeln!(w, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    for (n, f, m, _) in rows {
        writeln!(w, "{n:<25} {m}\n{:<25} on: {}", "", f.join(" "))?;
    }
    Ok(())
}

pub fn valid_names() -> String {
    FEATURES
        .iter()
        .map(|f| f.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Apply `X` (on) / `NO_X` (off) words, comma or space separated, to `word`.
/// All names are checked before anything changes.
pub fn apply<S: AsRef<str>>(mut word: u64, names: &[S]) -> Result<u64> {
    let mut changes = vec![];
    for raw in names.iter().flat_map(|s| s.as_ref().split(',')) {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        // `NO_` is case-insensitive, like the names themselves
        let (on, base) = match name.get(..3) {
            Some(p) if p.eq_ignore_ascii_case("NO_") => (false, &name[3..]),
            _ => (true, name),
        };
        let Some(f) = FEATURES.iter().find(|f| f.name.eq_ignore_ascii_case(base)) else {
            bail!(
                "unknown feature '{name}' (valid: {}; prefix NO_ to turn one off)",
                valid_names()
            );
        };
        changes.push((f.bit, on));
    }
    for (bit, on) in changes {
        if on {
            word |= bit;
        } else {
            word &= !bit;
        }
    }
    Ok(word)
}

#[cfg_attr(not(test), allow(dead_code))]
pub fn is_on(word: u64, name: &str) -> bool {
    FEATURES.iter().any(|f| f.name == name && word & f.bit != 0)
}

/// `NAME on|off` lines, the kernel's features file spelled out.
pub fn describe(word: u64) -> String {
    FEATURES
        .iter()
        .map(|f| {
            format!(
                "{:<20} {:<3}  {}\n",
                f.name,
                if word & f.bit != 0 { "on" } else { "off" },
                f.help
            )
        })
        .collect()
}

/// The kernel's own format: `SIS_UTIL NO_SIS_PROP ...`
pub fn to_words(word: u64) -> Vec<String> {
    FEATURES
        .iter()
        .map(|f| {
            if word & f.bit != 0 {
                f.name.to_string()
            } else {
                format!("NO_{}", f.name)
            }
        })
        .collect()
}

/// The pin directory must be a real directory owned by root and closed to others: a
/// symlink or a directory another user controls could hand us (or a root caller) a map
/// that is not the scheduler's.
pub fn check_pin_dir() -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let md = match std::fs::symlink_metadata(PIN_DIR) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {PIN_DIR}")),
    };
    if md.file_type().is_symlink() {
        bail!("{PIN_DIR} is a symlink: refusing to use it (remove it)");
    }
    if !md.is_dir() {
        bail!("{PIN_DIR} is not a directory: refusing to use it (remove it)");
    }
    if md.uid() != 0 || md.mode() & 0o022 != 0 {
        bail!(
            "{PIN_DIR} is owned by uid {} with mode {:o}: refusing it (it must be root's and not \
             writable by others; remove it)",
            md.uid(),
            md.mode() & 0o7777
        );
    }
    Ok(())
}

/// What `sis_features` is in this build: a map from another build (a different type, key or
/// value size, name) gets one clear line instead of a wrong read.
fn check_foreign(map: &MapHandle) -> Result<()> {
    let ok = map.map_type() == libbpf_rs::MapType::Array
        && map.key_size() == 4
        && map.value_size() == 8
        && map.max_entries() == 1
        && map.name().to_str() == Some("sis_features");
    if !ok {
        bail!(
            "{PIN_PATH} is not this build's feature map (type {:?}, key {} B, value {} B, {} entries, name {:?}; \
             expected array, 4 B, 8 B, 1, \"sis_features\"): is another version of scx_sisutil running?",
            map.map_type(),
            map.key_size(),
            map.value_size(),
            map.max_entries(),
            map.name()
        );
    }
    Ok(())
}

fn open_pinned() -> Result<MapHandle> {
    // The pin sits in a root-only directory: for another user it is not missing but
    // unreadable, and saying "no running scx_sisutil" would be wrong.
    match Path::new(PIN_PATH).try_exists() {
        Ok(true) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("reading or switching features needs root (the feature map is root-only)")
        }
        _ => bail!("no running scx_sisutil found ({PIN_PATH} does not exist): start it with `sudo scx_sisutil`"),
    }
    check_pin_dir()?;
    let map = MapHandle::from_pinned_path(PIN_PATH).with_context(|| {
        if unsafe { libc::geteuid() } != 0 {
            "reading or switching features needs root (the feature map is root-only)".to_string()
        } else {
            format!("cannot open {PIN_PATH}")
        }
    })?;
    check_foreign(&map)?;
    Ok(map)
}

pub fn read_live() -> Result<u64> {
    let map = open_pinned()?;
    let v = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .context("reading the feature word")?
        .context("feature word missing")?;
    let bytes: [u8; 8] = v
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .context("the feature word is not 8 bytes")?;
    Ok(u64::from_ne_bytes(bytes))
}

pub fn write_live(word: u64) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("switching features needs root");
    }
    let map = open_pinned()?;
    map.update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
        .context("writing the feature word")
}

/// A SIGKILLed instance leaves its pin behind: the map then belongs to no scheduler, and
/// reading or writing it would report a state that nothing runs with.
pub fn check_running() -> Result<()> {
    let sysfs = Path::new("/sys/kernel/sched_ext");
    if !sysfs.exists() {
        bail!(
            "no running scx_sisutil found: this kernel has no sched_ext, so {PIN_PATH} is left over \
             (from a previous boot's bpffs? remove it)"
        );
    }
    let state = std::fs::read_to_string(sysfs.join("state")).unwrap_or_default();
    let ops = std::fs::read_to_string(sysfs.join("root/ops")).unwrap_or_default();
    if state.trim() != "enabled" || !ops.starts_with("sisutil_") {
        bail!(
            "no running scx_sisutil found (sched_ext state '{}'{}; {PIN_PATH} is left over from an instance that was killed): start it with `sudo scx_sisutil`",
            state.trim(),
            if ops.trim().is_empty() { String::new() } else { format!(", ops '{}'", ops.trim()) }
        );
    }
    Ok(())
}

/// `scx_sisutil features [NAMES...]`
pub fn features_main(names: &[String]) -> Result<()> {
    // names first: a typo gets its own line even without a running scheduler
    apply(0, names)?;
    let cur = read_live()?;
    check_running()?;
    if names.is_empty() {
        print!("{}", describe(cur));
        return Ok(());
    }
    let new = apply(cur, names)?;
    write_live(new)?;
    for f in FEATURES {
        if (cur ^ new) & f.bit != 0 {
            println!(
                "{} -> {}",
                f.name,
                if new & f.bit != 0 { "on" } else { "off" }
            );
        }
    }
    if cur == new {
        println!("no change");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_patched_and_vanilla() {
        let p = preset(Preset::Patched);
        for n in [
            "SIS_UTIL",
            "SIS_CORE",
            "WA_IDLE_PREV",
            "TTWU_QUEUE_DESCHED",
            "NEWIDLE_SKIP_IPI",
            "KICK_SKIP_REDUNDANT",
        ] {
            assert!(is_on(p, n), "{n} on in patched");
        }
        for n in ["SIS_PROP", "SIS_SMALL_LLC"] {
            assert!(!is_on(p, n), "{n} off in patched");
        }
        let v = preset(Preset::Vanilla);
        assert!(is_on(v, "SIS_PROP") && is_on(v, "SIS_CORE"));
        for n in [
            "SIS_UTIL",
            "WA_IDLE_PREV",
            "TTWU_QUEUE_DESCHED",
            "NEWIDLE_SKIP_IPI",
            "KICK_SKIP_REDUNDANT",
        ] {
            assert!(!is_on(v, n), "{n} off in vanilla");
        }
    }

    #[test]
    fn each_pair_differs_by_its_patch_alone() {
        use clap::ValueEnum;
        let bit = |n: &str| FEATURES.iter().find(|f| f.name == n).unwrap().bit;
        for s in SEED_PAIRS {
            for n in s.base.iter().chain(s.replaces).chain([&s.feature]) {
                assert!(FEATURES.iter().any(|f| f.name == *n), "{n} is no feature");
            }
            let (b, p) = (preset(s.base_preset), preset(s.preset));
            assert_eq!(b, s.base_word());
            assert_eq!(b & bit(s.feature), 0, "{}: base has the patch", s.feature);
            let mut want = bit(s.feature);
            for r in s.replaces {
                want |= bit(r);
            }
            assert_eq!(
                b ^ p,
                want,
                "{}: the pair differs by more than the patch",
                s.feature
            );
            // the kernel defaults are on on both sides, SIS_SMALL_LLC (a thread's idea) off
            assert!(is_on(b, "SIS_CORE") && is_on(b, "WA_WEIGHT") && !is_on(b, "SIS_SMALL_LLC"));
            // exactly one scan depth on each side
            for w in [b, p] {
                assert!(
                    is_on(w, "SIS_PROP") != is_on(w, "SIS_UTIL"),
                    "{}: depth",
                    s.feature
                );
            }
        }
        // chronology: each base holds every patch merged before it
        let order = ["TTWU_QUEUE_DESCHED", "WA_IDLE_PREV", "SIS_UTIL"];
        for (i, s) in SEED_PAIRS.iter().enumerate().take(3) {
            assert_eq!(s.feature, order[i]);
            for earlier in &order[..i] {
                assert!(
                    is_on(s.base_word(), earlier),
                    "{} base lacks {earlier}",
                    s.feature
                );
            }
        }
        // SIS_UTIL's own numbers: v5.19-rc1 already had the 2020 patches
        assert_eq!(
            preset(Preset::SisUtilBase) ^ preset(Preset::SisUtil),
            bit("SIS_UTIL") | bit("SIS_PROP")
        );
        assert_eq!(
            preset(Preset::TtwuQueueDeschedBase),
            preset(Preset::Vanilla)
        );
        // patched = the newest base + the two 2024 patches
        assert_eq!(
            preset(Preset::Patched),
            preset(Preset::KickSkipRedundantBase)
                | bit("NEWIDLE_SKIP_IPI")
                | bit("KICK_SKIP_REDUNDANT")
        );
        // every preset resolves, and its CLI name is the kebab-case of the pair
        for p in Preset::value_variants() {
            let _ = preset(*p);
        }
        let name = |p: Preset| p.to_possible_value().unwrap().get_name().to_string();
        assert_eq!(name(Preset::SisUtilBase), "sis-util-base");
        assert_eq!(name(Preset::KickSkipRedundant), "kick-skip-redundant");
    }

    #[test]
    fn apply_on_off_and_errors() {
        let w = apply(0, &["SIS_PROP,NO_SIS_UTIL", "sis_core"]).unwrap();
        assert!(is_on(w, "SIS_PROP") && is_on(w, "SIS_CORE") && !is_on(w, "SIS_UTIL"));
        let w2 = apply(w, &["NO_SIS_PROP"]).unwrap();
        assert!(!is_on(w2, "SIS_PROP"));
        let w3 = apply(w, &["no_sis_prop", "No_Sis_Core"]).unwrap();
        assert!(!is_on(w3, "SIS_PROP") && !is_on(w3, "SIS_CORE"));
        assert!(apply(0, &["NO_"]).is_err());
        let e = apply(w, &["SIS_PROP", "BOGUS"]).unwrap_err().to_string();
        assert!(
            e.contains("unknown feature 'BOGUS'") && e.contains("SIS_UTIL"),
            "{e}"
        );
        assert_eq!(to_words(preset(Preset::Patched)).len(), FEATURES.len());
    }

    #[test]
    fn bits_are_distinct_and_cover_all() {
        let all = FEATURES.iter().fold(0u64, |w, f| {
            assert_eq!(w & f.bit, 0, "{} overlaps", f.name);
            w | f.bit
        });
        assert_eq!(all, bpf_intf::sis_feature_FEAT_ALL as u64);
    }
}
