//! The NBD [`Backend`] over a pool: every LUN is an export (named as the LUN); reads, writes,
//! FUA, flush, trim and write-zeroes go to the pool; the control channel's requests go to what
//! owns the pool ([`ServedPool::control`]); the server's timer runs the background work
//! ([`super::background`]).
//!
//! Generic over what owns the pool ([`ServedPool`]): a [`PoolDir`] of any member type (the
//! product's plain files, or the simulator's wrapped disks), or the simulator's pool on memory
//! disks.
//!
//! The pool is told the wall-clock time since the server started (monotonic, in nanoseconds),
//! so idle extents close on their own. LUNs created while serving become new exports (new
//! clients see them at once); a deleted LUN's export is marked removed (its clients get
//! errors).

use std::time::Instant;

use raidcore::pool::IoError;
use raidcore_hal::BlockDevice;
use serde_json::json;

use super::background::{BackgroundConfig, Timer};
use super::{Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo};
use crate::control::{ErrorKind, Reply, Request};
use crate::dir::{DirError, HostPool, Members, PoolDir};
use crate::status::Background;

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

    /// Runs a control-channel request. The default refuses it.
    fn control(&mut self, request: &Request) -> Reply {
        let _ = request;
        Reply::error(
            ErrorKind::Unsupported,
            "this server's pool takes no commands",
        )
    }

    /// Looks at what the pool did (events, counters); the default does nothing.
    fn observe(&mut self) {}

    /// Saves what is kept beside the pool (counters); the default does nothing.
    fn save_records(&mut self) {}

    /// A scrub is paused by the operator.
    fn scrub_paused(&self) -> bool {
        false
    }

    /// The pool is served read-only: every export refuses writes, and no background work
    /// (rebuild, scrub, destaging) or hot spare is started. The default is `false`.
    fn read_only(&self) -> bool {
        false
    }
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

    fn control(&mut self, request: &Request) -> Reply {
        let looks = matches!(
            request,
            Request::Status | Request::LunList | Request::Events { .. }
        );
        if self.members.read_only() && !looks {
            return Reply::error(
                ErrorKind::Refused,
                "the pool is served read-only (`serve --read-only`) and takes no changes: stop \
                 the server and import the pool to change it",
            );
        }
        crate::ops::execute(self, request)
    }

    fn observe(&mut self) {
        PoolDir::observe(self);
    }

    fn save_records(&mut self) {
        PoolDir::save_records(self);
    }

    fn scrub_paused(&self) -> bool {
        self.records.scrub_paused
    }

    fn read_only(&self) -> bool {
        self.members.read_only()
    }
}

/// Serves the LUNs of a pool.
#[derive(Debug)]
pub struct PoolBackend<S> {
    served: Option<S>,
    /// The LUN of each export (`None`: deleted).
    luns: Vec<Option<u16>>,
    exports: Vec<ExportInfo>,
    start: Instant,
    timer: Timer,
    last_save: Instant,
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
    /// Serves the LUNs of `served`, in LUN number order, with the default background work.
    #[must_use]
    pub fn new(served: S) -> PoolBackend<S> {
        PoolBackend::with_background(served, BackgroundConfig::default())
    }

    /// Serves the LUNs of `served`, doing background work as `bg` says.
    #[must_use]
    pub fn with_background(served: S, bg: BackgroundConfig) -> PoolBackend<S> {
        let mut b = PoolBackend {
            served: Some(served),
            luns: Vec::new(),
            exports: Vec::new(),
            start: Instant::now(),
            timer: Timer::new(bg),
            last_save: Instant::now(),
        };
        b.sync_exports();
        b
    }

    /// What is served (until shutdown).
    pub fn served(&mut self) -> Option<&mut S> {
        self.served.as_mut()
    }

    /// Brings the export list up to date with the pool's LUNs: new LUNs are appended, deleted
    /// ones marked removed, resized ones take the new size (exports never move).
    fn sync_exports(&mut self) {
        let Some(served) = self.served.as_ref() else {
            return;
        };
        let luns: Vec<_> = served.pool().luns().collect();
        for (i, e) in self.exports.iter_mut().enumerate() {
            let still = self.luns[i]
                .is_some_and(|id| luns.iter().any(|l| l.id == id && l.name.as_str() == e.name));
            if !still && !e.removed {
                e.removed = true;
                self.luns[i] = None;
            }
        }
        for l in luns {
            let known = self
                .luns
                .iter()
                .zip(self.exports.iter_mut())
                .find(|(id, e)| **id == Some(l.id) && !e.removed);
            if let Some((_, e)) = known {
                // Resized: new clients see the new size; connected ones get range errors
                // past a shrunk end.
                e.size_bytes = l.blocks * 4096;
            } else {
                let mut e = ExportInfo::new(l.name.as_str(), l.blocks * 4096);
                e.description = format!("raidcore LUN {}", l.id);
                e.read_only = served.read_only();
                self.exports.push(e);
                self.luns.push(Some(l.id));
            }
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn with<T>(
        &mut self,
        export: usize,
        f: impl FnOnce(&mut HostPool<S::Disk>, u16) -> Result<T, IoError>,
    ) -> BackendResult<T> {
        let lun = self.luns.get(export).copied().flatten().ok_or_else(|| {
            BackendError::new(
                BackendErrorKind::Invalid,
                format!("export {export}: no such LUN (deleted?)"),
            )
        })?;
        let now = self.now_ns();
        let served = self.served.as_mut().ok_or_else(gone)?;
        served.pool_mut().set_time(now);
        let r = f(served.pool_mut(), lun).map_err(err);
        // A member that failed under reads: take the spare.
        if served.read_only() {
            return r;
        }
        if let Err(e) = served.take_spare_for_failed() {
            log::warn!("taking a hot spare: {e}");
        }
        r
    }

    /// One rebuild or scrub step if the policy allows one now; whether work remains.
    fn background_step(&mut self, now: Instant) -> bool {
        let Some(served) = self.served.as_mut() else {
            return false;
        };
        if served.read_only() {
            return false;
        }
        let st = served.pool().status();
        let scrub = st.scrub.is_some() && !served.scrub_paused();
        if st.rebuild.is_none() && !scrub {
            self.timer.idle();
            return false;
        }
        if !self.timer.step_due(now) {
            return true;
        }
        if self.timer.cfg.policy.pool_policy().is_some() {
            let t = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            served.pool_mut().set_time(t);
            if let Some(due) = served.pool().maintenance_due().filter(|&d| d > t) {
                self.timer
                    .defer(now + std::time::Duration::from_nanos(due - t));
                return true;
            }
        }
        let geo = *served.pool().array().geometry();
        let stripe_bytes = (geo.strip_bytes() * geo.disks()) as u64;
        let t0 = Instant::now();
        match served.pool_mut().maintenance() {
            Ok(rep) => {
                let took = t0.elapsed();
                let bytes = (rep.rebuilt_stripes + rep.scrubbed_stripes) * stripe_bytes;
                let st = served.pool().status();
                let fraction = match (st.rebuild, st.scrub) {
                    (Some((_, d, t)), _) => d as f64 / t.max(1) as f64,
                    (None, Some((n, t))) => f64::from(n) / f64::from(t.max(1)),
                    (None, None) => 1.0,
                };
                self.timer.stepped(Instant::now(), took, bytes, fraction);
                !rep.idle
            }
            Err(e) => {
                log::warn!("background work: {e}");
                self.timer.stepped(Instant::now(), t0.elapsed(), 0, 0.0);
                false
            }
        }
    }

    /// Writes out buffered writes whose delay has passed.
    fn destage(&mut self, now: Instant) {
        if !self.timer.destage_due(now) {
            return;
        }
        let t = self.now_ns();
        let Some(served) = self.served.as_mut() else {
            return;
        };
        served.pool_mut().set_time(t);
        match served.pool_mut().flush() {
            Ok(()) => {
                log::debug!("destaged the buffered writes");
                self.timer.unflushed = false;
            }
            Err(e) => {
                log::warn!("writing out buffered writes: {e}");
                // Tried again after another delay.
                self.timer.request(true, false);
            }
        }
    }

    /// What the status says of the background work.
    fn report(&self) -> Background {
        let (rate, eta) = self.timer.rate_and_eta();
        let read_only = self.served.as_ref().is_some_and(ServedPool::read_only);
        Background {
            policy: if read_only {
                "none (served read-only)".to_string()
            } else {
                self.timer.cfg.policy.to_string()
            },
            rate_bytes_per_s: rate,
            eta_s: eta,
            destage_delay_ms: u64::try_from(self.timer.cfg.destage_delay.as_millis())
                .unwrap_or(u64::MAX),
            unflushed: self.timer.unflushed,
        }
    }
}

impl<S: ServedPool> Backend for PoolBackend<S> {
    fn exports(&self) -> Vec<ExportInfo> {
        self.exports.clone()
    }

    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        let r = self.with(export, |pool, lun| pool.read(lun, lba, buf));
        self.timer.request(false, false);
        r
    }

    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult {
        let r = self.with(export, |pool, lun| pool.write(lun, lba, data, fua));
        self.timer.request(!fua, false);
        r
    }

    fn flush(&mut self, export: usize) -> BackendResult {
        let r = self.with(export, |pool, _| pool.flush());
        self.timer.request(false, r.is_ok());
        r
    }

    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        let r = self.with(export, |pool, lun| pool.trim(lun, lba, blocks));
        self.timer.request(true, false);
        r
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
        let r = self.with(export, |pool, lun| {
            pool.write_zeroes(lun, lba, blocks)?;
            if fua { pool.flush() } else { Ok(()) }
        });
        self.timer.request(!fua, fua && r.is_ok());
        r
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
            "unflushed": self.timer.unflushed,
        })
    }

    fn control(&mut self, request: &str) -> String {
        let req: Request = match serde_json::from_str(request) {
            Ok(r) => r,
            Err(e) => {
                return Reply::error(ErrorKind::Usage, format!("not a request: {e}")).to_line();
            }
        };
        let t = self.now_ns();
        let Some(served) = self.served.as_mut() else {
            return Reply::error(ErrorKind::Failed, "the pool is closed").to_line();
        };
        served.pool_mut().set_time(t);
        let mut reply = served.control(&req);
        if let Some(st) = reply.status.as_mut() {
            st.background = Some(self.report());
        }
        self.sync_exports();
        reply.to_line()
    }

    fn tick(&mut self) -> Option<std::time::Duration> {
        let now = Instant::now();
        if let Some(s) = self.served.as_mut() {
            let t = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            s.pool_mut().set_time(t);
        }
        self.destage(now);
        let work = self.background_step(now);
        if let Some(s) = self.served.as_mut() {
            s.observe();
            if now.duration_since(self.last_save) >= std::time::Duration::from_secs(5) {
                s.save_records();
                self.last_save = now;
            }
        }
        Some(self.timer.next(Instant::now(), work))
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
