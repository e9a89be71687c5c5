//! The NBD [`Backend`] over a pool: every LUN is an export (named as the LUN); reads, writes,
//! FUA, flush, trim and write-zeroes go to the pool.
//!
//! Generic over what owns the pool ([`ServedPool`]): a [`PoolDir`] of any member type (the
//! product's plain files, or the simulator's wrapped disks), or the simulator's pool on memory
//! disks.
//!
//! The pool is told the wall-clock time since the server started (monotonic, in nanoseconds),
//! so idle extents close on their own. Between client requests, if a rebuild or scrub is in
//! progress, one bounded maintenance step runs ([`raidcore::pool::Pool::maintenance`]), so a
//! replaced disk rebuilds while clients are served.

use std::time::Instant;

use raidcore::pool::IoError;
use raidcore_hal::BlockDevice;
use serde_json::json;

use super::{Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo};
use crate::dir::{DirError, HostPool, Members, PoolDir};

/// A pool the NBD server serves, with what owns it.
pub trait ServedPool {
    /// The pool's member type.
    type Disk: BlockDevice;

    /// The pool.
    fn pool(&self) -> &HostPool<Self::Disk>;

    /// The pool, to change.
    fn pool_mut(&mut self) -> &mut HostPool<Self::Disk>;

    /// Has a waiting hot spare take a member slot that failed under reads (see
    /// [`crate::dir::admin::take_spare_for_failed`]); returns whether it did.
    fn take_spare_for_failed(&mut self) -> Result<bool, DirError>;

    /// Flushes, checkpoints and closes the pool.
    fn close(self) -> Result<(), DirError>;
}

impl<M: Members> ServedPool for PoolDir<M> {
    type Disk = M::Disk;

    fn pool(&self) -> &HostPool<M::Disk> {
        &self.pool
    }

    fn pool_mut(&mut self) -> &mut HostPool<M::Disk> {
        &mut self.pool
    }

    fn take_spare_for_failed(&mut self) -> Result<bool, DirError> {
        PoolDir::take_spare_for_failed(self)
    }

    fn close(self) -> Result<(), DirError> {
        PoolDir::close(self)
    }
}

/// Serves the LUNs of a pool.
#[derive(Debug)]
pub struct PoolBackend<S> {
    served: Option<S>,
    luns: Vec<u16>,
    exports: Vec<ExportInfo>,
    start: Instant,
}

fn err(e: IoError) -> BackendError {
    let kind = match e {
        IoError::NoSpace => BackendErrorKind::NoSpace,
        IoError::NoSuchLun | IoError::OutOfRange | IoError::Misaligned => BackendErrorKind::Invalid,
        _ => BackendErrorKind::Io,
    };
    BackendError::new(kind, e.to_string())
}

fn gone() -> BackendError {
    BackendError::new(BackendErrorKind::Shutdown, "the pool is closed")
}

impl<S: ServedPool> PoolBackend<S> {
    /// Serves the LUNs of `served`, in LUN number order.
    #[must_use]
    pub fn new(served: S) -> PoolBackend<S> {
        let mut luns = Vec::new();
        let mut exports = Vec::new();
        for l in served.pool().luns() {
            luns.push(l.id);
            let mut e = ExportInfo::new(l.name.as_str(), l.blocks * 4096);
            e.description = format!("raidcore LUN {}", l.id);
            exports.push(e);
        }
        PoolBackend {
            served: Some(served),
            luns,
            exports,
            start: Instant::now(),
        }
    }

    /// What is served (until shutdown).
    pub fn served(&mut self) -> Option<&mut S> {
        self.served.as_mut()
    }

    fn with<T>(
        &mut self,
        export: usize,
        f: impl FnOnce(&mut HostPool<S::Disk>, u16) -> Result<T, IoError>,
    ) -> BackendResult<T> {
        let lun = *self.luns.get(export).ok_or_else(|| {
            BackendError::new(BackendErrorKind::Invalid, format!("no export {export}"))
        })?;
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let served = self.served.as_mut().ok_or_else(gone)?;
        served.pool_mut().set_time(now);
        let r = f(served.pool_mut(), lun).map_err(err);
        // A member that failed under reads: take the spare.
        if let Err(e) = served.take_spare_for_failed() {
            log::warn!("taking a hot spare: {e}");
        }
        // Background work between requests: one bounded step while a rebuild or scrub runs.
        let pool = served.pool_mut();
        let st = pool.status();
        if (st.rebuild.is_some() || st.scrub.is_some())
            && let Err(e) = pool.maintenance()
        {
            log::warn!("maintenance: {e}");
        }
        r
    }
}

impl<S: ServedPool> Backend for PoolBackend<S> {
    fn exports(&self) -> Vec<ExportInfo> {
        self.exports.clone()
    }

    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        self.with(export, |pool, lun| pool.read(lun, lba, buf))
    }

    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult {
        self.with(export, |pool, lun| pool.write(lun, lba, data, fua))
    }

    fn flush(&mut self, export: usize) -> BackendResult {
        self.with(export, |pool, _| pool.flush())
    }

    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        self.with(export, |pool, lun| pool.trim(lun, lba, blocks))
    }

    fn write_zeroes(
        &mut self,
        export: usize,
        lba: u64,
        blocks: u64,
        fua: bool,
        _no_hole: bool,
    ) -> BackendResult {
        // Unmapped blocks read as zeros; "no hole" cannot be honoured by a thin,
        // log-structured pool and does not change what reads return.
        self.with(export, |pool, lun| {
            pool.write_zeroes(lun, lba, blocks)?;
            if fua { pool.flush() } else { Ok(()) }
        })
    }

    fn stats_json(&self) -> serde_json::Value {
        let Some(served) = self.served.as_ref() else {
            return serde_json::Value::Null;
        };
        let st = served.pool().status();
        json!({
            "health": st.health.name(),
            "rebuild": st.rebuild.map(|(d, done, total)| json!({"disk": d, "done": done, "total": total})),
            "scrub": st.scrub.map(|(n, t)| json!({"segment": n, "segments": t})),
            "spares": st.spares,
            "bad_ranges": st.bad_ranges,
        })
    }

    fn shutdown(&mut self) -> BackendResult {
        match self.served.take() {
            Some(s) => s
                .close()
                .map_err(|e| BackendError::new(BackendErrorKind::Io, e.to_string())),
            None => Ok(()),
        }
    }
}
