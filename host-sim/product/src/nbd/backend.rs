//! The storage behind the NBD server: a set of exports (LUNs) addressed in 4 KiB blocks.

use std::fmt;

/// Backend block size in bytes. Every [`Backend`] call is in units of this block: LBAs count
/// 4 KiB blocks, buffers are whole multiples of it. The server turns byte-granular NBD requests
/// into whole-block calls (read-modify-write for partial blocks).
pub const BLOCK: usize = 4096;

/// [`BLOCK`] as a `u64`, for LBA arithmetic.
pub const BLOCK_U64: u64 = BLOCK as u64;

/// One export (LUN) as the server offers it to clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    /// Name clients ask for (`nbd://host/NAME`); at most 4096 bytes of UTF-8, unique, no NUL.
    pub name: String,
    /// Size in bytes; a whole multiple of [`BLOCK`].
    pub size_bytes: u64,
    /// Writes, trims and write-zeroes are refused with `EPERM`.
    pub read_only: bool,
    /// The export is gone (its LUN was deleted while serving): new clients do not see it,
    /// connected ones get errors. It keeps its place so that the others keep their index.
    pub removed: bool,
    /// Optional text shown by `nbdinfo --list` (empty: none).
    pub description: String,
}

impl ExportInfo {
    /// A writable export of `size_bytes` bytes (a multiple of [`BLOCK`]).
    pub fn new(name: impl Into<String>, size_bytes: u64) -> Self {
        ExportInfo {
            name: name.into(),
            size_bytes,
            read_only: false,
            removed: false,
            description: String::new(),
        }
    }

    /// Size in blocks of [`BLOCK`] bytes.
    pub fn blocks(&self) -> u64 {
        self.size_bytes / BLOCK_U64
    }
}

/// What went wrong in a backend call; decides the NBD error value sent to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// Media or device error (`EIO`).
    Io,
    /// No space left, e.g. a thin pool is full (`ENOSPC`).
    NoSpace,
    /// The request is invalid for this export (`EINVAL`).
    Invalid,
    /// The export (or the whole pool) is read-only now, e.g. degraded beyond redundancy (`EPERM`).
    ReadOnly,
    /// The backend is shutting down (`ESHUTDOWN`).
    Shutdown,
}

impl BackendErrorKind {
    /// The NBD error value for this kind.
    pub fn nbd_errno(self) -> u32 {
        use super::proto;
        match self {
            BackendErrorKind::Io => proto::EIO,
            BackendErrorKind::NoSpace => proto::ENOSPC,
            BackendErrorKind::Invalid => proto::EINVAL,
            BackendErrorKind::ReadOnly => proto::EPERM,
            BackendErrorKind::Shutdown => proto::ESHUTDOWN,
        }
    }
}

/// A failed backend call: a kind (mapped to the NBD error) and a message for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendError {
    kind: BackendErrorKind,
    message: String,
}

impl BackendError {
    /// An error of `kind` with a human-readable `message`.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        BackendError {
            kind,
            message: message.into(),
        }
    }

    /// The kind, which decides the NBD error value.
    pub fn kind(&self) -> BackendErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for BackendError {}

impl From<std::io::Error> for BackendError {
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let kind = match e.kind() {
            K::StorageFull | K::QuotaExceeded | K::FileTooLarge => BackendErrorKind::NoSpace,
            K::InvalidInput => BackendErrorKind::Invalid,
            K::PermissionDenied | K::ReadOnlyFilesystem => BackendErrorKind::ReadOnly,
            _ => BackendErrorKind::Io,
        };
        BackendError::new(kind, e.to_string())
    }
}

/// Result of a backend call.
pub type BackendResult<T = ()> = Result<T, BackendError>;

/// Storage served over NBD: several exports, each an array of [`BLOCK`]-byte blocks.
///
/// The server calls a backend from one thread only (the owner thread, which also constructs it),
/// one request at a time, so implementations need neither `Send` nor `Sync` nor locking, and each
/// call is atomic with respect to every other client request.
///
/// Contract the server keeps (tests check it with the simulator's `CheckingBackend`):
/// `export < exports().len()`; `lba + blocks <= exports()[export].blocks()`; buffers are a
/// non-zero whole number of blocks and at most the configured maximum request size (32 MiB by
/// default) rounded up to whole blocks plus one block; no write, trim or write-zeroes reaches a
/// read-only export. A request the server rejects never reaches the backend.
pub trait Backend {
    /// The exports, in a fixed order (the index is the `export` argument of the other calls).
    /// Called when the server starts and after each [`Backend::control`] call: the list may
    /// grow and entries may become [`ExportInfo::removed`], but an export keeps its index.
    fn exports(&self) -> Vec<ExportInfo>;

    /// Reads `buf.len() / BLOCK` blocks starting at block `lba` into `buf`.
    ///
    /// Errors leave `buf` unspecified; the client gets the error and no data.
    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult;

    /// Writes `data.len() / BLOCK` blocks starting at block `lba`.
    ///
    /// With `fua`, the data must be durable (survive a power cut) before this returns. On error
    /// the blocks may hold old or new data (as a real disk after a failed write), never other data.
    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult;

    /// Makes every write that completed before this call on `export` durable. Because one backend
    /// serves all connections, this covers writes from every connection (the server therefore
    /// advertises `NBD_FLAG_CAN_MULTI_CONN`).
    fn flush(&mut self, export: usize) -> BackendResult;

    /// Hint that `blocks` blocks from `lba` are no longer needed; later reads may return anything
    /// until they are written again. The default does nothing.
    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        let _ = (export, lba, blocks);
        Ok(())
    }

    /// Makes `blocks` blocks from `lba` read back as zeroes. Without `no_hole` the backend may
    /// deallocate them (like a trim that guarantees zeroes); with `no_hole` they stay allocated.
    /// With `fua` the zeroes are durable before this returns. The default writes zero blocks,
    /// 256 at a time.
    fn write_zeroes(
        &mut self,
        export: usize,
        lba: u64,
        blocks: u64,
        fua: bool,
        no_hole: bool,
    ) -> BackendResult {
        let _ = no_hole;
        let chunk_blocks = 256u64;
        let zeroes = vec![0u8; chunk_blocks as usize * BLOCK];
        let mut done = 0;
        while done < blocks {
            let n = (blocks - done).min(chunk_blocks);
            self.write(export, lba + done, &zeroes[..n as usize * BLOCK], fua)?;
            done += n;
        }
        Ok(())
    }

    /// Backend-specific statistics (e.g. compression ratio, write amplification) merged into the
    /// stats file under `"backend"`. Called about once a second; the default has none.
    fn stats_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Called once when the server stops, after the last request finished: flush and checkpoint.
    fn shutdown(&mut self) -> BackendResult {
        Ok(())
    }

    /// Answers one request of the control channel ([`ServeConfig::control`]): `request` is one
    /// line of JSON as the client sent it (without the newline); the answer is one line of JSON
    /// (no newline inside). The server calls it on the owner thread, between client requests.
    /// The default refuses every request.
    ///
    /// After each call the server reads [`Backend::exports`] again: a backend may append
    /// exports (a LUN created) or mark them removed; it must not reorder them.
    ///
    /// [`ServeConfig::control`]: super::ServeConfig::control
    fn control(&mut self, request: &str) -> String {
        let _ = request;
        serde_json::json!({
            "ok": false,
            "error": {"kind": "unsupported", "message": "this server has no control channel"}
        })
        .to_string()
    }

    /// Background work (rebuild, scrub, write-out of buffered writes) while no client request
    /// is waiting. The server calls it once the delay it returned last time has passed (and
    /// first when it starts); `None` means not until the next client request. The default
    /// does nothing.
    fn tick(&mut self) -> Option<std::time::Duration> {
        None
    }
}
