//! Disks of the host: disk-image files ([`FileDisk`]) and a disk that stores nothing
//! ([`NullDisk`], on which `create` tries a layout before it makes any file).
//!
//! Both implement [`raidcore_hal::BlockDevice`] with the error type [`DiskError`]. Requests are
//! checked with [`raidcore_hal::check_io`] before anything is touched, so a bad range or length
//! changes nothing.

mod file;
mod null;
mod overlay;

pub use file::{FileDisk, FileDiskOptions};
pub use null::NullDisk;
pub use overlay::Overlay;

use core::fmt;
use std::io;

use raidcore_hal::{BlockSize, ErrorKind};

/// The error of a host disk: a portable [`ErrorKind`] (what the RAID layer acts on), what was
/// being done, and, where the cause was an operating-system I/O error, that error (see
/// [`DiskError::io_error`]).
#[derive(Debug)]
pub struct DiskError {
    kind: ErrorKind,
    context: &'static str,
    io: Option<io::Error>,
}

impl DiskError {
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

impl From<ErrorKind> for DiskError {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

impl raidcore_hal::Error for DiskError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for DiskError {
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

impl std::error::Error for DiskError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Byte offset of block `lba` (callers have checked the range, so this cannot overflow for a
/// device whose size in bytes fits in `u64`).
pub fn byte_offset(block_size: BlockSize, lba: u64) -> u64 {
    lba.saturating_mul(block_size.bytes() as u64)
}
