//! The executor: runs steps against a pool on campaign disks, keeps the reference model and the
//! damage bookkeeping, and checks after every step.
//!
//! ## Damage and tolerance
//! A member slot counts as *damaged* while the pool has it failed or rebuilding, while its device
//! is failed by the campaign, while it carries a sticky medium error, and while it holds silent
//! damage: bit rot, latent sector errors, a lost or misdirected write (armed or done), or stale
//! content (a member that comes back in sync without a rebuild, or was rebuilt while another
//! member held silent damage). Silent damage ends when a scrub that started after it completes,
//! or (for overlay faults) when every damaged block was rewritten. A fault step executes only if
//! the damaged slots, counting the new one, stay within the level's tolerance; otherwise it is
//! skipped. [`Step::Exceed`] is the one deliberate exception: from then on the seed is
//! *over tolerance* and reads may fail, but never return other data.
//!
//! Over tolerance, a disk whose content nothing marks as stale must not be left as the only
//! source: an older copy put back ([`Step::StaleCopy`], not injected over tolerance), and a
//! failed member's device that answers again while the pool still records it failed
//! ([`Step::Return`]: the pool had no I/O to notice, so its label still names it in sync).
//! An import finding such a disk alone cannot tell it from a current one, and neither could
//! md or ZFS; [`Step::Exceed`] takes those devices down with the members it fails, and a
//! disk the pool dropped earlier is no longer pushed back in by mistake at a power cut.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use raidcore::format::{LUN_BLOCK, ROOT_SLOTS, SLOT_BYTES};
use raidcore::pool::{AdminError, Health, ImportOptions, IoError, LunError, Pool, PoolConfig};
use raidcore::raid::{DiskState, Member};
use raidcore_hal::BlockDevice;

use super::disk::{CampDisk, Dropped, Graveyard, Rail};
use super::model::{Model, Verdict, content};
use super::shape::{CAMPAIGN_DISKS, CAMPAIGN_LUNS, CAMPAIGN_PAGES, CAMPAIGN_STREAMS, Shape};
use super::source::Source;
use super::step::{Step, View};
use super::{Failure, FailureKind, SeedStats};
use crate::disk::MemDisk;
use crate::fault::{Fault, FaultConfig, FaultHandle, FaultyDisk, PendingFate, TransientKind};

mod local;

/// The pool type the campaign runs.
pub type CampPool =
    Pool<CampDisk, Vec<u8>, CAMPAIGN_DISKS, CAMPAIGN_LUNS, CAMPAIGN_PAGES, CAMPAIGN_STREAMS>;

/// Silent damage on one disk.
#[derive(Debug, Clone, Default)]
struct Silent {
    /// Step at which the damage (last) happened.
    since: usize,
    /// Overlay blocks (rot, medium) that make it observable: healed when all are gone.
    blocks: Vec<u64>,
    /// Damage the overlay cannot show (lost, misdirected writes; stale content).
    hidden: bool,
    /// Some of it lies in the label area (superblocks, checkpoint roots): import may take the
    /// disk for one that missed checkpoints and resync it whole.
    label: bool,
}

/// A LUN operation whose outcome a power cut left unknown.
#[derive(Debug, Clone)]
struct PendingLun {
    name: String,
    blocks: u64,
    id: Option<u16>,
    create: bool,
}

type StepResult = Result<(), Failure>;

/// One seed's pool, model and bookkeeping.
pub(crate) struct Sim {
    pub(crate) shape: Shape,
    cfg: PoolConfig,
    rail: Arc<Rail>,
    yard: Graveyard,
    next_id: u32,
    data_start: u64,
    pool: Option<CampPool>,
    model: Model,
    /// Disk ids whose device the campaign failed (not yet returned).
    device_failed: BTreeSet<u32>,
    /// Disk ids the pool may legitimately fail or an import refuse.
    may_fail: BTreeSet<u32>,
    /// Disk ids with a sticky medium error.
    sticky: BTreeSet<u32>,
    /// Silent damage by disk id.
    silent: BTreeMap<u32, Silent>,
    /// Lost/misdirected writes armed but not yet done, by disk id (with the count done so far).
    armed: BTreeMap<u32, u32>,
    /// Slots rebuilt (or rebuilding) while another member held silent damage.
    tainted: BTreeSet<u8>,
    prev_states: Vec<DiskState>,
    /// A copy of a member's medium ([`Step::StaleCopy`]): disk id, slot, medium, and whether
    /// the disk held silent damage then (the copy holds it too).
    copy: Option<(u32, usize, MemDisk, bool)>,
    /// The disk the next import finds with an older copy put back, and whether it holds silent
    /// damage besides the stale content (from before the copy, or since).
    put_back: Option<(u32, MemDisk, bool)>,
    /// Scrub in progress: (step it started, whether the pool was free of silent damage then).
    scrub: Option<(usize, bool)>,
    /// The disks online for the whole of the scrub in progress: the ones its pass read (a
    /// member that left and came back during it was rebuilt, or resynced for what it missed
    /// only, and may keep damage the pass never saw).
    scrub_read: BTreeSet<u32>,
    over: bool,
    /// The step of the local fault ([`Step::Local`]), if one struck: no other fault follows.
    local: Option<usize>,
    dead: bool,
    pub(crate) step: usize,
    time: u64,
    session_ok_bytes: u64,
    session_maybe_bytes: u64,
    lun_counter: u32,
    pending_luns: Vec<PendingLun>,
    cut_shuffle: u32,
    trace: bool,
    /// The log device's id and fault handle, if the shape has one and no [`Step::FailLog`]
    /// broke it yet (one fault per device: two broken label copies would leave nothing to
    /// know it by).
    log: Option<(u32, FaultHandle)>,
    pub(crate) stats: SeedStats,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("shape", &self.shape)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

fn fail(kind: FailureKind, step: usize, what: impl Into<String>) -> Failure {
    Failure {
        kind,
        step,
        what: what.into(),
    }
}

fn split_mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Sim {
    /// Creates the pool of `shape` (step index 0 is "setup").
    pub(crate) fn new(shape: Shape) -> Result<Sim, Failure> {
        let cfg = shape.config();
        let bs = shape.block.bytes() as u64;
        // Labels (two superblocks, the root ring, the intent log), rounded up to a strip: the
        // pool's data area starts there (checked after creation).
        let strip_blocks = u64::from(shape.strip_bytes) / bs;
        let data_start = ((2 + u64::from(ROOT_SLOTS) + u64::from(shape.zil_slots))
            * (SLOT_BYTES as u64 / bs))
            .div_ceil(strip_blocks)
            * strip_blocks;
        let mut sim = Sim {
            shape,
            cfg,
            rail: Arc::new(Rail::default()),
            yard: Arc::new(Mutex::new(Vec::new())),
            next_id: 0,
            data_start,
            pool: None,
            model: Model::new(shape.seed),
            device_failed: BTreeSet::new(),
            may_fail: BTreeSet::new(),
            sticky: BTreeSet::new(),
            silent: BTreeMap::new(),
            copy: None,
            put_back: None,
            armed: BTreeMap::new(),
            tainted: BTreeSet::new(),
            prev_states: Vec::new(),
            scrub: None,
            scrub_read: BTreeSet::new(),
            over: false,
            local: None,
            dead: false,
            step: 0,
            time: 0,
            session_ok_bytes: 0,
            session_maybe_bytes: 0,
            lun_counter: 0,
            pending_luns: Vec::new(),
            cut_shuffle: 0,
            trace: std::env::var_os("RAIDCORE_CAMPAIGN_TRACE").is_some(),
            log: None,
            stats: SeedStats::default(),
        };
        let members: Vec<CampDisk> = (0..shape.disks).map(|_| sim.blank_disk()).collect();
        let spares: Vec<CampDisk> = (0..shape.spares).map(|_| sim.blank_disk()).collect();
        let mem = vec![0u8; CampPool::memory_bytes(&cfg, usize::from(shape.disks))];
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&split_mix(shape.seed).to_le_bytes());
        uuid[8..].copy_from_slice(&split_mix(!shape.seed).to_le_bytes());
        let mut pool = CampPool::create(members, spares, cfg, uuid, mem).map_err(|e| {
            fail(
                FailureKind::Setup,
                0,
                format!("pool creation failed: {e} ({})", shape.to_line()),
            )
        })?;
        if shape.log_device {
            let d = sim.log_disk();
            sim.log = Some((d.id(), d.handle().clone()));
            pool.add_log_device(d).map_err(|e| {
                fail(
                    FailureKind::Setup,
                    0,
                    format!("adding the log device failed: {e}"),
                )
            })?;
        }
        let geo_start = pool.array().geometry().data_start_lba();
        if geo_start != data_start {
            return Err(fail(
                FailureKind::Setup,
                0,
                format!("campaign's label size {data_start} != pool's {geo_start}"),
            ));
        }
        sim.prev_states = pool.array().members().iter().map(Member::state).collect();
        sim.pool = Some(pool);
        Ok(sim)
    }

    /// A blank log device: the label area and an intent-log ring of twice a member's, all of
    /// it label (no lost or misdirected data writes are aimed at it).
    fn log_disk(&mut self) -> CampDisk {
        let per = SLOT_BYTES as u64 / self.shape.block.bytes() as u64;
        let blocks = (2 + u64::from(ROOT_SLOTS) + 2 * u64::from(self.shape.zil_slots)) * per;
        let medium = MemDisk::new(self.shape.block, blocks).expect("campaign: memory disk size");
        let data_start = self.data_start;
        self.data_start = u64::MAX;
        let d = self.wrap(medium);
        self.data_start = data_start;
        d
    }

    fn wrap(&mut self, medium: MemDisk) -> CampDisk {
        let id = self.next_id;
        self.next_id += 1;
        let faulty = FaultyDisk::with_config(
            medium,
            split_mix(self.shape.seed ^ (u64::from(id) << 48)),
            FaultConfig {
                volatile_cache: true,
                cache_bytes: self.shape.cache_bytes,
                power_cut: PendingFate::Seeded,
            },
        );
        CampDisk::new(id, faulty, &self.rail, &self.yard, self.data_start)
    }

    fn blank_disk(&mut self) -> CampDisk {
        // Sizes come from Shape::generate: never zero, far below 2^64 bytes.
        let medium = MemDisk::new(self.shape.block, self.shape.disk_blocks.max(1))
            .expect("campaign: memory disk size");
        self.wrap(medium)
    }

    /// Blocks clients can fill (for LUN sizes).
    pub(crate) fn usable_blocks(&self) -> u64 {
        self.pool
            .as_ref()
            .map_or(0, |p| p.usable_bytes() / LUN_BLOCK as u64)
    }

    /// What the generator may know.
    pub(crate) fn view(&mut self) -> View {
        let mut v = View {
            luns: self.model.luns().iter().map(|l| l.blocks).collect(),
            slots: self.shape.disks,
            over: self.over,
            local: self.local.is_some(),
            usable_blocks: self.usable_blocks(),
            log_device: self.log.is_some(),
            ..View::default()
        };
        if let Some(p) = self.pool.as_mut() {
            for slot in 0..usize::from(self.shape.disks) {
                if p.array().member(slot).map(Member::state) == Some(DiskState::Failed) {
                    v.failed.push(slot as u8);
                }
                if let Some(d) = p.array_mut().disk_mut(slot)
                    && self.device_failed.contains(&d.id())
                {
                    v.device_failed.push(slot as u8);
                }
            }
        }
        v
    }

    /// Whether nothing more can run (the pool is gone after an over-tolerance import failure).
    pub(crate) fn dead(&self) -> bool {
        self.dead
    }

    // ----- damage -------------------------------------------------------------------------

    fn silent_active(&self, id: u32, pool: &mut CampPool, slot: usize) -> bool {
        if self.armed.contains_key(&id) {
            return true;
        }
        let Some(s) = self.silent.get(&id) else {
            return false;
        };
        if s.hidden {
            return true;
        }
        let Some(d) = pool.array_mut().disk_mut(slot) else {
            return false;
        };
        let rot = d.handle().rotted_blocks();
        let med = d.handle().medium_errors();
        s.blocks
            .iter()
            .any(|b| rot.binary_search(b).is_ok() || med.binary_search(b).is_ok())
    }

    /// The disk ids of the members online now.
    fn online_ids(&mut self) -> BTreeSet<u32> {
        let Some(pool) = self.pool.as_mut() else {
            return BTreeSet::new();
        };
        let mut out = BTreeSet::new();
        for slot in 0..usize::from(self.shape.disks) {
            if pool.array().member(slot).map(Member::state) == Some(DiskState::Online)
                && let Some(d) = pool.array_mut().disk_mut(slot)
            {
                out.insert(d.id());
            }
        }
        out
    }

    /// Member slots currently damaged (see the module docs).
    fn damaged(&mut self) -> BTreeSet<u8> {
        let mut out = BTreeSet::new();
        let Some(mut pool) = self.pool.take() else {
            return out;
        };
        for slot in 0..usize::from(self.shape.disks) {
            let state = pool.array().member(slot).map(Member::state);
            let id = pool.array_mut().disk_mut(slot).map(|d| d.id());
            let bad = match (state, id) {
                (Some(DiskState::Online), Some(id)) => {
                    self.device_failed.contains(&id)
                        || self.sticky.contains(&id)
                        || self.silent_active(id, &mut pool, slot)
                        || self.tainted.contains(&(slot as u8))
                }
                _ => true,
            };
            if bad {
                out.insert(slot as u8);
            }
        }
        // Healed silent damage is forgotten.
        let healed: Vec<u32> = (0..usize::from(self.shape.disks))
            .filter_map(|slot| {
                let id = pool.array_mut().disk_mut(slot).map(|d| d.id())?;
                (self.silent.contains_key(&id) && !self.silent_active(id, &mut pool, slot))
                    .then_some(id)
            })
            .collect();
        for id in healed {
            self.silent.remove(&id);
        }
        self.pool = Some(pool);
        out
    }

    /// Whether a fault on `slot` keeps the pool within its tolerance.
    /// The slot (reduced to the shape), disk id and block a fault on `slot` strikes, if there
    /// is one and the fault keeps the damage within the level's tolerance; a skipped fault is
    /// counted.
    fn aim(&mut self, slot: u8, pick: u32, label: bool) -> Option<(u8, u32, u64)> {
        let slot = slot % self.shape.disks;
        let hit = self
            .target(slot, pick, label)
            .filter(|_| self.fits(slot))
            .map(|(id, lba)| (slot, id, lba));
        if hit.is_none() {
            self.stats.faults_skipped += 1;
        }
        hit
    }

    fn fits(&mut self, slot: u8) -> bool {
        if self.local.is_some() {
            return false;
        }
        let mut d = self.damaged();
        d.insert(slot);
        d.len() <= self.shape.tolerance()
    }

    fn any_silent(&self) -> bool {
        self.local.is_some()
            || !self.silent.is_empty()
            || !self.armed.is_empty()
            || !self.tainted.is_empty()
    }

    fn note_silent(&mut self, id: u32, block: Option<u64>, hidden: bool) {
        let step = self.step;
        let s = self.silent.entry(id).or_default();
        s.since = step;
        if let Some(b) = block {
            s.blocks.push(b);
        }
        s.hidden |= hidden;
        if let Some(sc) = self.scrub.as_mut() {
            sc.1 = false;
        }
    }

    /// Marks disk `id`'s silent damage as lying (also) in its label area.
    fn note_label(&mut self, id: u32, label: bool) {
        if let Some(s) = self.silent.get_mut(&id).filter(|_| label) {
            s.label = true;
        }
    }

    fn fault(&mut self, kind: &'static str) {
        *self.stats.faults.entry(kind).or_default() += 1;
    }

    // ----- steps ---------------------------------------------------------------------------

    /// The id and fault handle of the disk in slot `s`, if it holds one.
    fn disk_handle(&mut self, s: usize) -> Option<(u32, FaultHandle)> {
        let d = self.pool().array_mut().disk_mut(s)?;
        Some((d.id(), d.handle().clone()))
    }

    /// [`Step::Online`]: a failed member's device answers again and the operator brings it
    /// back. Refusals the pool explains (a label the faults took, a faulted pool) change
    /// nothing.
    fn online(&mut self, at: usize, slot: u8) -> StepResult {
        let s = usize::from(slot % self.shape.disks);
        if self.pool().array().member(s).map(Member::state) != Some(DiskState::Failed) {
            return Ok(());
        }
        let Some((id, h)) = self.disk_handle(s) else {
            return Ok(());
        };
        if self.device_failed.remove(&id) {
            h.inject(Fault::Return);
        }
        self.fault("online");
        match self.pool().online(s) {
            Ok(()) => self.stats.onlined += 1,
            Err(AdminError::NotThisMember { .. } | AdminError::Faulted) => {}
            Err(e) if !self.excused() => {
                return Err(fail(
                    FailureKind::OpError,
                    at,
                    format!("online({s}) failed: {e}"),
                ));
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// [`Step::StaleCopy`]: takes a copy of a member's medium, or (holding one) cuts power and
    /// puts it back in place of the disk it was taken of. The copy is stale content (silent
    /// damage), unless the import resyncs that slot for what it missed.
    fn stale_copy(&mut self, slot: u8, shuffle: u32) -> StepResult {
        let Some((id, s, medium, damaged)) = self.copy.take() else {
            let s = usize::from(slot % self.shape.disks);
            if let Some(d) = self.pool().array_mut().disk_mut(s)
                && let Some(m) = d.medium_copy()
            {
                let id = d.id();
                let damaged = self.silent.contains_key(&id) || self.armed.contains_key(&id);
                self.copy = Some((id, s, m, damaged));
                self.fault("copy_image");
            }
            return Ok(());
        };
        let online = self.pool().array().member(s).map(Member::state) == Some(DiskState::Online);
        let here = self.pool().array_mut().disk_mut(s).map(|d| d.id()) == Some(id);
        if self.over || !online || !here || !self.fits(s as u8) {
            self.stats.faults_skipped += 1;
            return Ok(());
        }
        self.fault("stale_copy");
        let damaged = damaged || self.silent.contains_key(&id) || self.armed.contains_key(&id);
        self.note_silent(id, None, true);
        self.put_back = Some((id, medium, damaged));
        self.crash(shuffle)
    }

    /// Errors are acceptable: the tolerance was exceeded on purpose, or power is being cut.
    /// [`Step::FailLog`]: the log device dies and a flush at once finds it dead, logs the open
    /// stripe on the members and records it failed, so nothing is lost. (A power cut between
    /// its death and that flush would lose the flushes it alone held: one log device's known
    /// exposure, not a loss the campaign checks for, so no armed cut fires in between.)
    fn fail_log_device(&mut self, at: usize) -> StepResult {
        let Some((id, h)) = self.log.take() else {
            self.stats.faults_skipped += 1;
            return Ok(());
        };
        self.fault("fail_log_device");
        self.may_fail.insert(id);
        self.rail.disarm();
        h.inject(Fault::Fail);
        match self.pool().flush() {
            Ok(()) => {
                self.model.flush_ok();
                self.stats.flushes += 1;
                Ok(())
            }
            Err(_) if self.excused() => Ok(()),
            Err(e) => Err(fail(
                FailureKind::OpError,
                at,
                format!("flush after the log device died failed within tolerance: {e}"),
            )),
        }
    }

    /// [`Step::FailLog`] parts 1 and 2: blocks of the log device that no write mends (its
    /// flush-mark slots, or one superblock copy). The pool finds out when it next writes
    /// there, and must then log the open stripe on the members before it records the device
    /// failed; until then the device still holds every record (and the other label copy), so a
    /// power cut in between loses nothing either.
    fn break_log_device(&mut self, part: u8, copy: u8) {
        let Some((id, h)) = self.log.take() else {
            self.stats.faults_skipped += 1;
            return;
        };
        let bs = self.shape.block.bytes();
        let per = SLOT_BYTES as u64 / bs as u64;
        let (lba, blocks) = if part == 1 {
            // The last two slots (see `log_disk`).
            let slots = 2 + u64::from(ROOT_SLOTS) + 2 * u64::from(self.shape.zil_slots);
            ((slots - 2) * per, 2 * per)
        } else {
            (
                raidcore::format::superblock_lba(u32::from(copy % 2), bs),
                per,
            )
        };
        h.inject(Fault::Medium {
            lba,
            blocks,
            sticky: true,
        });
        self.may_fail.insert(id);
        self.fault(if part == 1 {
            "log_device_marks"
        } else {
            "log_device_label"
        });
    }

    fn excused(&self) -> bool {
        self.over || self.rail.fired()
    }

    /// The `pick`-th live LUN and a range in it (`lba` and `blocks` reduced to fit).
    fn resolve(&self, lun: u8, lba: u64, blocks: u32) -> Option<(u16, u64, u64)> {
        let luns = self.model.luns();
        if luns.is_empty() {
            return None;
        }
        let l = &luns[usize::from(lun) % luns.len()];
        let n = u64::from(blocks.max(1)).min(l.blocks);
        Some((l.id, lba % (l.blocks - n + 1), n))
    }

    /// Runs one step and checks what it did.
    pub(crate) fn exec(&mut self, step: Step) -> StepResult {
        self.step += 1;
        self.stats.steps += 1;
        self.rail.new_step();
        if self.dead || self.pool.is_none() {
            return Ok(());
        }
        if self.trace {
            let d = self.damaged();
            let st = self.pool().status();
            let mut states: Vec<String> = st
                .disks
                .iter()
                .map(|d| format!("{:?}{}", d.state, if d.present { "" } else { "(absent)" }))
                .collect();
            for (i, s) in states.iter_mut().enumerate() {
                if let Some(d) = self.pool().array_mut().disk_mut(i) {
                    let rot = d.handle().rotted_blocks();
                    let med = d.handle().medium_errors();
                    if !rot.is_empty() || !med.is_empty() {
                        *s = format!("{s} rot{rot:?} med{med:?}");
                    }
                }
            }
            let bad = self.pool().bad_ranges().to_vec();
            eprintln!(
                "[{}] {step}   damaged {d:?} silent {:?} armed {:?} tainted {:?} dev_failed {:?} \
                 states {states:?} rebuild {:?} scrub {:?} bad {bad:?}",
                self.step,
                self.silent.keys().collect::<Vec<_>>(),
                self.armed.keys().collect::<Vec<_>>(),
                self.tainted,
                self.device_failed,
                st.rebuild,
                st.scrub
            );
        }
        self.run_step(step)?;
        if self.rail.take_fired() {
            self.crash(self.cut_shuffle)?;
        }
        self.observe()
    }

    fn pool(&mut self) -> &mut CampPool {
        // exec() returns early when there is no pool, and only crash() takes it (and puts one
        // back or marks the seed dead).
        self.pool
            .as_mut()
            .expect("campaign: pool present while a step runs")
    }

    #[allow(clippy::too_many_lines)]
    fn run_step(&mut self, step: Step) -> StepResult {
        let at = self.step;
        // After a local fault the model's loss must stay what it worked out: no other fault
        // but power cuts.
        if self.local.is_some()
            && step.is_fault()
            && !matches!(step, Step::PowerCut { .. } | Step::ArmPowerCut { .. })
        {
            self.stats.faults_skipped += 1;
            return Ok(());
        }
        match step {
            Step::Write {
                lun,
                lba,
                blocks,
                fua,
                tag,
            } => {
                let Some((id, lba, n)) = self.resolve(lun, lba, blocks) else {
                    return Ok(());
                };
                let seed = self.shape.seed;
                let mut data = Vec::with_capacity(n as usize * LUN_BLOCK);
                for b in lba..lba + n {
                    data.extend_from_slice(&content(seed, tag, b));
                }
                self.stats.writes += 1;
                match self.pool().write(id, lba, &data, fua) {
                    Ok(()) => {
                        self.model.write_ok(id, lba, n, tag, fua);
                        self.session_ok_bytes += data.len() as u64;
                        self.stats.bytes_written += data.len() as u64;
                    }
                    Err(IoError::NoSpace) => {
                        self.stats.no_space += 1;
                        // `Pool::write`: refused whole when it is admitted, but a write of more
                        // than an extent can still meet the full pool part-way.
                        if n > u64::from(self.shape.max_extent_blocks) {
                            self.model.write_maybe(id, lba, n, tag);
                            self.session_maybe_bytes += data.len() as u64;
                        }
                    }
                    Err(e @ (IoError::NoSuchLun | IoError::OutOfRange | IoError::Misaligned)) => {
                        return Err(fail(
                            FailureKind::OpError,
                            at,
                            format!("write of LUN {id} LBA {lba}+{n} refused: {e}"),
                        ));
                    }
                    Err(e) => {
                        self.model.write_maybe(id, lba, n, tag);
                        self.session_maybe_bytes += data.len() as u64;
                        if !self.excused() {
                            return Err(fail(
                                FailureKind::OpError,
                                at,
                                format!(
                                    "write of LUN {id} LBA {lba}+{n} failed within tolerance: {e}"
                                ),
                            ));
                        }
                    }
                }
            }
            Step::Read { lun, lba, blocks } => {
                let Some((id, lba, n)) = self.resolve(lun, lba, blocks) else {
                    return Ok(());
                };
                self.read_check(id, lba, n)?;
            }
            Step::Trim { lun, lba, blocks } => {
                let Some((id, lba, n)) = self.resolve(lun, lba, blocks) else {
                    return Ok(());
                };
                match self.pool().trim(id, lba, n) {
                    Ok(()) => self.model.write_ok(id, lba, n, 0, false),
                    Err(IoError::NoSpace) => self.stats.no_space += 1,
                    Err(e) => {
                        self.model.write_maybe(id, lba, n, 0);
                        if !self.excused() {
                            return Err(fail(
                                FailureKind::OpError,
                                at,
                                format!(
                                    "trim of LUN {id} LBA {lba}+{n} failed within tolerance: {e}"
                                ),
                            ));
                        }
                    }
                }
            }
            Step::Flush => match self.pool().flush() {
                Ok(()) => {
                    self.model.flush_ok();
                    self.stats.flushes += 1;
                }
                Err(e) => {
                    if !self.excused() {
                        return Err(fail(
                            FailureKind::OpError,
                            at,
                            format!("flush failed within tolerance: {e}"),
                        ));
                    }
                }
            },
            Step::Invalid { kind } => self.invalid(kind)?,
            Step::CreateLun { blocks } => {
                let cap = self.usable_blocks();
                let blocks = blocks.clamp(1, cap.max(1));
                self.lun_counter += 1;
                let name = format!("lun{}", self.lun_counter);
                match self.pool().create_lun(&name, blocks) {
                    Ok(id) => self.model.add_lun(id, &name, blocks),
                    Err(LunError::TooMany | LunError::BadSize) => {}
                    Err(e) => {
                        if self.rail.fired() {
                            self.pending_luns.push(PendingLun {
                                name,
                                blocks,
                                id: None,
                                create: true,
                            });
                        } else if !self.over {
                            return Err(fail(
                                FailureKind::OpError,
                                at,
                                format!(
                                    "create_lun({name}, {blocks}) failed within tolerance: {e}"
                                ),
                            ));
                        }
                    }
                }
            }
            Step::DeleteLun { lun } => {
                let luns = self.model.luns();
                if luns.is_empty() {
                    return Ok(());
                }
                let l = luns[usize::from(lun) % luns.len()].clone();
                match self.pool().delete_lun(l.id) {
                    Ok(()) => self.model.remove_lun(l.id),
                    Err(e) => {
                        if self.rail.fired() {
                            self.pending_luns.push(PendingLun {
                                name: l.name.clone(),
                                blocks: l.blocks,
                                id: Some(l.id),
                                create: false,
                            });
                        } else if !self.over {
                            return Err(fail(
                                FailureKind::OpError,
                                at,
                                format!("delete_lun({}) failed within tolerance: {e}", l.id),
                            ));
                        } else {
                            // Beyond tolerance a failed delete may have taken effect in memory
                            // (its checkpoint failed, not its unmapping): the LUN is no longer
                            // owed, like one missing after an import beyond tolerance.
                            self.model.remove_lun(l.id);
                        }
                    }
                }
            }
            Step::Tick { dt } => {
                self.time += u64::from(dt);
                let t = self.time;
                self.pool().set_time(t);
            }
            Step::Maintenance { calls } => {
                for _ in 0..calls.max(1) {
                    match self.pool().maintenance() {
                        Ok(r) => {
                            self.stats.rebuilt_stripes += r.rebuilt_stripes;
                            self.stats.scrubbed_stripes += r.scrubbed_stripes;
                            if r.idle {
                                break;
                            }
                        }
                        // A rebuild target that fails stops its rebuild with a device error.
                        Err(IoError::Device(_)) if !self.device_failed.is_empty() => break,
                        Err(e) => {
                            if self.excused() {
                                break;
                            }
                            return Err(fail(
                                FailureKind::OpError,
                                at,
                                format!("maintenance failed within tolerance: {e}"),
                            ));
                        }
                    }
                    if self.rail.fired() {
                        break;
                    }
                    self.observe()?;
                }
            }
            Step::StartScrub => {
                self.pool().start_scrub();
                let clean = !self.any_silent();
                self.scrub = Some((at, clean));
                self.scrub_read = self.online_ids();
                self.stats.scrubs_started += 1;
            }
            Step::VerifyAll => self.verify_all()?,
            Step::Fail { slot, admin } => {
                let slot = slot % self.shape.disks;
                if !self.fits(slot) {
                    self.stats.faults_skipped += 1;
                    return Ok(());
                }
                let s = usize::from(slot);
                let Some(id) = self.pool().array_mut().disk_mut(s).map(|d| d.id()) else {
                    self.stats.faults_skipped += 1;
                    return Ok(());
                };
                self.may_fail.insert(id);
                if admin {
                    self.fault("fail_admin");
                    if let Err(e) = self.pool().fail_disk(s)
                        && !self.excused()
                    {
                        return Err(fail(
                            FailureKind::OpError,
                            at,
                            format!("fail_disk({s}) failed within tolerance: {e}"),
                        ));
                    }
                } else {
                    self.fault("fail_device");
                    self.device_failed.insert(id);
                    if let Some(d) = self.pool().array_mut().disk_mut(s) {
                        d.handle().inject(Fault::Fail);
                    }
                }
            }
            Step::Return { slot } => {
                let s = usize::from(slot % self.shape.disks);
                let Some(h) = self.disk_handle(s) else {
                    return Ok(());
                };
                if self.device_failed.remove(&h.0) {
                    h.1.inject(Fault::Return);
                    self.fault("return");
                }
            }
            Step::Online { slot } => self.online(at, slot)?,
            Step::StaleCopy { slot, shuffle } => self.stale_copy(slot, shuffle)?,
            Step::Replace { slot } => {
                let s = usize::from(slot % self.shape.disks);
                if self.pool().array().member(s).map(Member::state) != Some(DiskState::Failed) {
                    return Ok(());
                }
                let d = self.blank_disk();
                let id = d.id();
                self.fault("replace");
                let r = self.pool().replace_disk(s, d);
                if r.is_err() || self.rail.fired() {
                    // Interrupted: the new disk may not be recorded (or even labelled).
                    self.may_fail.insert(id);
                }
                if let Err(e) = r
                    && !self.excused()
                {
                    return Err(fail(
                        FailureKind::OpError,
                        at,
                        format!("replace_disk({s}) failed: {e}"),
                    ));
                }
            }
            Step::FailLog { part: 0, .. } => self.fail_log_device(at)?,
            Step::FailLog { part, copy } => self.break_log_device(part, copy),
            Step::AddSpare => {
                let st = self.pool().status();
                if st.spares >= 2 {
                    return Ok(());
                }
                let d = self.blank_disk();
                let id = d.id();
                self.fault("add_spare");
                let r = self.pool().add_spare(d);
                if r.is_err() || self.rail.fired() {
                    self.may_fail.insert(id);
                }
                if let Err(e) = r
                    && !self.excused()
                {
                    return Err(fail(
                        FailureKind::OpError,
                        at,
                        format!("add_spare failed: {e}"),
                    ));
                }
            }
            Step::Medium {
                slot,
                pick,
                blocks,
                sticky,
                label,
            } => {
                let Some((slot, id, lba)) = self.aim(slot, pick, label) else {
                    return Ok(());
                };
                let blocks = u64::from(blocks.max(1));
                if let Some(d) = self.pool().array_mut().disk_mut(usize::from(slot)) {
                    d.handle().inject(Fault::Medium {
                        lba,
                        blocks,
                        sticky,
                    });
                }
                if sticky {
                    self.sticky.insert(id);
                    self.may_fail.insert(id);
                    self.fault("medium_sticky");
                } else {
                    self.fault("medium");
                }
                for b in lba..lba + blocks {
                    self.note_silent(id, Some(b), false);
                }
                self.note_label(id, label);
            }
            Step::BitRot {
                slot,
                pick,
                bits,
                label,
            } => {
                let Some((slot, id, lba)) = self.aim(slot, pick, label) else {
                    return Ok(());
                };
                if let Some(d) = self.pool().array_mut().disk_mut(usize::from(slot)) {
                    d.handle().inject(Fault::BitRot {
                        lba: Some(lba),
                        bits: u32::from(bits.max(1)),
                    });
                }
                self.fault(if label { "bit_rot_label" } else { "bit_rot" });
                self.note_silent(id, Some(lba), false);
                self.note_label(id, label);
            }
            Step::LoseWrite { slot } | Step::Misdirect { slot, .. } => {
                let Some((slot, id, _)) = self.aim(slot, 0, false) else {
                    return Ok(());
                };
                if self.armed.contains_key(&id) {
                    self.stats.faults_skipped += 1;
                    return Ok(());
                }
                let Some(d) = self.pool().array_mut().disk_mut(usize::from(slot)) else {
                    return Ok(());
                };
                let done = d.silent_done;
                if let Step::Misdirect { pick, .. } = step {
                    let to = d.pick_data_block(pick);
                    d.arm_misdirect(to);
                    self.fault("misdirected_write");
                } else {
                    d.arm_lose();
                    self.fault("lost_write");
                }
                self.armed.insert(id, done);
                if let Some(sc) = self.scrub.as_mut() {
                    sc.1 = false;
                }
            }
            Step::Transient { slot, ops } => {
                let s = usize::from(slot % self.shape.disks);
                let kind = if ops % 2 == 0 {
                    TransientKind::Timeout
                } else {
                    TransientKind::Transport
                };
                if let Some(d) = self.pool().array_mut().disk_mut(s) {
                    d.handle().inject(Fault::Transient {
                        kind,
                        ops: u64::from(ops.clamp(1, 3)),
                    });
                    self.fault("transient");
                }
            }
            Step::PowerCut { shuffle } => {
                self.rail.cut_all();
                self.cut_shuffle = shuffle;
            }
            Step::ArmPowerCut { writes, shuffle } => {
                if !self.rail.armed() {
                    self.rail.arm(u64::from(writes));
                    self.cut_shuffle = shuffle;
                    self.stats.cuts_armed += 1;
                }
            }
            Step::Exceed { silent, pick } => self.exceed(silent, pick)?,
            Step::Local { pick, row } => self.local_fault(pick, row)?,
        }
        Ok(())
    }

    /// A member block of `slot` recently written (data area, or label area with `label`), on a
    /// present disk whose device works.
    fn target(&mut self, slot: u8, pick: u32, label: bool) -> Option<(u32, u64)> {
        let failed = self.device_failed.clone();
        let d = self.pool().array_mut().disk_mut(usize::from(slot))?;
        if failed.contains(&d.id()) {
            return None;
        }
        let lba = d.pick_block(pick, label)?;
        Some((d.id(), lba))
    }

    /// A bad request: the pool must refuse it with the right error and change nothing.
    fn invalid(&mut self, kind: u8) -> StepResult {
        let at = self.step;
        let Some(l) = self.model.luns().first().cloned() else {
            return Ok(());
        };
        let block = vec![0xa5u8; LUN_BLOCK];
        let (what, got, want): (&str, Result<(), String>, String) = match kind % 8 {
            0 => (
                "write past the end",
                self.pool()
                    .write(l.id, l.blocks, &block, false)
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", IoError::OutOfRange),
            ),
            1 => (
                "write of 100 bytes",
                self.pool()
                    .write(l.id, 0, &block[..100], false)
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", IoError::Misaligned),
            ),
            2 => (
                "write to LUN 200",
                self.pool()
                    .write(200, 0, &block, false)
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", IoError::NoSuchLun),
            ),
            3 => {
                let mut buf = vec![0u8; 2 * LUN_BLOCK];
                (
                    "read across the end",
                    self.pool()
                        .read(l.id, l.blocks - 1, &mut buf)
                        .map_err(|e| format!("{e:?}")),
                    format!("{:?}", IoError::OutOfRange),
                )
            }
            4 => (
                "trim of 0 blocks",
                self.pool().trim(l.id, 0, 0).map_err(|e| format!("{e:?}")),
                format!("{:?}", IoError::OutOfRange),
            ),
            5 => (
                "read into an empty buffer",
                self.pool()
                    .read(l.id, 0, &mut [])
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", IoError::Misaligned),
            ),
            6 => (
                "create_lun with an empty name",
                self.pool()
                    .create_lun("", 10)
                    .map(|_| ())
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", LunError::BadName),
            ),
            _ => (
                "create_lun larger than the pool",
                self.pool()
                    .create_lun("huge", u64::MAX / 8192)
                    .map(|_| ())
                    .map_err(|e| format!("{e:?}")),
                format!("{:?}", LunError::BadSize),
            ),
        };
        self.stats.invalid_requests += 1;
        match got {
            Err(e) if e == want => Ok(()),
            other => Err(fail(
                FailureKind::WrongError,
                at,
                format!("{what}: expected {want}, got {other:?}"),
            )),
        }
    }

    /// Reads `n` blocks and checks each against the model.
    fn read_check(&mut self, id: u16, lba: u64, n: u64) -> StepResult {
        let at = self.step;
        let mut buf = vec![0u8; n as usize * LUN_BLOCK];
        self.stats.reads += 1;
        match self.pool().read(id, lba, &mut buf) {
            Ok(()) => {
                for (i, blk) in buf.chunks_exact(LUN_BLOCK).enumerate() {
                    let b = lba + i as u64;
                    match self.model.check(id, b, blk) {
                        Verdict::Ok(_) => {
                            self.stats.bytes_verified += LUN_BLOCK as u64;
                            if self.over {
                                self.stats.over_reads_ok += 1;
                            }
                        }
                        Verdict::Wrong { allowed, found } => {
                            return Err(fail(
                                FailureKind::WrongData,
                                at,
                                format!(
                                    "LUN {id} LBA {b}: read {} but the model allows {allowed:?}{}",
                                    found.map_or_else(
                                        || "data no write ever put there".to_string(),
                                        |v| format!("version {v}")
                                    ),
                                    if self.over { " (over tolerance)" } else { "" }
                                ),
                            ));
                        }
                    }
                }
                Ok(())
            }
            Err(e) => {
                if self.over {
                    self.stats.over_read_errors += 1;
                    Ok(())
                } else if self.rail.fired() {
                    Ok(())
                } else if n == 1 && self.model.may_fail(id, lba) {
                    self.stats.local_read_errors += 1;
                    Ok(())
                } else if n > 1 && (lba..lba + n).any(|b| self.model.may_fail(id, b)) {
                    // Block by block: exactly the lost ones may fail.
                    (lba..lba + n).try_for_each(|b| self.read_check(id, b, 1))
                } else {
                    Err(fail(
                        FailureKind::ReadError,
                        at,
                        format!("read of LUN {id} LBA {lba}+{n} failed within tolerance: {e}"),
                    ))
                }
            }
        }
    }

    /// Reads every block the model knows (in runs) and a few never-written ones.
    pub(crate) fn verify_all(&mut self) -> StepResult {
        if self.pool.is_none() || self.dead {
            return Ok(());
        }
        self.stats.verify_passes += 1;
        let mut blocks = self.model.known_blocks();
        let mut src = Source::seeded(self.shape.seed ^ self.step as u64);
        for l in self.model.luns() {
            for _ in 0..4 {
                blocks.push((l.id, src.below(l.blocks)));
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        let mut i = 0;
        while i < blocks.len() {
            let (lun, start) = blocks[i];
            let mut n = 1u64;
            while i + (n as usize) < blocks.len()
                && blocks[i + n as usize] == (lun, start + n)
                && n < 32
            {
                n += 1;
            }
            self.read_check(lun, start, n)?;
            i += n as usize;
        }
        Ok(())
    }

    /// Fails again every device in a slot the pool records failed that answers (it came back,
    /// [`Step::Return`]): see the module docs on what over tolerance may leave as a source.
    fn fail_returned(&mut self) {
        for s in 0..usize::from(self.shape.disks) {
            if self.pool().array().member(s).map(Member::state) != Some(DiskState::Failed) {
                continue;
            }
            if let Some((id, h)) = self.disk_handle(s)
                && !self.device_failed.contains(&id)
            {
                h.inject(Fault::Fail);
                self.device_failed.insert(id);
                self.may_fail.insert(id);
            }
        }
    }

    /// Deliberately exceeds the tolerance (see [`Step::Exceed`]).
    #[allow(clippy::unnecessary_wraps, reason = "one signature for every step")]
    fn exceed(&mut self, silent: bool, pick: u32) -> StepResult {
        let t = self.shape.tolerance();
        let disks = usize::from(self.shape.disks);
        if silent {
            // The same member blocks on t + 1 members: one stripe with more damage than
            // redundancy.
            let mut lba = None;
            for k in 0..disks {
                let s = (pick as usize + k) % disks;
                if let Some((_, b)) = self.target(s as u8, pick, false) {
                    lba = Some(b);
                    break;
                }
            }
            let Some(lba) = lba else {
                return Ok(());
            };
            let mut hit = 0;
            for k in 0..disks {
                if hit > t {
                    break;
                }
                let s = (pick as usize + k) % disks;
                let failed = self.device_failed.clone();
                if let Some(d) = self.pool().array_mut().disk_mut(s)
                    && !failed.contains(&d.id())
                {
                    for b in lba..lba + 4 {
                        if b < d.block_count() {
                            d.handle().inject(Fault::BitRot {
                                lba: Some(b),
                                bits: 8,
                            });
                        }
                    }
                    hit += 1;
                }
            }
            if hit == 0 {
                return Ok(());
            }
            self.fault("exceed_silent");
        } else {
            let mut damaged = self.damaged();
            for k in 0..disks {
                if damaged.len() > t {
                    break;
                }
                let s = (pick as usize + k) % disks;
                if damaged.contains(&(s as u8)) {
                    continue;
                }
                if let Some(d) = self.pool().array_mut().disk_mut(s) {
                    d.handle().inject(Fault::Fail);
                    let id = d.id();
                    self.device_failed.insert(id);
                    self.may_fail.insert(id);
                    damaged.insert(s as u8);
                }
            }
            self.fail_returned();
            self.fault("exceed_failures");
        }
        self.over = true;
        self.stats.over = true;
        Ok(())
    }

    /// What import resynced as behind ([`raidcore::pool::ImportReport::behind`]): the disk an
    /// older copy was put back on (`put_back`: its id, and whether it held other silent
    /// damage, which stays counted) holds no more stale content once resynced, and no other
    /// member may be taken for one (nothing else missed writes).
    fn check_behind(
        &mut self,
        pool: &mut CampPool,
        behind: &[u8],
        put_back: Option<(u32, bool)>,
        at: usize,
    ) -> StepResult {
        for &slot in behind {
            let id = pool.array_mut().disk_mut(usize::from(slot)).map(|d| d.id());
            if let Some((id, damaged)) = put_back.filter(|p| Some(p.0) == id) {
                if !damaged {
                    self.silent.remove(&id);
                }
                self.stats.behind_resynced += 1;
            } else if put_back.is_none()
                && !self.over
                && !id.is_some_and(|id| self.silent.get(&id).is_some_and(|s| s.label))
            {
                // (With a copy put back, the slot may hold a spare now: the copy's disk
                // failed during the import. A disk whose root ring took damage may look like
                // one that missed checkpoints: a rotten newest root over one a torn checkpoint
                // never wrote is what a disk that missed both shows. Resyncing it costs a
                // rebuild, not data.)
                return Err(fail(
                    FailureKind::OpError,
                    at,
                    format!("import resynced slot {slot} as behind, but it missed nothing"),
                ));
            }
        }
        Ok(())
    }

    /// Power is off on every disk: take the disks, power them on, import them (shuffled, maybe
    /// with a stale disk from the graveyard) and check every block.
    #[expect(
        clippy::too_many_lines,
        reason = "the power-cut step: crash, offer disks, import, check the report; to split"
    )]
    fn crash(&mut self, shuffle: u32) -> StepResult {
        let at = self.step;
        self.rail.cut_all();
        self.rail.take_fired();
        self.stats.power_cuts += 1;
        self.model.power_cut();
        let Some(pool) = self.pool.take() else {
            return Ok(());
        };
        let ((members, spares, mem), log) = pool.into_parts_with_log_device();
        self.rail.restore_all();
        let mut disks: Vec<CampDisk> = members
            .into_iter()
            .flatten()
            .chain(spares)
            .chain(log)
            .collect();
        let put_back = self.put_back.take().map(|(id, medium, damaged)| {
            if let Some(d) = disks.iter_mut().find(|d| d.id() == id) {
                d.put_back(medium);
            }
            (id, damaged)
        });
        let mut src = Source::seeded(self.shape.seed ^ u64::from(shuffle) << 20);
        // Disks the pool dropped while the power was off are still in the enclosure; one
        // pulled earlier may be pushed back in by mistake, but not past tolerance: with the
        // current members gone it could be the only source, and a stale disk alone carries a
        // label naming itself in sync (see `fail_returned`).
        let back: Vec<Dropped> = {
            let mut y = self
                .yard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut back = Vec::new();
            while let Some(i) = y.iter().position(|d| d.during_cut) {
                back.push(y.remove(i));
            }
            if !self.over && !y.is_empty() && src.chance(500) {
                let i = src.below(y.len() as u64) as usize;
                back.push(y.remove(i));
                self.stats.stale_disks_offered += 1;
            }
            back
        };
        self.rail.restore_all();
        for b in back {
            // Either outcome is right for them: member again (the cut kept the pool from
            // recording the change) or refused as stale.
            self.may_fail.insert(b.id);
            disks.push(CampDisk::new(
                b.id,
                b.disk,
                &self.rail,
                &self.yard,
                self.data_start,
            ));
        }
        for i in (1..disks.len()).rev() {
            let j = src.below(i as u64 + 1) as usize;
            disks.swap(i, j);
        }
        let ids: Vec<u32> = disks.iter().map(CampDisk::id).collect();
        if self.trace {
            for d in &mut disks {
                let sb = raidcore::pool::read_label(d);
                eprintln!(
                    "  import disk id {}: powered {} failed {} superblock {:?}",
                    d.id(),
                    d.handle().is_powered(),
                    d.handle().is_failed(),
                    sb.map(|s| (
                        s.generation,
                        s.role,
                        s.members.iter().map(|m| m.state).collect::<Vec<_>>()
                    ))
                );
            }
        }
        let opts = ImportOptions {
            config: self.cfg,
            skip_refused: true,
            force: false,
            rewind: false,
        };
        self.stats.imports += 1;
        match CampPool::import(disks, opts, mem) {
            Ok((mut pool, report)) => {
                if self.trace {
                    eprintln!("  import report: {report:?}");
                }
                self.check_behind(&mut pool, &report.behind, put_back, at)?;
                for (idx, why) in &report.refused {
                    let id = ids.get(usize::from(*idx)).copied().unwrap_or(u32::MAX);
                    if self.may_fail.contains(&id) || self.silent.contains_key(&id) {
                        self.stats.disks_refused += 1;
                    } else if !self.over {
                        return Err(fail(
                            FailureKind::DiskRefused,
                            at,
                            format!("import refused a good disk (id {id}): {why}"),
                        ));
                    }
                }
                pool.set_time(self.time);
                self.pool = Some(pool);
            }
            Err(e) => {
                if self.over {
                    self.stats.over_import_refused += 1;
                    self.dead = true;
                    return Ok(());
                }
                return Err(fail(
                    FailureKind::ImportFailed,
                    at,
                    format!("import after a power cut failed within tolerance: {e}"),
                ));
            }
        }
        self.scrub = None;
        self.session_ok_bytes = 0;
        self.session_maybe_bytes = 0;
        // LUN operations the cut interrupted: the pool's LUN table decides.
        for p in std::mem::take(&mut self.pending_luns) {
            let found = self.pool().lun_by_name(&p.name);
            match (p.create, found, p.id) {
                (true, Some(id), _) => self.model.add_lun(id, &p.name, p.blocks),
                (false, None, Some(id)) => self.model.remove_lun(id),
                _ => {}
            }
        }
        // Every model LUN must exist with its size.
        let luns: Vec<(u16, String, u64)> = self
            .model
            .luns()
            .iter()
            .map(|l| (l.id, l.name.clone(), l.blocks))
            .collect();
        for (id, name, blocks) in luns {
            let info = self.pool().luns().find(|i| i.id == id);
            match info {
                Some(i) if i.name.as_str() == name && i.blocks == blocks => {}
                other => {
                    if self.over {
                        self.model.remove_lun(id);
                        continue;
                    }
                    return Err(fail(
                        FailureKind::WrongData,
                        at,
                        format!(
                            "after import LUN {id} ({name}, {blocks} blocks) is {:?}",
                            other.map(|i| (i.name, i.blocks))
                        ),
                    ));
                }
            }
        }
        self.verify_all()?;
        self.model.settle_after_import();
        Ok(())
    }

    /// Checks after every step: transitions (rebuilds, scrubs), health and counters.
    #[expect(
        clippy::too_many_lines,
        reason = "checks every model invariant after a step; to split"
    )]
    fn observe(&mut self) -> StepResult {
        let at = self.step;
        if self.dead || self.pool.is_none() {
            return Ok(());
        }
        // Lost and misdirected writes that happened.
        let armed: Vec<(u32, u32)> = self.armed.iter().map(|(&k, &v)| (k, v)).collect();
        for (id, before) in armed {
            let mut done = None;
            for s in 0..usize::from(self.shape.disks) {
                if let Some(d) = self.pool().array_mut().disk_mut(s)
                    && d.id() == id
                {
                    done = Some(d.silent_done);
                }
            }
            match done {
                Some(n) if n > before => {
                    self.armed.remove(&id);
                    self.note_silent(id, None, true);
                }
                Some(_) => {}
                // The disk left the pool: its armed fault can no longer hurt.
                None => {
                    self.armed.remove(&id);
                }
            }
        }
        let st = self.pool().status();
        let states: Vec<DiskState> = st.disks.iter().map(|d| d.state).collect();
        // Slots out of sync while another member holds silent damage are tainted.
        let silent_slots: BTreeSet<u8> = {
            let mut v = BTreeSet::new();
            for s in 0..usize::from(self.shape.disks) {
                let id = self.pool().array_mut().disk_mut(s).map(|d| d.id());
                if let Some(id) = id
                    && (self.silent.contains_key(&id) || self.armed.contains_key(&id))
                {
                    v.insert(s as u8);
                }
            }
            v
        };
        for (s, &state) in states.iter().enumerate() {
            let slot = s as u8;
            let prev = self
                .prev_states
                .get(s)
                .copied()
                .unwrap_or(DiskState::Online);
            if state != DiskState::Online && silent_slots.iter().any(|&x| x != slot) {
                self.tainted.insert(slot);
            }
            if prev != DiskState::Rebuilding && state == DiskState::Rebuilding {
                self.stats.rebuilds_started += 1;
            }
            if prev != DiskState::Online && state == DiskState::Online {
                if prev == DiskState::Rebuilding {
                    self.stats.rebuilds_done += 1;
                }
                let tainted = self.tainted.remove(&slot);
                if (prev == DiskState::Failed || tainted)
                    && let Some(id) = self.pool().array_mut().disk_mut(s).map(|d| d.id())
                {
                    self.note_silent(id, None, true);
                }
            }
            if state == DiskState::Online && prev == DiskState::Online {
                // A member in sync the whole time carries no taint.
                self.tainted.remove(&slot);
            }
        }
        self.prev_states = states;
        if self.scrub.is_some() {
            let online = self.online_ids();
            self.scrub_read.retain(|id| online.contains(id));
        }
        // Scrub completion.
        if let Some((started, clean)) = self.scrub
            && st.scrub.is_none()
        {
            self.scrub = None;
            self.stats.scrubs_done += 1;
            if self.trace {
                eprintln!(
                    "  scrub done: repaired {} unrepairable {} (clean at start: {clean})",
                    st.scrub_repaired, st.scrub_unrepairable
                );
            }
            if clean && !self.over && (st.scrub_repaired > 0 || st.scrub_unrepairable > 0) {
                return Err(fail(
                    FailureKind::ScrubDirty,
                    at,
                    format!(
                        "a scrub of a pool without silent damage repaired {} and could not \
                         repair {} blocks",
                        st.scrub_repaired, st.scrub_unrepairable
                    ),
                ));
            }
            // A pass that could not repair everything leaves the damage where it was; a pass
            // heals only the members it read (a failed one may come back with its damage).
            if st.scrub_unrepairable == 0 {
                let read = core::mem::take(&mut self.scrub_read);
                self.silent
                    .retain(|id, s| s.since >= started || !read.contains(id));
            }
        }
        if self.over {
            return Ok(());
        }
        // Health.
        let not_online = st
            .disks
            .iter()
            .filter(|d| d.state != DiskState::Online)
            .count();
        let health_ok = match st.health {
            Health::Faulted | Health::Suspended => false,
            Health::Degraded => not_online > 0,
            Health::Online => not_online == 0,
        };
        if !health_ok {
            return Err(fail(
                FailureKind::Health,
                at,
                format!(
                    "health {} with {not_online} members out of sync, within tolerance",
                    st.health.name()
                ),
            ));
        }
        if st.bad_ranges > 0 && self.local.is_some() {
            self.check_listed_loss(at)?;
        } else if st.bad_ranges > 0 {
            return Err(fail(
                FailureKind::Health,
                at,
                format!("{} LBA ranges lost within tolerance", st.bad_ranges),
            ));
        }
        for d in &st.disks {
            if d.state == DiskState::Failed && d.present {
                let id = self
                    .pool()
                    .array_mut()
                    .disk_mut(usize::from(d.slot))
                    .map(|x| x.id());
                if let Some(id) = id
                    && !self.may_fail.contains(&id)
                    && !self.silent.contains_key(&id)
                {
                    return Err(fail(
                        FailureKind::Health,
                        at,
                        format!(
                            "member {} (disk id {id}) failed without a fault that could fail it \
                             (errors {:?})",
                            d.slot, d.errors
                        ),
                    ));
                }
            }
        }
        let s = self.pool().stats();
        let lo = self.session_ok_bytes;
        let hi = lo + self.session_maybe_bytes;
        if s.session_client_bytes < lo || s.session_client_bytes > hi {
            return Err(fail(
                FailureKind::Counters,
                at,
                format!(
                    "session client bytes {} outside [{lo}, {hi}] acknowledged",
                    s.session_client_bytes
                ),
            ));
        }
        if s.free_segments > s.segments || s.live_bytes > u64::from(s.segments) * s.segment_bytes {
            return Err(fail(
                FailureKind::Counters,
                at,
                format!(
                    "segments {} free {} live bytes {} segment bytes {}",
                    s.segments, s.free_segments, s.live_bytes, s.segment_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The end of a history: check everything, shut down cleanly, import, check again.
    pub(crate) fn epilogue(&mut self) -> StepResult {
        if self.dead || self.pool.is_none() {
            return Ok(());
        }
        self.step += 1;
        self.rail.new_step();
        let at = self.step;
        self.verify_all().map_err(|mut f| {
            f.what = format!("final check: {}", f.what);
            f
        })?;
        // The final reads may write (healing, a member failure noticed): an armed cut can fire
        // during them, and then the disks are off until a crash import.
        if self.rail.take_fired() {
            self.crash(self.cut_shuffle)?;
            if self.dead || self.pool.is_none() {
                return Ok(());
            }
        }
        // An armed cut that never fired is disarmed: the shutdown is orderly.
        self.rail.disarm();
        let Some(pool) = self.pool.take() else {
            return Ok(());
        };
        match pool.shutdown_with_log_device() {
            Ok(((members, spares, mem), log)) => {
                self.model.flush_ok();
                let disks: Vec<CampDisk> = members
                    .into_iter()
                    .flatten()
                    .chain(spares)
                    .chain(log)
                    .collect();
                let opts = ImportOptions {
                    config: self.cfg,
                    skip_refused: true,
                    force: false,
                    rewind: false,
                };
                self.stats.imports += 1;
                match CampPool::import(disks, opts, mem) {
                    Ok((pool, _)) => {
                        self.pool = Some(pool);
                        self.verify_all().map_err(|mut f| {
                            f.what = format!("after a clean shutdown and import: {}", f.what);
                            f
                        })
                    }
                    Err(_) if self.over => {
                        self.stats.over_import_refused += 1;
                        Ok(())
                    }
                    Err(e) => Err(fail(
                        FailureKind::ImportFailed,
                        at,
                        format!("import after a clean shutdown failed: {e}"),
                    )),
                }
            }
            Err(_) if self.over => Ok(()),
            Err(e) => Err(fail(
                FailureKind::OpError,
                at,
                format!("shutdown failed within tolerance: {e}"),
            )),
        }
    }
}
