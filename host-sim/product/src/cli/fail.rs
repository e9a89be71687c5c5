//! `fail`: fail a member disk by hand; a hot spare takes over if there is one.

use std::path::PathBuf;

use clap::Args;

use super::common::{maintain, open, print_status};
use super::console::{Console, Failure};
use crate::dir::Members;

/// Options of `fail`.
#[derive(Debug, Args)]
pub struct FailArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Member slot to fail.
    #[arg(long)]
    pub disk: usize,
    /// Run the rebuild onto the hot spare to the end before returning.
    #[arg(long)]
    pub wait: bool,
    /// Fail it even if that leaves more members out of sync than the level tolerates (the
    /// pool's data becomes unreadable).
    #[arg(long)]
    pub force: bool,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Fails the member, runs the rebuild if asked, prints the status and closes the pool.
pub fn run<M: Members>(a: &FailArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let mut dp = open::<M>(&a.dir, members, con)?;
    dp.fail(a.disk, a.force)?;
    if a.wait {
        maintain(&mut dp, "rebuild")?;
    }
    print_status(&mut dp, a.json, con);
    dp.close()?;
    Ok(())
}
