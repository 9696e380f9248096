//! Design-space sweeps at scale: the Cartesian product of systems, layouts, quantizations,
//! batch sizes and context lengths, evaluated on every core and streamed, or reduced to the
//! Pareto front of TPOT against throughput per GPU (under `--objective cost` or `energy`,
//! of $ or joules per output token against tokens/s per user), or to the best points by an
//! objective.
//!
//! Every point carries its watts per GPU, joules per output token and, where the system has
//! a price, $ per million tokens: the power model reads the work of the same priced step
//! (`cost::power`), and the money the one rule of `economics`, as `predict` and `compare`
//! read them.
//!
//! Each (system, layout, quantization) builds its evaluator once (identical layers are
//! costed once inside it); the batch × context grid is split into chunks that worker
//! threads take in turn, and the writer emits chunks in order, so output is deterministic.

use crate::cli::Objective;
use crate::cost::memory::{CacheFootprint, Residency};
use crate::cost::power::{joules_per_token, PowerModel};
use crate::cost::{CostParams, Evaluator, Parallel};
use crate::economics::Pricing;
use crate::error::{Error, Result};
use crate::predict::{kv_tokens, sequences, Scenario};
use crate::serve::fits;
use crate::spec::{ModelSpec, System, WeightFormat};
use serde::Serialize;
use std::collections::BTreeMap;
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
    /// Watts per GPU over the step (`cost::power`; `None`: the GPU has no board power).
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all the GPUs, J.
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens (`None`: the system has no price).
    pub usd_per_million_output_tokens: Option<f64>,
    /// Per million tokens in and out (`Selection::tokens_per_output` per output token).
    pub usd_per_million_total_tokens: Option<f64>,
}

impl DesignPoint {
    /// The point's figure under `objective`, lower is better (throughput negated);
    /// `None` where the point has none (no price, no power model).
    pub fn objective(&self, objective: Objective) -> Option<f64> {
        match objective {
            Objective::Latency => Some(self.tpot_ms),
            Objective::Throughput => Some(-self.throughput_per_gpu_tok_s),
            Objective::Cost => self.usd_per_million_output_tokens,
            Objective::Energy => self.joules_per_token,
        }
    }

    /// Output tokens per second one sequence sees (1000 / TPOT).
    pub fn tok_s_per_user(&self) -> f64 {
        1e3 / self.tpot_ms
    }
}

/// Which points a run keeps and how it orders them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    /// Rank by this, lowest first (throughput highest first); `None`: rows stream in the
    /// grid's order and the front is ordered by TPOT.
    pub objective: Option<Objective>,
    /// Points whose TPOT is above this, ms, are counted and neither written nor ranked.
    pub tpot_target_ms: Option<f64>,
    /// With an objective and no front: how many of the best points are kept.
    pub top: usize,
    /// Tokens in and out per output token (`economics::tokens_per_output`), for $ per
    /// million total tokens.
    pub tokens_per_output: f64,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            objective: None,
            tpot_target_ms: None,
            top: 20,
            tokens_per_output: crate::economics::tokens_per_output(1000, 1000),
        }
    }
}

impl Selection {
    /// `a` before `b`: by the objective (a point without a figure last), then in the grid's
    /// order, so that ranking is deterministic.
    fn order(&self, objective: Objective, a: &DesignPoint, b: &DesignPoint) -> std::cmp::Ordering {
        let key = |p: &DesignPoint| p.objective(objective).unwrap_or(f64::INFINITY);
        key(a)
            .total_cmp(&key(b))
            .then(a.combo.cmp(&b.combo))
            .then(a.batch.cmp(&b.batch))
            .then(a.context.cmp(&b.context))
    }

    /// Keep the `top` best of `pts` by `objective`, in order, once they are more than
    /// `slack` past it (`slack` 0: now).
    fn keep_best(&self, objective: Objective, pts: &mut Vec<DesignPoint>, slack: usize) {
        if pts.len() <= self.top + slack {
            return;
        }
        if self.top == 0 {
            pts.clear();
            return;
        }
        pts.select_nth_unstable_by(self.top - 1, |a, b| self.order(objective, a, b));
        pts.truncate(self.top);
    }

    /// The figure the front minimises against TPOT: throughput per GPU (negated), or under
    /// `--objective cost|energy` $ or joules per output token.
    fn front_axis(&self) -> fn(&DesignPoint) -> f64 {
        match self.objective {
            Some(Objective::Cost) => |p| p.usd_per_million_output_tokens.unwrap_or(f64::INFINITY),
            Some(Objective::Energy) => |p| p.joules_per_token.unwrap_or(f64::INFINITY),
            _ => |p| -p.throughput_per_gpu_tok_s,
        }
    }
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
    /// Points that fit but miss `--tpot-target`: counted, never written, ranked or put on
    /// the front.
    pub points_over_target: u64,
    /// Pareto-optimal points (with `--pareto`): no other fitting point is both faster per
    /// token and higher in throughput per GPU (under `--objective cost|energy`: both faster
    /// per token and cheaper, or less energy, per output token), ordered by the objective
    /// (by TPOT without one).
    pub pareto: Vec<BTreeMap<&'static str, serde_json::Value>>,
    /// With `--objective` and no `--pareto`: the best `--top` points, best first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<BTreeMap<&'static str, serde_json::Value>>,
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
    /// The model's context window, tokens (`serve::beyond_context_window`; infinite when the
    /// model states none): a longer context does not fit whatever the memory.
    window: f64,
    /// The GPU's power model and the system's price (`None`: not described).
    power: Option<PowerModel>,
    pricing: Option<Pricing>,
}

impl Prepared<'_> {
    /// The decode step as the engine schedules it from the evaluator's pass `pass` at
    /// `running` sequences, seconds ([`Scenario::engine_step`], default parameters).
    fn step(&self, pass: f64, running: f64) -> f64 {
        let cpu = &self.system.engine.cpu;
        let overlap = cpu.overlaps(self.parallel.pp, crate::spec::engine::Drafting::None);
        cpu.engine_step(pass, self.ev.params.step_overhead, running, overlap)
    }

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
    /// Fitting points over the TPOT target.
    over_target: u64,
    /// The chunk's best points by the objective (an objective without `--pareto`).
    best: Vec<DesignPoint>,
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
    "system,parallel,quant,batch,context,tpot_ms,throughput_tok_s,throughput_per_gpu_tok_s,fits,\
     watts_per_gpu,joules_per_token,usd_per_million_output_tokens,usd_per_million_total_tokens";

/// Keep the points no other point dominates (lower TPOT and higher throughput per GPU).
pub fn pareto_front(pts: Vec<DesignPoint>) -> Vec<DesignPoint> {
    pareto_front_by(pts, |p| -p.throughput_per_gpu_tok_s)
}

/// Keep the points no other point dominates in lower TPOT and lower `y`, ordered by TPOT.
pub fn pareto_front_by(
    mut pts: Vec<DesignPoint>,
    y: impl Fn(&DesignPoint) -> f64,
) -> Vec<DesignPoint> {
    pts.sort_by(|a, b| a.tpot_ms.total_cmp(&b.tpot_ms).then(y(a).total_cmp(&y(b))));
    let mut front: Vec<DesignPoint> = Vec::new();
    let mut best = f64::INFINITY;
    for p in pts {
        let v = y(&p);
        if v < best {
            best = v;
            front.push(p);
        }
    }
    front
}

/// A point with its combination's names, as the front and the ranked list write it.
fn point_record(c: &Combo, p: &DesignPoint) -> BTreeMap<&'static str, serde_json::Value> {
    let mut m = BTreeMap::new();
    m.insert("system", serde_json::json!(c.system));
    m.insert("parallel", serde_json::json!(c.parallel));
    m.insert("quant", serde_json::json!(c.quant));
    m.insert("batch", serde_json::json!(p.batch));
    m.insert("context", serde_json::json!(p.context));
    m.insert("tpot_ms", serde_json::json!(p.tpot_ms));
    m.insert("tok_s_per_user", serde_json::json!(p.tok_s_per_user()));
    m.insert("throughput_tok_s", serde_json::json!(p.throughput_tok_s));
    m.insert(
        "throughput_per_gpu_tok_s",
        serde_json::json!(p.throughput_per_gpu_tok_s),
    );
    m.insert("watts_per_gpu", serde_json::json!(p.watts_per_gpu));
    m.insert("joules_per_token", serde_json::json!(p.joules_per_token));
    m.insert(
        "usd_per_million_output_tokens",
        serde_json::json!(p.usd_per_million_output_tokens),
    );
    m.insert(
        "usd_per_million_total_tokens",
        serde_json::json!(p.usd_per_million_total_tokens),
    );
    m
}

/// Why `objective` cannot rank the points of `system` (labelled `label`), if it cannot: a
/// system without a price has no cost, a GPU without a board power no energy. Checked
/// before a run, so that no ranking silently puts such points last.
pub fn refusal(objective: Objective, label: &str, system: &System) -> Option<String> {
    let no_power = system.gpu.board_power.is_none();
    let pricing = Pricing::of(&system.spec).ok().flatten();
    match objective {
        Objective::Cost if pricing.is_none() => Some(format!(
            "--objective cost: system {label} has no price; add price_per_gpu_hour (a rent, \
             such as \"2.50 USD/h\"), or capital_per_gpu, amortisation and electricity (owned: \
             \"8500 USD\", \"3 years\", \"0.12 USD/kWh\") to its description, or give them \
             with --set, e.g. --set system.price_per_gpu_hour=\"2.50 USD/h\""
        )),
        Objective::Cost if no_power && matches!(pricing, Some(Pricing::Owned { .. })) => {
            Some(format!(
                "--objective cost: system {label} is owned (it pays for its electricity) but \
                 its GPU {} has no board_power, so its watts, and the electricity, are unknown; \
                 add board_power to the GPU's description",
                system.gpu.name
            ))
        }
        Objective::Energy if no_power => Some(format!(
            "--objective energy: the GPU {} of system {label} has no board_power, so no \
             watts; add board_power to the GPU's description",
            system.gpu.name
        )),
        _ => None,
    }
}

/// Run the grid. Rows stream to `sink` (CSV or JSON lines) unless `pareto` is set or
/// `selection` has an objective (then its best points are written, best first, once the
/// grid is done); with `progress`, a bar with an ETA is drawn on stderr (only when stderr
/// is a terminal; it appears once the run passes a second). A grid where no (system,
/// layout, quantization) can be evaluated is an error naming why each was refused, never
/// zero points; so is an objective some system has no figure for ([`refusal`]).
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
    selection: &Selection,
    sink: &mut dyn Write,
    progress: bool,
) -> Result<(Vec<Combo>, ExploreSummary)> {
    let start = Instant::now();
    if let Some(o) = selection.objective {
        if let Some(why) = systems.iter().find_map(|(l, s)| refusal(o, l, s)) {
            return Err(Error::Usage(why));
        }
    }
    // Ranked without a front: only the best points are kept, and written at the end.
    let ranked = selection.objective.filter(|_| !pareto);
    let front_axis = selection.front_axis();
    // At one batch the least TPOT has the most throughput: it dominates its row on the
    // default front, not on a front of money or energy (watts change with the context).
    let row_min_tpot = !matches!(
        selection.objective,
        Some(Objective::Cost | Objective::Energy)
    );
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
                            window: m
                                .config
                                .max_position_embeddings
                                .map_or(f64::INFINITY, f64::from),
                            power: PowerModel::of(&sys.gpu),
                            pricing: Pricing::of(&sys.spec).ok().flatten(),
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
    let mut best_parts: Vec<DesignPoint> = Vec::new();
    let mut over_target = 0u64;
    let mut front_parts: Vec<DesignPoint> = Vec::new();
    // Per combination: points that do not fit, and the first of them (batch, context).
    let mut not_fitting: Vec<(u64, Option<(u32, u32)>)> = vec![(0, None); prepared.len()];
    let mut done_points = 0u64;
    let bar = progress
        .then(|| {
            crate::progress::terminal_bar(
                total as u64,
                "explore {bar:40} {pos}/{len} points, {per_sec}, ETA {eta}",
            )
        })
        .flatten();
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
                let gpu = &pr.system.gpu;
                let gpus = pr.gpus as u32;
                let mut out = Chunk::default();
                let mut times = Vec::with_capacity(contexts.len());
                let mut works = Vec::with_capacity(contexts.len());
                let mut row: Vec<DesignPoint> = Vec::new();
                for &b in &batches[b0..b1] {
                    // At one batch, throughput is batch / TPOT: the fitting point of least
                    // TPOT dominates the rest of the row, so only it can reach the front.
                    let mut row_best: Option<DesignPoint> = None;
                    row.clear();
                    // Context-free operators once per batch, attention per context.
                    pr.ev
                        .decode_points(b as f64, context_values, &mut times, Some(&mut works));
                    for (((&ctx, &cf), &pass), &work) in
                        contexts.iter().zip(context_values).zip(&times).zip(&works)
                    {
                        // The step as the engine schedules it, as `predict` prices it.
                        let t = pr.step(pass, b as f64);
                        // The tests of `serve::fits`: the context within the model's window,
                        // and whole sequences of it in the KV budget, at least the batch.
                        let tokens = kv_tokens(
                            pr.kv_budget,
                            pr.cache.bytes_per_sequence(cf + 1.0),
                            cf,
                            pr.dp,
                        );
                        if cf > pr.window || sequences(tokens, cf) < b as f64 {
                            out.not_fitting += 1;
                            out.first_not_fitting.get_or_insert((b, ctx));
                            continue;
                        }
                        let tpot_ms = t * 1e3;
                        if selection.tpot_target_ms.is_some_and(|x| tpot_ms > x) {
                            out.over_target += 1;
                            continue;
                        }
                        let thr = b as f64 / t;
                        // Watts, joules and money as `predict` and `compare` read them.
                        let watts = pr.power.map(|m| m.watts_for(work, t, gpu));
                        let cost = pr.pricing.and_then(|q| {
                            q.point_cost(gpus, watts, thr, selection.tokens_per_output)
                        });
                        let p = DesignPoint {
                            combo: ci,
                            batch: b,
                            context: ctx,
                            tpot_ms,
                            throughput_tok_s: thr,
                            throughput_per_gpu_tok_s: thr / pr.gpus,
                            fits: true,
                            watts_per_gpu: watts,
                            joules_per_token: watts.and_then(|w| joules_per_token(w, gpus, thr)),
                            usd_per_million_output_tokens: cost
                                .and_then(|c| c.usd_per_million_output_tokens),
                            usd_per_million_total_tokens: cost
                                .and_then(|c| c.usd_per_million_total_tokens),
                        };
                        if pareto {
                            if !row_min_tpot {
                                row.push(p);
                            } else if row_best.is_none_or(|r| p.tpot_ms < r.tpot_ms) {
                                row_best = Some(p);
                            }
                        } else if let Some(o) = ranked {
                            out.best.push(p);
                            selection.keep_best(o, &mut out.best, 4096);
                        } else {
                            render(&mut out.text, combos, &p, stream);
                        }
                    }
                    out.front.extend(row_best);
                    if !row.is_empty() {
                        out.front
                            .extend(pareto_front_by(std::mem::take(&mut row), front_axis));
                    }
                }
                if pareto {
                    out.front = pareto_front_by(std::mem::take(&mut out.front), front_axis);
                }
                if let Some(o) = ranked {
                    selection.keep_best(o, &mut out.best, 0);
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
                if let Some(o) = ranked {
                    best_parts.extend(c.best);
                    selection.keep_best(o, &mut best_parts, 4096);
                }
                over_target += c.over_target;
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
    // The best points, best first, written as the rows would have streamed.
    if let Some(o) = ranked {
        selection.keep_best(o, &mut best_parts, 0);
        best_parts.sort_by(|a, b| selection.order(o, a, b));
        let mut text = String::new();
        for p in &best_parts {
            render(&mut text, &combos, p, stream);
        }
        let _ = sink.write_all(text.as_bytes());
    }
    let seconds = start.elapsed().as_secs_f64();
    let pareto_rows = if pareto {
        let mut front = pareto_front_by(front_parts, front_axis);
        if let Some(o) = selection.objective {
            front.sort_by(|a, b| selection.order(o, a, b));
        }
        front
            .iter()
            .map(|p| point_record(&combos[p.combo], p))
            .collect()
    } else {
        Vec::new()
    };
    let top = best_parts
        .iter()
        .map(|p| point_record(&combos[p.combo], p))
        .collect();
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
            points_over_target: over_target,
            pareto: pareto_rows,
            top,
        },
    ))
}
