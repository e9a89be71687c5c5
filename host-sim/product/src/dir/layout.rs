//! What a pool directory holds, by name: the images `disk0.img`, `disk1.img`, … (members first,
//! then hot spares, as created), the description file [`META_FILE`], the lock file
//! [`LOCK_FILE`], and, while a `create --force` runs (or after one was killed), the old pool in
//! [`REPLACED_DIR`]. The names are those the first tool (`raidcore-sim`) gave them, so every pool
//! opens with both `raidcore` and `raidcore-sim`.

use std::fs;
use std::path::{Path, PathBuf};

use raidcore_hal::BlockSize;
use serde::{Deserialize, Serialize};

use super::DirError;
use super::error::io_err;

/// Name of the description file in a pool directory.
pub const META_FILE: &str = "raidcore-sim.json";

/// Name of the lock file in a pool directory. An open pool holds its exclusive advisory lock
/// (`flock(2)`) while it lives, so two processes never have one pool open, and `create` never
/// replaces a pool a server is exporting. The file itself is empty and stays.
pub const LOCK_FILE: &str = ".raidcore-sim.lock";

/// Subdirectory of a pool directory where `create --force` keeps the old pool until the new one
/// is made (and from where it puts it back if making the new one fails).
pub const REPLACED_DIR: &str = ".replaced-pool";

/// File name of image number `n`.
#[must_use]
pub fn image_name(n: usize) -> String {
    format!("disk{n}.img")
}

/// Image numbers present in `dir` (files named exactly `disk<number>.img`), ascending.
pub fn list_images(dir: &Path) -> Result<Vec<usize>, DirError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(format!("listing {}", dir.display())))? {
        let entry = entry.map_err(io_err(format!("listing {}", dir.display())))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(num) = name
            .strip_prefix("disk")
            .and_then(|r| r.strip_suffix(".img"))
            && !num.is_empty()
            && num.bytes().all(|b| b.is_ascii_digit())
            && let Ok(n) = num.parse::<usize>()
            && image_name(n) == name
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// What [`META_FILE`] records: what is needed to open the images before their superblocks can
/// be read, and the device model the simulator times them with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirMeta {
    /// Block size of every image, in bytes (512 or 4096).
    pub block_bytes: usize,
    /// Device model name (`memory`, `hdd10k`, `ssd`, `nvme` or `sd`). Timing only: the
    /// simulator's runs delay each request by it; `raidcore` serves the files as they are.
    pub model: String,
    /// Images created with the pool (members + spares); informational.
    pub images: usize,
    /// The images were allocated whole at creation; replacements and spares are made alike.
    /// (Absent in older descriptions: sparse.)
    #[serde(default)]
    pub preallocated: bool,
    /// The pool's dedicated intent-log device: a file outside the images, on a faster device
    /// (`create --log-device`; [`super::PoolDir::add_log_device`]). Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_device: Option<PathBuf>,
    /// The log device's model name for the simulator (absent: the members' model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_model: Option<String>,
}

impl DirMeta {
    /// The images' block size.
    ///
    /// Errors: [`DirError::Invalid`] for a size other than 512 or 4096.
    pub fn block_size(&self) -> Result<BlockSize, DirError> {
        match self.block_bytes {
            512 => Ok(BlockSize::B512),
            4096 => Ok(BlockSize::B4096),
            b => Err(DirError::Invalid(format!(
                "{META_FILE}: block size {b} is neither 512 nor 4096"
            ))),
        }
    }
}

/// Reads the description of the pool in `dir`.
pub fn read_meta(dir: &Path) -> Result<DirMeta, DirError> {
    let p = dir.join(META_FILE);
    let text = fs::read_to_string(&p).map_err(io_err(format!(
        "reading {} (is {} a pool directory made by `raidcore create` or `raidcore-sim \
         create`?)",
        p.display(),
        dir.display()
    )))?;
    serde_json::from_str(&text)
        .map_err(|e| DirError::Invalid(format!("{}: not a valid description: {e}", p.display())))
}

/// Writes the description of the pool in `dir`.
pub fn write_meta(dir: &Path, meta: &DirMeta) -> Result<(), DirError> {
    let p = dir.join(META_FILE);
    let mut text = serde_json::to_string_pretty(meta)
        .map_err(|e| DirError::Invalid(format!("encoding {META_FILE}: {e}")))?;
    text.push('\n');
    fs::write(&p, text).map_err(io_err(format!("writing {}", p.display())))
}
