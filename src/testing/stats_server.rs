// SPDX-License-Identifier: GPL-2.0-only
//! A fake stats server, for the monitor's unit tests (src/sched/stats.rs) and the command
//! line's (tests/tools_cli.rs, which includes this file by its path): std and tempfile only.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;

/// A stats server on a Unix socket in a private (0700) temporary directory named `prefix`...:
/// `serve` handles each connection in a thread of its own. The directory (the server's
/// lifetime) and the socket's path. The first failed accept ends the server.
pub fn fake_stats_server(
    prefix: &str,
    serve: impl Fn(UnixStream) + Send + Sync + 'static,
) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap();
    let path = dir.path().join("stats");
    let l = UnixListener::bind(&path).unwrap();
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(conn) = conn else { return };
            let serve = serve.clone();
            std::thread::spawn(move || serve(conn));
        }
    });
    (dir, path)
}
