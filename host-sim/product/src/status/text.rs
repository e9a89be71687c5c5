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
        let _ = writeln!(
            s,
            "layout: {} strip {}, {} disks, model {}",
            self.level,
            format_bytes(self.strip_bytes),
            self.disks.len(),
            self.model
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

    /// The `scan:` line: a rebuild, a scrub, or what the last scrub found.
    fn write_scan(&self, s: &mut String) {
        if let Some(r) = self.rebuild.filter(|r| r.total == 0) {
            let _ = writeln!(
                s,
                "  scan: rebuild of disk {} starting (resumes whenever the pool is used)",
                r.disk.unwrap_or(0)
            );
        } else if let Some(r) = self.rebuild {
            let _ = writeln!(
                s,
                "  scan: rebuilding disk {} — {} of {} stripes ({:.1} %)",
                r.disk.unwrap_or(0),
                r.done,
                r.total,
                pct(r.done, r.total)
            );
        } else if let Some(r) = self.scrub {
            let _ = writeln!(
                s,
                "  scan: scrub in progress — segment {} of {} ({:.1} %)",
                r.done,
                r.total,
                pct(r.done, r.total)
            );
        } else {
            let _ = writeln!(
                s,
                "  scan: last scrub repaired {} blocks, {} unrepairable",
                self.scrub_repaired_blocks, self.scrub_unrepairable_blocks
            );
        }
    }

    /// The member table under `config:`.
    fn write_members(&self, s: &mut String) {
        let _ = writeln!(s, "config:");
        let _ = writeln!(
            s,
            "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5}",
            "DISK", "IMAGE", "STATE", "READ", "WRITE", "MEDIUM", "TRANS", "CKSUM", "REPR"
        );
        for d in &self.disks {
            let _ = writeln!(
                s,
                "  {:<6} {:<12} {:<11} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5}",
                d.index,
                d.image.as_deref().unwrap_or("-"),
                d.state.to_uppercase(),
                d.errors.read,
                d.errors.write,
                d.errors.medium,
                d.errors.transient,
                d.errors.checksum,
                d.errors.repaired
            );
        }
    }

    /// The `spares:` line and one `left out:` line per stale image.
    fn write_spares(&self, s: &mut String) {
        let spares: Vec<&str> = self
            .images
            .iter()
            .filter(|i| i.role == ImageRole::Spare)
            .map(|i| i.file.as_str())
            .collect();
        let _ = writeln!(
            s,
            "spares: {} {}",
            self.spares,
            if spares.is_empty() {
                String::new()
            } else {
                format!("({})", spares.join(", "))
            }
        );
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
        let _ = writeln!(
            s,
            "space: {} usable, {} live, compression {:.2}x",
            format_bytes(self.usable_bytes),
            format_bytes(self.live_bytes),
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

/// `a` as a percentage of `b` (100 when `b` is 0: nothing to do is all done).
fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        100.0
    } else {
        a as f64 * 100.0 / b as f64
    }
}
