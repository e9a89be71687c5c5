//! What the pool commands share: opening a pool with the default policy, printing its status,
//! running its rebuild or scrub with a progress bar.

use std::path::Path;

use raidcore::pool::PoolConfig;

use super::console::{Console, Failure, bar};
use crate::dir::{Members, PoolDir};

/// Opens the pool in `dir` with the default run-time policy, `members` making each image a
/// member, and warns about what import could not rebuild.
pub fn open<M: Members>(
    dir: &Path,
    members: impl Into<M>,
    con: Console,
) -> Result<PoolDir<M>, Failure> {
    let dp = PoolDir::open(dir, PoolConfig::default(), members)?;
    warn_lost_items(&dp, con);
    Ok(dp)
}

/// Tells the operator when import kept log items that no redundancy could rebuild (more faults
/// than the level tolerates): their blocks read as errors until rewritten.
pub fn warn_lost_items<M: Members>(dp: &PoolDir<M>, con: Console) {
    let lost = dp.import.items_lost;
    if lost > 0 {
        con.warn(&format!(
            "import found {lost} log item(s) written before the last flush that no redundancy \
             could rebuild; their blocks read as errors until rewritten"
        ));
    }
}

/// Prints the pool's status on stdout, as text or (`json`) JSON.
pub fn print_status<M: Members>(dp: &mut PoolDir<M>, json: bool, con: Console) {
    let st = dp.status();
    con.print(&if json { st.to_json() } else { st.to_text() });
}

/// Runs the pool's rebuild or scrub to the end, with a progress bar labelled `what`.
pub fn maintain<M: Members>(dp: &mut PoolDir<M>, what: &str) -> Result<(), Failure> {
    let pb = bar(1, what);
    dp.run_maintenance(|done, total| {
        pb.set_length(total.max(1));
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    Ok(())
}
