//! Membership: the pool's identity (UUID, tag), its geometry and layout, which disk (by GUID)
//! holds each member slot, the hot spares, and the configuration generation, as the
//! superblocks on every member and spare record it. The pool changes membership (fails a
//! member, takes a spare, replaces a disk) and this writes it down.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::{Health, Pool, disk_guid};
use crate::error::IoError;
use crate::event::Event;
use crate::format::{
    self, Counters, LogDeviceRecord, MemberRecord, PoolLayout, Role, SLOT_BYTES, Superblock,
};
use crate::log::slog::LogDevice;
use crate::raid::{Array, DiskSet, DiskState, Geometry};

/// A hot spare.
#[derive(Debug)]
pub(crate) struct Spare<D> {
    pub disk: D,
    pub guid: u64,
}

/// The pool's identity and layout as the superblocks record them.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub pool_uuid: [u8; 16],
    pub pool_tag: u64,
    pub generation: u64,
    pub geometry: Geometry,
    pub layout: PoolLayout,
    pub member_guids: Vec<u64, 32>,
    pub next_guid: u64,
}

/// Identity, member GUIDs, spares, and the member states the superblocks last recorded.
#[derive(Debug)]
pub(crate) struct Membership<D, const N: usize> {
    pub conf: Config,
    pub spares: Vec<Spare<D>, N>,
    /// The dedicated intent-log device, if the pool has one.
    pub slog: Option<LogDevice<D>>,
    /// Member states as the superblocks last recorded them.
    recorded: Vec<DiskState, 32>,
    /// Failed member slots that were recorded online (in sync) when they failed, since this
    /// pool was opened. The label a failed member gets names it failed, so only this tells
    /// that the disk still holds everything written up to its failure.
    left_in_sync: DiskSet,
}

impl<D: BlockDevice, const N: usize> Membership<D, N> {
    /// Membership `conf` with `spares`, whose superblocks record `recorded`.
    pub fn new(conf: Config, spares: Vec<Spare<D>, N>, recorded: &[DiskState]) -> Self {
        let mut r = Vec::new();
        for &s in recorded.iter().take(32) {
            let _ = r.push(s);
        }
        Membership {
            conf,
            spares,
            slog: None,
            recorded: r,
            left_in_sync: DiskSet::EMPTY,
        }
    }

    /// The member states the superblocks record (import: the newest configuration's).
    pub fn set_recorded(&mut self, states: &[DiskState]) {
        self.recorded.clear();
        for &s in states.iter().take(32) {
            let _ = self.recorded.push(s);
        }
    }

    /// Member slots the superblocks record as failed.
    pub fn recorded_failed(&self) -> DiskSet {
        self.recorded
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == DiskState::Failed)
            .fold(DiskSet::EMPTY, |s, (i, _)| s.with(i))
    }

    /// A GUID for the next disk the pool takes.
    pub fn new_guid(&mut self) -> u64 {
        self.conf.next_guid += 1;
        disk_guid(self.conf.pool_tag, self.conf.next_guid)
    }

    /// Writes the configuration (membership from `array`'s states, generation + 1) to every
    /// member not failed and every spare: slot A on all, flush, slot B on all, flush — a torn
    /// write leaves the other copy valid.
    pub fn write_config(
        &mut self,
        array: &mut Array<D, N>,
        counters: &mut Counters,
    ) -> Result<(), IoError> {
        self.conf.generation += 1;
        let (mut sb, members) = self.superblock(array);
        for copy in 0..2u32 {
            self.write_copy(array, counters, &mut sb, &members, copy)?;
            array.flush();
            flush_departed(array, &members);
        }
        for (i, m) in members.iter().enumerate() {
            let was = self.recorded.get(i).copied();
            self.left_in_sync = match (m.state, was) {
                (DiskState::Failed, Some(DiskState::Online)) => self.left_in_sync.with(i),
                (DiskState::Failed, _) => self.left_in_sync,
                _ => self.left_in_sync.without(i),
            };
        }
        self.recorded.clear();
        for m in &members {
            let _ = self.recorded.push(m.state);
        }
        Ok(())
    }

    /// Whether failed member `slot` was in sync when it failed (see `left_in_sync`).
    pub fn left_in_sync(&self, slot: usize) -> bool {
        self.left_in_sync.contains(slot)
    }

    /// The superblock of the configuration as the array's states now are (generation
    /// `conf.generation`), and its member records.
    fn superblock(&self, array: &Array<D, N>) -> (Superblock, Vec<MemberRecord, 32>) {
        let mut members: Vec<MemberRecord, 32> = Vec::new();
        for (i, guid) in self.conf.member_guids.iter().enumerate() {
            let state = array
                .member(i)
                .map_or(DiskState::Failed, crate::raid::Member::state);
            let _ = members.push(MemberRecord { guid: *guid, state });
        }
        let spares: Vec<u64, 32> = self.spares.iter().map(|s| s.guid).collect();
        let sb = Superblock {
            magic: format::SUPER_MAGIC,
            version: format::FORMAT_VERSION,
            pool_uuid: self.conf.pool_uuid,
            disk_guid: 0,
            role: Role::Spare,
            generation: self.conf.generation,
            geometry: self.conf.geometry,
            layout: self.conf.layout,
            members: members.clone(),
            spares,
            log_device: self.slog.as_ref().map(|s| LogDeviceRecord {
                guid: s.guid,
                state: if s.failed {
                    DiskState::Failed
                } else {
                    DiskState::Online
                },
                ring_slots: s.ring_slots,
            }),
        };
        (sb, members)
    }

    /// Before a failed member's disk leaves slot `slot` (a spare or a replacement takes it):
    /// labels it with the current configuration naming it failed, so that a disk that left
    /// while still writable never passes for a member at an import where the newer members
    /// do not answer (it kept a label naming itself online, and an import of it alone served
    /// the data it held when it left). Best effort: a dead disk takes no label.
    pub fn label_departing(&mut self, array: &mut Array<D, N>, slot: usize) {
        let (mut sb, _) = self.superblock(array);
        label_slot(array, &mut sb, slot);
    }

    /// When the pool faults (and so writes no new configuration): labels each member the
    /// configuration on disk already records failed, and whose disk answers again, with that
    /// configuration as recorded (the same generation, nothing new in it). A disk that failed,
    /// missed writes and came back otherwise still carries a label naming itself online, and
    /// an import where the members that outlived it do not answer took it alone and served
    /// the older data it holds as current. Best effort, outside the error policy.
    pub fn label_recorded_failed(&mut self, array: &mut Array<D, N>) {
        let (mut sb, _) = self.superblock(array);
        for (m, &state) in sb.members.iter_mut().zip(self.recorded.iter()) {
            m.state = state;
        }
        for slot in self.recorded_failed().iter() {
            label_slot(array, &mut sb, slot);
        }
    }

    /// Superblock copy `copy` of `sb` on every member not failed and every spare.
    fn write_copy(
        &mut self,
        array: &mut Array<D, N>,
        counters: &mut Counters,
        sb: &mut Superblock,
        members: &[MemberRecord],
        copy: u32,
    ) -> Result<(), IoError> {
        let lba = format::superblock_lba(copy, array.geometry().block_bytes());
        let mut slot = [0u8; SLOT_BYTES];
        for (i, m) in members.iter().enumerate() {
            sb.disk_guid = m.guid;
            sb.role = Role::Member(i as u8);
            sb.encode(&mut slot).map_err(IoError::Corrupt)?;
            if m.state == DiskState::Failed {
                // A failed member still in its slot learns it is failed (best effort, outside
                // the error policy: the disk is failed already).
                if let Some(d) = array.disk_mut(i) {
                    let _ = d.write(lba, &slot);
                }
                continue;
            }
            if array.disk_write(i, lba, &slot).is_ok() {
                counters.label_bytes += SLOT_BYTES as u64;
            }
        }
        for s in &mut self.spares {
            sb.disk_guid = s.guid;
            sb.role = Role::Spare;
            sb.encode(&mut slot).map_err(IoError::Corrupt)?;
            let _ = s.disk.write(lba, &slot);
            let _ = s.disk.flush();
        }
        if let Some(dev) = self.slog.as_mut().filter(|d| d.online()) {
            sb.disk_guid = dev.guid;
            sb.role = Role::Log;
            sb.encode(&mut slot).map_err(IoError::Corrupt)?;
            let lba = format::superblock_lba(copy, dev.block_bytes());
            // A device that fails here is recorded failed by the next configuration.
            let _ = dev.write(lba, &slot).and_then(|()| dev.flush());
        }
        Ok(())
    }

    /// Whether both superblock copies of every member not failed, and of every spare, read
    /// back, decode, and carry the current generation.
    pub fn superblocks_intact(&mut self, array: &mut Array<D, N>) -> bool {
        let bb = array.geometry().block_bytes();
        let generation = self.conf.generation;
        let mut slot = [0u8; SLOT_BYTES];
        let current =
            |slot: &[u8]| Superblock::decode(slot).is_ok_and(|sb| sb.generation == generation);
        for copy in 0..2u32 {
            let lba = format::superblock_lba(copy, bb);
            for d in 0..array.geometry().disks() {
                if array.writable(d)
                    && (array.disk_read(d, lba, &mut slot).is_err() || !current(&slot))
                {
                    return false;
                }
            }
            for sp in &mut self.spares {
                if sp.disk.read(lba, &mut slot).is_err() || !current(&slot) {
                    return false;
                }
            }
        }
        true
    }
}

/// Writes `sb` as the label of the disk in member slot `slot` (both copies, each flushed),
/// outside the error policy: best effort, a dead disk takes no label.
fn label_slot<D: BlockDevice, const N: usize>(
    array: &mut Array<D, N>,
    sb: &mut Superblock,
    slot: usize,
) {
    let bb = array.geometry().block_bytes();
    let mut buf = [0u8; SLOT_BYTES];
    sb.disk_guid = sb.members.get(slot).map_or(0, |m| m.guid);
    sb.role = Role::Member(slot as u8);
    if sb.encode(&mut buf).is_err() {
        return;
    }
    if let Some(d) = array.disk_mut(slot) {
        for copy in 0..2u32 {
            let _ = d.write(format::superblock_lba(copy, bb), &buf);
            let _ = d.flush();
        }
    }
}

/// Zeroes both superblock copies of `disk` (blocks of `block_bytes`) and flushes it; best
/// effort (a disk leaving the pool owes it nothing more).
pub(crate) fn erase_labels<D: BlockDevice>(disk: &mut D, block_bytes: usize) {
    let zeros = [0u8; SLOT_BYTES];
    for copy in 0..2u32 {
        let _ = disk.write(format::superblock_lba(copy, block_bytes), &zeros);
    }
    let _ = disk.flush();
}

/// Flushes the failed members still in their slots that [`Membership::write_copy`] labelled.
fn flush_departed<D: BlockDevice, const N: usize>(
    array: &mut Array<D, N>,
    members: &[MemberRecord],
) {
    for (i, m) in members.iter().enumerate() {
        if m.state == DiskState::Failed
            && let Some(d) = array.disk_mut(i)
        {
            let _ = d.flush();
        }
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Writes the configuration as the array's states now are.
    pub(crate) fn write_config(&mut self) -> Result<(), IoError> {
        self.members
            .write_config(&mut self.array, &mut self.counters)?;
        // The log device may have died taking its label.
        self.record_log_device_failure()
    }

    /// When the pool's membership changed under I/O (a member failed), records it: spares,
    /// rebuilds, the new configuration.
    pub(crate) fn after_membership_change(&mut self) -> Result<(), IoError> {
        if self.array.failed() != self.members.recorded_failed() {
            self.on_members_failed()?;
        }
        self.record_log_device_failure()
    }

    /// When the log device failed since the configuration was written: an event, and a new
    /// configuration naming it failed (the intent log is on the members again, and import
    /// must not wait for the device).
    pub(crate) fn record_log_device_failure(&mut self) -> Result<(), IoError> {
        let Some(kind) = self.members.slog.as_mut().and_then(|d| d.failed_by.take()) else {
            return Ok(());
        };
        // Its records of the open stripe went with it, wherever it was found dead (a record,
        // a flush mark, a label): log the stripe on the members first.
        if let Err(e) = self.relog_on_members() {
            if let Some(d) = self.members.slog.as_mut() {
                d.failed_by = Some(kind);
            }
            return Err(e);
        }
        self.array
            .events_mut()
            .push(Event::LogDeviceFailed { kind });
        self.write_config()
    }

    /// The open stripe's bytes logged again on the members' rings (or the stripe sealed when
    /// they do not fit), and a flush mark on the members naming what is durable: what the log
    /// device held is needed no more.
    fn relog_on_members(&mut self) -> Result<(), IoError> {
        self.log.relog_open_stripe();
        self.log.zil.forget_mark();
        if self.log.open_bytes_unlogged() && !self.io()?.zil_write()? {
            self.io()?.seal_stripe()?;
            self.flush_stripes()?;
        }
        self.io()?.write_flush_mark()
    }

    /// Members failed since the configuration was last written: take hot spares, start
    /// rebuilds, record the new membership (generation + 1) on every disk.
    pub(crate) fn on_members_failed(&mut self) -> Result<(), IoError> {
        let before = self.health();
        // More members out of sync than the level tolerates: the data is gone, and a spare
        // taken now would only make the failed slot look present (RAID-0 used to "rebuild"
        // onto a blank spare and keep serving).
        let faulted = before == Health::Faulted;
        for slot in 0..self.array.geometry().disks() {
            let now_failed = self
                .array
                .member(slot)
                .is_some_and(|m| m.state() == DiskState::Failed);
            if !now_failed {
                continue;
            }
            if self.rebuild.is_some_and(|r| r.disk as usize == slot) {
                self.rebuild = None;
            }
            if !faulted {
                self.take_spare(slot);
            }
        }
        // A second rebuild target waits for the first (it stays `Rebuilding` with cursor 0).
        if self.rebuild.is_none()
            && !faulted
            && let Some(d) = self.rebuilding_member()
        {
            let below = self
                .array
                .member(d)
                .map_or(0, crate::raid::Member::rebuilt_below);
            self.start_rebuild_at(d as u8, below);
        }
        let after = self.health();
        if after != before {
            self.array.events_mut().push(Event::HealthChanged {
                health: after as u8,
            });
        }
        if after == Health::Faulted {
            // A faulted pool writes nothing that would keep a later import from assembling
            // the best set of members: a configuration naming the last failures would make
            // the members that failed last (often still good) stale, and the pool could
            // never be imported from them. Members it already recorded failed learn so.
            self.members.label_recorded_failed(&mut self.array);
            return Ok(());
        }
        self.write_config()
    }

    /// Puts a hot spare, if there is one, into failed slot `slot`, and starts its rebuild
    /// unless one is running.
    fn take_spare(&mut self, slot: usize) {
        if self.members.spares.is_empty() {
            return;
        }
        // (Labelled while the spare is still listed, so the label differs from the
        // configuration only in this slot's state.)
        self.members.label_departing(&mut self.array, slot);
        let Some(Spare { disk, guid }) = self.members.spares.pop() else {
            return;
        };
        if self.array.replace(slot, disk).is_ok() {
            if let Some(g) = self.members.conf.member_guids.get_mut(slot) {
                *g = guid;
            }
            self.array
                .events_mut()
                .push(Event::SpareTaken { disk: slot as u8 });
            if self.rebuild.is_none() {
                self.start_rebuild_at(slot as u8, 0);
            }
        }
    }

    /// The first member being rebuilt, if any.
    pub(crate) fn rebuilding_member(&self) -> Option<usize> {
        (0..self.array.geometry().disks()).find(|&d| {
            self.array
                .member(d)
                .is_some_and(|m| m.state() == DiskState::Rebuilding)
        })
    }
}
