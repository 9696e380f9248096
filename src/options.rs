//! Typed command-line values: what a flag's string means, decided once, when clap reads it.
//! Each type here is a clap value parser (through `FromStr`), so a malformed value is bad
//! usage (exit 2) with a message that says what was expected, and no command module parses
//! another command's strings. Loading what a value names (a system file, a draft model, a
//! file of accepted lengths) happens later, in `commands/`, and fails with exit 1.

use crate::specdec::Acceptance;
use crate::units::Seconds;
use std::path::PathBuf;
use std::str::FromStr;

/// What a list or range flag accepts, for messages.
const VALUES_EXPECTED: &str = "expected a list 1,8,64, a range 1..4096, \
1024..131072:1024 (step) or 1..4096:x2 (factor)";

/// Whole numbers from `A..B` (every integer), `A..B:S` (step S), `A..B:xF` (multiply by F),
/// or a list `a,b,c` whose items may themselves be ranges. In order, consecutive repeats
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Values(pub Vec<u32>);

/// Parse [`Values`]; the error says why and what was expected.
pub fn parse_values(s: &str) -> Result<Vec<u32>, String> {
    let bad = |why: &str| format!("{why}; {VALUES_EXPECTED}");
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        match item.split_once("..") {
            None => out.push(item.parse::<u32>().map_err(|_| bad("not a whole number"))?),
            Some((a, rest)) => {
                let a: u64 = a.trim().parse().map_err(|_| bad("bad range start"))?;
                let (b, step) = match rest.split_once(':') {
                    Some((b, st)) => (b, Some(st.trim())),
                    None => (rest, None),
                };
                let b: u64 = b.trim().parse().map_err(|_| bad("bad range end"))?;
                if a > b {
                    return Err(bad("range start above its end"));
                }
                match step {
                    Some(st) if st.starts_with('x') => {
                        let f: f64 = st[1..].parse().map_err(|_| bad("bad factor"))?;
                        if f.partial_cmp(&1.0) != Some(std::cmp::Ordering::Greater) || a == 0 {
                            return Err(bad("a factor range needs a start ≥ 1 and a factor > 1"));
                        }
                        let mut v = a as f64;
                        while v <= b as f64 + 1e-9 {
                            out.push(v.round() as u32);
                            v *= f;
                        }
                    }
                    Some(st) => {
                        let st: u64 = st.parse().map_err(|_| bad("bad step"))?;
                        if st == 0 {
                            return Err(bad("step 0"));
                        }
                        if (b - a) / st > 50_000_000 {
                            return Err(bad("too many values"));
                        }
                        out.extend((a..=b).step_by(st as usize).map(|v| v as u32));
                    }
                    None => {
                        if b - a > 50_000_000 {
                            return Err(bad("too many values"));
                        }
                        out.extend((a..=b).map(|v| v as u32));
                    }
                }
            }
        }
        if out.len() > 50_000_000 {
            return Err(bad("too many values"));
        }
    }
    out.dedup();
    if out.is_empty() {
        return Err(bad("no values"));
    }
    Ok(out)
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
        let v = parse_values(s)?;
        if v.contains(&0) {
            return Err("values must be at least 1".into());
        }
        Ok(Positive(v))
    }
}

/// Draft lengths of speculative decoding: [`Values`] within 1..=64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftLengths(pub Vec<u32>);

impl FromStr for DraftLengths {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let v = parse_values(s)?;
        if v.iter().any(|k| *k == 0 || *k > 64) {
            return Err("draft lengths must be 1..64, e.g. 1..6 or 1,2,4".into());
        }
        Ok(DraftLengths(v))
    }
}

/// Where draft tokens come from, as named on the command line (`--draft`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftKind {
    /// The model's own MTP layer.
    Mtp,
    /// Its `[eagle_head]` (`eagle` or `eagle3`).
    Eagle,
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
            "eagle" | "eagle3" => DraftKind::Eagle,
            "ngram" => DraftKind::Ngram,
            other => match other.strip_prefix("model:") {
                Some(name) if !name.trim().is_empty() => DraftKind::Model(name.trim().into()),
                _ => return Err("expected mtp, eagle, ngram or model:NAME".into()),
            },
        })
    }
}

/// `--acceptance`: constant or per-position rates, or a file of measured accepted lengths.
#[derive(Debug, Clone, PartialEq)]
pub enum AcceptanceArg {
    /// Rates in 0..1; the last repeats.
    Rates(Acceptance),
    /// A file of accepted lengths (drafts accepted per step, one or more per line).
    File(PathBuf),
}

impl FromStr for AcceptanceArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let p = PathBuf::from(s);
        if p.is_file() {
            return Ok(AcceptanceArg::File(p));
        }
        let expected = "expected a rate such as 0.8, rates such as 0.85,0.6,0.4, or a file of accepted lengths";
        let v: Vec<f64> = s
            .split(',')
            .map(|x| x.trim().parse::<f64>().map_err(|_| expected.to_string()))
            .collect::<Result<_, _>>()?;
        let a = Acceptance(v);
        a.validate().map_err(|e| e.to_string())?;
        Ok(AcceptanceArg::Rates(a))
    }
}

/// A time with its unit, e.g. `8ms`, `8 ms`, `0.5s`; above zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Duration(pub Seconds);

impl FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let Some(i) = t.find(|c: char| c.is_ascii_alphabetic()) else {
            return Err("expected a time with its unit, e.g. 8ms".into());
        };
        let v =
            Seconds::parse(&format!("{} {}", t[..i].trim(), &t[i..])).map_err(|e| e.to_string())?;
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
