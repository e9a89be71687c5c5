//! `log add|remove`: the pool's dedicated intent-log device (a SLOG).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{Wait, request};
use super::console::{Console, Failure};
use super::values::size_arg;
use crate::control::Request;
use crate::dir::Members;

/// Options of `log`.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LogAction,
}

/// The `log` subcommands.
#[derive(Debug, Subcommand)]
pub enum LogAction {
    /// Give the pool a log device: flushes and FUA writes then complete once it holds their
    /// data (stripes are still written whole to the members). Replaces one that failed.
    Add {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// The device's file, on a faster device than the images (made if missing; an
        /// existing one must hold no raidcore label).
        #[arg(long)]
        path: PathBuf,
        /// Its size when made.
        #[arg(long, value_parser = size_arg, default_value = "64M")]
        size: u64,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Take the log device out (what it holds is logged on the members first; its file is
    /// kept, labels erased).
    Remove {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the `log` subcommand.
pub fn run<M: Members>(a: &LogArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let (dir, json, req) = match &a.action {
        LogAction::Add {
            dir,
            path,
            size,
            json,
        } => (
            dir,
            *json,
            Request::LogAdd {
                // A server resolves paths against its own directory: send it whole.
                path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                size_bytes: *size,
            },
        ),
        LogAction::Remove { dir, json } => (dir, *json, Request::LogRemove),
    };
    request::<M>(dir, members, &req, Wait::No, json, con).map(drop)
}
