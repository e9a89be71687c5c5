//! Watching an open pool: the core's events (its ring of the last 64) become event lines in
//! words, logged at their severity and appended to the pool's event log; finished rebuilds and
//! scrubs become [`ScanRecord`]s; error counters become persistent totals. [`PoolDir::observe`]
//! runs after every command and, in a server, on its timer.

use std::time::Instant;

use raidcore::event::Event;
use raidcore::pool::Health;
use raidcore_hal::ErrorKind;

use super::records::{ErrorCounts, EventRecord, ScanRecord, Severity, SlotRecord, rfc3339};
use super::{Members, PoolDir, image_name};

/// What [`PoolDir::observe`] remembers between looks.
#[derive(Debug)]
pub struct Watch {
    /// Sequence number of the next core event not yet seen.
    pub next_seq: u64,
    /// Health at the last look.
    pub health: Health,
    /// Each slot's core counters when they were last cleared (or the pool opened).
    pub cleared: Vec<ErrorCounts>,
    /// When the rebuild in progress was first seen in this process.
    pub rebuild_since: Option<Instant>,
    /// When the scrub in progress was first seen in this process.
    pub scrub_since: Option<Instant>,
    /// The last rebuild progress logged, in tenths.
    pub rebuild_tenth: u16,
    /// The slot a rebuild is writing, as events told.
    pub rebuilding: Option<u8>,
    /// Event lines not yet appended to the event log (kept when appending fails).
    pub pending: Vec<EventRecord>,
    /// Each slot's core "repaired" count at the last look (in member blocks): what grows
    /// while a slot rebuilds is rebuild writes, not repairs, and is not counted as repairs.
    pub repaired_seen: Vec<u32>,
}

impl Watch {
    /// A watch starting at core event `next_seq` with the pool's health `health`.
    #[must_use]
    pub fn new(next_seq: u64, health: Health) -> Watch {
        Watch {
            next_seq,
            health,
            cleared: Vec::new(),
            rebuild_since: None,
            scrub_since: None,
            rebuild_tenth: 0,
            pending: Vec::new(),
            repaired_seen: Vec::new(),
            rebuilding: None,
        }
    }
}

/// A member error in words (`device gone`, `unreadable sector at block 1234`).
#[must_use]
pub fn kind_words(kind: ErrorKind) -> String {
    match kind {
        ErrorKind::DeviceFailed => "device gone".into(),
        ErrorKind::Medium { lba } => format!("unreadable sector at block {lba}"),
        ErrorKind::Transport => "too many transport errors".into(),
        ErrorKind::Timeout => "too many timeouts".into(),
        ErrorKind::Unsupported => "operation not supported by the device".into(),
        ErrorKind::Other => "I/O error".into(),
        k => k.to_string(),
    }
}

/// A core event in words, with its severity; `None` for events not worth a line (a retry that
/// succeeded, rebuild progress between tenths).
fn words(e: &Event, w: &mut Watch) -> Option<(Severity, String)> {
    use Severity::{Error, Info, Warn};
    Some(match *e {
        Event::DiskFailed { disk, kind } => {
            (Error, format!("member {disk} failed: {}", kind_words(kind)))
        }
        Event::FailedByOperator { disk } => (Warn, format!("member {disk} failed by the operator")),
        Event::MediumError { disk, lba } => (
            Warn,
            format!("member {disk}: unreadable sector at block {lba}, read from redundancy"),
        ),
        // A rebuild's writes onto its target are progress, not repairs.
        Event::Repaired { disk, .. } if w.rebuilding == Some(disk) => return None,
        Event::Repaired { disk, lba, blocks } => (
            Info,
            format!(
                "member {disk}: rewrote {blocks} block(s) at block {lba} with reconstructed data"
            ),
        ),
        Event::ChecksumRepaired { disk, stripe } => (
            Warn,
            format!(
                "member {disk}: checksum mismatch in stripe {stripe}, repaired from redundancy"
            ),
        ),
        Event::Unrecoverable { stripe } => (
            Error,
            format!(
                "stripe {stripe}: data could not be recovered (more damage than the level tolerates)"
            ),
        ),
        Event::LossUnlisted { lun, lba, blocks } => (
            Error,
            format!(
                "LUN {lun}: {blocks} block(s) from block {lba} lost, and the list of lost blocks \
                 is full: they read as errors but `status` does not list them"
            ),
        ),
        Event::SpareTaken { disk } => (Warn, format!("a hot spare took member slot {disk}")),
        Event::LogDeviceFailed { kind } => (
            Error,
            format!(
                "the log device failed: {kind}; flushes are logged on the members again \
                 (nothing was lost)"
            ),
        ),
        Event::RebuildStarted { disk } => {
            w.rebuild_tenth = 0;
            w.rebuilding = Some(disk);
            (Info, format!("rebuild of member {disk} started"))
        }
        Event::RebuildProgress { disk, permille } => {
            let tenth = permille / 100;
            if tenth <= w.rebuild_tenth || tenth >= 10 {
                return None;
            }
            w.rebuild_tenth = tenth;
            (
                Info,
                format!("rebuild of member {disk}: {}% done", tenth * 10),
            )
        }
        Event::RebuildDone {
            disk,
            stripes,
            unrecoverable,
        } => (
            {
                w.rebuilding = None;
                if unrecoverable > 0 { Error } else { Info }
            },
            format!(
                "rebuild of member {disk} finished: {stripes} stripes, {unrecoverable} could not \
                 be rebuilt"
            ),
        ),
        Event::ScrubDone {
            stripes,
            repaired,
            unrepairable,
        } => (
            if unrepairable > 0 { Error } else { Info },
            format!(
                "scrub finished: {stripes} stripes checked, {repaired} blocks repaired, \
                 {unrepairable} could not be repaired"
            ),
        ),
        // Retries that worked are counted, not logged; health is watched by the host itself
        // (every change, whatever caused it).
        Event::RetrySucceeded { .. } | Event::HealthChanged { .. } => return None,
        ref other => (Info, format!("{other:?}")),
    })
}

/// Logs an event line at its severity.
fn log_line(r: &EventRecord) {
    match r.severity {
        Severity::Info => log::info!("{}", r.message),
        Severity::Warn => log::warn!("{}", r.message),
        Severity::Error => log::error!("{}", r.message),
    }
}

impl<M: Members> PoolDir<M> {
    /// Records an event of the host's own (a command, an import), logged and appended.
    pub fn note_event(&mut self, severity: Severity, message: impl Into<String>) {
        let r = EventRecord::now(severity, message);
        log_line(&r);
        self.watch.pending.push(r);
    }

    /// [`PoolDir::note_event`] without the log line, for a message the caller has just
    /// shown the operator itself.
    pub fn record_event(&mut self, severity: Severity, message: impl Into<String>) {
        self.watch.pending.push(EventRecord::now(severity, message));
    }

    /// Looks at what the pool did since the last look (see the module docs) and appends the
    /// new event lines to the event log. Never fails: a log that cannot be written is said
    /// once and kept in memory until it can.
    pub fn observe(&mut self) {
        self.reconcile_spares();
        let first = self.pool.events().iter().next().map(|(s, _)| *s);
        if let Some(first) = first
            && first > self.watch.next_seq
        {
            let lost = first - self.watch.next_seq;
            self.note_event(
                Severity::Warn,
                format!("{lost} pool event(s) came and went before they could be recorded"),
            );
        }
        let new: Vec<Event> = self
            .pool
            .events()
            .since(self.watch.next_seq)
            .map(|(_, e)| *e)
            .collect();
        self.watch.next_seq = self.pool.events().next_seq();
        // Slots a rebuild wrote since the last look.
        let mut rebuilt: Vec<u8> = self.watch.rebuilding.into_iter().collect();
        rebuilt.extend(new.iter().filter_map(|e| match *e {
            Event::RebuildStarted { disk }
            | Event::RebuildProgress { disk, .. }
            | Event::RebuildDone { disk, .. } => Some(disk),
            _ => None,
        }));
        for e in &new {
            if let Some((sev, text)) = words(e, &mut self.watch) {
                self.note_event(sev, text);
            }
            self.record_scan(e);
        }
        self.watch_health();
        self.watch_scans();
        self.discount_rebuild_writes(&rebuilt);
        self.flush_events();
    }

    /// Appends the pending event lines to the event log.
    pub(crate) fn flush_events(&mut self) {
        if self.members.read_only() {
            // Nothing is written beside a pool opened read-only; the lines were logged.
            self.watch.pending.clear();
        }
        if self.watch.pending.is_empty() {
            return;
        }
        match super::records::append_events(&self.dir, &self.watch.pending) {
            Ok(()) => self.watch.pending.clear(),
            Err(e) if self.watch.pending.len() < 2 => log::warn!("{e}"),
            Err(_) => {}
        }
    }

    /// A finished rebuild or scrub becomes the last one on record.
    fn record_scan(&mut self, e: &Event) {
        let now = rfc3339(std::time::SystemTime::now());
        match *e {
            Event::RebuildDone {
                disk,
                stripes,
                unrecoverable,
            } => {
                let seconds = self
                    .watch
                    .rebuild_since
                    .take()
                    .map_or(0, |t| t.elapsed().as_secs());
                self.records.last_rebuild = Some(ScanRecord {
                    finished: now,
                    seconds,
                    disk: Some(usize::from(disk)),
                    stripes,
                    repaired_blocks: 0,
                    unrecoverable,
                });
            }
            Event::ScrubDone {
                stripes,
                repaired,
                unrepairable,
            } => {
                let seconds = self
                    .watch
                    .scrub_since
                    .take()
                    .map_or(0, |t| t.elapsed().as_secs());
                self.records.last_scrub = Some(ScanRecord {
                    finished: now,
                    seconds,
                    disk: None,
                    stripes,
                    repaired_blocks: repaired,
                    unrecoverable: unrepairable,
                });
            }
            _ => {}
        }
    }

    /// Notes when a rebuild or scrub was first seen running (their duration is measured from
    /// there).
    fn watch_scans(&mut self) {
        let st = self.pool.status();
        if st.rebuild.is_some() {
            self.watch.rebuild_since.get_or_insert_with(Instant::now);
        } else {
            self.watch.rebuild_since = None;
        }
        if st.scrub.is_some() {
            self.watch.scrub_since.get_or_insert_with(Instant::now);
        } else {
            self.watch.scrub_since = None;
        }
    }

    /// What a slot's core "repaired" count grew by while the slot was rebuilding is rebuild
    /// writes: it is taken out of the repairs (added to what `clear` subtracts).
    fn discount_rebuild_writes(&mut self, rebuilt: &[u8]) {
        let st = self.pool.status();
        let bb = self.pool.array().geometry().block_bytes() as u64;
        let rebuilding = st.rebuild.map(|(d, _, _)| usize::from(d));
        let n = st.disks.len();
        self.watch.repaired_seen.resize(n, 0);
        self.watch.cleared.resize(n, ErrorCounts::default());
        for d in &st.disks {
            let slot = usize::from(d.slot);
            let now = d.errors.repaired;
            let seen = self.watch.repaired_seen[slot];
            let grew = now.saturating_sub(seen);
            if grew > 0
                && (rebuilding == Some(slot)
                    || d.state == raidcore::raid::DiskState::Rebuilding
                    || rebuilt.contains(&d.slot))
            {
                self.watch.cleared[slot].repaired_bytes += u64::from(grew) * bb;
            }
            self.watch.repaired_seen[slot] = now;
        }
    }

    /// A change of health becomes an event line.
    fn watch_health(&mut self) {
        let h = self.pool.status().health;
        if h == self.watch.health {
            return;
        }
        let was = self.watch.health;
        self.watch.health = h;
        let (sev, what) = match h {
            Health::Online => (
                Severity::Info,
                "the pool is ONLINE: every member is in sync",
            ),
            Health::Degraded => (
                Severity::Warn,
                "the pool is DEGRADED: it serves every block, with less redundancy",
            ),
            Health::Suspended => (
                Severity::Error,
                "the pool is SUSPENDED: its images' file system is full or read-only; free space \
                 and run `raidcore resume`",
            ),
            Health::Faulted => (
                Severity::Error,
                "the pool is FAULTED: more members are out of sync than the level tolerates; no \
                 I/O is served",
            ),
        };
        self.note_event(sev, format!("{what} (was {})", was.name().to_uppercase()));
    }

    /// The error counters of each member slot since records began (or the last `clear`).
    #[must_use]
    pub fn error_totals(&self) -> Vec<ErrorCounts> {
        let st = self.pool.status();
        let bb = self.pool.array().geometry().block_bytes() as u64;
        st.disks
            .iter()
            .map(|d| {
                let slot = usize::from(d.slot);
                let image = self.image_of_slot(slot).map(image_name);
                let now = ErrorCounts::of(d.errors, bb);
                let cleared = self.watch.cleared.get(slot).copied().unwrap_or_default();
                self.records
                    .saved(slot, image.as_deref())
                    .plus_minus(now, cleared)
            })
            .collect()
    }

    /// Zeroes the error counters of every member slot (`clear`).
    pub fn clear_errors(&mut self) {
        let bb = self.pool.array().geometry().block_bytes() as u64;
        self.watch.cleared = self
            .pool
            .status()
            .disks
            .iter()
            .map(|d| ErrorCounts::of(d.errors, bb))
            .collect();
        self.records.slots.clear();
        self.note_event(Severity::Info, "error counters cleared");
    }

    /// Writes the records file with the current totals; says why if it cannot.
    pub fn save_records(&mut self) {
        let totals = self.error_totals();
        let slots: Vec<SlotRecord> = totals
            .into_iter()
            .enumerate()
            .map(|(slot, errors)| SlotRecord {
                slot,
                image: self.image_of_slot(slot).map(image_name),
                errors,
            })
            .collect();
        // The saved totals are the new base: the core's counters so far are in them.
        let bb = self.pool.array().geometry().block_bytes() as u64;
        self.watch.cleared = self
            .pool
            .status()
            .disks
            .iter()
            .map(|d| ErrorCounts::of(d.errors, bb))
            .collect();
        self.records.slots = slots;
        if self.members.read_only() {
            return;
        }
        if let Err(e) = self.records.save(&self.dir) {
            log::warn!("{e}");
        }
    }
}
