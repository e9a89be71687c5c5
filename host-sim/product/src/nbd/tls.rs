//! NBD over TLS (the protocol's `NBD_OPT_STARTTLS`), through rustls with the ring provider.
//!
//! Certificates come from a directory laid out as nbdkit's `--tls-certificates` (and qemu's
//! and libnbd's x509 credentials) expect: `server-cert.pem` (the chain, leaf first),
//! `server-key.pem` (PKCS#8, PKCS#1 or SEC1), and `ca-cert.pem`, the CA that client
//! certificates must chain to when clients are verified ([`server_config`] with
//! `verify_peer`, nbdkit's `--tls-verify-peer`).
//!
//! A TLS connection gets a pump thread of its own (`pump_main`): it speaks the plaintext
//! part of the negotiation itself (greeting, client flags, options answered with
//! `NBD_REP_ERR_TLS_REQD` until `NBD_OPT_STARTTLS`), runs the TLS handshake, then hands the
//! owner thread the plaintext end of a socket pair and carries bytes between it and the TLS
//! stream (one `poll(2)` loop). The owner serves it like any connection, from the option
//! haggling on ([`super::session::Session::after_tls`]). The accept loop's handshake
//! deadline and connection limit cover the pump too: it disconnects the TCP socket, which ends
//! the pump.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use super::server::{Conn, ConnCtx, NewConn, spawn_connection};
use super::session::{Action, Session};

/// The server's certificate chain.
pub const SERVER_CERT: &str = "server-cert.pem";
/// The server's private key.
pub const SERVER_KEY: &str = "server-key.pem";
/// The CA client certificates must chain to.
pub const CA_CERT: &str = "ca-cert.pem";

fn bad(what: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {e}", what.display()),
    )
}

/// The certificates of PEM file `p`.
fn certs(p: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(p)
        .map_err(|e| bad(p, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(p, e))?;
    if certs.is_empty() {
        return Err(bad(p, "no certificate in the file"));
    }
    Ok(certs)
}

/// The TLS configuration of a server whose certificates are in `dir` (see the module docs);
/// with `verify_peer`, clients must present a certificate that chains to `ca-cert.pem`.
///
/// Errors: a file missing or not valid PEM, a key that does not match, a bad CA.
pub fn server_config(dir: &Path, verify_peer: bool) -> io::Result<Arc<ServerConfig>> {
    let chain = certs(&dir.join(SERVER_CERT))?;
    let key_path = dir.join(SERVER_KEY);
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| bad(&key_path, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?;
    let builder = if verify_peer {
        let ca = dir.join(CA_CERT);
        let mut roots = RootCertStore::empty();
        for c in certs(&ca)? {
            roots.add(c).map_err(|e| bad(&ca, e))?;
        }
        let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| bad(&ca, e))?;
        builder.with_client_cert_verifier(v)
    } else {
        builder.with_no_client_auth()
    };
    let cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| bad(&dir.join(SERVER_CERT), e))?;
    Ok(Arc::new(cfg))
}

/// A TLS connection's thread (see the module docs); tells the accept loop when it ends.
pub(super) fn pump_main(id: u64, tcp: &TcpStream, ctx: &ConnCtx, negotiated: Arc<AtomicBool>) {
    if let Err(e) = pump(id, tcp, ctx, negotiated) {
        log::info!("nbd: connection {id}: {e}");
    }
    let _ = tcp.shutdown(Shutdown::Both);
    ctx.report_end(id);
}

/// The plaintext negotiation up to `NBD_OPT_STARTTLS`; the session, or `None` if the client
/// left or broke the protocol.
fn before_tls(id: u64, tcp: &TcpStream, ctx: &ConnCtx) -> io::Result<Option<Session>> {
    let mut s = Session::tls_required(Arc::from(Vec::new()), ctx.limits);
    let mut buf = [0u8; 4096];
    loop {
        match s.next_action() {
            Some(Action::Send(b)) => (&*tcp).write_all(&b)?,
            Some(Action::StartTls) => return Ok(Some(s)),
            Some(Action::Close(r)) => {
                log::info!("nbd: connection {id}: {r:?} before TLS");
                return Ok(None);
            }
            Some(Action::Execute(_)) => return Ok(None),
            None => {
                let n = (&*tcp).read(&mut buf)?;
                if n == 0 {
                    return Ok(None);
                }
                s.feed(&buf[..n]);
            }
        }
    }
}

fn pump(id: u64, tcp: &TcpStream, ctx: &ConnCtx, negotiated: Arc<AtomicBool>) -> io::Result<()> {
    let Some(cfg) = ctx.tls.clone() else {
        return Err(io::Error::other("no TLS configuration"));
    };
    let Some(mut session) = before_tls(id, tcp, ctx)? else {
        return Ok(());
    };
    let mut tls = ServerConnection::new(cfg).map_err(io::Error::other)?;
    let early = session.take_input();
    if !early.is_empty() {
        tls.read_tls(&mut early.as_slice())?;
    }
    while tls.is_handshaking() {
        let mut t = tcp;
        tls.complete_io(&mut t)
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake failed: {e}")))?;
    }
    log::debug!("nbd: connection {id}: TLS started");
    let (inner, outer) = UnixStream::pair()?;
    let writer = spawn_connection(
        NewConn {
            id,
            conn: Conn::Unix(inner),
            negotiated,
            before_tls: Some(session),
            report_end: false,
        },
        ctx,
    )?;
    let r = Carry::new(tls, tcp, &outer).run();
    let _ = outer.shutdown(Shutdown::Both);
    let _ = writer.join();
    r
}

/// Most plaintext held for the owner before the pump stops reading the client.
const HOLD: usize = 1 << 20;

/// Bytes between the TLS stream and the owner's plaintext socket.
struct Carry<'a> {
    tls: ServerConnection,
    tcp: &'a TcpStream,
    inner: &'a UnixStream,
    /// Plaintext from the client, not yet taken by the owner's socket.
    to_inner: Vec<u8>,
    tcp_eof: bool,
    inner_eof: bool,
    buf: Vec<u8>,
}

impl<'a> Carry<'a> {
    fn new(tls: ServerConnection, tcp: &'a TcpStream, inner: &'a UnixStream) -> Self {
        Carry {
            tls,
            tcp,
            inner,
            to_inner: Vec::new(),
            tcp_eof: false,
            inner_eof: false,
            buf: vec![0u8; 64 << 10],
        }
    }

    fn run(mut self) -> io::Result<()> {
        self.tcp.set_nonblocking(true)?;
        self.inner.set_nonblocking(true)?;
        let mut told_eof = false;
        loop {
            self.move_bytes()?;
            if self.tcp_eof && self.to_inner.is_empty() && !told_eof {
                let _ = self.inner.shutdown(Shutdown::Write);
                told_eof = true;
            }
            if self.inner_eof && !self.tls.wants_write() {
                return Ok(());
            }
            self.wait()?;
            self.read_tcp()?;
            self.read_inner()?;
        }
    }

    /// Plaintext out of TLS toward the owner, and ciphertext out toward the client, as far
    /// as the sockets take them now.
    fn move_bytes(&mut self) -> io::Result<()> {
        while self.to_inner.len() < HOLD {
            match self.tls.reader().read(&mut self.buf) {
                Ok(0) => {
                    self.tcp_eof = true;
                    break;
                }
                Ok(n) => self.to_inner.extend_from_slice(&self.buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The client closed without close_notify: an end all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    self.tcp_eof = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        while !self.to_inner.is_empty() {
            match (&*self.inner).write(&self.to_inner) {
                Ok(n) => drop(self.to_inner.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        while self.tls.wants_write() {
            let mut t = self.tcp;
            match self.tls.write_tls(&mut t) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until a socket can move what is due.
    fn wait(&self) -> io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: self.tcp.as_raw_fd(),
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: self.inner.as_raw_fd(),
                events: 0,
                revents: 0,
            },
        ];
        if !self.tcp_eof && self.to_inner.len() < HOLD {
            fds[0].events |= libc::POLLIN;
        }
        if self.tls.wants_write() {
            fds[0].events |= libc::POLLOUT;
        }
        if !self.inner_eof && !self.tls.wants_write() {
            fds[1].events |= libc::POLLIN;
        }
        if !self.to_inner.is_empty() {
            fds[1].events |= libc::POLLOUT;
        }
        // SAFETY: `fds` is valid for its two entries during the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let gone = libc::POLLERR | libc::POLLNVAL;
        if fds[0].revents & gone != 0 && self.tcp_eof {
            return Err(io::Error::other("the client's socket failed"));
        }
        Ok(())
    }

    /// Ciphertext from the client into TLS.
    fn read_tcp(&mut self) -> io::Result<()> {
        if self.tcp_eof || self.to_inner.len() >= HOLD {
            return Ok(());
        }
        let mut t = self.tcp;
        match self.tls.read_tls(&mut t) {
            Ok(0) => self.tcp_eof = true,
            Ok(_) => {
                if let Err(e) = self.tls.process_new_packets() {
                    // Tell the client why (an alert), then end.
                    let mut t = self.tcp;
                    let _ = self.tls.write_tls(&mut t);
                    return Err(io::Error::other(format!("TLS: {e}")));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Plaintext replies from the owner into TLS.
    fn read_inner(&mut self) -> io::Result<()> {
        if self.inner_eof || self.tls.wants_write() {
            return Ok(());
        }
        match (&*self.inner).read(&mut self.buf) {
            Ok(0) => {
                self.inner_eof = true;
                self.tls.send_close_notify();
            }
            Ok(n) => self.tls.writer().write_all(&self.buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}
