// SPDX-License-Identifier: GPL-2.0-only
//! Reading the BPF side's maps from Rust, typed: a map value as its intf.h struct
//! (bindgen's, src/bpf_intf.rs), a per-CPU value as one struct per CPU, u64 words through
//! an mmap, and the .bss arrays as intf.h's types. Shared by the scheduler (src/sched) and
//! the tools (src/tools); it knows no map by name.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use log::warn;
use std::os::fd::{AsFd, AsRawFd};

/// An array map of u64 values (BPF_F_MMAPABLE) read through a shared read-only mapping:
/// `scx_sisutil features` and `calibrate` write it with bpf(), the loader reads it each
/// interval without a syscall (the feature word, calibrate's lease).
pub struct MappedWords {
    ptr: *mut libc::c_void,
    len: usize,
    words: usize,
}

impl MappedWords {
    pub fn map<M: AsFd>(map: &M, words: usize, what: &str) -> Result<Self> {
        let page = 4096usize.max(unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize);
        let len = (words * 8).div_ceil(page).max(1) * page;
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            anyhow::bail!("mapping {what}: {}", std::io::Error::last_os_error());
        }
        Ok(MappedWords { ptr, len, words })
    }

    /// The mapping, or None with one warning: the caller then reads the map with bpf().
    pub fn map_or_warn<M: AsFd>(map: &M, words: usize, what: &str) -> Option<Self> {
        Self::map(map, words, what)
            .map_err(|e| warn!("{e:#}: reading it with bpf() each interval"))
            .ok()
    }

    /// Value `i` of the array (0 past its end).
    pub fn read(&self, i: usize) -> u64 {
        if i >= self.words {
            return 0;
        }
        // SAFETY: a live, page-aligned mapping of at least `words` u64 values
        unsafe { std::ptr::read_volatile((self.ptr as *const u64).add(i)) }
    }
}

impl Drop for MappedWords {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A .bss array of an intf.h type, as that type: every skeleton generates its own copy of
/// the structs, with the same size.
pub fn intf_slice<T, U>(s: &mut [T]) -> &mut [U] {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<U>());
    // the skeleton's copy drops intf.h's aligned(64); the variable itself is aligned
    assert_eq!(s.as_ptr() as usize % std::mem::align_of::<U>(), 0);
    // SAFETY: same size, aligned; both are plain-integer repr(C) structs of intf.h
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut U, s.len()) }
}

/// One BPF_PROG_TEST_RUN of `prog` with `ctx` as its context (a syscall program's `ctx_in`,
/// which the kernel writes back: the program's outputs are in `ctx` after it); its return
/// value.
///
/// # Safety
/// `T` is a plain-integer repr(C) struct of intf.h (any skeleton's copy of it): every bit
/// pattern the program writes is a valid `T`.
#[cfg(test)]
pub unsafe fn run_with_ctx<T>(prog: &libbpf_rs::ProgramMut<'_>, ctx: &mut T) -> Result<u32> {
    // SAFETY: the caller's; `ctx` is viewed as its bytes for the call only
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(ctx as *mut T as *mut u8, std::mem::size_of::<T>())
    };
    let input = libbpf_rs::ProgramInput {
        context_in: Some(bytes),
        ..Default::default()
    };
    run_input(prog, input)
}

/// One BPF_PROG_TEST_RUN of `prog` with no context (its inputs and outputs in its object's
/// .bss, as placement-cost's and shadow's replay's): its return value.
pub fn run_once(prog: &libbpf_rs::ProgramMut<'_>) -> Result<u32> {
    run_input(prog, libbpf_rs::ProgramInput::default())
}

fn run_input(prog: &libbpf_rs::ProgramMut<'_>, input: libbpf_rs::ProgramInput) -> Result<u32> {
    let run = prog
        .test_run(input)
        .with_context(|| format!("BPF_PROG_TEST_RUN of {}", prog.name().to_string_lossy()))?;
    Ok(run.return_value)
}

/// A map value as native-endian u64 words (a trailing partial word is dropped).
pub fn u64_words(v: &[u8]) -> Vec<u64> {
    v.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

/// A map value as the intf.h struct `T` (bindgen's) it holds; None if the size differs.
/// `T` must be plain integers (any bit pattern valid), as intf.h's shared structs are.
pub fn value_as<T: Copy>(v: &[u8]) -> Option<T> {
    if v.len() != std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked; T is a repr(C) struct of integers
    Some(unsafe { std::ptr::read_unaligned(v.as_ptr().cast::<T>()) })
}

/// The first u64 of an array map's element `key`, None if it cannot be read.
pub fn lookup_u64<M: MapCore>(map: &M, key: u32) -> Option<u64> {
    map.lookup(&key.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .ok()
        .flatten()
        .and_then(|v| u64_words(&v).first().copied())
}

/// Per-CPU array element `key` as one intf.h struct `T` per CPU (an absent element: none);
/// a value of another size is an error that names `what`.
pub fn lookup_percpu_as<T: Copy, M: MapCore>(map: &M, key: u32, what: &str) -> Result<Vec<T>> {
    let vals = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading {what}"))?
        .unwrap_or_default();
    vals.iter()
        .map(|v| match value_as::<T>(v) {
            Some(t) => Ok(t),
            None => bail!(
                "{what}: a value of {} bytes, expected {}",
                v.len(),
                std::mem::size_of::<T>()
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Two {
        a: u64,
        b: u32,
        c: u32,
    }

    /// A value is read as the struct at its fields' offsets; a value of another size is none.
    #[test]
    fn value_as_reads_the_struct_and_checks_its_size() {
        let mut v = 7u64.to_ne_bytes().to_vec();
        v.extend(3u32.to_ne_bytes());
        v.extend(5u32.to_ne_bytes());
        assert_eq!(value_as::<Two>(&v), Some(Two { a: 7, b: 3, c: 5 }));
        assert_eq!(value_as::<Two>(&v[1..]), None);
        v.push(0);
        assert_eq!(value_as::<Two>(&v), None);
        assert_eq!(u64_words(&v), [7, 5 << 32 | 3]);
    }
}
