//! Sessions run entirely in memory (no sockets), for the fuzz target `nbd_requests` and for
//! deterministic tests.

use std::sync::Arc;

use super::backend::{Backend, ExportInfo};
use super::exec;
use super::session::{Action, CloseReason, Session, SessionLimits};
use super::testing::{CheckingBackend, MemBackend};

/// What an in-memory session produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transcript {
    /// Every byte the server sent, in order (greeting, option replies, request replies).
    pub output: Vec<u8>,
    /// Why the session closed, if it did.
    pub close: Option<CloseReason>,
    /// Requests that reached the backend.
    pub executed: u64,
}

/// Runs one session over `chunks` of client input against `backend`, executing each request as
/// soon as the session emits it (as the owner thread would, one at a time).
pub fn run_in_memory<'a, B: Backend + ?Sized>(
    backend: &mut B,
    limits: SessionLimits,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Transcript {
    let exports: Arc<[ExportInfo]> = backend.exports().into();
    let mut session = Session::new(Arc::clone(&exports), limits);
    let mut t = Transcript::default();
    let mut drain = |session: &mut Session, t: &mut Transcript| {
        while let Some(action) = session.next_action() {
            match action {
                Action::Send(bytes) => t.output.extend_from_slice(&bytes),
                Action::Execute(req) => {
                    t.executed += 1;
                    t.output
                        .extend_from_slice(&exec::execute(backend, &exports, req).reply);
                }
                Action::Close(reason) => t.close = Some(reason),
                // Sessions here never require TLS.
                Action::StartTls => {}
            }
        }
    };
    drain(&mut session, &mut t);
    for chunk in chunks {
        if session.is_closed() {
            break;
        }
        session.feed(chunk);
        drain(&mut session, &mut t);
    }
    t
}

/// Limits of the fuzz harness: small, so that arbitrary input reaches every limit quickly.
pub const FUZZ_LIMITS: SessionLimits = SessionLimits {
    max_request_bytes: 64 << 10,
    max_option_bytes: 8 << 10,
};

/// Exports of the fuzz harness: a small one, a read-only one, and a sparse 1 TiB one whose end
/// is near large offsets.
pub fn fuzz_exports() -> Vec<ExportInfo> {
    vec![
        ExportInfo::new("lun0", 64 << 10),
        ExportInfo {
            read_only: true,
            ..ExportInfo::new("ro", 16 << 10)
        },
        ExportInfo::new("big", 1 << 40),
    ]
}

/// The fuzz target `nbd_requests`: the first byte picks a chunk size, the rest is what a client
/// sends. Panics if the backend sees an invalid request ([`CheckingBackend`]), or if feeding the
/// input whole and in chunks gives different output, backend calls or data.
///
/// # Panics
/// On any of the above: that is a bug the fuzzer found.
pub fn fuzz_session(bytes: &[u8]) {
    let (chunk, input) = match bytes.split_first() {
        Some((c, rest)) => (usize::from(*c % 64) + 1, rest),
        None => (1, bytes),
    };
    let whole_mem = MemBackend::new(fuzz_exports());
    let mut whole_backend = CheckingBackend::new(whole_mem.clone(), FUZZ_LIMITS.max_request_bytes);
    let whole = run_in_memory(&mut whole_backend, FUZZ_LIMITS, [input]);

    let split_mem = MemBackend::new(fuzz_exports());
    let mut split_backend = CheckingBackend::new(split_mem.clone(), FUZZ_LIMITS.max_request_bytes);
    let split = run_in_memory(&mut split_backend, FUZZ_LIMITS, input.chunks(chunk));

    assert_eq!(
        whole, split,
        "output depends on how the input is split (chunk {chunk})"
    );
    assert_eq!(
        whole_mem.counters(),
        split_mem.counters(),
        "backend calls depend on the split"
    );
    let lun0 = 64 << 10;
    assert_eq!(
        whole_mem.read_bytes(0, 0, lun0),
        split_mem.read_bytes(0, 0, lun0),
        "data depends on the split"
    );
}
