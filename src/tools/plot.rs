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
//! in on stdin (the title too: a long one is no "Argument list too long"), the PNG comes back
//! on stdout, and the file is written here through the `--plot` directory opened once at
//! [`check_out`] (tools::safe_io::OutDir: a fresh file renamed over the name, no symlink
//! followed, a directory owned by another user refused).

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::tools::safe_io::OutDir;

const PYTHON: &str = "/usr/bin/python3";

/// What a script finds defined: `data` (the JSON given to [`render`]), `title`, `plt`, and
/// `out`, a buffer to `fig.savefig(out, format="png")` into.
const PRELUDE: &str = r#"
import io, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
_in = json.load(sys.stdin)
data = _in["data"]
title = _in["title"]
out = io.BytesIO()
"#;
const EPILOGUE: &str = r#"
sys.stdout.buffer.write(out.getvalue())
"#;

/// A `--plot` output that passed [`check_out`]: its directory, open, and the file's name.
#[derive(Debug, Clone)]
pub struct PlotOut {
    dir: OutDir,
    name: String,
    path: PathBuf,
}

impl PlotOut {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The longest plot title passed to matplotlib, characters (a report's features string can
/// be any length).
const MAX_TITLE: usize = 400;

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
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        bail!("--plot '{}': not a UTF-8 file name", path.display());
    };
    let dir = OutDir::open(dir, "--plot")?;
    dir.check_name(name)?;
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
    Ok(PlotOut {
        dir,
        name: name.to_string(),
        path: path.to_path_buf(),
    })
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
    // a line break is the scripts' own (calibrate's two-line title); any other control
    // character from a report is replaced
    let title: String = title
        .split('\n')
        .map(|l| crate::sched::text::printable(l, MAX_TITLE))
        .collect::<Vec<_>>()
        .join("\n")
        .chars()
        .take(MAX_TITLE)
        .collect();
    let json = serde_json::to_vec(&serde_json::json!({"data": data, "title": title}))
        .context("the plot data")?;
    let dir = private_dir()?;
    let res = run_python(script, &json, dir.path());
    drop(dir);
    let png = res?;
    out.dir.write(&out.name, &png)
}

/// A fresh 0700 directory under /tmp, removed on drop.
fn private_dir() -> Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("scx_sisutil-plot-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in("/tmp")
        .context("--plot: creating a private directory under /tmp")
}

fn run_python(script: &str, json: &[u8], dir: &Path) -> Result<Vec<u8>> {
    let mut child = python(dir)
        .arg("-c")
        .arg(format!("{PRELUDE}{script}{EPILOGUE}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tools::safe_io::swap_after_open;

    fn tmp() -> tempfile::TempDir {
        crate::tools::safe_io::test_dir("plot-test-")
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
        assert!(out.dir.write(&out.name, b"x").is_err());
        assert!(!p("target").exists());
    }

    /// The review's swap: `--plot D/sub/c.png`, and during the render `sub` becomes a
    /// symlink to a directory root owns. The PNG goes to the directory checked (moved away),
    /// nothing into the symlink's target; the private directory is 0700.
    #[test]
    fn plot_through_a_swapped_parent_lands_in_the_checked_directory() {
        let d = tmp();
        let (out, moved, roots) = swap_after_open(d.path(), |sub| check_out(&sub.join("c.png")));
        let out = out.unwrap();
        let script =
            "fig, ax = plt.subplots()\nax.plot([1, 2], [2, 1])\nfig.savefig(out, format='png')\n";
        let n = render(script, &[1], &out, "t").unwrap();
        assert_eq!(std::fs::metadata(moved.join("c.png")).unwrap().len(), n);
        assert!(!roots.join("c.png").exists());
        assert_eq!(std::fs::read_dir(&roots).unwrap().count(), 0);
        use std::os::unix::fs::PermissionsExt;
        let p = private_dir().unwrap();
        let mode = std::fs::metadata(p.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    /// A title of any length and with control characters reaches matplotlib on stdin (as an
    /// argument, 1.8 MB was "Argument list too long"), cut and cleaned.
    #[test]
    fn a_long_title_with_escapes_plots() {
        let d = tmp();
        let out = check_out(&d.path().join("t.png")).unwrap();
        let title = "SIS_UTIL \x1b[2J\n".repeat(200_000);
        let script = "assert '\\x1b' not in title and len(title) <= 400, repr(title[:40])\nfig, ax = plt.subplots()\nax.set_title(title)\nfig.savefig(out, format='png')\n";
        render(script, &[1], &out, &title).unwrap();
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
        let out = check_out(std::path::Path::new(
            &std::env::var_os("PLOT_TEST_OUT").unwrap(),
        ))
        .unwrap();
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
