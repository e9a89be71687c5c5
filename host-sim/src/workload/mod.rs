//! Workloads: client streams that issue requests to LUNs, deterministic from a seed.
//!
//! Each stream is a closed loop at queue depth 1 on its own LUN (stream `i` uses LUN
//! `i % luns`): it issues its next request when the previous one completed (plus think time
//! where the workload has some). The runner ([`crate::runner`]) adds a flush every
//! `flush_interval` of virtual time per stream where the workload asks for one.
//!
//! | name | streams | what each stream does | source of the shape |
//! | --- | --- | --- | --- |
//! | `voice` | 8 | 4 KiB sequential writes (wrapping at the LUN end), a flush every second; `read_percent` % of requests are 4 KiB random reads of blocks written | the seed's IOMeter test of voice VMs (CUCM) |
//! | `mixed` | 3 | OLTP: 8 KiB random, 70 % reads; VDI: bursts of 16–64 requests of 4–32 KiB, 80 % writes, near one another, then 20–200 ms idle; file server: whole files of 16 KiB–1 MiB read (60 %) or written (40 %) in 64 KiB requests | VMware's vSAN ROBO mixed profile |
//! | `random-write` | 8 | 4 KiB random writes, a flush every second | |
//! | `sequential-read` | 8 | 4 KiB sequential reads of a pre-filled LUN | |
//!
//! Block content comes from [`data::DataSource`] by block id: each stream takes ids from its
//! own counter, started at a seeded offset.

pub mod data;

use core::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Nanoseconds in one millisecond.
const MS: u64 = 1_000_000;

/// The workloads by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// 4 KiB sequential writes per stream, flush every second.
    Voice,
    /// OLTP + VDI + file server.
    Mixed,
    /// 4 KiB random writes.
    RandomWrite,
    /// 4 KiB sequential reads of pre-filled LUNs.
    SequentialRead,
}

impl WorkloadKind {
    /// Every workload, in a fixed order.
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::Voice,
        WorkloadKind::Mixed,
        WorkloadKind::RandomWrite,
        WorkloadKind::SequentialRead,
    ];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            WorkloadKind::Voice => "voice",
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::RandomWrite => "random-write",
            WorkloadKind::SequentialRead => "sequential-read",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown workload {s:?} (expected voice, mixed, random-write or sequential-read)"
                )
            })
    }

    /// Streams by default.
    #[must_use]
    pub const fn default_streams(self) -> usize {
        match self {
            WorkloadKind::Mixed => 3,
            _ => 8,
        }
    }

    /// Whether the LUNs are written whole before the measured run (the workload reads).
    #[must_use]
    pub const fn needs_prefill(self) -> bool {
        matches!(self, WorkloadKind::Mixed | WorkloadKind::SequentialRead)
    }

    /// Flush interval of each stream, in nanoseconds, if the workload flushes.
    #[must_use]
    pub const fn flush_interval_ns(self) -> Option<u64> {
        match self {
            WorkloadKind::Voice | WorkloadKind::RandomWrite | WorkloadKind::Mixed => {
                Some(1_000 * MS)
            }
            WorkloadKind::SequentialRead => None,
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload: its kind and parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Which workload.
    pub kind: WorkloadKind,
    /// Streams (each on LUN `i % luns`).
    pub streams: usize,
    /// Voice only: percent of requests that are reads (0–100).
    pub read_percent: u8,
    /// Open loop: each stream's requests arrive at this many per virtual second, on schedule,
    /// whether or not the one before has completed (a request waits behind its stream's
    /// earlier ones; latency counts from its arrival). `None`: closed loop, each request
    /// issued when the one before completes (queue depth 1).
    pub rate_per_stream: Option<u32>,
}

impl WorkloadSpec {
    /// `kind` with its default stream count and no reads.
    #[must_use]
    pub const fn new(kind: WorkloadKind) -> Self {
        WorkloadSpec {
            kind,
            streams: kind.default_streams(),
            read_percent: 0,
            rate_per_stream: None,
        }
    }

    /// The stream generators, one per stream, on LUNs of `lun_blocks` 4 KiB blocks, seeded from
    /// `seed`.
    #[must_use]
    pub fn streams(&self, luns: usize, lun_blocks: u64, seed: u64) -> Vec<Stream> {
        (0..self.streams)
            .map(|i| {
                let mut rng = ChaCha8Rng::seed_from_u64(
                    seed ^ (i as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03),
                );
                let lun = (i % luns.max(1)) as u16;
                let data_next = rng.random::<u32>() as u64;
                let kind = match self.kind {
                    WorkloadKind::Voice => StreamKind::Sequential {
                        write: true,
                        next: rng.random_range(0..lun_blocks),
                        read_percent: self.read_percent,
                    },
                    WorkloadKind::SequentialRead => StreamKind::Sequential {
                        write: false,
                        next: rng.random_range(0..lun_blocks),
                        read_percent: 0,
                    },
                    WorkloadKind::RandomWrite => StreamKind::Random {
                        blocks: 1,
                        read_percent: 0,
                    },
                    WorkloadKind::Mixed => match i % 3 {
                        0 => StreamKind::Random {
                            blocks: 2,
                            read_percent: 70,
                        },
                        1 => StreamKind::Vdi { left: 0, window: 0 },
                        _ => StreamKind::FileServer {
                            next: 0,
                            end: 0,
                            write: false,
                        },
                    },
                };
                Stream {
                    index: i,
                    lun,
                    lun_blocks,
                    rng,
                    kind,
                    data_next,
                    written_hi: 0,
                }
            })
            .collect()
    }
}

/// One request a stream issues. LBAs and lengths in 4 KiB blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Write `blocks` blocks from `lba`, content block ids `data..data + blocks`.
    Write {
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
        /// Block id of the first block's content.
        data: u64,
    },
    /// Read `blocks` blocks from `lba`.
    Read {
        /// First block.
        lba: u64,
        /// Blocks.
        blocks: u32,
    },
    /// Do nothing for this many nanoseconds (think time between bursts).
    Idle(u64),
}

#[derive(Debug, Clone, Copy)]
enum StreamKind {
    Sequential {
        write: bool,
        next: u64,
        read_percent: u8,
    },
    Random {
        blocks: u32,
        read_percent: u8,
    },
    Vdi {
        left: u32,
        window: u64,
    },
    FileServer {
        next: u64,
        end: u64,
        write: bool,
    },
}

/// One client stream: a seeded generator of requests on one LUN.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Stream number.
    pub index: usize,
    /// The LUN it uses.
    pub lun: u16,
    lun_blocks: u64,
    rng: ChaCha8Rng,
    kind: StreamKind,
    data_next: u64,
    /// One past the highest block this stream wrote (reads of voice pick below it).
    written_hi: u64,
}

impl Stream {
    /// What the stream does, in a word or two (`sequential write`, `oltp`, `vdi`, `file
    /// server`, …), for reports.
    #[must_use]
    pub const fn role(&self) -> &'static str {
        match self.kind {
            StreamKind::Sequential { write: true, .. } => "sequential write",
            StreamKind::Sequential { write: false, .. } => "sequential read",
            StreamKind::Random {
                read_percent: 0, ..
            } => "random write",
            StreamKind::Random { .. } => "oltp",
            StreamKind::Vdi { .. } => "vdi",
            StreamKind::FileServer { .. } => "file server",
        }
    }

    /// The stream's generator (for seeded choices the runner makes on its behalf).
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }

    fn write(&mut self, lba: u64, blocks: u32) -> Op {
        let blocks = blocks.min((self.lun_blocks - lba) as u32).max(1);
        let data = self.data_next;
        self.data_next += u64::from(blocks);
        self.written_hi = self.written_hi.max(lba + u64::from(blocks));
        Op::Write { lba, blocks, data }
    }

    fn read(&self, lba: u64, blocks: u32) -> Op {
        let blocks = blocks.min((self.lun_blocks - lba) as u32).max(1);
        Op::Read { lba, blocks }
    }

    fn random_lba(&mut self, blocks: u32) -> u64 {
        let slots = (self.lun_blocks / u64::from(blocks)).max(1);
        self.rng.random_range(0..slots) * u64::from(blocks)
    }

    /// The next request.
    pub fn next_op(&mut self) -> Op {
        let n = self.lun_blocks;
        match self.kind {
            StreamKind::Sequential {
                write,
                next,
                read_percent,
            } => {
                if read_percent > 0 && self.rng.random_range(0..100u8) < read_percent {
                    let hi = self.written_hi.max(1);
                    let lba = self.rng.random_range(0..hi);
                    return self.read(lba, 1);
                }
                if let StreamKind::Sequential { next: nx, .. } = &mut self.kind {
                    *nx = (next + 1) % n;
                }
                if write {
                    self.write(next, 1)
                } else {
                    self.read(next, 1)
                }
            }
            StreamKind::Random {
                blocks,
                read_percent,
            } => {
                let lba = self.random_lba(blocks);
                if self.rng.random_range(0..100u8) < read_percent {
                    self.read(lba, blocks)
                } else {
                    self.write(lba, blocks)
                }
            }
            StreamKind::Vdi { left, window } => {
                if left == 0 {
                    // A new burst in a new 1 MiB window, after think time.
                    let burst = self.rng.random_range(16..=64u32);
                    let win = self.random_lba(256.min(n as u32));
                    self.kind = StreamKind::Vdi {
                        left: burst,
                        window: win,
                    };
                    return Op::Idle(self.rng.random_range(20 * MS..=200 * MS));
                }
                self.kind = StreamKind::Vdi {
                    left: left - 1,
                    window,
                };
                let blocks = match self.rng.random_range(0..10u8) {
                    0..=5 => 1,
                    6 | 7 => 2,
                    8 => 4,
                    _ => 8,
                };
                let span = 256u64.min(n - window);
                let off =
                    self.rng.random_range(0..span.max(1)) / u64::from(blocks) * u64::from(blocks);
                let lba = (window + off).min(n - 1);
                if self.rng.random_range(0..100u8) < 80 {
                    self.write(lba, blocks)
                } else {
                    self.read(lba, blocks)
                }
            }
            StreamKind::FileServer { next, end, write } => {
                let (next, end, write) = if next >= end {
                    // A new file: 16 KiB to 1 MiB (log-uniform), 64 KiB aligned.
                    let size = 1u64 << self.rng.random_range(2..=8u32);
                    let size = size.min(n);
                    let start = self.random_lba(16.min(n as u32)).min(n - size);
                    let write = self.rng.random_range(0..100u8) < 40;
                    (start, start + size, write)
                } else {
                    (next, end, write)
                };
                let blocks = (end - next).min(16) as u32;
                self.kind = StreamKind::FileServer {
                    next: next + u64::from(blocks),
                    end,
                    write,
                };
                if write {
                    self.write(next, blocks)
                } else {
                    self.read(next, blocks)
                }
            }
        }
    }

    /// The write requests that fill the stream's LUN whole before a read workload starts:
    /// 32-block (128 KiB) writes from block 0 up, content ids from this stream's counter.
    pub fn prefill_ops(&mut self) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut lba = 0;
        while lba < self.lun_blocks {
            let blocks = (self.lun_blocks - lba).min(32) as u32;
            ops.push(self.write(lba, blocks));
            lba += u64::from(blocks);
        }
        ops
    }
}
