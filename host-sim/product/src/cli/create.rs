//! `create`: a pool on new disk images `disk0.img`, `disk1.img`, … in a directory.

use std::path::PathBuf;

use clap::Args;
use raidcore::pool::PoolConfig;

use super::common::{dir_failure, fail_json, print_status};
use super::console::{Console, Failure};
use super::values::{block_size, on_off, parse_level, size_arg, strip_bytes};
use crate::dir::create::max_segments_for;
use crate::dir::{CreateOptions, Members, PoolDir};

/// Options of `create`.
#[allow(clippy::struct_excessive_bools)] // command-line switches
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The pool directory (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// RAID level: raid0, raid1, raid10, raid5 or raid6.
    #[arg(long, value_parser = parse_level)]
    pub level: raidcore::raid::Level,
    /// Member disks.
    #[arg(long)]
    pub disks: usize,
    /// Hot spares (numbered after the members).
    #[arg(long, default_value_t = 0)]
    pub spares: usize,
    /// Size of each disk image (K/M/G/T suffixes, binary).
    #[arg(long, value_parser = size_arg)]
    pub disk_size: u64,
    /// Strip (chunk) size.
    #[arg(long, value_parser = size_arg, default_value = "64K")]
    pub strip_size: u64,
    /// LUNs to create (lun0, lun1, …; 0 for none: `lun create` adds them later).
    #[arg(long, default_value_t = 1)]
    pub luns: usize,
    /// Size of each LUN.
    #[arg(long, value_parser = size_arg, default_value = "16M")]
    pub lun_size: u64,
    /// Block size of the images (512 or 4096).
    #[arg(long, default_value_t = 512)]
    pub block_size: usize,
    /// LZ4-compress extents (kept only where it saves at least 12.5 %): `on` or `off`. Fixed
    /// when the pool is made.
    #[arg(long, value_parser = on_off, default_value = "on", action = clap::ArgAction::Set)]
    pub compression: bool,
    /// Replace a pool that is there already.
    #[arg(long)]
    pub force: bool,
    /// Make sparse images, allocated as the pool writes (by default the images are allocated
    /// whole, so a full host file system shows at creation, not under the pool's writes).
    #[arg(long)]
    pub sparse: bool,
    /// A dedicated intent-log device (a SLOG): a file on a faster device than the images
    /// (made if missing; an existing one must hold no raidcore label). Flushes and FUA writes
    /// complete once it holds their data; stripes are still written whole to the members.
    #[arg(long)]
    pub log_device: Option<PathBuf>,
    /// Size of the log device file when it is made (at least a member's intent-log ring, 1 MiB
    /// with the default settings; its ring fills it up to 16 MiB).
    #[arg(long, value_parser = size_arg, default_value = "64M")]
    pub log_device_size: u64,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

impl CreateArgs {
    /// The layout these options ask for, with a new random pool UUID.
    pub fn options(&self) -> Result<CreateOptions, Failure> {
        let mut uuid = [0u8; 16];
        rand::fill(&mut uuid);
        Ok(CreateOptions {
            disks: self.disks,
            spares: self.spares,
            disk_bytes: self.disk_size,
            block_size: block_size(self.block_size)?,
            config: PoolConfig {
                level: self.level,
                strip_bytes: strip_bytes(self.strip_size)?,
                max_segments: max_segments_for(self.disks, self.disk_size),
                compression: self.compression,
                ..PoolConfig::default()
            },
            luns: self.luns,
            lun_bytes: self.lun_size,
            uuid,
            overwrite: self.force,
            sparse: self.sparse,
        })
    }
}

/// Creates the pool (with its log device, if asked), prints its status and closes it.
pub fn run<M: Members>(a: &CreateArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    run_with_log_model(a, members, None, con)
}

/// [`run`], the log device timed by the simulator's `log_model` (`None`: the members').
pub fn run_with_log_model<M: Members>(
    a: &CreateArgs,
    members: impl Into<M>,
    log_model: Option<&str>,
    con: Console,
) -> Result<(), Failure> {
    let opts = a.options().map_err(|f| fail_json(f, a.json, con))?;
    if let Some(path) = &a.log_device {
        crate::dir::logdev::check_log_device_path(&a.dir, path)
            .map_err(|e| fail_json(dir_failure(&e), a.json, con))?;
    }
    let mut dp = PoolDir::<M>::create(&a.dir, &opts, members)
        .map_err(|e| fail_json(dir_failure(&e), a.json, con))?;
    if let Some(path) = &a.log_device
        && let Err(e) = dp.add_log_device(path, Some(a.log_device_size), log_model)
    {
        // The pool stands, without the device: say so, and close it cleanly.
        let _ = dp.close();
        let f = Failure::Error(format!(
            "the log device {}: {e}; the pool in {} was created without one (`raidcore log \
             add --dir {} --path FILE` adds one)",
            path.display(),
            a.dir.display(),
            a.dir.display()
        ));
        return Err(fail_json(f, a.json, con));
    }
    print_status(&mut dp, a.json, con);
    dp.close().map_err(|e| dir_failure(&e))?;
    Ok(())
}
