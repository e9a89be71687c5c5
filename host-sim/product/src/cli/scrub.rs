//! `scrub`: check every used stripe's parity and every extent's checksum, repairing from
//! redundancy; exit status 1 if something could not be repaired.

use std::path::PathBuf;

use clap::Args;

use super::common::{maintain, open, print_status};
use super::console::{Console, Failure};
use crate::dir::Members;

/// Options of `scrub`.
#[derive(Debug, Args)]
pub struct ScrubArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Print the status afterwards as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Scrubs the pool to the end, prints the status and closes the pool.
pub fn run<M: Members>(a: &ScrubArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let mut dp = open::<M>(&a.dir, members, con)?;
    dp.pool.start_scrub();
    maintain(&mut dp, "scrub")?;
    print_status(&mut dp, a.json, con);
    let st = dp.pool.status();
    dp.close()?;
    if st.scrub_unrepairable > 0 {
        return Err(Failure::Verify(format!(
            "scrub found {} blocks it could not repair",
            st.scrub_unrepairable
        )));
    }
    Ok(())
}
