//! One global log of the writes and flushes of several disks, and the disks a power cut at any
//! point of it would leave.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{applied_runs, seeded_fate};
use crate::disk::{MemDisk, SimError};

/// One logged device operation. `disk` is the index given to [`RecordingDisk::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A completed write of `data` (a whole number of blocks) at block `lba`.
    Write {
        /// Which disk.
        disk: usize,
        /// First block.
        lba: u64,
        /// The bytes written.
        data: Vec<u8>,
    },
    /// A completed flush.
    Flush {
        /// Which disk.
        disk: usize,
    },
}

impl Record {
    /// The disk the record belongs to.
    #[must_use]
    pub const fn disk(&self) -> usize {
        match self {
            Record::Write { disk, .. } | Record::Flush { disk } => *disk,
        }
    }
}

/// A shared, append-only log of [`Record`]s in the global order the disks completed them.
/// Clones share the log.
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    records: Arc<Mutex<Vec<Record>>>,
}

impl WriteLog {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Record>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the log is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A copy of the records, in order.
    #[must_use]
    pub fn records(&self) -> Vec<Record> {
        self.lock().clone()
    }

    /// Forgets every record (e.g. after taking the base snapshot a crash test starts from).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn push(&self, r: Record) {
        self.lock().push(r);
    }
}

/// A disk that appends each completed write and flush to a shared [`WriteLog`]. Reads and trims
/// pass through unlogged (trim is advisory, so a crash image that ignores it is still one the
/// HAL allows). Failed operations are not logged.
#[derive(Debug)]
pub struct RecordingDisk<D> {
    inner: D,
    disk: usize,
    log: WriteLog,
}

impl<D: BlockDevice> RecordingDisk<D> {
    /// Logs `inner`'s writes to `log` as disk number `disk` (its index in the `base` slice
    /// given to [`materialise`]).
    pub fn new(inner: D, disk: usize, log: &WriteLog) -> Self {
        Self {
            inner,
            disk,
            log: log.clone(),
        }
    }

    /// The disk number.
    pub fn disk_index(&self) -> usize {
        self.disk
    }

    /// The wrapped disk.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped disk, mutably (writes through it are not logged).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The wrapped disk.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

impl<D: BlockDevice> ErrorType for RecordingDisk<D> {
    type Error = D::Error;
}

impl<D: BlockDevice> BlockDevice for RecordingDisk<D> {
    fn block_size(&self) -> BlockSize {
        self.inner.block_size()
    }

    fn block_count(&self) -> u64 {
        self.inner.block_count()
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        self.inner.read(lba, buf)
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        self.inner.write(lba, buf)?;
        self.log.push(Record::Write {
            disk: self.disk,
            lba,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn flush(&mut self) -> Result<(), D::Error> {
        self.inner.flush()?;
        self.log.push(Record::Flush { disk: self.disk });
        Ok(())
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), D::Error> {
        self.inner.trim(lba, blocks)
    }
}

/// What reaches the medium of the last write before the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// All of it.
    Whole,
    /// None of it.
    Dropped,
    /// Its first `blocks / 2` blocks (rounded down).
    FirstHalf,
    /// Its first `n` blocks (all of them if it has fewer).
    FirstBlocks(u64),
    /// Each block independently with probability 1/2, from this seed.
    Subset {
        /// Seed of the choice.
        seed: u64,
    },
}

/// What happens to the writes of the prefix that no flush on their disk covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unflushed {
    /// They all reached the medium (write-through disks).
    Durable,
    /// Each is applied whole, dropped or torn (probability 1/3 each; a torn write keeps each
    /// block with probability 1/2), drawn in log order from this seed: the volatile cache of the
    /// HAL's power-loss contract.
    Seeded {
        /// Seed of the choices.
        seed: u64,
    },
}

/// A power cut after the first `prefix` records of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashPoint {
    /// Records that completed before the cut (0..=log length).
    pub prefix: usize,
    /// What survives of the last record if it is a write (overrides `unflushed` for it).
    pub last: Tear,
    /// What survives of the other unflushed writes.
    pub unflushed: Unflushed,
}

impl CrashPoint {
    /// A cut after `prefix` records, everything before it durable.
    #[must_use]
    pub const fn after(prefix: usize) -> Self {
        Self {
            prefix,
            last: Tear::Whole,
            unflushed: Unflushed::Durable,
        }
    }

    /// A cut after `prefix` records with the last write torn like `last`.
    #[must_use]
    pub const fn torn(prefix: usize, last: Tear) -> Self {
        Self {
            prefix,
            last,
            unflushed: Unflushed::Durable,
        }
    }
}

fn tear_mask(tear: Tear, blocks: usize) -> Vec<bool> {
    match tear {
        Tear::Whole => vec![true; blocks],
        Tear::Dropped => vec![false; blocks],
        Tear::FirstHalf => (0..blocks).map(|i| i < blocks / 2).collect(),
        Tear::FirstBlocks(n) => (0..blocks).map(|i| (i as u64) < n).collect(),
        Tear::Subset { seed } => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..blocks).map(|_| rng.random_bool(0.5)).collect()
        }
    }
}

/// The disks as a power cut at `crash` leaves them: copies of `base` (the disks when the log
/// started, one per disk index) with the first `crash.prefix` records of `log` applied in order,
/// the last one torn like `crash.last`, and writes not covered by a later flush of their disk
/// treated as `crash.unflushed` says. `base` is not modified (snapshots are cheap).
///
/// Errors: [`ErrorKind::OutOfRange`] if `crash.prefix` exceeds the log or a record names a disk
/// past `base`; the disk's own error if a record does not fit its disk.
pub fn materialise(
    base: &[MemDisk],
    log: &[Record],
    crash: &CrashPoint,
) -> Result<Vec<MemDisk>, SimError> {
    let n = crash.prefix;
    let Some(prefix) = log.get(..n) else {
        return Err(SimError::with_context(
            ErrorKind::OutOfRange,
            "crash point past the end of the write log",
        ));
    };
    let mut disks: Vec<MemDisk> = base.iter().map(MemDisk::snapshot).collect();
    let mut last_flush = vec![None; disks.len()];
    for (i, r) in prefix.iter().enumerate() {
        let Some(slot) = last_flush.get_mut(r.disk()) else {
            return Err(SimError::with_context(
                ErrorKind::OutOfRange,
                "write log names a disk not in the base set",
            ));
        };
        if matches!(r, Record::Flush { .. }) {
            *slot = Some(i);
        }
    }
    let mut rng = match crash.unflushed {
        Unflushed::Durable => None,
        Unflushed::Seeded { seed } => Some(ChaCha8Rng::seed_from_u64(seed)),
    };
    for (i, r) in prefix.iter().enumerate() {
        let Record::Write { disk, lba, data } = r else {
            continue;
        };
        let d = &mut disks[*disk];
        let bs = d.block_size().bytes();
        if data.is_empty() || !data.len().is_multiple_of(bs) {
            return Err(SimError::with_context(
                ErrorKind::Misaligned,
                "write log record is not a whole number of blocks",
            ));
        }
        let blocks = data.len() / bs;
        let flushed = last_flush[*disk].is_some_and(|f| f > i);
        let mask = if i + 1 == n {
            tear_mask(crash.last, blocks)
        } else {
            match (&mut rng, flushed) {
                (Some(rng), false) => seeded_fate(rng, blocks).0,
                _ => vec![true; blocks],
            }
        };
        for (at, range) in applied_runs(*lba, &mask, bs) {
            d.write(at, &data[range])?;
        }
    }
    Ok(disks)
}
