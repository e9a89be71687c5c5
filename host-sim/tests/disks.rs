//! Simulated disks: memory, file images, the null disk and the `SimDisk` enum.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind};
use raidcore_sim::disk::{CHUNK_BYTES, FileDisk, FileDiskOptions, MemDisk, NullDisk, SimDisk};

const TIB: u64 = 1 << 40;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn read_vec<D: BlockDevice>(d: &mut D, lba: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0xEE; len];
    d.read(lba, &mut buf).expect("read");
    buf
}

/// A real file of this machine, at least 32 KiB: the first in sorted order under
/// /usr/share/doc (falling back to /usr/share/common-licenses).
fn real_file() -> (PathBuf, Vec<u8>) {
    fn walk(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
        let Ok(rd) = fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if !out.is_empty() {
                return;
            }
            let Ok(md) = fs::symlink_metadata(&p) else {
                continue;
            };
            if md.is_dir() && depth < 3 {
                walk(&p, depth + 1, out);
            } else if md.is_file() && md.len() >= 32 * 1024 {
                out.push(p);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/usr/share/doc"), 0, &mut found);
    walk(Path::new("/usr/share/common-licenses"), 0, &mut found);
    let path = found
        .pop()
        .expect("no file of at least 32 KiB under /usr/share/doc or /usr/share/common-licenses");
    let data = fs::read(&path).expect("read real file");
    (path, data)
}

#[test]
fn mem_disk_round_trip_both_block_sizes() {
    for bs in [BlockSize::B512, BlockSize::B4096] {
        let b = bs.bytes();
        let mut d = MemDisk::new(bs, 1000).unwrap();
        assert_eq!(d.capacity_bytes(), 1000 * b as u64);
        // Never-written blocks read as zeros.
        assert_eq!(read_vec(&mut d, 0, 3 * b), vec![0; 3 * b]);
        // A write spanning a chunk boundary.
        let lba = (CHUNK_BYTES / b) as u64 - 1;
        let data = pattern(5 * b, 7);
        d.write(lba, &data).unwrap();
        assert_eq!(read_vec(&mut d, lba, 5 * b), data);
        // Neighbours untouched.
        assert_eq!(read_vec(&mut d, lba - 1, b), vec![0; b]);
        assert_eq!(read_vec(&mut d, lba + 5, b), vec![0; b]);
        // Last block.
        d.write(999, &pattern(b, 9)).unwrap();
        assert_eq!(read_vec(&mut d, 999, b), pattern(b, 9));
        d.flush().unwrap();
    }
}

#[test]
fn mem_disk_refuses_bad_requests_and_changes_nothing() {
    let mut d = MemDisk::new(BlockSize::B512, 16).unwrap();
    d.write(0, &pattern(16 * 512, 1)).unwrap();
    let before = d.snapshot();
    let kind = |r: Result<(), raidcore_sim::disk::SimError>| r.unwrap_err().kind();
    assert_eq!(kind(d.write(15, &[1; 1024])), ErrorKind::OutOfRange);
    assert_eq!(kind(d.write(16, &[1; 512])), ErrorKind::OutOfRange);
    assert_eq!(kind(d.write(u64::MAX, &[1; 512])), ErrorKind::OutOfRange);
    assert_eq!(kind(d.write(0, &[1; 100])), ErrorKind::Misaligned);
    assert_eq!(kind(d.write(0, &[])), ErrorKind::Misaligned);
    let mut buf = [0u8; 513];
    assert_eq!(kind(d.read(0, &mut buf)), ErrorKind::Misaligned);
    assert_eq!(kind(d.read(16, &mut buf[..512])), ErrorKind::OutOfRange);
    assert_eq!(kind(d.trim(10, 7)), ErrorKind::OutOfRange);
    assert_eq!(kind(d.trim(0, 0)), ErrorKind::OutOfRange);
    assert_eq!(d.first_difference(&before), None);
    // Geometry errors.
    assert_eq!(
        MemDisk::new(BlockSize::B512, 0).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        MemDisk::new(BlockSize::B4096, u64::MAX).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
}

#[test]
fn mem_disk_of_one_tib_costs_what_is_written() {
    let mut d = MemDisk::new(BlockSize::B4096, TIB / 4096).unwrap();
    assert_eq!(d.capacity_bytes(), TIB);
    assert_eq!(d.allocated_bytes(), 0);
    let last = d.block_count() - 1;
    for lba in [0, last / 2, last] {
        d.write(lba, &pattern(4096, lba as u8)).unwrap();
    }
    // Zeros written to untouched space allocate nothing.
    d.write(1000, &[0; 8192]).unwrap();
    assert_eq!(d.allocated_bytes(), 3 * CHUNK_BYTES as u64);
    for lba in [0, last / 2, last] {
        assert_eq!(read_vec(&mut d, lba, 4096), pattern(4096, lba as u8));
    }
    // Reading a large untouched range allocates nothing either.
    assert_eq!(read_vec(&mut d, 12345, 1 << 20), vec![0; 1 << 20]);
    assert_eq!(d.allocated_bytes(), 3 * CHUNK_BYTES as u64);
}

#[test]
fn mem_disk_snapshot_is_isolated_and_diffable() {
    let mut d = MemDisk::new(BlockSize::B512, 4096).unwrap();
    d.write(10, &pattern(4096, 3)).unwrap();
    let snap = d.snapshot();
    assert_eq!(d.first_difference(&snap), None);
    d.write(12, &pattern(512, 99)).unwrap();
    assert_eq!(d.first_difference(&snap), Some(12));
    assert_eq!(snap.first_difference(&d), Some(12));
    let mut snap = snap;
    assert_eq!(read_vec(&mut snap, 12, 512), pattern(4096, 3)[1024..1536]);
    // A block written in one and never in the other.
    d.write(3000, &pattern(512, 1)).unwrap();
    snap.write(12, &pattern(512, 99)).unwrap();
    assert_eq!(snap.first_difference(&d), Some(3000));
    // Different geometry differs at 0.
    let other = MemDisk::new(BlockSize::B4096, 512).unwrap();
    assert_eq!(d.first_difference(&other), Some(0));
}

#[test]
fn mem_disk_trim_zeros_and_frees() {
    let mut d = MemDisk::new(BlockSize::B512, 1024).unwrap();
    d.write(0, &pattern(1024 * 512, 5)).unwrap();
    assert_eq!(d.allocated_bytes(), 8 * CHUNK_BYTES as u64);
    // Trim the second chunk entirely plus one block either side.
    d.trim(127, 130).unwrap();
    assert_eq!(d.allocated_bytes(), 7 * CHUNK_BYTES as u64);
    assert_eq!(read_vec(&mut d, 127, 130 * 512), vec![0; 130 * 512]);
    assert_eq!(
        read_vec(&mut d, 126, 512),
        pattern(1024 * 512, 5)[126 * 512..127 * 512]
    );
    assert_eq!(
        read_vec(&mut d, 257, 512),
        pattern(1024 * 512, 5)[257 * 512..258 * 512]
    );
}

#[test]
fn file_disk_round_trips_a_real_file() {
    let (path, data) = real_file();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let bs = 512usize;
    let blocks = data.len().div_ceil(bs);
    let mut padded = data.clone();
    padded.resize(blocks * bs, 0);
    {
        let mut d = FileDisk::create(&img, BlockSize::B512, 100_000).unwrap();
        assert_eq!(d.block_count(), 100_000);
        assert_eq!(d.path(), img.as_path());
        d.write(777, &padded).unwrap();
        d.flush().unwrap();
        assert_eq!(
            read_vec(&mut d, 777, padded.len()),
            padded,
            "read back {}",
            path.display()
        );
    }
    // Reopen: the block count comes from the file length, the data is still there.
    let mut d = FileDisk::open(&img, BlockSize::B512).unwrap();
    assert_eq!(d.block_count(), 100_000);
    let back = read_vec(&mut d, 777, padded.len());
    assert_eq!(&back[..data.len()], &data[..], "file {}", path.display());
    // And it is a raw image: the bytes sit at lba * block size in the file.
    let raw = fs::read(&img).unwrap();
    assert_eq!(&raw[777 * 512..777 * 512 + data.len()], &data[..]);
    // Untouched blocks are zeros.
    assert_eq!(read_vec(&mut d, 0, 4096), vec![0; 4096]);
    // The same file opened with 4 KiB blocks has an eighth of the blocks (once the first
    // opener has let go of it: an image is locked while open).
    drop(d);
    let d4 = FileDisk::open(&img, BlockSize::B4096).unwrap();
    assert_eq!(d4.block_count(), 12_500);
}

#[test]
fn file_disk_is_sparse() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("big.img");
    let mut d = FileDisk::create(&img, BlockSize::B4096, (8u64 << 30) / 4096).unwrap();
    d.write(1_000_000, &pattern(4096, 1)).unwrap();
    let md = fs::metadata(&img).unwrap();
    assert_eq!(md.len(), 8 << 30);
    // st_blocks is in 512-byte units: far below the 8 GiB length.
    assert!(
        md.blocks() * 512 < 16 << 20,
        "allocated {} bytes",
        md.blocks() * 512
    );
}

#[test]
fn file_disk_refuses_bad_lengths_ranges_and_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("d.img");
    let mut d = FileDisk::create(&img, BlockSize::B4096, 8).unwrap();
    d.write(0, &pattern(8 * 4096, 2)).unwrap();
    let kind = |r: Result<(), raidcore_sim::disk::SimError>| r.unwrap_err().kind();
    assert_eq!(kind(d.write(7, &[0; 8192])), ErrorKind::OutOfRange);
    assert_eq!(kind(d.write(0, &[0; 512])), ErrorKind::Misaligned);
    let mut buf = vec![0; 4096];
    assert_eq!(kind(d.read(8, &mut buf)), ErrorKind::OutOfRange);
    assert_eq!(kind(d.trim(8, 1)), ErrorKind::OutOfRange);
    d.trim(0, 8).unwrap();
    drop(d);

    // Create refuses an existing file and leaves it alone.
    let e = FileDisk::create(&img, BlockSize::B4096, 4).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Other);
    assert_eq!(
        e.io_error().map(io::Error::kind),
        Some(io::ErrorKind::AlreadyExists)
    );
    assert!(std::error::Error::source(&e).is_some());
    assert!(e.to_string().contains("creating disk image"), "{e}");
    let mut d = FileDisk::open(&img, BlockSize::B4096).unwrap();
    assert_eq!(d.block_count(), 8);
    assert_eq!(read_vec(&mut d, 0, 8 * 4096), pattern(8 * 4096, 2));
    drop(d);

    // ... unless asked to overwrite.
    let opts = FileDiskOptions {
        overwrite: true,
        sync_on_flush: false,
        preallocate: false,
    };
    let mut d = FileDisk::create_with(&img, BlockSize::B512, 4, opts).unwrap();
    assert!(!d.sync_on_flush());
    assert_eq!(read_vec(&mut d, 0, 2048), vec![0; 2048]);
    d.flush().unwrap();
    assert_eq!(fs::metadata(&img).unwrap().len(), 2048);

    // Lengths that are not a whole, non-zero number of blocks.
    let odd = dir.path().join("odd.img");
    fs::write(&odd, vec![1u8; 4096 + 512]).unwrap();
    let e = FileDisk::open(&odd, BlockSize::B4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Misaligned);
    assert_eq!(fs::read(&odd).unwrap().len(), 4096 + 512, "file untouched");
    assert_eq!(
        FileDisk::open(&odd, BlockSize::B512).unwrap().block_count(),
        9
    );
    let empty = dir.path().join("empty.img");
    fs::write(&empty, b"").unwrap();
    assert_eq!(
        FileDisk::open(&empty, BlockSize::B512).unwrap_err().kind(),
        ErrorKind::Misaligned
    );
    // Zero blocks, absurd sizes and missing files.
    let z = dir.path().join("z.img");
    assert_eq!(
        FileDisk::create(&z, BlockSize::B512, 0).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        FileDisk::create(&z, BlockSize::B4096, u64::MAX / 1024)
            .unwrap_err()
            .kind(),
        ErrorKind::OutOfRange
    );
    assert!(!z.exists(), "a refused create makes no file");
    let e = FileDisk::open(dir.path().join("missing.img"), BlockSize::B512).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Other);
    assert_eq!(
        e.io_error().map(io::Error::kind),
        Some(io::ErrorKind::NotFound)
    );
}

#[test]
fn sim_disk_mixes_kinds_in_one_pool() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool: Vec<SimDisk> = vec![
        MemDisk::new(BlockSize::B4096, 256).unwrap().into(),
        FileDisk::create(dir.path().join("m1.img"), BlockSize::B4096, 256)
            .unwrap()
            .into(),
        NullDisk::new(BlockSize::B4096, 256).unwrap().into(),
    ];
    for (i, d) in pool.iter_mut().enumerate() {
        assert_eq!(d.block_size(), BlockSize::B4096);
        assert_eq!(d.block_count(), 256);
        d.write(9, &pattern(8192, i as u8)).unwrap();
        d.flush().unwrap();
        d.trim(100, 4).unwrap();
        assert_eq!(
            d.write(255, &[0; 8192]).unwrap_err().kind(),
            ErrorKind::OutOfRange
        );
    }
    assert_eq!(read_vec(&mut pool[0], 9, 8192), pattern(8192, 0));
    assert_eq!(read_vec(&mut pool[1], 9, 8192), pattern(8192, 1));
    // The null disk stores nothing.
    assert_eq!(read_vec(&mut pool[2], 9, 8192), vec![0; 8192]);
}

/// An open image is locked: a second opener (another process, or this one through another
/// open file) is refused, `create_with(overwrite)` leaves the held image untouched, and the
/// lock goes with the first opener.
#[test]
fn an_open_image_is_locked_against_other_openers() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("held.img");
    let mut held = FileDisk::create(&img, BlockSize::B512, 64).unwrap();
    held.write(3, &[0x5a; 512]).unwrap();
    let refused = FileDisk::open(&img, BlockSize::B512).unwrap_err();
    assert!(refused.to_string().contains("locked"), "{refused}");
    let opts = FileDiskOptions {
        overwrite: true,
        sync_on_flush: false,
        preallocate: false,
    };
    let refused = FileDisk::create_with(&img, BlockSize::B512, 8, opts).unwrap_err();
    assert!(refused.to_string().contains("locked"), "{refused}");
    assert!(FileDisk::ensure_not_in_use(&img).is_err());
    // Nothing was truncated or resized under the holder.
    assert_eq!(fs::metadata(&img).unwrap().len(), 64 * 512);
    assert_eq!(read_vec(&mut held, 3, 512), vec![0x5a; 512]);
    drop(held);
    FileDisk::ensure_not_in_use(&img).unwrap();
    FileDisk::ensure_not_in_use(dir.path().join("missing.img")).unwrap();
    let mut again = FileDisk::open(&img, BlockSize::B512).unwrap();
    assert_eq!(read_vec(&mut again, 3, 512), vec![0x5a; 512]);
}
