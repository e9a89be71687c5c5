//! Runs a validated [`Request`] on a [`Backend`]: byte ranges become whole-block calls.
//!
//! Aligned reads and writes go to the backend as they are (reads land in the reply buffer, writes
//! are not copied). Unaligned ones become one call over the covering blocks: reads read them and
//! slice; writes first read the partial head and tail blocks, merge, then write once, so a
//! failed merge read writes nothing. Write-zeroes and trim split a range into a partial head,
//! whole blocks and a partial tail. The owner thread runs one request at a time, so every
//! read-modify-write is atomic with respect to all other client requests.

use super::backend::{
    BLOCK, BLOCK_U64, Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo,
};
use super::proto;
use super::session::{Op, Request};

/// Kind of operation, for statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `NBD_CMD_READ`.
    Read,
    /// `NBD_CMD_WRITE`.
    Write,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim,
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes,
}

/// Result of one request.
#[derive(Debug)]
pub struct Outcome {
    /// The complete simple reply (header, plus data for a successful read).
    pub reply: Vec<u8>,
    /// NBD error value sent (0: success).
    pub errno: u32,
    /// Operation kind.
    pub kind: OpKind,
    /// Bytes the request covered (0 for flush).
    pub bytes: u64,
    /// True if the request was not 4 KiB-aligned (it needed partial-block handling).
    pub unaligned: bool,
}

/// One contiguous part of a byte range, all inside one block or made of whole blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    /// Absolute byte offset in the export.
    offset: u64,
    /// Offset of this piece within the request's bytes.
    at: usize,
    /// Length in bytes.
    len: usize,
    /// False: whole blocks (offset and len block-aligned). True: part of one block.
    partial: bool,
}

/// Splits `[offset, offset + len)` into head / whole blocks / tail pieces, in order.
fn split(offset: u64, len: usize) -> impl Iterator<Item = Piece> {
    let end = offset + len as u64;
    let a = offset.next_multiple_of(BLOCK_U64);
    let b = end / BLOCK_U64 * BLOCK_U64;
    let mk = move |from: u64, to: u64, partial| Piece {
        offset: from,
        at: (from - offset) as usize,
        len: (to - from) as usize,
        partial,
    };
    let pieces: [Option<Piece>; 3] = if a > b {
        // Inside one block, touching neither of its edges.
        [Some(mk(offset, end, true)), None, None]
    } else {
        [
            (offset < a).then(|| mk(offset, a, true)),
            (a < b).then(|| mk(a, b, false)),
            (b < end).then(|| mk(b, end, true)),
        ]
    };
    pieces.into_iter().flatten()
}

fn is_aligned(offset: u64, len: usize) -> bool {
    offset.is_multiple_of(BLOCK_U64) && len.is_multiple_of(BLOCK)
}

fn invalid(msg: &str) -> BackendError {
    BackendError::new(BackendErrorKind::Invalid, msg)
}

/// The blocks covering `[offset, offset + len)`: first LBA and count (`len > 0`).
fn covering(offset: u64, len: usize) -> (u64, usize) {
    let first = offset / BLOCK_U64;
    let end = (offset + len as u64).div_ceil(BLOCK_U64);
    (first, (end - first) as usize)
}

/// Reads `dst.len()` bytes at byte `offset` of `export` with one backend call: aligned reads
/// land in `dst` directly, unaligned ones read the covering blocks and copy the slice.
fn read_bytes<B: Backend + ?Sized>(
    b: &mut B,
    export: usize,
    offset: u64,
    dst: &mut [u8],
) -> BackendResult {
    if is_aligned(offset, dst.len()) {
        return b.read(export, offset / BLOCK_U64, dst);
    }
    let (lba, blocks) = covering(offset, dst.len());
    let mut cover = vec![0u8; blocks * BLOCK];
    b.read(export, lba, &mut cover)?;
    let at = (offset % BLOCK_U64) as usize;
    dst.copy_from_slice(&cover[at..at + dst.len()]);
    Ok(())
}

/// Reads the partial head and tail blocks of `[offset, offset + len)` into `cover` (the
/// covering blocks), before anything is written, so that a failed read writes nothing.
fn read_partial_ends<B: Backend + ?Sized>(
    b: &mut B,
    export: usize,
    offset: u64,
    len: usize,
    cover: &mut [u8],
) -> BackendResult {
    let (lba, blocks) = covering(offset, len);
    let head_partial = !offset.is_multiple_of(BLOCK_U64);
    let tail_partial = !(offset + len as u64).is_multiple_of(BLOCK_U64);
    if head_partial {
        b.read(export, lba, &mut cover[..BLOCK])?;
    }
    if tail_partial && !(head_partial && blocks == 1) {
        let last = blocks - 1;
        b.read(export, lba + last as u64, &mut cover[last * BLOCK..])?;
    }
    Ok(())
}

/// Writes `data` at byte `offset` with one backend call: aligned data goes straight to the
/// backend; unaligned data is merged into the covering blocks (read-modify-write of the partial
/// head and tail blocks), so the backend sees a single whole-block write either way.
fn write_bytes<B: Backend + ?Sized>(
    b: &mut B,
    export: usize,
    offset: u64,
    data: &[u8],
    fua: bool,
) -> BackendResult {
    if is_aligned(offset, data.len()) {
        return b.write(export, offset / BLOCK_U64, data, fua);
    }
    let (lba, blocks) = covering(offset, data.len());
    let mut cover = vec![0u8; blocks * BLOCK];
    read_partial_ends(b, export, offset, data.len(), &mut cover)?;
    let at = (offset % BLOCK_U64) as usize;
    cover[at..at + data.len()].copy_from_slice(data);
    b.write(export, lba, &cover, fua)
}

/// Zeroes `len` bytes at `offset`: whole blocks through [`Backend::write_zeroes`], partial head
/// and tail blocks by read-modify-write (both read before anything is written).
fn zero_bytes<B: Backend + ?Sized>(
    b: &mut B,
    export: usize,
    offset: u64,
    len: usize,
    fua: bool,
    no_hole: bool,
) -> BackendResult {
    // Slot 0 holds the head block, slot 1 the tail block (a tail piece never starts the range).
    let mut ends = [0u8; 2 * BLOCK];
    let pieces: Vec<Piece> = split(offset, len).collect();
    for p in pieces.iter().filter(|p| p.partial) {
        let slot = usize::from(p.at > 0) * BLOCK;
        b.read(export, p.offset / BLOCK_U64, &mut ends[slot..slot + BLOCK])?;
    }
    for p in &pieces {
        if p.partial {
            let slot = usize::from(p.at > 0) * BLOCK;
            let in_block = (p.offset % BLOCK_U64) as usize;
            let block = &mut ends[slot..slot + BLOCK];
            block[in_block..in_block + p.len].fill(0);
            b.write(export, p.offset / BLOCK_U64, block, fua)?;
        } else {
            b.write_zeroes(
                export,
                p.offset / BLOCK_U64,
                (p.len / BLOCK) as u64,
                fua,
                no_hole,
            )?;
        }
    }
    Ok(())
}

fn trim_bytes<B: Backend + ?Sized>(
    b: &mut B,
    export: usize,
    offset: u64,
    len: usize,
    fua: bool,
) -> BackendResult {
    // A trim is a hint: only whole blocks are discarded, partial ones are left alone.
    for p in split(offset, len).filter(|p| !p.partial) {
        b.trim(export, p.offset / BLOCK_U64, (p.len / BLOCK) as u64)?;
    }
    if fua { b.flush(export) } else { Ok(()) }
}

/// Refuses what must not reach the backend: an unknown export, a range outside it (or empty,
/// except for a flush), a change to a read-only export.
fn check(
    exports: &[ExportInfo],
    export: usize,
    kind: OpKind,
    offset: u64,
    len: usize,
) -> BackendResult {
    match exports.get(export) {
        None => Err(invalid("no such export")),
        Some(e)
            if kind != OpKind::Flush
                && (len == 0
                    || offset
                        .checked_add(len as u64)
                        .is_none_or(|end| end > e.size_bytes)) =>
        {
            Err(invalid("range outside the export"))
        }
        Some(e)
            if e.read_only
                && matches!(kind, OpKind::Write | OpKind::Trim | OpKind::WriteZeroes) =>
        {
            Err(BackendError::new(
                BackendErrorKind::ReadOnly,
                "export is read-only",
            ))
        }
        Some(_) => Ok(()),
    }
}

/// The reply to a successful read of `len` bytes at byte `offset`: header and data, read
/// straight into the reply buffer.
fn read_reply<B: Backend + ?Sized>(
    backend: &mut B,
    export: usize,
    offset: u64,
    len: usize,
    handle: u64,
) -> BackendResult<Vec<u8>> {
    let mut reply = vec![0u8; proto::SIMPLE_REPLY_HEADER_LEN + len];
    read_bytes(
        backend,
        export,
        offset,
        &mut reply[proto::SIMPLE_REPLY_HEADER_LEN..],
    )?;
    proto::put_simple_reply_header(&mut reply, 0, handle);
    Ok(reply)
}

/// Runs `req` on `backend`, whose exports are `exports`, and builds the reply.
///
/// The request is normally validated by [`super::session::Session`]; it is checked again here
/// (export index, bounds, read-only) so that a bad request becomes an `EINVAL`/`EPERM` reply
/// instead of reaching the backend.
pub fn execute<B: Backend + ?Sized>(
    backend: &mut B,
    exports: &[ExportInfo],
    req: Request,
) -> Outcome {
    let Request { handle, export, op } = req;
    let (kind, offset, len) = match &op {
        Op::Read { offset, length } => (OpKind::Read, *offset, *length as usize),
        Op::Write { offset, data, .. } => (OpKind::Write, *offset, data.len()),
        Op::Flush => (OpKind::Flush, 0, 0),
        Op::Trim { offset, length, .. } => (OpKind::Trim, *offset, *length as usize),
        Op::WriteZeroes { offset, length, .. } => (OpKind::WriteZeroes, *offset, *length as usize),
    };
    let outcome = |reply: Vec<u8>, errno: u32| Outcome {
        reply,
        errno,
        kind,
        bytes: len as u64,
        unaligned: !is_aligned(offset, len),
    };
    let fail = |e: &BackendError| {
        let errno = e.kind().nbd_errno();
        if e.kind() != BackendErrorKind::Invalid {
            log::warn!("nbd: export {export}: {kind:?} at byte {offset} (+{len}) failed: {e}");
        }
        outcome(proto::simple_reply(errno, handle), errno)
    };

    if let Err(e) = check(exports, export, kind, offset, len) {
        return fail(&e);
    }

    let result = match op {
        Op::Read { .. } => match read_reply(backend, export, offset, len, handle) {
            Ok(reply) => return outcome(reply, 0),
            Err(e) => Err(e),
        },
        Op::Write { data, fua, .. } => write_bytes(backend, export, offset, &data, fua),
        Op::Flush => backend.flush(export),
        Op::Trim { fua, .. } => trim_bytes(backend, export, offset, len, fua),
        Op::WriteZeroes { fua, no_hole, .. } => {
            zero_bytes(backend, export, offset, len, fua, no_hole)
        }
    };
    match result {
        Ok(()) => outcome(proto::simple_reply(0, handle), 0),
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(offset: u64, len: usize) -> Vec<(u64, usize, usize, bool)> {
        split(offset, len)
            .map(|p| (p.offset, p.at, p.len, p.partial))
            .collect()
    }

    #[test]
    fn split_covers_every_case() {
        assert_eq!(pieces(0, 4096), vec![(0, 0, 4096, false)]);
        assert_eq!(pieces(0, 100), vec![(0, 0, 100, true)]);
        assert_eq!(pieces(1000, 1000), vec![(1000, 0, 1000, true)]);
        assert_eq!(pieces(1000, 3096), vec![(1000, 0, 3096, true)]);
        assert_eq!(
            pieces(4000, 200),
            vec![(4000, 0, 96, true), (4096, 96, 104, true)]
        );
        assert_eq!(
            pieces(1000, 5000 + 4096),
            vec![
                (1000, 0, 3096, true),
                (4096, 3096, 4096, false),
                (8192, 7192, 1904, true)
            ]
        );
        assert_eq!(
            pieces(8192, 8192 + 1),
            vec![(8192, 0, 8192, false), (16384, 8192, 1, true)]
        );
    }

    #[test]
    fn split_pieces_are_contiguous_and_block_bounded() {
        for offset in [0u64, 1, 511, 512, 4095, 4096, 4097, 12_288, 20_000] {
            for len in [1usize, 2, 511, 4095, 4096, 4097, 8191, 8192, 12_289, 65_536] {
                let ps: Vec<Piece> = split(offset, len).collect();
                let mut at = 0;
                for p in &ps {
                    assert_eq!(p.at, at, "offset {offset} len {len}");
                    assert_eq!(p.offset, offset + at as u64);
                    if p.partial {
                        assert_eq!(
                            p.offset / BLOCK_U64,
                            (p.offset + p.len as u64 - 1) / BLOCK_U64
                        );
                        assert!(p.len < BLOCK);
                    } else {
                        assert!(is_aligned(p.offset, p.len) && p.len > 0);
                    }
                    at += p.len;
                }
                assert_eq!(at, len, "offset {offset} len {len}");
            }
        }
    }
}
