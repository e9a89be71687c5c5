//! `raidcore-sim bench nbd`: fio's `nbd` engine against raidcore's NBD export and, in the same
//! run with the same fio options, against `nbdkit memory` (the reference NBD server keeping each
//! LUN in RAM, with no redundancy, checksums or compression): IOPS, latency percentiles and the
//! ratio.
//!
//! ## Method
//! The seed workload: one fio job per LUN (8 by default), 4 KiB sequential writes at queue depth 1,
//! a flush (`NBD_CMD_FLUSH`) every 256 writes, `--time_based` for the given seconds,
//! `verify=crc32c` (fio reads back and checks each full pass over the LUN before it starts the
//! next; the last, partial pass is not checked). fio's write IOPS count the write phases only.
//!
//! fio runs its jobs as threads of one process (`--thread`). With one process per job (fio's
//! default), this machine's scheduler left some runnable fio processes unscheduled for seconds
//! (state R, 2 s of run-queue wait, a single write "taking" 1 to 2.7 s), against `nbdkit memory`
//! as much as against raidcore: job IOPS then differed 75-fold for reasons that had nothing to
//! do with either server. With `--thread` every job gets its share.
//!
//! The peer: one `nbdkit --foreground --exit-with-parent memory size=<LUN size>` per LUN, each on
//! its own Unix socket (the memory plugin serves one disk to every client, and 8 jobs writing one
//! disk would fail each other's verification).
//!
//! Latency: fio's completion latency (`clat`), the histograms of all jobs merged
//! (`--output-format=json+` bins), so the percentiles are those of every write of the run.
//!
//! Server CPU: user + system time of the server's process(es) during fio's run, from
//! `/proc/<pid>/stat` (this process for raidcore, whose only other threads then wait on fio; the
//! nbdkit processes for the peer), divided by the requests fio completed (writes and verification
//! reads). On a machine shared with other work, IOPS depend on what else runs; the CPU a server
//! spends per request much less so.

// IOPS and percentile arithmetic is in f64 on counts far below 2^52.
#![allow(clippy::cast_precision_loss)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// raidcore's IOPS should be at least this fraction of `nbdkit memory`'s (issue 7's target).
pub const TARGET_RATIO: f64 = 0.7;

/// Flush cadence: one `NBD_CMD_FLUSH` every this many writes.
pub const FSYNC_EVERY: u32 = 256;

/// One fio job: its name and the NBD URI it drives.
#[derive(Clone, Debug)]
pub struct Job {
    /// fio job name (the export name).
    pub name: String,
    /// `nbd+unix:///EXPORT?socket=PATH`.
    pub uri: String,
}

/// What one fio run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FioSummary {
    /// Write IOPS of each job, in job order.
    pub iops_per_job: Vec<f64>,
    /// Writes completed, all jobs.
    pub writes: u64,
    /// Verification reads completed, all jobs.
    pub verify_reads: u64,
    /// Completion latency of the writes of all jobs, microseconds: p50, p99, p99.9.
    pub clat_us_p50: f64,
    /// See `clat_us_p50`.
    pub clat_us_p99: f64,
    /// See `clat_us_p50`.
    pub clat_us_p999: f64,
    /// Sum of the jobs' `error` fields (verification failures, I/O errors).
    pub errors: u64,
}

impl FioSummary {
    /// Sum of the jobs' IOPS.
    #[must_use]
    pub fn iops_total(&self) -> f64 {
        self.iops_per_job.iter().sum()
    }

    /// The slowest job's IOPS (0 without jobs).
    #[must_use]
    pub fn iops_min(&self) -> f64 {
        let m = self
            .iops_per_job
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        if m.is_finite() { m } else { 0.0 }
    }

    /// The JSON object `bench nbd --json` prints for one target.
    #[must_use]
    pub fn to_json(&self, fio_exit_ok: bool) -> serde_json::Value {
        serde_json::json!({
            "iops_total": self.iops_total(),
            "iops_slowest_job": self.iops_min(),
            "iops_per_job": self.iops_per_job,
            "latency_us": {
                "p50": self.clat_us_p50,
                "p99": self.clat_us_p99,
                "p99_9": self.clat_us_p999,
            },
            "writes": self.writes,
            "verify_reads": self.verify_reads,
            "verify_errors": self.errors,
            "fio_exit_ok": fio_exit_ok,
        })
    }
}

/// fio's options, identical for both targets (`jobs` adds one `--name`/`--uri` pair each).
#[must_use]
pub fn fio_args(secs: u64, lun_bytes: u64, jobs: &[Job]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--output-format=json+",
        "--ioengine=nbd",
        "--thread",
        "--rw=write",
        "--bs=4k",
        "--iodepth=1",
        "--verify=crc32c",
        "--do_verify=1",
        "--time_based",
        // No `*-verify.state` files left in the working directory.
        "--verify_state_save=0",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    a.push(format!("--fsync={FSYNC_EVERY}"));
    a.push(format!("--runtime={secs}"));
    a.push(format!("--size={lun_bytes}"));
    for j in jobs {
        a.push(format!("--name={}", j.name));
        a.push(format!("--uri={}", j.uri));
    }
    a
}

/// The JSON document in fio's standard output (fio may print message lines before it).
///
/// # Errors
/// No line starts a JSON object, or it does not parse.
pub fn fio_json(stdout: &[u8]) -> Result<serde_json::Value, String> {
    let start = if stdout.first() == Some(&b'{') {
        Some(0)
    } else {
        stdout.windows(2).position(|w| w == b"\n{").map(|p| p + 1)
    };
    let start = start.ok_or_else(|| "fio printed no JSON".to_string())?;
    serde_json::from_slice(&stdout[start..]).map_err(|e| format!("fio output is not JSON ({e})"))
}

/// Reads fio's `json+` output: per-job write IOPS, counts, errors, and percentiles of the
/// merged write completion-latency histograms.
///
/// # Errors
/// No `jobs` array.
pub fn summarize(v: &serde_json::Value) -> Result<FioSummary, String> {
    let jobs = v["jobs"]
        .as_array()
        .ok_or_else(|| "fio JSON has no jobs".to_string())?;
    let mut s = FioSummary::default();
    // Latency in ns -> writes that took it.
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    for j in jobs {
        let w = &j["write"];
        s.iops_per_job.push(w["iops"].as_f64().unwrap_or(0.0));
        s.writes += w["total_ios"].as_u64().unwrap_or(0);
        s.verify_reads += j["read"]["total_ios"].as_u64().unwrap_or(0);
        s.errors += j["error"].as_u64().unwrap_or(0);
        if let Some(b) = w["clat_ns"]["bins"].as_object() {
            for (k, n) in b {
                if let (Ok(ns), Some(n)) = (k.parse::<u64>(), n.as_u64()) {
                    *bins.entry(ns).or_default() += n;
                }
            }
        }
    }
    let [p50, p99, p999] = percentiles(&bins, [50.0, 99.0, 99.9]);
    s.clat_us_p50 = p50 / 1e3;
    s.clat_us_p99 = p99 / 1e3;
    s.clat_us_p999 = p999 / 1e3;
    Ok(s)
}

/// The smallest value with at least `p` % of the samples at or below it, for each `p`, from a
/// histogram (value -> count); 0 for an empty histogram.
#[must_use]
pub fn percentiles<const N: usize>(bins: &BTreeMap<u64, u64>, ps: [f64; N]) -> [f64; N] {
    let total: u64 = bins.values().sum();
    ps.map(|p| {
        if total == 0 {
            return 0.0;
        }
        let want = (p / 100.0 * total as f64).ceil().max(1.0);
        let mut seen = 0u64;
        for (&v, &n) in bins {
            seen += n;
            if seen as f64 >= want {
                return v as f64;
            }
        }
        bins.keys().next_back().map_or(0.0, |&v| v as f64)
    })
}

/// The outcome of one fio run.
#[derive(Debug)]
pub struct FioRun {
    /// What it measured.
    pub summary: FioSummary,
    /// fio exited 0.
    pub exit_ok: bool,
    /// fio's exit status and standard error, for error messages.
    pub diagnostics: String,
}

/// Runs fio with [`fio_args`] and reads its output.
///
/// # Errors
/// fio cannot be started or prints no JSON.
pub fn run_fio(secs: u64, lun_bytes: u64, jobs: &[Job]) -> Result<FioRun, String> {
    let out = Command::new("fio")
        .args(fio_args(secs, lun_bytes, jobs))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running fio (is it installed?): {e}"))?;
    let diagnostics = format!(
        "fio exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let v = fio_json(&out.stdout).map_err(|e| format!("{e}; {diagnostics}"))?;
    Ok(FioRun {
        summary: summarize(&v)?,
        exit_ok: out.status.success(),
        diagnostics,
    })
}

/// `nbdkit --version`, or why it cannot be run.
///
/// # Errors
/// nbdkit is not installed or fails.
pub fn nbdkit_version() -> Result<String, String> {
    match Command::new("nbdkit").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!(
            "`nbdkit --version` failed ({:?}): {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run nbdkit: {e}")),
    }
}

/// `nbdkit memory` servers, one per LUN, each on its own Unix socket; stopped (killed and
/// reaped) on drop.
#[derive(Debug)]
pub struct NbdkitPeer {
    children: Vec<Child>,
    jobs: Vec<Job>,
}

impl NbdkitPeer {
    /// Starts one `nbdkit memory size=lun_bytes` per name in `names`, with sockets and pid files
    /// in `dir`, and waits (up to 10 s) until each has written its pid file, which nbdkit does
    /// once it accepts connections.
    ///
    /// # Errors
    /// nbdkit cannot be started, exits early or is not ready in time.
    pub fn start(dir: &Path, names: &[String], lun_bytes: u64) -> Result<NbdkitPeer, String> {
        let mut peer = NbdkitPeer {
            children: Vec::new(),
            jobs: Vec::new(),
        };
        let mut pidfiles: Vec<PathBuf> = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let sock = dir.join(format!("nbdkit{i}.sock"));
            let pidfile = dir.join(format!("nbdkit{i}.pid"));
            let child = Command::new("nbdkit")
                .arg("--exit-with-parent")
                .arg("--unix")
                .arg(&sock)
                .arg("--pidfile")
                .arg(&pidfile)
                .arg("memory")
                .arg(format!("size={lun_bytes}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start nbdkit: {e}"))?;
            peer.children.push(child);
            pidfiles.push(pidfile);
            peer.jobs.push(Job {
                name: name.clone(),
                uri: format!("nbd+unix:///?socket={}", sock.display()),
            });
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (child, pidfile) in peer.children.iter_mut().zip(&pidfiles) {
            loop {
                let ready =
                    std::fs::read_to_string(pidfile).is_ok_and(|s| s.trim().parse::<u32>().is_ok());
                if ready {
                    break;
                }
                if let Ok(Some(st)) = child.try_wait() {
                    return Err(format!("nbdkit exited at start ({st})"));
                }
                if Instant::now() > deadline {
                    return Err("nbdkit did not become ready within 10 s".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(peer)
    }

    /// One fio job per server.
    #[must_use]
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    /// CPU time all the servers have used so far, in seconds ([`process_cpu_secs`]); `None` if
    /// any cannot be read.
    #[must_use]
    pub fn cpu_secs(&self) -> Option<f64> {
        self.children
            .iter()
            .map(|c| process_cpu_secs(c.id()))
            .sum::<Option<f64>>()
    }
}

impl Drop for NbdkitPeer {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// CPU time (user + system, all threads) that process `pid` has used so far, in seconds, from
/// `/proc/<pid>/stat`; `None` if the file is missing (not Linux, process gone) or malformed.
pub fn process_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count fields after its ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, the 12th and 13th after the name.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// Server CPU per request in microseconds: `cpu_secs` over the writes and verification reads of
/// `s` (`None` without a CPU figure or without requests).
#[must_use]
pub fn cpu_us_per_request(cpu_secs: Option<f64>, s: &FioSummary) -> Option<f64> {
    let n = s.writes + s.verify_reads;
    cpu_secs.filter(|_| n > 0).map(|c| c * 1e6 / n as f64)
}

/// Version of fio, or why it cannot be run.
///
/// # Errors
/// fio is not installed or fails.
pub fn fio_version() -> Result<String, String> {
    match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!("`fio --version` failed ({:?})", o.status.code())),
        Err(e) => Err(format!("cannot run fio: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_histogram() {
        let bins: BTreeMap<u64, u64> = [(10, 50), (20, 49), (1000, 1)].into_iter().collect();
        let got = percentiles(&bins, [50.0, 99.0, 99.9, 100.0]);
        let want = [10.0, 20.0, 1000.0, 1000.0];
        assert!(
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9),
            "{got:?}"
        );
        assert!(percentiles(&BTreeMap::new(), [50.0])[0].abs() < 1e-9);
    }

    #[test]
    fn summary_merges_jobs() {
        let out = br#"fio: connected to NBD server
{"jobs": [
 {"error": 0, "read": {"total_ios": 4096},
  "write": {"iops": 100.0, "total_ios": 300, "clat_ns": {"bins": {"1000": 299, "9000": 1}}}},
 {"error": 0, "read": {"total_ios": 0},
  "write": {"iops": 50.0, "total_ios": 100, "clat_ns": {"bins": {"2000": 100}}}}
]}"#;
        let s = summarize(&fio_json(out).unwrap()).unwrap();
        assert!((s.iops_total() - 150.0).abs() < 1e-9);
        assert!((s.iops_min() - 50.0).abs() < 1e-9);
        assert_eq!((s.writes, s.verify_reads, s.errors), (400, 4096, 0));
        assert!((s.clat_us_p50 - 1.0).abs() < 1e-9);
        assert!((s.clat_us_p99 - 2.0).abs() < 1e-9);
        assert!((s.clat_us_p999 - 9.0).abs() < 1e-9);
        let j = s.to_json(true);
        assert_eq!(j["latency_us"]["p99_9"], 9.0);
        assert!(fio_json(b"no json here").is_err());
    }

    #[test]
    fn cpu_of_this_process_is_read_and_divided_per_request() {
        let cpu = process_cpu_secs(std::process::id());
        assert!(cpu.is_some_and(|c| c >= 0.0), "{cpu:?}");
        let s = FioSummary {
            writes: 300,
            verify_reads: 100,
            ..FioSummary::default()
        };
        let us = cpu_us_per_request(Some(0.002), &s).unwrap();
        assert!((us - 5.0).abs() < 1e-9, "{us}");
        assert_eq!(cpu_us_per_request(None, &s), None);
        assert_eq!(cpu_us_per_request(Some(1.0), &FioSummary::default()), None);
    }
}
