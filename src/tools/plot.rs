// SPDX-License-Identifier: GPL-2.0-only
//! `--plot`: a PNG drawn by matplotlib (/usr/bin/python3, Debian's python3-matplotlib), for
//! every subcommand that plots. Two calls:
//!
//! - [`check_out`] before measuring: the path ends in `.png`, its directory exists, it is
//!   not a symlink or anything but a regular file, and python3 can import matplotlib: a bad
//!   `--plot` fails in one line before minutes of measuring, not after;
//! - [`render`] after: runs a matplotlib script and writes the PNG.
//!
//! These tools run as root, so Python must not read anything a user controls: it runs
//! isolated (`-I`: no PYTHON* variables, no user site, neither the script's nor the current
//! directory on sys.path) with an empty environment, in a private directory (0700, made
//! under /tmp, whose sticky bit keeps others from swapping it), which is also its
//! MPLCONFIGDIR (matplotlib reads a `matplotlibrc` from the current directory). The data go
//! in on stdin, the PNG comes back on stdout, and the file is written here with O_NOFOLLOW:
//! no predictable temporary file, no symlink followed.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PYTHON: &str = "/usr/bin/python3";

/// What a script finds defined: `data` (the JSON given to [`render`]), `title`, `plt`, and
/// `out`, a buffer to `fig.savefig(out, format="png")` into.
const PRELUDE: &str = r#"
import io, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
data = json.load(sys.stdin)
title = sys.argv[1]
out = io.BytesIO()
"#;
const EPILOGUE: &str = r#"
sys.stdout.buffer.write(out.getvalue())
"#;

/// A `--plot` output path that passed [`check_out`].
#[derive(Debug, Clone)]
pub struct PlotOut(PathBuf);

impl PlotOut {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// Check a `--plot` path before anything is measured (one line per problem).
pub fn check_out(path: &Path) -> Result<PlotOut> {
    if path.file_name().is_none() || path.as_os_str().to_string_lossy().ends_with('/') {
        bail!(
            "--plot needs a file name ending in .png, got '{}'",
            path.display()
        );
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !ext.eq_ignore_ascii_case("png") {
        bail!(
            "--plot writes a PNG: give a FILE.png, got '{}'",
            path.display()
        );
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!(
            "--plot '{}': {} is not a directory",
            path.display(),
            dir.display()
        ),
        Err(e) => bail!(
            "--plot '{}': directory {}: {e}",
            path.display(),
            dir.display()
        ),
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(m) if m.file_type().is_symlink() => bail!(
            "--plot '{}' is a symlink: refusing to write through it",
            path.display()
        ),
        Ok(_) => bail!(
            "--plot '{}' exists and is not a regular file",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!("--plot '{}': {e}", path.display()),
    }
    let probe = python(Path::new("/"))
        .arg("-c")
        .arg("import matplotlib")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        bail!("--plot needs {PYTHON} with matplotlib (Debian: apt install python3-matplotlib)");
    }
    Ok(PlotOut(path.to_path_buf()))
}

/// /usr/bin/python3, isolated, empty environment, in `dir`.
fn python(dir: &Path) -> Command {
    let mut c = Command::new(PYTHON);
    c.arg("-I")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("MPLCONFIGDIR", dir)
        .current_dir(dir);
    c
}

/// Draw `script` (see PRELUDE for what it finds defined) over `data` and write the PNG to
/// `out`. Returns its size in bytes; the file exists and holds the PNG when this is Ok.
pub fn render<T: serde::Serialize + ?Sized>(
    script: &str,
    data: &T,
    out: &PlotOut,
    title: &str,
) -> Result<u64> {
    let json = serde_json::to_vec(data).context("the plot data")?;
    let dir = private_dir()?;
    let res = run_python(script, &json, title, dir.path());
    drop(dir);
    let png = res?;
    write_file(out.path(), &png)?;
    let len = std::fs::metadata(out.path())
        .with_context(|| {
            format!(
                "--plot: {} is not there after writing it",
                out.path().display()
            )
        })?
        .len();
    if len != png.len() as u64 {
        bail!(
            "--plot: {} has {len} bytes, not the {} written",
            out.path().display(),
            png.len()
        );
    }
    Ok(len)
}

/// A fresh 0700 directory under /tmp, removed on drop.
fn private_dir() -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("scx_sisutil-plot-")
        .tempdir_in("/tmp")
        .context("--plot: creating a private directory under /tmp")
}

fn run_python(script: &str, json: &[u8], title: &str, dir: &Path) -> Result<Vec<u8>> {
    let mut child = python(dir)
        .arg("-c")
        .arg(format!("{PRELUDE}{script}{EPILOGUE}"))
        .arg(title)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("--plot: running {PYTHON}"))?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let json = json.to_vec();
    // a writer thread: the script may write before it has read everything
    let writer = std::thread::spawn(move || stdin.write_all(&json));
    let res = child
        .wait_with_output()
        .context("--plot: waiting for python3")?;
    let _ = writer.join();
    if !res.status.success() {
        let err = String::from_utf8_lossy(&res.stderr);
        bail!(
            "--plot: python3 failed (is matplotlib installed?): {}",
            err.lines().last().unwrap_or("no message")
        );
    }
    if !res.stdout.starts_with(b"\x89PNG\r\n\x1a\n") {
        bail!(
            "--plot: python3 returned {} bytes that are not a PNG",
            res.stdout.len()
        );
    }
    Ok(res.stdout)
}

/// Write `bytes` to `path` without following a symlink there and only into a regular file.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("--plot: opening {} (a symlink?)", path.display()))?;
    if !f.metadata()?.file_type().is_file() {
        bail!("--plot: {} is not a regular file", path.display());
    }
    f.set_len(0)?;
    f.write_all(bytes)
        .with_context(|| format!("--plot: writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("plot-test-")
            .tempdir_in("/tmp")
            .unwrap()
    }

    #[test]
    fn plot_path_checks() {
        let d = tmp();
        let p = |s: &str| d.path().join(s);
        for (bad, want) in [
            (
                PathBuf::from("/nonexistent/x.png"),
                "directory /nonexistent",
            ),
            (p("x.txt"), "give a FILE.png"),
            (p("x"), "give a FILE.png"),
            (PathBuf::from(""), "needs a file name"),
            (d.path().to_path_buf(), "give a FILE.png"),
        ] {
            let e = format!("{:#}", check_out(&bad).unwrap_err());
            assert!(e.contains(want), "{bad:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        std::os::unix::fs::symlink("/etc/passwd", p("link.png")).unwrap();
        let e = format!("{:#}", check_out(&p("link.png")).unwrap_err());
        assert!(e.contains("is a symlink"), "{e}");
        std::fs::create_dir(p("dir.png")).unwrap();
        let e = format!("{:#}", check_out(&p("dir.png")).unwrap_err());
        assert!(e.contains("not a regular file"), "{e}");
        // and the writer does not follow one planted after the check
        let out = check_out(&p("ok.PNG")).expect("a PNG path in an existing directory");
        std::os::unix::fs::symlink(p("target"), p("ok.PNG")).unwrap();
        assert!(write_file(out.path(), b"x").is_err());
        assert!(!p("target").exists());
    }

    /// The real plot path, run from a directory holding a json.py, io.py and matplotlibrc
    /// that would each leave a marker if Python read them: none does, and the PNG is there.
    #[test]
    fn plot_ignores_the_current_directory() {
        let d = tmp();
        let marker = d.path().join("marker");
        for m in ["json", "io", "matplotlib"] {
            std::fs::write(
                d.path().join(format!("{m}.py")),
                format!("open({:?}, 'a').write('{m} ')\n", marker.to_str().unwrap()),
            )
            .unwrap();
        }
        std::fs::write(d.path().join("matplotlibrc"), "backend: module://json\n").unwrap();
        let out = check_out(&d.path().join("p.png")).unwrap();
        let script = "fig, ax = plt.subplots()\nax.plot(data['x'], data['y'])\nax.set_title(title)\nfig.savefig(out, format='png')\n";
        let data = serde_json::json!({"x": [1, 2, 3], "y": [3, 1, 2]});
        // render() sets Python's cwd itself; the caller's cwd is what a user controls
        let png = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "tools::plot::tests::render_from_cwd",
                "--ignored",
                "--nocapture",
            ])
            .env("PLOT_TEST_OUT", out.path())
            .current_dir(d.path())
            .output()
            .unwrap();
        assert!(
            png.status.success(),
            "{}",
            String::from_utf8_lossy(&png.stderr)
        );
        assert!(
            !marker.exists(),
            "python read {:?}",
            std::fs::read_to_string(&marker)
        );
        let bytes = std::fs::read(out.path()).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // the same script through render() here, for the size it reports
        let n = render(script, &data, &out, "t").unwrap();
        assert_eq!(n, std::fs::metadata(out.path()).unwrap().len());
    }

    /// Helper of plot_ignores_the_current_directory, run in a child process from the
    /// directory under test (the test harness shares one cwd between its threads).
    #[test]
    #[ignore = "run by plot_ignores_the_current_directory"]
    fn render_from_cwd() {
        let out = PlotOut(std::env::var_os("PLOT_TEST_OUT").unwrap().into());
        let script = "fig, ax = plt.subplots()\nax.plot(data['x'], data['y'])\nfig.savefig(out, format='png')\n";
        render(
            script,
            &serde_json::json!({"x": [1, 2], "y": [2, 1]}),
            &out,
            "t",
        )
        .unwrap();
    }

    #[test]
    fn a_failing_script_writes_nothing() {
        let d = tmp();
        let out = check_out(&d.path().join("p.png")).unwrap();
        let e = render("raise SystemExit('boom')", &[1], &out, "t").unwrap_err();
        assert!(format!("{e:#}").contains("boom"), "{e:#}");
        assert!(!out.path().exists());
        let e = render("print('hello')", &[1], &out, "t").unwrap_err();
        assert!(format!("{e:#}").contains("not a PNG"), "{e:#}");
        assert!(!out.path().exists());
    }
}
