//! Calibration: fit the parameters the cost model exposes to measurements, with standard
//! errors, 95 % confidence intervals and residuals.
//!
//! An analytic model with datasheet numbers is a bound, not a prediction. Each measurement
//! (a TPOT under its harness's definition, a throughput, a TTFT, a profiler category share,
//! an all-reduce or GEMM time) becomes a residual `(predicted − measured) / σ`; each
//! parameter's datasheet prior becomes a residual `(θ − prior) / σ_prior`, which pulls the
//! fit toward the priors when points are few. The weighted least-squares problem is solved
//! by Levenberg–Marquardt on a finite-difference Jacobian (the model is piecewise linear in
//! the inverse efficiencies and fixed costs), with every parameter kept inside its physical
//! range. The covariance `(JᵀJ)⁻¹ · s²` gives standard errors; intervals use Student's t.
//! Fitted values live only in the calibration output, never in code.

use crate::cost::price::cost_all;
use crate::cost::Device;
use crate::cost::{collective, Category, CostParams, Evaluator, Pass, Provenance};
use crate::error::{Error, Result};
use crate::measured::{MeasuredSet, Observation, Quantity, TraceCategory};
use crate::predict::Scenario;
use crate::serve::{sweep, TpotDef, Workload};
use crate::spec::{FormatKind, WeightFormat};
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A parameter the calibration can move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    MemoryEfficiency,
    GemmEfficiency(FormatKind),
    AttentionEfficiency,
    LinkEfficiency,
    CollectiveLatencyScale,
    KernelGap,
    KernelLaunch,
    StepOverhead,
}

impl ParamKind {
    pub fn name(self) -> String {
        match self {
            ParamKind::MemoryEfficiency => "memory_efficiency".into(),
            ParamKind::GemmEfficiency(f) => format!("gemm_efficiency_{}", f.name()),
            ParamKind::AttentionEfficiency => "attention_efficiency".into(),
            ParamKind::LinkEfficiency => "link_efficiency".into(),
            ParamKind::CollectiveLatencyScale => "collective_latency_scale".into(),
            ParamKind::KernelGap => "kernel_gap_us".into(),
            ParamKind::KernelLaunch => "kernel_launch_us".into(),
            ParamKind::StepOverhead => "step_overhead_us".into(),
        }
    }

    /// Value in reporting units (µs for times).
    pub fn get(self, p: &CostParams) -> f64 {
        match self {
            ParamKind::MemoryEfficiency => p.memory_efficiency,
            ParamKind::GemmEfficiency(f) => p.gemm(f),
            ParamKind::AttentionEfficiency => p.attention_efficiency,
            ParamKind::LinkEfficiency => p.link_efficiency,
            ParamKind::CollectiveLatencyScale => p.collective_latency_scale,
            ParamKind::KernelGap => p.kernel_gap * 1e6,
            ParamKind::KernelLaunch => p.kernel_launch * 1e6,
            ParamKind::StepOverhead => p.step_overhead * 1e6,
        }
    }

    pub fn set(self, p: &mut CostParams, v: f64) {
        match self {
            ParamKind::MemoryEfficiency => p.memory_efficiency = v,
            ParamKind::GemmEfficiency(f) => p.set_gemm(f, v),
            ParamKind::AttentionEfficiency => p.attention_efficiency = v,
            ParamKind::LinkEfficiency => p.link_efficiency = v,
            ParamKind::CollectiveLatencyScale => p.collective_latency_scale = v,
            ParamKind::KernelGap => p.kernel_gap = v * 1e-6,
            ParamKind::KernelLaunch => p.kernel_launch = v * 1e-6,
            ParamKind::StepOverhead => p.step_overhead = v * 1e-6,
        }
    }

    /// Physical range.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            ParamKind::MemoryEfficiency => (0.2, 1.0),
            ParamKind::GemmEfficiency(_) | ParamKind::AttentionEfficiency => (0.05, 1.0),
            ParamKind::LinkEfficiency => (0.1, 1.0),
            ParamKind::CollectiveLatencyScale => (0.1, 50.0),
            ParamKind::KernelGap => (0.0, 50.0),
            ParamKind::KernelLaunch => (0.0, 100.0),
            ParamKind::StepOverhead => (0.0, 50_000.0),
        }
    }

    /// Width of the prior: how far from the datasheet/engine prior the fit may move before
    /// the prior pushes back as hard as one measurement σ. Deliberately wide: priors only
    /// decide what the data cannot.
    pub fn prior_sigma(self, prior: f64) -> f64 {
        match self {
            ParamKind::MemoryEfficiency | ParamKind::LinkEfficiency => 0.3,
            ParamKind::GemmEfficiency(_) | ParamKind::AttentionEfficiency => 0.3,
            ParamKind::CollectiveLatencyScale => 3.0,
            ParamKind::KernelGap | ParamKind::KernelLaunch => prior.max(1.0) * 2.0,
            ParamKind::StepOverhead => prior.max(100.0) * 3.0,
        }
    }
}

/// What the measurements do not say, stated so the user sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Assumptions {
    /// Prompt tokens where a measurement does not give them.
    pub input_len: u32,
    /// Output tokens where a measurement does not give them.
    pub output_len: u32,
    /// The client that measured (`--client`; an ideal closed loop when not given).
    #[serde(skip)]
    pub client: crate::serve::ClientModel,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            input_len: 32,
            output_len: 32,
            client: crate::serve::ClientModel::IDEAL,
        }
    }
}

/// The breakdown categories a profiler category covers.
pub fn trace_category(c: TraceCategory) -> &'static [Category] {
    match c {
        TraceCategory::Allreduce => &[Category::Allreduce],
        TraceCategory::Moe => &[Category::Moe],
        TraceCategory::Attention => &[Category::Attention],
        TraceCategory::Gemm => &[Category::Gemm],
        TraceCategory::Dequant => &[Category::Dequant],
        TraceCategory::Other => &[Category::Other, Category::Alltoall, Category::Pipeline],
    }
}

/// Share of a step's kernel time (fixed costs excluded, as a profiler counts) in a
/// profiler category.
pub fn category_share(b: &crate::cost::Breakdown, c: TraceCategory) -> f64 {
    let part: f64 = trace_category(c).iter().map(|x| b.get(*x)).sum();
    part / b.kernel_time()
}

/// The model's value for one observation (same units as the measurement: seconds, tok/s or
/// a fraction) under parameters `p`.
pub fn predict_observation(
    s: &Scenario,
    p: &CostParams,
    o: &Observation,
    a: &Assumptions,
) -> Result<f64> {
    let sc = Scenario {
        params: *p,
        ..s.clone()
    };
    let serve_point = |c: u32,
                       i: Option<u32>,
                       out: Option<u32>,
                       def: TpotDef|
     -> Result<crate::serve::ServePoint> {
        let w = Workload {
            input_len: i.unwrap_or(a.input_len),
            output_len: out.unwrap_or(a.output_len),
            tpot_def: def,
            client: a.client,
        };
        let r = sweep(&sc, &[c.max(1)], w)?;
        r.points
            .into_iter()
            .next()
            .ok_or_else(|| Error::Scenario("empty sweep".into()))
    };
    Ok(match &o.quantity {
        Quantity::Tpot {
            concurrency,
            input_len,
            output_len,
            definition,
            ..
        } => serve_point(*concurrency, *input_len, Some(*output_len), *definition)?.tpot_ms / 1e3,
        Quantity::Ttft {
            concurrency,
            input_len,
            ..
        } => serve_point(*concurrency, *input_len, None, TpotDef::Itl)?.ttft_ms / 1e3,
        Quantity::Throughput {
            concurrency,
            input_len,
            output_len,
            ..
        } => serve_point(*concurrency, *input_len, *output_len, TpotDef::Itl)?.throughput_tok_s,
        Quantity::CategoryShare {
            concurrency,
            category,
            ..
        } => {
            let ev = Evaluator::new(sc.model, sc.system, sc.parallel, *p)?;
            let ctx = a.input_len as f64 + a.output_len as f64 / 2.0;
            let b = ev
                .evaluate(&Pass::decode(*concurrency as f64, ctx))
                .breakdown;
            let part: f64 = trace_category(*category).iter().map(|c| b.get(*c)).sum();
            part / b.kernel_time()
        }
        Quantity::AllReduce { bytes, gpus, .. } => {
            collective::allreduce(sc.system, *bytes, *gpus, p).time()
        }
        Quantity::Gemm { m, n, k, dtype, .. } => {
            let d = if dtype == "int4" {
                "int4-g32"
            } else {
                dtype.as_str()
            };
            let fmt: WeightFormat = d
                .parse()
                .map_err(|e: String| Error::Scenario(format!("{} (at {})", e, o.origin.file)))?;
            let ops = crate::ops::gemm_ops(
                &sc.system.engine.unfused_dequant,
                *m as f64,
                *n as f64,
                *k as f64,
                fmt,
            );
            cost_all(&ops, &Device::new(sc.system, *p)?)
                .iter()
                .map(|x| x.time)
                .sum()
        }
    })
}

/// The measured value and its σ (relative 3 % for serving times and rates, 2 points for a
/// share, 5 % for micro-benchmarks).
pub fn measured_value(o: &Observation) -> (f64, f64) {
    match &o.quantity {
        Quantity::Tpot { seconds, .. } | Quantity::Ttft { seconds, .. } => {
            (*seconds, 0.03 * seconds)
        }
        Quantity::Throughput {
            tokens_per_second, ..
        } => (*tokens_per_second, 0.03 * tokens_per_second),
        Quantity::CategoryShare { share, .. } => (*share, 0.02),
        Quantity::AllReduce { seconds, .. } | Quantity::Gemm { seconds, .. } => {
            (*seconds, 0.05 * seconds)
        }
    }
}

/// A short description of an observation for reports.
pub fn describe(o: &Observation) -> String {
    match &o.quantity {
        Quantity::Tpot {
            concurrency,
            output_len,
            definition,
            ..
        } => format!("TPOT ({:?}) C={concurrency} out={output_len}", definition).to_lowercase(),
        Quantity::Ttft { concurrency, .. } => format!("TTFT C={concurrency}"),
        Quantity::Throughput { concurrency, .. } => format!("throughput C={concurrency}"),
        Quantity::CategoryShare {
            concurrency,
            category,
            ..
        } => format!("{} share C={concurrency}", category.name()),
        Quantity::AllReduce { bytes, gpus, .. } => format!("all-reduce {} B x{gpus}", bytes),
        Quantity::Gemm { m, n, k, dtype, .. } => format!("gemm {m}x{n}x{k} {dtype}"),
    }
}

/// Units and scale for reports: (value in report units, unit).
pub fn display_value(o: &Observation, v: f64) -> (f64, &'static str) {
    match &o.quantity {
        Quantity::Tpot { .. } | Quantity::Ttft { .. } => (v * 1e3, "ms"),
        Quantity::Throughput { .. } => (v, "tok/s"),
        Quantity::CategoryShare { .. } => (v * 100.0, "%"),
        Quantity::AllReduce { .. } | Quantity::Gemm { .. } => (v * 1e6, "us"),
    }
}

/// One fitted parameter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FitParam {
    pub name: String,
    pub kind: ParamKind,
    pub value: f64,
    pub prior: f64,
    pub stderr: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub lower_bound: f64,
    pub upper_bound: f64,
    /// The data moved it (its column of the Jacobian is not negligible); otherwise it stays
    /// at its prior and its interval is the prior's.
    pub informed_by_data: bool,
    /// At a bound of its physical range.
    pub at_bound: bool,
}

/// One measured point and how the fit does on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Residual {
    pub point: String,
    pub origin: String,
    pub unit: String,
    pub measured: f64,
    pub default: f64,
    pub calibrated: f64,
    /// (calibrated − measured) / measured (for shares: difference in points / 100).
    pub error: f64,
    /// Leave-one-out: the prediction of this point from a fit without it, when run.
    pub loo_prediction: Option<f64>,
}

/// The calibration record, written as TOML and read back by `--calibration`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Calibration {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub sources: Vec<String>,
    pub assumptions: Assumptions,
    pub parameters: Vec<FitParam>,
    /// Covariance of the parameters, in the order of `parameters` (reporting units).
    pub covariance: Vec<Vec<f64>>,
    pub residuals: Vec<Residual>,
    /// Measurements minus informed parameters (negative: fewer points than parameters, the
    /// priors decide the rest).
    pub degrees_of_freedom: i64,
    /// Root-mean-square relative error of the calibrated model over the points.
    pub rms_error: f64,
    /// Root-mean-square leave-one-out relative error, when there are enough points (≥ 4).
    pub loo_rms_error: Option<f64>,
}

impl Calibration {
    /// The fitted parameters applied over `base`.
    pub fn params(&self, base: &CostParams) -> CostParams {
        let mut p = *base;
        for f in &self.parameters {
            f.kind.set(&mut p, f.value);
        }
        p.provenance = Provenance::Calibrated;
        p
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!("# rooftop calibration: fitted parameters with 95 % intervals. Written by `rooftop calibrate`;\n# read by --calibration. Fitted values live here, never in the tool's code.\n{body}")
    }

    pub fn load(path: &str) -> Result<Calibration> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        let c: Calibration = crate::spec::registry::parse_toml(&text, path)?;
        if c.covariance.len() != c.parameters.len()
            || c.covariance.iter().any(|r| r.len() != c.parameters.len())
            || c.covariance.iter().flatten().any(|x| !x.is_finite())
        {
            return Err(Error::Invalid {
                file: path.into(),
                line: crate::error::line_of_field(&text, "covariance"),
                field: "covariance".into(),
                expected: "a square matrix of finite numbers with one row per parameter".into(),
            });
        }
        // A covariance a fit can produce: each standard error within its parameter's physical
        // range, each correlation within ±1. Anything larger is no information, and would
        // overflow the prediction intervals.
        for (i, f) in c.parameters.iter().enumerate() {
            let (lo, hi) = f.kind.bounds();
            let var = |j: usize| c.covariance[j][j];
            let ok = var(i) >= 0.0
                && var(i).sqrt() <= hi - lo
                && (0..c.parameters.len()).all(|j| {
                    c.covariance[i][j].abs()
                        <= (var(i) * var(j).max(0.0)).sqrt() * (1.0 + 1e-6) + 1e-300
                });
            if !ok {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: crate::error::line_of_field(&text, "covariance"),
                    field: format!("covariance (row {}, {})", i + 1, f.name),
                    expected: format!(
                        "a variance from 0 to ({} − {})² and correlations within ±1",
                        hi, lo
                    ),
                });
            }
        }
        for f in &c.parameters {
            // Within the file's bounds and the parameter's physical range: a hand-edited
            // bound cannot let an efficiency reach 0 (every time infinite).
            let (lo, hi) = f.kind.bounds();
            let (lo, hi) = (f.lower_bound.max(lo), f.upper_bound.min(hi));
            if !(f.value.is_finite() && f.value >= lo && f.value <= hi) {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: crate::error::line_of_field(&text, "name"),
                    field: format!("parameters.{}", f.name),
                    expected: format!("a value in [{lo}, {hi}]"),
                });
            }
        }
        Ok(c)
    }

    /// 95 % interval of a prediction `f(params)` by the delta method on the covariance.
    pub fn interval<F: Fn(&CostParams) -> f64>(&self, base: &CostParams, f: F) -> (f64, f64) {
        let p0 = self.params(base);
        let y0 = f(&p0);
        let n = self.parameters.len();
        let mut g = vec![0.0; n];
        for (j, fp) in self.parameters.iter().enumerate() {
            let h = (fp.value.abs() * 1e-3).max(1e-6);
            let mut p = p0;
            let v = (fp.value + h).min(fp.upper_bound);
            let v = if v == fp.value { fp.value - h } else { v };
            fp.kind.set(&mut p, v);
            g[j] = (f(&p) - y0) / (v - fp.value);
        }
        let mut var = 0.0;
        for i in 0..n {
            for j in 0..n {
                var += g[i] * self.covariance[i][j] * g[j];
            }
        }
        let half = 1.96 * var.max(0.0).sqrt();
        (y0 - half, y0 + half)
    }
}

/// Fill a sweep's 95 % intervals (TPOT and throughput per point) from a calibration's
/// covariance; `s` is the scenario the sweep was run on, with any parameters.
pub fn sweep_intervals(c: &Calibration, s: &Scenario, w: Workload, sw: &mut crate::serve::Sweep) {
    let base = CostParams::default_for(s.system);
    for p in sw.points.iter_mut() {
        let at = |q: &CostParams| {
            let sc = Scenario {
                params: *q,
                ..s.clone()
            };
            sweep(&sc, &[p.concurrency], w)
                .ok()
                .and_then(|x| x.points.into_iter().next())
        };
        let (lo, hi) = c.interval(&base, |q| at(q).map(|x| x.tpot_ms).unwrap_or(f64::NAN));
        p.tpot_ci95_ms = Some([lo, hi]);
        let (lo, hi) = c.interval(&base, |q| {
            at(q).map(|x| x.throughput_tok_s).unwrap_or(f64::NAN)
        });
        p.throughput_ci95_tok_s = Some([lo, hi]);
    }
}

/// Parameters worth fitting for this scenario: memory, the GEMM formats the model uses,
/// attention, link, collective latency, fixed costs.
fn candidate_params(s: &Scenario) -> Vec<ParamKind> {
    let q = &s.model.quantization;
    let mut formats: Vec<FormatKind> = [
        q.attention(),
        q.dense_mlp(),
        q.shared_experts(),
        q.routed_experts(),
        q.lm_head(),
        q.router(),
    ]
    .iter()
    .map(|f| f.kind)
    .collect();
    formats.sort();
    formats.dedup();
    let mut v = vec![ParamKind::MemoryEfficiency];
    v.extend(formats.into_iter().map(ParamKind::GemmEfficiency));
    v.push(ParamKind::AttentionEfficiency);
    if s.parallel.gpus() > 1 {
        v.push(ParamKind::LinkEfficiency);
        v.push(ParamKind::CollectiveLatencyScale);
    }
    v.push(if s.system.engine.cuda_graphs {
        ParamKind::KernelGap
    } else {
        ParamKind::KernelLaunch
    });
    v.push(ParamKind::StepOverhead);
    v
}

struct Problem<'s, 'a> {
    s: &'s Scenario<'a>,
    kinds: Vec<ParamKind>,
    priors: Vec<f64>,
    obs: Vec<Observation>,
    a: Assumptions,
    base: CostParams,
}

impl Problem<'_, '_> {
    fn params_of(&self, x: &[f64]) -> CostParams {
        let mut p = self.base;
        for (k, v) in self.kinds.iter().zip(x) {
            k.set(&mut p, *v);
        }
        p
    }

    /// Weighted residuals: measurements first, then priors.
    fn residuals(&self, x: &[f64]) -> Result<DVector<f64>> {
        let p = self.params_of(x);
        let mut r = Vec::with_capacity(self.obs.len() + x.len());
        for o in &self.obs {
            let (m, sigma) = measured_value(o);
            r.push((predict_observation(self.s, &p, o, &self.a)? - m) / sigma);
        }
        for (j, k) in self.kinds.iter().enumerate() {
            r.push((x[j] - self.priors[j]) / k.prior_sigma(self.priors[j]));
        }
        Ok(DVector::from_vec(r))
    }

    fn jacobian(&self, x: &[f64], r0: &DVector<f64>) -> Result<DMatrix<f64>> {
        let mut j = DMatrix::zeros(r0.len(), x.len());
        for c in 0..x.len() {
            let (lo, hi) = self.kinds[c].bounds();
            let h = (x[c].abs() * 1e-4).max(1e-7);
            let mut xp = x.to_vec();
            let step = if x[c] + h <= hi { h } else { -h };
            xp[c] = (x[c] + step).clamp(lo, hi);
            let r1 = self.residuals(&xp)?;
            j.set_column(c, &((r1 - r0) / step));
        }
        Ok(j)
    }

    /// Levenberg–Marquardt, projected onto the bounds.
    fn solve(&self, x0: Vec<f64>) -> Result<(Vec<f64>, DMatrix<f64>, DVector<f64>)> {
        let mut x = x0;
        let mut r = self.residuals(&x)?;
        let mut cost = r.norm_squared();
        let mut lambda = 1e-3;
        for _ in 0..100 {
            let j = self.jacobian(&x, &r)?;
            let jtj = j.transpose() * &j;
            let g = j.transpose() * &r;
            let mut improved = false;
            for _ in 0..12 {
                let mut a = jtj.clone();
                for d in 0..a.nrows() {
                    a[(d, d)] += lambda * jtj[(d, d)].max(1e-12);
                }
                let Some(delta) = a.lu().solve(&(-&g)) else {
                    lambda *= 10.0;
                    continue;
                };
                let xn: Vec<f64> = x
                    .iter()
                    .zip(delta.iter())
                    .zip(&self.kinds)
                    .map(|((v, d), k)| (v + d).clamp(k.bounds().0, k.bounds().1))
                    .collect();
                let rn = self.residuals(&xn)?;
                let cn = rn.norm_squared();
                if cn < cost {
                    let rel = (cost - cn) / cost.max(1e-300);
                    x = xn;
                    r = rn;
                    cost = cn;
                    lambda = (lambda / 3.0).max(1e-9);
                    improved = rel > 1e-10;
                    break;
                }
                lambda *= 4.0;
            }
            if !improved {
                break;
            }
        }
        let j = self.jacobian(&x, &r)?;
        Ok((x, j, r))
    }
}

/// Fit the scenario's parameters to `set`.
pub fn calibrate(
    s: &Scenario,
    set: &MeasuredSet,
    a: Assumptions,
    sources: Vec<String>,
) -> Result<Calibration> {
    if set.observations.is_empty() {
        return Err(Error::Scenario(
            "no measurements to calibrate against".into(),
        ));
    }
    let base = CostParams::default_for(s.system);
    let kinds = candidate_params(s);
    let priors: Vec<f64> = kinds.iter().map(|k| k.get(&base)).collect();
    let prob = Problem {
        s,
        kinds: kinds.clone(),
        priors: priors.clone(),
        obs: set.observations.clone(),
        a,
        base,
    };
    let (x, j, r) = prob.solve(priors.clone())?;
    let n_obs = set.observations.len();
    // Which parameters the data informs: their measurement-rows Jacobian is not negligible
    // next to their prior row (1 / σ_prior).
    let informed: Vec<bool> = (0..kinds.len())
        .map(|c| {
            let data: f64 = (0..n_obs).map(|i| j[(i, c)].powi(2)).sum::<f64>().sqrt();
            data > 0.05 / kinds[c].prior_sigma(priors[c])
        })
        .collect();
    let n_inf = informed.iter().filter(|b| **b).count() as i64;
    let dof = n_obs as i64 - n_inf;
    // Residual variance: from the data when there are spare degrees of freedom, else 1 (the
    // assumed σ's stand).
    let chi2: f64 = r.iter().map(|v| v * v).sum();
    let s2 = if dof > 0 {
        (chi2 / dof as f64).max(1.0)
    } else {
        1.0
    };
    let jtj = j.transpose() * &j;
    let cov = jtj
        .clone()
        .try_inverse()
        .unwrap_or_else(|| DMatrix::from_diagonal_element(kinds.len(), kinds.len(), f64::NAN))
        * s2;
    let t = if dof > 0 {
        StudentsT::new(0.0, 1.0, dof as f64)
            .map(|d| d.inverse_cdf(0.975))
            .unwrap_or(1.96)
    } else {
        1.96
    };
    let parameters: Vec<FitParam> = kinds
        .iter()
        .enumerate()
        .map(|(c, k)| {
            let se = cov[(c, c)].max(0.0).sqrt();
            let se = if se.is_finite() {
                se
            } else {
                k.prior_sigma(priors[c])
            };
            let (lo, hi) = k.bounds();
            FitParam {
                name: k.name(),
                kind: *k,
                value: x[c],
                prior: priors[c],
                stderr: se,
                ci95_low: (x[c] - t * se).max(lo),
                ci95_high: (x[c] + t * se).min(hi),
                lower_bound: lo,
                upper_bound: hi,
                informed_by_data: informed[c],
                at_bound: (x[c] - lo).abs() < 1e-9 || (hi - x[c]).abs() < 1e-9,
            }
        })
        .collect();
    let covariance: Vec<Vec<f64>> = (0..kinds.len())
        .map(|i| {
            (0..kinds.len())
                .map(|k| {
                    if cov[(i, k)].is_finite() {
                        cov[(i, k)]
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let fitted = prob.params_of(&x);
    let mut residuals = Vec::with_capacity(n_obs);
    for o in &set.observations {
        let (m, _) = measured_value(o);
        let d = predict_observation(s, &base, o, &a)?;
        let c = predict_observation(s, &fitted, o, &a)?;
        let (_, unit) = display_value(o, m);
        let error = match o.quantity {
            Quantity::CategoryShare { .. } => c - m,
            _ => (c - m) / m,
        };
        residuals.push(Residual {
            point: describe(o),
            origin: format!(
                "{}{}",
                o.origin.file,
                o.origin.line.map(|l| format!(":{l}")).unwrap_or_default()
            ),
            unit: unit.into(),
            measured: m,
            default: d,
            calibrated: c,
            error,
            loo_prediction: None,
        });
    }
    // Leave-one-out, when there are enough points to spare one.
    let mut loo_rms_error = None;
    if n_obs >= 4 {
        let mut sq = 0.0;
        for (i, res) in residuals.iter_mut().enumerate() {
            let mut obs = set.observations.clone();
            let held = obs.remove(i);
            let p = Problem {
                s,
                kinds: kinds.clone(),
                priors: priors.clone(),
                obs,
                a,
                base,
            };
            let (xi, _, _) = p.solve(x.clone())?;
            let pred = predict_observation(s, &p.params_of(&xi), &held, &a)?;
            let (m, _) = measured_value(&held);
            let e = match held.quantity {
                Quantity::CategoryShare { .. } => pred - m,
                _ => (pred - m) / m,
            };
            res.loo_prediction = Some(pred);
            sq += e * e;
        }
        loo_rms_error = Some((sq / n_obs as f64).sqrt());
    }
    let rms_error =
        (residuals.iter().map(|r| r.error * r.error).sum::<f64>() / n_obs as f64).sqrt();
    Ok(Calibration {
        model: s.model.name.clone(),
        system: s.system.spec.name.clone(),
        parallel: s.parallel.to_string(),
        sources,
        assumptions: a,
        parameters,
        covariance,
        residuals,
        degrees_of_freedom: dof,
        rms_error,
        loo_rms_error,
    })
}
