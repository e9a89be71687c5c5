//! The control channel of a running server: how `raidcore <command> --dir DIR` reaches the
//! server that holds the pool, so a served pool is inspected and repaired without stopping its
//! clients.
//!
//! **Where**: a Unix socket in the pool directory, [`SOCKET_NAME`], made by `serve` with mode
//! 0600 (bound under a temporary name, made owner-only, then renamed into place) and checked
//! again per connection (`SO_PEERCRED`: the server's user or root). It is removed when the
//! server stops; a stale one (the server was killed) answers no connection and is replaced by
//! the next server.
//!
//! **Protocol**: newline-delimited JSON, one request per line, one answer per line, in order,
//! as many as the client likes on one connection (`status --watch` asks again every second).
//! A request is a [`Request`] (`{"cmd":"status"}`, `{"cmd":"fail","disk":2,"force":false}`,
//! …); an answer is a [`Reply`] (`{"ok":true,"status":{…}}` or `{"ok":false,"error":{"kind":
//! "refused","message":"…"}}`). Requests run on the server's owner thread between client
//! requests, so each is atomic with respect to client I/O. Lines are at most 1 MiB.
//!
//! **Same output either way**: a command builds the same [`Request`] whether a server answers
//! or not; without a server it opens the pool itself and runs the request through the same
//! code ([`crate::ops::execute`]), so both paths print the same [`Reply`].

pub mod client;
pub mod proto;

use std::path::{Path, PathBuf};

pub use proto::{ErrorKind, ImportSummary, Reply, ReplyError, Request, ScrubAction};

/// Name of the control socket in a pool directory.
pub const SOCKET_NAME: &str = ".raidcore-control.sock";

/// The control socket of the pool in `dir`.
#[must_use]
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}
