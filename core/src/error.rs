//! Errors of the data path, shared by every layer from the log up: [`IoError`], and the
//! `bug!` macro that names where a broken invariant was found.

use crate::format::FormatError;
use crate::raid::ArrayError;

/// `Enum::LogicBug { at }` naming the file and line it is written on: the error a check of an
/// engine invariant returns instead of panicking (as sequential-storage's `Error::LogicBug`).
macro_rules! bug {
    ($t:ident) => {
        $t::LogicBug {
            at: $crate::error::BugAt {
                file: file!(),
                line: line!(),
            },
        }
    };
}
pub(crate) use bug;

/// Where a broken invariant was found: a source file of the engine and a line in it. (The
/// file name is shared by every check in it, so the checks cost little flash.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BugAt {
    /// Source file, from the crate root (`core/src/...`).
    pub file: &'static str,
    /// Line in it.
    pub line: u32,
}

impl core::fmt::Display for BugAt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Why a data-path call (read, write, flush, trim) failed. Nothing changed unless stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IoError {
    /// No LUN with that number.
    NoSuchLun,
    /// The LBA range is not inside the LUN.
    OutOfRange,
    /// The buffer is empty or not a whole number of 4 KiB blocks.
    Misaligned,
    /// The pool is full: nothing of this write was accepted.
    NoSpace,
    /// The block's data is lost (more damage than the RAID level tolerates); it reads back as
    /// this error until rewritten.
    Unrecoverable {
        /// LUN.
        lun: u16,
        /// LBA (4 KiB blocks).
        lba: u64,
    },
    /// More members failed than the level tolerates; the pool serves no I/O.
    Faulted,
    /// The pool is suspended: member I/O met a condition of the host around every member
    /// (its storage full or read-only). No member was failed and nothing more is written;
    /// requests fail with this until the pool is resumed after the condition
    /// clears. Writes acknowledged before are kept.
    Suspended {
        /// The condition.
        kind: raidcore_hal::ErrorKind,
    },
    /// A member or array operation failed.
    Device(ArrayError),
    /// On-disk metadata failed its checks and could not be repaired.
    Corrupt(FormatError),
    /// The log ran out of reserved segments (a configuration too small for the workload).
    LogFull,
    /// The map cache has no evictable page (configure more cache pages).
    CacheFull,
    /// Import: the log is unreadable at address `addr` (bytes), before the position the last
    /// completed flush made durable. More faults than the level tolerates destroyed an item
    /// header there, so the writes acknowledged after it cannot be found; importing anyway
    /// would serve their blocks' older data as current.
    LogLost {
        /// Log address (bytes) of the unreadable item.
        addr: u64,
    },
    /// An invariant of the engine did not hold (a bug); the operation was abandoned and nothing
    /// it had not yet written changed. `at` names the source file and line that found it.
    LogicBug {
        /// The check that failed.
        at: BugAt,
    },
}

impl core::fmt::Display for IoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IoError::NoSuchLun => f.write_str("no such LUN"),
            IoError::OutOfRange => f.write_str("LBA range past the end of the LUN"),
            IoError::Misaligned => f.write_str("buffer is not a whole number of 4 KiB blocks"),
            IoError::NoSpace => f.write_str("pool is full"),
            IoError::Unrecoverable { lun, lba } => write!(f, "LUN {lun} LBA {lba}: data lost"),
            IoError::LogLost { addr } => write!(
                f,
                "log unreadable at address {addr}, before the last flush's end: more faults \
                 than the level tolerates; acknowledged writes after it are lost"
            ),
            IoError::Suspended { kind } => write!(
                f,
                "pool suspended: {kind}; free the space (or make it writable) and resume the pool"
            ),
            IoError::Faulted => {
                f.write_str("pool faulted: more member failures than the level tolerates")
            }
            IoError::Device(e) => write!(f, "array: {e}"),
            IoError::Corrupt(e) => write!(f, "metadata damaged: {e}"),
            IoError::LogFull => f.write_str("log segments exhausted"),
            IoError::CacheFull => f.write_str("map cache too small"),
            IoError::LogicBug { at } => write!(f, "internal error (a bug) found at {at}"),
        }
    }
}

impl core::error::Error for IoError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            IoError::Device(e) => Some(e),
            IoError::Corrupt(e) => Some(e),
            _ => None,
        }
    }
}
