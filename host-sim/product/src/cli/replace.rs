//! `replace`: a blank image into a failed member slot, rebuilt.

use std::path::PathBuf;

use clap::Args;

use super::common::{Wait, request};
use super::console::{Console, Failure};
use crate::control::Request;
use crate::dir::Members;

/// Options of `replace`.
#[derive(Debug, Args)]
pub struct ReplaceArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Failed member slot to replace.
    #[arg(long)]
    pub disk: usize,
    /// Use this image of the pool directory (`disk<N>.img`, made if missing, blank if it
    /// exists) and keep the failed image where it is (by default the failed image is renamed
    /// `…failed-g<generation>` and a new one takes its name).
    #[arg(long, value_name = "IMAGE")]
    pub with: Option<String>,
    /// Start the rebuild and return (a server runs it in the background; a stopped pool
    /// rebuilds whenever it is served).
    #[arg(long)]
    pub no_wait: bool,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Replaces the member, waits for the rebuild unless told not to, prints the status.
pub fn run<M: Members>(
    a: &ReplaceArgs,
    members: impl Into<M>,
    con: Console,
) -> Result<(), Failure> {
    let req = Request::Replace {
        disk: a.disk,
        with: a.with.clone(),
    };
    let wait = if a.no_wait { Wait::No } else { Wait::Rebuild };
    request::<M>(&a.dir, members, &req, wait, a.json, con).map(drop)
}
