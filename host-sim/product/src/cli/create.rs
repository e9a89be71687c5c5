//! `create`: a pool on new disk images `disk0.img`, `disk1.img`, … in a directory.

use std::path::PathBuf;

use clap::Args;
use raidcore::pool::PoolConfig;

use super::common::print_status;
use super::console::{Console, Failure};
use super::values::{block_size, parse_level, size_arg, strip_bytes};
use crate::dir::create::max_segments_for;
use crate::dir::{CreateOptions, Members, PoolDir};

/// Options of `create`.
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
    /// LUNs to create (lun0, lun1, …).
    #[arg(long, default_value_t = 0)]
    pub luns: usize,
    /// Size of each LUN.
    #[arg(long, value_parser = size_arg, default_value = "16M")]
    pub lun_size: u64,
    /// Block size of the images (512 or 4096).
    #[arg(long, default_value_t = 512)]
    pub block_size: usize,
    /// Replace a pool that is there already.
    #[arg(long)]
    pub force: bool,
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
                ..PoolConfig::default()
            },
            luns: self.luns,
            lun_bytes: self.lun_size,
            uuid,
            overwrite: self.force,
        })
    }
}

/// Creates the pool, prints its status and closes it.
pub fn run<M: Members>(a: &CreateArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let mut dp = PoolDir::<M>::create(&a.dir, &a.options()?, members)?;
    print_status(&mut dp, a.json, con);
    dp.close()?;
    Ok(())
}
