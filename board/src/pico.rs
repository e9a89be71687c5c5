//! The pool of the RP2040 example firmware (`firmware/rp-pico`): RAID-6 over four micro-SD
//! cards (2 data + P + Q strips per stripe) plus one hot spare on the chip's two SPI buses, LZ4
//! on, sized for the RP2040's 264 KiB of SRAM. The pool self-test ([`crate::selftest::pool_raid6_rebuild`]) runs this
//! configuration, so what the QEMU image measures (stack, instructions per call) is the
//! firmware's.
//!
//! RAM of this configuration (board/README.md has the whole budget): the arena,
//! [`ARENA_BYTES`] (149 KiB); the `Pool` value itself (about 9 KiB; LZ4's 16 KiB hash table
//! is on the stack of a write); the stack of `Pool::import` / `Pool::create` at boot; the SD driver's 4 KiB chunk
//! buffer; the SCSI front end's 4 KiB block buffer.
//!
//! Why four members and not six: each member costs 16 KiB of the arena's array scratch
//! (`raidcore::pool` sizes it 16 KiB per member whatever the strip size; with 4 KiB strips
//! only 4 KiB of each is ever used), so six members need 189 KiB of arena with these settings,
//! which with the pool value and the stack of an import does not fit in 264 KiB. With the
//! scratch sized `min(16 KiB, strip)` per member, six members would need 117 KiB.

use raidcore::pool::{Pool, PoolConfig};
use raidcore::raid::Level;

/// RAID-6 members (2 data + P + Q strips per stripe).
pub const MEMBERS: usize = 4;
/// Hot spares.
pub const SPARES: usize = 1;
/// LUNs (the USB drive).
pub const LUNS: usize = 1;
/// Cached map pages (4 KiB of arena each): one root-to-leaf path of a 4-level map (a LUN of
/// up to 252^3 x 4 KiB = 64 GiB needs no more).
pub const MAP_PAGES: usize = 4;
/// Open extents: one stream (a USB host writes one run at a time).
pub const STREAMS: usize = 1;
/// The firmware's pool type over disks `D` and arena `M`.
pub type PicoPool<D, M> = Pool<D, M, { MEMBERS + SPARES }, LUNS, MAP_PAGES, STREAMS>;
/// Arena bytes the pool needs with [`pool_config`] over [`MEMBERS`] members
/// (`Pool::memory_bytes`; a test keeps the two equal).
pub const ARENA_BYTES: usize = 152_647;
/// The RP2040's SRAM: banks 0-3 (256 KiB, striped) and 4-5 (4 KiB each), one contiguous range.
pub const SRAM_BYTES: usize = 264 * 1024;

// At most 160 KiB of arena: the rest is the pool value, the stack, USB and the application.
const _: () = assert!(ARENA_BYTES <= 160 * 1024);

/// The firmware's pool settings: RAID-6, 4 KiB strips (one 8-block SD chunk), extents of at
/// most 2 blocks (8 KiB: each extent costs about 4 x its size of arena), LZ4 on, 16 intent-log
/// slots, segments of at least 4 stripes, at most 256 segments (the segment table's arena), one
/// stripe per maintenance step (the rebuild step bounds the time USB goes unpolled), open
/// extents closed after 2 s idle (time in microseconds).
pub fn pool_config() -> PoolConfig {
    PoolConfig {
        level: Level::Raid6,
        strip_bytes: 4096,
        max_extent_blocks: 2,
        compression: true,
        zil_slots: 16,
        segment_stripes: 4,
        max_segments: 256,
        stripes_per_step: 1,
        idle_close: 2_000_000,
        ..PoolConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_sd::SharedCard;

    #[test]
    fn arena_bytes_is_what_the_pool_asks_for() {
        let need = PicoPool::<SharedCard, &mut [u8]>::memory_bytes(&pool_config(), MEMBERS);
        assert_eq!(need, ARENA_BYTES);
    }
}
