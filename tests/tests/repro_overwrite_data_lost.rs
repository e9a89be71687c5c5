//! Reproducer (found by the host-sim demo): sequential overwrites of two LUNs, interleaved
//! block by block, lose data. No fault, no failure, nothing but `write` and one final `flush`:
//! after 22,528 writes over 2 LUNs of 4096 blocks (a bit under three passes), 7,904 blocks read
//! back as `IoError::Unrecoverable` ("data lost"), starting at LUN 0 LBA 0.
//!
//! What host-sim saw when reading everything back every 512 writes (same pool, memory disks):
//! all reads are fine up to write 22,015; the log enters a new segment at write 22,270; after
//! that, every block last written by writes 14,336..22,239 (the data of the last few segments
//! before the switch) reads as "data lost", already before the final flush. With
//! `reserved_segments` 2 or 8 the same happens at other segment switches (writes 17,790 and
//! 34,942), each time losing the blocks written since roughly the previous checkpoints. So it
//! looks like a segment switch reuses or releases a segment (or the map pages) that still holds
//! live data. The block content matters only in that it sets the compressed extent sizes: a
//! simpler generator with the same compressibility does not hit it at these counts.

use std::collections::BTreeMap;

use raidcore::pool::{Pool, PoolConfig};
use raidcore_hal::{BlockDevice, BlockSize, ErrorKind, ErrorType, check_io};

/// A sparse in-memory disk of 512-byte blocks (only written blocks take memory).
struct Sparse {
    blocks: u64,
    data: BTreeMap<u64, [u8; 512]>,
}

impl ErrorType for Sparse {
    type Error = ErrorKind;
}

impl BlockDevice for Sparse {
    fn block_size(&self) -> BlockSize {
        BlockSize::B512
    }
    fn block_count(&self) -> u64 {
        self.blocks
    }
    fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ErrorKind> {
        check_io(BlockSize::B512, self.blocks, lba, buf.len())?;
        for (i, b) in buf.chunks_exact_mut(512).enumerate() {
            match self.data.get(&(lba + i as u64)) {
                Some(d) => b.copy_from_slice(d),
                None => b.fill(0),
            }
        }
        Ok(())
    }
    fn write(&mut self, lba: u64, buf: &[u8]) -> Result<(), ErrorKind> {
        check_io(BlockSize::B512, self.blocks, lba, buf.len())?;
        for (i, b) in buf.chunks_exact(512).enumerate() {
            let mut d = [0u8; 512];
            d.copy_from_slice(b);
            self.data.insert(lba + i as u64, d);
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ErrorKind> {
        Ok(())
    }
}

type P = Pool<Sparse, Vec<u8>, 16, 16, 256, 16>;

/// Block `id`, as host-sim's `DataSource` makes `synthetic:50` data with seed 1: 2048
/// ChaCha8 bytes seeded by the id, then a short pattern of the id's bytes. (With a simpler
/// generator — xorshift first half, `id ^ (j % 8)` second half — the same run reads back fine,
/// so the extent sizes this data compresses to matter.)
fn block(id: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut out = vec![0u8; 4096];
    let mut rng =
        rand_chacha::ChaCha8Rng::seed_from_u64(1 ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.fill_bytes(&mut out[..2048]);
    let tag = id.to_le_bytes();
    for (j, b) in out[2048..].iter_mut().enumerate() {
        *b = tag[j % 8] ^ (j / 64) as u8;
    }
    out
}

#[test]
fn interleaved_sequential_overwrites_read_back() {
    let cfg = PoolConfig {
        max_extent_blocks: 16,
        segment_stripes: 8,
        reserved_segments: 8,
        ..PoolConfig::default()
    };
    let disks: Vec<Sparse> = (0..6)
        .map(|_| Sparse {
            blocks: (64 << 20) / 512,
            data: BTreeMap::new(),
        })
        .collect();
    let mem = vec![0u8; P::memory_bytes(&cfg, 6)];
    let mut p = P::create(disks, Vec::new(), cfg, [3; 16], mem).unwrap();
    let luns = [
        p.create_lun("a", 4096).unwrap(),
        p.create_lun("b", 4096).unwrap(),
    ];
    let mut last = [vec![u64::MAX; 4096], vec![u64::MAX; 4096]];
    let mut pos = [0u64; 2];
    for id in 0..22_528u64 {
        let l = (id % 2) as usize;
        let lba = pos[l];
        pos[l] = (lba + 1) % 4096;
        p.write(luns[l], lba, &block(id), false).unwrap();
        last[l][lba as usize] = id;
    }
    p.flush().unwrap();
    let mut buf = vec![0u8; 4096];
    let mut bad = Vec::new();
    for l in 0..2 {
        for lba in 0..4096u64 {
            match p.read(luns[l], lba, &mut buf) {
                Ok(()) if buf == block(last[l][lba as usize]) => {}
                Ok(()) => bad.push(format!("LUN {l} LBA {lba}: wrong data")),
                Err(e) => bad.push(format!("LUN {l} LBA {lba}: {e}")),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} blocks bad, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}
