//! Sizing: which deployments of a GPU budget on one system meet a TTFT and TPOT target, and
//! the Pareto front of output tokens/s per GPU against tokens/s per user over them.
//!
//! The question is how many workers, of what layout, in one pool or in a prefill and a
//! decode pool, give the most throughput per GPU at each speed per user. The candidates:
//! - **aggregated**: `replicas` copies of one layout of `g` GPUs (`replicas = ⌊gpus / g⌋`),
//!   swept over a ladder of concurrencies per replica (doublings from 1, with the gap
//!   between the last doubling that meets the targets and the first that does not bisected
//!   to one request). A replica's
//!   throughput per GPU is the deployment's, so every replica count shares one curve; the
//!   client's concurrency is the replicas' sum.
//! - **disaggregated**: `p` prefill workers of one layout (1, 2, 4, ...) and as many decode
//!   workers of another as the rest of the budget holds, swept over doublings of the
//!   deployment's concurrency ([`crate::deploy`]). The prefill layouts tried are the few with the most prompt tokens
//!   per second per GPU or the fastest single prompt; the decode layouts, the few with the
//!   most tokens per second per GPU at a large batch or the lowest TPOT at one sequence
//!   ([`SHORTLIST`] of each, by the costed passes): a layout that is slower on both counts
//!   cannot reach the front where a shortlisted one of its size can.
//!
//! The layouts are every power-of-two TP × PP × DP of `g` GPUs (with EP over the attention
//! GPUs, or none, for MoE models) that the model's splits allow and whose weights and one
//! sequence fit, for `g` a power of two up to the budget and the system's GPUs (a worker
//! larger than a node spans nodes of a multi-node system). A point meets the targets when
//! its TTFT and TPOT are at most them; the front keeps the points no other beats on both
//! axes, each with what limits it: the largest term of its step, the queue when requests
//! wait for a slot, or for a disaggregated point the pool whose capacity binds.

use crate::deploy::{Deployment, KvLink, Pool};
use crate::error::{Error, Result};
use crate::ops::{Parallel, Pass};
use crate::predict::Scenario;
use crate::serve::Workload;
use crate::spec::{ModelSpec, System};
use serde::Serialize;

/// Layouts of each pool a disaggregated deployment tries, per ranking.
pub const SHORTLIST: usize = 3;

/// Per-replica concurrencies of the aggregated ladder at most (doublings from 1).
const MAX_REPLICA_CONCURRENCY: u32 = 4096;

/// A deployment the plan prices.
enum Candidate {
    Aggregated(Parallel),
    Disaggregated(Deployment),
}

/// Client concurrency per GPU a disaggregated ladder reaches at most (doublings from 1).
const DISAGG_CONCURRENCY_PER_GPU: u32 = 256;

/// What a plan asks.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// GPUs the deployment may use at most.
    pub gpus: u32,
    pub workload: Workload,
    /// Targets, seconds.
    pub tpot_target: Option<f64>,
    pub ttft_target: Option<f64>,
    /// Whether disaggregated deployments are tried.
    pub disaggregated: bool,
}

/// One deployment at one concurrency.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlanPoint {
    /// `aggregated` or `disaggregated`.
    pub kind: &'static str,
    /// `2 x tp8ep8`, or `prefill 1 x tp8 + decode 1 x dp8ep8`.
    pub deployment: String,
    /// GPUs it occupies.
    pub gpus: u32,
    /// The client's concurrent requests over the whole deployment.
    pub concurrency: u32,
    pub tpot_ms: f64,
    pub ttft_ms: f64,
    /// 1000 / TPOT.
    pub tok_s_per_user: f64,
    /// Output tokens/s over the deployment's GPUs.
    pub tok_s_per_gpu: f64,
    pub throughput_tok_s: f64,
    /// What holds it: the step's largest term (`moe 48 %`), `queued` when requests wait for
    /// a slot, or the limiting pool of a disaggregated deployment.
    pub limited_by: String,
}

/// The plan's record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Plan {
    pub model: String,
    pub system: String,
    pub gpus: u32,
    pub input_len: u32,
    pub output_len: u32,
    pub tpot_target_ms: Option<f64>,
    pub ttft_target_ms: Option<f64>,
    /// Deployments priced, and those that could not run (a layout the model's splits or
    /// memory refuse), by kind.
    pub aggregated_evaluated: usize,
    pub disaggregated_evaluated: usize,
    pub refused: usize,
    /// Points priced, and those within the targets.
    pub points_evaluated: usize,
    pub points_meeting_targets: usize,
    /// The Pareto front, fastest per user first.
    pub front: Vec<PlanPoint>,
}

/// Every layout of `g` GPUs the model runs in on `system`, holding one sequence of `context`
/// tokens.
pub fn layouts_of(model: &ModelSpec, system: &System, g: u32, context: f64) -> Vec<Parallel> {
    let powers: Vec<u32> = (0..=g.ilog2()).map(|e| 1u32 << e).collect();
    crate::layouts::layouts_over(model, &powers, |n| n == g)
        .into_iter()
        .filter(|p| crate::layouts::runs(model, system, *p, 1.0, context))
        .collect()
}

/// The largest term of a step's breakdown, `moe 48 %`.
fn largest_term(breakdown: &std::collections::BTreeMap<&'static str, f64>) -> String {
    let total: f64 = breakdown.values().sum();
    breakdown
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .filter(|_| total > 0.0)
        .map_or_else(String::new, |(k, v)| {
            format!("{k} {:.0} %", 100.0 * v / total)
        })
}

/// Whether `p` meets the request's targets.
fn meets(r: &PlanRequest, p: &PlanPoint) -> bool {
    r.tpot_target.is_none_or(|t| p.tpot_ms <= t * 1e3)
        && r.ttft_target.is_none_or(|t| p.ttft_ms <= t * 1e3)
        && p.tpot_ms.is_finite()
        && p.ttft_ms.is_finite()
        && p.tok_s_per_gpu > 0.0
}

/// The points no other beats on both tokens/s per user and tokens/s per GPU (a tie on both
/// keeps the one that uses fewer GPUs), fastest per user first.
pub fn pareto(mut pts: Vec<PlanPoint>) -> Vec<PlanPoint> {
    pts.sort_by(|a, b| {
        b.tok_s_per_user
            .total_cmp(&a.tok_s_per_user)
            .then(b.tok_s_per_gpu.total_cmp(&a.tok_s_per_gpu))
            .then(a.gpus.cmp(&b.gpus))
    });
    let mut front: Vec<PlanPoint> = Vec::new();
    for p in pts {
        let best = front.last().map_or(f64::NEG_INFINITY, |f| f.tok_s_per_gpu);
        if p.tok_s_per_gpu > best {
            front.push(p);
        }
    }
    front
}

/// Plan `model` on `system` for `r`; `progress` is told each deployment as it is priced.
pub fn plan(
    model: &ModelSpec,
    system: &System,
    r: &PlanRequest,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Plan> {
    if r.gpus == 0 || u64::from(r.gpus) > crate::options::MAX_PLAN_GPUS {
        return Err(Error::Usage(format!(
            "plan sizes budgets of 1 to {} GPUs, not {} (--gpus, or the system's gpu_count)",
            crate::options::MAX_PLAN_GPUS,
            r.gpus
        )));
    }
    let w = r.workload;
    let context = (w.input_len + w.output_len) as f64;
    // A request past the model's window runs on no deployment: refuse it, not "no layout".
    if let Some(why) = crate::serve::beyond_context_window(model, context) {
        return Err(Error::Scenario(why));
    }
    let largest = r.gpus.min(system.spec.gpu_count);
    let sizes: Vec<u32> = (0..=largest.ilog2()).map(|e| 1u32 << e).collect();
    let by_size: Vec<(u32, Vec<Parallel>)> = sizes
        .iter()
        .map(|&g| (g, layouts_of(model, system, g, context)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if by_size.is_empty() {
        return Err(Error::Scenario(format!(
            "no layout of up to {largest} GPUs of {} runs {}: {}",
            system.spec.name,
            model.name,
            match crate::layouts::gpus_needed(model, system) {
                Some(n) if n > largest => format!("its weights need at least {n} GPUs"),
                // The weights fit; what is left holds no sequence of the request's length.
                Some(n) => format!(
                    "its weights fit on {n} GPU(s), but leave too little memory for the KV \
                     cache of one sequence of {context} tokens on up to {largest}; give more GPUs \
                     (--gpus) or a shorter request"
                ),
                None => "its splits allow none".into(),
            }
        )));
    }
    let disagg = if r.disaggregated {
        disaggregated_candidates(model, system, r, &by_size)?
    } else {
        Vec::new()
    };
    let link = KvLink::builtin()?;
    let mut candidates: Vec<Candidate> = by_size
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| Candidate::Aggregated(*p)))
        .collect();
    candidates.extend(disagg.into_iter().map(|(pre, dec)| {
        Candidate::Disaggregated(Deployment {
            prefill: pre,
            decode: dec,
            link: link.clone(),
        })
    }));
    let total = candidates.len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(candidates.len().max(1));
    let chunk = candidates.len().div_ceil(threads).max(1);
    // Each thread prices its share: (points, aggregated priced, disaggregated priced, refused).
    let parts: Vec<(Vec<PlanPoint>, usize, usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = candidates
            .chunks(chunk)
            .map(|share| {
                let done = &done;
                scope.spawn(move || {
                    let mut part = (Vec::new(), 0, 0, 0);
                    for c in share {
                        let priced = match c {
                            Candidate::Aggregated(p) => {
                                aggregated_points(model, system, *p, r).map(|pts| (pts, true))
                            }
                            Candidate::Disaggregated(d) => {
                                disaggregated_points(model, system, d, r).map(|pts| (pts, false))
                            }
                        };
                        match priced {
                            Ok((mut pts, agg)) => {
                                part.0.append(&mut pts);
                                if agg {
                                    part.1 += 1;
                                } else {
                                    part.2 += 1;
                                }
                            }
                            Err(_) => part.3 += 1,
                        }
                        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        progress(n, total);
                    }
                    part
                })
            })
            .collect();
        handles
            .into_iter()
            // A worker that panicked re-raises its panic: its share is never dropped silently.
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut points = Vec::new();
    let (mut refused, mut evaluated) = (0usize, (0usize, 0usize));
    for (mut pts, a, d, x) in parts {
        points.append(&mut pts);
        evaluated.0 += a;
        evaluated.1 += d;
        refused += x;
    }
    let points_evaluated = points.len();
    let within: Vec<PlanPoint> = points.into_iter().filter(|p| meets(r, p)).collect();
    let points_meeting_targets = within.len();
    Ok(Plan {
        model: model.name.clone(),
        system: system.spec.name.clone(),
        gpus: r.gpus,
        input_len: w.input_len,
        output_len: w.output_len,
        tpot_target_ms: r.tpot_target.map(|t| t * 1e3),
        ttft_target_ms: r.ttft_target.map(|t| t * 1e3),
        aggregated_evaluated: evaluated.0,
        disaggregated_evaluated: evaluated.1,
        refused,
        points_evaluated,
        points_meeting_targets,
        front: pareto(within),
    })
}

/// One layout's serving curve as replicas filling the budget.
fn aggregated_points(
    model: &ModelSpec,
    system: &System,
    p: Parallel,
    r: &PlanRequest,
) -> Result<Vec<PlanPoint>> {
    let s = Scenario::new(model, system, p)?;
    let g = p.gpus();
    let replicas = (r.gpus / g).max(1);
    let ladder: Vec<u32> = (0..=MAX_REPLICA_CONCURRENCY.ilog2())
        .map(|e| 1u32 << e)
        .collect();
    let label = if replicas > 1 {
        format!("{replicas} x {p}")
    } else {
        p.to_string()
    };
    let at = |cs: &[u32]| -> Result<Vec<(u32, PlanPoint)>> {
        let sweep = crate::serve::sweep(&s, cs, r.workload)?;
        Ok(sweep
            .points
            .iter()
            .filter(|pt| pt.tpot_ms.is_finite() && pt.tpot_ms > 0.0)
            .map(|pt| {
                let term = largest_term(&pt.breakdown_ms);
                let point = PlanPoint {
                    kind: "aggregated",
                    deployment: label.clone(),
                    gpus: replicas * g,
                    concurrency: pt.concurrency * replicas,
                    tpot_ms: pt.tpot_ms,
                    ttft_ms: pt.ttft_ms,
                    tok_s_per_user: 1e3 / pt.tpot_ms,
                    tok_s_per_gpu: pt.throughput_tok_s / g as f64,
                    throughput_tok_s: pt.throughput_tok_s * replicas as f64,
                    limited_by: if pt.queued > 0 {
                        format!("queued ({term})")
                    } else {
                        term
                    },
                };
                (pt.concurrency, point)
            })
            .collect())
    };
    refined(r, at(&ladder)?, |c| at(&[c]))
}

/// The ladder's points, with the concurrencies between a doubling that meets the targets and
/// the next that does not bisected down to one request: the most a deployment serves within
/// the targets lies anywhere in that gap (a quarter more than the doubling below, or nearly
/// twice it), and the front should not stop at the ladder's rung. `at` prices one
/// concurrency of the ladder's own count (per replica, or the deployment's); without a
/// target every point meets and nothing is added.
fn refined(
    r: &PlanRequest,
    ladder: Vec<(u32, PlanPoint)>,
    at: impl Fn(u32) -> Result<Vec<(u32, PlanPoint)>>,
) -> Result<Vec<PlanPoint>> {
    let mut extra = Vec::new();
    if r.tpot_target.is_some() || r.ttft_target.is_some() {
        for w in ladder.windows(2) {
            let ((lo_c, lo), (hi_c, hi)) = (&w[0], &w[1]);
            if !meets(r, lo) || meets(r, hi) {
                continue;
            }
            crate::whatif::bisect_gap(
                (*lo_c, *hi_c),
                |c| Ok(at(c)?.into_iter().next().map(|(_, p)| p)),
                |p| meets(r, p),
                &mut extra,
            )?;
        }
    }
    Ok(ladder.into_iter().map(|(_, p)| p).chain(extra).collect())
}

/// A disaggregated deployment's curve over doublings of its concurrency.
fn disaggregated_points(
    model: &ModelSpec,
    system: &System,
    d: &Deployment,
    r: &PlanRequest,
) -> Result<Vec<PlanPoint>> {
    let pre = Scenario::new(model, system, d.prefill.parallel)?;
    let dec = Scenario::new(model, system, d.decode.parallel)?;
    let gpus = d.gpus() as u32;
    let top = (DISAGG_CONCURRENCY_PER_GPU * gpus.max(1)).min(1 << 16);
    let ladder: Vec<u32> = (0..=top.ilog2()).map(|e| 1u32 << e).collect();
    let label = format!(
        "prefill {} + decode {}",
        d.prefill.label(),
        d.decode.label()
    );
    let at = |cs: &[u32]| -> Result<Vec<(u32, PlanPoint)>> {
        let sw = crate::deploy::sweep(&pre, &dec, d, cs, r.workload)?;
        Ok(sw
            .points
            .iter()
            .map(|pt| {
                let point = PlanPoint {
                    kind: "disaggregated",
                    deployment: label.clone(),
                    gpus,
                    concurrency: pt.concurrency,
                    tpot_ms: pt.tpot_ms,
                    ttft_ms: pt.ttft_ms,
                    tok_s_per_user: 1e3 / pt.tpot_ms,
                    tok_s_per_gpu: pt.throughput_per_gpu_tok_s,
                    throughput_tok_s: pt.throughput_tok_s,
                    limited_by: format!("{} pool", pt.limiting_pool),
                };
                (pt.concurrency, point)
            })
            .collect())
    };
    refined(r, at(&ladder)?, |c| at(&[c]))
}

/// How a layout serves each pool's work, from its costed passes.
#[derive(Clone, Copy)]
struct LayoutScore {
    layout: Parallel,
    /// Prompt tokens/s per GPU at a full prefill pass (the engine's token budget).
    prefill_tok_s_per_gpu: f64,
    /// One prompt's prefill pass, s.
    one_prompt: f64,
    /// Decode tokens/s per GPU at 256 sequences per replica (or one, where they do not fit).
    decode_tok_s_per_gpu: f64,
    /// The decode step at one sequence, s.
    tpot_alone: f64,
}

/// The shortlisted prefill and decode layouts, and every pair of worker counts of them that
/// fits the budget.
fn disaggregated_candidates(
    model: &ModelSpec,
    system: &System,
    r: &PlanRequest,
    by_size: &[(u32, Vec<Parallel>)],
) -> Result<Vec<(Pool, Pool)>> {
    let w = r.workload;
    let input = w.input_len as f64;
    let all: Vec<Parallel> = by_size.iter().flat_map(|(_, l)| l.clone()).collect();
    let mut scored = Vec::new();
    for p in &all {
        let s = Scenario::new(model, system, *p)?;
        let ev = s.evaluator()?;
        let g = p.gpus() as f64;
        let budget = system.engine.max_num_batched_tokens as f64;
        let per_pass = (budget / input).floor().max(1.0) * p.dp as f64;
        let full = ev.evaluate(&Pass::prefill(per_pass, input, 0.0)).total;
        let one = ev
            .evaluate(&Pass::prefill(1.0, input, 0.0).dealt_whole(p.dp))
            .total;
        let big = 256.0 * p.dp as f64;
        let ctx = input + w.output_len as f64 / 2.0;
        let fits_big = crate::layouts::runs(model, system, *p, big, ctx + w.output_len as f64);
        let batch = if fits_big { big } else { p.dp as f64 };
        let step = ev.evaluate(&Pass::decode(batch, ctx)).total;
        let alone = ev.evaluate(&Pass::decode(1.0, ctx)).total;
        scored.push(LayoutScore {
            layout: *p,
            prefill_tok_s_per_gpu: per_pass * input / (full * g),
            one_prompt: one,
            decode_tok_s_per_gpu: batch / (step * g),
            tpot_alone: alone,
        });
    }
    let pick = |key: &dyn Fn(&LayoutScore) -> f64| -> Vec<Parallel> {
        let mut v = scored.clone();
        v.sort_by(|a, b| key(b).total_cmp(&key(a)));
        v.into_iter().take(SHORTLIST).map(|x| x.layout).collect()
    };
    let mut prefill = pick(&|x| x.prefill_tok_s_per_gpu);
    prefill.extend(pick(&|x| -x.one_prompt));
    let mut decode = pick(&|x| x.decode_tok_s_per_gpu);
    decode.extend(pick(&|x| -x.tpot_alone));
    for v in [&mut prefill, &mut decode] {
        let mut seen = Vec::new();
        v.retain(|p| {
            let new = !seen.contains(p);
            seen.push(*p);
            new
        });
    }
    // The pools' GPU ratio is what shapes a per-GPU curve: prefill workers in doublings,
    // the decode workers filling what the budget leaves.
    let mut out = Vec::new();
    for pp in &prefill {
        for dp in &decode {
            let (gp, gd) = (pp.gpus(), dp.gpus());
            let mut pw = 1;
            while pw * gp + gd <= r.gpus {
                let dw = (r.gpus - pw * gp) / gd;
                out.push((
                    Pool {
                        workers: pw,
                        parallel: *pp,
                        batch: None,
                    },
                    Pool {
                        workers: dw,
                        parallel: *dp,
                        batch: None,
                    },
                ));
                pw *= 2;
            }
        }
    }
    Ok(out)
}
