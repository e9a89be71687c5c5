//! Import, in four phases:
//! - **discover**: read every given disk's superblock;
//! - **assemble**: pick the pool most disks carry and its newest configuration, put each member
//!   into its slot by GUID, take spares, refuse foreign, stale, unknown-version and too-small
//!   disks, and refuse the pool when more members are missing than the level tolerates;
//! - **recover**: load the newest root whose tables read back intact, roll the log forward (two
//!   passes, see [`crate::log::replay`]) with the intent log's records patching the stripe open
//!   at the crash, and resync the stripes written since the root (the write hole);
//! - **settle**: record membership changes (missing members), then checkpoint.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::checkpoint::{MapWalk, RootSlot};
use super::membership::{Config, Spare};
use super::rebuild::Since;
use super::{ImportOptions, ImportReport, OpenError, Pool, read_superblock};
use crate::error::IoError;
use crate::format::{
    self, ITEM_ALIGN, ItemHeader, ItemKind, LogCursor, MapEntry, Role, Root, SegState, Superblock,
};
use crate::log::Pass;
use crate::log::replay::{LogEnd, LogScan, Replay};
use crate::log::slog::{LogDevice, blocks_for_ring};
use crate::raid::{Array, DiskState};

/// A member whose checkpoint roots are behind the pool's: `(slot, newest root generation it
/// holds, what it holds since)`.
type Behind = (u8, u64, Option<Since>);

/// A disk given to import and what its superblock said.
type Found<D> = (D, Option<Superblock>);

/// The disks placed by [`assemble`].
pub(super) struct Assembled<D, const N: usize> {
    newest: Superblock,
    slots: Vec<Option<D>, 32>,
    spares: Vec<Spare<D>, N>,
    /// Slots a forced import took failed members back into.
    forced: Vec<u8, 32>,
    /// The dedicated intent-log device the configuration names, if given.
    slog: Option<D>,
}

/// A failed member's disk a forced import may take back: `(disk, slot, label generation,
/// index given)`.
type Candidate<D> = (D, usize, u64, u8);

/// The pool's log device as the configuration `newest` names it, with its disk `given`:
/// one recorded failed stays failed; a missing one refuses the import unless `missing_ok`
/// (a forced import, or a look), and is then failed (recorded by the configuration a forced
/// import writes).
fn log_device<D: BlockDevice>(
    newest: &Superblock,
    given: Option<D>,
    missing_ok: bool,
    retries: u8,
) -> Result<Option<LogDevice<D>>, OpenError> {
    let Some(rec) = newest.log_device else {
        return Ok(None);
    };
    let online = rec.state == DiskState::Online;
    match given {
        Some(disk) if online => {
            return Ok(Some(LogDevice::new(
                disk,
                rec.guid,
                retries,
                rec.ring_slots,
            )));
        }
        None if online && !missing_ok => {
            return Err(OpenError::MissingLogDevice { guid: rec.guid });
        }
        _ => {}
    }
    Ok(Some(LogDevice {
        disk: None,
        guid: rec.guid,
        failed: true,
        failed_by: online.then_some(raidcore_hal::ErrorKind::DeviceFailed),
        retries,
        ring_slots: rec.ring_slots,
    }))
}

/// Reads every disk's superblock; disks without one are refused (and reported).
fn discover<D: BlockDevice, const N: usize>(
    disks: impl IntoIterator<Item = D>,
    report: &mut ImportReport,
) -> Result<Vec<Found<D>, N>, OpenError> {
    let mut found: Vec<Found<D>, N> = Vec::new();
    for mut d in disks {
        let idx = found.len() as u8;
        let sb = match read_superblock(&mut d) {
            Ok(sb) => Some(sb),
            Err(OpenError::UnknownVersion { version, .. }) => {
                let _ = report
                    .refused
                    .push((idx, OpenError::UnknownVersion { disk: idx, version }));
                None
            }
            Err(_) => {
                let _ = report
                    .refused
                    .push((idx, OpenError::NotRaidcore { disk: idx }));
                None
            }
        };
        found.push((d, sb)).map_err(|_| OpenError::Disks)?;
    }
    Ok(found)
}

/// The pool the most disks carry, and its newest configuration.
fn newest_config<D>(found: &[Found<D>]) -> Result<Superblock, OpenError> {
    let mut best: Option<([u8; 16], usize)> = None;
    for sb in found.iter().filter_map(|(_, sb)| sb.as_ref()) {
        let n = found
            .iter()
            .filter(|(_, o)| o.as_ref().is_some_and(|o| o.pool_uuid == sb.pool_uuid))
            .count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((sb.pool_uuid, n));
        }
    }
    let uuid = best.ok_or(OpenError::NoPool)?.0;
    // Of labels of one generation, one its disk wrote as a member in sync or a spare wins over
    // the label a departing member got (naming itself failed): a crash between the two left
    // both at the same generation.
    found
        .iter()
        .filter_map(|(_, sb)| sb.as_ref())
        .filter(|sb| sb.pool_uuid == uuid)
        .max_by_key(|sb| (sb.generation, !names_itself_failed(sb)))
        .cloned()
        .ok_or(OpenError::NoPool)
}

/// Whether a label names its own disk a failed member (the label a departing member gets).
fn names_itself_failed(sb: &Superblock) -> bool {
    sb.members
        .iter()
        .any(|m| m.guid == sb.disk_guid && m.state == DiskState::Failed)
}

/// Why disk `i` of `found` is refused for another disk with its identity (a copy of an image,
/// say): stale beside a newer label, a duplicate beside one as new (neither can be told the
/// real one, and writing to either would leave the other passing for it).
fn copy_of<D>(found: &[Found<D>], i: usize) -> Option<OpenError> {
    let sb = found.get(i)?.1.as_ref()?;
    let twin = |j: usize, o: &Superblock| {
        j != i && o.pool_uuid == sb.pool_uuid && o.disk_guid == sb.disk_guid
    };
    let newest_twin = found
        .iter()
        .enumerate()
        .filter_map(|(j, (_, o))| o.as_ref().filter(|o| twin(j, o)))
        .map(|o| o.generation)
        .max()?;
    let disk = i as u8;
    match newest_twin.cmp(&sb.generation) {
        core::cmp::Ordering::Greater => Some(OpenError::StaleDisk { disk }),
        core::cmp::Ordering::Equal => Some(OpenError::DuplicateDisk { disk }),
        core::cmp::Ordering::Less => None,
    }
}

/// The slot of the failed member `guid` names in `newest`, if that slot is still its own.
fn failed_slot(newest: &Superblock, guid: u64) -> Option<usize> {
    newest
        .members
        .iter()
        .position(|m| m.guid == guid && m.state == DiskState::Failed)
}

/// Members out of sync once `slots` are filled as they are: empty slots, and slots the
/// newest configuration names failed (unless `forced`).
fn out_of_sync<D>(newest: &Superblock, slots: &[Option<D>], forced: &[u8]) -> usize {
    slots
        .iter()
        .zip(newest.members.iter())
        .enumerate()
        .filter(|(i, (d, m))| {
            d.is_none() || (m.state == DiskState::Failed && !forced.contains(&(*i as u8)))
        })
        .count()
}

/// Whether some member the newest configuration records in sync is present and was not
/// taken back by a forced import.
fn any_in_sync<D>(newest: &Superblock, slots: &[Option<D>], forced: &[u8]) -> bool {
    newest
        .members
        .iter()
        .zip(slots)
        .enumerate()
        .any(|(i, (m, d))| {
            d.is_some() && m.state == DiskState::Online && !forced.contains(&(i as u8))
        })
}

/// A forced import's step (see [`ImportOptions::force`]): while more members are out of sync
/// than the level tolerates, the candidate with the newest label goes back into its slot.
/// Candidates left over are refused as stale.
fn take_back<D, const N: usize>(
    a: &mut Assembled<D, N>,
    mut candidates: Vec<Candidate<D>, N>,
    report: &mut ImportReport,
) {
    let tolerance = a.newest.geometry.tolerance();
    while out_of_sync(&a.newest, &a.slots, &a.forced) > tolerance {
        let newest = (0..candidates.len()).max_by_key(|&i| candidates.get(i).map(|c| c.2));
        let Some(i) = newest else { break };
        let (d, slot, _, _) = candidates.swap_remove(i);
        if let Some(s @ None) = a.slots.get_mut(slot) {
            *s = Some(d);
            let _ = a.forced.push(slot as u8);
        }
    }
    for (_, _, _, idx) in candidates {
        let _ = report
            .refused
            .push((idx, OpenError::StaleDisk { disk: idx }));
    }
}

/// Places each disk by the newest configuration (see the module docs); with `force`, takes
/// failed members back as [`ImportOptions::force`] says.
fn assemble<D: BlockDevice, const N: usize>(
    found: Vec<Found<D>, N>,
    force: bool,
    report: &mut ImportReport,
) -> Result<Assembled<D, N>, OpenError> {
    let newest = newest_config(&found)?;
    let geo = newest.geometry;
    let mut slots: Vec<Option<D>, 32> = (0..geo.disks()).map(|_| None).collect();
    let mut spares: Vec<Spare<D>, N> = Vec::new();
    // Blocks every member and spare must have (the array checks it too, for the whole pool).
    let need = geo.stripe_lba(geo.stripes());
    let copies: Vec<Option<OpenError>, N> = (0..found.len()).map(|i| copy_of(&found, i)).collect();
    let mut candidates: Vec<Candidate<D>, N> = Vec::new();
    let mut slog = None;
    for (i, (d, sb)) in found.into_iter().enumerate() {
        let idx = i as u8;
        let Some(sb) = sb else { continue };
        let refuse = if sb.pool_uuid != newest.pool_uuid {
            Some(OpenError::ForeignDisk { disk: idx })
        } else if let Some(Some(e)) = copies.get(i) {
            Some(*e)
        } else if sb.role == Role::Log {
            place_log_device(&newest, &mut slog, d, sb.disk_guid, idx).err()
        } else if d.block_size().bytes() != geo.block_bytes() || d.block_count() < need {
            Some(OpenError::WrongSize { disk: idx })
        } else {
            match (force, failed_slot(&newest, sb.disk_guid)) {
                (true, Some(slot)) => {
                    let _ = candidates.push((d, slot, sb.generation, idx));
                    None
                }
                _ => place(&newest, &mut slots, &mut spares, d, sb.disk_guid)
                    .err()
                    .map(|()| OpenError::StaleDisk { disk: idx }),
            }
        };
        if let Some(e) = refuse {
            let _ = report.refused.push((idx, e));
        }
    }
    let mut a = Assembled {
        newest,
        slots,
        spares,
        forced: Vec::new(),
        slog,
    };
    take_back(&mut a, candidates, report);
    Ok(a)
}

/// Takes disk `d` (GUID `guid`, labelled [`Role::Log`]) as the pool's log device. Refused:
/// a device the configuration does not name, or names failed (stale: what it holds is logged
/// on the members since it failed), and one too small for its recorded ring (truncated).
fn place_log_device<D: BlockDevice>(
    newest: &Superblock,
    slog: &mut Option<D>,
    d: D,
    guid: u64,
    idx: u8,
) -> Result<(), OpenError> {
    let Some(rec) = newest
        .log_device
        .filter(|r| r.guid == guid && r.state == DiskState::Online)
    else {
        return Err(OpenError::StaleDisk { disk: idx });
    };
    if slog.is_some() {
        return Err(OpenError::DuplicateDisk { disk: idx });
    }
    if d.block_count() < blocks_for_ring(rec.ring_slots, d.block_size().bytes()) {
        return Err(OpenError::WrongSize { disk: idx });
    }
    *slog = Some(d);
    Ok(())
}

/// Puts disk `d` (GUID `guid`) into its member slot or among the spares; `Err` for a disk the
/// configuration no longer counts (a stale member).
fn place<D, const N: usize>(
    newest: &Superblock,
    slots: &mut [Option<D>],
    spares: &mut Vec<Spare<D>, N>,
    d: D,
    guid: u64,
) -> Result<(), ()> {
    let member = newest.members.iter().position(|m| m.guid == guid);
    match member {
        Some(slot)
            if newest
                .members
                .get(slot)
                .is_some_and(|m| m.state != DiskState::Failed) =>
        {
            match slots.get_mut(slot) {
                Some(s @ None) => {
                    *s = Some(d);
                    Ok(())
                }
                _ => Err(()),
            }
        }
        _ if newest.spares.contains(&guid) => {
            let _ = spares.push(Spare { disk: d, guid });
            Ok(())
        }
        _ => Err(()),
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Imports a pool from its disks alone, in any order: finds members by pool UUID and disk
    /// GUID, refuses foreign, stale and unknown-version disks, imports degraded when up to the
    /// level's tolerance of members is missing, loads the newest intact checkpoint, rolls the
    /// log forward and replays the intent log, then writes a checkpoint.
    pub fn import(
        disks: impl IntoIterator<Item = D>,
        opts: ImportOptions,
        mem: M,
    ) -> Result<(Self, ImportReport), OpenError> {
        let mut report = ImportReport::default();
        let mut pool = Self::open_members(disks, &opts, &mut report, mem, false)?;
        // A forced import's members taken back may have missed map pages the newest root
        // names: it walks the map, and a rewind prefers a root whose map reads whole.
        let walk = match (report.forced.is_empty(), opts.rewind) {
            (true, _) => MapWalk::Skip,
            (false, false) => MapWalk::Count,
            (false, true) => MapWalk::PreferWhole,
        };
        let (root, skipped, lost) = pool.find_root(walk)?;
        report.map_pages_lost = lost;
        pool.recover(&root, skipped, opts.rewind, &mut report)
            .map_err(OpenError::Io)?;
        pool.settle_import(report.missing > 0 || !report.behind.is_empty())
            .map_err(OpenError::Io)?;
        if !report.forced.is_empty() {
            // What the members taken back missed: the scrub repairs it where the rest can.
            pool.start_scrub();
        }
        Ok((pool, report))
    }

    /// Finds and assembles the members among `disks` (refusing the pool when a disk is
    /// refused, unless `opts.skip_refused`): the pool on them, no checkpoint read yet.
    /// `look`: only to read its last checkpoint, which needs no log device.
    pub(super) fn open_members(
        disks: impl IntoIterator<Item = D>,
        opts: &ImportOptions,
        report: &mut ImportReport,
        mem: M,
        look: bool,
    ) -> Result<Self, OpenError> {
        let found = discover::<D, N>(disks, report)?;
        let a = assemble(found, opts.force, report)?;
        if !opts.skip_refused
            && let Some((_, e)) = report.refused.first()
        {
            return Err(*e);
        }
        Self::from_members(a, opts, report, mem, look)
    }

    /// The pool of the assembled members, nothing read yet.
    fn from_members(
        a: Assembled<D, N>,
        opts: &ImportOptions,
        report: &mut ImportReport,
        mut mem: M,
        look: bool,
    ) -> Result<Self, OpenError> {
        let newest = a.newest;
        let geo = newest.geometry;
        let cfg = opts.config.with_superblock(&newest);
        cfg.check()?;
        let missing = out_of_sync(&newest, &a.slots, &a.forced);
        report.missing = missing as u8;
        report.forced = a.forced.clone();
        if missing > geo.tolerance() {
            return Err(OpenError::TooManyMissing {
                missing: missing as u8,
            });
        }
        if !a.forced.is_empty() && !any_in_sync(&newest, &a.slots, &a.forced) {
            if !opts.rewind {
                return Err(OpenError::RewindNeeded);
            }
            report.rewound = true;
        }
        let needed = Self::layout(&cfg, geo.disks()).total();
        if mem.as_mut().len() < needed {
            return Err(OpenError::Memory { needed });
        }
        let mut array = Array::new(geo, a.slots, cfg.array).map_err(|_| OpenError::Disks)?;
        for (i, m) in newest.members.iter().enumerate() {
            if m.state == DiskState::Rebuilding
                && array.member(i).is_some_and(crate::raid::Member::is_present)
            {
                let _ = array.set_state(i, DiskState::Rebuilding);
            }
        }
        let conf = Config {
            pool_uuid: newest.pool_uuid,
            pool_tag: format::pool_tag(&newest.pool_uuid),
            generation: newest.generation,
            geometry: geo,
            layout: newest.layout,
            member_guids: newest.members.iter().map(|m| m.guid).collect(),
            next_guid: newest.members.len() as u64
                + newest.spares.len() as u64
                + newest.generation
                + 1,
        };
        let mut pool = Self::new_pool(array, a.spares, cfg, conf, &[], mem);
        let missing_ok = opts.force || look;
        let given = a.slog.is_some();
        pool.members.slog = log_device(&newest, a.slog, missing_ok, cfg.array.retries)?;
        report.log_device_missing = !given
            && newest
                .log_device
                .is_some_and(|r| r.state == DiskState::Online);
        // Recorded states are the newest configuration's (missing members show as changes).
        let recorded: Vec<DiskState, 32> = newest.members.iter().map(|m| m.state).collect();
        pool.members.set_recorded(&recorded);
        Ok(pool)
    }

    /// Recovery from `root` (see the module docs): intent-log scan, two roll-forward passes,
    /// the log reopened at its end, the write hole closed. `rewind`: an unreadable item before
    /// the durable position ends the log ([`ImportOptions::rewind`]).
    fn recover(
        &mut self,
        root: &Root,
        skipped: Option<LogCursor>,
        rewind: bool,
        report: &mut ImportReport,
    ) -> Result<(), IoError> {
        self.ckpt.root_gen = root.root_gen;
        self.counters = root.counters;
        self.restore_rebuild(root);
        self.release_pending()?;
        self.log.set_window(root.reserved.clone());
        let mut replay = self
            .io_in(Pass::FindEnd { healed: false })?
            .zil_scan(root.log.next_stripe_seq);
        replay.durable_root = skipped;
        replay.cut_at_damage = rewind;
        // Only pass 1 reads through the records. It writes every stripe it patched back whole
        // (the one holding the end stays in memory): from then on reads see the members as
        // they are, so the resync's checks judge what the members hold (a patched read hid a
        // rewrite that a misdirected write took, and the resync rewrote parity over it).
        let end = {
            let mut io = self.io_in(Pass::FindEnd { healed: false })?;
            io.patches = &replay.zil_refs;
            LogScan::new(&mut io, root.log, &root.reserved, true, None).end(&mut io, &replay)?
        };
        // Items after the root, or a mark at its position: the root reached every member.
        let complete = end.items > 0 || replay.durable_mark.is_some();
        self.note_behind(root, complete, report);
        self.reopen_log(root, &end)?;
        self.replay_log(root, &replay, &end)?;
        let resynced = self.resync_log_tail(root, &end)?;
        report.root_gen = root.root_gen;
        report.items_replayed = end.items;
        report.items_lost = end.lost;
        report.log_cut_at = end.cut;
        report.resynced_stripes = resynced;
        report.zil_records = replay.zil_refs.len() as u32;
        Ok(())
    }

    /// Finds the members behind `root` and sets them rebuilding ([`ImportReport::behind`]).
    /// `complete`: `root` is known to have reached every member (items were logged after it,
    /// or a flush mark names its position); otherwise a member one root behind is taken for a
    /// checkpoint cut short.
    pub(super) fn note_behind(&mut self, root: &Root, complete: bool, report: &mut ImportReport) {
        let behind = self.behind_members(root, complete, &report.forced);
        self.rejoin_behind(&behind, report);
    }

    /// Members the labels call in sync whose root rings are behind `root`
    /// ([`ImportReport::behind`]), each with the newest root it holds, most behind first.
    /// `complete`: as for [`Self::note_behind`]. Forced slots are left to the scrub.
    /// Empty when the membership changed after `root` was written (a disk that joined since,
    /// a spare rebuilt, holds no root yet, or only one from an earlier time in this pool);
    /// otherwise only the roots written with the membership as it is count.
    fn behind_members(&mut self, root: &Root, complete: bool, forced: &[u8]) -> Vec<Behind, 32> {
        let mut behind: Vec<Behind, 32> = Vec::new();
        if root.config_gen != self.members.conf.generation {
            return behind;
        }
        let written = self.roots_of_this_membership(root);
        for d in 0..self.array.geometry().disks() {
            if !self.in_sync(d) || forced.contains(&(d as u8)) {
                continue;
            }
            if let Some((held, since)) = self.ring_behind(d, root, written, complete) {
                let _ = behind.push((d as u8, held, since));
            }
        }
        behind.sort_unstable_by_key(|b| b.1);
        behind
    }

    /// How many roots up to `root` (at most [`format::ROOT_SLOTS`]) were written with the
    /// membership as it is now, by the rings of the members: every member got those.
    fn roots_of_this_membership(&mut self, root: &Root) -> u64 {
        let generation = self.members.conf.generation;
        let mut n = 0;
        while n < u64::from(format::ROOT_SLOTS) && n < root.root_gen {
            let g = root.root_gen - n;
            let mut held = None;
            for d in 0..self.array.geometry().disks() {
                if held.is_none()
                    && self.in_sync(d)
                    && let Ok(RootSlot::Root {
                        root_gen,
                        config_gen,
                    }) = self.root_slot_on(d, g)
                    && root_gen == g
                {
                    held = Some(config_gen);
                }
            }
            if held != Some(generation) {
                break;
            }
            n += 1;
        }
        n
    }

    /// Whether member `d` is present and online.
    fn in_sync(&self, d: usize) -> bool {
        self.array
            .member(d)
            .is_some_and(|m| m.is_present() && m.state() == DiskState::Online)
    }

    /// When member `d` missed checkpoints up to `root` (of the last `written`, which every
    /// member got): the newest root generation it holds (0: none) and what it holds since
    /// ([`Since`]; none without a root, when its own label names it rebuilding, or when
    /// repairs were made after its root). A slot that cannot be read is a bad sector, and one
    /// that holds neither a root nor zeros is rot: neither shows a missed checkpoint. One root
    /// behind is a checkpoint the crash cut short (the roots go to every member before one
    /// flush) unless `root` is `complete`.
    fn ring_behind(
        &mut self,
        d: usize,
        root: &Root,
        written: u64,
        complete: bool,
    ) -> Option<(u64, Option<Since>)> {
        let newest = self.newest_root_on(d);
        let have = newest.as_ref().map_or(0, |r| r.root_gen);
        if have >= root.root_gen {
            return None;
        }
        let lacking = (root.root_gen - have).min(written);
        // Each slot of a root it lacks must show a checkpoint missed (an older root, or never
        // written), not be unreadable or rotten; only the newest may be torn.
        let mut newest_older = false;
        for k in 0..lacking {
            let g = root.root_gen - k;
            let older = match self.root_slot_on(d, g).ok()? {
                RootSlot::Root { root_gen, .. } => root_gen < g,
                RootSlot::Blank => true,
                RootSlot::Other => false,
            };
            match (k, older) {
                (0, o) => newest_older = o,
                (_, false) => return None,
                _ => {}
            }
        }
        if lacking <= 1 && !(complete && newest_older) {
            return None;
        }
        // A copy taken while it was rebuilding holds only what that rebuild had written.
        let was_in_sync = self
            .array
            .disk_mut(d)
            .and_then(|disk| read_superblock(disk).ok())
            .is_some_and(|sb| sb.members.get(d).map(|m| m.state) == Some(DiskState::Online));
        // Repairs (heals, scrub and resync rewrites) write outside the log's window, where
        // `Since` does not look: an older copy of a member that was present for them lacks
        // them, so only a copy no repair came after is resynced for the window alone.
        let unrepaired = newest
            .as_ref()
            .is_some_and(|r| r.counters.repair_bytes == root.counters.repair_bytes);
        let since = newest.as_ref().map(Since::of);
        Some((have, since.filter(|_| was_in_sync && unrepaired)))
    }

    /// Sets the members `behind` rebuilding, as many as the level's tolerance leaves room for
    /// (the rest stay as they are, their checksums telling what they missed, rather than the
    /// pool being refused), and resyncs the first for what it missed since its newest root
    /// (a rebuild already running goes first, and the others are then rebuilt whole).
    fn rejoin_behind(&mut self, behind: &[Behind], report: &mut ImportReport) {
        let geo = *self.array.geometry();
        let out = (0..geo.disks()).filter(|&d| !self.in_sync(d)).count();
        let room = geo.tolerance().saturating_sub(out);
        for &(slot, _, since) in behind.iter().take(room) {
            if self.array.rejoin(usize::from(slot)).is_err() {
                continue;
            }
            let _ = report.behind.push(slot);
            if self.rebuild.is_none() {
                self.start_rebuild_at(slot, 0);
                if let Some(r) = self.rebuild.as_mut() {
                    r.since = since;
                }
            }
        }
    }

    /// Reopens the log at the end pass 1 found, so pass 2 can append (evicted map pages)
    /// after it.
    fn reopen_log(&mut self, root: &Root, end: &LogEnd) -> Result<(), IoError> {
        // Sequence numbers jump past every number an item or stripe (intent-log records) written
        // before the crash could carry beyond the end just found: items the crash cut off still
        // lie past that end, and once the log has come round to their address again one would
        // pass every check of the next roll-forward (pool, address, CRC, the expected sequence
        // number) and bring back a write this recovery dropped. Only the root's reserved
        // segments can hold them, at most one item per ITEM_ALIGN bytes.
        let gap = root.reserved.len() as u64 * self.log.segment_bytes() / ITEM_ALIGN as u64 + 1;
        let fill = (end.addr - end.stripe_addr) as usize;
        let next_seq = end.next_item_seq.saturating_add(gap);
        self.log.reopen(
            &root.reserved,
            end.res_idx,
            end.stripe_addr,
            fill,
            next_seq,
            end.stripe_seq.saturating_add(gap),
        );
        let sdb = self.log.sdb();
        let mut io = self.io()?;
        // The stripe buffer holds the checked prefix of the stripe at the end (pass 1); the
        // rest must be zeros (padding relies on it).
        io.stripe
            .get_mut(fill..)
            .ok_or(crate::error::bug!(IoError))?
            .fill(0);
        if fill >= sdb {
            return Err(crate::error::bug!(IoError));
        }
        // Segments the log went through are in use. One free in the root's table began its
        // use after the root: with its first item (pass 2 records it), or the next one when
        // it holds none yet (the log ended at its start). Left at zero, a member resynced from
        // an older root would be taken to hold it.
        for i in 0..=end.res_idx {
            if let Some(&s) = root.reserved.get(i) {
                let first = match (io.segs().get(s).state, i) {
                    (SegState::Free, i) if i > 0 && i == end.res_idx => next_seq,
                    (SegState::Free, _) => root.log.next_item_seq,
                    _ => 0,
                };
                io.log.note_entered(s, first);
                io.apply_mark_used();
            }
        }
        Ok(())
    }

    /// Pass 2: every item up to `end` into the map.
    fn replay_log(&mut self, root: &Root, replay: &Replay, end: &LogEnd) -> Result<(), IoError> {
        let mut scan = {
            let mut io = self.io()?;
            LogScan::new(
                &mut io,
                root.log,
                &root.reserved,
                false,
                Some((end.res_idx, end.addr)),
            )
        };
        loop {
            let next = scan.next(&mut self.io()?, replay)?;
            let Some(it) = next else { break };
            if it.header.kind != ItemKind::Pad {
                self.replay_item(&it.header, &it.block_crcs)?;
            }
        }
        let replayed = scan.end(&mut self.io()?, replay)?;
        if (replayed.res_idx, replayed.addr) != (end.res_idx, end.addr) {
            return Err(IoError::Corrupt(format::FormatError::Crc));
        }
        Ok(())
    }

    /// Applies one logged item to the map during roll-forward. `block_crcs`: an uncompressed
    /// extent's block CRCs, when its payload checked (its entries then hold them).
    fn replay_item(&mut self, h: &ItemHeader, block_crcs: &[u32]) -> Result<(), IoError> {
        let fits = self
            .luns
            .slot(h.lun)
            .is_some_and(|l| h.lba + u64::from(h.blocks) <= l.blocks);
        match h.kind {
            ItemKind::Extent if fits => {
                let mut vol = self.vol()?;
                let seg = vol.io.log.seg_of(h.addr);
                vol.io.segs().account(seg, h.item_bytes() as u32, true);
                let per_block = block_crcs.len() == h.blocks as usize;
                for i in 0..h.blocks {
                    let block_crc = block_crcs.get(i as usize).filter(|_| per_block);
                    let e = MapEntry {
                        unit: h.addr / ITEM_ALIGN as u64,
                        stored_len: h.stored_len,
                        index: i as u8,
                        blocks: h.blocks as u8,
                        compressed: h.flags & format::FLAG_COMPRESSED != 0,
                        crc: block_crc.copied().unwrap_or(h.payload_crc),
                        block_crc: block_crc.is_some(),
                        ditto: None,
                        valid: true,
                    };
                    vol.map_set(h.lun, h.lba + u64::from(i), e)?;
                }
                self.luns.forget_bad(h.lun, h.lba, u64::from(h.blocks));
            }
            ItemKind::Trim if fits => {
                self.vol()?.unmap_range(h.lun, h.lba, u64::from(h.blocks))?;
                self.luns.forget_bad(h.lun, h.lba, u64::from(h.blocks));
            }
            _ => {}
        }
        Ok(())
    }

    /// Closes the RAID write hole after a crash: the stripes the log wrote since the checkpoint
    /// (bounded by the root's reserved segments, which roll-forward has just read) may have
    /// reached some members and not others, leaving parity that disagrees with data the
    /// roll-forward accepted. A later member failure would reconstruct garbage from it. Each
    /// such stripe is checked and repaired like a scrub does (its items' checksums decide;
    /// parity is rewritten only when they all check). The open stripe at the end is rewritten
    /// whole when it fills, so it is not checked. Returns the stripes repaired.
    fn resync_log_tail(&mut self, root: &Root, end: &LogEnd) -> Result<u64, IoError> {
        let sdb = self.log.sdb() as u64;
        let mut resynced = 0;
        for i in 0..=end.res_idx {
            let Some(&seg) = root.reserved.get(i) else {
                break;
            };
            let seg_start = self.log.seg_start(seg);
            let seg_end = seg_start + self.log.segment_bytes();
            let from = if i == 0 {
                (root.log.head / sdb * sdb).clamp(seg_start, seg_end)
            } else {
                seg_start
            };
            let to = if i == end.res_idx {
                end.stripe_addr.clamp(seg_start, seg_end)
            } else {
                seg_end
            };
            let mut a = from;
            let mut walked = None;
            while a < to {
                let (repaired, _) = self.scrub_stripe(a / sdb, &mut walked, false)?;
                if repaired > 0 {
                    resynced += 1;
                }
                a += sdb;
            }
        }
        Ok(resynced)
    }

    /// The last phase: membership changes import found (missing members) are recorded, and a
    /// checkpoint makes the recovered state durable. Without a change, a member or spare whose
    /// label is older than the configuration imported (a crash cut that label's write short)
    /// is labelled anew: left as it was, its older label would name the configuration once the
    /// disks that carry the newer one are gone (a copy put back, say), and an import would
    /// then serve what it records, such as a finished rebuild's target as still rebuilding.
    fn settle_import(&mut self, missing: bool) -> Result<(), IoError> {
        self.record_log_device_failure()?;
        if self.array.failed() != self.members.recorded_failed() || missing {
            self.on_members_failed()?;
        } else if !self.members.superblocks_intact(&mut self.array) {
            self.write_config()?;
        }
        self.write_checkpoint()
    }
}
