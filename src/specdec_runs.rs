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
use crate::specdec::{specdec_shaped, Acceptance, AcceptanceStat, Draft, DraftShape, SpecPoint};
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
    /// Launch settings a row's harness makes.
    #[serde(default)]
    pub harness: Vec<HarnessRule>,
    /// Acceptance figures for rows whose source prints none, each with its own source.
    #[serde(default)]
    pub acceptance: Vec<SuppliedAcceptance>,
}

/// An acceptance figure for the rows of one source and method that print none, taken from
/// another source (named): such rows are evaluated and reported apart from the rows that
/// carry their own figure.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuppliedAcceptance {
    /// The rows' `source_url`, exactly.
    pub source_url: String,
    /// Method family (`eagle3`, `eagle`, `mtp`, `ngram`).
    pub method: String,
    /// The rows' `engine` text starts with this.
    pub engine: String,
    /// The statistic, as `--acceptance-stat` names it.
    pub stat: String,
    pub value: f64,
    /// Draft length the figure was measured at.
    pub k: u32,
    pub source: String,
}

/// What a benchmark harness sets when it starts the engine, for the rows whose `engine`
/// column names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessRule {
    /// Matched case-sensitively in the row's `engine` text.
    pub engine_contains: String,
    /// The harness starts the server with its cap on running sequences equal to the row's
    /// batch (SGLang's `--max-running-requests`), lifting any lower default the engine uses
    /// while it speculates.
    #[serde(default)]
    pub max_running_requests_is_batch: bool,
    pub source: String,
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
    /// Sequences running at once with speculation and without (the rest wait).
    pub running: u32,
    pub plain_running: u32,
    /// Draft tokens per step along the chain (tree depth for a tree).
    pub k: u32,
    /// Tree branching (1: a chain) and tokens the verify pass checks per sequence.
    pub topk: u32,
    pub verify_tokens: u32,
    pub acceptance_stat: String,
    pub acceptance_value: f64,
    /// Where the acceptance figure comes from: `row` (the run's own) or `runs.toml` (a
    /// figure `configs/specdec/runs.toml` supplies, with its source, for a source that
    /// prints none).
    pub acceptance_from: String,
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
    /// as the measurement implies it (`tokens per step × running / plain running / measured
    /// speedup`, with the row's acceptance). Where the two part, the step is mispriced, not
    /// the acceptance.
    pub predicted_step_in_plain_steps: f64,
    pub measured_step_in_plain_steps: f64,
}

/// A row without an acceptance figure: the tokens per step its measured speedup implies
/// under rooftop's step. Acceptance does not depend on the batch, so along one source's
/// batch sweep this should stay flat; where it drifts, the step's growth with the batch is
/// mispriced, whatever the true acceptance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImpliedRow {
    pub line: usize,
    pub source_url: String,
    pub method: String,
    pub engine: String,
    pub model: String,
    pub parallel: String,
    pub concurrency: u32,
    pub running: u32,
    pub plain_running: u32,
    pub k: u32,
    pub topk: u32,
    pub verify_tokens: u32,
    pub measured_speedup: f64,
    /// Tokens per step (bonus token counted) that make the predicted speedup the measured
    /// one.
    pub implied_tokens_per_step: f64,
    /// Whether that is a possible figure: 1 to k + 1.
    pub within_reach: bool,
    pub predicted_step_in_plain_steps: f64,
}

/// One source's batch sweep of one method and draft shape among the implied rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImpliedSeries {
    pub source_url: String,
    pub method: String,
    pub model: String,
    pub parallel: String,
    /// `k x topk/verify`.
    pub shape: String,
    /// The sweep's concurrencies and the tokens per step each implies, in order of C.
    pub concurrency: Vec<u32>,
    pub implied_tokens_per_step: Vec<f64>,
    /// The largest implied figure over the smallest (1: flat, the step's growth with C
    /// agrees with the measurement).
    pub spread: f64,
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
    /// Per method and engine, over the rows with their own acceptance figure.
    pub groups: Vec<SpecGroup>,
    pub overall: SpecGroup,
    /// The same over rows whose figure `configs/specdec/runs.toml` supplies (absent: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supplied_groups: Vec<SpecGroup>,
    pub rows: Vec<SpecRunRow>,
    /// Rows without an acceptance figure (acceptance is an input) and none supplied: not
    /// evaluated as predictions.
    pub without_acceptance: usize,
    /// Every row without its own figure that maps to a prediction (supplied or not): the
    /// tokens per step its measured speedup implies.
    pub implied: Vec<ImpliedRow>,
    pub implied_series: Vec<ImpliedSeries>,
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
        if tokens < 2 {
            return Err(format!(
                "draft settings \"{t}\": {tokens} draft token(s) verified; a speculative step verifies at least 2 (one draft and the bonus token)"
            ));
        }
        return Ok(DraftShape {
            k: steps,
            topk,
            verify_tokens: tokens,
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

/// The measured speedup of a row from its metric, or why there is none. A metric is read as
/// what its name says it is: a slowdown factor; a percentage gain; a ratio (a speedup,
/// improvement or `(x)` figure, against the baseline where the row gives one); a time per
/// token or per request (TPOT, ITL, latency, runtime, or a time unit: the speedup is
/// baseline / speculative); or a rate (tokens per second, throughput: speculative /
/// baseline). Anything else gives no speedup, rather than being taken for a rate.
fn measured_speedup(run: &SpecRun) -> std::result::Result<f64, String> {
    let m = run.metric.to_ascii_lowercase();
    let (b, s) = (run.baseline, run.spec);
    let any = |keys: &[&str]| keys.iter().any(|k| m.contains(k));
    let ratio = any(&["speedup", "speed-up", "improvement", "(x)"]);
    let time = any(&[
        "tpot", "itl", "latency", "runtime", "time per", "(ms)", "(s)", "(us)", "(µs)",
    ]);
    let rate = any(&["tok/s", "token/s", "tokens/s", "toks/s", "throughput"]);
    let v = match (b, s) {
        _ if m.contains("slowdown") => s.map(|s| 1.0 / s),
        _ if m.contains("(%)") => match (b, s) {
            (None, Some(s)) => Some(1.0 + s / 100.0),
            _ => None,
        },
        (Some(b), Some(s)) if ratio => Some(s / b),
        (None, Some(s)) if ratio => Some(s),
        (Some(b), Some(s)) if time => Some(b / s),
        (Some(b), Some(s)) if rate => Some(s / b),
        _ => None,
    };
    v.filter(|v| v.is_finite() && *v > 0.0).ok_or_else(|| {
        format!(
            "metric \"{}\" gives no speedup (rooftop reads a rate, a time, a ratio, a percentage or a slowdown, as its name says)",
            run.metric
        )
    })
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

/// A row mapped to what rooftop predicts it on: everything but its acceptance.
struct Mapped {
    family: String,
    engine: String,
    model: crate::spec::ModelSpec,
    system: System,
    par: Parallel,
    draft: Draft,
    shape: DraftShape,
    concurrency: u32,
    measured: f64,
    context: u32,
}

/// Map one row to its model, system (with its harness's launch settings), engine, layout,
/// draft shape, concurrency and measured speedup, or say why it cannot be.
fn map_row(
    run: &SpecRun,
    map: &RunsMap,
    systems: &mut BTreeMap<String, System>,
) -> std::result::Result<Mapped, String> {
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
    let mut system = systems[&key].clone();
    if map
        .harness
        .iter()
        .any(|h| h.max_running_requests_is_batch && run.engine.contains(&h.engine_contains))
    {
        system.engine.max_num_seqs = c;
        system.engine.max_num_seqs_when_speculating = None;
    }
    let model = registry::load_model(model_name).map_err(|e| e.to_string())?;
    let family = method_family(&run.method);
    let draft = match family.as_str() {
        "eagle" => Draft::Eagle,
        "eagle3" => Draft::Eagle3,
        "mtp" => Draft::Mtp,
        "ngram" => Draft::Ngram { cpu_seconds: 0.0 },
        _ => {
            return Err(format!(
                "method \"{}\" not modelled from a runs file",
                run.method
            ))
        }
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
    Ok(Mapped {
        family,
        engine,
        model,
        system,
        par: Parallel::tp(tp),
        draft,
        shape,
        concurrency: c,
        measured,
        context: ctx.round() as u32,
    })
}

/// One prediction of a mapped row at `acc`: its point and the plain step, ms.
fn predict(m: &Mapped, acc: &Acceptance) -> std::result::Result<(SpecPoint, f64), String> {
    let s = Scenario::new(&m.model, &m.system, m.par).map_err(|e| e.to_string())?;
    let c = m.concurrency;
    let r = specdec_shaped(&s, &m.draft, acc, &[m.shape], &[c], m.context)
        .map_err(|e| e.to_string())?;
    let p = r
        .points
        .into_iter()
        .next()
        .ok_or_else(|| "no prediction at this concurrency".to_string())?;
    let plain_ms = r
        .baseline_tpot_ms
        .iter()
        .find(|(at, _)| *at == c)
        .map(|(_, ms)| *ms)
        .ok_or_else(|| "no plain step at this concurrency".to_string())?;
    Ok((p, plain_ms))
}

/// What one speculative step costs in plain steps as a measured speedup implies it at the
/// point's tokens per step (both sides' running sequences counted).
fn measured_step_ratio(p: &SpecPoint, measured: f64) -> f64 {
    p.expected_tokens_per_step * p.running as f64 / p.plain_running as f64 / measured
}

/// The acceptance a row is evaluated at: its statistic and figure, the draft length the
/// figure was measured at (`None`: the row's own), and where it comes from.
struct Figure {
    stat: AcceptanceStat,
    value: f64,
    k: Option<u32>,
    from: &'static str,
}

/// A row's own acceptance figure, else the one `configs/specdec/runs.toml` supplies for its
/// source; `Err` says why there is none (or refuses the file).
fn figure_of(run: &SpecRun, map: &RunsMap) -> std::result::Result<Figure, String> {
    match acceptance_of(run) {
        Ok((stat, value)) => Ok(Figure {
            stat,
            value,
            k: None,
            from: "row",
        }),
        Err(why) => match supplied_acceptance(run, map, &method_family(&run.method))? {
            Some((stat, value, k)) => Ok(Figure {
                stat,
                value,
                k: Some(k),
                from: "runs.toml",
            }),
            None => Err(why),
        },
    }
}

/// Predict one mapped row at `f`.
fn evaluate_row(run: &SpecRun, m: &Mapped, f: &Figure) -> std::result::Result<SpecRunRow, String> {
    // An acceptance no step of this shape can give is a wrong value in the file: refused,
    // naming the row, not skipped.
    let acc = match Acceptance::from_stat(f.stat, &[f.value], Some(f.k.unwrap_or(m.shape.k))) {
        Ok(a) => a,
        Err(e) => return Err(format!("{REFUSED}{e}")),
    };
    let (p, plain_ms) = predict(m, &acc)?;
    let measured = m.measured;
    // A step emits at most the tokens it verifies.
    if p.expected_tokens_per_step > m.shape.verify_tokens as f64 + 1e-9 {
        return Err(format!(
            "{REFUSED}acceptance {} ({}) gives {:.2} tokens a step, more than the {} tokens a step of this shape verifies",
            f.value,
            f.stat.name(),
            p.expected_tokens_per_step,
            m.shape.verify_tokens
        ));
    }
    // At that acceptance the measured speedup would make a speculative step cheaper than a
    // plain one, which no verify of several tokens per sequence is: the figure and the
    // speedup do not describe one run.
    let ratio = measured_step_ratio(&p, measured);
    if ratio < 1.0 {
        return Err(format!(
            "measured speedup {measured:.2} above what {:.2} tokens a step allow (a speculative step of {ratio:.2} plain steps): the acceptance figure ({}) and the speedup are not of one run",
            p.expected_tokens_per_step * p.running as f64 / p.plain_running as f64,
            f.from
        ));
    }
    Ok(SpecRunRow {
        line: run.line,
        method: m.family.clone(),
        engine: m.engine.clone(),
        model: m.model.name.clone(),
        system: m.system.spec.name.clone(),
        parallel: m.par.to_string(),
        concurrency: m.concurrency,
        running: p.running,
        plain_running: p.plain_running,
        k: m.shape.k,
        topk: m.shape.topk,
        verify_tokens: m.shape.verify_tokens,
        acceptance_stat: f.stat.name().into(),
        acceptance_value: f.value,
        acceptance_from: f.from.into(),
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
        measured_step_in_plain_steps: ratio,
    })
}

/// The acceptance `configs/specdec/runs.toml` supplies for a row whose source prints none:
/// (statistic, figure, the draft length it was measured at).
fn supplied_acceptance(
    run: &SpecRun,
    map: &RunsMap,
    family: &str,
) -> std::result::Result<Option<(AcceptanceStat, f64, u32)>, String> {
    let Some(a) = map.acceptance.iter().find(|a| {
        a.source_url == run.source_url
            && a.method == family
            && run.engine.starts_with(a.engine.as_str())
    }) else {
        return Ok(None);
    };
    let stat = <AcceptanceStat as clap::ValueEnum>::from_str(&a.stat, true).map_err(|_| {
        format!(
            "{REFUSED}{RUNS_LABEL}: acceptance for {} ({}): statistic \"{}\" is not one of --acceptance-stat's names",
            a.source_url, a.method, a.stat
        )
    })?;
    Ok(Some((stat, a.value, a.k)))
}

/// The tokens per step a row's measured speedup implies under rooftop's step, where the
/// row gives no acceptance: solved as a fixed point, since the step itself depends a little
/// on how many tokens each step accepts (the draft's catch-up pass).
fn implied_row(run: &SpecRun, m: &Mapped) -> std::result::Result<ImpliedRow, String> {
    let k = m.shape.k;
    let most = k as f64 + 1.0;
    let mut e = (1.0 + most) / 2.0;
    let mut raw = e;
    let mut point = None;
    for _ in 0..40 {
        let acc = Acceptance::from_stat(AcceptanceStat::SglangAcceptLength, &[e], Some(k))
            .map_err(|x| x.to_string())?;
        let (p, plain_ms) = predict(m, &acc)?;
        raw = m.measured * p.step_ms / plain_ms * p.plain_running as f64 / p.running as f64;
        let next = raw.clamp(1.0, most);
        let done = (next - e).abs() < 1e-6;
        e = next;
        point = Some((p, plain_ms));
        if done {
            break;
        }
    }
    let (p, plain_ms) = point.ok_or_else(|| "no prediction at this concurrency".to_string())?;
    Ok(ImpliedRow {
        line: run.line,
        source_url: run.source_url.clone(),
        method: m.family.clone(),
        engine: m.engine.clone(),
        model: m.model.name.clone(),
        parallel: m.par.to_string(),
        concurrency: m.concurrency,
        running: p.running,
        plain_running: p.plain_running,
        k,
        topk: m.shape.topk,
        verify_tokens: m.shape.verify_tokens,
        measured_speedup: m.measured,
        implied_tokens_per_step: raw,
        within_reach: (1.0..=most).contains(&raw),
        predicted_step_in_plain_steps: p.step_ms / plain_ms,
    })
}

/// Per method and engine over `rows`.
fn groups_of(rows: &[&SpecRunRow]) -> Vec<SpecGroup> {
    let mut keys: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.method.clone(), r.engine.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    keys.iter()
        .map(|(m, e)| {
            let g: Vec<&SpecRunRow> = rows
                .iter()
                .copied()
                .filter(|r| &r.method == m && &r.engine == e)
                .collect();
            summary(m, e, &g)
        })
        .collect()
}

/// The batch sweeps among the implied rows (one source, method, model, layout and shape, at
/// two or more concurrencies).
fn series_of(implied: &[ImpliedRow]) -> Vec<ImpliedSeries> {
    let mut by: BTreeMap<(String, String, String, String, String), Vec<&ImpliedRow>> =
        BTreeMap::new();
    for r in implied.iter().filter(|r| r.within_reach) {
        let shape = format!("{}x{}/{}", r.k, r.topk, r.verify_tokens);
        by.entry((
            r.source_url.clone(),
            r.method.clone(),
            r.model.clone(),
            r.parallel.clone(),
            shape,
        ))
        .or_default()
        .push(r);
    }
    by.into_iter()
        .filter(|(_, v)| {
            let mut c: Vec<u32> = v.iter().map(|r| r.concurrency).collect();
            c.dedup();
            c.len() > 1
        })
        .map(|((source_url, method, model, parallel, shape), mut v)| {
            v.sort_by_key(|r| r.concurrency);
            let implied: Vec<f64> = v.iter().map(|r| r.implied_tokens_per_step).collect();
            ImpliedSeries {
                source_url,
                method,
                model,
                parallel,
                shape,
                concurrency: v.iter().map(|r| r.concurrency).collect(),
                spread: implied.iter().copied().fold(f64::MIN, f64::max)
                    / implied.iter().copied().fold(f64::MAX, f64::min),
                implied_tokens_per_step: implied,
            }
        })
        .collect()
}

/// Evaluate every run of `runs` (read from `source`).
pub fn evaluate(runs: &[SpecRun], source: &str) -> Result<SpecValidation> {
    let map: RunsMap = registry::parse_toml(RUNS_TOML, RUNS_LABEL)?;
    let mut systems = BTreeMap::new();
    let mut rows = Vec::new();
    let mut implied = Vec::new();
    let mut not_evaluated = Vec::new();
    let mut without_acceptance = 0;
    for run in runs {
        let mapped = map_row(run, &map, &mut systems);
        let figure = figure_of(run, &map);
        // A row without its own acceptance figure also gets the tokens per step its
        // measured speedup implies (where that prediction itself runs).
        let own = matches!(&figure, Ok(f) if f.from == "row");
        if let (false, Ok(m)) = (own, &mapped) {
            if let Ok(i) = implied_row(run, m) {
                implied.push(i);
            }
        }
        let outcome = match figure {
            Err(why) if why.starts_with(REFUSED) => Err(why),
            Err(why) => match mapped {
                Err(refused) if refused.starts_with(REFUSED) => Err(refused),
                _ => Err(why),
            },
            Ok(f) => mapped.and_then(|m| evaluate_row(run, &m, &f)),
        };
        match outcome {
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
    let own: Vec<&SpecRunRow> = rows.iter().filter(|r| r.acceptance_from == "row").collect();
    let supplied: Vec<&SpecRunRow> = rows.iter().filter(|r| r.acceptance_from != "row").collect();
    Ok(SpecValidation {
        source: source.into(),
        total_rows: runs.len(),
        groups: groups_of(&own),
        overall: summary("all", "", &own),
        supplied_groups: groups_of(&supplied),
        implied_series: series_of(&implied),
        rows,
        without_acceptance,
        implied,
        not_evaluated,
    })
}
