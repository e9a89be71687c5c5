//! The messages of the control channel (see [`super`]): [`Request`] and [`Reply`], as JSON.

use serde::{Deserialize, Serialize};

use crate::dir::records::EventRecord;
use crate::status::{DirStatus, LunReport};

/// What to do with a scrub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ScrubAction {
    /// Start a scrub (or restart the one in progress from the beginning).
    Start,
    /// Pause the scrub in progress (a server runs no scrub steps until `resume`).
    Pause,
    /// Resume a paused scrub.
    Resume,
    /// Stop the scrub in progress.
    Cancel,
}

/// A request: one command on the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// The pool's status.
    Status,
    /// Fail member `disk` by hand (`force`: even past the level's tolerance).
    Fail {
        /// Member slot.
        disk: usize,
        /// Fail it even if the data becomes unreadable.
        force: bool,
    },
    /// Bring member `disk` back online.
    Online {
        /// Member slot.
        disk: usize,
    },
    /// Put a blank image into failed slot `disk`: the failed image renamed aside and a new one
    /// under its name, or `with` (an image file name in the pool directory, made if missing),
    /// leaving the failed image where it is.
    Replace {
        /// Member slot.
        disk: usize,
        /// The image to use instead of one under the failed image's name.
        with: Option<String>,
    },
    /// Start, pause, resume or cancel a scrub.
    Scrub {
        /// What to do.
        action: ScrubAction,
    },
    /// Create a LUN of `size_bytes` (a multiple of 4 KiB) named `name`.
    LunCreate {
        /// Export name.
        name: String,
        /// Size in bytes.
        size_bytes: u64,
    },
    /// Delete the LUN named `name` and free its space.
    LunDelete {
        /// Export name.
        name: String,
    },
    /// Change the size of the LUN named `name`.
    LunResize {
        /// Export name.
        name: String,
        /// New size in bytes.
        size_bytes: u64,
    },
    /// The LUNs.
    LunList,
    /// Add a hot spare: a new blank image (`image`: its file name, or the next free number).
    SpareAdd {
        /// File name in the pool directory.
        image: Option<String>,
    },
    /// Remove a hot spare (its image is kept).
    SpareRemove {
        /// The spare's image file name.
        image: String,
    },
    /// Give the pool a dedicated intent-log device on the file `path` (made `size_bytes` long
    /// if missing).
    LogAdd {
        /// The file (outside the pool directory, on a faster device).
        path: std::path::PathBuf,
        /// Its size when made.
        size_bytes: u64,
    },
    /// Take the log device out of the pool (its file is kept, labels erased).
    LogRemove,
    /// The event log (the last `last` lines, or all).
    Events {
        /// How many of the newest lines.
        last: Option<usize>,
    },
    /// Zero the error counters.
    Clear,
    /// Resume a suspended pool.
    Resume,
}

/// Why a request failed, for the exit status (see [`crate::cli`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The request does not fit the pool (nothing was changed).
    Refused,
    /// This build cannot do it yet (nothing was changed).
    Unsupported,
    /// Another process has the pool open.
    InUse,
    /// An I/O error, or the pool could not be opened.
    Failed,
    /// The request itself is malformed.
    Usage,
}

/// A failed request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyError {
    /// Why.
    pub kind: ErrorKind,
    /// In words.
    pub message: String,
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reply {
    /// The request was carried out.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ReplyError>,
    /// What was done, in words (printed on stderr, one line each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Warnings (printed on stderr as such).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The pool's status after the request, for the requests that print it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DirStatus>,
    /// The LUNs (`lun list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub luns: Option<Vec<LunReport>>,
    /// The event log (`events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventRecord>>,
    /// What an import did (`import`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportSummary>,
}

/// What an import did, as `import --json` prints it (the core's `ImportReport`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ImportSummary {
    /// Checkpoint generation the import started from.
    pub root_gen: u64,
    /// Log items replayed after that checkpoint.
    pub items_replayed: u64,
    /// Of those, items no redundancy could rebuild (their blocks read as errors).
    pub items_lost: u64,
    /// Stripes the crash left inconsistent, repaired.
    pub resynced_stripes: u64,
    /// Slots a forced import took failed members back into.
    pub forced: Vec<u8>,
    /// Slots whose image missed writes (an older copy put back): resyncing what they missed.
    pub behind: Vec<u8>,
    /// The pool is served as members taken back alone left it (a rewind).
    pub rewound: bool,
    /// A rewind cut the log at this address (bytes): later writes are lost.
    pub log_cut_at: Option<u64>,
    /// Map pages under the checkpoint a forced import loaded that cannot be read.
    #[serde(default)]
    pub map_pages_lost: u64,
    /// Nothing was written: what a forced import would assemble (`--read-only`).
    pub read_only: bool,
}

impl ImportSummary {
    /// The summary of `r`.
    #[must_use]
    pub fn of(r: &raidcore::pool::ImportReport) -> ImportSummary {
        ImportSummary {
            root_gen: r.root_gen,
            items_replayed: r.items_replayed,
            items_lost: r.items_lost,
            resynced_stripes: r.resynced_stripes,
            forced: r.forced.to_vec(),
            behind: r.behind.to_vec(),
            rewound: r.rewound,
            log_cut_at: r.log_cut_at,
            map_pages_lost: r.map_pages_lost,
            read_only: false,
        }
    }
}

impl Reply {
    /// A failed request.
    #[must_use]
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            error: Some(ReplyError {
                kind,
                message: message.into(),
            }),
            ..Reply::default()
        }
    }

    /// A request carried out.
    #[must_use]
    pub fn done() -> Reply {
        Reply {
            ok: true,
            ..Reply::default()
        }
    }

    /// One line of JSON (no newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!(
                r#"{{"ok":false,"error":{{"kind":"failed","message":"encoding the answer: {e}"}}}}"#
            )
        })
    }
}
