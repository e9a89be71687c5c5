//! The body of the `decode_metadata` fuzz target (`tests/fuzz`), shared with the seeded stable
//! tests below so both run the same checks.
//!
//! Two parts, both on every input:
//!
//! 1. **Decoders.** The bytes go to every on-disk decoder of `raidcore::format` as they are, and
//!    again with their framing made valid (magic numbers, versions and CRCs patched in, so the
//!    fuzzer reaches the field checks and the postcard decoding behind them). A decoder must
//!    return an error or a value, and a value must survive encode → decode unchanged.
//! 2. **Import.** A small RAID-5 pool (three members of 512-byte blocks, one LUN with known
//!    data, cleanly shut down) gets the input's patches written over its members: raw bytes over
//!    the label area (superblocks, checkpoint roots, intent log) or the data area (log items,
//!    map pages, tables), or bytes mixed into a superblock or root whose frame and CRC are then
//!    made valid again (a forged but well-formed record). `Pool::import` must return an error
//!    or a pool, never panic; reads must never return data that was not written there.
//!    When only one member is patched with raw bytes (within RAID-5's tolerance) import must
//!    succeed and every block must read back exactly.
//!
//! Input layout of part 2: byte 0 bit 0 `skip_refused`, bit 1 patch several members (over
//! tolerance); then patches of `[disk][mode][offset lo][offset hi][len][len bytes]`, at most 8.

use std::sync::OnceLock;

use raidcore::format::{
    self, BadRange, ITEM_MAGIC, ItemHeader, LUN_BLOCK, LunRecord, MapEntry, Root, SLOT_BYTES,
    SegEntry, Superblock, ZIL_MAGIC, ZilHeader,
};
use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::{BlockDevice, BlockSize};
use raidcore_sim::disk::MemDisk;

/// The pool type of part 2.
type FuzzPool = Pool<MemDisk, Vec<u8>, 8, 4, 16, 4>;

fn byte(input: &[u8], i: usize) -> u8 {
    input.get(i).copied().unwrap_or(0)
}

/// `input` copied into a zeroed buffer of `len` bytes.
fn padded(input: &[u8], len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let n = input.len().min(len);
    v[..n].copy_from_slice(&input[..n]);
    v
}

/// `body` in a slot frame (`[len u32][crc32c u32][body]`) of `len` bytes.
fn framed(body: &[u8], len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let n = body.len().min(len - 8);
    v[0..4].copy_from_slice(&(n as u32).to_le_bytes());
    v[4..8].copy_from_slice(&format::crc32c(&body[..n]).to_le_bytes());
    v[8..8 + n].copy_from_slice(&body[..n]);
    v
}

/// Re-frames a slot whose body was changed: recomputes the CRC over its recorded length.
fn reframe(slot: &mut [u8]) {
    let len =
        (u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]) as usize).min(slot.len() - 8);
    let crc = format::crc32c(&slot[8..8 + len]);
    slot[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// What the log's writers put in an item header of each kind, checked here on its own terms
/// (not by calling the decoder's check): an accepted header must satisfy it.
fn item_fields_sane(h: &ItemHeader) -> bool {
    use raidcore::format::ItemKind;
    let span = h.lba.checked_add(u64::from(h.blocks)).is_some();
    match h.kind {
        ItemKind::Extent => {
            span && h.blocks >= 1
                && h.blocks <= 32
                && h.raw_len == h.blocks * 4096
                && h.stored_len <= h.raw_len
        }
        ItemKind::MapPage => h.blocks <= 8 && h.stored_len as usize == format::PAGE_PAYLOAD,
        ItemKind::Trim => span && h.blocks >= 1 && h.stored_len == 0,
        ItemKind::Pad => h.raw_len == 0,
        ItemKind::LunTable | ItemKind::BadList => h.raw_len == h.stored_len,
        ItemKind::SegmentTable => h.stored_len == h.blocks * 16,
    }
}

/// Part 1: every decoder, raw and with valid framing.
pub fn check_decoders(input: &[u8]) -> Result<(), String> {
    let max = usize::from(u16::from_le_bytes([byte(input, 0), byte(input, 1)]));

    // Item headers.
    let mut h = padded(input, 64);
    let raw = ItemHeader::decode(input, max);
    h[0..4].copy_from_slice(&ITEM_MAGIC.to_le_bytes());
    let crc = format::header_crc(&h[..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    for hd in [raw, ItemHeader::decode(&h, max)].into_iter().flatten() {
        if hd.stored_len as usize > max
            || hd.addr % format::ITEM_ALIGN as u64 != 0
            || !item_fields_sane(&hd)
        {
            return Err(format!(
                "item header accepted out of bounds: {hd:?} (max {max})"
            ));
        }
        let mut out = [0u8; 64];
        hd.encode(&mut out)
            .map_err(|e| format!("item header re-encode: {e:?}"))?;
        let back = ItemHeader::decode(&out, max);
        if back != Ok(hd) {
            return Err(format!("item header round trip: {hd:?} -> {back:?}"));
        }
    }

    // Map entries and segment table entries (total decoders: check the round trip).
    for at in [
        0,
        16,
        usize::from(byte(input, 2)),
        input.len().saturating_sub(16),
    ] {
        let e = MapEntry::decode(input, at);
        let mut out = [0u8; 16];
        e.encode(&mut out, 0);
        let back = MapEntry::decode(&out, 0);
        if back != e {
            return Err(format!("map entry round trip: {e:?} -> {back:?}"));
        }
        let s = SegEntry::decode(input, at);
        let mut out = [0u8; raidcore::format::SEG_ENTRY_BYTES];
        s.encode(&mut out, 0);
        let back = SegEntry::decode(&out, 0);
        if back != s {
            return Err(format!("segment entry round trip: {s:?} -> {back:?}"));
        }
    }

    // Intent-log record headers.
    let mut z = padded(input, 64);
    let raw = ZilHeader::decode(input, max);
    z[0..4].copy_from_slice(&ZIL_MAGIC.to_le_bytes());
    z[4..6].copy_from_slice(&format::FORMAT_VERSION.to_le_bytes());
    let crc = format::header_crc(&z[..60]);
    z[60..64].copy_from_slice(&crc.to_le_bytes());
    for hd in [raw, ZilHeader::decode(&z, max)].into_iter().flatten() {
        if hd.len == 0 || hd.len as usize > max {
            return Err(format!("intent-log header accepted out of bounds: {hd:?}"));
        }
        let mut out = [0u8; 64];
        hd.encode(&mut out)
            .map_err(|e| format!("zil header re-encode: {e:?}"))?;
        let back = ZilHeader::decode(&out, max);
        if back != Ok(hd) {
            return Err(format!("zil header round trip: {hd:?} -> {back:?}"));
        }
    }

    // Framed postcard records: as given, and with a valid frame around the input.
    let slots = [padded(input, SLOT_BYTES), framed(input, SLOT_BYTES)];
    for slot in &slots {
        if let Ok(sb) = Superblock::decode(slot) {
            let mut out = vec![0u8; SLOT_BYTES];
            if sb.encode(&mut out).is_ok() && Superblock::decode(&out).as_ref() != Ok(&sb) {
                return Err(format!("superblock round trip changed {sb:?}"));
            }
        }
        if let Ok(r) = Root::decode(slot) {
            let mut out = vec![0u8; SLOT_BYTES];
            if r.encode(&mut out).is_ok() && Root::decode(&out).as_ref() != Ok(&r) {
                return Err(format!("root round trip changed {r:?}"));
            }
        }
        if let Ok(t) = format::decode_lun_table::<16>(slot) {
            let mut out = vec![0u8; SLOT_BYTES * 2];
            let recs: Vec<LunRecord> = t.iter().cloned().collect();
            if format::encode_lun_table(&recs, &mut out).is_ok() {
                let back = format::decode_lun_table::<16>(&out);
                if back.as_ref().map(|b| &b[..]) != Ok(recs.as_slice()) {
                    return Err(format!("LUN table round trip changed {recs:?}"));
                }
            }
        }
        if let Ok(l) = format::decode_bad_list(slot) {
            let mut out = vec![0u8; SLOT_BYTES * 2];
            let list: Vec<BadRange> = l.iter().copied().collect();
            if format::encode_bad_list(&list, &mut out).is_ok() {
                let back = format::decode_bad_list(&out);
                if back.as_ref().map(|b| &b[..]) != Ok(list.as_slice()) {
                    return Err(format!("bad list round trip changed {list:?}"));
                }
            }
        }
    }
    Ok(())
}

/// The pool part 2 patches: its members after a clean shutdown, and what it holds.
struct Template {
    disks: Vec<MemDisk>,
    cfg: PoolConfig,
    lun: u16,
    /// (LBA, content seed) of every written block.
    blocks: Vec<(u64, u64)>,
    data_start: u64,
    /// Highest member block written.
    high_water: u64,
}

const LUN_BLOCKS: u64 = 64;

/// Content of LUN block `lba` written with `seed`.
fn block_content(seed: u64, lba: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ lba.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut v = vec![0u8; LUN_BLOCK];
    for (i, b) in v.iter_mut().enumerate() {
        if i % 64 == 0 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
        }
        *b = (s >> (i % 8 * 8)) as u8 ^ (i / 512) as u8;
    }
    v
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let cfg = PoolConfig {
            level: Level::Raid5,
            strip_bytes: 4096,
            max_extent_blocks: 4,
            zil_slots: 16,
            segment_stripes: 4,
            max_segments: 64,
            ..PoolConfig::default()
        };
        let disks: Vec<MemDisk> = (0..3)
            .map(|_| MemDisk::new(BlockSize::B512, 6 * 1024 * 1024 / 512).expect("memory disk"))
            .collect();
        let mem = vec![0u8; FuzzPool::memory_bytes(&cfg, 3)];
        let mut pool =
            FuzzPool::create(disks, Vec::new(), cfg, *b"metadata-fuzz-01", mem).expect("create");
        let lun = pool.create_lun("fuzz", LUN_BLOCKS).expect("create_lun");
        let mut blocks = Vec::new();
        // Sequential extents, a few overwrites, a flush between: several items and map updates.
        for (start, n, seed) in [(0u64, 24u64, 1u64), (24, 16, 2), (4, 6, 3), (40, 8, 4)] {
            let mut data = Vec::new();
            for b in start..start + n {
                data.extend_from_slice(&block_content(seed, b));
            }
            pool.write(lun, start, &data, false).expect("write");
            blocks.retain(|(l, _)| !(start..start + n).contains(l));
            blocks.extend((start..start + n).map(|b| (b, seed)));
            pool.flush().expect("flush");
        }
        let data_start = pool.array().geometry().data_start_lba();
        let (members, _, _) = pool.shutdown().expect("shutdown");
        let disks: Vec<MemDisk> = members.into_iter().map(|d| d.expect("member")).collect();
        let high_water = disks
            .iter()
            .map(last_written_block)
            .max()
            .unwrap_or(data_start);
        blocks.sort_unstable();
        Template {
            disks,
            cfg,
            lun,
            blocks,
            data_start,
            high_water,
        }
    })
}

/// The last block of `d` holding something other than zeros (0 if none).
fn last_written_block(d: &MemDisk) -> u64 {
    let mut d = d.snapshot();
    let chunk = 128u64;
    let mut buf = vec![0u8; chunk as usize * 512];
    let mut end = d.block_count();
    while end > 0 {
        let start = end.saturating_sub(chunk);
        let n = (end - start) as usize;
        if d.read(start, &mut buf[..n * 512]).is_ok()
            && let Some(i) = buf[..n * 512].iter().rposition(|&b| b != 0)
        {
            return start + (i / 512) as u64;
        }
        end = start;
    }
    0
}

/// Part 2: patches over the template's members, then import and read.
#[expect(
    clippy::too_many_lines,
    reason = "the fuzz body: every decoder and import over one input"
)]
pub fn check_import(input: &[u8]) -> Result<(), String> {
    let t = template();
    let flags = byte(input, 0);
    let skip_refused = flags & 1 != 0;
    let multi = flags & 2 != 0;
    let mut disks: Vec<MemDisk> = t.disks.iter().map(MemDisk::snapshot).collect();
    let label_bytes = t.data_start * 512;
    let mut pos = 1;
    let mut strict = !multi;
    let mut first_disk = None;
    let mut patches = 0;
    while pos + 5 <= input.len() && patches < 8 {
        patches += 1;
        let mut disk = usize::from(input[pos]) % disks.len();
        if !multi {
            disk = *first_disk.get_or_insert(disk);
        }
        let mode = input[pos + 1] % 4;
        let offset = usize::from(u16::from_le_bytes([input[pos + 2], input[pos + 3]]));
        let len = usize::from(input[pos + 4]);
        pos += 5;
        let bytes = &input[pos..(pos + len).min(input.len())];
        pos += len;
        if bytes.is_empty() {
            continue;
        }
        let d = &mut disks[disk];
        match mode {
            // Raw bytes over the label area.
            0 => write_bytes(d, (offset as u64 * 7) % label_bytes, bytes)?,
            // Raw bytes over the written data area.
            1 => {
                let span = (t.high_water + 1).saturating_sub(t.data_start).max(1) * 512;
                write_bytes(d, t.data_start * 512 + (offset as u64 * 509) % span, bytes)?;
            }
            // Bytes mixed into a superblock (slot A or B) or a root, then re-framed.
            _ => {
                strict = false;
                let slot_lba = 8 * u64::from(if mode == 2 {
                    format::superblock_slot((offset % 2) as u32)
                } else {
                    format::root_slot((offset % 256) as u32)
                });
                let mut slot = vec![0u8; SLOT_BYTES];
                d.read(slot_lba, &mut slot)
                    .map_err(|e| format!("read slot: {e}"))?;
                let len = (u32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]) as usize)
                    .clamp(1, SLOT_BYTES - 8);
                for (i, b) in bytes.iter().enumerate() {
                    let at = 8 + (offset / 2 + i * 3) % len;
                    slot[at] ^= b;
                }
                reframe(&mut slot);
                d.write(slot_lba, &slot)
                    .map_err(|e| format!("write slot: {e}"))?;
            }
        }
    }
    let mem = vec![0u8; FuzzPool::memory_bytes(&t.cfg, 3)];
    let opts = ImportOptions {
        config: t.cfg,
        skip_refused: skip_refused || strict,
        force: false,
        rewind: false,
    };
    let (mut pool, _report) = match FuzzPool::import(disks, opts, mem) {
        Ok(p) => p,
        Err(e) if strict => {
            return Err(format!(
                "import failed with one member's metadata overwritten (within RAID-5's \
                 tolerance): {e}"
            ));
        }
        Err(_) => return Ok(()),
    };
    let mut buf = vec![0u8; LUN_BLOCK];
    for &(lba, seed) in &t.blocks {
        match pool.read(t.lun, lba, &mut buf) {
            Ok(()) => {
                if buf != block_content(seed, lba) && (strict || buf.iter().any(|&b| b != 0)) {
                    return Err(format!(
                        "LUN {} LBA {lba}: read data that was never written there{}",
                        t.lun,
                        if strict { " (one member patched)" } else { "" }
                    ));
                }
            }
            Err(e) if strict => {
                return Err(format!(
                    "LUN {} LBA {lba}: read failed with one member patched: {e}",
                    t.lun
                ));
            }
            Err(_) => {}
        }
    }
    // The pool keeps working (or refuses with an error).
    let data = block_content(99, 63);
    let w = pool.write(t.lun, 63, &data, true);
    match (w, strict) {
        (Ok(()), _) => match pool.read(t.lun, 63, &mut buf) {
            Ok(()) if buf == data => Ok(()),
            Ok(()) => Err("a new FUA write read back different data".into()),
            Err(e) if strict => Err(format!("reading a new write failed: {e}")),
            Err(_) => Ok(()),
        },
        (Err(_), false) => Ok(()),
        (Err(e), true) => Err(format!("a new write failed with one member patched: {e}")),
    }
}

fn write_bytes(d: &mut MemDisk, at: u64, bytes: &[u8]) -> Result<(), String> {
    let first = at / 512;
    let last = (at + bytes.len() as u64).div_ceil(512).min(d.block_count());
    if last <= first {
        return Ok(());
    }
    let mut buf = vec![0u8; (last - first) as usize * 512];
    d.read(first, &mut buf).map_err(|e| format!("read: {e}"))?;
    let off = (at - first * 512) as usize;
    let n = bytes.len().min(buf.len() - off);
    buf[off..off + n].copy_from_slice(&bytes[..n]);
    d.write(first, &buf).map_err(|e| format!("write: {e}"))
}

/// The whole fuzz body: both parts.
pub fn check_decode_metadata(input: &[u8]) -> Result<(), String> {
    check_decoders(input)?;
    check_import(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Inputs shaped like part 2's patches (so most of them reach import with something
    /// patched), or raw bytes.
    fn input(rng: &mut ChaCha8Rng) -> Vec<u8> {
        let mut v = vec![rng.random::<u8>()];
        if rng.random_bool(0.2) {
            let n = rng.random_range(0..600);
            v.extend((0..n).map(|_| rng.random::<u8>()));
            return v;
        }
        for _ in 0..rng.random_range(1..4) {
            let len = rng.random_range(1..40u8);
            v.extend([rng.random(), rng.random(), rng.random(), rng.random(), len]);
            v.extend((0..len).map(|_| rng.random::<u8>()));
        }
        v
    }

    #[test]
    fn template_reads_back_and_imports_untouched() {
        let t = template();
        assert!(t.high_water > t.data_start, "the template wrote data");
        assert_eq!(t.blocks.len(), 48);
        check_import(&[0]).unwrap();
        check_import(&[1]).unwrap();
    }

    #[test]
    fn fuzz_found_superblock_geometry_of_block_size_zero_is_refused() {
        // libFuzzer (`decode_metadata`, a long run): a patched superblock whose geometry
        // decoded with a block size of 0 made import divide by zero; decoded geometries are
        // checked by `Geometry::is_valid` now.
        check_decode_metadata(&[0x04, 0xb6, 0x12, 0x12, 0x05, 0xb6, 0x29, 0x04, 0x12]).unwrap();
    }

    #[test]
    fn fuzz_found_root_head_outside_its_segment_is_an_error_not_a_panic() {
        // libFuzzer (CI, `decode_metadata`): a patched root whose log head lies past the end of
        // its first reserved segment made roll-forward subtract with overflow.
        check_decode_metadata(&[10, 3, 7, 3, 1, 3, 48]).unwrap();
    }

    #[test]
    fn fuzz_found_extent_header_of_no_blocks_at_a_huge_lba_is_refused() {
        // libFuzzer (`decode_metadata`, four minutes): an extent header of 0 blocks at LBA
        // 106 645 698 883 590 decoded (its fields fit no item any writer makes).
        let mut input = vec![
            0xb0, 0x62, 0x2a, 0xd0, 0x01, 0x00, 0x00, 0x00, 0x06, 0xb0, 0xff, 0x62, 0xfe, 0x60,
            0x00, 0x00,
        ];
        input.extend_from_slice(&[0; 32]);
        input.extend_from_slice(&[0x00, 0x71, 0xff]);
        assert_eq!(input.len(), 51);
        check_decoders(&input).unwrap();
        let mut h = padded(&input, 64);
        h[0..4].copy_from_slice(&ITEM_MAGIC.to_le_bytes());
        let crc = format::header_crc(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            ItemHeader::decode(&h, 25264),
            Err(format::FormatError::Bounds)
        );
    }

    #[test]
    fn seeded_inputs_never_panic_or_return_other_data() {
        let n = std::env::var("RC_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000u64);
        for seed in 0..n {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let data = input(&mut rng);
            let r = std::panic::catch_unwind(|| check_decode_metadata(&data));
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("decode_metadata seed {seed}: {e}\ninput {data:02x?}"),
                Err(p) => panic!("decode_metadata seed {seed} panicked: {p:?}\ninput {data:02x?}"),
            }
        }
    }
}
