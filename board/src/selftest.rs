//! A RAID-6 self-test over real member devices, for a board's first power-up and for the QEMU
//! image: write seeded data with P/Q parity across the members, fail one member, rebuild its
//! content onto a hot spare from the survivors, and verify every block of every member.
//!
//! This is the parity-level test (the core's [`raidcore::parity`] over raw members). When the
//! pool layer lands, the pool-level test (create a RAID-6 pool, write from a seed, fail a disk,
//! rebuild onto the spare, verify) takes the same inputs (members, spare, seed, a clock) and
//! returns the same [`Report`], so the firmware and the QEMU image switch by changing the one
//! call.
//!
//! ## Layout
//! `n` members, `n - 2` data strips per stripe plus P and Q; stripe `s` occupies blocks
//! `s * strip_blocks ..` of every member, and the parity columns rotate (P on member
//! `n - 1 - s % n`, Q on the next one), so a failed member loses data strips, P strips and Q
//! strips and the rebuild exercises three recovery cases. Data bytes come from a SplitMix64
//! stream keyed by (seed, stripe, column), so the verify pass regenerates them without storing
//! anything.

use heapless::Vec;
use raidcore::parity::{self, ParityError, Scheme};
use raidcore_hal::{BlockDevice, ErrorKind};

/// Most members the self-test handles (data + P + Q).
pub const MAX_MEMBERS: usize = 16;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// Seed of the data stream.
    pub seed: u64,
    /// Stripes to write.
    pub stripes: u64,
    /// Strip size in device blocks (a strip is `strip_blocks * block_size` bytes, a multiple of
    /// 8 bytes).
    pub strip_blocks: u64,
    /// The member that "fails" and is rebuilt onto the spare.
    pub failed: usize,
}

/// Measurements of a passed run. Ticks come from the caller's clock (any monotonic counter:
/// instructions under QEMU `-icount`, a cycle counter, or nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Report {
    /// Members in the set (data + P + Q columns).
    pub members: usize,
    /// Stripes written and rebuilt.
    pub stripes: u64,
    /// Data bytes written (parity not counted).
    pub data_bytes: u64,
    /// Bytes written to members, parity included.
    pub bytes_written: u64,
    /// Bytes rebuilt onto the spare.
    pub bytes_rebuilt: u64,
    /// Device blocks read back and compared byte for byte (every block of every member and the
    /// spare that the test wrote).
    pub blocks_verified: u64,
    /// Clock ticks spent in P/Q generation (`parity::gen_pq`).
    pub ticks_gen_pq: u64,
    /// Clock ticks of the whole write phase (data generation, P/Q, device writes).
    pub ticks_write: u64,
    /// Clock ticks spent in reconstruction (`parity::reconstruct`).
    pub ticks_reconstruct: u64,
    /// Clock ticks of the whole rebuild phase (reads, reconstruction, spare writes).
    pub ticks_rebuild: u64,
}

/// Why the self-test failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SelfTestError<E> {
    /// Fewer than 4 or more than [`MAX_MEMBERS`] members, members (or the spare) of different
    /// block sizes, `failed` out of range, a strip of zero bytes or not a multiple of 8, the
    /// stripes do not fit on the smallest device, or `work` is shorter than
    /// [`work_bytes`].
    Config,
    /// The parity code refused a call (a bug: the shapes were checked before).
    Parity(ParityError),
    /// A device failed. `member` is the member index, or `members.len()` for the spare.
    Device {
        /// Which device.
        member: usize,
        /// Its kind.
        kind: ErrorKind,
        /// Its error.
        error: E,
    },
    /// A block read back differs from what was written (or, on the spare, from what the
    /// failed member held).
    Mismatch {
        /// Which device (`members.len()` for the spare).
        member: usize,
        /// The first differing block, in device blocks.
        lba: u64,
    },
}

/// Bytes of work buffer the self-test needs: one strip per member plus one for read-back.
pub fn work_bytes(members: usize, strip_bytes: usize) -> usize {
    (members + 1).saturating_mul(strip_bytes)
}

/// Runs the self-test on `members` (data + P + Q columns, at least 4) with `spare` as the hot
/// spare that replaces member `cfg.failed`. `work` is caller memory of at least
/// [`work_bytes`]`(members.len(), strip bytes)`; `clock` returns a monotonic tick count.
///
/// Member `cfg.failed` is only written (in the write phase), never read: the rebuild works from
/// the others alone. On success every stripe is on the survivors and the spare, and the failed
/// member's old content is still on it (a real pool would now retire it).
#[expect(
    clippy::too_many_lines,
    reason = "one scripted self-test sequence; split with the board work"
)]
pub fn raid6_rebuild<D: BlockDevice>(
    members: &mut [D],
    spare: &mut D,
    cfg: &Config,
    work: &mut [u8],
    clock: &mut dyn FnMut() -> u64,
) -> Result<Report, SelfTestError<D::Error>> {
    let n = members.len();
    let bs = spare.block_size();
    let strip = usize::try_from(cfg.strip_blocks)
        .map_err(|_| SelfTestError::Config)?
        .saturating_mul(bs.bytes());
    let span = cfg
        .stripes
        .checked_mul(cfg.strip_blocks)
        .ok_or(SelfTestError::Config)?;
    let fits = |d: &D| d.block_size() == bs && d.block_count() >= span;
    if !(4..=MAX_MEMBERS).contains(&n)
        || cfg.failed >= n
        || strip == 0
        || !strip.is_multiple_of(parity::STRIP_ALIGN)
        || !members.iter().all(fits)
        || !fits(spare)
        || work.len() < work_bytes(n, strip)
    {
        return Err(SelfTestError::Config);
    }
    let (cols, check) = work.split_at_mut(n * strip);
    let check = check.get_mut(..strip).ok_or(SelfTestError::Config)?;
    let mut report = Report {
        members: n,
        stripes: cfg.stripes,
        ..Report::default()
    };

    info!(
        "self-test: {} members, {} stripes of {} bytes per strip",
        n, cfg.stripes, strip
    );

    // Write phase.
    let t0 = clock();
    for s in 0..cfg.stripes {
        fill_data(cfg.seed, s, n, cols, strip);
        let t = clock();
        gen_pq(n, cols, strip)?;
        report.ticks_gen_pq += clock().wrapping_sub(t);
        let lba = s * cfg.strip_blocks;
        for (col, data) in cols.chunks_exact(strip).enumerate() {
            let m = member_of(s, col, n);
            let dev = members.get_mut(m).ok_or(SelfTestError::Config)?;
            dev.write(lba, data).map_err(|e| dev_err(m, e))?;
        }
        report.data_bytes += ((n - 2) * strip) as u64;
        report.bytes_written += (n * strip) as u64;
    }
    for (m, dev) in members.iter_mut().enumerate() {
        dev.flush().map_err(|e| dev_err(m, e))?;
    }
    report.ticks_write = clock().wrapping_sub(t0);
    info!(
        "self-test: wrote {} bytes; member {} fails",
        report.bytes_written, cfg.failed
    );

    // Rebuild phase: member `failed` is gone; recompute its strip of every stripe onto the spare.
    let t0 = clock();
    for s in 0..cfg.stripes {
        let lba = s * cfg.strip_blocks;
        let lost = column_of(s, cfg.failed, n);
        for (col, buf) in cols.chunks_exact_mut(strip).enumerate() {
            if col == lost {
                continue;
            }
            let m = member_of(s, col, n);
            let dev = members.get_mut(m).ok_or(SelfTestError::Config)?;
            dev.read(lba, buf).map_err(|e| dev_err(m, e))?;
        }
        let t = clock();
        {
            let mut columns: Vec<&mut [u8], MAX_MEMBERS> = cols.chunks_exact_mut(strip).collect();
            parity::reconstruct(&mut columns, Scheme::PQ, &[lost])
                .map_err(SelfTestError::Parity)?;
        }
        report.ticks_reconstruct += clock().wrapping_sub(t);
        let rebuilt = cols
            .chunks_exact(strip)
            .nth(lost)
            .ok_or(SelfTestError::Config)?;
        spare.write(lba, rebuilt).map_err(|e| dev_err(n, e))?;
        report.bytes_rebuilt += strip as u64;
    }
    spare.flush().map_err(|e| dev_err(n, e))?;
    report.ticks_rebuild = clock().wrapping_sub(t0);
    info!(
        "self-test: rebuilt {} bytes onto the spare",
        report.bytes_rebuilt
    );

    // Verify phase: the array as it now stands (spare in place of `failed`) holds exactly the
    // seeded data and its parity.
    for s in 0..cfg.stripes {
        fill_data(cfg.seed, s, n, cols, strip);
        gen_pq(n, cols, strip)?;
        let lba = s * cfg.strip_blocks;
        for (col, want) in cols.chunks_exact(strip).enumerate() {
            let m = member_of(s, col, n);
            let dev = if m == cfg.failed {
                &mut *spare
            } else {
                members.get_mut(m).ok_or(SelfTestError::Config)?
            };
            let who = if m == cfg.failed { n } else { m };
            dev.read(lba, check).map_err(|e| dev_err(who, e))?;
            let bad = check
                .chunks_exact(bs.bytes())
                .zip(want.chunks_exact(bs.bytes()))
                .position(|(a, b)| a != b);
            if let Some(i) = bad {
                return Err(SelfTestError::Mismatch {
                    member: who,
                    lba: lba + i as u64,
                });
            }
            report.blocks_verified += cfg.strip_blocks;
        }
    }
    info!(
        "self-test passed: {} blocks verified",
        report.blocks_verified
    );
    Ok(report)
}

fn dev_err<E: raidcore_hal::Error>(member: usize, error: E) -> SelfTestError<E> {
    SelfTestError::Device {
        member,
        kind: error.kind(),
        error,
    }
}

/// Member holding column `col` (0..n-2 data, n-2 = P, n-1 = Q) of stripe `s`.
fn member_of(s: u64, col: usize, n: usize) -> usize {
    let p = n - 1 - (s % n as u64) as usize;
    // Columns in member order starting right after P: Q, then D_0, D_1, ...
    let offset = if col == n - 2 {
        0
    } else if col == n - 1 {
        1
    } else {
        col + 2
    };
    (p + offset) % n
}

/// Column of stripe `s` that member `m` holds (inverse of [`member_of`]).
fn column_of(s: u64, m: usize, n: usize) -> usize {
    let p = n - 1 - (s % n as u64) as usize;
    match (m + n - p) % n {
        0 => n - 2,
        1 => n - 1,
        k => k - 2,
    }
}

/// Fills the data columns of stripe `s` from the seeded stream.
fn fill_data(seed: u64, s: u64, n: usize, cols: &mut [u8], strip: usize) {
    for (col, buf) in cols.chunks_exact_mut(strip).take(n - 2).enumerate() {
        let mut state = seed ^ s.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((col as u64) << 48);
        for word in buf.chunks_exact_mut(8) {
            word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
    }
}

/// Computes P and Q of the data columns into columns `n - 2` and `n - 1`.
fn gen_pq<E>(n: usize, cols: &mut [u8], strip: usize) -> Result<(), SelfTestError<E>> {
    let (data, parity_cols) = cols.split_at_mut((n - 2) * strip);
    let (p, q) = parity_cols.split_at_mut(strip);
    let strips: Vec<&[u8], MAX_MEMBERS> = data.chunks_exact(strip).collect();
    parity::gen_pq(&strips, p, q).map_err(SelfTestError::Parity)
}

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014):
/// a tiny seeded stream for test data, no state beyond one word.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_a_bijection() {
        for n in 4..=MAX_MEMBERS {
            for s in 0..(2 * n as u64) {
                let mut seen = [false; MAX_MEMBERS];
                for col in 0..n {
                    let m = member_of(s, col, n);
                    assert!(!seen[m], "n={n} s={s} col={col}");
                    seen[m] = true;
                    assert_eq!(column_of(s, m, n), col);
                }
            }
        }
    }
}

/// What to run in [`pool_raid6_rebuild`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolConfig {
    /// Seed of the data stream (also the pool's UUID).
    pub seed: u64,
    /// 4 KiB LUN blocks to write and verify.
    pub lun_blocks: u64,
    /// The member slot that fails and is rebuilt onto the spare.
    pub failed: usize,
    /// A flush after every this many block writes (and one at the end).
    pub flush_every: u64,
}

/// Why the pool-level self-test failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PoolTestError {
    /// The pool could not be created or imported (members, arena size, geometry).
    Open(raidcore::pool::OpenError),
    /// The LUN could not be created (too large for the members).
    Lun(raidcore::pool::LunError),
    /// A pool call failed.
    Io(raidcore::pool::IoError),
    /// Failing the member by hand was refused.
    Admin(raidcore::pool::AdminError),
    /// A LUN block read back differs from what was written (4 KiB LUN block).
    Mismatch {
        /// The LUN block.
        lba: u64,
    },
    /// The rebuild ended but the pool is not back to `Online`.
    NotHealthy,
}

/// The phases of [`pool_raid6_rebuild`], in order; its `probe` is called at the end of each
/// (the QEMU image reads its stack high-water mark there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Phase {
    /// `Pool::create` and `create_lun`.
    Create,
    /// The block writes and the flushes among them.
    Write,
    /// `Pool::import` after a power cut that followed the last flush.
    Import,
    /// `fail_disk` and the `maintenance` steps of the rebuild onto the spare.
    Rebuild,
    /// A scrub of the whole pool by `maintenance` steps.
    Scrub,
    /// Every block read back.
    Verify,
}

/// Measurements of a passed [`pool_raid6_rebuild`]. Ticks come from the caller's clock; each
/// `*_max` is the most one call took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolReport {
    /// Members in the pool.
    pub members: usize,
    /// Client bytes written.
    pub data_bytes: u64,
    /// Extent payload bytes stored after LZ4 (compare with `data_bytes`).
    pub bytes_stored: u64,
    /// Bytes written to members since import (parity, labels and intent log included).
    pub bytes_written: u64,
    /// Bytes written to members by the rebuild and repairs, since import.
    pub bytes_rebuilt: u64,
    /// Stripes rebuilt onto the spare.
    pub stripes_rebuilt: u64,
    /// Stripes scrubbed.
    pub stripes_scrubbed: u64,
    /// LUN blocks read back and compared.
    pub blocks_verified: u64,
    /// Ticks of all writes and flushes.
    pub ticks_write: u64,
    /// Most ticks of one `write` call (one 4 KiB block).
    pub ticks_write_max: u64,
    /// Most ticks of one `flush` call.
    pub ticks_flush_max: u64,
    /// Flushes made.
    pub flushes: u64,
    /// Ticks of `Pool::create` (with `create_lun`).
    pub ticks_create: u64,
    /// Ticks of `Pool::import` after the power cut.
    pub ticks_import: u64,
    /// Log items import replayed.
    pub items_replayed: u64,
    /// Ticks of all rebuild steps.
    pub ticks_rebuild: u64,
    /// `maintenance` calls of the rebuild.
    pub rebuild_steps: u64,
    /// Most ticks of one rebuild step.
    pub ticks_rebuild_step_max: u64,
    /// Most ticks of one scrub step.
    pub ticks_scrub_step_max: u64,
    /// Most ticks of one `read` call (one 4 KiB block).
    pub ticks_read_max: u64,
}

/// The arena [`pool_raid6_rebuild`] needs for `members` members, in bytes.
pub fn pool_memory_bytes(members: usize) -> usize {
    TestPool::<NoDisk>::memory_bytes(&crate::pico::pool_config(), members)
}

/// Runs `f`, adds its ticks to `*max` if it took longer than every call before. Never
/// inlined, so the pool call inside gets its own stack frame (the QEMU image measures the
/// stack below the self-test's frame).
#[inline(never)]
fn timed<T>(clock: &mut dyn FnMut() -> u64, max: &mut u64, f: impl FnOnce() -> T) -> (T, u64) {
    let t = clock();
    let r = f();
    let dt = clock().wrapping_sub(t);
    *max = (*max).max(dt);
    (r, dt)
}

/// Import options of a plain import: every disk must belong, nothing forced.
fn plain_import(config: raidcore::pool::PoolConfig) -> raidcore::pool::ImportOptions {
    raidcore::pool::ImportOptions {
        config,
        skip_refused: false,
        force: false,
        rewind: false,
    }
}

/// The pool-level self-test, in the RP2040 firmware's configuration ([`crate::pico`]):
/// creates a RAID-6 pool on blank `members` with `spare` as hot spare, writes
/// `cfg.lun_blocks` seeded 4 KiB blocks to one LUN (half of them compressible) with a flush
/// every `cfg.flush_every`, cuts the power after the last flush (nothing closed) and imports
/// the pool again from its disks, fails member `cfg.failed`, runs maintenance until the
/// rebuild onto the spare is done, scrubs, and reads every block back. `mem` is the pool's
/// arena, at least [`pool_memory_bytes`]; `clock` returns a monotonic tick count; `probe` is
/// called at the end of each [`Phase`].
pub fn pool_raid6_rebuild<D: BlockDevice>(
    members: impl IntoIterator<Item = D>,
    spare: D,
    cfg: &PoolConfig,
    mem: &mut [u8],
    clock: &mut dyn FnMut() -> u64,
    probe: &mut dyn FnMut(Phase),
) -> Result<PoolReport, PoolTestError> {
    let mut uuid = [0u8; 16];
    let mut s = cfg.seed;
    for c in uuid.chunks_exact_mut(8) {
        c.copy_from_slice(&splitmix64(&mut s).to_le_bytes());
    }
    let pcfg = crate::pico::pool_config();
    let mut rep = PoolReport::default();
    let t0 = clock();
    let mut pool =
        TestPool::<D>::create(members, [spare], pcfg, uuid, mem).map_err(PoolTestError::Open)?;
    let lun = pool
        .create_lun("selftest", cfg.lun_blocks)
        .map_err(PoolTestError::Lun)?;
    rep.ticks_create = clock().wrapping_sub(t0);
    rep.members = pool.status().disks.len();
    info!(
        "pool self-test: {} members, {} LUN blocks",
        rep.members, cfg.lun_blocks
    );
    probe(Phase::Create);

    let mut block = [0u8; 4096];
    let every = cfg.flush_every.max(1);
    for lba in 0..cfg.lun_blocks {
        fill_block(cfg.seed, lba, &mut block);
        let (r, dt) = timed(clock, &mut rep.ticks_write_max, || {
            pool.write(lun, lba, &block, false)
        });
        r.map_err(PoolTestError::Io)?;
        rep.ticks_write += dt;
        rep.data_bytes += 4096;
        if (lba + 1) % every == 0 || lba + 1 == cfg.lun_blocks {
            let (r, dt) = timed(clock, &mut rep.ticks_flush_max, || pool.flush());
            r.map_err(PoolTestError::Io)?;
            rep.ticks_write += dt;
            rep.flushes += 1;
        }
    }
    rep.bytes_stored = pool.stats().counters.extent_stored_bytes;
    probe(Phase::Write);

    // Power cut after the last flush: nothing closed, no checkpoint; import rolls forward.
    let (members, spares, mem) = pool.into_parts();
    let opts = plain_import(pcfg);
    let t0 = clock();
    let (mut pool, ir) =
        TestPool::<D>::import(members.into_iter().flatten().chain(spares), opts, mem)
            .map_err(PoolTestError::Open)?;
    rep.ticks_import = clock().wrapping_sub(t0);
    rep.items_replayed = ir.items_replayed;
    probe(Phase::Import);

    pool.fail_disk(cfg.failed).map_err(PoolTestError::Admin)?;
    loop {
        let (r, dt) = timed(clock, &mut rep.ticks_rebuild_step_max, || {
            pool.maintenance()
        });
        let step = r.map_err(PoolTestError::Io)?;
        rep.ticks_rebuild += dt;
        rep.rebuild_steps += 1;
        rep.stripes_rebuilt += step.rebuilt_stripes;
        if step.idle {
            break;
        }
    }
    if pool.status().health != raidcore::pool::Health::Online {
        return Err(PoolTestError::NotHealthy);
    }
    probe(Phase::Rebuild);

    pool.start_scrub();
    loop {
        let (r, _) = timed(clock, &mut rep.ticks_scrub_step_max, || pool.maintenance());
        let step = r.map_err(PoolTestError::Io)?;
        rep.stripes_scrubbed += step.scrubbed_stripes;
        if step.idle {
            break;
        }
    }
    probe(Phase::Scrub);

    let mut back = [0u8; 4096];
    for lba in 0..cfg.lun_blocks {
        fill_block(cfg.seed, lba, &mut block);
        let (r, _) = timed(clock, &mut rep.ticks_read_max, || {
            pool.read(lun, lba, &mut back)
        });
        r.map_err(PoolTestError::Io)?;
        if back != block {
            return Err(PoolTestError::Mismatch { lba });
        }
        rep.blocks_verified += 1;
    }
    probe(Phase::Verify);
    let st = pool.stats();
    rep.bytes_written = st.member_data_bytes + st.member_redundancy_bytes + st.member_raw_bytes;
    rep.bytes_rebuilt = st.member_repair_bytes;
    info!(
        "pool self-test passed: {} blocks verified",
        rep.blocks_verified
    );
    Ok(rep)
}

type TestPool<'m, D> = crate::pico::PicoPool<D, &'m mut [u8]>;

/// 4 KiB of seeded data for LUN block `lba`: noise in even blocks; in odd ones a seeded
/// 96-byte phrase over and over, which LZ4 shrinks (so both paths of the volume layer run).
fn fill_block(seed: u64, lba: u64, block: &mut [u8; 4096]) {
    let mut state = seed ^ lba.wrapping_mul(0xD1B5_4A32_D192_ED03);
    let period = if lba.is_multiple_of(2) {
        block.len()
    } else {
        96
    };
    let (phrase, rest) = block.split_at_mut(period);
    for word in phrase.chunks_exact_mut(8) {
        word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    for (b, p) in rest.iter_mut().zip(phrase.iter().cycle()) {
        *b = *p;
    }
}

/// A disk type for sizing the arena only (never instantiated).
#[derive(Debug)]
enum NoDisk {}

impl raidcore_hal::ErrorType for NoDisk {
    type Error = ErrorKind;
}

impl BlockDevice for NoDisk {
    fn block_size(&self) -> raidcore_hal::BlockSize {
        match *self {}
    }
    fn block_count(&self) -> u64 {
        match *self {}
    }
    fn read(&mut self, _: u64, _: &mut [u8]) -> Result<(), ErrorKind> {
        match *self {}
    }
    fn write(&mut self, _: u64, _: &[u8]) -> Result<(), ErrorKind> {
        match *self {}
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        match *self {}
    }
}
