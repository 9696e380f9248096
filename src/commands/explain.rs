//! `rooftop explain --measured NAME`: why a measured throughput curve stops growing. Every
//! mechanism that could hold the plateau, the parameter value it would need to hold it at the
//! measured rate, that value against its prior and sources, ranked, and the one measurement
//! that tells the top two apart.
//!
//! The mechanisms are read twice: against the GPU loop with every efficiency at its prior
//! (what the hardware and the descriptions say before any fit), and against the GPU loop the
//! whole measurement calibrates. A mechanism the priors already allow does not lean on a fit;
//! one that only the calibrated loop allows does. Points read from the record's prose, not
//! from a measured output, are listed as such.

use crate::calibrate::{calibrate, ParamKind};
use crate::cli::ExplainArgs;
use crate::commands::calibrate::{assumptions, check_plausible, load_measured, scenario_for};
use crate::commands::load;
use crate::cost::CostParams;
use crate::error::{Error, Result};
use crate::export::{self, table, Format};
use crate::measured::{MeasuredSet, Quantity};
use crate::predict::Scenario;
use crate::serve::{sweep, ClientModel, Sweep, TpotDef, Workload};
use serde::Serialize;
use std::fmt::Write as _;

/// The whole explanation, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub engine: String,
    /// The flat rate, tok/s, and the lowest concurrency it is stated at.
    pub plateau_tok_s: f64,
    pub plateau_from_concurrency: u32,
    /// The measurement's throughput points, each marked measurement or prose.
    pub points: Vec<PlateauPoint>,
    /// The request lengths the GPU loop is run with (the record gives none).
    pub assumed_input_len: u32,
    pub assumed_output_len: u32,
    /// The mechanisms against the GPU loop at the priors, then at the calibrated parameters.
    pub bases: Vec<Basis>,
    /// What calibration chose to hold the curve flat, where it chose one.
    pub calibration_chose: Option<String>,
}

/// One throughput point of the measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PlateauPoint {
    pub concurrency: u32,
    pub tokens_per_second: f64,
    pub origin: String,
    /// `measurement` or `prose`.
    pub read_from: &'static str,
    /// The record's words, for a prose point.
    pub quote: Option<String>,
}

/// The mechanisms read against one GPU loop.
#[derive(Debug, Clone, Serialize)]
pub struct Basis {
    /// `priors` (every efficiency at its prior), `calibrated` (fitted to this measurement) or
    /// `given-calibration` (the `--calibration` file's parameters).
    pub basis: &'static str,
    /// The GPU loop alone (no client cap), tok/s at the plateau's concurrency and twice it.
    pub gpu_loop_tok_s: f64,
    pub gpu_loop_tok_s_at_double: f64,
    /// The most the loop delivers at any in-flight count up to 1,024.
    pub gpu_loop_max_tok_s: f64,
    pub mechanisms: Vec<Mechanism>,
    /// How to tell the two most plausible apart.
    pub separating_test: Option<String>,
}

/// One mechanism that could hold the plateau.
#[derive(Debug, Clone, Serialize)]
pub struct Mechanism {
    pub rank: usize,
    pub name: &'static str,
    /// The value it needs to hold the plateau, in `unit` (none where no value can).
    pub needed: Option<f64>,
    pub prior: f64,
    pub unit: &'static str,
    /// The prior's reading, for the reader.
    pub prior_note: String,
    /// |log10(needed / prior)|: how far the data pushes the prior (0 = the prior itself).
    pub distance: Option<f64>,
    /// `plausible` (within 2x of its prior), `possible` (within 10x), `implausible`, or
    /// `cannot hold it` (no value of it reproduces the plateau on this GPU loop: the loop
    /// never reaches the rate, or reaches it only past the first flat concurrency, or falls
    /// more than 10 % short there).
    pub plausibility: &'static str,
    /// Why it cannot, where it cannot.
    pub note: Option<String>,
    pub source: &'static str,
}

pub fn run(a: &ExplainArgs) -> Result<Vec<u8>> {
    let e = explanation(a)?;
    match a.format {
        Format::Json => export::json(&e),
        Format::Csv => csv(&e),
        Format::Text => Ok(text(&e).into_bytes()),
    }
}

/// Where a measured throughput curve stops growing: the first concurrency from which no
/// later point gains [`crate::serve::PLATEAU_THRESHOLD`] or more per doubling, and its
/// rate. A curve still growing at its last point, a single point (unless marked
/// `flat_beyond`, which reads as a second, flat one) or two rates at one concurrency show no
/// plateau to explain: refused with why, not explained as one.
fn plateau_of(points: &[(u32, f64)], files: &str) -> Result<(u32, f64)> {
    let refuse = |message: String| Error::Measured {
        file: files.to_string(),
        line: None,
        message,
    };
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    if pts.is_empty() {
        return Err(Error::Scenario(
            "no throughput point in the measurement: nothing to explain".into(),
        ));
    }
    if let Some(w) = pts
        .windows(2)
        .find(|w| w[0].0 == w[1].0 && w[0].1 != w[1].1)
    {
        return Err(refuse(format!(
            "two throughputs at C = {} ({:.0} and {:.0} tok/s): which the curve holds is not \
             known; keep one",
            w[0].0, w[0].1, w[1].1
        )));
    }
    pts.dedup();
    let flat_from = |i: usize| {
        let (c, t) = pts[i];
        pts[i + 1..].iter().all(|&(cj, tj)| {
            let doublings = (cj as f64 / c as f64).log2();
            doublings > 0.0 && (tj / t - 1.0) / doublings < crate::serve::PLATEAU_THRESHOLD
        })
    };
    match (0..pts.len().saturating_sub(1)).find(|&i| flat_from(i)) {
        Some(i) => Ok(pts[i]),
        None => {
            let (c, t) = pts[pts.len() - 1];
            let grows = match pts.len() {
                1 => format!("one point ({t:.0} tok/s at C = {c}) shows no plateau"),
                n => format!(
                    "the throughput still grows at the largest concurrency measured ({:.0} -> \
                     {t:.0} tok/s from C = {} to {c})",
                    pts[n - 2].1,
                    pts[n - 2].0
                ),
            };
            Err(refuse(format!(
                "{grows}: nothing says where it stops growing. Measure the next concurrency, or \
                 mark the point the curve stays at `flat_beyond`"
            )))
        }
    }
}

/// Builds the record.
pub fn explanation(a: &ExplainArgs) -> Result<Explanation> {
    let (args, m) = (&a.scenario, &a.measured);
    let (set, sources) = load_measured(m)?;
    // The model and system the files name, and no measurement no run can produce, as
    // calibrate reads them.
    let l = load(&scenario_for(args, &set, &sources)?)?;
    let s0 = l.scenario()?;
    check_plausible(&s0, &set, &assumptions(m)?)?;
    let (c0, plateau) = plateau_of(&set.throughputs(), &sources.join(", "))?;
    let (i, o) = (m.assume_input_len.max(1), m.assume_output_len.max(1));
    // The GPU side as the whole measurement calibrates it (single-stream TPOT, shares and
    // the curve), without the serving mechanism calibration chose: what each mechanism
    // needs is then read against the GPU loop the data supports, beside the priors' loop.
    let cal = calibrate(&s0, &set, assumptions(m)?, sources)?;
    // A calibration's GPU side: its parameters without the serving limit it may have fitted.
    let gpu_side = |mut p: CostParams| {
        p.inflight_cap = None;
        p.api_per_token = None;
        p
    };
    let fitted = gpu_side(cal.params(&CostParams::default_for(s0.system)));
    let priors = CostParams::default_for(s0.system);
    let ctx = Context {
        c0,
        plateau,
        input_len: i,
        output_len: o,
    };
    let mut bases = vec![
        basis("priors", &s0.with_params(priors), &l, &ctx)?,
        basis("calibrated", &s0.with_params(fitted), &l, &ctx)?,
    ];
    // A calibration the user gives is a third reading of the same curve, beside the fit
    // this measurement makes of itself: its GPU side too.
    if l.calibration.is_some() {
        bases.push(basis(
            "given-calibration",
            &s0.with_params(gpu_side(s0.params)),
            &l,
            &ctx,
        )?);
    }
    let calibration_chose = cal.serving_limit.as_ref().map(|limit| {
        let chosen = cal
            .parameters
            .iter()
            .find(|f| matches!(f.kind, ParamKind::InflightCap | ParamKind::ApiPerToken));
        format!(
            "{}{}",
            limit.chosen,
            chosen
                .map(|f| format!(
                    " = {:.0} [{:.0}, {:.0}] ({})",
                    f.value, f.ci95_low, f.ci95_high, f.name
                ))
                .unwrap_or_default()
        )
    });
    Ok(Explanation {
        model: l.model.name.clone(),
        system: l.system.spec.name.clone(),
        parallel: l.parallel.to_string(),
        engine: l.system.engine.name.clone(),
        plateau_tok_s: plateau,
        plateau_from_concurrency: c0,
        points: points(&set),
        assumed_input_len: i,
        assumed_output_len: o,
        bases,
        calibration_chose,
    })
}

/// The throughput points, marked measurement or prose.
fn points(set: &MeasuredSet) -> Vec<PlateauPoint> {
    set.observations
        .iter()
        .filter_map(|ob| match ob.quantity {
            Quantity::Throughput {
                concurrency,
                tokens_per_second,
                ..
            } => Some(PlateauPoint {
                concurrency,
                tokens_per_second,
                origin: ob.origin.label(),
                read_from: if ob.origin.prose.is_some() {
                    "prose"
                } else {
                    "measurement"
                },
                quote: ob.origin.prose.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// What every mechanism is read against.
struct Context {
    c0: u32,
    plateau: f64,
    input_len: u32,
    output_len: u32,
}

/// The GPU loop's throughput when `n` requests are in flight.
fn at(r: &Sweep, n: u32) -> f64 {
    r.points[(n as usize).clamp(1, r.points.len()) - 1].throughput_tok_s
}

/// The mechanisms read against the GPU loop of scenario `s`.
fn basis(
    name: &'static str,
    s: &Scenario,
    l: &crate::commands::Loaded,
    c: &Context,
) -> Result<Basis> {
    let w = Workload {
        input_len: c.input_len,
        output_len: c.output_len,
        tpot_def: TpotDef::Itl,
        client: ClientModel::IDEAL,
    };
    let conc: Vec<u32> = (1..=1024).collect();
    let r = sweep(s, &conc, w)?;
    let (c0, plateau) = (c.c0, c.plateau);
    let max = r
        .points
        .iter()
        .map(|p| p.throughput_tok_s)
        .fold(0.0, f64::max);
    // Requests in flight at which the GPU loop alone delivers the plateau.
    let n_needed = r
        .points
        .iter()
        .find(|p| p.throughput_tok_s >= plateau)
        .map(|p| p.running);
    let eng = &l.system.engine;
    let ratio = |a: f64, b: f64| (a / b).log10().abs();
    let mut mech = Vec::new();
    // A cap on requests in flight holds the curve flat at the plateau only if the loop
    // reaches the plateau by the first flat concurrency.
    let cap = |name, prior: f64, prior_note: String, source| {
        let (needed, note) = match n_needed {
            Some(n) if n <= c0 => (Some(n as f64), None),
            Some(n) => (
                Some(n as f64),
                Some(format!(
                    "the loop needs {n} requests in flight for {plateau:.0} tok/s, more than the {c0} the plateau is stated at ({:.0} tok/s there)",
                    at(&r, c0)
                )),
            ),
            None => (
                None,
                Some(format!(
                    "the loop never reaches {plateau:.0} tok/s (at most {max:.0}): no cap can hold it there"
                )),
            ),
        };
        Mechanism {
            rank: 0,
            name,
            needed,
            prior,
            unit: "requests",
            prior_note,
            distance: needed.map(|n| ratio(n, prior)),
            plausibility: "",
            note,
            source,
        }
    };
    mech.push(cap(
        "client connection cap",
        100.0,
        "100 (aiohttp's default connector)".into(),
        "aiohttp TCPConnector(limit=100), httpx max_connections=100; vLLM issue #14513 (engines.md) [V]",
    ));
    mech.push(cap(
        "max_num_seqs",
        eng.max_num_seqs as f64,
        format!("{} (the engine's default)", eng.max_num_seqs),
        "vLLM get_batch_defaults (hardware.md) [V]; a deployment may set it lower",
    ));
    let api = 1.0 / plateau;
    let per_token = |name, prior: f64, prior_note: String, source| Mechanism {
        rank: 0,
        name,
        needed: Some(api * 1e6),
        prior: prior * 1e6,
        unit: "us per token",
        prior_note,
        distance: Some(ratio(api, prior.max(1e-9))),
        plausibility: "",
        note: None,
        source,
    };
    mech.push(per_token(
        "API-server time per streamed token",
        eng.cpu.api_per_token.0,
        format!("{:.0} us", eng.cpu.api_per_token.0 * 1e6),
        "vLLM blog 2024-09-05: API server 33 % of execution time in v0.5.3 [V]; per-token figure a prior [U]",
    ));
    mech.push(per_token(
        "client CPU per received chunk",
        10e-6,
        "10 us (one Python process per SSE event)".into(),
        "engines.md: a single-process streaming client spends CPU per chunk [V]; the figure a prior [U]",
    ));
    // Engine CPU per sequence in series: r / (g(r) + r x) = plateau at 2 c0.
    let p2 = r.points[((2 * c0) as usize).clamp(1, r.points.len()) - 1].clone();
    let g = p2.tpot_itl_ms * 1e-3 - p2.running as f64 * eng.cpu.per_seq.0;
    let x = ((p2.running as f64 / plateau) - g) / p2.running as f64;
    let per_seq = eng.cpu.per_seq.0;
    mech.push(Mechanism {
        rank: 0,
        name: "engine CPU per running sequence (in series)",
        needed: (x > 0.0).then_some(x * 1e6),
        prior: per_seq * 1e6,
        unit: "us per sequence per step",
        prior_note: format!("{:.0} us", per_seq * 1e6),
        distance: (x > 0.0).then(|| ratio(x, per_seq.max(1e-9))),
        plausibility: "",
        note: (x <= 0.0).then(|| {
            format!(
                "the loop's own step at {} sequences already exceeds {:.0} tok/s's budget",
                p2.running, plateau
            )
        }),
        source: "vLLM v0.5.3 profile: scheduling 29 % of time [V]; per-sequence figure a prior [U]",
    });
    let mem = s.memory(1.0, (c.input_len + c.output_len) as f64);
    let len = mem.max_kv_tokens / c0 as f64;
    mech.push(Mechanism {
        rank: 0,
        name: "requests long enough to fill the KV cache",
        needed: Some(len),
        prior: (c.input_len + c.output_len) as f64,
        unit: "tokens per request",
        prior_note: format!(
            "{} tokens assumed (prompt {} + output {})",
            c.input_len + c.output_len,
            c.input_len,
            c.output_len
        ),
        distance: Some(ratio(len, (c.input_len + c.output_len) as f64)),
        plausibility: "",
        note: None,
        source: "the record gives no request lengths [V]; the macro-benchmark's single-stream runs use 32 output tokens",
    });
    // Every mechanism above caps or slows the loop: where the loop alone falls short of the
    // plateau at its first concurrency by more than the 10 % a prediction may miss by, none
    // of them can put that point at the plateau.
    let short = at(&r, c0) < 0.9 * plateau;
    if short {
        for m in mech
            .iter_mut()
            .filter(|m| m.name != "requests long enough to fill the KV cache")
        {
            m.note.get_or_insert_with(|| {
                format!(
                    "the loop alone gives {:.0} tok/s at C = {c0}, {:.0} % under the plateau: a cap or a CPU cost only lowers it",
                    at(&r, c0),
                    100.0 * (1.0 - at(&r, c0) / plateau)
                )
            });
        }
    }
    // The record gives no request lengths for its concurrency runs: longer outputs than the
    // single-stream runs' prefill fewer prompts per step, so the loop itself runs faster.
    // The shortest output at which it reaches the plateau at the first flat concurrency.
    let longer = [64u32, 128, 256, 512, 1024, 2048, 4096]
        .into_iter()
        .filter(|&len| len > c.output_len)
        .find_map(|len| {
            let w = Workload {
                output_len: len,
                ..w
            };
            let r = sweep(s, &[c0, 2 * c0], w).ok()?;
            (r.points[0].throughput_tok_s >= plateau).then(|| (len, r.points[1].throughput_tok_s))
        });
    mech.push(Mechanism {
        rank: 0,
        name: "outputs longer than assumed (fewer prefills per step)",
        needed: longer.map(|l| l.0 as f64),
        prior: c.output_len as f64,
        unit: "output tokens per request",
        prior_note: format!("{} tokens assumed", c.output_len),
        distance: longer.map(|l| ratio(l.0 as f64, c.output_len as f64)),
        plausibility: "",
        note: match longer {
            None => Some(format!(
                "even 4096-token outputs leave the loop under {plateau:.0} tok/s at C = {c0}"
            )),
            Some((_, at2)) if at2 > 1.05 * plateau => Some(format!(
                "with it the loop gives {at2:.0} tok/s at C = {}: a cap must still hold the curve flat there",
                2 * c0
            )),
            Some(_) => None,
        },
        source: "the record keeps no output of its concurrency runs (shared/measured/k25b6000bench1/README.md) [V]",
    });
    for m in &mut mech {
        let advisory = m
            .note
            .as_deref()
            .is_some_and(|n| n.contains("a cap must still"));
        m.plausibility = match (m.distance, &m.note) {
            (Some(d), Some(_)) if advisory && d < 0.3 => "plausible",
            (Some(d), Some(_)) if advisory && d < 1.0 => "possible",
            (Some(_), Some(_)) if advisory => "implausible",
            (_, Some(_)) | (None, _) => "cannot hold it",
            (Some(d), None) if d < 0.3 => "plausible",
            (Some(d), None) if d < 1.0 => "possible",
            _ => "implausible",
        };
    }
    let key = |m: &Mechanism| {
        (
            m.plausibility == "cannot hold it",
            m.distance.unwrap_or(f64::INFINITY),
        )
    };
    mech.sort_by(|a, b| {
        let (x, y) = (key(a), key(b));
        x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
    });
    for (k, m) in mech.iter_mut().enumerate() {
        m.rank = k + 1;
    }
    let holding: Vec<&Mechanism> = mech
        .iter()
        .filter(|m| m.plausibility != "cannot hold it")
        .collect();
    let separating_test = (holding.len() >= 2).then(|| {
        format!(
            "to tell {} from {}: {}",
            holding[0].name,
            holding[1].name,
            crate::calibrate::separating_test(holding[0].name, holding[1].name)
        )
    });
    Ok(Basis {
        basis: name,
        gpu_loop_tok_s: at(&r, c0),
        gpu_loop_tok_s_at_double: at(&r, 2 * c0),
        gpu_loop_max_tok_s: max,
        mechanisms: mech,
        separating_test,
    })
}

/// A value in a mechanism's unit, as the tables print it.
fn shown(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if unit == "requests" => format!("~{v:.0} requests"),
        Some(v) => format!("{v:.0} {unit}"),
        None => "-".into(),
    }
}

fn text(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} ({}), engine {}: {:.0} tok/s from C = {}, not improving beyond",
        e.model, e.system, e.parallel, e.engine, e.plateau_tok_s, e.plateau_from_concurrency
    );
    for p in &e.points {
        let _ = writeln!(
            out,
            "  C = {:<5} {:>8.0} tok/s  {} ({}){}",
            p.concurrency,
            p.tokens_per_second,
            p.read_from,
            p.origin,
            p.quote
                .as_deref()
                .map(|q| format!(": {q}"))
                .unwrap_or_default()
        );
    }
    if e.points.iter().any(|p| p.read_from == "prose") {
        let _ = writeln!(
            out,
            "  (prose: read from the record's words, not from a benchmark's output)"
        );
    }
    let _ = writeln!(
        out,
        "GPU loop run with prompt {} and output {} tokens (assumed), no client cap",
        e.assumed_input_len, e.assumed_output_len
    );
    if let Some(c) = &e.calibration_chose {
        let _ = writeln!(
            out,
            "calibration chose: {c} (`rooftop calibrate` shows every candidate's score)"
        );
    }
    for b in &e.bases {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "against the GPU loop at the {} parameters: {:.0} tok/s at C = {}, {:.0} at C = {}, at most {:.0} at any in-flight count",
            b.basis,
            b.gpu_loop_tok_s,
            e.plateau_from_concurrency,
            b.gpu_loop_tok_s_at_double,
            2 * e.plateau_from_concurrency,
            b.gpu_loop_max_tok_s
        );
        let rows: Vec<Vec<String>> = b
            .mechanisms
            .iter()
            .map(|m| {
                vec![
                    m.rank.to_string(),
                    m.name.into(),
                    shown(m.needed, m.unit),
                    m.prior_note.clone(),
                    match (m.plausibility, m.distance) {
                        ("implausible", Some(d)) => {
                            format!("implausible ({:.0}x the prior)", 10f64.powf(d))
                        }
                        (p, _) => p.to_string(),
                    },
                    m.note.clone().unwrap_or_else(|| m.source.into()),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "rank",
                "mechanism",
                "needed",
                "prior",
                "verdict",
                "why / source",
            ],
            &rows,
        ));
        if let Some(t) = &b.separating_test {
            let _ = writeln!(out, "{t}");
        }
    }
    out
}

/// One row per (basis, mechanism).
fn csv(e: &Explanation) -> Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Row<'a> {
        basis: &'a str,
        rank: usize,
        mechanism: &'a str,
        needed: Option<f64>,
        unit: &'a str,
        prior: f64,
        distance: Option<f64>,
        plausibility: &'a str,
        gpu_loop_tok_s: f64,
        plateau_tok_s: f64,
        note: &'a str,
        source: &'a str,
    }
    let rows: Vec<Row> = e
        .bases
        .iter()
        .flat_map(|b| {
            b.mechanisms.iter().map(move |m| Row {
                basis: b.basis,
                rank: m.rank,
                mechanism: m.name,
                needed: m.needed,
                unit: m.unit,
                prior: m.prior,
                distance: m.distance,
                plausibility: m.plausibility,
                gpu_loop_tok_s: b.gpu_loop_tok_s,
                plateau_tok_s: e.plateau_tok_s,
                note: m.note.as_deref().unwrap_or(""),
                source: m.source,
            })
        })
        .collect();
    export::csv(&export::Table::flat(rows))
}
