//! Roll-forward at import, as a phase of its own: [`Replay`] holds what only import needs (the
//! intent-log records that patch the stripe open at the crash, the newest flush mark) and
//! [`LogScan`] walks the log from a checkpoint root's cursor, item after item, each checked
//! (pool, own address, consecutive sequence number, CRC32C), until the first item that does not
//! check. Roll-forward reads at most the root's reserved segments (bounded work).
//!
//! The first pass ([`Pass::FindEnd`]) finds the end and assembles the checked bytes of every
//! item stripe by stripe in the stripe buffer: a stripe whose items needed reconstruction or
//! intent-log patches is rewritten whole from them (so its members and parity agree again), and
//! the stripe holding the end is left in the buffer for the log to continue in. The second pass
//! (live reads, the log reopened at the end) hands each item to the pool, which applies extents
//! and TRIMs to the map.

use heapless::Vec;
use raidcore_hal::BlockDevice;

use super::zil::{ZIL_REFS, ZilRef};
use super::{Expect, LogIo, Pass, SeqRule};
use crate::error::{IoError, bug};
use crate::format::{
    BlockPtr, FLAG_COMPRESSED, FlushMark, HEADER_BYTES, ItemHeader, ItemKind, LUN_BLOCK, LogCursor,
    crc32c,
};

/// What import's roll-forward knows beyond the root.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replay {
    /// Verified intent-log records of the stripe open at the crash, oldest first.
    pub zil_refs: Vec<ZilRef, ZIL_REFS>,
    /// The newest flush mark found: everything before the position it names was durable.
    pub durable_mark: Option<FlushMark>,
    /// The log cursor of a newer checkpoint root than the one import starts from, whose tables
    /// did not load: the checkpoint flushed everything before it ahead of writing the root, so
    /// that was durable too, and an unreadable item before it is damage, not the torn tail.
    pub durable_root: Option<LogCursor>,
    /// What the newest verified intent-log records prove durable, as `(stripe sequence
    /// number, offset)`: a flush writes records for the open stripe only after every stripe
    /// before it is durable, and its first record starting at offset `x` only after the
    /// stripe's bytes below `x` were made durable by earlier records (see
    /// [`LogIo::zil_scan`](crate::log::LogIo::zil_scan)). An unreadable item before it is
    /// damage, not the torn tail (the proof left when past tolerance took every copy of the
    /// flush mark, and the earlier records with it).
    pub durable_records: Option<(u64, u64)>,
    /// A rewind (`ImportOptions::rewind`): an unreadable item before the durable position
    /// ends the log there (the writes after it are lost, and said so) instead of refusing
    /// the import.
    pub cut_at_damage: bool,
}

impl Replay {
    /// Whether the log bytes of the stripe numbered `stripe_seq` up to offset `end` (which may
    /// run into the stripes after it) lie before the position the newest flush mark, or a newer
    /// root import could not use, names, or before what the newest intent-log records prove:
    /// they were durable before the crash. Flush marks and roots name item boundaries; the
    /// records' positions need not be one, so an item is judged by where it ends.
    pub fn before_durable_mark(&self, stripe_seq: u64, end: u64, sdb: u64) -> bool {
        let pos = |seq: u64, off: u64| seq.saturating_mul(sdb).saturating_add(off);
        let at = pos(stripe_seq, end);
        self.durable_mark
            .is_some_and(|m| at <= pos(m.stripe_seq, u64::from(m.durable)))
            || self
                .durable_root
                .is_some_and(|c| at <= pos(c.next_stripe_seq, c.head % sdb.max(1)))
            || self
                .durable_records
                .is_some_and(|(seq, off)| at <= pos(seq, off))
    }
}

/// Where a roll-forward scan stopped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogEnd {
    pub addr: u64,
    pub next_item_seq: u64,
    pub res_idx: usize,
    /// Address and sequence number of the stripe holding `addr`.
    pub stripe_addr: u64,
    pub stripe_seq: u64,
    pub items: u64,
    /// Of those, items before the newest flush mark that no redundancy could rebuild (kept in
    /// the map, so their blocks read as errors).
    pub lost: u64,
    /// A forced import cut the log here, at an unreadable item before the durable position.
    pub cut: Option<u64>,
}

/// One item the scan passed.
#[derive(Debug, Clone)]
pub(crate) struct Scanned {
    pub header: ItemHeader,
    /// The second pass's uncompressed extents that checked: the CRC32C of each 4 KiB block,
    /// for their map entries ([`crate::format::MapEntry::block_crc`]). Empty for anything
    /// else, and for an extent that did not check (its entries keep the payload's CRC, which
    /// no read of it then matches).
    pub block_crcs: Vec<u32, 32>,
}

/// The stripe the first pass is assembling.
#[derive(Debug, Clone, Copy)]
struct Assembly {
    stripe: u64,
    dirty: bool,
}

/// A walk over the log from a root's cursor (see the module docs).
#[derive(Debug)]
pub(crate) struct LogScan<'r> {
    reserved: &'r [u32],
    /// The first pass's end: the index into `reserved` and the address.
    stop: Option<(usize, u64)>,
    cursor: u64,
    seq: u64,
    res_idx: usize,
    stripe_addr: u64,
    stripe_seq: u64,
    items: u64,
    lost: u64,
    /// First pass only.
    asm: Option<Assembly>,
    done: bool,
    cut: Option<u64>,
}

impl<'r> LogScan<'r> {
    /// A scan from `from` through the segments `reserved`; the first pass (`assemble`) fills
    /// the stripe buffer, a second stops at `stop` (the first pass's end: its index into
    /// `reserved` and its address; the address alone is ambiguous where one segment's end is
    /// the start of a later one the log wrapped round to).
    pub fn new<D: BlockDevice, const N: usize>(
        io: &mut LogIo<'_, D, N>,
        from: LogCursor,
        reserved: &'r [u32],
        assemble: bool,
        stop: Option<(usize, u64)>,
    ) -> Self {
        let sdb = io.log.sdb() as u64;
        let stripe_addr = from.head / sdb * sdb;
        if assemble {
            io.stripe.fill(0);
        }
        LogScan {
            reserved,
            stop,
            cursor: from.head,
            seq: from.next_item_seq,
            res_idx: 0,
            stripe_addr,
            stripe_seq: from.next_stripe_seq,
            items: 0,
            lost: 0,
            asm: assemble.then_some(Assembly {
                stripe: stripe_addr,
                dirty: false,
            }),
            done: false,
            cut: None,
        }
    }

    /// The next item, or `None` at the log's end. In the first pass an unreadable header
    /// before the newest flush mark is [`IoError::LogLost`].
    pub fn next<D: BlockDevice, const N: usize>(
        &mut self,
        io: &mut LogIo<'_, D, N>,
        replay: &Replay,
    ) -> Result<Option<Scanned>, IoError> {
        while !self.done {
            // Equality, not order: the reserved segments need not ascend (the log may wrap to a
            // segment at a lower address), and the second pass walks the first one's path.
            if self.at_stop() {
                break;
            }
            let Some(&seg) = self.reserved.get(self.res_idx) else {
                break;
            };
            let seg_end = io.log.seg_start(seg) + io.log.segment_bytes();
            if self.cursor >= seg_end {
                if !self.enter_next(io, seg_end)? {
                    break;
                }
                continue;
            }
            return self.item(io, replay, seg_end);
        }
        self.done = true;
        Ok(None)
    }

    /// Whether the scan is at `stop` (the first pass's end).
    fn at_stop(&self) -> bool {
        self.stop == Some((self.res_idx, self.cursor))
    }

    /// Moves to the next reserved segment; false when there is none.
    fn enter_next<D: BlockDevice, const N: usize>(
        &mut self,
        io: &mut LogIo<'_, D, N>,
        seg_end: u64,
    ) -> Result<bool, IoError> {
        let Some(&next) = self.reserved.get(self.res_idx + 1) else {
            return Ok(false);
        };
        let sdb = io.log.sdb() as u64;
        // The stripes up to the segment's end were all written.
        self.stripe_seq += seg_end.saturating_sub(self.stripe_addr) / sdb;
        self.res_idx += 1;
        self.cursor = io.log.seg_start(next);
        self.stripe_addr = self.cursor;
        if let Some(mut asm) = self.asm {
            finish_stripe(io, &mut asm)?;
            asm.stripe = self.cursor;
            self.asm = Some(asm);
        } else if !self.at_stop() {
            // Its first item is the one expected next. Not for the segment the first pass
            // ended at the start of: no item of this use is in it, and the reopened log's
            // sequence numbers jump past those of items the crash cut off.
            io.log.note_entered(next, self.seq);
            io.apply_mark_used();
        }
        Ok(true)
    }

    /// Reads the item at the cursor (see [`Self::next`]).
    fn item<D: BlockDevice, const N: usize>(
        &mut self,
        io: &mut LogIo<'_, D, N>,
        replay: &Replay,
        seg_end: u64,
    ) -> Result<Option<Scanned>, IoError> {
        let assemble = self.asm.is_some();
        if assemble {
            io.pass = Pass::FindEnd { healed: false };
        }
        let room = (seg_end - self.cursor) as usize;
        let Some((h, hoff, rebuilt)) = io.find_header(self.cursor, room, SeqRule::Exact(self.seq))
        else {
            if assemble && self.before_mark(replay, io.log.sdb() as u64, HEADER_BYTES) {
                if !replay.cut_at_damage {
                    return Err(IoError::LogLost { addr: self.cursor });
                }
                self.cut = Some(self.cursor);
            }
            self.done = true;
            return Ok(None);
        };
        if !rebuilt.is_empty() {
            io.note_healed();
        }
        let mut src = hoff;
        let mut avail = HEADER_BYTES;
        let mut block_crcs = Vec::new();
        if h.kind != ItemKind::Pad {
            let ptr = BlockPtr {
                addr: self.cursor,
                len: h.item_bytes() as u32,
                crc: h.payload_crc,
                ditto: None,
            };
            match io.load_item(ptr, Expect::header(&h)) {
                Ok((_, payload_off)) => {
                    src = payload_off - HEADER_BYTES;
                    avail = h.item_bytes();
                    if !assemble {
                        block_crcs = raw_block_crcs(io, &h, payload_off)?;
                    }
                }
                // Before the newest flush mark an item no redundancy rebuilds is damage, not a
                // torn tail: keep it (its blocks read as errors, never as the older data the
                // map held) and go on to the items after it. Pass 2 follows pass 1's path.
                Err(_)
                    if !assemble
                        || self.before_mark(replay, io.log.sdb() as u64, h.item_bytes()) =>
                {
                    self.lost += 1;
                }
                Err(_) => {
                    self.done = true;
                    return Ok(None);
                }
            }
        }
        if let Some(mut asm) = self.asm {
            let healed = matches!(io.pass, Pass::FindEnd { healed: true });
            assemble_item(
                io,
                &mut asm,
                self.cursor,
                h.item_bytes(),
                src,
                avail,
                healed,
            )?;
            self.asm = Some(asm);
        }
        self.advance(io.log.sdb() as u64, &h);
        Ok(Some(Scanned {
            header: h,
            block_crcs,
        }))
    }

    /// Whether the `len` log bytes at the cursor were durable ([`Replay::before_durable_mark`]).
    fn before_mark(&self, replay: &Replay, sdb: u64, len: usize) -> bool {
        let end = self.cursor.saturating_sub(self.stripe_addr) + len as u64;
        replay.before_durable_mark(self.stripe_seq, end, sdb)
    }

    fn advance(&mut self, sdb: u64, h: &ItemHeader) {
        self.items += 1;
        self.cursor += h.item_bytes() as u64;
        self.seq += 1;
        if self.cursor >= self.stripe_addr + sdb {
            let n = (self.cursor - self.stripe_addr) / sdb;
            self.stripe_seq += n;
            self.stripe_addr += n * sdb;
        }
    }

    /// Where the scan stopped (runs it to the end first). A stripe the first pass left exactly
    /// at its end is complete: it is finished too.
    pub fn end<D: BlockDevice, const N: usize>(
        mut self,
        io: &mut LogIo<'_, D, N>,
        replay: &Replay,
    ) -> Result<LogEnd, IoError> {
        while self.next(io, replay)?.is_some() {}
        let sdb = io.log.sdb() as u64;
        if let Some(mut asm) = self.asm
            && self.cursor >= asm.stripe + sdb
        {
            finish_stripe(io, &mut asm)?;
        }
        Ok(LogEnd {
            addr: self.cursor,
            next_item_seq: self.seq,
            res_idx: self.res_idx,
            stripe_addr: self.stripe_addr,
            stripe_seq: self.stripe_seq,
            items: self.items,
            lost: self.lost,
            cut: self.cut,
        })
    }
}

/// Copies an item's checked bytes (`io.item[src..src + avail]`, zeros past `avail`) into the
/// stripe being assembled, finishing stripes as the item crosses their ends.
fn assemble_item<D: BlockDevice, const N: usize>(
    io: &mut LogIo<'_, D, N>,
    asm: &mut Assembly,
    addr: u64,
    len: usize,
    src: usize,
    avail: usize,
    healed: bool,
) -> Result<(), IoError> {
    let sdb = io.log.sdb() as u64;
    let mut pos = addr;
    let end = addr + len as u64;
    while pos < end {
        while pos >= asm.stripe + sdb {
            finish_stripe(io, asm)?;
            asm.stripe += sdb;
        }
        asm.dirty |= healed;
        let upto = end.min(asm.stripe + sdb);
        let k = (pos - addr) as usize;
        let n = (upto - pos) as usize;
        let dst = io
            .stripe
            .get_mut((pos - asm.stripe) as usize..(upto - asm.stripe) as usize)
            .ok_or(bug!(IoError))?;
        // Bytes of the item we hold; the rest (a pad's payload) is zeros.
        let have = avail.saturating_sub(k).min(n);
        if have > 0 {
            let from = io.item.get(src + k..src + k + have).ok_or(bug!(IoError))?;
            dst.get_mut(..have)
                .ok_or(bug!(IoError))?
                .copy_from_slice(from);
        }
        dst.get_mut(have..).ok_or(bug!(IoError))?.fill(0);
        pos = upto;
    }
    Ok(())
}

/// Writes an assembled stripe back when its members did not hold its checked bytes.
fn finish_stripe<D: BlockDevice, const N: usize>(
    io: &mut LogIo<'_, D, N>,
    asm: &mut Assembly,
) -> Result<(), IoError> {
    if asm.dirty {
        let sdb = io.log.sdb() as u64;
        io.array
            .write_stripe(asm.stripe / sdb, io.stripe, io.scratch)
            .map_err(IoError::Device)?;
        io.array.flush();
    }
    asm.dirty = false;
    io.stripe.fill(0);
    Ok(())
}

/// The CRC32C of each 4 KiB block of the uncompressed extent `h` whose checked payload starts
/// at `io.item[at..]`; empty for any other item.
fn raw_block_crcs<D: BlockDevice, const N: usize>(
    io: &LogIo<'_, D, N>,
    h: &ItemHeader,
    at: usize,
) -> Result<Vec<u32, 32>, IoError> {
    let mut out = Vec::new();
    if h.kind != ItemKind::Extent || h.flags & FLAG_COMPRESSED != 0 {
        return Ok(out);
    }
    let payload = io
        .item
        .get(at..at + h.stored_len as usize)
        .ok_or(bug!(IoError))?;
    for block in payload.chunks_exact(LUN_BLOCK) {
        out.push(crc32c(block)).map_err(|_| bug!(IoError))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SDB: u64 = 96 * 1024;

    /// Records of stripe 10 starting at offset 4096 prove the stripes before it durable and
    /// its first 4096 bytes, no more: an item is judged by its end.
    #[test]
    fn records_prove_the_bytes_before_theirs() {
        let r = Replay {
            durable_records: Some((10, 4096)),
            ..Replay::default()
        };
        assert!(r.before_durable_mark(9, SDB, SDB));
        assert!(r.before_durable_mark(3, 100, SDB));
        assert!(r.before_durable_mark(9, SDB + 4096, SDB));
        assert!(r.before_durable_mark(10, 4096, SDB));
        assert!(!r.before_durable_mark(9, SDB + 4097, SDB));
        assert!(!r.before_durable_mark(10, 4160, SDB));
        assert!(!Replay::default().before_durable_mark(0, 1, SDB));
    }

    /// A flush mark names an item boundary: bytes up to it were durable, bytes past it not.
    #[test]
    fn a_mark_proves_bytes_up_to_its_position() {
        let r = Replay {
            durable_mark: Some(FlushMark {
                pool: 1,
                stripe_addr: 0,
                stripe_seq: 4,
                durable: 8192,
                mark_seq: 0,
            }),
            ..Replay::default()
        };
        assert!(r.before_durable_mark(4, 8192, SDB));
        assert!(r.before_durable_mark(3, SDB + 8192, SDB));
        assert!(!r.before_durable_mark(4, 8193, SDB));
        assert!(!r.before_durable_mark(5, 64, SDB));
    }
}
