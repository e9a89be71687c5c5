//! A sparse in-memory disk.

use core::fmt;
use std::collections::BTreeMap;
use std::sync::Arc;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io, check_range};
use raidcore_host::disk::byte_offset;

use super::SimError;

/// Bytes per allocation chunk of a [`MemDisk`] (64 KiB, a multiple of both block sizes).
pub const CHUNK_BYTES: usize = 64 * 1024;
const CHUNK: u64 = CHUNK_BYTES as u64;

/// A disk held in memory, sparse: only chunks of [`CHUNK_BYTES`] that were written with
/// something other than zeros cost RAM, so a 1 TiB disk costs what is written to it. Blocks never
/// written read as zeros.
///
/// Chunks are shared copy-on-write (`Arc`), so [`MemDisk::snapshot`] (and `clone`) copies only
/// the chunk table, not the data: crash tests can keep an image of every disk at every step.
/// `flush` does nothing (memory is the medium); power-loss behaviour is added by
/// [`crate::fault::FaultyDisk`]. `trim` zeros the range and frees whole chunks it covers.
#[derive(Clone)]
pub struct MemDisk {
    block_size: BlockSize,
    block_count: u64,
    chunks: BTreeMap<u64, Arc<[u8]>>,
}

impl fmt::Debug for MemDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemDisk")
            .field("block_size", &self.block_size)
            .field("block_count", &self.block_count)
            .field("allocated_bytes", &self.allocated_bytes())
            .finish_non_exhaustive()
    }
}

impl MemDisk {
    /// An all-zero disk of `block_count` blocks of `block_size`.
    ///
    /// Errors: [`ErrorKind::OutOfRange`] if `block_count` is 0 or the size in bytes overflows
    /// `u64`.
    pub fn new(block_size: BlockSize, block_count: u64) -> Result<Self, SimError> {
        if block_count == 0 || block_count.checked_mul(block_size.bytes() as u64).is_none() {
            return Err(SimError::with_context(
                ErrorKind::OutOfRange,
                "memory disk size (zero blocks or over 2^64 bytes)",
            ));
        }
        Ok(Self {
            block_size,
            block_count,
            chunks: BTreeMap::new(),
        })
    }

    /// A copy of the current contents that later writes to either disk do not affect. Costs one
    /// table entry per allocated chunk; the data is shared until one side writes it.
    #[must_use]
    pub fn snapshot(&self) -> MemDisk {
        self.clone()
    }

    /// Bytes of RAM held for data (allocated chunks times [`CHUNK_BYTES`]; chunks shared with a
    /// snapshot are counted by each).
    #[must_use]
    pub fn allocated_bytes(&self) -> u64 {
        self.chunks.len() as u64 * CHUNK
    }

    /// Capacity in bytes.
    #[must_use]
    pub fn capacity_bytes(&self) -> u64 {
        byte_offset(self.block_size, self.block_count)
    }

    /// The first block (LBA) whose content differs between `self` and `other`, or `None` if the
    /// two disks are identical. Disks of different geometry differ at block 0.
    #[must_use]
    pub fn first_difference(&self, other: &MemDisk) -> Option<u64> {
        if self.block_size != other.block_size || self.block_count != other.block_count {
            return Some(0);
        }
        let bs = self.block_size.bytes();
        let zero = vec![0u8; CHUNK_BYTES];
        let keys: std::collections::BTreeSet<u64> = self
            .chunks
            .keys()
            .chain(other.chunks.keys())
            .copied()
            .collect();
        for k in keys {
            let a = self.chunks.get(&k);
            let b = other.chunks.get(&k);
            if let (Some(a), Some(b)) = (a, b)
                && Arc::ptr_eq(a, b)
            {
                continue;
            }
            let a: &[u8] = a.map_or(&zero[..], |c| &c[..]);
            let b: &[u8] = b.map_or(&zero[..], |c| &c[..]);
            if a != b {
                let pos = a
                    .chunks(bs)
                    .zip(b.chunks(bs))
                    .position(|(x, y)| x != y)
                    .unwrap_or(0);
                return Some(k * CHUNK / bs as u64 + pos as u64);
            }
        }
        None
    }

    /// Calls `f(chunk_index, offset_in_chunk, range_in_buf)` for each chunk piece covering
    /// `len` bytes from byte `start`.
    fn for_each_piece(
        start: u64,
        len: usize,
        mut f: impl FnMut(u64, usize, core::ops::Range<usize>),
    ) {
        let mut done = 0usize;
        while done < len {
            let pos = start + done as u64;
            let chunk = pos / CHUNK;
            let within = (pos % CHUNK) as usize;
            let n = (CHUNK_BYTES - within).min(len - done);
            f(chunk, within, done..done + n);
            done += n;
        }
    }
}

impl ErrorType for MemDisk {
    type Error = SimError;
}

impl BlockDevice for MemDisk {
    fn block_size(&self) -> BlockSize {
        self.block_size
    }

    fn block_count(&self) -> u64 {
        self.block_count
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SimError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        let start = byte_offset(self.block_size, lba);
        Self::for_each_piece(start, buf.len(), |chunk, within, range| {
            let n = range.len();
            let dst = &mut buf[range];
            match self.chunks.get(&chunk) {
                Some(c) => dst.copy_from_slice(&c[within..within + n]),
                None => dst.fill(0),
            }
        });
        Ok(())
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SimError> {
        check_io(self.block_size, self.block_count, lba, buf.len())?;
        let start = byte_offset(self.block_size, lba);
        Self::for_each_piece(start, buf.len(), |chunk, within, range| {
            let n = range.len();
            let src = &buf[range];
            match self.chunks.get_mut(&chunk) {
                Some(c) => Arc::make_mut(c)[within..within + n].copy_from_slice(src),
                // Writing zeros to a never-written chunk changes nothing: stay sparse.
                None if src.iter().all(|&b| b == 0) => {}
                None => {
                    // Built in place: a `Vec` made into an `Arc` would be copied once more.
                    let mut c: Arc<[u8]> = std::iter::repeat_n(0u8, CHUNK_BYTES).collect();
                    if let Some(c) = Arc::get_mut(&mut c) {
                        c[within..within + n].copy_from_slice(src);
                    }
                    self.chunks.insert(chunk, c);
                }
            }
        });
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SimError> {
        Ok(())
    }

    /// Zeros the blocks and frees every chunk the range covers entirely.
    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), SimError> {
        check_range(self.block_count, lba, blocks)?;
        let bs = self.block_size.bytes() as u64;
        let mut pos = lba * bs;
        let end = (lba + blocks) * bs;
        while pos < end {
            let chunk = pos / CHUNK;
            let within = (pos % CHUNK) as usize;
            let n = (CHUNK - within as u64).min(end - pos) as usize;
            if within == 0 && n == CHUNK_BYTES {
                self.chunks.remove(&chunk);
            } else if let Some(c) = self.chunks.get_mut(&chunk) {
                Arc::make_mut(c)[within..within + n].fill(0);
            }
            pos += n as u64;
        }
        Ok(())
    }
}
