//! The `embedded-sdmmc` adapters and the semihosting disk logic on the host.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};

use embedded_sdmmc::{Block, BlockDevice as _, BlockIdx, SdCard};
use raidcore_board::fake_sd::{FakeDelay, FakeSd, Fault};
use raidcore_board::sdmmc::{LunVolume, SdmmcMember};
use raidcore_board::semihosting::{
    Handle, HostFailed, HostOp, OpenMode, Semihost, SemihostingDisk,
};
use raidcore_hal::{BlockDevice, BlockSize, Error as _, ErrorKind, ErrorType};

fn real_data() -> Vec<u8> {
    std::fs::read("/usr/share/common-licenses/GPL-3").expect("base-files licence text")
}

/// The driver itself (embedded-sdmmc's `BlockDevice`) as a pool member.
#[test]
fn sdmmc_device_as_member_round_trips_and_classifies() {
    let fake = FakeSd::sdhc(1024);
    let card = SdCard::new(fake.clone(), FakeDelay::default());
    let mut member = SdmmcMember::new(card).unwrap();
    assert_eq!(member.block_count(), 1024);
    let mut data = real_data();
    data.truncate(data.len() / 512 * 512);
    member.write(30, &data).unwrap();
    assert_eq!(&fake.contents()[30 * 512..][..data.len()], &data[..]);
    let mut back = vec![0; data.len()];
    member.read(30, &mut back).unwrap();
    assert_eq!(back, data);
    fake.inject(Fault::ReadCrc { count: 1 });
    assert_eq!(
        member.read(30, &mut back[..512]).unwrap_err().kind(),
        ErrorKind::Transport
    );
    assert_eq!(
        member.read(1024, &mut back[..512]).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
}

/// A LUN in memory with 4 KiB blocks, counting its writes.
struct MemLun {
    data: Vec<u8>,
    writes: usize,
}

impl ErrorType for MemLun {
    type Error = ErrorKind;
}

impl BlockDevice for MemLun {
    fn block_size(&self) -> BlockSize {
        BlockSize::B4096
    }
    fn block_count(&self) -> u64 {
        (self.data.len() / 4096) as u64
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        raidcore_hal::check_io(BlockSize::B4096, self.block_count(), lba, buf.len())?;
        buf.copy_from_slice(&self.data[lba as usize * 4096..][..buf.len()]);
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        raidcore_hal::check_io(BlockSize::B4096, self.block_count(), lba, buf.len())?;
        self.data[lba as usize * 4096..][..buf.len()].copy_from_slice(buf);
        self.writes += 1;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

#[test]
fn lun_volume_maps_sectors_onto_4k_blocks_with_read_modify_write() {
    let base: Vec<u8> = real_data().into_iter().cycle().take(16 * 4096).collect();
    let vol = LunVolume::new(MemLun {
        data: base.clone(),
        writes: 0,
    });
    assert_eq!(vol.num_blocks().unwrap().0, 128);
    // Read sectors 5..=9 (crossing a 4 KiB boundary).
    let mut blocks = vec![Block::new(); 5];
    vol.read(&mut blocks, BlockIdx(5)).unwrap();
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(&b.contents[..], &base[(5 + i) * 512..][..512]);
    }
    // Write sectors 6..=17: partial block 0, whole block 1, partial block 2.
    let mut new = vec![Block::new(); 12];
    for (i, b) in new.iter_mut().enumerate() {
        b.contents.fill(i as u8 + 1);
    }
    vol.write(&new, BlockIdx(6)).unwrap();
    let lun = vol.into_inner();
    assert_eq!(lun.writes, 3, "one LUN write per 4 KiB block touched");
    let mut want = base.clone();
    for i in 0..12 {
        want[(6 + i) * 512..][..512].fill(i as u8 + 1);
    }
    assert_eq!(lun.data, want, "neighbouring sectors keep their content");
    let vol = LunVolume::new(lun);
    let e = vol.read(&mut blocks, BlockIdx(126)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfRange);
}

/// The semihosting calls served by std on the host, as QEMU or a probe would serve them.
#[derive(Debug, Default)]
struct StdHost {
    files: Vec<File>,
}

impl Semihost for StdHost {
    fn open(&mut self, path: &CStr, mode: OpenMode) -> Result<Handle, HostFailed> {
        let path = path.to_str().map_err(|_| HostFailed)?;
        let f = match mode {
            OpenMode::ReadWrite => OpenOptions::new().read(true).write(true).open(path),
            OpenMode::Create => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path),
        }
        .map_err(|_| HostFailed)?;
        self.files.push(f);
        Ok(Handle(self.files.len()))
    }
    fn seek(&mut self, h: Handle, pos: u32) -> Result<(), HostFailed> {
        self.files[h.0 - 1]
            .seek(SeekFrom::Start(pos.into()))
            .map(|_| ())
            .map_err(|_| HostFailed)
    }
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> usize {
        let f = &mut self.files[h.0 - 1];
        let mut got = 0;
        while got < buf.len() {
            match f.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        buf.len() - got
    }
    fn write(&mut self, h: Handle, buf: &[u8]) -> usize {
        match self.files[h.0 - 1].write_all(buf) {
            Ok(()) => 0,
            Err(_) => buf.len(),
        }
    }
    fn flen(&mut self, h: Handle) -> Result<u32, HostFailed> {
        let len = self.files[h.0 - 1]
            .metadata()
            .map_err(|_| HostFailed)?
            .len();
        u32::try_from(len).map_err(|_| HostFailed)
    }
    fn close(&mut self, _h: Handle) {}
}

#[test]
fn semihosting_disk_on_a_host_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk0.img");
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let mut disk =
        SemihostingDisk::create(StdHost::default(), &cpath, BlockSize::B512, 256).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 256 * 512);
    let mut data = real_data();
    data.truncate(data.len() / 512 * 512);
    disk.write(3, &data).unwrap();
    let mut back = vec![0; data.len()];
    disk.read(3, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(
        &std::fs::read(&path).unwrap()[3 * 512..][..data.len()],
        &data[..]
    );
    assert_eq!(
        disk.read(255, &mut back[..1024]).unwrap_err().kind(),
        ErrorKind::OutOfRange
    );
    drop(disk.close());

    // Reopen: the size comes from the file. Then the file shrinks under the disk.
    let mut disk = SemihostingDisk::open(StdHost::default(), &cpath, BlockSize::B512).unwrap();
    assert_eq!(disk.block_count(), 256);
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100 * 512)
        .unwrap();
    let e = disk.read(98, &mut back[..2048]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Medium { lba: 100 });
    assert_eq!(e.op(), Some(HostOp::Read));

    // A file that is not whole blocks, and one that does not exist.
    std::fs::write(&path, [0u8; 1000]).unwrap();
    let e = SemihostingDisk::open(StdHost::default(), &cpath, BlockSize::B512).unwrap_err();
    assert_eq!(e.op(), Some(HostOp::Length));
    let missing = std::ffi::CString::new(dir.path().join("nope").to_str().unwrap()).unwrap();
    let e = SemihostingDisk::open(StdHost::default(), &missing, BlockSize::B512).unwrap_err();
    assert_eq!(e.op(), Some(HostOp::Open));
}
