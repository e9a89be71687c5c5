//! `replace`: a blank image into a failed member slot, rebuilt.

use std::path::PathBuf;

use clap::Args;

use super::common::{maintain, open, print_status};
use super::console::{Console, Failure};
use crate::dir::{Members, image_name};

/// Options of `replace`.
#[derive(Debug, Args)]
pub struct ReplaceArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Failed member slot to replace.
    #[arg(long)]
    pub disk: usize,
    /// Start the rebuild but do not run it (it resumes whenever the pool is used).
    #[arg(long)]
    pub no_wait: bool,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Replaces the member, runs the rebuild unless told not to, prints the status and closes the
/// pool.
pub fn run<M: Members>(
    a: &ReplaceArgs,
    members: impl Into<M>,
    con: Console,
) -> Result<(), Failure> {
    let mut dp = open::<M>(&a.dir, members, con)?;
    let n = dp.replace(a.disk)?;
    con.note(&format!("disk {} is now {}", a.disk, image_name(n)));
    if !a.no_wait {
        maintain(&mut dp, "rebuild")?;
    }
    print_status(&mut dp, a.json, con);
    dp.close()?;
    Ok(())
}
