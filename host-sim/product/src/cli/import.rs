//! `import`: opens a stopped pool, says what import did, and closes it again, so a pool that
//! needs a forced import can be brought back (as `mdadm --assemble --force` or `zpool import
//! -F`) and then served as usual; `--read-only` shows what an import would assemble and
//! writes nothing (from the last checkpoint: whether the log needs `--rewind` shows only at
//! the import itself, which then fails naming it). `serve --read-only --force` runs the
//! whole import in memory and serves the result read-only.

use std::path::PathBuf;

use clap::Args;
use raidcore::pool::PoolConfig;

use super::common::{self, dir_failure, fail_json, present, report_import};
use super::console::{Console, Failure};
use crate::control::{ImportSummary, Reply};
use crate::dir::look::look_with;
use crate::dir::{DirError, Members, PoolDir};
use crate::ops;

/// Options of `import`.
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // command-line switches
pub struct ImportArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// When more members are missing than the level tolerates, take back failed members whose
    /// images are in the directory and whose slots never went to another disk (newest label
    /// first). What those members missed reads as errors, never as other data; a scrub starts.
    /// The next open needs no force.
    #[arg(long)]
    pub force: bool,
    /// Rewind (as `zpool import -F`): cut a log that is unreadable before the last flush's end
    /// there instead of refusing the pool. The writes after the cut are lost, and the blocks
    /// they wrote read their OLDER contents, not errors. Only when no pool at all is worse.
    /// (A read-only look replays no log, so it has nothing to rewind.)
    #[arg(long, conflicts_with = "read_only")]
    pub rewind: bool,
    /// Write nothing: show the pool as the import would assemble it, as its last checkpoint
    /// records it (writes since are not replayed). `serve --read-only --force` serves its
    /// data that way, writing nothing either.
    #[arg(long)]
    pub read_only: bool,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `import` (see the module docs); the exit status tells the pool's health afterwards.
pub fn run<M: Members>(a: &ImportArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    if a.read_only {
        return read_only(a, con);
    }
    let opened = PoolDir::<M>::open_with(&a.dir, PoolConfig::default(), members, a.force, a.rewind);
    let mut dp = opened.map_err(|e| fail_json(open_failure(&e, a), a.json, con))?;
    report_import(&mut dp, con);
    let mut reply = Reply::done();
    reply.status = Some(dp.status());
    reply.import = Some(ImportSummary::of(&dp.import));
    if let Err(e) = dp.close() {
        reply.ok = false;
        reply.error = ops::error_reply(&e).error;
    }
    present(&reply, a.json, con)
}

/// The failure of import `a`; one a rewind would open names the same command with `--rewind`.
fn open_failure(e: &DirError, a: &ImportArgs) -> Failure {
    if a.rewind {
        dir_failure(e)
    } else {
        common::open_failure(&a.dir, e, a.force)
    }
}

/// `import --read-only`: the status of the members as the import would assemble them.
fn read_only(a: &ImportArgs, con: Console) -> Result<(), Failure> {
    let l = look_with(&a.dir, a.force).map_err(|e| fail_json(dir_failure(&e), a.json, con))?;
    if !l.forced.is_empty() {
        let slots: Vec<String> = l.forced.iter().map(usize::to_string).collect();
        con.note(&format!(
            "read-only: a forced import would take the failed member(s) of slot(s) {} back; \
             nothing was written (run without --read-only to import)",
            slots.join(", ")
        ));
    }
    if !l.behind.is_empty() {
        let slots: Vec<String> = l.behind.iter().map(usize::to_string).collect();
        con.note(&format!(
            "read-only: the image(s) of slot(s) {} hold older contents than the rest of the \
             pool (an older copy put back?); the import will resync what they missed",
            slots.join(", ")
        ));
    }
    let mut reply = Reply::done();
    reply.status = Some(l.status);
    reply.import = Some(ImportSummary {
        forced: l.forced.iter().map(|&s| s as u8).collect(),
        behind: l.behind.iter().map(|&s| s as u8).collect(),
        root_gen: l.root_gen,
        read_only: true,
        ..ImportSummary::default()
    });
    if let Some(e) = l.error {
        reply.ok = false;
        reply.error = ops::error_reply(&e).error;
    }
    present(&reply, a.json, con)
}
