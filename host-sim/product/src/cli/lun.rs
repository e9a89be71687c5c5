//! `lun create|delete|resize|list`: the LUNs of a pool (each an NBD export named as the LUN;
//! a server offers a new LUN to new clients at once).

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{Wait, call, fail_json, present};
use super::console::{Console, Failure};
use super::values::size_arg;
use crate::control::Request;
use crate::dir::Members;
use crate::units::format_bytes;

/// Options of `lun`.
#[derive(Debug, Args)]
pub struct LunArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LunAction,
}

/// The `lun` subcommands.
#[derive(Debug, Subcommand)]
pub enum LunAction {
    /// Create a LUN (thin: it takes space only as it is written).
    Create {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// Its name (1 to 24 bytes; the NBD export name).
        #[arg(long)]
        name: String,
        /// Its size (K/M/G/T suffixes, binary; a multiple of 4 KiB).
        #[arg(long, value_parser = size_arg)]
        size: u64,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a LUN and free its space (its data is gone).
    Delete {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// Its name.
        #[arg(long)]
        name: String,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Change a LUN's size: growing adds blocks that read as zeros, shrinking discards the
    /// data past the new end.
    Resize {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// Its name.
        #[arg(long)]
        name: String,
        /// The new size.
        #[arg(long, value_parser = size_arg)]
        size: u64,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the LUNs.
    List {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the `lun` subcommand.
pub fn run<M: Members>(a: &LunArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let (dir, json, req) = match &a.action {
        LunAction::Create {
            dir,
            name,
            size,
            json,
        } => (
            dir,
            *json,
            Request::LunCreate {
                name: name.clone(),
                size_bytes: *size,
            },
        ),
        LunAction::Delete { dir, name, json } => {
            (dir, *json, Request::LunDelete { name: name.clone() })
        }
        LunAction::Resize {
            dir,
            name,
            size,
            json,
        } => (
            dir,
            *json,
            Request::LunResize {
                name: name.clone(),
                size_bytes: *size,
            },
        ),
        LunAction::List { dir, json } => (dir, *json, Request::LunList),
    };
    let reply =
        call::<M>(dir, members, &req, Wait::No, con).map_err(|f| fail_json(f, json, con))?;
    present(&reply, json, con)?;
    if let Some(luns) = &reply.luns {
        if json {
            let mut s = serde_json::to_string_pretty(luns).unwrap_or_default();
            s.push('\n');
            con.print(&s);
        } else {
            let mut s = format!(
                "{:<4} {:<24} {:>11} {:>11} {:>11}\n",
                "LUN", "NAME", "SIZE", "LOGICAL", "PHYSICAL"
            );
            for l in luns {
                let _ = writeln!(
                    s,
                    "{:<4} {:<24} {:>11} {:>11} {:>11}",
                    l.id,
                    l.name,
                    format_bytes(l.size_bytes),
                    format_bytes(l.logical_bytes),
                    format_bytes(l.physical_bytes)
                );
            }
            con.print(&s);
        }
    }
    Ok(())
}
