//! The NBD server against real clients: qemu-io, nbdinfo, nbdcopy with an ext4 image, fio.
//! Each test starts its own server on a free port; a missing client tool fails the test with
//! the Debian package to install.

mod nbd_common;

use std::fmt::Write as _;
use std::path::Path;

use nbd_common::{TestServer, run_ok, tool};
use raidcore_sim::nbd::ExportInfo;
use raidcore_sim::nbd::stats::{read_stats_file, render_status};

const MIB: u64 = 1 << 20;

fn qemu_io(uri: &str, cmds: &[&str]) -> String {
    let mut c = tool("qemu-io", "qemu-utils");
    c.arg("-f").arg("raw");
    for cmd in cmds {
        c.arg("-c").arg(cmd);
    }
    c.arg(uri);
    let out = run_ok(&mut c);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("failed") && !text.contains("error"),
        "qemu-io reported a failure:\n{text}"
    );
    text
}

#[test]
fn qemu_io_writes_and_reads_patterns_at_aligned_and_unaligned_offsets() {
    let mut srv = TestServer::start(vec![
        ExportInfo::new("lun0", 16 * MIB),
        ExportInfo::new("lun1", 4 * MIB),
    ]);
    let uri = srv.uri("lun0");
    let out = qemu_io(
        &uri,
        &[
            "write -P 0xab 1000 5000", // unaligned head and tail, one whole block inside
            "write -P 0xcd 0 1000",    // partial first block, merged with the 0xab bytes
            "write -P 0x11 8192 65536", // aligned
            "write -P 0x22 73728 3",   // three bytes
            "write -z 6000 2192",      // write-zeroes up to the next aligned write
            "write -f -P 0x33 2097152 4096", // FUA
            "write -P 0x44 16773120 4096", // last block of the export
            "flush",
            "read -P 0xcd 0 1000",
            "read -P 0xab 1000 5000",
            "read -P 0 6000 2192",
            "read -P 0x11 8192 65536",
            "read -P 0x22 73728 3",
            "read -P 0 73731 4000",
            "read -P 0x33 2097152 4096",
            "read -P 0x44 16773120 4096",
        ],
    );
    assert_eq!(out.matches("wrote ").count(), 7, "{out}");
    assert_eq!(out.matches("read ").count(), 8, "{out}");
    // A second export is separate storage.
    qemu_io(
        &srv.uri("lun1"),
        &[
            "write -P 0x55 4095 2",
            "read -P 0x55 4095 2",
            "read -P 0 0 4095",
        ],
    );

    let mem = srv.stop();
    // What the server stored is what qemu wrote, byte for byte.
    let got = mem.read_bytes(0, 0, 73728 + 3);
    let mut want = vec![0u8; 73728 + 3];
    want[..1000].fill(0xcd);
    want[1000..6000].fill(0xab);
    want[8192..73728].fill(0x11);
    want[73728..].fill(0x22);
    assert!(got == want, "lun0 content differs from what qemu-io wrote");
    assert_eq!(mem.read_bytes(1, 4094, 4), vec![0, 0x55, 0x55, 0]);
    assert_eq!(mem.read_bytes(0, 16_773_120, 4096), vec![0x44; 4096]);
    let c = mem.counters();
    assert!(c.fua_writes >= 1, "FUA reached the backend: {c:?}");
    assert!(c.flushes >= 1, "flush reached the backend: {c:?}");
    assert_eq!(c.shutdowns, 1);
}

#[test]
fn qemu_io_refuses_an_unknown_export() {
    let mut srv = TestServer::start(vec![ExportInfo::new("lun0", MIB)]);
    let out = tool("qemu-io", "qemu-utils")
        .args(["-f", "raw", "-c", "read 0 512"])
        .arg(srv.uri("nope"))
        .output()
        .expect("spawn");
    assert!(
        !out.status.success(),
        "qemu-io opened an export that does not exist"
    );
    // The server still serves others.
    qemu_io(&srv.uri("lun0"), &["write -P 7 0 512", "read -P 7 0 512"]);
    srv.stop();
}

fn nbdinfo_json(args: &[&str]) -> serde_json::Value {
    let out = run_ok(tool("nbdinfo", "libnbd-bin").arg("--json").args(args));
    serde_json::from_slice(&out.stdout).expect("nbdinfo prints JSON")
}

#[test]
fn nbdinfo_lists_exports_sizes_and_block_sizes() {
    let mut ro = ExportInfo::new("archive", 8 * MIB);
    ro.read_only = true;
    ro.description = "read-only LUN".into();
    let mut srv = TestServer::start(vec![
        ExportInfo::new("lun0", 64 * MIB),
        ExportInfo::new("lun1", 12 * MIB),
        ro,
    ]);
    let base = format!("nbd://{}", srv.addr.expect("tcp"));

    let list = nbdinfo_json(&["--list", &base]);
    let exports = list["exports"].as_array().expect("exports array");
    let by_name = |n: &str| {
        exports
            .iter()
            .find(|e| e["export-name"] == n)
            .unwrap_or_else(|| panic!("{n} listed: {list}"))
    };
    assert_eq!(exports.len(), 3, "{list}");
    assert_eq!(by_name("lun0")["export-size"], 64 * MIB);
    assert_eq!(by_name("lun1")["export-size"], 12 * MIB);
    assert_eq!(by_name("archive")["export-size"], 8 * MIB);
    assert_eq!(by_name("archive")["description"], "read-only LUN");

    let info = nbdinfo_json(&[&srv.uri("lun0")]);
    let e = &info["exports"][0];
    assert_eq!(e["export-size"], 64 * MIB, "{info}");
    assert_eq!(e["block_size_minimum"], 1, "{info}");
    assert_eq!(e["block_size_preferred"], 4096, "{info}");
    assert_eq!(e["block_size_maximum"], 32 * MIB, "{info}");
    for (k, v) in [
        ("is_read_only", false),
        ("can_flush", true),
        ("can_fua", true),
        ("can_trim", true),
        ("can_zero", true),
        ("can_multi_conn", true),
    ] {
        assert_eq!(e[k], v, "{k}: {info}");
    }
    let info = nbdinfo_json(&[&srv.uri("archive")]);
    assert_eq!(info["exports"][0]["is_read_only"], true, "{info}");
    assert_eq!(info["exports"][0]["can_trim"], false, "{info}");

    // Plain-text output, as a person would read it.
    let out = run_ok(tool("nbdinfo", "libnbd-bin").arg(srv.uri("lun1")));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("block_size_preferred: 4096"), "{text}");

    let unknown = tool("nbdinfo", "libnbd-bin")
        .arg(srv.uri("nope"))
        .output()
        .expect("spawn");
    assert!(
        !unknown.status.success(),
        "nbdinfo accepted an unknown export"
    );
    srv.stop();
}

/// Copies up to `budget` bytes of this machine's documentation into `dst` (sorted, so the same
/// machine gives the same tree).
fn copy_docs(src: &Path, dst: &Path, budget: &mut u64) {
    let Ok(rd) = std::fs::read_dir(src) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        let target = dst.join(e.file_name());
        if ft.is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_docs(&e.path(), &target, budget);
        } else if ft.is_file() {
            let Ok(len) = e.metadata().map(|m| m.len()) else {
                continue;
            };
            if len > *budget {
                continue;
            }
            if std::fs::copy(e.path(), &target).is_ok() {
                *budget -= len;
            }
        }
        if *budget < 4096 {
            return;
        }
    }
}

#[test]
fn ext4_image_of_real_files_survives_nbdcopy_round_trip() {
    let size = 64 * MIB;
    let mut srv = TestServer::start(vec![
        ExportInfo::new("lun0", size),
        ExportInfo::new("spare", MIB),
    ]);
    let work = tempfile::tempdir().expect("tmp");
    let tree = work.path().join("tree");
    std::fs::create_dir(&tree).expect("mkdir");
    let mut budget = 24 * MIB;
    copy_docs(Path::new("/usr/share/doc"), &tree, &mut budget);
    assert!(
        budget < 20 * MIB,
        "expected some MiB of files under /usr/share/doc"
    );

    let img = work.path().join("fs.img");
    run_ok(
        tool("mkfs.ext4", "e2fsprogs")
            .args(["-q", "-F", "-d"])
            .arg(&tree)
            .arg(&img)
            .arg("64M"),
    );
    assert_eq!(std::fs::metadata(&img).expect("img").len(), size);

    run_ok(tool("nbdcopy", "libnbd-bin").arg(&img).arg(srv.uri("lun0")));
    let back = work.path().join("back.img");
    run_ok(
        tool("nbdcopy", "libnbd-bin")
            .arg(srv.uri("lun0"))
            .arg(&back),
    );

    let a = std::fs::read(&img).expect("img");
    let b = std::fs::read(&back).expect("copy");
    assert_eq!(a.len(), b.len());
    let first_diff = a.iter().zip(&b).position(|(x, y)| x != y);
    assert_eq!(
        first_diff, None,
        "the copied image differs from the original"
    );
    run_ok(tool("e2fsck", "e2fsprogs").arg("-fn").arg(&back));

    // One real file read back out of the copied file system matches the original.
    let some_file = walk_first_file(&tree).expect("a file in the tree");
    let rel = some_file.strip_prefix(&tree).expect("prefix");
    let out = run_ok(
        tool("debugfs", "e2fsprogs")
            .arg("-R")
            .arg(format!("cat /{}", rel.display()))
            .arg(&back),
    );
    assert_eq!(
        out.stdout,
        std::fs::read(&some_file).expect("file"),
        "{} differs",
        rel.display()
    );

    let mem = srv.stop();
    assert!(
        mem.read_bytes(0, 0, size as usize) == a,
        "backend content differs from the image"
    );
}

fn walk_first_file(dir: &Path) -> Option<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in &entries {
        if e.file_type().ok()?.is_file() && e.metadata().ok()?.len() > 0 {
            return Some(e.path());
        }
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| walk_first_file(&e.path()))
}

fn fio_json(job: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("job.fio");
    std::fs::write(&path, job).expect("job file");
    let out = run_ok(tool("fio", "fio").arg("--output-format=json").arg(&path));
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text.find('{').expect("JSON in fio output");
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("fio JSON: {e}\n{text}"))
}

fn assert_fio_ok(report: &serde_json::Value, jobs: usize) {
    let list = report["jobs"].as_array().expect("jobs");
    assert_eq!(list.len(), jobs, "{report}");
    for j in list {
        assert_eq!(j["error"], 0, "job {} failed: {j}", j["jobname"]);
        assert!(
            j["write"]["io_bytes"].as_u64().unwrap_or(0) > 0,
            "job {} wrote nothing",
            j["jobname"]
        );
        assert!(
            j["read"]["io_bytes"].as_u64().unwrap_or(0) > 0,
            "job {} verified nothing",
            j["jobname"]
        );
    }
}

#[test]
fn fio_eight_jobs_on_eight_exports_verify_crc32c() {
    let exports: Vec<ExportInfo> = (0..8)
        .map(|i| ExportInfo::new(format!("lun{i}"), 8 * MIB))
        .collect();
    let mut srv = TestServer::start(exports);
    let mut job = String::from(
        "[global]\nioengine=nbd\nrw=randwrite\nbsrange=512-64k\nblockalign=512\nsize=8m\niodepth=8\n\
         verify=crc32c\ndo_verify=1\nverify_fatal=1\nverify_state_save=0\nrandseed=42\n",
    );
    for i in 0..8 {
        writeln!(job, "[lun{i}]\nuri={}", srv.uri(&format!("lun{i}"))).expect("fmt");
    }
    let report = fio_json(&job);
    assert_fio_ok(&report, 8);
    let mem = srv.stop();
    assert!(mem.counters().writes > 0);
}

#[test]
fn fio_jobs_sharing_blocks_of_one_export_keep_read_modify_write_atomic() {
    // Four jobs on one export whose regions start 512 bytes past a 4 KiB boundary, so each
    // job's first and last 4 KiB block is shared with its neighbour: unaligned writes from two
    // connections land in the same block. A non-atomic read-modify-write would lose bytes and
    // fail verification.
    let mut srv = TestServer::start(vec![ExportInfo::new("lun0", 32 * MIB)]);
    let region = 4 * MIB + 1024;
    let mut job = String::from(
        "[global]\nioengine=nbd\nrw=randwrite\nbsrange=512-16k\nblockalign=512\niodepth=8\n\
         verify=crc32c\ndo_verify=1\nverify_fatal=1\nverify_state_save=0\nrandseed=7\n",
    );
    for i in 0..4u64 {
        let (uri, offset) = (srv.uri("lun0"), 512 + i * region);
        writeln!(job, "[part{i}]\nuri={uri}\noffset={offset}\nsize={region}").expect("fmt");
    }
    assert_fio_ok(&fio_json(&job), 4);
    srv.stop();
}

#[test]
fn stats_file_counts_operations_by_kind() {
    let mut srv = TestServer::start(vec![
        ExportInfo::new("lun0", 4 * MIB),
        ExportInfo::new("lun1", 4 * MIB),
    ]);
    qemu_io(
        &srv.uri("lun0"),
        &[
            "write -P 1 0 4096",
            "write -P 2 4096 4096",
            "read -P 1 0 4096",
            "write -P 3 100 10",
            "flush",
        ],
    );
    let stats_path = srv.stats_path.clone();
    srv.stop();
    let s = read_stats_file(&stats_path).expect("stats file written at shutdown");
    assert!(s.is_final);
    assert_eq!(s.exports.len(), 2);
    let e = &s.exports[0];
    assert_eq!(e.name, "lun0");
    assert_eq!(e.ops.write, 3, "{e:?}");
    assert_eq!(e.bytes.write, 4096 * 2 + 10);
    assert!(e.ops.read >= 1 && e.bytes.read >= 4096, "{e:?}");
    assert!(e.ops.flush >= 1, "{e:?}");
    assert_eq!(e.unaligned, 1, "{e:?}");
    assert_eq!(e.errors, 0);
    assert_eq!(e.latency_us["write"].count, 3);
    assert_eq!(s.exports[1].ops.total(), 0);
    assert!(s.connections.total >= 1);
    assert_eq!(s.backend["allocated_blocks"], 2);
    let text = render_status(&s, s.unix_time_ms);
    println!("{text}");
    assert!(text.contains("stopped"), "{text}");
    let lun0 = text
        .lines()
        .find(|l| l.starts_with("lun0"))
        .expect("lun0 line");
    assert!(lun0.contains("4.0 MiB"), "{text}");
}
