//! Held-out checks of calibration: do the 95 % intervals a calibration gives cover what it
//! was not fitted on?
//!
//! A user calibrates a deployment on a few measured points and then trusts its intervals at
//! other concurrencies and request lengths. This module runs that use over every deployment
//! of an e2e serving CSV: the runs of one deployment (engine build, model, precision,
//! system, layout and client alike) are split by a seeded draw into `fit_points` runs to fit
//! on and the rest to predict; each held-out run's measured TPOT is checked against the
//! calibrated interval. Coverage near 95 % says the intervals mean what they claim; far
//! below says the fit is over-confident, far above that it is uninformative.
//!
//! Only TPOT is fitted and checked: a calibration's records give intervals of TPOT and
//! throughput, and a measured TTFT depends on the harness's arrival process more than on
//! any parameter a fit moves.

use crate::calibrate::{calibrate, measured_value, predict_observation, Assumptions};
use crate::cost::CostParams;
use crate::e2e::{layout, ErrorSummary, Resolver};
use crate::error::{Error, Result};
use crate::measured::e2e_csv::{
    relabelled_lines, repeated_lines, E2eRun, RELABEL_REASON, REPEAT_REASON,
};
use crate::measured::{MeasuredSet, Observation, Origin, Quantity};
use crate::predict::Scenario;
use crate::serve::TpotDef;
use crate::spec::overrides::Override;
use crate::spec::{ModelSpec, System};
use serde::Serialize;
use std::collections::BTreeMap;

/// One held-out run: measured against the calibrated prediction and its interval.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutRun {
    /// 1-based line of the run in its file.
    pub line: usize,
    pub concurrency: u32,
    pub input_len: u32,
    pub output_len: u32,
    pub measured_tpot_ms: f64,
    /// The model's TPOT with its default parameters.
    pub default_tpot_ms: f64,
    /// The calibrated TPOT and its 95 % interval.
    pub calibrated_tpot_ms: f64,
    pub tpot_ci95_ms: [f64; 2],
    /// The measured TPOT lies inside the interval.
    pub covered: bool,
}

/// One deployment's check.
#[derive(Debug, Clone, Serialize)]
pub struct DeploymentCoverage {
    /// What the runs share: backend and version, model, precision, system, layout, client.
    pub deployment: String,
    pub backend: String,
    pub fitted_lines: Vec<usize>,
    pub held_out: Vec<HeldOutRun>,
    /// Share of `held_out` inside its interval.
    pub coverage: f64,
    /// Median |error| of the held-out runs, calibrated and with default parameters.
    pub calibrated_median_abs_error: f64,
    pub default_median_abs_error: f64,
    /// Root-mean-square leave-one-out error over the fitted runs.
    pub loo_rms_error: Option<f64>,
}

/// The check over a file.
#[derive(Debug, Clone, Serialize)]
pub struct HoldoutReport {
    pub source: String,
    pub fit_points: usize,
    pub seed: u64,
    /// Deployments with more runs than `fit_points`, each checked.
    pub deployments: Vec<DeploymentCoverage>,
    /// Held-out runs over every deployment, and the share covered.
    pub held_out_runs: usize,
    pub coverage: f64,
    /// Coverage per backend: (backend, runs, share covered).
    pub by_backend: Vec<(String, usize, f64)>,
    /// Deployments left out, by reason, with their run counts.
    pub skipped: Vec<(String, usize)>,
}

/// What the runs of one deployment share (the key runs are grouped by).
fn deployment_key(run: &E2eRun, client: &str) -> String {
    format!(
        "{} {} | {} {} gemm={} moe={} | {} tp{} pp{} dp{} moe_tp{} moe_ep{} | {}",
        run.backend,
        if run.image.is_empty() {
            &run.backend_version
        } else {
            &run.image
        },
        run.model_path,
        run.precision,
        run.gemm_quant_mode,
        run.moe_quant_mode,
        run.system,
        run.tp,
        run.pp,
        run.attention_dp,
        run.moe_tp,
        run.moe_ep,
        client
    )
}

/// A deployment ready to fit: its descriptions, layout, client and runs.
struct Deployment<'r> {
    key: String,
    model: ModelSpec,
    system: System,
    parallel: crate::cost::Parallel,
    client: crate::serve::ClientModel,
    runs: Vec<&'r E2eRun>,
}

/// A run's TPOT as a measurement calibration reads.
fn tpot_observation(run: &E2eRun, source: &str) -> Observation {
    Observation {
        quantity: Quantity::Tpot {
            concurrency: run.concurrency,
            input_len: Some(run.isl),
            output_len: run.osl,
            definition: TpotDef::Itl,
            seconds: run.tpot,
        },
        origin: Origin {
            file: source.to_string(),
            line: Some(run.line),
            prose: None,
        },
    }
}

/// A reproducible shuffle (splitmix64 keys): the same seed draws the same split.
fn shuffled<T: Copy>(items: &[T], seed: u64, salt: u64) -> Vec<T> {
    let mix = |mut z: u64| crate::harness::splitmix64(&mut z);
    let mut keyed: Vec<(u64, T)> = items
        .iter()
        .enumerate()
        .map(|(i, t)| (mix(seed ^ mix(salt ^ mix(i as u64))), *t))
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|k| k.1).collect()
}

/// Fit one deployment on `fit_points` of its runs (drawn with `seed`) and check the rest.
fn check(d: &Deployment, source: &str, fit_points: usize, seed: u64) -> Result<DeploymentCoverage> {
    let s = Scenario::new(&d.model, &d.system, d.parallel)?;
    let salt = d
        .key
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let order = shuffled(&d.runs, seed, salt);
    let (fit, held) = order.split_at(fit_points);
    let a = Assumptions {
        client: d.client,
        ..Assumptions::default()
    };
    let set = MeasuredSet {
        system: None,
        model: None,
        observations: fit.iter().map(|r| tpot_observation(r, source)).collect(),
        devices: Vec::new(),
    };
    let c = calibrate(&s, &set, a, vec![source.to_string()])?;
    let base = CostParams::default_for(&d.system);
    let fitted = c.params(&base);
    let mut held_out = Vec::with_capacity(held.len());
    for run in held {
        let o = tpot_observation(run, source);
        let (m, _) = measured_value(&o);
        let default = predict_observation(&s, &base, &o, &a)?;
        let calibrated = predict_observation(&s, &fitted, &o, &a)?;
        let (lo, hi) = c.prediction_interval(&base, "tpot", |p| {
            predict_observation(&s, p, &o, &a).unwrap_or(f64::NAN)
        });
        held_out.push(HeldOutRun {
            line: run.line,
            concurrency: run.concurrency,
            input_len: run.isl,
            output_len: run.osl,
            measured_tpot_ms: m * 1e3,
            default_tpot_ms: default * 1e3,
            calibrated_tpot_ms: calibrated * 1e3,
            tpot_ci95_ms: [lo * 1e3, hi * 1e3],
            covered: lo <= m && m <= hi,
        });
    }
    let share = |v: &[HeldOutRun]| v.iter().filter(|h| h.covered).count() as f64 / v.len() as f64;
    let err = |f: fn(&HeldOutRun) -> f64| {
        let errors: Vec<f64> = held_out
            .iter()
            .map(|h| f(h) / h.measured_tpot_ms - 1.0)
            .collect();
        ErrorSummary::of(&errors).median_abs
    };
    Ok(DeploymentCoverage {
        deployment: d.key.clone(),
        backend: d.runs[0].backend.clone(),
        fitted_lines: fit.iter().map(|r| r.line).collect(),
        coverage: share(&held_out),
        calibrated_median_abs_error: err(|h| h.calibrated_tpot_ms),
        default_median_abs_error: err(|h| h.default_tpot_ms),
        loo_rms_error: c.loo_rms_error,
        held_out,
    })
}

/// Check every deployment of `runs` with more than `fit_points` runs: fit on `fit_points`
/// drawn with `seed`, predict the rest. `progress` is told (done, total) as deployments
/// finish. Deployments run on every core.
pub fn evaluate(
    runs: &[E2eRun],
    source: &str,
    sets: &[Override],
    client: Option<&str>,
    fit_points: usize,
    seed: u64,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<HoldoutReport> {
    if fit_points == 0 {
        return Err(Error::Scenario(
            "--holdout needs at least 1 point to fit on".into(),
        ));
    }
    let mut resolver = Resolver::new()?;
    let mut groups: BTreeMap<String, Deployment> = BTreeMap::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let repeats = repeated_lines(runs, |r| r.line, E2eRun::fields_without_line);
    let relabelled = relabelled_lines(runs);
    for ((run, repeat), relabel) in runs.iter().zip(repeats).zip(relabelled) {
        let set_aside = match (repeat, relabel) {
            (Some(_), _) => Some(REPEAT_REASON),
            (None, Some(_)) => Some(RELABEL_REASON),
            (None, None) => None,
        };
        if let Some(why) = set_aside {
            *skipped.entry(why.to_string()).or_default() += 1;
            continue;
        }
        let r = resolver.resolve(run, sets, client)?;
        let key = deployment_key(run, &r.client_name);
        if let Some(d) = groups.get_mut(&key) {
            // A run faster than its batch allows is set aside, as `validate` does.
            let too_fast = Scenario::new(&d.model, &d.system, d.parallel)
                .ok()
                .and_then(|s| crate::e2e::faster_than_its_batch(&s, run, d.client).ok())
                .flatten();
            match too_fast {
                Some(why) => *skipped.entry(crate::e2e::generalise(&why)).or_default() += 1,
                None => d.runs.push(run),
            }
            continue;
        }
        let mapped = (|| -> std::result::Result<Deployment, String> {
            let model = r.model?;
            let system = r.system?.clone();
            let parallel = layout(run, model.moe().is_some())?;
            let s = Scenario::new(&model, &system, parallel).map_err(|e| e.to_string())?;
            // A run faster than its batch allows is set aside, as `validate` does (one that
            // cannot be predicted at all fails in its fit, with its reason).
            if let Ok(Some(why)) = crate::e2e::faster_than_its_batch(&s, run, r.client) {
                return Err(why);
            }
            Ok(Deployment {
                key: key.clone(),
                model,
                system,
                parallel,
                client: r.client,
                runs: vec![run],
            })
        })();
        match mapped {
            Ok(d) => {
                groups.insert(key, d);
            }
            Err(why) => *skipped.entry(crate::e2e::generalise(&why)).or_default() += 1,
        }
    }
    let (ready, few): (Vec<Deployment>, Vec<Deployment>) = groups
        .into_values()
        .partition(|d| d.runs.len() > fit_points);
    for d in few {
        *skipped
            .entry(format!("no more than {fit_points} runs to fit on"))
            .or_default() += d.runs.len();
    }
    let total = ready.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(total.max(1));
    let mut results: Vec<(usize, std::result::Result<DeploymentCoverage, String>)> =
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(d) = ready.get(i) else { break };
                            let r = check(d, source, fit_points, seed).map_err(|e| e.to_string());
                            out.push((i, r));
                            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                            progress(n, total);
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                // A worker that panicked re-raises its panic: its deployments are never dropped silently.
                .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
    results.sort_by_key(|r| r.0);
    let mut deployments = Vec::new();
    for (i, r) in results {
        match r {
            Ok(d) => deployments.push(d),
            Err(why) => {
                *skipped
                    .entry(format!("fit failed: {}", crate::e2e::generalise(&why)))
                    .or_default() += ready[i].runs.len()
            }
        }
    }
    let all: Vec<(&str, bool)> = deployments
        .iter()
        .flat_map(|d| d.held_out.iter().map(|h| (d.backend.as_str(), h.covered)))
        .collect();
    let share = |v: &[(&str, bool)]| v.iter().filter(|x| x.1).count() as f64 / v.len() as f64;
    let mut backends: BTreeMap<&str, Vec<(&str, bool)>> = BTreeMap::new();
    for x in &all {
        backends.entry(x.0).or_default().push(*x);
    }
    let by_backend = backends
        .iter()
        .map(|(b, v)| (b.to_string(), v.len(), share(v)))
        .collect();
    if all.is_empty() {
        return Err(Error::Scenario(format!(
            "{source}: no deployment has more than {fit_points} runs that rooftop can map, so nothing is held out; skipped: {}",
            skipped
                .iter()
                .map(|(k, n)| format!("{n} x {k}"))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(HoldoutReport {
        source: source.to_string(),
        fit_points,
        seed,
        held_out_runs: all.len(),
        coverage: share(&all),
        by_backend,
        deployments,
        skipped: skipped.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeded_draw_is_a_permutation_and_repeats() {
        let v: Vec<u32> = (0..20).collect();
        let a = shuffled(&v, 7, 3);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, v);
        assert_eq!(a, shuffled(&v, 7, 3));
        assert_ne!(a, shuffled(&v, 8, 3));
    }
}
