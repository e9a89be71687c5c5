//! What a command says and how it ends: messages on stderr prefixed with the program's name,
//! results on stdout, progress bars (hidden when stderr is not a terminal), library log lines,
//! and the exit status ([`Failure`]).

use std::io::Write as _;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Why a command did not succeed, which decides its exit status (see [`Console::exit`]).
#[derive(Debug)]
pub enum Failure {
    /// An I/O error, or the pool could not be opened or created.
    Error(String),
    /// The work was done but found damage it could not repair (the result was printed).
    Verify(String),
    /// The request does not fit the pool, or this build cannot do it yet; nothing changed.
    Refused(String),
    /// Another process has the pool open.
    InUse(String),
    /// Bad arguments.
    Usage(String),
    /// `status` of a pool that is not online: 1 degraded, 2 faulted or suspended (the status
    /// was printed; no message).
    Health(u8),
}

/// The exit statuses of `raidcore` (a [`Console`] with `scripted` exit codes), for scripts
/// (as `mdadm --detail --test`).
pub mod exit {
    /// Success (`status`: the pool is online).
    pub const OK: u8 = 0;
    /// `status`: the pool is degraded.
    pub const DEGRADED: u8 = 1;
    /// `status`: the pool is faulted or suspended.
    pub const FAULTED: u8 = 2;
    /// A scrub left damage it could not repair.
    pub const DATA_ERRORS: u8 = 3;
    /// Refused: the request does not fit the pool, or this build cannot do it yet; nothing
    /// was changed.
    pub const REFUSED: u8 = 4;
    /// Another process (a command still running) has the pool open.
    pub const IN_USE: u8 = 5;
    /// An I/O error, or the pool could not be opened or created.
    pub const FAILED: u8 = 6;
    /// Bad arguments (clap's usage errors included).
    pub const USAGE: u8 = 64;
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Error(e.to_string())
    }
}

/// The program talking to its operator: `raidcore` or `raidcore-sim`, which prefix every
/// message with their name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Console {
    /// The program's name.
    pub name: &'static str,
    /// Exit statuses of [`exit`] (`raidcore`); otherwise the simulator's: 0 success, 1 a
    /// verification failed, 2 any other failure.
    pub scripted: bool,
}

impl Console {
    /// A note on stderr: `NAME: msg`.
    pub fn note(self, msg: &str) {
        eprintln!("{}: {msg}", self.name);
    }

    /// A warning on stderr: `NAME: warning: msg`.
    pub fn warn(self, msg: &str) {
        eprintln!("{}: warning: {msg}", self.name);
    }

    /// A result on stdout, flushed.
    pub fn print(self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// The exit status of a command's `result`, after saying why it failed.
    #[must_use]
    pub fn exit(self, result: Result<(), Failure>) -> ExitCode {
        let (code, message) = match result {
            Ok(()) => (exit::OK, None),
            Err(Failure::Verify(m)) => (
                if self.scripted { exit::DATA_ERRORS } else { 1 },
                Some(format!("verification failed: {m}")),
            ),
            Err(Failure::Health(h)) => (if self.scripted { h } else { 0 }, None),
            Err(Failure::Error(m)) => (self.code(exit::FAILED), Some(m)),
            Err(Failure::Refused(m)) => (self.code(exit::REFUSED), Some(m)),
            Err(Failure::InUse(m)) => (self.code(exit::IN_USE), Some(m)),
            Err(Failure::Usage(m)) => (self.code(exit::USAGE), Some(m)),
        };
        if let Some(m) = message {
            self.note(&m);
        }
        ExitCode::from(code)
    }

    /// `scripted`'s exit status, or the simulator's 2 for every failure.
    fn code(self, scripted: u8) -> u8 {
        if self.scripted { scripted } else { 2 }
    }

    /// Sends the library's log lines (`log` crate) to stderr as `NAME: level: message`. The
    /// environment variable `env` (`error`, `warn`, `info`, `debug` or `trace`) sets the level;
    /// `default` otherwise.
    pub fn init_log(self, env: &str, default: log::LevelFilter) {
        let level = std::env::var(env)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        // Once per process: the logger lives as long as the program.
        let logger: &'static StderrLog = Box::leak(Box::new(StderrLog { name: self.name }));
        if log::set_logger(logger).is_ok() {
            log::set_max_level(level);
        }
    }
}

/// Log lines to stderr, prefixed with the program's name.
struct StderrLog {
    name: &'static str,
}

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        // The core's own event lines are Debug syntax; the host logs every event in words
        // (crate::dir::observe), so those show only at debug.
        if r.target().starts_with("raidcore::event")
            && r.level() > log::Level::Warn
            && log::max_level() < log::LevelFilter::Debug
        {
            return;
        }
        if self.enabled(r.metadata()) {
            eprintln!(
                "{}: {}: {}",
                self.name,
                r.level().as_str().to_lowercase(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}

/// A progress bar of `len` steps on stderr, labelled `msg`.
#[must_use]
pub fn bar(len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {percent:>3}% {elapsed_precise}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(msg.to_string());
    pb
}
