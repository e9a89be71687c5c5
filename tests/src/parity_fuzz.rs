//! The body of the `parity_reconstruct` fuzz target (`tests/fuzz`), shared with the seeded stable
//! test in `tests/tests/parity_props.rs` so both run the same checks.
//!
//! The input bytes choose a stripe geometry, data, an erasure set and one corrupted byte:
//!
//! | byte | meaning |
//! | --- | --- |
//! | 0 | data strips: 1..=30, or 250..=255 for values >= 240 |
//! | 1 | bit 0: scheme (0 = P, 1 = PQ); bits 1..=2: erasures wanted (capped at the tolerance); bit 3: also try one erasure more than tolerated |
//! | 2 | strip length in 8-byte words, 1..=64 (1..=16 for more than 30 strips) |
//! | 3, 4, 5 | erased columns (mod the column count; duplicates are dropped) |
//! | 6, 7, 8 | corrupted column, byte offset, XOR mask (0 means 1) |
//! | 9.. | data, repeated to fill the strips, mixed with the position so strips differ |
//!
//! Every input is valid; nothing panics for a correct library. A wrong result comes back as `Err`
//! with a description, and the fuzz target turns that into a crash.

use raidcore::parity::{self, CheckResult, Kernel, Scheme};

/// A decoded fuzz case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Data strips.
    pub data_strips: usize,
    /// Parity scheme.
    pub scheme: Scheme,
    /// Strip length in bytes (a multiple of 8).
    pub strip_bytes: usize,
    /// Distinct erased column indices, at most the scheme's tolerance.
    pub erased: Vec<usize>,
    /// One more distinct column than tolerated, when the input asks for the refusal check.
    pub too_many: Option<Vec<usize>>,
    /// (column, byte offset, XOR mask != 0) of one corruption for the `check` test.
    pub corrupt: (usize, usize, u8),
    /// Columns D_0..D_{n-1} with data, P (and Q) zero until generated.
    pub columns: Vec<Vec<u8>>,
}

fn byte(input: &[u8], i: usize) -> u8 {
    input.get(i).copied().unwrap_or(0)
}

/// Decodes `input` into a [`Case`] (every input decodes).
#[must_use]
pub fn decode(input: &[u8]) -> Case {
    let b0 = byte(input, 0);
    let data_strips = if b0 >= 240 {
        250 + usize::from(b0 % 6)
    } else {
        1 + usize::from(b0 % 30)
    };
    let b1 = byte(input, 1);
    let scheme = if b1 & 1 == 0 { Scheme::P } else { Scheme::PQ };
    let max_words = if data_strips > 30 { 16 } else { 64 };
    let strip_bytes = 8 * (1 + usize::from(byte(input, 2)) % max_words);
    let width = data_strips + scheme.parity_columns();
    let tolerance = scheme.parity_columns();
    let wanted = usize::from((b1 >> 1) & 3).min(tolerance);
    let mut picks: Vec<usize> = Vec::new();
    for i in 3..6 {
        let c = usize::from(byte(input, i)) % width;
        if !picks.contains(&c) {
            picks.push(c);
        }
    }
    // Fill up with the next free columns so "one more than tolerated" always has distinct ones.
    let mut next = 0;
    while picks.len() < tolerance + 1 && next < width {
        if !picks.contains(&next) {
            picks.push(next);
        }
        next += 1;
    }
    let erased: Vec<usize> = picks.iter().copied().take(wanted).collect();
    let too_many = (b1 & 8 != 0 && picks.len() > tolerance)
        .then(|| picks.iter().copied().take(tolerance + 1).collect());
    let corrupt = (
        usize::from(byte(input, 6)) % width,
        usize::from(byte(input, 7)) % strip_bytes,
        byte(input, 8).max(1),
    );
    let payload = input.get(9..).unwrap_or(&[]);
    let mut columns = vec![vec![0u8; strip_bytes]; width];
    for (i, col) in columns.iter_mut().take(data_strips).enumerate() {
        for (k, b) in col.iter_mut().enumerate() {
            let pos = i * strip_bytes + k;
            let raw = if payload.is_empty() {
                0
            } else {
                payload[pos % payload.len()]
            };
            // Mix in the position (xorshift-like) so repeated payloads still give distinct strips.
            let mut h = (pos as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
            *b = raw ^ if payload.len() > pos { 0 } else { h as u8 };
        }
    }
    Case {
        data_strips,
        scheme,
        strip_bytes,
        erased,
        too_many,
        corrupt,
        columns,
    }
}

fn generate(kernel: Kernel, case: &Case, cols: &mut [Vec<u8>]) -> Result<(), String> {
    let n = case.data_strips;
    let (data, parity) = cols.split_at_mut(n);
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    match case.scheme {
        Scheme::P => parity::gen_p_with(kernel, &refs, &mut parity[0]),
        Scheme::PQ => {
            let (p, q) = parity.split_at_mut(1);
            parity::gen_pq_with(kernel, &refs, &mut p[0], &mut q[0])
        }
    }
    .map_err(|e| format!("{kernel:?}: generating parity failed: {e}"))
}

/// Runs every check on the case `input` decodes to, with every kernel this CPU supports:
/// generated parity agrees across kernels and passes `check`; reconstructing the erased columns
/// gives the original back; one corrupted byte is flagged (and for PQ, its column named); an
/// erasure set beyond the tolerance is refused with `ParityError::Erasures` and changes nothing.
///
/// # Errors
/// A description of the first wrong result.
pub fn check_parity_reconstruct(input: &[u8]) -> Result<(), String> {
    let case = decode(input);
    let n = case.data_strips;
    let mut golden = case.columns.clone();
    generate(Kernel::PORTABLE, &case, &mut golden)?;
    for kernel in Kernel::supported() {
        let mut cols = case.columns.clone();
        generate(kernel, &case, &mut cols)?;
        if cols != golden {
            return Err(format!(
                "{kernel:?}: parity differs from the portable kernel's ({case:?})"
            ));
        }
        let refs: Vec<&[u8]> = cols.iter().map(Vec::as_slice).collect();
        match parity::check_with(kernel, &refs, case.scheme) {
            Ok(CheckResult::Consistent) => {}
            other => return Err(format!("{kernel:?}: fresh stripe checks as {other:?}")),
        }

        // Erase (fill with junk) and rebuild.
        let mut work = cols.clone();
        for &e in &case.erased {
            work[e]
                .iter_mut()
                .enumerate()
                .for_each(|(k, b)| *b = (k as u8).wrapping_mul(31) ^ 0xa5);
        }
        let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
        parity::reconstruct_with(kernel, &mut m, case.scheme, &case.erased)
            .map_err(|e| format!("{kernel:?}: reconstruct {:?} failed: {e}", case.erased))?;
        if work != golden {
            let bad: Vec<usize> = (0..work.len()).filter(|&i| work[i] != golden[i]).collect();
            return Err(format!(
                "{kernel:?}: reconstruct of {:?} ({:?}, n={n}, {} bytes) got columns {bad:?} wrong",
                case.erased, case.scheme, case.strip_bytes
            ));
        }

        // One corrupted byte.
        let (col, at, mask) = case.corrupt;
        let mut bad = cols.clone();
        bad[col][at] ^= mask;
        let refs: Vec<&[u8]> = bad.iter().map(Vec::as_slice).collect();
        let want_suspect = if case.scheme == Scheme::PQ {
            Some(col)
        } else {
            None
        };
        match parity::check_with(kernel, &refs, case.scheme) {
            Ok(CheckResult::Mismatch { suspect, .. }) if suspect == want_suspect => {}
            other => {
                return Err(format!(
                    "{kernel:?}: corrupting column {col} byte {at} gave {other:?} ({:?}, n={n})",
                    case.scheme
                ));
            }
        }

        // Beyond tolerance: refused, nothing written.
        if let Some(too_many) = &case.too_many {
            let mut work = cols.clone();
            let mut m: Vec<&mut [u8]> = work.iter_mut().map(Vec::as_mut_slice).collect();
            let r = parity::reconstruct_with(kernel, &mut m, case.scheme, too_many);
            if r != Err(parity::ParityError::Erasures) || work != cols {
                return Err(format!("{kernel:?}: erasing {too_many:?} gave {r:?}"));
            }
        }
    }
    Ok(())
}
