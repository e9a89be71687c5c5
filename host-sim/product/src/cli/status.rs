//! `status`: health, members, rebuild or scrub progress, LUNs (like `zpool status`).

use std::path::PathBuf;

use clap::Args;

use super::common::{open, print_status};
use super::console::{Console, Failure};
use crate::dir::Members;

/// Options of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Opens the pool, prints its status and closes it.
pub fn run<M: Members>(a: &StatusArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let mut dp = open::<M>(&a.dir, members, con)?;
    print_status(&mut dp, a.json, con);
    dp.close()?;
    Ok(())
}
