//! Typed command-line values: what a flag's string means, decided once, when clap reads it.
//! Each type here is a clap value parser (through `FromStr`), so a malformed value is bad
//! usage (exit 2) with a message that says what was expected, and no command module parses
//! another command's strings. Loading what a value names (a system file, a draft model, a
//! file of accepted lengths) happens later, in `commands/`, and fails with exit 1.

use crate::units::Seconds;
use std::path::PathBuf;
use std::str::FromStr;

/// What a list or range flag accepts, for messages.
const VALUES_EXPECTED: &str = "expected a list 1,8,64, a range 1..4096, \
1024..131072:1024 (step) or 1..4096:x2 (factor)";

/// Most values one list or range flag may expand to. Counted from the range arithmetic
/// before anything is expanded, so `1..4294967295` is refused without allocating.
pub const MAX_VALUES: u64 = 1_000_000;

/// Whole numbers from `A..B` (every integer), `A..B:S` (step S), `A..B:xF` (multiply by F),
/// or a list `a,b,c` whose items may themselves be ranges. In order, consecutive repeats
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values(pub Vec<u32>);

/// One item of a list flag, before expansion.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    One(u64),
    /// Every `step`-th integer of `a..=b`.
    Step {
        a: u64,
        b: u64,
        step: u64,
    },
    /// `a`, `a·f`, `a·f²` … up to `b`, rounded.
    Factor {
        a: u64,
        b: u64,
        f: f64,
    },
}

impl Item {
    /// How many values it expands to, and the largest (counted, not expanded: a factor
    /// range has at most 64 doublings' worth of terms below 2^64 once f > 1 + 1e-3).
    fn count_and_max(self) -> (u64, u64) {
        match self {
            Item::One(v) => (1, v),
            Item::Step { a, b, step } => {
                let n = (b - a) / step;
                (n + 1, a + n * step)
            }
            Item::Factor { a, b, f } => {
                let (mut n, mut v, mut last) = (0u64, a as f64, a);
                while v <= b as f64 + 1e-9 && n <= MAX_VALUES {
                    n += 1;
                    last = v.round() as u64;
                    v *= f;
                }
                (n, last)
            }
        }
    }

    fn expand(self, out: &mut Vec<u32>) {
        match self {
            Item::One(v) => out.push(v as u32),
            Item::Step { a, b, step } => {
                out.extend((a..=b).step_by(step as usize).map(|v| v as u32))
            }
            Item::Factor { a, b, f } => {
                let mut v = a as f64;
                while v <= b as f64 + 1e-9 {
                    out.push(v.round() as u32);
                    v *= f;
                }
            }
        }
    }
}

fn parse_item(item: &str) -> Result<Item, String> {
    let num = |x: &str, what: &str| whole_number(x).map_err(|why| format!("{what} {why}"));
    let Some((a, rest)) = item.split_once("..") else {
        return num(item, "value").map(Item::One);
    };
    let a = num(a, "range start")?;
    let (b, step) = match rest.split_once(':') {
        Some((b, st)) => (b, Some(st.trim())),
        None => (rest, None),
    };
    let b = num(b, "range end")?;
    if a > b {
        return Err(format!("range {item}: start above its end"));
    }
    match step {
        Some(st) if st.starts_with('x') => {
            let f: f64 = st[1..]
                .parse()
                .map_err(|_| format!("factor \"{st}\" is not a number"))?;
            if !(f.is_finite() && f > 1.0) || a == 0 {
                return Err(format!(
                    "range {item}: a factor range needs a start of at least 1 and a factor above 1"
                ));
            }
            Ok(Item::Factor { a, b, f })
        }
        Some(st) => match num(st, "step")? {
            0 => Err(format!("range {item}: step 0")),
            step => Ok(Item::Step { a, b, step }),
        },
        None => Ok(Item::Step { a, b, step: 1 }),
    }
}

/// Parse a list flag whose values must lie in `lo..=hi`; bounds and count are checked on the
/// ranges as written, before any is expanded, and the error names the bound.
pub fn parse_values_within(s: &str, lo: u64, hi: u64) -> Result<Vec<u32>, String> {
    let hi = hi.min(u32::MAX as u64);
    let mut items = Vec::new();
    let mut count = 0u64;
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let it = parse_item(item).map_err(|why| format!("{why}; {VALUES_EXPECTED}"))?;
        let (n, max) = it.count_and_max();
        let min = match it {
            Item::One(v) | Item::Step { a: v, .. } | Item::Factor { a: v, .. } => v,
        };
        if min < lo || max > hi {
            return Err(format!(
                "\"{item}\" reaches outside {lo}..{hi}; values must be {lo}..{hi}"
            ));
        }
        count = count.saturating_add(n);
        if count > MAX_VALUES {
            return Err(format!(
                "\"{s}\" expands to more than {MAX_VALUES} values; use a step (1024..131072:1024) or a factor (1..4096:x2)"
            ));
        }
        items.push(it);
    }
    if items.is_empty() {
        return Err(format!("no values; {VALUES_EXPECTED}"));
    }
    let mut out = Vec::with_capacity(count as usize);
    for it in items {
        it.expand(&mut out);
    }
    out.dedup();
    Ok(out)
}

/// Parse [`Values`] (any whole number that fits 32 bits); the error says why and what was
/// expected.
pub fn parse_values(s: &str) -> Result<Vec<u32>, String> {
    parse_values_within(s, 0, u32::MAX as u64)
}

/// Largest count written with an exponent that is read exactly: 2^53, below which every
/// whole number is an `f64` (`1e8` is 100000000; `1e300` is no count).
const EXACT_IN_F64: f64 = 9_007_199_254_740_992.0;

/// A whole number as a count flag writes it: digits (`100000000`) or, because the README and
/// users write counts that way, an exponent that comes out whole (`1e8`, `2.5e3`). A fraction
/// (`1.5`) is refused, never rounded: a count of 1.5 tokens is a mistake, not a request. The
/// error says what was written and why it is no whole number (without the "expected" part,
/// which the caller adds with its range and unit).
pub fn whole_number(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(v) = t.parse::<u64>() {
        return Ok(v);
    }
    // Only digits, a sign, a point and an exponent: `f64` would also read "inf" and "NaN".
    let numeric = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
    match t.parse::<f64>() {
        Ok(v) if numeric && v < 0.0 => Err(format!("\"{t}\" is negative")),
        Ok(v) if numeric && v.fract() != 0.0 => Err(format!("\"{t}\" is not a whole number")),
        Ok(v) if numeric && v <= EXACT_IN_F64 => Ok(v as u64),
        Ok(_) if numeric => Err(format!("\"{t}\" is too large")),
        _ => Err(format!("\"{t}\" is not a number")),
    }
}

/// [`whole_number`] within `lo..=hi`; the error names what is counted (`noun`, plural, or
/// empty) and the range, e.g. "expected a whole number of tokens from 0 to 4294967295".
fn count_within(s: &str, lo: u64, hi: u64, noun: &str, example: &str) -> Result<u64, String> {
    let of = if noun.is_empty() {
        String::new()
    } else {
        format!(" of {noun}")
    };
    let expected = match hi {
        u64::MAX => format!("expected a whole number{of} of at least {lo}, e.g. {example}"),
        _ => format!("expected a whole number{of} from {lo} to {hi}, e.g. {example}"),
    };
    match whole_number(s) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is outside {lo}..{hi}; {expected}")),
        Err(why) => Err(format!("{why}; {expected}")),
    }
}

/// A whole number of at least 1 (a batch, a degree of parallelism, a concurrency): zero is
/// bad usage, refused when the flag is read, the same way in every command.
pub fn positive_u32(s: &str) -> Result<u32, String> {
    count_within(s, 1, u32::MAX as u64, "", "8").map(|v| v as u32)
}

/// The most GPUs `plan` sizes a deployment over: 65,536, the largest concurrency its
/// doubling ladders reach (beyond it their per-GPU counts no longer fit the ladder, and a
/// search over more replicas than that takes minutes for a question no one deployment asks).
pub const MAX_PLAN_GPUS: u64 = 1 << 16;

/// A GPU budget for `plan`: 1 to [`MAX_PLAN_GPUS`].
pub fn plan_gpus(s: &str) -> Result<u32, String> {
    count_within(s, 1, MAX_PLAN_GPUS, "GPUs", "16").map(|v| v as u32)
}

/// [`positive_u32`] for 64-bit sizes (GEMM dimensions).
pub fn positive_u64(s: &str) -> Result<u64, String> {
    count_within(s, 1, u64::MAX, "", "4096")
}

/// Expert slots (`--redundant-experts`): zero or more.
pub fn slots_u32(s: &str) -> Result<u32, String> {
    count_within(s, 0, u32::MAX as u64, "expert slots", "2").map(|v| v as u32)
}

/// Tokens in a KV cache (`--context`): zero or more.
pub fn tokens_u32(s: &str) -> Result<u32, String> {
    count_within(s, 0, u32::MAX as u64, "tokens", "4096").map(|v| v as u32)
}

/// Tokens of a request or a batch (`--input-len`, `--output-len`, `--tokens`): at least 1.
pub fn positive_tokens_u32(s: &str) -> Result<u32, String> {
    count_within(s, 1, u32::MAX as u64, "tokens", "1000").map(|v| v as u32)
}

/// Design points of an `explore` grid (`--max-points`): at least 1.
pub fn points_u64(s: &str) -> Result<u64, String> {
    count_within(s, 1, u64::MAX, "design points", "1e8")
}

impl FromStr for Values {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_values(s).map(Values)
    }
}

/// Positive values (batch sizes, context lengths of a grid): [`Values`] without zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positive(pub Vec<u32>);

impl FromStr for Positive {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_values_within(s, 1, u32::MAX as u64).map(Positive)
    }
}

/// Draft lengths of speculative decoding: [`Values`] within 1..=64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftLengths(pub Vec<u32>);

impl FromStr for DraftLengths {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_values_within(s, 1, 64)
            .map(DraftLengths)
            .map_err(|e| format!("draft lengths must be 1..64, e.g. 1..6 or 1,2,4 ({e})"))
    }
}

/// Where draft tokens come from, as named on the command line (`--draft`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftKind {
    /// The model's own MTP layer.
    Mtp,
    /// Its `[eagle_head]` as an EAGLE-1/2 head, through the target's lm_head (`eagle`).
    Eagle,
    /// Its `[eagle_head]` as published, an EAGLE-3 head with its own draft vocabulary
    /// (`eagle3`).
    Eagle3,
    /// N-gram lookup on the CPU.
    Ngram,
    /// A separate draft model: a built-in name, a TOML or a config.json.
    Model(String),
}

impl FromStr for DraftKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.trim() {
            "mtp" => DraftKind::Mtp,
            "eagle" => DraftKind::Eagle,
            "eagle3" => DraftKind::Eagle3,
            "ngram" => DraftKind::Ngram,
            other => match other.strip_prefix("model:") {
                Some(name) if !name.trim().is_empty() => DraftKind::Model(name.trim().into()),
                _ => return Err("expected mtp, eagle, eagle3, ngram or model:NAME".into()),
            },
        })
    }
}

/// `--acceptance`: figures as the engine printed them (rates, or a length or rate that
/// `--acceptance-stat` names), or a file of measured accepted lengths.
#[derive(Debug, Clone, PartialEq)]
pub enum AcceptanceArg {
    /// Finite figures at or above 0; what they mean is `--acceptance-stat`'s to say.
    Values(Vec<f64>),
    /// A file of accepted lengths (drafts accepted per step, one or more per line).
    File(PathBuf),
}

impl FromStr for AcceptanceArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let p = PathBuf::from(s);
        if crate::files::is_readable(&p) {
            return Ok(AcceptanceArg::File(p));
        }
        let expected = "expected a rate such as 0.8, rates such as 0.85,0.6,0.4, a length such as 2.5 (with --acceptance-stat), or a file of accepted lengths";
        if p.is_dir() {
            return Err(format!("\"{s}\" is a directory; {expected}"));
        }
        let not_rates = || {
            let looks_like_path = s.contains('/')
                || s.contains('\\')
                || s.rsplit_once('.').is_some_and(|(_, ext)| {
                    !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphabetic())
                });
            if looks_like_path {
                format!("file \"{s}\" not found; {expected}")
            } else {
                format!("\"{s}\" is not a rate, and no file of that name was found; {expected}")
            }
        };
        let v: Vec<f64> = s
            .split(',')
            .map(|x| x.trim().parse::<f64>().map_err(|_| not_rates()))
            .collect::<Result<_, _>>()?;
        if v.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(format!(
                "\"{s}\": acceptance figures are finite numbers at or above 0; {expected}"
            ));
        }
        Ok(AcceptanceArg::Values(v))
    }
}

/// A time with its unit, e.g. `8ms`, `8 ms`, `0.5s`; above zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration(pub Seconds);

impl FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // The unit parser reads the number's exponent (`1e-3ms`) before the unit.
        let v = Seconds::parse(s.trim()).map_err(|e| e.to_string())?;
        if v.0.is_nan() || v.0 <= 0.0 {
            return Err("expected a time above zero, e.g. 8ms".into());
        }
        Ok(Duration(v))
    }
}

/// Microseconds of CPU time, zero or more (`--ngram-cpu-us`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuMicros(pub f64);

impl FromStr for CpuMicros {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(CpuMicros(v)),
            _ => Err("expected microseconds, zero or more, e.g. 50".into()),
        }
    }
}

impl std::fmt::Display for CpuMicros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Systems, each optionally with overrides in brackets: `name[label=..;key=val],name2`.
/// Commas inside brackets do not split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Systems(pub Vec<String>);

impl FromStr for Systems {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut depth = 0i32;
        for ch in s.chars() {
            match ch {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            if !(0..=1).contains(&depth) {
                return Err("brackets do not match; expected name or name[key=value;key=value], separated by commas".into());
            }
        }
        if depth != 0 {
            return Err("a bracket is not closed; expected name[key=value;key=value]".into());
        }
        let v = crate::whatif::split_systems(s);
        if v.is_empty() || v.iter().any(|n| n.starts_with('[')) {
            return Err("expected at least one system name, e.g. 8x-h200-nvlink".into());
        }
        Ok(Systems(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_steps_factors_and_lists() {
        assert_eq!(parse_values("1..4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_values("1..16:x2").unwrap(), vec![1, 2, 4, 8, 16]);
        assert_eq!(parse_values("1,8..9").unwrap(), vec![1, 8, 9]);
        assert!(parse_values("1..4294967295").is_err());
        assert!("0..3".parse::<DraftLengths>().is_err());
        assert_eq!(
            parse_values("1e3..4e3:1e3").unwrap(),
            vec![1000, 2000, 3000, 4000]
        );
    }

    /// Counts: digits or a whole exponent; a fraction, a sign, NaN or infinity refused with
    /// the value and what was expected.
    #[test]
    fn whole_numbers_with_and_without_exponent() {
        assert_eq!(whole_number("100000000"), Ok(100_000_000));
        assert_eq!(whole_number("1e8"), Ok(100_000_000));
        assert_eq!(whole_number("2.5E3"), Ok(2500));
        assert_eq!(whole_number("4096.0"), Ok(4096));
        for bad in ["1.5", "-3", "nan", "inf", "1e300", "", "8k"] {
            assert!(whole_number(bad).is_err(), "{bad}");
        }
        let e = tokens_u32("1.5").unwrap_err();
        assert!(
            e.contains("\"1.5\" is not a whole number") && e.contains("of tokens"),
            "{e}"
        );
        assert_eq!(tokens_u32("0"), Ok(0));
        assert_eq!(points_u64("1e8"), Ok(100_000_000));
        assert!(points_u64("0").unwrap_err().contains("design points"));
        assert!(positive_u32("0").is_err());
        assert!(positive_u32("4294967296").unwrap_err().contains("outside"));
        assert_eq!(positive_u32("6.4e1"), Ok(64));
    }

    #[test]
    fn drafts_durations_and_systems() {
        assert_eq!(
            "model:llama-3.1-8b".parse::<DraftKind>().unwrap(),
            DraftKind::Model("llama-3.1-8b".into())
        );
        assert!("foo".parse::<DraftKind>().is_err());
        assert!(("8ms".parse::<Duration>().unwrap().0 .0 - 0.008).abs() < 1e-12);
        assert!("8".parse::<Duration>().is_err());
        assert_eq!(
            "a[label=x,y;system.interconnect=nvlink5],b"
                .parse::<Systems>()
                .unwrap()
                .0
                .len(),
            2
        );
        assert!("a[label=x".parse::<Systems>().is_err());
    }
}
