//! The serving curve: TPOT, TTFT and throughput against concurrency, the plateau and what
//! sets it, and the KV-cache limit on concurrency.
//!
//! Model (closed loop, as a benchmark with C concurrent clients behaves):
//! - In flight: `running = min(C, client cap, max_num_seqs, KV, a calibrated in-flight
//!   cap)`; the rest queue for a slot. KV is allocated on demand in blocks (the engine's
//!   `kv` policy), so a running request holds `input + output / 2` tokens on average,
//!   rounded up to whole blocks, and the cache holds `KV tokens / held` of them.
//!   Preemption: in steady state the scheduler admits a waiting request when a finished one
//!   frees its blocks, so the held tokens stay at the cache size and requests' growth is
//!   paid for by the blocks completions free; no request is preempted on average. A burst
//!   start admits as many prompts as fit (`KV tokens / input`), more than can finish, and
//!   preempts (recomputes) the excess as they grow: a transient of the first wave that this
//!   steady-state model leaves out.
//! - Decode: each step advances every running sequence by one token, at the mean context
//!   over the generation (`input + output / 2`).
//! - Prefill: each request needs one prefill of its prompt. In steady state `running /
//!   output` new prompts start per decode step. Where prefill mixes with decode (vLLM's
//!   chunked prefill, TensorRT-LLM's in-flight batching) their tokens join the decode step (a
//!   mixed pass: more rows in every GEMM, more tokens routed to the experts the decode batch
//!   already reads, causal attention within each prompt), in chunks of the token budget left
//!   after the decode tokens. Where it does not (SGLang's prefill-first scheduler, or no
//!   chunked prefill) they run as passes of their own while the decodes wait.
//! - The step: the GPU's kernels beside the engine's CPU work per step (fixed plus per
//!   running sequence): `max` of the two with overlap scheduling, their sum without. The API
//!   server and the client handle one streamed chunk per token per request, pipelined beside
//!   the engine: they bound the rate tokens are seen at.
//! - TTFT: the prompt's own prefill (its chunks, each a step long, when chunked, and never
//!   less than the prompt alone on an idle engine) plus an
//!   M/D/1 wait behind other prefills, `ρ s / (2(1 − ρ))` with ρ the prefill utilisation,
//!   plus the wait for a running slot when C exceeds `running`, plus half a step (a prompt
//!   that arrives while a step runs is scheduled when it ends) and, with overlap scheduling,
//!   one step (the first token leaves a step after the one that computed it). ρ is the
//!   prompt tokens wanted per step over the token budget left (chunked), or prefill time per
//!   step (separate passes).
//!   A client that starts with a burst sends every prompt at once: that first wave's TTFT is
//!   its share of the whole wave's prefill. With fixed lengths the prompts one step prefills together
//!   then decode in lockstep, finish together and return together, so every later wave
//!   arrives in groups of as many prompts as one step's token budget holds, each group
//!   prefilled in one step beside the others' decodes; with drawn lengths they finish apart
//!   and later requests arrive desynchronized (steady state). The client's mean TTFT weights
//!   the first wave by its share of the client's prompts (C / num_prompts, or 1/k for a run
//!   of k × C prompts). That wave formula stands only for runs too long to simulate: a
//!   bounded burst run (num_prompts, or k × C) reports the mean TTFT of
//!   [`crate::harness`]'s simulation of the harness against this engine's steps (the first
//!   wave queueing through the token budget, later requests sent as earlier ones finish,
//!   drifting apart with drawn lengths, every request weighed once).
//! - Drawn lengths (`lengths = "varied"`, uniform in `[range_ratio · L, L]`) hold and
//!   compute their mean lengths; a client that starts the server with `--max-num-seqs C`
//!   (`sets_max_num_seqs`) lifts the engine's own scheduler limit.
//! - The closed loop: a running request cycles through its TTFT and `output − 1` decode
//!   steps, and its client sends the next prompt when it finishes, so the other running
//!   requests start `(running − 1) / steps` prompts per step, where `steps` counts the
//!   engine steps of a cycle (the prompt's own chunk steps, however long they run, its waits
//!   in steps of the typical length, and its `output − 1` decode steps): a prompt sent while
//!   another's long prefill step runs is prefilled in a later step, not in steps of a
//!   decode's length that never ran. Those prompts lengthen
//!   the steps and the prefill queue, which lengthens the cycle: the prompt rate is the fixed
//!   point of that loop (found bracketed), and the queue stays below saturation because a longer
//!   wait means fewer prompts sent. With long outputs the rate is `(running − 1) / output`;
//!   with short ones the prefill queue sets it.
//! - A prefill-first engine (SGLang: waiting prompts run before any decode) keeps a bounded
//!   burst run's waves together: a wave is prefilled whole, decodes together, finishes
//!   together and returns together. There a request's inter-token time holds only the part
//!   of its wave's prefill after its own first token, and TPOT is the simulation's mean
//!   inter-token time instead of the steady state's step (the difference under `prefill`).
//! - `E2E = TTFT + (output − 1) × TPOT_itl`; throughput (Little's law over the running
//!   requests) = running × output / cycle, which is C × output / E2E in steady state.
//!   TPOT is reported under both harness definitions: `itl` = (E2E − TTFT)/(output − 1),
//!   `e2e` = E2E / output (prefill included, as the team's macro benchmark computed it).

use crate::cost::power::{joules_per_token, PowerModel, Work};
use crate::cost::{Breakdown, Category, Evaluator, Pass};
use crate::error::Error;
use crate::error::Result;
use crate::harness::{expected_means, BatchHold, ContextBalance, HarnessRun, RunMeans, StepTime};
use crate::predict::{breakdown_ms, MemoryReport, Scenario};
pub use crate::spec::client::{ClientModel, Lengths, Start};
use crate::spec::engine::CpuCosts;
use crate::units::Seconds;
use serde::Serialize;
use std::collections::BTreeMap;

pub use crate::measured::TpotDef;

/// Request shape of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Workload {
    pub input_len: u32,
    pub output_len: u32,
    pub tpot_def: TpotDef,
    /// The benchmark client (default: a closed loop with no cap, steady state, free).
    pub client: ClientModel,
}

/// A term that binds the serving curve, with its number.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Limit {
    /// `client_connections`, `kv_capacity`, `max_num_seqs`, `engine_cpu`, `api_server`,
    /// `client_cpu`, or a GPU category (`moe`, `allreduce`, ...).
    pub term: String,
    /// The binding number, in `unit`.
    pub value: f64,
    pub unit: &'static str,
    /// One line for people.
    pub detail: String,
}

/// Why `batch` sequences of `context` tokens each cannot run, from the memory report of
/// that batch and context: the weights leave no room for a KV cache, not even one sequence
/// of this context fits it, or the batch exceeds the sequences that do (with how many do).
/// `None` when it runs. Every command refuses with this wording (`does not fit: …`).
pub fn does_not_fit(m: &MemoryReport, batch: f64, context: f64) -> Option<String> {
    if m.kv_budget_gb <= 0.0 {
        return Some(format!(
            "does not fit: weights {:.1} GB per GPU and {:.1} GB reserved exceed the {:.1} GB the engine may use",
            m.weights_per_gpu_gb, m.activation_reserve_gb, m.usable_gb
        ));
    }
    if m.max_sequences_at_context < 1.0 {
        return Some(format!(
            "does not fit: one sequence of {context} tokens needs {:.2} GB of KV cache per GPU, {:.2} GB left",
            (context + 1.0) * m.kv_bytes_per_token_per_gpu / 1e9,
            m.kv_budget_gb
        ));
    }
    if m.max_sequences_at_context < batch {
        return Some(format!(
            "does not fit: {batch} sequences of {context} tokens need {:.2} GB of KV cache per GPU, {:.2} GB left: at most {} fit",
            m.kv_needed_gb, m.kv_budget_gb, m.max_sequences_at_context
        ));
    }
    None
}

/// Why a sequence of `context` tokens cannot run on `model` at all: it is longer than the
/// model's context window (`config.max_position_embeddings`). Engines refuse such a request
/// (vLLM's `max_model_len` defaults to the window), so pricing it would give a number for
/// something no deployment serves. `None` when the model states no window or the sequence
/// is within it.
pub fn beyond_context_window(
    model: &crate::spec::model::ModelSpec,
    context: f64,
) -> Option<String> {
    let window = model.config.max_position_embeddings?;
    (context > f64::from(window)).then(|| {
        format!(
            "does not fit: a sequence of {context} tokens is longer than {}'s context window of \
             {window} tokens (config.max_position_embeddings); shorten the prompt or output, or, \
             for a model served with a longer window (RoPE scaling), \
             --set model.config.max_position_embeddings=N",
            model.name
        )
    })
}

/// The memory report of `batch` sequences of `context` tokens on `s`, or the refusal of
/// [`beyond_context_window`] or [`does_not_fit`] as an error.
pub fn fits(s: &Scenario, batch: f64, context: f64) -> Result<MemoryReport> {
    if let Some(why) = beyond_context_window(s.model, context) {
        return Err(Error::Scenario(why));
    }
    let m = s.memory(batch, context);
    match does_not_fit(&m, batch, context) {
        Some(why) => Err(Error::Scenario(why)),
        None => Ok(m),
    }
}

/// [`fits`], with the layouts on the same system that would hold it named in the refusal
/// (what a user asking for one scenario wants to read next).
pub fn fits_or_suggest(s: &Scenario, batch: f64, context: f64) -> Result<MemoryReport> {
    fits(s, batch, context).map_err(|e| {
        // No layout lengthens the window: nothing to suggest.
        if beyond_context_window(s.model, context).is_some() {
            return e;
        }
        crate::layouts::with_suggestions(e, s.model, s.system, &s.parallel, batch, context)
    })
}

/// One concurrency of the sweep.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServePoint {
    pub concurrency: u32,
    /// Requests running at once (KV cache and max_num_seqs permitting).
    pub running: u32,
    /// Sequences in a decode step, mean: the running requests that are past their prefill
    /// (the others wait for it in the closed loop).
    pub decode_batch: f64,
    /// Requests waiting for a slot.
    pub queued: u32,
    /// TPOT under the sweep's definition, ms.
    pub tpot_ms: f64,
    pub tpot_itl_ms: f64,
    pub tpot_e2e_ms: f64,
    pub ttft_ms: f64,
    /// TTFT in the serving loop's steady state (no burst), ms.
    pub ttft_steady_ms: f64,
    /// GPU part of the step (kernels, gaps), ms.
    pub gpu_step_ms: f64,
    /// Engine CPU per step (fixed + per running sequence), ms.
    pub cpu_step_ms: f64,
    pub e2e_ms: f64,
    /// Output tokens per second of the server.
    pub throughput_tok_s: f64,
    /// Decode step without prefill work, ms.
    pub decode_step_ms: f64,
    /// Prefill work added to each decode step, ms.
    pub prefill_per_step_ms: f64,
    /// The speed-of-light bound of `tpot_ms` under the sweep's definition: the decode step
    /// at this batch (`itl`), or with the prompt's own prefill spread over the output
    /// (`e2e`).
    pub sol_tpot_ms: f64,
    /// Decode step by category (prefill share under `prefill`), summing to `tpot_itl_ms`.
    pub breakdown_ms: BTreeMap<&'static str, f64>,
    /// Mean power per GPU while serving at this load, W ([`crate::cost::power`]): the decode
    /// steps' and the prompts' DRAM and tensor work over the wall time; `None` where the GPU
    /// description has no board power.
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all the GPUs, J (prefill's share included).
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens, and per million tokens in and out, at this
    /// throughput ([`crate::economics`]); `None` where the system has no price.
    pub usd_per_million_output_tokens: Option<f64>,
    pub usd_per_million_total_tokens: Option<f64>,
    /// 95 % interval of `tpot_ms` (with `--calibration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ci95_ms: Option<[f64; 2]>,
    /// 95 % interval of `throughput_tok_s` (with `--calibration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_ci95_tok_s: Option<[f64; 2]>,
}

/// The sweep's result record.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sweep {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub provenance: &'static str,
    pub input_len: u32,
    pub output_len: u32,
    pub tpot_def: TpotDef,
    pub points: Vec<ServePoint>,
    /// Highest throughput the sweep reaches, tok/s.
    pub plateau_tok_s: f64,
    /// First concurrency after which doubling gains less than `plateau_threshold` (the last
    /// point when the sweep never flattens).
    pub plateau_concurrency: u32,
    /// Whether the curve flattened within the sweep.
    pub plateau_reached: bool,
    /// Marginal gain per doubling below which throughput counts as flat.
    pub plateau_threshold: f64,
    /// 1 / (marginal decode cost per added sequence) at the last point, tok/s: where the
    /// curve would level off without a KV limit.
    pub asymptote_tok_s: f64,
    /// Marginal decode cost per added sequence at the plateau, by category, ms.
    pub marginal_ms_per_token: BTreeMap<&'static str, f64>,
    /// The terms that set the plateau, largest first (`kv_capacity` when the cache caps
    /// concurrency, `max_num_seqs` when the scheduler does).
    pub limited_by: Vec<String>,
    /// Sequences the KV cache holds (at input + output tokens each, or input + output / 2
    /// when the engine allocates on demand, in whole blocks).
    pub kv_max_concurrency: u32,
    /// Tokens each of those sequences holds in the cache (`kv_max_concurrency` counts
    /// sequences of this many).
    pub kv_held_tokens: f64,
    /// Every binding term with its number.
    pub limits: Vec<Limit>,
}

/// Marginal gain per doubling below which throughput counts as flat (5 %).
pub const PLATEAU_THRESHOLD: f64 = 0.05;

struct Costs<'a> {
    ev: Evaluator<'a>,
    sol: Evaluator<'a>,
    /// A prompt may be split over steps (chunked prefill).
    chunked: bool,
    /// A step carrying prompts also decodes; otherwise prompts run as passes of their own.
    mixed: bool,
    budget: f64,
    step_overhead: f64,
}

impl Costs<'_> {
    /// (decode step, its breakdown) at `running` sequences and mean context.
    fn decode(&self, running: f64, ctx: f64) -> (f64, Breakdown) {
        let s = self.ev.evaluate(&Pass::decode(running, ctx));
        (s.total, s.breakdown)
    }

    /// A decode step with `prompt_tokens` of prompts of length `len` mixed in.
    fn mixed(&self, running: f64, ctx: f64, prompt_tokens: f64, len: f64) -> f64 {
        self.ev
            .evaluate(&Pass::decode(running, ctx).with_prefill(prompt_tokens, len))
            .total
    }

    /// `prompts` prompts of `input` tokens prefilled together as a pass of their own.
    fn prefill(&self, prompts: f64, input: f64) -> f64 {
        self.ev.evaluate(&Pass::prefill(prompts, input, 0.0)).total
    }

    /// DRAM and tensor work of a decode step at `running` sequences, and what one prompt of
    /// `input` tokens adds (mixed into the step when prefill shares steps with decode, a
    /// pass of its own otherwise), per GPU.
    fn work(&self, running: f64, ctx: f64, input: f64) -> (Work, Work) {
        let gpu = &self.ev.system.gpu;
        let dec = Work::of(&self.ev.evaluate(&Pass::decode(running, ctx)), gpu);
        let prompt = if self.mixed {
            let mixed = self
                .ev
                .evaluate(&Pass::decode(running, ctx).with_prefill(input, input));
            Work::of(&mixed, gpu).minus(dec)
        } else {
            Work::of(&self.ev.evaluate(&Pass::prefill(1.0, input, 0.0)), gpu)
        };
        (dec, prompt)
    }
}

/// One scenario's serving model for one workload: what every concurrency shares.
struct Server<'s, 'a> {
    s: &'s Scenario<'a>,
    w: Workload,
    costs: Costs<'a>,
    input: f64,
    output: f64,
    /// Mean cached context of a running request.
    ctx: f64,
    /// Tokens one sequence holds on average, in whole blocks.
    held: f64,
    kv_max: u32,
    client_cap: u32,
    /// Requests in flight at most: min(client cap, max_num_seqs, KV).
    cap: u32,
    /// An in-flight cap fitted by calibration (client connections or max_num_seqs the
    /// descriptions do not know of), when it binds below `cap`.
    fitted_cap: Option<f64>,
    /// The engine's CPU work beside the GPU step: its per-sequence part none at the speed of
    /// light.
    cpu: CpuCosts,
    /// API-server time per streamed token, s: the engine's, or the calibration's; none at
    /// the speed of light.
    api_per_token: f64,
    /// The client's time per streamed chunk, s: none at the speed of light.
    client_per_chunk: f64,
    /// Latency per request outside the engine loop, s (a calibration's; 0 otherwise).
    request_latency: f64,
    prefill_alone: f64,
    /// The prompt alone at the speed of light, s (0 where the TPOT is inter-token time).
    sol_prefill_alone: f64,
}

/// (GPU, engine CPU, API server, client) time per step at a point, seconds.
type StepParts = (f64, f64, f64, f64);

/// The closed loop's prompt rate is solved to this fraction of its range (far below what
/// any step or TTFT shows), in at most `CLOSED_LOOP_MAX_STEPS` evaluations.
const CLOSED_LOOP_TOLERANCE: f64 = 1e-7;
const CLOSED_LOOP_MAX_STEPS: u32 = 60;

/// Prefill utilisation the M/D/1 wait is evaluated at most (a numerical guard: the closed
/// loop settles below saturation on its own, the wait growing without bound toward 1).
const MAX_PREFILL_UTILISATION: f64 = 0.999;

/// One engine step at a prompt rate, seconds.
struct Step {
    /// Sequences in the decode batch.
    decoding: f64,
    /// The decode step without prompts, and its breakdown.
    dec: f64,
    breakdown: Breakdown,
    /// The GPU's pass with the prompts mixed in (or run beside it).
    with: f64,
    /// Its GPU part (kernels, gaps), without the fixed CPU cost.
    gpu: f64,
    /// Engine CPU per step (fixed + per running sequence).
    cpu_step: f64,
    /// GPU and CPU together, as the engine schedules them.
    engine: f64,
    /// API-server and client time per step.
    api: f64,
    client_cpu: f64,
    /// The step tokens are seen at.
    step: f64,
}

/// Requests a bounded run may have for its TTFT to be simulated (a few events each).
const HARNESS_MAX_PROMPTS: u64 = 100_000;

/// The engine's step as the harness simulation sees it: GPU passes at `decoding` sequences
/// and `prompt_tokens` of prompts, evaluated on a grid (doublings of each) and interpolated
/// linearly between, with what runs beside the GPU added as in the serving loop.
struct StepGrid<'g, 's, 'a> {
    sv: &'g Server<'s, 'a>,
    ds: Vec<f64>,
    qs: Vec<f64>,
    /// GPU pass time at (ds[i], qs[j]), row-major.
    gpu: Vec<f64>,
}

/// Grid points 0, 1, 2, 4, ... up to and including `max`.
fn doublings(first: f64, max: f64) -> Vec<f64> {
    let mut v = vec![0.0];
    let mut x = first;
    while x < max {
        v.push(x);
        x *= 2.0;
    }
    v.push(max.max(first));
    v
}

impl<'g, 's, 'a> StepGrid<'g, 's, 'a> {
    fn new(sv: &'g Server<'s, 'a>, slots: f64, input: f64) -> Self {
        let costs = &sv.costs;
        let qmax = if costs.chunked {
            costs.budget
        } else {
            costs.budget.max(input)
        };
        let ds = doublings(1.0, slots.max(1.0));
        let qs = doublings(16.0_f64.min(qmax), qmax);
        let len = sv.input;
        let raw = |d: f64, q: f64| -> f64 {
            match (d > 0.0, q > 0.0) {
                (_, false) => costs.decode(d.max(1.0), sv.ctx).0,
                (false, true) => costs.prefill(q / len, len),
                (true, true) => costs.mixed(d, sv.ctx, q, len),
            }
        };
        let mut gpu = Vec::with_capacity(ds.len() * qs.len());
        for &d in &ds {
            for &q in &qs {
                // A prompt's chunk crosses every pipeline stage as one sequence's: never
                // faster than the chunk alone.
                let alone = if q > 0.0 { raw(0.0, q) } else { 0.0 };
                gpu.push(raw(d, q).max(alone));
            }
        }
        StepGrid { sv, ds, qs, gpu }
    }
}

/// Where `x` falls in the sorted grid `g`: (index of the lower point, weight of the upper).
fn bracket(g: &[f64], x: f64) -> (usize, f64) {
    let last = g.len() - 1;
    if x <= g[0] || last == 0 {
        return (0, 0.0);
    }
    if x >= g[last] {
        return (last - 1, 1.0);
    }
    let i = g.partition_point(|&v| v <= x) - 1;
    (i, (x - g[i]) / (g[i + 1] - g[i]))
}

impl StepTime for StepGrid<'_, '_, '_> {
    fn step(&self, decoding: f64, prompt_tokens: f64, prompts: f64) -> f64 {
        let n = self.qs.len();
        let (i, u) = bracket(&self.ds, decoding);
        let (j, v) = bracket(&self.qs, prompt_tokens);
        let at = |a: usize, b: usize| self.gpu[a * n + b];
        let i1 = (i + 1).min(self.ds.len() - 1);
        let j1 = (j + 1).min(n - 1);
        let lo = at(i, j) * (1.0 - v) + at(i, j1) * v;
        let hi = at(i1, j) * (1.0 - v) + at(i1, j1) * v;
        let with = lo * (1.0 - u) + hi * u;
        let (_, _, engine, api, client) = self.sv.beside(with, decoding + prompts);
        engine.max(api).max(client)
    }
}

/// TTFT in the closed loop, seconds.
struct Ttft {
    /// As the client measures it (the first wave of a burst weighted in).
    mean: f64,
    /// In the loop's steady state, with the wait for a slot.
    steady: f64,
    /// A running request's whole cycle: its TTFT once in flight and `output − 1` steps.
    cycle: f64,
    /// The engine steps in that cycle: the steps that carry its prompt (one per chunk, or
    /// the one its prefill pass runs in), the steps it waits or is delayed, and its
    /// `output − 1` decode steps. The other requests' prompts land in these steps, however
    /// long the steps that carry them run.
    steps: f64,
}

/// Evaluate the serving curve at each concurrency.
pub fn sweep(s: &Scenario, concurrency: &[u32], w: Workload) -> Result<Sweep> {
    let sv = Server::new(s, w)?;
    let mut points = Vec::with_capacity(concurrency.len());
    let mut last = (0.0, 0.0, 0.0, 0.0);
    for &c in concurrency {
        let (p, parts) = sv.point(c);
        points.push(p);
        last = parts;
    }
    let (plateau_tok_s, plateau_concurrency, plateau_reached) = plateau(&points);
    let (marginal, terms, marginal_last) = sv.marginal(&points, plateau_concurrency);
    let limits = sv.limits(concurrency, last, &terms);
    let limited_by: Vec<String> = limits.iter().map(|l| l.term.clone()).collect();
    with_intervals(s, w, &mut points);
    Ok(Sweep {
        model: s.model.name.clone(),
        system: s.system.spec.name.clone(),
        parallel: s.parallel.to_string(),
        provenance: s.params.provenance.name(),
        input_len: w.input_len,
        output_len: w.output_len,
        tpot_def: w.tpot_def,
        points,
        plateau_tok_s,
        plateau_concurrency,
        plateau_reached,
        plateau_threshold: PLATEAU_THRESHOLD,
        asymptote_tok_s: 1.0 / marginal_last,
        marginal_ms_per_token: marginal,
        limited_by,
        kv_max_concurrency: sv.kv_max,
        kv_held_tokens: sv.held,
        limits,
    })
}

/// The highest throughput, and the first concurrency past which a doubling gains less than
/// the threshold (the last point when none does).
fn plateau(points: &[ServePoint]) -> (f64, u32, bool) {
    let plateau_tok_s = points
        .iter()
        .map(|p| p.throughput_tok_s)
        .fold(0.0, f64::max);
    for win in points.windows(2) {
        let gain = (win[1].throughput_tok_s - win[0].throughput_tok_s) / win[0].throughput_tok_s;
        let doublings = (win[1].concurrency as f64 / win[0].concurrency as f64)
            .log2()
            .max(1e-9);
        if gain / doublings < PLATEAU_THRESHOLD {
            return (plateau_tok_s, win[0].concurrency, true);
        }
    }
    (
        plateau_tok_s,
        points.last().map(|p| p.concurrency).unwrap_or(1),
        false,
    )
}

/// Each point's 95 % intervals from the scenario's calibration (none without one).
fn with_intervals(s: &Scenario, w: Workload, points: &mut [ServePoint]) {
    for p in points.iter_mut() {
        let c = p.concurrency;
        let at = |q: &Scenario| {
            sweep(q, &[c], w)
                .ok()
                .and_then(|x| x.points.into_iter().next())
        };
        p.tpot_ci95_ms = s.interval("tpot", |q| at(q).map_or(f64::NAN, |x| x.tpot_ms));
        p.throughput_ci95_tok_s = s.interval("throughput", |q| {
            at(q).map_or(f64::NAN, |x| x.throughput_tok_s)
        });
    }
}

impl<'s, 'a> Server<'s, 'a> {
    fn new(s: &'s Scenario<'a>, w: Workload) -> Result<Self> {
        let eng = &s.system.engine;
        let costs = Costs {
            ev: s.evaluator()?,
            sol: s.sol_evaluator()?,
            chunked: eng.chunked_prefill,
            mixed: eng.mixes_prefill_with_decode(),
            // The harness's launch script may set the budget from the input length.
            budget: match w.client.budget_per_input {
                Some(k) => k as f64 * w.input_len.max(1) as f64,
                None => eng.max_num_batched_tokens as f64,
            },
            step_overhead: s.params.step_overhead,
        };
        // Drawn lengths hold and compute their mean.
        let input = w.client.mean_length(w.input_len.max(1) as f64);
        let output = w.client.mean_length(w.output_len.max(1) as f64);
        let mem = fits_or_suggest(s, 1.0, input + output)?;
        let held = eng.kv.held_tokens(input, output);
        let kv_max = crate::predict::sequences(mem.max_kv_tokens, held).max(1.0) as u32;
        let client_cap = w.client.cap.unwrap_or(u32::MAX).max(1);
        let prefill_alone = costs.prefill(1.0, input);
        // The prompt's own prefill at the speed of light, which the bound of an E2E-defined
        // TPOT spreads over the output; the same at every concurrency.
        let sol_prefill_alone = match w.tpot_def {
            TpotDef::Itl => 0.0,
            TpotDef::E2e => costs.sol.evaluate(&Pass::prefill(1.0, input, 0.0)).total,
        };
        // A harness that starts the server with `--max-num-seqs C` lifts the engine's own
        // limit to each concurrency it runs.
        let max_num_seqs = if w.client.sets_max_num_seqs {
            u32::MAX
        } else {
            eng.max_num_seqs
        };
        let cap = kv_max.min(max_num_seqs).min(client_cap);
        // The speed of light is the hardware's bound: the host's work (the engine's CPU per
        // sequence, the API server, the client) is none there, as the step's fixed CPU cost
        // and the launches already are in [`CostParams::speed_of_light`].
        let host = if s.params.is_sol() { 0.0 } else { 1.0 };
        Ok(Server {
            s,
            w,
            costs,
            input,
            output,
            ctx: input + output / 2.0,
            held,
            kv_max,
            client_cap,
            cap,
            fitted_cap: s.params.inflight_cap.filter(|f| *f < cap as f64),
            cpu: CpuCosts {
                per_seq: Seconds(host * eng.cpu.per_seq.0),
                ..eng.cpu
            },
            api_per_token: host * s.params.api_per_token.unwrap_or(eng.cpu.api_per_token.0),
            client_per_chunk: host * w.client.per_chunk,
            request_latency: s.params.request_latency,
            prefill_alone,
            sol_prefill_alone,
        })
    }

    /// Requests running at `c` concurrent ones: the in-flight caps permitting, a fitted one
    /// as a continuous (mean) count.
    fn running(&self, c: u32) -> f64 {
        let r = c.min(self.cap).max(1) as f64;
        self.fitted_cap.map_or(r, |f| r.min(f.max(1.0)))
    }

    /// The engine's step when `p` prompts of the other requests start per decode step.
    fn step_at(&self, running: f64, p: f64) -> Step {
        let (costs, input, ctx) = (&self.costs, self.input, self.ctx);
        // Sequences that decode in a request's decode step: itself, and each of the others
        // in the share of its cycle it spends decoding, `(output − 1) · step / cycle`, which
        // the loop's prompt rate gives as `p · (output − 1) / (running − 1)`. The others
        // wait for their prefill meanwhile and hold no place in the decode batch.
        let decoding = (1.0 + p * (self.output - 1.0)).min(running);
        let (dec, breakdown) = costs.decode(decoding, ctx);
        let with = if costs.mixed {
            // A fraction p of steps carries one prompt; above one prompt per step, every
            // step carries p prompts.
            if p <= 1.0 {
                dec + p * (costs.mixed(decoding, ctx, input, input) - dec)
            } else {
                costs.mixed(decoding, ctx, p * input, input)
            }
        } else {
            dec + p * self.prefill_alone
        };
        // A step with prompts never runs faster than without; a difference below zero is
        // rounding (prompts that add nothing measurable), not a negative time.
        let with = with.max(dec);
        // The step's CPU work and its streamed chunks are the sequences it schedules: those
        // decoding and the prompts it prefills (each leaves with its first token), as the
        // harness simulation counts them; requests waiting for their prefill send nothing.
        let scheduled = (decoding + p).min(running);
        let (gpu, cpu_step, engine, api, client_cpu) = self.beside(with, scheduled);
        Step {
            decoding,
            dec,
            breakdown,
            with,
            gpu,
            cpu_step,
            engine,
            api,
            client_cpu,
            step: engine.max(api).max(client_cpu),
        }
    }

    /// The engine's context balancing over its data-parallel attention ranks, when it has
    /// one and attention is data-parallel.
    fn context_balance(&self) -> Option<ContextBalance> {
        let dp = self.s.parallel.dp;
        let b = self.s.system.engine.attention_dp_balance?;
        (dp > 1).then_some(ContextBalance {
            ranks: dp,
            timeout: b.timeout_iters,
            batching_wait: b.batching_wait_iters,
        })
    }

    /// The engine's batch waiting at concurrency `c`: what the client's launch scripts set
    /// for these request lengths and this layout, else the engine description's. None under
    /// data-parallel attention, where TensorRT-LLM balances its ranks instead
    /// (`py_executor.py` `_schedule` waits only without it).
    fn batch_wait(&self, c: u32) -> Option<BatchHold> {
        let (s, w) = (self.s, self.w);
        if s.parallel.dp > 1 {
            return None;
        }
        let rule = w
            .client
            .batch_waits
            .at(c, w.input_len, w.output_len, s.parallel.tp)
            .or(s.system.engine.batch_wait)?;
        // An iteration that could hold schedules a prompt token and a decode at least: a
        // threshold of two tokens or fewer (or no timeout) never holds anything.
        let tokens = rule.max_tokens_ratio * self.costs.budget;
        (rule.timeout_iters > 0 && tokens > 2.0).then_some(BatchHold {
            timeout: rule.timeout_iters,
            tokens,
        })
    }

    /// Decode steps between the scheduler's polls for new requests at concurrency `c`: what
    /// the client's launch scripts set, else the engine description's.
    fn recv_interval(&self, c: u32) -> u32 {
        self.w
            .client
            .recv_intervals
            .at(c)
            .unwrap_or(self.s.system.engine.scheduler_recv_interval)
            .max(1)
    }

    /// What runs beside a GPU pass of `with` seconds at `running` sequences: (its GPU part,
    /// engine CPU, the engine's step, API server, client), seconds.
    fn beside(&self, with: f64, running: f64) -> (f64, f64, f64, f64, f64) {
        let (costs, cpu) = (&self.costs, &self.cpu);
        // The engine's CPU per step (fixed + per sequence) beside the GPU's kernels: hidden
        // behind the previous GPU step with overlap, added to it without.
        let gpu = with - costs.step_overhead;
        let cpu_step = costs.step_overhead + cpu.per_seq.0 * running;
        let engine = cpu.engine_step(with, costs.step_overhead, running, self.s.overlaps());
        // One chunk per token per request passes the API server process and the client:
        // pipelined beside the engine, they bound the rate tokens are seen at.
        let api = running * self.api_per_token;
        let client_cpu = running * self.client_per_chunk;
        (gpu, cpu_step, engine, api, client_cpu)
    }

    /// The mean TTFT a bounded burst run reports at `c` (the harness simulated against
    /// this engine's steps, [`crate::harness`]); None for other clients, or a run too long
    /// to simulate (there the wave formula of [`Server::ttft`] stands).
    fn harness_means(&self, c: u32, running: f64) -> Option<RunMeans> {
        let client = self.w.client;
        let prompts = client.prompts(c)?;
        if client.start != Start::Burst || prompts > HARNESS_MAX_PROMPTS {
            return None;
        }
        let costs = &self.costs;
        let run = HarnessRun {
            concurrency: c,
            slots: running.floor().max(1.0) as u32,
            prompts: prompts as u32,
            input: self.w.input_len.max(1) as f64,
            output: self.w.output_len.max(1) as f64,
            range_ratio: match client.lengths {
                Lengths::Fixed => 1.0,
                Lengths::Varied => client.range_ratio,
            },
            budget: costs.budget,
            chunked: costs.chunked,
            mixed: costs.mixed,
            overlap: self.s.overlaps(),
            recv_interval: self.recv_interval(c),
            balance: self.context_balance(),
            batch_wait: self.batch_wait(c),
        };
        let grid = StepGrid::new(self, run.slots as f64, run.input);
        Some(expected_means(&run, &grid))
    }

    /// The closed loop at `running` requests in flight: the rate `p` at which the other
    /// requests' prompts start per decode step, with the step and the TTFT it gives.
    ///
    /// Each running request cycles through its TTFT and `output − 1` decode steps, and the
    /// client sends the next prompt when one finishes, so the other `running − 1` start
    /// `(running − 1) / steps` prompts per step, `steps` the engine steps of a cycle
    /// ([`Ttft::steps`]). Prompts make the steps and the
    /// prefill queue longer, which lengthens the cycle and lowers the rate: `p` is the fixed
    /// point of that loop, bracketed in `[0, (running − 1) / output]` (at most one
    /// restart per `output` steps, a cycle with no TTFT). The prefill queue stays finite at
    /// every load: a queue near saturation stretches the cycle until the prompts it admits
    /// match what the steps can prefill.
    fn closed_loop(&self, c: u32, running: f64) -> (Step, Ttft) {
        let at = |p: f64| {
            let st = self.step_at(running, p);
            let t = self.ttft(c, running, &st, p);
            (st, t)
        };
        let p_max = (running - 1.0) / self.output;
        if p_max <= 0.0 {
            return at(0.0);
        }
        // p − (running − 1)/steps is at most 0 at p = 0 and at least 0 at p_max (a cycle
        // is never shorter than `output` steps): a root lies between. Regula falsi
        // with the Illinois correction finds it in a few evaluations where the loop is
        // decode-bound (the root sits by p_max) and stays bracketed where prefill binds.
        let excess = |p: f64| {
            let (st, t) = at(p);
            let e = p - (running - 1.0) / t.steps;
            (e, (st, t))
        };
        let (mut a, (mut fa, _)) = (0.0, excess(0.0));
        let (mut b, (mut fb, mut best)) = (p_max, excess(p_max));
        if fb <= 0.0 {
            return best;
        }
        let tolerance = CLOSED_LOOP_TOLERANCE * p_max;
        let mut side = 0i8;
        for _ in 0..CLOSED_LOOP_MAX_STEPS {
            if fa >= 0.0 || b - a <= tolerance {
                break;
            }
            let x = (a * fb - b * fa) / (fb - fa);
            let x = if x.is_finite() && x > a && x < b {
                x
            } else {
                0.5 * (a + b)
            };
            let (fx, sx) = excess(x);
            best = sx;
            if fx.abs() <= tolerance {
                break;
            }
            if fx > 0.0 {
                (b, fb) = (x, fx);
                if side == 1 {
                    fa *= 0.5;
                }
                side = 1;
            } else {
                (a, fa) = (x, fx);
                if side == -1 {
                    fb *= 0.5;
                }
                side = -1;
            }
        }
        best
    }

    /// The steady state at `c` concurrent requests, and its step's parts.
    fn point(&self, c: u32) -> (ServePoint, StepParts) {
        let (s, w, costs) = (self.s, self.w, &self.costs);
        let (output, ctx) = (self.output, self.ctx);
        let concurrency = c.max(1);
        // A run of fewer prompts than clients has only as many requests: the rest never send.
        let c = w.client.senders(concurrency);
        let running = self.running(c);
        let (st, mut t) = self.closed_loop(c, running);
        let simulated = self.harness_means(c, running);
        if let Some(m) = simulated {
            // The simulation runs the engine's loop; the latency outside it adds to each
            // request's first token as in the closed form.
            t.mean = m.ttft + self.request_latency;
        }
        let (step, dec) = (st.step, st.dec);
        // A prefill-first engine (prompts in passes of their own while the decodes wait)
        // gathers a bounded burst run into waves: every prompt that has arrived is prefilled
        // before any decode step, so a wave's requests start decoding together, finish
        // together and send the next wave together, and any spread in their arrivals is
        // gathered again at the next wave's prefill. A request's inter-token time then holds
        // the part of its wave's prefill after its own first token, not the steady state's
        // even share of every prefill: the simulation's mean inter-token time stands for the
        // step there, the difference booked under `prefill` (the prefill a request's decode
        // waits out). Where prefill mixes with decode the waves spread over the steps and the
        // steady state stands.
        let itl = match simulated {
            Some(m) if !costs.mixed && m.itl > 0.0 => m.itl,
            _ => step,
        };
        let prefill_per_step = st.with - dec + (itl - step);
        let mut bm = breakdown_ms(&st.breakdown);
        bm.insert("prefill", prefill_per_step * 1e3);
        if s.overlaps() {
            // The fixed CPU cost is no longer in series; what CPU work exceeds the GPU is.
            if let Some(o) = bm.get_mut("overhead") {
                *o -= costs.step_overhead * 1e3;
            }
            bm.insert("engine_cpu", (st.cpu_step - st.gpu).max(0.0) * 1e3);
        } else {
            // In series with the kernels: the per-sequence CPU of the sequences the step
            // schedules, as the step was priced (the fixed part is in `overhead`).
            bm.insert("engine_cpu", (st.cpu_step - costs.step_overhead) * 1e3);
        }
        bm.insert("token_stream", (step - st.engine) * 1e3);
        let e2e = t.mean + (output - 1.0) * itl;
        let e2e_tpot = e2e / output;
        // Little's law over the running requests: each yields `output` tokens per cycle
        // (its TTFT in the loop and `output − 1` decode steps).
        let throughput = running * output / t.cycle;
        let sol_step = costs.sol.evaluate(&Pass::decode(st.decoding, ctx)).total;
        // The bound of the TPOT the sweep reports: the decode step's for inter-token time;
        // for E2E / output, the prompt's own prefill alone at the speed of light and the
        // `output − 1` steps after it, spread over the output.
        let sol_tpot = match w.tpot_def {
            TpotDef::Itl => sol_step,
            TpotDef::E2e => (self.sol_prefill_alone + (output - 1.0) * sol_step) / output,
        };
        // Power: per second, 1/step decode steps and throughput/output prompts of work,
        // spread over that second (gaps, CPU and communication add time, not activity).
        let gpu = &s.system.gpu;
        let watts = PowerModel::of(gpu).map(|m| {
            let (dec_work, prompt_work) = costs.work(st.decoding, ctx, self.input);
            let per_second = dec_work
                .scaled(1.0 / step)
                .plus(prompt_work.scaled(throughput / output));
            m.watts_for(per_second, 1.0, gpu)
        });
        let cost = crate::economics::Pricing::of(&s.system.spec)
            .ok()
            .flatten()
            .and_then(|q| {
                q.point_cost(
                    s.parallel.gpus(),
                    watts,
                    throughput,
                    crate::economics::tokens_per_output(w.input_len, w.output_len),
                )
            });
        let point = ServePoint {
            concurrency,
            running: running as u32,
            decode_batch: st.decoding,
            queued: c.saturating_sub(running as u32),
            tpot_ms: match w.tpot_def {
                TpotDef::Itl => itl,
                TpotDef::E2e => e2e_tpot,
            } * 1e3,
            tpot_itl_ms: itl * 1e3,
            tpot_e2e_ms: e2e_tpot * 1e3,
            ttft_ms: t.mean * 1e3,
            ttft_steady_ms: t.steady * 1e3,
            gpu_step_ms: st.gpu * 1e3,
            cpu_step_ms: st.cpu_step * 1e3,
            e2e_ms: e2e * 1e3,
            throughput_tok_s: throughput,
            decode_step_ms: dec * 1e3,
            prefill_per_step_ms: prefill_per_step * 1e3,
            sol_tpot_ms: sol_tpot * 1e3,
            breakdown_ms: bm,
            watts_per_gpu: watts,
            joules_per_token: watts
                .and_then(|w| joules_per_token(w, s.parallel.gpus(), throughput)),
            usd_per_million_output_tokens: cost.and_then(|c| c.usd_per_million_output_tokens),
            usd_per_million_total_tokens: cost.and_then(|c| c.usd_per_million_total_tokens),
            tpot_ci95_ms: None,
            throughput_ci95_tok_s: None,
        };
        (point, (st.gpu, st.cpu_step, st.api, st.client_cpu))
    }

    /// TTFT at `c` requests, `running` of them in flight, with the decode step `st` and
    /// `p` of the other requests' prompts starting per step.
    fn ttft(&self, c: u32, running: f64, st: &Step, p: f64) -> Ttft {
        let step = st.step;
        let (w, costs) = (self.w, &self.costs);
        let (input, output, ctx, prefill_alone) =
            (self.input, self.output, self.ctx, self.prefill_alone);
        // TTFT: the prompt's own prefill plus M/D/1 queueing behind the other prompts
        // competing for the same prefill capacity. The prompt's own prefill is never faster
        // than that prompt alone on an idle engine (under pipeline parallelism a step of
        // many sequences overlaps stages across them; one prompt still crosses every stage).
        let (own, own_steps, rho) = if costs.mixed {
            // Chunks of the token budget left after the other decode tokens, one step each;
            // each is a decode step of the others with the chunk mixed in. The scheduler
            // fills each step's room first come, first served: full chunks, then what is
            // left of the prompt (as the harness simulation splits it), not equal parts.
            let others = (st.decoding - 1.0).max(0.0);
            let room = (costs.budget - others).max(1.0);
            // Without chunked prefill a prompt runs whole in one step, however large (as
            // the harness simulation takes it).
            let (chunks, full) = if costs.chunked {
                ((input / room).ceil(), room.min(input))
            } else {
                (1.0, input)
            };
            let last = input - (chunks - 1.0) * full;
            // The step that carries a chunk is, under pipeline parallelism, at least the
            // chunk beside one decode: the evaluator splits a step's tokens evenly over its
            // micro-batches, but a chunk is one sequence's and crosses every stage in one of
            // them. A full chunk's step is at least a typical step of this load; the step
            // that finishes the prompt at least a decode step (the room it leaves is the
            // next prompt's, which that prompt's wait counts).
            let carrier = |chunk: f64, floor: f64| {
                costs
                    .mixed(others, ctx, chunk, input)
                    .max(costs.mixed(others.min(1.0), ctx, chunk, input))
                    .max(floor)
            };
            let own = if chunks > 1.0 {
                (chunks - 1.0) * carrier(full, step) + carrier(last, st.dec)
            } else {
                carrier(full, step)
            };
            // Prompt tokens the other requests start per step, over the budget's room.
            (own.max(prefill_alone), chunks, p * input / room)
        } else {
            let own = prefill_alone + costs.step_overhead;
            (own, 1.0, p * own / step)
        };
        let rho = rho.min(MAX_PREFILL_UTILISATION);
        let wait = rho * own / (2.0 * (1.0 - rho));
        // A prompt that arrives while the engine runs a step waits for that step to end
        // before it is scheduled: half a step on average (steps of equal length, arrivals
        // uniform over them); an idle engine takes it at once. With overlap scheduling the
        // first token leaves one step after the step that computed it (the CPU of step n
        // runs beside the GPU of step n + 1).
        // A scheduler that polls for new requests every N decode steps (SGLang's
        // `--scheduler-recv-interval`) keeps it waiting for the next poll: N / 2 steps on
        // average.
        // Context balancing over data-parallel attention ranks holds it until the ranks'
        // iteration counter reaches its timeout (`timeout / 2` steps on average) while
        // every rank decodes: at two running sequences a rank or more; the wait ends sooner
        // when every rank has a prompt, which this steady-state estimate leaves out.
        let balance = match self.context_balance() {
            Some(b) if running >= 2.0 * b.ranks as f64 => 0.5 * b.timeout as f64 * step,
            _ => 0.0,
        };
        // Batch waiting holds it, while the others decode, until the prompts about reach the
        // token threshold or the counter the timeout: a window opened by the first prompt
        // lasts `T` steps, the timeout or the time the next `k − 1` prompts take to come at
        // `p` a step, and never past the others' last decode (with `n` others `n / (n + 1)`
        // of the `output − 1` steps on average, their remaining steps spread evenly), when
        // nothing decodes and the prompts run. The prompts that come in a window wait out its
        // rest (the first all of it): `T (1 + p T / 2) / (1 + p T)` steps on average.
        let batch_wait = match self.batch_wait(c) {
            Some(b) if st.decoding > 1.0 && running > 1.0 => {
                let others = st.decoding - 1.0;
                let needed = ((b.tokens - others) / input.max(1.0)).ceil();
                if needed <= 1.0 {
                    0.0
                } else {
                    let last_decode = (output - 1.0).max(0.0) * others / (others + 1.0);
                    let mut window = (b.timeout as f64).min(last_decode);
                    if p > 0.0 {
                        window = window.min((needed - 1.0) / p);
                    }
                    window * (1.0 + 0.5 * p * window) / (1.0 + p * window) * step
                }
            }
            _ => 0.0,
        };
        let admit = if running > 1.0 {
            0.5 * self.recv_interval(c) as f64 * step + balance + batch_wait
        } else {
            0.0
        };
        let overlap = if self.s.overlaps() { step } else { 0.0 };
        let busy = own + wait + admit + overlap;
        // Latency outside the engine loop (a calibration's): every first token reaches the
        // client that much later, and the request's slot waits it out once per cycle (its
        // prompt reaches the engine late, or its last token the client). No step pays it.
        let latency = self.request_latency;
        let cycle = busy + (output - 1.0) * step + latency;
        // In steps: the prompt's own are `own_steps`, however long they run; the waits and
        // delays pass in steps of the typical length.
        let steps = own_steps + (busy - own + latency) / step + (output - 1.0);
        // Beyond the in-flight cap a request first waits for a slot: `c − running` wait
        // ahead of it, `running` slots free one per cycle each.
        let slot_wait = if (c as f64) > running {
            (c as f64 - running) / running * cycle
        } else {
            0.0
        };
        let steady = busy + slot_wait;
        // A burst start sends every in-flight prompt at once: they share the prefill budget,
        // chunk j of K finishing at j/K of the whole wave's prefill. With fixed lengths the
        // prompts one step prefills together then decode in lockstep, finish together and
        // return together: every later wave arrives in such groups, each prefilled in one
        // step carrying the group's prompts beside the others' decodes. The first wave is the
        // client's first-wave share of the requests.
        let mean = if w.client.start == Start::Burst && running > 1.0 {
            let wave = running * input;
            let k = (wave / costs.budget).ceil().max(1.0);
            let all = costs.prefill(running, input) + costs.step_overhead;
            let burst = all * (k + 1.0) / (2.0 * k) + slot_wait + overlap;
            // Later waves come back in the groups one step prefilled together only when
            // every request has the same lengths; drawn lengths finish apart and arrive
            // desynchronized (steady state).
            let group = match (w.client.lengths, costs.mixed) {
                (Lengths::Varied, _) => 1.0,
                (Lengths::Fixed, true) => {
                    ((costs.budget - running) / (input - 1.0).max(1.0)).clamp(1.0, running)
                }
                (Lengths::Fixed, false) => (costs.budget / input).clamp(1.0, running),
            };
            let later = if group > 1.0 {
                let carrier = if costs.mixed {
                    costs
                        .mixed(running - group, ctx, group * input, input)
                        .max(step)
                } else {
                    costs.prefill(group, input) + costs.step_overhead
                };
                (carrier + wait + slot_wait + admit + overlap).max(steady)
            } else {
                steady
            };
            let first = w.client.first_wave_share(c);
            (first * burst + (1.0 - first) * later).max(steady)
        } else {
            steady
        };
        Ttft {
            mean: mean + latency,
            steady: steady + latency,
            cycle,
            steps,
        }
    }

    /// Cost per added sequence by category around the plateau, the terms over 5 % of it,
    /// and the marginal step cost at the last point.
    fn marginal(
        &self,
        points: &[ServePoint],
        plateau_concurrency: u32,
    ) -> (BTreeMap<&'static str, f64>, Vec<(String, f64)>, f64) {
        let (costs, ctx, cap) = (&self.costs, self.ctx, self.cap);
        // Marginal cost per added sequence around the plateau (or the last point).
        let at = (plateau_concurrency.min(cap).max(2) as f64)
            .min(self.fitted_cap.unwrap_or(f64::INFINITY))
            .max(2.0);
        let (hi, bhi) = costs.decode(at, ctx);
        let (lo, blo) = costs.decode(at / 2.0, ctx);
        let per_seq = ((hi - lo) / (at / 2.0)).max(0.0);
        let last_running = points.last().map(|p| p.running).unwrap_or(1).max(2) as f64;
        let (lh, _) = costs.decode(last_running, ctx);
        let (ll, _) = costs.decode(last_running - 1.0, ctx);
        let marginal_last = (lh - ll).max(1e-12);
        let mut marginal = BTreeMap::new();
        let mut terms: Vec<(String, f64)> = Vec::new();
        for cat in Category::ALL {
            let d = ((bhi.get(cat) - blo.get(cat)) / (at / 2.0)).max(0.0);
            marginal.insert(cat.name(), d * 1e3);
            if d > 0.05 * per_seq {
                terms.push((cat.name().to_string(), d));
            }
        }
        terms.sort_by(|a, b| b.1.total_cmp(&a.1));
        terms.sort_by(|a, b| b.1.total_cmp(&a.1));
        (marginal, terms, marginal_last)
    }

    /// Every binding limit with its number: in-flight caps, CPU sides, and the GPU terms.
    fn limits(&self, concurrency: &[u32], last: StepParts, terms: &[(String, f64)]) -> Vec<Limit> {
        let (cap, kv_max, client_cap, held) = (self.cap, self.kv_max, self.client_cap, self.held);
        let mut limits: Vec<Limit> = Vec::new();
        let mut lim = |term: &str, value: f64, unit: &'static str, detail: String| {
            limits.push(Limit {
                term: term.into(),
                value,
                unit,
                detail,
            })
        };
        if let Some(f) = self
            .fitted_cap
            .filter(|f| concurrency.iter().any(|&c| c as f64 > *f))
        {
            lim(
                "inflight_cap",
                f,
                "requests",
                format!(
                    "the calibration's in-flight cap of {f:.0} requests (client connections or \
                     max_num_seqs, as the measurement's flat curve implies)"
                ),
            );
        } else if concurrency.iter().any(|&c| c > cap) {
            if cap == client_cap {
                lim(
                    "client_connections",
                    cap as f64,
                    "requests",
                    format!("the client holds at most {cap} requests in flight"),
                );
            } else if cap == kv_max {
                lim(
                    "kv_capacity",
                    kv_max as f64,
                    "sequences",
                    format!("the KV cache holds {kv_max} sequences of {held:.0} tokens"),
                );
            } else {
                lim(
                    "max_num_seqs",
                    cap as f64,
                    "sequences",
                    format!("the scheduler runs at most {cap} sequences"),
                );
            }
        }
        let (g, cs, api, cl) = last;
        let overlap = self.s.overlaps();
        let engine_last = if overlap { g.max(cs) } else { g + cs };
        if cs > 0.05 * engine_last && (!overlap || cs >= g) {
            lim(
                "engine_cpu",
                cs * 1e6,
                "us per step",
                format!(
                    "engine CPU {:.3} ms per step beside a {:.3} ms GPU step ({})",
                    cs * 1e3,
                    g * 1e3,
                    if overlap {
                        "not hidden by overlap"
                    } else {
                        "in series, no overlap"
                    }
                ),
            );
        }
        if api >= engine_last && api > 0.0 {
            lim(
                "api_server",
                self.api_per_token * 1e6,
                "us per token",
                format!(
                    "the API server streams {:.0} tok/s at most",
                    1.0 / self.api_per_token
                ),
            );
        }
        if cl >= engine_last && cl > 0.0 {
            lim(
                "client_cpu",
                self.client_per_chunk * 1e6,
                "us per chunk",
                format!(
                    "the client counts {:.0} tok/s at most",
                    1.0 / self.client_per_chunk
                ),
            );
        }
        for (n, d) in terms {
            lim(
                n,
                d * 1e3,
                "ms per added sequence",
                format!("{n}: {:.4} ms of step per added sequence", d * 1e3),
            );
        }
        limits
    }
}
