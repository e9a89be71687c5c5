//! The `status:` and `action:` lines (as `zpool status` has them): what is wrong with a pool,
//! in words, and what the operator can do about it, worked out from the rest of a
//! [`DirStatus`].

use super::DirStatus;
use crate::dir::{ImageRole, failed_image_of_slot};

/// `s` for more than one.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `` `raidcore online --dir p --disk 1`, then `raidcore online --dir p --disk 3` `` for
/// slots `[1, 3]`.
fn commands(cmd: &str, dir: &str, slots: &[usize]) -> String {
    let each: Vec<String> = slots
        .iter()
        .map(|s| format!("`raidcore {cmd} --dir {dir} --disk {s}`"))
        .collect();
    each.join(", then ")
}

/// `0, 2 and 3` from `[0, 2, 3]`.
fn list(slots: &[usize]) -> String {
    let s: Vec<String> = slots.iter().map(ToString::to_string).collect();
    match s.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl DirStatus {
    /// Member slots in state `state`.
    fn slots_in(&self, state: &str) -> Vec<usize> {
        self.disks
            .iter()
            .filter(|d| d.state == state)
            .map(|d| d.index)
            .collect()
    }

    /// Member slots failed or without a disk (not those being rebuilt).
    fn out_of_sync(&self) -> Vec<usize> {
        self.disks
            .iter()
            .filter(|d| d.state == "failed" || !d.present)
            .map(|d| d.index)
            .collect()
    }

    /// How much redundancy a degraded pool has left, in words.
    fn redundancy_left(&self) -> String {
        let out = self
            .disks
            .iter()
            .filter(|d| d.state != "online" || !d.present)
            .count();
        match self.tolerance.saturating_sub(out) {
            0 => "with no redundancy left: one more member failure loses data".into(),
            1 => "with less redundancy: it survives one more member failure".into(),
            n => format!("with less redundancy: it survives {n} more member failures"),
        }
    }

    /// `status:` and `action:` of a degraded pool with members failed or missing: each slot
    /// named, with the command that brings it back (`online`, when its image is there) or
    /// replaces it.
    fn explain_out(&self) -> (Option<String>, Option<String>) {
        let dir = &self.dir;
        let out = self.out_of_sync();
        let (back, gone): (Vec<usize>, Vec<usize>) = out
            .iter()
            .partition(|&&s| failed_image_of_slot(&self.images, s).is_some());
        let mut what = Vec::new();
        if !back.is_empty() {
            what.push(format!(
                "member slot{} {} failed ({} left out)",
                plural(back.len()),
                list(&back),
                if back.len() == 1 {
                    "its image is"
                } else {
                    "their images are"
                }
            ));
        }
        let missing: Vec<usize> = gone.iter().copied().filter(|&s| !self.present(s)).collect();
        let failed: Vec<usize> = gone.iter().copied().filter(|&s| self.present(s)).collect();
        if !failed.is_empty() {
            what.push(format!(
                "member slot{} {} failed",
                plural(failed.len()),
                list(&failed)
            ));
        }
        if !missing.is_empty() {
            what.push(format!(
                "member slot{} {} {} no image (missing)",
                plural(missing.len()),
                list(&missing),
                if missing.len() == 1 { "has" } else { "have" }
            ));
        }
        let mut problem = what.join("; ");
        if let Some(c) = problem.get_mut(..1) {
            c.make_ascii_uppercase();
        }
        let problem = format!(
            "{problem}: the pool serves every block, {}.",
            self.redundancy_left()
        );
        let mut actions = Vec::new();
        if self.spares > 0 && self.rebuild.is_none() {
            // A read-only server never writes, so its spare waits for a writable one.
            actions.push(if self.read_only {
                "A hot spare takes a failed slot at the pool's first write once it is served \
                 writable."
                    .to_string()
            } else {
                "A hot spare takes a failed slot at the pool's next write.".to_string()
            });
        }
        if !back.is_empty() {
            actions.push(format!(
                "If the disk is sound, bring it back (resynced for what it missed): {}; \
                 otherwise replace {}: {}.",
                commands("online", dir, &back),
                if back.len() == 1 { "it" } else { "them" },
                commands("replace", dir, &back)
            ));
        }
        if !gone.is_empty() {
            let lead = if missing.is_empty() {
                "Replace"
            } else {
                "Put the missing image back, or replace"
            };
            actions.push(format!(
                "{lead} the member{}: {}.",
                plural(gone.len()),
                commands("replace", dir, &gone)
            ));
        }
        (Some(problem), Some(actions.join(" ")))
    }

    /// A disk is in member slot `slot`.
    fn present(&self, slot: usize) -> bool {
        self.disks.iter().any(|d| d.index == slot && d.present)
    }

    /// Fills [`DirStatus::problem`] and [`DirStatus::action`] from the rest.
    pub fn explain(&mut self) {
        let (problem, mut action) = self.diagnose();
        if self.read_only && self.health == "degraded" {
            // Every fix changes the pool, which a read-only server refuses.
            action = action.map(|a| {
                format!("{a} (Stop the read-only server first: it refuses every change.)")
            });
        }
        self.problem = problem;
        self.action = action;
    }

    fn diagnose(&self) -> (Option<String>, Option<String>) {
        let failed = self.slots_in("failed");
        let rebuilding = self.slots_in("rebuilding");
        let left_out: Vec<&str> = self
            .images
            .iter()
            .filter(|i| i.role == ImageRole::Stale)
            .map(|i| i.file.as_str())
            .collect();
        let dir = &self.dir;
        match self.health.as_str() {
            // Before anything else: the pool does not open at all.
            _ if self.log_device.as_ref().is_some_and(|d| d.state == "missing") => {
                (
                    Some("The log device cannot be opened: the pool does not open without it \
                          (it may hold the last flushes)."
                        .into()),
                    Some(format!(
                        "Bring its file back, or `raidcore import --dir {dir} --force` to go on \
                         without it (the flushes only it held are lost)."
                    )),
                )
            }
            "faulted" => {
                let mut out = failed.clone();
                out.extend(&rebuilding);
                out.sort_unstable();
                let problem = format!(
                    "More member slots are out of sync ({}) than {} tolerates: the pool serves \
                     no I/O.",
                    list(&out),
                    self.level
                );
                let action = if left_out.is_empty() {
                    "Bring back the images of the missing members, then run `raidcore status \
                     --dir DIR` again."
                        .replace("DIR", dir)
                } else {
                    format!(
                        "Bring back the missing members' images or check those left out ({}), \
                         then run `raidcore status --dir {dir}` again.",
                        left_out.join(", ")
                    )
                };
                (Some(problem), Some(action))
            }
            "suspended" if self.read_only => (
                Some("The read-only server suspended the pool: its memory for what the import changes (`--read-only-memory`) is full, or the host refused a read. Nothing was written.".into()),
                Some(format!("Stop the server and serve again with more `--read-only-memory`, or serve the pool writably (`raidcore serve --dir {dir}`, with `--force` if it needed it read-only); `resume` is refused while served read-only.")),
            ),
            "suspended" => (
                Some("The pool is suspended after errors of the host (its file system or devices): no I/O is served and nothing is written.".into()),
                Some(format!("Fix the cause (free space, remount), then `raidcore resume --dir {dir}`.")),
            ),
            "degraded" if !self.out_of_sync().is_empty() => self.explain_out(),
            "degraded" => (
                Some(format!(
                    "Member slot{} {} {} being rebuilt: until then the pool has less redundancy.",
                    if rebuilding.len() == 1 { "" } else { "s" },
                    list(&rebuilding),
                    if rebuilding.len() == 1 { "is" } else { "are" }
                )),
                Some(if self.read_only {
                    format!("A read-only server runs no rebuild: serve the pool writably (`raidcore serve --dir {dir}`, with `--force` if it needed it read-only) to rebuild.")
                } else if self.view == "live" {
                    format!("Wait for the rebuild to finish (`raidcore status --dir {dir} --watch`).")
                } else {
                    format!("Serve the pool (`raidcore serve --dir {dir}`): the rebuild runs in the background.")
                }),
            ),
            _ if self.bad_ranges > 0 => (
                Some(format!(
                    "{} LBA range(s) are lost (more damage than redundancy could repair): they \
                     read as errors.",
                    self.bad_ranges
                )),
                Some("Restore those blocks from a backup; writing them again clears the error.".into()),
            ),
            _ if self.log_device.as_ref().is_some_and(|d| d.state != "online") => (
                Some("The log device failed: flushes are logged on the members again, and wait \
                      for them. (Failed under I/O, it lost nothing; a forced import without it \
                      lost the flushes only it held: see `raidcore events`.)"
                    .into()),
                Some(format!(
                    "`raidcore log remove --dir {dir}`, then `raidcore log add --dir {dir} \
                     --path FILE` with a working device."
                )),
            ),
            _ if !left_out.is_empty() => (
                Some(format!(
                    "Image(s) in the directory are not part of the pool: {}.",
                    left_out.join(", ")
                )),
                Some("None needed; remove them once they are of no more use.".into()),
            ),
            _ => (None, None),
        }
    }
}
