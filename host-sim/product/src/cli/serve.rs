//! `serve`: the pool's LUNs as NBD exports (one per LUN, named as the LUN) on TCP or a Unix
//! socket, until SIGINT or SIGTERM (requests in flight finish, flush, checkpoint).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use raidcore::pool::PoolConfig;
use raidcore_hal::{ErrorKind, ErrorType};

use super::common::{report_import, rewind_hint};
use super::console::{Console, Failure};
use super::values::{duration_arg, size_arg};
use crate::dir::{DirError, ImageRole, Members, PoolDir, ReadOnlyMembers};
use crate::nbd::background::{BackgroundConfig, RatePolicy};
use crate::nbd::{self, PoolBackend, ServeConfig};
use crate::units::format_bytes;

/// Options of `serve`.
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // command-line switches
pub struct ServeArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// TCP address to listen on (default 127.0.0.1:10809 unless --unix is given). TCP needs
    /// `--tls-certificates` (clients must start TLS) or an explicit `--insecure`.
    #[arg(long)]
    pub tcp: Option<SocketAddr>,
    /// Serve TCP clients over TLS only (NBD STARTTLS), with the x509 certificates of this
    /// directory laid out as nbdkit's: `server-cert.pem`, `server-key.pem`, and `ca-cert.pem`
    /// for `--tls-verify-peer`.
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// Require a client certificate that chains to `ca-cert.pem` (nbdkit's
    /// `--tls-verify-peer`): the clients are authenticated.
    #[arg(long, requires = "tls_certificates")]
    pub tls_verify_peer: bool,
    /// Serve TCP in plaintext, without authentication (anyone who reaches the port reads
    /// and writes every LUN).
    #[arg(long, conflicts_with = "tls_certificates")]
    pub insecure: bool,
    /// Unix socket to listen on.
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Write JSON statistics to this file every second.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Do not fdatasync the images on flush (faster; safe unless this machine crashes).
    #[arg(long)]
    pub no_sync: bool,
    /// How much rebuild and scrub may take: `share:P` (at most P % of the server's time while
    /// clients are active, all of it while they are idle), `rate:B` (at most B member bytes
    /// a second, e.g. `rate:50M`) or `limits:MIN-MAX` (the pool paces: at least MIN bytes of
    /// each member a second under load, at most MAX when idle, e.g. `limits:4M-200M`).
    #[arg(long, default_value = "share:50")]
    pub background: RatePolicy,
    /// Write buffered writes out this long after the last one (a write-back cache that
    /// destages: `500ms`, `2s`).
    #[arg(long, value_parser = duration_arg, default_value = "1s")]
    pub destage_delay: std::time::Duration,
    /// Clients served at once (a new one evicts the oldest that has not chosen an export).
    #[arg(long, default_value_t = 64)]
    pub max_connections: usize,
    /// Disconnect a client that has not chosen an export this long after connecting.
    #[arg(long, value_parser = duration_arg, default_value = "10s")]
    pub handshake_timeout: std::time::Duration,
    /// Serve every LUN read-only and write nothing to the images or the directory (as `zpool
    /// import -o readonly=on`): the images are opened read-only, what import writes (a
    /// checkpoint, repairs) stays in memory (`--read-only-memory`), clients' writes are
    /// refused, and no rebuild or scrub runs, nor any command that changes the pool. For a
    /// look at a damaged pool before deciding.
    #[arg(long)]
    pub read_only: bool,
    /// With `--read-only`: a forced import (see `import --force`), in memory only.
    #[arg(long, requires = "read_only")]
    pub force: bool,
    /// With `--read-only`: a rewind (see `import --rewind`), in memory only.
    #[arg(long, requires = "read_only")]
    pub rewind: bool,
    /// With `--read-only`: memory each member may take for what the pool writes (import's
    /// checkpoint and resync, repairs of what reads find damaged); past it the pool suspends.
    #[arg(long, requires = "read_only", value_parser = size_arg, default_value = "256M")]
    pub read_only_memory: u64,
}

/// Serves the pool until a shutdown signal. `members(sync_on_flush)` makes what turns the
/// images into members; it runs on the server's owner thread, where the pool is opened (a pool
/// need not be `Send`).
pub fn run<M, F>(a: &ServeArgs, members: F, con: Console) -> Result<(), Failure>
where
    M: Members + 'static,
    <M::Disk as ErrorType>::Error: From<ErrorKind>,
    F: FnOnce(bool) -> M + Send + 'static,
{
    let mut config = ServeConfig {
        stats_path: a.stats.clone(),
        unix: a.unix.clone(),
        max_connections: a.max_connections.max(1),
        handshake_timeout: a.handshake_timeout,
        ..ServeConfig::default()
    };
    let bg = BackgroundConfig {
        policy: a.background,
        destage_delay: a.destage_delay,
    };
    if a.tcp.is_some() || a.unix.is_some() {
        config.tcp = a.tcp;
    }
    if let Some(addr) = config.tcp
        && a.tls_certificates.is_none()
        && !a.insecure
    {
        return Err(Failure::Usage(format!(
            "TCP ({addr}) without TLS serves every LUN to anyone who reaches the port: give \
             --tls-certificates DIR (and --tls-verify-peer to require client certificates), or \
             --insecure to serve plaintext anyway, or --unix PATH"
        )));
    }
    if let Some(d) = &a.tls_certificates {
        config.tls = Some(
            nbd::tls::server_config(d, a.tls_verify_peer)
                .map_err(|e| Failure::Usage(format!("--tls-certificates: {e}")))?,
        );
    }
    // A read-only server on a read-only mount has no control socket (`status` then looks at
    // the images themselves).
    if !a.read_only || writable(&a.dir) {
        config.control = Some(crate::control::socket_path(&a.dir));
    }
    nbd::install_shutdown_signals(&config.shutdown)?;
    let dir = a.dir.clone();
    let cfg = PoolConfig {
        background: bg.policy.pool_policy(),
        ..PoolConfig::default()
    };
    if a.read_only {
        let (force, rewind, cap_bytes) = (a.force, a.rewind, a.read_only_memory);
        return serve_pool(config, bg, con, move || {
            let members = ReadOnlyMembers {
                inner: members(false),
                cap_bytes,
            };
            let dp = PoolDir::<ReadOnlyMembers<M>>::open_with(&dir, cfg, members, force, rewind);
            dp.map_err(|e| open_error(&dir, &e, Some(force)))
        });
    }
    let sync = !a.no_sync;
    serve_pool(config, bg, con, move || {
        PoolDir::<M>::open(&dir, cfg, members(sync)).map_err(|e| open_error(&dir, &e, None))
    })
}

/// Whether this process may make files in `dir` (`access(2)`, `W_OK`: false on a read-only
/// mount too).
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The error of opening the pool in `dir` for `serve`: in use, or with the command that would
/// open it with a rewind (`read_only`: whether the server was asked for a forced one).
fn open_error(dir: &Path, e: &DirError, read_only: Option<bool>) -> std::io::Error {
    if matches!(e, DirError::InUse(_)) {
        return std::io::Error::new(std::io::ErrorKind::AddrInUse, e.to_string());
    }
    let hint = match read_only {
        None => rewind_hint(dir, e, false),
        Some(force) => rewind_hint(dir, e, force).map(|_| {
            let force = if force { " --force" } else { "" };
            format!(
                "; `raidcore serve --dir {} --read-only{force} --rewind` serves it as it was \
                 then, in memory only",
                dir.display()
            )
        }),
    };
    match hint {
        Some(hint) => std::io::Error::other(format!("{e}{hint}")),
        None => std::io::Error::other(e.to_string()),
    }
}

/// Serves the pool `open` opens (on the server's owner thread) until a shutdown signal.
fn serve_pool<M, F>(
    config: ServeConfig,
    bg: BackgroundConfig,
    con: Console,
    open: F,
) -> Result<(), Failure>
where
    M: Members + 'static,
    F: FnOnce() -> Result<PoolDir<M>, std::io::Error> + Send + 'static,
{
    nbd::serve(config, move || {
        let mut dp = open()?;
        report_import(&mut dp, con);
        warn_not_online(&mut dp, con);
        dp.observe();
        for l in dp.pool.luns() {
            con.note(&format!(
                "serving export {:?} ({})",
                l.name.as_str(),
                format_bytes(l.blocks * 4096)
            ));
        }
        if dp.members.read_only() {
            con.note(
                "read-only: every export refuses writes, and nothing is written to the images \
                 (what import changed, a hot spare taken included, is held in memory and \
                 dropped at the stop); a rebuild or scrub the status shows does not run",
            );
        } else {
            con.note(&format!(
                "background work: {} (rebuild and scrub), buffered writes out after {} ms",
                bg.policy,
                bg.destage_delay.as_millis()
            ));
        }
        Ok(PoolBackend::with_background(dp, bg))
    })
    .map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            Failure::InUse(e.to_string())
        } else {
            Failure::Error(e.to_string())
        }
    })
}

/// Tells a server's operator when the pool it exports is not whole: which member slots are out
/// of sync and which images were left out, and why.
fn warn_not_online<M: Members>(dp: &mut PoolDir<M>, con: Console) {
    let st = dp.status();
    if st.health == "online" {
        return;
    }
    let out: Vec<String> = st
        .disks
        .iter()
        .filter(|d| d.state != "online")
        .map(|d| format!("{} ({})", d.index, d.state))
        .collect();
    con.warn(&format!(
        "the pool is {}: member slot(s) {}; hot spares: {}",
        st.health.to_uppercase(),
        out.join(", "),
        st.spares
    ));
    for i in st.images.iter().filter(|i| i.role == ImageRole::Stale) {
        con.warn(&format!(
            "left out: {} ({})",
            i.file,
            i.note.as_deref().unwrap_or("stale")
        ));
    }
}
