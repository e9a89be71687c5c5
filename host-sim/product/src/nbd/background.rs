//! Background work of a served pool, on the server's timer ([`super::Backend::tick`]): rebuild
//! and scrub steps under a rate policy, and the write-out (destage) of buffered writes a
//! bounded delay after the last one, so an idle server neither stalls a rebuild nor sits on
//! unflushed data.
//!
//! Rate policy ([`RatePolicy`]): `share:P` gives rebuild and scrub steps at most P % of the
//! server's time while clients are active (a request in the last 100 ms) and all of it while
//! they are idle; `rate:B` reads at most B member bytes per second for them, busy or idle;
//! `limits:MIN-MAX` hands pacing to the pool ([`raidcore::pool::BackgroundPolicy`], as md's
//! `speed_limit_min/max`): at least MIN bytes of each member a second while clients are
//! active, at most MAX once they are idle, each step made when
//! [`raidcore::pool::Pool::maintenance_due`] says.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use crate::units::{format_bytes, parse_size};

/// How much of the server background work may take (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatePolicy {
    /// Percent of the server's time while clients are active (1 to 100).
    Share(u8),
    /// Member bytes read per second (at least 1).
    Rate(u64),
    /// The pool paces: bytes of each member per second while clients are active (`min`) and
    /// once they are idle (`max`).
    Limits {
        /// Floor under load.
        min: u64,
        /// Ceiling when idle.
        max: u64,
    },
}

impl RatePolicy {
    /// The pool's own policy for [`RatePolicy::Limits`] (time in nanoseconds, as the server
    /// tells the pool); `None` for the server's own policies.
    #[must_use]
    pub fn pool_policy(self) -> Option<raidcore::pool::BackgroundPolicy> {
        let RatePolicy::Limits { min, max } = self else {
            return None;
        };
        let kib = |b: u64| u32::try_from(b.div_ceil(1024)).unwrap_or(u32::MAX);
        Some(raidcore::pool::BackgroundPolicy {
            min_kib_s: kib(min),
            max_kib_s: kib(max),
            idle_after: u64::try_from(ACTIVE.as_nanos()).unwrap_or(u64::MAX),
            ticks_per_s: 1_000_000_000,
        })
    }
}

impl Default for RatePolicy {
    fn default() -> Self {
        RatePolicy::Share(50)
    }
}

impl fmt::Display for RatePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RatePolicy::Share(p) => write!(f, "share:{p}"),
            RatePolicy::Rate(b) => write!(f, "rate:{}/s", format_bytes(*b)),
            RatePolicy::Limits { min, max } => write!(
                f,
                "limits:{}/s-{}/s (paced by the pool)",
                format_bytes(*min),
                format_bytes(*max)
            ),
        }
    }
}

impl std::str::FromStr for RatePolicy {
    type Err = String;

    /// `share:25` (percent) or `rate:50M` (bytes per second, K/M/G suffixes).
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(p) = s.strip_prefix("share:") {
            let p: u8 = p
                .trim_end_matches('%')
                .parse()
                .map_err(|e| format!("{s:?}: {e}"))?;
            if !(1..=100).contains(&p) {
                return Err(format!("{s:?}: the share is a percentage from 1 to 100"));
            }
            return Ok(RatePolicy::Share(p));
        }
        if let Some(r) = s.strip_prefix("rate:") {
            let b = parse_size(r.trim_end_matches("/s"))?;
            if b == 0 {
                return Err(format!("{s:?}: the rate must be positive"));
            }
            return Ok(RatePolicy::Rate(b));
        }
        if let Some(r) = s.strip_prefix("limits:") {
            let (lo, hi) = r
                .split_once('-')
                .ok_or_else(|| format!("{s:?}: expected limits:MIN-MAX, e.g. limits:4M-200M"))?;
            let min = parse_size(lo.trim_end_matches("/s"))?;
            let max = parse_size(hi.trim_end_matches("/s"))?;
            if max == 0 {
                return Err(format!("{s:?}: the ceiling must be positive"));
            }
            if min > max {
                return Err(format!("{s:?}: the floor is above the ceiling"));
            }
            return Ok(RatePolicy::Limits { min, max });
        }
        Err(format!(
            "{s:?}: expected share:PERCENT (of the server's time while clients are active), \
             rate:BYTES (per second, e.g. rate:50M) or limits:MIN-MAX (bytes of each member a \
             second under load and when idle, paced by the pool, e.g. limits:4M-200M)"
        ))
    }
}

/// How a served pool does its background work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackgroundConfig {
    /// The rate policy of rebuild and scrub steps.
    pub policy: RatePolicy,
    /// Buffered writes are written out (flushed) this long after the last write.
    pub destage_delay: Duration,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        BackgroundConfig {
            policy: RatePolicy::default(),
            destage_delay: Duration::from_secs(1),
        }
    }
}

/// Clients count as active this long after their last request.
const ACTIVE: Duration = Duration::from_millis(100);
/// Progress samples kept for the rate and ETA.
const WINDOW: Duration = Duration::from_secs(5);
/// How often the pool is looked at (events, counters) when nothing else is due.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The timer's state.
#[derive(Debug)]
pub struct Timer {
    /// The configuration.
    pub cfg: BackgroundConfig,
    last_request: Option<Instant>,
    last_write: Option<Instant>,
    /// Writes acknowledged since the last flush.
    pub unflushed: bool,
    next_step: Instant,
    /// (when, member bytes so far, fraction done) of recent steps.
    samples: VecDeque<(Instant, u64, f64)>,
    bytes: u64,
}

impl Timer {
    /// A timer with `cfg`.
    #[must_use]
    pub fn new(cfg: BackgroundConfig) -> Timer {
        Timer {
            cfg,
            last_request: None,
            last_write: None,
            unflushed: false,
            next_step: Instant::now(),
            samples: VecDeque::new(),
            bytes: 0,
        }
    }

    /// A client request was served; `wrote` if it left data buffered, `flushed` if it made
    /// everything durable.
    pub fn request(&mut self, wrote: bool, flushed: bool) {
        let now = Instant::now();
        self.last_request = Some(now);
        if flushed {
            self.unflushed = false;
        } else if wrote {
            self.unflushed = true;
            self.last_write = Some(now);
        }
    }

    /// Whether the buffered writes are due to be written out now.
    #[must_use]
    pub fn destage_due(&self, now: Instant) -> bool {
        self.unflushed
            && self
                .last_write
                .is_none_or(|t| now >= t + self.cfg.destage_delay)
    }

    /// Whether a rebuild or scrub step may run now.
    #[must_use]
    pub fn step_due(&self, now: Instant) -> bool {
        now >= self.next_step
    }

    /// A step that took `took` read `bytes` member bytes; `fraction` of the work is done.
    pub fn stepped(&mut self, now: Instant, took: Duration, bytes: u64, fraction: f64) {
        self.bytes += bytes;
        self.samples.push_back((now, self.bytes, fraction));
        while self
            .samples
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > WINDOW)
        {
            self.samples.pop_front();
        }
        let active = self
            .last_request
            .is_some_and(|t| now.duration_since(t) < ACTIVE);
        self.next_step = match self.cfg.policy {
            RatePolicy::Share(p) if active && p < 100 => {
                now + took.mul_f64(f64::from(100 - p) / f64::from(p))
            }
            // Limits: the pool says when the next step is due (`defer`).
            RatePolicy::Share(_) | RatePolicy::Limits { .. } => now,
            RatePolicy::Rate(r) => now + Duration::from_secs_f64(bytes as f64 / r as f64),
        };
    }

    /// The pool said its next step is not due before `until`.
    pub fn defer(&mut self, until: Instant) {
        self.next_step = until;
    }

    /// No rebuild or scrub runs: forget the samples.
    pub fn idle(&mut self) {
        self.samples.clear();
    }

    /// Member bytes per second over the recent steps, and the seconds left at that pace (from
    /// how fast the fraction done grew).
    #[must_use]
    pub fn rate_and_eta(&self) -> (f64, Option<f64>) {
        let (Some(a), Some(b)) = (self.samples.front(), self.samples.back()) else {
            return (0.0, None);
        };
        let secs = b.0.duration_since(a.0).as_secs_f64();
        if secs <= 0.0 {
            return (0.0, None);
        }
        let rate = (b.1 - a.1) as f64 / secs;
        let per_s = (b.2 - a.2) / secs;
        let eta = (per_s > 0.0).then(|| (1.0 - b.2).max(0.0) / per_s);
        (rate, eta)
    }

    /// When the timer wants to run next: a step or a destage due, else [`LOOK_EVERY`].
    #[must_use]
    pub fn next(&self, now: Instant, work: bool) -> Duration {
        let mut d = LOOK_EVERY;
        if work {
            d = d.min(self.next_step.saturating_duration_since(now));
        }
        if self.unflushed
            && let Some(t) = self.last_write
        {
            d = d.min((t + self.cfg.destage_delay).saturating_duration_since(now));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        assert_eq!("share:25".parse(), Ok(RatePolicy::Share(25)));
        assert_eq!("rate:50M".parse(), Ok(RatePolicy::Rate(50 << 20)));
        assert!("share:0".parse::<RatePolicy>().is_err());
        assert!("share:101".parse::<RatePolicy>().is_err());
        assert!("fast".parse::<RatePolicy>().is_err());
        assert_eq!(RatePolicy::Share(25).to_string(), "share:25");
        assert_eq!(RatePolicy::Rate(50 << 20).to_string(), "rate:50 MiB/s");
        let limits = RatePolicy::Limits {
            min: 4 << 20,
            max: 200 << 20,
        };
        assert_eq!("limits:4M-200M".parse(), Ok(limits));
        assert_eq!("limits:4M/s-200M/s".parse(), Ok(limits));
        assert!("limits:200M-4M".parse::<RatePolicy>().is_err());
        assert!("limits:0-0".parse::<RatePolicy>().is_err());
        assert!(
            "limits:0-1M".parse::<RatePolicy>().is_ok(),
            "no floor: wait for idle"
        );
        assert!("limits:4M".parse::<RatePolicy>().is_err());
        assert_eq!(
            limits.to_string(),
            "limits:4 MiB/s-200 MiB/s (paced by the pool)"
        );
    }

    #[test]
    fn limits_hand_the_pool_its_policy_in_nanoseconds() {
        let p = RatePolicy::Limits {
            min: 4 << 20,
            max: 200 << 20,
        }
        .pool_policy()
        .unwrap();
        assert_eq!((p.min_kib_s, p.max_kib_s), (4096, 200 * 1024));
        assert_eq!((p.idle_after, p.ticks_per_s), (100_000_000, 1_000_000_000));
        assert_eq!(RatePolicy::Share(50).pool_policy(), None);
    }

    #[test]
    fn a_share_spaces_steps_only_while_clients_are_active() {
        let mut t = Timer::new(BackgroundConfig {
            policy: RatePolicy::Share(25),
            destage_delay: Duration::from_secs(1),
        });
        let now = Instant::now();
        t.stepped(now, Duration::from_millis(10), 1 << 20, 0.1);
        assert!(t.step_due(now), "idle: back to back");
        t.request(true, false);
        let now = Instant::now();
        t.stepped(now, Duration::from_millis(10), 1 << 20, 0.2);
        assert!(!t.step_due(now));
        assert!(t.step_due(now + Duration::from_millis(30)));
    }

    #[test]
    fn writes_are_due_for_destage_after_the_delay() {
        let mut t = Timer::new(BackgroundConfig::default());
        t.request(true, false);
        let now = Instant::now();
        assert!(!t.destage_due(now));
        assert!(t.destage_due(now + Duration::from_secs(2)));
        t.request(false, true);
        assert!(!t.destage_due(now + Duration::from_secs(2)));
    }
}
