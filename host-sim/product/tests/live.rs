//! Operating a live pool with `raidcore`: every admin command against a served pool while a
//! client writes and verifies; background work with no client I/O at all (a rebuild and a
//! scrub finish, buffered writes reach the members after the destage delay); counters and
//! scan records survive restarts until `clear`; exit codes and JSON errors.

#[path = "support/raidcore.rs"]
mod rc;
mod support;

use std::path::{Path, PathBuf};

use rc::{RAIDCORE, json, ok, qemu_io, raidcore, stop};
use serde_json::Value;
use support::{RawNbd, Served, pattern, run_ok, tool};

/// A pool of 64 MiB disks with two LUNs of 8 MiB in `tmp/pool`.
fn create(tmp: &Path, level: &str, disks: &str, spares: &str) -> PathBuf {
    rc::create(tmp, level, disks, spares, "64M", "8M")
}

/// Runs raidcore expecting exit status `code`; returns stdout and stderr.
fn exits(code: i32, args: &[&str]) -> (String, String) {
    let o = raidcore(args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(
        o.status.code(),
        Some(code),
        "raidcore {args:?}:\n{out}\n{err}"
    );
    (out, err)
}

fn states(v: &Value) -> Vec<String> {
    v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap().to_string())
        .collect()
}

/// A client that writes a pattern over lun1 and reads it back, round after round, until
/// told to stop; the rounds it finished.
fn busy_client(sock: &Path, stop: &std::sync::atomic::AtomicBool) -> u32 {
    let mut rounds = 0u32;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds == 0 {
        let p = rounds % 200 + 1;
        qemu_io(
            sock,
            "lun1",
            &[&format!("write -P {p} 0 2M"), &format!("read -P {p} 0 2M")],
        );
        rounds += 1;
    }
    rounds
}

/// `online` of failed member 3 of the served pool in `dir` (a blank in its image's place is
/// refused; the image itself is resynced), then member 3 failed again.
fn online_while_served(dir: &Path) {
    let d = dir.to_str().unwrap();
    // The image in the directory is what comes back, not the file the server still holds:
    // a blank put in its place is refused.
    let img = dir.join("disk3.img");
    let aside = dir.join("disk3.img.aside");
    std::fs::rename(&img, &aside).unwrap();
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let (_, err) = exits(4, &["online", "--dir", d, "--disk", "3"]);
    assert!(err.contains("not the one that left member slot 3"), "{err}");
    std::fs::rename(&aside, &img).unwrap();
    // Brought back while the client writes: resynced, online; then failed again for the rest.
    let (out, err) = exits(0, &["online", "--dir", d, "--disk", "3", "--json"]);
    assert!(err.contains("disk 3 (disk3.img) is back online"), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(states(&v), vec!["online"; 6], "{v}");
    exits(4, &["online", "--dir", d, "--disk", "3"]);
    let v = json(&["fail", "--dir", d, "--disk", "3", "--json"]);
    assert_eq!(v["health"], "degraded");
}

/// `fail`, `replace --with`, `spare add`, `scrub`, `lun` on the served pool in `dir`.
fn membership_and_luns(dir: &Path, sock: &Path) {
    let d = dir.to_str().unwrap();
    // The spare takes slot 2 and is rebuilt while the client writes.
    let v = json(&["fail", "--dir", d, "--disk", "2", "--wait", "--json"]);
    assert_eq!(v["health"], "online", "{v}");
    assert_eq!(v["disks"][2]["image"], "disk6.img");
    assert_eq!(v["spares"], 0);
    // No spare left: degraded, and exit status 1 from status.
    let v = json(&["fail", "--dir", d, "--disk", "3", "--json"]);
    assert_eq!(v["health"], "degraded");
    let (out, _) = exits(1, &["status", "--dir", d]);
    assert!(
        out.contains("status: Member slot 3 failed (its image is left out)"),
        "{out}"
    );
    assert!(out.contains("it survives one more member failure"), "{out}");
    assert!(
        out.contains(&format!("`raidcore online --dir {d} --disk 3`; otherwise replace it: `raidcore replace --dir {d} --disk 3`")),
        "{out}"
    );
    // Too many failures are refused (exit 4), in JSON with --json.
    exits(4, &["fail", "--dir", d, "--disk", "3"]);
    let (out, _) = exits(4, &["fail", "--dir", d, "--disk", "9", "--json"]);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["kind"], "refused", "{out}");
    online_while_served(dir);
    // A named image replaces slot 3; the failed image stays where it is.
    let (out, err) = exits(
        0,
        &[
            "replace",
            "--dir",
            d,
            "--disk",
            "3",
            "--with",
            "disk9.img",
            "--json",
        ],
    );
    assert!(err.contains("disk 3 is now disk9.img"), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(states(&v), vec!["online"; 6], "{v}");
    assert!(dir.join("disk3.img").is_file() && dir.join("disk9.img").is_file());
    // A hot spare again, a scrub, LUNs.
    let (_, err) = exits(0, &["spare", "add", "--dir", d]);
    assert!(err.contains("disk10.img added as a hot spare"), "{err}");
    let v = json(&["scrub", "--dir", d, "--json"]);
    assert_eq!(v["scrub_unrepairable_blocks"], 0);
    assert_eq!(v["last_scrub"]["unrecoverable"], 0, "{v}");
    exits(4, &["scrub", "pause", "--dir", d]);
    ok(&[
        "lun", "create", "--dir", d, "--name", "extra", "--size", "4M",
    ]);
    let list = ok(&["lun", "list", "--dir", d]);
    assert!(list.contains("extra"), "{list}");
    qemu_io(sock, "extra", &["write -P 7 0 1M", "write -P 8 3M 1M"]);
    // Grown: a new client sees 8 MiB, the old data and zeros after it. Shrunk: the tail is
    // trimmed, so growing again shows zeros where it was.
    ok(&[
        "lun", "resize", "--dir", d, "--name", "extra", "--size", "8M",
    ]);
    qemu_io(
        sock,
        "extra",
        &["read -P 7 0 1M", "read -P 8 3M 1M", "read -P 0 4M 4M"],
    );
    ok(&[
        "lun", "resize", "--dir", d, "--name", "extra", "--size", "2M",
    ]);
    ok(&[
        "lun", "resize", "--dir", d, "--name", "extra", "--size", "4M",
    ]);
    qemu_io(sock, "extra", &["read -P 7 0 1M", "read -P 0 2M 2M"]);
    // 64 KiB has a map one level lower, 6 MiB one level higher again: the data stays.
    ok(&[
        "lun", "resize", "--dir", d, "--name", "extra", "--size", "64K",
    ]);
    qemu_io(sock, "extra", &["read -P 7 0 64K"]);
    ok(&[
        "lun", "resize", "--dir", d, "--name", "extra", "--size", "6M",
    ]);
    qemu_io(
        sock,
        "extra",
        &["read -P 7 0 64K", "read -P 0 64K 1M", "write -P 9 5M 1M"],
    );
    qemu_io(sock, "extra", &["read -P 7 0 64K", "read -P 9 5M 1M"]);
    let list = ok(&["lun", "list", "--dir", d, "--json"]);
    assert!(list.contains("6291456"), "{list}");
    ok(&["lun", "delete", "--dir", d, "--name", "extra"]);
    let exports = String::from_utf8_lossy(
        &run_ok(
            tool("nbdinfo", "libnbd-bin")
                .arg("--list")
                .arg(format!("nbd+unix:///?socket={}", sock.display())),
        )
        .stdout,
    )
    .into_owned();
    assert!(
        !exports.contains("extra") && exports.contains("lun1"),
        "{exports}"
    );
}

/// A hot spare leaves the served pool blank and can be added again; what is no spare is
/// refused (exit 4) saying what it is.
fn spare_removal(d: &str) {
    let (out, err) = exits(
        0,
        &[
            "spare",
            "remove",
            "--dir",
            d,
            "--image",
            "disk10.img",
            "--json",
        ],
    );
    assert!(
        err.contains("disk10.img removed from the hot spares"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["spares"], 0, "{v}");
    let (_, err) = exits(4, &["spare", "remove", "--dir", d, "--image", "disk10.img"]);
    assert!(err.contains("disk10.img is no hot spare"), "{err}");
    let (_, err) = exits(4, &["spare", "remove", "--dir", d, "--image", "disk9.img"]);
    assert!(err.contains("the member of slot 3"), "{err}");
    // Blank again: `spare add` takes the same image.
    let (_, err) = exits(0, &["spare", "add", "--dir", d, "--image", "disk10.img"]);
    assert!(err.contains("disk10.img added as a hot spare"), "{err}");
    assert_eq!(json(&["status", "--dir", d, "--json"])["spares"], 1);
}

/// Refusals change nothing; the event log tells what happened, in words.
fn refusals_and_events(d: &str) {
    let (_, err) = exits(4, &["online", "--dir", d, "--disk", "3"]);
    assert!(
        err.contains("only a failed member is brought back"),
        "{err}"
    );
    // Resuming a pool that is not suspended only writes out what waits.
    exits(0, &["resume", "--dir", d]);
    let events = ok(&["events", "--dir", d]);
    for want in [
        "member 2 failed by the operator",
        "a hot spare took member slot 2",
        "disk 3 (disk3.img) is back online",
        "rebuild of member 2 finished",
        "scrub finished",
        "LUN 2 \"extra\" created",
        "LUN 2 \"extra\" resized from 8 MiB to 2 MiB",
        "disk10.img removed from the hot spares",
    ] {
        assert!(events.contains(want), "{want:?} in:\n{events}");
    }
    assert_eq!(
        events.matches("member 2 failed").count(),
        1,
        "one line for the operator's fail, no device error made up:\n{events}"
    );
    assert!(
        !events.contains("DiskFailed"),
        "words, not Debug syntax:\n{events}"
    );
}

/// Every admin command against a served RAID-6 pool while a client writes and verifies: the
/// commands go through the server's control channel (the pool is never opened twice), and
/// what the core cannot do yet is refused with exit status 4 and a clear message.
#[test]
fn admin_commands_reach_a_served_pool_while_a_client_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid6", "6", "1");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x5c 0 4M"]);
    let stop_flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let (s, f) = (sock.clone(), std::sync::Arc::clone(&stop_flag));
        std::thread::spawn(move || busy_client(&s, &f))
    };

    let v = json(&["status", "--dir", d, "--json"]);
    assert_eq!(v["health"], "online");
    assert_eq!(v["view"], "live");
    assert!(
        v["background"]["policy"]
            .as_str()
            .unwrap()
            .starts_with("share:"),
        "{v}"
    );
    let text = ok(&[
        "status",
        "--dir",
        d,
        "--watch",
        "--interval",
        "0.1",
        "--count",
        "2",
    ]);
    assert_eq!(text.matches(" state: ONLINE").count(), 2, "{text}");
    membership_and_luns(&dir, &sock);
    spare_removal(d);
    refusals_and_events(d);
    ok(&["clear", "--dir", d]);
    // A second server is still refused: the pool is open once.
    let other = tmp.path().join("other.sock");
    let (_, err) = exits(5, &["serve", "--dir", d, "--unix", other.to_str().unwrap()]);
    assert!(err.contains("in use by a running server"), "{err}");

    stop_flag.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = client.join().unwrap();
    assert!(rounds > 0);
    qemu_io(&sock, "lun0", &["read -P 0x5c 0 4M"]);
    let log = stop(server);
    assert!(log.contains("member 3 failed"), "{log}");
    // Stopped: the same commands open the pool themselves and say the same.
    let list_stopped = ok(&["lun", "list", "--dir", d]);
    assert_eq!(list_stopped, ok(&["lun", "list", "--dir", d]));
    assert!(list_stopped.contains("lun1") && !list_stopped.contains("extra"));
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["read -P 0x5c 0 4M"]);
    stop(server);
}

/// With no client I/O at all, a served pool rebuilds a replaced member and scrubs to the end
/// on the server's timer.
#[test]
fn a_rebuild_and_a_scrub_finish_with_no_client_io() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "0");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x33 0 8M"]);
    stop(server);
    ok(&["fail", "--dir", d, "--disk", "1"]);
    let mut server = Served::start(RAIDCORE, d, &sock, &[]);
    let v = json(&["replace", "--dir", d, "--disk", "1", "--no-wait", "--json"]);
    assert!(
        v["rebuild"].is_object(),
        "the rebuild is left to the server: {v}"
    );
    server.wait_log("rebuild of member 1 finished");
    json(&["scrub", "start", "--dir", d, "--no-wait", "--json"]);
    let line = server.wait_log("scrub finished");
    assert!(line.contains("0 could not be repaired"), "{line}");
    let v = json(&["status", "--dir", d, "--json"]);
    assert_eq!(v["health"], "online");
    assert!(v["rebuild"].is_null() && v["scrub"].is_null(), "{v}");
    assert!(v["last_rebuild"]["stripes"].as_u64().unwrap() > 0, "{v}");
    stop(server);
    // The records survive the restart.
    let v = json(&["status", "--dir", d, "--json"]);
    assert!(
        v["last_scrub"].is_object() && v["last_rebuild"].is_object(),
        "{v}"
    );
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["read -P 0x33 0 8M"]);
    stop(server);
}

/// With `--background limits:MIN-MAX` the pool paces its own rebuild (the server makes each
/// step when the pool says) and the rebuild still finishes with no client I/O; `status` names
/// the policy, and the data reads back.
#[test]
fn a_rebuild_paced_by_the_pool_finishes_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "0");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x5a 0 8M"]);
    stop(server);
    ok(&["fail", "--dir", d, "--disk", "2"]);
    let args = ["--background", "limits:64M-1G"];
    let mut server = Served::start(RAIDCORE, d, &sock, &args);
    // Degraded: `status` exits 1.
    let (out, _) = exits(1, &["status", "--dir", d, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["background"]["policy"], "limits:64 MiB/s-1 GiB/s (paced by the pool)",
        "{v}"
    );
    json(&["replace", "--dir", d, "--disk", "2", "--no-wait", "--json"]);
    server.wait_log("rebuild of member 2 finished");
    let v = json(&["status", "--dir", d, "--json"]);
    assert_eq!(v["health"], "online", "{v}");
    qemu_io(&sock, "lun0", &["read -P 0x5a 0 8M"]);
    stop(server);
}

/// Eight 4 KiB writes, never flushed by the client, are on the members once the destage
/// delay has passed: the server is killed (SIGKILL) after it wrote them out, and a new one
/// reads every one back.
#[test]
fn unflushed_writes_reach_the_members_after_the_destage_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid6", "5", "0");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let mut server =
        Served::start_logging(RAIDCORE, d, &sock, &["--destage-delay", "200ms"], "debug");
    let mut c = RawNbd::connect(&sock, "lun0");
    for i in 0..8u64 {
        c.write(i * 256 * 4096, &vec![0xa0 + i as u8; 4096]);
    }
    server.wait_log("destaged the buffered writes");
    let (exit, log) = server.signal(libc::SIGKILL);
    assert!(!exit.success(), "killed:\n{log}");
    drop(c);
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    assert!(
        server.log().contains("was not shut down cleanly"),
        "import says what it recovered:\n{}",
        server.log()
    );
    for i in 0..8u64 {
        qemu_io(
            &sock,
            "lun0",
            &[&format!("read -P {} {} 4k", 0xa0 + i, i * 256 * 4096)],
        );
    }
    stop(server);
}

/// Clap's usage errors exit with 64, not with a code `status` gives a pool's health.
#[test]
fn usage_errors_have_their_own_exit_status() {
    exits(64, &["status"]);
    exits(64, &["fail", "--dir", "/nonexistent", "--disk", "x"]);
    let (out, _) = exits(0, &["--help"]);
    assert!(out.contains("status"), "{out}");
    let tmp = tempfile::tempdir().unwrap();
    let (out, _) = exits(
        6,
        &["status", "--dir", tmp.path().to_str().unwrap(), "--json"],
    );
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["kind"], "failed", "{out}");
    let _ = pattern(1, 1);
}

/// `serve` tells systemd it is ready once it listens (`NOTIFY_SOCKET`, `Type=notify`), and
/// `raidcore completions` and `raidcore man` come from the command definitions.
#[test]
fn serve_notifies_systemd_and_the_command_documents_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "3", "0");
    let notify = tmp.path().join("notify");
    let listener = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    listener.set_read_timeout(Some(support::GUARD)).unwrap();
    let server = Served::start_with_env(
        RAIDCORE,
        dir.to_str().unwrap(),
        &tmp.path().join("nbd.sock"),
        &[],
        "info",
        &[("NOTIFY_SOCKET", notify.to_str().unwrap())],
    );
    let mut buf = [0u8; 64];
    let n = listener.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    stop(server);
    let n = listener.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    let bash = ok(&["completions", "bash"]);
    assert!(
        bash.contains("raidcore") && bash.contains("scrub"),
        "{bash}"
    );
    let man = ok(&["man"]);
    assert!(man.contains(".TH raidcore 1"), "{man}");
}
