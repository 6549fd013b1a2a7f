//! Binary units everywhere: allocator sizes are powers of two, and mixing MB and MiB in one
//! report makes figures look inconsistent when they are not.

/// Formats bytes in binary units with one decimal (`1.5 GiB`, `512 B`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Signed variant for deltas (`+3.0 MiB`, `-512 B`).
pub fn signed_bytes(n: i64) -> String {
    if n < 0 {
        format!("-{}", bytes(n.unsigned_abs()))
    } else {
        format!("+{}", bytes(n as u64))
    }
}

/// The largest batch size or sequence length memscope plans for (2^32): a shape and the
/// multiples planned from it (8 times the batch by default) stay far from `u64`'s end, where
/// saturating arithmetic would turn three asks into one.
pub const MAX_SHAPE: u64 = 1 << 32;

/// Parses `8GiB`, `1.5 GB`, `512MiB`, `1024` (bytes) into bytes. Decimal SI units are accepted too.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return None,
    };
    let r = v * mult;
    if !(0.0..1.8e19).contains(&r) {
        return None;
    }
    Some(r.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn formats_and_parses() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(signed_bytes(-2048), "-2.0 KiB");
        assert_eq!(parse_bytes("8GiB"), Some(8 << 30));
        assert_eq!(parse_bytes("1MiB"), Some(1 << 20));
        assert_eq!(parse_bytes("1.5 GB"), Some(1_500_000_000));
        assert_eq!(parse_bytes("12"), Some(12));
        assert_eq!(parse_bytes("x"), None);
    }
}
