//! The small pool commands: `events`, `clear`, `online`, `resume`.

use std::path::PathBuf;

use clap::Args;

use super::common::{Wait, call, fail_json, present, request};
use super::console::{Console, Failure};
use crate::control::Request;
use crate::dir::Members;

/// Options of `events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Only the newest N events.
    #[arg(long)]
    pub last: Option<usize>,
    /// Print JSON (an array of {time, severity, message}).
    #[arg(long)]
    pub json: bool,
}

/// Prints the pool's event log.
pub fn events<M: Members>(
    a: &EventsArgs,
    members: impl Into<M>,
    con: Console,
) -> Result<(), Failure> {
    let req = Request::Events { last: a.last };
    let reply =
        call::<M>(&a.dir, members, &req, Wait::No, con).map_err(|f| fail_json(f, a.json, con))?;
    present(&reply, a.json, con)?;
    let events = reply.events.unwrap_or_default();
    if a.json {
        let mut s = serde_json::to_string_pretty(&events).unwrap_or_default();
        s.push('\n');
        con.print(&s);
    } else {
        let mut s = String::new();
        for e in &events {
            s.push_str(&e.line());
            s.push('\n');
        }
        con.print(&s);
    }
    Ok(())
}

/// Options of `clear`, `resume` (a pool and the output form).
#[derive(Debug, Args)]
pub struct PoolArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Options of `online`.
#[derive(Debug, Args)]
pub struct OnlineArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Member slot to bring back.
    #[arg(long)]
    pub disk: usize,
    /// Return once the member is back, without waiting for its resync.
    #[arg(long)]
    pub no_wait: bool,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `clear`: zeroes the error counters (as `zpool clear`).
pub fn clear<M: Members>(a: &PoolArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    request::<M>(&a.dir, members, &Request::Clear, Wait::No, a.json, con).map(drop)
}

/// `resume`: resumes a suspended pool.
pub fn resume<M: Members>(
    a: &PoolArgs,
    members: impl Into<M>,
    con: Console,
) -> Result<(), Failure> {
    request::<M>(&a.dir, members, &Request::Resume, Wait::No, a.json, con).map(drop)
}

/// `online`: brings a failed member back with the disk that left it, and (unless
/// `--no-wait`) waits for the resync of what it missed.
pub fn online<M: Members>(
    a: &OnlineArgs,
    members: impl Into<M>,
    con: Console,
) -> Result<(), Failure> {
    let req = Request::Online { disk: a.disk };
    let wait = if a.no_wait { Wait::No } else { Wait::Rebuild };
    request::<M>(&a.dir, members, &req, wait, a.json, con).map(drop)
}
