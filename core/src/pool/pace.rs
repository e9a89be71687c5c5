//! Pacing of background work (rebuild, scrub) by the engine, as Linux md paces a resync with
//! `speed_limit_min` / `speed_limit_max`: while clients are active the work goes at the floor,
//! so a rebuild under load still ends in bounded time; once they have been quiet for a while
//! it goes at the ceiling. The pool only says when the next [`super::Pool::maintenance`] call
//! is due ([`super::Pool::maintenance_due`]); the caller's loop (a board's main loop, the
//! server's timer, the simulator) makes it then.

/// How fast rebuild and scrub may go ([`super::PoolConfig::background`]). Rates count the
/// bytes of each member's strips a step covers (a step over `k` stripes covers
/// `k × strip_bytes`), as md counts a resync's sectors per device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BackgroundPolicy {
    /// Floor while clients are active, in KiB per second; 0: none (background work waits
    /// until clients are idle).
    pub min_kib_s: u32,
    /// Ceiling once clients are idle, in KiB per second; 0: none (every call is due at once).
    pub max_kib_s: u32,
    /// Clients count as idle this long after their last request (the unit of
    /// [`super::Pool::set_time`]).
    pub idle_after: u64,
    /// Units of [`super::Pool::set_time`] per second (1 000 000 000 for nanoseconds).
    pub ticks_per_s: u64,
}

impl BackgroundPolicy {
    /// md's defaults, in nanoseconds: 1 000 KiB/s under load, 200 000 KiB/s when idle; clients
    /// idle after 100 ms without a request.
    pub const MD: BackgroundPolicy = BackgroundPolicy {
        min_kib_s: 1_000,
        max_kib_s: 200_000,
        idle_after: 100_000_000,
        ticks_per_s: 1_000_000_000,
    };
}

/// Most a late step may grow: this many times [`super::PoolConfig::stripes_per_step`].
const MAX_CATCH_UP: u64 = 8;

/// What the pool remembers to pace by.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pace {
    /// When the last client request came.
    last_client: Option<u64>,
    /// When the last step began, and the member bytes it covered.
    step_at: u64,
    step_bytes: u64,
}

impl Pace {
    /// A client request at `now`.
    pub(crate) fn client(&mut self, now: u64) {
        self.last_client = Some(now);
    }

    /// A step began at `at` and covered `bytes` of each member.
    pub(crate) fn stepped(&mut self, at: u64, bytes: u64) {
        self.step_at = at;
        self.step_bytes = bytes;
    }

    /// When the next step is due under `p`: at the floor's pace after the last step, or at the
    /// ceiling's once clients are idle, whichever comes first.
    pub(crate) fn due(&self, p: &BackgroundPolicy) -> u64 {
        // In whole KiB and u64: 128-bit division costs a Cortex-M 1–2 KB of flash, and a step
        // would need 18 TiB at 1 GHz ticks to saturate.
        let kib = self.step_bytes.div_ceil(1024);
        let after = |kib_s: u32| {
            let ticks = kib.saturating_mul(p.ticks_per_s) / u64::from(kib_s.max(1));
            self.step_at.saturating_add(ticks)
        };
        let idle_at = self
            .last_client
            .map_or(0, |t| t.saturating_add(p.idle_after));
        let at_max = if p.max_kib_s == 0 {
            self.step_at
        } else {
            after(p.max_kib_s)
        };
        let when_idle = at_max.max(idle_at);
        if p.min_kib_s == 0 {
            when_idle
        } else {
            after(p.min_kib_s).min(when_idle)
        }
    }

    /// Stripes the step starting at `now` may take: `base`, or up to [`MAX_CATCH_UP`] times
    /// it when the step comes late by whole allotments of the last one (each step waits
    /// behind client I/O queued on the members, so only larger steps keep the floor on
    /// loaded disks).
    pub(crate) fn budget(&self, p: &BackgroundPolicy, now: u64, base: u32) -> u32 {
        let due = self.due(p);
        if self.step_bytes == 0 || now <= due {
            return base;
        }
        let allotted = due.saturating_sub(self.step_at).max(1);
        let factor = (1 + (now - due) / allotted).min(MAX_CATCH_UP);
        base.saturating_mul(factor as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: BackgroundPolicy = BackgroundPolicy {
        min_kib_s: 1024,
        max_kib_s: 8 * 1024,
        idle_after: 100,
        ticks_per_s: 1000,
    };

    fn after_step(client: Option<u64>, p: &BackgroundPolicy) -> u64 {
        let mut pace = Pace::default();
        if let Some(t) = client {
            pace.client(t);
        }
        // 1 MiB covered at t = 1000 ms.
        pace.stepped(1000, 1 << 20);
        pace.due(p)
    }

    #[test]
    fn busy_clients_get_the_floor_and_idle_ones_the_ceiling() {
        // A request at 990 ms: the floor (1 MiB at 1 MiB/s) would make the step due at 2000 ms,
        // but the clients go idle at 1090 ms, and the ceiling's pace (125 ms for 1 MiB at
        // 8 MiB/s) from the step is due at 1125 ms.
        assert_eq!(after_step(Some(990), &P), 1125);
        // Long idle: the ceiling alone.
        assert_eq!(after_step(Some(0), &P), 1125);
        assert_eq!(after_step(None, &P), 1125);
        // Busy until late: the floor.
        assert_eq!(after_step(Some(1990), &P), 2000);
    }

    #[test]
    fn a_late_step_grows_by_the_allotments_it_missed() {
        let mut pace = Pace::default();
        pace.client(1990);
        pace.stepped(1000, 1 << 20);
        // Busy: due at 2000 (1 s per 1 MiB at the floor).
        assert_eq!(pace.budget(&P, 1500, 4), 4, "early");
        assert_eq!(pace.budget(&P, 2000, 4), 4, "on time");
        assert_eq!(
            pace.budget(&P, 2999, 4),
            4,
            "less than a whole allotment late"
        );
        assert_eq!(pace.budget(&P, 3000, 4), 8, "one allotment late");
        assert_eq!(pace.budget(&P, 4500, 4), 12);
        assert_eq!(pace.budget(&P, 100_000, 4), 32, "at most 8 times");
        assert_eq!(Pace::default().budget(&P, 100_000, 4), 4, "no step yet");
    }

    #[test]
    fn zero_means_no_floor_or_no_ceiling() {
        let no_floor = BackgroundPolicy { min_kib_s: 0, ..P };
        assert_eq!(
            after_step(Some(1990), &no_floor),
            2090,
            "waits for idle clients"
        );
        let no_ceiling = BackgroundPolicy { max_kib_s: 0, ..P };
        assert_eq!(after_step(None, &no_ceiling), 1000, "due at once when idle");
        assert_eq!(
            after_step(Some(1990), &no_ceiling),
            2000,
            "the floor while busy"
        );
    }

    #[test]
    fn huge_steps_and_rates_saturate_instead_of_overflowing() {
        let mut pace = Pace::default();
        pace.stepped(u64::MAX - 5, u64::MAX);
        assert_eq!(pace.due(&P), u64::MAX);
        let fast = BackgroundPolicy {
            min_kib_s: u32::MAX,
            max_kib_s: u32::MAX,
            ticks_per_s: u64::MAX,
            idle_after: u64::MAX,
        };
        pace.client(u64::MAX);
        assert_eq!(pace.due(&fast), u64::MAX);
    }
}
