//! Design-space sweeps at scale: the Cartesian product of systems, layouts, quantizations,
//! batch sizes and context lengths, evaluated on every core and streamed, or reduced to the
//! Pareto front of TPOT against throughput per GPU.
//!
//! Each (system, layout, quantization) builds its evaluator once (identical layers are
//! costed once inside it); the batch × context grid is split into chunks that worker
//! threads take in turn, and the writer emits chunks in order, so output is deterministic.

use crate::cost::memory::{CacheFootprint, Residency};
use crate::cost::{CostParams, Evaluator, Parallel};
use crate::error::{Error, Result};
use crate::predict::{kv_tokens, sequences, Scenario};
use crate::serve::fits;
use crate::spec::{ModelSpec, System, WeightFormat};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

/// One evaluated design point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DesignPoint {
    /// Index into `Explore::combos`.
    pub combo: usize,
    pub batch: u32,
    pub context: u32,
    pub tpot_ms: f64,
    pub throughput_tok_s: f64,
    pub throughput_per_gpu_tok_s: f64,
    /// Weights and this point's KV cache fit in memory: always true, since points that do
    /// not fit are counted, not written (the column stays for readers of older output).
    pub fits: bool,
}

/// A (system, layout, quantization) the grid runs over.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Combo {
    pub system: String,
    pub parallel: String,
    pub quant: String,
    pub gpus: u32,
}

/// Summary printed after a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExploreSummary {
    pub points_evaluated: u64,
    pub seconds: f64,
    pub points_per_second: f64,
    pub threads: usize,
    /// Combinations that could not be evaluated, with the reason (`does not fit: …` where
    /// the weights leave no room, or one sequence of the shortest context does not fit).
    pub skipped: Vec<String>,
    /// Points whose batch does not fit in memory at their context: evaluated, never written
    /// or put on the front.
    pub points_not_fitting: u64,
    /// Per combination with such points: how many, and the first with its reason.
    pub not_fitting: Vec<String>,
    /// Pareto-optimal points (with `--pareto`): no other fitting point is both faster per
    /// token and higher in throughput per GPU.
    pub pareto: Vec<BTreeMap<&'static str, serde_json::Value>>,
}

struct Prepared<'a> {
    ev: Evaluator<'a>,
    model: &'a ModelSpec,
    system: &'a System,
    parallel: Parallel,
    gpus: f64,
    /// KV budget per GPU and the cache one sequence holds per GPU: fit test per point.
    kv_budget: f64,
    cache: CacheFootprint,
    dp: f64,
}

impl Prepared<'_> {
    /// The combination as a scenario with default parameters.
    fn scenario(&self) -> Scenario<'_> {
        Scenario {
            model: self.model,
            system: self.system,
            parallel: self.parallel,
            params: CostParams::default_for(self.system),
            calibration: None,
        }
    }
}

/// What one worker's chunk of the grid comes to.
#[derive(Default)]
struct Chunk {
    /// Rendered rows (streaming).
    text: String,
    /// The chunk's Pareto front (with `--pareto`).
    front: Vec<DesignPoint>,
    /// Points evaluated.
    count: u64,
    /// Points that do not fit, and the first of them (batch, context).
    not_fitting: u64,
    first_not_fitting: Option<(u32, u32)>,
}

/// Row renderer for streaming output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Csv,
    JsonLines,
    None,
}

fn render(out: &mut String, combos: &[Combo], p: &DesignPoint, stream: Stream) {
    crate::export::rows::ExploreRow::new(&combos[p.combo], p).write(out, stream);
}

pub const CSV_HEADER: &str =
    "system,parallel,quant,batch,context,tpot_ms,throughput_tok_s,throughput_per_gpu_tok_s,fits";

/// Keep the points no other point dominates (lower TPOT and higher throughput per GPU).
pub fn pareto_front(mut pts: Vec<DesignPoint>) -> Vec<DesignPoint> {
    pts.sort_by(|a, b| {
        a.tpot_ms.total_cmp(&b.tpot_ms).then(
            b.throughput_per_gpu_tok_s
                .total_cmp(&a.throughput_per_gpu_tok_s),
        )
    });
    let mut front: Vec<DesignPoint> = Vec::new();
    let mut best = f64::NEG_INFINITY;
    for p in pts {
        if p.throughput_per_gpu_tok_s > best {
            best = p.throughput_per_gpu_tok_s;
            front.push(p);
        }
    }
    front
}

/// Run the grid. Rows stream to `sink` (CSV or JSON lines) unless `pareto` is set; with
/// `progress`, a bar with an ETA is drawn on stderr (only when stderr is a terminal; it
/// appears once the run passes a second). A grid where no (system, layout, quantization)
/// can be evaluated is an error naming why each was refused, never zero points.
#[allow(clippy::too_many_arguments)]
pub fn explore(
    model: &ModelSpec,
    systems: &[(String, System)],
    layouts: &[Option<Parallel>],
    quants: &[Option<WeightFormat>],
    batches: &[u32],
    contexts: &[u32],
    stream: Stream,
    pareto: bool,
    sink: &mut dyn Write,
    progress: bool,
) -> Result<(Vec<Combo>, ExploreSummary)> {
    let start = Instant::now();
    // Models per quantization (owned here so evaluators can borrow them).
    let mut models = Vec::with_capacity(quants.len());
    for q in quants {
        let mut m = model.clone();
        if let Some(f) = q {
            if m.moe().is_some() {
                m.quantization.routed_experts = Some(*f);
            } else {
                m.quantization.default = *f;
            }
        }
        models.push(m);
    }
    let shortest = contexts.iter().copied().min().unwrap_or(0) as f64;
    let mut combos = Vec::new();
    let mut prepared = Vec::new();
    let mut skipped = Vec::new();
    for (label, sys) in systems {
        for lay in layouts {
            let par = match lay {
                Some(p) => *p,
                None => Parallel::tp(sys.spec.gpu_count),
            };
            for (qi, q) in quants.iter().enumerate() {
                let m = &models[qi];
                let qname = q
                    .map(|f| f.to_string())
                    .unwrap_or_else(|| "as-shipped".into());
                let params = CostParams::default_for(sys);
                let refusal = Evaluator::new(m, sys, par, params).and_then(|ev| {
                    // Weights with no room for a KV cache, or for one sequence of the
                    // shortest context: no point of the combination can run.
                    let sc = Scenario {
                        model: m,
                        system: sys,
                        parallel: par,
                        params,
                        calibration: None,
                    };
                    fits(&sc, 1.0, shortest)?;
                    Ok(ev)
                });
                match refusal {
                    Ok(ev) => {
                        let eng = &sys.engine;
                        let held = Residency::new(m, &par);
                        let budget = eng.kv_budget(sys.gpu.memory_capacity.0, held.weight_bytes());
                        combos.push(Combo {
                            system: label.clone(),
                            parallel: par.to_string(),
                            quant: qname,
                            gpus: par.gpus(),
                        });
                        prepared.push(Prepared {
                            ev,
                            model: m,
                            system: sys,
                            parallel: par,
                            gpus: par.gpus() as f64,
                            kv_budget: budget,
                            cache: held.cache_footprint(f64::INFINITY),
                            dp: par.dp as f64,
                        });
                    }
                    Err(e) => skipped.push(format!("{label} {par} {qname}: {e}")),
                }
            }
        }
    }
    if prepared.is_empty() {
        return Err(Error::Scenario(format!(
            "no design point can be evaluated: every system, layout and quantization was refused:\n  {}",
            skipped.join("\n  ")
        )));
    }
    let per_combo = batches.len() * contexts.len();
    let context_values: Vec<f64> = contexts.iter().map(|&c| c as f64).collect();
    let context_values = &context_values;
    let total = prepared.len() * per_combo;
    // Chunks of whole context rows: (combo, batch index range).
    let rows_per_chunk = (16_384 / contexts.len().max(1)).max(1);
    let chunks_per_combo = batches.len().div_ceil(rows_per_chunk);
    let n_chunks = prepared.len() * chunks_per_combo;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(n_chunks.max(1));
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::sync_channel::<(usize, Chunk)>(threads * 4);
    if stream == Stream::Csv && !pareto {
        let _ = writeln!(sink, "{CSV_HEADER}");
    }
    let mut front_parts: Vec<DesignPoint> = Vec::new();
    // Per combination: points that do not fit, and the first of them (batch, context).
    let mut not_fitting: Vec<(u64, Option<(u32, u32)>)> = vec![(0, None); prepared.len()];
    let mut done_points = 0u64;
    let bar = (progress && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(total as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "explore {bar:40} {pos}/{len} points, {per_sec}, ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let next = &next;
            let prepared = &prepared;
            let combos = &combos;
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n_chunks {
                    break;
                }
                let ci = i / chunks_per_combo;
                let b0 = (i % chunks_per_combo) * rows_per_chunk;
                let b1 = (b0 + rows_per_chunk).min(batches.len());
                let pr = &prepared[ci];
                let mut out = Chunk::default();
                let mut times = Vec::with_capacity(contexts.len());
                for &b in &batches[b0..b1] {
                    // At one batch, throughput is batch / TPOT: the fitting point of least
                    // TPOT dominates the rest of the row, so only it can reach the front.
                    let mut row_best: Option<DesignPoint> = None;
                    // Context-free operators once per batch, attention per context.
                    pr.ev.decode_times(b as f64, context_values, &mut times);
                    for ((&ctx, &cf), &t) in contexts.iter().zip(context_values).zip(&times) {
                        // The memory report's test (`serve::does_not_fit`): whole sequences
                        // of this context in the KV budget, at least the batch.
                        let tokens = kv_tokens(
                            pr.kv_budget,
                            pr.cache.bytes_per_sequence(cf + 1.0),
                            cf,
                            pr.dp,
                        );
                        if sequences(tokens, cf) < b as f64 {
                            out.not_fitting += 1;
                            out.first_not_fitting.get_or_insert((b, ctx));
                            continue;
                        }
                        let thr = b as f64 / t;
                        let p = DesignPoint {
                            combo: ci,
                            batch: b,
                            context: ctx,
                            tpot_ms: t * 1e3,
                            throughput_tok_s: thr,
                            throughput_per_gpu_tok_s: thr / pr.gpus,
                            fits: true,
                        };
                        if pareto {
                            if row_best.is_none_or(|r| p.tpot_ms < r.tpot_ms) {
                                row_best = Some(p);
                            }
                        } else {
                            render(&mut out.text, combos, &p, stream);
                        }
                    }
                    out.front.extend(row_best);
                }
                if pareto {
                    out.front = pareto_front(std::mem::take(&mut out.front));
                }
                out.count = ((b1 - b0) * contexts.len()) as u64;
                if tx.send((i, out)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        // Write chunks in order as they arrive.
        let mut pending: BTreeMap<usize, Chunk> = BTreeMap::new();
        let mut want = 0usize;
        let mut last_report = Instant::now();
        for (i, chunk) in rx {
            pending.insert(i, chunk);
            while let Some(c) = pending.remove(&want) {
                let _ = sink.write_all(c.text.as_bytes());
                front_parts.extend(c.front);
                done_points += c.count;
                let nf = &mut not_fitting[want / chunks_per_combo];
                nf.0 += c.not_fitting;
                if nf.1.is_none() {
                    nf.1 = c.first_not_fitting;
                }
                want += 1;
            }
            if let Some(b) = &bar {
                if start.elapsed().as_secs_f64() > 1.0 && last_report.elapsed().as_secs_f64() > 0.25
                {
                    last_report = Instant::now();
                    b.set_position(done_points);
                }
            }
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let seconds = start.elapsed().as_secs_f64();
    let pareto_rows = if pareto {
        pareto_front(front_parts)
            .iter()
            .map(|p| {
                let c = &combos[p.combo];
                let mut m = BTreeMap::new();
                m.insert("system", serde_json::json!(c.system));
                m.insert("parallel", serde_json::json!(c.parallel));
                m.insert("quant", serde_json::json!(c.quant));
                m.insert("batch", serde_json::json!(p.batch));
                m.insert("context", serde_json::json!(p.context));
                m.insert("tpot_ms", serde_json::json!(p.tpot_ms));
                m.insert("throughput_tok_s", serde_json::json!(p.throughput_tok_s));
                m.insert(
                    "throughput_per_gpu_tok_s",
                    serde_json::json!(p.throughput_per_gpu_tok_s),
                );
                m
            })
            .collect()
    } else {
        Vec::new()
    };
    let points_not_fitting = not_fitting.iter().map(|n| n.0).sum();
    let not_fitting = prepared
        .iter()
        .zip(&combos)
        .zip(&not_fitting)
        .filter_map(|((pr, c), &(n, first))| {
            let (b, ctx) = first?;
            // The reason in the words every command uses, from the first such point.
            let why = fits(&pr.scenario(), b as f64, ctx as f64)
                .err()
                .map_or_else(|| "does not fit".to_string(), |e| e.to_string());
            Some(format!(
                "{} {} {}: {n} points do not fit; the first, batch {b} at context {ctx}: {why}",
                c.system, c.parallel, c.quant
            ))
        })
        .collect();
    Ok((
        combos,
        ExploreSummary {
            points_evaluated: total as u64,
            seconds,
            points_per_second: total as f64 / seconds.max(1e-9),
            threads,
            skipped,
            points_not_fitting,
            not_fitting,
            pareto: pareto_rows,
        },
    ))
}
