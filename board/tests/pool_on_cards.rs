//! A whole RAID-6 pool over six fake SD cards (plus a hot spare card) on two shared SPI buses,
//! driven through `embedded-sdmmc`: write real data, read it back, pull a card, keep serving,
//! rebuild onto the spare card, verify every block.

use raidcore::pool::{Health, Pool, PoolConfig};
use raidcore::raid::Level;
use raidcore_board::fake_sd::{SharedCard, card_rig};

type CardPool = Pool<SharedCard, Vec<u8>, 8, 4, 32, 8>;

fn config() -> PoolConfig {
    PoolConfig {
        level: Level::Raid6,
        strip_bytes: 4096,
        max_extent_blocks: 8,
        zil_slots: 32,
        segment_stripes: 4,
        max_segments: 256,
        compression: true,
        ..PoolConfig::default()
    }
}

/// Real data from this machine, 4 KiB blocks: Debian's licence texts, repeated to `blocks`.
fn real_blocks(blocks: usize) -> Vec<u8> {
    let mut src = Vec::new();
    for f in [
        "/usr/share/common-licenses/GPL-3",
        "/usr/share/common-licenses/Apache-2.0",
        "/usr/share/common-licenses/GPL-2",
    ] {
        src.extend(std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")));
    }
    src.iter().copied().cycle().take(blocks * 4096).collect()
}

#[test]
fn raid6_pool_on_six_cards_survives_a_pulled_card_and_rebuilds_onto_the_spare() {
    let mut rig = card_rig(7, 2, 8192); // 4 MiB cards
    let spare = rig.devices.pop().unwrap();
    let members: Vec<SharedCard> = rig.devices.drain(..).collect();
    let cfg = config();
    let mem = vec![0u8; CardPool::memory_bytes(&cfg, 6)];
    let mut pool = CardPool::create(members, [spare], cfg, *b"raidcore-board-t", mem).unwrap();
    let lun = pool.create_lun("cards", 512).unwrap();

    let blocks = 400;
    let data = real_blocks(blocks);
    for (i, b) in data.chunks_exact(4096).enumerate() {
        pool.write(lun, i as u64, b, false).unwrap();
    }
    pool.flush().unwrap();
    let mut buf = vec![0u8; 4096];
    for (i, b) in data.chunks_exact(4096).enumerate() {
        pool.read(lun, i as u64, &mut buf).unwrap();
        assert_eq!(buf, b, "block {i} before the failure");
    }

    // Pull card 3: reads go on (degraded), the pool fails the member and takes the spare.
    rig.cards[3].remove();
    for (i, b) in data.chunks_exact(4096).enumerate() {
        pool.read(lun, i as u64, &mut buf)
            .unwrap_or_else(|e| panic!("degraded read of block {i}: {e:?}"));
        assert_eq!(buf, b, "block {i} degraded");
    }
    // Writes go on too while degraded.
    let more = real_blocks(450);
    for i in blocks..450 {
        pool.write(lun, i as u64, &more[i * 4096..][..4096], false)
            .unwrap();
    }
    pool.flush().unwrap();
    let st = pool.status();
    assert_ne!(st.health, Health::Online, "{st:?}");

    // Rebuild onto the spare card, bounded steps.
    let mut steps = 0;
    while !pool.maintenance().unwrap().idle {
        steps += 1;
        assert!(steps < 10_000, "rebuild does not finish");
    }
    let st = pool.status();
    assert_eq!(st.health, Health::Online, "{st:?}");
    assert_eq!(st.spares, 0, "the spare card was taken");

    // Verify every block; the pulled card is never read again.
    let before = rig.cards[3].stats().bytes;
    for i in 0..450 {
        let want = if i < blocks {
            &data[i * 4096..][..4096]
        } else {
            &more[i * 4096..][..4096]
        };
        pool.read(lun, i as u64, &mut buf).unwrap();
        assert_eq!(buf, want, "block {i} after the rebuild");
    }
    assert_eq!(rig.cards[3].stats().bytes, before);
    // The spare card really holds data now.
    assert!(rig.cards[6].stats().blocks_written > 0);
}
