//! The SD backend against the fake card: initialisation through `embedded-sdmmc`, real data
//! byte-exact, every fault mapped to its `ErrorKind`, shared and exclusive buses.

use std::cell::RefCell;

use embedded_hal_bus::spi::{ExclusiveDevice, RefCellDevice};
use embedded_sdmmc::sdcard::spi::AcquireOpts;
use raidcore_board::fake_sd::{CardKind, FakeDelay, FakeSd, FakeSpiBus, Fault};
use raidcore_board::sd::{SdBlockDevice, power_up_clocks};
use raidcore_hal::{BlockDevice, Error as _, ErrorKind};

/// Real data from this machine: Debian's licence texts (base-files, always installed).
fn real_data() -> Vec<u8> {
    let mut v = Vec::new();
    for f in [
        "/usr/share/common-licenses/GPL-3",
        "/usr/share/common-licenses/Apache-2.0",
    ] {
        v.extend(std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")));
    }
    v
}

/// `data` padded with zeros to a whole number of 512-byte blocks.
fn padded(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(data.len().div_ceil(512) * 512, 0);
    v
}

fn card(kind: CardKind, blocks: u32) -> (FakeSd, SdBlockDevice<FakeSd, FakeDelay>) {
    let fake = FakeSd::new(kind, blocks);
    let dev = SdBlockDevice::new(fake.clone(), FakeDelay::default()).expect("card initialises");
    (fake, dev)
}

#[test]
fn initialises_every_card_kind_and_reads_capacity() {
    for (kind, blocks, want) in [
        (
            CardKind::Sdhc,
            4096,
            embedded_sdmmc::embedded_sdmmc_types::sdcard::CardType::SdhcSdxc,
        ),
        (
            CardKind::SdscV2,
            2048,
            embedded_sdmmc::embedded_sdmmc_types::sdcard::CardType::SD2,
        ),
        (
            CardKind::SdV1,
            1024,
            embedded_sdmmc::embedded_sdmmc_types::sdcard::CardType::SD1,
        ),
    ] {
        let (fake, dev) = card(kind, blocks);
        assert_eq!(dev.block_count(), u64::from(blocks), "{kind:?}");
        assert_eq!(dev.card().get_card_type(), Some(want), "{kind:?}");
        let s = fake.stats();
        assert_eq!(s.command_count(0), 1, "one CMD0");
        assert_eq!(s.command_count(59), 1, "CRC turned on");
        assert_eq!(s.command_count(9), 1, "capacity from the CSD");
        assert!(s.command_count(41) >= 3, "ACMD41 polled until ready");
        assert_eq!(s.command_crc_errors, 0);
    }
}

#[test]
fn real_file_round_trips_byte_exact_on_every_card_kind() {
    let data = padded(&real_data());
    let blocks = data.len() / 512;
    for kind in [CardKind::Sdhc, CardKind::SdscV2, CardKind::SdV1] {
        let (fake, mut dev) = card(kind, 1024);
        // Odd start, a length that is not a multiple of the 8-block chunk.
        let lba = 13;
        dev.write(lba, &data).unwrap();
        dev.flush().unwrap();
        // Where the bytes landed on the medium, independently of the read path.
        let medium = fake.contents();
        assert_eq!(
            &medium[lba as usize * 512..][..data.len()],
            &data[..],
            "{kind:?}: medium"
        );
        assert!(
            medium[..lba as usize * 512].iter().all(|&b| b == 0),
            "{kind:?}: nothing before"
        );
        let mut back = vec![0u8; data.len()];
        dev.read(lba, &mut back).unwrap();
        assert_eq!(back, data, "{kind:?}: read back");
        // Single blocks too (CMD17/CMD24 instead of CMD18/CMD25).
        let mut one = [0u8; 512];
        dev.read(lba + blocks as u64 - 1, &mut one).unwrap();
        assert_eq!(&one[..], &data[data.len() - 512..]);
        let s = fake.stats();
        assert!(s.command_count(18) > 0 && s.command_count(17) > 0 && s.command_count(25) > 0);
        assert_eq!(s.blocks_written, blocks as u64);
    }
}

#[test]
fn requests_outside_the_card_are_refused_before_the_bus() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let before = fake.stats();
    let mut buf = [0u8; 1024];
    assert_eq!(
        dev.read(1023, &mut buf).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    assert_eq!(
        dev.write(0, &buf[..100]).unwrap_err().kind(),
        ErrorKind::Misaligned
    );
    assert!(
        dev.read(1023, &mut buf)
            .unwrap_err()
            .driver_error()
            .is_none()
    );
    assert_eq!(fake.stats(), before, "no bus traffic");
}

#[test]
fn read_crc_error_is_transport_and_the_card_keeps_working() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let data = padded(&real_data()[..4096]);
    dev.write(0, &data).unwrap();
    let mut buf = vec![0u8; 4096];
    for len in [512, 4096] {
        fake.inject(Fault::ReadCrc { count: 1 });
        let e = dev.read(0, &mut buf[..len]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transport, "{len}: {e:?}");
        assert!(matches!(
            e.driver_error(),
            Some(embedded_sdmmc::SdCardError::CrcError(..))
        ));
        dev.read(0, &mut buf[..len]).unwrap();
        assert_eq!(&buf[..len], &data[..len]);
    }
    assert_eq!(dev.stats().resyncs, 1, "the failed CMD18 was ended by hand");
}

#[test]
fn read_timeout_is_timeout() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let mut buf = [0u8; 512];
    fake.inject(Fault::ReadTimeout { count: 1 });
    let e = dev.read(5, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(matches!(
        e.driver_error(),
        Some(embedded_sdmmc::SdCardError::TimeoutReadBuffer)
    ));
    dev.read(5, &mut buf).unwrap();
}

#[test]
fn unreadable_block_is_a_medium_error_at_its_exact_lba() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let data = padded(&real_data()[..8192]);
    dev.write(100, &data).unwrap();
    fake.inject(Fault::ReadErrorAt { lba: 111 });
    let mut buf = vec![0u8; data.len()];
    let e = dev.read(100, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Medium { lba: 111 });
    // Blocks before the bad one were transferred, as the HAL allows.
    assert_eq!(&buf[..11 * 512], &data[..11 * 512]);
    // A single-block read of it says the same; its neighbours read fine.
    assert_eq!(
        dev.read(111, &mut buf[..512]).unwrap_err().kind(),
        ErrorKind::Medium { lba: 111 }
    );
    dev.read(112, &mut buf[..512]).unwrap();
    assert_eq!(&buf[..512], &data[12 * 512..13 * 512]);
}

#[test]
fn write_rejected_for_crc_is_transport_single_and_retried_in_a_chunk() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let data = padded(&real_data()[..4096]);
    fake.inject(Fault::WriteCrcReject { count: 1 });
    let e = dev.write(7, &data[..512]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport, "{e:?}");
    // In a multi-block write, one rejected block is rewritten block by block and the write
    // completes.
    fake.inject(Fault::WriteCrcReject { count: 1 });
    dev.write(7, &data).unwrap();
    assert_eq!(dev.stats().write_retries, 1);
    assert_eq!(&fake.contents()[7 * 512..][..4096], &data[..]);
    assert_eq!(fake.stats().blocks_rejected, 2);
}

#[test]
fn write_error_is_a_medium_error_at_its_exact_lba() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    let data = padded(&real_data()[..8192]);
    fake.inject(Fault::WriteRejectAt { lba: 205 });
    let e = dev.write(200, &data).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Medium { lba: 205 }, "{e:?}");
    assert!(matches!(
        e.driver_error(),
        Some(embedded_sdmmc::SdCardError::WriteError)
    ));
    let medium = fake.contents();
    assert_eq!(
        &medium[200 * 512..205 * 512],
        &data[..5 * 512],
        "blocks before it written"
    );
    assert!(
        medium[205 * 512..206 * 512].iter().all(|&b| b == 0),
        "the bad block unchanged"
    );
    assert_eq!(
        dev.write(205, &data[..512]).unwrap_err().kind(),
        ErrorKind::Medium { lba: 205 }
    );
    // Rewriting after the block is remapped (fault cleared) repairs it.
    fake.clear_faults();
    dev.write(200, &data).unwrap();
    assert_eq!(&fake.contents()[200 * 512..][..data.len()], &data[..]);
}

#[test]
fn card_stuck_busy_is_timeout() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    fake.inject(Fault::BusyStuck);
    let e = dev.write(3, &[0x5A; 512]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout);
    assert!(matches!(
        e.driver_error(),
        Some(embedded_sdmmc::SdCardError::TimeoutWaitNotBusy)
    ));
    assert_eq!(
        dev.write(4, &[0x5A; 512]).unwrap_err().kind(),
        ErrorKind::Timeout,
        "still busy"
    );
    fake.clear_faults();
    dev.write(4, &[0xA5; 512]).unwrap();
    let mut buf = [0u8; 1024];
    dev.read(3, &mut buf).unwrap();
    assert_eq!(buf[..512], [0x5A; 512]);
    assert_eq!(buf[512..], [0xA5; 512]);
}

#[test]
fn dropped_command_is_timeout_after_a_successful_probe() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    fake.inject(Fault::DropCommand { count: 1 });
    let mut buf = [0u8; 512];
    let e = dev.read(0, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e:?}");
    assert!(matches!(
        e.driver_error(),
        Some(embedded_sdmmc::SdCardError::TimeoutCommand(_))
    ));
    assert_eq!(dev.stats().probes, 1);
    dev.read(0, &mut buf).unwrap();
}

#[test]
fn pulled_card_is_device_failed_and_works_again_once_reinserted() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    dev.write(9, &[0x11; 512]).unwrap();
    fake.remove();
    let mut buf = [0u8; 512];
    let e = dev.read(9, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeviceFailed, "{e:?}");
    assert_eq!(
        dev.write(9, &buf).unwrap_err().kind(),
        ErrorKind::DeviceFailed
    );
    assert_eq!(dev.flush().unwrap_err().kind(), ErrorKind::DeviceFailed);
    fake.insert();
    dev.read(9, &mut buf).unwrap();
    assert_eq!(buf, [0x11; 512]);
}

#[test]
fn spi_peripheral_error_is_transport() {
    let (fake, mut dev) = card(CardKind::Sdhc, 1024);
    fake.inject(Fault::BusError { count: 1 });
    let mut buf = [0u8; 512];
    let e = dev.read(0, &mut buf).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);
    assert!(matches!(
        e.driver_error(),
        Some(embedded_sdmmc::SdCardError::Transport)
    ));
    dev.read(0, &mut buf).unwrap();
}

#[test]
fn card_without_crc_still_works_when_asked() {
    let fake = FakeSd::sdhc(1024);
    let opts = AcquireOpts {
        use_crc: false,
        acquire_retries: 5,
    };
    let mut dev =
        SdBlockDevice::new_with_options(fake.clone(), FakeDelay::default(), opts).unwrap();
    assert_eq!(fake.stats().command_count(59), 0);
    dev.write(1, &[7; 1024]).unwrap();
    let mut buf = [0; 1024];
    dev.read(1, &mut buf).unwrap();
    assert_eq!(buf, [7; 1024]);
}

/// Three cards on one bus, each with its own chip select, shared through `RefCellDevice`.
#[test]
fn three_cards_share_one_bus() {
    let bus = FakeSpiBus::new();
    let cards: Vec<FakeSd> = (0..3).map(|_| FakeSd::sdhc(1024)).collect();
    let mut pins: Vec<_> = cards.iter().map(|c| bus.attach(c)).collect();
    for c in &cards {
        c.require_power_up_clocks();
    }
    let shared = RefCell::new(bus);
    let delay = FakeDelay::default();

    // Without the 74 power-up clocks these cards stay silent.
    let cs = pins.remove(0);
    let dev = RefCellDevice::new(&shared, cs, delay.clone()).unwrap();
    let opts = AcquireOpts {
        use_crc: true,
        acquire_retries: 2,
    };
    let e = SdBlockDevice::new_with_options(dev, delay.clone(), opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DeviceFailed);
    assert_eq!(cards[0].stats().bytes, 0);
    let cs0 = {
        // Rebuild the first pin (the failed device consumed it).
        let b = shared.borrow();
        b.attach(&cards[0])
    };
    pins.insert(0, cs0);

    power_up_clocks(&mut *shared.borrow_mut()).unwrap();
    let mut devs: Vec<_> = pins
        .into_iter()
        .map(|cs| {
            SdBlockDevice::new(
                RefCellDevice::new(&shared, cs, delay.clone()).unwrap(),
                delay.clone(),
            )
            .unwrap()
        })
        .collect();
    let data = padded(&real_data());
    // Interleave: each card gets a different slice of the file at the same LBA.
    for round in 0..4 {
        for (i, d) in devs.iter_mut().enumerate() {
            let off = ((round * 3 + i) * 4096) % (data.len() - 4096);
            d.write(round as u64 * 8, &data[off..off + 4096]).unwrap();
        }
    }
    for (i, (d, c)) in devs.iter_mut().zip(&cards).enumerate() {
        for round in 0..4 {
            let off = ((round * 3 + i) * 4096) % (data.len() - 4096);
            let mut buf = vec![0; 4096];
            d.read(round as u64 * 8, &mut buf).unwrap();
            assert_eq!(buf, &data[off..off + 4096], "card {i} round {round}");
            assert_eq!(
                &c.contents()[round * 4096..][..4096],
                &data[off..off + 4096]
            );
        }
    }
}

/// One card per bus: `ExclusiveDevice` owns each bus.
#[test]
fn one_card_per_bus() {
    let delay = FakeDelay::default();
    let mut devs = Vec::new();
    let mut cards = Vec::new();
    for _ in 0..2 {
        let mut bus = FakeSpiBus::new();
        let card = FakeSd::sdhc(1024);
        card.require_power_up_clocks();
        let cs = bus.attach(&card);
        power_up_clocks(&mut bus).unwrap();
        let spi = ExclusiveDevice::new(bus, cs, delay.clone()).unwrap();
        devs.push(SdBlockDevice::new(spi, delay.clone()).unwrap());
        cards.push(card);
    }
    devs[0].write(0, &[1; 512]).unwrap();
    devs[1].write(0, &[2; 512]).unwrap();
    assert_eq!(cards[0].contents()[..512], [1; 512]);
    assert_eq!(cards[1].contents()[..512], [2; 512]);
}
