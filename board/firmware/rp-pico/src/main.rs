//! raidcore on a Raspberry Pi Pico (RP2040): seven SD cards on two SPI buses, six as RAID-6
//! members and one as hot spare; at power-up the board runs the RAID-6 self-test on the first
//! MiB of every card (seeded data with P/Q, member 2 fails, rebuild onto the spare, verify every
//! block) and reports over defmt/RTT. LED on GP25: steady = passed, fast blink = failed.
//!
//! **The self-test overwrites the first MiB of every card.** Use blank cards.
//!
//! ## Wiring (cards in SPI mode, 3.3 V; pull-ups of 10–100 kΩ on MISO and on every CS)
//! | signal | bus A: SPI0 | bus B: SPI1 |
//! | --- | --- | --- |
//! | SCK  | GP18 (pin 24) | GP10 (pin 14) |
//! | MOSI (card DI, pin 2) | GP19 (pin 25) | GP11 (pin 15) |
//! | MISO (card DO, pin 7) | GP16 (pin 21) | GP12 (pin 16) |
//! | CS (card pin 1) | card 0 GP17 (pin 22), card 1 GP20 (pin 26), card 2 GP21 (pin 27), card 3 GP22 (pin 29) | card 4 GP13 (pin 17), card 5 GP14 (pin 19), spare (card 6) GP15 (pin 20) |
//!
//! Each card also needs 3V3 (card pin 4, from the Pico's 3V3 OUT or, better for seven cards, a
//! separate 3.3 V regulator: a card may draw 100 mA while writing) and GND (pins 3 and 6).
//! Keep the bus wires short (< 10 cm) to run at 16 MHz.
//!
//! ## Bring-up order (what `raidcore_board::sd` asks of the integrator)
//! 1. Both buses at 400 kHz, mode 0; every CS driven high.
//! 2. 80 clocks on each raw bus with no CS asserted (`power_up_clocks`).
//! 3. One `embedded-hal-bus` `RefCellDevice` per card, then `SdBlockDevice::new` per card.
//! 4. Raise both buses to 16 MHz.
#![no_std]
#![no_main]

use core::cell::RefCell;

use defmt_rtt as _;
use embedded_hal::digital::OutputPin;
use embedded_hal::spi::MODE_0;
use embedded_hal_bus::spi::RefCellDevice;
use panic_probe as _;
use raidcore_board::sd::{SdBlockDevice, SdError, power_up_clocks};
use raidcore_board::selftest::{self, Config};
use raidcore_hal::BlockDevice;
use rp2040_hal as hal;
use rp2040_hal::clocks::Clock as _;
use rp2040_hal::fugit::RateExtU32;
use rp2040_hal::gpio::{FunctionSpi, PinState, PullUp};

/// The second-stage bootloader for the Pico's W25Q16 flash.
#[unsafe(link_section = ".boot2")]
#[used]
pub static BOOT2: [u8; 256] = rp2040_boot2::BOOT_LOADER_W25Q080;

/// The Pico's crystal.
const XTAL_FREQ_HZ: u32 = 12_000_000;
/// 4 KiB strips; 256 stripes = the first MiB of every card.
const STRIP_BLOCKS: u64 = 8;
const STRIPES: u64 = 256;
const MEMBERS: usize = 6;
/// Self-test work memory: one strip per member plus one (28 KiB of the 264 KiB SRAM).
static mut WORK: [u8; (MEMBERS + 1) * 4096] = [0; (MEMBERS + 1) * 4096];

#[hal::entry]
fn main() -> ! {
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
    let cs_a = (
        pins.gpio17.into_push_pull_output_in_state(PinState::High),
        pins.gpio20.into_push_pull_output_in_state(PinState::High),
        pins.gpio21.into_push_pull_output_in_state(PinState::High),
        pins.gpio22.into_push_pull_output_in_state(PinState::High),
    );
    let cs_b = (
        pins.gpio13.into_push_pull_output_in_state(PinState::High),
        pins.gpio14.into_push_pull_output_in_state(PinState::High),
        pins.gpio15.into_push_pull_output_in_state(PinState::High),
    );

    // Bus A: SPI0 on GP19 (MOSI), GP16 (MISO, pulled up), GP18 (SCK), 400 kHz for initialisation.
    let bus_a = hal::spi::Spi::<_, _, _, 8>::new(
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
    let bus_b = hal::spi::Spi::<_, _, _, 8>::new(
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
    let bus_a = RefCell::new(bus_a);
    let bus_b = RefCell::new(bus_b);
    if power_up_clocks(&mut *bus_a.borrow_mut()).is_err()
        || power_up_clocks(&mut *bus_b.borrow_mut()).is_err()
    {
        fail(&mut led, timer)
    }

    // One shared-bus SPI device and one SD block device per card.
    macro_rules! card {
        ($bus:expr, $cs:expr, $n:literal) => {{
            // The pins' error type is `Infallible`: this cannot fail.
            let Ok(spi) = RefCellDevice::new($bus, $cs, timer);
            match SdBlockDevice::new(spi, timer) {
                Ok(card) => {
                    defmt::info!("card {}: {} blocks of 512 bytes", $n, card.block_count());
                    card
                }
                Err(e) => {
                    defmt::error!("card {} did not initialise: {}", $n, e);
                    fail(&mut led, timer)
                }
            }
        }};
    }
    let mut c0 = card!(&bus_a, cs_a.0, 0);
    let mut c1 = card!(&bus_a, cs_a.1, 1);
    let mut c2 = card!(&bus_a, cs_a.2, 2);
    let mut c3 = card!(&bus_a, cs_a.3, 3);
    let mut c4 = card!(&bus_b, cs_b.0, 4);
    let mut c5 = card!(&bus_b, cs_b.1, 5);
    let mut spare = card!(&bus_b, cs_b.2, 6);

    // Initialised: full speed (cards in default-speed mode take up to 25 MHz).
    let fast_a = bus_a.borrow_mut().set_baudrate(peri, 16.MHz());
    let fast_b = bus_b.borrow_mut().set_baudrate(peri, 16.MHz());
    defmt::info!("buses at {} / {} Hz", fast_a.to_Hz(), fast_b.to_Hz());

    // The cards on the two buses are different types; the self-test takes them as trait objects
    // (their error type is the same `SdError`).
    let mut members: [&mut dyn BlockDevice<Error = SdError>; MEMBERS] =
        [&mut c0, &mut c1, &mut c2, &mut c3, &mut c4, &mut c5];
    let mut spare: &mut dyn BlockDevice<Error = SdError> = &mut spare;
    let cfg = Config {
        seed: 0x5241_4944_434F_5245,
        stripes: STRIPES,
        strip_blocks: STRIP_BLOCKS,
        failed: 2,
    };
    // SAFETY: the only reference to WORK, taken once in `main`.
    let work = unsafe { &mut *core::ptr::addr_of_mut!(WORK) };
    let mut clock = || timer.get_counter().ticks(); // microseconds

    // The parity-level self-test; the pool-level one (create a RAID-6 pool on the members,
    // write from the seed, fail member 2, rebuild onto the spare, verify) replaces this call.
    match selftest::raid6_rebuild(&mut members, &mut spare, &cfg, work, &mut clock) {
        Ok(r) => {
            defmt::info!(
                "self-test passed: {} data bytes in {} us (P/Q {} us), rebuilt {} bytes in {} us, {} blocks verified",
                r.data_bytes,
                r.ticks_write,
                r.ticks_gen_pq,
                r.bytes_rebuilt,
                r.ticks_rebuild,
                r.blocks_verified
            );
            let _ = led.set_high();
            loop {
                cortex_m::asm::wfi();
            }
        }
        Err(e) => {
            defmt::error!("self-test FAILED: {}", e);
            fail(&mut led, timer)
        }
    }
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
    loop {
        cortex_m::asm::udf();
    }
}
