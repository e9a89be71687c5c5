//! One client connection as a pure state machine over bytes (sans I/O).
//!
//! Feed the bytes the client sent with [`Session::feed`], then take [`Action`]s with
//! [`Session::next_action`] until it returns `None` (more input needed). The session validates
//! every transmission request against the export (bounds, flags, length limits) before it emits
//! [`Action::Execute`], so the backend only ever sees valid requests; invalid ones are answered
//! with an error reply here. The output does not depend on how the input is split into chunks.
//!
//! Protocol source: NBD `doc/proto.md` (fixed newstyle negotiation, simple replies).

use std::collections::VecDeque;
use std::sync::Arc;

use super::backend::ExportInfo;
use super::proto::{self, be_u16, be_u32, be_u64};

/// Size limits of one session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Largest read, write or write-zeroes request in bytes; advertised as the maximum block
    /// size (`NBD_INFO_BLOCK_SIZE`). At least 4096. Default 32 MiB.
    pub max_request_bytes: u32,
    /// Largest option payload kept in memory during negotiation, in bytes; longer options are
    /// skipped and refused with `NBD_REP_ERR_TOO_BIG`. Default 64 KiB.
    pub max_option_bytes: u32,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_request_bytes: 32 << 20,
            max_option_bytes: 64 << 10,
        }
    }
}

/// Smallest request the server handles, in bytes: any byte offset and length work (partial
/// blocks go through read-modify-write), advertised as the minimum block size.
pub const MIN_BLOCK_BYTES: u32 = 1;
/// Preferred request granularity in bytes (the backend block), advertised as the preferred
/// block size.
pub const PREFERRED_BLOCK_BYTES: u32 = super::backend::BLOCK as u32;

/// A validated transmission request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The client's handle, echoed in the reply.
    pub handle: u64,
    /// Index of the export this connection chose.
    pub export: usize,
    /// What to do.
    pub op: Op,
}

/// A validated operation; offsets and lengths are in bytes and lie inside the export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read `length` (1..=max) bytes at `offset`.
    Read { offset: u64, length: u32 },
    /// Write `data` (1..=max bytes) at `offset`.
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
    },
    /// Flush every completed write of the export.
    Flush,
    /// Discard hint for `length` (>= 1) bytes at `offset`.
    Trim { offset: u64, length: u32, fua: bool },
    /// Zero `length` (1..=max) bytes at `offset`.
    WriteZeroes {
        offset: u64,
        length: u32,
        fua: bool,
        no_hole: bool,
    },
}

/// Why a session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The client sent `NBD_OPT_ABORT` (soft disconnect during negotiation).
    Abort,
    /// The client sent `NBD_CMD_DISC` (soft disconnect during transmission).
    Disconnect,
    /// `NBD_OPT_EXPORT_NAME` named an export that does not exist (no error reply is possible).
    UnknownExport(String),
    /// The client broke the protocol (bad magic, bad flags, oversized option...): hard disconnect.
    Protocol(&'static str),
}

/// What the connection must do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send these bytes to the client (greeting, option replies, error replies).
    Send(Vec<u8>),
    /// Run this request on the backend and send its reply.
    Execute(Request),
    /// The client asked for TLS and was told yes (the reply is the previous `Send`): do the
    /// TLS handshake now, then go on with [`Session::after_tls`] over the encrypted stream.
    StartTls,
    /// Stop reading; send the replies still due, then close the connection.
    Close(CloseReason),
}

#[derive(Clone, Debug)]
enum Resume {
    Options,
    Transmission,
}

#[derive(Clone, Debug)]
enum State {
    ClientFlags,
    OptionHeader,
    OptionData {
        option: u32,
        length: usize,
    },
    Transmission,
    WritePayload {
        handle: u64,
        offset: u64,
        length: usize,
        fua: bool,
    },
    /// Discard `remaining` bytes without buffering them, then send `reply` and go on.
    Skip {
        remaining: u64,
        reply: Vec<u8>,
        resume: Resume,
    },
    Closed,
}

/// Where a session stands with TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tls {
    /// Not offered: `NBD_OPT_STARTTLS` is unsupported (a Unix socket, or `--insecure`).
    Off,
    /// Required and not yet started: only `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` are
    /// answered; every other option gets `NBD_REP_ERR_TLS_REQD` (nbdkit's `--tls=require`).
    Required,
    /// Running: the session goes on over TLS.
    Active,
}

/// The state of one connection.
#[derive(Debug)]
pub struct Session {
    exports: Arc<[ExportInfo]>,
    limits: SessionLimits,
    tls: Tls,
    state: State,
    no_zeroes: bool,
    export: Option<usize>,
    input: Vec<u8>,
    pos: usize,
    pending: VecDeque<Action>,
}

/// Transmission flags advertised for `export`.
pub fn transmission_flags(export: &ExportInfo) -> u16 {
    // CAN_MULTI_CONN is correct because one backend instance serves every connection in order:
    // a flush covers every write completed before it, whichever connection sent it.
    let base = proto::TFLAG_HAS_FLAGS | proto::TFLAG_SEND_FLUSH | proto::TFLAG_CAN_MULTI_CONN;
    if export.read_only {
        base | proto::TFLAG_READ_ONLY
    } else {
        base | proto::TFLAG_SEND_FUA | proto::TFLAG_SEND_TRIM | proto::TFLAG_SEND_WRITE_ZEROES
    }
}

impl Session {
    /// A new session; its first action sends the server greeting.
    pub fn new(exports: Arc<[ExportInfo]>, limits: SessionLimits) -> Self {
        let mut pending = VecDeque::new();
        pending.push_back(Action::Send(proto::greeting().to_vec()));
        Session {
            exports,
            limits,
            tls: Tls::Off,
            state: State::ClientFlags,
            no_zeroes: false,
            export: None,
            input: Vec::new(),
            pos: 0,
            pending,
        }
    }

    /// A new session on a connection that must start TLS before anything else (see
    /// [`Tls::Required`]); its first action sends the greeting.
    pub fn tls_required(exports: Arc<[ExportInfo]>, limits: SessionLimits) -> Self {
        Session {
            tls: Tls::Required,
            ..Session::new(exports, limits)
        }
    }

    /// The session that goes on over TLS after `self` emitted [`Action::StartTls`]: option
    /// haggling continues (no second greeting), with `exports`.
    #[must_use]
    pub fn after_tls(self, exports: Arc<[ExportInfo]>) -> Session {
        Session {
            exports,
            tls: Tls::Active,
            state: State::OptionHeader,
            input: Vec::new(),
            pos: 0,
            pending: VecDeque::new(),
            ..self
        }
    }

    /// Bytes received but not yet used (after [`Action::StartTls`]: the start of the client's
    /// TLS handshake, if it sent it early).
    pub fn take_input(&mut self) -> Vec<u8> {
        let rest = self.input.get(self.pos..).unwrap_or_default().to_vec();
        self.input.clear();
        self.pos = 0;
        rest
    }

    /// Appends bytes received from the client.
    ///
    /// Callers should drain [`Session::next_action`] before feeding more, so that buffered input
    /// stays below one message (at most the maximum request size plus one read chunk).
    pub fn feed(&mut self, data: &[u8]) {
        if matches!(self.state, State::Closed) {
            return;
        }
        if self.pos == self.input.len() {
            self.input.clear();
            self.pos = 0;
        } else if self.pos >= 64 << 10 {
            self.input.drain(..self.pos);
            self.pos = 0;
        }
        self.input.extend_from_slice(data);
    }

    /// The export chosen for transmission, once negotiation ended.
    pub fn export(&self) -> Option<usize> {
        self.export
    }

    /// True once the session has emitted [`Action::Close`].
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// The next action, or `None` when more input is needed (or the session is closed).
    pub fn next_action(&mut self) -> Option<Action> {
        loop {
            if let Some(a) = self.pending.pop_front() {
                return Some(a);
            }
            if !self.step() {
                return None;
            }
        }
    }

    fn available(&self) -> usize {
        self.input.len() - self.pos
    }

    /// Takes `n` buffered bytes if that many are available.
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.available() < n {
            return None;
        }
        let start = self.pos;
        self.pos += n;
        self.input.get(start..start + n)
    }

    fn close(&mut self, reason: CloseReason) {
        self.state = State::Closed;
        self.input = Vec::new();
        self.pos = 0;
        self.pending.push_back(Action::Close(reason));
    }

    /// Makes progress on buffered input; false when nothing more can be done without input.
    fn step(&mut self) -> bool {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Closed => false,
            State::ClientFlags => self.client_flags(),
            State::OptionHeader => self.option_header(),
            State::OptionData { option, length } => {
                let Some(data) = self.take(length).map(<[u8]>::to_vec) else {
                    self.state = State::OptionData { option, length };
                    return false;
                };
                self.state = State::OptionHeader;
                self.option(option, &data);
                true
            }
            State::Transmission => self.request_header(),
            State::WritePayload {
                handle,
                offset,
                length,
                fua,
            } => self.write_payload(handle, offset, length, fua),
            State::Skip {
                remaining,
                reply,
                resume,
            } => self.skip(remaining, reply, resume),
        }
    }

    fn client_flags(&mut self) -> bool {
        let Some(b) = self.take(4) else {
            self.state = State::ClientFlags;
            return false;
        };
        let flags = be_u32(b, 0);
        if flags & !(proto::FLAG_C_FIXED_NEWSTYLE | proto::FLAG_C_NO_ZEROES) != 0 {
            self.close(CloseReason::Protocol("unknown client flags"));
            return true;
        }
        // Fixed newstyle is honoured even if the client did not set the bit (the spec allows
        // it); NO_ZEROES only changes NBD_OPT_EXPORT_NAME's reply.
        self.no_zeroes = flags & proto::FLAG_C_NO_ZEROES != 0;
        self.state = State::OptionHeader;
        true
    }

    /// The data of a write request whose header was read.
    fn write_payload(&mut self, handle: u64, offset: u64, length: usize, fua: bool) -> bool {
        let Some(data) = self.take(length).map(<[u8]>::to_vec) else {
            self.state = State::WritePayload {
                handle,
                offset,
                length,
                fua,
            };
            return false;
        };
        self.state = State::Transmission;
        let export = self.export.unwrap_or(0);
        self.pending.push_back(Action::Execute(Request {
            handle,
            export,
            op: Op::Write { offset, data, fua },
        }));
        true
    }

    /// Discards the rest of a refused option or request, then sends `reply` (if any).
    fn skip(&mut self, remaining: u64, reply: Vec<u8>, resume: Resume) -> bool {
        let n = (self.available() as u64).min(remaining);
        self.pos += n as usize;
        let remaining = remaining - n;
        if remaining > 0 {
            self.state = State::Skip {
                remaining,
                reply,
                resume,
            };
            return false;
        }
        self.state = match resume {
            Resume::Options => State::OptionHeader,
            Resume::Transmission => State::Transmission,
        };
        if !reply.is_empty() {
            self.pending.push_back(Action::Send(reply));
        }
        true
    }

    fn option_header(&mut self) -> bool {
        let Some(h) = self.take(proto::OPTION_HEADER_LEN) else {
            self.state = State::OptionHeader;
            return false;
        };
        let (magic, option, length) = (be_u64(h, 0), be_u32(h, 8), be_u32(h, 12));
        if magic != proto::IHAVEOPT {
            self.close(CloseReason::Protocol("bad option magic"));
            return true;
        }
        if length > self.limits.max_option_bytes {
            if option == proto::OPT_EXPORT_NAME {
                self.close(CloseReason::Protocol("export name too long"));
            } else {
                let mut reply = Vec::new();
                proto::push_option_reply(
                    &mut reply,
                    option,
                    proto::REP_ERR_TOO_BIG,
                    b"option too long",
                );
                self.state = State::Skip {
                    remaining: u64::from(length),
                    reply,
                    resume: Resume::Options,
                };
            }
            return true;
        }
        self.state = State::OptionData {
            option,
            length: length as usize,
        };
        true
    }

    fn find_export(&self, name: &[u8]) -> Option<usize> {
        if name.is_empty() {
            // The empty name is the default export: the first one still there.
            return self.exports.iter().position(|e| !e.removed);
        }
        self.exports
            .iter()
            .position(|e| !e.removed && e.name.as_bytes() == name)
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut out = Vec::new();
        if self.tls == Tls::Required && self.option_before_tls(option, data, &mut out) {
            if !out.is_empty() {
                self.pending.push_back(Action::Send(out));
            }
            return;
        }
        match option {
            proto::OPT_EXPORT_NAME => {
                let Some(i) = self.find_export(data) else {
                    let name = String::from_utf8_lossy(data).into_owned();
                    self.close(CloseReason::UnknownExport(name));
                    return;
                };
                let e = &self.exports[i];
                out.extend_from_slice(&e.size_bytes.to_be_bytes());
                out.extend_from_slice(&transmission_flags(e).to_be_bytes());
                if !self.no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                self.export = Some(i);
                self.state = State::Transmission;
            }
            proto::OPT_ABORT => {
                proto::push_option_reply(&mut out, option, proto::REP_ACK, &[]);
                self.pending.push_back(Action::Send(out));
                self.close(CloseReason::Abort);
                return;
            }
            proto::OPT_LIST => {
                if data.is_empty() {
                    for e in self.exports.iter().filter(|e| !e.removed) {
                        let mut d = Vec::with_capacity(4 + e.name.len() + e.description.len());
                        d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
                        d.extend_from_slice(e.name.as_bytes());
                        d.extend_from_slice(e.description.as_bytes());
                        proto::push_option_reply(&mut out, option, proto::REP_SERVER, &d);
                    }
                    proto::push_option_reply(&mut out, option, proto::REP_ACK, &[]);
                } else {
                    proto::push_option_reply(
                        &mut out,
                        option,
                        proto::REP_ERR_INVALID,
                        b"NBD_OPT_LIST takes no data",
                    );
                }
            }
            proto::OPT_INFO | proto::OPT_GO => self.info_or_go(option, data, &mut out),
            proto::OPT_STARTTLS if self.tls == Tls::Active => {
                proto::push_option_reply(
                    &mut out,
                    option,
                    proto::REP_ERR_INVALID,
                    b"TLS is already running",
                );
            }
            _ => {
                // STARTTLS without TLS, STRUCTURED_REPLY, META_CONTEXT and anything unknown.
                proto::push_option_reply(
                    &mut out,
                    option,
                    proto::REP_ERR_UNSUP,
                    b"option not supported",
                );
            }
        }
        if !out.is_empty() {
            self.pending.push_back(Action::Send(out));
        }
    }

    /// Options before TLS on a connection that requires it; true if handled (everything but
    /// `NBD_OPT_ABORT`).
    fn option_before_tls(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) -> bool {
        match option {
            proto::OPT_ABORT => false,
            proto::OPT_STARTTLS if data.is_empty() => {
                proto::push_option_reply(out, option, proto::REP_ACK, &[]);
                self.pending.push_back(Action::Send(std::mem::take(out)));
                self.pending.push_back(Action::StartTls);
                // Nothing more is read in plaintext.
                self.state = State::Closed;
                true
            }
            proto::OPT_STARTTLS => {
                proto::push_option_reply(
                    out,
                    option,
                    proto::REP_ERR_INVALID,
                    b"NBD_OPT_STARTTLS takes no data",
                );
                true
            }
            proto::OPT_EXPORT_NAME => {
                self.close(CloseReason::Protocol(
                    "TLS is required before choosing an export",
                ));
                true
            }
            _ => {
                proto::push_option_reply(
                    out,
                    option,
                    proto::REP_ERR_TLS_REQD,
                    b"this server requires TLS: use NBD_OPT_STARTTLS",
                );
                true
            }
        }
    }

    fn info_or_go(&mut self, option: u32, data: &[u8], out: &mut Vec<u8>) {
        // Data: u32 name length, name, u16 count, count x u16 information requests.
        let name_len = be_u32(data, 0) as usize;
        let well_formed = data.len() >= 6 && name_len <= data.len() - 6 && {
            let count = be_u16(data, 4 + name_len) as usize;
            data.len() == 6 + name_len + 2 * count
        };
        if !well_formed {
            proto::push_option_reply(
                out,
                option,
                proto::REP_ERR_INVALID,
                b"malformed NBD_OPT_INFO/GO",
            );
            return;
        }
        let name = &data[4..4 + name_len];
        let Some(i) = self.find_export(name) else {
            proto::push_option_reply(out, option, proto::REP_ERR_UNKNOWN, b"no such export");
            return;
        };
        let e = &self.exports[i];
        let count = be_u16(data, 4 + name_len) as usize;
        let requested = |t: u16| (0..count).any(|k| be_u16(data, 6 + name_len + 2 * k) == t);

        let mut d = Vec::with_capacity(14);
        d.extend_from_slice(&proto::INFO_EXPORT.to_be_bytes());
        d.extend_from_slice(&e.size_bytes.to_be_bytes());
        d.extend_from_slice(&transmission_flags(e).to_be_bytes());
        proto::push_option_reply(out, option, proto::REP_INFO, &d);
        if requested(proto::INFO_NAME) {
            let mut d = proto::INFO_NAME.to_be_bytes().to_vec();
            d.extend_from_slice(e.name.as_bytes());
            proto::push_option_reply(out, option, proto::REP_INFO, &d);
        }
        if requested(proto::INFO_DESCRIPTION) && !e.description.is_empty() {
            let mut d = proto::INFO_DESCRIPTION.to_be_bytes().to_vec();
            d.extend_from_slice(e.description.as_bytes());
            proto::push_option_reply(out, option, proto::REP_INFO, &d);
        }
        // Sent even when not requested: the maximum is tighter than the spec's default, and the
        // spec lets servers send unrequested information.
        let mut d = proto::INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        d.extend_from_slice(&MIN_BLOCK_BYTES.to_be_bytes());
        d.extend_from_slice(&PREFERRED_BLOCK_BYTES.to_be_bytes());
        d.extend_from_slice(&self.limits.max_request_bytes.to_be_bytes());
        proto::push_option_reply(out, option, proto::REP_INFO, &d);
        proto::push_option_reply(out, option, proto::REP_ACK, &[]);
        if option == proto::OPT_GO {
            self.export = Some(i);
            self.state = State::Transmission;
        }
    }

    fn request_header(&mut self) -> bool {
        let Some(h) = self.take(proto::REQUEST_HEADER_LEN) else {
            self.state = State::Transmission;
            return false;
        };
        let magic = be_u32(h, 0);
        let flags = be_u16(h, 4);
        let cmd = be_u16(h, 6);
        let handle = be_u64(h, 8);
        let offset = be_u64(h, 16);
        let length = be_u32(h, 24);
        if magic != proto::REQUEST_MAGIC {
            self.close(CloseReason::Protocol("bad request magic"));
            return true;
        }
        self.state = State::Transmission;
        if cmd == proto::CMD_DISC {
            self.close(CloseReason::Disconnect);
            return true;
        }
        let check = self.check(cmd, flags, offset, length);
        let fua = flags & proto::CMD_FLAG_FUA != 0;
        match (cmd, check) {
            (proto::CMD_WRITE, Ok(())) => {
                self.state = State::WritePayload {
                    handle,
                    offset,
                    length: length as usize,
                    fua,
                };
            }
            (proto::CMD_WRITE, Err(errno)) => {
                // The payload follows regardless; skip it without buffering, then refuse.
                self.state = State::Skip {
                    remaining: u64::from(length),
                    reply: proto::simple_reply(errno, handle),
                    resume: Resume::Transmission,
                };
            }
            (_, Err(errno)) => self
                .pending
                .push_back(Action::Send(proto::simple_reply(errno, handle))),
            (_, Ok(())) => {
                let op = match cmd {
                    proto::CMD_READ => Op::Read { offset, length },
                    proto::CMD_FLUSH => Op::Flush,
                    proto::CMD_TRIM => Op::Trim {
                        offset,
                        length,
                        fua,
                    },
                    _ => Op::WriteZeroes {
                        offset,
                        length,
                        fua,
                        no_hole: flags & proto::CMD_FLAG_NO_HOLE != 0,
                    },
                };
                let export = self.export.unwrap_or(0);
                self.pending
                    .push_back(Action::Execute(Request { handle, export, op }));
            }
        }
        true
    }

    /// Checks one request against the export; `Err` holds the NBD error value.
    fn check(&self, cmd: u16, flags: u16, offset: u64, length: u32) -> Result<(), u32> {
        let Some(e) = self.export.and_then(|i| self.exports.get(i)) else {
            return Err(proto::EINVAL);
        };
        let allowed = match cmd {
            proto::CMD_READ | proto::CMD_WRITE | proto::CMD_FLUSH | proto::CMD_TRIM => {
                proto::CMD_FLAG_FUA
            }
            proto::CMD_WRITE_ZEROES => proto::CMD_FLAG_FUA | proto::CMD_FLAG_NO_HOLE,
            _ => return Err(proto::EINVAL), // unknown or unadvertised command
        };
        if flags & !allowed != 0 {
            return Err(proto::EINVAL);
        }
        let writes = matches!(
            cmd,
            proto::CMD_WRITE | proto::CMD_TRIM | proto::CMD_WRITE_ZEROES
        );
        if writes && e.read_only {
            return Err(proto::EPERM);
        }
        if cmd == proto::CMD_FLUSH {
            // Offset and length are reserved and must be zero.
            return if offset == 0 && length == 0 {
                Ok(())
            } else {
                Err(proto::EINVAL)
            };
        }
        if length == 0 {
            return Err(proto::EINVAL);
        }
        if cmd != proto::CMD_TRIM && length > self.limits.max_request_bytes {
            return Err(proto::EINVAL);
        }
        let in_bounds = offset
            .checked_add(u64::from(length))
            .is_some_and(|end| end <= e.size_bytes);
        if !in_bounds {
            // The spec asks for ENOSPC on writes past the end and EINVAL on reads and trims.
            return Err(
                if matches!(cmd, proto::CMD_WRITE | proto::CMD_WRITE_ZEROES) {
                    proto::ENOSPC
                } else {
                    proto::EINVAL
                },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(code: u32, data: &[u8]) -> Vec<u8> {
        let mut o = proto::IHAVEOPT.to_be_bytes().to_vec();
        o.extend_from_slice(&code.to_be_bytes());
        o.extend_from_slice(&(data.len() as u32).to_be_bytes());
        o.extend_from_slice(data);
        o
    }

    /// The reply type of the option reply `bytes` (magic, option, type, length).
    fn reply_type(bytes: &[u8]) -> u32 {
        be_u32(bytes, 12)
    }

    /// A session that requires TLS answers every option but STARTTLS and ABORT with
    /// `NBD_REP_ERR_TLS_REQD`, acknowledges STARTTLS and stops reading plaintext; after TLS
    /// it serves options (and refuses a second STARTTLS).
    #[test]
    fn a_tls_session_refuses_everything_before_starttls() {
        let exports: Arc<[ExportInfo]> = vec![ExportInfo::new("lun0", 1 << 20)].into();
        let mut s = Session::tls_required(Arc::clone(&exports), SessionLimits::default());
        assert!(matches!(s.next_action(), Some(Action::Send(_))), "greeting");
        s.feed(&3u32.to_be_bytes());
        s.feed(&option(proto::OPT_LIST, &[]));
        let Some(Action::Send(r)) = s.next_action() else {
            panic!("no reply")
        };
        assert_eq!(reply_type(&r), proto::REP_ERR_TLS_REQD);
        s.feed(&option(proto::OPT_STARTTLS, &[]));
        let Some(Action::Send(r)) = s.next_action() else {
            panic!("no reply")
        };
        assert_eq!(reply_type(&r), proto::REP_ACK);
        assert_eq!(s.next_action(), Some(Action::StartTls));
        s.feed(b"\x16\x03\x01");
        assert_eq!(s.next_action(), None, "no plaintext after STARTTLS");
        let mut s = s.after_tls(exports);
        s.feed(&option(proto::OPT_STARTTLS, &[]));
        let Some(Action::Send(r)) = s.next_action() else {
            panic!("no reply")
        };
        assert_eq!(reply_type(&r), proto::REP_ERR_INVALID);
        s.feed(&option(proto::OPT_LIST, &[]));
        let Some(Action::Send(r)) = s.next_action() else {
            panic!("no reply")
        };
        assert_eq!(reply_type(&r), proto::REP_SERVER);
    }
}
