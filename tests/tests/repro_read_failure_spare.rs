//! Reproducer (found by the host-sim `sequential-read` bench): a member that dies while the pool
//! only reads is marked failed by the array, but the pool does not take its hot spare or start a
//! rebuild until something writes or flushes (`on_members_failed` runs from the write paths);
//! `maintenance()` does not notice either. A read-only workload therefore runs degraded, with
//! the spare idle, for as long as nobody writes.
//!
//! Expected: the spare is taken (and the rebuild started) once the failure is seen, at the
//! latest by the next `maintenance()` call.

use std::cell::Cell;
use std::rc::Rc;

use raidcore::pool::{Pool, PoolConfig};
use raidcore::raid::{DiskState, Level};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// An in-memory disk of 512-byte blocks that fails every operation once `dead` is set.
struct Disk {
    data: Vec<u8>,
    dead: Rc<Cell<bool>>,
}

impl ErrorType for Disk {
    type Error = ErrorKind;
}

impl BlockDevice for Disk {
    fn block_size(&self) -> BlockSize {
        BlockSize::B512
    }
    fn block_count(&self) -> u64 {
        (self.data.len() / 512) as u64
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        if self.dead.get() {
            return Err(ErrorKind::DeviceFailed);
        }
        check_io(BlockSize::B512, self.block_count(), lba, buf.len())?;
        let at = lba as usize * 512;
        buf.copy_from_slice(&self.data[at..at + buf.len()]);
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        if self.dead.get() {
            return Err(ErrorKind::DeviceFailed);
        }
        check_io(BlockSize::B512, self.block_count(), lba, buf.len())?;
        let at = lba as usize * 512;
        self.data[at..at + buf.len()].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        if self.dead.get() {
            return Err(ErrorKind::DeviceFailed);
        }
        Ok(())
    }
}

type P = Pool<Disk, Vec<u8>, 8, 4, 32, 8>;

#[test]
fn a_member_dying_under_reads_gets_the_spare() {
    let cfg = PoolConfig {
        level: Level::Raid6,
        strip_bytes: 4096,
        max_extent_blocks: 8,
        zil_slots: 32,
        segment_stripes: 4,
        max_segments: 256,
        ..PoolConfig::default()
    };
    let flags: Vec<Rc<Cell<bool>>> = (0..7).map(|_| Rc::new(Cell::new(false))).collect();
    let mut disks: Vec<Disk> = flags
        .iter()
        .map(|f| Disk {
            data: vec![0; 20 << 20],
            dead: f.clone(),
        })
        .collect();
    let spare = disks.pop().unwrap();
    let mem = vec![0u8; P::memory_bytes(&cfg, 6)];
    let mut p = P::create(disks, [spare], cfg, [9; 16], mem).unwrap();
    let lun = p.create_lun("a", 1000).unwrap();
    // Incompressible blocks, so the data lands on the members (not only in the open stripe).
    let block = |i: u64| -> Vec<u8> {
        let mut s = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..4096)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    };
    for i in 0..800u64 {
        p.write(lun, i, &block(i), false).unwrap();
    }
    p.flush().unwrap();
    // Member 1 dies; only reads follow.
    flags[1].set(true);
    let mut buf = vec![0u8; 4096];
    for i in 0..800u64 {
        p.read(lun, i, &mut buf).unwrap();
        assert_eq!(buf, block(i));
    }
    let _ = p.maintenance();
    let st = p.status();
    assert_ne!(
        st.disks[1].state,
        DiskState::Failed,
        "the dead member was seen ({:?}) but its slot is still failed with {} spare(s) waiting",
        st.disks[1].errors,
        st.spares
    );
    assert!(st.rebuild.is_some() || st.disks[1].state == DiskState::Online);
}
