//! The list of lost blocks (LBA ranges no copy or reconstruction of makes check): what a
//! rebuild, a scrub or a client's degraded read adds to it, and what leaves it again when a
//! member that was away comes back in sync and a listed extent reads back checking.

use raidcore_hal::BlockDevice;

use super::Pool;
use crate::error::IoError;
use crate::event::Event;
use crate::format::BadRange;

impl<D: BlockDevice, M: AsMut<[u8]>, const N: usize, const L: usize, const P: usize, const S: usize>
    Pool<D, M, N, L, P, S>
{
    /// The blocks of the extent at `addr` (`lun`, `lba`, `blocks`) the map still points at
    /// and that no copy or reconstruction makes check go on the unrecoverable list, one range
    /// per run of them; returns how many. Blocks rewritten since live in another extent, or in
    /// an open extent in RAM whose map entries are not set yet, and are not lost; a block whose
    /// entry holds its own CRC is read alone and listed only if it fails (the rest of a
    /// damaged uncompressed extent is not lost with it); any other block of the extent is
    /// listed (its item did not check whole, and it decodes only from the whole).
    pub(crate) fn record_lost_extent(
        &mut self,
        addr: u64,
        lun: u16,
        lba: u64,
        blocks: u32,
    ) -> Result<u64, IoError> {
        // A deleted LUN's extents are dead, and the blocks past a LUN's end (one shrunk,
        // or a deleted LUN's number reused) were not its: nothing of theirs is lost, and a
        // look into their map would load pages of a tree that is not there.
        let Ok(rec) = self.luns.live(lun) else {
            return Ok(0);
        };
        let end = lba.saturating_add(u64::from(blocks)).min(rec.blocks);
        let mut run: Option<(u64, u32)> = None;
        let mut listed = 0;
        for b in lba..end {
            let e = self.vol()?.map_get(lun, b)?;
            let held = self.streams.holding(lun, b).is_some();
            #[allow(unused_mut)]
            let mut live = e.valid && e.addr() == addr && !held;
            if live && e.block_crc {
                live = !self.vol()?.block_checks(lun, b, e)?;
            }
            // Deliberate bug for the fault campaign's self-test: rewritten blocks listed too.
            #[cfg(feature = "_mutate")]
            if crate::mutate::active(crate::mutate::Mutation::LossOverDeclared) {
                live |= e.valid;
            }
            match (&mut run, live) {
                (Some((_, n)), true) => *n += 1,
                (None, true) => run = Some((b, 1)),
                (Some(_), false) => {
                    if let Some((lba, blocks)) = run.take() {
                        self.list_lost(BadRange { lun, lba, blocks });
                        listed += u64::from(blocks);
                    }
                }
                (None, false) => {}
            }
        }
        if let Some((lba, blocks)) = run {
            self.list_lost(BadRange { lun, lba, blocks });
            listed += u64::from(blocks);
        }
        Ok(listed)
    }

    /// Lists `r` as lost; a full list is said in an event rather than dropped silently.
    fn list_lost(&mut self, r: BadRange) {
        if !self.luns.add_bad(r) {
            let BadRange { lun, lba, blocks } = r;
            self.array
                .events_mut()
                .push(Event::LossUnlisted { lun, lba, blocks });
        }
    }

    /// A client read found `lun`'s block `lba` lost (no copy or reconstruction of it checked,
    /// or more of its rows were unreadable than the level tolerates): it goes on the list, with
    /// the blocks of its extent that fail too ([`Self::record_lost_extent`]), as a rebuild or
    /// scrub would list them. Called only once the read is known not to have met a host
    /// condition (which suspends the pool and loses nothing).
    pub(crate) fn list_lost_block(&mut self, lun: u16, lba: u64) -> Result<(), IoError> {
        let e = self.vol()?.map_get(lun, lba)?;
        if !e.valid {
            return Ok(());
        }
        let first = lba.saturating_sub(u64::from(e.index));
        self.record_lost_extent(e.addr(), lun, first, u32::from(e.blocks))
            .map(|_| ())
    }

    /// After a member came back in sync: the listed blocks that read back checking now (their
    /// rows lay on that member) leave the list; the rest stay. Each range is walked once, in
    /// LUN and LBA order; a block whose entry holds its own CRC is read alone, any other
    /// extent is loaded once.
    pub(crate) fn recheck_lost(&mut self) -> Result<(), IoError> {
        let mut cursor = (0u16, 0u64);
        while let Some(r) = self.luns.next_bad_from(cursor.0, cursor.1) {
            let mut verdict: Option<(u64, bool)> = None;
            for lba in r.lba..r.end() {
                let mut vol = self.vol()?;
                let e = vol.map_get(r.lun, lba)?;
                if !e.valid {
                    continue;
                }
                let ok = match verdict {
                    Some((addr, ok)) if addr == e.addr() && !e.block_crc => ok,
                    _ => {
                        let ok = vol.block_checks(r.lun, lba, e)?;
                        verdict = Some((e.addr(), ok));
                        ok
                    }
                };
                if ok {
                    self.luns.forget_bad(r.lun, lba, 1);
                }
            }
            cursor = (r.lun, r.end());
        }
        Ok(())
    }
}
