//! Golden images: fixed pools run fixed workloads on in-memory disks, and the CRC32C of every
//! member image after each phase is compared with `tests/golden/images.txt`. Restructuring the
//! engine must not change one byte the pools write; a change of the on-disk format or of what
//! the engine decides to write shows up here as a diff, and is then made on purpose (update with
//! `RAIDCORE_UPDATE_GOLDEN=1 cargo test -p raidcore-tests --test golden_image`).
//!
//! Each scenario covers the paths a refactor could disturb: coalesced sequential streams,
//! random and FUA writes, TRIM, idle closing, the intent log, checkpoints, the cleaner on a full
//! pool, a latent sector error healed by a read, bit rot repaired by a scrub, a member failed
//! and rebuilt onto the hot spare, a crash (no flush) recovered by import, and a clean shutdown.

use std::fmt::Write as _;
use std::path::PathBuf;

use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// A plain in-memory disk with switchable latent sector errors.
#[derive(Debug, Clone)]
struct Disk {
    data: Vec<u8>,
    bs: usize,
    medium: Vec<u64>,
}

impl ErrorType for Disk {
    type Error = ErrorKind;
}

impl BlockDevice for Disk {
    fn block_size(&self) -> BlockSize {
        BlockSize::from_bytes(self.bs).expect("512 or 4096")
    }
    fn block_count(&self) -> u64 {
        (self.data.len() / self.bs) as u64
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        if let Some(&bad) = self.medium.iter().find(|&&b| b >= lba && b < lba + n) {
            return Err(ErrorKind::Medium { lba: bad });
        }
        let o = lba as usize * self.bs;
        buf.copy_from_slice(&self.data[o..o + buf.len()]);
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        let n = check_io(self.block_size(), self.block_count(), lba, buf.len())?;
        self.medium.retain(|&b| b < lba || b >= lba + n);
        let o = lba as usize * self.bs;
        self.data[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

type GoldenPool = Pool<Disk, Vec<u8>, 8, 4, 32, 8>;

/// The shape of one scenario.
struct Scenario {
    name: &'static str,
    level: Level,
    disks: usize,
    spares: usize,
    block: usize,
    disk_bytes: usize,
    strip: u32,
    extent: u8,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "raid6",
        level: Level::Raid6,
        disks: 6,
        spares: 1,
        block: 4096,
        disk_bytes: 12 << 20,
        strip: 64 * 1024,
        extent: 32,
    },
    Scenario {
        name: "raid5",
        level: Level::Raid5,
        disks: 4,
        spares: 1,
        block: 512,
        disk_bytes: 6 << 20,
        strip: 4096,
        extent: 8,
    },
    Scenario {
        name: "raid1",
        level: Level::Raid1,
        disks: 3,
        spares: 1,
        block: 4096,
        disk_bytes: 16 << 20,
        strip: 16 * 1024,
        extent: 16,
    },
    Scenario {
        name: "raid10",
        level: Level::Raid10,
        disks: 4,
        spares: 1,
        block: 4096,
        disk_bytes: 6 << 20,
        strip: 32 * 1024,
        extent: 8,
    },
    Scenario {
        name: "raid0",
        level: Level::Raid0,
        disks: 3,
        spares: 0,
        block: 512,
        disk_bytes: 6 << 20,
        strip: 8 * 1024,
        extent: 4,
    },
];

fn config(s: &Scenario) -> PoolConfig {
    PoolConfig {
        level: s.level,
        strip_bytes: s.strip,
        max_extent_blocks: s.extent,
        zil_slots: 32,
        segment_stripes: 2,
        max_segments: 128,
        reserved_segments: 3,
        cleaner_reserve: 1,
        ..PoolConfig::default()
    }
}

/// Block `tag` of the workload: half compressible text-like bytes, half xorshift noise.
fn block(tag: u64) -> Vec<u8> {
    let mut x = tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = vec![0u8; 4096];
    if tag.is_multiple_of(2) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = b"raidcore golden image "[(i + tag as usize) % 22];
        }
        out[..8].copy_from_slice(&tag.to_le_bytes());
    } else {
        for b in &mut out {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    out
}

/// What every LBA should read back (tag 0: zeros).
struct Model {
    luns: Vec<Vec<u64>>,
}

impl Model {
    fn write(&mut self, p: &mut GoldenPool, lun: u16, lba: u64, tags: &[u64], fua: bool) {
        let mut data = Vec::with_capacity(tags.len() * 4096);
        for &t in tags {
            data.extend_from_slice(&block(t));
        }
        p.write(lun, lba, &data, fua).expect("write");
        for (i, &t) in tags.iter().enumerate() {
            self.luns[lun as usize][lba as usize + i] = t;
        }
    }

    fn verify(&self, p: &mut GoldenPool) {
        let mut buf = vec![0u8; 4096];
        for (lun, tags) in self.luns.iter().enumerate() {
            for (lba, &t) in tags.iter().enumerate() {
                p.read(lun as u16, lba as u64, &mut buf)
                    .unwrap_or_else(|e| panic!("read lun {lun} lba {lba}: {e}"));
                let want = if t == 0 { vec![0u8; 4096] } else { block(t) };
                assert!(buf == want, "lun {lun} lba {lba}: wrong data");
            }
        }
    }
}

fn disk(s: &Scenario) -> Disk {
    Disk {
        data: vec![0; s.disk_bytes],
        bs: s.block,
        medium: Vec::new(),
    }
}

/// One line per member and spare: phase, slot, CRC32C of the whole image.
fn record(out: &mut String, name: &str, phase: &str, members: &[Option<Disk>], spares: &[Disk]) {
    for (i, d) in members.iter().enumerate() {
        let crc = d.as_ref().map_or(0, |d| crc32c::crc32c(&d.data));
        writeln!(out, "{name} {phase} member{i} {crc:08x}").unwrap();
    }
    for (i, d) in spares.iter().enumerate() {
        writeln!(
            out,
            "{name} {phase} spare{i} {:08x}",
            crc32c::crc32c(&d.data)
        )
        .unwrap();
    }
}

/// Closes the pool (cleanly or as a power cut), records its images, imports it again.
fn cycle(out: &mut String, s: &Scenario, p: GoldenPool, phase: &str, clean: bool) -> GoldenPool {
    let (members, spares, mem) = if clean {
        p.shutdown().expect("shutdown")
    } else {
        p.into_parts()
    };
    record(out, s.name, phase, &members, &spares);
    let all: Vec<Disk> = members.into_iter().flatten().chain(spares).collect();
    let (p, rep) = GoldenPool::import(
        all,
        ImportOptions {
            config: config(s),
            skip_refused: false,
            force: false,
            rewind: false,
        },
        mem,
    )
    .expect("import");
    writeln!(
        out,
        "{} {phase} import root_gen={} items={} lost={} zil={} resynced={} missing={}",
        s.name,
        rep.root_gen,
        rep.items_replayed,
        rep.items_lost,
        rep.zil_records,
        rep.resynced_stripes,
        rep.missing
    )
    .unwrap();
    p
}

fn maintain(p: &mut GoldenPool) -> u32 {
    let mut calls = 0;
    while !p.maintenance().expect("maintenance").idle {
        calls += 1;
        assert!(calls < 100_000, "maintenance never idles");
    }
    calls
}

/// Writes of the first phase: interleaved sequential streams, random blocks, FUA, TRIM.
fn write_phase(p: &mut GoldenPool, m: &mut Model, lun_blocks: u64, tag: &mut u64) {
    let mut next = || {
        *tag += 1;
        *tag
    };
    for round in 0..48u64 {
        for lun in 0..2u16 {
            let lba = round * 3 + u64::from(lun) * 7;
            let tags: Vec<u64> = (0..3).map(|_| next()).collect();
            m.write(p, lun, lba, &tags, false);
        }
        let r = (round * 2_654_435_761) % lun_blocks;
        m.write(p, 1, r, &[next()], round % 7 == 0);
        if round % 16 == 15 {
            p.flush().expect("flush");
        }
        p.set_time(round * 10_000_000);
    }
    p.trim(0, 10, 5).expect("trim");
    for lba in 10..15 {
        m.luns[0][lba] = 0;
    }
    // Idle streams close by the clock.
    p.set_time(10_000_000_000);
    m.write(p, 0, 200, &[next()], false);
    p.flush().expect("flush");
}

/// Fills LUN 0, then overwrites scattered blocks of it until the cleaner has relocated live
/// extents out of partly dead segments.
fn fill_phase(p: &mut GoldenPool, m: &mut Model, lun_blocks: u64, tag: &mut u64) {
    let mut next = || {
        *tag += 1;
        *tag
    };
    let mut lba = 0;
    while lba < lun_blocks {
        let n = 8.min(lun_blocks - lba);
        let tags: Vec<u64> = (0..n).map(|_| next()).collect();
        m.write(p, 0, lba, &tags, false);
        lba += n;
    }
    p.flush().expect("flush");
    let writes = 2 * p.usable_bytes() / 4096;
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..writes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m.write(p, 0, x % lun_blocks, &[next()], false);
        if i % 512 == 511 {
            p.flush().expect("flush");
        }
    }
    p.flush().expect("flush");
}

fn run(s: &Scenario) -> String {
    let mut out = String::new();
    let cfg = config(s);
    let mem = vec![0u8; GoldenPool::memory_bytes(&cfg, s.disks)];
    let members: Vec<Disk> = (0..s.disks).map(|_| disk(s)).collect();
    let spares: Vec<Disk> = (0..s.spares).map(|_| disk(s)).collect();
    let mut p = GoldenPool::create(members, spares, cfg, [0x5a; 16], mem).expect("create");
    let lun_blocks = p.usable_bytes() / 4096 / 3;
    let small = 256u64.min(lun_blocks);
    let mut m = Model {
        luns: vec![vec![0; lun_blocks as usize], vec![0; small as usize]],
    };
    assert_eq!(p.create_lun("big", lun_blocks).unwrap(), 0);
    assert_eq!(p.create_lun("small", small).unwrap(), 1);
    let mut tag = 0u64;
    write_phase(&mut p, &mut m, small, &mut tag);
    // A crash with writes buffered and a FUA write in the intent log.
    m.write(&mut p, 1, 3, &[1001], true);
    m.write(&mut p, 1, 4, &[1002], false);
    p.flush().expect("flush");
    let mut p = cycle(&mut out, s, p, "crash", false);
    m.verify(&mut p);
    fill_phase(&mut p, &mut m, lun_blocks, &mut tag);
    let st = p.stats();
    writeln!(
        out,
        "{} filled checkpoints={} cleaner_log_bytes={} free_segments={}",
        s.name, st.counters.checkpoints, st.counters.cleaner_log_bytes, st.free_segments
    )
    .unwrap();
    let mut p = cycle(&mut out, s, p, "filled", true);
    m.verify(&mut p);
    if s.level != Level::Raid0 {
        faults_phase(&mut out, s, &mut p);
        m.verify(&mut p);
    }
    let mut p = cycle(&mut out, s, p, "final", true);
    m.verify(&mut p);
    let (members, spares, _) = p.shutdown().expect("shutdown");
    record(&mut out, s.name, "end", &members, &spares);
    out
}

/// A latent sector error under a mapped block, bit rot for the scrub, a member failed and
/// rebuilt onto the spare.
fn faults_phase(out: &mut String, s: &Scenario, p: &mut GoldenPool) {
    let geo = *p.array().geometry();
    let first = geo.stripe_lba(0);
    let bs = s.block as u64;
    if let Some(d) = p.array_mut().disk_mut(1) {
        d.medium.push(first + 4096 / bs);
        let o = ((first + 2) * bs) as usize;
        for b in &mut d.data[o..o + 64] {
            *b ^= 0xa5;
        }
    }
    p.start_scrub();
    let calls = maintain(p);
    let st = p.status();
    writeln!(
        out,
        "{} scrub calls={calls} repaired={} unrepairable={}",
        s.name, st.scrub_repaired, st.scrub_unrepairable
    )
    .unwrap();
    p.fail_disk(2).expect("fail");
    let calls = maintain(p);
    let st = p.status();
    writeln!(
        out,
        "{} rebuild calls={calls} health={} spares={}",
        s.name,
        st.health.name(),
        st.spares
    )
    .unwrap();
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/images.txt")
}

#[test]
fn member_images_match_the_golden_hashes() {
    let mut got = String::new();
    for s in &SCENARIOS {
        got.push_str(&run(s));
    }
    let path = golden_path();
    if std::env::var_os("RAIDCORE_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (RAIDCORE_UPDATE_GOLDEN=1 writes it)",
            path.display()
        )
    });
    let diff: Vec<String> = want
        .lines()
        .zip(got.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("- {a}\n+ {b}"))
        .collect();
    assert!(
        diff.is_empty() && want.lines().count() == got.lines().count(),
        "member images differ from {} ({} lines differ, {} vs {} lines):\n{}\n\
         If the change is intended (a format change), update with RAIDCORE_UPDATE_GOLDEN=1.",
        path.display(),
        diff.len(),
        want.lines().count(),
        got.lines().count(),
        diff.join("\n")
    );
}
