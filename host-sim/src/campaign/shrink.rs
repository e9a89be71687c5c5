//! Shrinking a failing history: fewer steps, fewer faults, smaller steps, as long as the replay
//! still fails the same way (same kind of failure and same final error, see [`signature`]).
//! Deterministic (replays are), and bounded by a replay budget.

use super::{Failure, History, Step, replay};

/// Replays the shrinker may spend (`RAIDCORE_SHRINK_BUDGET` overrides it).
const BUDGET: usize = 1500;

fn budget() -> usize {
    std::env::var("RAIDCORE_SHRINK_BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(BUDGET)
}

/// What must stay the same while shrinking: the failure's kind and the last part of its text
/// (the error itself, e.g. `data lost` or `metadata damaged: field out of range`, after the
/// last `: ` of the context; none for wrong data), digits left out. Without the error, a history failing with one
/// bug tends to shrink into another bug's history with the same kind.
fn signature(f: &Failure) -> (super::FailureKind, String) {
    let tail = f
        .what
        .rsplit_once("within tolerance: ")
        .map_or(f.what.as_str(), |(_, t)| t);
    let tail = tail.rsplit_once(": ").map_or(tail, |(_, t)| t);
    // Wrong data is wrong data, whichever versions the model allowed.
    let tail = if f.kind == super::FailureKind::WrongData {
        ""
    } else {
        tail
    };
    (
        f.kind,
        tail.chars().filter(|c| !c.is_ascii_digit()).collect(),
    )
}

struct Shrinker<F> {
    sig: (super::FailureKind, String),
    left: usize,
    run: F,
}

impl<F: FnMut(&History) -> Option<Failure>> Shrinker<F> {
    /// The failure of `h` if it is of the kind being shrunk.
    fn still_fails(&mut self, h: &History) -> Option<Failure> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        (self.run)(h).filter(|f| signature(f) == self.sig)
    }
}

/// A smaller version of one step, if it has one.
fn simpler(s: Step) -> Option<Step> {
    match s {
        Step::Write {
            lun,
            lba,
            blocks,
            fua,
            tag,
        } if blocks > 1 || fua => Some(Step::Write {
            lun,
            lba,
            blocks: blocks.div_ceil(2),
            // Halve first; drop FUA once the write is one block.
            fua: fua && blocks > 1,
            tag,
        }),
        Step::Read { lun, lba, blocks } if blocks > 1 => Some(Step::Read {
            lun,
            lba,
            blocks: blocks / 2,
        }),
        Step::Trim { lun, lba, blocks } if blocks > 1 => Some(Step::Trim {
            lun,
            lba,
            blocks: blocks / 2,
        }),
        Step::Maintenance { calls } if calls > 1 => Some(Step::Maintenance { calls: calls / 2 }),
        Step::CreateLun { blocks } if blocks > 16 => Some(Step::CreateLun { blocks: blocks / 2 }),
        _ => None,
    }
}

/// Shrinks `h`, which fails with `f`, to a shorter history failing the same way. Returns the
/// history and its failure (`h` and `f` themselves if nothing smaller fails).
#[must_use]
pub fn shrink(h: &History, f: &Failure) -> (History, Failure) {
    shrink_with(h, f, budget(), |c| replay(c).failure)
}

/// [`shrink`] with the check given as `run` (the failure of a history, if any) and a budget of
/// `left` runs.
fn shrink_with(
    h: &History,
    f: &Failure,
    left: usize,
    run: impl FnMut(&History) -> Option<Failure>,
) -> (History, Failure) {
    let mut s = Shrinker {
        sig: signature(f),
        left,
        run,
    };
    let mut best = h.clone();
    let mut best_f = f.clone();
    // 1. Nothing after the failing step matters (unless the failure was in the final checks).
    if f.step >= 1 && f.step < best.steps.len() {
        let cand = History {
            shape: best.shape,
            steps: best.steps[..f.step].to_vec(),
        };
        if let Some(g) = s.still_fails(&cand) {
            best = cand;
            best_f = g;
        }
    }
    // 2. Faults one at a time, last first.
    let mut i = best.steps.len();
    while i > 0 {
        i -= 1;
        if !best.steps[i].is_fault() {
            continue;
        }
        let mut cand = best.clone();
        cand.steps.remove(i);
        if let Some(g) = s.still_fails(&cand) {
            best = cand;
            best_f = g;
        }
    }
    // 3. Chunks of steps, halving the chunk size (delta debugging).
    let mut chunk = best.steps.len() / 2;
    while chunk >= 1 && s.left > 0 {
        let mut start = 0;
        while start < best.steps.len() && s.left > 0 {
            let end = (start + chunk).min(best.steps.len());
            let mut cand = best.clone();
            cand.steps.drain(start..end);
            if let Some(g) = s.still_fails(&cand) {
                best = cand;
                best_f = g;
            } else {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    // 4. Smaller steps.
    for i in 0..best.steps.len() {
        while let Some(smaller) = simpler(best.steps[i]) {
            let mut cand = best.clone();
            cand.steps[i] = smaller;
            match s.still_fails(&cand) {
                Some(g) => {
                    best = cand;
                    best_f = g;
                }
                None => break,
            }
        }
    }
    (best, best_f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::{FailureKind, Shape, Source};

    /// A check that fails when a write of tag 7 is followed, later, by a power cut: the
    /// shrinker must find exactly those two steps, with the write at one block.
    #[test]
    fn shrinks_to_the_two_steps_that_matter() {
        let shape = Shape::generate(1, &mut Source::seeded(1), true);
        let mut steps = Vec::new();
        for i in 0..60u32 {
            steps.push(if i == 20 {
                Step::Write {
                    lun: 0,
                    lba: 5,
                    blocks: 8,
                    fua: true,
                    tag: 7,
                }
            } else if i == 45 {
                Step::PowerCut { shuffle: 3 }
            } else if i % 3 == 0 {
                Step::Flush
            } else {
                Step::Write {
                    lun: 0,
                    lba: u64::from(i),
                    blocks: 2,
                    fua: false,
                    tag: 100 + i,
                }
            });
        }
        let h = History { shape, steps };
        let check = |c: &History| {
            let w = c
                .steps
                .iter()
                .position(|s| matches!(s, Step::Write { tag: 7, .. }))?;
            c.steps[w..]
                .iter()
                .any(|s| matches!(s, Step::PowerCut { .. }))
                .then(|| Failure {
                    kind: FailureKind::WrongData,
                    step: c.steps.len(),
                    what: "lost".into(),
                })
        };
        let f = check(&h).unwrap();
        let (s, g) = shrink_with(&h, &f, 1000, check);
        assert_eq!(g.kind, FailureKind::WrongData);
        assert_eq!(
            s.steps,
            vec![
                Step::Write {
                    lun: 0,
                    lba: 5,
                    blocks: 1,
                    fua: false,
                    tag: 7
                },
                Step::PowerCut { shuffle: 3 }
            ]
        );
    }
}
