//! Sockets and threads: the accept loop, two threads per connection, one backend owner thread.
//!
//! ```text
//!  client ──► reader thread (Session) ──Job──► owner thread (Backend, stats) ──reply──┐
//!  client ◄─────────────────────────────────── (socket takes it at once) ◄────────────┤
//!  client ◄── writer thread ◄──────────────── (socket full: queued) ◄─────────────────┘
//! ```
//! The owner runs one request at a time and writes each finished reply into the client's socket
//! itself, without blocking (`MSG_DONTWAIT`): a request then crosses one thread hand-off, not
//! two. What the socket does not take at once (a client that stops reading, a large read) is
//! queued in the connection's [`Outbox`], and the connection's writer thread writes it, blocking,
//! in order; replies behind it queue too. So a slow client only slows itself and never stalls
//! the owner. A reply is produced only once the backend call returned, so a flush or FUA write
//! is answered only after its data is durable.
//! Each connection may have at most `max_inflight_per_connection` requests outstanding and
//! `max_inflight_bytes_per_connection` bytes of queued write payloads and replies (the reader
//! waits for credit before it queues more), which bounds memory per connection.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::backend::{BLOCK_U64, Backend, ExportInfo};
use super::exec;
use super::proto;
use super::session::{
    Action, CloseReason, Op, PREFERRED_BLOCK_BYTES, Request, Session, SessionLimits,
};
use super::stats::{self, ConnCounters, Recorder};

/// Default TCP address: loopback, the IANA NBD port.
pub const DEFAULT_TCP: &str = "127.0.0.1:10809";

/// How often the accept loop looks at the shutdown flag when no client connects.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 256 << 10;

/// Server configuration.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// TCP address to listen on (`None`: no TCP). Port 0 picks a free port; see
    /// [`Server::tcp_addr`]. Default `127.0.0.1:10809`.
    pub tcp: Option<SocketAddr>,
    /// Unix socket path to listen on (`None`: no Unix socket). A stale socket file at the path
    /// is replaced; any other file there is an error. The file is removed when the server stops.
    pub unix: Option<PathBuf>,
    /// Where to write the JSON statistics ([`stats::StatsFile`]); `None`: no stats file.
    pub stats_path: Option<PathBuf>,
    /// How often the stats file is rewritten. Default 1 s.
    pub stats_interval: Duration,
    /// Request and option size limits.
    pub limits: SessionLimits,
    /// Connections served at once; further clients are closed at once. Default 64.
    pub max_connections: usize,
    /// Replies a connection may have outstanding before the server stops reading its requests.
    /// Default 64.
    pub max_inflight_per_connection: usize,
    /// Bytes of write payloads and replies a connection may have queued before the server stops
    /// reading its requests. A single request larger than this still runs (alone). Default 64 MiB.
    pub max_inflight_bytes_per_connection: usize,
    /// How long a stopping server waits for clients to take their last replies before it drops
    /// them. Default 10 s.
    pub shutdown_grace: Duration,
    /// Set this (e.g. from a signal handler, see [`super::install_shutdown_signals`]) to stop
    /// the server: it stops accepting, finishes requests in flight, shuts the backend down and
    /// [`Server::run`] returns.
    pub shutdown: Arc<AtomicBool>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            tcp: DEFAULT_TCP.parse().ok(),
            unix: None,
            stats_path: None,
            stats_interval: Duration::from_secs(1),
            limits: SessionLimits::default(),
            max_connections: 64,
            max_inflight_per_connection: 64,
            max_inflight_bytes_per_connection: 64 << 20,
            shutdown_grace: Duration::from_secs(10),
            shutdown: Arc::new(AtomicBool::new(false)),
        }
    }
}

#[derive(Debug)]
struct Job {
    req: Request,
    received: Instant,
    /// Where the reply goes; holds the request's credit.
    reply_to: Owed,
}

/// Bytes for the client, and the credit they release once sent.
#[derive(Debug)]
struct Reply {
    bytes: Vec<u8>,
    credit: usize,
}

/// What is queued on a connection's [`Outbox`] and who is writing.
#[derive(Debug, Default)]
struct OutState {
    /// Replies the socket did not take at once, in order, each with the bytes already sent.
    queue: VecDeque<(Reply, usize)>,
    /// The writer thread is writing a reply it took off the queue.
    writing: bool,
    /// The reader has stopped: nothing more will be queued except what is owed.
    reader_done: bool,
    /// Writing failed (the client went away) or the connection was torn down: replies are
    /// dropped from now on.
    broken: bool,
}

/// One connection's outgoing side, shared by its reader, the owner thread and its writer thread.
///
/// Whoever has a reply writes it straight into the socket without blocking if nothing is
/// queued; otherwise (or for what the socket does not take) the reply is queued and the writer
/// thread writes it. Replies therefore never interleave and go out in the order they were given.
/// Owns a handle on the socket, so the descriptor stays open (and is never reused by another
/// connection) as long as anyone can still write to it.
#[derive(Debug)]
struct Outbox {
    conn: Conn,
    credits: Arc<Credits>,
    /// Replies the owner still owes (jobs sent to it, not yet answered). Raised by the reader
    /// without the lock (the owner may hold it while it writes), before it sets `reader_done`;
    /// lowered under the lock.
    owed: AtomicUsize,
    state: Mutex<OutState>,
    /// Wakes the writer thread: something queued, or nothing more to wait for.
    wake: Condvar,
}

/// A reply the owner owes a connection. [`Owed::deliver`] sends it; dropped undelivered (the
/// owner stopped or panicked), the connection stops waiting for it.
#[derive(Debug)]
struct Owed {
    outbox: Arc<Outbox>,
    credit: usize,
    delivered: bool,
}

impl Owed {
    fn deliver(mut self, bytes: Vec<u8>) {
        self.delivered = true;
        let credit = self.credit;
        self.outbox.settle(Some(Reply { bytes, credit }), credit);
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.delivered {
            self.outbox.settle(None, self.credit);
        }
    }
}

impl Outbox {
    fn new(conn: Conn, credits: Arc<Credits>) -> Self {
        Outbox {
            conn,
            credits,
            owed: AtomicUsize::new(0),
            state: Mutex::new(OutState::default()),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one more reply the owner will owe, for a job about to be sent to it.
    fn owe(self: &Arc<Self>, credit: usize) -> Owed {
        self.owed.fetch_add(1, Ordering::SeqCst);
        Owed {
            outbox: Arc::clone(self),
            credit,
            delivered: false,
        }
    }

    /// Sends `reply` (greeting, option replies, refusals from the reader).
    fn send(&self, reply: Reply) {
        let mut st = self.lock();
        self.push(&mut st, reply);
    }

    /// An owed reply is settled: sent (`Some`) or abandoned (`None`, its credit released).
    fn settle(&self, reply: Option<Reply>, credit: usize) {
        let mut st = self.lock();
        let owed = self.owed.fetch_sub(1, Ordering::SeqCst) - 1;
        match reply {
            Some(r) => self.push(&mut st, r),
            None => self.credits.release(credit),
        }
        if owed == 0 && st.reader_done {
            self.wake.notify_one();
        }
    }

    /// The reader stopped; the writer finishes once the owed replies are sent.
    fn reader_done(&self) {
        self.lock().reader_done = true;
        self.wake.notify_one();
    }

    /// Writes `reply` now if nothing is queued ahead of it and the socket takes it, else queues
    /// it for the writer thread.
    fn push(&self, st: &mut OutState, reply: Reply) {
        if st.broken {
            self.credits.release(reply.credit);
            return;
        }
        let mut sent = 0;
        if st.queue.is_empty() && !st.writing {
            let Ok(n) = self.conn.send_nonblocking(&reply.bytes) else {
                self.credits.release(reply.credit);
                self.break_off(st);
                return;
            };
            sent = n;
            if sent == reply.bytes.len() {
                self.credits.release(reply.credit);
                return;
            }
        }
        st.queue.push_back((reply, sent));
        self.wake.notify_one();
    }

    /// The client is gone: drop what is queued, wake a reader waiting for credit and the writer,
    /// and shut the socket so the reader stops too.
    fn break_off(&self, st: &mut OutState) {
        st.broken = true;
        for (r, _) in st.queue.drain(..) {
            self.credits.release(r.credit);
        }
        self.credits.close();
        let _ = self.conn.shutdown(Shutdown::Both);
        self.wake.notify_one();
    }
}

/// Per-connection flow control: a count and a byte budget of queued work.
#[derive(Debug)]
struct Credits {
    state: Mutex<CreditState>,
    freed: Condvar,
    max_count: usize,
    max_bytes: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct CreditState {
    /// Requests outstanding.
    count: usize,
    /// Bytes outstanding.
    bytes: usize,
    /// The connection is going away: no more credit.
    closed: bool,
    /// The reader waits for credit (so a release must wake it).
    waiting: bool,
}

impl Credits {
    fn new(max_count: usize, max_bytes: usize) -> Self {
        Credits {
            state: Mutex::new(CreditState::default()),
            freed: Condvar::new(),
            max_count,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CreditState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for room for one more item of `bytes`; false once the writer has gone.
    fn acquire(&self, bytes: usize) -> bool {
        let mut st = self.lock();
        loop {
            if st.closed {
                return false;
            }
            // An item larger than the whole budget runs when nothing else is queued.
            if st.count < self.max_count && (st.bytes + bytes <= self.max_bytes || st.count == 0) {
                st.count += 1;
                st.bytes += bytes;
                st.waiting = false;
                return true;
            }
            st.waiting = true;
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn release(&self, bytes: usize) {
        let mut st = self.lock();
        st.count = st.count.saturating_sub(1);
        st.bytes = st.bytes.saturating_sub(bytes);
        // A notify is a system call even with nobody waiting: only when the reader waits.
        let wake = st.waiting;
        drop(st);
        if wake {
            self.freed.notify_all();
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.freed.notify_all();
    }
}

#[derive(Debug)]
enum OwnerMsg {
    Job(Job),
    Shutdown,
}

/// A connection over TCP or a Unix socket.
#[derive(Debug)]
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    /// Writes as much of `buf` as the socket takes without waiting; `Ok(n)` with `n` short of
    /// `buf.len()` (possibly 0) when it would block.
    fn send_nonblocking(&self, buf: &[u8]) -> io::Result<usize> {
        let fd = match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        };
        let mut sent = 0;
        while sent < buf.len() {
            let rest = &buf[sent..];
            // Per call rather than O_NONBLOCK: the flag would be shared with the reader's and
            // the writer's blocking handles on the same socket. No SIGPIPE for a gone client.
            // SAFETY: `rest` is valid for `rest.len()` bytes; `fd` is open as long as `self`.
            let n = unsafe {
                libc::send(
                    fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if let Ok(n) = usize::try_from(n) {
                sent += n;
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => break,
                _ => return Err(e),
            }
        }
        Ok(sent)
    }

    /// Writes all of `buf`, waiting for the socket as long as it takes.
    fn send_blocking(&self, buf: &[u8]) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => (&*s).write_all(buf),
            Conn::Unix(s) => (&*s).write_all(buf),
        }
    }

    fn try_clone(&self) -> io::Result<Conn> {
        match self {
            Conn::Tcp(s) => s.try_clone().map(Conn::Tcp),
            Conn::Unix(s) => s.try_clone().map(Conn::Unix),
        }
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.shutdown(how),
            Conn::Unix(s) => s.shutdown(how),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

/// A bound NBD server whose backend is running; [`Server::run`] serves until shutdown.
#[derive(Debug)]
pub struct Server {
    config: ServeConfig,
    tcp: Option<TcpListener>,
    unix: Option<UnixListener>,
    exports: Arc<[ExportInfo]>,
    owner_tx: mpsc::Sender<OwnerMsg>,
    owner: JoinHandle<io::Result<()>>,
    counters: Arc<ConnCounters>,
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Checks what the protocol needs of the export list.
fn validate_exports(exports: &[ExportInfo]) -> io::Result<()> {
    for (i, e) in exports.iter().enumerate() {
        if !e.size_bytes.is_multiple_of(BLOCK_U64) {
            return Err(invalid_input(format!(
                "export {:?}: size {} is not a multiple of 4096",
                e.name, e.size_bytes
            )));
        }
        if e.name.len() > super::proto::MAX_STRING_LEN || e.name.contains('\0') {
            return Err(invalid_input(format!(
                "export {:?}: name too long or contains NUL",
                e.name
            )));
        }
        if e.description.len() > super::proto::MAX_STRING_LEN || e.description.contains('\0') {
            return Err(invalid_input(format!(
                "export {:?}: description too long or contains NUL",
                e.name
            )));
        }
        if exports[..i].iter().any(|o| o.name == e.name) {
            return Err(invalid_input(format!(
                "export name {:?} used twice",
                e.name
            )));
        }
    }
    Ok(())
}

fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        // A socket nobody answers on is left over from a server that died: replace it. One that
        // answers belongs to a running server: leave it alone.
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running server", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        Err(_) => {}
    }
    UnixListener::bind(path)
}

impl Server {
    /// Binds the listeners, then starts the owner thread, which builds the backend with
    /// `factory` (so the backend need not be `Send`) and reads its export list.
    ///
    /// Clients may connect as soon as this returns (the listeners are bound); they are served
    /// once [`Server::run`] is called. Errors: binding fails, `factory` fails, the export list
    /// is invalid (size not a multiple of 4096, duplicate or over-long name), or the limits are
    /// invalid (maximum request below 4096 bytes).
    pub fn start<B, F>(config: ServeConfig, factory: F) -> io::Result<Server>
    where
        B: Backend + 'static,
        F: FnOnce() -> io::Result<B> + Send + 'static,
    {
        if config.limits.max_request_bytes < PREFERRED_BLOCK_BYTES {
            return Err(invalid_input(format!(
                "max_request_bytes must be at least {PREFERRED_BLOCK_BYTES}"
            )));
        }
        if config.tcp.is_none() && config.unix.is_none() {
            return Err(invalid_input(
                "no TCP address and no Unix socket path to listen on".into(),
            ));
        }
        let tcp = config.tcp.map(TcpListener::bind).transpose()?;
        let unix = config.unix.as_deref().map(bind_unix).transpose()?;
        if let Some(l) = &tcp {
            l.set_nonblocking(true)?;
        }
        if let Some(l) = &unix {
            l.set_nonblocking(true)?;
        }

        let counters = Arc::new(ConnCounters::default());
        let (owner_tx, owner_rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<Vec<ExportInfo>>>();
        let stats_path = config.stats_path.clone();
        let stats_interval = config.stats_interval.max(Duration::from_millis(10));
        let owner_counters = Arc::clone(&counters);
        let owner = thread::Builder::new()
            .name("nbd-owner".into())
            .spawn(move || {
                let mut backend = match factory() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                let exports = backend.exports();
                if let Err(e) = validate_exports(&exports) {
                    let _ = ready_tx.send(Err(e));
                    // Nothing was served, but the backend was opened: let it close cleanly.
                    let _ = backend.shutdown();
                    return Ok(());
                }
                let _ = ready_tx.send(Ok(exports.clone()));
                owner_main(
                    backend,
                    &exports,
                    &owner_rx,
                    stats_path.as_deref(),
                    stats_interval,
                    &owner_counters,
                )
            })?;
        let exports = match ready_rx.recv() {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => {
                let _ = owner.join();
                if let Some(p) = &config.unix {
                    let _ = std::fs::remove_file(p);
                }
                return Err(e);
            }
            Err(_) => return Err(io::Error::other("backend factory panicked")),
        };
        Ok(Server {
            config,
            tcp,
            unix,
            exports: exports.into(),
            owner_tx,
            owner,
            counters,
        })
    }

    /// The bound TCP address (with the real port if the configuration asked for port 0).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The Unix socket path, if any.
    pub fn unix_path(&self) -> Option<&Path> {
        self.config.unix.as_deref()
    }

    /// The exports, as the backend listed them.
    pub fn exports(&self) -> &[ExportInfo] {
        &self.exports
    }

    /// The flag that stops [`Server::run`] when set.
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.config.shutdown)
    }

    /// Serves clients until the shutdown flag is set, then stops accepting, lets requests in
    /// flight finish (replies are sent for `shutdown_grace` at most), calls
    /// [`Backend::shutdown`], writes the final stats and returns.
    ///
    /// Errors: the backend's shutdown failed, or the backend panicked.
    pub fn run(self) -> io::Result<()> {
        let Server {
            config,
            tcp,
            unix,
            exports,
            owner_tx,
            owner,
            counters,
        } = self;
        let (done_tx, done_rx) = mpsc::channel::<u64>();
        let mut conns: HashMap<u64, ConnEntry> = HashMap::new();
        let mut next_id = 0u64;
        let shared = ConnShared {
            exports,
            limits: config.limits,
            inflight: config.max_inflight_per_connection.max(1),
            inflight_bytes: config.max_inflight_bytes_per_connection,
        };

        while !config.shutdown.load(Ordering::SeqCst) && !owner.is_finished() {
            let mut accepted = Vec::new();
            if let Some(l) = &tcp {
                match l.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nodelay(true);
                        accepted.push(s.set_nonblocking(false).map(|()| Conn::Tcp(s)));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => accepted.push(Err(e)),
                }
            }
            if let Some(l) = &unix {
                match l.accept() {
                    Ok((s, _)) => accepted.push(s.set_nonblocking(false).map(|()| Conn::Unix(s))),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => accepted.push(Err(e)),
                }
            }
            while let Ok(id) = done_rx.try_recv() {
                if let Some(c) = conns.remove(&id) {
                    let _ = c.thread.join();
                }
            }
            let idle = accepted.is_empty();
            for conn in accepted {
                let conn = match conn {
                    Ok(c) => c,
                    Err(e) => {
                        log::warn!("nbd: accept failed: {e}");
                        continue;
                    }
                };
                if conns.len() >= config.max_connections {
                    log::warn!("nbd: {} connections already, refusing another", conns.len());
                    continue;
                }
                let id = next_id;
                next_id += 1;
                match spawn_connection(id, conn, &shared, &owner_tx, &done_tx, &counters) {
                    Ok(entry) => {
                        conns.insert(id, entry);
                    }
                    Err(e) => log::warn!("nbd: cannot start connection thread: {e}"),
                }
            }
            if idle {
                thread::sleep(ACCEPT_POLL);
            }
        }

        // Stop accepting.
        drop(tcp);
        drop(unix);
        if let Some(p) = &config.unix {
            let _ = std::fs::remove_file(p);
        }
        // Stop reading requests (also in a reader waiting for credit); those already received
        // complete and their replies are sent.
        for c in conns.values() {
            let _ = c.conn.shutdown(Shutdown::Read);
            c.credits.close();
        }
        let deadline = Instant::now() + config.shutdown_grace;
        while !conns.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match done_rx.recv_timeout(left) {
                Ok(id) => {
                    if let Some(c) = conns.remove(&id) {
                        let _ = c.thread.join();
                    }
                }
                Err(_) => break,
            }
        }
        for (_, c) in conns.drain() {
            let _ = c.conn.shutdown(Shutdown::Both);
            let _ = c.thread.join();
        }
        let _ = owner_tx.send(OwnerMsg::Shutdown);
        drop(owner_tx);
        match owner.join() {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("nbd: the backend owner thread panicked")),
        }
    }
}

/// The accept loop's handle on one connection.
#[derive(Debug)]
struct ConnEntry {
    conn: Conn,
    credits: Arc<Credits>,
    thread: JoinHandle<()>,
}

/// What every connection thread needs.
#[derive(Debug)]
struct ConnShared {
    exports: Arc<[ExportInfo]>,
    limits: SessionLimits,
    inflight: usize,
    inflight_bytes: usize,
}

fn spawn_connection(
    id: u64,
    conn: Conn,
    shared: &ConnShared,
    owner_tx: &mpsc::Sender<OwnerMsg>,
    done_tx: &mpsc::Sender<u64>,
    counters: &Arc<ConnCounters>,
) -> io::Result<ConnEntry> {
    let handle = conn.try_clone()?;
    let exports = Arc::clone(&shared.exports);
    let limits = shared.limits;
    let credits = Arc::new(Credits::new(shared.inflight, shared.inflight_bytes));
    let thread_credits = Arc::clone(&credits);
    let owner_tx = owner_tx.clone();
    let done_tx = done_tx.clone();
    let counters = Arc::clone(counters);
    counters.active.fetch_add(1, Ordering::Relaxed);
    counters.total.fetch_add(1, Ordering::Relaxed);
    let thread_counters = Arc::clone(&counters);
    let spawned = thread::Builder::new()
        .name(format!("nbd-conn-{id}"))
        .spawn(move || {
            connection_main(id, conn, exports, limits, &thread_credits, &owner_tx);
            thread_counters.active.fetch_sub(1, Ordering::Relaxed);
            let _ = done_tx.send(id);
        });
    match spawned {
        Ok(h) => Ok(ConnEntry {
            conn: handle,
            credits,
            thread: h,
        }),
        Err(e) => {
            counters.active.fetch_sub(1, Ordering::Relaxed);
            Err(e)
        }
    }
}

/// The reader side of one connection; spawns and finally joins the writer.
fn connection_main(
    id: u64,
    mut conn: Conn,
    exports: Arc<[ExportInfo]>,
    limits: SessionLimits,
    credits: &Arc<Credits>,
    owner_tx: &mpsc::Sender<OwnerMsg>,
) {
    let outbox = match conn.try_clone() {
        Ok(w) => Arc::new(Outbox::new(w, Arc::clone(credits))),
        Err(e) => {
            log::warn!("nbd: connection {id}: {e}");
            return;
        }
    };
    let writer_outbox = Arc::clone(&outbox);
    let writer = match thread::Builder::new()
        .name(format!("nbd-write-{id}"))
        .spawn(move || writer_main(&writer_outbox))
    {
        Ok(w) => w,
        Err(e) => {
            log::warn!("nbd: connection {id}: cannot start writer: {e}");
            return;
        }
    };

    let mut session = Session::new(exports, limits);
    let mut buf = vec![0u8; READ_CHUNK];
    let end: Option<CloseReason> = 'conn: loop {
        while let Some(action) = session.next_action() {
            // Everything queued holds credit until its reply is sent.
            match action {
                Action::Send(bytes) => {
                    let credit = bytes.len();
                    if !credits.acquire(credit) {
                        break 'conn None;
                    }
                    outbox.send(Reply { bytes, credit });
                }
                Action::Execute(req) => {
                    let credit = proto::SIMPLE_REPLY_HEADER_LEN
                        + match &req.op {
                            Op::Read { length, .. } => *length as usize,
                            Op::Write { data, .. } => data.len(),
                            _ => 0,
                        };
                    if !credits.acquire(credit) {
                        break 'conn None;
                    }
                    let job = Job {
                        req,
                        received: Instant::now(),
                        reply_to: outbox.owe(credit),
                    };
                    if owner_tx.send(OwnerMsg::Job(job)).is_err() {
                        break 'conn None;
                    }
                }
                Action::Close(reason) => break 'conn Some(reason),
            }
        }
        match conn.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => session.feed(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break None,
        }
    };
    match end {
        Some(CloseReason::Protocol(why)) => {
            log::warn!("nbd: connection {id}: protocol error: {why}; disconnecting");
        }
        Some(CloseReason::UnknownExport(name)) => {
            log::warn!("nbd: connection {id}: unknown export {name:?}");
        }
        Some(r) => log::debug!("nbd: connection {id}: {r:?}"),
        None => log::debug!("nbd: connection {id}: closed by the client"),
    }
    // Requests cut short (e.g. half a write payload) were never queued. The writer waits for
    // the replies still owed, sends what is queued, then closes.
    outbox.reader_done();
    let _ = conn.shutdown(Shutdown::Read);
    let _ = writer.join();
}

/// A connection's writer thread: writes (blocking) what the socket did not take at once, in
/// order, until the reader has stopped and every owed reply is out; then closes the socket.
fn writer_main(out: &Outbox) {
    let mut st = out.lock();
    loop {
        if st.broken {
            return;
        }
        if let Some((reply, sent)) = st.queue.pop_front() {
            st.writing = true;
            drop(st);
            let ok = out.conn.send_blocking(&reply.bytes[sent..]).is_ok();
            st = out.lock();
            st.writing = false;
            out.credits.release(reply.credit);
            if !ok {
                out.break_off(&mut st);
                return;
            }
            continue;
        }
        if st.reader_done && out.owed.load(Ordering::SeqCst) == 0 {
            break;
        }
        st = out.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
    }
    // Nothing more can be sent: later sends (none are expected) are dropped.
    st.broken = true;
    drop(st);
    out.credits.close();
    let _ = out.conn.shutdown(Shutdown::Both);
}

/// The owner thread: the only place the backend is touched.
fn owner_main<B: Backend>(
    mut backend: B,
    exports: &[ExportInfo],
    rx: &mpsc::Receiver<OwnerMsg>,
    stats_path: Option<&Path>,
    interval: Duration,
    counters: &ConnCounters,
) -> io::Result<()> {
    let mut recorder = Recorder::new(exports);
    let mut next_stats = Instant::now() + interval;
    let write_stats = |recorder: &mut Recorder, backend: &B, is_final: bool| {
        if let Some(path) = stats_path {
            let snap = recorder.snapshot(counters, backend.stats_json(), is_final);
            if let Err(e) = stats::write_stats_file(path, &snap) {
                log::warn!("nbd: cannot write stats to {}: {e}", path.display());
            }
        }
    };
    loop {
        let msg = if stats_path.is_some() {
            let now = Instant::now();
            if now >= next_stats {
                write_stats(&mut recorder, &backend, false);
                next_stats = now + interval;
                continue;
            }
            match rx.recv_timeout(next_stats - now) {
                Ok(m) => m,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(m) => m,
                Err(_) => break,
            }
        };
        match msg {
            OwnerMsg::Job(job) => {
                let export = job.req.export;
                let outcome = exec::execute(&mut backend, exports, job.req);
                recorder.record(export, &outcome, job.received.elapsed());
                // Straight into the socket if it takes it (a closed connection drops it).
                job.reply_to.deliver(outcome.reply);
            }
            OwnerMsg::Shutdown => break,
        }
    }
    let result = backend.shutdown();
    write_stats(&mut recorder, &backend, true);
    result.map_err(|e| io::Error::other(format!("backend shutdown failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(byte: u8, len: usize) -> Reply {
        Reply {
            bytes: vec![byte; len],
            credit: len,
        }
    }

    #[test]
    fn outbox_keeps_replies_whole_and_in_order_when_the_socket_is_full() {
        let (ours, mut client) = UnixStream::pair().unwrap();
        let credits = Arc::new(Credits::new(16, 64 << 20));
        let out = Arc::new(Outbox::new(Conn::Unix(ours), Arc::clone(&credits)));
        let big = 8 << 20;
        for len in [big, 100] {
            assert!(credits.acquire(len));
        }
        // Far more than a socket buffer: the socket takes a part, the rest is queued.
        let owed = out.owe(big);
        owed.deliver(reply(1, big).bytes);
        assert_eq!(out.lock().queue.len(), 1);
        // Room in the socket again, but a reply is queued: this one must wait behind it.
        let mut head = vec![0u8; 64 << 10];
        client.read_exact(&mut head).unwrap();
        assert!(head.iter().all(|&b| b == 1));
        out.send(reply(2, 100));
        assert_eq!(out.lock().queue.len(), 2);
        // The writer sends the rest in order and closes once the reader is done.
        let w = Arc::clone(&out);
        let writer = thread::spawn(move || writer_main(&w));
        out.reader_done();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).unwrap();
        writer.join().unwrap();
        assert_eq!(head.len() + rest.len(), big + 100);
        let ones = big - head.len();
        assert!(rest[..ones].iter().all(|&b| b == 1));
        assert!(rest[ones..].iter().all(|&b| b == 2));
        // Every credit came back.
        let st = *credits.lock();
        assert_eq!((st.count, st.bytes, st.closed), (0, 0, true));
    }

    #[test]
    fn an_undelivered_reply_releases_its_credit_and_the_writer_finishes() {
        let (ours, mut client) = UnixStream::pair().unwrap();
        let credits = Arc::new(Credits::new(16, 1 << 20));
        let out = Arc::new(Outbox::new(Conn::Unix(ours), Arc::clone(&credits)));
        assert!(credits.acquire(16));
        let owed = out.owe(16);
        let w = Arc::clone(&out);
        let writer = thread::spawn(move || writer_main(&w));
        out.reader_done();
        // The owner stopped without answering (its queue was dropped).
        drop(owed);
        writer.join().unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        let st = *credits.lock();
        assert_eq!((st.count, st.bytes, st.closed), (0, 0, true));
    }

    #[test]
    fn a_gone_client_breaks_the_outbox_and_wakes_the_reader() {
        let (ours, client) = UnixStream::pair().unwrap();
        drop(client);
        let credits = Arc::new(Credits::new(16, 1 << 20));
        let out = Arc::new(Outbox::new(Conn::Unix(ours), Arc::clone(&credits)));
        assert!(credits.acquire(16));
        out.owe(16).deliver(vec![0; 16]);
        assert!(out.lock().broken);
        // A reader waiting for credit would now give up.
        assert!(!credits.acquire(1));
        assert_eq!(credits.lock().bytes, 0);
    }
}
