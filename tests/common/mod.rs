// SPDX-License-Identifier: GPL-2.0-only
//! Helpers shared by the VM test binaries (tests/vm.rs, tests/reliability.rs).

use std::process::{Command, Stdio};

/// Runs tools/vm to completion and returns its output. Its stderr (the harness's timestamped
/// progress: kernel, guest image, boot, init, scheduler attach/detach) is forwarded line by
/// line as it arrives through eprintln: `cargo test -- --nocapture` shows a guest's progress
/// live, a normal run keeps it in the captured output of the test.
pub fn output_forwarding_progress(name: &str, cmd: &mut Command) -> std::process::Output {
    use std::io::{BufRead, BufReader, Read};
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run tools/vm");
    let err = child.stderr.take().expect("tools/vm stderr");
    let tag = name.to_string();
    let forward = std::thread::spawn(move || {
        let mut all = Vec::new();
        for line in BufReader::new(err).split(b'\n') {
            let Ok(line) = line else { break };
            eprintln!("[{tag}] vm: {}", String::from_utf8_lossy(&line));
            all.extend_from_slice(&line);
            all.push(b'\n');
        }
        all
    });
    let mut stdout = Vec::new();
    let _ = child
        .stdout
        .take()
        .expect("tools/vm stdout")
        .read_to_end(&mut stdout);
    let status = child.wait().expect("cannot wait for tools/vm");
    let stderr = forward.join().unwrap_or_default();
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}
