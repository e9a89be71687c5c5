//! The `raidcore` command line (clap derive): pools on disk images in a directory.
//!
//! One module per command, each with its options (`…Args`) and a `run` generic over how images
//! become members ([`Members`](crate::dir::Members)), so `raidcore-sim` runs the very same
//! commands over its simulated hardware. A new command is a module here and a variant of
//! [`Command`]. [`console`] holds what every command shares about output and exit status;
//! [`common`] what the pool commands share.
//!
//! Every pool command reaches the pool through the control channel of the server that holds
//! it ([`crate::control`]), or opens the pool itself when no server does; the output is the
//! same either way.
//!
//! Exit status of `raidcore` ([`console::exit`]): 0 success (`status`: online); `status` 1
//! degraded, 2 faulted or suspended; 3 a scrub left damage it could not repair; 4 refused (the
//! request does not fit the pool, or this core cannot do it yet; nothing changed); 5 the pool
//! is in use by a command still running; 6 an I/O error or a pool that cannot be opened; 64
//! bad arguments. (`raidcore-sim` keeps 0 success, 1 verification failed, 2 any failure.)
//! Progress bars go to stderr and are hidden when stderr is not a terminal; results go to
//! stdout, as a human table or, with `--json`, as one JSON object (errors too:
//! `{"error": {"kind", "message"}}`).

pub mod common;
pub mod console;
pub mod create;
pub mod fail;
pub mod import;
pub mod logdev;
pub mod lun;
pub mod replace;
pub mod scrub;
pub mod serve;
pub mod simple;
pub mod spare;
pub mod status;
pub mod values;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
    /// Open a stopped pool and close it again, saying what import did; `--force` brings back
    /// a pool with more members failed than it tolerates (as `mdadm --assemble --force`).
    Import(import::ImportArgs),
    /// Fail a member disk by hand (a hot spare takes over if there is one).
    Fail(fail::FailArgs),
    /// Put a blank image into a failed member slot and rebuild onto it.
    Replace(replace::ReplaceArgs),
    /// Check every used stripe's parity and every extent's checksum, repairing from redundancy.
    Scrub(scrub::ScrubArgs),
    /// Bring a member that came back online again.
    Online(simple::OnlineArgs),
    /// Create, delete, resize or list LUNs.
    Lun(lun::LunArgs),
    /// Add or remove hot spares.
    Spare(spare::SpareArgs),
    /// Add or remove the pool's dedicated intent-log device (a SLOG).
    Log(logdev::LogArgs),
    /// Print the pool's event log.
    Events(simple::EventsArgs),
    /// Zero the members' error counters (as `zpool clear`).
    Clear(simple::PoolArgs),
    /// Resume a suspended pool once the cause is fixed.
    Resume(simple::PoolArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff, for `man -l -`) on stdout.
    Man,
}

/// How `raidcore` speaks: its name on every message.
pub const RAIDCORE: Console = Console {
    name: "raidcore",
    scripted: true,
};

/// Parses the command line and runs it; the exit status to return.
#[must_use]
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
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

/// Prints clap's message for `e` (help and version on stdout, exit 0; a usage error on
/// stderr, exit [`console::exit::USAGE`], and with `--json` among the arguments also as a JSON
/// error on stdout, as every other error is).
#[must_use]
pub fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    if std::env::args_os().any(|a| a == "--json") {
        // The message is clap's first paragraph (the usage line and hint follow it).
        let text = e.to_string();
        let para: Vec<&str> = text
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect();
        let joined = para.join(" ");
        let message = joined.strip_prefix("error: ").unwrap_or(&joined);
        let v = serde_json::json!({"error": {"kind": "usage", "message": message}});
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    ExitCode::from(console::exit::USAGE)
}

/// Runs a parsed command on the image files as they are ([`FileMembers`]).
pub fn run(cmd: Command, con: Console) -> Result<(), Failure> {
    let files = FileMembers::default();
    match cmd {
        Command::Create(a) => create::run::<FileMembers>(&a, files, con),
        Command::Status(a) => status::run::<FileMembers>(&a, &files, con),
        Command::Serve(a) => serve::run(&a, |sync_on_flush| FileMembers { sync_on_flush }, con),
        Command::Import(a) => import::run::<FileMembers>(&a, files, con),
        Command::Fail(a) => fail::run::<FileMembers>(&a, files, con),
        Command::Replace(a) => replace::run::<FileMembers>(&a, files, con),
        Command::Scrub(a) => scrub::run::<FileMembers>(&a, files, con),
        Command::Online(a) => simple::online::<FileMembers>(&a, files, con),
        Command::Lun(a) => lun::run::<FileMembers>(&a, files, con),
        Command::Spare(a) => spare::run::<FileMembers>(&a, files, con),
        Command::Log(a) => logdev::run::<FileMembers>(&a, files, con),
        Command::Events(a) => simple::events::<FileMembers>(&a, files, con),
        Command::Clear(a) => simple::clear::<FileMembers>(&a, files, con),
        Command::Resume(a) => simple::resume::<FileMembers>(&a, files, con),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "raidcore", &mut out);
            con.print(&String::from_utf8_lossy(&out));
            Ok(())
        }
        Command::Man => {
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| Failure::Error(e.to_string()))?;
            con.print(&String::from_utf8_lossy(&out));
            Ok(())
        }
    }
}
