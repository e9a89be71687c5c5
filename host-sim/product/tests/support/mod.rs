//! What the command-line and NBD tests of both tools share (`raidcore`'s here; `raidcore-sim`'s
//! in host-sim/tests include this file through `nbd_common`): the real client tools under a
//! hang guard, a `serve` child process, and test data.
#![allow(dead_code)] // each test file uses a different part

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

/// A running `serve` of either tool: the child, its log up to "listening", and a thread
/// draining the rest of its log (so it never blocks on a full pipe).
pub struct Served {
    child: Child,
    seen: String,
    drain: Option<JoinHandle<String>>,
}

impl Served {
    /// Starts `BIN serve --dir DIR --unix SOCK` plus `extra` (`bin`: `raidcore` or
    /// `raidcore-sim`), and waits (a blocking read of its log, no polling) until it listens.
    pub fn start(bin: &str, dir: &str, sock: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(bin)
            .args(["serve", "--dir", dir, "--unix", sock.to_str().unwrap()])
            .args(extra)
            .env("RAIDCORE_LOG", "info")
            .env("RAIDCORE_SIM_LOG", "info")
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
        let drain = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut log, &mut rest);
            rest
        });
        Served {
            child,
            seen,
            drain: Some(drain),
        }
    }

    /// Sends `sig`, waits for the exit; returns the status and the whole log.
    pub fn signal(mut self, sig: i32) -> (std::process::ExitStatus, String) {
        let pid = i32::try_from(self.child.id()).unwrap();
        // SAFETY: sending a signal to our own child process (not yet reaped).
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let status = self.child.wait().unwrap();
        let rest = self.drain.take().unwrap().join().unwrap();
        (status, format!("{}{rest}", self.seen))
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
