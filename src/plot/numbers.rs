//! Numbers as the charts print them: compact SI prefixes (`1.5k`, `2.5T`), a unit beside
//! them (`1.79 TB/s`), and shared decimals so values printed side by side line up.
//!
//! Tick labels, bar values and roof labels all go through here, so one value reads the same
//! wherever a chart shows it.

/// `v` with at most `sig` significant digits, trailing zeros dropped.
pub(crate) fn sig_digits(v: f64, sig: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            format!("{v}")
        };
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (sig - 1 - mag).clamp(0, 9) as usize;
    let s = format!("{:.*}", decimals, v);
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// Compact number: `1.5k`, `10k`, `2.5M`, `1T`, `0.25`; up to four significant digits.
pub(crate) fn compact(v: f64) -> String {
    compact_sig(v, 4)
}

pub(crate) fn compact_sig(v: f64, sig: i32) -> String {
    let a = v.abs();
    const PREFIXES: [(f64, &str); 5] =
        [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, p) in PREFIXES {
        // Round first so 999.96 becomes "1k", not "1000".
        if a >= scale * 0.99995 {
            return format!("{}{p}", sig_digits(v / scale, sig));
        }
    }
    if a != 0.0 && a < 1e-3 {
        return format!("{:.0e}", v);
    }
    sig_digits(v, sig)
}

/// Decimals that give the largest of `values` three significant digits, so numbers
/// printed side by side line up (`7.0` beside `80.5`).
pub(crate) fn decimals_for(values: &[f64]) -> usize {
    let max = values
        .iter()
        .map(|v| v.abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if max <= 0.0 {
        return 0;
    }
    (2 - max.log10().floor() as i32).clamp(0, 3) as usize
}

/// `v` with an SI prefix and a unit: `503.8 TFLOP/s`, `1.79 TB/s`, `12 FLOP/s`.
pub(crate) fn with_unit(v: f64, sig: i32, unit: &str) -> String {
    let c = compact_sig(v, sig);
    match c.chars().last() {
        Some(p) if "kMGTP".contains(p) => format!("{} {p}{unit}", &c[..c.len() - 1]),
        _ => format!("{c} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_numbers() {
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(1500.0), "1.5k");
        assert_eq!(compact(10_000.0), "10k");
        assert_eq!(compact(2.5e12), "2.5T");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(999.99), "1k");
        assert_eq!(compact_sig(503.8e12, 3), "504T");
        assert_eq!(compact(-2000.0), "-2k");
        assert_eq!(with_unit(1.792e12, 3, "B/s"), "1.79 TB/s");
        assert_eq!(with_unit(12.0, 3, "FLOP/s"), "12 FLOP/s");
    }

    #[test]
    fn printed_values_share_decimals_set_by_the_largest() {
        assert_eq!(decimals_for(&[4.9, 80.5]), 1);
        assert_eq!(decimals_for(&[0.38, 1.37]), 2);
        assert_eq!(decimals_for(&[1500.0, 20.0]), 0);
        assert_eq!(decimals_for(&[]), 0);
    }
}
