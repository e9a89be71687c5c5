//! Sockets and threads: the accept loop, one owner thread that reads and runs every request, and
//! one writer thread per connection for replies the socket did not take at once.
//!
//! ```text
//!  client ──► owner thread (epoll over every connection: Session, Backend, stats) ──reply──┐
//!  client ◄──────────────────────────── (socket takes it at once) ◄───────────────────────┤
//!  client ◄── writer thread ◄────────── (socket full: queued) ◄────────────────────────────┘
//! ```
//! The owner waits in `epoll_wait` for any connection to have bytes, reads them without blocking
//! (`MSG_DONTWAIT`), feeds the connection's [`Session`], runs each request it yields and writes
//! the reply into the client's socket itself, without blocking. A request thus crosses no thread
//! hand-off at all: a client's request wakes the owner, the owner's reply wakes the client, as
//! with a server that runs each connection on its own thread, but one thread owns the backend.
//! Connections take turns: each ready connection gets one read and at most
//! [`REQUESTS_PER_TURN`] requests before the next one is served.
//!
//! What the socket does not take at once (a client that stops reading, a large read) is queued
//! in the connection's `Outbox`, and the connection's writer thread writes it, blocking, in
//! order; replies behind it queue too. Once `max_inflight_per_connection` replies or
//! `max_inflight_bytes_per_connection` bytes are queued, the owner stops reading that connection
//! until its writer has sent them, which bounds memory per connection; so a slow client only
//! slows itself and never stalls the owner. A reply is produced only once the backend call
//! returned, so a flush or FUA write is answered only after its data is durable.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::backend::{BLOCK_U64, Backend, ExportInfo};
use super::exec;
use super::session::{Action, CloseReason, PREFERRED_BLOCK_BYTES, Session, SessionLimits};
use super::stats::{self, ConnCounters, Recorder};

/// Default TCP address: loopback, the IANA NBD port.
pub const DEFAULT_TCP: &str = "127.0.0.1:10809";

/// How often the accept loop looks at the shutdown flag when no client connects.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 256 << 10;
/// Requests the owner runs for one connection before it turns to the next ready one.
pub const REQUESTS_PER_TURN: usize = 16;
/// The epoll token of the owner's wake-up socket (connection ids count up from 0).
const WAKE_TOKEN: u64 = u64::MAX;

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
    /// Connections served at once. When they are all taken, a new client evicts the oldest
    /// connection still negotiating (one that never chose an export, such as a socket that
    /// connects and sends nothing); when every connection is in transmission, the new client
    /// is closed at once. Default 64.
    pub max_connections: usize,
    /// How long a client may take from connecting to choosing an export (the TLS handshake
    /// included) before it is disconnected. Default 10 s.
    pub handshake_timeout: Duration,
    /// TLS for TCP clients (`None`: plaintext): clients must start TLS (`NBD_OPT_STARTTLS`)
    /// before anything else, as with nbdkit's `--tls=require`; Unix-socket clients are served
    /// in plaintext. See [`super::tls::server_config`].
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The control channel: a Unix socket (made owner-only, mode 0600) on which each line is
    /// a request for [`Backend::control`] and each answer a line (`None`: none). A stale
    /// socket file is replaced, as for [`ServeConfig::unix`]; it is removed when the server
    /// stops.
    pub control: Option<PathBuf>,
    /// Replies a connection may have queued (not yet taken by its socket) before the server
    /// stops reading its requests. Default 64.
    pub max_inflight_per_connection: usize,
    /// Bytes of replies a connection may have queued before the server stops reading its
    /// requests. A single reply larger than this is still sent (alone). Default 64 MiB.
    pub max_inflight_bytes_per_connection: usize,
    /// How long a stopping server waits for clients to take their last replies before it drops
    /// them. Default 10 s.
    pub shutdown_grace: Duration,
    /// Set this (e.g. from a signal handler, see [`super::install_shutdown_signals`]) to stop
    /// the server: it stops accepting and reading requests, sends the replies to those it ran,
    /// shuts the backend down and [`Server::run`] returns.
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
            handshake_timeout: Duration::from_secs(10),
            tls: None,
            control: None,
            max_inflight_per_connection: 64,
            max_inflight_bytes_per_connection: 64 << 20,
            shutdown_grace: Duration::from_secs(10),
            shutdown: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// What the accept loop and the writer threads tell the owner thread.
#[derive(Debug)]
enum OwnerMsg {
    /// A new connection to serve: its id, a handle to read from, its outbox, and, for a
    /// connection that started TLS, the session that asked for it (the owner goes on with
    /// [`Session::after_tls`]).
    Conn(u64, Conn, Arc<Outbox>, Option<Session>),
    /// The connection's writer sent enough of its queue: read its requests again.
    Resume(u64),
    /// Stop reading requests from every connection (the server is stopping).
    StopReading,
    /// A control-channel request, and where its answer goes.
    Control(String, mpsc::Sender<String>),
    /// Shut the backend down and return.
    Shutdown,
}

/// The way to the owner thread: a channel, and a socket whose readability wakes the owner from
/// `epoll_wait`.
#[derive(Debug)]
struct Ctl {
    tx: mpsc::Sender<OwnerMsg>,
    wake: UnixStream,
}

impl Ctl {
    /// A control channel, the receiving end and the socket the owner watches.
    fn new() -> io::Result<(Ctl, mpsc::Receiver<OwnerMsg>, UnixStream)> {
        let (tx, rx) = mpsc::channel();
        let (wake, watched) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        watched.set_nonblocking(true)?;
        Ok((Ctl { tx, wake }, rx, watched))
    }

    /// Sends `msg` and wakes the owner; false once the owner has stopped.
    fn post(&self, msg: OwnerMsg) -> bool {
        if self.tx.send(msg).is_err() {
            return false;
        }
        // A full wake socket already holds a pending wake-up: nothing is lost.
        let _ = (&self.wake).write(&[1]);
        true
    }
}

/// Whether the owner reads a connection's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Reader {
    /// It reads them.
    #[default]
    Reading,
    /// It stopped because too much was queued; the writer resumes it.
    Paused,
    /// It has stopped for good: nothing more will be queued.
    Done,
}

/// What is queued on a connection's [`Outbox`] and who is writing.
#[derive(Debug, Default)]
struct OutState {
    /// Replies the socket did not take at once, in order, each with the bytes already sent.
    queue: VecDeque<(Vec<u8>, usize)>,
    /// Bytes of the replies queued or being written by the writer thread.
    queued_bytes: usize,
    /// The writer thread is writing a reply it took off the queue.
    writing: bool,
    /// Whether the owner reads this connection.
    reader: Reader,
    /// Writing failed (the client went away) or the connection was torn down: replies are
    /// dropped from now on.
    broken: bool,
}

impl OutState {
    /// Replies queued or being written.
    fn count(&self) -> usize {
        self.queue.len() + usize::from(self.writing)
    }
}

/// One connection's outgoing side, shared by the owner thread and the connection's writer.
///
/// The owner writes each reply straight into the socket without blocking if nothing is queued;
/// otherwise (or for what the socket does not take) the reply is queued and the writer thread
/// writes it. Replies therefore never interleave and go out in the order they were given.
/// Owns a handle on the socket, so the descriptor stays open (and is never reused by another
/// connection) as long as anyone can still write to it.
#[derive(Debug)]
struct Outbox {
    id: u64,
    conn: Conn,
    /// The client has chosen an export (set by the owner; read by the accept loop, which
    /// evicts and times out connections still negotiating).
    negotiated: Arc<AtomicBool>,
    max_count: usize,
    max_bytes: usize,
    /// Tells the owner to resume reading (`None` in unit tests without an owner).
    ctl: Option<Arc<Ctl>>,
    state: Mutex<OutState>,
    /// Wakes the writer thread: something queued, or nothing more to wait for.
    wake: Condvar,
}

impl Outbox {
    fn new(id: u64, conn: Conn, max_count: usize, max_bytes: usize, ctl: Option<Arc<Ctl>>) -> Self {
        Outbox {
            id,
            conn,
            negotiated: Arc::default(),
            max_count: max_count.max(1),
            max_bytes,
            ctl,
            state: Mutex::new(OutState::default()),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `reply` now if nothing is queued ahead of it and the socket takes it, else queues
    /// it for the writer thread. False if the connection is broken (the reply is dropped).
    fn send(&self, reply: Vec<u8>) -> bool {
        let mut st = self.lock();
        if st.broken {
            return false;
        }
        let mut sent = 0;
        if st.count() == 0 {
            let Ok(n) = self.conn.send_nonblocking(&reply) else {
                self.break_off(&mut st);
                return false;
            };
            sent = n;
            if sent == reply.len() {
                return true;
            }
        }
        st.queued_bytes += reply.len();
        st.queue.push_back((reply, sent));
        self.wake.notify_one();
        true
    }

    /// True if too much is queued to read more requests; then the writer resumes the owner's
    /// reading once it has sent enough. A single reply over the byte budget is let through.
    fn pause_if_backed_up(&self) -> bool {
        let mut st = self.lock();
        let full =
            st.count() >= self.max_count || (st.count() > 0 && st.queued_bytes >= self.max_bytes);
        if full && !st.broken && st.reader == Reader::Reading {
            st.reader = Reader::Paused;
        }
        full && !st.broken
    }

    /// The owner stopped reading; the writer finishes once the queue is sent.
    fn reader_done(&self) {
        let mut st = self.lock();
        st.reader = Reader::Done;
        self.wake.notify_one();
    }

    /// A paused owner may read this connection again.
    fn resume(&self, st: &mut OutState) {
        if st.reader == Reader::Paused {
            st.reader = Reader::Reading;
            if let Some(ctl) = &self.ctl {
                ctl.post(OwnerMsg::Resume(self.id));
            }
        }
    }

    /// The client is gone: drop what is queued, wake the writer, tell a paused owner, and shut
    /// the socket so the owner sees the end of the connection.
    fn break_off(&self, st: &mut OutState) {
        st.broken = true;
        st.queue.clear();
        st.queued_bytes = 0;
        let _ = self.conn.shutdown(Shutdown::Both);
        self.resume(st);
        self.wake.notify_one();
    }
}

/// A Linux epoll instance (level-triggered) watching sockets for input.
#[derive(Debug)]
struct Epoll(OwnedFd);

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: see above.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for input (and hang-up), reported with `token`.
    fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        #[allow(clippy::cast_sign_loss)] // the flag constants are small positive values
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &raw mut ev) })
            .map(drop)
    }

    /// Stops watching `fd`.
    fn remove(&self, fd: RawFd) {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL (since Linux 2.6.9).
        let _ = unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout` (`None`: for ever) for input; the tokens of the ready descriptors
    /// are put in `tokens`. An interrupted wait returns no tokens.
    fn wait(
        &self,
        events: &mut [libc::epoll_event],
        timeout: Option<Duration>,
        tokens: &mut Vec<u64>,
    ) -> io::Result<()> {
        let ms = timeout.map_or(-1, |t| {
            // Round up, so that the wait does not end just before the deadline.
            i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
        });
        let max = i32::try_from(events.len()).unwrap_or(i32::MAX);
        // SAFETY: `events` is valid for `max` entries.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), max, ms) };
        let Ok(n) = usize::try_from(n) else {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        };
        tokens.extend(events.iter().take(n).map(|e| e.u64));
        Ok(())
    }
}

/// A connection over TCP or a Unix socket.
#[derive(Debug)]
pub(super) enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn raw_fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }

    /// Reads what the socket holds without waiting: `Ok(None)` if it holds nothing yet,
    /// `Ok(Some(0))` at the end of the stream.
    fn recv_nonblocking(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // Per call rather than O_NONBLOCK, which the writer's blocking handle would share.
            // SAFETY: `buf` is valid for `buf.len()` bytes; the descriptor is open as long as
            // `self`.
            let n = unsafe {
                libc::recv(
                    self.raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if let Ok(n) = usize::try_from(n) {
                return Ok(Some(n));
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// Writes as much of `buf` as the socket takes without waiting; `Ok(n)` with `n` short of
    /// `buf.len()` (possibly 0) when it would block.
    fn send_nonblocking(&self, buf: &[u8]) -> io::Result<usize> {
        let fd = self.raw_fd();
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
        if !e.removed && exports[..i].iter().any(|o| !o.removed && o.name == e.name) {
            return Err(invalid_input(format!(
                "export name {:?} used twice",
                e.name
            )));
        }
    }
    Ok(())
}

fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    clear_stale_socket(path)?;
    UnixListener::bind(path).map_err(|e| with_path(&e, path.display()))
}

/// `e`, naming the socket or address it is about (`Address already in use` alone does not
/// say which).
fn with_path(e: &io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Binds the control socket at `path` so that only this user can connect: bound under a
/// temporary name, made mode 0600, then renamed into place (no moment where another user
/// could connect).
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    clear_stale_socket(path)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let l = UnixListener::bind(&tmp).map_err(|e| with_path(&e, tmp.display()))?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(with_path(&e, path.display()));
    }
    Ok(l)
}

/// Removes a socket file at `path` that no server answers on (left by one that died); refuses
/// one that answers, and any other kind of file.
fn clear_stale_socket(path: &Path) -> io::Result<()> {
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
    Ok(())
}

/// A bound NBD server whose backend is running; [`Server::run`] serves until shutdown.
#[derive(Debug)]
pub struct Server {
    config: ServeConfig,
    tcp: Option<TcpListener>,
    unix: Option<UnixListener>,
    control: Option<UnixListener>,
    exports: Arc<[ExportInfo]>,
    ctl: Arc<Ctl>,
    owner: JoinHandle<io::Result<()>>,
    counters: Arc<ConnCounters>,
}

/// The listeners of a server: NBD on TCP and on a Unix socket, the control channel.
type Listeners = (
    Option<TcpListener>,
    Option<UnixListener>,
    Option<UnixListener>,
);

/// Checks the limits of `config` and binds its listeners (non-blocking, for the accept loop).
fn listen(config: &ServeConfig) -> io::Result<Listeners> {
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
    let tcp = config
        .tcp
        .map(|a| TcpListener::bind(a).map_err(|e| with_path(&e, a)))
        .transpose()?;
    let unix = config.unix.as_deref().map(bind_unix).transpose()?;
    let control = match config.control.as_deref().map(bind_private).transpose() {
        Ok(c) => c,
        Err(e) => {
            if let Some(p) = &config.unix {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    if let Some(l) = &tcp {
        l.set_nonblocking(true)?;
    }
    for l in [&unix, &control].into_iter().flatten() {
        l.set_nonblocking(true)?;
    }
    Ok((tcp, unix, control))
}

/// The owner thread: builds the backend with `factory`, reports its exports (or why there are
/// none) on `ready`, and serves them with the [`Owner`] `make_owner` builds.
fn owner_main<B: Backend>(
    factory: impl FnOnce() -> io::Result<B>,
    ready: &mpsc::Sender<io::Result<Vec<ExportInfo>>>,
    make_owner: impl FnOnce(Arc<[ExportInfo]>) -> Owner,
    counters: &ConnCounters,
) -> io::Result<()> {
    let mut backend = match factory() {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(());
        }
    };
    let exports = backend.exports();
    if let Err(e) = validate_exports(&exports) {
        let _ = ready.send(Err(e));
        // Nothing was served, but the backend was opened: let it close cleanly.
        let _ = backend.shutdown();
        return Ok(());
    }
    let _ = ready.send(Ok(exports.clone()));
    make_owner(exports.into()).run(backend, counters)
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
        let (tcp, unix, control) = listen(&config)?;
        let counters = Arc::new(ConnCounters::default());
        let (ctl, owner_rx, watched) = Ctl::new()?;
        let epoll = Epoll::new()?;
        epoll.add(watched.as_raw_fd(), WAKE_TOKEN)?;
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<Vec<ExportInfo>>>();
        let cfg = OwnerConfig {
            stats_path: config.stats_path.clone(),
            stats_interval: config.stats_interval.max(Duration::from_millis(10)),
            limits: config.limits,
        };
        let make_owner = move |exports| Owner {
            exports,
            epoll,
            watched,
            rx: owner_rx,
            cfg,
            conns: HashMap::new(),
            backlog: Vec::new(),
            buf: vec![0u8; READ_CHUNK],
            next_tick: Some(Instant::now()),
        };
        let owner_counters = Arc::clone(&counters);
        let owner = thread::Builder::new()
            .name("nbd-owner".into())
            .spawn(move || owner_main(factory, &ready_tx, make_owner, &owner_counters))?;
        let exports = match ready_rx.recv() {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => {
                let _ = owner.join();
                for p in [&config.unix, &config.control].into_iter().flatten() {
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
            control,
            exports: exports.into(),
            ctl: Arc::new(ctl),
            owner,
            counters,
        })
    }

    /// The bound TCP address (with the real port if the configuration asked for port 0).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Whether TCP clients must start TLS.
    pub fn tls(&self) -> bool {
        self.config.tls.is_some()
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

    /// Serves clients until the shutdown flag is set, then stops accepting and reading requests,
    /// sends the replies to the requests already run (for `shutdown_grace` at most), calls
    /// [`Backend::shutdown`], writes the final stats and returns.
    ///
    /// Errors: the backend's shutdown failed, or the backend panicked.
    pub fn run(self) -> io::Result<()> {
        let Server {
            config,
            tcp,
            unix,
            control,
            exports: _,
            ctl,
            owner,
            counters,
        } = self;
        let mut accepted = Accepted::new();
        while !config.shutdown.load(Ordering::SeqCst) && !owner.is_finished() {
            let new = accept(tcp.as_ref(), unix.as_ref());
            accepted.reap();
            accepted.expire(config.handshake_timeout);
            let mut idle = new.is_empty();
            for conn in new {
                accepted.admit(conn, &config, &ctl, &counters);
            }
            if let Some(l) = &control {
                match l.accept() {
                    Ok((s, _)) => {
                        idle = false;
                        spawn_control(s, &ctl);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => log::warn!("control: accept failed: {e}"),
                }
            }
            if idle {
                thread::sleep(ACCEPT_POLL);
            }
        }

        // Stop accepting.
        drop(tcp);
        drop(unix);
        drop(control);
        for p in [&config.unix, &config.control].into_iter().flatten() {
            let _ = std::fs::remove_file(p);
        }
        // Stop reading requests; those already run have their replies sent.
        ctl.post(OwnerMsg::StopReading);
        accepted.drain(config.shutdown_grace);
        ctl.post(OwnerMsg::Shutdown);
        drop(ctl);
        match owner.join() {
            Ok(r) => r,
            Err(_) => Err(io::Error::other("nbd: the backend owner thread panicked")),
        }
    }
}

/// The connections waiting on the listeners, accepted without blocking.
fn accept(tcp: Option<&TcpListener>, unix: Option<&UnixListener>) -> Vec<io::Result<Conn>> {
    let mut accepted = Vec::new();
    if let Some(l) = tcp {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                accepted.push(s.set_nonblocking(false).map(|()| Conn::Tcp(s)));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => accepted.push(Err(e)),
        }
    }
    if let Some(l) = unix {
        match l.accept() {
            Ok((s, _)) => accepted.push(s.set_nonblocking(false).map(|()| Conn::Unix(s))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => accepted.push(Err(e)),
        }
    }
    accepted
}

/// The accept loop's connections by id, and the channel their writer threads report their
/// end on.
struct Accepted {
    conns: HashMap<u64, ConnEntry>,
    /// Connections evicted or timed out, whose threads are still ending.
    dying: Vec<ConnEntry>,
    next_id: u64,
    done_tx: mpsc::Sender<u64>,
    done_rx: mpsc::Receiver<u64>,
}

impl Accepted {
    fn new() -> Accepted {
        let (done_tx, done_rx) = mpsc::channel::<u64>();
        Accepted {
            conns: HashMap::new(),
            dying: Vec::new(),
            next_id: 0,
            done_tx,
            done_rx,
        }
    }

    /// Joins the writer threads of connections that ended.
    fn reap(&mut self) {
        while let Ok(id) = self.done_rx.try_recv() {
            if let Some(c) = self.conns.remove(&id) {
                let _ = c.thread.join();
            }
        }
        let (done, dying): (Vec<_>, Vec<_>) = std::mem::take(&mut self.dying)
            .into_iter()
            .partition(|c| c.thread.is_finished());
        self.dying = dying;
        for c in done {
            let _ = c.thread.join();
        }
    }

    /// Disconnects connection `id` (it ends on its own; its thread is joined later).
    fn drop_conn(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            let _ = c.conn.shutdown(Shutdown::Both);
            self.dying.push(c);
        }
    }

    /// Disconnects the connections that have not chosen an export within `timeout`.
    fn expire(&mut self, timeout: Duration) {
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.negotiated.load(Ordering::Relaxed) && c.since.elapsed() > timeout)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            log::info!(
                "nbd: connection {id}: no export chosen within {} s; disconnected",
                timeout.as_secs_f64()
            );
            self.drop_conn(id);
        }
    }

    /// Makes room for a new connection: disconnects the oldest one still negotiating. False
    /// if every connection is in transmission.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .conns
            .iter()
            .filter(|(_, c)| !c.negotiated.load(Ordering::Relaxed))
            .min_by_key(|(id, _)| **id)
            .map(|(&id, _)| id);
        match oldest {
            Some(id) => {
                log::info!("nbd: connection {id}: disconnected to make room (it chose no export)");
                self.drop_conn(id);
                true
            }
            None => false,
        }
    }

    /// Starts serving `conn`, unless accepting failed or there are enough connections.
    fn admit(
        &mut self,
        conn: io::Result<Conn>,
        config: &ServeConfig,
        ctl: &Arc<Ctl>,
        counters: &Arc<ConnCounters>,
    ) {
        let conn = match conn {
            Ok(c) => c,
            Err(e) => {
                log::warn!("nbd: accept failed: {e}");
                return;
            }
        };
        if self.conns.len() >= config.max_connections.max(1) && !self.evict_one() {
            log::warn!(
                "nbd: {} connections in transmission already (--max-connections), refusing \
                 another",
                self.conns.len()
            );
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let ctx = ConnCtx {
            ctl: Arc::clone(ctl),
            counters: Arc::clone(counters),
            done_tx: self.done_tx.clone(),
            max_inflight: config.max_inflight_per_connection,
            max_inflight_bytes: config.max_inflight_bytes_per_connection,
            tls: config.tls.clone(),
            limits: config.limits,
        };
        match start_connection(id, conn, &ctx) {
            Ok(entry) => {
                self.conns.insert(id, entry);
            }
            Err(e) => log::warn!("nbd: cannot start connection {id}: {e}"),
        }
    }

    /// Once the owner stopped reading: waits `grace` at most for the connections to send
    /// their last replies and end, then shuts the rest down.
    fn drain(mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while !self.conns.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done_rx.recv_timeout(left) {
                Ok(id) => {
                    if let Some(c) = self.conns.remove(&id) {
                        let _ = c.thread.join();
                    }
                }
                Err(_) => break,
            }
        }
        for (_, c) in self.conns.drain() {
            let _ = c.conn.shutdown(Shutdown::Both);
            let _ = c.thread.join();
        }
        for c in self.dying {
            let _ = c.thread.join();
        }
    }
}

/// The accept loop's handle on one connection.
#[derive(Debug)]
struct ConnEntry {
    conn: Conn,
    /// The connection's writer thread; it ends last.
    thread: JoinHandle<()>,
    /// The client has chosen an export.
    negotiated: Arc<AtomicBool>,
    /// When it connected.
    since: Instant,
}

/// What starting a connection needs: the way to the owner, the counters, the accept loop's
/// channel for ended connections, the per-connection limits and the TLS configuration.
#[derive(Clone, Debug)]
pub(super) struct ConnCtx {
    ctl: Arc<Ctl>,
    counters: Arc<ConnCounters>,
    done_tx: mpsc::Sender<u64>,
    max_inflight: usize,
    max_inflight_bytes: usize,
    /// TLS for TCP connections (`None`: plaintext).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The NBD limits (for the session before TLS).
    pub limits: SessionLimits,
}

/// A connection handed to [`spawn_connection`].
#[derive(Debug)]
pub(super) struct NewConn {
    /// Its id.
    pub id: u64,
    /// Its socket (for TLS: the plaintext end of the pump's socket pair).
    pub conn: Conn,
    /// Set once the client chose an export.
    pub negotiated: Arc<AtomicBool>,
    /// The session that started TLS, if it did.
    pub before_tls: Option<Session>,
    /// Report the end on the accept loop's channel (not for TLS: its pump thread does).
    pub report_end: bool,
}

/// Starts a connection's writer thread and hands the connection to the owner; the writer's
/// handle.
pub(super) fn spawn_connection(n: NewConn, ctx: &ConnCtx) -> io::Result<JoinHandle<()>> {
    let NewConn {
        id,
        conn,
        negotiated,
        before_tls,
        report_end,
    } = n;
    let reader = conn.try_clone()?;
    let mut outbox = Outbox::new(
        id,
        conn,
        ctx.max_inflight,
        ctx.max_inflight_bytes,
        Some(Arc::clone(&ctx.ctl)),
    );
    outbox.negotiated = negotiated;
    let outbox = Arc::new(outbox);
    let writer_outbox = Arc::clone(&outbox);
    let done_tx = report_end.then(|| ctx.done_tx.clone());
    let thread_counters = Arc::clone(&ctx.counters);
    let thread = thread::Builder::new()
        .name(format!("nbd-write-{id}"))
        .spawn(move || {
            writer_main(&writer_outbox);
            thread_counters.active.fetch_sub(1, Ordering::Relaxed);
            if let Some(tx) = done_tx {
                let _ = tx.send(id);
            }
        })?;
    ctx.counters.active.fetch_add(1, Ordering::Relaxed);
    ctx.counters.total.fetch_add(1, Ordering::Relaxed);
    if !ctx
        .ctl
        .post(OwnerMsg::Conn(id, reader, Arc::clone(&outbox), before_tls))
    {
        // The owner has stopped: let the writer finish at once.
        outbox.reader_done();
    }
    Ok(thread)
}

/// Starts connection `id`: over TLS (a pump thread that does the STARTTLS negotiation and
/// then carries the plaintext to the owner, [`super::tls`]) for TCP when TLS is configured,
/// else directly.
fn start_connection(id: u64, conn: Conn, ctx: &ConnCtx) -> io::Result<ConnEntry> {
    let handle = conn.try_clone()?;
    let negotiated: Arc<AtomicBool> = Arc::default();
    let thread = match (&conn, &ctx.tls) {
        (Conn::Tcp(_), Some(_)) => {
            let (c, n) = (ctx.clone(), Arc::clone(&negotiated));
            let Conn::Tcp(tcp) = conn else {
                return Err(io::Error::other("not TCP"));
            };
            thread::Builder::new()
                .name(format!("nbd-tls-{id}"))
                .spawn(move || super::tls::pump_main(id, &tcp, &c, n))?
        }
        _ => spawn_connection(
            NewConn {
                id,
                conn,
                negotiated: Arc::clone(&negotiated),
                before_tls: None,
                report_end: true,
            },
            ctx,
        )?,
    };
    Ok(ConnEntry {
        conn: handle,
        thread,
        negotiated,
        since: Instant::now(),
    })
}

impl ConnCtx {
    /// Tells the accept loop that connection `id` ended (TLS pump threads, at their end).
    pub(super) fn report_end(&self, id: u64) {
        let _ = self.done_tx.send(id);
    }
}

/// Longest control-channel request, in bytes.
const MAX_CONTROL_LINE: u64 = 1 << 20;

/// Serves one control-channel connection on a thread of its own: each line is handed to the
/// owner thread, which answers it between client requests.
fn spawn_control(stream: UnixStream, ctl: &Arc<Ctl>) {
    if let Err(e) = stream
        .set_nonblocking(false)
        .and_then(|()| check_peer(&stream))
    {
        log::warn!("control: connection refused: {e}");
        return;
    }
    let ctl = Arc::clone(ctl);
    let spawned = thread::Builder::new()
        .name("nbd-control".into())
        .spawn(move || {
            if let Err(e) = control_main(stream, &ctl) {
                log::debug!("control: connection ended: {e}");
            }
        });
    if let Err(e) = spawned {
        log::warn!("control: cannot start a thread: {e}");
    }
}

/// Refuses a control client of another user (the socket's mode already keeps them out; this
/// holds even if someone loosened it).
fn check_peer(stream: &UnixStream) -> io::Result<()> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for the call; the descriptor is open.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    cvt(r)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if cred.uid == me || cred.uid == 0 {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("user {} is not this server's owner", cred.uid),
        ))
    }
}

/// Reads request lines, has the owner answer each, writes the answers back.
fn control_main(stream: UnixStream, ctl: &Ctl) -> io::Result<()> {
    use std::io::BufRead;
    let mut reader = io::BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut line = String::new();
        let n = (&mut reader).take(MAX_CONTROL_LINE).read_line(&mut line)?;
        if n == 0 {
            return Ok(());
        }
        if !line.ends_with('\n') {
            return Err(invalid_input("request line too long or cut off".into()));
        }
        let (tx, rx) = mpsc::channel();
        if !ctl.post(OwnerMsg::Control(line.trim_end().to_string(), tx)) {
            return Ok(());
        }
        let Ok(mut answer) = rx.recv() else {
            return Ok(());
        };
        answer.push('\n');
        out.write_all(answer.as_bytes())?;
    }
}

/// A connection's writer thread: writes (blocking) what the socket did not take at once, in
/// order, until the owner has stopped reading the connection and the queue is empty; then
/// closes the socket.
fn writer_main(out: &Outbox) {
    let mut st = out.lock();
    loop {
        if st.broken {
            return;
        }
        if let Some((reply, sent)) = st.queue.pop_front() {
            st.writing = true;
            drop(st);
            let ok = out.conn.send_blocking(&reply[sent..]).is_ok();
            st = out.lock();
            st.writing = false;
            st.queued_bytes = st.queued_bytes.saturating_sub(reply.len());
            if !ok {
                out.break_off(&mut st);
                return;
            }
            // Resume the owner's reading once half the budget is free again, not at every reply.
            if st.count() <= out.max_count / 2 && st.queued_bytes <= out.max_bytes / 2 {
                out.resume(&mut st);
            }
            continue;
        }
        if st.reader == Reader::Done {
            break;
        }
        out.resume(&mut st);
        st = out.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
    }
    // Nothing more can be sent: later sends (none are expected) are dropped.
    st.broken = true;
    drop(st);
    let _ = out.conn.shutdown(Shutdown::Both);
}

/// What the owner thread needs from the configuration.
#[derive(Debug)]
struct OwnerConfig {
    stats_path: Option<PathBuf>,
    stats_interval: Duration,
    limits: SessionLimits,
}

/// A connection as the owner thread sees it.
#[derive(Debug)]
struct Live {
    session: Session,
    /// A handle on the socket to read from.
    reader: Conn,
    outbox: Arc<Outbox>,
    /// Not watched for input until the writer has sent part of its queue.
    paused: bool,
    /// The session has chosen an export (told to the accept loop through the outbox).
    negotiated: bool,
}

/// The owner thread's state: the only place the backend is touched.
struct Owner {
    exports: Arc<[ExportInfo]>,
    epoll: Epoll,
    /// The socket [`Ctl::post`] writes to.
    watched: UnixStream,
    rx: mpsc::Receiver<OwnerMsg>,
    cfg: OwnerConfig,
    conns: HashMap<u64, Live>,
    /// Connections that may have work without new input (turn cut short, just resumed, new).
    backlog: Vec<u64>,
    buf: Vec<u8>,
    /// When [`Backend::tick`] is due (`None`: at the next client request).
    next_tick: Option<Instant>,
}

/// How one connection's turn ended.
enum Turn {
    /// It needs more input (its socket stays watched).
    Waiting,
    /// It has more to do: give it another turn.
    More,
    /// Its outbox is full: not watched until its writer resumes it.
    Paused,
    /// The connection is over (closed by the client or the protocol, or broken).
    Over(Option<CloseReason>),
}

impl Owner {
    fn run<B: Backend>(mut self, mut backend: B, counters: &ConnCounters) -> io::Result<()> {
        let mut recorder = Recorder::new(&self.exports);
        let stats_path = self.cfg.stats_path.clone();
        let write_stats = |recorder: &mut Recorder, backend: &B, is_final: bool| {
            if let Some(path) = &stats_path {
                let snap = recorder.snapshot(counters, backend.stats_json(), is_final);
                if let Err(e) = stats::write_stats_file(path, &snap) {
                    log::warn!("nbd: cannot write stats to {}: {e}", path.display());
                }
            }
        };
        let mut next_stats = Instant::now() + self.cfg.stats_interval;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut ready: Vec<u64> = Vec::new();
        let mut failure = None;
        'serve: loop {
            let mut timeout = None;
            if stats_path.is_some() {
                let now = Instant::now();
                if now >= next_stats {
                    write_stats(&mut recorder, &backend, false);
                    next_stats = now + self.cfg.stats_interval;
                }
                timeout = Some(next_stats.saturating_duration_since(now));
            }
            if let Some(t) = self.next_tick {
                let left = t.saturating_duration_since(Instant::now());
                timeout = Some(timeout.map_or(left, |x: Duration| x.min(left)));
            }
            if !self.backlog.is_empty() {
                timeout = Some(Duration::ZERO);
            }
            ready.clear();
            if let Err(e) = self.epoll.wait(&mut events, timeout, &mut ready) {
                failure = Some(e);
                break;
            }
            ready.append(&mut self.backlog);
            if let Some(i) = ready.iter().position(|&t| t == WAKE_TOKEN) {
                ready.swap_remove(i);
                let mut controls = Vec::new();
                let go_on = self.take_messages(&mut ready, &mut controls);
                for (request, reply) in controls {
                    let _ = reply.send(backend.control(&request));
                    self.refresh_exports(&backend, &mut recorder);
                }
                if !go_on {
                    break 'serve;
                }
            }
            // Each ready connection once per round, in id order (connections take turns).
            ready.sort_unstable();
            ready.dedup();
            let exports = Arc::clone(&self.exports);
            self.serve_round(&ready, &mut backend, &exports, &mut recorder);
            self.tick(&mut backend, !ready.is_empty());
        }
        // Connections still open (the control channel went away without StopReading).
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.finish(id);
        }
        let result = backend.shutdown();
        write_stats(&mut recorder, &backend, true);
        if let Some(e) = failure {
            return Err(e);
        }
        result.map_err(|e| io::Error::other(format!("backend shutdown failed: {e}")))
    }

    /// Runs the backend's background work when it is due; `served` tells that connections had
    /// a turn this round (which makes a backend that asked to wait for them due again).
    fn tick<B: Backend>(&mut self, backend: &mut B, served: bool) {
        let now = Instant::now();
        let due = match self.next_tick {
            Some(t) => t <= now,
            None => served,
        };
        if due {
            self.next_tick = backend.tick().map(|d| Instant::now() + d);
        }
    }

    /// Takes the backend's export list again after a control request (exports are appended
    /// or marked removed, never moved).
    fn refresh_exports<B: Backend>(&mut self, backend: &B, recorder: &mut Recorder) {
        let new = backend.exports();
        if new.as_slice() == &*self.exports {
            return;
        }
        if new.len() < self.exports.len() {
            log::warn!("nbd: the backend dropped exports from its list; keeping the old list");
            return;
        }
        if let Err(e) = validate_exports(&new) {
            log::warn!("nbd: the backend's new export list is invalid ({e}); keeping the old one");
            return;
        }
        for e in new.iter().skip(self.exports.len()) {
            log::info!("nbd: new export {:?}: {} bytes", e.name, e.size_bytes);
        }
        self.exports = new.into();
        recorder.grow(&self.exports);
    }

    /// Gives each connection of `ready` (sorted, no repeats) one turn.
    fn serve_round<B: Backend>(
        &mut self,
        ready: &[u64],
        backend: &mut B,
        exports: &[ExportInfo],
        recorder: &mut Recorder,
    ) {
        for &id in ready {
            let Some(live) = self.conns.get_mut(&id) else {
                continue;
            };
            if live.paused {
                continue;
            }
            let t = turn(live, &mut self.buf, backend, exports, recorder);
            if !live.negotiated && live.session.export().is_some() {
                live.negotiated = true;
                live.outbox.negotiated.store(true, Ordering::Relaxed);
            }
            match t {
                Turn::Waiting => {}
                Turn::More => self.backlog.push(id),
                Turn::Paused => {
                    live.paused = true;
                    self.epoll.remove(live.reader.raw_fd());
                }
                Turn::Over(reason) => {
                    log_end(id, reason);
                    self.finish(id);
                }
            }
        }
    }

    /// Handles what the accept loop and the writers posted (control requests are put in
    /// `controls`, for the caller to run); false once the owner must stop.
    fn take_messages(
        &mut self,
        ready: &mut Vec<u64>,
        controls: &mut Vec<(String, mpsc::Sender<String>)>,
    ) -> bool {
        let mut wake = [0u8; 64];
        let mut hung_up = false;
        loop {
            match (&self.watched).read(&mut wake) {
                Ok(0) => {
                    hung_up = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        loop {
            match self.rx.try_recv() {
                Ok(OwnerMsg::Conn(id, reader, outbox, before_tls)) => {
                    if let Err(e) = self.epoll.add(reader.raw_fd(), id) {
                        log::warn!("nbd: connection {id}: cannot watch the socket: {e}");
                        outbox.reader_done();
                        continue;
                    }
                    let exports = Arc::clone(&self.exports);
                    let session = match before_tls {
                        Some(s) => s.after_tls(exports),
                        None => Session::new(exports, self.cfg.limits),
                    };
                    self.conns.insert(
                        id,
                        Live {
                            session,
                            reader,
                            outbox,
                            paused: false,
                            negotiated: false,
                        },
                    );
                    // The greeting is due at once.
                    ready.push(id);
                }
                Ok(OwnerMsg::Resume(id)) => {
                    let Some(live) = self.conns.get(&id) else {
                        continue;
                    };
                    if !live.paused {
                        continue;
                    }
                    if let Err(e) = self.epoll.add(live.reader.raw_fd(), id) {
                        // Never watched again: end it (finish sees it is still paused).
                        log::warn!("nbd: connection {id}: cannot watch the socket: {e}");
                        self.finish(id);
                        continue;
                    }
                    if let Some(live) = self.conns.get_mut(&id) {
                        live.paused = false;
                    }
                    ready.push(id);
                }
                Ok(OwnerMsg::StopReading) => {
                    let ids: Vec<u64> = self.conns.keys().copied().collect();
                    for id in ids {
                        self.finish(id);
                    }
                }
                Ok(OwnerMsg::Control(request, reply)) => controls.push((request, reply)),
                Ok(OwnerMsg::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => return false,
                Err(mpsc::TryRecvError::Empty) => return !hung_up,
            }
        }
    }

    /// Stops reading connection `id`; its writer sends what is queued, then closes it.
    fn finish(&mut self, id: u64) {
        if let Some(live) = self.conns.remove(&id) {
            if !live.paused {
                self.epoll.remove(live.reader.raw_fd());
            }
            live.outbox.reader_done();
            let _ = live.reader.shutdown(Shutdown::Read);
        }
    }
}

/// One turn of a connection: runs what its session has buffered, reads its socket once if it
/// needs input, and runs what that yields, up to [`REQUESTS_PER_TURN`] requests.
fn turn<B: Backend>(
    live: &mut Live,
    buf: &mut [u8],
    backend: &mut B,
    exports: &[ExportInfo],
    recorder: &mut Recorder,
) -> Turn {
    let mut read = false;
    let mut requests = 0;
    loop {
        if live.outbox.pause_if_backed_up() {
            return Turn::Paused;
        }
        match live.session.next_action() {
            Some(Action::Send(bytes)) => {
                if !live.outbox.send(bytes) {
                    return Turn::Over(None);
                }
            }
            Some(Action::Execute(req)) => {
                let received = Instant::now();
                let export = req.export;
                let outcome = exec::execute(backend, exports, req);
                recorder.record(export, &outcome, received.elapsed());
                // Straight into the socket if it takes it.
                if !live.outbox.send(outcome.reply) {
                    return Turn::Over(None);
                }
                requests += 1;
                if requests >= REQUESTS_PER_TURN {
                    return Turn::More;
                }
            }
            Some(Action::Close(reason)) => return Turn::Over(Some(reason)),
            // TLS starts before the owner sees a connection (super::tls); never here.
            Some(Action::StartTls) => return Turn::Over(None),
            None if read => return Turn::Waiting,
            None => {
                read = true;
                match live.reader.recv_nonblocking(buf) {
                    Ok(None) => return Turn::Waiting,
                    Ok(Some(0)) | Err(_) => return Turn::Over(None),
                    Ok(Some(n)) => live.session.feed(&buf[..n]),
                }
            }
        }
    }
}

fn log_end(id: u64, reason: Option<CloseReason>) {
    match reason {
        Some(CloseReason::Protocol(why)) => {
            log::warn!("nbd: connection {id}: protocol error: {why}; disconnecting");
        }
        Some(CloseReason::UnknownExport(name)) => {
            log::warn!("nbd: connection {id}: unknown export {name:?}");
        }
        Some(r) => log::debug!("nbd: connection {id}: {r:?}"),
        None => log::debug!("nbd: connection {id}: closed by the client"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_keeps_replies_whole_and_in_order_when_the_socket_is_full() {
        let (ours, mut client) = UnixStream::pair().unwrap();
        let out = Arc::new(Outbox::new(0, Conn::Unix(ours), 16, 64 << 20, None));
        let big = 8 << 20;
        // Far more than a socket buffer: the socket takes a part, the rest is queued.
        assert!(out.send(vec![1; big]));
        assert_eq!(out.lock().queue.len(), 1);
        // Room in the socket again, but a reply is queued: this one must wait behind it.
        let mut head = vec![0u8; 64 << 10];
        client.read_exact(&mut head).unwrap();
        assert!(head.iter().all(|&b| b == 1));
        assert!(out.send(vec![2; 100]));
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
        let st = out.lock();
        assert_eq!((st.count(), st.queued_bytes), (0, 0));
    }

    #[test]
    fn a_full_outbox_pauses_the_owner_until_the_writer_sent_half() {
        let (ours, mut client) = UnixStream::pair().unwrap();
        let (ctl, rx, _watched) = Ctl::new().unwrap();
        let out = Arc::new(Outbox::new(
            7,
            Conn::Unix(ours),
            4,
            64 << 20,
            Some(Arc::new(ctl)),
        ));
        // The first reply fills the socket; the next ones queue up to the limit of 4.
        assert!(out.send(vec![1; 4 << 20]));
        assert!(!out.pause_if_backed_up());
        for _ in 0..3 {
            assert!(out.send(vec![2; 10]));
        }
        assert!(out.pause_if_backed_up());
        assert!(rx.try_recv().is_err());
        // The writer sends it all and tells the owner to read again.
        let w = Arc::clone(&out);
        let writer = thread::spawn(move || writer_main(&w));
        let mut got = vec![0u8; (4 << 20) + 30];
        client.read_exact(&mut got).unwrap();
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(60)),
            Ok(OwnerMsg::Resume(7))
        ));
        out.reader_done();
        writer.join().unwrap();
        assert!(!out.pause_if_backed_up());
    }

    #[test]
    fn a_gone_client_breaks_the_outbox() {
        let (ours, client) = UnixStream::pair().unwrap();
        drop(client);
        let out = Arc::new(Outbox::new(0, Conn::Unix(ours), 16, 1 << 20, None));
        assert!(!out.send(vec![0; 16]));
        assert!(out.lock().broken);
        assert!(!out.send(vec![0; 16]));
        assert!(!out.pause_if_backed_up());
    }
}
