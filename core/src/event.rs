//! The event log: a fixed-size ring of state changes an operator wants to see (disk failed, spare
//! taken, rebuild progress, scrub results, repairs), like the kernel log lines of md or
//! `zpool events`. Oldest entries are overwritten; `dropped` counts them.

use heapless::Deque;
use raidcore_hal::ErrorKind;

/// Entries the ring keeps.
pub const EVENT_LOG_LEN: usize = 64;

/// One state change. Disk numbers are member slots unless named `spare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Event {
    /// A member was failed; `kind` is the error that decided it.
    DiskFailed {
        /// Member slot.
        disk: u8,
        /// The error kind that failed it.
        kind: ErrorKind,
    },
    /// A member was failed by hand (the operator's call), not for an error.
    FailedByOperator {
        /// Member slot.
        disk: u8,
    },
    /// A latent sector error was met; the blocks were reconstructed from redundancy.
    MediumError {
        /// Member slot.
        disk: u8,
        /// First unreadable block, in member blocks.
        lba: u64,
    },
    /// Blocks of a member were rewritten with reconstructed data (medium error, checksum
    /// mismatch or scrub).
    Repaired {
        /// Member slot.
        disk: u8,
        /// First rewritten block, in member blocks.
        lba: u64,
        /// Blocks rewritten.
        blocks: u32,
    },
    /// A member I/O failed with a retryable error and succeeded when retried.
    RetrySucceeded {
        /// Member slot.
        disk: u8,
        /// True for a write, false for a read.
        write: bool,
    },
    /// Data read back did not match its checksum and was repaired from redundancy.
    ChecksumRepaired {
        /// Member slot whose copy was bad.
        disk: u8,
        /// Stripe.
        stripe: u64,
    },
    /// Data could not be recovered (more damage than the level tolerates).
    Unrecoverable {
        /// Stripe.
        stripe: u64,
    },
    /// LUN blocks found lost that the list of lost blocks (64 ranges) had no room for: they
    /// still read as errors (their extent's checksum fails and no redundancy rebuilds it), but
    /// `Pool::bad_ranges` does not name them.
    LossUnlisted {
        /// LUN.
        lun: u16,
        /// First LBA (4 KiB blocks).
        lba: u64,
        /// Blocks.
        blocks: u32,
    },
    /// A hot spare replaced a failed member.
    SpareTaken {
        /// Member slot it now fills.
        disk: u8,
    },
    /// A member (spare or replacement) is being rebuilt.
    RebuildStarted {
        /// Member slot.
        disk: u8,
    },
    /// Rebuild progress, in per-mille of the stripes to rebuild.
    RebuildProgress {
        /// Member slot.
        disk: u8,
        /// 0..=1000.
        permille: u16,
    },
    /// Rebuild finished; `unrecoverable` stripes could not be rebuilt.
    RebuildDone {
        /// Member slot.
        disk: u8,
        /// Stripes rebuilt.
        stripes: u64,
        /// Stripes that could not be rebuilt.
        unrecoverable: u64,
    },
    /// A scrub pass finished.
    ScrubDone {
        /// Stripes checked.
        stripes: u64,
        /// Blocks repaired.
        repaired: u64,
        /// Blocks that could not be repaired.
        unrepairable: u64,
    },
    /// The dedicated intent-log device failed: the intent log is on the members again (nothing
    /// was lost: the flush that found it failed logged the open stripe there).
    LogDeviceFailed {
        /// The error kind that failed it.
        kind: ErrorKind,
    },
    /// The pool's health changed.
    HealthChanged {
        /// 0 online, 1 degraded, 2 faulted.
        health: u8,
    },
}

/// A ring of the last [`EVENT_LOG_LEN`] events, each with a sequence number.
#[derive(Debug, Default)]
pub struct EventLog {
    ring: Deque<(u64, Event), EVENT_LOG_LEN>,
    next_seq: u64,
    dropped: u64,
}

impl EventLog {
    /// An empty log.
    #[must_use]
    pub const fn new() -> Self {
        EventLog {
            ring: Deque::new(),
            next_seq: 0,
            dropped: 0,
        }
    }

    /// Appends an event (and logs it through the logging shim), overwriting the oldest when
    /// full.
    pub fn push(&mut self, event: Event) {
        if self.ring.is_full() {
            self.ring.pop_front();
            self.dropped += 1;
        }
        #[cfg(feature = "log")]
        log::info!("raidcore event {}: {:?}", self.next_seq, event);
        #[cfg(feature = "defmt")]
        defmt::info!("raidcore event {}: {}", self.next_seq, event);
        // Cannot fail: a slot was freed above.
        let _ = self.ring.push_back((self.next_seq, event));
        self.next_seq += 1;
    }

    /// Events in order, oldest first, with their sequence numbers.
    pub fn iter(&self) -> impl Iterator<Item = &(u64, Event)> {
        self.ring.iter()
    }

    /// Events with a sequence number `>= seq` (for readers that poll).
    pub fn since(&self, seq: u64) -> impl Iterator<Item = &(u64, Event)> {
        self.ring.iter().filter(move |(s, _)| *s >= seq)
    }

    /// Sequence number the next event will get.
    #[must_use]
    pub const fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Events overwritten before anyone read them out of the ring.
    #[must_use]
    pub const fn dropped(&self) -> u64 {
        self.dropped
    }
}
