//! A disk whose writes stay in memory, over one that is only read: what a read-only import
//! serves the pool from (`serve --read-only`).

use std::collections::BTreeMap;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};

/// Blocks an [`Overlay`] keeps by default, per member: 64 MiB of 4 KiB blocks. Import's own
/// writes (a checkpoint, the write-hole resync of the log's tail, labels, heals of what reads
/// found damaged) are a few segments at most.
pub const OVERLAY_BLOCKS: u64 = 16 * 1024;

/// A disk that never writes the disk under it: each block written is kept in memory and read
/// back over it, until the value is dropped (nothing is durable, and `flush` does nothing).
/// Import runs on such disks as on writable ones — it may roll the log forward, resync, heal,
/// write labels and a checkpoint — and none of it reaches the images.
///
/// Memory is bounded: past `cap_blocks` distinct blocks a write fails whole with
/// [`ErrorKind::NoSpace`] (the pool suspends, as on a full host file system) and changes
/// nothing.
#[derive(Debug)]
pub struct Overlay<D> {
    disk: D,
    blocks: BTreeMap<u64, Box<[u8]>>,
    cap_blocks: u64,
}

impl<D: BlockDevice> Overlay<D> {
    /// `disk`, with at most `cap_blocks` blocks written over it.
    pub fn new(disk: D, cap_blocks: u64) -> Self {
        Overlay {
            disk,
            blocks: BTreeMap::new(),
            cap_blocks,
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

    /// Copies the blocks held over `lba..lba + n` into `buf`; whether they cover it all.
    fn patch(&self, lba: u64, n: u64, buf: &mut [u8]) -> bool {
        let bs = self.disk.block_size().bytes();
        let mut covered = 0;
        for (&at, data) in self.blocks.range(lba..lba + n) {
            let off = usize::try_from(at - lba).unwrap_or(usize::MAX) * bs;
            if let Some(dst) = buf.get_mut(off..off + bs) {
                dst.copy_from_slice(data);
                covered += 1;
            }
        }
        covered == n
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

    /// The disk's blocks with those written over them; a range the disk fails to read still
    /// reads when the overlay holds every block of it.
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        let under = self.disk.read(lba, buf);
        let whole = self.patch(lba, n, buf);
        match under {
            Err(_) if whole => Ok(()),
            r => r,
        }
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        let new = (lba..lba + n)
            .filter(|b| !self.blocks.contains_key(b))
            .count() as u64;
        if self.blocks.len() as u64 + new > self.cap_blocks {
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
        let mut o = Overlay::new(ro, 4);
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
        let mut o = Overlay::new(ro, 3);
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
}
