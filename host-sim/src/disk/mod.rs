//! Simulated disks: sparse memory ([`MemDisk`]), disk-image files ([`FileDisk`]), a data-less
//! disk for timing-only runs ([`NullDisk`]), and [`SimDisk`], one concrete type over all three
//! so that a pool (which needs a single member type `D`) can mix them.
//!
//! All of them implement [`raidcore_hal::BlockDevice`] with the error type [`SimError`], which
//! wrappers ([`crate::fault::FaultyDisk`], [`crate::model::TimedDisk`]) pass on unchanged.
//! Requests are checked with [`raidcore_hal::check_io`] before anything is touched, so a bad
//! range or length changes nothing.

mod file;
mod mem;
mod null;

pub use file::{FileDisk, FileDiskOptions};
pub use mem::{CHUNK_BYTES, MemDisk};
pub use null::NullDisk;

use core::fmt;
use std::io;

use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType};

/// The error of every simulated disk: a portable [`ErrorKind`] plus, where the cause was an
/// operating-system I/O error, that error (see [`SimError::io_error`]).
#[derive(Debug)]
pub struct SimError {
    kind: ErrorKind,
    context: &'static str,
    io: Option<io::Error>,
}

impl SimError {
    /// An error of `kind` with no further cause.
    #[must_use]
    pub const fn new(kind: ErrorKind) -> Self {
        Self {
            kind,
            context: "",
            io: None,
        }
    }

    /// An error of `kind` explained by `context` (a short phrase such as "creating disk image").
    #[must_use]
    pub const fn with_context(kind: ErrorKind, context: &'static str) -> Self {
        Self {
            kind,
            context,
            io: None,
        }
    }

    /// An error of `kind` caused by the operating-system error `err` while doing `context`.
    #[must_use]
    pub fn io(kind: ErrorKind, context: &'static str, err: io::Error) -> Self {
        Self {
            kind,
            context,
            io: Some(err),
        }
    }

    /// The portable kind the RAID layer acts on.
    #[must_use]
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What was being done, or `""`.
    #[must_use]
    pub const fn context(&self) -> &'static str {
        self.context
    }

    /// The operating-system error behind this one, if any.
    #[must_use]
    pub fn io_error(&self) -> Option<&io::Error> {
        self.io.as_ref()
    }
}

impl From<ErrorKind> for SimError {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

impl raidcore_hal::Error for SimError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.context.is_empty() {
            if self.kind == ErrorKind::Other && self.io.is_none() {
                // The context says it all; "device error" after it would only confuse.
                return f.write_str(self.context);
            }
            write!(f, "{}: ", self.context)?;
        }
        write!(f, "{}", self.kind)?;
        if let Some(e) = &self.io {
            write!(f, " ({e})")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Byte offset of block `lba` (callers have checked the range, so this cannot overflow for a
/// device whose size in bytes fits in `u64`).
pub(crate) fn byte_offset(block_size: BlockSize, lba: u64) -> u64 {
    lba.saturating_mul(block_size.bytes() as u64)
}

/// One disk of any simulated kind, so that a pool of mixed members has one member type.
#[derive(Debug)]
pub enum SimDisk {
    /// A sparse in-memory disk.
    Mem(MemDisk),
    /// A disk-image file.
    File(FileDisk),
    /// A disk that stores nothing (timing-only runs).
    Null(NullDisk),
}

impl From<MemDisk> for SimDisk {
    fn from(d: MemDisk) -> Self {
        SimDisk::Mem(d)
    }
}

impl From<FileDisk> for SimDisk {
    fn from(d: FileDisk) -> Self {
        SimDisk::File(d)
    }
}

impl From<NullDisk> for SimDisk {
    fn from(d: NullDisk) -> Self {
        SimDisk::Null(d)
    }
}

impl ErrorType for SimDisk {
    type Error = SimError;
}

impl BlockDevice for SimDisk {
    fn block_size(&self) -> BlockSize {
        match self {
            SimDisk::Mem(d) => d.block_size(),
            SimDisk::File(d) => d.block_size(),
            SimDisk::Null(d) => d.block_size(),
        }
    }

    fn block_count(&self) -> u64 {
        match self {
            SimDisk::Mem(d) => d.block_count(),
            SimDisk::File(d) => d.block_count(),
            SimDisk::Null(d) => d.block_count(),
        }
    }

    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.read(lba, buf),
            SimDisk::File(d) => d.read(lba, buf),
            SimDisk::Null(d) => d.read(lba, buf),
        }
    }

    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.write(lba, buf),
            SimDisk::File(d) => d.write(lba, buf),
            SimDisk::Null(d) => d.write(lba, buf),
        }
    }

    fn flush(&mut self) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.flush(),
            SimDisk::File(d) => d.flush(),
            SimDisk::Null(d) => d.flush(),
        }
    }

    fn trim(&mut self, lba: u64, blocks: u64) -> Result<(), SimError> {
        match self {
            SimDisk::Mem(d) => d.trim(lba, blocks),
            SimDisk::File(d) => d.trim(lba, blocks),
            SimDisk::Null(d) => d.trim(lba, blocks),
        }
    }
}
