//! `rooftop validate --measured <specdec runs CSV>`: each measured speculative-decoding run
//! (its baseline at the same settings) predicted with `specdec` on the model, system, engine
//! and layout it names, at its own draft length, concurrency and measured acceptance.
//!
//! Acceptance is an input here, not a prediction: a row without an acceptance figure is
//! counted as not evaluated. The figure is read as the engine printed it (an accept length
//! with the bonus token, a rate of accepted over drafted tokens; see
//! [`crate::specdec::AcceptanceStat`]) and converted at the row's draft length. The report
//! per method and engine: the median |predicted − measured| / measured speedup, its median
//! sign, and how often the prediction says gain (> 1) where the run gained and loss where it
//! lost. How rows map to descriptions is data (`configs/specdec/runs.toml`); a row that does
//! not map is not evaluated, with the reason.

use crate::cost::Parallel;
use crate::error::Result;
use crate::measured::specdec_csv::SpecRun;
use crate::predict::Scenario;
use crate::spec::{registry, System};
use crate::specdec::{specdec_shaped, Acceptance, AcceptanceStat, Draft, DraftShape};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const RUNS_TOML: &str = include_str!("../configs/specdec/runs.toml");
const RUNS_LABEL: &str = "configs/specdec/runs.toml";
/// Marks a reason that refuses the file rather than skipping the row.
const REFUSED: &str = "refused: ";

/// `configs/specdec/runs.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsMap {
    pub default_context: u32,
    pub systems: BTreeMap<String, String>,
    pub engines: BTreeMap<String, String>,
    pub models: BTreeMap<String, String>,
}

/// One evaluated run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecRunRow {
    pub line: usize,
    /// Method family: eagle3, eagle, mtp, ngram, draft.
    pub method: String,
    pub engine: String,
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub concurrency: u32,
    /// Draft tokens per step along the chain (tree depth for a tree).
    pub k: u32,
    /// Tree branching (1: a chain) and tokens the verify pass checks per sequence.
    pub topk: u32,
    pub verify_tokens: u32,
    pub acceptance_stat: String,
    pub acceptance_value: f64,
    pub expected_tokens_per_step: f64,
    pub measured_speedup: f64,
    pub predicted_speedup: f64,
    /// (predicted − measured) / measured.
    pub error: f64,
    /// Prediction and measurement on the same side of 1 (gain or loss).
    pub gain_loss_right: bool,
    /// The predicted plain decode step at this concurrency, ms.
    pub predicted_plain_step_ms: f64,
    /// The predicted speculative step and its draft and verify passes, ms.
    pub predicted_step_ms: f64,
    pub predicted_draft_ms: f64,
    pub predicted_verify_ms: f64,
    /// What one speculative step costs in plain steps: predicted (`step / plain step`) and
    /// as the measurement implies it (`tokens per step / measured speedup`, with the row's
    /// acceptance). Where the two part, the step is mispriced, not the acceptance.
    pub predicted_step_in_plain_steps: f64,
    pub measured_step_in_plain_steps: f64,
}

/// Errors of one method × engine (or of every row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecGroup {
    pub method: String,
    pub engine: String,
    pub n: usize,
    /// Median |error|.
    pub median_abs_error: f64,
    /// Median signed error.
    pub bias: f64,
    /// Share of rows whose gain or loss the prediction calls right (0..1).
    pub gain_loss_right: f64,
}

/// A row not evaluated, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotEvaluated {
    pub line: usize,
    pub reason: String,
}

/// The validation record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecValidation {
    pub source: String,
    pub total_rows: usize,
    pub groups: Vec<SpecGroup>,
    pub overall: SpecGroup,
    pub rows: Vec<SpecRunRow>,
    /// Rows without an acceptance figure (acceptance is an input): counted, not evaluated.
    pub without_acceptance: usize,
    pub not_evaluated: Vec<NotEvaluated>,
}

/// Numbers in `t` outside parentheses, each with whether a `%` follows it.
fn numbers(t: &str) -> Vec<(f64, bool)> {
    let t = t.split('(').next().unwrap_or("");
    let re = regex::Regex::new(r"(\d+(?:\.\d+)?)\s*(%)?").expect("pattern");
    re.captures_iter(t)
        .filter_map(|c| Some((c[1].parse().ok()?, c.get(2).is_some())))
        .collect()
}

/// The first whole number at the start of `t` (`4 (ep 1)` → 4), if `t` starts with one.
fn leading_int(t: &str) -> Option<u32> {
    let d: String = t
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    d.parse().ok().filter(|v| *v > 0)
}

/// A length such as `1K`, `2000`, `65536`.
fn length(t: &str) -> Option<f64> {
    let t = t.trim();
    let (num, mul) = match t.strip_suffix(['K', 'k']) {
        Some(n) => (n, 1024.0),
        None => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| *v > 0.0)
        .map(|v| v * mul)
}

/// The acceptance statistic and figure of a row, or why there is none.
fn acceptance_of(run: &SpecRun) -> std::result::Result<(AcceptanceStat, f64), String> {
    let m = run.acceptance_metric.to_ascii_lowercase();
    let nums = numbers(&run.acceptance_value);
    if run.acceptance_value.trim().is_empty() || nums.is_empty() {
        return Err("no acceptance figure (acceptance is an input)".into());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // A length names "len" (accept_length, acc len, AL, MAL); engines that print one count
    // the bonus token (SGLang, vLLM, TensorRT-LLM's AL = 1 with nothing accepted).
    let length = m.contains("len") || m.contains("al ") || m.starts_with("al");
    if length {
        let v: Vec<f64> = nums
            .iter()
            .filter(|(_, pct)| !pct)
            .map(|(v, _)| *v)
            .collect();
        if v.is_empty() {
            return Err(format!(
                "acceptance \"{}\" gives no length",
                run.acceptance_value
            ));
        }
        let stat = if m.contains("excl") {
            AcceptanceStat::MeanAccepted
        } else {
            AcceptanceStat::SglangAcceptLength
        };
        return Ok((stat, mean(&v)));
    }
    if m.contains("rate") {
        let v: Vec<f64> = nums
            .iter()
            .map(|(v, pct)| if *pct { v / 100.0 } else { *v })
            .collect();
        return Ok((AcceptanceStat::TrtllmAcceptanceRate, mean(&v)));
    }
    Err(format!(
        "acceptance statistic \"{}\" not understood",
        run.acceptance_metric
    ))
}

/// Draft shape from `spec_tokens`: a chain of k, or SGLang's steps × topk tree with its
/// draft-token budget.
fn shape_of(t: &str) -> std::result::Result<DraftShape, String> {
    let key = |k: &str| -> Option<u32> {
        let re = regex::Regex::new(&format!(r"(?:^|[^a-z_]){k}\s*=\s*(\d+)")).expect("pattern");
        re.captures(t).and_then(|c| c[1].parse().ok())
    };
    if let Some(steps) = key("steps") {
        let topk = key("topk").unwrap_or(1).max(1);
        let tokens = key("num_draft_tokens")
            .or_else(|| key("num_draft"))
            .or_else(|| key("draft_tokens"))
            .or_else(|| key("draft_token_num"))
            .unwrap_or(steps + 1);
        return Ok(DraftShape {
            k: steps,
            topk,
            verify_tokens: tokens.max(2),
        });
    }
    let chain = |k: u32| DraftShape {
        k,
        topk: 1,
        verify_tokens: k + 1,
    };
    if let Some(k) = key("nextn") {
        return Ok(chain(k));
    }
    let re = regex::Regex::new(r"chain length (\d+)").expect("pattern");
    if let Some(k) = re.captures(t).and_then(|c| c[1].parse().ok()) {
        return Ok(chain(k));
    }
    match t.trim().parse::<u32>() {
        Ok(k) if k > 0 => Ok(chain(k)),
        _ => Err(format!("draft settings \"{t}\" not understood")),
    }
}

/// The measured speedup of a row from its metric, or why there is none.
fn measured_speedup(run: &SpecRun) -> std::result::Result<f64, String> {
    let m = run.metric.to_ascii_lowercase();
    let (b, s) = (run.baseline, run.spec);
    let v = match (b, s) {
        _ if m.contains("slowdown") => s.map(|s| 1.0 / s),
        _ if m.contains("(%)") => match (b, s) {
            (None, Some(s)) => Some(1.0 + s / 100.0),
            _ => None,
        },
        (Some(b), Some(s)) if m.contains("tpot") || m.contains("(ms)") => Some(b / s),
        (Some(b), Some(s)) => Some(s / b),
        (None, Some(s)) if m.contains("(x)") => Some(s),
        _ => None,
    };
    v.ok_or_else(|| format!("metric \"{}\" gives no speedup", run.metric))
}

fn method_family(m: &str) -> String {
    let m = m.to_ascii_lowercase();
    for f in ["eagle3", "eagle", "mtp", "ngram"] {
        if m.starts_with(f) {
            return f.into();
        }
    }
    if m.starts_with("draft:") {
        return "draft".into();
    }
    m
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn summary(method: &str, engine: &str, rows: &[&SpecRunRow]) -> SpecGroup {
    let mut abs: Vec<f64> = rows.iter().map(|r| r.error.abs()).collect();
    let mut signed: Vec<f64> = rows.iter().map(|r| r.error).collect();
    let right = rows.iter().filter(|r| r.gain_loss_right).count();
    SpecGroup {
        method: method.into(),
        engine: engine.into(),
        n: rows.len(),
        median_abs_error: median(&mut abs),
        bias: median(&mut signed),
        gain_loss_right: if rows.is_empty() {
            f64::NAN
        } else {
            right as f64 / rows.len() as f64
        },
    }
}

/// Predict one row.
fn evaluate_row(
    run: &SpecRun,
    map: &RunsMap,
    systems: &mut BTreeMap<String, System>,
) -> std::result::Result<SpecRunRow, String> {
    let (stat, figure) = acceptance_of(run)?;
    let measured = measured_speedup(run)?;
    let sys_name = map
        .systems
        .get(run.gpu.trim())
        .ok_or_else(|| format!("GPU \"{}\" has no system in {RUNS_LABEL}", run.gpu))?;
    let engine = map
        .engines
        .iter()
        .find(|(k, _)| run.engine.starts_with(k.as_str()))
        .map(|(_, v)| v.clone())
        .ok_or_else(|| format!("engine \"{}\" not in {RUNS_LABEL}", run.engine))?;
    let model_name = map
        .models
        .get(run.model_id.trim())
        .ok_or_else(|| format!("model \"{}\" not in {RUNS_LABEL}", run.model_id))?;
    let shape = shape_of(&run.spec_tokens)?;
    let c = leading_int(&run.concurrency)
        .filter(|_| {
            let l = run.concurrency.to_ascii_lowercase();
            !l.contains("per rank") && !l.contains("qps")
        })
        .ok_or_else(|| {
            format!(
                "concurrency \"{}\" is not a number of sequences",
                run.concurrency
            )
        })?;
    let tp_text = run.tp.to_ascii_lowercase();
    let tp = if tp_text.starts_with("not stated") {
        leading_int(&run.num_gpus)
    } else if tp_text.contains("dp") || (tp_text.contains("ep") && !tp_text.contains("ep 1")) {
        None
    } else {
        leading_int(&run.tp)
    }
    .ok_or_else(|| {
        format!(
            "layout \"{}\" on \"{}\" GPUs is not a tensor-parallel degree",
            run.tp, run.num_gpus
        )
    })?;
    let key = format!("{sys_name}|{engine}");
    if !systems.contains_key(&key) {
        let s =
            System::load_with_engine(sys_name, Some(&engine), &[]).map_err(|e| e.to_string())?;
        systems.insert(key.clone(), s);
    }
    let system = &systems[&key];
    let model = registry::load_model(model_name).map_err(|e| e.to_string())?;
    let par = Parallel::tp(tp);
    let s = Scenario::new(&model, system, par).map_err(|e| e.to_string())?;
    let family = method_family(&run.method);
    let draft = match family.as_str() {
        "eagle" | "eagle3" => Draft::Eagle,
        "mtp" => Draft::Mtp,
        "ngram" => Draft::Ngram { cpu_seconds: 0.0 },
        _ => {
            return Err(format!(
                "method \"{}\" not modelled from a runs file",
                run.method
            ))
        }
    };
    // An acceptance or a speedup no step of this shape can give is a wrong value in the
    // file: refused, naming the row, not skipped.
    let acc = match Acceptance::from_stat(stat, &[figure], Some(shape.k)) {
        Ok(a) => a,
        Err(e) => return Err(format!("{REFUSED}{e}")),
    };
    if measured > shape.k as f64 + 1.0 {
        return Err(format!(
            "{REFUSED}measured speedup {measured:.2} exceeds the {} tokens a step of {} drafts can emit",
            shape.k + 1,
            shape.k
        ));
    }
    let ctx = match (length(&run.input_len), length(&run.output_len)) {
        (Some(i), Some(o)) => i + o / 2.0,
        (Some(i), None) => i,
        _ => map.default_context as f64,
    };
    let r = specdec_shaped(&s, &draft, &acc, &[shape], &[c], ctx.round() as u32)
        .map_err(|e| e.to_string())?;
    let p = r
        .points
        .first()
        .ok_or_else(|| "no prediction at this concurrency".to_string())?;
    let plain_ms = r
        .baseline_tpot_ms
        .iter()
        .find(|(at, _)| *at == c)
        .map(|(_, ms)| *ms)
        .ok_or_else(|| "no plain step at this concurrency".to_string())?;
    Ok(SpecRunRow {
        line: run.line,
        method: family,
        engine,
        model: model.name.clone(),
        system: system.spec.name.clone(),
        parallel: par.to_string(),
        concurrency: c,
        k: shape.k,
        topk: shape.topk,
        verify_tokens: shape.verify_tokens,
        acceptance_stat: stat.name().into(),
        acceptance_value: figure,
        expected_tokens_per_step: p.expected_tokens_per_step,
        measured_speedup: measured,
        predicted_speedup: p.speedup,
        error: (p.speedup - measured) / measured,
        gain_loss_right: (p.speedup > 1.0) == (measured > 1.0),
        predicted_plain_step_ms: plain_ms,
        predicted_step_ms: p.step_ms,
        predicted_draft_ms: p.draft_ms,
        predicted_verify_ms: p.verify_ms,
        predicted_step_in_plain_steps: p.step_ms / plain_ms,
        measured_step_in_plain_steps: p.expected_tokens_per_step / measured,
    })
}

/// Evaluate every run of `runs` (read from `source`).
pub fn evaluate(runs: &[SpecRun], source: &str) -> Result<SpecValidation> {
    let map: RunsMap = registry::parse_toml(RUNS_TOML, RUNS_LABEL)?;
    let mut systems = BTreeMap::new();
    let mut rows = Vec::new();
    let mut not_evaluated = Vec::new();
    let mut without_acceptance = 0;
    for run in runs {
        match evaluate_row(run, &map, &mut systems) {
            Ok(r) => rows.push(r),
            Err(reason) if reason.starts_with(REFUSED) => {
                return Err(crate::error::Error::Measured {
                    file: source.to_string(),
                    line: Some(run.line),
                    message: reason[REFUSED.len()..].to_string(),
                })
            }
            Err(reason) => {
                if reason.starts_with("no acceptance figure") {
                    without_acceptance += 1;
                }
                not_evaluated.push(NotEvaluated {
                    line: run.line,
                    reason,
                })
            }
        }
    }
    let mut keys: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.method.clone(), r.engine.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    let groups = keys
        .iter()
        .map(|(m, e)| {
            let g: Vec<&SpecRunRow> = rows
                .iter()
                .filter(|r| &r.method == m && &r.engine == e)
                .collect();
            summary(m, e, &g)
        })
        .collect();
    let all: Vec<&SpecRunRow> = rows.iter().collect();
    Ok(SpecValidation {
        source: source.into(),
        total_rows: runs.len(),
        groups,
        overall: summary("all", "", &all),
        rows,
        without_acceptance,
        not_evaluated,
    })
}
