//! Layouts that would run, named when one is refused.
//!
//! A refusal that says only what is wrong leaves the user to search the layouts by hand. When
//! a layout cannot run the model (a split the heads, experts or weight blocks do not allow),
//! or the model does not fit in it, rooftop names up to three layouts on the same system that
//! do: the same GPU count first, then the closest change of degrees. When none on the system
//! fits, it says how many GPUs of that kind the weights need.

use crate::error::Error;
use crate::ops::Parallel;
use crate::predict::Scenario;
use crate::serve::fits;
use crate::spec::{ModelSpec, System};

/// Layouts suggested at most.
const SUGGESTED: usize = 3;

/// `err` with the layouts that run `model` on `system` appended (the error itself when it is
/// not a scenario refusal, or when nothing else runs either).
pub fn with_suggestions(
    err: Error,
    model: &ModelSpec,
    system: &System,
    refused: &Parallel,
    batch: f64,
    context: f64,
) -> Error {
    let Error::Scenario(why) = err else {
        return err;
    };
    let runs = runnable(model, system, refused, batch, context);
    if !runs.is_empty() {
        let list: Vec<String> = runs.iter().map(flags).collect();
        return Error::Scenario(format!(
            "{why}; layouts that run it on {}: {}",
            system.spec.name,
            list.join(", ")
        ));
    }
    match gpus_needed(model, system) {
        Some(n) if n > system.spec.gpu_count => Error::Scenario(format!(
            "{why}; no layout of {} runs it: its weights need at least {n} GPUs of {}",
            system.spec.name, system.gpu.name
        )),
        _ => Error::Scenario(why),
    }
}

/// The command-line flags of a layout (`--tp 4 --ep 4 --pp 2`; degrees of 1 left out but TP).
pub fn flags(p: &Parallel) -> String {
    let mut s = format!("--tp {}", p.tp);
    for (flag, v) in [("--ep", p.ep), ("--pp", p.pp), ("--dp", p.dp)] {
        if v > 1 {
            s.push_str(&format!(" {flag} {v}"));
        }
    }
    s
}

/// Up to three layouts on `system` that run `model` with `batch` sequences of `context`
/// tokens in memory, closest to `near` first (the same GPU count, then the fewest degrees
/// changed).
pub fn runnable(
    model: &ModelSpec,
    system: &System,
    near: &Parallel,
    batch: f64,
    context: f64,
) -> Vec<Parallel> {
    let n = system.spec.gpu_count;
    let divisors: Vec<u32> = (1..=n).filter(|d| n.is_multiple_of(*d)).collect();
    let mut found: Vec<(u32, Parallel)> = layouts_over(model, &divisors, |g| g <= n)
        .into_iter()
        .filter(|p| p != near && runs(model, system, *p, batch, context))
        .map(|p| (distance(&p, near), p))
        .collect();
    found.sort_by_key(|(d, p)| (*d, p.pp, p.dp, p.tp));
    found.into_iter().take(SUGGESTED).map(|(_, p)| p).collect()
}

/// Every layout whose TP, PP and DP degrees come from `degrees` and whose GPU count `gpus`
/// accepts, in that order (TP, then PP, then DP); for an MoE model each both without EP and
/// with its experts over all `tp × dp` GPUs of a stage. Whether one runs is not asked.
pub(crate) fn layouts_over(
    model: &ModelSpec,
    degrees: &[u32],
    gpus: impl Fn(u32) -> bool,
) -> Vec<Parallel> {
    let mut out = Vec::new();
    for &tp in degrees {
        for &pp in degrees {
            for &dp in degrees {
                let Some(g) = tp.checked_mul(pp).and_then(|x| x.checked_mul(dp)) else {
                    continue;
                };
                if !gpus(g) {
                    continue;
                }
                let group = tp * dp;
                let eps: &[u32] = match model.moe() {
                    Some(_) if group > 1 => &[1, group],
                    _ => &[1],
                };
                out.extend(eps.iter().map(|&ep| Parallel {
                    tp,
                    ep,
                    pp,
                    dp,
                    redundant_experts: 0,
                }));
            }
        }
    }
    out
}

/// Whether `p` can run `model` on `system` and hold `batch` sequences of `context` tokens
/// (within the model's context window: [`fits`]).
pub(crate) fn runs(
    model: &ModelSpec,
    system: &System,
    p: Parallel,
    batch: f64,
    context: f64,
) -> bool {
    if p.validate(model, system).is_err() {
        return false;
    }
    let s = Scenario {
        model,
        system,
        parallel: p,
        params: crate::cost::CostParams::default_for(system),
        calibration: None,
    };
    fits(&s, batch, context).is_ok()
}

/// A ranking of how far `p` is from `near`: a different GPU count first, then each degree
/// by how many doublings it moved.
fn distance(p: &Parallel, near: &Parallel) -> u32 {
    let steps = |a: u32, b: u32| (a.max(1) as f64 / b.max(1) as f64).log2().abs().round() as u32;
    let other_count = u32::from(p.gpus() != near.gpus());
    other_count * 100
        + steps(p.tp, near.tp)
        + steps(p.ep, near.ep)
        + steps(p.pp, near.pp)
        + steps(p.dp, near.dp)
}

/// GPUs of the system's kind the model's weights need at least: its weights over what one
/// GPU leaves for them once the engine's reserve is taken (the weights split evenly).
pub(crate) fn gpus_needed(model: &ModelSpec, system: &System) -> Option<u32> {
    let whole = crate::cost::memory::weight_bytes_per_gpu(model, &Parallel::tp(1));
    let eng = &system.engine;
    let room = eng.usable_memory(system.gpu.memory_capacity.0) - eng.activation_reserve.0;
    if room <= 0.0 || !whole.is_finite() {
        return None;
    }
    let n = (whole / room).ceil();
    (n < u32::MAX as f64).then_some(n as u32)
}
