//! The SCSI front end (`raidcore_board::scsi`) against a real RAID-6 pool over fake SD cards:
//! every command the USB mass-storage firmware serves, and every sense path, through a host
//! double that moves the data phase in 64-byte packets and now and then has no room at all.

mod common;

use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore_board::fake_sd::{CardRig, Fault, SharedCard, card_rig};
use raidcore_board::scsi::{DataPhase, Poll, ScsiTarget, Sense, Status, key};
use raidcore_hal::BlockSize;

type CardPool = Pool<SharedCard, Vec<u8>, 8, 3, 16, 2>;

const UUID: [u8; 16] = *b"raidcore-scsi-t1";

/// The RP2040 firmware's settings (RAID-6, 4 KiB strips, 8 KiB extents, LZ4 on).
fn config() -> PoolConfig {
    raidcore_board::pico::pool_config()
}

/// A RAID-6 pool on six 4 MiB fake cards plus a spare, with one LUN of `lun_blocks`.
fn pool(lun_blocks: u64) -> (CardPool, CardRig) {
    let mut rig = card_rig(7, 2, 8192);
    let spare = rig.devices.pop().unwrap();
    let members: Vec<SharedCard> = rig.devices.drain(..).collect();
    let cfg = config();
    let mem = vec![0u8; CardPool::memory_bytes(&cfg, 6)];
    let mut p = CardPool::create(members, [spare], cfg, UUID, mem).unwrap();
    assert_eq!(p.create_lun("usb", lun_blocks).unwrap(), 0);
    (p, rig)
}

/// The host side of the data phase: bytes to send (data-out) and bytes received (data-in), at
/// most one 64-byte packet per call, and no room at all on every third call.
#[derive(Default)]
struct Host {
    out: Vec<u8>,
    out_pos: usize,
    got: Vec<u8>,
    calls: u32,
}

impl Host {
    fn room(&mut self) -> usize {
        self.calls += 1;
        if self.calls.is_multiple_of(3) { 0 } else { 64 }
    }
}

impl DataPhase for Host {
    fn receive(&mut self, buf: &mut [u8]) -> usize {
        let n = self
            .room()
            .min(buf.len())
            .min(self.out.len() - self.out_pos);
        buf[..n].copy_from_slice(&self.out[self.out_pos..][..n]);
        self.out_pos += n;
        n
    }
    fn send(&mut self, data: &[u8]) -> usize {
        let n = self.room().min(data.len());
        self.got.extend_from_slice(&data[..n]);
        n
    }
}

struct Done {
    status: Status,
    bytes: u32,
    data: Vec<u8>,
    polls: u32,
}

/// Runs one command to completion: CDB, data-out bytes; status, bytes, data-in, polls.
fn run(t: &mut ScsiTarget, p: &mut CardPool, cdb: &[u8], out: &[u8]) -> Done {
    let mut host = Host {
        out: out.to_vec(),
        ..Host::default()
    };
    t.start(p, cdb);
    for polls in 1..1_000_000 {
        if let Poll::Done { status, bytes } = t.poll(p, &mut host) {
            assert!(!t.busy());
            return Done {
                status,
                bytes,
                data: host.got,
                polls,
            };
        }
        assert!(t.busy());
    }
    panic!("command {cdb:02x?} never completed");
}

fn good(t: &mut ScsiTarget, p: &mut CardPool, cdb: &[u8], out: &[u8]) -> Vec<u8> {
    let d = run(t, p, cdb, out);
    assert_eq!(d.status, Status::Good, "{cdb:02x?}: sense {:?}", t.sense());
    d.data
}

/// Runs `cdb`, expects CHECK CONDITION, and reads the sense data back with REQUEST SENSE.
fn check(t: &mut ScsiTarget, p: &mut CardPool, cdb: &[u8], out: &[u8]) -> [u8; 18] {
    let d = run(t, p, cdb, out);
    assert_eq!(d.status, Status::CheckCondition, "{cdb:02x?}");
    let s = good(t, p, &[0x03, 0, 0, 0, 18, 0], &[]);
    assert_eq!(s.len(), 18);
    assert_eq!(
        good(t, p, &[0x03, 0, 0, 0, 18, 0], &[])[2],
        key::NO_SENSE,
        "REQUEST SENSE clears the sense data"
    );
    s.try_into().unwrap()
}

fn sense_fields(s: &[u8; 18]) -> (u8, u8, u8) {
    assert_eq!(s[0] & 0x7F, 0x70, "fixed format, current error");
    assert_eq!(s[7], 10, "additional sense length");
    (s[2] & 0x0F, s[12], s[13])
}

fn rw10(op: u8, fua: bool, lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = op;
    c[1] = if fua { 0x08 } else { 0 };
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn rw16(op: u8, lba: u64, blocks: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&blocks.to_be_bytes());
    c
}

/// Real bytes from this machine.
fn text(len: usize) -> Vec<u8> {
    common::text(0, len)
}

#[test]
fn inquiry_standard_data_and_vital_product_pages() {
    let (mut p, _rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let d = good(&mut t, &mut p, &[0x12, 0, 0, 0, 36, 0], &[]);
    assert_eq!(d.len(), 36);
    assert_eq!(d[0], 0x00, "direct-access block device");
    assert_eq!(d[2], 0x06, "SPC-4");
    assert_eq!(&d[8..16], b"raidcore");
    assert_eq!(&d[16..32], b"RAID pool LUN   ");
    // The allocation length cuts the data.
    assert_eq!(good(&mut t, &mut p, &[0x12, 0, 0, 0, 5, 0], &[]).len(), 5);

    let pages = good(&mut t, &mut p, &[0x12, 1, 0x00, 0, 255, 0], &[]);
    assert_eq!(pages, [0, 0, 0, 4, 0x00, 0x80, 0xB0, 0xB2]);
    let serial = good(&mut t, &mut p, &[0x12, 1, 0x80, 0, 255, 0], &[]);
    let hex: String = UUID
        .iter()
        .flat_map(|b| format!("{b:02X}").into_bytes())
        .map(char::from)
        .collect();
    assert_eq!(&serial[4..], hex.as_bytes());
    let limits = good(&mut t, &mut p, &[0x12, 1, 0xB0, 0, 255, 0], &[]);
    assert_eq!(limits.len(), 0x40);
    assert_eq!(&limits[24..28], &16u32.to_be_bytes(), "UNMAP descriptors");
    assert_eq!(&limits[28..32], &8u32.to_be_bytes(), "UNMAP granularity");
    let prov = good(&mut t, &mut p, &[0x12, 1, 0xB2, 0, 255, 0], &[]);
    assert_eq!(prov[5] & 0x80, 0x80, "LBPU: UNMAP supported");

    let s = check(&mut t, &mut p, &[0x12, 1, 0x83, 0, 255, 0], &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x24, 0));
}

#[test]
fn capacity_at_512_and_4096_byte_blocks() {
    let (mut p, _rig) = pool(300);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let c = good(&mut t, &mut p, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(
        c,
        [0, 0, 0x09, 0x5F, 0, 0, 0x02, 0x00],
        "2400 blocks of 512"
    );
    let mut rc16 = [0u8; 16];
    rc16[0] = 0x9E;
    rc16[1] = 0x10;
    rc16[13] = 32;
    let c = good(&mut t, &mut p, &rc16, &[]);
    assert_eq!(c.len(), 32);
    assert_eq!(&c[0..8], &2399u64.to_be_bytes());
    assert_eq!(&c[8..12], &512u32.to_be_bytes());
    assert_eq!(c[13], 3, "8 logical blocks per 4 KiB pool block");
    assert_eq!(c[14] & 0xC0, 0xC0, "LBPME and LBPRZ");
    let f = good(&mut t, &mut p, &[0x23, 0, 0, 0, 0, 0, 0, 0, 12, 0], &[]);
    assert_eq!(&f[4..8], &2400u32.to_be_bytes());
    assert_eq!(f[8], 0x02, "formatted media");
    assert_eq!(&f[9..12], &[0, 2, 0]);

    let mut t4 = ScsiTarget::new(0, BlockSize::B4096);
    let c = good(&mut t4, &mut p, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(
        c,
        [0, 0, 0x01, 0x2B, 0, 0, 0x10, 0x00],
        "300 blocks of 4096"
    );
    assert_eq!(good(&mut t4, &mut p, &rc16, &[])[13], 0);
}

#[test]
fn mode_sense_reports_a_write_cache_and_fua_support() {
    let (mut p, _rig) = pool(64);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let m = good(&mut t, &mut p, &[0x1A, 0, 0x08, 0, 255, 0], &[]);
    assert_eq!(m.len(), 24);
    assert_eq!(m[0], 23, "mode data length");
    assert_eq!(m[2] & 0x10, 0x10, "DPOFUA");
    assert_eq!(&m[4..6], &[0x08, 0x12], "caching page");
    assert_eq!(m[6] & 0x04, 0x04, "WCE");
    let m = good(&mut t, &mut p, &[0x5A, 0, 0x3F, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(m.len(), 28);
    assert_eq!(&m[0..2], &26u16.to_be_bytes());
    assert_eq!(m[3] & 0x10, 0x10, "DPOFUA");
    assert_eq!(m[8], 0x08);
    let s = check(&mut t, &mut p, &[0x1A, 0, 0x1C, 0, 255, 0], &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x24, 0));
}

#[test]
fn write_and_read_10_at_512_byte_blocks_keep_the_rest_of_each_pool_block() {
    let (mut p, _rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    // Whole pool blocks first, then a write that starts and ends inside pool blocks.
    let base = text(16 * 4096);
    good(&mut t, &mut p, &rw10(0x2A, false, 0, 128), &base);
    let patch: Vec<u8> = text(37 * 512 + 100)[100..].to_vec();
    assert_eq!(patch.len(), 37 * 512);
    let d = run(&mut t, &mut p, &rw10(0x2A, false, 13, 37), &patch);
    assert_eq!((d.status, d.bytes), (Status::Good, 37 * 512));
    assert!(d.polls > 37 * 512 / 64, "moved packet by packet");
    let mut want = base.clone();
    want[13 * 512..50 * 512].copy_from_slice(&patch);
    let back = good(&mut t, &mut p, &rw10(0x28, false, 0, 128), &[]);
    assert!(back == want, "READ(10) returns what was written");
    // The pool holds the same bytes at the same offsets (4 KiB blocks).
    let mut blk = vec![0u8; 4096];
    for i in 0..16 {
        p.read(0, i, &mut blk).unwrap();
        assert!(blk == want[i as usize * 4096..][..4096], "pool block {i}");
    }
    // Zero-length transfers move nothing and succeed.
    let d = run(&mut t, &mut p, &rw10(0x28, false, 5, 0), &[]);
    assert_eq!((d.status, d.bytes, d.data.len()), (Status::Good, 0, 0));
}

#[test]
fn write_and_read_16_at_4096_byte_blocks() {
    let (mut p, _rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B4096);
    let data = text(20 * 4096);
    good(&mut t, &mut p, &rw16(0x8A, 200, 20), &data);
    assert!(good(&mut t, &mut p, &rw16(0x88, 200, 20), &[]) == data);
    // READ(6)/WRITE(6) too.
    good(&mut t, &mut p, &[0x0A, 0, 0, 7, 1, 0], &data[..4096]);
    assert!(good(&mut t, &mut p, &[0x08, 0, 0, 7, 1, 0], &[]) == data[..4096]);
}

/// Closes the pool as a power cut would (nothing written) and imports it again.
fn power_cut(p: CardPool) -> CardPool {
    let (members, spares, mem) = p.into_parts();
    let opts = ImportOptions {
        config: config(),
        skip_refused: false,
        force: false,
        rewind: false,
    };
    CardPool::import(members.into_iter().flatten().chain(spares), opts, mem)
        .unwrap()
        .0
}

#[test]
fn fua_writes_and_synchronize_cache_survive_a_power_cut() {
    let (mut p, _rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let a = text(4096);
    let b: Vec<u8> = a.iter().map(|x| x ^ 0x55).collect();
    let c: Vec<u8> = a.iter().map(|x| x ^ 0xAA).collect();
    good(&mut t, &mut p, &rw10(0x2A, true, 0, 8), &a); // FUA
    good(&mut t, &mut p, &rw10(0x2A, false, 80, 8), &b);
    good(&mut t, &mut p, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]); // SYNCHRONIZE CACHE(10)
    good(&mut t, &mut p, &rw10(0x2A, false, 160, 8), &c); // neither
    let mut p = power_cut(p);
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 0, 8), &[]) == a);
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 80, 8), &[]) == b);
    // The write with neither FUA nor a flush was still in RAM: the cut lost it (which shows
    // the two checks above would catch a FUA or flush that did nothing).
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 160, 8), &[]) == vec![0u8; 4096]);
    // SYNCHRONIZE CACHE(16) and START STOP UNIT (stop) flush too.
    good(&mut t, &mut p, &rw10(0x2A, false, 160, 8), &c);
    let mut sc16 = [0u8; 16];
    sc16[0] = 0x91;
    good(&mut t, &mut p, &sc16, &[]);
    good(&mut t, &mut p, &rw10(0x2A, false, 240, 8), &b);
    good(&mut t, &mut p, &[0x1B, 0, 0, 0, 0, 0], &[]);
    let mut p = power_cut(p);
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 160, 8), &[]) == c);
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 240, 8), &[]) == b);
}

fn unmap_params(ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut v = vec![0u8; 8];
    v[0..2].copy_from_slice(&((6 + 16 * ranges.len()) as u16).to_be_bytes());
    v[2..4].copy_from_slice(&((16 * ranges.len()) as u16).to_be_bytes());
    for &(lba, n) in ranges {
        v.extend_from_slice(&lba.to_be_bytes());
        v.extend_from_slice(&n.to_be_bytes());
        v.extend_from_slice(&[0; 4]);
    }
    v
}

fn unmap_cdb(len: usize) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = 0x42;
    c[7..9].copy_from_slice(&(len as u16).to_be_bytes());
    c
}

#[test]
fn unmap_trims_whole_pool_blocks_and_zeroes_partial_ones() {
    let (mut p, _rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let data = text(64 * 4096);
    good(&mut t, &mut p, &rw10(0x2A, false, 0, 512), &data);
    good(&mut t, &mut p, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    let live_before = p.stats().live_bytes;
    // Sectors 3..200 (pool blocks 1..25 whole, 0 and 25 in part) and 400..408 (block 50).
    let params = unmap_params(&[(3, 197), (400, 8)]);
    let d = run(&mut t, &mut p, &unmap_cdb(params.len()), &params);
    assert_eq!((d.status, d.bytes), (Status::Good, params.len() as u32));
    let mut want = data.clone();
    want[3 * 512..200 * 512].fill(0);
    want[400 * 512..408 * 512].fill(0);
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 0, 512), &[]) == want);
    good(&mut t, &mut p, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert!(
        p.stats().live_bytes < live_before,
        "the trimmed blocks' space is freed"
    );
    // A range past the end is refused whole.
    let params = unmap_params(&[(0, 8), (2040, 16)]);
    let s = check(&mut t, &mut p, &unmap_cdb(params.len()), &params);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x21, 0));
    assert!(good(&mut t, &mut p, &rw10(0x28, false, 0, 8), &[]) == want[..4096]);
    // Too many descriptors for the Block Limits page.
    let many: Vec<(u64, u32)> = (0..17).map(|i| (i * 8, 8)).collect();
    let params = unmap_params(&many);
    let s = check(&mut t, &mut p, &unmap_cdb(params.len()), &params);
    assert_eq!(sense_fields(&s).0, key::ILLEGAL_REQUEST);
}

#[test]
fn illegal_requests_get_their_sense_codes() {
    let (mut p, _rig) = pool(64);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    // Past the end of the LUN (512 sectors).
    let s = check(&mut t, &mut p, &rw10(0x28, false, 510, 3), &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x21, 0));
    let s = check(&mut t, &mut p, &rw16(0x8A, u64::MAX, 2), &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x21, 0));
    // An unknown operation code, and a CDB too short for its operation.
    let s = check(&mut t, &mut p, &[0xC7, 0, 0, 0, 0, 0], &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x20, 0));
    let s = check(&mut t, &mut p, &[0x28, 0, 0], &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x24, 0));
    let s = check(&mut t, &mut p, &[], &[]);
    assert_eq!(sense_fields(&s), (key::ILLEGAL_REQUEST, 0x20, 0));
    // The commands that only answer.
    good(&mut t, &mut p, &[0x00, 0, 0, 0, 0, 0], &[]);
    good(&mut t, &mut p, &[0x1E, 0, 0, 0, 1, 0], &[]);
    good(&mut t, &mut p, &[0x2F, 0, 0, 0, 0, 0, 0, 0, 8, 0], &[]);
    // A new command clears sense data that was not asked for.
    let d = run(&mut t, &mut p, &[0xC7], &[]);
    assert_eq!(d.status, Status::CheckCondition);
    good(&mut t, &mut p, &[0x00, 0, 0, 0, 0, 0], &[]);
    assert_eq!(t.sense(), Sense::NONE);
}

#[test]
fn a_lost_block_is_a_medium_error_at_its_first_logical_block() {
    let (mut p, rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let data = text(32 * 4096);
    good(&mut t, &mut p, &rw10(0x2A, true, 0, 256), &data);
    // Three cards of a RAID-6 set cannot read any block of the data area: more damage than
    // the level tolerates, but latent sector errors, so no member is failed.
    for c in &rig.cards[..3] {
        for lba in 0..8192 {
            c.inject(Fault::ReadErrorAt { lba });
        }
    }
    let d = run(&mut t, &mut p, &rw10(0x28, false, 24, 40), &[]);
    assert_eq!(d.status, Status::CheckCondition);
    let s = t.sense();
    assert_eq!((s.key, s.asc, s.ascq), (key::MEDIUM_ERROR, 0x11, 0));
    let lba = s.info.expect("INFORMATION names the block");
    assert!(
        (24..64).contains(&lba) && lba.is_multiple_of(8),
        "first sector of a lost pool block inside the request: {lba}"
    );
    assert_eq!(u64::from(d.bytes), (lba.max(24) - 24) * 512);
    let raw = check(&mut t, &mut p, &rw10(0x28, false, 24, 40), &[]);
    assert_eq!(sense_fields(&raw), (key::MEDIUM_ERROR, 0x11, 0));
    assert_eq!(raw[0] & 0x80, 0x80, "VALID");
    assert_eq!(&raw[3..7], &(lba as u32).to_be_bytes());
}

#[test]
fn a_faulted_pool_is_a_logical_unit_failure() {
    let (mut p, rig) = pool(256);
    let mut t = ScsiTarget::new(0, BlockSize::B512);
    let data = text(8 * 4096);
    good(&mut t, &mut p, &rw10(0x2A, true, 0, 64), &data);
    for c in &rig.cards[..3] {
        c.remove();
    }
    // The pool finds the cards gone when it next touches them.
    let d = run(&mut t, &mut p, &rw10(0x2A, true, 64, 64), &data);
    assert_eq!(d.status, Status::CheckCondition);
    for cdb in [
        &[0x00u8, 0, 0, 0, 0, 0][..],
        &rw10(0x28, false, 0, 8),
        &rw10(0x2A, false, 0, 8),
        &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        let s = check(&mut t, &mut p, cdb, &data[..4096]);
        assert_eq!(
            sense_fields(&s),
            (key::HARDWARE_ERROR, 0x3E, 0x01),
            "{cdb:02x?}"
        );
    }
    // INQUIRY still answers (the host can see what the device is).
    good(&mut t, &mut p, &[0x12, 0, 0, 0, 36, 0], &[]);
}

#[test]
fn a_full_pool_refuses_writes_with_data_protect() {
    // Two thin LUNs, each as large as the pool: noise written to the first fills the pool, and
    // writes to the second soon have nowhere to go.
    let (mut p, _rig) = pool(64);
    let blocks = p.usable_bytes() / 4096;
    let other = p.create_lun("filler", blocks).unwrap();
    for lba in 0..blocks {
        let noise = common::noise(0x1234_5678 + lba, 4096);
        match p.write(other, lba, &noise, false) {
            Ok(()) => {}
            Err(raidcore::pool::IoError::NoSpace) => break,
            Err(e) => panic!("filling block {lba}: {e:?}"),
        }
    }
    let last = p.create_lun("last", blocks).unwrap();
    let mut t = ScsiTarget::new(last, BlockSize::B4096);
    for lba in 0..blocks as u32 {
        let noise = common::noise(0x9876_5432 + u64::from(lba), 4096);
        let d = run(&mut t, &mut p, &rw10(0x2A, false, lba, 1), &noise);
        if d.status == Status::CheckCondition {
            let sn = t.sense();
            assert_eq!((sn.key, sn.asc, sn.ascq), (key::DATA_PROTECT, 0x27, 0x07));
            return;
        }
    }
    panic!("the pool took {blocks} blocks of noise twice over");
}
