//! `status`: health, members, rebuild or scrub progress, LUNs (like `zpool status`). Exit
//! status 0 online, 1 degraded, 2 faulted or suspended (`raidcore`; see
//! [`super::console::exit`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::common::{fail_json, open_failure, present, rewind_hint};
use super::console::{Console, Failure, exit};
use crate::control::client::Client;
use crate::control::{Reply, Request};
use crate::dir::Members;
use crate::dir::look::look;
use crate::ops;

/// Options of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Print the status again every `--interval` seconds until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between two statuses of `--watch`.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// With `--watch`: stop after this many statuses (0: never).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
}

/// The status from the server that holds the pool in `dir`, or, when none does, a read-only
/// look at the stopped pool ([`look`]: nothing is written).
fn ask(dir: &Path) -> Result<Reply, Failure> {
    if let Some(mut c) = Client::connect(dir) {
        return c
            .call(&Request::Status)
            .map_err(|e| Failure::Error(e.to_string()));
    }
    let l = look(dir).map_err(|e| open_failure(dir, &e, false))?;
    let mut reply = Reply::done();
    reply.status = Some(l.status);
    if let Some(e) = l.error {
        reply.ok = false;
        reply.error = ops::error_reply(&e).error;
        if let (Some(err), Some(hint)) = (reply.error.as_mut(), rewind_hint(dir, &e, false)) {
            err.message.push_str(&hint);
        }
    }
    Ok(reply)
}

/// Prints the status (through the server if one holds the pool, else read-only), as often as
/// asked; the exit status tells the pool's health. `members` is unused: a stopped pool's
/// status reads the image files themselves.
pub fn run<M: Members>(
    a: &StatusArgs,
    members: &(impl Into<M> + Clone),
    con: Console,
) -> Result<(), Failure> {
    let _ = members;
    if !(a.interval > 0.0 && a.interval < 86_400.0) {
        return Err(fail_json(
            Failure::Usage("--interval must be in (0, 86400) seconds".into()),
            a.json,
            con,
        ));
    }
    let mut shown = 0u64;
    loop {
        let reply = ask(&a.dir).map_err(|f| fail_json(f, a.json, con))?;
        if let Err(f) = present(&reply, a.json, con) {
            // A pool that cannot be opened is reported (above) as faulted.
            return Err(match f {
                Failure::Error(m) if con.scripted && reply.status.is_some() => {
                    con.note(&m);
                    Failure::Health(exit::FAULTED)
                }
                f => f,
            });
        }
        shown += 1;
        let health = reply
            .status
            .as_ref()
            .map_or("online", |s| s.health.as_str());
        let code = match health {
            "online" => exit::OK,
            "degraded" => exit::DEGRADED,
            _ => exit::FAULTED,
        };
        if !a.watch || (a.count > 0 && shown >= a.count) {
            return if code == exit::OK {
                Ok(())
            } else {
                Err(Failure::Health(code))
            };
        }
        if !a.json {
            con.print("\n");
        }
        std::thread::sleep(Duration::from_secs_f64(a.interval));
    }
}
