//! Shared helpers of the NBD tests: an in-process server on a free port, a raw protocol client,
//! and the real client tools (failing loudly when one is missing).
#![allow(dead_code)] // each test file uses a different part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use raidcore_sim::nbd::proto;

#[path = "../../product/tests/support/mod.rs"]
mod support;
use raidcore_sim::nbd::testing::{CheckingBackend, MemBackend};
use raidcore_sim::nbd::{ExportInfo, ServeConfig, Server};
#[allow(unused_imports)] // each test file uses a different part
pub use support::{GUARD, Served, pattern, run_ok, tool};

/// An NBD server on 127.0.0.1 (free port) and/or a Unix socket, serving a [`MemBackend`]
/// wrapped in a [`CheckingBackend`] (which panics, failing the test, on any contract breach).
pub struct TestServer {
    pub addr: Option<SocketAddr>,
    pub unix: Option<PathBuf>,
    pub mem: MemBackend,
    pub stats_path: PathBuf,
    pub exports: Vec<ExportInfo>,
    flag: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    pub dir: tempfile::TempDir,
}

impl TestServer {
    /// A server on a free TCP port.
    pub fn start(exports: Vec<ExportInfo>) -> Self {
        Self::start_with(exports, |_| {})
    }

    /// A server whose config `tweak` may change (e.g. add a Unix socket, drop TCP).
    pub fn start_with(exports: Vec<ExportInfo>, tweak: impl FnOnce(&mut ServeConfig)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let stats_path = dir.path().join("stats.json");
        let mut config = ServeConfig {
            tcp: Some("127.0.0.1:0".parse().expect("addr")),
            stats_path: Some(stats_path.clone()),
            ..ServeConfig::default()
        };
        tweak(&mut config);
        let max = config.limits.max_request_bytes;
        let mem = MemBackend::new(exports.clone());
        let backend = mem.clone();
        let server = Server::start(config, move || Ok(CheckingBackend::new(backend, max)))
            .expect("server starts");
        let addr = server.tcp_addr();
        let unix = server.unix_path().map(Path::to_path_buf);
        let flag = server.shutdown_flag();
        let thread = std::thread::spawn(move || server.run());
        TestServer {
            addr,
            unix,
            mem,
            stats_path,
            exports,
            flag,
            thread: Some(thread),
            dir,
        }
    }

    /// `nbd://127.0.0.1:PORT/NAME`.
    pub fn uri(&self, export: &str) -> String {
        format!("nbd://{}/{export}", self.addr.expect("tcp"))
    }

    /// Stops the server (as SIGTERM would) and waits for it; panics if `run` failed.
    pub fn stop(&mut self) -> MemBackend {
        self.flag.store(true, Ordering::SeqCst);
        let t = self.thread.take().expect("running");
        t.join()
            .expect("server thread")
            .expect("server run returns Ok");
        self.mem.clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.flag.store(true, Ordering::SeqCst);
            let _ = t.join();
        }
    }
}

/// A hand-written protocol client for the cases real clients never produce.
pub struct RawClient {
    pub s: TcpStream,
}

/// One option reply.
#[derive(Debug)]
pub struct OptReply {
    pub option: u32,
    pub kind: u32,
    pub data: Vec<u8>,
}

impl RawClient {
    /// Connects and reads the greeting; sends client flags (fixed newstyle, no zeroes).
    pub fn connect(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(GUARD)).expect("timeout");
        let mut c = RawClient { s };
        let g = c.read_exact(18);
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(
            u16::from_be_bytes([g[16], g[17]]),
            3,
            "fixed newstyle + no zeroes"
        );
        c.send(&3u32.to_be_bytes());
        c
    }

    pub fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).expect("send");
    }

    pub fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).expect("read");
        b
    }

    /// Reads until the server closes; returns what came (panics on a read error or timeout).
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut v = Vec::new();
        match self.s.read_to_end(&mut v) {
            Ok(_) => v,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => v,
            Err(e) => panic!("read_to_end: {e}"),
        }
    }

    pub fn send_option(&mut self, option: u32, data: &[u8]) {
        let mut m = proto::IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.send(&m);
    }

    pub fn option_reply(&mut self) -> OptReply {
        let h = self.read_exact(20);
        assert_eq!(
            u64::from_be_bytes(h[..8].try_into().unwrap()),
            proto::OPT_REPLY_MAGIC
        );
        let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        OptReply {
            option,
            kind,
            data: self.read_exact(len),
        }
    }

    /// `NBD_OPT_GO`/`INFO` payload for `name` asking for `infos`.
    pub fn go_data(name: &str, infos: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
        for i in infos {
            d.extend_from_slice(&i.to_be_bytes());
        }
        d
    }

    /// Sends `NBD_OPT_GO` and collects replies up to the final one (ACK or an error).
    pub fn go(&mut self, name: &str) -> Vec<OptReply> {
        self.send_option(
            proto::OPT_GO,
            &Self::go_data(name, &[proto::INFO_BLOCK_SIZE]),
        );
        let mut replies = Vec::new();
        loop {
            let r = self.option_reply();
            let last = r.kind != proto::REP_INFO;
            replies.push(r);
            if last {
                return replies;
            }
        }
    }

    /// Connects and enters transmission on `name`; returns the client and the export size.
    pub fn open(addr: SocketAddr, name: &str) -> (Self, u64) {
        let mut c = Self::connect(addr);
        let replies = c.go(name);
        assert_eq!(
            replies.last().map(|r| r.kind),
            Some(proto::REP_ACK),
            "GO {name}: {replies:?}"
        );
        let info = replies
            .iter()
            .find(|r| r.data.get(..2) == Some(&[0, 0]))
            .expect("NBD_INFO_EXPORT");
        let size = u64::from_be_bytes(info.data[2..10].try_into().unwrap());
        (c, size)
    }

    pub fn request(
        &mut self,
        cmd: u16,
        flags: u16,
        handle: u64,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) {
        let mut m = proto::REQUEST_MAGIC.to_be_bytes().to_vec();
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&cmd.to_be_bytes());
        m.extend_from_slice(&handle.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&length.to_be_bytes());
        m.extend_from_slice(payload);
        self.send(&m);
    }

    /// Reads a simple reply: (error, handle, data); data is read only if `read_len` is given and
    /// the error is 0.
    pub fn reply(&mut self, read_len: Option<usize>) -> (u32, u64, Vec<u8>) {
        let h = self.read_exact(16);
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            proto::SIMPLE_REPLY_MAGIC,
            "reply magic"
        );
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let handle = u64::from_be_bytes(h[8..16].try_into().unwrap());
        let data = match read_len {
            Some(n) if err == 0 => self.read_exact(n),
            _ => Vec::new(),
        };
        (err, handle, data)
    }

    /// Write then wait for its reply; returns the error value.
    pub fn write(&mut self, handle: u64, offset: u64, data: &[u8]) -> u32 {
        self.request(proto::CMD_WRITE, 0, handle, offset, data.len() as u32, data);
        let (err, h, _) = self.reply(None);
        assert_eq!(h, handle);
        err
    }

    /// Read that must succeed; returns the data.
    pub fn read_ok(&mut self, handle: u64, offset: u64, len: u32) -> Vec<u8> {
        let (err, data) = self.read(handle, offset, len);
        assert_eq!(err, 0, "read of {len} bytes at {offset} failed");
        data
    }

    /// Read and wait for its reply.
    pub fn read(&mut self, handle: u64, offset: u64, len: u32) -> (u32, Vec<u8>) {
        self.request(proto::CMD_READ, 0, handle, offset, len, &[]);
        let (err, h, data) = self.reply(Some(len as usize));
        assert_eq!(h, handle);
        (err, data)
    }

    pub fn disconnect(mut self) {
        self.request(proto::CMD_DISC, 0, 0, 0, 0, &[]);
        assert!(self.read_to_end().is_empty(), "no reply to NBD_CMD_DISC");
    }
}

/// Compares byte buffers, reporting the first difference instead of both buffers.
#[track_caller]
pub fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i}: got {:#04x}, want {:#04x}",
            got[i], want[i]
        );
    }
}
