//! The `raidcore` command on a pool directory, run as a binary: create, status (text and
//! JSON), serve to real NBD clients (qemu-io, nbdcopy, nbdinfo) and stop on SIGTERM, fail,
//! replace, scrub; a pool recorded with a device model is served as plain files. (Commands on
//! a served pool: tests/live.rs.)

#[path = "support/raidcore.rs"]
mod rc;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use rc::{RAIDCORE, json, ok, qemu_io, raidcore, stop};
use serde_json::Value;
use support::{Served, pattern, run_ok, snapshot, tool};

/// A pool of `disks` members and `spares` hot spares of 64 MiB, two LUNs of 4 MiB, in
/// `tmp/pool`; returns the directory.
fn create(tmp: &Path, level: &str, disks: &str, spares: &str) -> PathBuf {
    rc::create(tmp, level, disks, spares, "64M", "4M")
}

fn status(dir: &str) -> Value {
    json(&["status", "--dir", dir, "--json"])
}

/// Runs `cmd` expecting exit status 0; returns its stdout.
fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run_ok(cmd).stdout).into_owned()
}

/// `raidcore serve --dir DIR --unix SOCK`, listening.
fn serve(dir: &str, sock: &Path) -> Served {
    Served::start(RAIDCORE, dir, sock, &[])
}

fn states(v: &Value) -> Vec<&str> {
    v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap())
        .collect()
}

#[test]
fn create_prints_the_status_and_status_reads_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    let args = [
        "create",
        "--dir",
        d,
        "--level",
        "raid6",
        "--disks",
        "6",
        "--spares",
        "1",
        "--disk-size",
        "64M",
        "--luns",
        "3",
        "--lun-size",
        "4M",
        "--json",
    ];
    let v = json(&args);
    assert_eq!(v["health"], "online");
    assert_eq!(v["level"], "raid6");
    assert_eq!(v["model"], "memory");
    assert_eq!(v["spares"], 1);
    assert_eq!(v["disks"][5]["image"], "disk5.img");
    assert_eq!(v["luns"][2]["size_bytes"], 4 << 20);
    for n in 0..7 {
        assert!(dir.join(format!("disk{n}.img")).is_file(), "disk{n}.img");
    }
    // The layout the simulator knows too: the same description and lock file names.
    assert!(dir.join("raidcore-sim.json").is_file());
    assert!(dir.join(".raidcore-sim.lock").is_file());
    let again = status(d);
    assert_eq!(again["disks"], v["disks"]);
    assert_eq!(again["luns"], v["luns"]);
    let text = ok(&["status", "--dir", d]);
    assert!(text.contains("state: ONLINE"), "{text}");
    assert!(text.contains("lun2"), "{text}");
    // A second create without --force changes nothing and says why (exit status 4: refused).
    let o = raidcore(&args);
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
}

#[test]
fn serve_to_qemu_io_and_nbdcopy_then_stop_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "1");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let content = pattern(16, 4 << 20);
    let src = tmp.path().join("src.bin");
    std::fs::write(&src, &content).unwrap();

    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0xab 0 1M", "read -P 0xab 0 1M"]);
    let uri = format!("nbd+unix:///lun1?socket={}", sock.display());
    run(tool("nbdcopy", "libnbd-bin").arg(&src).arg(&uri));
    let back = tmp.path().join("back.bin");
    run(tool("nbdcopy", "libnbd-bin").arg(&uri).arg(&back));
    assert!(std::fs::read(&back).unwrap() == content, "lun1 reads back");
    let list = run(tool("nbdinfo", "libnbd-bin")
        .arg("--list")
        .arg(format!("nbd+unix:///?socket={}", sock.display())));
    assert!(list.contains("lun0") && list.contains("lun1"), "{list}");
    let log = stop(server);
    assert!(
        log.contains("raidcore: serving export \"lun1\" (4 MiB)"),
        "{log}"
    );

    // The images hold it: status counts it, and a new server reads it back.
    let v = status(d);
    assert_eq!(v["health"], "online");
    assert_eq!(v["luns"][0]["logical_bytes"], 1 << 20);
    assert_eq!(v["luns"][1]["logical_bytes"], 4 << 20);
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["read -P 0xab 0 1M", "read -P 0 1M 3M"]);
    run(tool("nbdcopy", "libnbd-bin").arg(&uri).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == content,
        "lun1 after a restart"
    );
    stop(server);
}

#[test]
fn fail_replace_and_scrub_keep_the_data() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid6", "6", "1");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x5c 0 2M"]);
    stop(server);

    // The hot spare takes slot 2 and is rebuilt.
    let v = json(&["fail", "--dir", d, "--disk", "2", "--wait", "--json"]);
    assert_eq!(v["health"], "online", "{v}");
    assert_eq!(v["spares"], 0);
    assert_eq!(v["disks"][2]["image"], "disk6.img");
    // No spare left: degraded; a blank image replaces the failed member and is rebuilt.
    let v = json(&["fail", "--dir", d, "--disk", "3", "--json"]);
    assert_eq!(v["health"], "degraded");
    assert_eq!(states(&v)[3], "failed");
    let o = raidcore(&["replace", "--dir", d, "--disk", "3", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("raidcore: disk 3 is now disk3.img"));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["health"], "online", "{v}");
    assert_eq!(states(&v), ["online"; 6]);
    let kept: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("disk3.img.failed-g"))
        .collect();
    assert_eq!(kept.len(), 1, "the failed image is kept aside: {kept:?}");
    let v = json(&["scrub", "--dir", d, "--json"]);
    assert_eq!(v["health"], "online");
    assert_eq!(v["scrub_unrepairable_blocks"], 0);

    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["read -P 0x5c 0 2M"]);
    stop(server);
}

/// A member failed by hand misses writes while it is out; `online` brings its image back and
/// resyncs what it missed, so that with another member failed the data still reads whole.
#[test]
fn a_member_brought_back_online_misses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "0");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x11 0 2M"]);
    stop(server);
    let v = json(&["fail", "--dir", d, "--disk", "1", "--json"]);
    assert_eq!(v["health"], "degraded", "{v}");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x22 1M 1M"]);
    stop(server);
    let o = raidcore(&["online", "--dir", d, "--disk", "1", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("disk 1 (disk1.img) is back online"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(states(&v), ["online"; 4], "{v}");
    assert_eq!(v["disks"][1]["image"], "disk1.img", "{v}");
    let o = raidcore(&["online", "--dir", d, "--disk", "1"]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "a member in sync is not brought back"
    );
    // Member 1 alone now holds what member 2 held: both writes must read back.
    let v = json(&["fail", "--dir", d, "--disk", "2", "--json"]);
    assert_eq!(v["health"], "degraded", "{v}");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["read -P 0x11 0 1M", "read -P 0x22 1M 1M"]);
    stop(server);
}

/// An older copy of a member's image put back in its place (the pool wrote since it was
/// taken) is not served as in sync: import says the slot missed writes and resyncs what it
/// missed, and then, with another member failed, both writes read back.
#[test]
fn an_older_copy_of_a_member_image_put_back_is_resynced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "0");
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x11 0 2M"]);
    stop(server);
    let old = tmp.path().join("disk2.img.old");
    std::fs::copy(dir.join("disk2.img"), &old).unwrap();
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x22 1M 1M"]);
    stop(server);
    std::fs::rename(&old, dir.join("disk2.img")).unwrap();
    let o = raidcore(&["import", "--dir", d, "--read-only", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the import will resync what they missed"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["import"]["behind"], serde_json::json!([2]), "{v}");
    assert!(v["import"]["root_gen"].as_u64() > Some(0), "{v}");
    let o = raidcore(&["status", "--dir", d, "--json"]);
    assert_eq!(o.status.code(), Some(1), "degraded until resynced");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(states(&v)[2], "rebuilding", "a stopped pool's status: {v}");
    let o = raidcore(&["import", "--dir", d, "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("slot(s) 2 hold older contents than the rest of the pool"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["import"]["behind"], serde_json::json!([2]), "{v}");
    assert_eq!(states(&v)[2], "rebuilding", "{v}");
    let v = json(&["scrub", "--dir", d, "--json"]);
    assert_eq!(states(&v), ["online"; 4], "{v}");
    let v = json(&["fail", "--dir", d, "--disk", "1", "--json"]);
    assert_eq!(v["health"], "degraded", "{v}");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["read -P 0x11 0 1M", "read -P 0x22 1M 1M"]);
    stop(server);
}

/// A copy of a member's image beside it: neither is used (either could be the real one), the
/// status names both, nothing is written to them, and with the copy removed `online` brings
/// the member back.
#[test]
fn a_copy_of_a_member_image_is_named_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "3", "0");
    let d = dir.to_str().unwrap();
    std::fs::copy(dir.join("disk2.img"), dir.join("disk7.img")).unwrap();
    let before = std::fs::read(dir.join("disk2.img")).unwrap();
    let o = raidcore(&["status", "--dir", d]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "degraded without slot 2: {out}");
    assert!(
        out.contains("disk7.img (the same disk as disk2.img (a copy?)"),
        "{out}"
    );
    ok(&["lun", "list", "--dir", d]);
    assert!(
        std::fs::read(dir.join("disk2.img")).unwrap() == before,
        "disk2.img untouched"
    );
    assert!(
        std::fs::read(dir.join("disk7.img")).unwrap() == before,
        "disk7.img untouched"
    );
    // The pool was opened without slot 2, so its configuration names it failed now; with
    // the copy gone, `online` brings disk2.img back.
    std::fs::remove_file(dir.join("disk7.img")).unwrap();
    let v = json(&["online", "--dir", d, "--disk", "2", "--json"]);
    assert_eq!(v["health"], "online", "{v}");
}

/// Bytes the file system allocated to `path`.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// `create` allocates the images whole; `--sparse` leaves them to fill as the pool writes,
/// and replacements follow the pool's choice.
#[test]
fn create_allocates_images_unless_sparse() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "3", "0");
    let d = dir.to_str().unwrap();
    let len = std::fs::metadata(dir.join("disk0.img")).unwrap().len();
    assert!(allocated(&dir.join("disk0.img")) >= len, "allocated whole");
    ok(&["fail", "--dir", d, "--disk", "1"]);
    ok(&["replace", "--dir", d, "--disk", "1"]);
    assert!(
        allocated(&dir.join("disk1.img")) >= len,
        "the replacement too"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = rc::create_with(tmp.path(), &["raid5", "3", "0", "64M", "8M"], &["--sparse"]);
    assert!(allocated(&dir.join("disk0.img")) < len / 4, "sparse");
}

/// `raidcore-sim create --model hdd10k` records the model in the description; `raidcore`
/// serves such a pool as plain files (the model is timing for the simulator) and reports it.
/// The image a spare is on follows the spare by its GUID whatever the image numbers, into the
/// slot it takes; `spare remove` leaves an image blank, and refuses a member naming its slot.
#[test]
fn spares_are_followed_by_guid_and_leave_blank() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "4", "0");
    let d = dir.to_str().unwrap();
    for image in ["disk9.img", "disk5.img"] {
        ok(&["spare", "add", "--dir", d, "--image", image]);
    }
    let v = json(&["fail", "--dir", d, "--disk", "1", "--wait", "--json"]);
    assert_eq!(v["health"], "online", "{v}");
    let took = v["disks"][1]["image"].as_str().unwrap().to_string();
    let left = if took == "disk9.img" {
        "disk5.img"
    } else {
        "disk9.img"
    };
    let spares: Vec<&str> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "spare")
        .map(|i| i["file"].as_str().unwrap())
        .collect();
    assert_eq!(spares, [left], "{v}");
    let o = raidcore(&["spare", "remove", "--dir", d, "--image", &took]);
    assert_eq!(o.status.code(), Some(4));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("it is the member of slot 1"), "{err}");
    let v = json(&["spare", "remove", "--dir", d, "--image", left, "--json"]);
    assert_eq!(v["spares"], 0, "{v}");
    let text = ok(&["status", "--dir", d]);
    assert!(
        text.contains(&format!("left out: {left} (no raidcore superblock)")),
        "{text}"
    );
}

#[test]
fn a_pool_recorded_with_a_device_model_is_served_as_plain_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid5", "3", "0");
    let d = dir.to_str().unwrap();
    let meta = dir.join("raidcore-sim.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    assert!(text.contains("\"memory\""), "{text}");
    std::fs::write(&meta, text.replace("\"memory\"", "\"hdd10k\"")).unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(
        &sock,
        "lun1",
        &["write -P 0x17 4k 64k", "read -P 0x17 4k 64k"],
    );
    stop(server);
    let v = status(d);
    assert_eq!(v["model"], "hdd10k");
    assert_eq!(v["luns"][1]["logical_bytes"], 64 << 10);
    let text = ok(&["status", "--dir", d]);
    assert!(
        text.contains(
            "layout: raid5 strip 64 KiB, 3 disks, device model hdd10k (simulated timing)"
        ),
        "{text}"
    );
}

/// A stopped RAID-6 with two members failed by hand: `status` says no redundancy is left and
/// names the command for each slot (`online`, the images being there, or `replace`); a third
/// failure forced past the tolerance faults the pool, and the command says it was not
/// recorded (a faulted pool writes nothing), and indeed the next open finds it a member.
#[test]
fn status_names_each_failed_slot_and_a_forced_fault_says_it_is_not_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = create(tmp.path(), "raid6", "5", "0");
    let d = dir.to_str().unwrap();
    ok(&["fail", "--dir", d, "--disk", "1"]);
    ok(&["fail", "--dir", d, "--disk", "3"]);
    let o = raidcore(&["status", "--dir", d]);
    assert_eq!(o.status.code(), Some(1), "degraded");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "status: Member slots 1 and 3 failed (their images are left out): the pool serves \
             every block, with no redundancy left"
        ),
        "{text}"
    );
    for cmd in ["online", "replace"] {
        let want = format!(
            "`raidcore {cmd} --dir {d} --disk 1`, then `raidcore {cmd} --dir {d} --disk 3`"
        );
        assert!(text.contains(&want), "{want} in:\n{text}");
    }
    assert!(!text.contains("model memory"), "{text}");
    let o = raidcore(&["fail", "--dir", d, "--disk", "4", "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(err.contains("neither is this recorded"), "{err}");
    let o = raidcore(&["status", "--dir", d, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["health"], "degraded", "{v}");
    assert_eq!(
        states(&v),
        ["online", "failed", "online", "failed", "online"],
        "{v}"
    );
    let v = json(&["online", "--dir", d, "--disk", "1", "--json"]);
    assert_eq!(
        states(&v),
        ["online", "online", "online", "failed", "online"],
        "{v}"
    );
    let text = String::from_utf8_lossy(&raidcore(&["status", "--dir", d]).stdout).into_owned();
    assert!(
        text.contains("it survives one more member failure"),
        "{text}"
    );
}

/// `create --compression off` makes a pool that stores extents as they are (compression is
/// fixed at creation); the default compresses.
#[test]
fn compression_is_chosen_at_create() {
    let tmp = tempfile::tempdir().unwrap();
    for (mode, compressed) in [("off", false), ("on", true)] {
        let dir = tmp.path().join(mode);
        let d = dir.to_str().unwrap();
        ok(&[
            "create",
            "--dir",
            d,
            "--level",
            "raid5",
            "--disks",
            "3",
            "--disk-size",
            "64M",
            "--compression",
            mode,
        ]);
        let sock = tmp.path().join(format!("{mode}.sock"));
        let server = serve(d, &sock);
        qemu_io(&sock, "lun0", &["write -P 0x42 0 1M"]);
        stop(server);
        let ratio = status(d)["compression_ratio"].as_f64().unwrap();
        assert_eq!(
            ratio > 1.5,
            compressed,
            "--compression {mode}: ratio {ratio}"
        );
    }
}

/// With `--json`, a usage error (clap's) is JSON on stdout as well, kind `usage`, exit 64.
#[test]
fn usage_errors_are_json_with_json() {
    let o = raidcore(&["fail", "--json", "--dir", "nowhere"]);
    assert_eq!(o.status.code(), Some(64));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage", "{v}");
    assert_eq!(
        v["error"]["message"],
        "the following required arguments were not provided: --disk <DISK>"
    );
    let o = raidcore(&["fail", "--dir", "nowhere"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(o.stdout.is_empty(), "no JSON without --json");
}

/// qemu-io's `read -P pattern` of each 4 KiB block of `blocks` at `at` (bytes) on `lun`, in
/// one run: (blocks read and matching, blocks whose read failed, blocks that read other data).
fn qemu_reads(
    sock: &Path,
    lun: &str,
    pattern: &str,
    at: u64,
    blocks: u64,
) -> (usize, usize, usize) {
    let mut c = tool("qemu-io", "qemu-utils");
    c.args(["-r", "-f", "raw"])
        .arg(format!("nbd+unix:///{lun}?socket={}", sock.display()));
    for i in 0..blocks {
        c.args(["-c", &format!("read -P {pattern} {} 4k", at + i * 4096)]);
    }
    let o = c.output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (
        all.matches("read 4096/4096").count(),
        all.matches("read failed").count(),
        all.matches("Pattern verification failed").count(),
    )
}

/// A pool in `tmp/pool` made as `shape` with `extra` create options: `writes[0]` made to
/// `lun0` through a server, member `left` failed by hand, `writes[1]` made (which it misses),
/// and image `gone` moved out of the directory. Returns the temporary directory, the pool
/// directory and a socket path.
fn member_left_then_image_gone(
    shape: &[&str; 5],
    extra: &[&str],
    writes: [&str; 2],
    left: &str,
    gone: &str,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = rc::create_with(tmp.path(), shape, extra);
    let d = dir.to_str().unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &[writes[0]]);
    stop(server);
    ok(&["fail", "--dir", d, "--disk", left]);
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &[writes[1]]);
    stop(server);
    std::fs::rename(dir.join(gone), tmp.path().join(gone)).unwrap();
    (tmp, dir, sock)
}

/// RAID-5 of 4 members, uncompressed (so that the patterns' extents fill strips on every
/// member): 2 MiB of 0x11 written to `lun0`, member 1 failed by hand, 0x22 written over its
/// second MiB, and `disk3.img` moved out of the directory.
fn a_member_failed_then_another_gone() -> (tempfile::TempDir, PathBuf, PathBuf) {
    member_left_then_image_gone(
        &["raid5", "4", "0", "64M", "4M"],
        &["--compression", "off"],
        ["write -P 0x11 0 2M", "write -P 0x22 1M 1M"],
        "1",
        "disk3.img",
    )
}

/// RAID-5 with a member failed by hand (it misses later writes) and then another image gone:
/// opening refuses and names `import --force`; `import --force --read-only` shows slot 1
/// taken back and writes nothing. The checkpoint the last clean stop wrote lies on stripes
/// slot 1 missed, but its metadata has a second copy the members in sync hold: `import
/// --force` opens it, the blocks written before slot 1 left read back, those rewritten after
/// read their new contents or an error, never other data, and the next open needs no force.
/// (A rewind, which one metadata copy needed here, is the next test's.)
#[test]
fn a_forced_import_takes_a_member_back_and_serves_no_other_data() {
    let (_tmp, dir, sock) = a_member_failed_then_another_gone();
    let d = dir.to_str().unwrap();

    let o = raidcore(&["status", "--dir", d, "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("raidcore import --force"), "{out}");
    let images = |dir: &Path| -> Vec<Vec<u8>> {
        (0..3)
            .map(|i| std::fs::read(dir.join(format!("disk{i}.img"))).unwrap())
            .collect()
    };
    let before = images(&dir);
    let o = raidcore(&["import", "--dir", d, "--force", "--read-only", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("take the failed member(s) of slot(s) 1 back"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(states(&v)[1], "online", "{v}");
    // The image taken back fills its slot, as after the forced import that writes.
    assert_eq!(v["disks"][1]["image"], "disk1.img", "{v}");
    assert!(
        images(&dir) == before,
        "a read-only import wrote to an image"
    );

    let o = raidcore(&["import", "--dir", d, "--force", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("took the failed member(s) of slot(s) 1 back"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["health"], "degraded", "{v}");
    assert_eq!(states(&v), ["online", "online", "online", "failed"], "{v}");
    assert_eq!(v["import"]["map_pages_lost"], 0, "{v}");

    let server = serve(d, &sock);
    let (good, failed, other) = qemu_reads(&sock, "lun0", "0x11", 0, 256);
    assert_eq!(
        (good, failed, other),
        (256, 0, 0),
        "before slot 1 left: {good} read, {failed} failed, {other} other data"
    );
    let (good, failed, other) = qemu_reads(&sock, "lun0", "0x22", 1 << 20, 256);
    assert_eq!(
        other, 0,
        "after: {good} read, {failed} failed, {other} other data"
    );
    assert_eq!(good + failed, 256, "after: {good} read, {failed} failed");
    stop(server);
    let o = raidcore(&["status", "--dir", d, "--json"]);
    assert_eq!(o.status.code(), Some(1), "degraded");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["health"], "degraded", "the next open needs no force: {v}");
    assert!(v.get("error").is_none(), "{v}");
}

/// The pool of the forced-import test, served with `serve --read-only --force` instead of
/// imported: the export serves what the forced import serves (the blocks written before slot
/// 1 left read back; those rewritten after read their new contents or an error, never other
/// data), refuses writes, the server refuses commands that change the pool, and after the stop
/// every file of the directory is as it was: the pool still needs its forced import.
#[test]
fn a_read_only_forced_import_serves_the_pool_and_writes_nothing() {
    let (_tmp, dir, sock) = a_member_failed_then_another_gone();
    let d = dir.to_str().unwrap();
    let before = snapshot(&dir);
    // Without --force it is refused, naming the read-only forced import (not the one that
    // writes).
    let o = Command::new("timeout")
        .args(["120", RAIDCORE, "serve", "--dir", d, "--unix"])
        .arg(&sock)
        .arg("--read-only")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("`raidcore serve --read-only --force`"),
        "{err}"
    );
    // A read-only server needs no lock of the directory: another process may hold it.
    let lock = std::fs::File::open(dir.join(".raidcore-sim.lock")).unwrap();
    lock.try_lock().unwrap();
    let server = Served::start(RAIDCORE, d, &sock, &["--read-only", "--force"]);
    let (good, failed, other) = qemu_reads(&sock, "lun0", "0x11", 0, 256);
    assert_eq!(
        (good, failed, other),
        (256, 0, 0),
        "before slot 1 left: {good} read, {failed} failed, {other} other data"
    );
    let (good, failed, other) = qemu_reads(&sock, "lun0", "0x22", 1 << 20, 256);
    assert_eq!(
        (other, good + failed),
        (0, 256),
        "after: {good} read, {failed} failed, {other} other data"
    );
    // qemu-io refuses to open a read-only export for writing.
    let mut w = tool("qemu-io", "qemu-utils");
    w.args(["-f", "raw"])
        .arg(format!("nbd+unix:///lun0?socket={}", sock.display()))
        .args(["-c", "write -P 0x33 0 4k"]);
    let o = w.output().unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("Permission denied"),
        "a write was taken: {out}"
    );
    let o = raidcore(&["fail", "--dir", d, "--disk", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("served read-only"), "{err}");
    // The server's status says so, and gives no advice the server cannot follow.
    let o = raidcore(&["status", "--dir", d]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("view: served read-only"), "{out}");
    assert!(!out.contains("Wait for the rebuild"), "{out}");
    assert!(!out.contains("in progress"), "{out}");
    assert!(out.contains("Stop the read-only server first"), "{out}");
    let o = raidcore(&["status", "--dir", d, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["read_only"], true, "{json}");
    // The image taken back fills its slot again.
    assert_eq!(json["disks"][1]["image"], "disk1.img", "{json}");
    assert!(!out.contains("left out: disk1.img"), "{out}");
    let log = stop(server);
    drop(lock);
    assert!(
        log.contains("took the failed member(s) of slot(s) 1 back"),
        "{log}"
    );
    assert_eq!(
        snapshot(&dir),
        before,
        "a read-only server changed the directory"
    );
    let o = raidcore(&["status", "--dir", d, "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("raidcore import --force"), "{out}");
}

/// A mirror whose disk 0 was failed by hand and left, while the pool wrote on disk 1; then
/// disk 1's image is gone. Only the member that left can serve, as it left: `import --force`
/// refuses and names `--rewind`, and `import --force --rewind` opens the pool as disk 0 left
/// it, saying so, with the later writes reading their older contents.
#[test]
fn a_forced_import_of_a_member_that_left_alone_needs_a_rewind() {
    let (_tmp, dir, sock) = member_left_then_image_gone(
        &["raid1", "2", "0", "96M", "4M"],
        &[],
        ["write -P 0x11 0 1M", "write -P 0x22 0 1M"],
        "0",
        "disk1.img",
    );
    let d = dir.to_str().unwrap();

    let o = raidcore(&["import", "--dir", d, "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let want =
        format!("`raidcore import --dir {d} --force --rewind` opens the pool as it was then");
    assert!(err.contains(&want), "{err}");

    let o = raidcore(&["import", "--dir", d, "--force", "--rewind", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("read their older contents"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["import"]["rewound"], true, "{v}");
    let server = serve(d, &sock);
    let (good, failed, other) = qemu_reads(&sock, "lun0", "0x11", 0, 256);
    assert_eq!(
        (good, failed, other),
        (256, 0, 0),
        "rewound: {good} read, {failed} failed, {other} other data"
    );
    stop(server);
}

/// A pool with a log device (`create --log-device`): a write and its flush survive the
/// server's SIGKILL through it; without its file the pool does not open and says which file
/// (`import --force` goes on without it, recording it failed); `log remove` and `log add`
/// take it out and put it back.
#[test]
fn a_log_device_takes_the_flushes_and_the_pool_waits_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let slog = tmp.path().join("slog.img");
    let s = slog.to_str().unwrap();
    let shape = ["raid6", "6", "0", "64M", "4M"];
    // Not as one of the pool directory's images: refused before anything is made.
    let inside = tmp.path().join("pool/disk9.img");
    let args = rc::create_args(
        tmp.path(),
        &shape,
        &["--log-device", inside.to_str().unwrap()],
    );
    let out = raidcore(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(!tmp.path().join("pool").exists(), "no pool made");
    let dir = rc::create_with(tmp.path(), &shape, &["--log-device", s, "--sparse"]);
    let d = dir.to_str().unwrap();
    assert_eq!(status(d)["log_device"]["state"], "online");
    assert_eq!(std::fs::metadata(&slog).unwrap().len(), 64 << 20);
    let sock = tmp.path().join("nbd.sock");
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x5a 0 64k", "flush"]);
    let (_, _) = server.signal(libc::SIGKILL);

    let away = tmp.path().join("slog.away");
    std::fs::rename(&slog, &away).unwrap();
    let v = status(d);
    assert_eq!(v["log_device"]["state"], "missing", "{v}");
    let out = raidcore(&["import", "--dir", d]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(s) && err.contains("--force"), "{err}");
    std::fs::rename(&away, &slog).unwrap();
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["read -P 0x5a 0 64k"]);
    stop(server);

    ok(&["log", "remove", "--dir", d]);
    assert_eq!(status(d)["log_device"], Value::Null);
    let server = serve(d, &sock);
    qemu_io(&sock, "lun0", &["write -P 0x6b 64k 64k", "flush"]);
    let (_, _) = server.signal(libc::SIGKILL);
    ok(&["log", "add", "--dir", d, "--path", s]);
    assert_eq!(status(d)["log_device"]["state"], "online");
    let server = serve(d, &sock);
    qemu_io(
        &sock,
        "lun0",
        &["read -P 0x5a 0 64k", "read -P 0x6b 64k 64k"],
    );
    stop(server);

    // Forced on without it: said, recorded failed, and the data flushed before is there.
    std::fs::rename(&slog, &away).unwrap();
    let out = raidcore(&["import", "--dir", d, "--force"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("forced import without the log device"),
        "{err}"
    );
    assert_eq!(status(d)["log_device"]["state"], "failed");
    let server = serve(d, &sock);
    qemu_io(
        &sock,
        "lun0",
        &["read -P 0x5a 0 64k", "read -P 0x6b 64k 64k"],
    );
    stop(server);
}
