//! `scrub [start|pause|resume|cancel]`: check every used stripe's parity and every extent's
//! checksum, repairing from redundancy; exit status 3 (1 for `raidcore-sim`) if something
//! could not be repaired.

use std::path::PathBuf;

use clap::Args;

use super::common::{Wait, request};
use super::console::{Console, Failure};
use crate::control::{Request, ScrubAction};
use crate::dir::Members;

/// Options of `scrub`.
#[derive(Debug, Args)]
pub struct ScrubArgs {
    /// What to do: start (the default), pause, resume or cancel.
    #[arg(value_enum, default_value = "start")]
    pub action: ScrubAction,
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// `start`/`resume`: return at once (a server runs the scrub in the background).
    #[arg(long)]
    pub no_wait: bool,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Starts (or pauses, resumes) the scrub, waits for its end unless told not to, prints the
/// status.
pub fn run<M: Members>(a: &ScrubArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let req = Request::Scrub { action: a.action };
    let runs = matches!(a.action, ScrubAction::Start | ScrubAction::Resume);
    let wait = if runs && !a.no_wait {
        Wait::Scrub
    } else {
        Wait::No
    };
    let reply = request::<M>(&a.dir, members, &req, wait, a.json, con)?;
    match reply.status {
        Some(st) if wait == Wait::Scrub && st.scrub_unrepairable_blocks > 0 => {
            Err(Failure::Verify(format!(
                "scrub found {} blocks it could not repair",
                st.scrub_unrepairable_blocks
            )))
        }
        _ => Ok(()),
    }
}
