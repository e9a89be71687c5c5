//! Compression at the board's settings: 512-byte-block SD cards, 4 KiB strips, small extents
//! and small segments. The board tests and the pool self-test ran with compression off,
//! citing "compressed extents read back as `Unrecoverable` after a flush (one 4 KiB block of
//! 0x5A, write, flush, read, on 512-byte-block disks)". These tests run exactly that, and a
//! sweep around it, on fake SD cards through `embedded-sdmmc`, across a close and re-import.

mod common;

use raidcore::pool::{ImportOptions, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_board::fake_sd::{SharedCard, card_rig};

type CardPool = Pool<SharedCard, Vec<u8>, 8, 4, 32, 8>;

fn config(max_extent_blocks: u8, zil_slots: u32) -> PoolConfig {
    PoolConfig {
        level: Level::Raid6,
        strip_bytes: 4096,
        max_extent_blocks,
        compression: true,
        zil_slots,
        segment_stripes: 4,
        max_segments: 256,
        ..PoolConfig::default()
    }
}

fn new_pool(cfg: PoolConfig) -> CardPool {
    let mut rig = card_rig(7, 2, 8192); // 4 MiB cards
    let spare = rig.devices.pop().unwrap();
    let mem = vec![0u8; CardPool::memory_bytes(&cfg, 6)];
    CardPool::create(rig.devices, [spare], cfg, *b"raidcore-board-c", mem).unwrap()
}

/// Closes the pool cleanly and imports it again from its cards.
fn reimport(pool: CardPool, cfg: PoolConfig) -> CardPool {
    let (members, spares, mem) = pool.shutdown().unwrap();
    let disks = members.into_iter().flatten().chain(spares);
    let opts = ImportOptions {
        config: cfg,
        skip_refused: false,
        force: false,
        rewind: false,
    };
    CardPool::import(disks, opts, mem).unwrap().0
}

#[test]
fn one_block_of_0x5a_reads_back_after_flush_and_import() {
    let cfg = config(8, 16);
    let mut pool = new_pool(cfg);
    let lun = pool.create_lun("c", 256).unwrap();
    let block = [0x5Au8; 4096];
    pool.write(lun, 0, &block, false).unwrap();
    pool.flush().unwrap();
    let mut back = [0u8; 4096];
    pool.read(lun, 0, &mut back).unwrap();
    assert_eq!(back, block);
    let st = pool.stats();
    assert!(
        st.counters.extent_stored_bytes < 4096,
        "the block was stored compressed: {st:?}"
    );
    let mut pool = reimport(pool, cfg);
    back.fill(0);
    pool.read(lun, 0, &mut back).unwrap();
    assert_eq!(back, block, "after re-import");
}

/// 4 KiB block `i` of one of four kinds of content: one repeated byte, text, zeros, or bytes
/// that do not compress.
fn pattern(kind: usize, i: usize) -> Vec<u8> {
    match kind {
        0 => vec![0x5A ^ i as u8; 4096],
        1 => common::text(i * 4096, 4096),
        2 => vec![0; 4096],
        _ => common::noise(i as u64, 4096),
    }
}

#[test]
fn compressed_extents_of_every_size_read_back_after_flush_and_import() {
    for extent in [1u8, 2, 4, 8] {
        for zil in [16u32, 32] {
            let cfg = config(extent, zil);
            let mut pool = new_pool(cfg);
            let lun = pool.create_lun("c", 512).unwrap();
            let mut want = Vec::new();
            // Runs of each kind, flushed at odd points so extents close at every length.
            for i in 0..96usize {
                let b = pattern((i / 5) % 4, i);
                pool.write(lun, i as u64, &b, i % 7 == 3).unwrap();
                if i % 11 == 10 {
                    pool.flush().unwrap();
                }
                want.push(b);
            }
            pool.flush().unwrap();
            let check = |pool: &mut CardPool, when: &str| {
                let mut back = vec![0u8; 4096];
                for (i, b) in want.iter().enumerate() {
                    pool.read(lun, i as u64, &mut back).unwrap_or_else(|e| {
                        panic!("extent {extent} zil {zil} block {i} {when}: {e:?}")
                    });
                    assert_eq!(&back, b, "extent {extent} zil {zil} block {i} {when}");
                }
            };
            check(&mut pool, "after flush");
            let st = pool.stats();
            assert!(
                st.compression_ratio() > 1.2,
                "extent {extent}: ratio {}",
                st.compression_ratio()
            );
            let mut pool = reimport(pool, cfg);
            check(&mut pool, "after import");
        }
    }
}
