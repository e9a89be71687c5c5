//! The NBD [`Backend`] over a pool directory: every LUN is an export (named as the LUN), reads,
//! writes, FUA, flush, trim and write-zeroes go to the pool.
//!
//! The pool is told the wall-clock time since the server started (monotonic, in nanoseconds),
//! so idle extents close on their own. Between client requests, if a rebuild or scrub is in
//! progress, one bounded maintenance step runs ([`raidcore::pool::Pool::maintenance`]), so a
//! replaced disk rebuilds while clients are served.

use std::time::Instant;

use raidcore::pool::IoError;
use serde_json::json;

use crate::nbd::{Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo};
use crate::pooldir::DirPool;

/// Serves the LUNs of a [`DirPool`].
#[derive(Debug)]
pub struct PoolBackend {
    dp: Option<DirPool>,
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

impl PoolBackend {
    /// Serves the LUNs of `dp`, in LUN number order.
    #[must_use]
    pub fn new(dp: DirPool) -> PoolBackend {
        let mut luns = Vec::new();
        let mut exports = Vec::new();
        for l in dp.pool.luns() {
            luns.push(l.id);
            let mut e = ExportInfo::new(l.name.as_str(), l.blocks * 4096);
            e.description = format!("raidcore LUN {}", l.id);
            exports.push(e);
        }
        PoolBackend {
            dp: Some(dp),
            luns,
            exports,
            start: Instant::now(),
        }
    }

    /// The pool (until shutdown).
    pub fn pool(&mut self) -> Option<&mut DirPool> {
        self.dp.as_mut()
    }

    fn with<T>(
        &mut self,
        export: usize,
        f: impl FnOnce(&mut DirPool, u16) -> Result<T, IoError>,
    ) -> BackendResult<T> {
        let lun = *self.luns.get(export).ok_or_else(|| {
            BackendError::new(BackendErrorKind::Invalid, format!("no export {export}"))
        })?;
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let dp = self.dp.as_mut().ok_or_else(gone)?;
        dp.pool.set_time(now);
        let r = f(dp, lun).map_err(err);
        // A member that failed under reads: take the spare (DirPool::take_spare_for_failed).
        if let Err(e) = dp.take_spare_for_failed() {
            log::warn!("taking a hot spare: {e}");
        }
        // Background work between requests: one bounded step while a rebuild or scrub runs.
        let st = dp.pool.status();
        if (st.rebuild.is_some() || st.scrub.is_some())
            && let Err(e) = dp.pool.maintenance()
        {
            log::warn!("maintenance: {e}");
        }
        r
    }
}

impl Backend for PoolBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        self.exports.clone()
    }

    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        self.with(export, |dp, lun| dp.pool.read(lun, lba, buf))
    }

    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult {
        self.with(export, |dp, lun| dp.pool.write(lun, lba, data, fua))
    }

    fn flush(&mut self, export: usize) -> BackendResult {
        self.with(export, |dp, _| dp.pool.flush())
    }

    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        self.with(export, |dp, lun| dp.pool.trim(lun, lba, blocks))
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
        self.with(export, |dp, lun| {
            dp.pool.write_zeroes(lun, lba, blocks)?;
            if fua { dp.pool.flush() } else { Ok(()) }
        })
    }

    fn stats_json(&self) -> serde_json::Value {
        let Some(dp) = self.dp.as_ref() else {
            return serde_json::Value::Null;
        };
        let st = dp.pool.status();
        json!({
            "health": st.health.name(),
            "rebuild": st.rebuild.map(|(d, done, total)| json!({"disk": d, "done": done, "total": total})),
            "scrub": st.scrub.map(|(n, t)| json!({"segment": n, "segments": t})),
            "spares": st.spares,
            "bad_ranges": st.bad_ranges,
        })
    }

    fn shutdown(&mut self) -> BackendResult {
        match self.dp.take() {
            Some(dp) => dp
                .close()
                .map_err(|e| BackendError::new(BackendErrorKind::Io, e.to_string())),
            None => Ok(()),
        }
    }
}
