//! Reader for vLLM's serving-benchmark results (`vllm bench serve --save-result`, formerly
//! `benchmarks/benchmark_serving.py`), the measurement most vLLM users already have. It exists
//! so a concurrency sweep can be set against predictions without retyping it.
//!
//! A file holds one JSON object, or several (JSON lines, one run per line, as a sweep script
//! appends them; pretty-printed objects one after another also work). Each run gives, at its
//! concurrency and its mean input/output lengths:
//! - `mean_tpot_ms` → [`Quantity::Tpot`] with [`TpotDef::Itl`]: vLLM's TPOT is
//!   (latency − TTFT) / (output tokens − 1). A mean of 0 (no request produced two tokens), or
//!   a run with no output tokens, is not a measurement and is left out.
//! - `mean_ttft_ms` → [`Quantity::Ttft`] (left out when 0).
//! - `output_throughput` → [`Quantity::Throughput`] (output tokens/s of the whole server; left
//!   out when 0; its output length is unknown when the mean rounds to 0 tokens).
//!
//! `output_throughput` must agree with `total_output_tokens / duration` within 2 % where the
//! file gives `duration` (vLLM computes it so).
//!
//! Lengths are `total_input_tokens / completed` and `total_output_tokens / completed`,
//! rounded; `total_input_tokens` may be absent (then the input length is unknown), but a mean
//! below one token per request is an error.
//!
//! Concurrency is `max_concurrency`, capped at `num_prompts` (no more requests can be in
//! flight than were sent). `max_concurrency` must be present; `null` means vLLM did not limit
//! it, and then all `num_prompts` requests are in flight at once *only* when `request_rate` is
//! infinite (`"inf"`, the default), so the concurrency is taken as `num_prompts`. A null
//! `max_concurrency` with a finite request rate has no fixed concurrency and is an error.
//!
//! Errors name the file, the line where the run's object starts, and the field.

use super::{line_at, measured_error, observation, MeasuredSet, Quantity, TpotDef};
use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// Parse vLLM benchmark results (one object or JSON lines). `file` labels errors and origins.
pub fn parse_vllm_json(text: &str, file: &str) -> Result<MeasuredSet> {
    let mut set = MeasuredSet::default();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut runs = 0usize;
    loop {
        let before = stream.byte_offset();
        let start = text
            .get(before..)
            .and_then(|rest| rest.find(|c: char| !c.is_whitespace()))
            .map_or(before, |skip| before + skip);
        let value = match stream.next() {
            None => break,
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                return Err(measured_error(
                    file,
                    Some(e.line().max(1)),
                    format!("not valid JSON: {e}"),
                ))
            }
        };
        let end = stream.byte_offset();
        let line = line_at(text, start);
        // Results saved together as one JSON array are runs too.
        let objects = match value {
            Value::Object(obj) => vec![obj],
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::Object(obj) => Ok(obj),
                    _ => Err(measured_error(
                        file,
                        Some(line),
                        "expected an array of JSON objects (benchmark runs)",
                    )),
                })
                .collect::<Result<_>>()?,
            _ => {
                return Err(measured_error(
                    file,
                    Some(line),
                    "expected a JSON object (one benchmark run)",
                ))
            }
        };
        for obj in &objects {
            let run = Run {
                obj,
                span: text.get(start..end).unwrap_or(""),
                file,
                line,
            };
            read_run(&run, &mut set)?;
            runs += 1;
        }
    }
    if runs == 0 {
        return Err(measured_error(
            file,
            None,
            "no benchmark results: the file is empty",
        ));
    }
    Ok(set)
}

/// One run's object, with what errors need to point at it.
struct Run<'a> {
    obj: &'a Map<String, Value>,
    /// The object's source text, to find the line of a bad field.
    span: &'a str,
    file: &'a str,
    /// Line where the object starts.
    line: usize,
}

impl Run<'_> {
    fn missing(&self, field: &str) -> Error {
        measured_error(
            self.file,
            Some(self.line),
            format!("missing field `{field}`"),
        )
    }

    /// Error about a field that is present: points at the field's own line when it can.
    fn bad(&self, field: &str, why: &str) -> Error {
        let line = self
            .span
            .find(&format!("\"{field}\""))
            .map_or(self.line, |at| self.line + line_at(self.span, at) - 1);
        measured_error(self.file, Some(line), format!("field `{field}`: {why}"))
    }

    /// A required non-negative finite number.
    fn number(&self, field: &str) -> Result<f64> {
        let v = self.obj.get(field).ok_or_else(|| self.missing(field))?;
        self.as_number(field, v)
    }

    fn as_number(&self, field: &str, v: &Value) -> Result<f64> {
        match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            Some(_) => Err(self.bad(field, "expected a non-negative number")),
            None => Err(self.bad(field, &format!("expected a number, found {v}"))),
        }
    }

    /// A required positive integer that fits u32.
    fn count(&self, field: &str) -> Result<u32> {
        let v = self.obj.get(field).ok_or_else(|| self.missing(field))?;
        self.as_count(field, v)
    }

    fn as_count(&self, field: &str, v: &Value) -> Result<u32> {
        v.as_u64()
            .filter(|&n| n > 0)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.bad(field, &format!("expected a positive integer, found {v}")))
    }
}

/// How far `output_throughput` may stand from `total_output_tokens / duration`, a fraction:
/// vLLM computes the one from the others, so only rounding in a hand-edited file separates
/// them.
const THROUGHPUT_AGREEMENT: f64 = 0.02;

fn read_run(run: &Run, set: &mut MeasuredSet) -> Result<()> {
    let concurrency = concurrency(run)?;
    let completed = run.count("completed")?;
    let per_request = |total: f64| -> Option<u32> {
        let mean = (total / f64::from(completed)).round();
        (mean >= 0.0 && mean <= f64::from(u32::MAX)).then_some(mean as u32)
    };
    let output_total = run.number("total_output_tokens")?;
    let output_len = per_request(output_total)
        .ok_or_else(|| run.bad("total_output_tokens", "mean per request does not fit"))?;
    let input_len = match run.obj.get("total_input_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            per_request(run.as_number("total_input_tokens", v)?)
                .filter(|&l| l > 0)
                .ok_or_else(|| {
                    run.bad(
                        "total_input_tokens",
                        "the mean per request is not a whole number of tokens from 1 up",
                    )
                })?,
        ),
    };
    let tpot_ms = run.number("mean_tpot_ms")?;
    let ttft_ms = run.number("mean_ttft_ms")?;
    let tokens_per_second = run.number("output_throughput")?;
    // vLLM writes the throughput as the output tokens over the benchmark's duration: where
    // the file gives the duration, the two must agree (a throughput off by a unit slip, or
    // edited apart from its run, fits nothing and widens every interval without bound).
    if let Some(v) = run.obj.get("duration").filter(|v| !v.is_null()) {
        let duration = run.as_number("duration", v)?;
        if duration > 0.0 && output_total > 0.0 {
            let implied = output_total / duration;
            if (tokens_per_second - implied).abs() > THROUGHPUT_AGREEMENT * implied {
                return Err(run.bad(
                    "output_throughput",
                    &format!(
                        "{tokens_per_second} tok/s, but total_output_tokens / duration is \
                         {output_total} / {duration} s = {implied:.4} tok/s; the two describe \
                         different runs (or a unit slip)"
                    ),
                ));
            }
        }
    }

    // One file measures one model, as two files of two models are refused: a later run of
    // another model is not read as the first one's.
    let model = run
        .obj
        .get("model_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    match (&set.model, model) {
        (None, m) => set.model = m,
        (Some(first), Some(m)) if *first != m => {
            return Err(run.bad(
                "model_id",
                &format!(
                    "\"{m}\", where an earlier run of this file measured \"{first}\": one file \
                     measures one model (split it, one file per model)"
                ),
            ))
        }
        _ => {}
    }
    let line = Some(run.line);
    if tpot_ms > 0.0 && output_len > 0 {
        set.observations.push(observation(
            Quantity::Tpot {
                concurrency,
                input_len,
                output_len,
                definition: TpotDef::Itl,
                seconds: tpot_ms * 1e-3,
            },
            run.file,
            line,
        ));
    }
    // A zero is no measurement (no request finished its prompt, or none produced a token):
    // left out like a zero TPOT, never compared against a prediction.
    if ttft_ms > 0.0 {
        set.observations.push(observation(
            Quantity::Ttft {
                concurrency,
                input_len,
                output_len: Some(output_len).filter(|&l| l > 0),
                seconds: ttft_ms * 1e-3,
            },
            run.file,
            line,
        ));
    }
    if tokens_per_second > 0.0 {
        set.observations.push(observation(
            Quantity::Throughput {
                concurrency,
                input_len,
                // A mean that rounds to no tokens says nothing of the length.
                output_len: Some(output_len).filter(|&l| l > 0),
                tokens_per_second,
            },
            run.file,
            line,
        ));
    }
    Ok(())
}

/// The run's concurrency (see the module doc).
fn concurrency(run: &Run) -> Result<u32> {
    let prompts = match run.obj.get("num_prompts") {
        None | Some(Value::Null) => None,
        Some(v) => Some(run.as_count("num_prompts", v)?),
    };
    match run.obj.get("max_concurrency") {
        None => Err(run.missing("max_concurrency")),
        Some(Value::Null) => {
            let infinite_rate = match run.obj.get("request_rate") {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.trim().eq_ignore_ascii_case("inf"),
                Some(v) => v.as_f64().is_some_and(f64::is_infinite),
            };
            if !infinite_rate {
                return Err(run.bad(
                    "max_concurrency",
                    "null with a finite `request_rate`: the run had no fixed concurrency; \
                     use results from a run with --max-concurrency",
                ));
            }
            prompts.ok_or_else(|| {
                measured_error(
                    run.file,
                    Some(run.line),
                    "`max_concurrency` is null (unlimited) and field `num_prompts`, which then \
                     gives the concurrency, is missing",
                )
            })
        }
        Some(v) => {
            let c = run.as_count("max_concurrency", v)?;
            Ok(prompts.map_or(c, |p| c.min(p)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    /// A throughput that disagrees with the run's own tokens over its duration (a thousand
    /// times too small: 0.51 tok/s for 8,190 tokens in 16 s) is refused at its field; within
    /// 2 %, or without a duration, it is read.
    #[test]
    fn a_throughput_apart_from_tokens_over_duration_is_refused() {
        let with = |tps: &str, duration: &str| {
            run_json("8")
                .replace(
                    "\"output_throughput\": 512.5",
                    &format!("\"output_throughput\": {tps}"),
                )
                .replace(
                    "\"completed\": 64",
                    &format!("\"completed\": 64, \"duration\": {duration}"),
                )
        };
        let e = parse_vllm_json(&with("0.5125", "15.98"), "r.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("r.json:3") && e.contains("`output_throughput`") && e.contains("512.5156"),
            "{e}"
        );
        assert!(parse_vllm_json(&with("512.5", "15.98"), "r.json").is_ok());
        assert!(parse_vllm_json(&run_json("8"), "r.json").is_ok());
    }

    fn run_json(max_concurrency: &str) -> String {
        format!(
            r#"{{"backend": "vllm", "model_id": "moonshotai/Kimi-K2.5", "max_concurrency": {max_concurrency},
 "request_rate": "inf", "num_prompts": 64, "completed": 64, "total_input_tokens": 65536,
 "total_output_tokens": 8190, "output_throughput": 512.5, "mean_ttft_ms": 250.0,
 "mean_tpot_ms": 14.5, "mean_itl_ms": 14.4}}"#
        )
    }

    /// One file measures one model: a later run of another is refused, naming its line,
    /// where it was read as the first model's.
    #[test]
    fn a_second_model_in_one_file_is_refused() {
        let other = run_json("16").replace("moonshotai/Kimi-K2.5", "meta-llama/Llama-3.1-8B");
        let text = format!("{}\n{other}\n", run_json("8"));
        let e = parse_vllm_json(&text, "r.jsonl").unwrap_err().to_string();
        assert!(e.contains("r.jsonl:5") && e.contains("one model"), "{e}");
        let same = format!("{}\n{}\n", run_json("8"), run_json("16"));
        assert_eq!(
            parse_vllm_json(&same, "r.jsonl")
                .unwrap()
                .observations
                .len(),
            6
        );
    }

    #[test]
    fn reads_one_object() {
        let set = parse_vllm_json(&run_json("8"), "r.json").unwrap();
        assert_eq!(set.model.as_deref(), Some("moonshotai/Kimi-K2.5"));
        assert_eq!(set.observations.len(), 3);
        match set.observations[0].quantity {
            Quantity::Tpot {
                concurrency,
                input_len,
                output_len,
                definition,
                seconds,
            } => {
                assert_eq!((concurrency, input_len, output_len), (8, Some(1024), 128));
                assert_eq!(definition, TpotDef::Itl);
                assert_relative_eq!(seconds, 0.0145);
            }
            ref q => panic!("{q:?}"),
        }
        assert!(matches!(
            set.observations[2].quantity,
            Quantity::Throughput { tokens_per_second, .. } if tokens_per_second == 512.5
        ));
    }

    #[test]
    fn null_concurrency_with_infinite_rate_is_num_prompts() {
        let set = parse_vllm_json(&run_json("null"), "r.json").unwrap();
        assert!(matches!(
            set.observations[1].quantity,
            Quantity::Ttft {
                concurrency: 64,
                ..
            }
        ));
        // More allowed than sent: capped at what was sent.
        let set = parse_vllm_json(&run_json("256"), "r.json").unwrap();
        assert!(matches!(
            set.observations[1].quantity,
            Quantity::Ttft {
                concurrency: 64,
                ..
            }
        ));
    }

    #[test]
    fn null_concurrency_with_finite_rate_is_an_error() {
        let text = run_json("null").replace("\"inf\"", "4.0");
        let e = parse_vllm_json(&text, "r.json").unwrap_err().to_string();
        assert!(
            e.contains("max_concurrency") && e.contains("request_rate"),
            "{e}"
        );
    }

    #[test]
    fn json_lines_missing_field_names_line_and_field() {
        let one = run_json("1").replace('\n', "");
        let bad = run_json("2")
            .replace('\n', "")
            .replace("\"mean_tpot_ms\": 14.5,", "");
        let text = format!("{one}\n\n{bad}\n");
        let e = parse_vllm_json(&text, "sweep.jsonl")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "sweep.jsonl:3: missing field `mean_tpot_ms`");
    }

    #[test]
    fn wrong_type_points_at_the_field_line() {
        let text = run_json("8").replace("\"mean_ttft_ms\": 250.0", "\"mean_ttft_ms\": \"slow\"");
        let e = parse_vllm_json(&text, "r.json").unwrap_err().to_string();
        assert!(e.starts_with("r.json:3: field `mean_ttft_ms`"), "{e}");
    }

    #[test]
    fn truncated_json_is_an_error_with_line() {
        let text = run_json("8");
        let cut = &text[..text.len() / 2];
        let e = parse_vllm_json(cut, "r.json").unwrap_err().to_string();
        assert!(e.starts_with("r.json:"), "{e}");
        assert!(e.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "",
            "   ",
            "[]",
            "1",
            "{}",
            "{\"completed\": 0}",
            "null",
            "{\"max_concurrency\": -1}",
            "\u{feff}{}",
        ] {
            assert!(parse_vllm_json(t, "f").is_err(), "{t}");
        }
        // No output tokens: no TPOT, but TTFT and throughput still read.
        let zero_tokens = run_json("8").replace("8190", "0");
        assert_eq!(
            parse_vllm_json(&zero_tokens, "f")
                .unwrap()
                .observations
                .len(),
            2
        );
    }
}
