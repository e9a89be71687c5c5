//! Command-line values: RAID levels, sizes, block sizes.

use raidcore::raid::Level;
use raidcore_hal::BlockSize;

use super::Failure;
use crate::units::parse_size;

/// Parses a RAID level name (`raid0`, `raid1`, `raid10`, `raid5`, `raid6`; the `raid` prefix is
/// optional).
pub fn parse_level(s: &str) -> Result<Level, String> {
    let t = s.to_ascii_lowercase();
    let t = t.strip_prefix("raid").unwrap_or(&t);
    match t {
        "0" => Ok(Level::Raid0),
        "1" => Ok(Level::Raid1),
        "10" => Ok(Level::Raid10),
        "5" => Ok(Level::Raid5),
        "6" => Ok(Level::Raid6),
        _ => Err(format!(
            "unknown RAID level {s:?} (expected raid0, raid1, raid10, raid5 or raid6)"
        )),
    }
}

/// A size argument (`256M`, see [`parse_size`]).
pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

/// The block size of `--block-size` (512 or 4096 bytes).
pub fn block_size(bytes: usize) -> Result<BlockSize, Failure> {
    match bytes {
        512 => Ok(BlockSize::B512),
        4096 => Ok(BlockSize::B4096),
        b => Err(Failure::Error(format!("--block-size {b}: use 512 or 4096"))),
    }
}

/// The strip size of `--strip-size`, in bytes.
pub fn strip_bytes(bytes: u64) -> Result<u32, Failure> {
    u32::try_from(bytes).map_err(|_| Failure::Error(format!("--strip-size {bytes}: too large")))
}
