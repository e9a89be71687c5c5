//! What the pool commands share: reaching the pool (through the server that holds it, or by
//! opening it), waiting for a rebuild or scrub with a progress bar, and printing the answer
//! the same way either way.

use std::path::Path;
use std::time::Duration;

use raidcore::error::IoError;
use raidcore::pool::{OpenError, PoolConfig};

use super::console::{Console, Failure, bar};
use crate::control::client::Client;
use crate::control::{ErrorKind, Reply, Request};
use crate::dir::records::Severity;
use crate::dir::{DirError, Members, PoolDir};
use crate::ops;
use crate::status::DirStatus;

/// What a command waits for after its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Return at once.
    No,
    /// Until no rebuild is in progress.
    Rebuild,
    /// Until no scrub is in progress.
    Scrub,
}

impl Wait {
    fn label(self) -> &'static str {
        match self {
            Wait::Rebuild => "rebuild",
            Wait::Scrub | Wait::No => "scrub",
        }
    }

    /// Progress `(done, total)` of what is waited for, `None` once it is over.
    fn progress(self, st: &DirStatus) -> Option<(u64, u64)> {
        let p = match self {
            Wait::No => None,
            Wait::Rebuild => st.rebuild,
            Wait::Scrub => st.scrub,
        }?;
        Some((p.done, p.total))
    }
}

/// `e` as the failure of a command (its kind decides the exit status).
#[must_use]
pub fn dir_failure(e: &DirError) -> Failure {
    reply_failure(&ops::error_reply(e))
}

/// The failure a failed reply stands for.
#[must_use]
pub fn reply_failure(r: &Reply) -> Failure {
    let (kind, m) = r
        .error
        .as_ref()
        .map_or((ErrorKind::Failed, "failed".into()), |e| {
            (e.kind, e.message.clone())
        });
    match kind {
        ErrorKind::Refused | ErrorKind::Unsupported => Failure::Refused(m),
        ErrorKind::InUse => Failure::InUse(m),
        ErrorKind::Usage => Failure::Usage(m),
        ErrorKind::Failed => Failure::Error(m),
    }
}

/// What the failure `e` of opening the pool in `dir` (forced or not) adds when only a rewind
/// would open it (a log unreadable before the last flush's end, members taken back alone): the
/// import that does it.
#[must_use]
pub fn rewind_hint(dir: &Path, e: &DirError, force: bool) -> Option<String> {
    matches!(
        e,
        DirError::Open(OpenError::Io(IoError::LogLost { .. }) | OpenError::RewindNeeded)
    )
    .then(|| {
        let force = if force { " --force" } else { "" };
        format!(
            "; `raidcore import --dir {}{force} --rewind` opens the pool as it was then, losing \
             the writes made since (their blocks then read their older contents)",
            dir.display()
        )
    })
}

/// The failure of opening the pool in `dir` (forced or not), with the [`rewind_hint`].
#[must_use]
pub fn open_failure(dir: &Path, e: &DirError, force: bool) -> Failure {
    match (dir_failure(e), rewind_hint(dir, e, force)) {
        (Failure::Error(m), Some(hint)) => Failure::Error(m + &hint),
        (f, _) => f,
    }
}

/// Opens the pool in `dir` with the default run-time policy, `members` making each image a
/// member, and says what import recovered and could not.
pub fn open<M: Members>(
    dir: &Path,
    members: impl Into<M>,
    con: Console,
) -> Result<PoolDir<M>, Failure> {
    let mut dp = PoolDir::open(dir, PoolConfig::default(), members)
        .map_err(|e| open_failure(dir, &e, false))?;
    report_import(&mut dp, con);
    Ok(dp)
}

/// Tells the operator what import did after an unclean shutdown (log items replayed, intent
/// log records, stripes resynced), when it kept log items no redundancy could rebuild (more
/// faults than the level tolerates: their blocks read as errors until rewritten), and what a
/// forced import or a rewind did (members taken back, the pool served as they left it, the
/// log cut).
pub fn report_import<M: Members>(dp: &mut PoolDir<M>, con: Console) {
    let r = dp.import.clone();
    if r.log_device_missing {
        let m = "forced import without the log device: the flushes since the last stripe write \
                 that only it held are lost (their blocks read their older contents), and the \
                 pool records it failed"
            .to_string();
        con.warn(&m);
        dp.record_event(Severity::Error, m);
    } else if r.log_cut_at.is_none()
        && (r.items_replayed > 0 || r.zil_records > 0 || r.resynced_stripes > 0)
    {
        let m = format!(
            "the pool was not shut down cleanly: import replayed {} log item(s) written after \
             checkpoint {} and {} intent-log record(s), and resynced {} stripe(s) the crash had \
             left inconsistent; every flushed write is back",
            r.items_replayed, r.root_gen, r.zil_records, r.resynced_stripes
        );
        con.note(&m);
        dp.record_event(Severity::Warn, m);
    }
    let slots: Vec<String> = r.forced.iter().map(u8::to_string).collect();
    let slots = slots.join(", ");
    if r.rewound {
        let m = format!(
            "rewind: every member in sync was missing, so the pool is served as the failed \
             member(s) of slot(s) {slots} taken back left it: the writes made after that are \
             lost, and the blocks they wrote read their older contents"
        );
        con.warn(&m);
        dp.record_event(Severity::Error, m);
    } else if !r.forced.is_empty() {
        let m = format!(
            "forced import: took the failed member(s) of slot(s) {slots} back to assemble the \
             pool; what they missed reads as errors (never as other data) until rewritten, and \
             a scrub has started to repair what redundancy can"
        );
        con.warn(&m);
        dp.record_event(Severity::Warn, m);
    }
    if !r.behind.is_empty() {
        let slots: Vec<String> = r.behind.iter().map(u8::to_string).collect();
        let m = format!(
            "the image(s) of slot(s) {} hold older contents than the rest of the pool (an older \
             copy put back?): they missed writes, so they are resyncing what they missed, and \
             the pool has less redundancy until that is done",
            slots.join(", ")
        );
        con.warn(&m);
        dp.record_event(Severity::Warn, m);
    }
    if let Some(at) = r.log_cut_at {
        let m = format!(
            "rewind: the log was unreadable at address {at}, before the last flush's end, and \
             was cut there (import started from checkpoint {}): the writes acknowledged after \
             it are lost, and the blocks they wrote read their older contents",
            r.root_gen
        );
        con.warn(&m);
        dp.record_event(Severity::Error, m);
    }
    if r.map_pages_lost > 0 {
        let m = format!(
            "forced import: {} map page(s) under checkpoint {} cannot be read (they lay on \
             what the members taken back missed); the blocks they map read as errors until \
             rewritten. Unless this was one already, a rewind (`raidcore import --force \
             --rewind`) loads an older checkpoint whose map reads whole instead, serving the \
             writes after it that the log still holds",
            r.map_pages_lost, r.root_gen
        );
        con.warn(&m);
        dp.record_event(Severity::Error, m);
    }
    if r.items_lost > 0 {
        let m = format!(
            "import found {} log item(s) written before the last flush that no redundancy could \
             rebuild; their blocks read as errors until rewritten",
            r.items_lost
        );
        con.warn(&m);
        dp.record_event(Severity::Error, m);
    }
}

/// Sends `req` to the server holding the pool in `dir`, or, when none does, opens the pool,
/// runs it there ([`ops::execute`]) and closes the pool; then waits as `wait` says. The
/// answer is the same either way.
pub fn call<M: Members>(
    dir: &Path,
    members: impl Into<M>,
    req: &Request,
    wait: Wait,
    con: Console,
) -> Result<Reply, Failure> {
    if let Some(mut client) = Client::connect(dir) {
        let mut reply = client
            .call(req)
            .map_err(|e| Failure::Error(e.to_string()))?;
        if reply.ok && wait != Wait::No {
            reply.status = Some(wait_served(&mut client, wait)?);
        }
        return Ok(reply);
    }
    let mut dp = open::<M>(dir, members, con)?;
    let mut reply = ops::execute(&mut dp, req);
    if reply.ok && wait != Wait::No {
        maintain(&mut dp, wait)?;
        reply.status = Some(dp.status());
    }
    if let Err(e) = dp.close()
        && reply.ok
    {
        // What was done stands (and is printed); the close's failure decides the exit status.
        // (A request that failed already keeps its own error: the close's follows from it.)
        reply.ok = false;
        reply.error = ops::error_reply(&e).error;
    }
    Ok(reply)
}

/// Asks the server for the status until `wait` is over, with a progress bar; the last
/// status.
fn wait_served(client: &mut Client, wait: Wait) -> Result<DirStatus, Failure> {
    let pb = bar(1, wait.label());
    loop {
        let r = client
            .call(&Request::Status)
            .map_err(|e| Failure::Error(e.to_string()))?;
        let Some(st) = r.status.clone() else {
            return Err(reply_failure(&r));
        };
        let Some((done, total)) = wait.progress(&st) else {
            pb.finish_and_clear();
            return Ok(st);
        };
        if st.health == "faulted" {
            pb.finish_and_clear();
            return Ok(st);
        }
        pb.set_length(total.max(1));
        pb.set_position(done);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs the pool's maintenance until `wait` is over, with a progress bar.
pub fn maintain<M: Members>(dp: &mut PoolDir<M>, wait: Wait) -> Result<(), Failure> {
    let pb = bar(1, wait.label());
    loop {
        let rep = dp
            .pool
            .maintenance()
            .map_err(|e| Failure::Error(e.to_string()))?;
        dp.take_spare_for_failed().map_err(|e| dir_failure(&e))?;
        dp.observe();
        let st = dp.pool.status();
        let p = match wait {
            Wait::Rebuild => st.rebuild.map(|(_, d, t)| (d, t)),
            Wait::Scrub => st.scrub.map(|(n, t)| (u64::from(n), u64::from(t))),
            Wait::No => None,
        };
        let Some((done, total)) = p else { break };
        if rep.idle {
            break;
        }
        pb.set_length(total.max(1));
        pb.set_position(done);
    }
    pb.finish_and_clear();
    Ok(())
}

/// Prints `reply`: its notes and warnings on stderr, then its status, LUNs or events on
/// stdout, as text or (`json`) JSON; a failed reply becomes the command's failure (printed as
/// JSON on stdout too with `json`).
pub fn present(reply: &Reply, json: bool, con: Console) -> Result<(), Failure> {
    for n in &reply.notes {
        con.note(n);
    }
    for w in &reply.warnings {
        con.warn(w);
    }
    if !reply.ok && json {
        con.print(&error_json(reply));
        return Err(reply_failure(reply));
    }
    if let Some(st) = &reply.status {
        con.print(&if json {
            with_import(st.to_json(), reply.import.as_ref())
        } else {
            st.to_text()
        });
    }
    if reply.ok {
        Ok(())
    } else {
        Err(reply_failure(reply))
    }
}

/// The status JSON `status` with what an import did under `"import"`, if it did.
fn with_import(status: String, import: Option<&crate::control::ImportSummary>) -> String {
    let Some(import) = import else {
        return status;
    };
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&status) else {
        return status;
    };
    if let (Some(o), Ok(i)) = (v.as_object_mut(), serde_json::to_value(import)) {
        o.insert("import".into(), i);
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap_or(status);
    s.push('\n');
    s
}

/// A failed reply as the JSON `--json` prints: `{"error": {"kind": …, "message": …}}`.
#[must_use]
pub fn error_json(reply: &Reply) -> String {
    let mut s = serde_json::to_string_pretty(&serde_json::json!({ "error": reply.error }))
        .unwrap_or_default();
    s.push('\n');
    s
}

/// A failure of a command that was not a reply (bad arguments, no pool), printed as JSON
/// with `json`, and returned.
pub fn fail_json(f: Failure, json: bool, con: Console) -> Failure {
    if json {
        let (kind, m) = match &f {
            Failure::Refused(m) => ("refused", m.clone()),
            Failure::InUse(m) => ("in-use", m.clone()),
            Failure::Usage(m) => ("usage", m.clone()),
            Failure::Error(m) | Failure::Verify(m) => ("failed", m.clone()),
            Failure::Health(_) => return f,
        };
        let v = serde_json::json!({"error": {"kind": kind, "message": m}});
        con.print(&format!(
            "{}\n",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        ));
    }
    f
}

/// Prints the pool's status on stdout, as text or (`json`) JSON.
pub fn print_status<M: Members>(dp: &mut PoolDir<M>, json: bool, con: Console) {
    let st = dp.status();
    con.print(&if json { st.to_json() } else { st.to_text() });
}

/// [`call`] then [`present`]: the whole of a pool command that prints its answer; the reply,
/// for commands that look further at it.
pub fn request<M: Members>(
    dir: &Path,
    members: impl Into<M>,
    req: &Request,
    wait: Wait,
    json: bool,
    con: Console,
) -> Result<Reply, Failure> {
    let reply = call::<M>(dir, members, req, wait, con).map_err(|f| fail_json(f, json, con))?;
    present(&reply, json, con)?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command that opens a pool (`serve`, `status`, …) names the import a rewind needs;
    /// other failures keep their message.
    #[test]
    fn an_open_a_rewind_would_make_names_the_import() {
        let dir = Path::new("/pools/p");
        let lost = DirError::Open(OpenError::Io(IoError::LogLost { addr: 4096 }));
        let Failure::Error(m) = open_failure(dir, &lost, false) else {
            panic!("an error");
        };
        assert!(
            m.contains("`raidcore import --dir /pools/p --rewind`"),
            "{m}"
        );
        let Failure::Error(m) = open_failure(dir, &DirError::Open(OpenError::RewindNeeded), true)
        else {
            panic!("an error");
        };
        assert!(m.contains("--dir /pools/p --force --rewind"), "{m}");
        let Failure::Error(m) = open_failure(dir, &DirError::Open(OpenError::NoValidRoot), false)
        else {
            panic!("an error");
        };
        assert!(!m.contains("--rewind"), "{m}");
    }
}
