//! What the `raidcore` command-line tests share (tests/cli.rs, live.rs, records.rs): running
//! the binary, `qemu-io` on a served LUN, a pool to work on, a clean stop.
#![allow(dead_code)] // each test file uses a different part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::support::{Served, run_ok, tool};

/// The `raidcore` binary.
pub const RAIDCORE: &str = env!("CARGO_BIN_EXE_raidcore");

/// Runs raidcore with `args`.
pub fn raidcore(args: &[&str]) -> Output {
    Command::new(RAIDCORE)
        .args(args)
        .output()
        .expect("run raidcore")
}

/// Runs raidcore expecting success; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    String::from_utf8(run_ok(Command::new(RAIDCORE).args(args)).stdout).unwrap()
}

/// Runs raidcore expecting success; its stdout as JSON.
pub fn json(args: &[&str]) -> Value {
    let out = ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("raidcore {args:?}: {e}: {out}"))
}

/// `qemu-io` commands (`-c …` each) on export `lun` of the server at `sock`; fails the test if
/// a `read -P` finds another pattern. Its stdout.
pub fn qemu_io(sock: &Path, lun: &str, cmds: &[&str]) -> String {
    qemu_io_opened(sock, lun, &[], cmds)
}

/// [`qemu_io`] with the export opened read-only (`-r`), as a read-only export must be.
pub fn qemu_io_read_only(sock: &Path, lun: &str, cmds: &[&str]) -> String {
    qemu_io_opened(sock, lun, &["-r"], cmds)
}

/// [`qemu_io`] with the open options `opts`.
fn qemu_io_opened(sock: &Path, lun: &str, opts: &[&str], cmds: &[&str]) -> String {
    let mut c = tool("qemu-io", "qemu-utils");
    c.args(opts)
        .args(["-f", "raw"])
        .arg(format!("nbd+unix:///{lun}?socket={}", sock.display()));
    for cmd in cmds {
        c.args(["-c", cmd]);
    }
    String::from_utf8_lossy(&run_ok(&mut c).stdout).into_owned()
}

/// Stops a server with SIGTERM; its exit status must be 0 (a clean stop: flush, checkpoint).
pub fn stop(server: Served) -> String {
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "serve exited with {exit}:\n{log}");
    log
}

/// A pool of `disks` members and `spares` hot spares of `disk_size`, two LUNs of `lun_size`,
/// in `tmp/pool`; returns the directory.
pub fn create(
    tmp: &Path,
    level: &str,
    disks: &str,
    spares: &str,
    disk_size: &str,
    lun_size: &str,
) -> PathBuf {
    create_with(tmp, &[level, disks, spares, disk_size, lun_size], &[])
}

/// [`create`] with `level, disks, spares, disk_size, lun_size` in `shape` and more arguments
/// (`--sparse`, …) in `extra`.
pub fn create_with(tmp: &Path, shape: &[&str; 5], extra: &[&str]) -> PathBuf {
    let args = create_args(tmp, shape, extra);
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    tmp.join("pool")
}

/// The arguments of [`create_with`], for a `create` expected to fail.
pub fn create_args(tmp: &Path, shape: &[&str; 5], extra: &[&str]) -> Vec<String> {
    let [level, disks, spares, disk_size, lun_size] = *shape;
    let dir = tmp.join("pool");
    let mut args = vec![
        "create",
        "--dir",
        dir.to_str().unwrap(),
        "--level",
        level,
        "--disks",
        disks,
        "--spares",
        spares,
        "--disk-size",
        disk_size,
        "--luns",
        "2",
        "--lun-size",
        lun_size,
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}
