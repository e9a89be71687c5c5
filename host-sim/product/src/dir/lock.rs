//! One process at a time has a pool open: the directory's lock file ([`LOCK_FILE`]) and every
//! image ([`FileDisk`]'s own lock) are locked (`flock(2)`, exclusive) while it does. Two openers
//! would each write the members from their own view of the log and destroy flushed data.

use std::fs;
use std::path::{Path, PathBuf};

use super::DirError;
use super::error::io_err;
use super::layout::LOCK_FILE;
use crate::disk::{DiskError, FileDisk};

/// What a lock refusal says.
pub(crate) fn in_use_message(what: &Path) -> String {
    format!(
        "{} is locked: another raidcore or raidcore-sim process (a server, or a command still \
         running) has this pool open; stop it first",
        what.display()
    )
}

/// The held lock of a pool directory; released when dropped.
#[derive(Debug)]
pub struct DirLock(fs::File);

impl Drop for DirLock {
    /// Unlocks explicitly (see [`FileDisk`]'s `Drop`): a child forked by another thread holds
    /// a copy of the descriptor until it execs, and closing ours would leave the lock held.
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Takes the exclusive lock of the pool directory `dir` ([`LOCK_FILE`], made if missing).
///
/// Errors: [`DirError::InUse`] if another process holds it (or the lock file changed while
/// this call locked it); [`DirError::Io`] if the file cannot be opened or locked.
pub(crate) fn lock_dir(dir: &Path) -> Result<DirLock, DirError> {
    let p = dir.join(LOCK_FILE);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&p)
        .map_err(io_err(format!("opening the lock file {}", p.display())))?;
    lock_opened(dir, f)
}

/// Locks `f`, the lock file of `dir` as opened earlier, if it is still the file the path names.
/// A failed `create` unlinks the lock file of the directory it made (holding the lock); a
/// process that opened the file before that and locks it after would hold a lock on a file no
/// one else can find, so it refuses instead.
fn lock_opened(dir: &Path, f: fs::File) -> Result<DirLock, DirError> {
    use std::os::unix::fs::MetadataExt;
    let p = dir.join(LOCK_FILE);
    match f.try_lock() {
        Ok(()) => {
            let same = match (f.metadata(), fs::metadata(&p)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if same {
                Ok(DirLock(f))
            } else {
                Err(DirError::InUse(format!(
                    "{} changed while this command locked it (another raidcore or raidcore-sim \
                     process created or removed a pool there); try again",
                    dir.display()
                )))
            }
        }
        Err(fs::TryLockError::WouldBlock) => Err(DirError::InUse(in_use_message(dir))),
        Err(fs::TryLockError::Error(err)) => Err(DirError::Io {
            what: format!("locking {}", p.display()),
            err,
        }),
    }
}

/// An image's refusal, as [`DirError::InUse`] when it is a lock.
pub(crate) fn in_use_or_disk(path: PathBuf, err: DiskError) -> DirError {
    if FileDisk::is_in_use(&err) {
        DirError::InUse(in_use_message(&path))
    } else {
        DirError::Disk { path, err }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock file unlinked between a process's open and its lock (a failed `create` removing
    /// the directory it made, while a newer lock file took its place) is refused: locking it
    /// would give two processes "the" lock.
    #[test]
    fn a_lock_on_an_unlinked_lock_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let first = lock_dir(dir).unwrap();
        let early = fs::File::open(dir.join(LOCK_FILE)).unwrap();
        fs::remove_file(dir.join(LOCK_FILE)).unwrap();
        drop(first);
        let newer = lock_dir(dir).unwrap();
        let refused = lock_opened(dir, early).unwrap_err();
        assert!(matches!(refused, DirError::InUse(_)), "{refused}");
        assert!(refused.to_string().contains("changed"), "{refused}");
        drop(newer);
        // The file the path names can be locked again.
        lock_dir(dir).unwrap();
    }
}
