//! The RAID-6 self-test over six fake SD cards plus a spare on two shared buses, the way the
//! example firmware runs it on real cards; and proof that it fails when the data is wrong.

use raidcore_board::fake_sd::{Fault, card_rig};
use raidcore_board::selftest::{self, Config, Phase, SelfTestError};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType};

const STRIP_BLOCKS: u64 = 8; // 4 KiB strips

fn config(seed: u64, failed: usize) -> Config {
    Config {
        seed,
        stripes: 24,
        strip_blocks: STRIP_BLOCKS,
        failed,
    }
}

#[test]
fn six_cards_and_a_spare_rebuild_and_verify() {
    for failed in [0, 3, 5] {
        let seed = 0x5EED_0000 + failed as u64;
        let mut rig = card_rig(7, 2, 2048);
        let mut spare = rig.devices.pop().unwrap();
        let mut work = vec![0u8; selftest::work_bytes(6, STRIP_BLOCKS as usize * 512)];
        let mut ticks = 0u64;
        let mut clock = || {
            ticks += 1;
            ticks
        };
        let report = selftest::raid6_rebuild(
            &mut rig.devices,
            &mut spare,
            &config(seed, failed),
            &mut work,
            &mut clock,
        )
        .unwrap_or_else(|e| panic!("seed {seed:#x}: {e:?}"));
        assert_eq!(report.data_bytes, 24 * 4 * 4096);
        assert_eq!(report.bytes_rebuilt, 24 * 4096);
        assert_eq!(report.blocks_verified, 24 * 6 * STRIP_BLOCKS);
        // The spare holds exactly what the failed card holds (it was never read in the rebuild).
        let strip = 24 * 4096;
        assert_eq!(
            &rig.cards[6].contents()[..strip],
            &rig.cards[failed].contents()[..strip],
            "seed {seed:#x}"
        );
        // The failed card was not read after the write phase: it saw no CMD17/CMD18 at all.
        let s = rig.cards[failed].stats();
        assert_eq!(
            s.command_count(17) + s.command_count(18),
            0,
            "seed {seed:#x}"
        );
    }
}

#[test]
fn a_spare_that_rejects_a_block_fails_the_test_with_a_medium_error() {
    let mut rig = card_rig(7, 1, 2048);
    rig.cards[6].inject(Fault::WriteRejectAt { lba: 8 * 5 + 3 });
    let mut spare = rig.devices.pop().unwrap();
    let mut work = vec![0u8; selftest::work_bytes(6, 4096)];
    let e = selftest::raid6_rebuild(
        &mut rig.devices,
        &mut spare,
        &config(7, 2),
        &mut work,
        &mut || 0,
    )
    .unwrap_err();
    match e {
        SelfTestError::Device {
            member: 6,
            kind: ErrorKind::Medium { lba: 43 },
            ..
        } => {}
        other => panic!("{other:?}"),
    }
}

/// A member that flips one bit of everything it returns from `lba`: the verify pass must notice.
struct FlipOnRead<D> {
    inner: D,
    lba: u64,
}

impl<D: BlockDevice> ErrorType for FlipOnRead<D> {
    type Error = D::Error;
}

impl<D: BlockDevice> BlockDevice for FlipOnRead<D> {
    fn block_size(&self) -> BlockSize {
        self.inner.block_size()
    }
    fn block_count(&self) -> u64 {
        self.inner.block_count()
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), D::Error> {
        self.inner.read(lba, buf)?;
        let bs = self.block_size().bytes() as u64;
        if (lba..lba + buf.len() as u64 / bs).contains(&self.lba) {
            buf[((self.lba - lba) * bs) as usize + 17] ^= 0x40;
        }
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), D::Error> {
        self.inner.write(lba, buf)
    }
    fn flush(&mut self) -> Result<(), D::Error> {
        self.inner.flush()
    }
}

#[test]
fn a_flipped_bit_is_a_mismatch_at_its_block() {
    let rig = card_rig(7, 3, 2048);
    let mut devs: Vec<_> = rig
        .devices
        .into_iter()
        .map(|d| FlipOnRead {
            inner: d,
            lba: u64::MAX,
        })
        .collect();
    let mut spare = devs.pop().unwrap();
    devs[4].lba = 8 * 9 + 6;
    let mut work = vec![0u8; selftest::work_bytes(6, 4096)];
    // Member 4 survives; its corruption reaches the rebuild of member 1's strip and is caught in
    // verify either on member 4 itself or on the spare that was rebuilt from it.
    let e = selftest::raid6_rebuild(&mut devs, &mut spare, &config(11, 1), &mut work, &mut || 0)
        .unwrap_err();
    match e {
        SelfTestError::Mismatch { member, lba } => {
            assert!(member == 4 || member == 6, "{e:?}");
            assert_eq!(lba, 8 * 9 + 6);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_configurations_are_refused() {
    let mut rig = card_rig(4, 1, 1024);
    let mut spare = rig.devices.pop().unwrap();
    let mut work = vec![0u8; selftest::work_bytes(3, 4096)];
    // Three members are too few for RAID-6 with data.
    let e = selftest::raid6_rebuild(
        &mut rig.devices,
        &mut spare,
        &config(1, 0),
        &mut work,
        &mut || 0,
    )
    .unwrap_err();
    assert!(matches!(e, SelfTestError::Config), "{e:?}");
}

#[test]
fn pool_self_test_on_four_cards_and_a_spare() {
    let mut rig = card_rig(5, 2, 8192); // 4 MiB cards, as in the QEMU image
    let spare = rig.devices.pop().unwrap();
    let mut mem = vec![0u8; selftest::pool_memory_bytes(4)];
    assert_eq!(mem.len(), raidcore_board::pico::ARENA_BYTES);
    let cfg = selftest::PoolConfig {
        seed: 0x00C0_FFEE,
        lun_blocks: 200,
        failed: 3,
        flush_every: 64,
    };
    let mut ticks = 0u64;
    let mut clock = || {
        ticks += 1;
        ticks
    };
    let mut phases = Vec::new();
    let r = selftest::pool_raid6_rebuild(
        rig.devices.drain(..),
        spare,
        &cfg,
        &mut mem,
        &mut clock,
        &mut |p| phases.push(p),
    )
    .unwrap_or_else(|e| panic!("seed {:#x}: {e:?}", cfg.seed));
    assert_eq!(
        phases,
        [
            Phase::Create,
            Phase::Write,
            Phase::Import,
            Phase::Rebuild,
            Phase::Scrub,
            Phase::Verify
        ]
    );
    assert_eq!(r.data_bytes, 200 * 4096);
    assert_eq!(r.blocks_verified, 200);
    assert_eq!(r.flushes, 4, "after blocks 64, 128, 192 and 200");
    assert!(r.items_replayed > 0, "import rolled the log forward: {r:?}");
    assert!(r.bytes_rebuilt > 0 && r.stripes_rebuilt > 0, "{r:?}");
    assert!(r.stripes_scrubbed > 0, "{r:?}");
    // One stripe per step (the firmware's setting), so a step per stripe and one to finish.
    assert_eq!(r.rebuild_steps, r.stripes_rebuilt + 1, "{r:?}");
    // Half the blocks are a repeated phrase: LZ4 keeps them at a fraction of their size.
    assert!(
        r.bytes_stored < r.data_bytes * 6 / 10,
        "compressed: {} of {} bytes stored",
        r.bytes_stored,
        r.data_bytes
    );
    assert!(
        rig.cards[4].stats().blocks_written > 0,
        "the spare card was rebuilt onto"
    );
}
