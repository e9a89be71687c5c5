//! A read-only look at a stopped pool ([`Pool::peek`]): what its last checkpoint records,
//! read without writing anything to any disk.
//!
//! Import's first phases run as they do for [`Pool::import`] — read every superblock, place
//! the members, find the newest checkpoint root whose tables (LUN table, segment table, bad
//! list) read back intact — and stop there: no roll-forward of the log written since that
//! checkpoint, no intent-log replay, no resync, no membership change, no checkpoint, and
//! nothing healed (damaged copies found on the way are only read around). So what a [`Peek`]
//! shows is the state at the last checkpoint: writes after it (flushed or not) are not in
//! its LUN space figures, and the rebuild and scrub cursors are those it saved. A member whose
//! checkpoint roots are more than one behind (an older copy of its image) shows as rebuilding,
//! as import would set it ([`ImportReport::behind`]).

use raidcore_hal::BlockDevice;

use super::checkpoint::MapWalk;
use super::{ImportOptions, ImportReport, LunInfo, OpenError, Pool, PoolParts, Stats, Status};
use crate::raid::Geometry;

/// A pool as its last checkpoint records it, opened read-only by [`Pool::peek`]. It serves no
/// I/O and writes nothing; [`Peek::into_parts`] hands the disks back.
pub struct Peek<D, M, const N: usize, const L: usize, const P: usize, const S: usize> {
    pool: Pool<D, M, N, L, P, S>,
}

impl<D, M, const N: usize, const L: usize, const P: usize, const S: usize> core::fmt::Debug
    for Peek<D, M, N, L, P, S>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Peek").field("pool", &self.pool).finish()
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// Opens the pool on `disks` read-only, as far as its last checkpoint (see the module
    /// docs): the disks are only read. The report names the disks left out and the root's
    /// generation; its replay counts stay zero (nothing is replayed).
    ///
    /// # Errors
    /// As [`Pool::import`] before recovery: no pool, too many members missing, no intact
    /// root, a refused disk without `opts.skip_refused`.
    pub fn peek(
        disks: impl IntoIterator<Item = D>,
        opts: ImportOptions,
        mem: M,
    ) -> Result<(Peek<D, M, N, L, P, S>, ImportReport), OpenError> {
        let mut report = ImportReport::default();
        // A look replays nothing, so a missing log device holds nothing it needs.
        let mut pool = Self::open_members(disks, &opts, &mut report, mem, true)?;
        let (root, _, _) = pool.find_root(MapWalk::Skip)?;
        pool.ckpt.root_gen = root.root_gen;
        pool.counters = root.counters;
        pool.restore_rebuild(&root);
        // (In memory only: what the import would set rebuilding. Without reading the log it
        // knows the root complete only by a mark.)
        let marked = pool
            .io()
            .is_ok_and(|mut io| io.marked_since(root.log.next_stripe_seq));
        pool.note_behind(&root, marked, &mut report);
        report.root_gen = root.root_gen;
        Ok((Peek { pool }, report))
    }
}

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Peek<D, M, N, L, P, S>
{
    /// Health, member states (as the newest configuration records them, missing members
    /// failed), the saved rebuild and scrub cursors (a rebuild's progress reads 0 of 0: see
    /// [`Peek::rebuild_cursor`]).
    pub fn status(&self) -> Status {
        self.pool.status()
    }

    /// The saved rebuild cursor: member slot, next stripe, stripes in all.
    pub fn rebuild_cursor(&self) -> Option<(u8, u64, u64)> {
        let stripes = self.pool.array.geometry().stripes();
        self.pool.rebuild.map(|r| (r.disk, r.next_stripe, stripes))
    }

    /// Every LUN with its space use at the checkpoint.
    pub fn luns(&self) -> impl Iterator<Item = LunInfo> + '_ {
        self.pool.luns()
    }

    /// Counters at the checkpoint (the session figures are zero).
    pub fn stats(&mut self) -> Stats {
        self.pool.stats()
    }

    /// Capacity clients can fill, in bytes (see [`Pool::usable_bytes`]).
    pub fn usable_bytes(&self) -> u64 {
        self.pool.usable_bytes()
    }

    /// The pool's geometry.
    pub fn geometry(&self) -> Geometry {
        *self.pool.array.geometry()
    }

    /// Hands back the disks and the arena, having written nothing.
    pub fn into_parts(self) -> PoolParts<D, M, N> {
        self.pool.into_parts()
    }
}

#[cfg(test)]
mod tests {
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::pool::PoolConfig;
    use crate::raid::Level;
    use crate::raid::tests::RamDisk;

    type TestPool = Pool<RamDisk, Vec<u8>, 8, 4, 32, 8>;

    fn cfg() -> PoolConfig {
        PoolConfig {
            level: Level::Raid5,
            strip_bytes: 4096,
            max_extent_blocks: 8,
            zil_slots: 32,
            segment_stripes: 4,
            max_segments: 256,
            ..PoolConfig::default()
        }
    }

    /// A peek shows the last checkpoint (LUNs, what they held then) and changes no byte of
    /// any disk, missing member and writes after the checkpoint included.
    #[test]
    fn a_peek_shows_the_last_checkpoint_and_writes_nothing() {
        let c = cfg();
        let mem = vec![0u8; TestPool::memory_bytes(&c, 4)];
        let disks: Vec<RamDisk> = (0..4).map(|_| RamDisk::new(512, 40_000)).collect();
        let mut p = TestPool::create(disks, Vec::new(), c, [3; 16], mem).unwrap();
        let lun = p.create_lun("a", 1000).unwrap();
        p.write(lun, 0, &vec![7u8; 8 * 4096], false).unwrap();
        p.flush().unwrap();
        p.checkpoint().unwrap();
        // Flushed after the checkpoint: import would replay it, a peek does not.
        p.write(lun, 100, &[9u8; 4096], true).unwrap();
        let (members, _, mem) = p.into_parts();
        let mut all: Vec<RamDisk> = members.into_iter().flatten().collect();
        all.remove(1);
        let before: Vec<Vec<u8>> = all.iter().map(|d| d.data.clone()).collect();
        let opts = ImportOptions {
            config: cfg(),
            skip_refused: false,
            force: false,
            rewind: false,
        };
        let (mut peek, report) = TestPool::peek(all, opts, mem).unwrap();
        let st = peek.status();
        assert_eq!(st.health.name(), "degraded");
        assert_eq!(report.items_replayed, 0);
        let luns: Vec<LunInfo> = peek.luns().collect();
        assert_eq!(luns.len(), 1);
        assert_eq!(luns[0].logical_bytes, 8 * 4096, "as checkpointed");
        assert!(peek.stats().segments > 0);
        let (members, _, _) = peek.into_parts();
        let after: Vec<Vec<u8>> = members.into_iter().flatten().map(|d| d.data).collect();
        assert_eq!(after.len(), before.len());
        assert!(after == before, "a peek wrote to a disk");
    }
}
