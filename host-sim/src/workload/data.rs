//! What workloads write: 4 KiB blocks numbered by a block id, either cut from real files of this
//! machine or generated with a chosen compressibility. The same id always gives the same bytes,
//! so a run keeps only ids per LBA and regenerates the content to verify it.

use std::fmt;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Bytes of one block.
pub const BLOCK: usize = 4096;

/// The directories real data is read from, in this order; those missing on this machine are
/// skipped. Licence texts, package documentation (text and gzip), shared libraries: a mix of
/// very compressible, incompressible and moderately compressible content, like a VM's disk.
pub const REAL_DATA_DIRS: [&str; 5] = [
    "/usr/share/common-licenses",
    "/usr/share/doc",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/bin",
];

/// Default amount of real data read, in bytes (64 MiB).
pub const DEFAULT_REAL_BYTES: usize = 64 << 20;

/// Where block content comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataKind {
    /// Real files of this machine ([`REAL_DATA_DIRS`]).
    Real,
    /// Generated blocks of which about this many percent (0–100) compress away.
    Synthetic(u8),
}

impl DataKind {
    /// Parses `real` or `synthetic:<percent compressible>`.
    pub fn parse(s: &str) -> Result<DataKind, String> {
        if s.eq_ignore_ascii_case("real") {
            return Ok(DataKind::Real);
        }
        let Some(p) = s
            .strip_prefix("synthetic:")
            .or_else(|| s.strip_prefix("synthetic="))
        else {
            return Err(format!(
                "bad data source {s:?} (expected real or synthetic:<percent compressible>)"
            ));
        };
        let p = p.trim_end_matches('%');
        match p.parse::<u8>() {
            Ok(v) if v <= 100 => Ok(DataKind::Synthetic(v)),
            _ => Err(format!(
                "bad compressibility {p:?} in {s:?} (expected 0 to 100)"
            )),
        }
    }
}

impl fmt::Display for DataKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataKind::Real => f.write_str("real"),
            DataKind::Synthetic(p) => write!(f, "synthetic:{p}"),
        }
    }
}

/// A source of 4 KiB blocks by id.
#[derive(Clone)]
pub struct DataSource {
    kind: DataKind,
    /// Real data: whole blocks (the last partial block is dropped).
    real: Vec<u8>,
    seed: u64,
    /// Files read, for the report.
    files: usize,
}

impl fmt::Debug for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataSource")
            .field("kind", &self.kind)
            .field("real_bytes", &self.real.len())
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl DataSource {
    /// A source of `kind`. Real data reads up to `real_bytes` bytes from [`REAL_DATA_DIRS`]
    /// (each existing directory gets an equal share, unused shares pass on), files in sorted
    /// path order, concatenated; unreadable files and symbolic links are skipped. Synthetic
    /// data is generated from `seed`.
    ///
    /// Errors: real data was asked for and less than one block could be read.
    pub fn new(kind: DataKind, real_bytes: usize, seed: u64) -> Result<DataSource, String> {
        match kind {
            DataKind::Real => {
                let dirs: Vec<&Path> = REAL_DATA_DIRS
                    .iter()
                    .map(Path::new)
                    .filter(|p| p.is_dir())
                    .collect();
                Self::from_dirs(&dirs, real_bytes)
            }
            DataKind::Synthetic(_) => Ok(DataSource {
                kind,
                real: Vec::new(),
                seed,
                files: 0,
            }),
        }
    }

    /// Real data from `dirs` (see [`DataSource::new`]).
    pub fn from_dirs(dirs: &[&Path], real_bytes: usize) -> Result<DataSource, String> {
        let mut buf = Vec::with_capacity(real_bytes.min(256 << 20));
        let mut files = 0;
        for (i, dir) in dirs.iter().enumerate() {
            // An equal share of what is left for this and the directories after it.
            let left = real_bytes - buf.len();
            let share = left / (dirs.len() - i);
            let stop = buf.len() + share;
            let mut paths = Vec::new();
            walk(dir, &mut paths);
            for p in paths {
                if buf.len() >= stop {
                    break;
                }
                let Ok(f) = fs::File::open(&p) else { continue };
                let want = (stop - buf.len()) as u64;
                if f.take(want).read_to_end(&mut buf).is_ok() {
                    files += 1;
                }
            }
        }
        buf.truncate(buf.len() / BLOCK * BLOCK);
        if buf.is_empty() {
            return Err(format!(
                "no real data could be read from {} (use --data synthetic:<percent>)",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(DataSource {
            kind: DataKind::Real,
            real: buf,
            seed: 0,
            files,
        })
    }

    /// The kind of data.
    #[must_use]
    pub fn kind(&self) -> DataKind {
        self.kind
    }

    /// Blocks of real data held (0 for synthetic data).
    #[must_use]
    pub fn real_blocks(&self) -> u64 {
        (self.real.len() / BLOCK) as u64
    }

    /// Files real data was read from.
    #[must_use]
    pub fn files(&self) -> usize {
        self.files
    }

    /// Writes block `id` into `out` (exactly [`BLOCK`] bytes). Real data: block `id` modulo
    /// the blocks read. Synthetic data: the first `100 - p` percent of the block are
    /// pseudo-random bytes from (seed, id), the rest repeats a short pattern derived from the id,
    /// so LZ4 saves about `p` percent.
    ///
    /// # Panics
    /// If `out` is not [`BLOCK`] bytes.
    pub fn fill(&self, id: u64, out: &mut [u8]) {
        assert_eq!(out.len(), BLOCK, "DataSource::fill takes one 4 KiB block");
        match self.kind {
            DataKind::Real => {
                let n = self.real_blocks();
                let i = (id % n) as usize * BLOCK;
                out.copy_from_slice(&self.real[i..i + BLOCK]);
            }
            DataKind::Synthetic(p) => {
                let random = BLOCK * (100 - usize::from(p)) / 100;
                let mut rng =
                    ChaCha8Rng::seed_from_u64(self.seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                rng.fill_bytes(&mut out[..random]);
                let tag = id.to_le_bytes();
                for (j, b) in out[random..].iter_mut().enumerate() {
                    *b = tag[j % 8] ^ (j / 64) as u8;
                }
            }
        }
    }

    /// Block `id` as a new vector.
    #[must_use]
    pub fn block(&self, id: u64) -> Vec<u8> {
        let mut v = vec![0u8; BLOCK];
        self.fill(id, &mut v);
        v
    }
}

/// Regular files under `dir`, recursively, in sorted path order; symbolic links are not
/// followed.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let Ok(md) = fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            walk(&p, out);
        } else if md.is_file() {
            out.push(p);
        }
    }
}
