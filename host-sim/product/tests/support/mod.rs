//! What the command-line and NBD tests of both tools share (`raidcore`'s here; `raidcore-sim`'s
//! in host-sim/tests include this file through `nbd_common`): the real client tools under a
//! hang guard, a `serve` child process, and test data.
#![allow(dead_code)] // each test file uses a different part

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// Failure guard for anything that could hang (never a timing assertion).
pub const GUARD: Duration = Duration::from_secs(120);

/// A client tool, run under `timeout` as a hang guard. Panics naming the Debian package if
/// the tool is not installed (CI installs it; a missing tool must not pass silently).
pub fn tool(name: &str, package: &str) -> Command {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(["/usr/sbin".into(), "/sbin".into(), "/usr/bin".into()])
        .map(|d: PathBuf| d.join(name))
        .find(|p| p.is_file());
    let Some(path) = found else {
        panic!(
            "`{name}` is not installed: install the Debian package `{package}` (apt-get install {package})"
        );
    };
    let mut c = Command::new("timeout");
    c.arg("--kill-after=10")
        .arg(GUARD.as_secs().to_string())
        .arg(path);
    c
}

/// Runs `cmd`, panics with its output unless it exits with status 0.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A running `serve` of either tool: the child, its log so far, and a thread draining the
/// rest of its log line by line (so it never blocks on a full pipe), which
/// [`Served::wait_log`] reads.
pub struct Served {
    child: Child,
    seen: String,
    lines: std::sync::mpsc::Receiver<String>,
    drain: Option<JoinHandle<()>>,
}

impl Served {
    /// Starts `BIN serve --dir DIR --unix SOCK` plus `extra` (`bin`: `raidcore` or
    /// `raidcore-sim`), and waits (a blocking read of its log, no polling) until it listens.
    pub fn start(bin: &str, dir: &str, sock: &Path, extra: &[&str]) -> Self {
        Self::start_logging(bin, dir, sock, extra, "info")
    }

    /// [`Served::start`] with log level `level` (`debug` shows each destage).
    pub fn start_logging(bin: &str, dir: &str, sock: &Path, extra: &[&str], level: &str) -> Self {
        Self::start_with_env(bin, dir, sock, extra, level, &[])
    }

    /// [`Served::start_logging`] with environment variables `env` set for the server.
    pub fn start_with_env(
        bin: &str,
        dir: &str,
        sock: &Path,
        extra: &[&str],
        level: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = Command::new(bin)
            .args(["serve", "--dir", dir, "--unix", sock.to_str().unwrap()])
            .args(extra)
            .envs(env.iter().copied())
            .env("RAIDCORE_LOG", level)
            .env("RAIDCORE_SIM_LOG", level)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let n = log.read_line(&mut line).unwrap();
            assert!(n > 0, "the server ended before listening:\n{seen}");
            seen.push_str(&line);
            if line.contains("listening on nbd+unix") {
                break;
            }
        }
        let (tx, lines) = std::sync::mpsc::channel();
        let drain = std::thread::spawn(move || {
            loop {
                let mut line = String::new();
                match log.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Served {
            child,
            seen,
            lines,
            drain: Some(drain),
        }
    }

    /// Waits (blocking on the server's log, no polling) for a log line containing `pat`;
    /// returns it. Panics if the server ends first or nothing comes within [`GUARD`].
    pub fn wait_log(&mut self, pat: &str) -> String {
        loop {
            match self.lines.recv_timeout(GUARD) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    if line.contains(pat) {
                        return line;
                    }
                }
                Err(e) => panic!("no log line with {pat:?} ({e}); log so far:\n{}", self.seen),
            }
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> &str {
        &self.seen
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig`, waits for the exit; returns the status and the whole log.
    pub fn signal(mut self, sig: i32) -> (std::process::ExitStatus, String) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: sending a signal to our own child process (not yet reaped).
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let status = self.child.wait().unwrap();
        self.drain.take().unwrap().join().unwrap();
        for line in self.lines.try_iter() {
            self.seen.push_str(&line);
        }
        (status, self.seen.clone())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // A failed assertion must not leave a server behind.
        if self.drain.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Deterministic test data: `len` bytes from a seed (xorshift; not for security).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A bare NBD client over a Unix socket (fixed newstyle, `NBD_OPT_GO`), for what the real
/// tools cannot do, such as writing without ever flushing (qemu-io and nbdcopy flush when
/// they close).
pub struct RawNbd {
    s: std::os::unix::net::UnixStream,
    handle: u64,
}

impl RawNbd {
    /// Connects to export `name` at `sock`.
    pub fn connect(sock: &Path, name: &str) -> RawNbd {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
        s.set_read_timeout(Some(GUARD)).unwrap();
        let mut greeting = [0u8; 18];
        s.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        let mut opt = b"IHAVEOPT".to_vec();
        opt.extend_from_slice(&7u32.to_be_bytes()); // NBD_OPT_GO
        opt.extend_from_slice(&(data.len() as u32).to_be_bytes());
        opt.extend_from_slice(&data);
        s.write_all(&opt).unwrap();
        loop {
            let mut h = [0u8; 20];
            s.read_exact(&mut h).unwrap();
            let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).unwrap();
            assert!(kind & 0x8000_0000 == 0, "NBD_OPT_GO refused: {kind:#x}");
            if kind == 1 {
                break; // NBD_REP_ACK
            }
        }
        RawNbd { s, handle: 0 }
    }

    /// Writes `data` at byte `offset` (no FUA) and waits for the reply.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        use std::io::{Read, Write};
        self.handle += 1;
        let mut req = 0x2560_9513u32.to_be_bytes().to_vec();
        req.extend_from_slice(&0u16.to_be_bytes());
        req.extend_from_slice(&1u16.to_be_bytes()); // NBD_CMD_WRITE
        req.extend_from_slice(&self.handle.to_be_bytes());
        req.extend_from_slice(&offset.to_be_bytes());
        req.extend_from_slice(&(data.len() as u32).to_be_bytes());
        req.extend_from_slice(data);
        self.s.write_all(&req).unwrap();
        let mut reply = [0u8; 16];
        self.s.read_exact(&mut reply).unwrap();
        assert_eq!(
            u32::from_be_bytes(reply[4..8].try_into().unwrap()),
            0,
            "write failed"
        );
    }
}

/// Every file of `dir` (names, sizes, modification times, contents' hashes).
pub fn snapshot(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            let mut h = DefaultHasher::new();
            if m.is_file() {
                h.write(&std::fs::read(e.path()).unwrap());
            }
            (
                e.file_name().into_string().unwrap(),
                (m.len(), m.modified().unwrap(), h.finish()),
            )
        })
        .collect()
}
