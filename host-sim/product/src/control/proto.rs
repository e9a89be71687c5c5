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
