//! Tests of the dedicated intent-log device: flushes land on it alone, survive a crash
//! through it, and nothing is lost when it fails, is missing at import, or is removed.
use std::vec;
use std::vec::Vec;

use super::tests::{TestPool, block, cfg, new_pool};
use super::*;
use crate::event::Event;
use crate::raid::tests::RamDisk;

/// A RAID-6 pool of six members with a log device, a LUN, and block 0 written and flushed
/// (less than a stripe: only intent-log records hold it).
fn pool_with_log_device() -> (TestPool, u16) {
    let mut p = new_pool(cfg(), 6, 40_000);
    p.add_log_device(RamDisk::new(512, 1_000)).unwrap();
    let lun = p.create_lun("a", 1000).unwrap();
    p.write(lun, 0, &block(1), false).unwrap();
    p.flush().unwrap();
    (p, lun)
}

fn member_writes(p: &mut TestPool) -> u64 {
    (0..6)
        .map(|i| p.array.disk_mut(i).map_or(0, |d| d.writes))
        .sum()
}

fn log_device(p: &mut TestPool) -> &mut RamDisk {
    p.members
        .slog
        .as_mut()
        .and_then(|d| d.disk.as_mut())
        .unwrap()
}

/// What a power cut leaves, imported again from the members and `log`.
fn crash_and_import(
    p: TestPool,
    with_log: bool,
    force: bool,
) -> Result<(TestPool, ImportReport), OpenError> {
    let ((members, spares, mem), log) = p.into_parts_with_log_device();
    let mut all: Vec<RamDisk> = members.into_iter().flatten().chain(spares).collect();
    all.extend(log.filter(|_| with_log));
    let opts = ImportOptions {
        config: cfg(),
        skip_refused: false,
        force,
        rewind: false,
    };
    TestPool::import(all, opts, mem)
}

fn read(p: &mut TestPool, lun: u16, lba: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    p.read(lun, lba, &mut buf).unwrap();
    buf
}

#[test]
fn a_flush_writes_only_the_log_device_and_survives_a_crash_through_it() {
    let (mut p, lun) = pool_with_log_device();
    let before = (member_writes(&mut p), log_device(&mut p).writes);
    p.write(lun, 1, &block(2), false).unwrap();
    p.flush().unwrap();
    assert_eq!(member_writes(&mut p), before.0, "no member write");
    assert!(
        log_device(&mut p).writes > before.1,
        "records on the device"
    );
    let (mut p, rep) = crash_and_import(p, true, false).unwrap();
    assert!(rep.zil_records >= 1, "{rep:?}");
    assert_eq!(read(&mut p, lun, 0), block(1));
    assert_eq!(read(&mut p, lun, 1), block(2));
    assert_eq!(p.status().log_device.unwrap().state, LogDeviceState::Online);
}

#[test]
fn a_missing_log_device_refuses_the_import_unless_forced_and_is_then_failed() {
    let (p, _) = pool_with_log_device();
    let guid = p.members.slog.as_ref().unwrap().guid;
    let (p, _) = crash_and_import(p, true, false).unwrap();
    assert_eq!(
        crash_and_import(p, false, false).err(),
        Some(OpenError::MissingLogDevice { guid })
    );
    let (p, _) = pool_with_log_device();
    let (p, rep) = crash_and_import(p, false, true).unwrap();
    assert!(
        rep.log_device_missing,
        "the report says what a forced import gave up"
    );
    let failed = Some(LogDeviceState::Failed);
    assert_eq!(p.status().log_device.map(|d| d.state), failed);
    // Recorded failed: the next import does not wait for it.
    let (p, rep) = crash_and_import(p, false, false).unwrap();
    assert!(!rep.log_device_missing);
    assert_eq!(p.status().log_device.map(|d| d.state), failed);
}

/// Block 0's only copy was the device's record when it died: the flush that found it dead
/// logged the whole open stripe on the members, so both blocks survive a crash after it.
#[test]
fn a_log_device_failing_mid_run_loses_nothing() {
    let (mut p, lun) = pool_with_log_device();
    log_device(&mut p).failed = true;
    p.write(lun, 1, &block(2), false).unwrap();
    p.flush().unwrap();
    let state = p.status().log_device.map(|d| d.state);
    assert_eq!(state, Some(LogDeviceState::Failed));
    let failed = p
        .events()
        .iter()
        .any(|(_, e)| matches!(e, Event::LogDeviceFailed { .. }));
    assert!(failed, "an event names the failure");
    // The dead device came back: it is stale, and refused.
    log_device(&mut p).failed = false;
    let ((members, spares, mem), log) = p.into_parts_with_log_device();
    let mut all: Vec<RamDisk> = members.into_iter().flatten().chain(spares).collect();
    let opts = ImportOptions {
        config: cfg(),
        skip_refused: false,
        force: false,
        rewind: false,
    };
    let mut with_log = all.clone();
    with_log.extend(log);
    let refused = TestPool::import(with_log, opts, vec![0u8; mem.len()]).err();
    assert_eq!(refused, Some(OpenError::StaleDisk { disk: 6 }));
    all.truncate(6);
    let (mut p, _) = TestPool::import(all, opts, mem).unwrap();
    assert_eq!(read(&mut p, lun, 0), block(1));
    assert_eq!(read(&mut p, lun, 1), block(2));
}

#[test]
fn a_removed_log_device_leaves_the_flushed_data_on_the_members() {
    let (mut p, lun) = pool_with_log_device();
    let disk = p.remove_log_device().unwrap();
    assert!(disk.is_some());
    assert_eq!(p.remove_log_device().err(), Some(AdminError::NoLogDevice));
    let (mut p, _) = crash_and_import(p, false, false).unwrap();
    assert_eq!(read(&mut p, lun, 0), block(1));
    assert_eq!(p.status().log_device, None);
    p.add_log_device(disk.unwrap()).unwrap();
    assert_eq!(
        p.add_log_device(RamDisk::new(512, 1_000)).err(),
        Some(AdminError::LogDevicePresent)
    );
    assert_eq!(
        new_pool(cfg(), 6, 40_000)
            .add_log_device(RamDisk::new(512, 100))
            .err(),
        Some(AdminError::DiskMismatch)
    );
}

/// The device dies on its flush mark (its mark slots cannot be written), after this flush's
/// records reached it: the pool logs the open stripe on the members before the flush returns,
/// so a crash after it loses nothing.
#[test]
fn a_log_device_dying_on_its_flush_mark_loses_nothing() {
    let (mut p, lun) = pool_with_log_device();
    let ring = u64::from(p.members.slog.as_ref().unwrap().ring_slots);
    for k in 0..2 {
        let lba = (2 + u64::from(crate::format::ROOT_SLOTS) + ring + k) * 8;
        log_device(&mut p).sticky.push(lba);
    }
    for i in 1..8 {
        p.write(lun, i, &block(100 + i), false).unwrap();
    }
    p.flush().unwrap();
    let state = p.status().log_device.map(|d| d.state);
    assert_eq!(state, Some(LogDeviceState::Failed));
    let (mut p, _) = crash_and_import(p, false, false).unwrap();
    for i in 0..8 {
        let want = if i == 0 { block(1) } else { block(100 + i) };
        assert_eq!(read(&mut p, lun, i), want, "block {i}");
    }
}

/// The device dies taking its label (a hot spare is added): the configuration change records
/// it failed and logs the open stripe, whose only copy was the device's record, on the
/// members.
#[test]
fn a_log_device_dying_on_its_label_loses_nothing() {
    let (mut p, lun) = pool_with_log_device();
    for c in 0..2 {
        let lba = crate::format::superblock_lba(c, 512);
        log_device(&mut p).sticky.push(lba);
    }
    p.add_spare(RamDisk::new(512, 40_000)).unwrap();
    let state = p.status().log_device.map(|d| d.state);
    assert_eq!(state, Some(LogDeviceState::Failed));
    let (mut p, _) = crash_and_import(p, false, false).unwrap();
    assert_eq!(read(&mut p, lun, 0), block(1));
}

/// A log device cut shorter than the ring the configuration records is refused at import, not
/// read as a ring with nothing in it.
#[test]
fn a_truncated_log_device_is_refused() {
    let (mut p, _) = pool_with_log_device();
    let ring = u64::from(p.members.slog.as_ref().unwrap().ring_slots);
    let d = log_device(&mut p);
    d.data
        .truncate(((2 + u64::from(crate::format::ROOT_SLOTS) + ring) * 4096) as usize);
    assert_eq!(
        crash_and_import(p, true, false).err(),
        Some(OpenError::WrongSize { disk: 6 })
    );
}
