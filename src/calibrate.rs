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

pub use crate::calibration::{
    Assumptions, Calibration, FitParam, MechanismFit, ParamKind, Residual, ServingLimit,
};
use crate::cost::{Category, CostParams, Evaluator, Pass};
use crate::error::{Error, Result};
use crate::kernel_check::RowPricing;
use crate::measured::{MeasuredSet, Observation, Quantity, TraceCategory};
use crate::predict::Scenario;
use crate::serve::{sweep, TpotDef, Workload};
use crate::spec::{FormatKind, WeightFormat};
use nalgebra::{DMatrix, DVector};
use std::sync::Arc;

use statrs::distribution::{ContinuousCDF, StudentsT};

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
    match kernel_call(s, o)? {
        Some(call) => call.price(p),
        None => predict_serving(s, p, o, a),
    }
}

/// A micro-benchmark's kernel call (a GEMM, an nccl-tests all-reduce), priced as `validate`
/// prices a kernel table's row of it: what does not depend on the parameters (the system
/// as the harness ran it, the operators), built once so that a fit prices only the rest.
/// `None` for serving observations.
fn kernel_call(s: &Scenario, o: &Observation) -> Result<Option<RowPricing>> {
    Ok(Some(match &o.quantity {
        // nccl-tests' call: NCCL alone with its tuner free, whatever the engine runs in
        // serving (vLLM's custom kernel), priced as `validate` prices an NCCL table row.
        Quantity::AllReduce { bytes, gpus, .. } => {
            let shape = crate::measured::kernel_table::KernelShape::Nccl {
                collective: crate::measured::kernel_table::CollectiveName::AllReduce,
                gpus: *gpus,
                bytes: bytes.round() as u64,
            };
            RowPricing::of_row(&shape, "", s.system, None)?
        }
        // A timed micro-benchmark's call, priced as `validate` prices a GEMM table's row:
        // the kernel's fixed cost, the harness's repeats (weights that fit in L2) and its
        // floor included, so that a fit and its check see the same call.
        Quantity::Gemm {
            m,
            n,
            k,
            dtype,
            kernel,
            ..
        } => {
            let fmt: WeightFormat = crate::measured::gemm_csv::weight_format_of(dtype)
                .map_err(|e: String| Error::Scenario(format!("{} (at {})", e, o.origin.file)))?;
            RowPricing::of_gemm(*m, *n, *k, fmt, kernel, s.system)?
        }
        _ => return Ok(None),
    }))
}

/// [`predict_observation`] of a serving observation (a TPOT, TTFT, throughput or trace
/// share): a sweep or a decode step at parameters `p`.
fn predict_serving(s: &Scenario, p: &CostParams, o: &Observation, a: &Assumptions) -> Result<f64> {
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
        } => {
            let point = serve_point(*concurrency, *input_len, Some(*output_len), *definition)?;
            // At the speed of light, the bound `sweep` reports for this TPOT (its
            // `sol_tpot_ms`): one definition of the bound for every command.
            if p.is_sol() {
                point.sol_tpot_ms / 1e3
            } else {
                point.tpot_ms / 1e3
            }
        }
        Quantity::Ttft {
            concurrency,
            input_len,
            output_len,
            ..
        } => serve_point(*concurrency, *input_len, *output_len, TpotDef::Itl)?.ttft_ms / 1e3,
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
        Quantity::AllReduce { .. } | Quantity::Gemm { .. } => {
            return Err(Error::Scenario(format!(
                "{}: a kernel call is priced by its kernel table's rule, not as serving",
                describe(o)
            )))
        }
    })
}

/// The relative σ assumed for a measured serving time or rate (a prior: run-to-run spread
/// of a serving benchmark at fixed settings is a few per cent).
pub const SERVING_SIGMA: f64 = 0.03;

/// The measured value and its σ (relative [`SERVING_SIGMA`] for serving times and rates, 2
/// points for a share, 5 % for micro-benchmarks).
pub fn measured_value(o: &Observation) -> (f64, f64) {
    match &o.quantity {
        Quantity::Tpot { seconds, .. } | Quantity::Ttft { seconds, .. } => {
            (*seconds, SERVING_SIGMA * seconds)
        }
        Quantity::Throughput {
            tokens_per_second, ..
        } => (*tokens_per_second, SERVING_SIGMA * tokens_per_second),
        Quantity::CategoryShare { share, .. } => (*share, 0.02),
        Quantity::AllReduce { seconds, .. } | Quantity::Gemm { seconds, .. } => {
            (*seconds, 0.05 * seconds)
        }
    }
}

/// The model's error on an observation: for a share the difference in points (as a
/// fraction), otherwise `(predicted − measured) / measured`.
pub fn error_of(q: &Quantity, predicted: f64, measured: f64) -> f64 {
    match q {
        Quantity::CategoryShare { .. } => predicted - measured,
        _ => (predicted - measured) / measured,
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
        } => format!("tpot ({definition}) c={concurrency} out={output_len}"),
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

/// The unit the values of an observation are stored in (records, JSON, calibration files):
/// seconds, tok/s, or a fraction. Reports scale them with [`report_scale`].
pub fn si_unit(o: &Observation) -> &'static str {
    match &o.quantity {
        Quantity::Tpot { .. }
        | Quantity::Ttft { .. }
        | Quantity::AllReduce { .. }
        | Quantity::Gemm { .. } => "s",
        Quantity::Throughput { .. } => "tok/s",
        Quantity::CategoryShare { .. } => "fraction",
    }
}

/// How a report shows values stored in `unit`: (factor, label). Times in ms, or µs below a
/// millisecond (`typical` is a value of the row, so a row keeps one scale); fractions in %.
/// Also reads the labels of calibration files written before values were labelled with
/// their stored unit (`ms`, `us`, `%` next to seconds and fractions).
pub fn report_scale(unit: &str, typical: f64) -> (f64, &'static str) {
    match unit {
        "s" if typical.abs() < 1e-3 => (1e6, "us"),
        "s" | "ms" => (1e3, "ms"),
        "us" => (1e6, "us"),
        "fraction" | "%" => (100.0, "%"),
        _ => (1.0, "tok/s"),
    }
}

/// Whether values in `unit` are shares (their errors are differences in points).
pub fn is_share(unit: &str) -> bool {
    matches!(unit, "fraction" | "%")
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
    /// Each observation's kernel call ([`kernel_call`]), built once and shared by the
    /// problems a fit derives (a fit prices every observation hundreds of times).
    calls: Vec<Option<Arc<RowPricing>>>,
    a: Assumptions,
    base: CostParams,
}

/// The kernel calls of `obs`, in order ([`kernel_call`]).
fn kernel_calls(s: &Scenario, obs: &[Observation]) -> Result<Vec<Option<Arc<RowPricing>>>> {
    obs.iter()
        .map(|o| Ok(kernel_call(s, o)?.map(Arc::new)))
        .collect()
}

impl Problem<'_, '_> {
    /// [`predict_observation`] of observation `i`, its kernel call built once.
    fn predict(&self, i: usize, p: &CostParams) -> Result<f64> {
        match &self.calls[i] {
            Some(call) => call.price(p),
            None => predict_serving(self.s, p, &self.obs[i], &self.a),
        }
    }

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
        for (i, o) in self.obs.iter().enumerate() {
            let (m, sigma) = measured_value(o);
            r.push((self.predict(i, &p)? - m) / sigma);
        }
        for (j, k) in self.kinds.iter().enumerate() {
            r.push((x[j] - self.priors[j]) / k.prior_sigma(self.priors[j]));
        }
        Ok(DVector::from_vec(r))
    }

    fn jacobian(&self, x: &[f64], r0: &DVector<f64>) -> Result<DMatrix<f64>> {
        let mut j = DMatrix::zeros(r0.len(), x.len());
        for c in 0..x.len() {
            let (lo, hi) = self.kinds[c].bounds_in(self.s.system);
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
                    .map(|((v, d), k)| {
                        let (lo, hi) = k.bounds_in(self.s.system);
                        (v + d).clamp(lo, hi)
                    })
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
    let mut kinds = candidate_params(s);
    // Measured TTFTs carry the latency a request spends outside the engine loop, which no
    // description prices: fitted from them, beside the engine's parameters.
    if set
        .observations
        .iter()
        .any(|o| matches!(o.quantity, Quantity::Ttft { .. }))
    {
        kinds.push(ParamKind::RequestLatency);
    }
    let priors: Vec<f64> = kinds.iter().map(|k| k.get(&base)).collect();
    let calls = kernel_calls(s, &set.observations)?;
    let prob = Problem {
        s,
        kinds: kinds.clone(),
        priors: priors.clone(),
        obs: set.observations.clone(),
        calls: calls.clone(),
        a,
        base,
    };
    let (x, j, r) = prob.solve(priors.clone())?;
    // A flat throughput curve: choose the serving mechanism that holds it, fitted beside the
    // GPU parameters, and carry its parameter into the fit.
    let serving_limit = serving_limit(&prob, &x, r.norm_squared())?;
    let (kinds, priors, x, j, r) = match serving_limit
        .as_ref()
        .and_then(|l| l.candidates.first().filter(|c| c.mechanism == l.chosen))
    {
        Some(best) => {
            let kind = mechanism_kind(&best.parameter);
            let mut kinds = kinds;
            kinds.push(kind);
            let mut priors = priors;
            priors.push(best.value);
            let mut x0 = x;
            x0.push(best.value);
            let p = Problem {
                kinds: kinds.clone(),
                priors: priors.clone(),
                obs: set.observations.clone(),
                calls: calls.clone(),
                ..prob
            };
            let (x, j, r) = p.solve(x0)?;
            (kinds, priors, x, j, r)
        }
        None => (kinds, priors, x, j, r),
    };
    let prob = Problem {
        kinds: kinds.clone(),
        priors: priors.clone(),
        obs: set.observations.clone(),
        calls: calls.clone(),
        ..prob
    };
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
    // The misfit widens the measurements' σ, not the priors': the data rows are scaled by
    // 1 / √s2 before the inverse, so a parameter the data never touched keeps its prior's
    // spread (before, the whole covariance was scaled, and a prior-only efficiency got a
    // standard error of 4 on a 0.05-1 range).
    let mut jw = j.clone();
    for i in 0..n_obs.min(jw.nrows()) {
        jw.row_mut(i).scale_mut(1.0 / s2.sqrt());
    }
    let cov = (jw.transpose() * &jw)
        .try_inverse()
        .unwrap_or_else(|| DMatrix::from_diagonal_element(kinds.len(), kinds.len(), f64::NAN));
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
            let (lo, hi) = k.bounds_in(s.system);
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
        let unit = si_unit(o);
        let error = error_of(&o.quantity, c, m);
        residuals.push(Residual {
            point: describe(o),
            kind: o.quantity.kind_name().into(),
            origin: o.origin.label(),
            prose: o.origin.prose.clone(),
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
    if n_obs >= 3 {
        let mut sq = 0.0;
        for (i, res) in residuals.iter_mut().enumerate() {
            let mut obs = set.observations.clone();
            let held = obs.remove(i);
            let mut held_calls = calls.clone();
            held_calls.remove(i);
            let p = Problem {
                s,
                kinds: kinds.clone(),
                priors: priors.clone(),
                obs,
                calls: held_calls,
                a,
                base,
            };
            let (xi, _, _) = p.solve(x.clone())?;
            let pred = predict_observation(s, &p.params_of(&xi), &held, &a)?;
            let (m, _) = measured_value(&held);
            let e = error_of(&held.quantity, pred, m);
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
        gpu: s.system.gpu.name.clone(),
        interconnect: s.system.link.name.clone(),
        engine: s.system.engine.name.clone(),
        parallel: s.parallel.to_string(),
        sources,
        assumptions: a,
        parameters,
        covariance,
        residuals,
        degrees_of_freedom: dof,
        rms_error,
        loo_rms_error,
        serving_limit,
        assumed_lengths: Some(set.observations.iter().fold((false, false), |acc, o| {
            match o.quantity.stated_lengths() {
                Some((i, out)) => (acc.0 || i.is_none(), acc.1 || out.is_none()),
                None => acc,
            }
        })),
    })
}

/// A serving mechanism calibration can choose: its parameter, what it is, the unit, and the
/// readings it has with their priors.
struct Mechanism {
    kind: ParamKind,
    what: &'static str,
    unit: &'static str,
    readings: Vec<(&'static str, f64)>,
}

/// The serving mechanisms calibration can choose between.
fn mechanisms(s: &Scenario, a: &Assumptions) -> Vec<Mechanism> {
    let eng = &s.system.engine;
    vec![
        Mechanism {
            kind: ParamKind::InflightCap,
            what: "in-flight cap",
            unit: "requests",
            readings: vec![
                (
                    "client connection cap",
                    a.client.cap.map_or(100.0, f64::from),
                ),
                ("max_num_seqs", eng.max_num_seqs as f64),
            ],
        },
        Mechanism {
            kind: ParamKind::ApiPerToken,
            what: "time per streamed token",
            unit: "us",
            readings: vec![
                (
                    "API-server time per streamed token",
                    eng.cpu.api_per_token.0 * 1e6,
                ),
                (
                    "client CPU per received chunk",
                    (a.client.per_chunk * 1e6).max(10.0),
                ),
            ],
        },
    ]
}

fn mechanism_kind(parameter: &str) -> ParamKind {
    if parameter == ParamKind::ApiPerToken.name() {
        ParamKind::ApiPerToken
    } else {
        ParamKind::InflightCap
    }
}

/// The score a serving mechanism must gain over "none" to be chosen (Akaike's information
/// criterion: 2 per added parameter).
const AIC_PER_PARAMETER: f64 = 2.0;

/// Score of a prior distance: a factor of √10 from the prior costs one σ² of misfit.
fn prior_penalty(distance: f64) -> f64 {
    (distance / 0.5).powi(2)
}

/// When the data has throughput at two concurrencies or more, fit each serving mechanism
/// (its value found on a log grid with the GPU parameters held, then refitted jointly with
/// them), score it by χ² plus its distance from the nearest prior reading, and choose the
/// lowest score, "none" included.
fn serving_limit(prob: &Problem, x: &[f64], none_chi2: f64) -> Result<Option<ServingLimit>> {
    let mut concurrencies: Vec<u32> = prob
        .obs
        .iter()
        .filter_map(|o| match o.quantity {
            Quantity::Throughput { concurrency, .. } => Some(concurrency),
            _ => None,
        })
        .collect();
    concurrencies.sort_unstable();
    concurrencies.dedup();
    if concurrencies.len() < 2 {
        return Ok(None);
    }
    let rms = |p: &Problem, x: &[f64]| -> Result<f64> {
        let params = p.params_of(x);
        let mut sq = 0.0;
        for (i, o) in p.obs.iter().enumerate() {
            let (m, _) = measured_value(o);
            let v = p.predict(i, &params)?;
            let e = error_of(&o.quantity, v, m);
            sq += e * e;
        }
        Ok((sq / p.obs.len() as f64).sqrt())
    };
    let none_rms_error = rms(prob, x)?;
    let (c_lo, c_hi) = (
        concurrencies[0] as f64,
        *concurrencies.last().unwrap_or(&1) as f64,
    );
    let mut candidates = Vec::new();
    let all = mechanisms(prob.s, &prob.a);
    for &Mechanism {
        kind,
        what,
        unit,
        ref readings,
    } in &all
    {
        // The grid: caps from a quarter of the lowest measured concurrency to twice the
        // highest; token times from 1 µs to 100 ms.
        let (lo, hi) = match kind {
            ParamKind::InflightCap => ((c_lo / 4.0).max(1.0), 2.0 * c_hi),
            _ => (1.0, 1e5),
        };
        let nearest = |v: f64| -> (&'static str, f64) {
            readings
                .iter()
                .copied()
                .min_by(|a, b| (v / a.1).log10().abs().total_cmp(&(v / b.1).log10().abs()))
                .unwrap_or(("", v))
        };
        let penalty = |v: f64| prior_penalty((v / nearest(v).1.max(1e-12)).log10().abs());
        // Score on a grid with the GPU parameters at their priors (not the base fit, which a
        // flat curve may have bent toward it); the joint fit below refines the best value.
        let held = |v: f64| -> Result<f64> {
            let mut kinds = prob.kinds.clone();
            kinds.push(kind);
            let mut xv = prob.priors.clone();
            xv.push(v);
            let p = Problem {
                kinds,
                priors: xv.clone(),
                obs: prob.obs.clone(),
                calls: prob.calls.clone(),
                ..*prob
            };
            Ok(p.residuals(&xv)?.norm_squared() + penalty(v))
        };
        let steps = 48;
        let mut best = (f64::INFINITY, lo);
        for i in 0..=steps {
            let v = lo * (hi / lo).powf(i as f64 / steps as f64);
            let score = held(v)?;
            if score < best.0 {
                best = (score, v);
            }
        }
        let mut kinds = prob.kinds.clone();
        kinds.push(kind);
        let mut priors = prob.priors.clone();
        priors.push(best.1);
        let p = Problem {
            kinds,
            priors,
            obs: prob.obs.clone(),
            calls: prob.calls.clone(),
            ..*prob
        };
        let mut x0 = x.to_vec();
        x0.push(best.1);
        let (xf, _, rf) = p.solve(x0)?;
        let value = *xf.last().unwrap_or(&best.1);
        let (reading, prior) = nearest(value);
        let prior_distance = (value / prior.max(1e-12)).log10().abs();
        candidates.push(MechanismFit {
            mechanism: what.into(),
            parameter: kind.name(),
            value,
            unit: unit.into(),
            reading: reading.into(),
            prior,
            prior_distance,
            rms_error: rms(&p, &xf)?,
            score: rf.norm_squared() + prior_penalty(prior_distance),
        });
    }
    candidates.sort_by(|a, b| a.score.total_cmp(&b.score));
    // A mechanism adds a parameter: it is chosen only when it lowers the score by more than
    // Akaike's 2 per parameter, so a value the data leaves free is never reported as found.
    let chosen = match candidates.first() {
        Some(c) if c.score < none_chi2 - AIC_PER_PARAMETER => c.mechanism.clone(),
        _ => "none".into(),
    };
    // The two readings to tell apart: both of the chosen mechanism's (the data cannot
    // separate a client cap from max_num_seqs), else the best two mechanisms'.
    let separating_test = match candidates.first() {
        Some(c) if c.mechanism == chosen => {
            let other = all
                .iter()
                .find(|m| m.kind.name() == c.parameter)
                .and_then(|m| m.readings.iter().map(|r| r.0).find(|r| *r != c.reading))
                .unwrap_or("");
            separating_test(&c.reading, other)
        }
        _ => separating_test(
            "none",
            candidates.first().map_or("", |c| c.reading.as_str()),
        ),
    };
    Ok(Some(ServingLimit {
        chosen,
        none_score: none_chi2,
        none_rms_error,
        candidates,
        separating_test: separating_test.into(),
    }))
}

/// The one measurement that tells two plateau mechanisms apart.
pub fn separating_test(a: &str, b: &str) -> &'static str {
    let has = |k: &str| a.contains(k) || b.contains(k);
    if has("client") && has("max_num_seqs") {
        "rerun C = 256 with the client's connector unlimited (aiohttp TCPConnector(limit=0)) and read vLLM's `num_requests_running` metric: a running count at the cap with none waiting means the client held it, a waiting queue means max_num_seqs"
    } else if has("client") {
        "rerun C = 256 with aiohttp TCPConnector(limit=0): the plateau moves if the client held it"
    } else if has("API-server") {
        "watch GPU utilisation at C = 128 vs 256: a CPU bound leaves the GPU idle between steps; rerun with --api-server-count 2"
    } else {
        "rerun C = 128 and 256 with fixed, recorded request lengths and read num_requests_running and KV usage from vLLM's /metrics"
    }
}
