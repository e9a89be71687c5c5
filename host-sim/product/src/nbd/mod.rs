//! NBD export: serves a [`Backend`]'s LUNs to real NBD clients (qemu, nbd-client, libnbd's
//! nbdcopy/nbdinfo, fio's `nbd` engine) over TCP or a Unix socket.
//!
//! Written from the NBD protocol specification (`doc/proto.md` of the NetworkBlockDevice/nbd
//! project): fixed newstyle negotiation with `NBD_FLAG_NO_ZEROES`; options `NBD_OPT_GO`,
//! `NBD_OPT_INFO` (`NBD_INFO_EXPORT`, `NAME`, `DESCRIPTION`, `BLOCK_SIZE`), `NBD_OPT_LIST`,
//! `NBD_OPT_ABORT`, `NBD_OPT_EXPORT_NAME`; every other option gets `NBD_REP_ERR_UNSUP`
//! (structured replies, block status and TLS are not offered). Simple replies to `READ`,
//! `WRITE` (+FUA), `FLUSH`, `TRIM`, `WRITE_ZEROES` (+`NO_HOLE`) and `DISC`.
//!
//! Block sizes advertised: minimum 1 byte (any offset and length work: partial 4 KiB blocks are
//! merged by read-modify-write in the owner thread), preferred 4096, maximum 32 MiB (configurable).
//! `NBD_FLAG_CAN_MULTI_CONN` is advertised because one backend serves every connection in order.
//! Out-of-range requests get `EINVAL` (reads, trims) or `ENOSPC` (writes), as the spec asks;
//! protocol violations (bad magic, unknown client flags) close only that connection.
//!
//! Threads: one owner thread builds and runs the [`Backend`]; it waits on every connection's
//! socket at once (epoll), reads and parses requests (a [`session::Session`] per connection),
//! runs them, writes each reply into the client's socket if it takes it without waiting, and
//! writes the stats file. Each connection has a writer thread for what its socket did not take
//! at once, with flow control per connection (64 replies / 64 MiB queued by default: the owner
//! stops reading a connection until its writer has sent them), so a slow client only slows
//! itself. Set [`ServeConfig::shutdown`] (see [`install_shutdown_signals`]) to stop: accepting
//! and reading end, the replies to requests already run are sent, [`Backend::shutdown`] runs,
//! [`Server::run`] returns. Statistics go to [`ServeConfig::stats_path`] as JSON
//! ([`StatsFile`]) every second and at shutdown; [`read_stats_file`] and [`render_status`] read
//! and print it for monitoring.
//!
//! Layout: [`proto`] (wire constants), [`session`] (a pure state machine per connection),
//! [`exec`] (byte ranges to block calls), [`server`] (sockets and threads), [`stats`] (the
//! stats file). The simulator keeps what tests run the server with (`raidcore_sim::nbd`: a
//! memory backend, a contract checker, in-memory sessions for the fuzz target).
//!
//! ```no_run
//! use raidcore_host::nbd::{self, Backend, BackendResult, ExportInfo, ServeConfig};
//!
//! /// One export that reads as zeros and forgets what is written.
//! struct Zeros;
//!
//! impl Backend for Zeros {
//!     fn exports(&self) -> Vec<ExportInfo> {
//!         vec![ExportInfo::new("lun0", 64 << 20)]
//!     }
//!     fn read(&mut self, _export: usize, _lba: u64, buf: &mut [u8]) -> BackendResult {
//!         buf.fill(0);
//!         Ok(())
//!     }
//!     fn write(&mut self, _export: usize, _lba: u64, _data: &[u8], _fua: bool) -> BackendResult {
//!         Ok(())
//!     }
//!     fn flush(&mut self, _export: usize) -> BackendResult {
//!         Ok(())
//!     }
//! }
//!
//! let config = ServeConfig::default();
//! nbd::install_shutdown_signals(&config.shutdown)?;
//! nbd::serve(config, || Ok(Zeros))?;
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod backend;
pub mod background;
pub mod exec;
pub mod pool;
pub mod proto;
pub mod server;
pub mod session;
pub mod stats;
pub mod tls;

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub use backend::{BLOCK, Backend, BackendError, BackendErrorKind, BackendResult, ExportInfo};
pub use pool::{PoolBackend, ServedPool};
pub use server::{ServeConfig, Server};
pub use session::SessionLimits;
pub use stats::{StatsFile, read_stats_file, render_status};

/// Starts a server with `config` and a backend built on the owner thread by `factory`, logs the
/// addresses it listens on, and serves until `config.shutdown` is set (see [`Server::run`]).
pub fn serve<B, F>(config: ServeConfig, factory: F) -> io::Result<()>
where
    B: Backend + 'static,
    F: FnOnce() -> io::Result<B> + Send + 'static,
{
    let server = Server::start(config, factory)?;
    if let Some(a) = server.tcp_addr() {
        if server.tls() {
            log::info!("nbd: listening on nbds://{a}/ (TLS required)");
        } else {
            log::info!("nbd: listening on nbd://{a}/ (plaintext, no authentication)");
        }
    }
    if let Some(p) = server.unix_path() {
        log::info!("nbd: listening on nbd+unix:///?socket={}", p.display());
    }
    for e in server.exports() {
        log::info!(
            "nbd: export {:?}: {} bytes{}",
            e.name,
            e.size_bytes,
            if e.read_only { " (read-only)" } else { "" }
        );
    }
    notify_systemd("READY=1");
    let r = server.run();
    notify_systemd("STOPPING=1");
    r
}

/// Tells systemd (`Type=notify` units: the datagram socket named by `NOTIFY_SOCKET`, `@` for
/// the abstract namespace) that the server is `state` (`READY=1` once it listens,
/// `STOPPING=1` when it stops). Nothing without `NOTIFY_SOCKET`; a failure is logged, never
/// fatal.
pub fn notify_systemd(state: &str) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let addr = {
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
        match bytes.strip_prefix(b"@") {
            Some(name) => {
                <SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name)
            }
            None => SocketAddr::from_pathname(&path),
        }
    };
    let sent = addr.and_then(|a| UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &a));
    if let Err(e) = sent {
        log::warn!("telling systemd {state:?} through NOTIFY_SOCKET: {e}");
    }
}

/// Makes SIGINT and SIGTERM set `flag` (which stops [`Server::run`] gracefully); a second such
/// signal while the flag is already set ends the process at once with exit status 1.
pub fn install_shutdown_signals(flag: &Arc<AtomicBool>) -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        // Order matters: the conditional exit sees the flag before this signal sets it.
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(flag))?;
        signal_hook::flag::register(sig, Arc::clone(flag))?;
    }
    Ok(())
}
