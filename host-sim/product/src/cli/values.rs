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
        b => Err(Failure::Usage(format!("--block-size {b}: use 512 or 4096"))),
    }
}

/// The strip size of `--strip-size`, in bytes.
pub fn strip_bytes(bytes: u64) -> Result<u32, Failure> {
    u32::try_from(bytes).map_err(|_| Failure::Usage(format!("--strip-size {bytes}: too large")))
}

/// A duration argument: `500ms`, `2s`, `1m`, or a number of seconds (`1.5`).
pub fn duration_arg(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("bad duration {s:?}: expected e.g. 500ms, 2s or 1m"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        _ => return Err(format!("bad duration unit in {s:?} (use ms, s or m)")),
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("bad duration {s:?}: {e}"))
}

/// `on` or `off` (also `true`/`false`, `yes`/`no`).
pub fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{s:?}: expected on or off")),
    }
}
