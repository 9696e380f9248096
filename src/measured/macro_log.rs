//! Reader for the team's macro-benchmark log (`macro.log` of `shared/measured/k25b6000bench1/`):
//! the project's first measurement, printed by an aiohttp script that sent chat-completion
//! requests to a vLLM server. It exists so that log can be compared with predictions as it is,
//! without retyping.
//!
//! The log looks like
//!
//! ```text
//! Target: http://10.1.230.174:8000/v1/chat/completions
//! Model: /shared/kimi-k2.5-int4
//! Time: 2026-02-21 12:33:31 UTC
//! Testing max_tokens=32...
//!   Trial 1: 0.407s, 32 tokens, TPOT=12.7ms, tok/s=78.7
//!   Trial 3: 0.398s, 32 tokens, TPOT=12.4ms,...
//! ```
//!
//! Each trial becomes an end-to-end TPOT ([`TpotDef::E2e`]) of total time / tokens: the
//! script's own TPOT is that quotient (it includes time to first token), and recomputing it
//! from the printed total keeps three digits where the printed TPOT keeps one decimal.
//!
//! Quirks tolerated:
//! - The last line may be cut off. A cut trial line is kept when its total time (`0.398s`) and
//!   token count (`32 tokens`) are both complete, and skipped silently otherwise. A malformed
//!   trial line anywhere else is an error with its line number.
//! - The record kept no concurrency output, so its form is a guess from the script's style:
//!   a line naming a concurrency and a rate (`Concurrency 128: 256 requests, 1536.2 tok/s`),
//!   or a heading naming a concurrency (`Testing concurrency=128...`) followed by a line with
//!   `throughput` and a `tok/s` figure, becomes a [`Quantity::Throughput`] without lengths.
//!   Trials under such a heading are taken at that concurrency; otherwise at concurrency 1.
//!
//! The `Model:` header names the served model path as the log prints it.

use super::{measured_error, observation, MeasuredSet, Quantity, TpotDef};
use crate::error::Result;

/// Parse a macro-benchmark log. `file` labels errors and origins.
pub fn parse_macro_log(text: &str, file: &str) -> Result<MeasuredSet> {
    let mut set = MeasuredSet::default();
    let last_line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, _)| i)
        .last();
    // Concurrency of the section being read, from a heading such as `Testing concurrency=8...`.
    let mut section: Option<u32> = None;

    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if let Some(model) = line.strip_prefix("Model:") {
            let model = model.trim();
            match &set.model {
                None if !model.is_empty() => set.model = Some(model.to_string()),
                Some(first) if !model.is_empty() && first != model => {
                    return Err(measured_error(
                        file,
                        Some(n),
                        format!(
                            "model \"{model}\", where an earlier header of this log named \
                             \"{first}\": one log measures one model (split it, one file per model)"
                        ),
                    ))
                }
                _ => {}
            }
            continue;
        }
        if line.starts_with("Testing max_tokens") {
            section = None;
            continue;
        }
        if let Some(rest) = trial_rest(line) {
            match parse_trial(rest) {
                Ok((total, tokens)) => {
                    set.observations.push(observation(
                        Quantity::Tpot {
                            concurrency: section.unwrap_or(1),
                            input_len: None,
                            output_len: tokens,
                            definition: TpotDef::E2e,
                            seconds: total / f64::from(tokens),
                        },
                        file,
                        Some(n),
                    ));
                }
                // The record's last line is cut off; a cut trial is not an error. A complete
                // one whose value is impossible is, wherever it is.
                Err(TrialError::Cut(_)) if Some(i) == last_line => {}
                Err(TrialError::Cut(why) | TrialError::Impossible(why)) => {
                    return Err(measured_error(
                        file,
                        Some(n),
                        format!(
                            "trial line \"{line}\": {why}; expected \
                             `Trial N: <seconds>s, <count> tokens, …`"
                        ),
                    ))
                }
            }
            continue;
        }
        if let Some(c) = concurrency_in(line) {
            if c == 0 {
                return Err(measured_error(
                    file,
                    Some(n),
                    format!(
                        "\"{line}\" names concurrency 0; expected at least 1 request in flight"
                    ),
                ));
            }
            match throughput_in(line) {
                Some(tps) => set.observations.push(throughput(c, tps, file, n)),
                None => section = Some(c),
            }
            continue;
        }
        if let Some(c) = section {
            if line.to_ascii_lowercase().contains("throughput") {
                if let Some(tps) = throughput_in(line) {
                    set.observations.push(throughput(c, tps, file, n));
                }
            }
        }
    }

    if set.observations.is_empty() {
        return Err(measured_error(
            file,
            None,
            "no complete trial lines (`Trial N: 0.407s, 32 tokens, …`) and no concurrency \
             throughput lines: not a macro-benchmark log, or every line was cut off",
        ));
    }
    Ok(set)
}

fn throughput(
    concurrency: u32,
    tokens_per_second: f64,
    file: &str,
    line: usize,
) -> super::Observation {
    observation(
        Quantity::Throughput {
            concurrency,
            input_len: None,
            output_len: None,
            tokens_per_second,
        },
        file,
        Some(line),
    )
}

/// Whether a (trimmed) line is a trial line, `Trial <n>: …`.
pub(crate) fn is_trial_line(line: &str) -> bool {
    trial_rest(line).is_some()
}

/// The text after `Trial <n>:`, if the line is a trial line.
fn trial_rest(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("Trial")?;
    let rest = rest.trim_start();
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    rest.get(digits..)?.trim_start().strip_prefix(':')
}

/// Why a trial line was not read.
enum TrialError {
    /// Incomplete: the line may be cut off (forgiven on the record's last line).
    Cut(String),
    /// Complete, with a value no run can produce (zero, negative, or not finite).
    Impossible(String),
}

/// Total seconds and token count of a trial, from `0.407s, 32 tokens, …`. Both fields must be
/// complete (unit and word present), so a line cut inside a number is never read as a value.
fn parse_trial(rest: &str) -> std::result::Result<(f64, u32), TrialError> {
    let mut fields = rest.split(',').map(str::trim);
    let total_field = fields.next().unwrap_or("");
    let total = total_field
        .strip_suffix('s')
        .and_then(|t| t.trim().parse::<f64>().ok())
        .ok_or_else(|| {
            TrialError::Cut(format!("total time \"{total_field}\" is not `<seconds>s`"))
        })?;
    if !(total.is_finite() && total > 0.0) {
        return Err(TrialError::Impossible(format!(
            "total time \"{total_field}\" is not a positive, finite time"
        )));
    }
    let tokens_field = fields.next().unwrap_or("");
    let mut words = tokens_field.split_whitespace();
    let tokens = match (words.next(), words.next(), words.next()) {
        (Some(num), Some("tokens" | "token"), None) => num.parse::<u32>().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        TrialError::Cut(format!(
            "token count \"{tokens_field}\" is not `<count> tokens`"
        ))
    })?;
    if tokens == 0 {
        return Err(TrialError::Impossible(
            "0 tokens: no TPOT to compute".to_string(),
        ));
    }
    Ok((total, tokens))
}

/// A concurrency named by a line: `Concurrency 128: …`, `Testing concurrency=128...`,
/// `C=128: …`.
fn concurrency_in(line: &str) -> Option<u32> {
    let lower = line.to_ascii_lowercase();
    let after = if let Some(at) = lower.find("concurrency") {
        lower.get(at + "concurrency".len()..)?
    } else {
        lower
            .strip_prefix("c=")
            .or_else(|| lower.strip_prefix("c ="))?
    };
    let after = after.trim_start_matches([' ', '=', ':']);
    leading_number(after).and_then(|v| v.parse::<u32>().ok())
}

/// A tokens-per-second figure on a line: the number before `tok/s` (`1536.2 tok/s`), or after
/// it (`tok/s=1536.2`).
fn throughput_in(line: &str) -> Option<f64> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("tok/s")?;
    let before = lower.get(..at)?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + 1);
    let value = before
        .get(start..)
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse::<f64>().ok())
        .or_else(|| {
            let after = lower.get(at + "tok/s".len()..)?;
            let after = after.trim_start_matches([' ', '=', ':']);
            leading_number(after)?.parse::<f64>().ok()
        })?;
    (value.is_finite() && value > 0.0).then_some(value)
}

/// The decimal number at the start of `s` (digits, at most one dot followed by digits), if
/// any: `128...` gives `128`, `1536.2 tok/s` gives `1536.2`.
fn leading_number(s: &str) -> Option<&str> {
    let int = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if int == 0 {
        return None;
    }
    let frac = s
        .get(int..)
        .and_then(|rest| rest.strip_prefix('.'))
        .map_or(0, |rest| {
            rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len()
        });
    let end = if frac > 0 { int + 1 + frac } else { int };
    s.get(..end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    const LOG: &str = "\
Target: http://host:8000/v1/chat/completions
Model: /shared/kimi-k2.5-int4
Time: 2026-02-21 12:33:31 UTC

Testing max_tokens=32...
  Trial 1: 0.407s, 32 tokens, TPOT=12.7ms, tok/s=78.7
  Trial 2: 0.414s, 32 tokens, TPOT=12.9ms, tok/s=77.3
  Trial 3: 0.398s, 32 tokens, TPOT=12.4ms,...";

    fn tpot(o: &super::super::Observation) -> (u32, u32, f64) {
        match o.quantity {
            Quantity::Tpot {
                concurrency,
                output_len,
                definition: TpotDef::E2e,
                seconds,
                input_len: None,
            } => (concurrency, output_len, seconds),
            ref q => panic!("not an E2E TPOT: {q:?}"),
        }
    }

    /// A second `Model:` header naming another model is refused at its line, where its
    /// trials were read as the first model's.
    #[test]
    fn a_second_model_in_one_log_is_refused() {
        let two = format!("{LOG}\nModel: /shared/llama-3.1-8b\n  Trial 1: 0.2s, 32 tokens\n");
        let e = parse_macro_log(&two, "macro.log").unwrap_err().to_string();
        assert!(e.contains("macro.log:") && e.contains("one model"), "{e}");
    }

    #[test]
    fn reads_trials_including_cut_last_line() {
        let set = parse_macro_log(LOG, "macro.log").unwrap();
        assert_eq!(set.model.as_deref(), Some("/shared/kimi-k2.5-int4"));
        assert_eq!(set.observations.len(), 3);
        for (o, total) in set.observations.iter().zip([0.407, 0.414, 0.398]) {
            let (c, len, s) = tpot(o);
            assert_eq!((c, len), (1, 32));
            assert_relative_eq!(s, total / 32.0);
        }
        assert_eq!(set.observations[2].origin.line, Some(8));
    }

    #[test]
    fn skips_last_line_cut_inside_a_field() {
        for cut in [
            "  Trial 3: 0.39",
            "  Trial 3: 0.398s, 3",
            "  Trial 3: 0.398s, 32 tok",
            "  Trial 3:",
        ] {
            let text = format!(
                "Testing max_tokens=32...\n  Trial 1: 0.407s, 32 tokens, TPOT=12.7ms\n{cut}\n"
            );
            let set = parse_macro_log(&text, "f").unwrap();
            assert_eq!(set.observations.len(), 1, "{cut}");
        }
    }

    #[test]
    fn malformed_trial_in_the_middle_is_an_error_with_line() {
        let text = "Trial 1: 0.4s, 32 tokens\nTrial 2: fast, 32 tokens\nTrial 3: 0.4s, 32 tokens\n";
        let e = parse_macro_log(text, "m.log").unwrap_err().to_string();
        assert!(e.starts_with("m.log:2:"), "{e}");
        assert!(e.contains("total time"), "{e}");
    }

    #[test]
    fn no_trials_is_an_error_naming_the_file() {
        let e = parse_macro_log("Target: x\nModel: y\n", "empty.log").unwrap_err();
        assert!(e.to_string().starts_with("empty.log:"), "{e}");
        assert!(parse_macro_log("", "e").is_err());
        assert!(parse_macro_log("  Trial 1: 0.4", "e").is_err());
    }

    #[test]
    fn reads_concurrency_lines_in_the_guessed_styles() {
        let text = "\
Testing max_tokens=32...
  Trial 1: 0.407s, 32 tokens, TPOT=12.7ms, tok/s=78.7
MULTI-CONCURRENCY THROUGHPUT BENCHMARK
  Concurrency 64: 128 requests in 6.1s, 1342.5 tok/s
Testing concurrency=128...
  Throughput: 1536.2 tok/s
  C=256: tok/s=1530
";
        let set = parse_macro_log(text, "f").unwrap();
        assert_eq!(
            set.throughputs(),
            vec![(64, 1342.5), (128, 1536.2), (256, 1530.0)]
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "Trial",
            "Trial 1",
            "Trial 1:",
            "Trial 1: s, tokens",
            "Trial 99999999999: 1s, 1 tokens",
            "Concurrency",
            "C=",
            "tok/s",
            "Concurrency 5: . tok/s",
            "Trial 1: 1s, 0 tokens\nx",
            "é Trial 1: é",
        ] {
            let answer = parse_macro_log(t, "odd.log");
            let problem = crate::measured::answer_problem(&answer, "odd.log");
            assert!(problem.is_none(), "{t:?}: {problem:?}");
        }
    }
}
