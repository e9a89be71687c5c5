//! Backends for tests: a sparse in-memory backend and a wrapper that checks the call contract.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::backend::{BLOCK, BLOCK_U64, Backend, BackendResult, ExportInfo};

/// Calls a [`MemBackend`] has seen, for assertions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemCounters {
    /// `read` calls.
    pub reads: u64,
    /// `write` calls.
    pub writes: u64,
    /// `write` calls with FUA.
    pub fua_writes: u64,
    /// Blocks written by `write`.
    pub blocks_written: u64,
    /// `flush` calls.
    pub flushes: u64,
    /// `trim` calls.
    pub trims: u64,
    /// `write_zeroes` calls.
    pub write_zeroes: u64,
    /// `shutdown` calls.
    pub shutdowns: u64,
}

#[derive(Debug, Default)]
struct MemState {
    exports: Vec<ExportInfo>,
    /// Written blocks by (export, LBA); absent blocks read as zeroes.
    blocks: HashMap<(usize, u64), Box<[u8]>>,
    counters: MemCounters,
}

/// A sparse in-memory backend (absent blocks read as zeroes). Memory grows with the blocks
/// written, not with the export size. Cloning gives another handle to the same storage, so a
/// test can keep one handle and inspect the data after the server has stopped.
#[derive(Clone, Debug, Default)]
pub struct MemBackend {
    state: Arc<Mutex<MemState>>,
}

impl MemBackend {
    /// Empty (all-zero) exports.
    pub fn new(exports: Vec<ExportInfo>) -> Self {
        MemBackend {
            state: Arc::new(Mutex::new(MemState {
                exports,
                ..MemState::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counters of the calls seen so far.
    pub fn counters(&self) -> MemCounters {
        self.lock().counters
    }

    /// `len` bytes at byte `offset` of `export` (zeroes where never written).
    pub fn read_bytes(&self, export: usize, offset: u64, len: usize) -> Vec<u8> {
        let st = self.lock();
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let pos = offset + done as u64;
            let in_block = (pos % BLOCK_U64) as usize;
            let n = (BLOCK - in_block).min(len - done);
            if let Some(b) = st.blocks.get(&(export, pos / BLOCK_U64)) {
                out[done..done + n].copy_from_slice(&b[in_block..in_block + n]);
            }
            done += n;
        }
        out
    }

    /// Writes `data` at byte `offset` of `export` directly (test setup, bypassing the server).
    pub fn write_bytes(&self, export: usize, offset: u64, data: &[u8]) {
        let mut st = self.lock();
        for (i, byte) in data.iter().enumerate() {
            let pos = offset + i as u64;
            let b = st
                .blocks
                .entry((export, pos / BLOCK_U64))
                .or_insert_with(|| vec![0u8; BLOCK].into_boxed_slice());
            b[(pos % BLOCK_U64) as usize] = *byte;
        }
    }

    /// Number of blocks held in memory.
    pub fn allocated_blocks(&self) -> usize {
        self.lock().blocks.len()
    }
}

impl Backend for MemBackend {
    fn exports(&self) -> Vec<ExportInfo> {
        self.lock().exports.clone()
    }

    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        let mut st = self.lock();
        st.counters.reads += 1;
        for (i, chunk) in buf.chunks_mut(BLOCK).enumerate() {
            match st.blocks.get(&(export, lba + i as u64)) {
                Some(b) => chunk.copy_from_slice(&b[..chunk.len()]),
                None => chunk.fill(0),
            }
        }
        Ok(())
    }

    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult {
        let mut st = self.lock();
        st.counters.writes += 1;
        st.counters.fua_writes += u64::from(fua);
        for (i, chunk) in data.chunks(BLOCK).enumerate() {
            st.counters.blocks_written += 1;
            let mut b = vec![0u8; BLOCK].into_boxed_slice();
            b[..chunk.len()].copy_from_slice(chunk);
            st.blocks.insert((export, lba + i as u64), b);
        }
        Ok(())
    }

    fn flush(&mut self, _export: usize) -> BackendResult {
        self.lock().counters.flushes += 1;
        Ok(())
    }

    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        let mut st = self.lock();
        st.counters.trims += 1;
        if blocks > st.blocks.len() as u64 {
            // A huge trim over a sparse map: walk the map instead of the range.
            st.blocks
                .retain(|&(e, l), _| e != export || l < lba || l - lba >= blocks);
        } else {
            for l in lba..lba + blocks {
                st.blocks.remove(&(export, l));
            }
        }
        Ok(())
    }

    fn write_zeroes(
        &mut self,
        export: usize,
        lba: u64,
        blocks: u64,
        _fua: bool,
        no_hole: bool,
    ) -> BackendResult {
        let mut st = self.lock();
        st.counters.write_zeroes += 1;
        for l in lba..lba + blocks {
            if no_hole {
                st.blocks
                    .insert((export, l), vec![0u8; BLOCK].into_boxed_slice());
            } else {
                st.blocks.remove(&(export, l));
            }
        }
        Ok(())
    }

    fn stats_json(&self) -> serde_json::Value {
        serde_json::json!({ "allocated_blocks": self.allocated_blocks() })
    }

    fn shutdown(&mut self) -> BackendResult {
        self.lock().counters.shutdowns += 1;
        Ok(())
    }
}

/// Wraps a backend and panics if the server breaks the [`Backend`] contract: export index in
/// range, non-empty whole-block buffers no larger than `max_request_bytes` rounded up plus one
/// block, ranges inside the export, no writes to read-only exports, nothing after `shutdown`.
#[derive(Debug)]
pub struct CheckingBackend<B> {
    inner: B,
    exports: Vec<ExportInfo>,
    max_blocks: u64,
    shut_down: bool,
}

impl<B: Backend> CheckingBackend<B> {
    /// Checks calls to `inner`; requests may be up to `max_request_bytes` long.
    pub fn new(inner: B, max_request_bytes: u32) -> Self {
        let exports = inner.exports();
        let max_blocks = u64::from(max_request_bytes).div_ceil(BLOCK_U64) + 1;
        CheckingBackend {
            inner,
            exports,
            max_blocks,
            shut_down: false,
        }
    }

    /// The wrapped backend.
    pub fn into_inner(self) -> B {
        self.inner
    }

    fn check(&self, what: &str, export: usize, lba: u64, blocks: u64, writes: bool, limit: bool) {
        assert!(!self.shut_down, "{what} after shutdown");
        let Some(e) = self.exports.get(export) else {
            panic!("{what}: export {export} does not exist")
        };
        assert!(blocks > 0, "{what}: empty request");
        assert!(
            !limit || blocks <= self.max_blocks,
            "{what}: {blocks} blocks is over the limit"
        );
        assert!(
            lba.checked_add(blocks).is_some_and(|end| end <= e.blocks()),
            "{what}: blocks {lba}+{blocks} outside export {export} of {} blocks",
            e.blocks()
        );
        assert!(
            !(writes && e.read_only),
            "{what} on read-only export {export}"
        );
    }

    fn check_buf(what: &str, len: usize) -> u64 {
        assert!(
            len.is_multiple_of(BLOCK),
            "{what}: buffer of {len} bytes is not whole blocks"
        );
        (len / BLOCK) as u64
    }
}

impl<B: Backend> Backend for CheckingBackend<B> {
    fn exports(&self) -> Vec<ExportInfo> {
        self.inner.exports()
    }

    fn read(&mut self, export: usize, lba: u64, buf: &mut [u8]) -> BackendResult {
        let n = Self::check_buf("read", buf.len());
        self.check("read", export, lba, n, false, true);
        self.inner.read(export, lba, buf)
    }

    fn write(&mut self, export: usize, lba: u64, data: &[u8], fua: bool) -> BackendResult {
        let n = Self::check_buf("write", data.len());
        self.check("write", export, lba, n, true, true);
        self.inner.write(export, lba, data, fua)
    }

    fn flush(&mut self, export: usize) -> BackendResult {
        assert!(!self.shut_down, "flush after shutdown");
        assert!(
            export < self.exports.len(),
            "flush: export {export} does not exist"
        );
        self.inner.flush(export)
    }

    fn trim(&mut self, export: usize, lba: u64, blocks: u64) -> BackendResult {
        self.check("trim", export, lba, blocks, true, false);
        self.inner.trim(export, lba, blocks)
    }

    fn write_zeroes(
        &mut self,
        export: usize,
        lba: u64,
        blocks: u64,
        fua: bool,
        no_hole: bool,
    ) -> BackendResult {
        self.check("write_zeroes", export, lba, blocks, true, true);
        self.inner.write_zeroes(export, lba, blocks, fua, no_hole)
    }

    fn stats_json(&self) -> serde_json::Value {
        self.inner.stats_json()
    }

    fn shutdown(&mut self) -> BackendResult {
        assert!(!self.shut_down, "shutdown called twice");
        self.shut_down = true;
        self.inner.shutdown()
    }
}
