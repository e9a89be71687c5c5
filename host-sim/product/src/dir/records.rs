//! What the host keeps about a pool beyond its images, in two files of the pool directory:
//!
//! - [`RECORDS_FILE`] (JSON, rewritten whole through a temporary file and a rename): error
//!   counters per member slot, the last scrub and the last rebuild (when, how long, what they
//!   found), and whether a scrub is paused. The counters add up across restarts until `clear`.
//! - [`EVENTS_FILE`] (text, appended): one line per pool event, `<RFC 3339 UTC time>
//!   <level> <what happened, in words>`, which `events` prints.
//!
//! Counter units: `read`, `write`, `medium`, `transient` and `checksum` count member I/O
//! requests (a request may span several blocks): reads and writes that failed after retries,
//! of those the latent sector errors, retried attempts, and reads whose data failed its
//! checksum or parity check. `repaired_bytes` counts bytes rewritten with reconstructed data
//! (self-healing and scrub repairs; never rebuild writes, which [`ScanRecord`] counts).
//!
//! Neither file is needed to open the pool: the images alone are the pool. A missing or
//! unreadable records file starts the counters at zero (and says so).

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use raidcore::raid::DiskErrors;
use serde::{Deserialize, Serialize};

use super::DirError;
use super::error::io_err;

/// Name of the records file in a pool directory.
pub const RECORDS_FILE: &str = "raidcore-records.json";
/// Name of the event log in a pool directory.
pub const EVENTS_FILE: &str = "raidcore-events.log";

/// Error counters of one member slot (units: see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Reads that failed after retries.
    pub read: u64,
    /// Writes that failed after retries.
    pub write: u64,
    /// Of the failed requests, latent sector errors.
    pub medium: u64,
    /// Retried attempts (transport errors, timeouts).
    pub transient: u64,
    /// Reads whose data failed its checksum or parity check.
    pub checksum: u64,
    /// Bytes rewritten with reconstructed data (not rebuild writes).
    pub repaired_bytes: u64,
}

impl ErrorCounts {
    /// The core's counters of a member whose blocks are `block_bytes` long.
    #[must_use]
    pub fn of(e: DiskErrors, block_bytes: u64) -> ErrorCounts {
        ErrorCounts {
            read: u64::from(e.read),
            write: u64::from(e.write),
            medium: u64::from(e.medium),
            transient: u64::from(e.transient),
            checksum: u64::from(e.checksum),
            repaired_bytes: u64::from(e.repaired) * block_bytes,
        }
    }

    /// `self + b - c`, each counter (never below zero).
    #[must_use]
    pub fn plus_minus(self, b: ErrorCounts, c: ErrorCounts) -> ErrorCounts {
        let f = |x: u64, y: u64, z: u64| (x + y).saturating_sub(z);
        ErrorCounts {
            read: f(self.read, b.read, c.read),
            write: f(self.write, b.write, c.write),
            medium: f(self.medium, b.medium, c.medium),
            transient: f(self.transient, b.transient, c.transient),
            checksum: f(self.checksum, b.checksum, c.checksum),
            repaired_bytes: f(self.repaired_bytes, b.repaired_bytes, c.repaired_bytes),
        }
    }

    /// Whether every counter is zero.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        *self == ErrorCounts::default()
    }
}

/// The counters kept for one member slot, with the image that filled it (a new image in the
/// slot starts from zero).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// Member slot.
    pub slot: usize,
    /// The image in the slot when the counters were saved.
    pub image: Option<String>,
    /// The counters.
    pub errors: ErrorCounts,
}

/// A finished rebuild or scrub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRecord {
    /// When it finished (RFC 3339, UTC).
    pub finished: String,
    /// How long it ran in this process, in seconds (0 when it started before this process
    /// opened the pool, or finished in a process that did not see it start).
    pub seconds: u64,
    /// The member slot rebuilt (rebuilds only).
    pub disk: Option<usize>,
    /// Stripes rebuilt or checked.
    pub stripes: u64,
    /// Scrubs: blocks repaired.
    pub repaired_blocks: u64,
    /// Blocks (scrub) or stripes (rebuild) that could not be repaired or rebuilt.
    pub unrecoverable: u64,
}

/// The contents of [`RECORDS_FILE`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Records {
    /// Counters per member slot.
    pub slots: Vec<SlotRecord>,
    /// The last scrub that finished.
    pub last_scrub: Option<ScanRecord>,
    /// The last rebuild that finished.
    pub last_rebuild: Option<ScanRecord>,
    /// A scrub is paused (`scrub pause`): servers run no scrub steps until `scrub resume`.
    #[serde(default)]
    pub scrub_paused: bool,
}

impl Records {
    /// Reads the records of the pool in `dir`; `None` and a warning text if the file exists
    /// but cannot be read (the counters then start at zero).
    pub fn load(dir: &Path) -> (Records, Option<String>) {
        let p = dir.join(RECORDS_FILE);
        match fs::read_to_string(&p) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(r) => (r, None),
                Err(e) => (
                    Records::default(),
                    Some(format!(
                        "{} is not valid ({e}); error counters start at zero",
                        p.display()
                    )),
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Records::default(), None),
            Err(e) => (
                Records::default(),
                Some(format!(
                    "cannot read {} ({e}); error counters start at zero",
                    p.display()
                )),
            ),
        }
    }

    /// Writes the records of the pool in `dir` (a temporary file renamed over the old one).
    pub fn save(&self, dir: &Path) -> Result<(), DirError> {
        let p = dir.join(RECORDS_FILE);
        let tmp = dir.join(format!("{RECORDS_FILE}.tmp"));
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| DirError::Invalid(format!("encoding {RECORDS_FILE}: {e}")))?;
        text.push('\n');
        fs::write(&tmp, text).map_err(io_err(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, &p).map_err(io_err(format!("renaming {} into place", tmp.display())))
    }

    /// The saved counters of slot `slot` if the same image still fills it.
    #[must_use]
    pub fn saved(&self, slot: usize, image: Option<&str>) -> ErrorCounts {
        self.slots
            .iter()
            .find(|s| s.slot == slot && s.image.as_deref() == image)
            .map(|s| s.errors)
            .unwrap_or_default()
    }
}

/// Severity of an event line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Routine: progress, repairs that worked.
    Info,
    /// Something an operator should look at: a member failed, the pool degraded.
    Warn,
    /// Data at risk or lost: the pool faulted, blocks unrecoverable.
    Error,
}

impl Severity {
    /// Lower-case name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }
}

/// One line of the event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    /// When (RFC 3339, UTC).
    pub time: String,
    /// How serious.
    pub severity: Severity,
    /// What happened, in words.
    pub message: String,
}

impl EventRecord {
    /// An event now.
    #[must_use]
    pub fn now(severity: Severity, message: impl Into<String>) -> EventRecord {
        EventRecord {
            time: rfc3339(SystemTime::now()),
            severity,
            message: message.into(),
        }
    }

    /// The line as the file holds it (no newline).
    #[must_use]
    pub fn line(&self) -> String {
        format!("{} {:<5} {}", self.time, self.severity.name(), self.message)
    }

    /// Parses a line of the file; `None` for a line in no known shape.
    #[must_use]
    pub fn parse(line: &str) -> Option<EventRecord> {
        let (time, rest) = line.split_once(' ')?;
        let rest = rest.trim_start();
        let (sev, message) = rest.split_once(' ')?;
        let severity = match sev {
            "info" => Severity::Info,
            "warn" => Severity::Warn,
            "error" => Severity::Error,
            _ => return None,
        };
        Some(EventRecord {
            time: time.to_string(),
            severity,
            message: message.trim_start().to_string(),
        })
    }
}

/// Appends `events` to the event log of the pool in `dir`.
pub fn append_events(dir: &Path, events: &[EventRecord]) -> Result<(), DirError> {
    if events.is_empty() {
        return Ok(());
    }
    let p = dir.join(EVENTS_FILE);
    let mut text = String::new();
    for e in events {
        let _ = writeln!(text, "{}", e.line());
    }
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(io_err(format!("appending to {}", p.display())))
}

/// The event log of the pool in `dir`, oldest first (empty if there is none yet); the last
/// `last` lines only, if given.
pub fn read_events(dir: &Path, last: Option<usize>) -> Result<Vec<EventRecord>, DirError> {
    let p = dir.join(EVENTS_FILE);
    let text = match fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(DirError::Io {
                what: format!("reading {}", p.display()),
                err: e,
            });
        }
    };
    let all: Vec<EventRecord> = text.lines().filter_map(EventRecord::parse).collect();
    let skip = last.map_or(0, |n| all.len().saturating_sub(n));
    Ok(all.into_iter().skip(skip).collect())
}

/// `t` as RFC 3339 in UTC, to the second (`2025-01-31T12:00:00Z`).
#[must_use]
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The civil date of day `z` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: u64) -> (u64, u64, u64) {
    let z = z + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn event_lines_read_back() {
        let e = EventRecord {
            time: "2024-02-29T12:34:56Z".into(),
            severity: Severity::Warn,
            message: "member 2 failed: device gone".into(),
        };
        assert_eq!(
            e.line(),
            "2024-02-29T12:34:56Z warn  member 2 failed: device gone"
        );
        assert_eq!(EventRecord::parse(&e.line()), Some(e));
        assert_eq!(EventRecord::parse("garbage"), None);
    }

    #[test]
    fn counters_add_and_subtract_without_going_negative() {
        let a = ErrorCounts {
            read: 2,
            checksum: 1,
            ..ErrorCounts::default()
        };
        let b = ErrorCounts {
            read: 3,
            ..ErrorCounts::default()
        };
        let c = ErrorCounts {
            read: 1,
            checksum: 5,
            ..ErrorCounts::default()
        };
        let r = a.plus_minus(b, c);
        assert_eq!((r.read, r.checksum), (4, 0));
    }
}
