//! The `status:` and `action:` lines (as `zpool status` has them): what is wrong with a pool,
//! in words, and what the operator can do about it, worked out from the rest of a
//! [`DirStatus`].

use super::DirStatus;
use crate::dir::ImageRole;

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

    /// Member slots no image fills.
    fn missing(&self) -> Vec<usize> {
        self.disks
            .iter()
            .filter(|d| !d.present)
            .map(|d| d.index)
            .collect()
    }

    /// Fills [`DirStatus::problem`] and [`DirStatus::action`] from the rest.
    pub fn explain(&mut self) {
        let (problem, action) = self.diagnose();
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
            "suspended" => (
                Some("The pool is suspended after errors of the host (its file system or devices): no I/O is served and nothing is written.".into()),
                Some(format!("Fix the cause (free space, remount), then `raidcore resume --dir {dir}`.")),
            ),
            "degraded" if !self.missing().is_empty() => {
                let missing = self.missing();
                let problem = format!(
                    "Member slot{} {} {} no image (missing): the pool serves every block, with \
                     less redundancy.",
                    if missing.len() == 1 { "" } else { "s" },
                    list(&missing),
                    if missing.len() == 1 { "has" } else { "have" }
                );
                let action = format!(
                    "Put the missing image back, or replace the member: `raidcore replace --dir \
                     {dir} --disk {}`.",
                    missing[0]
                );
                (Some(problem), Some(action))
            }
            "degraded" if !failed.is_empty() => {
                let problem = format!(
                    "Member slot{} {} failed: the pool serves every block, with less redundancy.",
                    if failed.len() == 1 { "" } else { "s" },
                    list(&failed)
                );
                let action = if self.spares > 0 && self.rebuild.is_none() {
                    "A hot spare takes the slot at the pool's next write.".to_string()
                } else {
                    format!(
                        "Replace it: `raidcore replace --dir {dir} --disk {}`.",
                        failed[0]
                    )
                };
                (Some(problem), Some(action))
            }
            "degraded" => (
                Some(format!(
                    "Member slot{} {} {} being rebuilt: until then the pool has less redundancy.",
                    if rebuilding.len() == 1 { "" } else { "s" },
                    list(&rebuilding),
                    if rebuilding.len() == 1 { "is" } else { "are" }
                )),
                Some(if self.view == "live" {
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
