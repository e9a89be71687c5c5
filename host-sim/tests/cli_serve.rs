//! `raidcore-sim serve`: a pool directory exported over NBD on a Unix socket, written and read
//! by a real NBD client (libnbd's `nbdcopy`), stopped by SIGTERM; what was written is in the
//! images afterwards.

mod nbd_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use nbd_common::{run_ok, tool};
use raidcore_sim::workload::data::{DataKind, DataSource};

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .args(args)
        .output()
        .expect("run raidcore-sim")
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .args(["serve", "--dir", d, "--unix", sock.to_str().unwrap()])
        .env("RAIDCORE_SIM_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server says when it listens (a blocking read, no polling).
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = log.read_line(&mut line).unwrap();
        assert!(n > 0, "the server ended before listening:\n{seen}");
        seen.push_str(&line);
        if line.contains("listening on nbd+unix") {
            break;
        }
    }
    // Keep draining its log so it never blocks on a full pipe.
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut log, &mut rest);
        rest
    });

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
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    let rest = drain.join().unwrap();
    assert!(
        status.success(),
        "serve exited with {status}:\n{seen}{rest}"
    );

    // The images hold the data: status shows it, and a fresh server reads it back.
    let o = sim(&["status", "--dir", d, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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
