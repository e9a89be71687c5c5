//! `serve`: the pool's LUNs as NBD exports (one per LUN, named as the LUN) on TCP or a Unix
//! socket, until SIGINT or SIGTERM (requests in flight finish, flush, checkpoint).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use raidcore::pool::PoolConfig;

use super::common::warn_lost_items;
use super::console::{Console, Failure};
use crate::dir::{ImageRole, Members, PoolDir};
use crate::nbd::{self, PoolBackend, ServeConfig};
use crate::units::format_bytes;

/// Options of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The pool directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// TCP address to listen on (default 127.0.0.1:10809 unless --unix is given).
    #[arg(long)]
    pub tcp: Option<SocketAddr>,
    /// Unix socket to listen on.
    #[arg(long)]
    pub unix: Option<PathBuf>,
    /// Write JSON statistics to this file every second.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Do not fdatasync the images on flush (faster; safe unless this machine crashes).
    #[arg(long)]
    pub no_sync: bool,
}

/// Serves the pool until a shutdown signal. `members(sync_on_flush)` makes what turns the
/// images into members; it runs on the server's owner thread, where the pool is opened (a pool
/// need not be `Send`).
pub fn run<M, F>(a: &ServeArgs, members: F, con: Console) -> Result<(), Failure>
where
    M: Members + 'static,
    F: FnOnce(bool) -> M + Send + 'static,
{
    let mut config = ServeConfig {
        stats_path: a.stats.clone(),
        unix: a.unix.clone(),
        ..ServeConfig::default()
    };
    if a.tcp.is_some() || a.unix.is_some() {
        config.tcp = a.tcp;
    }
    nbd::install_shutdown_signals(&config.shutdown)?;
    let dir = a.dir.clone();
    let sync = !a.no_sync;
    nbd::serve(config, move || {
        let dp = PoolDir::open(&dir, PoolConfig::default(), members(sync))
            .map_err(std::io::Error::other)?;
        let mut dp: PoolDir<M> = dp;
        warn_lost_items(&dp, con);
        warn_not_online(&mut dp, con);
        for l in dp.pool.luns() {
            con.note(&format!(
                "serving export {:?} ({})",
                l.name.as_str(),
                format_bytes(l.blocks * 4096)
            ));
        }
        Ok(PoolBackend::new(dp))
    })?;
    Ok(())
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
