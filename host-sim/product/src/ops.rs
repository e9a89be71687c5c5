//! What each pool command does to an open pool ([`execute`]), the same whether the command
//! opened the pool itself or a server runs it for the command over the control channel
//! ([`crate::control`]): one [`Request`] in, one [`Reply`] out.

use raidcore::pool::{AdminError, LunError};

use crate::control::{ErrorKind, Reply, Request, ScrubAction};
use crate::dir::records::{Severity, read_events};
use crate::dir::{DirError, Members, PoolDir};
use crate::status::lun_reports;

/// The kind of failure a [`DirError`] is, for the exit status.
#[must_use]
pub fn error_kind(e: &DirError) -> ErrorKind {
    match e {
        DirError::InUse(_) => ErrorKind::InUse,
        DirError::Admin(AdminError::Io(_))
        | DirError::Lun(LunError::Io(_))
        | DirError::Io { .. }
        | DirError::Disk { .. }
        | DirError::Open(_)
        | DirError::Create(_)
        | DirError::Pool(_)
        | DirError::Faulted(_) => ErrorKind::Failed,
        DirError::Invalid(_) | DirError::Admin(_) | DirError::Lun(_) => ErrorKind::Refused,
    }
}

/// `e` as a failed reply.
#[must_use]
pub fn error_reply(e: &DirError) -> Reply {
    Reply::error(error_kind(e), e.to_string())
}

/// Runs `req` on the pool open in `dp`; the reply carries the status afterwards for every
/// request but `events` and `lun list`. The records and event log are brought up to date.
pub fn execute<M: Members>(dp: &mut PoolDir<M>, req: &Request) -> Reply {
    let mut reply = match run(dp, req) {
        Ok(r) => r,
        Err(e) => error_reply(&e),
    };
    dp.observe();
    if reply.ok && !matches!(req, Request::Events { .. } | Request::LunList) {
        reply.status = Some(dp.status());
    }
    if !matches!(
        req,
        Request::Status | Request::Events { .. } | Request::LunList
    ) {
        dp.save_records();
    }
    reply
}

/// `log add` or `log remove`; the note saying what was done.
fn log_device<M: Members>(dp: &mut PoolDir<M>, req: &Request) -> Result<String, DirError> {
    if let Request::LogAdd { path, size_bytes } = req {
        dp.add_log_device(path, Some(*size_bytes), None)?;
        return Ok(format!("{} added as the log device", path.display()));
    }
    let path = dp.remove_log_device()?;
    let name = path.map_or_else(|| "the log device".into(), |p| p.display().to_string());
    Ok(format!(
        "{name} removed: the intent log is on the members again"
    ))
}

fn run<M: Members>(dp: &mut PoolDir<M>, req: &Request) -> Result<Reply, DirError> {
    let mut reply = Reply::done();
    match req {
        Request::Status => {}
        Request::Fail { disk, force } => {
            dp.fail(*disk, *force)?;
        }
        Request::Replace { disk, with } => {
            let n = dp.replace(*disk, with.as_deref())?;
            let note = format!("disk {disk} is now {}", crate::dir::image_name(n));
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::Scrub { action } => return scrub(dp, *action),
        Request::LunCreate { name, size_bytes } => {
            let id = dp
                .pool
                .create_lun(name, lun_blocks(*size_bytes)?)
                .map_err(DirError::Lun)?;
            let note = format!(
                "LUN {id} {name:?} created ({})",
                crate::units::format_bytes(*size_bytes)
            );
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::LunDelete { name } => {
            let id = lun_id(dp, name)?;
            dp.pool.delete_lun(id).map_err(DirError::Lun)?;
            let note = format!("LUN {id} {name:?} deleted");
            dp.note_event(Severity::Warn, note.clone());
            reply.notes.push(note);
        }
        Request::LunList => reply.luns = Some(lun_reports(&dp.pool)),
        Request::SpareAdd { image } => {
            let n = dp.add_spare(image.as_deref())?;
            let note = format!("{} added as a hot spare", crate::dir::image_name(n));
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::LogAdd { .. } | Request::LogRemove => {
            let note = log_device(dp, req)?;
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::Events { last } => reply.events = Some(read_events(&dp.dir, *last)?),
        Request::Clear => dp.clear_errors(),
        Request::LunResize { name, size_bytes } => {
            let id = lun_id(dp, name)?;
            let old = dp.pool.luns().find(|l| l.id == id).map_or(0, |l| l.blocks);
            dp.pool
                .resize_lun(id, lun_blocks(*size_bytes)?)
                .map_err(DirError::Lun)?;
            let note = format!(
                "LUN {id} {name:?} resized from {} to {}",
                crate::units::format_bytes(old * 4096),
                crate::units::format_bytes(*size_bytes)
            );
            let severity = if *size_bytes < old * 4096 {
                Severity::Warn
            } else {
                Severity::Info
            };
            dp.note_event(severity, note.clone());
            reply.notes.push(note);
        }
        Request::SpareRemove { image } => {
            let n = dp.remove_spare(image)?;
            let note = format!(
                "{} removed from the hot spares (blank, kept in the directory)",
                crate::dir::image_name(n)
            );
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::Online { disk } => {
            let image = dp.online(*disk)?;
            let note = match image {
                Some(n) => format!(
                    "disk {disk} ({}) is back online; resyncing what it missed",
                    crate::dir::image_name(n)
                ),
                None => format!("disk {disk} is back online; resyncing what it missed"),
            };
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
        Request::Resume => {
            dp.pool.resume()?;
            let note = "the pool resumed: what waited is written".to_string();
            dp.note_event(Severity::Info, note.clone());
            reply.notes.push(note);
        }
    }
    Ok(reply)
}

/// A LUN size in bytes as 4 KiB blocks.
fn lun_blocks(size_bytes: u64) -> Result<u64, DirError> {
    if size_bytes == 0 || !size_bytes.is_multiple_of(4096) {
        return Err(DirError::Invalid(format!(
            "LUN size {size_bytes} is not a positive multiple of 4 KiB"
        )));
    }
    Ok(size_bytes / 4096)
}

/// The LUN named `name`.
fn lun_id<M: Members>(dp: &PoolDir<M>, name: &str) -> Result<u16, DirError> {
    dp.pool
        .lun_by_name(name)
        .ok_or_else(|| DirError::Invalid(format!("no LUN named {name:?}")))
}

/// `scrub start|pause|resume|cancel`.
fn scrub<M: Members>(dp: &mut PoolDir<M>, action: ScrubAction) -> Result<Reply, DirError> {
    let running = dp.pool.status().scrub.is_some();
    match action {
        ScrubAction::Start => {
            dp.pool.start_scrub();
            dp.records.scrub_paused = false;
            dp.note_event(Severity::Info, "scrub started");
        }
        ScrubAction::Pause | ScrubAction::Resume | ScrubAction::Cancel if !running => {
            return Err(DirError::Invalid("no scrub is in progress".into()));
        }
        ScrubAction::Pause => {
            dp.records.scrub_paused = true;
            dp.note_event(Severity::Info, "scrub paused");
        }
        ScrubAction::Resume => {
            dp.records.scrub_paused = false;
            dp.note_event(Severity::Info, "scrub resumed");
        }
        ScrubAction::Cancel => {
            dp.pool.cancel_scrub();
            dp.pool.checkpoint()?;
            dp.records.scrub_paused = false;
            dp.note_event(Severity::Info, "scrub cancelled");
        }
    }
    Ok(Reply::done())
}
