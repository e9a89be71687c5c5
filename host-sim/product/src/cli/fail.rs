//! `fail`: fail a member disk by hand; a hot spare takes over if there is one.

use std::path::PathBuf;

use clap::Args;

use super::common::{Wait, request};
use super::console::{Console, Failure};
use crate::control::Request;
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
    /// Wait until the rebuild onto the hot spare has finished.
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

/// Fails the member (through the server if one holds the pool), waits for the rebuild if
/// asked, prints the status.
pub fn run<M: Members>(a: &FailArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let req = Request::Fail {
        disk: a.disk,
        force: a.force,
    };
    let wait = if a.wait { Wait::Rebuild } else { Wait::No };
    request::<M>(&a.dir, members, &req, wait, a.json, con).map(drop)
}
