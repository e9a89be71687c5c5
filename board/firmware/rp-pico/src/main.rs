//! raidcore on a Raspberry Pi Pico (RP2040): five micro-SD cards on two SPI buses make a
//! RAID-6 pool (four members, one hot spare, LZ4 on) that the Pico's USB port serves as a
//! mass-storage drive (SCSI over Bulk-Only Transport): plug it into a PC and it is a disk.
//! (Four members, not six, for RAM: see `raidcore_board::pico`.)
//!
//! At power-up the firmware imports the pool from the cards, or creates one (with one LUN over
//! all the space) when no card holds a raidcore superblock. **Creating a pool overwrites the
//! cards.** Between USB commands it runs `Pool::maintenance` (rebuild onto the spare, scrub).
//! Log: defmt over RTT. LED on GP25: on = online, slow blink = degraded or rebuilding, fast
//! blink = faulted or failed to start.
//!
//! ## Wiring (cards in SPI mode, 3.3 V; pull-ups of 10–100 kΩ on MISO and on every CS)
//! | signal | bus A: SPI0 | bus B: SPI1 |
//! | --- | --- | --- |
//! | SCK  | GP18 (pin 24) | GP10 (pin 14) |
//! | MOSI (card DI, pin 2) | GP19 (pin 25) | GP11 (pin 15) |
//! | MISO (card DO, pin 7) | GP16 (pin 21) | GP12 (pin 16) |
//! | CS (card pin 1) | member 0 GP17 (pin 22), member 1 GP20 (pin 26), spare GP21 (pin 27) | member 2 GP13 (pin 17), member 3 GP14 (pin 19) |
//!
//! Each card also needs 3V3 (card pin 4, from a separate 3.3 V regulator for five cards: a
//! card may draw 100 mA while writing) and GND (pins 3 and 6). Keep bus wires under 10 cm.
//!
//! ## RAM (264 KiB)
//! Static: the pool's arena (`pico::ARENA_BYTES`), the SCSI target's 4 KiB block buffer, the
//! USB stack and defmt's RTT buffer; CI prints the image's `.data` + `.bss` and the stack room
//! left. The pool value (9 KiB) lives in `main`'s frame. The stack's high-water mark is
//! logged once a minute.
#![no_std]
#![no_main]

use core::cell::RefCell;

use defmt_rtt as _;
use embedded_hal::digital::OutputPin;
use embedded_hal::spi::{MODE_0, SpiBus};
use embedded_hal_bus::spi::RefCellDevice;
use panic_probe as _;
use raidcore::pool::{
    Health, ImportOptions, ImportReport, IoError, LunError, OpenError, read_label,
};
use raidcore_board::pico::{self, PicoPool};
use raidcore_board::scsi::{Identity, ScsiTarget};
use raidcore_board::sd::{SdBlockDevice, SdError, power_up_clocks};
use raidcore_board::stack;
use raidcore_board::usb::MassStorage;
use raidcore_hal::{BlockDevice, BlockSize};
use rp2040_hal as hal;
use rp2040_hal::clocks::Clock as _;
use rp2040_hal::fugit::RateExtU32;
use rp2040_hal::gpio::bank0::{Gpio10, Gpio11, Gpio12, Gpio16, Gpio18, Gpio19};
use rp2040_hal::gpio::{DynPinId, FunctionSioOutput, FunctionSpi, Pin, PinState, PullDown, PullUp};
use static_cell::StaticCell;
use usb_device::bus::UsbBusAllocator;
use usb_device::device::{StringDescriptors, UsbDevice, UsbDeviceBuilder, UsbVidPid};

/// The second-stage bootloader for the Pico's W25Q16 flash.
#[unsafe(link_section = ".boot2")]
#[used]
pub static BOOT2: [u8; 256] = rp2040_boot2::BOOT_LOADER_W25Q080;

/// The Pico's crystal.
const XTAL_FREQ_HZ: u32 = 12_000_000;

type SpiA = hal::spi::Spi<
    hal::spi::Enabled,
    hal::pac::SPI0,
    (
        Pin<Gpio19, FunctionSpi, PullDown>,
        Pin<Gpio16, FunctionSpi, PullUp>,
        Pin<Gpio18, FunctionSpi, PullDown>,
    ),
>;
type SpiB = hal::spi::Spi<
    hal::spi::Enabled,
    hal::pac::SPI1,
    (
        Pin<Gpio11, FunctionSpi, PullDown>,
        Pin<Gpio12, FunctionSpi, PullUp>,
        Pin<Gpio10, FunctionSpi, PullDown>,
    ),
>;
type Cs = Pin<DynPinId, FunctionSioOutput, PullDown>;
type Card<S> = SdBlockDevice<RefCellDevice<'static, S, Cs, hal::Timer>, hal::Timer>;
/// A pool member: cards on the two buses have different types but one error type.
type Disk = &'static mut dyn BlockDevice<Error = SdError>;
type FwPool = PicoPool<Disk, &'static mut [u8]>;
type Usb = hal::usb::UsbBus;

static BUS_A: StaticCell<RefCell<SpiA>> = StaticCell::new();
static BUS_B: StaticCell<RefCell<SpiB>> = StaticCell::new();
static CARDS_A: StaticCell<[Card<SpiA>; 3]> = StaticCell::new();
static CARDS_B: StaticCell<[Card<SpiB>; 2]> = StaticCell::new();
static USB_ALLOC: StaticCell<UsbBusAllocator<Usb>> = StaticCell::new();
static USB_BUF: StaticCell<[u8; 512]> = StaticCell::new();
type Msc = MassStorage<'static, Usb, &'static mut [u8]>;
static MSC: StaticCell<Msc> = StaticCell::new();
/// The pool's arena (in `.bss`: a `StaticCell` would build it on the stack first).
static mut ARENA: [u8; pico::ARENA_BYTES] = [0; pico::ARENA_BYTES];

unsafe extern "C" {
    /// End of static data (cortex-m-rt): the stack may grow down to here.
    static __sheap: u32;
    /// The initial stack pointer (cortex-m-rt): the top of RAM.
    static _stack_start: u32;
}

#[hal::entry]
fn main() -> ! {
    // SAFETY: from the end of static data to below this frame nothing lives yet.
    let stack_low = unsafe { stack::paint(core::ptr::addr_of!(__sheap) as usize) };
    let Some(mut pac) = hal::pac::Peripherals::take() else {
        halt()
    };
    let mut watchdog = hal::Watchdog::new(pac.WATCHDOG);
    let Ok(clocks) = hal::clocks::init_clocks_and_plls(
        XTAL_FREQ_HZ,
        pac.XOSC,
        pac.CLOCKS,
        pac.PLL_SYS,
        pac.PLL_USB,
        &mut pac.RESETS,
        &mut watchdog,
    ) else {
        halt()
    };
    let timer = hal::Timer::new(pac.TIMER, &mut pac.RESETS, &clocks);
    let sio = hal::Sio::new(pac.SIO);
    let pins = hal::gpio::Pins::new(
        pac.IO_BANK0,
        pac.PADS_BANK0,
        sio.gpio_bank0,
        &mut pac.RESETS,
    );
    let mut led = pins.gpio25.into_push_pull_output();
    let peri = clocks.peripheral_clock.freq();

    // Chip selects first, all high, so no card sees the power-up clocks as a command.
    let high = PinState::High;
    // Bus A: members 0 and 1, the spare; bus B: members 2 and 3.
    let cs = |p: Cs| p;
    let cs_a: [Cs; 3] = [
        cs(pins
            .gpio17
            .into_push_pull_output_in_state(high)
            .into_dyn_pin()),
        cs(pins
            .gpio20
            .into_push_pull_output_in_state(high)
            .into_dyn_pin()),
        cs(pins
            .gpio21
            .into_push_pull_output_in_state(high)
            .into_dyn_pin()),
    ];
    let cs_b: [Cs; 2] = [
        cs(pins
            .gpio13
            .into_push_pull_output_in_state(high)
            .into_dyn_pin()),
        cs(pins
            .gpio14
            .into_push_pull_output_in_state(high)
            .into_dyn_pin()),
    ];

    // Bus A: SPI0 on GP19 (MOSI), GP16 (MISO, pulled up), GP18 (SCK), 400 kHz for initialisation.
    let bus_a: SpiA = hal::spi::Spi::<_, _, _, 8>::new(
        pac.SPI0,
        (
            pins.gpio19.into_function::<FunctionSpi>(),
            pins.gpio16
                .into_pull_type::<PullUp>()
                .into_function::<FunctionSpi>(),
            pins.gpio18.into_function::<FunctionSpi>(),
        ),
    )
    .init(&mut pac.RESETS, peri, 400.kHz(), MODE_0);
    // Bus B: SPI1 on GP11 (MOSI), GP12 (MISO, pulled up), GP10 (SCK).
    let bus_b: SpiB = hal::spi::Spi::<_, _, _, 8>::new(
        pac.SPI1,
        (
            pins.gpio11.into_function::<FunctionSpi>(),
            pins.gpio12
                .into_pull_type::<PullUp>()
                .into_function::<FunctionSpi>(),
            pins.gpio10.into_function::<FunctionSpi>(),
        ),
    )
    .init(&mut pac.RESETS, peri, 400.kHz(), MODE_0);
    let bus_a: &'static RefCell<SpiA> = BUS_A.init(RefCell::new(bus_a));
    let bus_b: &'static RefCell<SpiB> = BUS_B.init(RefCell::new(bus_b));
    if power_up_clocks(&mut *bus_a.borrow_mut()).is_err()
        || power_up_clocks(&mut *bus_b.borrow_mut()).is_err()
    {
        fail(&mut led, timer)
    }

    // One shared-bus SPI device and one SD block device per card.
    let [a0, a1, a2] = cs_a;
    let [b0, b1] = cs_b;
    let (Some(m0), Some(m1), Some(spare)) = (
        card(0, bus_a, a0, timer),
        card(1, bus_a, a1, timer),
        card(4, bus_a, a2, timer),
    ) else {
        fail(&mut led, timer)
    };
    let (Some(m2), Some(m3)) = (card(2, bus_b, b0, timer), card(3, bus_b, b1, timer)) else {
        fail(&mut led, timer)
    };
    let cards_a = CARDS_A.init([m0, m1, spare]);
    let cards_b = CARDS_B.init([m2, m3]);

    // Initialised: full speed (cards in default-speed mode take up to 25 MHz).
    let fast_a = bus_a.borrow_mut().set_baudrate(peri, 16.MHz());
    let fast_b = bus_b.borrow_mut().set_baudrate(peri, 16.MHz());
    defmt::info!("buses at {} / {} Hz", fast_a.to_Hz(), fast_b.to_Hz());

    let [m0, m1, spare] = cards_a;
    let [m2, m3] = cards_b;
    let disks: [Disk; pico::MEMBERS + pico::SPARES] = [m0, m1, m2, m3, spare];
    let rosc = hal::rosc::RingOscillator::new(pac.ROSC).initialize();
    let (disks, arena) = match prepare(disks, &rosc) {
        Ok(p) => p,
        Err(e) => {
            defmt::error!("no pool: {}", e);
            fail(&mut led, timer)
        }
    };
    // The pool value lives here, in `main`'s frame, for good.
    let mut opened = import(disks, arena);
    let pool = match &mut opened {
        Ok((pool, r)) => {
            defmt::info!(
                "pool imported: {} log items replayed, {} members missing",
                r.items_replayed,
                r.missing
            );
            pool
        }
        Err(e) => {
            defmt::error!("import: {}", e);
            fail(&mut led, timer)
        }
    };
    let Some(lun) = pool.luns().next().map(|l| l.id) else {
        defmt::error!("the pool has no LUN");
        fail(&mut led, timer)
    };

    let Some((mut dev, msc)) = usb(
        pac.USBCTRL_REGS,
        pac.USBCTRL_DPRAM,
        clocks.usb_clock,
        &mut pac.RESETS,
        lun,
    ) else {
        fail(&mut led, timer)
    };
    defmt::info!(
        "serving LUN {} over USB; pool arena {} bytes, pool value {} bytes",
        lun,
        pico::ARENA_BYTES,
        core::mem::size_of::<FwPool>()
    );

    let (mut last_log, mut last_health) = (0u64, 0u64);
    let mut health = Health::Online;
    loop {
        let now = timer.get_counter().ticks(); // microseconds
        pool.set_time(now);
        dev.poll(&mut [&mut *msc]);
        msc.process(&mut *pool);
        if msc.idle() {
            match pool.maintenance() {
                Ok(r) if r.rebuilt_stripes > 0 => defmt::debug!("rebuilt {}", r.rebuilt_stripes),
                Ok(_) => {}
                Err(e) => defmt::warn!("maintenance: {}", e),
            }
        }
        if now - last_health > 100_000 {
            last_health = now;
            let h = pool.status().health;
            if h != health {
                defmt::warn!("pool {}", h.name());
                health = h;
            }
        }
        let blink = match health {
            Health::Online => true,
            Health::Degraded => (now / 500_000) % 2 == 0,
            Health::Faulted | Health::Suspended => (now / 100_000) % 2 == 0,
        };
        let _ = if blink { led.set_high() } else { led.set_low() };
        if now - last_log > 60_000_000 {
            last_log = now;
            // SAFETY: `stack_low` came from `paint`; below the frames in use nothing lives.
            let top = core::ptr::addr_of!(_stack_start) as usize;
            let used = top - unsafe { stack::lowest_used(stack_low) };
            defmt::info!("stack high-water mark: {} bytes", used);
        }
    }
}

/// Card `n` on `bus` with chip select `cs`, initialised (`None`, logged, if it does not answer).
fn card<S: SpiBus<u8>>(
    n: usize,
    bus: &'static RefCell<S>,
    cs: Cs,
    timer: hal::Timer,
) -> Option<Card<S>> {
    // The pins' error type is `Infallible`: this cannot fail.
    let Ok(spi) = RefCellDevice::new(bus, cs, timer);
    match SdBlockDevice::new(spi, timer) {
        Ok(c) => {
            defmt::info!("card {}: {} blocks of 512 bytes", n, c.block_count());
            Some(c)
        }
        Err(e) => {
            defmt::error!("card {} did not initialise: {}", n, e);
            None
        }
    }
}

/// Why the firmware found no pool to serve.
#[derive(defmt::Format)]
enum StartError {
    Open(OpenError),
    Lun(LunError),
    Io(IoError),
}

/// USB mass storage for `lun`, 512-byte logical blocks (set up in a frame of its own).
#[inline(never)]
fn usb(
    regs: hal::pac::USBCTRL_REGS,
    dpram: hal::pac::USBCTRL_DPRAM,
    clock: hal::clocks::UsbClock,
    resets: &mut hal::pac::RESETS,
    lun: u16,
) -> Option<(UsbDevice<'static, Usb>, &'static mut Msc)> {
    let usb = USB_ALLOC.init(UsbBusAllocator::new(hal::usb::UsbBus::new(
        regs, dpram, clock, true, resets,
    )));
    let identity = Identity {
        product: *b"RAID-6 SD pool  ",
        ..Identity::default()
    };
    let target = ScsiTarget::new(lun, BlockSize::B512).with_identity(identity);
    let buf: &'static mut [u8] = USB_BUF.init([0; 512]);
    let msc = MSC.init(MassStorage::new(usb, buf, target).ok()?);
    let builder = UsbDeviceBuilder::new(usb, UsbVidPid(0x1209, 0x0001))
        .strings(&[StringDescriptors::default()
            .manufacturer("raidcore")
            .product("raidcore RAID-6 on RP2040")
            .serial_number("0001")])
        .ok()?;
    Some((builder.build(), msc))
}

/// The cards in pool order: members, then the spare.
type Disks = heapless::Vec<Disk, { pico::MEMBERS + pico::SPARES }>;

/// `Pool::import` in a frame of its own, its result written straight into the caller's slot
/// (`main`'s frame): the pool value is not copied again there.
#[inline(never)]
fn import(disks: Disks, arena: &'static mut [u8]) -> Result<(FwPool, ImportReport), OpenError> {
    let opts = ImportOptions {
        config: pico::pool_config(),
        skip_refused: true,
        force: false,
        rewind: false,
    };
    FwPool::import(disks, opts, arena)
}

/// `Pool::create` in a frame of its own: the first [`pico::MEMBERS`] disks are members, the
/// last the spare.
#[inline(never)]
fn create(
    disks: [Disk; pico::MEMBERS + pico::SPARES],
    arena: &'static mut [u8],
    uuid: [u8; 16],
) -> Result<FwPool, OpenError> {
    let [d0, d1, d2, d3, spare] = disks;
    FwPool::create([d0, d1, d2, d3], [spare], pico::pool_config(), uuid, arena)
}

/// Makes a pool on blank cards with one LUN over all its space, makes it durable and resets
/// the chip: boot then always goes through [`import`] (and the create's frame is not on the
/// stack beside the imported pool's).
#[inline(never)]
fn create_blank(
    disks: [Disk; pico::MEMBERS + pico::SPARES],
    arena: &'static mut [u8],
    uuid: [u8; 16],
) -> Result<core::convert::Infallible, StartError> {
    let mut created = create(disks, arena, uuid);
    let pool = created.as_mut().map_err(|e| StartError::Open(*e))?;
    let blocks = pool.usable_bytes() / 4096;
    pool.create_lun("raidcore", blocks)
        .map_err(StartError::Lun)?;
    pool.flush().map_err(StartError::Io)?;
    pool.checkpoint().map_err(StartError::Io)?;
    defmt::info!("pool created ({} blocks of 4 KiB); restarting", blocks);
    cortex_m::peripheral::SCB::sys_reset()
}

/// The cards and the arena, ready for [`import`]: a pool is created first when no card holds
/// a raidcore superblock.
#[inline(never)]
fn prepare(
    mut disks: [Disk; pico::MEMBERS + pico::SPARES],
    rosc: &hal::rosc::RingOscillator<hal::rosc::Enabled>,
) -> Result<(Disks, &'static mut [u8]), StartError> {
    // SAFETY: the only reference to ARENA, taken once.
    let arena: &'static mut [u8] = unsafe { &mut *core::ptr::addr_of_mut!(ARENA) };
    if disks.iter_mut().any(|d| read_label(d).is_ok()) {
        return Ok((Disks::from_iter(disks), arena));
    }
    defmt::info!("no pool on the cards: creating one");
    let mut uuid = [0u8; 16];
    for b in &mut uuid {
        for _ in 0..8 {
            *b = (*b << 1) | u8::from(rosc.get_random_bit());
        }
    }
    match create_blank(disks, arena, uuid)? {}
}

/// Fast blink for ever.
fn fail(led: &mut impl OutputPin, mut timer: hal::Timer) -> ! {
    use embedded_hal::delay::DelayNs;
    loop {
        let _ = led.set_high();
        timer.delay_ms(100);
        let _ = led.set_low();
        timer.delay_ms(100);
    }
}

fn halt() -> ! {
    cortex_m::asm::udf()
}
