//! What-if questions: the same model on other systems and layouts side by side, and how
//! much each hardware or software parameter moves TPOT and the throughput plateau.
//!
//! A system variant is a built-in or a file with `--set`-style overrides in brackets, e.g.
//! `8x-rtx-pro-6000-pcie[system.interconnect=pcie-gen6-x16]`, so "the same GPUs with PCIe
//! Gen6" needs no new file. Elasticities are finite differences of the full model:
//! `(ΔTPOT / TPOT) / (Δx / x)` for a +10 % change of one parameter, the rest held.

use crate::calibration::Calibration;
use crate::cost::{Category, CostParams, Parallel};
use crate::error::{Error, Result};
use crate::predict::{predict, Scenario};
use crate::serve::{sweep, Workload};
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

/// Load `name[key=value;key=value]` with the global `--set` overrides, then its own. A
/// `label=...` entry in the brackets names the variant in reports.
pub fn load_variant(spec: &str, global: &[Override]) -> Result<(String, System)> {
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
    let mut label = spec.to_string();
    let mut sets = Vec::new();
    for e in entries {
        match e.strip_prefix("label=") {
            Some(l) => label = l.trim().to_string(),
            None => sets.push(e),
        }
    }
    let mut all = global.to_vec();
    all.extend(parse_all(&sets)?);
    Ok((label, System::load_with(name, &all)?))
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
    /// Serving-sweep plateau, tok/s, and where it is reached.
    pub plateau_tok_s: f64,
    pub plateau_concurrency: u32,
    pub weights_per_gpu_gb: f64,
    pub max_kv_tokens: f64,
    pub fits: bool,
    /// US dollars per million output tokens at the plateau, where the system has a price.
    pub usd_per_million_tokens: Option<f64>,
    /// Largest category of the decode step at the first and last concurrency.
    pub dominant: Vec<(u32, String)>,
    /// Why the layout could not be evaluated, if it could not.
    pub error: Option<String>,
}

/// The `compare` record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Comparison {
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    pub context: u32,
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
        plateau_tok_s: 0.0,
        plateau_concurrency: 0,
        weights_per_gpu_gb: 0.0,
        max_kv_tokens: 0.0,
        fits: false,
        usd_per_million_tokens: None,
        dominant: vec![],
        error: None,
    };
    let mut run = || -> Result<()> {
        let s = Scenario::new(model, system, par)?;
        let s = match calibration {
            Some(c) => s.calibrated(c),
            None => s,
        };
        for &c in concurrency {
            let p = predict(&s, c, context)?;
            row.tpot_ms.push((c, p.tpot_ms));
            row.tpot_ci95_ms.extend(p.tpot_ci95_ms.map(|ci| (c, ci)));
            row.throughput_tok_s.push((c, p.throughput_tok_s));
            row.sol_tpot_ms.push((c, p.sol_tpot_ms));
            row.dominant.push((c, dominant(&p.breakdown_ms)));
            row.weights_per_gpu_gb = p.memory.weights_per_gpu_gb;
            row.max_kv_tokens = p.memory.max_kv_tokens;
            row.fits = p.memory.weights_per_gpu_gb > 0.0 && p.memory.kv_budget_gb > 0.0;
        }
        let conc: Vec<u32> = (0..=12).map(|i| 1u32 << i).collect();
        let sw = sweep(&s, &conc, w)?;
        row.plateau_tok_s = sw.plateau_tok_s;
        row.plateau_concurrency = sw.plateau_concurrency;
        if let Some(price) = system.spec.price_per_gpu_hour_usd {
            let per_hour = price * par.gpus() as f64;
            row.usd_per_million_tokens = Some(per_hour / (sw.plateau_tok_s * 3600.0) * 1e6);
        }
        Ok(())
    };
    let result = run();
    if let Err(e) = result {
        row.error = Some(e.to_string());
    }
    row
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
            Knob::GemmEfficiency => "GEMM efficiency",
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
    pub concurrency: u32,
    pub context: u32,
    pub tpot_ms: f64,
    pub plateau_tok_s: f64,
    pub target_tpot_ms: Option<f64>,
    /// Sorted by |TPOT elasticity|, largest first.
    pub parameters: Vec<Sensitivity>,
    pub alternatives: Vec<Alternative>,
}

/// TPOT (ms) at `c` and the sweep plateau for a system and parameter set.
pub fn tpot_and_plateau(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    p: CostParams,
    c: u32,
    context: u32,
    w: Workload,
) -> Result<(f64, f64)> {
    let s = Scenario {
        model,
        system,
        parallel: par,
        params: p,
        calibration: None,
    };
    let t = predict(&s, c, context)?.tpot_ms;
    let conc: Vec<u32> = (0..=11).map(|i| 1u32 << i).collect();
    let pl = sweep(&s, &conc, w)?.plateau_tok_s;
    Ok((t, pl))
}

fn tpot_only(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    p: CostParams,
    c: u32,
    context: u32,
) -> f64 {
    crate::cost::Evaluator::new(model, system, par, p)
        .map(|e| e.step_time(&crate::cost::Pass::decode(c as f64, context as f64)) * 1e3)
        .unwrap_or(f64::NAN)
}

/// Elasticities of TPOT and plateau to every knob, and the inverse solve for a target.
#[allow(clippy::too_many_arguments)]
pub fn sensitivity(
    model: &ModelSpec,
    system: &System,
    par: Parallel,
    params: CostParams,
    c: u32,
    context: u32,
    w: Workload,
    target_tpot_ms: Option<f64>,
) -> Result<SensitivityReport> {
    let (t0, p0) = tpot_and_plateau(model, system, par, params, c, context, w)?;
    let mut rows = Vec::new();
    for k in Knob::ALL {
        let (s1, q1) = k.apply(system, &params, 1.1);
        let (t1, p1) = tpot_and_plateau(model, &s1, par, q1, c, context, w)?;
        let el = (t1 / t0).ln() / 1.1f64.ln();
        let pel = (p1 / p0).ln() / 1.1f64.ln();
        let limit = if k.higher_is_faster() { 1000.0 } else { 1e-3 };
        let (sl, ql) = k.apply(system, &params, limit);
        let floor = tpot_only(model, &sl, par, ql, c, context);
        let factor = target_tpot_ms
            .and_then(|target| solve_factor(model, system, par, params, c, context, k, target, t0));
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
        let (t, pl) = tpot_and_plateau(model, &s, par, p, c, context, w)?;
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
        &|s, _| s.spec.engine.allreduce = AllReduceImpl::Custom,
    )?;
    try_alt("NCCL tree algorithm", &|s, _| {
        s.spec.engine.nccl_algorithm = NcclAlgorithm::Tree
    })?;
    try_alt("CUDA graphs off", &|s, _| s.spec.engine.cuda_graphs = false)?;
    try_alt("CUDA graphs on", &|s, _| s.spec.engine.cuda_graphs = true)?;
    try_alt("dequantization fused into every GEMM", &|s, _| {
        s.spec.engine.unfused_dequant.clear()
    })?;
    Ok(SensitivityReport {
        model: model.name.clone(),
        system: system.spec.name.clone(),
        parallel: par.to_string(),
        concurrency: c,
        context,
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
    context: u32,
    k: Knob,
    target: f64,
    t0: f64,
) -> Option<f64> {
    let t = |f: f64| {
        let (s, p) = k.apply(system, &params, f);
        tpot_only(model, &s, par, p, c, context)
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
