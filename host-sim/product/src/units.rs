//! Sizes in bytes as people write them: `256M` on the command line, `1.5 GiB` in reports.

/// Parses a size in bytes with an optional binary suffix: `4096`, `64K`, `256M`, `1G`, `2T`
/// (also `KiB`, `MiB`, … and lower case). Errors on overflow, zero is allowed.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits);
    if num.is_empty() {
        return Err(format!(
            "bad size {s:?}: expected a number with an optional K/M/G/T suffix"
        ));
    }
    let n: u64 = num.parse().map_err(|e| format!("bad size {s:?}: {e}"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("bad size suffix in {s:?} (use K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// Formats bytes with a binary unit (`256 MiB`, `1.5 GiB`).
#[must_use]
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if (v - v.round()).abs() < 0.005 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes_and_refuse_overflow() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("256mib"), Ok(256 << 20));
        assert_eq!(parse_size(" 2T "), Ok(2 << 40));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("M").is_err());
        assert!(parse_size("1X").is_err());
        assert!(parse_size("16777216T").is_err());
    }

    #[test]
    fn bytes_format_in_binary_units() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(256 << 20), "256 MiB");
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
    }
}
