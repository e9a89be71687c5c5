//! One step of a seed's history (a client operation, background work, a fault or a power cut),
//! its one-line text form, and the generator that draws steps.
//!
//! Steps name things by *picks* resolved at execution time (the n-th live LUN, an LBA reduced
//! into the LUN, the n-th recently written member block), so a history with steps removed (the
//! shrinker's work) still means something. Faults are checked against the level's tolerance when
//! they execute, not when they are drawn: a fault the pool could not survive at that moment is
//! skipped, so a shrunk history never turns into an over-tolerance one by accident.

use std::collections::BTreeMap;
use std::fmt;

use super::source::Source;

/// One step. LBAs and block counts of client operations are in 4 KiB LUN blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Write `blocks` blocks to the `lun`-th live LUN from `lba` (reduced into the LUN), with
    /// content tagged `tag`; `fua`: durable on return.
    Write {
        /// LUN pick.
        lun: u8,
        /// LBA pick.
        lba: u64,
        /// Blocks (1..=32).
        blocks: u32,
        /// Force unit access.
        fua: bool,
        /// Content tag (unique within a seed).
        tag: u32,
    },
    /// Read and check `blocks` blocks.
    Read {
        /// LUN pick.
        lun: u8,
        /// LBA pick.
        lba: u64,
        /// Blocks.
        blocks: u32,
    },
    /// Trim (unmap) `blocks` blocks.
    Trim {
        /// LUN pick.
        lun: u8,
        /// LBA pick.
        lba: u64,
        /// Blocks.
        blocks: u32,
    },
    /// Flush.
    Flush,
    /// A request the pool must refuse with a typed error, changing nothing (`kind` picks which).
    Invalid {
        /// Which bad request.
        kind: u8,
    },
    /// Create a LUN of `blocks` blocks.
    CreateLun {
        /// Size in blocks.
        blocks: u64,
    },
    /// Delete the `lun`-th live LUN.
    DeleteLun {
        /// LUN pick.
        lun: u8,
    },
    /// Advance the pool's clock.
    Tick {
        /// Time units.
        dt: u32,
    },
    /// Call `Pool::maintenance` up to `calls` times (rebuild, scrub, cleaning), stopping when idle.
    Maintenance {
        /// Calls.
        calls: u8,
    },
    /// Start a scrub pass.
    StartScrub,
    /// Check every block the model knows.
    VerifyAll,
    /// Member `slot` fails: `admin` by `Pool::fail_disk`, else the device itself stops answering.
    Fail {
        /// Member slot.
        slot: u8,
        /// Failed by hand rather than by the device.
        admin: bool,
    },
    /// The device in `slot` answers again (it was failed by the device fault).
    Return {
        /// Member slot.
        slot: u8,
    },
    /// The operator brings back failed member `slot` with the disk it held (`Pool::online`),
    /// which answers again first if the device had failed.
    Online {
        /// Member slot.
        slot: u8,
    },
    /// An older copy of a member's image: the first such step copies the medium of the disk
    /// in `slot`; the next one cuts power and puts that copy back in place of the disk it was
    /// taken of (if that disk is still a member online and the damage stays within tolerance),
    /// then imports with `shuffle` (as [`Step::PowerCut`]).
    StaleCopy {
        /// Member slot (for the copy).
        slot: u8,
        /// Import order (for the put-back).
        shuffle: u32,
    },
    /// A blank disk replaces failed member `slot`.
    Replace {
        /// Member slot.
        slot: u8,
    },
    /// A blank hot spare is added.
    AddSpare,
    /// The pool's log device breaks: `part` 0, it dies (and a flush at once finds it dead);
    /// 1, its two flush-mark slots can no longer be written; 2, one superblock copy can no
    /// longer be written (`copy`). Parts 1 and 2 are found whenever the pool next writes there.
    FailLog {
        /// What breaks.
        part: u8,
        /// Which superblock copy (part 2).
        copy: u8,
    },
    /// Latent sector errors on `blocks` member blocks of `slot` (a recently written block).
    Medium {
        /// Member slot.
        slot: u8,
        /// Block pick.
        pick: u32,
        /// Blocks.
        blocks: u8,
        /// Writes do not repair it (the member fails on the next write there).
        sticky: bool,
        /// In the label area (superblocks, roots, intent log) rather than the data area.
        label: bool,
    },
    /// Silent bit rot of one recently written member block.
    BitRot {
        /// Member slot.
        slot: u8,
        /// Block pick.
        pick: u32,
        /// Bits flipped.
        bits: u8,
        /// In the label area.
        label: bool,
    },
    /// The next data-area write of member `slot` is acknowledged and lost.
    LoseWrite {
        /// Member slot.
        slot: u8,
    },
    /// The next data-area write of member `slot` lands at another block.
    Misdirect {
        /// Member slot.
        slot: u8,
        /// Target pick.
        pick: u32,
    },
    /// The next `ops` operations of member `slot` fail with a retryable error.
    Transient {
        /// Member slot.
        slot: u8,
        /// Operations (the array retries 3 times).
        ops: u8,
    },
    /// Power is cut now (between operations); then the disks are imported (in an order and
    /// with a stale disk chosen by `shuffle`).
    PowerCut {
        /// Import order pick.
        shuffle: u32,
    },
    /// Power will be cut after `writes` more member writes in total (in the middle of some
    /// operation); import follows.
    ArmPowerCut {
        /// Member writes before the cut.
        writes: u32,
        /// Import order pick.
        shuffle: u32,
    },
    /// A local fault past one row's tolerance (the exact-loss oracle): after a flush and a
    /// checkpoint, latent sector errors on one member block row of one more member than the
    /// level survives (all copies of a mirrored block), under the extent holding a known
    /// block (`pick`) at byte `row` of its item (with `row`'s top bit, on one of them and
    /// the others failed by hand). The model marks lost exactly the blocks
    /// whose extents have bytes in that row's data strips; those may read as errors, every
    /// other block must read exactly, and the pool must stay online. No fault follows in the
    /// seed (power cuts do).
    Local {
        /// Known-block pick.
        pick: u32,
        /// Byte pick inside the extent's item.
        row: u32,
    },
    /// Deliberately exceed the level's tolerance: fail one member more than it survives
    /// (`silent` false), or rot the same member blocks on one member more than it survives.
    Exceed {
        /// Silent corruption rather than failures.
        silent: bool,
        /// Block pick.
        pick: u32,
    },
}

/// `name k=v …` into a map; checks the name.
pub(crate) fn key_values(line: &str, name: &str) -> Result<BTreeMap<String, String>, String> {
    let mut it = line.split_whitespace();
    if it.next() != Some(name) {
        return Err(format!("expected `{name}` in {line:?}"));
    }
    let mut kv = BTreeMap::new();
    for t in it {
        let (k, v) = t
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, got {t:?}"))?;
        kv.insert(k.to_string(), v.to_string());
    }
    Ok(kv)
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Write {
                lun,
                lba,
                blocks,
                fua,
                tag,
            } => write!(
                f,
                "write lun={lun} lba={lba} blocks={blocks} fua={} tag={tag}",
                u8::from(fua)
            ),
            Step::Read { lun, lba, blocks } => {
                write!(f, "read lun={lun} lba={lba} blocks={blocks}")
            }
            Step::Trim { lun, lba, blocks } => {
                write!(f, "trim lun={lun} lba={lba} blocks={blocks}")
            }
            Step::Flush => f.write_str("flush"),
            Step::Invalid { kind } => write!(f, "invalid kind={kind}"),
            Step::CreateLun { blocks } => write!(f, "create_lun blocks={blocks}"),
            Step::DeleteLun { lun } => write!(f, "delete_lun lun={lun}"),
            Step::Tick { dt } => write!(f, "tick dt={dt}"),
            Step::Maintenance { calls } => write!(f, "maintenance calls={calls}"),
            Step::StartScrub => f.write_str("scrub"),
            Step::VerifyAll => f.write_str("verify"),
            Step::Fail { slot, admin } => write!(f, "fail slot={slot} admin={}", u8::from(admin)),
            Step::Return { slot } => write!(f, "return slot={slot}"),
            Step::Replace { slot } => write!(f, "replace slot={slot}"),
            Step::Online { slot } => write!(f, "online slot={slot}"),
            Step::StaleCopy { slot, shuffle } => {
                write!(f, "stale_copy slot={slot} shuffle={shuffle}")
            }
            Step::AddSpare => f.write_str("add_spare"),
            Step::FailLog { part, copy } => write!(f, "fail_log part={part} copy={copy}"),
            Step::Medium {
                slot,
                pick,
                blocks,
                sticky,
                label,
            } => write!(
                f,
                "medium slot={slot} pick={pick} blocks={blocks} sticky={} label={}",
                u8::from(sticky),
                u8::from(label)
            ),
            Step::BitRot {
                slot,
                pick,
                bits,
                label,
            } => write!(
                f,
                "bitrot slot={slot} pick={pick} bits={bits} label={}",
                u8::from(label)
            ),
            Step::LoseWrite { slot } => write!(f, "lose slot={slot}"),
            Step::Misdirect { slot, pick } => write!(f, "misdirect slot={slot} pick={pick}"),
            Step::Transient { slot, ops } => write!(f, "transient slot={slot} ops={ops}"),
            Step::PowerCut { shuffle } => write!(f, "power_cut shuffle={shuffle}"),
            Step::ArmPowerCut { writes, shuffle } => {
                write!(f, "arm_power_cut writes={writes} shuffle={shuffle}")
            }
            Step::Exceed { silent, pick } => {
                write!(f, "exceed silent={} pick={pick}", u8::from(silent))
            }
            Step::Local { pick, row } => write!(f, "local pick={pick} row={row}"),
        }
    }
}

impl std::str::FromStr for Step {
    type Err = String;

    #[expect(clippy::too_many_lines, reason = "one arm per step kind")]
    fn from_str(line: &str) -> Result<Step, String> {
        let name = line.split_whitespace().next().unwrap_or("");
        let kv = key_values(line, name)?;
        let n = |k: &str| -> Result<u64, String> {
            kv.get(k)
                .ok_or_else(|| format!("{name}: missing {k}"))?
                .parse::<u64>()
                .map_err(|e| format!("{name}: {k}: {e}"))
        };
        let b = |k: &str| -> Result<bool, String> { Ok(n(k)? != 0) };
        Ok(match name {
            "write" => Step::Write {
                lun: n("lun")? as u8,
                lba: n("lba")?,
                blocks: n("blocks")? as u32,
                fua: b("fua")?,
                tag: n("tag")? as u32,
            },
            "read" => Step::Read {
                lun: n("lun")? as u8,
                lba: n("lba")?,
                blocks: n("blocks")? as u32,
            },
            "trim" => Step::Trim {
                lun: n("lun")? as u8,
                lba: n("lba")?,
                blocks: n("blocks")? as u32,
            },
            "flush" => Step::Flush,
            "invalid" => Step::Invalid {
                kind: n("kind")? as u8,
            },
            "create_lun" => Step::CreateLun {
                blocks: n("blocks")?,
            },
            "delete_lun" => Step::DeleteLun {
                lun: n("lun")? as u8,
            },
            "tick" => Step::Tick {
                dt: n("dt")? as u32,
            },
            "maintenance" => Step::Maintenance {
                calls: n("calls")? as u8,
            },
            "scrub" => Step::StartScrub,
            "verify" => Step::VerifyAll,
            "fail" => Step::Fail {
                slot: n("slot")? as u8,
                admin: b("admin")?,
            },
            "return" => Step::Return {
                slot: n("slot")? as u8,
            },
            "replace" => Step::Replace {
                slot: n("slot")? as u8,
            },
            "online" => Step::Online {
                slot: n("slot")? as u8,
            },
            "stale_copy" => Step::StaleCopy {
                slot: n("slot")? as u8,
                shuffle: n("shuffle")? as u32,
            },
            "add_spare" => Step::AddSpare,
            "fail_log" => Step::FailLog {
                part: n("part")? as u8,
                copy: n("copy")? as u8,
            },
            "medium" => Step::Medium {
                slot: n("slot")? as u8,
                pick: n("pick")? as u32,
                blocks: n("blocks")? as u8,
                sticky: b("sticky")?,
                label: b("label")?,
            },
            "bitrot" => Step::BitRot {
                slot: n("slot")? as u8,
                pick: n("pick")? as u32,
                bits: n("bits")? as u8,
                label: b("label")?,
            },
            "lose" => Step::LoseWrite {
                slot: n("slot")? as u8,
            },
            "misdirect" => Step::Misdirect {
                slot: n("slot")? as u8,
                pick: n("pick")? as u32,
            },
            "transient" => Step::Transient {
                slot: n("slot")? as u8,
                ops: n("ops")? as u8,
            },
            "power_cut" => Step::PowerCut {
                shuffle: n("shuffle")? as u32,
            },
            "arm_power_cut" => Step::ArmPowerCut {
                writes: n("writes")? as u32,
                shuffle: n("shuffle")? as u32,
            },
            "exceed" => Step::Exceed {
                silent: b("silent")?,
                pick: n("pick")? as u32,
            },
            "local" => Step::Local {
                pick: n("pick")? as u32,
                row: n("row")? as u32,
            },
            other => return Err(format!("unknown step {other:?}")),
        })
    }
}

impl Step {
    /// Whether the step is a fault (or a power cut): what the shrinker counts as "faults".
    #[must_use]
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Step::Fail { .. }
                | Step::FailLog { .. }
                | Step::Return { .. }
                | Step::Replace { .. }
                | Step::Online { .. }
                | Step::StaleCopy { .. }
                | Step::Medium { .. }
                | Step::BitRot { .. }
                | Step::LoseWrite { .. }
                | Step::Misdirect { .. }
                | Step::Transient { .. }
                | Step::PowerCut { .. }
                | Step::ArmPowerCut { .. }
                | Step::Exceed { .. }
                | Step::Local { .. }
        )
    }
}

/// What the generator may know of the pool when it draws the next step.
#[derive(Debug, Clone, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about the pool, each a yes or no"
)]
pub(crate) struct View {
    /// Live LUN sizes in blocks, in model order.
    pub luns: Vec<u64>,
    /// Member slots.
    pub slots: u8,
    /// Slots the pool has failed (or that are missing).
    pub failed: Vec<u8>,
    /// Slots whose device the campaign failed (and that may return).
    pub device_failed: Vec<u8>,
    /// The level's tolerance was deliberately exceeded.
    pub over: bool,
    /// Usable bytes of the pool (for LUN sizes).
    pub usable_blocks: u64,
    /// A local fault ([`Step::Local`]) happened.
    pub local: bool,
    /// Nothing is damaged, rebuilding or armed: a local fault's loss can be worked out.
    pub quiet: bool,
    /// The pool has a working log device.
    pub log_device: bool,
}

/// Draws steps for one seed.
#[derive(Debug)]
pub(crate) struct Generator {
    next_tag: u32,
    /// Sequential cursor per LUN index.
    seq: Vec<u64>,
    /// Recently written regions: (lun index, lba, blocks).
    recent: Vec<(u8, u64, u32)>,
    /// Step index at which to exceed the tolerance (over-tolerance seeds only).
    pub exceed_at: Option<u32>,
    exceed_silent: bool,
    /// Step index from which to inject a local fault once the pool is quiet
    /// ([`Generator::plan_local`]).
    local_from: Option<u32>,
    /// The local fault's picks.
    local_picks: (u32, u32),
    drawn: u32,
}

impl Generator {
    pub(crate) fn new(src: &mut Source<'_>, ops: u32) -> Self {
        // About 6 % of seeds deliberately exceed the tolerance once, in their second half.
        let exceed = src.chance(60);
        let exceed_silent = src.chance(500);
        let at = ops / 2 + src.below(u64::from(ops / 2).max(1)) as u32;
        Generator {
            next_tag: 1,
            seq: Vec::new(),
            recent: Vec::new(),
            exceed_at: exceed.then_some(at),
            exceed_silent,
            local_from: None,
            local_picks: (0, 0),
            drawn: 0,
        }
    }

    /// Plans a local fault ([`Step::Local`]) in every seed that does not exceed the
    /// tolerance, from a step between a tenth and three tenths of `ops` on (it strikes once
    /// the pool is quiet, which about 30 % of seeds reach), with picks drawn from `side` (not
    /// the history's own source, so the other steps of a seed stay what they were). The
    /// `chance` draw always passes; it stays so that the planned steps and picks, and the
    /// figures measured with them, do not move.
    pub(crate) fn plan_local(&mut self, side: &mut Source<'_>, ops: u32) {
        if self.exceed_at.is_none() && side.chance(1000) {
            self.local_from = Some(ops / 10 + side.below(u64::from(ops / 5).max(1)) as u32);
            self.local_picks = (side.pick(), side.pick());
        }
    }

    /// Whether a planned local fault waits for a quiet pool (the executor then says whether
    /// it is, in [`View::quiet`]).
    pub(crate) fn local_due(&self) -> bool {
        self.local_from.is_some_and(|at| self.drawn >= at)
    }

    /// The initial LUNs (1–3 of them).
    pub(crate) fn initial_luns(src: &mut Source<'_>, usable_blocks: u64) -> Vec<Step> {
        let n = src.range(1, 3);
        (0..n)
            .map(|_| Step::CreateLun {
                blocks: Self::lun_size(src, usable_blocks),
            })
            .collect()
    }

    fn lun_size(src: &mut Source<'_>, usable_blocks: u64) -> u64 {
        let cap = usable_blocks.max(16);
        let size = match src.weighted(&[30, 40, 20, 10]) {
            0 => src.range(16, 256),
            1 => src.range(256, 2048),
            2 => src.range(2048, 8192),
            // A two-level map: more leaf pages than the map cache holds.
            _ => src.range(8192, 40_000),
        };
        size.min(cap)
    }

    fn blocks(src: &mut Source<'_>) -> u32 {
        match src.weighted(&[45, 30, 17, 8]) {
            0 => 1,
            1 => src.range(2, 4) as u32,
            2 => src.range(5, 16) as u32,
            _ => src.range(17, 32) as u32,
        }
    }

    fn remember(&mut self, lun: u8, lba: u64, blocks: u32) {
        self.recent.push((lun, lba, blocks));
        if self.recent.len() > 24 {
            self.recent.remove(0);
        }
    }

    /// A region to read, trim or overwrite: recent 60 %, random otherwise.
    fn region(&mut self, src: &mut Source<'_>, v: &View) -> Option<(u8, u64, u32)> {
        if v.luns.is_empty() {
            return None;
        }
        if !self.recent.is_empty() && src.chance(600) {
            let (l, lba, b) = self.recent[src.below(self.recent.len() as u64) as usize];
            let blocks = src.range(1, u64::from(b)) as u32;
            return Some((l, lba + src.below(u64::from(b)), blocks));
        }
        let l = src.below(v.luns.len() as u64) as u8;
        let size = v.luns[l as usize];
        let blocks = Self::blocks(src).min(size as u32);
        Some((l, src.below(size), blocks))
    }

    fn slot(src: &mut Source<'_>, v: &View) -> u8 {
        src.below(u64::from(v.slots.max(1))) as u8
    }

    /// The next step.
    #[expect(
        clippy::too_many_lines,
        reason = "one weighted choice over every step kind"
    )]
    pub(crate) fn next(&mut self, src: &mut Source<'_>, v: &View) -> Step {
        let i = self.drawn;
        self.drawn += 1;
        if self.exceed_at == Some(i) && !v.over {
            return Step::Exceed {
                silent: self.exceed_silent,
                pick: src.pick(),
            };
        }
        if self.local_from.is_some_and(|at| i >= at) && !v.local && v.quiet && !v.luns.is_empty() {
            self.local_from = None;
            return Step::Local {
                pick: self.local_picks.0,
                row: self.local_picks.1,
            };
        }
        if v.luns.is_empty() {
            return Step::CreateLun {
                blocks: Self::lun_size(src, v.usable_blocks),
            };
        }
        self.seq.resize(v.luns.len(), 0);
        // Faults stop once the tolerance was exceeded on purpose: the rest checks that nothing
        // wrong is returned.
        let fault_w = u32::from(!v.over);
        let weights = [
            400,          // 0 write
            170,          // 1 read
            40,           // 2 trim
            80,           // 3 flush
            30,           // 4 tick
            60,           // 5 maintenance
            15,           // 6 scrub
            10,           // 7 create/delete LUN
            5,            // 8 verify all
            8,            // 9 invalid request
            15 * fault_w, // 10 fail
            8 * fault_w,  // 11 return
            7 * fault_w,  // 12 replace
            5 * fault_w,  // 13 add spare
            15 * fault_w, // 14 medium
            15 * fault_w, // 15 bit rot
            8 * fault_w,  // 16 lost write
            8 * fault_w,  // 17 misdirected write
            10 * fault_w, // 18 transient
            12,           // 19 power cut now
            12,           // 20 power cut during a later operation
            6 * fault_w,  // 21 online
            4 * fault_w,  // 22 an older copy of an image (taken, then put back)
        ];
        match src.weighted(&weights) {
            0 => {
                let tag = self.next_tag;
                self.next_tag += 1;
                let fua = src.chance(70);
                let (lun, lba, blocks) = if src.chance(500) {
                    // Sequential stream.
                    let l = src.below(v.luns.len() as u64) as u8;
                    let size = v.luns[l as usize];
                    let blocks = Self::blocks(src).min(size as u32);
                    let mut lba = self.seq[l as usize];
                    if lba + u64::from(blocks) > size {
                        lba = 0;
                    }
                    self.seq[l as usize] = lba + u64::from(blocks);
                    (l, lba, blocks)
                } else {
                    self.region(src, v).unwrap_or((0, 0, 1))
                };
                self.remember(lun, lba, blocks);
                Step::Write {
                    lun,
                    lba,
                    blocks,
                    fua,
                    tag,
                }
            }
            1 => {
                let (lun, lba, blocks) = self.region(src, v).unwrap_or((0, 0, 1));
                Step::Read { lun, lba, blocks }
            }
            2 => {
                let (lun, lba, blocks) = self.region(src, v).unwrap_or((0, 0, 1));
                Step::Trim { lun, lba, blocks }
            }
            3 => Step::Flush,
            4 => Step::Tick {
                dt: src.range(1, 500) as u32,
            },
            5 => Step::Maintenance {
                calls: src.range(1, 12) as u8,
            },
            6 => Step::StartScrub,
            7 => {
                if src.chance(500) {
                    Step::CreateLun {
                        blocks: Self::lun_size(src, v.usable_blocks),
                    }
                } else {
                    Step::DeleteLun {
                        lun: src.below(v.luns.len() as u64) as u8,
                    }
                }
            }
            8 => Step::VerifyAll,
            9 => Step::Invalid {
                kind: src.below(8) as u8,
            },
            // Only seeds with a working log device draw the extra choice.
            10 if v.log_device && src.chance(250) => Step::FailLog {
                part: src.below(3) as u8,
                copy: src.below(2) as u8,
            },
            10 => Step::Fail {
                slot: Self::slot(src, v),
                admin: src.chance(400),
            },
            11 => Step::Return {
                slot: if v.device_failed.is_empty() {
                    Self::slot(src, v)
                } else {
                    v.device_failed[src.below(v.device_failed.len() as u64) as usize]
                },
            },
            12 => Step::Replace {
                slot: if v.failed.is_empty() {
                    Self::slot(src, v)
                } else {
                    v.failed[src.below(v.failed.len() as u64) as usize]
                },
            },
            13 => Step::AddSpare,
            14 => Step::Medium {
                slot: Self::slot(src, v),
                pick: src.pick(),
                blocks: src.range(1, 4) as u8,
                sticky: src.chance(80),
                label: src.chance(150),
            },
            15 => Step::BitRot {
                slot: Self::slot(src, v),
                pick: src.pick(),
                bits: src.range(1, 16) as u8,
                label: src.chance(150),
            },
            16 => Step::LoseWrite {
                slot: Self::slot(src, v),
            },
            17 => Step::Misdirect {
                slot: Self::slot(src, v),
                pick: src.pick(),
            },
            18 => Step::Transient {
                slot: Self::slot(src, v),
                ops: src.range(1, 3) as u8,
            },
            19 => Step::PowerCut {
                shuffle: src.pick(),
            },
            20 => Step::ArmPowerCut {
                writes: src.range(1, 300) as u32,
                shuffle: src.pick(),
            },
            22 => Step::StaleCopy {
                slot: Self::slot(src, v),
                shuffle: src.pick(),
            },
            _ => Step::Online {
                slot: if v.failed.is_empty() {
                    Self::slot(src, v)
                } else {
                    v.failed[src.below(v.failed.len() as u64) as usize]
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_round_trips_through_text() {
        let mut src = Source::seeded(3);
        let mut g = Generator::new(&mut src, 1000);
        g.plan_local(&mut Source::seeded(4), 1000);
        let v = View {
            luns: vec![100, 5000],
            slots: 6,
            failed: vec![1],
            device_failed: vec![2],
            over: false,
            usable_blocks: 10_000,
            local: false,
            quiet: true,
            log_device: true,
        };
        let mut names = std::collections::BTreeSet::new();
        for _ in 0..5000 {
            let s = g.next(&mut src, &v);
            let line = s.to_string();
            names.insert(line.split_whitespace().next().unwrap().to_string());
            assert_eq!(line.parse::<Step>().unwrap(), s, "{line}");
        }
        assert!(names.len() >= 20, "{names:?}");
        assert!(
            names.contains("local") || g.exceed_at.is_some(),
            "{names:?}"
        );
    }
}
