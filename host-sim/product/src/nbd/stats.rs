//! Per-export serving statistics, written as JSON to a stats file for monitoring.
//!
//! Latencies are wall-clock microseconds measured in the owner thread from the moment it has
//! parsed a request until the backend finished it (sending the reply excluded). They are for
//! operators; tests never assert on them.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::backend::ExportInfo;
use super::exec::{OpKind, Outcome};

/// Version of the stats file layout; bumped on incompatible changes.
pub const STATS_VERSION: u32 = 1;

/// Operation counts by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCounts {
    /// Reads.
    pub read: u64,
    /// Writes.
    pub write: u64,
    /// Flushes.
    pub flush: u64,
    /// Trims.
    pub trim: u64,
    /// Write-zeroes.
    pub write_zeroes: u64,
}

impl OpCounts {
    /// All operations.
    pub fn total(&self) -> u64 {
        self.read + self.write + self.flush + self.trim + self.write_zeroes
    }
}

/// Byte counts by kind (bytes the clients asked for, not backend blocks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteCounts {
    /// Bytes read.
    pub read: u64,
    /// Bytes written.
    pub write: u64,
    /// Bytes trimmed.
    pub trim: u64,
    /// Bytes zeroed.
    pub write_zeroes: u64,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
}

/// Rates over the last interval between two stats writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRates {
    /// Length of the interval in seconds.
    pub seconds: f64,
    /// Operations per second (all kinds).
    pub iops: f64,
    /// Reads per second.
    pub read_iops: f64,
    /// Writes per second (writes and write-zeroes).
    pub write_iops: f64,
    /// Bytes read per second.
    pub read_bytes_per_s: f64,
    /// Bytes written per second (writes and write-zeroes).
    pub write_bytes_per_s: f64,
    /// Latency of all operations finished in the interval.
    pub latency_us: LatencySummary,
}

/// Statistics of one export.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExportStats {
    /// Export name.
    pub name: String,
    /// Export size in bytes.
    pub size_bytes: u64,
    /// Operations since the server started.
    pub ops: OpCounts,
    /// Bytes since the server started.
    pub bytes: ByteCounts,
    /// Requests answered with an error by the backend (invalid requests refused by the protocol
    /// layer are not counted).
    pub errors: u64,
    /// Requests that were not 4 KiB-aligned (needed partial-block handling).
    pub unaligned: u64,
    /// Latency since the server started, by kind (`read`, `write`, `flush`, `trim`,
    /// `write_zeroes`) and `all`.
    pub latency_us: BTreeMap<String, LatencySummary>,
    /// Rates over the last interval.
    pub interval: IntervalRates,
}

/// Connection counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStats {
    /// Connections open now.
    pub active: u64,
    /// Connections accepted since the server started.
    pub total: u64,
}

/// The whole stats file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsFile {
    /// Layout version ([`STATS_VERSION`]).
    pub version: u32,
    /// Process id of the server.
    pub pid: u32,
    /// Seconds since the server started.
    pub uptime_s: f64,
    /// Wall-clock time of this snapshot, milliseconds since the Unix epoch.
    pub unix_time_ms: u64,
    /// True in the last snapshot, written when the server stopped.
    #[serde(rename = "final")]
    pub is_final: bool,
    /// Connections.
    pub connections: ConnectionStats,
    /// One entry per export, in export order.
    pub exports: Vec<ExportStats>,
    /// Backend-specific fields from [`super::Backend::stats_json`] (`null` if none).
    pub backend: serde_json::Value,
}

/// Reads a stats file written by a running or stopped server.
pub fn read_stats_file(path: &Path) -> io::Result<StatsFile> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Connection counters shared between the accept loop and the owner thread.
#[derive(Debug, Default)]
pub(crate) struct ConnCounters {
    pub active: AtomicU64,
    pub total: AtomicU64,
}

const KINDS: [(OpKind, &str); 5] = [
    (OpKind::Read, "read"),
    (OpKind::Write, "write"),
    (OpKind::Flush, "flush"),
    (OpKind::Trim, "trim"),
    (OpKind::WriteZeroes, "write_zeroes"),
];

fn kind_index(kind: OpKind) -> usize {
    KINDS.iter().position(|(k, _)| *k == kind).unwrap_or(0)
}

fn new_histogram() -> Histogram<u64> {
    // 1 us .. 60 s at 2 significant digits: about 20 KiB per histogram.
    // The bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig <= 5).
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("valid histogram bounds")
}

fn summary(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    LatencySummary {
        count: h.len(),
        mean: h.mean(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

#[derive(Debug)]
struct ExportRecorder {
    name: String,
    size_bytes: u64,
    ops: OpCounts,
    bytes: ByteCounts,
    errors: u64,
    unaligned: u64,
    by_kind: Vec<Histogram<u64>>,
    all: Histogram<u64>,
    interval: Histogram<u64>,
    prev_ops: OpCounts,
    prev_bytes: ByteCounts,
}

/// Collects statistics in the owner thread and writes the stats file.
#[derive(Debug)]
pub(crate) struct Recorder {
    started: Instant,
    last_snapshot: Instant,
    exports: Vec<ExportRecorder>,
}

impl Recorder {
    pub fn new(exports: &[ExportInfo]) -> Self {
        let now = Instant::now();
        let mut r = Recorder {
            started: now,
            last_snapshot: now,
            exports: Vec::new(),
        };
        r.grow(exports);
        r
    }

    /// Starts recording the exports of `exports` past those known (exports appended while
    /// serving, see [`super::Backend::exports`]).
    pub fn grow(&mut self, exports: &[ExportInfo]) {
        for e in exports.iter().skip(self.exports.len()) {
            self.exports.push(ExportRecorder {
                name: e.name.clone(),
                size_bytes: e.size_bytes,
                ops: OpCounts::default(),
                bytes: ByteCounts::default(),
                errors: 0,
                unaligned: 0,
                by_kind: (0..KINDS.len()).map(|_| new_histogram()).collect(),
                all: new_histogram(),
                interval: new_histogram(),
                prev_ops: OpCounts::default(),
                prev_bytes: ByteCounts::default(),
            });
        }
    }

    pub fn record(&mut self, export: usize, outcome: &Outcome, latency: Duration) {
        let Some(e) = self.exports.get_mut(export) else {
            return;
        };
        let b = outcome.bytes;
        match outcome.kind {
            OpKind::Read => (e.ops.read += 1, e.bytes.read += b),
            OpKind::Write => (e.ops.write += 1, e.bytes.write += b),
            OpKind::Flush => (e.ops.flush += 1, ()),
            OpKind::Trim => (e.ops.trim += 1, e.bytes.trim += b),
            OpKind::WriteZeroes => (e.ops.write_zeroes += 1, e.bytes.write_zeroes += b),
        };
        if outcome.errno != 0 {
            e.errors += 1;
        }
        if outcome.unaligned && outcome.kind != OpKind::Flush {
            e.unaligned += 1;
        }
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        if let Some(h) = e.by_kind.get_mut(kind_index(outcome.kind)) {
            h.saturating_record(us);
        }
        e.all.saturating_record(us);
        e.interval.saturating_record(us);
    }

    /// A snapshot; starts a new interval.
    pub fn snapshot(
        &mut self,
        conns: &ConnCounters,
        backend: serde_json::Value,
        is_final: bool,
    ) -> StatsFile {
        let now = Instant::now();
        let secs = now.duration_since(self.last_snapshot).as_secs_f64();
        self.last_snapshot = now;
        #[allow(clippy::cast_precision_loss)] // counts far below 2^52
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let exports = self
            .exports
            .iter_mut()
            .map(|e| {
                let d_ops = e.ops.total() - e.prev_ops.total();
                let d_read = e.ops.read - e.prev_ops.read;
                let d_write =
                    e.ops.write + e.ops.write_zeroes - e.prev_ops.write - e.prev_ops.write_zeroes;
                let d_rbytes = e.bytes.read - e.prev_bytes.read;
                let d_wbytes = e.bytes.write + e.bytes.write_zeroes
                    - e.prev_bytes.write
                    - e.prev_bytes.write_zeroes;
                let interval = IntervalRates {
                    seconds: secs,
                    iops: per_s(d_ops),
                    read_iops: per_s(d_read),
                    write_iops: per_s(d_write),
                    read_bytes_per_s: per_s(d_rbytes),
                    write_bytes_per_s: per_s(d_wbytes),
                    latency_us: summary(&e.interval),
                };
                e.interval.reset();
                e.prev_ops = e.ops;
                e.prev_bytes = e.bytes;
                let mut latency_us: BTreeMap<String, LatencySummary> = KINDS
                    .iter()
                    .zip(&e.by_kind)
                    .map(|((_, name), h)| ((*name).to_owned(), summary(h)))
                    .collect();
                latency_us.insert("all".to_owned(), summary(&e.all));
                ExportStats {
                    name: e.name.clone(),
                    size_bytes: e.size_bytes,
                    ops: e.ops,
                    bytes: e.bytes,
                    errors: e.errors,
                    unaligned: e.unaligned,
                    latency_us,
                    interval,
                }
            })
            .collect();
        StatsFile {
            version: STATS_VERSION,
            pid: std::process::id(),
            uptime_s: now.duration_since(self.started).as_secs_f64(),
            unix_time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            is_final,
            connections: ConnectionStats {
                active: conns.active.load(Ordering::Relaxed),
                total: conns.total.load(Ordering::Relaxed),
            },
            exports,
            backend,
        }
    }
}

/// Writes `stats` to `path` atomically (a temporary file beside it, then rename), so a reader
/// never sees a half-written file.
pub(crate) fn write_stats_file(path: &Path, stats: &StatsFile) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(stats).map_err(io::Error::other)?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, path)
}

/// A non-negative rate rounded down to a whole number, for display.
#[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)] // clamped to >= 0 first
fn whole(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v as u64
    } else {
        0
    }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    #[allow(clippy::cast_precision_loss)] // display only
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A plain-text report of a stats file (for monitoring a server): one line for the server and
/// one per export with IOPS and throughput over the last interval, latency percentiles since
/// start and operation totals. `now_unix_ms` (the caller's wall clock) marks an old snapshot of
/// a server that is not final as possibly stopped.
pub fn render_status(s: &StatsFile, now_unix_ms: u64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let age_s = now_unix_ms.saturating_sub(s.unix_time_ms) / 1000;
    let state = if s.is_final {
        "stopped".to_owned()
    } else if age_s > 5 {
        format!("no update for {age_s} s (not running?)")
    } else {
        "serving".to_owned()
    };
    let _ = writeln!(
        out,
        "NBD server pid {}: {state}, up {:.1} s, {} connection(s) open, {} since start",
        s.pid, s.uptime_s, s.connections.active, s.connections.total
    );
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}",
        "export",
        "size",
        "IOPS",
        "read/s",
        "write/s",
        "p50 us",
        "p99 us",
        "max us",
        "reads",
        "writes",
        "errors"
    );
    for e in &s.exports {
        let all = e.latency_us.get("all").copied().unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>9.0} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}",
            e.name,
            human_bytes(e.size_bytes),
            e.interval.iops,
            human_bytes(whole(e.interval.read_bytes_per_s)),
            human_bytes(whole(e.interval.write_bytes_per_s)),
            all.p50,
            all.p99,
            all.max,
            e.ops.read,
            e.ops.write + e.ops.write_zeroes,
            e.errors
        );
    }
    if !s.backend.is_null() {
        let _ = writeln!(out, "backend: {}", s.backend);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_status_shows_each_export_and_the_state() {
        let mut e = ExportStats {
            name: "lun0".into(),
            size_bytes: 64 << 20,
            ..ExportStats::default()
        };
        e.ops.read = 10;
        e.ops.write = 5;
        e.interval.iops = 1234.4;
        e.interval.write_bytes_per_s = 3.0 * 1024.0 * 1024.0;
        e.latency_us.insert(
            "all".into(),
            LatencySummary {
                count: 15,
                p50: 40,
                p99: 900,
                max: 1500,
                ..LatencySummary::default()
            },
        );
        let s = StatsFile {
            version: STATS_VERSION,
            pid: 42,
            uptime_s: 3.0,
            unix_time_ms: 10_000,
            exports: vec![e],
            backend: serde_json::json!({"compression_ratio": 1.5}),
            ..StatsFile::default()
        };
        let text = render_status(&s, 11_000);
        assert!(text.contains("pid 42: serving"), "{text}");
        let line = text
            .lines()
            .find(|l| l.starts_with("lun0"))
            .expect("export line");
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "lun0", "64.0", "MiB", "1234", "0", "B", "3.0", "MiB", "40", "900", "1500", "10",
                "5", "0"
            ]
        );
        assert!(
            text.contains(r#"backend: {"compression_ratio":1.5}"#),
            "{text}"
        );
        assert!(render_status(&s, 60_000).contains("no update for 50 s"));
        let stopped = StatsFile {
            is_final: true,
            ..s
        };
        assert!(render_status(&stopped, 60_000).contains("stopped"));
    }

    #[test]
    fn stats_file_round_trips_through_json() {
        let conns = ConnCounters::default();
        let mut r = Recorder::new(&[ExportInfo::new("a", 4096)]);
        let outcome = Outcome {
            reply: Vec::new(),
            errno: 0,
            kind: OpKind::Write,
            bytes: 100,
            unaligned: true,
        };
        r.record(0, &outcome, Duration::from_micros(250));
        let snap = r.snapshot(&conns, serde_json::Value::Null, true);
        let back: StatsFile =
            serde_json::from_str(&serde_json::to_string(&snap).expect("json")).expect("parse");
        // Floats may lose their last bit through JSON; the counts must not.
        assert_eq!(back.exports[0].ops, snap.exports[0].ops);
        assert_eq!(back.exports[0].ops.write, 1);
        assert_eq!(back.exports[0].bytes.write, 100);
        assert_eq!(back.exports[0].unaligned, 1);
        assert_eq!(back.exports[0].latency_us["write"].count, 1);
        assert!((245..=255).contains(&back.exports[0].latency_us["write"].p50));
    }
}
