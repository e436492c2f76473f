// SPDX-License-Identifier: GPL-2.0-only
include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));

/// The bytes every skeleton of this crate opens its BPF object from (build.rs points each
/// generated skeleton here, by the object's name: "bpf", "sis_test", "cost", ...): the
/// object embedded at build time.
#[cfg(not(test))]
#[inline(always)]
pub fn obj_data(_name: &str, embedded: &'static [u8]) -> &'static [u8] {
    embedded
}

/// The environment variable that, in the unit-test binary only (never in the scheduler or
/// its tools), names a directory whose `NAME.bpf.o` replaces the embedded object NAME:
/// `tools/mutants --generate` runs a BPF mutant's objects, compiled alone, through the
/// prebuilt test binary instead of rebuilding the crate.
#[cfg(test)]
pub const OBJ_OVERRIDE_ENV: &str = "SISUTIL_TEST_BPF_OBJS";

/// In the unit-test binary: `$SISUTIL_TEST_BPF_OBJS/NAME.bpf.o` when that variable is set and
/// the file exists (read once, kept for the process), else the embedded object.
#[cfg(test)]
pub fn obj_data(name: &str, embedded: &'static [u8]) -> &'static [u8] {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static READ: Mutex<BTreeMap<String, &'static [u8]>> = Mutex::new(BTreeMap::new());
    let Some(dir) = std::env::var_os(OBJ_OVERRIDE_ENV) else {
        return embedded;
    };
    let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&b) = read.get(name) {
        return b;
    }
    let path = std::path::Path::new(&dir).join(format!("{name}.bpf.o"));
    let bytes: &'static [u8] = match std::fs::read(&path) {
        Ok(b) => Box::leak(b.into_boxed_slice()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => embedded,
        Err(e) => panic!("{OBJ_OVERRIDE_ENV}: {}: {e}", path.display()),
    };
    read.insert(name.to_string(), bytes);
    bytes
}
