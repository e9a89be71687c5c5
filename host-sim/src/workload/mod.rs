//! Workloads: client streams that issue requests to LUNs, deterministic from a seed.
//!
//! Each stream is a closed loop at queue depth 1 on its own LUN (stream `i` uses LUN
//! `i % luns`; in `branch-office` each workload has its LUN): it issues its next request when the previous one completed (plus think time
//! where the workload has some). The runner ([`crate::runner`]) adds a flush every
//! `flush_interval` of virtual time per stream where the workload asks for one.
//!
//! | name | streams | what each stream does | source of the shape |
//! | --- | --- | --- | --- |
//! | `voice` | 8 | 4 KiB sequential writes (wrapping at the LUN end), a flush every second; `read_percent` % of requests are 4 KiB random reads of blocks written | the seed's IOMeter test of voice VMs (CUCM) |
//! | `mixed` | 3 | OLTP: 8 KiB random, 70 % reads; VDI: bursts of 16–64 requests of 4–32 KiB, 80 % writes, near one another, then 20–200 ms idle; file server: whole files of 16 KiB–1 MiB read (60 %) or written (40 %) in 64 KiB requests | VMware's vSAN ROBO mixed profile |
//! | `random-write` | 8 | 4 KiB random writes, a flush every second | |
//! | `sequential-read` | 8 | 4 KiB sequential reads of a pre-filled LUN | |
//! | `branch-office` | 26 | SQL (4 users, LUN 0): transactions of 4 random 8 KiB reads, one 8 KiB write, a 4 KiB append to the log (the LUN's last eighth) and a flush (the commit); VDI (20 desktops, LUN 1): a boot storm (16 sequential 32 KiB reads), then bursts of 16–64 small requests, 60 % reads, then 20–200 ms idle; file share (2 users, LUN 2): whole files of 100 MB (at most half the LUN) read or written (50 %) in 64 KiB requests, a flush after each file written | the second seed: a vSAN branch office running a TPC-E-like database, 20 VDI desktops and a dbench share at once |
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
    /// SQL + VDI + file share, each on its own LUN (the second use case).
    BranchOffice,
}

impl WorkloadKind {
    /// Every workload, in a fixed order.
    pub const ALL: [WorkloadKind; 5] = [
        WorkloadKind::Voice,
        WorkloadKind::Mixed,
        WorkloadKind::RandomWrite,
        WorkloadKind::SequentialRead,
        WorkloadKind::BranchOffice,
    ];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            WorkloadKind::Voice => "voice",
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::RandomWrite => "random-write",
            WorkloadKind::SequentialRead => "sequential-read",
            WorkloadKind::BranchOffice => "branch-office",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<WorkloadKind, String> {
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown workload {s:?} (expected voice, mixed, random-write, sequential-read or branch-office)"
                )
            })
    }

    /// Streams by default.
    #[must_use]
    pub const fn default_streams(self) -> usize {
        match self {
            WorkloadKind::Mixed => 3,
            WorkloadKind::BranchOffice => BRANCH_STREAMS,
            _ => 8,
        }
    }

    /// Whether the LUNs are written whole before the measured run (the workload reads).
    #[must_use]
    pub const fn needs_prefill(self) -> bool {
        matches!(
            self,
            WorkloadKind::Mixed | WorkloadKind::SequentialRead | WorkloadKind::BranchOffice
        )
    }

    /// Flush interval of each stream, in nanoseconds, if the workload flushes on a timer
    /// (`branch-office` flushes where its clients would: [`Op::Flush`]).
    #[must_use]
    pub const fn flush_interval_ns(self) -> Option<u64> {
        match self {
            WorkloadKind::Voice | WorkloadKind::RandomWrite | WorkloadKind::Mixed => {
                Some(1_000 * MS)
            }
            WorkloadKind::SequentialRead | WorkloadKind::BranchOffice => None,
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
                let data_next = rng.random::<u32>() as u64;
                let (kind, lun) = self.stream_kind(i, &mut rng, lun_blocks);
                Stream {
                    index: i,
                    lun: (lun % luns.max(1)) as u16,
                    lun_blocks,
                    rng,
                    kind,
                    data_next,
                    written_hi: 0,
                    txn_begins: false,
                }
            })
            .collect()
    }

    /// What stream `i` does, and the LUN index it uses (before wrapping at the LUN count).
    fn stream_kind(&self, i: usize, rng: &mut ChaCha8Rng, lun_blocks: u64) -> (StreamKind, usize) {
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
                1 => StreamKind::Vdi {
                    left: 0,
                    window: 0,
                    write_percent: 80,
                    boot_left: 0,
                },
                _ => StreamKind::FileServer {
                    next: 0,
                    end: 0,
                    write: false,
                    file_blocks: 0,
                    closing: false,
                },
            },
            WorkloadKind::BranchOffice => return branch_kind(i, rng, lun_blocks),
        };
        (kind, i)
    }
}

/// Streams of `branch-office`: SQL users, VDI desktops, file share users.
const BRANCH_SQL: usize = 4;
const BRANCH_VDI: usize = 20;
const BRANCH_FILES: usize = 2;
const BRANCH_STREAMS: usize = BRANCH_SQL + BRANCH_VDI + BRANCH_FILES;
/// SQL: random 8 KiB page reads per transaction, before its page write, log append and commit.
const SQL_READS: u8 = 4;
/// VDI: 32 KiB reads of a desktop's boot.
const BOOT_READS: u32 = 16;
/// File share: the seed's dbench files, 100 MB, in 4 KiB blocks (64 KiB aligned).
const SHARE_FILE_BLOCKS: u64 = 100_000_000 / 4096 / 16 * 16;

/// Branch-office stream `i` (the pattern repeats past 26 streams) and its LUN index.
fn branch_kind(i: usize, rng: &mut ChaCha8Rng, lun_blocks: u64) -> (StreamKind, usize) {
    let k = i % BRANCH_STREAMS;
    if k < BRANCH_SQL {
        let log_blocks = (lun_blocks / 8).max(1);
        let log_start = lun_blocks - log_blocks;
        let kind = StreamKind::Sql {
            step: 0,
            log_next: log_start + rng.random_range(0..log_blocks),
        };
        (kind, 0)
    } else if k < BRANCH_SQL + BRANCH_VDI {
        let kind = StreamKind::Vdi {
            left: 0,
            window: rng.random_range(0..lun_blocks),
            write_percent: 40,
            boot_left: BOOT_READS,
        };
        (kind, 1)
    } else {
        let file_blocks = SHARE_FILE_BLOCKS.min(lun_blocks / 2 / 16 * 16).max(16);
        let kind = StreamKind::FileServer {
            next: 0,
            end: 0,
            write: false,
            file_blocks,
            closing: false,
        };
        (kind, 2)
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
    /// Make every write this stream had acknowledged durable (a database commit, a file
    /// closed); it ends the stream's transaction.
    Flush,
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
    /// `left` requests of the burst in the 1 MiB at `window`; `boot_left` 32 KiB reads of the
    /// boot storm from `window` before the first burst.
    Vdi {
        left: u32,
        window: u64,
        write_percent: u8,
        boot_left: u32,
    },
    /// Files of `file_blocks` (0: 16 KiB–1 MiB, log-uniform); `closing`: the file just
    /// written gets its flush next (fixed-size files only).
    FileServer {
        next: u64,
        end: u64,
        write: bool,
        file_blocks: u64,
        closing: bool,
    },
    /// The next request of a transaction: `step` < [`SQL_READS`] page reads, then the page
    /// write, the log append at `log_next`, the commit.
    Sql {
        step: u8,
        log_next: u64,
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
    /// The request [`Stream::next_op`] returned last begins a transaction.
    txn_begins: bool,
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
            StreamKind::Vdi {
                write_percent: 80, ..
            } => "vdi",
            StreamKind::Vdi { .. } => "vdi desktop",
            StreamKind::FileServer { file_blocks: 0, .. } => "file server",
            StreamKind::FileServer { .. } => "file share",
            StreamKind::Sql { .. } => "sql",
        }
    }

    /// Whether the request [`Stream::next_op`] returned last begins a transaction (a SQL
    /// transaction's first read, a file share's file); asking clears it.
    pub fn take_transaction_start(&mut self) -> bool {
        core::mem::take(&mut self.txn_begins)
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
            StreamKind::Vdi {
                left,
                window,
                write_percent,
                boot_left,
            } => self.next_vdi(left, window, write_percent, boot_left),
            StreamKind::FileServer {
                next,
                end,
                write,
                file_blocks,
                closing,
            } => self.next_file(next, end, write, file_blocks, closing),
            StreamKind::Sql { step, log_next } => self.next_sql(step, log_next),
        }
    }

    /// The next VDI request (from [`StreamKind::Vdi`]'s fields): the boot storm, then bursts
    /// near one another with think time.
    fn next_vdi(&mut self, left: u32, window: u64, write_percent: u8, boot_left: u32) -> Op {
        let n = self.lun_blocks;
        if boot_left > 0 {
            let lba = (window + u64::from(BOOT_READS - boot_left) * 8) % n;
            self.kind = StreamKind::Vdi {
                left,
                window,
                write_percent,
                boot_left: boot_left - 1,
            };
            return self.read(lba, 8);
        }
        if left == 0 {
            // A new burst in a new 1 MiB window, after think time.
            let burst = self.rng.random_range(16..=64u32);
            let win = self.random_lba(256.min(n as u32));
            self.kind = StreamKind::Vdi {
                left: burst,
                window: win,
                write_percent,
                boot_left,
            };
            return Op::Idle(self.rng.random_range(20 * MS..=200 * MS));
        }
        self.kind = StreamKind::Vdi {
            left: left - 1,
            window,
            write_percent,
            boot_left,
        };
        let blocks = match self.rng.random_range(0..10u8) {
            0..=5 => 1,
            6 | 7 => 2,
            8 => 4,
            _ => 8,
        };
        let span = 256u64.min(n - window);
        let off = self.rng.random_range(0..span.max(1)) / u64::from(blocks) * u64::from(blocks);
        let lba = (window + off).min(n - 1);
        if self.rng.random_range(0..100u8) < write_percent {
            self.write(lba, blocks)
        } else {
            self.read(lba, blocks)
        }
    }

    /// The next file server request (from [`StreamKind::FileServer`]'s fields): whole files in
    /// 64 KiB requests, a flush after each file written where files have a fixed size.
    fn next_file(
        &mut self,
        next: u64,
        end: u64,
        write: bool,
        file_blocks: u64,
        closing: bool,
    ) -> Op {
        let n = self.lun_blocks;
        if closing {
            self.kind = StreamKind::FileServer {
                next,
                end,
                write,
                file_blocks,
                closing: false,
            };
            return Op::Flush;
        }
        self.txn_begins = next >= end && file_blocks > 0;
        let (next, end, write) = if next >= end {
            // 16 KiB to 1 MiB (log-uniform), 40 % written; or the fixed size, 50 % written.
            let (size, write_percent) = if file_blocks == 0 {
                (1u64 << self.rng.random_range(2..=8u32), 40)
            } else {
                (file_blocks, 50)
            };
            let size = size.min(n);
            let start = self.random_lba(16.min(n as u32)).min(n - size);
            let write = self.rng.random_range(0..100u8) < write_percent;
            (start, start + size, write)
        } else {
            (next, end, write)
        };
        let blocks = (end - next).min(16) as u32;
        let next = next + u64::from(blocks);
        self.kind = StreamKind::FileServer {
            next,
            end,
            write,
            file_blocks,
            closing: write && file_blocks > 0 && next >= end,
        };
        if write {
            self.write(next - u64::from(blocks), blocks)
        } else {
            self.read(next - u64::from(blocks), blocks)
        }
    }

    /// The next request of a SQL transaction.
    fn next_sql(&mut self, step: u8, log_next: u64) -> Op {
        let n = self.lun_blocks;
        let log_blocks = (n / 8).max(1);
        let data_blocks = (n - log_blocks).max(2);
        let next_step = if step > SQL_READS + 1 { 0 } else { step + 1 };
        self.txn_begins = step == 0;
        let mut log = log_next;
        let op = if step <= SQL_READS {
            let slots = (data_blocks / 2).max(1);
            let lba = self.rng.random_range(0..slots) * 2;
            if step < SQL_READS {
                self.read(lba, 2)
            } else {
                self.write(lba, 2)
            }
        } else if step == SQL_READS + 1 {
            log = if log_next + 1 >= n {
                n - log_blocks
            } else {
                log_next + 1
            };
            self.write(log_next, 1)
        } else {
            Op::Flush
        };
        self.kind = StreamKind::Sql {
            step: next_step,
            log_next: log,
        };
        op
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
