// SPDX-License-Identifier: GPL-2.0-only
//! `--plot`: a PNG drawn by matplotlib (/usr/bin/python3, Debian's python3-matplotlib)
//! from a JSON file of the figures, for `placement-cost` and `calibrate`.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// Run the matplotlib `script` as `python3 -c SCRIPT DATA.json OUT.png TITLE`, DATA being
/// `data` as JSON in a temporary file.
pub fn matplotlib<T: serde::Serialize + ?Sized>(
    script: &str,
    data: &T,
    out: &Path,
    title: &str,
) -> Result<()> {
    let json = std::env::temp_dir().join(format!("scx_sisutil-plot-{}.json", std::process::id()));
    std::fs::write(&json, serde_json::to_string(data)?).context("writing the plot data")?;
    let res = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .arg(&json)
        .arg(out)
        .arg(title)
        .output();
    let _ = std::fs::remove_file(&json);
    let res = res.context("running /usr/bin/python3 for --plot")?;
    if !res.status.success() {
        let err = String::from_utf8_lossy(&res.stderr);
        bail!(
            "--plot: python3 failed (is matplotlib installed?): {}",
            err.lines().last().unwrap_or("")
        );
    }
    Ok(())
}
