//! The array: a fixed set of member [`BlockDevice`]s laid out by a [`Geometry`], with per-member
//! state and error counters, full-stripe writes, normal and degraded reads, repair of bad blocks,
//! stripe verification (the scrub primitive) and stripe reconstruction onto a new member (the
//! rebuild primitive).
//!
//! Memory: the array holds no data buffers. Calls that reconstruct take a caller-provided
//! `scratch` slice of at least [`Array::scratch_min_bytes`] bytes and work through a strip in
//! chunks of `scratch.len() / disks` bytes, so a 1 MiB strip needs no 1 MiB buffer.
//!
//! Error policy (md-like): a retryable member error (transport, timeout) is retried
//! [`ArrayConfig::retries`] times; a latent sector error is reconstructed from redundancy and the
//! block rewritten in place (the drive remaps it); a device failure fails the member, as do too
//! many medium errors or exhausted retries. Every decision is recorded in the [`EventLog`].
//! A read never returns data it could not read or reconstruct: when more columns are missing
//! than the level tolerates, it returns [`ArrayError::Unrecoverable`].

use heapless::Vec;
use raidcore_hal::{BlockDevice, ErrorKind};

use super::geometry::{Column, Geometry, Level};
use crate::error::bug;
use crate::event::{Event, EventLog};
use crate::parity::{self, Scheme};

/// A set of member slots, as a bit mask (bit i = slot i).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DiskSet(pub u32);

impl DiskSet {
    /// The empty set.
    pub const EMPTY: DiskSet = DiskSet(0);
    /// A set of one slot.
    #[must_use]
    pub const fn one(disk: usize) -> Self {
        DiskSet(1 << disk)
    }
    /// Whether `disk` is in the set.
    #[must_use]
    pub const fn contains(self, disk: usize) -> bool {
        disk < 32 && self.0 & (1 << disk) != 0
    }
    /// The set with `disk` added.
    #[must_use]
    pub const fn with(self, disk: usize) -> Self {
        if disk < 32 {
            DiskSet(self.0 | (1 << disk))
        } else {
            self
        }
    }
    /// The set with `disk` removed.
    #[must_use]
    pub const fn without(self, disk: usize) -> Self {
        if disk < 32 {
            DiskSet(self.0 & !(1 << disk))
        } else {
            self
        }
    }
    /// Number of slots in the set.
    #[must_use]
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    /// True when empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Slots in the set, ascending.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..32).filter(move |d| self.contains(*d))
    }
}

/// State of one member slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DiskState {
    /// In sync; read and written.
    Online,
    /// Failed or missing; neither read nor written.
    Failed,
    /// Being rebuilt: written by every stripe write, read only below the rebuild cursor.
    Rebuilding,
}

/// Error counters of one member, since the array was assembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DiskErrors {
    /// Reads that failed (after retries), any kind.
    pub read: u32,
    /// Writes that failed (after retries), any kind.
    pub write: u32,
    /// Distinct member blocks met with a latent sector error (a block read again while still
    /// bad counts once).
    pub medium: u32,
    /// Retryable errors (transport, timeout), counted per attempt.
    pub transient: u32,
    /// Blocks whose content was found wrong by a checksum or parity check.
    pub checksum: u32,
    /// Blocks rewritten with reconstructed data (not counting a rebuild's writes onto the
    /// member it rebuilds).
    pub repaired: u32,
}

/// One member slot: the disk (absent if missing), its state and counters.
#[derive(Debug)]
pub struct Member<D> {
    disk: Option<D>,
    state: DiskState,
    errors: DiskErrors,
    /// While rebuilding: stripes below this index hold valid data on this member.
    rebuilt_below: u64,
    /// Member blocks known to hold a latent sector error (until a write to them succeeds,
    /// which remaps them): each counts once against the medium-error budget.
    bad_sectors: Vec<u64, BAD_SECTORS>,
    /// Block ranges `[start, end)` that hold no valid data on this member: rows a rebuild
    /// could not reconstruct onto it, and blocks a write could not place (a medium error on
    /// write, md's bad-block log). Reads treat them as unreadable (without device I/O or an
    /// error counted) until a write fills them. In memory only.
    holes: Vec<(u64, u64), HOLES>,
}

/// What [`Array::patch_blocks`] writes besides whole blocks that do not read.
#[derive(Debug, Clone, Copy)]
enum Patch {
    /// Blocks that read but differ from the checked bytes.
    Differing,
    /// Nothing else, but a block the range covers in part that does not read takes the rest
    /// of its bytes from the first of these copies that reads it.
    Unreadable(DiskSet),
}

/// Distinct bad sectors remembered per member (past that, each error counts).
pub const BAD_SECTORS: usize = 16;

/// Ranges of blocks without valid data remembered per member (past that, the last one widens
/// over the rest, which only costs redundancy where the blocks were good).
pub const HOLES: usize = 16;

impl<D> Member<D> {
    /// The member's state.
    pub const fn state(&self) -> DiskState {
        self.state
    }
    /// The member's error counters.
    pub const fn errors(&self) -> DiskErrors {
        self.errors
    }
    /// Whether a disk is present in the slot.
    pub const fn is_present(&self) -> bool {
        self.disk.is_some()
    }
    /// While rebuilding, the first stripe not yet rebuilt.
    pub const fn rebuilt_below(&self) -> u64 {
        self.rebuilt_below
    }
}

/// Tunables of the member error policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayConfig {
    /// Extra attempts for a retryable error (transport, timeout) before it counts as failed.
    pub retries: u8,
    /// A member with more medium errors than this is failed (the drive is wearing out).
    pub max_medium_errors: u32,
    /// A member with more failed I/Os (after retries) than this is failed.
    pub max_io_errors: u32,
}

impl Default for ArrayConfig {
    fn default() -> Self {
        ArrayConfig {
            retries: 3,
            max_medium_errors: 64,
            max_io_errors: 8,
        }
    }
}

/// Counters of what the array did, in bytes written to members by purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ArrayStats {
    /// Full stripes written.
    pub stripes_written: u64,
    /// Bytes of data strips written (first copy for mirrors).
    pub data_bytes_written: u64,
    /// Bytes of P/Q strips written, and of extra mirror copies.
    pub redundancy_bytes_written: u64,
    /// Bytes written outside stripes (labels, intent log) through [`Array::disk_write`].
    pub raw_bytes_written: u64,
    /// Bytes written by repairs and rebuilds.
    pub repair_bytes_written: u64,
    /// Bytes read from members.
    pub bytes_read: u64,
    /// Chunks reconstructed from redundancy.
    pub reconstructions: u64,
}

/// Why an array operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ArrayError {
    /// Address or length not a whole number of member blocks, or zero length.
    Misaligned,
    /// Address range past the end of the data area, or a stripe/slot that does not exist.
    OutOfRange,
    /// The scratch buffer is smaller than [`Array::scratch_min_bytes`].
    ScratchTooSmall,
    /// More columns of `stripe` are missing or unreadable than the level tolerates; the data
    /// was not returned.
    Unrecoverable {
        /// The stripe.
        stripe: u64,
    },
    /// A stripe write reached fewer members than the level needs to keep the data.
    WriteFailed {
        /// The stripe.
        stripe: u64,
    },
    /// A member I/O outside stripes failed (see the member's state for the cause).
    Disk {
        /// Member slot.
        disk: u8,
        /// The error kind.
        kind: ErrorKind,
    },
    /// Disks given to [`Array::new`] do not fit the geometry (count, block size or size).
    DiskMismatch,
    /// A member write met a host condition ([`ErrorKind::is_host_condition`]): the stripe did
    /// not reach every member, none was failed for it, and it must be written again once the
    /// condition clears.
    HostCondition {
        /// The condition.
        kind: ErrorKind,
    },
    /// An invariant of the array did not hold (a bug); `at` names the file and line.
    LogicBug {
        /// The check that failed.
        at: crate::error::BugAt,
    },
}

impl core::fmt::Display for ArrayError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ArrayError::Misaligned => f.write_str("I/O not aligned to the member block size"),
            ArrayError::OutOfRange => f.write_str("I/O past the end of the array"),
            ArrayError::ScratchTooSmall => f.write_str("scratch buffer too small"),
            ArrayError::Unrecoverable { stripe } => {
                write!(
                    f,
                    "stripe {stripe}: more failures than the RAID level tolerates"
                )
            }
            ArrayError::WriteFailed { stripe } => {
                write!(f, "stripe {stripe}: write reached too few members")
            }
            ArrayError::Disk { disk, kind } => write!(f, "disk {disk}: {kind}"),
            ArrayError::DiskMismatch => f.write_str("disks do not match the geometry"),
            ArrayError::HostCondition { kind } => write!(f, "member write refused: {kind}"),
            ArrayError::LogicBug { at } => write!(f, "internal error (a bug) found at {at}"),
        }
    }
}

impl core::error::Error for ArrayError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            ArrayError::Disk { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// What [`Array::verify_stripe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VerifyReport {
    /// Chunks whose parity (or mirror copies) disagreed; around a latent sector error, rows.
    pub mismatched_chunks: u32,
    /// Members whose strip disagrees, when the check can tell (RAID-6 syndrome, or a mirror
    /// majority). Empty when it cannot (RAID-5, two-way mirrors) or when all agree.
    pub suspects: DiskSet,
    /// Whether parity P disagreed somewhere (parity levels).
    pub p_bad: bool,
    /// Whether parity Q disagreed somewhere (RAID-6).
    pub q_bad: bool,
    /// Members that could not be read (missing, failed or unreadable blocks), whose columns
    /// were therefore not checked.
    pub unreadable: DiskSet,
}

impl VerifyReport {
    /// True when every readable column agreed.
    #[must_use]
    pub const fn consistent(&self) -> bool {
        self.mismatched_chunks == 0
    }

    /// Counts a chunk that disagreed; `votes` keeps the suspect while every such chunk names
    /// the same one.
    fn vote(&mut self, votes: &mut Votes, verdict: Chunk) {
        if let Chunk::Disagree(s) = verdict {
            self.mismatched_chunks += 1;
            *votes = match *votes {
                Votes::NoneYet => Votes::Named(s),
                Votes::Named(prev) if prev == s => Votes::Named(prev),
                Votes::Named(_) => Votes::Named(None),
            };
        }
    }
}

/// A RAID array over up to `N` member disks of type `D`.
#[derive(Debug)]
pub struct Array<D, const N: usize> {
    geo: Geometry,
    members: Vec<Member<D>, N>,
    cfg: ArrayConfig,
    events: EventLog,
    stats: ArrayStats,
    /// The last host condition a member I/O met, until the pool takes it.
    host: Option<ErrorKind>,
    /// Host conditions met so far (a stripe write compares before and after).
    host_count: u32,
    /// Members whose latent sector errors reads met and left unrewritten (the reconstruction
    /// or the other copy could not be verified), until the caller takes them to repair with
    /// checked bytes.
    lse_left: DiskSet,
}

type Slot = usize;

/// The columns one chunk of a reconstruction read ([`Array::read_columns`]).
#[derive(Default)]
struct ChunkColumns {
    /// Parity-column indices not read (at most two kept: past that the stripe is lost).
    erased: Vec<usize, 2>,
    /// Columns not read, and how many of them only because the caller excluded them (a probe
    /// for a damaged column, not a loss).
    missing: usize,
    by_exclusion: usize,
    /// Members that met a medium error.
    met: DiskSet,
}

/// Rows of one stripe a rebuild could not reconstruct ([`Array::rebuild_stripe_rows`]), at most
/// eight ranges; past that the last range is widened over the rest ([`LostRows::overflowed`]),
/// which declares more lost than is, never less.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LostRows {
    ranges: Vec<LostRange, 8>,
    overflowed: bool,
}

/// Member blocks `row..row + rows` of the strips of one stripe, lost in the data strips
/// `strips` (bit i: data strip i).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostRange {
    /// First member block within the strip.
    pub row: u32,
    /// Member blocks.
    pub rows: u32,
    /// Data strips lost in these rows, as a bit set.
    pub strips: u32,
}

impl LostRows {
    /// The lost ranges, by row.
    #[must_use]
    pub fn ranges(&self) -> &[LostRange] {
        &self.ranges
    }

    /// Nothing was lost.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// More ranges were lost than fit: the last one covers them (and rows between them).
    #[must_use]
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Row `row` (past every row added so far) lost in data strips `strips`.
    fn add(&mut self, row: u32, strips: u32) {
        if let Some(last) = self.ranges.last_mut()
            && last.row + last.rows == row
            && last.strips == strips
        {
            last.rows += 1;
        } else if self
            .ranges
            .push(LostRange {
                row,
                rows: 1,
                strips,
            })
            .is_err()
        {
            self.overflowed = true;
            if let Some(last) = self.ranges.last_mut() {
                last.rows = row + 1 - last.row;
                last.strips |= strips;
            }
        }
    }
}

/// Adds blocks `start..end` to `holes`, joined with a range it touches; when full, the last
/// range widens to cover them.
#[inline(never)]
fn add_hole(holes: &mut Vec<(u64, u64), HOLES>, start: u64, end: u64) {
    if let Some(h) = holes.iter_mut().find(|h| h.0 <= end && start <= h.1) {
        *h = (h.0.min(start), h.1.max(end));
    } else if holes.push((start, end)).is_err()
        && let Some(last) = holes.last_mut()
    {
        *last = (last.0.min(start), last.1.max(end));
    }
}

/// Takes blocks `start..end` (just written) out of `holes`, trimming or splitting ranges; a
/// split that finds the list full keeps the whole range (a hole that is not one only costs
/// redundancy).
#[inline(never)]
fn fill_holes(holes: &mut Vec<(u64, u64), HOLES>, start: u64, end: u64) {
    let mut i = 0;
    while let Some(&(s, e)) = holes.get(i) {
        if e <= start || s >= end {
            i += 1;
            continue;
        }
        let keep = match (s < start, e > end) {
            (false, false) => {
                holes.remove(i);
                continue;
            }
            (true, false) => (s, start),
            (false, true) => (end, e),
            (true, true) if holes.push((end, e)).is_ok() => (s, start),
            (true, true) => (s, e),
        };
        if let Some(h) = holes.get_mut(i) {
            *h = keep;
        }
        i += 1;
    }
}

/// Outcome of one member I/O after retries.
enum IoOutcome {
    Ok,
    /// The member could not do it; the member's state and counters are already updated.
    Failed(ErrorKind),
}

impl<D: BlockDevice, const N: usize> Array<D, N> {
    /// Assembles an array. `disks` yields one entry per member slot in slot order (`None` for a
    /// missing member, which starts [`DiskState::Failed`]). Every present disk must have the
    /// geometry's block size and at least `data_start_lba + stripes * strip_blocks` blocks.
    pub fn new(
        geo: Geometry,
        disks: impl IntoIterator<Item = Option<D>>,
        cfg: ArrayConfig,
    ) -> Result<Self, ArrayError> {
        let mut members = Vec::new();
        let need = geo.stripe_lba(geo.stripes());
        for d in disks {
            if let Some(disk) = &d
                && (disk.block_size().bytes() != geo.block_bytes() || disk.block_count() < need)
            {
                return Err(ArrayError::DiskMismatch);
            }
            let state = if d.is_some() {
                DiskState::Online
            } else {
                DiskState::Failed
            };
            members
                .push(Member {
                    disk: d,
                    state,
                    errors: DiskErrors::default(),
                    rebuilt_below: 0,
                    bad_sectors: Vec::new(),
                    holes: Vec::new(),
                })
                .map_err(|_| ArrayError::DiskMismatch)?;
        }
        if members.len() != geo.disks() || geo.disks() > 32 {
            return Err(ArrayError::DiskMismatch);
        }
        Ok(Array {
            geo,
            members,
            cfg,
            events: EventLog::new(),
            stats: ArrayStats::default(),
            host: None,
            host_count: 0,
            lse_left: DiskSet::EMPTY,
        })
    }

    /// The geometry.
    pub const fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Member slots in order.
    pub fn members(&self) -> &[Member<D>] {
        &self.members
    }

    /// One member slot.
    pub fn member(&self, disk: usize) -> Option<&Member<D>> {
        self.members.get(disk)
    }

    /// The event log (the pool appends its own events here too).
    pub const fn events(&self) -> &EventLog {
        &self.events
    }

    /// The event log, for appending.
    pub const fn events_mut(&mut self) -> &mut EventLog {
        &mut self.events
    }

    /// Byte counters.
    pub const fn stats(&self) -> &ArrayStats {
        &self.stats
    }

    /// Direct access to a member disk (for tests and tools); `None` if missing.
    pub fn disk_mut(&mut self, disk: usize) -> Option<&mut D> {
        self.members.get_mut(disk).and_then(|m| m.disk.as_mut())
    }

    /// Smallest scratch buffer reconstructing calls accept: one member block per member.
    pub const fn scratch_min_bytes(&self) -> usize {
        self.geo.disks() * self.geo.block_bytes()
    }

    /// Members currently failed or missing.
    pub fn failed(&self) -> DiskSet {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.state == DiskState::Failed)
            .fold(DiskSet::EMPTY, |s, (i, _)| s.with(i))
    }

    /// Members not in sync (failed, missing or rebuilding).
    pub fn not_in_sync(&self) -> DiskSet {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.state != DiskState::Online)
            .fold(DiskSet::EMPTY, |s, (i, _)| s.with(i))
    }

    /// Fails a member by policy above the array, for an error of kind `kind`. Its disk stays
    /// in the slot until [`Array::replace`] takes it out.
    pub fn fail(&mut self, disk: usize, kind: ErrorKind) -> Result<(), ArrayError> {
        let event = Event::DiskFailed {
            disk: disk as u8,
            kind,
        };
        self.mark_failed(disk, event)
    }

    /// Fails a member by hand (the operator's call, not an error), as [`Array::fail`] does.
    pub fn fail_by_operator(&mut self, disk: usize) -> Result<(), ArrayError> {
        self.mark_failed(disk, Event::FailedByOperator { disk: disk as u8 })
    }

    fn mark_failed(&mut self, disk: usize, event: Event) -> Result<(), ArrayError> {
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        if m.state != DiskState::Failed {
            m.state = DiskState::Failed;
            self.events.push(event);
        }
        Ok(())
    }

    /// Puts `new` into slot `disk` in state [`DiskState::Rebuilding`] with nothing rebuilt yet,
    /// returning the disk that was there. The new disk must fit the geometry.
    pub fn replace(&mut self, disk: usize, new: D) -> Result<Option<D>, ArrayError> {
        let need = self.geo.stripe_lba(self.geo.stripes());
        if new.block_size().bytes() != self.geo.block_bytes() || new.block_count() < need {
            return Err(ArrayError::DiskMismatch);
        }
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        let old = m.disk.replace(new);
        m.state = DiskState::Rebuilding;
        m.rebuilt_below = 0;
        m.errors = DiskErrors::default();
        m.bad_sectors.clear();
        m.holes.clear();
        Ok(old)
    }

    /// Puts the disk failed member `disk` still holds back as rebuilding from stripe 0 (it
    /// came back; the pool decides what to rebuild). Its error counts and known bad sectors
    /// stay.
    pub fn rejoin(&mut self, disk: usize) -> Result<(), ArrayError> {
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        if m.disk.is_none() {
            return Err(ArrayError::OutOfRange);
        }
        m.state = DiskState::Rebuilding;
        m.rebuilt_below = 0;
        m.holes.clear();
        Ok(())
    }

    /// Sets a rebuilding member's cursor: stripes below `stripe` are valid on it. Used by the
    /// pool's rebuild and when resuming a rebuild after import.
    pub fn set_rebuilt_below(&mut self, disk: usize, stripe: u64) -> Result<(), ArrayError> {
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        m.rebuilt_below = stripe;
        Ok(())
    }

    /// Marks a rebuilding member in sync.
    pub fn set_online(&mut self, disk: usize) -> Result<(), ArrayError> {
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        if m.disk.is_none() {
            return Err(ArrayError::OutOfRange);
        }
        m.state = DiskState::Online;
        Ok(())
    }

    /// Sets a member's state directly (pool import restores recorded states).
    pub fn set_state(&mut self, disk: usize, state: DiskState) -> Result<(), ArrayError> {
        let m = self.members.get_mut(disk).ok_or(ArrayError::OutOfRange)?;
        if state != DiskState::Failed && m.disk.is_none() {
            return Err(ArrayError::OutOfRange);
        }
        m.state = state;
        Ok(())
    }

    /// Takes a member's disk out of its slot (which becomes failed/missing).
    pub fn take(&mut self, disk: usize) -> Option<D> {
        let m = self.members.get_mut(disk)?;
        m.state = DiskState::Failed;
        m.disk.take()
    }

    /// Members whose latent sector errors reads met since the last call and did not rewrite:
    /// their reconstruction could not be verified by redundancy (RAID-5, or RAID-6 with two
    /// columns out), or the block was read from another mirror copy (which may be silently
    /// bad too), so only bytes the caller has checked may go there
    /// ([`Array::heal_unreadable`]).
    pub fn take_lse_left(&mut self) -> DiskSet {
        core::mem::replace(&mut self.lse_left, DiskSet::EMPTY)
    }

    /// Counts a checksum mismatch against a member (the pool found its data wrong).
    pub fn note_checksum_error(&mut self, disk: usize) {
        if let Some(m) = self.members.get_mut(disk) {
            m.errors.checksum = m.errors.checksum.saturating_add(1);
        }
    }

    /// Whether member `disk` holds current data for `stripe`: present, and online or rebuilt
    /// past it. Reads use such members only.
    #[must_use]
    pub fn readable(&self, disk: usize, stripe: u64) -> bool {
        self.members.get(disk).is_some_and(|m| {
            m.disk.is_some()
                && match m.state {
                    DiskState::Online => true,
                    DiskState::Rebuilding => stripe < m.rebuilt_below,
                    DiskState::Failed => false,
                }
        })
    }

    /// Whether member `disk` takes writes: present and not failed (online or rebuilding).
    #[must_use]
    pub fn writable(&self, disk: usize) -> bool {
        self.members
            .get(disk)
            .is_some_and(|m| m.disk.is_some() && m.state != DiskState::Failed)
    }

    /// Records a failed member I/O and applies the failure policy (md's, with its bad-block
    /// list): a device failure fails the member, and so do exhausted retries; medium errors
    /// count once per distinct block, fail the member past the budget or when a write cannot
    /// remap, but never while it is the last source of some data (failing it would take the
    /// array past its tolerance: the bad blocks are lost, the rest of the member is not).
    fn note_error(&mut self, disk: Slot, kind: ErrorKind, write: bool) {
        if kind.is_host_condition() {
            // Not the member's fault: counted, never failing it.
            self.host = Some(kind);
            self.host_count = self.host_count.wrapping_add(1);
            if let Some(m) = self.members.get_mut(disk) {
                m.errors.write = m.errors.write.saturating_add(u32::from(write));
            }
            return;
        }
        let cfg = self.cfg;
        let last_source = self.not_in_sync().with(disk).len() > self.geo.tolerance();
        let Some(m) = self.members.get_mut(disk) else {
            return;
        };
        if write {
            m.errors.write = m.errors.write.saturating_add(1);
        } else {
            m.errors.read = m.errors.read.saturating_add(1);
        }
        let fail = match kind {
            ErrorKind::Medium { lba } => {
                if !m.bad_sectors.contains(&lba) {
                    let _ = m.bad_sectors.push(lba);
                    m.errors.medium = m.errors.medium.saturating_add(1);
                    self.events.push(Event::MediumError {
                        disk: disk as u8,
                        lba,
                    });
                }
                // A block a write could not place is a hole (see `narrow_write`), not a reason
                // to fail the member: only the budget of distinct bad sectors is.
                m.errors.medium > cfg.max_medium_errors && !last_source
            }
            ErrorKind::Transport | ErrorKind::Timeout => {
                write || m.errors.read.saturating_add(m.errors.write) > cfg.max_io_errors
            }
            _ => true,
        };
        if fail && m.state != DiskState::Failed {
            m.state = DiskState::Failed;
            self.events.push(Event::DiskFailed {
                disk: disk as u8,
                kind,
            });
        }
    }

    fn dev_read(&mut self, disk: Slot, lba: u64, buf: &mut [u8]) -> IoOutcome {
        let retries = self.cfg.retries;
        if let Some(at) = self.hole_in(disk, lba, buf.len()) {
            return IoOutcome::Failed(ErrorKind::Medium { lba: at });
        }
        let Some(d) = self.members.get_mut(disk).and_then(|m| m.disk.as_mut()) else {
            return IoOutcome::Failed(ErrorKind::DeviceFailed);
        };
        let (res, attempts) = with_retries(retries, || d.read(lba, buf));
        if res.is_ok() {
            self.stats.bytes_read += buf.len() as u64;
        }
        self.after_attempts(disk, res, attempts, false)
    }

    /// Reads a mirror piece (`out.len()` bytes from member block `lba` of data strip `strip`)
    /// one block at a time, each from the first copy outside `exclude` that reads it; false if
    /// some block reads on none.
    fn read_mirror_blocks(
        &mut self,
        stripe: u64,
        strip: usize,
        lba: u64,
        out: &mut [u8],
        exclude: DiskSet,
    ) -> bool {
        let geo = self.geo;
        for (i, block) in out.chunks_exact_mut(geo.block_bytes()).enumerate() {
            let at = lba + i as u64;
            let found = geo.mirror_disks(stripe, strip).any(|d| {
                !exclude.contains(d)
                    && self.readable(d, stripe)
                    && matches!(self.dev_read(d, at, block), IoOutcome::Ok)
            });
            if !found {
                return false;
            }
        }
        true
    }

    /// The first block of `len` bytes from `lba` on `disk` that lies in one of its holes.
    #[inline(never)]
    fn hole_in(&self, disk: Slot, lba: u64, len: usize) -> Option<u64> {
        let end = lba + (len / self.geo.block_bytes()) as u64;
        let m = self.members.get(disk)?;
        let &(s, _) = m.holes.iter().find(|&&(s, e)| s < end && lba < e)?;
        Some(s.max(lba))
    }

    fn dev_write(&mut self, disk: Slot, lba: u64, buf: &[u8]) -> IoOutcome {
        let retries = self.cfg.retries;
        let Some(d) = self.members.get_mut(disk).and_then(|m| m.disk.as_mut()) else {
            return IoOutcome::Failed(ErrorKind::DeviceFailed);
        };
        let (res, attempts) = with_retries(retries, || d.write(lba, buf));
        match res {
            Ok(()) => self.placed(disk, lba, buf.len()),
            Err(ErrorKind::Medium { .. }) => return self.narrow_write(disk, lba, buf, attempts),
            Err(_) => {}
        }
        self.after_attempts(disk, res, attempts, true)
    }

    /// The drive wrote (and so remapped) `len` bytes from block `lba` of member `disk`.
    fn placed(&mut self, disk: Slot, lba: u64, len: usize) {
        let blocks = (len / self.geo.block_bytes()) as u64;
        if let Some(m) = self.members.get_mut(disk) {
            m.bad_sectors.retain(|&b| b < lba || b >= lba + blocks);
            fill_holes(&mut m.holes, lba, lba + blocks);
        }
    }

    /// A write that met a medium error, again one block at a time (md's narrowed write with
    /// its bad-block log): the blocks that take it are written, each that does not becomes a
    /// hole of the member and one bad sector against its budget, and the member stays. `Ok`
    /// unless another kind of error, or the budget, failed the member. `attempts`: the retries
    /// the whole write took.
    fn narrow_write(&mut self, disk: Slot, lba: u64, buf: &[u8], attempts: u8) -> IoOutcome {
        if let Some(m) = self.members.get_mut(disk) {
            m.errors.transient = m.errors.transient.saturating_add(u32::from(attempts));
        }
        let retries = self.cfg.retries;
        for (at, block) in (lba..).zip(buf.chunks_exact(self.geo.block_bytes())) {
            let Some(d) = self.members.get_mut(disk).and_then(|m| m.disk.as_mut()) else {
                return IoOutcome::Failed(ErrorKind::DeviceFailed);
            };
            let (res, attempts) = with_retries(retries, || d.write(at, block));
            match res {
                Ok(()) => self.placed(disk, at, block.len()),
                Err(ErrorKind::Medium { .. }) => {
                    if let Some(m) = self.members.get_mut(disk) {
                        add_hole(&mut m.holes, at, at + 1);
                    }
                    let kind = ErrorKind::Medium { lba: at };
                    let out = self.after_attempts(disk, Err(kind), attempts, true);
                    if !self.writable(disk) {
                        return out;
                    }
                    continue;
                }
                Err(_) => {}
            }
            if let IoOutcome::Failed(kind) = self.after_attempts(disk, res, attempts, true) {
                return IoOutcome::Failed(kind);
            }
        }
        IoOutcome::Ok
    }

    /// Counts the retried attempts of one member I/O as transient errors, records a retry that
    /// succeeded, and applies the failure policy to a final error.
    fn after_attempts(
        &mut self,
        disk: Slot,
        res: Result<(), ErrorKind>,
        retried: u8,
        write: bool,
    ) -> IoOutcome {
        if let Some(m) = self.members.get_mut(disk) {
            m.errors.transient = m.errors.transient.saturating_add(u32::from(retried));
        }
        match res {
            Ok(()) => {
                if retried > 0 {
                    self.events.push(Event::RetrySucceeded {
                        disk: disk as u8,
                        write,
                    });
                }
                IoOutcome::Ok
            }
            Err(kind) => {
                self.note_error(disk, kind, write);
                IoOutcome::Failed(kind)
            }
        }
    }

    fn scheme(&self) -> Option<Scheme> {
        match self.geo.level() {
            Level::Raid5 => Some(Scheme::P),
            Level::Raid6 => Some(Scheme::PQ),
            _ => None,
        }
    }

    /// Writes one whole stripe: `data` is the stripe's data, `stripe_data_bytes()` long, data
    /// strip after data strip. Parity (or mirror copies) is computed and every writable member
    /// written; failed members are skipped. `scratch`: at least two member blocks (parity is
    /// computed and written in chunks of `scratch.len() / 2`).
    ///
    /// Errors: [`ArrayError::WriteFailed`] when fewer members took their strip than the level
    /// needs to hold the data (the stripe must then be considered lost); shape errors.
    pub fn write_stripe(
        &mut self,
        stripe: u64,
        data: &[u8],
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        let host_before = self.host_count;
        let geo = self.geo;
        if stripe >= geo.stripes() {
            return Err(ArrayError::OutOfRange);
        }
        if data.len() != geo.stripe_data_bytes() {
            return Err(ArrayError::Misaligned);
        }
        let bb = geo.block_bytes();
        if scratch.len() < 2 * bb {
            return Err(ArrayError::ScratchTooSmall);
        }
        let sb = geo.strip_bytes();
        let lba = geo.stripe_lba(stripe);
        let k = geo.data_strips();
        // Data strips (and mirror copies).
        for (i, strip) in data.chunks_exact(sb).enumerate() {
            for copy in 0..geo.copies() {
                let col = match geo.level() {
                    Level::Raid1 | Level::Raid10 => Column::Mirror { data: i, copy },
                    _ => Column::Data(i),
                };
                let disk = geo.disk_of(stripe, col).ok_or(bug!(ArrayError))?;
                if !self.writable(disk) {
                    continue;
                }
                if let IoOutcome::Ok = self.dev_write(disk, lba, strip) {
                    if copy == 0 {
                        self.stats.data_bytes_written += sb as u64;
                    } else {
                        self.stats.redundancy_bytes_written += sb as u64;
                    }
                }
            }
        }
        // Parity, chunk by chunk.
        if let Some(scheme) = self.scheme() {
            let chunk = (scratch.len() / 2 / bb * bb).min(sb);
            let (pbuf, rest) = scratch.split_at_mut(chunk);
            let qbuf = rest.get_mut(..chunk).ok_or(ArrayError::ScratchTooSmall)?;
            let p_disk = geo.disk_of(stripe, Column::P).ok_or(bug!(ArrayError))?;
            let q_disk = geo.disk_of(stripe, Column::Q);
            let mut off = 0;
            while off < sb {
                let len = chunk.min(sb - off);
                let mut cols: Vec<&[u8], 32> = Vec::new();
                for i in 0..k {
                    let s = data
                        .get(i * sb + off..i * sb + off + len)
                        .ok_or(bug!(ArrayError))?;
                    cols.push(s).map_err(|_| bug!(ArrayError))?;
                }
                let p = pbuf.get_mut(..len).ok_or(ArrayError::ScratchTooSmall)?;
                let q = qbuf.get_mut(..len).ok_or(ArrayError::ScratchTooSmall)?;
                match scheme {
                    Scheme::P => parity::gen_p(&cols, p),
                    Scheme::PQ => parity::gen_pq(&cols, p, q),
                }
                .map_err(|_| ArrayError::Misaligned)?;
                let at = lba + (off / bb) as u64;
                if self.writable(p_disk)
                    && let IoOutcome::Ok = self.dev_write(p_disk, at, p)
                {
                    self.stats.redundancy_bytes_written += len as u64;
                }
                if let Some(qd) = q_disk
                    && self.writable(qd)
                    && let IoOutcome::Ok = self.dev_write(qd, at, q)
                {
                    self.stats.redundancy_bytes_written += len as u64;
                }
                off += len;
            }
        }
        self.stats.stripes_written += 1;
        if self.host_count != host_before
            && let Some(kind) = self.host
        {
            return Err(ArrayError::HostCondition { kind });
        }
        // Which members now hold their strip of this stripe?
        let written = (0..geo.disks())
            .filter(|d| self.writable(*d))
            .fold(DiskSet::EMPTY, DiskSet::with);
        if self.stripe_recoverable_from(stripe, written) && self.rows_recoverable(stripe, written) {
            Ok(())
        } else {
            Err(ArrayError::WriteFailed { stripe })
        }
    }

    /// Whether every row of `stripe` that a member in `have` holds a hole at can still be had
    /// from the members in `have` without a hole there (a write that left holes on several
    /// members in one row lost that row).
    fn rows_recoverable(&self, stripe: u64, have: DiskSet) -> bool {
        let lo = self.geo.stripe_lba(stripe);
        let hi = lo + (self.geo.strip_bytes() / self.geo.block_bytes()) as u64;
        let holes = self
            .members
            .iter()
            .flat_map(|m| m.holes.iter())
            .filter(|&&(s, e)| s < hi && e > lo);
        for &(s, e) in holes {
            for row in s.max(lo)..e.min(hi) {
                let whole = have
                    .iter()
                    .filter(|&d| self.hole_in(d, row, self.geo.block_bytes()).is_none())
                    .fold(DiskSet::EMPTY, DiskSet::with);
                if !self.stripe_recoverable_from(stripe, whole) {
                    return false;
                }
            }
        }
        true
    }

    /// Whether every data strip of `stripe` can be had from the members in `have`.
    fn stripe_recoverable_from(&self, stripe: u64, have: DiskSet) -> bool {
        let geo = &self.geo;
        let missing = geo.disks() - (0..geo.disks()).filter(|d| have.contains(*d)).count();
        match geo.level() {
            Level::Raid0 => missing == 0,
            Level::Raid5 | Level::Raid6 => missing <= geo.parity_strips(),
            Level::Raid1 | Level::Raid10 => (0..geo.data_strips())
                .all(|i| geo.mirror_disks(stripe, i).any(|d| have.contains(d))),
        }
    }

    /// Reads `buf.len()` bytes of array data from array byte address `addr` (data bytes only,
    /// stripe after stripe; see [`Geometry::locate`]). `addr` and `buf.len()` are multiples of
    /// the member block size. Missing or unreadable columns are reconstructed from redundancy
    /// (mirrors: read from another copy); blocks that failed with a medium error are rewritten
    /// in place where redundancy verified their reconstruction, and otherwise left for the
    /// caller to heal with bytes it checked ([`Array::take_lse_left`]).
    pub fn read(
        &mut self,
        addr: u64,
        buf: &mut [u8],
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        self.read_excluding(addr, buf, scratch, DiskSet::EMPTY)
    }

    /// Like [`Array::read`], but treats the members in `exclude` as unavailable: their columns
    /// are reconstructed from the others. The pool uses it to find which member holds silently
    /// corrupted data (a checksum mismatch) before repairing it.
    pub fn read_excluding(
        &mut self,
        addr: u64,
        buf: &mut [u8],
        scratch: &mut [u8],
        exclude: DiskSet,
    ) -> Result<(), ArrayError> {
        let geo = self.geo;
        let bb = geo.block_bytes() as u64;
        if buf.is_empty() || !addr.is_multiple_of(bb) || !(buf.len() as u64).is_multiple_of(bb) {
            return Err(ArrayError::Misaligned);
        }
        let end = addr
            .checked_add(buf.len() as u64)
            .ok_or(ArrayError::OutOfRange)?;
        if end > geo.data_bytes() {
            return Err(ArrayError::OutOfRange);
        }
        let sb = geo.strip_bytes();
        let mut done = 0usize;
        while done < buf.len() {
            let (stripe, strip, off) = geo.locate(addr + done as u64).ok_or(bug!(ArrayError))?;
            let len = (sb - off).min(buf.len() - done);
            let out = buf.get_mut(done..done + len).ok_or(bug!(ArrayError))?;
            self.read_piece(stripe, strip, off, out, scratch, exclude)?;
            done += len;
        }
        Ok(())
    }

    /// Reads bytes `off..off + out.len()` of data strip `strip` of `stripe` (within one strip).
    fn read_piece(
        &mut self,
        stripe: u64,
        strip: usize,
        off: usize,
        out: &mut [u8],
        scratch: &mut [u8],
        exclude: DiskSet,
    ) -> Result<(), ArrayError> {
        let geo = self.geo;
        let lba = geo.stripe_lba(stripe) + (off / geo.block_bytes()) as u64;
        match geo.level() {
            Level::Raid1 | Level::Raid10 => {
                let mut bad = DiskSet::EMPTY;
                let mut got = None;
                let mut excluded = false;
                for d in geo.mirror_disks(stripe, strip) {
                    excluded |= exclude.contains(d);
                    if exclude.contains(d) || !self.readable(d, stripe) {
                        continue;
                    }
                    match self.dev_read(d, lba, out) {
                        IoOutcome::Ok => {
                            got = Some(d);
                            break;
                        }
                        IoOutcome::Failed(ErrorKind::Medium { .. }) => bad = bad.with(d),
                        IoOutcome::Failed(_) => {}
                    }
                }
                // No copy reads it whole, and some have latent sector errors: each block from
                // the first copy that reads it (md and ZFS read around bad sectors the same way).
                if got.is_none()
                    && !bad.is_empty()
                    && self.read_mirror_blocks(stripe, strip, lba, out, exclude)
                {
                    got = bad.iter().next();
                }
                if got.is_none() {
                    // Not when the caller excluded a copy: a probe, not a loss.
                    if !excluded {
                        self.events.push(Event::Unrecoverable { stripe });
                    }
                    return Err(ArrayError::Unrecoverable { stripe });
                }
                // The copies with latent sector errors are rewritten by the caller once it has
                // checked the bytes (a copy that reads can be silently bad too).
                self.lse_left = DiskSet(self.lse_left.0 | bad.0);
                Ok(())
            }
            Level::Raid0 | Level::Raid5 | Level::Raid6 => {
                let d = geo
                    .disk_of(stripe, Column::Data(strip))
                    .ok_or(bug!(ArrayError))?;
                let mut lse = DiskSet::EMPTY;
                if !exclude.contains(d) && self.readable(d, stripe) {
                    match self.dev_read(d, lba, out) {
                        IoOutcome::Ok => return Ok(()),
                        IoOutcome::Failed(ErrorKind::Medium { .. })
                            if geo.level() != Level::Raid0 && out.len() > geo.block_bytes() =>
                        {
                            return self
                                .read_piece_blocks(stripe, strip, off, out, scratch, exclude);
                        }
                        IoOutcome::Failed(ErrorKind::Medium { .. }) => lse = lse.with(d),
                        IoOutcome::Failed(_) => {}
                    }
                }
                if geo.level() == Level::Raid0 {
                    self.events.push(Event::Unrecoverable { stripe });
                    return Err(ArrayError::Unrecoverable { stripe });
                }
                self.reconstruct_range(
                    stripe,
                    off,
                    out.len(),
                    Some((strip, out)),
                    exclude,
                    (DiskSet::EMPTY, lse),
                    scratch,
                    false,
                )
                .map(|_| ())
            }
        }
    }

    /// [`Self::read_piece`] on a parity level after the data member met a medium error: each
    /// block from that member, and each one it does not read reconstructed from the others and
    /// rewritten there (md re-reads a failed read sector by sector the same way), so blocks
    /// that read are not rewritten, nor counted as repairs.
    fn read_piece_blocks(
        &mut self,
        stripe: u64,
        strip: usize,
        off: usize,
        out: &mut [u8],
        scratch: &mut [u8],
        exclude: DiskSet,
    ) -> Result<(), ArrayError> {
        let geo = self.geo;
        let bb = geo.block_bytes();
        let d = geo
            .disk_of(stripe, Column::Data(strip))
            .ok_or(bug!(ArrayError))?;
        let lba = geo.stripe_lba(stripe) + (off / bb) as u64;
        for (i, block) in out.chunks_exact_mut(bb).enumerate() {
            let read = if self.readable(d, stripe) {
                self.dev_read(d, lba + i as u64, block)
            } else {
                IoOutcome::Failed(ErrorKind::DeviceFailed)
            };
            let lse = match read {
                IoOutcome::Ok => continue,
                IoOutcome::Failed(ErrorKind::Medium { .. }) => DiskSet::one(d),
                IoOutcome::Failed(_) => DiskSet::EMPTY,
            };
            let at = off + i * bb;
            let want = Some((strip, &mut *block));
            let sets = (DiskSet::EMPTY, lse);
            self.reconstruct_range(stripe, at, bb, want, exclude, sets, scratch, false)?;
        }
        Ok(())
    }

    fn repair_write(&mut self, disk: Slot, lba: u64, data: &[u8]) {
        if !self.writable(disk) {
            return;
        }
        if let IoOutcome::Ok = self.dev_write(disk, lba, data) {
            // Blocks the write could not place stay holes, and are not repaired.
            let bb = self.geo.block_bytes();
            let blocks = (lba..lba + (data.len() / bb) as u64)
                .filter(|&b| self.hole_in(disk, b, bb).is_none())
                .count() as u32;
            if blocks == 0 {
                return;
            }
            self.stats.repair_bytes_written += u64::from(blocks) * bb as u64;
            let Some(m) = self.members.get_mut(disk) else {
                return;
            };
            // Writes onto a member being rebuilt are the rebuild's progress, not repairs (and
            // one event per rebuilt chunk would push every other event out of the ring).
            if m.state == DiskState::Rebuilding {
                return;
            }
            m.errors.repaired = m.errors.repaired.saturating_add(blocks);
            self.events.push(Event::Repaired {
                disk: disk as u8,
                lba,
                blocks,
            });
        }
    }

    /// Reads every column of `stripe` it can over `clen` bytes from member block `at` into its
    /// slot of `scratch` (slots of `chunk` bytes, in parity-column order), leaving out members
    /// in `skip`; `exclude` (a subset) says which of those the caller excluded.
    fn read_columns(
        &mut self,
        stripe: u64,
        at: u64,
        (clen, chunk): (usize, usize),
        (skip, exclude): (DiskSet, DiskSet),
        scratch: &mut [u8],
    ) -> Result<ChunkColumns, ArrayError> {
        let geo = self.geo;
        let ncols = geo.data_strips() + geo.parity_strips();
        let mut cr = ChunkColumns::default();
        for (ci, slot) in scratch.chunks_exact_mut(chunk).take(ncols).enumerate() {
            let col = geo.parity_column(ci).ok_or(bug!(ArrayError))?;
            let d = geo.disk_of(stripe, col).ok_or(bug!(ArrayError))?;
            let slot = slot.get_mut(..clen).ok_or(ArrayError::ScratchTooSmall)?;
            let ok = !skip.contains(d)
                && self.readable(d, stripe)
                && match self.dev_read(d, at, slot) {
                    IoOutcome::Ok => true,
                    IoOutcome::Failed(ErrorKind::Medium { .. }) => {
                        cr.met = cr.met.with(d);
                        false
                    }
                    IoOutcome::Failed(_) => false,
                };
            if !ok {
                cr.missing += 1;
                cr.by_exclusion += usize::from(exclude.contains(d));
                // Past two the stripe is lost anyway (the caller checks).
                let _ = cr.erased.push(ci);
            }
        }
        Ok(cr)
    }

    /// Reconstructs bytes `off..off + len` of every column of a parity stripe, chunk by chunk,
    /// treating `exclude` members as erased. Copies data strip `want.0` into `want.1` and
    /// rewrites the columns of members in `repair` (checked by the caller) with the
    /// reconstructed bytes, and with them blocks of other members that meet a latent sector
    /// error on the way. A plain read (`repair` empty) rewrites those, and the columns of
    /// members in `lse` (the read met a latent sector error there), only when redundancy left
    /// over (RAID-6 with one column erased) verified the reconstruction, and otherwise leaves
    /// them to [`Array::take_lse_left`]: one made from a silently bad column (a
    /// misdirected write onto parity) would turn the latent error into silent damage, and the
    /// item checksums above would then find two bad columns where there was one. With `check`,
    /// a chunk whose remaining redundancy (RAID-6 with one column erased) disagrees with the
    /// reconstruction stops the work before anything of it is written, and the result is
    /// `Ok(false)`.
    #[allow(clippy::too_many_arguments)]
    fn reconstruct_range(
        &mut self,
        stripe: u64,
        off: usize,
        len: usize,
        mut want: Option<(usize, &mut [u8])>,
        exclude: DiskSet,
        (repair, lse): (DiskSet, DiskSet),
        scratch: &mut [u8],
        check: bool,
    ) -> Result<bool, ArrayError> {
        let geo = self.geo;
        let scheme = self.scheme().ok_or(ArrayError::Unrecoverable { stripe })?;
        let n = geo.disks();
        let bb = geo.block_bytes();
        let chunk = (scratch.len() / n / bb * bb).min(len);
        if chunk == 0 {
            return Err(ArrayError::ScratchTooSmall);
        }
        let k = geo.data_strips();
        let ncols = k + geo.parity_strips();
        let base = geo.stripe_lba(stripe);
        let mut met = DiskSet::EMPTY;
        // Whether every chunk's reconstruction agreed with redundancy left over to check it.
        let mut verified = true;
        let mut done = 0;
        while done < len {
            let clen = chunk.min(len - done);
            let at = base + ((off + done) / bb) as u64;
            // A member that meets a medium error over one block gets that block; over more,
            // only the blocks that do not read, once the range is done. Only when the
            // reconstruction is verified: one made from an unchecked column (a misdirected
            // write on parity) would turn the latent error into silent damage.
            let skip = DiskSet(exclude.0 | repair.0 | lse.0);
            let cr = self.read_columns(stripe, at, (clen, chunk), (skip, exclude), scratch)?;
            let (erased, missing, by_exclusion) = (cr.erased, cr.missing, cr.by_exclusion);
            let met_here = if clen == bb {
                DiskSet(lse.0 | cr.met.0)
            } else {
                met = DiskSet(met.0 | cr.met.0);
                lse
            };
            if missing > geo.parity_strips() {
                if missing - by_exclusion > geo.parity_strips() {
                    self.events.push(Event::Unrecoverable { stripe });
                }
                return Err(ArrayError::Unrecoverable { stripe });
            }
            {
                let mut cols: Vec<&mut [u8], 34> = Vec::new();
                for slot in scratch.chunks_exact_mut(chunk).take(ncols) {
                    let s = slot.get_mut(..clen).ok_or(ArrayError::ScratchTooSmall)?;
                    cols.push(s).map_err(|_| bug!(ArrayError))?;
                }
                parity::reconstruct(&mut cols, scheme, &erased)
                    .map_err(|_| ArrayError::Misaligned)?;
                let checkable = erased.len() < geo.parity_strips();
                let wanted = check || !met_here.is_empty() || !met.is_empty();
                let consistent = checkable
                    && wanted
                    && check_columns(&cols, scheme)? == parity::CheckResult::Consistent;
                if check && checkable && !consistent {
                    return Ok(false);
                }
                verified &= consistent || !wanted;
            }
            // A caller that names members to repair has accepted the reconstruction for them
            // (it checked the stripe, or rebuilds a member from it): blocks with latent errors
            // met on the way take it too.
            let trusted = verified || !repair.is_empty();
            let rewrite = if trusted {
                DiskSet(repair.0 | met_here.0)
            } else {
                self.lse_left = DiskSet(self.lse_left.0 | met_here.0);
                repair
            };
            if !erased.is_empty() {
                self.stats.reconstructions += 1;
            }
            if let Some((strip, out)) = want.as_mut() {
                let src = scratch
                    .get(*strip * chunk..*strip * chunk + clen)
                    .ok_or(bug!(ArrayError))?;
                out.get_mut(done..done + clen)
                    .ok_or(bug!(ArrayError))?
                    .copy_from_slice(src);
                // Deliberate bug for the fault campaign's self-test: flip a reconstructed byte.
                #[cfg(feature = "_mutate")]
                if !erased.is_empty()
                    && crate::mutate::active(crate::mutate::Mutation::ReconFlip)
                    && let Some(x) = out.get_mut(done)
                {
                    *x ^= 0x01;
                }
            }
            for d in rewrite.iter() {
                let Some(ci) = geo.column_of(stripe, d).and_then(|c| geo.parity_index(c)) else {
                    continue;
                };
                if let Some(src) = scratch.get(ci * chunk..ci * chunk + clen) {
                    self.repair_write(d, at, src);
                }
            }
            done += clen;
        }
        // Best effort: the range is read whatever these rewrites meet.
        if verified || !repair.is_empty() {
            let _ = self.repair_unreadable_in(stripe, (off, len), met, exclude, scratch);
        } else {
            self.lse_left = DiskSet(self.lse_left.0 | met.0);
        }
        Ok(true)
    }

    /// Rewrites bytes `off..off + len` of the strips of `stripe` held by the members in `disks`
    /// with data reconstructed from the other members (mirrors: copied from a good copy). Used
    /// for rebuild (a whole strip onto a new member), scrub and checksum repairs. `off` and
    /// `len` are multiples of the member block size within one strip.
    pub fn repair(
        &mut self,
        stripe: u64,
        off: usize,
        len: usize,
        disks: DiskSet,
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        self.repair_checked(stripe, off, len, disks, scratch, false)
            .map(|_| ())
    }

    /// Rewrites, from the other members, only the blocks of `stripe`'s strips on the members in
    /// `disks` that do not read (latent sector errors, holes), one member block at a time; a
    /// block that still will not take the write stays a hole. Returns the blocks written. The
    /// scrub's repair of a member in sync: its readable blocks hold checked data already, and
    /// rewriting them would count as repairs that were none.
    ///
    /// # Errors
    /// Those of [`Array::repair`], from the first row that could not be reconstructed.
    pub fn repair_unreadable(
        &mut self,
        stripe: u64,
        disks: DiskSet,
        scratch: &mut [u8],
    ) -> Result<u64, ArrayError> {
        let len = self.geo.strip_bytes();
        self.repair_unreadable_in(stripe, (0, len), disks, DiskSet::EMPTY, scratch)
    }

    /// [`Array::repair_unreadable`] over bytes `range.0..range.0 + range.1` of the strips
    /// (block-aligned), reconstructing without the members in `exclude` (parity levels; a
    /// reconstruction's caller probing for a silently bad column: rebuilding from it would
    /// write its damage onto the member repaired).
    fn repair_unreadable_in(
        &mut self,
        stripe: u64,
        (off, len): (usize, usize),
        disks: DiskSet,
        exclude: DiskSet,
        scratch: &mut [u8],
    ) -> Result<u64, ArrayError> {
        let geo = self.geo;
        let bb = geo.block_bytes();
        let base = geo.stripe_lba(stripe);
        let before = self.stats.repair_bytes_written;
        if disks.is_empty() {
            return Ok(0);
        }
        for row in off / bb..(off + len) / bb {
            let buf = scratch.get_mut(..bb).ok_or(ArrayError::ScratchTooSmall)?;
            let bad = disks
                .iter()
                .filter(|&d| !matches!(self.dev_read(d, base + row as u64, buf), IoOutcome::Ok))
                .fold(DiskSet::EMPTY, DiskSet::with);
            if bad.is_empty() {
                continue;
            }
            if exclude.is_empty() {
                self.repair(stripe, row * bb, bb, bad, scratch)?;
            } else {
                let at = row * bb;
                let sets = (bad, DiskSet::EMPTY);
                self.reconstruct_range(stripe, at, bb, None, exclude, sets, scratch, false)?;
            }
        }
        Ok((self.stats.repair_bytes_written - before) / bb as u64)
    }

    /// Self-healing after a read that needed redundancy: writes `good`, bytes the caller has
    /// checked (an item's CRC-32C), over bytes `off..off + good.len()` of data strip `strip` of
    /// `stripe` on the members in `disks` that hold that strip (mirrors: those copies; parity
    /// levels: its data member). Parity members in `disks` are left as they are: parity recomputed
    /// from the rows' other data columns, which were checked nowhere, would make their silent
    /// damage (a misdirected write, rot) permanent; the scrub rewrites parity once its item walk
    /// has checked the whole stripe. `off` needs no alignment; `off + good.len()` must lie within
    /// the strip. A member block the range covers only in part is read from that member and
    /// patched, and left alone when it cannot be read: its other bytes were checked nowhere, so
    /// copying them from another member (as [`Array::repair`] does with whole strips) could spread
    /// damage the caller never saw, e.g. bit rot in the neighbouring item of the copy that checked.
    /// Members not readable at `stripe` (rebuilding below it) are skipped; the rebuild writes them.
    /// `scratch` is at least [`Array::scratch_min_bytes`] bytes.
    ///
    /// # Errors
    /// [`ArrayError::OutOfRange`], [`ArrayError::ScratchTooSmall`].
    pub fn heal_data(
        &mut self,
        stripe: u64,
        strip: usize,
        off: usize,
        good: &[u8],
        disks: DiskSet,
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        let geo = self.geo;
        let bb = geo.block_bytes();
        let end = off + good.len();
        self.check_piece(stripe, strip, off, good.len())?;
        if scratch.len() < self.scratch_min_bytes() {
            return Err(ArrayError::ScratchTooSmall);
        }
        if good.is_empty() {
            return Ok(());
        }
        let holders = self.holders(stripe, strip);
        let base = geo.stripe_lba(stripe);
        let (lo, hi) = (off / bb * bb, end.div_ceil(bb) * bb);
        for d in holders {
            if !disks.contains(d) || !self.readable(d, stripe) {
                continue;
            }
            let mut at = lo;
            while at < hi {
                let lba = base + (at / bb) as u64;
                let (from, to) = (at.max(off), (at + bb).min(end));
                let whole_end = if from == at && to == at + bb {
                    // The run of blocks `good` covers whole, written in one go.
                    let n = (end - at) / bb * bb;
                    at + n
                } else {
                    at
                };
                if whole_end > at {
                    if let Some(src) = good.get(at - off..whole_end - off) {
                        self.repair_write(d, lba, src);
                    }
                    at = whole_end;
                    continue;
                }
                let blk = scratch.get_mut(..bb).ok_or(ArrayError::ScratchTooSmall)?;
                if let IoOutcome::Ok = self.dev_read(d, lba, blk) {
                    let src = good.get(from - off..to - off);
                    let dst = blk.get_mut(from - at..to - at);
                    if let (Some(src), Some(dst)) = (src, dst) {
                        dst.copy_from_slice(src);
                        let blk = scratch.get(..bb).ok_or(ArrayError::ScratchTooSmall)?;
                        self.repair_write(d, lba, blk);
                    }
                }
                at += bb;
            }
        }
        Ok(())
    }

    /// Makes every readable copy of mirror strip `strip` of `stripe` hold `good` over bytes
    /// `off..off + good.len()` (no alignment needed), writing only the member blocks that
    /// differ or do not read: a block the range covers only in part is patched into what its
    /// copy holds, and left alone when that copy cannot be read (its other bytes were checked
    /// nowhere). For a mirror whose copies disagree where the caller checked `good` (an item's
    /// CRC-32C). Other levels: nothing.
    ///
    /// # Errors
    /// [`ArrayError::OutOfRange`], [`ArrayError::ScratchTooSmall`].
    pub fn sync_copies(
        &mut self,
        stripe: u64,
        strip: usize,
        off: usize,
        good: &[u8],
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        let geo = self.geo;
        self.check_piece(stripe, strip, off, good.len())?;
        if !matches!(geo.level(), Level::Raid1 | Level::Raid10) {
            return Ok(());
        }
        for d in geo.mirror_disks(stripe, strip) {
            self.patch_blocks(d, stripe, off, good, scratch, Patch::Differing)?;
        }
        Ok(())
    }

    /// Writes `good` (checked by the caller, over bytes `off..off + good.len()` of data strip
    /// `strip` of `stripe`) onto the member blocks of its holders in `disks` (a mirror's
    /// copies, or the data member) that do not read: the repair of latent sector errors a
    /// read met and could not verify ([`Array::take_lse_left`]). Blocks that read are left as
    /// they are. A block the range covers only in part takes the rest of its bytes from
    /// another copy that reads it (mirrors), as a read of it would; on parity levels it is
    /// left for the scrub.
    ///
    /// # Errors
    /// [`ArrayError::OutOfRange`], [`ArrayError::ScratchTooSmall`].
    pub fn heal_unreadable(
        &mut self,
        stripe: u64,
        strip: usize,
        off: usize,
        good: &[u8],
        disks: DiskSet,
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        self.check_piece(stripe, strip, off, good.len())?;
        let holders = self.holders(stripe, strip);
        for &d in holders.iter().filter(|&&d| disks.contains(d)) {
            let others = holders.iter().filter(|&&c| c != d);
            let others = others.fold(DiskSet::EMPTY, |set, &c| set.with(c));
            self.patch_blocks(d, stripe, off, good, scratch, Patch::Unreadable(others))?;
        }
        Ok(())
    }

    /// `Err(OutOfRange)` unless bytes `off..off + len` of data strip `strip` of `stripe` exist.
    fn check_piece(
        &self,
        stripe: u64,
        strip: usize,
        off: usize,
        len: usize,
    ) -> Result<(), ArrayError> {
        let geo = &self.geo;
        if stripe >= geo.stripes() || strip >= geo.data_strips() || off + len > geo.strip_bytes() {
            return Err(ArrayError::OutOfRange);
        }
        Ok(())
    }

    /// Members holding data strip `strip` of `stripe`: its copies on mirrors, else its member.
    fn holders(&self, stripe: u64, strip: usize) -> Vec<usize, 32> {
        match self.geo.level() {
            Level::Raid1 | Level::Raid10 => self.geo.mirror_disks(stripe, strip).collect(),
            _ => self
                .geo
                .disk_of(stripe, Column::Data(strip))
                .into_iter()
                .collect(),
        }
    }

    /// Writes `good` over bytes `off..` of member `d`'s strip in `stripe`, block by block, as
    /// `how` says; a block that does not read is written when the range covers it whole.
    /// Skips a member not readable at `stripe`. `scratch`: one member block.
    fn patch_blocks(
        &mut self,
        d: usize,
        stripe: u64,
        off: usize,
        good: &[u8],
        scratch: &mut [u8],
        how: Patch,
    ) -> Result<(), ArrayError> {
        let bb = self.geo.block_bytes();
        let blk = scratch.get_mut(..bb).ok_or(ArrayError::ScratchTooSmall)?;
        if !self.readable(d, stripe) {
            return Ok(());
        }
        let (base, end) = (self.geo.stripe_lba(stripe), off + good.len());
        for at in (off / bb * bb..end).step_by(bb) {
            let (from, to) = (at.max(off), (at + bb).min(end));
            let src = good.get(from - off..to - off).ok_or(bug!(ArrayError))?;
            let lba = base + (at / bb) as u64;
            let read = matches!(self.dev_read(d, lba, blk), IoOutcome::Ok);
            let keep = match (read, how) {
                (true, Patch::Differing) => blk.get(from - at..to - at) == Some(src),
                (false, _) if to - from == bb => false,
                (false, Patch::Unreadable(copies)) => !self.read_copy(copies, stripe, lba, blk),
                (true, Patch::Unreadable(_)) | (false, Patch::Differing) => true,
            };
            if keep {
                continue;
            }
            let dst = blk.get_mut(from - at..to - at).ok_or(bug!(ArrayError))?;
            dst.copy_from_slice(src);
            self.repair_write(d, lba, blk);
        }
        Ok(())
    }

    /// Reads member block `lba` of `stripe` into `blk` from the first of `copies` that reads
    /// it; false if none does.
    fn read_copy(&mut self, copies: DiskSet, stripe: u64, lba: u64, blk: &mut [u8]) -> bool {
        copies.iter().any(|c| {
            self.readable(c, stripe) && matches!(self.dev_read(c, lba, blk), IoOutcome::Ok)
        })
    }

    /// [`Array::repair`]; with `check`, a chunk whose remaining redundancy (RAID-6 with one
    /// column erased: see `reconstruct_range`; mirrors: the other surviving copies) disagrees
    /// with what would be written is not written, and the result is `Ok(false)`.
    fn repair_checked(
        &mut self,
        stripe: u64,
        off: usize,
        len: usize,
        disks: DiskSet,
        scratch: &mut [u8],
        check: bool,
    ) -> Result<bool, ArrayError> {
        let geo = self.geo;
        let bb = geo.block_bytes();
        if stripe >= geo.stripes() {
            return Err(ArrayError::OutOfRange);
        }
        if len == 0
            || !off.is_multiple_of(bb)
            || !len.is_multiple_of(bb)
            || off + len > geo.strip_bytes()
        {
            return Err(ArrayError::Misaligned);
        }
        if scratch.len() < self.scratch_min_bytes() {
            return Err(ArrayError::ScratchTooSmall);
        }
        match geo.level() {
            Level::Raid0 => Err(ArrayError::Unrecoverable { stripe }),
            Level::Raid5 | Level::Raid6 => {
                let sets = (disks, DiskSet::EMPTY);
                self.reconstruct_range(stripe, off, len, None, disks, sets, scratch, check)
            }
            Level::Raid1 | Level::Raid10 => {
                // Checking compares the surviving copies, so it needs a second chunk buffer.
                let parts = if check { 2 } else { 1 };
                let chunk = (scratch.len() / parts / bb * bb).min(len);
                if chunk == 0 {
                    return Err(ArrayError::ScratchTooSmall);
                }
                let base = geo.stripe_lba(stripe);
                for strip in 0..geo.data_strips() {
                    let copies: Vec<usize, 32> = (0..geo.copies())
                        .filter_map(|c| {
                            geo.disk_of(
                                stripe,
                                Column::Mirror {
                                    data: strip,
                                    copy: c,
                                },
                            )
                        })
                        .collect();
                    if !copies.iter().any(|d| disks.contains(*d)) {
                        continue;
                    }
                    let mut done = 0;
                    while done < len {
                        let clen = chunk.min(len - done);
                        let (buf, other) = scratch
                            .split_at_mut_checked(chunk)
                            .ok_or(ArrayError::ScratchTooSmall)?;
                        let buf = buf.get_mut(..clen).ok_or(ArrayError::ScratchTooSmall)?;
                        let at = base + ((off + done) / bb) as u64;
                        // Read from a copy not being repaired; read_piece skips excluded ones.
                        self.read_piece(stripe, strip, off + done, buf, &mut [], disks)?;
                        if check && !self.survivors_agree(stripe, &copies, disks, at, buf, other) {
                            return Ok(false);
                        }
                        for &d in copies.iter().filter(|d| disks.contains(**d)) {
                            self.repair_write(d, at, buf);
                        }
                        done += clen;
                    }
                }
                Ok(true)
            }
        }
    }

    /// Whether every readable copy in `copies` outside `exclude` holds `data` at `lba` (copies
    /// that fail the read are left out: read errors are handled where they are read for data).
    /// `tmp`: at least `data.len()` bytes (a shorter one checks nothing).
    fn survivors_agree(
        &mut self,
        stripe: u64,
        copies: &[usize],
        exclude: DiskSet,
        lba: u64,
        data: &[u8],
        tmp: &mut [u8],
    ) -> bool {
        let Some(tmp) = tmp.get_mut(..data.len()) else {
            return true;
        };
        for &d in copies {
            if exclude.contains(d) || !self.readable(d, stripe) {
                continue;
            }
            if matches!(self.dev_read(d, lba, tmp), IoOutcome::Ok) && tmp != data {
                return false;
            }
        }
        true
    }

    /// Rebuilds `stripe`'s strip on member `disk` from the others (the rebuild primitive). The
    /// member must be writable (normally [`DiskState::Rebuilding`]).
    pub fn rebuild_stripe(
        &mut self,
        stripe: u64,
        disk: usize,
        scratch: &mut [u8],
    ) -> Result<(), ArrayError> {
        if !self.writable(disk) {
            return Err(ArrayError::OutOfRange);
        }
        self.repair(
            stripe,
            0,
            self.geo.strip_bytes(),
            DiskSet::one(disk),
            scratch,
        )
    }

    /// Rebuilds `stripe`'s strip on member `disk` one member block (row) at a time, for a strip
    /// [`Array::rebuild_stripe`] could not rebuild whole (a latent sector error on a survivor
    /// where redundancy is gone): every row that can be rebuilt is written, and the others
    /// are returned with the data strips lost in them (those no member other than `disk` can
    /// read at that row). Empty when every row was rebuilt.
    ///
    /// # Errors
    /// Those of [`Array::rebuild_stripe`] other than [`ArrayError::Unrecoverable`].
    pub fn rebuild_stripe_rows(
        &mut self,
        stripe: u64,
        disk: usize,
        scratch: &mut [u8],
    ) -> Result<LostRows, ArrayError> {
        if !self.writable(disk) {
            return Err(ArrayError::OutOfRange);
        }
        let mut lost = LostRows::default();
        let bb = self.geo.block_bytes();
        for row in 0..self.geo.strip_bytes() / bb {
            match self.repair(stripe, row * bb, bb, DiskSet::one(disk), scratch) {
                Ok(()) => {}
                Err(ArrayError::Unrecoverable { .. }) => {
                    let strips = self.strips_lost_at(stripe, row, disk, scratch);
                    lost.add(row as u32, strips);
                    let lba = self.geo.stripe_lba(stripe) + row as u64;
                    if let Some(m) = self.members.get_mut(disk) {
                        add_hole(&mut m.holes, lba, lba + 1);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(lost)
    }

    /// The data strips of `stripe` (bit i: data strip i) that no member other than `target`
    /// can read at member block `row` of the strip. `scratch`: at least one block.
    fn strips_lost_at(
        &mut self,
        stripe: u64,
        row: usize,
        target: usize,
        scratch: &mut [u8],
    ) -> u32 {
        let geo = self.geo;
        let lba = geo.stripe_lba(stripe) + row as u64;
        let Some(buf) = scratch.get_mut(..geo.block_bytes()) else {
            return u32::MAX;
        };
        let mut lost = 0u32;
        for i in 0..geo.data_strips() {
            let mut readable = false;
            for copy in 0..geo.copies() {
                let col = match geo.level() {
                    Level::Raid1 | Level::Raid10 => Column::Mirror { data: i, copy },
                    _ => Column::Data(i),
                };
                let Some(d) = geo.disk_of(stripe, col) else {
                    continue;
                };
                if d != target
                    && self.readable(d, stripe)
                    && matches!(self.dev_read(d, lba, buf), IoOutcome::Ok)
                {
                    readable = true;
                    break;
                }
            }
            if !readable {
                lost |= 1 << i;
            }
        }
        lost
    }

    /// [`Array::rebuild_stripe`], checking each chunk against the redundancy the level has left
    /// (RAID-6 rebuilding one member: the other parity; mirrors: the other surviving copies)
    /// before writing it. `Ok(false)`: they disagree, so a surviving column is silently wrong
    /// and copying it into the new member would double the damage; nothing more was written
    /// (earlier chunks may have been). Levels with nothing left to check against (RAID-5, a
    /// two-way mirror with one copy left) rebuild as [`Array::rebuild_stripe`] does. A mirror
    /// check reads every surviving copy, half of `scratch` at a time.
    pub fn rebuild_stripe_checked(
        &mut self,
        stripe: u64,
        disk: usize,
        scratch: &mut [u8],
    ) -> Result<bool, ArrayError> {
        if !self.writable(disk) {
            return Err(ArrayError::OutOfRange);
        }
        let len = self.geo.strip_bytes();
        self.repair_checked(stripe, 0, len, DiskSet::one(disk), scratch, true)
    }

    /// Reads every strip of `stripe` and checks that parity (or the mirror copies) agree, without
    /// changing anything (the scrub primitive). Unreadable members are reported, not fatal; a
    /// member with latent sector errors in a chunk is left out only of the rows it does not
    /// read (md checks around a bad block the same way), so the rest of its strip is checked.
    pub fn verify_stripe(
        &mut self,
        stripe: u64,
        scratch: &mut [u8],
    ) -> Result<VerifyReport, ArrayError> {
        let geo = self.geo;
        if stripe >= geo.stripes() {
            return Err(ArrayError::OutOfRange);
        }
        if scratch.len() < self.scratch_min_bytes() {
            return Err(ArrayError::ScratchTooSmall);
        }
        let n = geo.disks();
        let bb = geo.block_bytes();
        let sb = geo.strip_bytes();
        let chunk = (scratch.len() / n / bb * bb).min(sb);
        let base = geo.stripe_lba(stripe);
        let mut rep = VerifyReport::default();
        let mut votes = Votes::NoneYet;
        // Members out for the whole stripe: not readable, or a read error other than medium.
        let mut gone = DiskSet::EMPTY;
        let mut off = 0;
        while off < sb {
            let clen = chunk.min(sb - off);
            let at = base + (off / bb) as u64;
            let mut medium = DiskSet::EMPTY;
            // Slot i holds member i's strip bytes.
            for (d, slot) in scratch.chunks_exact_mut(chunk).take(n).enumerate() {
                let slot = slot.get_mut(..clen).ok_or(ArrayError::ScratchTooSmall)?;
                if gone.contains(d) {
                    continue;
                }
                if !self.readable(d, stripe) {
                    gone = gone.with(d);
                    continue;
                }
                match self.dev_read(d, at, slot) {
                    IoOutcome::Ok => {}
                    IoOutcome::Failed(ErrorKind::Medium { .. }) => medium = medium.with(d),
                    IoOutcome::Failed(_) => gone = gone.with(d),
                }
            }
            rep.unreadable = DiskSet(rep.unreadable.0 | gone.0 | medium.0);
            if medium.is_empty() {
                let v = self.check_chunk(stripe, scratch, chunk, (0, clen), gone, &mut rep)?;
                rep.vote(&mut votes, v);
            } else {
                let rows = (at, clen, medium, gone);
                self.verify_rows(stripe, scratch, chunk, rows, &mut rep, &mut votes)?;
            }
            off += clen;
        }
        if let Votes::Named(Some(d)) = votes {
            rep.suspects = DiskSet::one(d);
        }
        Ok(rep)
    }

    /// The chunk of [`Self::verify_stripe`] at member block `at` (`clen` bytes), where the
    /// members of `medium` met latent sector errors: each row checked on its own, with those
    /// members read block by block and left out of the rows they do not read.
    fn verify_rows(
        &mut self,
        stripe: u64,
        scratch: &mut [u8],
        chunk: usize,
        (at, clen, medium, gone): (u64, usize, DiskSet, DiskSet),
        rep: &mut VerifyReport,
        votes: &mut Votes,
    ) -> Result<(), ArrayError> {
        let bb = self.geo.block_bytes();
        for row in (0..clen).step_by(bb) {
            let lba = at + (row / bb) as u64;
            let mut missing = gone;
            for d in medium.iter() {
                let start = d * chunk + row;
                let blk = scratch.get_mut(start..start + bb).ok_or(bug!(ArrayError))?;
                if !matches!(self.dev_read(d, lba, blk), IoOutcome::Ok) {
                    missing = missing.with(d);
                }
            }
            let v = self.check_chunk(stripe, scratch, chunk, (row, bb), missing, rep)?;
            rep.vote(votes, v);
        }
        Ok(())
    }

    /// Checks bytes `win.0..win.0 + win.1` of each member's slot of `scratch` (`chunk` bytes
    /// per member) without the members of `missing`.
    fn check_chunk(
        &self,
        stripe: u64,
        scratch: &mut [u8],
        chunk: usize,
        win: (usize, usize),
        missing: DiskSet,
        rep: &mut VerifyReport,
    ) -> Result<Chunk, ArrayError> {
        match self.geo.level() {
            Level::Raid0 => Ok(Chunk::Agree),
            Level::Raid5 | Level::Raid6 => {
                self.check_parity_chunk(stripe, scratch, chunk, win, missing, rep)
            }
            Level::Raid1 | Level::Raid10 => {
                Self::check_mirror_chunk(&self.geo, stripe, scratch, chunk, win, missing)
            }
        }
    }

    /// One chunk of [`Self::verify_stripe`] on a parity level: `scratch` holds each member's
    /// `clen` bytes at `d * chunk`. `Some(suspect)` when the chunk's columns disagree (with the
    /// member the syndrome names, if it can tell).
    fn check_parity_chunk(
        &self,
        stripe: u64,
        scratch: &mut [u8],
        chunk: usize,
        (at, clen): (usize, usize),
        missing: DiskSet,
        rep: &mut VerifyReport,
    ) -> Result<Chunk, ArrayError> {
        let geo = self.geo;
        let n = geo.disks();
        let scheme = self.scheme().ok_or(bug!(ArrayError))?;
        let verdict = if missing.is_empty() {
            let mut cols: Vec<&[u8], 34> = Vec::new();
            for ci in 0..geo.data_strips() + geo.parity_strips() {
                let col = geo.parity_column(ci).ok_or(bug!(ArrayError))?;
                let d = geo.disk_of(stripe, col).ok_or(bug!(ArrayError))?;
                let s = scratch
                    .get(d * chunk + at..d * chunk + at + clen)
                    .ok_or(bug!(ArrayError))?;
                cols.push(s).map_err(|_| bug!(ArrayError))?;
            }
            match parity::check(&cols, scheme).map_err(|_| ArrayError::Misaligned)? {
                parity::CheckResult::Consistent => Chunk::Agree,
                parity::CheckResult::Mismatch {
                    p_bad,
                    q_bad,
                    suspect,
                } => {
                    rep.p_bad |= p_bad;
                    rep.q_bad |= q_bad;
                    let disk = suspect
                        .and_then(|ci| geo.parity_column(ci))
                        .and_then(|col| geo.disk_of(stripe, col));
                    Chunk::Disagree(disk)
                }
            }
        } else if let Some(lone) = self.lone_missing_column(stripe, missing) {
            // RAID-6 with one column missing still has one redundancy to check:
            // rebuild the missing column (a data strip or P from P, Q from the
            // data), then compare the other parity. Which column is wrong cannot
            // be told; the pool's checksums decide.
            let mut by_disk: Vec<Option<&mut [u8]>, 34> = Vec::new();
            for slot in scratch.chunks_exact_mut(chunk).take(n) {
                by_disk
                    .push(slot.get_mut(at..at + clen))
                    .map_err(|_| bug!(ArrayError))?;
            }
            let mut cols: Vec<&mut [u8], 34> = Vec::new();
            for ci in 0..geo.data_strips() + geo.parity_strips() {
                let col = geo.parity_column(ci).ok_or(bug!(ArrayError))?;
                let d = geo.disk_of(stripe, col).ok_or(bug!(ArrayError))?;
                let c = by_disk
                    .get_mut(d)
                    .and_then(Option::take)
                    .ok_or(ArrayError::ScratchTooSmall)?;
                cols.push(c).map_err(|_| bug!(ArrayError))?;
            }
            parity::reconstruct(&mut cols, scheme, &[lone]).map_err(|_| ArrayError::Misaligned)?;
            match check_columns(&cols, scheme)? {
                parity::CheckResult::Consistent => Chunk::Agree,
                parity::CheckResult::Mismatch { p_bad, q_bad, .. } => {
                    rep.p_bad |= p_bad;
                    rep.q_bad |= q_bad;
                    Chunk::Disagree(None)
                }
            }
        } else {
            // With more columns missing, parity can only be checked by the pool's
            // checksums; nothing more to compare here.
            Chunk::Agree
        };
        Ok(verdict)
    }

    /// One chunk of [`Self::verify_stripe`] on a mirror level: `Some(suspect)` when copies of a
    /// strip disagree (with the lone dissenter among three or more copies, if there is one).
    fn check_mirror_chunk(
        geo: &Geometry,
        stripe: u64,
        scratch: &[u8],
        chunk: usize,
        (at, clen): (usize, usize),
        unreadable: DiskSet,
    ) -> Result<Chunk, ArrayError> {
        let mut verdict = Chunk::Agree;
        for strip in 0..geo.data_strips() {
            let copies: Vec<usize, 32> = (0..geo.copies())
                .filter_map(|c| {
                    geo.disk_of(
                        stripe,
                        Column::Mirror {
                            data: strip,
                            copy: c,
                        },
                    )
                })
                .filter(|d| !unreadable.contains(*d))
                .collect();
            let Some(&first) = copies.first() else {
                continue;
            };
            let a = scratch
                .get(first * chunk + at..first * chunk + at + clen)
                .ok_or(bug!(ArrayError))?;
            let differs = copies.iter().skip(1).any(|&d| {
                scratch
                    .get(d * chunk + at..d * chunk + at + clen)
                    .is_none_or(|b| a != b)
            });
            if differs {
                // With three or more copies, a lone dissenter is the suspect.
                let slot = |d: usize| scratch.get(d * chunk + at..d * chunk + at + clen);
                let odd = copies.iter().copied().find(|&d| {
                    let mut others = copies.iter().copied().filter(|&e| e != d);
                    let first_other = others.next().and_then(slot);
                    copies.len() >= 3
                        && slot(d) != first_other
                        && others.all(|e| slot(e) == first_other)
                });
                verdict = Chunk::Disagree(odd);
            }
        }
        Ok(verdict)
    }

    /// On RAID-6, the parity column index of the only member of `unreadable` (which must hold
    /// exactly one member).
    fn lone_missing_column(&self, stripe: u64, unreadable: DiskSet) -> Option<usize> {
        let geo = self.geo;
        if geo.level() != Level::Raid6 || unreadable.len() != 1 {
            return None;
        }
        let d = unreadable.iter().next()?;
        geo.column_of(stripe, d).and_then(|c| geo.parity_index(c))
    }

    /// Reads `buf.len()` bytes from member `disk` at member block `lba`, outside the stripe
    /// layout (labels, intent log). Retries and error policy apply.
    pub fn disk_read(&mut self, disk: usize, lba: u64, buf: &mut [u8]) -> Result<(), ArrayError> {
        let present = self.members.get(disk).is_some_and(|m| m.disk.is_some());
        if !present {
            return Err(ArrayError::Disk {
                disk: disk as u8,
                kind: ErrorKind::DeviceFailed,
            });
        }
        match self.dev_read(disk, lba, buf) {
            IoOutcome::Ok => Ok(()),
            IoOutcome::Failed(kind) => Err(ArrayError::Disk {
                disk: disk as u8,
                kind,
            }),
        }
    }

    /// Writes `buf` to member `disk` at member block `lba`, outside the stripe layout (labels,
    /// intent log). Refused for failed members.
    pub fn disk_write(&mut self, disk: usize, lba: u64, buf: &[u8]) -> Result<(), ArrayError> {
        if !self.writable(disk) {
            return Err(ArrayError::Disk {
                disk: disk as u8,
                kind: ErrorKind::DeviceFailed,
            });
        }
        let outcome = match self.dev_write(disk, lba, buf) {
            // Raw I/O (labels) says plainly that a block did not take the write.
            IoOutcome::Ok => match self.hole_in(disk, lba, buf.len()) {
                Some(at) => IoOutcome::Failed(ErrorKind::Medium { lba: at }),
                None => IoOutcome::Ok,
            },
            failed @ IoOutcome::Failed(_) => failed,
        };
        match outcome {
            IoOutcome::Ok => {
                self.stats.raw_bytes_written += buf.len() as u64;
                Ok(())
            }
            IoOutcome::Failed(kind) => Err(ArrayError::Disk {
                disk: disk as u8,
                kind,
            }),
        }
    }

    /// The host condition member I/O met since the last call, if any (the pool suspends).
    pub fn take_host_condition(&mut self) -> Option<ErrorKind> {
        self.host.take()
    }

    /// Flushes every writable member's write cache. A member whose flush fails is failed.
    /// Returns the members that are durable now.
    pub fn flush(&mut self) -> DiskSet {
        self.flush_members(DiskSet(u32::MAX))
    }

    /// [`Array::flush`] of the writable members in `set` only.
    pub fn flush_members(&mut self, set: DiskSet) -> DiskSet {
        let mut ok = DiskSet::EMPTY;
        for d in 0..self.members.len() {
            if !self.writable(d) || !set.contains(d) {
                continue;
            }
            let retries = self.cfg.retries;
            let res = match self.members.get_mut(d).and_then(|m| m.disk.as_mut()) {
                Some(dev) => with_retries(retries, || dev.flush()).0,
                None => Err(ErrorKind::DeviceFailed),
            };
            match res {
                Ok(()) => ok = ok.with(d),
                Err(kind) if kind.is_host_condition() => self.note_error(d, kind, true),
                Err(kind) => {
                    // A disk that cannot make its cache durable cannot be trusted with data.
                    self.note_error(d, kind, true);
                    let _ = self.fail(d, kind);
                }
            }
        }
        ok
    }
}

/// What one chunk of a stripe check found.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Every readable column agreed (or nothing could be compared).
    Agree,
    /// Columns disagree; the member the check names, if it can tell.
    Disagree(Option<usize>),
}

/// The member the chunks of a stripe that disagreed named, over [`Array::verify_stripe`].
#[derive(Debug, Clone, Copy)]
enum Votes {
    /// No chunk disagreed yet.
    NoneYet,
    /// Every chunk that disagreed named this member (`None`: not the same one, or none).
    Named(Option<usize>),
}

/// Runs `op`, and again while it fails with a retryable error ([`ErrorKind::is_retryable`]), at
/// most `retries` more times. Returns the last result, its error as a kind, and how many times
/// `op` was retried. The one retry loop of member I/O (the array's reads, writes and flushes,
/// and superblock reads at import).
pub(crate) fn with_retries<E: raidcore_hal::Error>(
    retries: u8,
    mut op: impl FnMut() -> Result<(), E>,
) -> (Result<(), ErrorKind>, u8) {
    let mut retried = 0u8;
    loop {
        match op() {
            Ok(()) => return (Ok(()), retried),
            Err(e) if e.kind().is_retryable() && retried < retries => retried += 1,
            Err(e) => return (Err(e.kind()), retried),
        }
    }
}

/// Checks freshly reconstructed parity columns `cols` (data strips, then P and Q) against each
/// other: the redundancy left after a reconstruction with fewer erasures than parity strips.
fn check_columns(cols: &[&mut [u8]], scheme: Scheme) -> Result<parity::CheckResult, ArrayError> {
    let mut ro: Vec<&[u8], 34> = Vec::new();
    for c in cols {
        ro.push(&**c).map_err(|_| bug!(ArrayError))?;
    }
    parity::check(&ro, scheme).map_err(|_| ArrayError::Misaligned)
}
