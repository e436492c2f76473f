// SPDX-License-Identifier: GPL-2.0-only
//! Files the tools write or read as root, where another user may own part of the path.
//!
//! - [`OutDir`]: an output file is made in a directory opened once (`O_DIRECTORY |
//!   O_NOFOLLOW`, checked by fstat: a directory owned by another user, neither root nor the
//!   one running the tool, is refused), under a fresh name (`openat` with `O_CREAT | O_EXCL
//!   | O_NOFOLLOW`) that is then renamed over the final one (`renameat`, which replaces a
//!   symlink there instead of following it). Every step goes through the directory's fd:
//!   swapping the directory, or one above it, for a symlink after the open changes nothing.
//! - [`read_input`]: a report file is opened with `O_NOFOLLOW | O_NONBLOCK` (a FIFO does not
//!   block the open) and read only when it is a regular file of at most [`MAX_INPUT`] bytes.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest report file read (`--from-json`, `--fit`): 64 MiB, some thousand times a
/// real `calibrate --json` report.
pub const MAX_INPUT: u64 = 64 << 20;

fn cstr(p: &[u8], what: &str) -> Result<CString> {
    CString::new(p).with_context(|| format!("{what}: a path with a NUL byte"))
}

/// The user who runs the tool: the real uid, or under sudo the one who called sudo.
fn invoking_uids() -> Vec<u32> {
    // SAFETY: getuid(2) cannot fail
    let mut v = vec![0, unsafe { libc::getuid() }];
    if let Some(u) = std::env::var("SUDO_UID")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
    {
        v.push(u);
    }
    v
}

/// A directory opened once, for writing files in it.
#[derive(Debug, Clone)]
pub struct OutDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
    /// the option that named it, for errors ("--plot")
    what: &'static str,
}

impl OutDir {
    /// Open `dir` (no symlink as its last component) and check it: a directory, owned by
    /// root or the invoking user.
    pub fn open(dir: &Path, what: &'static str) -> Result<OutDir> {
        let d = dir.display();
        let c = cstr(dir.as_os_str().as_bytes(), what)?;
        // SAFETY: open(2) of a NUL-terminated path; the fd is owned below
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) {
                if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                    bail!("{what}: directory {d} is a symlink: refusing to write through it");
                }
                bail!("{what}: {d} is not a directory");
            }
            bail!("{what}: directory {d}: {e}");
        }
        // SAFETY: fd is a fresh descriptor of ours
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = std::fs::File::from(fd.try_clone()?);
        let md = file
            .metadata()
            .with_context(|| format!("{what}: fstat {d}"))?;
        if !invoking_uids().contains(&md.uid()) {
            bail!(
                "{what}: directory {d} is owned by uid {}, neither root nor you: refusing to write there",
                md.uid()
            );
        }
        Ok(OutDir {
            fd: Arc::new(fd),
            path: dir.to_path_buf(),
            what,
        })
    }

    /// lstat of `name` in the directory: None when there is nothing there.
    pub fn stat(&self, name: &str) -> Result<Option<libc::stat>> {
        let c = cstr(name.as_bytes(), self.what)?;
        // SAFETY: fstatat(2) into a zeroed stat, relative to our directory fd
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
            {
                return Ok(Some(st));
            }
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::NotFound {
            return Ok(None);
        }
        Err(e).with_context(|| format!("{}: {}", self.what, self.path.join(name).display()))
    }

    /// Check that `name` can be written: nothing there, or a regular file (a symlink or
    /// anything else is refused, not replaced).
    pub fn check_name(&self, name: &str) -> Result<()> {
        let p = self.path.join(name);
        match self.stat(name)? {
            None => Ok(()),
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => Ok(()),
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => bail!(
                "{} '{}' is a symlink: refusing to write through it",
                self.what,
                p.display()
            ),
            Some(_) => bail!(
                "{} '{}' exists and is not a regular file",
                self.what,
                p.display()
            ),
        }
    }

    /// Write `bytes` as `name` in the directory: a fresh file (O_EXCL, mode 0644) under a
    /// temporary name, renamed over `name`. Returns the bytes written.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<u64> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            bail!("{}: '{name}' is not a file name", self.what);
        }
        self.check_name(name)?;
        let fin = cstr(name.as_bytes(), self.what)?;
        let p = self.path.join(name);
        let dfd = self.fd.as_raw_fd();
        let (tmp, fd) = (0..16)
            .find_map(|_| {
                let t = format!(".{name}.{:016x}.tmp", rand::random::<u64>());
                let c = CString::new(t.as_bytes()).ok()?;
                // SAFETY: openat(2) relative to our directory fd
                let fd = unsafe {
                    libc::openat(
                        dfd,
                        c.as_ptr(),
                        libc::O_WRONLY
                            | libc::O_CREAT
                            | libc::O_EXCL
                            | libc::O_NOFOLLOW
                            | libc::O_CLOEXEC,
                        0o644 as libc::c_uint,
                    )
                };
                (fd >= 0).then_some((c, fd))
            })
            .with_context(|| {
                format!(
                    "{}: creating a file in {}: {}",
                    self.what,
                    self.path.display(),
                    std::io::Error::last_os_error()
                )
            })?;
        // SAFETY: a fresh descriptor of ours
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let unlink = || {
            // SAFETY: unlinkat(2) of our temporary name in our directory
            unsafe { libc::unlinkat(dfd, tmp.as_ptr(), 0) };
        };
        let res = f
            .write_all(bytes)
            .and_then(|_| f.sync_all())
            .and_then(|_| f.metadata());
        let len = match res {
            Ok(m) if m.len() == bytes.len() as u64 => m.len(),
            Ok(m) => {
                unlink();
                bail!(
                    "{}: {} has {} bytes, not the {} written",
                    self.what,
                    p.display(),
                    m.len(),
                    bytes.len()
                );
            }
            Err(e) => {
                unlink();
                return Err(e).with_context(|| format!("{}: writing {}", self.what, p.display()));
            }
        };
        // SAFETY: renameat(2) within our directory fd
        if unsafe { libc::renameat(dfd, tmp.as_ptr(), dfd, fin.as_ptr()) } != 0 {
            let e = std::io::Error::last_os_error();
            unlink();
            return Err(e).with_context(|| format!("{}: writing {}", self.what, p.display()));
        }
        Ok(len)
    }
}

/// Read the file at `path` (`what`: the option that named it) as root: not through a symlink
/// as its last component, without blocking on a FIFO or a device, only a regular file of at
/// most [`MAX_INPUT`] bytes.
pub fn read_input(path: &Path, what: &str) -> Result<Vec<u8>> {
    read_input_capped(path, what, MAX_INPUT)
}

pub fn read_input_capped(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let d = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!("{what}: reading {d}: a symlink: refusing to follow it")
            } else {
                anyhow::anyhow!("{what}: reading {d}: {e}")
            }
        })?;
    let md = f
        .metadata()
        .with_context(|| format!("{what}: reading {d}"))?;
    if !md.file_type().is_file() {
        bail!("{what}: reading {d}: not a regular file");
    }
    if md.len() > cap {
        bail!(
            "{what}: reading {d}: {} bytes, more than the {} MiB a report can have",
            md.len(),
            cap >> 20
        );
    }
    let mut buf = Vec::with_capacity(md.len() as usize);
    // a file that grows while it is read stops at the cap as well
    (&f).take(cap + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("{what}: reading {d}"))?;
    if buf.len() as u64 > cap {
        bail!(
            "{what}: reading {d}: more than the {} MiB a report can have",
            cap >> 20
        );
    }
    Ok(buf)
}

/// A fresh directory under /tmp for a tool's test, named `prefix`...: the tests of the
/// tools that write and read as root (safe_io, plot).
#[cfg(test)]
pub(crate) fn test_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .unwrap()
}

/// The swap the fd-based writes stand against, in `d`: the directory `sub` is made and given
/// to `open`, then moved to `moved` and replaced by a symlink to the directory `elsewhere`.
/// `open`'s answer and the two directories, (moved, elsewhere).
#[cfg(test)]
pub(crate) fn swap_after_open<T>(d: &Path, open: impl FnOnce(&Path) -> T) -> (T, PathBuf, PathBuf) {
    let [sub, moved, elsewhere] = ["sub", "moved", "elsewhere"].map(|n| d.join(n));
    std::fs::create_dir(&sub)
        .and(std::fs::create_dir(&elsewhere))
        .unwrap();
    let opened = open(&sub);
    std::fs::rename(&sub, &moved).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &sub).unwrap();
    (opened, moved, elsewhere)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn tmp() -> tempfile::TempDir {
        test_dir("safe-io-test-")
    }

    /// A symlink planted at the output name is replaced, not written through; one planted
    /// before the check is refused; the file is a fresh one (mode 0644, our bytes).
    #[test]
    fn write_replaces_a_symlink_never_follows_it() {
        let d = tmp();
        let out = OutDir::open(d.path(), "--test").unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("o.png")).unwrap();
        let e = format!("{:#}", out.check_name("o.png").unwrap_err());
        assert!(e.contains("is a symlink"), "{e}");
        // planted after the check (the write's own check is the race's loser)
        std::fs::remove_file(d.path().join("o.png")).unwrap();
        out.check_name("o.png").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("o.png")).unwrap();
        assert!(out.write("o.png", b"x").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
        // the temporary name is not left behind
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 2, "{names:?}");
        std::fs::remove_file(d.path().join("o.png")).unwrap();
        assert_eq!(out.write("o.png", b"png").unwrap(), 3);
        let md = std::fs::symlink_metadata(d.path().join("o.png")).unwrap();
        assert!(md.file_type().is_file());
        assert_eq!(md.mode() & 0o777, 0o644);
        assert_eq!(std::fs::read(d.path().join("o.png")).unwrap(), b"png");
    }

    /// The fd-based design: the directory opened is where the file goes, even when its path
    /// (or a directory above it) is swapped for a symlink after the open.
    #[test]
    fn a_swapped_parent_directory_is_not_followed() {
        let d = tmp();
        let (out, moved, elsewhere) = swap_after_open(d.path(), |sub| OutDir::open(sub, "--test"));
        let (out, sub) = (out.unwrap(), d.path().join("sub"));
        out.write("c.png", b"png").unwrap();
        assert_eq!(std::fs::read(moved.join("c.png")).unwrap(), b"png");
        assert!(!elsewhere.join("c.png").exists());
        // and a symlink as the directory's last component is refused at the open
        let e = format!("{:#}", OutDir::open(&sub, "--test").unwrap_err());
        assert!(e.contains("is a symlink"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }

    /// A directory owned by another user (neither root nor the invoking one) is refused.
    #[test]
    fn a_foreign_directory_is_refused() {
        let d = tmp();
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(54321), None).unwrap();
        // SUDO_UID names the user root acts for: not this one
        let e = format!("{:#}", OutDir::open(&theirs, "--plot").unwrap_err());
        assert!(e.contains("owned by uid 54321"), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert!(OutDir::open(d.path(), "--plot").is_ok());
    }

    /// A FIFO is refused at once (no writer: a blocking open would wait forever), as are a
    /// directory, a symlink and a file over the cap.
    #[test]
    fn fifo_symlink_and_oversized_inputs_refused_at_once() {
        let d = tmp();
        let fifo = d.path().join("fifo.json");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) of a NUL-terminated path
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let f2 = fifo.clone();
        std::thread::spawn(move || tx.send(format!("{:#}", read_input(&f2, "--fit").unwrap_err())));
        // 5 s: a blocking open never returns; a loaded host's scheduling stays far below
        let e = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("reading a FIFO still blocked after 5 s");
        assert!(e.contains("not a regular file"), "{e}");
        let e = format!("{:#}", read_input(d.path(), "--fit").unwrap_err());
        assert!(e.contains("not a regular file"), "{e}");
        let big = d.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_INPUT + 1).unwrap();
        let t = Instant::now();
        let e = format!("{:#}", read_input(&big, "--from-json").unwrap_err());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(e.contains("more than the 64 MiB"), "{e}");
        f.set_len(10).unwrap();
        assert_eq!(read_input(&big, "--from-json").unwrap().len(), 10);
        assert!(read_input_capped(&big, "--x", 9).is_err());
        let link = d.path().join("link.json");
        std::os::unix::fs::symlink(&big, &link).unwrap();
        let e = format!("{:#}", read_input(&link, "--fit").unwrap_err());
        assert!(e.contains("symlink"), "{e}");
        for p in [&fifo, &big, &link] {
            let e = format!("{:#}", read_input_capped(p, "--x", 1).unwrap_err());
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
