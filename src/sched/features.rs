// SPDX-License-Identifier: GPL-2.0-only
//! The live-switchable policies: kernel sched_feat names, presets, `NO_X` parsing,
//! and the pinned BPF map through which a running scheduler is switched.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::Path;

use crate::bpf_intf;

/// The running scheduler's bpffs directory (root-only, 0700): every pin is a file in it.
macro_rules! pin_dir {
    () => {
        "/sys/fs/bpf/scx_sisutil"
    };
}
pub(crate) use pin_dir;
pub const PIN_DIR: &str = pin_dir!();
/// Where the running scheduler pins its feature word (0600).
pub const PIN_PATH: &str = concat!(pin_dir!(), "/features");

/// A feature, as intf.h's `enum sis_feature` defines it.
pub struct Feature {
    /// the kernel's sched_feat spelling
    pub name: &'static str,
    pub bit: u64,
    pub help: &'static str,
}

/// A preset, as intf.h's `enum sis_preset` defines it.
pub struct PresetDef {
    /// the `--preset` value
    pub name: &'static str,
    pub word: u64,
    /// intf.h's description: for an `X-base` preset, "KERNEL | PATCH"
    pub desc: &'static str,
}

/// A preset: an index into PRESETS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset(pub usize);

// FEATURES, PRESETS, PRESET_VALUES
include!(concat!(env!("OUT_DIR"), "/sis_tables.rs"));

impl Preset {
    pub fn def(self) -> &'static PresetDef {
        &PRESETS[self.0]
    }
    pub fn name(self) -> &'static str {
        self.def().name
    }
    /// The preset of this `--preset` name (case-insensitive).
    pub fn by_name(name: &str) -> Option<Preset> {
        PRESETS
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name))
            .map(Preset)
    }
    /// `--preset patched`: every patch on, the default.
    pub fn patched() -> Preset {
        Self::by_name("patched").expect("intf.h defines PRESET_PATCHED")
    }
    /// `--preset vanilla`: every patch off, the oldest baseline.
    pub fn vanilla() -> Preset {
        Self::by_name("vanilla").expect("intf.h defines PRESET_VANILLA")
    }
    /// What the preset stands for, one line.
    pub fn meaning(self) -> String {
        match PatchPair::of(self) {
            Some(s) if s.base == self => format!("{}, before {}", s.kernel, s.patch),
            Some(s) => format!("{} + {} ({})", s.kernel, s.feature.name, s.patch),
            None => self.def().desc.to_string(),
        }
    }
}

impl clap::ValueEnum for Preset {
    fn value_variants<'a>() -> &'a [Self] {
        PRESET_VALUES
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let on = names_on(self.def().word).join(", ");
        let help = match PatchPair::of(*self) {
            Some(s) if s.base == *self => {
                format!("{}, before {}; on: {on}", s.kernel, s.feature.name)
            }
            Some(s) => format!("{} + {}", s.base.name(), s.feature.name),
            None => format!("{}; on: {on}", self.def().desc),
        };
        Some(clap::builder::PossibleValue::new(self.name()).help(help))
    }
}

/// One kernel patch against the kernel it was measured on (intf.h's PRESET_X_BASE and
/// PRESET_X): `base` is that kernel's feature set, `patched` is `base` + the feature -
/// what the patch turned off, so the two differ by that patch alone.
pub struct PatchPair {
    /// the feature the patch becomes
    pub feature: &'static Feature,
    /// author, title and date of the patch
    pub patch: &'static str,
    /// the kernel the patch's own numbers were measured on
    pub kernel: &'static str,
    pub base: Preset,
    pub patched: Preset,
}

impl PatchPair {
    /// Every pair, in intf.h's order: each `X-base` preset with preset `X` and feature X.
    pub fn all() -> Vec<PatchPair> {
        (0..PRESETS.len())
            .filter_map(|i| {
                let base = Preset(i);
                let x = base.name().strip_suffix("-base")?;
                let patched = Preset::by_name(x).expect("intf.h: PRESET_X_BASE without PRESET_X");
                let fname = x.to_ascii_uppercase().replace('-', "_");
                let feature = FEATURES
                    .iter()
                    .find(|f| f.name == fname)
                    .expect("intf.h: PRESET_X_BASE without FEAT_X");
                let (kernel, patch) = base
                    .def()
                    .desc
                    .split_once(" | ")
                    .expect("intf.h: a PRESET_X_BASE's description is \"KERNEL | PATCH\"");
                Some(PatchPair {
                    feature,
                    patch,
                    kernel,
                    base,
                    patched,
                })
            })
            .collect()
    }
    /// The pair a preset belongs to.
    pub fn of(p: Preset) -> Option<PatchPair> {
        Self::all()
            .into_iter()
            .find(|s| s.base == p || s.patched == p)
    }
    /// The features the patch turned off.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn replaces(&self) -> u64 {
        preset(self.base) & !preset(self.patched)
    }
}

pub fn preset(p: Preset) -> u64 {
    p.def().word
}

/// The names of the features on in `word`.
pub fn names_on(word: u64) -> Vec<&'static str> {
    FEATURES
        .iter()
        .filter(|f| word & f.bit != 0)
        .map(|f| f.name)
        .collect()
}

/// `scx_sisutil presets [--json]`: every preset, its features and what it stands for.
pub fn presets_main(json: bool) -> Result<()> {
    let mut rows = vec![];
    for p in PRESET_VALUES {
        let pair_json = PatchPair::of(*p).map(|s| {
            serde_json::json!({"feature": s.feature.name, "base": s.base.name(),
                               "patched": s.patched.name(), "kernel": s.kernel, "patch": s.patch})
        });
        rows.push((p.name(), names_on(preset(*p)), p.meaning(), pair_json));
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
                "unknown feature '{}' (valid: {}; prefix NO_ to turn one off)",
                crate::sched::text::printable(name, 80),
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

/// `features --help`'s closing note, and the listing's when a person reads it (stdout a
/// terminal): the mode that is not a feature. Piped, the listing stays one
/// `NAME on|off help` line per feature (scripts read it).
pub const LOAD_TIME_NOTE: &str = "\
load-time, not a feature (cannot switch live): --allow-queued-wakeup lets the kernel's
TTWU_QUEUE wake list run for this scheduler's tasks (SCX_OPS_ALLOW_QUEUED_WAKEUP, 6.15+):
TTWU_QUEUE_DESCHED's mechanism, plus the cross-LLC and idle-CPU wake list; whether the
running scheduler has it: `scx_sisutil monitor` (allow_queued_wakeup)
";

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

/// The kernel's own format: `X NO_Y ...`, every feature
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
    open_dir_checked(Path::new(PIN_DIR)).map(|_| ())
}

/// Make the pin directory (if missing) and close it to others (0700) through the fd of the
/// directory checked, so that nothing swapped in between is followed. Returns that fd.
pub fn prepare_pin_dir() -> Result<std::fs::File> {
    prepare_dir_at(Path::new(PIN_DIR))
}

fn prepare_dir_at(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "creating {} (is bpffs mounted on /sys/fs/bpf?)",
                    dir.display()
                )
            })
        }
    }
    let f = open_dir_checked(dir)?
        .with_context(|| format!("{} disappeared after it was made", dir.display()))?;
    // fchmod(2) on the directory opened: not a path that could be swapped
    f.set_permissions(std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("chmod 0700 {}", dir.display()))?;
    Ok(f)
}

/// Open `dir` itself (O_NOFOLLOW | O_DIRECTORY: a symlink there is refused, not followed)
/// and check what is open (fstat): root's, not writable by group or others.
fn open_dir_checked(dir: &Path) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let d = dir.display();
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW | O_DIRECTORY on a symlink: ENOTDIR (or ELOOP); refused either way,
        // lstat only names it
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
            if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                bail!("{d} is a symlink: refusing to use it (remove it)")
            }
            bail!("{d} is not a directory: refusing to use it (remove it)")
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("{d} is root-only: reading or switching features needs root")
        }
        Err(e) => return Err(e).with_context(|| format!("opening {d}")),
    };
    let md = f.metadata().with_context(|| format!("fstat {d}"))?;
    if md.uid() != 0 || md.mode() & 0o022 != 0 {
        bail!(
            "{d} is owned by uid {} with mode {:o}: refusing it (it must be root's and not \
             writable by others; remove it)",
            md.uid(),
            md.mode() & 0o7777
        );
    }
    Ok(Some(f))
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
    let map = open_pinned_at(Path::new(PIN_DIR))?;
    check_foreign(&map)?;
    Ok(map)
}

/// The feature map pinned in `dir`: the directory is checked first (a symlinked or foreign
/// one is named as such, not reported as a missing map), then the map is opened through the
/// checked directory's fd.
fn open_pinned_at(dir: &Path) -> Result<MapHandle> {
    let pin = dir.join("features");
    let Some(fd) = open_dir_checked(dir).map_err(|e| {
        // the pin sits in a root-only directory: for another user it is not missing but
        // unreadable, and saying "no running scx_sisutil" would be wrong
        if unsafe { libc::geteuid() } != 0 {
            anyhow::anyhow!(
                "reading or switching features needs root (the feature map is root-only)"
            )
        } else {
            e
        }
    })?
    else {
        bail!(
            "no running scx_sisutil found ({} does not exist): start it with `sudo scx_sisutil`",
            pin.display()
        );
    };
    use std::os::fd::AsRawFd;
    let via_fd = format!("/proc/self/fd/{}/features", fd.as_raw_fd());
    if !Path::new(&via_fd).exists() {
        bail!(
            "no running scx_sisutil found ({} does not exist): start it with `sudo scx_sisutil`",
            pin.display()
        );
    }
    MapHandle::from_pinned_path(&via_fd).with_context(|| {
        if unsafe { libc::geteuid() } != 0 {
            "reading or switching features needs root (the feature map is root-only)".to_string()
        } else {
            format!("cannot open {}", pin.display())
        }
    })
}

pub fn read_live() -> Result<u64> {
    read_word(&open_pinned()?)
}

pub fn write_live(word: u64) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("switching features needs root");
    }
    let map = open_pinned()?;
    map.update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
        .context("writing the feature word")
}

/// The record `ab` keeps in the pin directory while it switches features (a pinned BPF
/// array, 0600 like every pin: bpffs holds no regular file): the feature word in force
/// before `ab` switched any, and the id of the feature map it switched. `ab` makes it
/// before its first switch and removes it after restoring the word; one that is there when
/// no `ab` runs was left by an `ab` that was killed (SIGKILL: no handler restored the
/// word). `ab` and `features` name it, and `features --restore` writes its word back.
/// A record whose map id is not the running scheduler's feature map predates a restart
/// (which reset the features): it is stale, and removed.
pub const AB_RECORD: &str = "ab_saved";
const AB_RECORD_MAP: &str = "sis_ab_saved";

/// What a record says (see [`AB_RECORD`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbRecord {
    pub word: u64,
    pub map_id: u32,
}

/// The directory fd's path for a name in it: pins are made, opened and removed through the
/// checked directory, not its path.
fn via_fd(fd: &std::fs::File, name: &str) -> String {
    use std::os::fd::AsRawFd;
    format!("/proc/self/fd/{}/{name}", fd.as_raw_fd())
}

fn checked_dir(dir: &Path) -> Result<std::fs::File> {
    open_dir_checked(dir)?.with_context(|| {
        format!(
            "no running scx_sisutil found ({} does not exist): start it with `sudo scx_sisutil`",
            dir.display()
        )
    })
}

/// The feature map in `dir`, checked, and its id.
fn feature_map_at(dir: &Path) -> Result<(MapHandle, u32)> {
    let map = open_pinned_at(dir)?;
    check_foreign(&map)?;
    let id = map.info().context("reading the feature map's id")?.info.id;
    Ok((map, id))
}

/// The record in `dir`, if any, whatever its map id.
fn read_record_raw(fd: &std::fs::File, dir: &Path) -> Result<Option<AbRecord>> {
    let path = via_fd(fd, AB_RECORD);
    if !Path::new(&path).exists() {
        return Ok(None);
    }
    let shown = dir.join(AB_RECORD);
    let map = MapHandle::from_pinned_path(&path)
        .with_context(|| format!("cannot open {}", shown.display()))?;
    if map.map_type() != libbpf_rs::MapType::Array
        || map.key_size() != 4
        || map.value_size() != 16
        || map.name().to_str() != Some(AB_RECORD_MAP)
    {
        bail!(
            "{} is not this build's record of a killed ab: remove it",
            shown.display()
        );
    }
    let v = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading {}", shown.display()))?
        .with_context(|| format!("{} is empty", shown.display()))?;
    let word = u64::from_ne_bytes(v[..8].try_into().expect("16-byte value"));
    let id = u64::from_ne_bytes(v[8..16].try_into().expect("16-byte value"));
    Ok(Some(AbRecord {
        word,
        map_id: id as u32,
    }))
}

fn remove_record(fd: &std::fs::File, dir: &Path) -> Result<()> {
    match std::fs::remove_file(via_fd(fd, AB_RECORD)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.join(AB_RECORD).display())),
    }
}

/// The record of a killed `ab` for the scheduler running with the feature map in `dir`;
/// a stale one (another map's) is removed.
pub fn left_by_killed_ab_at(dir: &Path) -> Result<Option<AbRecord>> {
    let fd = checked_dir(dir)?;
    let Some(r) = read_record_raw(&fd, dir)? else {
        return Ok(None);
    };
    let (_, id) = feature_map_at(dir)?;
    if r.map_id != id {
        remove_record(&fd, dir)?;
        return Ok(None);
    }
    Ok(Some(r))
}

/// The line that names what a killed `ab` left.
pub fn killed_ab_line(r: &AbRecord, now: u64) -> String {
    format!(
        "an `ab` that was killed left the features switched: it started from {} (now {}); `scx_sisutil features --restore` puts them back",
        describe_short(r.word),
        describe_short(now)
    )
}

/// The features a word turns on, space separated ("none" for 0).
fn describe_short(word: u64) -> String {
    let on = names_on(word);
    if on.is_empty() {
        "none".into()
    } else {
        on.join(" ")
    }
}

/// `ab`'s start: refuse while a killed `ab`'s record stands (its word would be lost), then
/// record `orig`, the word about to be switched away from.
pub fn ab_record_at(dir: &Path, orig: u64) -> Result<()> {
    if let Some(r) = left_by_killed_ab_at(dir)? {
        bail!(killed_ab_line(&r, orig));
    }
    let fd = checked_dir(dir)?;
    let (_, id) = feature_map_at(dir)?;
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    let mut map = MapHandle::create(
        libbpf_rs::MapType::Array,
        Some(AB_RECORD_MAP),
        4,
        16,
        1,
        &opts,
    )
    .context("creating the record of the features before ab")?;
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&orig.to_ne_bytes());
    v[8..].copy_from_slice(&(id as u64).to_ne_bytes());
    map.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
        .context("writing the record of the features before ab")?;
    map.pin(via_fd(&fd, AB_RECORD))
        .with_context(|| format!("pinning {}", dir.join(AB_RECORD).display()))
}

/// `ab`'s end, once the word is restored: the record goes.
pub fn ab_unrecord_at(dir: &Path) -> Result<()> {
    let fd = checked_dir(dir)?;
    remove_record(&fd, dir)
}

/// `features --restore`: the word a killed `ab` started from, written back, and its record
/// removed. Returns (the word before, the word restored), or None when there is no record.
pub fn restore_at(dir: &Path) -> Result<Option<(u64, u64)>> {
    let Some(r) = left_by_killed_ab_at(dir)? else {
        return Ok(None);
    };
    let (map, _) = feature_map_at(dir)?;
    let cur = read_word(&map)?;
    map.update(&0u32.to_ne_bytes(), &r.word.to_ne_bytes(), MapFlags::ANY)
        .context("writing the feature word")?;
    ab_unrecord_at(dir)?;
    Ok(Some((cur, r.word)))
}

fn read_word(map: &MapHandle) -> Result<u64> {
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

/// The layout of what this build shares with a running instance, as 8 hex digits of an
/// FNV-1a hash: every feature's name and bit, and the sizes of the pinned calibration
/// record and the counters. The scheduler puts it in its ops name
/// (`sisutil_fXXXXXXXX_VERSION_TARGET`), so that `features`, `calibrate` and `ab` refuse a
/// running scx_sisutil whose bits or records mean something else.
pub fn layout_tag() -> String {
    let sizes = [
        std::mem::size_of::<bpf_intf::calib_rec>() as u64,
        bpf_intf::sis_stat_STAT_NR as u64,
    ];
    let bytes = FEATURES
        .iter()
        .flat_map(|f| f.name.bytes().chain(f.bit.to_le_bytes()))
        .chain(sizes.iter().flat_map(|n| n.to_le_bytes()));
    let h = bytes.fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    format!("f{h:08x}")
}

/// The ops name this build attaches with: sisutil_, the layout tag, then scx_utils' version
/// suffix (as scx_ops_open! makes it).
pub fn ops_name() -> String {
    format!(
        "sisutil_{}{}",
        layout_tag(),
        scx_utils::build_id::ops_version_suffix(env!("CARGO_PKG_VERSION"))
    )
}

/// Is the running ops (root/ops) this build's feature layout? None: it is, or it is not
/// scx_sisutil at all; Some(line): a scx_sisutil with another layout.
fn other_layout(ops: &str) -> Option<String> {
    let ops = ops.trim();
    let ours = format!("sisutil_{}_", layout_tag());
    (ops.starts_with("sisutil_") && !ops.starts_with(&ours)).then(|| {
        format!(
            "the running scheduler '{ops}' is a scx_sisutil of another build (this one is '{}'): its \
             feature bits may mean other features; use that build's scx_sisutil",
            ops_name()
        )
    })
}

/// A SIGKILLed instance leaves its pin behind: the map then belongs to no scheduler, and
/// reading or writing it would report a state that nothing runs with.
pub fn check_running() -> Result<()> {
    let sysfs = Path::new("/sys/kernel/sched_ext");
    // a pin that is there belongs to no scheduler: say so; one that is not is not "left over"
    let left = Path::new(PIN_PATH).exists();
    if !sysfs.exists() {
        bail!(
            "no running scx_sisutil found: this kernel has no sched_ext{}",
            if left {
                format!(", so {PIN_PATH} is left over (from a previous boot's bpffs? remove it)")
            } else {
                String::new()
            }
        );
    }
    let state = std::fs::read_to_string(sysfs.join("state")).unwrap_or_default();
    let ops = std::fs::read_to_string(sysfs.join("root/ops")).unwrap_or_default();
    if state.trim() != "enabled" || !ops.starts_with("sisutil_") {
        bail!(
            "no running scx_sisutil found (sched_ext state '{}'{}{}): start it with `sudo scx_sisutil`",
            state.trim(),
            if ops.trim().is_empty() { String::new() } else { format!(", ops '{}'", ops.trim()) },
            if left { format!("; {PIN_PATH} is left over from an instance that was killed") } else { String::new() }
        );
    }
    if let Some(line) = other_layout(&ops) {
        bail!(line);
    }
    Ok(())
}

/// `features --json`: every feature (name, bit, help, the presets it is on in), without a
/// running scheduler; with one (and root), also its state there ("on").
fn features_json() -> Result<()> {
    let live = read_live().ok().filter(|_| check_running().is_ok());
    let v: Vec<_> = FEATURES
        .iter()
        .map(|f| {
            let mut o = serde_json::json!({
                "name": f.name,
                "bit": f.bit,
                "help": f.help,
                "presets": PRESET_VALUES
                    .iter()
                    .filter(|p| preset(**p) & f.bit != 0)
                    .map(|p| p.name())
                    .collect::<Vec<_>>(),
            });
            if let Some(w) = live {
                o["on"] = serde_json::json!(w & f.bit != 0);
            }
            o
        })
        .collect();
    use std::io::Write;
    writeln!(
        std::io::stdout().lock(),
        "{}",
        serde_json::to_string_pretty(&v)?
    )?;
    Ok(())
}

/// `scx_sisutil features [--json] [--preset P] [NAMES...]`
pub fn features_main(
    names: &[String],
    preset: Option<Preset>,
    json: bool,
    restore: bool,
) -> Result<()> {
    // names first: a typo gets its own line even without a running scheduler
    apply(0, names)?;
    if json {
        if !names.is_empty() || preset.is_some() {
            bail!("--json lists the features; it does not switch them");
        }
        return features_json();
    }
    if restore && (!names.is_empty() || preset.is_some()) {
        bail!("--restore puts back what a killed `ab` switched; it takes no features or preset");
    }
    let cur = read_live()?;
    check_running()?;
    let dir = Path::new(PIN_DIR);
    if restore {
        match restore_at(dir)? {
            None => println!("nothing to restore: no record of an `ab` that was killed"),
            Some((cur, new)) => print_changes(cur, new),
        }
        return Ok(());
    }
    if let Some(r) = left_by_killed_ab_at(dir)? {
        eprintln!("note: {}", killed_ab_line(&r, cur));
    }
    if names.is_empty() && preset.is_none() {
        print!("{}", describe(cur));
        // People reading the list see the load-time mode beside it; scripts, reading it
        // through a pipe as one line per feature, do not get the note.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            print!("\n{LOAD_TIME_NOTE}");
        }
        return Ok(());
    }
    let new = apply(preset.map_or(cur, self::preset), names)?;
    write_live(new)?;
    print_changes(cur, new);
    Ok(())
}

/// `X -> on|off` for every feature `new` switches against `cur` ("no change" when none).
fn print_changes(cur: u64, new: u64) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bpffs of its own (the host's /sys/fs/bpf is left alone), unmounted on drop.
    struct Bpffs(tempfile::TempDir);

    impl Bpffs {
        fn new() -> Bpffs {
            let d = tempfile::Builder::new()
                .prefix("bpffs-test-")
                .tempdir_in("/tmp")
                .unwrap();
            let c = std::ffi::CString::new(d.path().to_str().unwrap()).unwrap();
            // SAFETY: mount(2) of a bpf filesystem on our fresh directory (root)
            let rc = unsafe {
                libc::mount(
                    c"bpf".as_ptr(),
                    c.as_ptr(),
                    c"bpf".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "mount -t bpf: {}", std::io::Error::last_os_error());
            Bpffs(d)
        }
    }

    impl Drop for Bpffs {
        fn drop(&mut self) {
            let c = std::ffi::CString::new(self.0.path().to_str().unwrap()).unwrap();
            // SAFETY: umount2(2) of the mount made in new()
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }

    /// The scheduler's pin directory in `fs`, with a stand-in feature map (this build's
    /// shape and name) holding `word`; the map is returned (it stays alive pinned anyway).
    fn stand_in(fs: &Bpffs, word: u64) -> (std::path::PathBuf, MapHandle) {
        use std::os::unix::fs::PermissionsExt;
        let dir = fs.0.path().join("scx_sisutil");
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let _ = std::fs::remove_file(dir.join("features"));
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let mut m = MapHandle::create(
            libbpf_rs::MapType::Array,
            Some("sis_features"),
            4,
            8,
            1,
            &opts,
        )
        .unwrap();
        m.update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
            .unwrap();
        m.pin(dir.join("features")).unwrap();
        (dir, m)
    }

    fn word_at(dir: &Path) -> u64 {
        read_word(&open_pinned_at(dir).unwrap()).unwrap()
    }

    /// A killed `ab`'s record, on the host with a pinned stand-in of the feature map (what
    /// only a VM proves: the scheduler's own map, and `ab` itself killed by SIGKILL there).
    /// ab records the word it started from (0600) before switching; killed (no unrecord),
    /// the record names what it left, the next ab is refused in one line, and restore puts
    /// the word back and removes the record. A record made for another feature map (the
    /// scheduler restarted since) is stale: not named, removed.
    #[test]
    fn killed_ab_record_is_named_and_restored() {
        use std::os::unix::fs::MetadataExt;
        let fs = Bpffs::new();
        let (a, b) = (preset(Preset::vanilla()), preset(Preset::patched()));
        assert_ne!(a, b);
        let (dir, _m) = stand_in(&fs, a);
        assert_eq!(left_by_killed_ab_at(&dir).unwrap(), None);
        assert_eq!(restore_at(&dir).unwrap(), None);
        // ab starts: records a, switches to b ... and is killed
        ab_record_at(&dir, a).unwrap();
        let md = std::fs::metadata(dir.join(AB_RECORD)).unwrap();
        assert_eq!(md.mode() & 0o777, 0o600, "{:o}", md.mode());
        write_word_at(&dir, b);
        let r = left_by_killed_ab_at(&dir)
            .unwrap()
            .expect("the killed ab's record");
        assert_eq!(r.word, a);
        let e = format!("{:#}", ab_record_at(&dir, b).unwrap_err());
        assert!(e.contains("an `ab` that was killed left"), "{e}");
        assert!(e.contains("features --restore"), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert_eq!(restore_at(&dir).unwrap(), Some((b, a)));
        assert_eq!(word_at(&dir), a);
        assert!(!dir.join(AB_RECORD).exists());
        assert_eq!(left_by_killed_ab_at(&dir).unwrap(), None);
        // an ab that ends normally removes its record
        ab_record_at(&dir, a).unwrap();
        ab_unrecord_at(&dir).unwrap();
        assert!(!dir.join(AB_RECORD).exists());
        // stale: the scheduler restarted (a new feature map) after the ab was killed
        ab_record_at(&dir, a).unwrap();
        let (_, _m2) = stand_in(&fs, b);
        assert_eq!(left_by_killed_ab_at(&dir).unwrap(), None);
        assert!(!dir.join(AB_RECORD).exists());
        assert_eq!(restore_at(&dir).unwrap(), None);
        assert_eq!(word_at(&dir), b);
    }

    fn write_word_at(dir: &Path, word: u64) {
        open_pinned_at(dir)
            .unwrap()
            .update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
            .unwrap();
    }

    /// The pin directory is checked through its fd: a symlink (even to a good directory),
    /// a file, a directory of another user or one others can write are each named; the
    /// feature map is not called missing when its directory is the problem.
    #[test]
    fn pin_dir_symlinked_or_foreign_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let p = |n: &str| t.path().join(n);
        std::fs::create_dir(p("good")).unwrap();
        std::fs::set_permissions(p("good"), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(open_dir_checked(&p("good")).unwrap().is_some());
        assert!(open_dir_checked(&p("missing")).unwrap().is_none());
        std::os::unix::fs::symlink(p("good"), p("link")).unwrap();
        std::fs::write(p("file"), "").unwrap();
        std::fs::create_dir(p("foreign")).unwrap();
        std::os::unix::fs::chown(p("foreign"), Some(65534), Some(65534)).unwrap();
        std::fs::create_dir(p("open")).unwrap();
        std::fs::set_permissions(p("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
        for (dir, want) in [
            ("link", "is a symlink"),
            ("file", "is not a directory"),
            ("foreign", "owned by uid 65534"),
            ("open", "mode 777"),
        ] {
            let e = format!("{:#}", open_dir_checked(&p(dir)).unwrap_err());
            assert!(e.contains(want), "{dir}: {e}");
            // features' own path: the directory is named, not "does not exist"
            let e = format!("{:#}", open_pinned_at(&p(dir)).unwrap_err());
            assert!(
                e.contains(want) && !e.contains("does not exist"),
                "{dir}: {e}"
            );
            // and the loader's: nothing made, nothing chmodded through it
            assert!(prepare_dir_at(&p(dir)).is_err(), "{dir}");
        }
        let mode = |n: &str| {
            std::fs::symlink_metadata(p(n))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("open"), 0o777);
        let e = format!("{:#}", open_pinned_at(&p("good")).unwrap_err());
        assert!(e.contains("good/features does not exist"), "{e}");
        // the loader makes a missing one and closes an existing 0755 one through its fd
        prepare_dir_at(&p("new")).unwrap();
        assert_eq!(mode("new"), 0o700);
        std::fs::create_dir(p("wide")).unwrap();
        std::fs::set_permissions(p("wide"), std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_dir_at(&p("wide")).unwrap();
        assert_eq!(mode("wide"), 0o700);
    }

    #[test]
    fn presets_patched_and_vanilla() {
        let p = preset(Preset::patched());
        for b in [
            bit::SIS_UTIL,
            bit::SIS_CORE,
            bit::WA_IDLE_PREV,
            bit::TTWU_QUEUE_DESCHED,
            bit::NEWIDLE_SKIP_IPI,
            bit::KICK_SKIP_REDUNDANT,
        ] {
            assert_ne!(p & b, 0, "{:?} on in patched", names_on(b));
        }
        for b in [bit::SIS_PROP, bit::SIS_SMALL_LLC] {
            assert_eq!(p & b, 0, "{:?} off in patched", names_on(b));
        }
        // a review suggestion the merged patch does not contain, the rescue and the shards no
        // kernel has: in no preset
        for d in PRESETS {
            for b in [bit::KICK_WRAP_NEXT, bit::WAKE_RESCUE, bit::LLC_SHARDS] {
                assert_eq!(d.word & b, 0, "{:?} on in {}", names_on(b), d.name);
            }
        }
        let v = preset(Preset::vanilla());
        assert!((v & bit::SIS_PROP != 0) && (v & bit::SIS_CORE != 0));
        for b in [
            bit::SIS_UTIL,
            bit::WA_IDLE_PREV,
            bit::TTWU_QUEUE_DESCHED,
            bit::NEWIDLE_SKIP_IPI,
            bit::KICK_SKIP_REDUNDANT,
        ] {
            assert_eq!(v & b, 0, "{:?} off in vanilla", names_on(b));
        }
    }

    fn named(n: &str) -> Preset {
        Preset::by_name(n).unwrap_or_else(|| panic!("no preset {n}"))
    }

    #[test]
    fn each_pair_differs_by_its_patch_alone() {
        let pairs = PatchPair::all();
        assert_eq!(pairs.len(), 5, "one pair per kernel patch");
        // every preset is patched, vanilla, one side of a pair, or one of the two full-scan
        // references (a preset with its depth removed)
        assert_eq!(PRESETS.len(), 2 + 2 * pairs.len() + 2);
        let unb = preset(named("unbounded"));
        assert_eq!(unb, preset(named("vanilla")) & !bit::SIS_PROP);
        let pu = preset(named("patched-unbounded"));
        assert_eq!(pu, preset(named("patched")) & !bit::SIS_UTIL);
        for s in &pairs {
            let (b, p) = (preset(s.base), preset(s.patched));
            assert_eq!(
                b & s.feature.bit,
                0,
                "{}: base has the patch",
                s.feature.name
            );
            assert_eq!(
                b ^ p,
                s.feature.bit | s.replaces(),
                "{}: the pair differs by more than the patch",
                s.feature.name
            );
            assert_eq!(p & s.replaces(), 0);
            // the kernel defaults are on on both sides, SIS_SMALL_LLC (a thread's idea) off
            assert!(
                (b & bit::SIS_CORE != 0)
                    && (b & bit::WA_WEIGHT != 0)
                    && (b & bit::SIS_SMALL_LLC == 0)
            );
            // exactly one scan depth on each side
            for w in [b, p] {
                assert!(
                    (w & bit::SIS_PROP != 0) != (w & bit::SIS_UTIL != 0),
                    "{}: depth",
                    s.feature.name
                );
            }
            assert!(
                !s.kernel.is_empty() && s.patch.contains('"'),
                "{}",
                s.base.name()
            );
        }
        // chronology: each base holds every patch merged before it
        let order = [bit::TTWU_QUEUE_DESCHED, bit::WA_IDLE_PREV, bit::SIS_UTIL];
        for (i, s) in pairs.iter().enumerate().take(3) {
            assert_eq!(s.feature.bit, order[i]);
            for &earlier in &order[..i] {
                assert_ne!(
                    preset(s.base) & earlier,
                    0,
                    "{} base lacks {:?}",
                    s.feature.name,
                    names_on(earlier)
                );
            }
        }
        // SIS_UTIL's own numbers: v5.19-rc1 already had the 2020 patches
        assert_eq!(
            preset(named("sis-util-base")) ^ preset(named("sis-util")),
            bit::SIS_UTIL | bit::SIS_PROP
        );
        assert_eq!(
            preset(named("ttwu-queue-desched-base")),
            preset(Preset::vanilla())
        );
        // patched = the newest base + the two 2024 patches
        assert_eq!(
            preset(Preset::patched()),
            preset(named("kick-skip-redundant-base"))
                | bit::NEWIDLE_SKIP_IPI
                | bit::KICK_SKIP_REDUNDANT
        );
        // the CLI names, in intf.h's order, patched (the default) first
        let names: Vec<_> = PRESET_VALUES.iter().map(|p| p.name()).collect();
        assert_eq!(
            &names[..4],
            [
                "patched",
                "vanilla",
                "ttwu-queue-desched-base",
                "ttwu-queue-desched"
            ]
        );
        use clap::ValueEnum;
        assert_eq!(
            Preset::from_str("Sis-Util-Base", true).unwrap(),
            named("sis-util-base")
        );
        assert_eq!(
            named("sis-util").meaning(),
            "v5.19-rc1 + SIS_UTIL (Chen Yu, \"sched/fair: Introduce SIS_UTIL to search idle CPU \
             based on sum of util_avg\" (2022-06))"
        );
    }

    /// build.rs's reading of intf.h: every feature, its bit and its help line.
    #[test]
    fn tables_derived_from_intf_h() {
        let names: Vec<_> = FEATURES.iter().map(|f| f.name).collect();
        assert_eq!(
            names.len(),
            (bpf_intf::sis_feature_FEAT_ALL as u64).count_ones() as usize
        );
        let mut all = 0;
        for f in FEATURES {
            assert_eq!(f.bit.count_ones(), 1, "{}", f.name);
            assert!(!f.help.is_empty() && !f.help.contains("*/") && !f.help.contains("  "));
            all |= f.bit;
        }
        assert_eq!(all, bpf_intf::sis_feature_FEAT_ALL as u64);
        // `features` lists them in intf.h's order, each with its own bit
        assert_eq!(
            &names[3..6],
            ["WA_IDLE_PREV", "WA_WEIGHT", "TTWU_QUEUE_DESCHED"]
        );
        assert_eq!(FEATURES[4].bit, bit::WA_WEIGHT);
        // a description continued over three comment lines, joined
        let t = FEATURES[5].help;
        assert!(
            t.starts_with("Mel Gorman 2020, offload wakee activation: the wakee is still"),
            "{t}"
        );
        assert!(
            t.ends_with("has nothing running: placed there without a search"),
            "{t}"
        );
    }

    #[test]
    fn apply_on_off_and_errors() {
        let w = apply(0, &["SIS_PROP,NO_SIS_UTIL", "sis_core"]).unwrap();
        assert!((w & bit::SIS_PROP != 0) && (w & bit::SIS_CORE != 0) && (w & bit::SIS_UTIL == 0));
        let w2 = apply(w, &["NO_SIS_PROP"]).unwrap();
        assert_eq!(w2 & bit::SIS_PROP, 0);
        let w3 = apply(w, &["no_sis_prop", "No_Sis_Core"]).unwrap();
        assert!((w3 & bit::SIS_PROP == 0) && (w3 & bit::SIS_CORE == 0));
        assert!(apply(0, &["NO_"]).is_err());
        let e = apply(w, &["SIS_PROP", "BOGUS"]).unwrap_err().to_string();
        assert!(
            e.contains("unknown feature 'BOGUS'") && e.contains("SIS_UTIL"),
            "{e}"
        );
        assert_eq!(to_words(preset(Preset::patched())).len(), FEATURES.len());
    }

    #[test]
    fn ops_name_carries_the_feature_layout() {
        let ours = ops_name();
        assert!(
            ours.starts_with(&format!("sisutil_{}_", layout_tag())),
            "{ours}"
        );
        assert!(
            ours.len() < 128,
            "sched_ext's ops name holds 127 bytes: {ours}"
        );
        assert!(
            ours.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.'),
            "{ours}"
        );
        assert_eq!(other_layout(&ours), None);
        assert_eq!(
            other_layout("bpfland_1.1.4_x86_64"),
            None,
            "not scx_sisutil: not this check's"
        );
        let e = other_layout("sisutil_f00000000_0.1.0_x86_64_unknown_linux_gnu\n").unwrap();
        assert!(e.contains("another build") && e.contains(&ours), "{e}");
        // an older scx_sisutil without a tag
        assert!(other_layout("sisutil_0.1.0_x86_64_unknown_linux_gnu").is_some());
    }

    #[test]
    fn bits_are_distinct_and_cover_all() {
        let all = FEATURES.iter().fold(0u64, |w, f| {
            assert_eq!(w & f.bit, 0, "{} overlaps", f.name);
            w | f.bit
        });
        assert_eq!(all, bpf_intf::sis_feature_FEAT_ALL as u64);
    }

    /// The code of one file as the name count sees it: comments out (C/Rust `//` and
    /// `/* */`, `#` lines elsewhere), and a Rust file's `#[cfg(test)]` part out.
    fn code_of(path: &str, text: &str) -> String {
        if path.ends_with(".rs") || path.ends_with(".c") || path.ends_with(".h") {
            let text = match (path.ends_with(".rs"), text.find("#[cfg(test)]")) {
                (true, Some(i)) => &text[..i],
                _ => text,
            };
            let mut out = String::new();
            let mut rest = text;
            while !rest.is_empty() {
                let (line, block) = (rest.find("//"), rest.find("/*"));
                match (line, block) {
                    (Some(l), b) if b.is_none_or(|b| l < b) => {
                        out.push_str(&rest[..l]);
                        rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
                    }
                    (_, Some(b)) => {
                        out.push_str(&rest[..b]);
                        rest = rest[b + 2..]
                            .find("*/")
                            .map_or("", |e| &rest[b + 2 + e + 2..]);
                    }
                    _ => {
                        out.push_str(rest);
                        rest = "";
                    }
                }
            }
            out
        } else {
            let code = text.lines().filter(|l| !l.trim_start().starts_with('#'));
            code.collect::<Vec<_>>().join("\n")
        }
    }

    /// Does @code spell feature @name (as X, FEAT_X, NO_X, STAT_HIT_X, ... but not X_Y)?
    fn spells(code: &str, name: &str) -> bool {
        code.match_indices(name).any(|(i, _)| {
            let before = code[..i].chars().next_back();
            let after = code[i + name.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    }

    /// The code files: src/ (without the host tests' own files: src/bpf/testing, the
    /// `_test.rs` files), tools/ (without tools/mutants, whose list spells the code it
    /// mutates), build.rs.
    fn code_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                code_files(&p, out);
            } else if !(name.ends_with(".md")
                || name.ends_with("_test.rs")
                || p.parent().is_some_and(|d| d.ends_with("src/bpf/testing"))
                || (name == "mutants" && p.parent().is_some_and(|d| d.ends_with("tools"))))
            {
                out.push(p);
            }
        }
    }

    /// A feature is defined in intf.h and acts in the one BPF file that implements it,
    /// mirrored by the host model where the wake path has one: no more than 3 code files
    /// spell its name. Everything else reads the feature table (`FEATURES`, `features
    /// --json`). Tests that exercise one feature name it as their input and are not counted.
    #[test]
    fn every_feature_name_is_spelled_in_at_most_3_code_files() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("build.rs")];
        code_files(&root.join("src"), &mut files);
        code_files(&root.join("tools"), &mut files);
        let code: Vec<(String, String)> = files
            .iter()
            .filter_map(|p| {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
                let text = std::fs::read_to_string(p).ok()?;
                Some((rel.clone(), code_of(&rel, &text)))
            })
            .collect();
        let mut over = vec![];
        for f in FEATURES {
            let hits: Vec<&str> = code
                .iter()
                .filter(|(_, c)| spells(c, f.name))
                .map(|(p, _)| p.as_str())
                .collect();
            // the count must see the definition, or it counts nothing
            assert!(
                hits.contains(&"src/bpf/intf.h"),
                "{}: not found in intf.h: {hits:?}",
                f.name
            );
            if hits.len() > 3 {
                over.push(format!("{} in {}: {}", f.name, hits.len(), hits.join(" ")));
            }
        }
        assert!(
            over.is_empty(),
            "feature names spelled in more than 3 code files:\n{}",
            over.join("\n")
        );
    }

    /// The mutation check of the count: a spelling in code counts, one in a comment, a
    /// longer name or a test module does not.
    #[test]
    fn feature_name_count_sees_code_not_comments() {
        let c = |p: &str, t: &str| spells(&code_of(p, t), "SIS_UTIL");
        assert!(c("a.h", "x = FEAT_SIS_UTIL;"));
        assert!(c("a.rs", "apply(w, &[\"NO_SIS_UTIL\"])"));
        assert!(c("tools/x", "echo SIS_UTIL # on"));
        assert!(!c("a.h", "/* SIS_UTIL */ x = 1; // SIS_UTIL"));
        assert!(!c("a.h", "x = SIS_UTIL_MAX;"));
        assert!(!c(
            "a.rs",
            "fn f() {}\n#[cfg(test)]\nmod t { const X: &str = \"SIS_UTIL\"; }"
        ));
        assert!(!c("tools/x", "  # SIS_UTIL"));
    }
}
