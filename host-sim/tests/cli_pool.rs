//! The `raidcore-sim` command on a pool directory: create, status (text and JSON), fail,
//! replace, scrub, and the refusals. Runs the real binary.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_raidcore-sim"))
        .args(args)
        .output()
        .expect("run raidcore-sim")
}

fn ok(args: &[&str]) -> String {
    let o = sim(args);
    assert!(
        o.status.success(),
        "raidcore-sim {args:?} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs raidcore-sim expecting a refusal (exit status 2); returns what it printed on stderr.
fn refused(args: &[&str]) -> String {
    let o = sim(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "raidcore-sim {args:?}: {err}");
    err
}

/// Whether the file system under `dir` refuses a 17 TiB file (ext4 holds 16 TiB at most): the
/// failed creates below rely on it, and are skipped, saying so, where it does not.
fn refuses_17t_files(dir: &Path) -> bool {
    let f = std::fs::File::create(dir.join("probe")).unwrap();
    let refuses = f.set_len(17 << 40).is_err();
    if !refuses {
        eprintln!(
            "skipped: the file system under {} holds 17 TiB files",
            dir.display()
        );
    }
    refuses
}

fn status(dir: &Path) -> Value {
    let out = ok(&["status", "--dir", dir.to_str().unwrap(), "--json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("status --json: {e}: {out}"))
}

fn states(v: &Value) -> Vec<String> {
    v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap().to_string())
        .collect()
}

fn create(dir: &Path, spares: &str) {
    ok(&[
        "create",
        "--dir",
        dir.to_str().unwrap(),
        "--level",
        "raid6",
        "--disks",
        "6",
        "--spares",
        spares,
        "--disk-size",
        "32M",
        "--luns",
        "3",
        "--lun-size",
        "4M",
    ]);
}

#[test]
fn create_then_status_json_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "1");
    for i in 0..7 {
        let f = dir.join(format!("disk{i}.img"));
        assert_eq!(
            std::fs::metadata(&f).unwrap().len(),
            32 << 20,
            "{}",
            f.display()
        );
    }
    assert!(!dir.join("disk7.img").exists());
    let v = status(&dir);
    assert_eq!(v["health"], "online");
    assert_eq!(v["level"], "raid6");
    let disks = v["disks"].as_array().unwrap();
    assert_eq!(disks.len(), 6);
    for (i, d) in disks.iter().enumerate() {
        assert_eq!(d["index"], i);
        assert_eq!(d["state"], "online");
        assert_eq!(d["image"], format!("disk{i}.img"));
    }
    assert_eq!(v["spares"], 1);
    let luns = v["luns"].as_array().unwrap();
    assert_eq!(luns.len(), 3);
    assert_eq!(luns[2]["name"], "lun2");
    assert_eq!(luns[2]["size_bytes"], 4 << 20);
    assert_eq!(luns[0]["logical_bytes"], 0);
    // Opening again changes nothing that status shows.
    let again = status(&dir);
    assert_eq!(again["disks"], v["disks"]);
    assert_eq!(again["luns"], v["luns"]);
    // The text form says the same.
    let text = ok(&["status", "--dir", dir.to_str().unwrap()]);
    assert!(text.contains("state: ONLINE"), "{text}");
    assert!(text.contains("lun2"), "{text}");
}

#[test]
fn fail_takes_the_spare_and_replace_rebuilds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    create(&dir, "1");

    // A spare takes slot 2 and rebuilds (run to the end with --wait).
    ok(&["fail", "--dir", d, "--disk", "2", "--wait"]);
    let v = status(&dir);
    assert_eq!(v["health"], "online", "{v}");
    assert_eq!(v["spares"], 0);
    assert_eq!(v["disks"][2]["image"], "disk6.img");
    let stale: Vec<&Value> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "stale")
        .collect();
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0]["file"], "disk2.img");

    // No spare left: slot 4 stays failed, the pool degraded.
    ok(&["fail", "--dir", d, "--disk", "4"]);
    let v = status(&dir);
    assert_eq!(v["health"], "degraded");
    assert_eq!(
        states(&v),
        ["online", "online", "online", "online", "failed", "online"]
    );
    // Failing it again is refused (exit 2) and changes nothing.
    refused(&["fail", "--dir", d, "--disk", "4"]);
    assert_eq!(status(&dir)["disks"], v["disks"]);

    // Replace without waiting: rebuilding.
    ok(&["replace", "--dir", d, "--disk", "4", "--no-wait"]);
    let v = status(&dir);
    assert_eq!(v["health"], "degraded");
    assert_eq!(v["disks"][4]["state"], "rebuilding");
    assert_eq!(v["disks"][4]["image"], "disk4.img");
    assert!(
        std::fs::read_dir(&dir).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("disk4.img.failed-g")),
        "the failed image is kept under another name"
    );
    // A scrub (which runs the pending rebuild first) brings it online.
    ok(&["scrub", "--dir", d]);
    let v = status(&dir);
    assert_eq!(v["health"], "online", "{v}");
    assert_eq!(states(&v), ["online"; 6]);
    assert_eq!(v["scrub_unrepairable_blocks"], 0);
    // Replacing an online disk is refused.
    refused(&["replace", "--dir", d, "--disk", "1"]);
}

#[test]
fn bad_input_is_refused_with_status_2() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("p");
    let ds = d.to_str().unwrap();
    // Not a pool directory.
    refused(&["status", "--dir", ds]);
    // Bad sizes, levels, models.
    for args in [
        &[
            "create",
            "--dir",
            ds,
            "--level",
            "raid7",
            "--disks",
            "6",
            "--disk-size",
            "32M",
        ][..],
        &[
            "create",
            "--dir",
            ds,
            "--level",
            "raid6",
            "--disks",
            "6",
            "--disk-size",
            "32Q",
        ],
        &[
            "create",
            "--dir",
            ds,
            "--level",
            "raid6",
            "--disks",
            "6",
            "--disk-size",
            "32M",
            "--model",
            "floppy",
        ],
        &[
            "create",
            "--dir",
            ds,
            "--level",
            "raid6",
            "--disks",
            "2",
            "--disk-size",
            "32M",
        ],
    ] {
        refused(args);
    }
    // An existing pool is not overwritten without --force.
    create(&d, "0");
    refused(&[
        "create",
        "--dir",
        ds,
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "32M",
    ]);
    assert_eq!(status(&d)["level"], "raid6");
}

/// While a process has the pool open (here this test, as `serve` would), every command that
/// opens it is refused with a clear message and changes no byte of any image; afterwards they
/// work again.
#[test]
fn commands_refuse_a_pool_another_process_has_open() {
    use raidcore::pool::PoolConfig;
    use raidcore_sim::pooldir::{DirPool, HwOptions};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "1");
    let d = dir.to_str().unwrap();
    let images = |dir: &Path| -> Vec<Vec<u8>> {
        (0..7)
            .map(|i| std::fs::read(dir.join(format!("disk{i}.img"))).unwrap())
            .collect()
    };
    let held = DirPool::open(&dir, PoolConfig::default(), &HwOptions::default()).unwrap();
    let before = images(&dir);
    let sock = tmp.path().join("s.sock");
    let s = sock.to_str().unwrap();
    for args in [
        vec!["status", "--dir", d],
        vec!["scrub", "--dir", d],
        vec!["fail", "--dir", d, "--disk", "2"],
        vec!["serve", "--dir", d, "--unix", s],
        vec![
            "create",
            "--dir",
            d,
            "--force",
            "--level",
            "raid6",
            "--disks",
            "6",
            "--disk-size",
            "32M",
            "--luns",
            "3",
            "--lun-size",
            "4M",
        ],
    ] {
        let err = refused(&args);
        assert!(err.contains("locked"), "{args:?}: {err}");
    }
    assert!(images(&dir) == before, "a refused command changed an image");
    held.close().unwrap();
    assert_eq!(status(&dir)["health"], "online");
}

/// `fail` refuses to take a RAID-6 pool past its two-member tolerance unless `--force` is given;
/// the refusal changes nothing.
#[test]
fn fail_refuses_to_go_past_tolerance_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "0");
    let d = dir.to_str().unwrap();
    ok(&["fail", "--dir", d, "--disk", "3"]);
    ok(&["fail", "--dir", d, "--disk", "4"]);
    let err = refused(&["fail", "--dir", d, "--disk", "5"]);
    assert!(
        err.contains("more than raid6 tolerates (2)") && err.contains("--force"),
        "{err}"
    );
    let v = status(&dir);
    assert_eq!(v["health"], "degraded");
    let failed = states(&v).iter().filter(|s| *s == "failed").count();
    assert_eq!(failed, 2);
    // With --force it is done: the pool faults (exit 2, raidcore-sim's one error status),
    // which it cannot record, and says so; the next open finds the member in place.
    let o = sim(&["fail", "--dir", d, "--disk", "5", "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the pool is FAULTED") && err.contains("neither is this recorded"),
        "{err}"
    );
    let v = status(&dir);
    assert_eq!(
        states(&v).iter().filter(|s| *s == "failed").count(),
        2,
        "{v}"
    );
}

/// A truncated member image is left out like a missing member: the pool opens degraded, names
/// the image and why, serves its data from redundancy, and `replace` brings the slot back.
#[test]
fn truncated_images_are_left_out_and_the_pool_opens_degraded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "0");
    let d = dir.to_str().unwrap();
    // Half its size (a whole number of blocks), and a length no block size divides.
    std::fs::File::options()
        .write(true)
        .open(dir.join("disk1.img"))
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(dir.join("disk3.img"))
        .unwrap()
        .set_len(1000)
        .unwrap();
    let v = status(&dir);
    assert_eq!(v["health"], "degraded");
    assert_eq!(
        states(&v),
        ["online", "failed", "online", "failed", "online", "online"]
    );
    for (n, why) in [
        (1, "smaller than the pool's members"),
        (3, "no whole number"),
    ] {
        let img = &v["images"][n];
        assert_eq!(img["role"], "stale", "{img}");
        assert!(img["note"].as_str().unwrap().contains(why), "{img}");
    }
    ok(&["replace", "--dir", d, "--disk", "1"]);
    ok(&["replace", "--dir", d, "--disk", "3"]);
    assert_eq!(status(&dir)["health"], "online");
}

/// Large disks get more (not larger than 1 GiB) segments: a 6 × 1 TiB RAID-6 pool is created
/// and opened (`--sparse` images: this writes a few MiB). It was refused for segments over
/// 4 GiB.
#[test]
fn a_pool_of_terabyte_disks_is_created_and_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    let d = dir.to_str().unwrap();
    ok(&[
        "create",
        "--dir",
        d,
        "--level",
        "raid6",
        "--disks",
        "6",
        "--disk-size",
        "1T",
        "--sparse",
        "--luns",
        "1",
        "--lun-size",
        "100G",
    ]);
    let v = status(&dir);
    assert_eq!(v["health"], "online");
    let usable = v["usable_bytes"].as_u64().unwrap();
    // 4 TiB of data strips, less the log's reserved segments and the 1/32 slop.
    assert!(
        usable > (38 << 40) / 10 && usable <= (4 << 40) / 32 * 31,
        "{usable}"
    );
}

/// Every byte of every file in `dir` (sorted by name), hidden files included.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// `create --force` that fails after its checks (here: a disk size the file system cannot hold,
/// found only when the first image is sized) puts the old pool back exactly as it was: same
/// files, same bytes, and it still opens.
#[test]
fn a_failed_create_force_keeps_the_old_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "1");
    if !refuses_17t_files(tmp.path()) {
        return;
    }
    let before = snapshot(&dir);
    let d = dir.to_str().unwrap();
    let err = refused(&[
        "create",
        "--dir",
        d,
        "--force",
        "--level",
        "raid5",
        "--disks",
        "4",
        "--disk-size",
        "17T",
    ]);
    assert!(err.contains("disk0.img"), "{err}");
    assert!(
        snapshot(&dir) == before,
        "the failed create changed the old pool"
    );
    assert!(!dir.join(".replaced-pool").exists());
    let v = status(&dir);
    assert_eq!(v["level"], "raid6");
    assert_eq!(v["health"], "online");
}

/// A successful `create --force` leaves only the new pool (the old one's extra images and the
/// directory it was kept in are gone).
#[test]
fn create_force_replaces_the_old_pool_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "1");
    let d = dir.to_str().unwrap();
    ok(&[
        "create",
        "--dir",
        d,
        "--force",
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "64M",
    ]);
    let names: Vec<String> = snapshot(&dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            ".raidcore-sim.lock",
            "disk0.img",
            "disk1.img",
            "disk2.img",
            "raidcore-events.log",
            "raidcore-records.json",
            "raidcore-sim.json"
        ]
    );
    assert!(!dir.join(".replaced-pool").exists());
    let v = status(&dir);
    assert_eq!(v["level"], "raid5");
    assert_eq!(v["disks"].as_array().unwrap().len(), 3);
}

/// `create` takes the directory's lock before it looks: while another process holds it (a
/// concurrent `create`), it is refused and makes nothing, so it cannot clean up the other's
/// images either. A `.replaced-pool` left by an interrupted `create --force` is never
/// overwritten: create refuses and names it (an empty one holds nothing and is removed).
#[test]
fn create_refuses_a_locked_directory_and_a_leftover_old_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let args = [
        "create",
        "--dir",
        d,
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "64M",
    ];
    let lock = std::fs::File::create(dir.join(".raidcore-sim.lock")).unwrap();
    lock.try_lock().unwrap();
    let err = refused(&args);
    assert!(err.contains("is locked"), "{err}");
    assert_eq!(snapshot(&dir).len(), 1, "only the lock file");
    lock.unlock().unwrap();
    let aside = dir.join(".replaced-pool");
    std::fs::create_dir(&aside).unwrap();
    std::fs::write(aside.join("disk0.img"), b"old").unwrap();
    let err = refused(&args);
    assert!(err.contains(".replaced-pool"), "{err}");
    assert_eq!(snapshot(&dir).len(), 1);
    assert_eq!(std::fs::read(aside.join("disk0.img")).unwrap(), b"old");
    std::fs::remove_file(aside.join("disk0.img")).unwrap();
    ok(&args);
    assert!(!aside.exists());
    assert_eq!(status(&dir)["level"], "raid5");
}

/// An opener that finds no description says why when it can: the pool is locked (a
/// `create --force` in progress has moved it aside), or an interrupted `create --force` left
/// the old pool in `.replaced-pool`.
#[test]
fn a_missing_description_is_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "0");
    let d = dir.to_str().unwrap();
    // As `create --force` leaves it between moving the old pool aside and writing the new one.
    let aside = dir.join(".replaced-pool");
    std::fs::create_dir(&aside).unwrap();
    for name in ["raidcore-sim.json", "disk0.img", "disk1.img"] {
        std::fs::rename(dir.join(name), aside.join(name)).unwrap();
    }
    let lock = std::fs::File::open(dir.join(".raidcore-sim.lock")).unwrap();
    lock.try_lock().unwrap();
    let err = refused(&["status", "--dir", d]);
    assert!(err.contains("is locked"), "{err}");
    lock.unlock().unwrap();
    let err = refused(&["status", "--dir", d]);
    assert!(
        err.contains("raidcore-sim.json") && err.contains(".replaced-pool holds a pool"),
        "{err}"
    );
    for name in ["raidcore-sim.json", "disk0.img", "disk1.img"] {
        std::fs::rename(aside.join(name), dir.join(name)).unwrap();
    }
    assert_eq!(status(&dir)["health"], "online");
}

/// A `create` that fails in directories it made leaves none of them behind.
#[test]
fn a_failed_create_leaves_no_new_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/a/b");
    if !refuses_17t_files(tmp.path()) {
        return;
    }
    let d = dir.to_str().unwrap();
    refused(&[
        "create",
        "--dir",
        d,
        "--level",
        "raid5",
        "--disks",
        "3",
        "--disk-size",
        "17T",
    ]);
    assert!(!tmp.path().join("new").exists());
}

/// When more images are unusable than the level tolerates, the refusal names them and why.
#[test]
fn too_many_truncated_images_are_named_in_the_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "0");
    for n in [0, 2, 4] {
        std::fs::File::options()
            .write(true)
            .open(dir.join(format!("disk{n}.img")))
            .unwrap()
            .set_len(1000)
            .unwrap();
    }
    let err = refused(&["status", "--dir", dir.to_str().unwrap()]);
    assert!(err.contains("3 members missing or failed"), "{err}");
    for n in [0, 2, 4] {
        assert!(
            err.contains(&format!(
                "disk{n}.img (unusable: its length is no whole number"
            )),
            "{err}"
        );
    }
    assert!(!err.contains("disk1.img"), "{err}");
}

/// Closing a pool releases its locks at once, even while a child process forked meanwhile
/// (by another thread, between its fork and exec) holds copies of the descriptors: the locks
/// are released explicitly, not by the last close. Here the child is held between fork and
/// exit on a pipe; `status` in another process must open the pool right after the close.
#[test]
fn closing_a_pool_unlocks_it_while_a_forked_child_holds_its_descriptors() {
    use raidcore::pool::PoolConfig;
    use raidcore_sim::pooldir::{DirPool, HwOptions};

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pool");
    create(&dir, "0");
    let held = DirPool::open(&dir, PoolConfig::default(), &HwOptions::default()).unwrap();
    let mut fds = [0; 2];
    // SAFETY: pipe(2) on a two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child calls only async-signal-safe functions (read, _exit).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut b = 0u8;
        // SAFETY: reads one byte into `b`; exits without unwinding or running destructors.
        unsafe {
            libc::read(fds[0], (&raw mut b).cast(), 1);
            libc::_exit(0);
        }
    }
    held.close().unwrap();
    let o = sim(&["status", "--dir", dir.to_str().unwrap(), "--json"]);
    // Let the child go before asserting, so a failure leaves no process behind.
    // SAFETY: writes one byte from a valid buffer; waits for our own child.
    unsafe {
        libc::write(fds[1], [1u8].as_ptr().cast(), 1);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert!(
        o.status.success(),
        "status after close: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}
