//! The pool's dedicated intent-log device in a pool directory: a file outside the images
//! (on a faster device than the members' file system, where flushes then land), named in the
//! description ([`DirMeta::log_device`]). The core decides what it holds
//! ([`raidcore::pool::Pool::add_log_device`]); this file makes, opens and names the file.

use std::fs;
use std::path::{Path, PathBuf};

use raidcore::pool::{AdminError, DiskLabel, LogDeviceState, Role};

use super::error::io_err;
use super::layout::{DirMeta, write_meta};
use super::{DirError, Members, PoolDir};
use crate::disk::{FileDisk, FileDiskOptions};

/// Size of a log device file `add_log_device` makes when none is given (its intent-log ring
/// fills the device up to 16 MiB; a member's ring is 1 MiB with the default settings).
pub const DEFAULT_LOG_DEVICE_BYTES: u64 = 64 << 20;

impl<M: Members> PoolDir<M> {
    /// Gives the pool a dedicated intent-log device on the file `path`: made (`bytes` long,
    /// [`DEFAULT_LOG_DEVICE_BYTES`] if `None`) when missing, else taken as it is if it holds
    /// no raidcore superblock. `model`: its device model for the simulator (`None`: the
    /// members'). The description records its absolute path, so `open` finds it again.
    ///
    /// Errors: [`DirError::Invalid`] for a read-only pool, a file holding a raidcore label, or
    /// an unknown model; [`DirError::Disk`] when the file cannot be made or opened; the
    /// pool's refusal as [`DirError::Admin`] (too small, one present already).
    pub fn add_log_device(
        &mut self,
        path: &Path,
        bytes: Option<u64>,
        model: Option<&str>,
    ) -> Result<(), DirError> {
        if self.members.read_only() {
            return Err(DirError::Invalid("the pool is open read-only".into()));
        }
        let online = self.pool.status().log_device.map(|d| d.state);
        if online == Some(LogDeviceState::Online) {
            return Err(DirError::Admin(AdminError::LogDevicePresent));
        }
        check_log_device_path(&self.dir, path)?;
        let made = !path.exists();
        let mut file = self.log_device_file(path, bytes)?;
        if let Ok(label) = raidcore::pool::read_label(&mut file)
            && !self.former_log_device(&label)
        {
            return Err(DirError::Invalid(format!(
                "{} holds a raidcore superblock (a disk of this or another pool): use a blank \
                 file, or remove it first",
                path.display()
            )));
        }
        let disk = self.members.log_device(file, model)?;
        if let Err(e) = self.pool.add_log_device(disk) {
            if made {
                let _ = fs::remove_file(path);
            }
            // Slots: two superblocks, eight root slots, a member's intent-log area.
            return Err(match e {
                AdminError::DiskMismatch => DirError::Invalid(format!(
                    "{} is too small for a log device: it needs at least {} MiB (its labels \
                     and a member's intent-log ring), or has blocks larger than 4 KiB",
                    path.display(),
                    ((2 + 8 + u64::from(self.pool.layout_zil_slots())) * 4096).div_ceil(1 << 20)
                )),
                e => DirError::Admin(e),
            });
        }
        let abs =
            fs::canonicalize(path).map_err(io_err(format!("resolving {}", path.display())))?;
        self.meta.log_device = Some(abs);
        self.meta.log_model = model.map(str::to_string);
        write_meta(&self.dir, &self.meta)
    }

    /// Takes the log device out of the pool (its records are logged on the members first)
    /// and out of the description; its file is left with its labels erased. Returns its path.
    ///
    /// Errors: the pool's refusal as [`DirError::Admin`] (none present, the flush failed).
    pub fn remove_log_device(&mut self) -> Result<Option<PathBuf>, DirError> {
        self.pool.remove_log_device()?;
        let path = self.meta.log_device.take();
        self.meta.log_model = None;
        write_meta(&self.dir, &self.meta)?;
        Ok(path)
    }

    /// Whether `label` is that of a log device this pool had and no longer uses (one that
    /// failed, or a removal that could not erase its labels): it may be given again.
    fn former_log_device(&self, label: &DiskLabel) -> bool {
        let current = self.pool.status().log_device;
        label.role == Role::Log
            && label.pool_uuid == self.pool.uuid()
            && current
                .is_none_or(|d| d.guid != label.disk_guid || d.state != LogDeviceState::Online)
    }

    /// The file at `path`, made `bytes` long if missing.
    fn log_device_file(&self, path: &Path, bytes: Option<u64>) -> Result<FileDisk, DirError> {
        let bs = self.meta.block_size()?;
        let opts = FileDiskOptions {
            overwrite: false,
            sync_on_flush: self.members.sync_on_flush(),
            preallocate: self.meta.preallocated,
        };
        let disk_err = |err| DirError::Disk {
            path: path.to_path_buf(),
            err,
        };
        if path.exists() {
            return FileDisk::open_with(path, bs, opts).map_err(disk_err);
        }
        let blocks = bytes.unwrap_or(DEFAULT_LOG_DEVICE_BYTES) / bs.bytes() as u64;
        FileDisk::create_with(path, bs, blocks, opts).map_err(disk_err)
    }
}

/// Refuses a log device `path` that is an image of the pool in `dir` (`disk<N>.img` there):
/// the images are the members', and the directory's commands would take the log device for a
/// stale image.
///
/// Errors: [`DirError::Invalid`] naming the path.
pub fn check_log_device_path(dir: &Path, path: &Path) -> Result<(), DirError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    // Canonical where the directories exist (`create` makes the pool's), else as written.
    let norm = |p: &Path| fs::canonicalize(p).or_else(|_| std::path::absolute(p));
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = norm(parent.unwrap_or_else(|| Path::new(".")));
    let inside = parent.ok().zip(norm(dir).ok()).is_some_and(|(p, d)| p == d);
    if inside && name.starts_with("disk") && name.contains(".img") {
        return Err(DirError::Invalid(format!(
            "{}: the pool directory's disk<N>.img names are its images; put the log device \
             elsewhere (on a faster device), or name it otherwise",
            path.display()
        )));
    }
    if path.is_dir() {
        return Err(DirError::Invalid(format!(
            "{} is a directory: the log device is a file",
            path.display()
        )));
    }
    Ok(())
}

/// Opens the log device the description `meta` names for an import, as `members` makes it;
/// `None` when it names none or its file is not there (the import then refuses the pool
/// unless forced, naming the device: [`raidcore::pool::OpenError::MissingLogDevice`]).
///
/// Errors: [`DirError::Disk`] when the file is there and cannot be opened (permissions, a
/// directory, another process holding it): a forced import would give up what it holds, so
/// the cause is said instead; [`DirError::Invalid`] for a block size or model the
/// description gets wrong.
pub(crate) fn open_log_device<M: Members>(
    meta: &DirMeta,
    members: &mut M,
) -> Result<Option<M::Disk>, DirError> {
    let Some(path) = meta.log_device.as_ref() else {
        return Ok(None);
    };
    let bs = meta.block_size()?;
    let file = if members.read_only() {
        FileDisk::open_read_only(path, bs)
    } else {
        let opts = FileDiskOptions {
            overwrite: false,
            sync_on_flush: members.sync_on_flush(),
            preallocate: false,
        };
        FileDisk::open_with(path, bs, opts)
    };
    match file {
        Ok(f) => members.log_device(f, meta.log_model.as_deref()).map(Some),
        Err(_) if !path.exists() => Ok(None),
        Err(err) => Err(DirError::Disk {
            path: path.clone(),
            err,
        }),
    }
}
