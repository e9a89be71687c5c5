//! `raidcore-sim serve`: a pool directory exported over NBD on a Unix socket, written and read
//! by a real NBD client (libnbd's `nbdcopy`), stopped by SIGTERM; what was written is in the
//! images afterwards; a SIGKILL loses nothing that was flushed; a RAID-6 pool with two images
//! removed is served degraded and reads back every byte.

mod nbd_common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use nbd_common::{Served, run_ok, tool};
use raidcore_sim::workload::data::{DataKind, DataSource};

/// The `raidcore-sim` binary.
const SIM: &str = env!("CARGO_BIN_EXE_raidcore-sim");

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(SIM)
        .args(args)
        .output()
        .expect("run raidcore-sim")
}

/// `len` bytes of this machine's files (4 KiB blocks `first..`), as a file to copy in.
fn real_bytes(first: u64, len: usize) -> Vec<u8> {
    let data = DataSource::new(DataKind::Real, 4 << 20, 0).unwrap();
    let mut content = Vec::with_capacity(len);
    for id in first..first + (len / 4096) as u64 {
        content.extend(data.block(id));
    }
    content
}

fn create_raid6(d: &str, luns: &str, lun_size: &str) {
    let o = sim(&[
        "create",
        "--dir",
        d,
        "--level",
        "raid6",
        "--disks",
        "6",
        "--disk-size",
        "64M",
        "--luns",
        luns,
        "--lun-size",
        lun_size,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn status_json(d: &str) -> serde_json::Value {
    let o = sim(&["status", "--dir", d, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn serve_a_pool_to_nbdcopy_and_stop_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    let o = sim(&[
        "create",
        "--dir",
        d,
        "--level",
        "raid5",
        "--disks",
        "4",
        "--spares",
        "1",
        "--disk-size",
        "64M",
        "--luns",
        "2",
        "--lun-size",
        "4M",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // 4 MiB of this machine's files, as a file to copy in.
    let data = DataSource::new(DataKind::Real, 4 << 20, 0).unwrap();
    let mut content = Vec::new();
    for id in 0..1024 {
        content.extend(data.block(id));
    }
    let src = tmp.path().join("src.bin");
    std::fs::write(&src, &content).unwrap();

    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(SIM, d, &sock, &[]);

    let uri = |lun: &str| format!("nbd+unix:///{lun}?socket={}", sock.display());
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&src).arg(uri("lun1")));
    let back = tmp.path().join("back.bin");
    run_ok(tool("nbdcopy", "libnbd-bin").arg(uri("lun1")).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == content,
        "lun1 reads back what was copied in"
    );
    let info = run_ok(
        tool("nbdinfo", "libnbd-bin")
            .arg("--list")
            .arg(format!("nbd+unix:///?socket={}", sock.display())),
    );
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("lun0") && info.contains("lun1"), "{info}");

    // SIGTERM: a graceful stop (flush, checkpoint), exit status 0.
    let (status, log) = server.signal(libc::SIGTERM);
    assert!(status.success(), "serve exited with {status}:\n{log}");

    // The images hold the data: status shows it, and a fresh server reads it back.
    let v = status_json(d);
    assert_eq!(v["health"], "online");
    // nbdcopy skips blocks of zeros (they read as zeros anyway); every other block is mapped.
    let nonzero = content
        .chunks_exact(4096)
        .filter(|b| b.iter().any(|&x| x != 0))
        .count() as u64;
    let logical = v["luns"][1]["logical_bytes"].as_u64().unwrap();
    assert!(
        (nonzero * 4096..=4 << 20).contains(&logical),
        "{logical} bytes mapped, {nonzero} blocks not zero"
    );
    assert_eq!(v["luns"][0]["logical_bytes"], 0);
    assert!(v["luns"][1]["physical_bytes"].as_u64().unwrap() > 0);
}

/// Bytes written, writes and flushes of export 0 in the server's stats file, from a snapshot
/// taken at or after `since` (milliseconds since the Unix epoch); `None` until there is one.
fn written(stats: &Path, since: u64) -> Option<(u64, u64, u64)> {
    let s = raidcore_sim::nbd::stats::read_stats_file(stats).ok()?;
    let e = &s.exports[0];
    (s.unix_time_ms >= since).then_some((e.bytes.write, e.ops.write, e.ops.flush))
}

fn now_ms() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(t.unwrap().as_millis()).unwrap()
}

/// Waits (bounded poll of observable state, never a timing assertion) until `cond` holds.
fn wait_for<T>(what: &str, mut cond: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            start.elapsed() < nbd_common::GUARD,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn sigkill_in_the_middle_of_writes_loses_nothing_flushed() {
    const MIB: usize = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    create_raid6(d, "1", "16M");

    // Region 1: 4 MiB of this machine's files, copied in by nbdcopy; `--flush` makes it send
    // NBD_CMD_FLUSH at the end (without it nbdcopy only disconnects, which is no flush).
    let first = real_bytes(0, 4 * MIB);
    let src = tmp.path().join("first.bin");
    std::fs::write(&src, &first).unwrap();
    let sock = tmp.path().join("nbd.sock");
    let stats = tmp.path().join("stats.json");
    let uri = format!("nbd+unix:///lun0?socket={}", sock.display());
    let server = Served::start(SIM, d, &sock, &["--stats", stats.to_str().unwrap()]);
    run_ok(
        tool("nbdcopy", "libnbd-bin")
            .arg("--flush")
            .arg(&src)
            .arg(&uri),
    );
    let nonzero = first
        .chunks_exact(4096)
        .filter(|b| b.iter().any(|&x| x != 0))
        .count() as u64;
    // The counts of the first snapshot taken after the copy ended.
    let done = now_ms() + 1;
    let (base, _, flushes) = wait_for("the stats of the first copy", || written(&stats, done));
    assert!(base >= nonzero * 4096, "{base} bytes written");
    // One flush per connection nbdcopy opened (it uses several when multi-conn is offered).
    assert!(flushes >= 1, "nbdcopy --flush sent no flush");

    // Region 2 (from 8 MiB): qemu-io writes 1 MiB patterns in writeback mode (no flush), one
    // command at a time on its stdin; once the server has taken the first, SIGKILL it while
    // qemu-io is still connected with more to write.
    let mut qemu = tool("qemu-io", "qemu-utils")
        .args(["-f", "raw", "-t", "writeback", &uri])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut cmds = qemu.stdin.take().unwrap();
    writeln!(cmds, "write -P 0x5a {} {}", 8 * MIB, MIB).unwrap();
    cmds.flush().unwrap();
    let (_, _, f) = wait_for("the first qemu-io write", || {
        written(&stats, 0).filter(|&(b, _, _)| b >= base + MIB as u64)
    });
    assert_eq!(f, flushes, "qemu-io in writeback mode sent no flush");
    writeln!(cmds, "write -P 0x5a {} {}", 9 * MIB, MIB).unwrap();
    writeln!(cmds, "write -P 0x5a {} {}", 10 * MIB, MIB).unwrap();
    cmds.flush().unwrap();
    let (status, log) = server.signal(libc::SIGKILL);
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{log}");
    drop(cmds);
    let _ = qemu.wait();

    // Restart on the same directory (recovery), copy the whole LUN back out.
    let server = Served::start(SIM, d, &sock, &[]);
    let back = tmp.path().join("back.bin");
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&uri).arg(&back));
    let back = std::fs::read(&back).unwrap();
    assert_eq!(back.len(), 16 * MIB);
    assert!(
        back[..4 * MIB] == first[..],
        "region 1 (flushed before the SIGKILL) is intact"
    );
    // Nothing else was ever written below 8 MiB or from 11 MiB on: zeros.
    assert!(back[4 * MIB..8 * MIB].iter().all(|&b| b == 0));
    assert!(back[11 * MIB..].iter().all(|&b| b == 0));
    // The unflushed writes may be lost, but each 4 KiB block is all old or all new.
    for (i, b) in back[8 * MIB..11 * MIB].chunks_exact(4096).enumerate() {
        assert!(
            b.iter().all(|&x| x == 0) || b.iter().all(|&x| x == 0x5a),
            "block {i} of region 2 is torn"
        );
    }
    let (status, log) = server.signal(libc::SIGTERM);
    assert!(status.success(), "serve exited with {status}:\n{log}");
}

#[test]
fn raid6_without_two_images_serves_degraded_and_reads_back_every_byte() {
    const MIB: usize = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    create_raid6(d, "1", "16M");

    // The whole LUN: 16 MiB of this machine's files.
    let content = real_bytes(0, 16 * MIB);
    let src = tmp.path().join("src.bin");
    std::fs::write(&src, &content).unwrap();
    let sock = tmp.path().join("nbd.sock");
    let uri = format!("nbd+unix:///lun0?socket={}", sock.display());
    let server = Served::start(SIM, d, &sock, &[]);
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&src).arg(&uri));
    let (status, log) = server.signal(libc::SIGTERM);
    assert!(status.success(), "serve exited with {status}:\n{log}");
    assert_eq!(status_json(d)["health"], "online");

    // Two of the six images gone (RAID-6 survives two).
    std::fs::remove_file(dir.join("disk1.img")).unwrap();
    std::fs::remove_file(dir.join("disk4.img")).unwrap();
    let v = status_json(d);
    assert_eq!(v["health"], "degraded", "{v:#}");

    let server = Served::start(SIM, d, &sock, &[]);
    let back = tmp.path().join("back.bin");
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&uri).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == content,
        "every byte reads back from the degraded pool"
    );
    let (status, log) = server.signal(libc::SIGTERM);
    assert!(status.success(), "serve exited with {status}:\n{log}");
    assert_eq!(status_json(d)["health"], "degraded");
}
