//! What-if questions: the same model on other systems and layouts side by side, and how
//! much each hardware or software parameter moves TPOT and the throughput plateau.
//!
//! A system variant is a built-in or a file with `--set`-style overrides in brackets, e.g.
//! `8x-rtx-pro-6000-pcie[system.interconnect=pcie-gen6-x16]`, so "the same GPUs with PCIe
//! Gen6" needs no new file. Elasticities are finite differences of the full model:
//! `(ΔTPOT / TPOT) / (Δx / x)` for a +10 % change of one parameter, the rest held.

use crate::calibration::Calibration;
use crate::cost::{Category, CostParams, Parallel};
use crate::economics::{tokens_per_output, Pricing};
use crate::error::{Error, Result};
use crate::predict::{predict_fitting, Scenario};
use crate::serve::{sweep, ServePoint, Workload};
use crate::spec::overrides::{parse_all, Override};
use crate::spec::{AllReduceImpl, ModelSpec, NcclAlgorithm, System};
use serde::Serialize;

/// Split a `--systems` list on commas outside brackets.
pub fn split_systems(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for ch in s.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    out.push(cur.trim().to_string());
                }
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Load `name[key=value;key=value]` with the global `--set` overrides, then its own, running
/// `engine` in place of the system's own where one is given (`--engine`). A `label=...`
/// entry in the brackets names the variant in reports.
pub fn load_variant(
    spec: &str,
    engine: Option<&str>,
    global: &[Override],
) -> Result<(String, System)> {
    let (name, label, own) = split_variant(spec)?;
    let mut all = global.to_vec();
    all.extend(own);
    Ok((label, System::load_with_engine(name, engine, &all)?))
}

/// The overrides a `name[key=value;...]` variant sets on its own (not the global `--set`
/// ones), as [`load_variant`] applies them: what a caller holds against a calibration.
pub fn variant_overrides(spec: &str) -> Result<Vec<Override>> {
    Ok(split_variant(spec)?.2)
}

/// A variant's system name, its label (the spec itself where it names none) and its own
/// overrides.
fn split_variant(spec: &str) -> Result<(&str, String, Vec<Override>)> {
    let (name, entries) = match spec.split_once('[') {
        Some((n, rest)) => {
            let inner = rest
                .strip_suffix(']')
                .ok_or_else(|| Error::Scenario(format!("system \"{spec}\": missing ']'")))?;
            (
                n.trim(),
                inner
                    .split(';')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect::<Vec<_>>(),
            )
        }
        None => (spec.trim(), Vec::new()),
    };
    let mut label: Option<String> = None;
    let mut sets = Vec::new();
    for e in entries {
        match e.strip_prefix("label=") {
            Some(l) => {
                let l = l.trim();
                if l.is_empty() {
                    return Err(Error::Usage(format!(
                        "system \"{spec}\": an empty label=; give the row a name, or drop it \
                         to be labelled by the system and its overrides"
                    )));
                }
                if let Some(first) = &label {
                    return Err(Error::Usage(format!(
                        "system \"{spec}\": two labels (label={first}, label={l}); give one"
                    )));
                }
                label = Some(l.to_string());
            }
            None => sets.push(e),
        }
    }
    let label = label.unwrap_or_else(|| spec.to_string());
    Ok((name, label, parse_all(&sets)?))
}

/// Every system of `--systems`, each as [`load_variant`] loads it, refusing a label two of
/// them share: two rows of one name cannot be told apart in a table, chart or JSON.
pub fn load_variants(
    specs: &[String],
    engine: Option<&str>,
    global: &[Override],
) -> Result<Vec<(String, System)>> {
    let mut seen = std::collections::BTreeSet::new();
    specs
        .iter()
        .map(|spec| {
            let (label, sys) = load_variant(spec, engine, global)?;
            if !seen.insert(label.clone()) {
                return Err(Error::Usage(format!(
                    "two systems are labelled \"{label}\": give each its own label="
                )));
            }
            Ok((label, sys))
        })
        .collect()
}

/// One row of a comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompareRow {
    pub system: String,
    pub parallel: String,
    pub gpus: u32,
    /// Parameter set of the row: `default`, or `calibrated` for the system a
    /// `--calibration` file was fitted on.
    pub provenance: &'static str,
    /// TPOT (decode step) at each requested concurrency, ms.
    pub tpot_ms: Vec<(u32, f64)>,
    /// 95 % interval of `tpot_ms` per concurrency, from the calibration (calibrated rows).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tpot_ci95_ms: Vec<(u32, [f64; 2])>,
    /// Throughput at each requested concurrency, tok/s.
    pub throughput_tok_s: Vec<(u32, f64)>,
    pub sol_tpot_ms: Vec<(u32, f64)>,
    /// Serving-sweep plateau, tok/s, and where it is reached (absent when the row cannot
    /// run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plateau_tok_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plateau_concurrency: Option<u32>,
    pub weights_per_gpu_gb: f64,
    pub max_kv_tokens: f64,
    pub fits: bool,
    /// US dollars per million output tokens at the plateau, where the system has a price.
    pub usd_per_million_tokens: Option<f64>,
    /// The serving point of highest throughput that meets the targets (`--tpot-target`,
    /// `--ttft-target`; the plateau's point without them); `None` when none meets them.
    pub at_target: Option<TargetPoint>,
    /// Why no point meets the targets, when none does.
    pub target_unmet: Option<String>,
    /// Cost and energy along the sweep, one point per concurrency (the plot's lines).
    pub curve: Vec<CurvePoint>,
    /// Largest category of the decode step at each concurrency.
    pub dominant: Vec<(u32, String)>,
    /// Concurrencies whose batch does not fit in memory at the context, with the reason:
    /// they have no TPOT, throughput or category.
    pub does_not_fit: Vec<(u32, String)>,
    /// Why the layout could not be evaluated, if it could not (`does not fit: …` when it
    /// runs out of memory at any concurrency); such a row has no performance numbers.
    pub error: Option<String>,
}

/// Latency targets a serving point must meet, ms.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Targets {
    pub tpot_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
}

impl Targets {
    /// The first target `p` misses, by name.
    fn missed(&self, p: &ServePoint) -> Option<&'static str> {
        if self.tpot_ms.is_some_and(|t| p.tpot_ms > t) {
            Some("TPOT target")
        } else if self.ttft_ms.is_some_and(|t| p.ttft_ms > t) {
            Some("TTFT target")
        } else {
            None
        }
    }
}

/// One serving point as a buyer reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetPoint {
    /// Concurrent requests of the point.
    pub concurrency: u32,
    pub tpot_ms: f64,
    pub ttft_ms: f64,
    /// Output tokens per second one user sees (1000 / TPOT).
    pub tok_s_per_user: f64,
    pub throughput_tok_s: f64,
    pub throughput_per_gpu_tok_s: f64,
    pub watts_per_gpu: Option<f64>,
    pub joules_per_token: Option<f64>,
    /// The deployment's US dollars per hour (`None`: the system has no price).
    pub usd_per_hour: Option<f64>,
    pub usd_per_million_output_tokens: Option<f64>,
    /// Per million tokens in and out (a request's input counted with its output).
    pub usd_per_million_total_tokens: Option<f64>,
    /// What stops a higher throughput: the target the next point misses, or what the
    /// sweep's plateau is limited by.
    pub limited_by: String,
}

/// Cost and energy at one concurrency of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    pub concurrency: u32,
    pub tok_s_per_user: f64,
    pub usd_per_million_output_tokens: Option<f64>,
    pub joules_per_token: Option<f64>,
}

/// A serving point priced: watts, joules and dollars at its throughput.
pub fn target_point(
    system: &System,
    gpus: u32,
    w: Workload,
    p: &ServePoint,
    limited_by: String,
) -> TargetPoint {
    let cost = Pricing::of(&system.spec).ok().flatten().and_then(|q| {
        q.point_cost(
            gpus,
            p.watts_per_gpu,
            p.throughput_tok_s,
            tokens_per_output(w.input_len, w.output_len),
        )
    });
    TargetPoint {
        concurrency: p.concurrency,
        tpot_ms: p.tpot_ms,
        ttft_ms: p.ttft_ms,
        tok_s_per_user: 1e3 / p.tpot_ms,
        throughput_tok_s: p.throughput_tok_s,
        throughput_per_gpu_tok_s: p.throughput_tok_s / gpus as f64,
        watts_per_gpu: p.watts_per_gpu,
        joules_per_token: p.joules_per_token,
        usd_per_hour: cost.map(|c| c.usd_per_hour),
        usd_per_million_output_tokens: cost.and_then(|c| c.usd_per_million_output_tokens),
        usd_per_million_total_tokens: cost.and_then(|c| c.usd_per_million_total_tokens),
        limited_by,
    }
}

/// `sw` with the concurrencies between a doubling that meets `targets` and the next that
/// misses one bisected down to one request, as `plan` refines its ladder: the most a
/// deployment serves within the targets lies anywhere in that gap, and the best point at the
/// target should not stop at the ladder's rung (it understated llama-3.1-70b-fp8 at tp8 on
/// the RTX box by 38 % in throughput, and overstated its $/Mtok as much). Without a target,
/// `sw` as it is.
fn refined_to_target(
    s: &Scenario,
    w: Workload,
    sw: &crate::serve::Sweep,
    targets: Targets,
) -> Result<crate::serve::Sweep> {
    let mut out = sw.clone();
    if targets.tpot_ms.is_none() && targets.ttft_ms.is_none() {
        return Ok(out);
    }
    for pair in sw.points.windows(2) {
        let (lo, hi) = (&pair[0], &pair[1]);
        if targets.missed(lo).is_some() || targets.missed(hi).is_none() {
            continue;
        }
        bisect_gap(
            (lo.concurrency, hi.concurrency),
            |c| Ok(sweep(s, &[c], w)?.points.into_iter().next()),
            |p| targets.missed(p).is_none(),
            &mut out.points,
        )?;
    }
    out.points.sort_by_key(|p| p.concurrency);
    Ok(out)
}

/// Bisects the gap between a concurrency that meets a target and a larger one that misses
/// it (`lo`, `hi`) down to one request: each midpoint priced by `at` (`None`: nothing to
/// price there, stop) and pushed to `out`, the half that holds the last point meeting the
/// target (`meets`) kept. `compare` and `plan` refine their doubling ladders with it.
pub(crate) fn bisect_gap<P>(
    (mut lo, mut hi): (u32, u32),
    mut at: impl FnMut(u32) -> Result<Option<P>>,
    meets: impl Fn(&P) -> bool,
    out: &mut Vec<P>,
) -> Result<()> {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let Some(p) = at(mid)? else {
            break;
        };
        if meets(&p) {
            lo = mid;
        } else {
            hi = mid;
        }
        out.push(p);
    }
    Ok(())
}

/// The point of highest throughput meeting `targets`, priced, or why none does.
pub fn best_at_target(
    system: &System,
    gpus: u32,
    w: Workload,
    sw: &crate::serve::Sweep,
    targets: Targets,
) -> std::result::Result<TargetPoint, String> {
    let best = sw
        .points
        .iter()
        .filter(|p| targets.missed(p).is_none())
        // Of points of equal throughput (a plateau held by a cap: the extra requests only
        // queue), the lowest concurrency, whose TTFT holds no queue.
        .max_by(|a, b| {
            a.throughput_tok_s
                .total_cmp(&b.throughput_tok_s)
                .then(b.concurrency.cmp(&a.concurrency))
        });
    let Some(best) = best else {
        let first = sw.points.first();
        return Err(match first {
            Some(p) => format!(
                "cannot meet the target: at concurrency {} TPOT is {:.2} ms and TTFT {:.1} ms",
                p.concurrency, p.tpot_ms, p.ttft_ms
            ),
            None => "no serving point".into(),
        });
    };
    // A point of more throughput that misses a target: that target is the limit.
    let limit = sw
        .points
        .iter()
        .filter(|p| p.throughput_tok_s > best.throughput_tok_s)
        .find_map(|p| targets.missed(p))
        .map(String::from)
        .unwrap_or_else(|| {
            sw.limited_by
                .first()
                .cloned()
                .unwrap_or_else(|| "plateau".into())
        });
    Ok(target_point(system, gpus, w, best, limit))
}

impl CompareRow {
    /// The value of `pairs` at concurrency `c`, if that concurrency has one.
    pub fn at<T>(pairs: &[(u32, T)], c: u32) -> Option<&T> {
        pairs.iter().find(|p| p.0 == c).map(|p| &p.1)
    }
}

/// The `compare` record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    pub context: u32,
    /// The concurrencies of the columns, as requested.
    pub concurrency: Vec<u32>,
    /// The latency targets `at_target` meets.
    pub targets: Targets,
    pub rows: Vec<CompareRow>,
}

fn dominant(b: &std::collections::BTreeMap<&'static str, f64>) -> String {
    b.iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, _)| k.to_string())
        .unwrap_or_default()
}

/// Evaluate one (system, layout) row.
#[allow(clippy::too_many_arguments)]
pub fn compare_row(
    model: &ModelSpec,
    label: &str,
    system: &System,
    par: Parallel,
    calibration: Option<&Calibration>,
    concurrency: &[u32],
    w: Workload,
    context: u32,
    targets: Targets,
) -> CompareRow {
    let mut row = CompareRow {
        system: label.to_string(),
        parallel: par.to_string(),
        gpus: par.gpus(),
        provenance: if calibration.is_some() {
            "calibrated"
        } else {
            "default"
        },
        tpot_ms: vec![],
        tpot_ci95_ms: vec![],
        throughput_tok_s: vec![],
        sol_tpot_ms: vec![],
        plateau_tok_s: None,
        plateau_concurrency: None,
        weights_per_gpu_gb: 0.0,
        max_kv_tokens: 0.0,
        fits: false,
        usd_per_million_tokens: None,
        at_target: None,
        target_unmet: None,
        curve: vec![],
        dominant: vec![],
        does_not_fit: vec![],
        error: None,
    };
    let mut run = || -> Result<()> {
        let s = Scenario::new(model, system, par)?;
        let s = match calibration {
            Some(c) => s.calibrated(c),
            None => s,
        };
        let mem = s.memory(1.0, context as f64);
        row.weights_per_gpu_gb = mem.weights_per_gpu_gb;
        row.max_kv_tokens = mem.max_kv_tokens;
        row.fits = mem.kv_budget_gb > 0.0;
        // Weights that leave no KV cache, or no room for one sequence: the row cannot run.
        crate::serve::fits(&s, 1.0, context as f64)?;
        for &c in concurrency {
            let p = match predict_fitting(&s, c, context) {
                Ok(p) => p,
                Err(e) => {
                    row.does_not_fit.push((c, e.to_string()));
                    continue;
                }
            };
            row.tpot_ms.push((c, p.tpot_ms));
            row.tpot_ci95_ms.extend(p.tpot_ci95_ms.map(|ci| (c, ci)));
            row.throughput_tok_s.push((c, p.throughput_tok_s));
            row.sol_tpot_ms.push((c, p.sol_tpot_ms));
            row.dominant.push((c, dominant(&p.breakdown_ms)));
        }
        let conc: Vec<u32> = (0..=12).map(|i| 1u32 << i).collect();
        let sw = sweep(&s, &conc, w)?;
        row.plateau_tok_s = Some(sw.plateau_tok_s);
        row.plateau_concurrency = Some(sw.plateau_concurrency);
        let gpus = par.gpus();
        if let Some(top) = sw
            .points
            .iter()
            .max_by(|a, b| a.throughput_tok_s.total_cmp(&b.throughput_tok_s))
        {
            row.usd_per_million_tokens =
                target_point(system, gpus, w, top, String::new()).usd_per_million_output_tokens;
        }
        row.curve = sw
            .points
            .iter()
            .map(|p| {
                let t = target_point(system, gpus, w, p, String::new());
                CurvePoint {
                    concurrency: p.concurrency,
                    tok_s_per_user: t.tok_s_per_user,
                    usd_per_million_output_tokens: t.usd_per_million_output_tokens,
                    joules_per_token: t.joules_per_token,
                }
            })
            .collect();
        let refined = refined_to_target(&s, w, &sw, targets)?;
        match best_at_target(system, gpus, w, &refined, targets) {
            Ok(t) => row.at_target = Some(t),
            Err(why) => row.target_unmet = Some(why),
        }
        Ok(())
    };
    if let Err(e) = run() {
        row.refuse(e.to_string());
    }
    row
}

impl CompareRow {
    /// A row that cannot run: its reason and no performance numbers.
    pub fn refuse(&mut self, why: String) {
        self.tpot_ms.clear();
        self.tpot_ci95_ms.clear();
        self.throughput_tok_s.clear();
        self.sol_tpot_ms.clear();
        self.dominant.clear();
        self.does_not_fit.clear();
        self.usd_per_million_tokens = None;
        self.at_target = None;
        self.target_unmet = None;
        self.plateau_tok_s = None;
        self.plateau_concurrency = None;
        self.curve.clear();
        self.error = Some(why);
    }
}

/// One system of the buyer's table (`compare --objective`), flat for CSV.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuyerRow {
    pub system: String,
    pub parallel: String,
    pub gpus: u32,
    pub concurrency: Option<u32>,
    pub tpot_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tok_s_per_user: Option<f64>,
    pub throughput_tok_s: Option<f64>,
    pub throughput_per_gpu_tok_s: Option<f64>,
    pub watts_per_gpu: Option<f64>,
    pub joules_per_token: Option<f64>,
    pub usd_per_hour: Option<f64>,
    pub usd_per_million_output_tokens: Option<f64>,
    pub usd_per_million_total_tokens: Option<f64>,
    pub limited_by: String,
    /// Why the system has no point at the targets (or cannot run at all).
    pub unmet: Option<String>,
}

/// The buyer's table: every system at the targets, ranked by the objective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuyerTable {
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    pub objective: crate::cli::Objective,
    pub targets: Targets,
    pub rows: Vec<BuyerRow>,
}

impl BuyerTable {
    pub fn objective_label(&self) -> &'static str {
        match self.objective {
            crate::cli::Objective::Cost => "$ per million output tokens",
            crate::cli::Objective::Energy => "joules per output token",
            crate::cli::Objective::Latency => "TPOT",
            crate::cli::Objective::Throughput => "output tokens/s per GPU (highest first)",
        }
    }
}

/// The comparison as a buyer reads it: each row at its best point meeting the targets,
/// ranked by `objective` (lowest first); rows with no such point, or no figure for the
/// objective (no price), last, in their order.
pub fn buyer_table(c: &Comparison, objective: crate::cli::Objective) -> BuyerTable {
    let mut rows: Vec<BuyerRow> = c
        .rows
        .iter()
        .map(|r| {
            let t = r.at_target.as_ref();
            BuyerRow {
                system: r.system.clone(),
                parallel: r.parallel.clone(),
                gpus: r.gpus,
                concurrency: t.map(|t| t.concurrency),
                tpot_ms: t.map(|t| t.tpot_ms),
                ttft_ms: t.map(|t| t.ttft_ms),
                tok_s_per_user: t.map(|t| t.tok_s_per_user),
                throughput_tok_s: t.map(|t| t.throughput_tok_s),
                throughput_per_gpu_tok_s: t.map(|t| t.throughput_per_gpu_tok_s),
                watts_per_gpu: t.and_then(|t| t.watts_per_gpu),
                joules_per_token: t.and_then(|t| t.joules_per_token),
                usd_per_hour: t.and_then(|t| t.usd_per_hour),
                usd_per_million_output_tokens: t.and_then(|t| t.usd_per_million_output_tokens),
                usd_per_million_total_tokens: t.and_then(|t| t.usd_per_million_total_tokens),
                limited_by: t.map(|t| t.limited_by.clone()).unwrap_or_default(),
                unmet: match (&r.error, &r.target_unmet) {
                    (Some(e), _) => Some(format!("cannot run: {e}")),
                    (None, Some(u)) => Some(u.clone()),
                    _ => None,
                },
            }
        })
        .collect();
    let key = |r: &BuyerRow| match objective {
        crate::cli::Objective::Cost => r.usd_per_million_output_tokens,
        crate::cli::Objective::Energy => r.joules_per_token,
        crate::cli::Objective::Latency => r.tpot_ms,
        crate::cli::Objective::Throughput => r.throughput_per_gpu_tok_s.map(|t| -t),
    };
    rows.sort_by(|a, b| match (key(a), key(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    BuyerTable {
        model: c.model.clone(),
        input_len: c.input_len,
        output_len: c.output_len,
        objective,
        targets: c.targets,
        rows,
    }
}

/// A parameter the sensitivity analysis moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    MemoryBandwidth,
    Flops,
    LinkBandwidth,
    LinkLatency,
    KernelGap,
    StepOverhead,
    MemoryEfficiency,
    GemmEfficiency,
}

impl Knob {
    pub const ALL: [Knob; 8] = [
        Knob::MemoryBandwidth,
        Knob::Flops,
        Knob::LinkBandwidth,
        Knob::LinkLatency,
        Knob::KernelGap,
        Knob::StepOverhead,
        Knob::MemoryEfficiency,
        Knob::GemmEfficiency,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Knob::MemoryBandwidth => "memory bandwidth",
            Knob::Flops => "tensor FLOPS",
            Knob::LinkBandwidth => "link bandwidth",
            Knob::LinkLatency => "link and collective latency",
            Knob::KernelGap => "per-kernel fixed cost",
            Knob::StepOverhead => "per-step fixed cost",
            Knob::MemoryEfficiency => "memory-bandwidth efficiency",
            Knob::GemmEfficiency => "GEMM and attention efficiency",
        }
    }

    /// Scale this parameter by `f` in a copy of the system and parameters. Efficiencies are
    /// capped at 1.
    pub fn apply(self, system: &System, params: &CostParams, f: f64) -> (System, CostParams) {
        let mut s = system.clone();
        let mut p = *params;
        match self {
            Knob::MemoryBandwidth => s.gpu.memory_bandwidth.0 *= f,
            Knob::Flops => {
                let d = &mut s.gpu.dense_peak;
                for x in [&mut d.bf16, &mut d.fp8, &mut d.fp4, &mut d.int8]
                    .into_iter()
                    .flatten()
                {
                    x.0 *= f;
                }
            }
            Knob::LinkBandwidth => {
                s.link.bandwidth_per_direction.0 *= f;
                s.link.p2p_bandwidth.0 *= f;
                if let Some(c) = s.link.cross_socket_bandwidth.as_mut() {
                    c.0 *= f;
                }
                // The box's measured rates keep their shares of the faster link, as
                // `--set interconnect.bandwidth` scales them.
                s.spec.paths = s.spec.paths.map(|p| p.scaled(f));
            }
            Knob::LinkLatency => {
                p.collective_latency_scale *= f;
                s.link.p2p_latency.0 *= f;
                if let Some(l) = s.link.staged_latency.as_mut() {
                    l.0 *= f;
                }
            }
            Knob::KernelGap => {
                p.kernel_gap *= f;
                p.kernel_launch *= f;
            }
            Knob::StepOverhead => p.step_overhead *= f,
            Knob::MemoryEfficiency => p.memory_efficiency = (p.memory_efficiency * f).min(1.0),
            Knob::GemmEfficiency => {
                for g in p.gemm_efficiency.values_mut() {
                    *g = (*g * f).min(1.0);
                }
                p.attention_efficiency = (p.attention_efficiency * f).min(1.0);
            }
        }
        (s, p)
    }

    /// Whether raising the parameter makes things faster (bandwidths, FLOPS, efficiencies)
    /// or slower (latencies, fixed costs).
    pub fn higher_is_faster(self) -> bool {
        !matches!(
            self,
            Knob::LinkLatency | Knob::KernelGap | Knob::StepOverhead
        )
    }
}

/// One parameter's effect.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sensitivity {
    pub knob: Knob,
    pub name: &'static str,
    /// d ln TPOT / d ln x at the design point.
    pub tpot_elasticity: f64,
    /// d ln plateau / d ln x.
    pub plateau_elasticity: f64,
    /// TPOT change for +10 % of the parameter, percent.
    pub tpot_change_pct_for_plus_10: f64,
    pub plateau_change_pct_for_plus_10: f64,
    /// With a target TPOT: the factor this parameter alone must be scaled by to reach it,
    /// or `None` when it cannot (the rest of the step is already slower than the target).
    /// With a target already met, the factor at which the parameter, moved the slow way,
    /// brings the TPOT up to the target (the slack), or `None` when no factor within ×1000
    /// (or ÷1000) does.
    pub factor_for_target: Option<f64>,
    /// TPOT when this parameter is taken to its limit (×1000 or ÷1000), ms: the floor it
    /// cannot go below.
    pub tpot_floor_ms: f64,
}

/// A discrete software change and what it does.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Alternative {
    pub change: String,
    pub tpot_ms: f64,
    pub tpot_change_pct: f64,
    pub plateau_tok_s: f64,
    pub plateau_change_pct: f64,
}

/// The `sensitivity` record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SensitivityReport {
    pub model: String,
    pub system: String,
    pub parallel: String,
    /// Concurrent requests, as `sweep` takes them.
    pub concurrency: u32,
    /// The request shape of the serving sweep the TPOT and plateau come from.
    pub input_len: u32,
    pub output_len: u32,
    /// The sweep's TPOT at `concurrency`, ms.
    pub tpot_ms: f64,
    pub plateau_tok_s: f64,
    pub target_tpot_ms: Option<f64>,
    /// Sorted by |TPOT elasticity|, largest first.
    pub parameters: Vec<Sensitivity>,
    pub alternatives: Vec<Alternative>,
}

/// TPOT (ms) at `c` concurrent requests and the sweep plateau, both from the serving sweep
/// (`c` means what it means to `sweep`: requests in flight, running as the client cap,
/// `max_num_seqs` and the KV cache allow).
pub fn tpot_and_plateau(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    p: CostParams,
    c: u32,
    w: Workload,
) -> Result<(f64, f64)> {
    let s = with_params(model, system, par, p);
    let t = tpot_at(&s, c, w)?;
    let conc: Vec<u32> = (0..=11).map(|i| 1u32 << i).collect();
    let pl = sweep(&s, &conc, w)?.plateau_tok_s;
    Ok((t, pl))
}

/// The scenario of `model` on `system` with the parameters `p`.
fn with_params<'a>(
    model: &'a ModelSpec,
    system: &'a System,
    par: Parallel,
    p: CostParams,
) -> Scenario<'a> {
    Scenario {
        model,
        system,
        parallel: par,
        params: p,
        calibration: None,
    }
}

/// The sweep's TPOT at `c` concurrent requests, ms.
fn tpot_at(s: &Scenario, c: u32, w: Workload) -> Result<f64> {
    sweep(s, &[c], w)?
        .points
        .first()
        .map(|p| p.tpot_ms)
        .ok_or_else(|| Error::Scenario("empty sweep".into()))
}

/// [`tpot_at`] with the parameters `p`, NaN where the scenario cannot be evaluated.
fn tpot_only(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    p: CostParams,
    c: u32,
    w: Workload,
) -> f64 {
    tpot_at(&with_params(model, system, par, p), c, w).unwrap_or(f64::NAN)
}

/// Elasticities of TPOT and plateau to every knob, and the inverse solve for a target.
#[allow(clippy::too_many_arguments)]
pub fn sensitivity(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    params: CostParams,
    c: u32,
    w: Workload,
    target_tpot_ms: Option<f64>,
) -> Result<SensitivityReport> {
    let (t0, p0) = tpot_and_plateau(model, system, par, params, c, w)?;
    let mut rows = Vec::new();
    for k in Knob::ALL {
        let (s1, q1) = k.apply(system, &params, 1.1);
        let (t1, p1) = tpot_and_plateau(model, &s1, par, q1, c, w)?;
        let el = (t1 / t0).ln() / 1.1f64.ln();
        let pel = (p1 / p0).ln() / 1.1f64.ln();
        let limit = if k.higher_is_faster() { 1000.0 } else { 1e-3 };
        let (sl, ql) = k.apply(system, &params, limit);
        let floor = tpot_only(model, &sl, par, ql, c, w);
        let factor = target_tpot_ms
            .and_then(|target| solve_factor(model, system, par, params, c, w, k, target, t0));
        rows.push(Sensitivity {
            knob: k,
            name: k.name(),
            tpot_elasticity: el,
            plateau_elasticity: pel,
            tpot_change_pct_for_plus_10: (t1 / t0 - 1.0) * 100.0,
            plateau_change_pct_for_plus_10: (p1 / p0 - 1.0) * 100.0,
            factor_for_target: factor,
            tpot_floor_ms: floor,
        });
    }
    rows.sort_by(|a, b| b.tpot_elasticity.abs().total_cmp(&a.tpot_elasticity.abs()));
    // Discrete software alternatives.
    let mut alternatives = Vec::new();
    let mut try_alt = |label: &str, f: &dyn Fn(&mut System, &mut CostParams)| -> Result<()> {
        let mut s = system.clone();
        let mut p = params;
        f(&mut s, &mut p);
        if s == *system && p == params {
            return Ok(());
        }
        let (t, pl) = tpot_and_plateau(model, &s, par, p, c, w)?;
        alternatives.push(Alternative {
            change: label.to_string(),
            tpot_ms: t,
            tpot_change_pct: (t / t0 - 1.0) * 100.0,
            plateau_tok_s: pl,
            plateau_change_pct: (pl / p0 - 1.0) * 100.0,
        });
        Ok(())
    };
    try_alt(
        "custom one-shot/two-shot all-reduce instead of NCCL",
        &|s, _| s.engine.allreduce = AllReduceImpl::Custom,
    )?;
    try_alt("NCCL tree algorithm", &|s, _| {
        s.engine.nccl_algorithm = NcclAlgorithm::Tree
    })?;
    try_alt("CUDA graphs off", &|s, _| s.engine.cuda_graphs = false)?;
    try_alt("CUDA graphs on", &|s, _| s.engine.cuda_graphs = true)?;
    try_alt("dequantization fused into every GEMM", &|s, _| {
        s.engine.unfused_dequant.clear()
    })?;
    Ok(SensitivityReport {
        model: model.name.clone(),
        system: system.spec.name.clone(),
        parallel: par.to_string(),
        concurrency: c,
        input_len: w.input_len,
        output_len: w.output_len,
        tpot_ms: t0,
        plateau_tok_s: p0,
        target_tpot_ms,
        parameters: rows,
        alternatives,
    })
}

/// Factor by which `k` alone must be scaled for TPOT to reach `target` (bisection on
/// log-factor over 10⁻³..10³), `None` when the limit cannot reach it.
#[allow(clippy::too_many_arguments)]
pub fn solve_factor(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    params: CostParams,
    c: u32,
    w: Workload,
    k: Knob,
    target: f64,
    t0: f64,
) -> Option<f64> {
    let t = |f: f64| {
        let (s, p) = k.apply(system, &params, f);
        tpot_only(model, &s, par, p, c, w)
    };
    if (t0 - target).abs() < 1e-12 {
        return Some(1.0);
    }
    // Direction: to go faster, raise "higher is faster" knobs, lower the others.
    let want_faster = target < t0;
    let up = want_faster == k.higher_is_faster();
    let limit = if up { 1e3 } else { 1e-3 };
    let t_lim = t(limit);
    if want_faster && t_lim > target || !want_faster && t_lim < target {
        return None;
    }
    // Walk s ∈ [0, 1] from factor 1 to the limit; TPOT moves monotonically toward t_lim.
    let factor = |s: f64| (s * limit.ln()).exp();
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        let tm = t(factor(mid));
        let reached = if want_faster {
            tm <= target
        } else {
            tm >= target
        };
        if reached {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(factor(hi))
}

/// Which categories dominate a breakdown, for reports.
pub fn largest(b: &crate::cost::Breakdown) -> &'static str {
    Category::ALL
        .iter()
        .max_by(|a, c| b.get(**a).total_cmp(&b.get(**c)))
        .map(|c| c.name())
        .unwrap_or("none")
}
