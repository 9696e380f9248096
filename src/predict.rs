//! One design point: TPOT with its breakdown by category, layer and operator, the
//! speed-of-light bound, throughput, and memory fit. This is the record `rooftop predict`
//! exports as JSON and the plots consume.

use crate::calibration::Calibration;
use crate::cost::memory::{count_params, ParamCount, Residency};
use crate::cost::power::{joules_per_token, PowerModel, Work};
use crate::cost::Provenance;
use crate::cost::{Breakdown, Category, CostParams, Evaluator, Parallel, Pass, StepCost};
use crate::error::Result;
use crate::ops::{BlockKind, Op};
use crate::spec::MathDtype;
use crate::spec::{ModelSpec, System};
use serde::Serialize;
use std::collections::BTreeMap;

/// A model on a system under a layout, with the parameter set to predict with.
#[derive(Debug, Clone)]
pub struct Scenario<'a> {
    pub model: &'a ModelSpec,
    pub system: &'a System,
    pub parallel: Parallel,
    /// Default or calibrated parameters (the SOL set is always derived alongside).
    pub params: CostParams,
    /// The calibration `params` came from: records built on this scenario carry 95 %
    /// intervals from its covariance.
    pub calibration: Option<&'a Calibration>,
}

impl<'a> Scenario<'a> {
    /// Whether the engine runs its CPU work beside the GPU for this layout (not while it
    /// speculates: [`crate::spec::engine::CpuCosts::overlaps`]).
    pub fn overlaps(&self) -> bool {
        self.system
            .engine
            .cpu
            .overlaps(self.parallel.pp, crate::spec::engine::Drafting::None)
    }

    /// One decode step as the engine schedules it, seconds, from the evaluator's pass
    /// `gpu` (its fixed CPU cost `step_overhead` included) at `running` sequences: the
    /// engine's CPU work (fixed and per sequence) beside the kernels with overlap, after
    /// them without ([`crate::spec::engine::CpuCosts::engine_step`], as the serving loop
    /// prices a step).
    pub fn engine_step(&self, gpu: f64, running: f64) -> f64 {
        self.system
            .engine
            .cpu
            .engine_step(gpu, self.params.step_overhead, running, self.overlaps())
    }

    pub fn new(model: &'a ModelSpec, system: &'a System, parallel: Parallel) -> Result<Self> {
        parallel.validate(model, system)?;
        Ok(Scenario {
            model,
            system,
            parallel,
            params: CostParams::default_for(system),
            calibration: None,
        })
    }

    /// The same scenario predicting with a calibration's parameters and intervals.
    pub fn calibrated(self, c: &'a Calibration) -> Self {
        Scenario {
            params: c.params(&CostParams::default_for(self.system)),
            calibration: Some(c),
            ..self
        }
    }

    /// The same scenario under other parameters, without intervals.
    pub fn with_params(&self, params: CostParams) -> Self {
        Scenario {
            params,
            calibration: None,
            ..self.clone()
        }
    }

    /// 95 % interval of a measurement of `f` on this scenario: the calibration's covariance
    /// (delta method) and the error the fit could not explain
    /// ([`Calibration::prediction_interval`]); `kind` is the measured quantity `f` is (a
    /// [`crate::measured::Quantity::kind_name`]: `tpot`, `throughput`); `None` without a
    /// calibration.
    pub fn interval(&self, kind: &str, f: impl Fn(&Scenario<'a>) -> f64) -> Option<[f64; 2]> {
        let c = self.calibration?;
        let (lo, hi) = c.prediction_interval(&CostParams::default_for(self.system), kind, |p| {
            f(&self.with_params(*p))
        });
        Some([lo, hi])
    }

    pub fn evaluator(&self) -> Result<Evaluator<'a>> {
        Evaluator::new(self.model, self.system, self.parallel, self.params)
    }

    pub fn sol_evaluator(&self) -> Result<Evaluator<'a>> {
        Evaluator::new(
            self.model,
            self.system,
            self.parallel,
            CostParams::speed_of_light(),
        )
    }

    pub fn memory(&self, batch: f64, context: f64) -> MemoryReport {
        MemoryReport::new(self, batch, context)
    }
}

/// Category → milliseconds, every category present (stable JSON keys).
pub fn breakdown_ms(b: &Breakdown) -> BTreeMap<&'static str, f64> {
    Category::ALL
        .iter()
        .map(|c| (c.name(), b.get(*c) * 1e3))
        .collect()
}

/// Weights and KV cache on one GPU, and what fits.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemoryReport {
    /// GPU memory capacity, GB (1e9 bytes).
    pub capacity_gb: f64,
    /// Memory the engine may use (capacity × gpu_memory_utilization, or the whole capacity
    /// where the fraction is of the memory left after weights), GB.
    pub usable_gb: f64,
    /// Weights held by one GPU (the most loaded pipeline stage), GB.
    pub weights_per_gpu_gb: f64,
    /// Activations, CUDA graphs and workspace reserved per GPU, GB.
    pub activation_reserve_gb: f64,
    /// Left for the KV cache per GPU, GB (negative: the weights do not fit).
    pub kv_budget_gb: f64,
    /// KV-cache bytes one token occupies on one GPU.
    pub kv_bytes_per_token_per_gpu: f64,
    /// KV cache the scenario needs per GPU (batch × context), GB.
    pub kv_needed_gb: f64,
    /// Fixed recurrent state one sequence holds on one GPU (linear-attention / SSM layers).
    pub state_bytes_per_sequence_per_gpu: f64,
    /// Tokens of KV cache the budget holds (whole server).
    pub max_kv_tokens: f64,
    /// Sequences of the given context that fit at once.
    pub max_sequences_at_context: f64,
    /// Weights fit and the scenario's KV cache fits.
    pub fits: bool,
}

impl MemoryReport {
    pub fn new(s: &Scenario, batch: f64, context: f64) -> MemoryReport {
        let gpu = &s.system.gpu;
        let eng = &s.system.engine;
        let cap = gpu.memory_capacity.0;
        let usable = eng.usable_memory(cap);
        let held = Residency::new(s.model, &s.parallel);
        let w = held.weight_bytes();
        let act = eng.activation_reserve.0;
        let budget = eng.kv_budget(cap, w);
        let kv_tok = held.kv_bytes_per_token();
        // What one sequence of this context holds: growing caches, windows, fixed state.
        let cache = held.cache_footprint(context + 1.0);
        let per_seq = cache.bytes_per_sequence(context + 1.0);
        // Data-parallel attention replicas each cache only their own sequences.
        let dp = s.parallel.dp as f64;
        let max_tokens = kv_tokens(budget, per_seq, context, dp);
        // The busiest replica's GPUs hold the most: its sequences are dealt whole.
        let needed =
            crate::ops::scenario::busiest_replica_sequences(batch, s.parallel.dp) * per_seq;
        MemoryReport {
            capacity_gb: cap / 1e9,
            usable_gb: usable / 1e9,
            weights_per_gpu_gb: w / 1e9,
            activation_reserve_gb: act / 1e9,
            kv_budget_gb: budget / 1e9,
            kv_bytes_per_token_per_gpu: kv_tok,
            kv_needed_gb: needed / 1e9,
            max_kv_tokens: max_tokens,
            state_bytes_per_sequence_per_gpu: cache.state_bytes_per_seq,
            max_sequences_at_context: sequences(max_tokens, context),
            fits: budget > 0.0 && needed <= budget,
        }
    }
}

/// Tokens of context a KV budget of `budget` bytes per GPU holds over `dp` replicas, at the
/// per-token footprint of a sequence of `context` tokens that holds `per_seq` bytes per GPU.
pub fn kv_tokens(budget: f64, per_seq: f64, context: f64, dp: f64) -> f64 {
    if budget > 0.0 && per_seq > 0.0 {
        (budget / (per_seq / (context + 1.0))).floor() * dp
    } else {
        0.0
    }
}

/// Whole sequences of `context` tokens (plus the one being decoded) in `kv_tokens` tokens.
pub fn sequences(kv_tokens: f64, context: f64) -> f64 {
    (kv_tokens / (context + 1.0)).floor()
}

/// A vision encoder's cost to encode one image before the text prompt's prefill.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VisionCost {
    /// The image the figures are for: a square of this many pixels a side.
    pub image_side_px: u32,
    /// Patches the encoder runs over for that image.
    pub patches: f64,
    /// FLOPs to encode it (weights once per patch, attention among all patches).
    pub gflops_per_image: f64,
    /// Time per image with the scenario's parameters, ms.
    pub ms_per_image: f64,
    /// Speed-of-light time per image, ms.
    pub sol_ms_per_image: f64,
    /// How the figures were made (an approximation, named).
    pub basis: &'static str,
}

/// Side of the reference image the vision cost is stated for.
const VISION_IMAGE_SIDE: u32 = 1024;

fn vision_cost(s: &Scenario) -> Result<Option<VisionCost>> {
    let Some(v) = &s.model.vision else {
        return Ok(None);
    };
    let per_side = (VISION_IMAGE_SIDE as f64 / v.patch_size.max(1) as f64).ceil();
    let patches = per_side * per_side;
    let flops = v.flops_per_image(patches);
    let weight_bytes = v.params() * 2.0;
    let tp = s.parallel.tp as f64;
    let time = |p: CostParams| -> Result<f64> {
        let dev = crate::cost::Device::new(s.system, p)?;
        let rate = dev.gemm_rate[crate::spec::FormatKind::Bf16];
        Ok((flops / tp / rate).max(weight_bytes / tp / dev.mem_bw) * 1e3)
    };
    Ok(Some(VisionCost {
        image_side_px: VISION_IMAGE_SIDE,
        patches,
        gflops_per_image: flops / 1e9,
        ms_per_image: time(s.params)?,
        sol_ms_per_image: time(CostParams::speed_of_light())?,
        basis: "approximation: a 1024 x 1024 image; the encoder split over the layout's tensor-parallel GPUs like the text layers, in BF16 at the GEMM efficiency, weights read once; no kernel gaps, no image preprocessing",
    }))
}

/// One operator row of the report: per call and summed over the layers that run it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpRow {
    /// Block it belongs to: `attention`, `dense-mlp`, `moe`, or `head` (once per pass).
    pub block: &'static str,
    pub name: &'static str,
    /// The operator as data: `op` (its kind) and its shape fields.
    pub shape: Op,
    pub category: &'static str,
    /// Times the op runs per step (layers of its kind).
    pub count: u32,
    pub flops: f64,
    pub bytes: f64,
    /// FLOP per byte.
    pub intensity: f64,
    /// Kernel time per call, microseconds.
    pub time_us: f64,
    /// Fixed cost per call, microseconds.
    pub overhead_us: f64,
    /// (time + overhead) × count, milliseconds.
    pub total_ms: f64,
    pub bound: &'static str,
    pub math: Option<MathDtype>,
    pub provenance: Provenance,
}

/// One layer's time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayerRow {
    pub index: usize,
    /// `dense` or `moe`.
    pub kind: &'static str,
    pub window: Option<u32>,
    pub time_ms: f64,
    pub breakdown_ms: BTreeMap<&'static str, f64>,
}

/// The result record of `rooftop predict`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prediction {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub gpus: u32,
    pub batch: u32,
    pub context: u32,
    /// Parameter set of `tpot_ms`: `default` or `calibrated`.
    pub provenance: &'static str,
    /// Time per output token (one decode step at this batch), ms.
    pub tpot_ms: f64,
    /// Speed-of-light TPOT (efficiency 1, no fixed costs), ms.
    pub sol_tpot_ms: f64,
    /// Output tokens per second of the whole server at this batch.
    pub throughput_tok_s: f64,
    pub sol_throughput_tok_s: f64,
    /// Category → ms, summing to `tpot_ms`.
    pub breakdown_ms: BTreeMap<&'static str, f64>,
    /// Category → ms of the SOL bound, summing to `sol_tpot_ms`.
    pub sol_breakdown_ms: BTreeMap<&'static str, f64>,
    /// All-reduces per decode step and bytes each.
    pub allreduces_per_step: u32,
    pub allreduce_bytes: f64,
    pub kernels_per_step: u32,
    /// Parameters counted from the description (MTP and vision apart) and weight bytes.
    pub model_params: ParamCount,
    /// The vision encoder's prefill-time cost per image, for models that ship one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vision: Option<VisionCost>,
    pub memory: MemoryReport,
    /// 95 % interval of `tpot_ms` from the calibration's covariance (with `--calibration`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ci95_ms: Option<[f64; 2]>,
    /// Power per GPU during the step, W ([`crate::cost::power`]); `None` where the GPU
    /// description has no board power.
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all the GPUs, J: watts × GPUs × TPOT / batch.
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens at this step's throughput ([`crate::economics`]);
    /// `None` where the system has no price.
    pub usd_per_million_output_tokens: Option<f64>,
    pub layers: Vec<LayerRow>,
    pub ops: Vec<OpRow>,
    /// What the step costs beyond its operators, so that `ops`' `total_ms` and these two
    /// sum to `tpot_ms`.
    pub outside_operators_ms: OutsideOperators,
}

/// The parts of a step that no operator runs, ms.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct OutsideOperators {
    /// Transfers between pipeline stages and the wait for the other micro-batches.
    pub pipeline: f64,
    /// The engine's CPU work per step (fixed and per sequence) that the kernels do not hide:
    /// all of it without overlap scheduling, what exceeds the kernels with it.
    pub engine_cpu: f64,
}

pub fn op_rows(step: &StepCost) -> Vec<OpRow> {
    step.operators()
        .into_iter()
        .map(|(block, op, o, n)| OpRow {
            block: match block {
                Some(BlockKind::Attention { .. }) => "attention",
                Some(BlockKind::LinearAttention) => "linear-attention",
                Some(BlockKind::Mamba) => "mamba",
                Some(BlockKind::Empty) => "empty",
                Some(BlockKind::DenseMlp { .. }) => "dense-mlp",
                Some(BlockKind::Moe) => "moe",
                None => "head",
            },
            name: o.name,
            shape: op.op,
            category: o.category.name(),
            count: n,
            flops: o.flops,
            bytes: o.bytes,
            intensity: o.intensity(),
            time_us: o.time * 1e6,
            overhead_us: o.overhead * 1e6,
            total_ms: o.total() * n as f64 * 1e3,
            bound: o.bound.name(),
            math: o.math,
            provenance: o.provenance,
        })
        .collect()
}

/// [`predict`] for a point that can run: `batch` sequences of `context` tokens that do not
/// fit in memory are refused with [`crate::serve::does_not_fit`]'s reason, never given a
/// number. Every command that prints a prediction goes through here.
pub fn predict_fitting(s: &Scenario, batch: u32, context: u32) -> Result<Prediction> {
    crate::serve::fits_or_suggest(s, batch as f64, context as f64)?;
    predict(s, batch, context)
}

/// Predict one decode step of `batch` sequences at `context` cached tokens.
pub fn predict(s: &Scenario, batch: u32, context: u32) -> Result<Prediction> {
    let pass = Pass::decode(batch as f64, context as f64);
    let step = s.evaluator()?.evaluate(&pass);
    let sol = s.sol_evaluator()?.evaluate(&pass);
    // The step as the engine schedules it: what its CPU adds beyond the pass (negative
    // where an overlap hides the fixed cost) is booked under `overhead`.
    let t = s.engine_step(step.total, batch as f64);
    let mut breakdown = breakdown_ms(&step.breakdown);
    if let Some(o) = breakdown.get_mut(Category::Overhead.name()) {
        *o += (t - step.total) * 1e3;
    }
    let prov = s.params.provenance.name();
    let layers = step
        .layers
        .iter()
        .enumerate()
        .map(|(i, &(a, f))| {
            let b = step.layer_breakdown(i);
            LayerRow {
                index: i,
                kind: match step.blocks[f].kind {
                    BlockKind::Moe => "moe",
                    BlockKind::DenseMlp { .. } => "dense",
                    _ => "none",
                },
                window: match step.blocks[a].kind {
                    BlockKind::Attention { window, .. } => window,
                    _ => None,
                },
                time_ms: b.total() * 1e3,
                breakdown_ms: breakdown_ms(&b),
            }
        })
        .collect();
    let ops = op_rows(&step);
    let pipeline_ms = step.breakdown.get(Category::Pipeline) * 1e3;
    let ops_ms: f64 = ops.iter().map(|r| r.total_ms).sum();
    let outside_operators_ms = OutsideOperators {
        pipeline: pipeline_ms,
        // Never below 0 by more than rounding: the kernels' time is the ops and the pipeline.
        engine_cpu: (t * 1e3 - ops_ms - pipeline_ms).max(0.0),
    };
    let gpu = &s.system.gpu;
    let watts = PowerModel::of(gpu).map(|m| m.watts_for(Work::of(&step, gpu), t, gpu));
    let allreduces = step
        .ops_with_counts()
        .iter()
        .filter(|(o, _)| o.category == Category::Allreduce)
        .map(|(_, n)| *n)
        .sum();
    let kernels = step
        .ops_with_counts()
        .iter()
        .map(|(o, n)| o.kernels * n)
        .sum();
    Ok(Prediction {
        model: s.model.name.clone(),
        system: s.system.spec.name.clone(),
        parallel: s.parallel.to_string(),
        gpus: s.parallel.gpus(),
        batch,
        context,
        provenance: prov,
        tpot_ms: t * 1e3,
        sol_tpot_ms: sol.total * 1e3,
        throughput_tok_s: batch as f64 / t,
        sol_throughput_tok_s: batch as f64 / sol.total,
        breakdown_ms: breakdown,
        sol_breakdown_ms: breakdown_ms(&sol.breakdown),
        allreduces_per_step: allreduces,
        // A step with no all-reduce (one GPU of tensor parallelism) moves no bytes in one.
        allreduce_bytes: if allreduces == 0 {
            0.0
        } else {
            batch as f64 / s.parallel.dp as f64 * s.model.config.hidden_size as f64 * 2.0
        },
        kernels_per_step: kernels,
        model_params: count_params(s.model),
        vision: vision_cost(s)?,
        memory: s.memory(batch as f64, context as f64),
        tpot_ci95_ms: s.interval("tpot", |q| {
            q.evaluator()
                .map(|e| q.engine_step(e.step_time(&pass), batch as f64) * 1e3)
                .unwrap_or(f64::NAN)
        }),
        watts_per_gpu: watts,
        joules_per_token: watts
            .and_then(|w| joules_per_token(w, s.parallel.gpus(), batch as f64 / t)),
        // Output tokens only: a decode step has no request shape to count inputs by.
        usd_per_million_output_tokens: crate::economics::Pricing::of(&s.system.spec)
            .ok()
            .flatten()
            .and_then(|q| q.point_cost(s.parallel.gpus(), watts, batch as f64 / t, 1.0))
            .and_then(|c| c.usd_per_million_output_tokens),
        layers,
        ops,
        outside_operators_ms,
    })
}
