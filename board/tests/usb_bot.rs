//! `usb::MassStorage` end to end on the host: usbd-storage's real Bulk-Only Transport over a
//! fake USB bus (endpoint packet queues), a RAID-6 pool over fake SD cards behind it. The test
//! plays the host: command block wrappers and data packets in, data and status wrappers out.

mod common;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use raidcore::pool::Pool;
use raidcore_board::fake_sd::{SharedCard, card_rig};
use raidcore_board::scsi::ScsiTarget;
use raidcore_board::usb::MassStorage;
use raidcore_hal::BlockSize;
use usb_device::bus::{PollResult, UsbBus, UsbBusAllocator};
use usb_device::device::{UsbDeviceBuilder, UsbVidPid};
use usb_device::endpoint::{EndpointAddress, EndpointType};
use usb_device::{UsbDirection, UsbError};

type CardPool = Pool<SharedCard, Vec<u8>, 8, 1, 8, 1>;

/// Packets on the bulk endpoints; endpoint 0 swallows and yields nothing.
#[derive(Default)]
struct Wire {
    next: usize,
    to_device: VecDeque<Vec<u8>>,
    to_host: VecDeque<Vec<u8>>,
    stalled: HashSet<u8>,
}

/// A USB device controller whose endpoints are the test's packet queues (shared with it).
#[derive(Default)]
struct FakeBus(Arc<Mutex<Wire>>);

impl UsbBus for FakeBus {
    fn alloc_ep(
        &mut self,
        dir: UsbDirection,
        addr: Option<EndpointAddress>,
        _: EndpointType,
        _: u16,
        _: u8,
    ) -> usb_device::Result<EndpointAddress> {
        if let Some(a) = addr {
            return Ok(a);
        }
        let mut w = self.0.lock().unwrap();
        w.next += 1;
        Ok(EndpointAddress::from_parts(w.next, dir))
    }
    fn enable(&mut self) {}
    fn reset(&self) {}
    fn set_device_address(&self, _: u8) {}
    fn write(&self, ep: EndpointAddress, buf: &[u8]) -> usb_device::Result<usize> {
        if ep.index() != 0 {
            self.0.lock().unwrap().to_host.push_back(buf.to_vec());
        }
        Ok(buf.len())
    }
    fn read(&self, ep: EndpointAddress, buf: &mut [u8]) -> usb_device::Result<usize> {
        if ep.index() == 0 {
            return Err(UsbError::WouldBlock);
        }
        let p = self.0.lock().unwrap().to_device.pop_front();
        let p = p.ok_or(UsbError::WouldBlock)?;
        buf[..p.len()].copy_from_slice(&p);
        Ok(p.len())
    }
    fn set_stalled(&self, ep: EndpointAddress, stalled: bool) {
        let mut w = self.0.lock().unwrap();
        if stalled {
            w.stalled.insert(ep.into());
        } else {
            w.stalled.remove(&u8::from(ep));
        }
    }
    fn is_stalled(&self, ep: EndpointAddress) -> bool {
        self.0.lock().unwrap().stalled.contains(&u8::from(ep))
    }
    fn suspend(&self) {}
    fn resume(&self) {}
    fn poll(&self) -> PollResult {
        PollResult::None
    }
}

/// A command's outcome as the host sees it.
struct Reply {
    data: Vec<u8>,
    tag: u32,
    residue: u32,
    status: u8,
}

struct Rig<'a> {
    wire: Arc<Mutex<Wire>>,
    msc: MassStorage<'a, FakeBus, Vec<u8>>,
    pool: CardPool,
    tag: u32,
}

impl Rig<'_> {
    /// Sends a CBW (`len` bytes expected, `dir_in` for data-in) and `out` as 64-byte packets,
    /// processes until the CSW comes back.
    fn command(&mut self, cdb: &[u8], len: u32, dir_in: bool, out: &[u8]) -> Reply {
        self.tag += 1;
        let mut cbw = Vec::with_capacity(31);
        cbw.extend_from_slice(b"USBC");
        cbw.extend_from_slice(&self.tag.to_le_bytes());
        cbw.extend_from_slice(&len.to_le_bytes());
        cbw.push(if dir_in { 0x80 } else { 0 });
        cbw.push(0); // LUN
        cbw.push(cdb.len() as u8);
        let mut cb = [0u8; 16];
        cb[..cdb.len()].copy_from_slice(cdb);
        cbw.extend_from_slice(&cb);
        {
            let mut w = self.wire.lock().unwrap();
            w.to_device.push_back(cbw);
            for p in out.chunks(64) {
                w.to_device.push_back(p.to_vec());
            }
        }
        let mut data = Vec::new();
        for _ in 0..100_000 {
            self.msc.process(&mut self.pool);
            loop {
                let Some(p) = self.wire.lock().unwrap().to_host.pop_front() else {
                    break;
                };
                if p.len() == 13 && p.starts_with(b"USBS") {
                    return Reply {
                        data,
                        tag: u32::from_le_bytes(p[4..8].try_into().unwrap()),
                        residue: u32::from_le_bytes(p[8..12].try_into().unwrap()),
                        status: p[12],
                    };
                }
                data.extend_from_slice(&p);
            }
        }
        panic!("no status for {cdb:02x?}");
    }
}

fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = op;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

#[test]
fn bulk_only_transport_carries_scsi_commands_to_the_pool() {
    let wire = Arc::new(Mutex::new(Wire::default()));
    let alloc = UsbBusAllocator::new(FakeBus(Arc::clone(&wire)));
    let target = ScsiTarget::new(0, BlockSize::B512);
    let msc = MassStorage::new(&alloc, vec![0u8; 512], target).unwrap();
    // Building the device freezes the allocator: the endpoints can move packets from now on.
    let _dev = UsbDeviceBuilder::new(&alloc, UsbVidPid(0x1209, 0x0001)).build();
    let mut rig_cards = card_rig(7, 2, 8192);
    let spare = rig_cards.devices.pop().unwrap();
    let members: Vec<SharedCard> = rig_cards.devices.drain(..).collect();
    let cfg = raidcore_board::pico::pool_config();
    let mem = vec![0u8; CardPool::memory_bytes(&cfg, 6)];
    let mut pool = CardPool::create(members, [spare], cfg, *b"raidcore-usb-t-1", mem).unwrap();
    pool.create_lun("usb", 256).unwrap();
    let mut rig = Rig {
        wire,
        msc,
        pool,
        tag: 0x1000,
    };

    let r = rig.command(&[0x12, 0, 0, 0, 36, 0], 36, true, &[]);
    assert_eq!((r.status, r.residue, r.tag), (0, 0, 0x1001), "INQUIRY");
    assert_eq!(r.data.len(), 36);
    assert_eq!(&r.data[8..16], b"raidcore");
    let r = rig.command(&[0; 6], 0, false, &[]);
    assert_eq!((r.status, r.residue), (0, 0), "TEST UNIT READY");
    let r = rig.command(&[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], 8, true, &[]);
    assert_eq!(r.status, 0);
    assert_eq!(
        r.data,
        [0, 0, 0x07, 0xFF, 0, 0, 0x02, 0x00],
        "2048 sectors of 512"
    );

    // 8 KiB of text written at sector 5 (pool blocks 0..3, two of them in part), read back.
    let text = common::text(0, 16 * 512);
    let r = rig.command(&rw10(0x2A, 5, 16), 16 * 512, false, &text);
    assert_eq!((r.status, r.residue), (0, 0), "WRITE(10)");
    let r = rig.command(&rw10(0x28, 5, 16), 16 * 512, true, &[]);
    assert_eq!((r.status, r.residue), (0, 0), "READ(10)");
    assert!(r.data == text, "READ(10) returns what WRITE(10) wrote");
    let r = rig.command(&[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, false, &[]);
    assert_eq!(r.status, 0, "SYNCHRONIZE CACHE");

    // Past the end: failed, nothing sent (the residue is the whole length), sense says why.
    let r = rig.command(&rw10(0x28, 2047, 2), 1024, true, &[]);
    assert_eq!((r.status, r.residue, r.data.len()), (1, 1024, 0));
    let r = rig.command(&[0x03, 0, 0, 0, 18, 0], 18, true, &[]);
    assert_eq!(r.status, 0);
    assert_eq!((r.data[2], r.data[12], r.data[13]), (0x05, 0x21, 0x00));
}
