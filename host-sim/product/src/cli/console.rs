//! What a command says and how it ends: messages on stderr prefixed with the program's name,
//! results on stdout, progress bars (hidden when stderr is not a terminal), library log lines,
//! and the exit status ([`Failure`]).

use std::io::Write as _;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A usage or setup error (exit status 2), or a verification failure (exit status 1).
#[derive(Debug)]
pub enum Failure {
    /// Exit 2 with this message.
    Error(String),
    /// Exit 1 with this message (the result was printed).
    Verify(String),
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
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Verify(m)) => {
                self.note(&format!("verification failed: {m}"));
                ExitCode::from(1)
            }
            Err(Failure::Error(m)) => {
                self.note(&m);
                ExitCode::from(2)
            }
        }
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
