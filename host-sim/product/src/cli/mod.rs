//! The `raidcore` command line (clap derive): pools on disk images in a directory.
//!
//! One module per command, each with its options (`…Args`) and a `run` generic over how images
//! become members ([`Members`](crate::dir::Members)), so `raidcore-sim` runs the very same
//! commands over its simulated hardware. A new command is a module here and a variant of
//! [`Command`]. [`console`] holds what every command shares about output and exit status;
//! [`common`] what the pool commands share.
//!
//! Exit status: 0 on success; 1 when a verification failed (a scrub found damage it could not
//! repair); 2 for bad usage and errors. Progress bars go to stderr and are hidden when stderr
//! is not a terminal; results go to stdout, as a human table or, with `--json`, as one JSON
//! object.

pub mod common;
pub mod console;
pub mod create;
pub mod fail;
pub mod replace;
pub mod scrub;
pub mod serve;
pub mod status;
pub mod values;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use console::{Console, Failure};

use crate::dir::FileMembers;

/// raidcore: redundant, compressed LUNs on disk images, exported over NBD.
#[derive(Debug, Parser)]
#[command(name = "raidcore", version, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub cmd: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a pool on new disk images disk0.img, disk1.img, … in a directory.
    Create(create::CreateArgs),
    /// Show pool health, disks, rebuild/scrub progress and LUNs (like `zpool status`).
    Status(status::StatusArgs),
    /// Export the pool's LUNs over NBD.
    Serve(serve::ServeArgs),
    /// Fail a member disk by hand (a hot spare takes over if there is one).
    Fail(fail::FailArgs),
    /// Put a blank image into a failed member slot and rebuild onto it.
    Replace(replace::ReplaceArgs),
    /// Check every used stripe's parity and every extent's checksum, repairing from redundancy.
    Scrub(scrub::ScrubArgs),
}

/// How `raidcore` speaks: its name on every message.
pub const RAIDCORE: Console = Console { name: "raidcore" };

/// Parses the command line and runs it; the exit status to return.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    RAIDCORE.init_log(
        "RAIDCORE_LOG",
        if matches!(cli.cmd, Command::Serve(_)) {
            log::LevelFilter::Info
        } else {
            log::LevelFilter::Warn
        },
    );
    RAIDCORE.exit(run(cli.cmd, RAIDCORE))
}

/// Runs a parsed command on the image files as they are ([`FileMembers`]).
pub fn run(cmd: Command, con: Console) -> Result<(), Failure> {
    let files = FileMembers::default();
    match cmd {
        Command::Create(a) => create::run::<FileMembers>(&a, files, con),
        Command::Status(a) => status::run::<FileMembers>(&a, files, con),
        Command::Serve(a) => serve::run(&a, |sync_on_flush| FileMembers { sync_on_flush }, con),
        Command::Fail(a) => fail::run::<FileMembers>(&a, files, con),
        Command::Replace(a) => replace::run::<FileMembers>(&a, files, con),
        Command::Scrub(a) => scrub::run::<FileMembers>(&a, files, con),
    }
}
