//! A host condition through the command line (issue 17): the pool's images live on a small
//! tmpfs, a client writes until the file system is full, and the pool suspends (no member is
//! failed, nothing more is written); once space is freed, `raidcore resume` writes what waited
//! and every flushed block reads back. Needs root for the tmpfs mount; prints that it skipped
//! otherwise.

#[path = "support/raidcore.rs"]
mod rc;
mod support;

use std::path::Path;
use std::process::Command;

use rc::{RAIDCORE, json, ok, qemu_io, stop};
use support::{Served, tool};

/// Mounts a tmpfs of `size` at `dir`; false when this machine does not allow it.
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

/// Bytes free on the file system holding `dir`.
fn free_bytes(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: a valid path and a zeroed statvfs to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &raw mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Unmounts `dir` when dropped (also when the test fails).
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0).status();
    }
}

#[test]
fn a_full_file_system_suspends_the_pool_and_resume_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    if !mount_tmpfs(&mnt, "256M") {
        println!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    }
    let _mounted = Mounted(&mnt);
    let dir = rc::create_with(&mnt, &["raid5", "3", "0", "96M", "48M"], &["--sparse"]);
    let d = dir.to_str().unwrap();
    // Leave room for about 12 MiB: the images are sparse and fill as the pool writes.
    let filler = mnt.join("filler");
    let room = free_bytes(&mnt).saturating_sub(12 << 20);
    std::fs::write(&filler, vec![0u8; room as usize]).unwrap();
    let sock = tmp.path().join("nbd.sock");
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["write -P 0x5a 0 4M", "flush"]);
    // Now past what the file system holds (incompressible data, more than the room left):
    // the copy fails, the pool suspends.
    let src = tmp.path().join("random.bin");
    std::fs::write(&src, support::pattern(7, 40 << 20)).unwrap();
    let out = tool("nbdcopy", "libnbd-bin")
        .arg(&src)
        .arg(format!("nbd+unix:///lun1?socket={}", sock.display()))
        .output()
        .unwrap();
    assert!(!out.status.success(), "the copy meets the full file system");
    // A suspended pool's status exits 2, as a faulted one's does.
    let o = rc::raidcore(&["status", "--dir", d, "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["health"], "suspended", "{v}");
    let states: Vec<&str> = v["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["state"].as_str().unwrap())
        .collect();
    assert!(
        states.iter().all(|s| *s == "online"),
        "no member failed: {v}"
    );
    std::fs::remove_file(&filler).unwrap();
    ok(&["resume", "--dir", d]);
    let v = json(&["status", "--dir", d, "--json"]);
    assert_eq!(v["health"], "online", "{v}");
    qemu_io(&sock, "lun0", &["read -P 0x5a 0 4M"]);
    stop(server);
    let server = Served::start(RAIDCORE, d, &sock, &[]);
    qemu_io(&sock, "lun0", &["read -P 0x5a 0 4M"]);
    stop(server);
}

/// Images are allocated whole at `create` (so a full file system shows there, not under the
/// pool's writes), unless `--sparse`: on a tmpfs too small for them, `create` fails with an
/// I/O error that names the cause and the way out, and leaves no image behind; `--sparse`
/// makes the same pool.
#[test]
fn create_allocates_the_images_and_refuses_a_file_system_too_small() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    if !mount_tmpfs(&mnt, "128M") {
        println!("SKIPPED: cannot mount a tmpfs here (needs root)");
        return;
    }
    let _mounted = Mounted(&mnt);
    let dir = mnt.join("pool");
    let shape = ["raid5", "3", "0", "64M", "8M"];
    let o = Command::new(RAIDCORE)
        .args(rc::create_args(&mnt, &shape, &[]))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(
        err.contains("allocating disk image") && err.contains("--sparse"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("disk"))
        .collect();
    assert!(left.is_empty(), "images left behind: {left:?}");
    rc::create_with(&mnt, &shape, &["--sparse"]);
    assert!(
        free_bytes(&mnt) > 64 << 20,
        "sparse images take room as written"
    );
}
