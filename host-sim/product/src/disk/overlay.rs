//! A disk whose writes stay in memory, over one that is only read: what a read-only import
//! serves the pool from (`serve --read-only`).

use std::collections::BTreeMap;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};

/// A disk that never writes the disk under it: each block written is kept in memory and read
/// back over it, until the value is dropped (nothing is durable, and `flush` does nothing).
/// Import runs on such disks as on writable ones — it may roll the log forward, resync, heal,
/// write labels and a checkpoint — and none of it reaches the images.
///
/// Memory is bounded: past `cap_bytes` of distinct blocks (`serve --read-only-memory`) a
/// write fails whole with [`ErrorKind::NoSpace`] (the pool suspends, as on a full host file
/// system; a warning says which limit was reached) and changes nothing. Import's own writes (a
/// checkpoint, the write-hole resync of the log's tail, labels) are a few segments; repairs of
/// what reads find damaged are as many as the damage read.
#[derive(Debug)]
pub struct Overlay<D> {
    disk: D,
    blocks: BTreeMap<u64, Box<[u8]>>,
    cap_blocks: u64,
    /// What the warning at the cap names (the image).
    name: String,
    warned: bool,
}

impl<D: BlockDevice> Overlay<D> {
    /// `disk` (named `name` in the warning at the cap), with at most `cap_bytes` written over
    /// it (whole blocks).
    pub fn new(disk: D, cap_bytes: u64, name: impl Into<String>) -> Self {
        let cap_blocks = cap_bytes / disk.block_size().bytes() as u64;
        Overlay {
            disk,
            blocks: BTreeMap::new(),
            cap_blocks,
            name: name.into(),
            warned: false,
        }
    }

    /// The disk under the overlay (never written by it).
    pub fn inner(&self) -> &D {
        &self.disk
    }

    /// Blocks held in memory.
    #[must_use]
    pub fn blocks_held(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Copies the blocks held over `lba..lba + n` into `buf`.
    fn patch(&self, lba: u64, n: u64, buf: &mut [u8]) {
        let bs = self.disk.block_size().bytes();
        for (&at, data) in self.blocks.range(lba..lba + n) {
            let off = usize::try_from(at - lba).unwrap_or(usize::MAX) * bs;
            if let Some(dst) = buf.get_mut(off..off + bs) {
                dst.copy_from_slice(data);
            }
        }
    }

    /// Reads from the disk only the runs of `lba..lba + n` the overlay does not hold (after a
    /// read of the whole range failed: a block written over a bad sector reads from memory).
    fn read_uncovered(&mut self, lba: u64, n: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let bs = self.disk.block_size().bytes();
        let mut at = lba;
        while at < lba + n {
            if self.blocks.contains_key(&at) {
                at += 1;
                continue;
            }
            let end = (at..lba + n)
                .find(|b| self.blocks.contains_key(b))
                .unwrap_or(lba + n);
            let off = usize::try_from(at - lba).unwrap_or(usize::MAX) * bs;
            let len = usize::try_from(end - at).unwrap_or(usize::MAX) * bs;
            if let Some(dst) = buf.get_mut(off..off + len) {
                self.disk.read(at, dst)?;
            }
            at = end;
        }
        Ok(())
    }
}

impl<D: BlockDevice> ErrorType for Overlay<D>
where
    D::Error: From<ErrorKind>,
{
    type Error = D::Error;
}

impl<D: BlockDevice> BlockDevice for Overlay<D>
where
    D::Error: From<ErrorKind>,
{
    fn block_size(&self) -> BlockSize {
        self.disk.block_size()
    }

    fn block_count(&self) -> u64 {
        self.disk.block_count()
    }

    /// The disk's blocks with those written over them. When the disk fails to read the range,
    /// the runs the overlay does not hold are read alone, so a block written over a bad sector
    /// (a repair) reads back.
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        let held = self.blocks.range(lba..lba + n).next().is_some();
        match self.disk.read(lba, buf) {
            Err(e) if !held => return Err(e),
            Err(_) => self.read_uncovered(lba, n, buf)?,
            Ok(()) => {}
        }
        self.patch(lba, n, buf);
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        let new = (lba..lba + n)
            .filter(|b| !self.blocks.contains_key(b))
            .count() as u64;
        if self.blocks.len() as u64 + new > self.cap_blocks {
            if !std::mem::replace(&mut self.warned, true) {
                log::warn!(
                    "read-only: the memory that holds what the pool writes over {} is full \
                     ({} blocks); writes to it fail and the pool suspends (serve again with a \
                     larger --read-only-memory)",
                    self.name,
                    self.cap_blocks
                );
            }
            return Err(ErrorKind::NoSpace.into());
        }
        let bs = self.block_size().bytes();
        for (i, data) in buf.chunks_exact(bs).enumerate() {
            self.blocks.insert(lba + i as u64, data.into());
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), D::Error> {
        Ok(())
    }

    /// Checks the range and keeps everything (trim is advisory).
    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), D::Error> {
        check_range(self.block_count(), lba, blocks)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::{DiskError, FileDisk, FileDiskOptions};

    fn image(blocks: u64) -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("disk0.img");
        let mut d = FileDisk::create_with(&p, BlockSize::B4096, blocks, FileDiskOptions::default())
            .unwrap();
        for b in 0..blocks {
            d.write(b, &[b as u8 + 1; 4096]).unwrap();
        }
        (tmp, p)
    }

    #[test]
    fn writes_are_read_back_and_never_reach_the_image() {
        let (_tmp, p) = image(8);
        let before = std::fs::read(&p).unwrap();
        let ro = FileDisk::open_read_only(&p, BlockSize::B4096).unwrap();
        let mut o = Overlay::new(ro, 4 * 4096, "disk0.img");
        o.write(2, &[0xaa; 8192]).unwrap();
        o.flush().unwrap();
        let mut buf = vec![0; 4 * 4096];
        o.read(1, &mut buf).unwrap();
        let firsts: Vec<u8> = buf.chunks(4096).map(|b| b[0]).collect();
        assert_eq!(firsts, [2, 0xaa, 0xaa, 5]);
        assert_eq!(o.blocks_held(), 2);
        drop(o);
        assert!(
            std::fs::read(&p).unwrap() == before,
            "the image was written"
        );
    }

    #[test]
    fn a_write_past_the_cap_fails_whole_with_no_space() {
        let (_tmp, p) = image(8);
        let ro = FileDisk::open_read_only(&p, BlockSize::B4096).unwrap();
        let mut o = Overlay::new(ro, 3 * 4096, "disk0.img");
        o.write(0, &[1; 8192]).unwrap();
        // Rewriting held blocks takes no more room.
        o.write(0, &[2; 8192]).unwrap();
        let e: DiskError = o.write(1, &[3; 3 * 4096]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NoSpace);
        let mut buf = vec![0; 4096];
        o.read(2, &mut buf).unwrap();
        assert_eq!(
            buf[0], 3,
            "block 2 is the image's: the refused write changed nothing"
        );
        o.read(1, &mut buf).unwrap();
        assert_eq!(buf[0], 2);
        let e = o.write(8, &[0; 4096]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfRange);
    }

    /// A disk of 8 blocks whose block `bad` reads with a latent sector error.
    struct BadSector {
        bad: u64,
    }

    impl ErrorType for BadSector {
        type Error = DiskError;
    }

    impl BlockDevice for BadSector {
        fn block_size(&self) -> BlockSize {
            BlockSize::B4096
        }
        fn block_count(&self) -> u64 {
            8
        }
        fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), DiskError> {
            let n = check_io(BlockSize::B4096, 8, lba, buf.len())?;
            if (lba..lba + n).contains(&self.bad) {
                return Err(ErrorKind::Medium { lba: self.bad }.into());
            }
            for (i, b) in buf.chunks_mut(4096).enumerate() {
                b.fill(lba as u8 + i as u8 + 1);
            }
            Ok(())
        }
        fn write(&mut self, _: u64, _: &[u8]) -> Result<(), DiskError> {
            panic!("an overlay wrote to the disk under it");
        }
        fn flush(&mut self) -> Result<(), DiskError> {
            Ok(())
        }
    }

    #[test]
    fn a_block_written_over_a_bad_sector_reads_back_beside_the_disk_blocks() {
        let mut o = Overlay::new(BadSector { bad: 3 }, 1 << 20, "disk0.img");
        let mut buf = vec![0; 4 * 4096];
        let e = o.read(1, &mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Medium { lba: 3 });
        o.write(3, &[0xaa; 4096]).unwrap();
        o.read(1, &mut buf).unwrap();
        let firsts: Vec<u8> = buf.chunks(4096).map(|b| b[0]).collect();
        assert_eq!(firsts, [2, 3, 0xaa, 5]);
        // Another bad block not held still fails the read.
        let mut o = Overlay::new(BadSector { bad: 4 }, 1 << 20, "disk0.img");
        o.write(3, &[0xaa; 4096]).unwrap();
        let e = o.read(2, &mut buf[..3 * 4096]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Medium { lba: 4 });
    }
}
