//! Physical quantities with their units, and the parser for unit-bearing strings.
//!
//! Descriptions write every number with its unit ("1792 GB/s", "96 GB", "24 us",
//! "503.8 TFLOPS"), so a reader never has to guess what a bare number means. Each quantity
//! is a newtype over `f64` in SI base units (bytes, seconds, FLOP/s, bytes/s, Hz); the
//! `Deserialize` impls parse the string and reject unknown units and negative values, so a
//! mistake in a file is reported by the TOML reader with its line and column.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// What a unit string measures; used to pick the table of accepted units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    Bytes,
    Seconds,
    BytesPerSecond,
    FlopsPerSecond,
    Hertz,
    Watts,
    /// Money, US dollars.
    Usd,
    /// A rental price, US dollars per hour.
    UsdPerHour,
    /// An energy price, US dollars per kilowatt-hour.
    UsdPerKwh,
    /// A long span of time (an amortisation period), seconds.
    Period,
}

impl Dimension {
    fn expected(self) -> &'static str {
        match self {
            Dimension::Bytes => "a size such as \"96 GB\", \"512 MiB\" or \"14336 B\"",
            Dimension::Seconds => "a time such as \"24 us\", \"1.5 ms\" or \"2 s\"",
            Dimension::BytesPerSecond => {
                "a bandwidth such as \"1792 GB/s\", \"1.8 TB/s\" or \"400 Gb/s\""
            }
            Dimension::FlopsPerSecond => "a rate such as \"503.8 TFLOPS\" or \"1007 TOPS\"",
            Dimension::Hertz => "a frequency such as \"2617 MHz\" or \"2.1 GHz\"",
            Dimension::Watts => "a power such as \"600 W\" or \"1.2 kW\"",
            Dimension::Usd => "an amount such as \"8500 USD\" or \"8.5 kUSD\"",
            Dimension::UsdPerHour => "a price such as \"2.50 USD/h\"",
            Dimension::UsdPerKwh => "an energy price such as \"0.12 USD/kWh\" or \"120 USD/MWh\"",
            Dimension::Period => "a period such as \"3 years\", \"36 months\" or \"1000 h\"",
        }
    }

    /// Multiplier from `unit` to the SI base unit of this dimension, if the unit is known.
    fn scale(self, unit: &str) -> Option<f64> {
        let u = unit.trim();
        let s = match self {
            Dimension::Bytes => match u {
                "B" | "bytes" | "byte" => 1.0,
                "KB" | "kB" => 1e3,
                "MB" => 1e6,
                "GB" => 1e9,
                "TB" => 1e12,
                "KiB" => 1024.0,
                "MiB" => 1024.0 * 1024.0,
                "GiB" => 1024.0 * 1024.0 * 1024.0,
                "TiB" => 1024.0f64.powi(4),
                _ => return None,
            },
            Dimension::Seconds => match u {
                "s" | "sec" => 1.0,
                "ms" => 1e-3,
                "us" | "µs" | "μs" => 1e-6,
                "ns" => 1e-9,
                _ => return None,
            },
            Dimension::BytesPerSecond => match u {
                "B/s" => 1.0,
                "KB/s" | "kB/s" => 1e3,
                "MB/s" => 1e6,
                "GB/s" => 1e9,
                "TB/s" => 1e12,
                "KiB/s" => 1024.0,
                "MiB/s" => 1024.0 * 1024.0,
                "GiB/s" => 1024.0 * 1024.0 * 1024.0,
                // Bits per second, as NICs are rated.
                "Mb/s" => 1e6 / 8.0,
                "Gb/s" => 1e9 / 8.0,
                "Tb/s" => 1e12 / 8.0,
                _ => return None,
            },
            Dimension::FlopsPerSecond => match u {
                "FLOPS" | "FLOP/s" | "OPS" | "OP/s" => 1.0,
                "GFLOPS" | "GFLOP/s" | "GOPS" => 1e9,
                "TFLOPS" | "TFLOP/s" | "TOPS" => 1e12,
                "PFLOPS" | "PFLOP/s" | "POPS" => 1e15,
                _ => return None,
            },
            Dimension::Hertz => match u {
                "Hz" => 1.0,
                "kHz" => 1e3,
                "MHz" => 1e6,
                "GHz" => 1e9,
                _ => return None,
            },
            Dimension::Watts => match u {
                "W" => 1.0,
                "kW" => 1e3,
                _ => return None,
            },
            Dimension::Usd => match u {
                "USD" => 1.0,
                "kUSD" => 1e3,
                _ => return None,
            },
            Dimension::UsdPerHour => match u {
                "USD/h" | "USD/hour" => 1.0,
                _ => return None,
            },
            Dimension::UsdPerKwh => match u {
                "USD/kWh" => 1.0,
                "USD/MWh" => 1e-3,
                _ => return None,
            },
            // A Julian year (365.25 days), as astronomers and amortisation tables use; a
            // month is a twelfth of it.
            Dimension::Period => match u {
                "h" | "hour" | "hours" => 3600.0,
                "d" | "day" | "days" => 86_400.0,
                "month" | "months" => 31_557_600.0 / 12.0,
                "y" | "year" | "years" => 31_557_600.0,
                _ => return None,
            },
        };
        Some(s)
    }
}

/// Error from parsing a unit-bearing string.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct UnitError {
    pub message: String,
}

/// Parse `"<number> <unit>"` into the SI base value of `dim`. Rejects negative, non-finite
/// and unit-less values; the message says what was expected.
pub fn parse_quantity(text: &str, dim: Dimension) -> Result<f64, UnitError> {
    let t = text.trim();
    let split = t
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E' | '_')))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    // An exponent 'e' directly followed by a unit letter (e.g. "3 ms" never hits this, but
    // "1e" would) is caught by the number parse below.
    let (num, unit) = t.split_at(split);
    let num = num.trim().replace('_', "");
    let err = |why: String| UnitError {
        message: format!("{why}; expected {}", dim.expected()),
    };
    if num.is_empty() {
        // "nan GB/s", "inf ms": a word Rust would read as a float, but no quantity.
        let word = t
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("");
        if !word.is_empty() && word.parse::<f64>().is_ok() {
            return Err(err(format!("\"{text}\": {word} is not finite")));
        }
        return Err(err(format!("\"{text}\" has no number")));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| err(format!("\"{num}\" in \"{text}\" is not a number")))?;
    if unit.trim().is_empty() {
        return Err(err(format!("\"{text}\" has no unit")));
    }
    let scale = dim
        .scale(unit)
        .ok_or_else(|| err(format!("unknown unit \"{}\" in \"{text}\"", unit.trim())))?;
    // Finite before and after scaling: "1e300 TB" is finite as written but not in bytes.
    if !(value.is_finite() && (value * scale).is_finite()) {
        return Err(err(format!("\"{text}\" is not finite")));
    }
    if value < 0.0 {
        return Err(err(format!("\"{text}\" is negative")));
    }
    Ok(value * scale)
}

macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident, $dim:expr, $fmt:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(pub f64);

        impl $name {
            /// Value in the SI base unit.
            pub fn get(self) -> f64 {
                self.0
            }
            /// Parse a unit-bearing string.
            pub fn parse(text: &str) -> Result<Self, UnitError> {
                parse_quantity(text, $dim).map($name)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $fmt(self.0, f)
            }
        }
    };
}

fn fmt_si(v: f64, units: &[(f64, &str)], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for &(scale, unit) in units {
        if v >= scale {
            return write!(f, "{} {unit}", trim_float(v / scale));
        }
    }
    let (scale, unit) = units[units.len() - 1];
    write!(f, "{} {unit}", trim_float(v / scale))
}

/// The value with up to 9 decimals in its display unit, trailing zeros dropped.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn fmt_bytes(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[
            (1e12, "TB"),
            (1e9, "GB"),
            (1e6, "MB"),
            (1e3, "KB"),
            (1.0, "B"),
        ],
        f,
    )
}
fn fmt_seconds(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[(1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")],
        f,
    )
}
fn fmt_bw(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1.0, "B/s")],
        f,
    )
}
fn fmt_flops(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[
            (1e15, "PFLOPS"),
            (1e12, "TFLOPS"),
            (1e9, "GFLOPS"),
            (1.0, "FLOPS"),
        ],
        f,
    )
}
fn fmt_watts(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(v, &[(1e3, "kW"), (1.0, "W")], f)
}
fn fmt_usd(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{} USD", trim_float(v))
}
fn fmt_usd_per_hour(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{} USD/h", trim_float(v))
}
fn fmt_usd_per_kwh(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{} USD/kWh", trim_float(v))
}
fn fmt_period(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[(31_557_600.0, "years"), (86_400.0, "days"), (3600.0, "h")],
        f,
    )
}
fn fmt_hz(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    fmt_si(
        v,
        &[(1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz"), (1.0, "Hz")],
        f,
    )
}

quantity!(
    /// A size in bytes.
    Bytes, Dimension::Bytes, fmt_bytes
);
quantity!(
    /// A duration in seconds.
    Seconds, Dimension::Seconds, fmt_seconds
);
quantity!(
    /// A bandwidth in bytes per second.
    BytesPerSec, Dimension::BytesPerSecond, fmt_bw
);

impl BytesPerSec {
    /// The range a described bandwidth (memory, link, NIC, KV link) must lie in, bytes/s:
    /// 1 MB/s to 1000 TB/s. Far above any part made (about 8 TB/s of HBM on a B300, 900 GB/s
    /// per direction of NVLink5), so a future part passes and a unit typed wrong
    /// (`"3350e9 GB/s"`) does not.
    pub const PLAUSIBLE: std::ops::RangeInclusive<f64> = 1e6..=1e15;
    /// [`Self::PLAUSIBLE`] in words, for a refusal.
    pub const PLAUSIBLE_TEXT: &'static str = "between 1 MB/s and 1000 TB/s";

    /// Whether this bandwidth lies in [`Self::PLAUSIBLE`] (a NaN does not).
    pub fn is_plausible(self) -> bool {
        Self::PLAUSIBLE.contains(&self.0)
    }
}
quantity!(
    /// A throughput in floating-point (or integer) operations per second.
    FlopsPerSec, Dimension::FlopsPerSecond, fmt_flops
);
quantity!(
    /// A clock frequency in hertz.
    Hertz, Dimension::Hertz, fmt_hz
);
quantity!(
    /// An electrical power in watts.
    Watts, Dimension::Watts, fmt_watts
);

quantity!(
    /// An amount of money in US dollars (the only currency the descriptions use).
    Usd, Dimension::Usd, fmt_usd
);
quantity!(
    /// A price per hour in US dollars (the base unit here is USD/h, not USD/s: the name says
    /// which).
    UsdPerHour, Dimension::UsdPerHour, fmt_usd_per_hour
);
quantity!(
    /// An energy price in US dollars per kilowatt-hour (the base unit is USD/kWh).
    UsdPerKwh, Dimension::UsdPerKwh, fmt_usd_per_kwh
);
quantity!(
    /// A long span of time, seconds (written in years, months, days or hours).
    Period, Dimension::Period, fmt_period
);

impl Period {
    /// The span in hours.
    pub fn hours(self) -> f64 {
        self.0 / 3600.0
    }
}

impl Seconds {
    pub fn from_us(us: f64) -> Self {
        Seconds(us * 1e-6)
    }
    pub fn from_ms(ms: f64) -> Self {
        Seconds(ms * 1e-3)
    }
    pub fn us(self) -> f64 {
        self.0 * 1e6
    }
    pub fn ms(self) -> f64 {
        self.0 * 1e3
    }
}

/// A dimensionless fraction in [0, 1] (an efficiency, a utilisation). Accepts a bare number
/// (`0.8`) or a percentage string (`"80 %"`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
pub struct Fraction(pub f64);

/// Read a fraction written as a bare number (`0.8`) or a percentage string (`"80 %"`),
/// without a range check; `what` names it in the error ("fraction", "share").
pub fn deserialize_fraction<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Num(f64),
        Int(i64),
        Text(String),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Num(v) => v,
        Raw::Int(v) => v as f64,
        Raw::Text(s) => match s.trim().strip_suffix('%').and_then(|p| p.trim().parse::<f64>().ok()) {
            Some(p) => p / 100.0,
            None => {
                return Err(serde::de::Error::custom(format!(
                    "\"{s}\" is not a {what}; expected a number in 0..1 such as 0.8, or a percentage such as \"80 %\""
                )))
            }
        },
    })
}

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = deserialize_fraction(d, "fraction")?;
        if !(v > 0.0 && v <= 1.0) {
            return Err(serde::de::Error::custom(format!(
                "{v} is outside (0, 1]; expected a fraction such as 0.8"
            )));
        }
        Ok(Fraction(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn parses_units() {
        assert_relative_eq!(BytesPerSec::parse("1792 GB/s").unwrap().0, 1.792e12);
        assert_relative_eq!(Bytes::parse("96 GB").unwrap().0, 96e9);
        assert_relative_eq!(Bytes::parse("1 GiB").unwrap().0, 1073741824.0);
        assert_relative_eq!(Seconds::parse("24 us").unwrap().0, 24e-6);
        assert_relative_eq!(Seconds::parse("24µs").unwrap().0, 24e-6);
        assert_relative_eq!(FlopsPerSec::parse("503.8 TFLOPS").unwrap().0, 503.8e12);
        assert_relative_eq!(Hertz::parse("2617 MHz").unwrap().0, 2.617e9);
        assert_relative_eq!(Bytes::parse("1.5e3 B").unwrap().0, 1500.0);
        assert_relative_eq!(Usd::parse("8500 USD").unwrap().0, 8500.0);
        assert_relative_eq!(UsdPerHour::parse("2.50 USD/h").unwrap().0, 2.5);
        assert_relative_eq!(UsdPerKwh::parse("120 USD/MWh").unwrap().0, 0.12);
        assert_relative_eq!(Period::parse("3 years").unwrap().hours(), 3.0 * 8766.0);
        assert_relative_eq!(
            Period::parse("36 months").unwrap().0,
            Period::parse("3 years").unwrap().0
        );
    }

    #[test]
    fn rejects_bad_units_and_values() {
        let e = BytesPerSec::parse("1792 GB").unwrap_err();
        assert!(e.message.contains("unknown unit \"GB\""), "{e}");
        assert!(BytesPerSec::parse("-5 GB/s")
            .unwrap_err()
            .message
            .contains("negative"));
        assert!(Bytes::parse("96").unwrap_err().message.contains("no unit"));
        assert!(Seconds::parse("fast").is_err());
    }

    #[test]
    fn display_round_trips() {
        // Parse each text, print it back, and get the same text.
        assert_eq!(
            BytesPerSec::parse("1.792 TB/s").unwrap().to_string(),
            "1.792 TB/s"
        );
        assert_eq!(Bytes::parse("96 GB").unwrap().to_string(), "96 GB");
        assert_eq!(Seconds::parse("24 us").unwrap().to_string(), "24 us");
        assert_eq!(
            FlopsPerSec::parse("503.8 TFLOPS").unwrap().to_string(),
            "503.8 TFLOPS"
        );
        assert_eq!(BytesPerSec(1.792e12).to_string(), "1.792 TB/s");
        assert_eq!(Seconds(24e-6).to_string(), "24 us");
    }
}
