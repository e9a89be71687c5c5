//! [`DirError`]: why a pool directory could not be created, opened or changed.

use std::fmt;
use std::io;
use std::path::PathBuf;

use raidcore::pool::{AdminError, IoError, LunError, OpenError};

use crate::disk::DiskError;

/// Why a pool directory could not be created, opened or changed.
#[derive(Debug)]
pub enum DirError {
    /// A file-system operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        err: io::Error,
    },
    /// A disk image refused (creating or opening it).
    Disk {
        /// The image.
        path: PathBuf,
        /// The cause.
        err: DiskError,
    },
    /// The pool could not be imported.
    Open(OpenError),
    /// The pool could not be created (its layout on these disks).
    Create(OpenError),
    /// A data-path or management call of the pool failed.
    Pool(IoError),
    /// A membership call (fail, replace, add a spare) was refused or failed.
    Admin(AdminError),
    /// A LUN could not be created, deleted or resized.
    Lun(LunError),
    /// The pool faulted under the request (a member failed by force past the level's
    /// tolerance); the text says what that leaves.
    Faulted(String),
    /// The request does not make sense; the text says why. Nothing was changed.
    Invalid(String),
    /// Another process has the pool (its directory or an image) open; the text names which.
    /// Nothing was changed.
    InUse(String),
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::Io { what, err } => write!(f, "{what}: {err}"),
            DirError::Disk { path, err } => write!(f, "{}: {err}", path.display()),
            DirError::Open(e) => write!(f, "opening the pool: {e}"),
            DirError::Create(e) => write!(f, "creating the pool: {e}"),
            DirError::Pool(e) => write!(f, "pool: {e}"),
            DirError::Admin(e) => write!(f, "pool: {e}"),
            DirError::Lun(e) => write!(f, "{e}"),
            DirError::Invalid(s) | DirError::InUse(s) | DirError::Faulted(s) => f.write_str(s),
        }
    }
}

/// The message carries the cause (`what: cause`), so no `source()` repeats it.
impl std::error::Error for DirError {}

impl From<IoError> for DirError {
    fn from(e: IoError) -> Self {
        DirError::Pool(e)
    }
}

impl From<AdminError> for DirError {
    fn from(e: AdminError) -> Self {
        DirError::Admin(e)
    }
}

impl From<OpenError> for DirError {
    fn from(e: OpenError) -> Self {
        DirError::Open(e)
    }
}

/// A mapper from an `io::Error` to [`DirError::Io`] saying what was being done.
pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DirError {
    let what = what.into();
    move |err| DirError::Io { what, err }
}
