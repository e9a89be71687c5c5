//! `status` as text, laid out like `zpool status`: pool, state, layout, scan (rebuild or
//! scrub), the member table with error counters, spares and left-out images, known errors,
//! space and the LUN table.

use std::fmt::Write as _;

use super::DirStatus;
use crate::dir::ImageRole;
use crate::units::format_bytes;

impl DirStatus {
    /// The human-readable form, like `zpool status`.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "  pool: {}", self.dir);
        let _ = writeln!(s, " state: {}", self.health.to_uppercase());
        if let Some(p) = &self.problem {
            let _ = writeln!(s, "status: {p}");
        }
        if let Some(a) = &self.action {
            let _ = writeln!(s, "action: {a}");
        }
        if self.read_only {
            let _ = writeln!(
                s,
                "  view: served read-only (nothing is written; no rebuild or scrub runs)"
            );
        }
        if self.view != "live" {
            let _ = writeln!(
                s,
                "  view: the {} (the pool is not open; nothing was written)",
                self.view
            );
        }
        // `memory` is the simulator's device with no timing of its own: images served as they
        // are, nothing worth a word.
        let model = if self.model == "memory" {
            String::new()
        } else {
            format!(", device model {} (simulated timing)", self.model)
        };
        let _ = writeln!(
            s,
            "layout: {} strip {}, {} disks{model}",
            self.level,
            format_bytes(self.strip_bytes),
            self.disks.len(),
        );
        self.write_scan(&mut s);
        self.write_members(&mut s);
        self.write_spares(&mut s);
        if self.bad_ranges > 0 {
            let _ = writeln!(s, "errors: {} LBA ranges lost", self.bad_ranges);
        } else {
            let _ = writeln!(s, "errors: no known data errors");
        }
        self.write_space(&mut s);
        s
    }

    /// The `scan:` line: a rebuild or scrub in progress (with its rate and ETA when a server
    /// runs it), or the last ones that finished.
    fn write_scan(&self, s: &mut String) {
        #[allow(clippy::cast_sign_loss)] // clamped at 0 first
        let rate = self.background.as_ref().map_or(String::new(), |b| {
            let eta = b
                .eta_s
                .map_or(String::new(), |e| format!(", {} to go", seconds(e)));
            format!(
                ", {}/s{eta} (policy {})",
                format_bytes(b.rate_bytes_per_s.max(0.0) as u64),
                b.policy
            )
        });
        // A read-only server runs neither: what is recorded waits for a writable import.
        let rate = if self.read_only {
            " (waits: served read-only)".to_string()
        } else {
            rate
        };
        if let Some(r) = self.rebuild.filter(|r| r.total == 0) {
            let when = if self.read_only {
                "waits: served read-only"
            } else {
                "runs while the pool is served"
            };
            let _ = writeln!(
                s,
                "  scan: rebuild of disk {} starting ({when})",
                r.disk.unwrap_or(0)
            );
        } else if let Some(r) = self.rebuild {
            let _ = writeln!(
                s,
                "  scan: rebuilding disk {} — {} of {} stripes ({:.1} %){rate}",
                r.disk.unwrap_or(0),
                r.done,
                r.total,
                pct(r.done, r.total)
            );
        } else if let Some(r) = self.scrub {
            let _ = writeln!(
                s,
                "  scan: scrub {} — segment {} of {} ({:.1} %){}",
                if self.scrub_paused {
                    "paused"
                } else if self.read_only {
                    "pending"
                } else {
                    "in progress"
                },
                r.done,
                r.total,
                pct(r.done, r.total),
                if self.scrub_paused {
                    String::new()
                } else {
                    rate
                }
            );
        }
        match &self.last_scrub {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "  scan: last scrub finished {} after {}: {} stripes, {} blocks repaired, {} \
                     unrepairable",
                    l.finished,
                    seconds(l.seconds as f64),
                    l.stripes,
                    l.repaired_blocks,
                    l.unrecoverable
                );
            }
            None if self.scrub.is_none() => {
                let _ = writeln!(s, "  scan: no scrub has finished on record");
            }
            None => {}
        }
        if let Some(l) = &self.last_rebuild {
            let _ = writeln!(
                s,
                "        last rebuild (disk {}) finished {} after {}: {} stripes, {} not rebuilt",
                l.disk.unwrap_or(0),
                l.finished,
                seconds(l.seconds as f64),
                l.stripes,
                l.unrecoverable
            );
        }
    }

    /// The member table under `config:`.
    fn write_members(&self, s: &mut String) {
        let _ = writeln!(s, "config:");
        let _ = writeln!(
            s,
            "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>9}",
            "DISK", "IMAGE", "STATE", "READ", "WRITE", "MEDIUM", "TRANS", "CKSUM", "REPAIRED"
        );
        for d in &self.disks {
            let _ = writeln!(
                s,
                "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>9}",
                d.index,
                d.image.as_deref().unwrap_or("-"),
                d.state.to_uppercase(),
                d.errors.read,
                d.errors.write,
                d.errors.medium,
                d.errors.transient,
                d.errors.checksum,
                format_bytes(d.errors.repaired_bytes)
            );
        }
    }

    /// The `spares:` line, the `log device:` line and one `left out:` line per stale image.
    fn write_spares(&self, s: &mut String) {
        let spares: Vec<&str> = self
            .images
            .iter()
            .filter(|i| i.role == ImageRole::Spare)
            .map(|i| i.file.as_str())
            .collect();
        let _ = writeln!(
            s,
            "spares: {}{}",
            self.spares,
            if spares.is_empty() {
                String::new()
            } else {
                format!(" ({})", spares.join(", "))
            }
        );
        if let Some(d) = &self.log_device {
            let _ = writeln!(
                s,
                "log device: {} ({}{})",
                d.path.as_deref().unwrap_or("?"),
                d.state,
                d.model
                    .as_deref()
                    .map_or(String::new(), |m| format!(", model {m}"))
            );
        }
        for i in self.images.iter().filter(|i| i.role == ImageRole::Stale) {
            let _ = writeln!(
                s,
                "  left out: {} ({})",
                i.file,
                i.note.as_deref().unwrap_or("stale")
            );
        }
    }

    /// The `space:` line and the LUN table.
    fn write_space(&self, s: &mut String) {
        let free = self
            .capacity_bytes
            .saturating_sub(self.live_bytes + self.dead_bytes);
        let _ = writeln!(
            s,
            "space: {} in the log: {} live (data and metadata), {} reclaimable, {} free; \
             clients can fill {} (the rest stays free for the log and the cleaner); \
             compression {:.2}x",
            format_bytes(self.capacity_bytes),
            format_bytes(self.live_bytes),
            format_bytes(self.dead_bytes),
            format_bytes(free),
            format_bytes(self.usable_bytes),
            self.compression_ratio
        );
        let _ = writeln!(
            s,
            "  {:<4} {:<24} {:>11} {:>11} {:>11}",
            "LUN", "NAME", "SIZE", "LOGICAL", "PHYSICAL"
        );
        for l in &self.luns {
            let _ = writeln!(
                s,
                "  {:<4} {:<24} {:>11} {:>11} {:>11}",
                l.id,
                l.name,
                format_bytes(l.size_bytes),
                format_bytes(l.logical_bytes),
                format_bytes(l.physical_bytes)
            );
        }
    }
}

/// Seconds as people read them (`42 s`, `3 min 05 s`, `2 h 10 min`).
#[allow(clippy::cast_sign_loss)] // clamped at 0 first
fn seconds(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{} h {:02} min", s / 3600, s % 3600 / 60)
    }
}

/// `a` as a percentage of `b` (100 when `b` is 0: nothing to do is all done).
fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        100.0
    } else {
        a as f64 * 100.0 / b as f64
    }
}
