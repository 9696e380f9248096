//! Reader for rooftop's own measurement file: a TOML form for measurements typed by hand from
//! a report or a chat log, or converted from a tool rooftop does not read. It exists because
//! not every measurement survives as a tool's output file (the team's first measurement
//! survives only as a transcript), and a hand-typed number still needs its unit, its
//! definition and its source.
//!
//! # FileFormat
//!
//! ```toml
//! # Where the numbers come from, in a sentence: a report, a log, a chat transcript.
//! system = "8x-rtx-pro-6000-pcie"   # the system measured (a rooftop system name, if one fits)
//! model = "kimi-k2.5-int4"          # the model measured (a rooftop model name, if one fits)
//! source = "shared/measured/k25b6000bench1/macro.log"   # citation, required
//! tpot_definition = "e2e"           # "e2e": total time / tokens, TTFT included
//!                                   # "itl": (total − TTFT) / (tokens − 1), as vLLM reports
//!                                   # required when any point gives `tpot`
//!
//! [[points]]                        # one serving run (or one profile)
//! concurrency = 1                   # requests in flight, required, ≥ 1
//! input_len = 1024                  # prompt tokens per request, optional
//! output_len = 32                   # output tokens per request; required with `tpot`
//! tpot = "12.72 ms"                 # time per output token, optional
//! ttft = "180 ms"                   # time to first token, optional
//! throughput = "78.6 tok/s"         # output tokens/s of the whole server, optional
//!
//! [points.shares]                   # optional: share of decode kernel time per category,
//! allreduce = 0.515                 # a fraction in 0..1 or a percentage string ("51.5 %");
//!                                   # keys: allreduce, moe, attention, gemm, dequant, other
//! ```
//!
//! Times are unit strings (`"12.7 ms"`, `"950 us"`, `"0.4 s"`), throughput is `"<n> tok/s"`
//! (also `tokens/s`); bare numbers are refused, so no reader has to guess a unit. Each point
//! must give at least one of `tpot`, `ttft`, `throughput`, `shares`; shares must not sum to
//! more than 1. Unknown keys are errors (a misspelt `tpot_ms` would otherwise be ignored).
//! Errors name the file and line.
//!
//! `source` is required but is not part of [`MeasuredSet`]; [`parse_document`] returns the
//! whole typed file for callers that want it.

use super::{
    line_at, measured_error, observation, MeasuredSet, Observation, Quantity, TpotDef,
    TraceCategory,
};
use crate::error::Result;
use crate::units::Seconds;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use toml::Spanned;

/// A measurement file, as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasurementFile {
    /// The system measured.
    pub system: String,
    /// The model measured.
    pub model: String,
    /// How the harness defined TPOT; required when a point gives `tpot`.
    pub tpot_definition: Option<TpotDef>,
    /// Where the numbers come from.
    pub source: String,
    /// The measured points, with their place in the file.
    pub points: Vec<Spanned<Point>>,
}

/// One measured point: a serving run at one concurrency, or one profile.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    /// Requests in flight.
    pub concurrency: u32,
    /// Prompt tokens per request.
    pub input_len: Option<u32>,
    /// Output tokens per request.
    pub output_len: Option<u32>,
    /// Time per output token, under the file's `tpot_definition`.
    pub tpot: Option<Seconds>,
    /// Time to first token.
    pub ttft: Option<Seconds>,
    /// Output tokens per second of the whole server.
    pub throughput: Option<TokensPerSec>,
    /// Share of decode kernel time per category.
    pub shares: Option<BTreeMap<TraceCategory, Share>>,
    /// The throughput "does not improve beyond" this concurrency: read as the same
    /// throughput at the next doubling (2 × `concurrency`), an observation of its own that
    /// tells calibration where the curve is flat.
    #[serde(default)]
    pub flat_beyond: bool,
    /// The record's sentence the point is transcribed from, where no measured output holds
    /// it (a figure stated in prose): reports mark the point as prose, not a measurement.
    /// A `flat_beyond` point is always read from prose: the quote it repeats.
    #[serde(default)]
    pub quote: Option<String>,
}

/// Output tokens per second, written `"1536 tok/s"`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct TokensPerSec(pub f64);

impl TokensPerSec {
    /// Parse `"<number> tok/s"` (or `tokens/s`, `token/s`): a finite, non-negative number and
    /// the unit.
    pub fn parse(text: &str) -> std::result::Result<TokensPerSec, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E' | '_')))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let expected = "expected a rate such as \"1536 tok/s\"";
        let value: f64 = num
            .replace('_', "")
            .parse()
            .map_err(|_| format!("\"{text}\" has no number; {expected}"))?;
        if !matches!(unit.trim(), "tok/s" | "tokens/s" | "token/s") {
            return Err(format!(
                "unknown unit \"{}\" in \"{text}\"; {expected}",
                unit.trim()
            ));
        }
        if !value.is_finite() || value < 0.0 {
            return Err(format!("\"{text}\" is not a non-negative rate; {expected}"));
        }
        Ok(TokensPerSec(value))
    }
}

impl<'de> Deserialize<'de> for TokensPerSec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TokensPerSec::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A share in [0, 1]: a number (`0.515`) or a percentage string (`"51.5 %"`).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Share(pub f64);

impl<'de> Deserialize<'de> for Share {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = crate::units::deserialize_fraction(d, "share")?;
        if !(0.0..=1.0).contains(&v) {
            return Err(serde::de::Error::custom(format!(
                "share {v} is outside 0..1; expected a fraction such as 0.515"
            )));
        }
        Ok(Share(v))
    }
}

/// Parse a measurement file into its typed form, checked (see the module doc).
pub fn parse_document(text: &str, file: &str) -> Result<MeasurementFile> {
    let doc: MeasurementFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_at(text, s.start));
        measured_error(file, line, e.message().trim_end().to_string())
    })?;
    for (name, value) in [
        ("system", &doc.system),
        ("model", &doc.model),
        ("source", &doc.source),
    ] {
        if value.trim().is_empty() {
            let line = crate::error::line_of_field(text, name);
            return Err(measured_error(file, line, format!("`{name}` is empty")));
        }
    }
    if doc.points.is_empty() {
        return Err(measured_error(file, None, "no [[points]]"));
    }
    for p in &doc.points {
        check_point(p, doc.tpot_definition, text, file)?;
    }
    Ok(doc)
}

fn check_point(
    spanned: &Spanned<Point>,
    definition: Option<TpotDef>,
    text: &str,
    file: &str,
) -> Result<()> {
    let p = spanned.get_ref();
    let line = Some(line_at(text, spanned.span().start));
    let fail = |m: &str| Err(measured_error(file, line, m.to_string()));
    if p.concurrency == 0 {
        return fail("`concurrency` must be at least 1");
    }
    if p.input_len == Some(0) || p.output_len == Some(0) {
        return fail("`input_len` and `output_len` must be at least 1 token");
    }
    let no_shares = p.shares.as_ref().is_none_or(|s| s.is_empty());
    if p.tpot.is_none() && p.ttft.is_none() && p.throughput.is_none() && no_shares {
        return fail("the point gives none of `tpot`, `ttft`, `throughput`, `shares`");
    }
    for (name, v) in [("tpot", p.tpot), ("ttft", p.ttft)] {
        if v.is_some_and(|s| s.get() <= 0.0) {
            return fail(&format!("`{name}` must be more than zero"));
        }
    }
    if p.throughput.is_some_and(|t| t.0 <= 0.0) {
        return fail("`throughput` must be more than zero");
    }
    if p.flat_beyond && p.throughput.is_none() {
        return fail("`flat_beyond` needs the point's `throughput` (the rate that stays flat)");
    }
    if p.flat_beyond && p.concurrency > u32::MAX / 2 {
        return fail("`flat_beyond` on a concurrency too large to double");
    }
    if p.tpot.is_some() {
        if p.output_len.is_none() {
            return fail("a point with `tpot` needs `output_len`");
        }
        if definition.is_none() {
            return fail(
                "a point gives `tpot` but the file has no top-level `tpot_definition` \
                 (\"e2e\" or \"itl\")",
            );
        }
    }
    if let Some(shares) = &p.shares {
        let sum: f64 = shares.values().map(|s| s.0).sum();
        if sum > 1.0 + 1e-6 {
            return fail(&format!("`shares` sum to {sum}, more than 1"));
        }
    }
    Ok(())
}

/// Parse a measurement file into observations (one per value given). `file` labels errors and
/// origins; each observation's line is that of its point's `[[points]]` header.
pub fn parse_toml(text: &str, file: &str) -> Result<MeasuredSet> {
    let doc = parse_document(text, file)?;
    let mut observations: Vec<Observation> = Vec::new();
    for spanned in &doc.points {
        let p = spanned.get_ref();
        let line = Some(line_at(text, spanned.span().start));
        let quote = p.quote.clone();
        let mut push = |q, prose: Option<String>| {
            let mut o = observation(q, file, line);
            o.origin.prose = prose;
            observations.push(o);
        };
        if let (Some(tpot), Some(output_len), Some(definition)) =
            (p.tpot, p.output_len, doc.tpot_definition)
        {
            push(
                Quantity::Tpot {
                    concurrency: p.concurrency,
                    input_len: p.input_len,
                    output_len,
                    definition,
                    seconds: tpot.get(),
                },
                quote.clone(),
            );
        }
        if let Some(ttft) = p.ttft {
            push(
                Quantity::Ttft {
                    concurrency: p.concurrency,
                    input_len: p.input_len,
                    output_len: p.output_len,
                    seconds: ttft.get(),
                },
                quote.clone(),
            );
        }
        if let Some(tps) = p.throughput {
            push(
                Quantity::Throughput {
                    concurrency: p.concurrency,
                    input_len: p.input_len,
                    output_len: p.output_len,
                    tokens_per_second: tps.0,
                },
                quote.clone(),
            );
            if p.flat_beyond {
                let reading = format!(
                    "{}read as the same rate at C = {} (flat_beyond)",
                    quote
                        .as_deref()
                        .map(|q| format!("\"{q}\": "))
                        .unwrap_or_default(),
                    2 * p.concurrency
                );
                push(
                    Quantity::Throughput {
                        concurrency: 2 * p.concurrency,
                        input_len: p.input_len,
                        output_len: p.output_len,
                        tokens_per_second: tps.0,
                    },
                    Some(reading),
                );
            }
        }
        for (&category, share) in p.shares.iter().flatten() {
            push(
                Quantity::CategoryShare {
                    concurrency: p.concurrency,
                    category,
                    share: share.0,
                },
                quote.clone(),
            );
        }
    }
    Ok(MeasuredSet {
        system: Some(doc.system),
        model: Some(doc.model),
        observations,
        devices: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    const FILE: &str = r#"system = "8x-rtx-pro-6000-pcie"
model = "kimi-k2.5-int4"
source = "test"
tpot_definition = "e2e"

[[points]]
concurrency = 1
output_len = 32
tpot = "12.71875 ms"

[[points]]
concurrency = 128
throughput = "1536 tok/s"

[[points]]
concurrency = 1
[points.shares]
allreduce = 0.515
moe = "20 %"
"#;

    #[test]
    fn reads_points_with_lines() {
        let set = parse_toml(FILE, "m.toml").unwrap();
        assert_eq!(set.system.as_deref(), Some("8x-rtx-pro-6000-pcie"));
        assert_eq!(set.observations.len(), 4);
        match set.observations[0].quantity {
            Quantity::Tpot {
                concurrency: 1,
                input_len: None,
                output_len: 32,
                definition: TpotDef::E2e,
                seconds,
            } => assert_relative_eq!(seconds, 0.407 / 32.0, max_relative = 1e-12),
            ref q => panic!("{q:?}"),
        }
        let lines: Vec<_> = set.observations.iter().map(|o| o.origin.line).collect();
        // Each point's line is its `[[points]]` header's.
        assert_eq!(lines, [Some(6), Some(11), Some(15), Some(15)]);
        assert!(matches!(
            set.observations[1].quantity,
            Quantity::Throughput { concurrency: 128, output_len: None, tokens_per_second, .. } if tokens_per_second == 1536.0
        ));
        assert!(matches!(
            set.observations[3].quantity,
            Quantity::CategoryShare { category: TraceCategory::Moe, share, .. } if (share - 0.2).abs() < 1e-12
        ));
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let text = FILE.replace("tpot = \"12.71875 ms\"", "tpot_ms = 12.7");
        let e = parse_toml(&text, "m.toml").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:9:") && e.contains("tpot_ms"), "{e}");
    }

    #[test]
    fn bare_number_and_bad_unit_are_refused() {
        let e = parse_toml(&FILE.replace("\"12.71875 ms\"", "12.7"), "m.toml").unwrap_err();
        assert!(e.to_string().starts_with("m.toml:9:"), "{e}");
        let e = parse_toml(&FILE.replace("1536 tok/s", "1536 req/s"), "m.toml").unwrap_err();
        assert!(e.to_string().contains("req/s"), "{e}");
        let e = parse_toml(
            &FILE.replace("allreduce = 0.515", "allreduce = 1.5"),
            "m.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let e =
            parse_toml(&FILE.replace("allreduce = 0.515", "nvlink = 0.5"), "m.toml").unwrap_err();
        assert!(e.to_string().contains("nvlink"), "{e}");
    }

    #[test]
    fn tpot_needs_definition_and_output_len() {
        let e = parse_toml(&FILE.replace("tpot_definition = \"e2e\"\n", ""), "m.toml").unwrap_err();
        assert!(e.to_string().contains("tpot_definition"), "{e}");
        let e = parse_toml(&FILE.replace("output_len = 32\n", ""), "m.toml").unwrap_err();
        assert!(e.to_string().contains("output_len"), "{e}");
        let e = parse_toml(&FILE.replace("moe = \"20 %\"", "moe = 0.6"), "m.toml").unwrap_err();
        assert!(e.to_string().contains("sum"), "{e}");
    }

    #[test]
    fn tokens_per_second_parser() {
        assert_eq!(TokensPerSec::parse("1536 tok/s"), Ok(TokensPerSec(1536.0)));
        assert_eq!(TokensPerSec::parse("78.6tokens/s"), Ok(TokensPerSec(78.6)));
        assert!(TokensPerSec::parse("1536").is_err());
        assert!(TokensPerSec::parse("tok/s").is_err());
        assert!(TokensPerSec::parse("-1 tok/s").is_err());
        assert!(TokensPerSec::parse("1e999 tok/s").is_err());
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "",
            "[[points]]",
            "points = 5",
            "system = \"\"\nmodel = \"m\"\nsource = \"s\"\npoints = []",
            "\u{0}",
        ] {
            assert!(parse_toml(t, "f").is_err(), "{t}");
        }
    }

    #[test]
    fn a_flat_curve_is_read_as_the_same_throughput_at_the_next_doubling() {
        let text = FILE.replace(
            "throughput = \"1536 tok/s\"\n",
            "throughput = \"1536 tok/s\"\nflat_beyond = true\n",
        );
        let set = parse_toml(&text, "m.toml").unwrap();
        assert_eq!(set.throughputs(), vec![(128, 1536.0), (256, 1536.0)]);
        // Both observations point at the same line of the file.
        let lines: Vec<_> = set
            .observations
            .iter()
            .filter(|o| matches!(o.quantity, Quantity::Throughput { .. }))
            .map(|o| o.origin.line)
            .collect();
        assert_eq!(lines[0], lines[1]);
        let bad = FILE.replace(
            "concurrency = 1\n[points.shares]",
            "concurrency = 1\nflat_beyond = true\n[points.shares]",
        );
        let e = parse_toml(&bad, "m.toml").unwrap_err().to_string();
        assert!(e.contains("flat_beyond") && e.contains("m.toml"), "{e}");
    }
}
