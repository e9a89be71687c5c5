//! What `raidcore` reads and keeps beside a pool: `status` of a stopped pool writes nothing
//! (every file byte-identical, on a read-only bind mount too) and names what is missing; error
//! counters and scan records survive restarts until `clear`.

#[path = "support/raidcore.rs"]
mod rc;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use rc::{RAIDCORE, ok, qemu_io, qemu_io_read_only, raidcore};
use serde_json::Value;
use support::{Served, run_ok, snapshot, tool};

/// A RAID-6 pool of five 32 MiB members and a spare, two LUNs of 4 MiB, in `tmp/pool`.
fn create(tmp: &Path) -> PathBuf {
    rc::create(tmp, "raid6", "5", "1", "32M", "4M")
}

/// `status --json` of `dir`, expecting exit status `code`.
fn status(dir: &str, code: i32) -> Value {
    let o = raidcore(&["status", "--dir", dir, "--json"]);
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A read-only bind mount of `src` at `at`, unmounted when dropped.
struct ReadOnlyMount(PathBuf);

impl ReadOnlyMount {
    fn new(src: &Path, at: &Path) -> Result<ReadOnlyMount, String> {
        std::fs::create_dir_all(at).unwrap();
        let run = |args: &[&str]| {
            let o = Command::new("mount")
                .args(args)
                .output()
                .map_err(|e| e.to_string())?;
            if o.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&o.stderr).into_owned())
            }
        };
        run(&["--bind", src.to_str().unwrap(), at.to_str().unwrap()])?;
        let m = ReadOnlyMount(at.to_path_buf());
        run(&["-o", "remount,bind,ro", at.to_str().unwrap()])?;
        Ok(m)
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `status` of a stopped pool changes no file (hashes, sizes and times before and after),
/// names a missing image without ejecting it (it counts again once back), and works on a
/// read-only bind mount.
#[test]
fn status_of_a_stopped_pool_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path());
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x42 0 3M"]);
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "{log}");

    let before = snapshot(&dir);
    let v = status(d, 0);
    assert_eq!(v["view"], "last checkpoint");
    assert_eq!(v["luns"][0]["logical_bytes"], 3 << 20);
    assert_eq!(snapshot(&dir), before, "status wrote to the pool directory");
    // An image gone: named, the pool degraded, nothing ejected.
    let aside = tmp.path().join("disk3.img");
    std::fs::rename(dir.join("disk3.img"), &aside).unwrap();
    let v = status(d, 1);
    assert_eq!(v["health"], "degraded");
    assert_eq!(v["disks"][3]["present"], false);
    assert!(
        v["problem"]
            .as_str()
            .unwrap()
            .contains("slot 3 has no image"),
        "{v}"
    );
    assert_eq!(v["spares"], 1, "the spare was not taken");
    std::fs::rename(&aside, dir.join("disk3.img")).unwrap();
    assert_eq!(snapshot(&dir), before);
    assert_eq!(status(d, 0)["health"], "online");

    let ro = tmp.path().join("ro");
    match ReadOnlyMount::new(&dir, &ro) {
        Ok(_mount) => {
            let v = status(ro.to_str().unwrap(), 0);
            assert_eq!(v["luns"][0]["logical_bytes"], 3 << 20);
            assert!(
                std::fs::write(ro.join("probe"), b"x").is_err(),
                "mounted read-only"
            );
        }
        Err(e) => eprintln!("SKIPPED the read-only bind mount (cannot mount here: {e})"),
    }
    assert_eq!(snapshot(&dir), before);
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["read -P 0x42 0 3M"]);
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "{log}");
}

/// A pool killed while served (its log to roll forward, its write hole to resync) is served
/// with `serve --read-only`: every block written reads back, writes are refused, and no file
/// of the directory changes, on a read-only bind mount too.
#[test]
fn a_killed_pool_is_served_read_only_without_a_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path());
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x42 0 3M", "flush"]);
    let (exit, log) = server.signal(libc::SIGKILL);
    assert!(!exit.success(), "{log}");
    // The killed server's control socket, which the next server replaces and removes.
    std::fs::remove_file(dir.join(".raidcore-control.sock")).unwrap();
    let before = snapshot(&dir);
    let read_back = |at: &Path| {
        let server = Served::start(RAIDCORE, at.to_str().unwrap(), &sock, &["--read-only"]);
        let out = qemu_io_read_only(&sock, "lun0", &["read -P 0x42 0 3M"]);
        assert!(out.contains("read 3145728/3145728"), "{out}");
        let at = at.to_str().unwrap();
        let o = raidcore(&["lun", "create", "--dir", at, "--name", "x", "--size", "4M"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success(),
            "a LUN was created on a read-only server"
        );
        // On the read-only mount there is no control socket, and the command's own open
        // cannot make the lock file.
        let why = ["served read-only", "Read-only file system"];
        assert!(why.iter().any(|w| err.contains(w)), "{err}");
        let (exit, log) = server.signal(libc::SIGTERM);
        assert!(exit.success(), "{log}");
        assert!(
            log.contains("read-only: every export refuses writes"),
            "{log}"
        );
    };
    read_back(&dir);
    assert_eq!(
        snapshot(&dir),
        before,
        "a read-only server changed the directory"
    );
    let ro = tmp.path().join("ro");
    match ReadOnlyMount::new(&dir, &ro) {
        Ok(_mount) => read_back(&ro),
        Err(e) => eprintln!("SKIPPED the read-only bind mount (cannot mount here: {e})"),
    }
    assert_eq!(snapshot(&dir), before);
}

/// Checksum errors a scrub found and repaired on one member are counted (repairs in bytes),
/// survive a restart of the server, and `clear` zeroes them; the last scrub stays on record.
#[test]
fn counters_survive_a_restart_until_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path());
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    // Incompressible, so that it fills the members past their labels and intent log.
    let content = support::pattern(19, 4 << 20);
    let src = tmp.path().join("src.bin");
    std::fs::write(&src, &content).unwrap();
    let uri = format!("nbd+unix:///lun0?socket={}", sock.display());
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&src).arg(&uri));
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "{log}");
    // Bit rot on member 1, where the data went.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("disk1.img"))
            .unwrap();
        f.write_all_at(&vec![0xee; 512 << 10], 3 << 19).unwrap();
    }
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    let v: Value = serde_json::from_str(&ok(&["scrub", "--dir", d, "--json"])).unwrap();
    let e = &v["disks"][1]["errors"];
    assert!(e["checksum"].as_u64().unwrap() > 0, "{v}");
    assert!(e["repaired_bytes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["disks"][0]["errors"]["checksum"], 0);
    let counted = e.clone();
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "{log}");
    assert_eq!(
        status(d, 0)["disks"][1]["errors"],
        counted,
        "read-only status"
    );
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    let v = status(d, 0);
    assert_eq!(v["disks"][1]["errors"], counted, "after a restart");
    assert!(
        v["last_scrub"]["repaired_blocks"].as_u64().unwrap() > 0,
        "{v}"
    );
    let back = tmp.path().join("back.bin");
    run_ok(tool("nbdcopy", "libnbd-bin").arg(&uri).arg(&back));
    assert!(std::fs::read(&back).unwrap() == content, "lun0 reads back");
    let v: Value = serde_json::from_str(&ok(&["clear", "--dir", d, "--json"])).unwrap();
    assert_eq!(v["disks"][1]["errors"]["checksum"], 0, "{v}");
    let (exit, log) = server.signal(libc::SIGTERM);
    assert!(exit.success(), "{log}");
    let v = status(d, 0);
    assert_eq!(v["disks"][1]["errors"]["checksum"], 0);
    assert!(v["last_scrub"].is_object());
    let events = ok(&["events", "--dir", d]);
    assert!(events.contains("error counters cleared"), "{events}");
}
