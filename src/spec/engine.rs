//! Serving engines as descriptions (`configs/engines/<name>.toml`): what an engine version
//! does that the cost model must know, apart from the hardware it runs on.
//!
//! An engine's defaults often depend on the hardware (vLLM picks `max_num_seqs` by GPU memory,
//! its custom all-reduce switches from one-shot to two-shot at a size that depends on the
//! world size, a kernel path exists only on one architecture), so the file holds those as
//! rules and [`EngineFile::resolve`] turns them into the concrete [`EngineSpec`] for one
//! system. The cost model reads only the resolved form.
//!
//! A system names its default engine; `--engine NAME|FILE` replaces it and `--set engine.X=…`
//! changes a resolved field. Older system files that carry the resolved `[engine]` table inline
//! still read.

use crate::spec::gpu::GpuSpec;
use crate::spec::model::FormatKind;
use crate::spec::system::{AllReduceImpl, NcclAlgorithm, NcclP2pLevel, NcclProtocol};
use crate::units::{Bytes, Fraction, Seconds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Serving-engine facts the cost model reads, resolved for one system.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    /// Engine and version, for the reader.
    pub name: String,
    /// Decode steps replayed from CUDA graphs (GPU-side gaps only) or launched eagerly.
    pub cuda_graphs: bool,
    pub allreduce: AllReduceImpl,
    pub nccl_algorithm: NcclAlgorithm,
    pub nccl_protocol: NcclProtocol,
    /// How far NCCL uses peer-to-peer transfers (`NCCL_P2P_LEVEL`; default NCCL's own rule).
    #[serde(default)]
    pub nccl_p2p_level: NcclP2pLevel,
    /// Largest message the custom all-reduce takes (vLLM: 8 MB for 8 GPUs).
    pub custom_allreduce_max: Bytes,
    /// Below this size the custom kernel is one-shot, above it two-shot (the system's GPU
    /// count's rule).
    pub one_shot_max: Bytes,
    /// The same limit for an all-reduce over at most 4 GPUs (a smaller TP group).
    #[serde(default)]
    pub one_shot_max_4gpu: Option<Bytes>,
    /// Largest message a symmetric-memory (NVLS) all-reduce takes on NVSwitch systems with
    /// NVLS, above the custom kernel's limit (none: NCCL straight above it).
    #[serde(default)]
    pub symm_mem_max: Option<Bytes>,
    /// GPU idle time between consecutive kernels inside a CUDA graph.
    pub kernel_gap: Seconds,
    /// Host time per kernel of a pass launched eagerly (CUDA graphs off, or a batch beyond
    /// the captured ones): the CUDA launch, and for a framework that runs its modules as
    /// eager Python, the module code and small operators around each kernel rooftop counts.
    pub kernel_launch: Seconds,
    /// Fixed cost of one decode step outside the GPU's kernels: scheduling, sampling,
    /// output processing.
    pub step_overhead: Seconds,
    /// Fraction of each GPU's memory the engine takes (vLLM's `gpu_memory_utilization`), or
    /// of the memory left after weights and activations (TensorRT-LLM's
    /// `free_gpu_memory_fraction`): `memory_fraction_of` says which.
    pub gpu_memory_utilization: Fraction,
    /// What `gpu_memory_utilization` is a fraction of.
    #[serde(default)]
    pub memory_fraction_of: MemoryFractionOf,
    /// Whether a block-scaled weight split across ranks must split into whole blocks.
    #[serde(default)]
    pub weight_block_split: WeightBlockSplit,
    /// Memory per GPU held for activations, CUDA graphs and workspace.
    pub activation_reserve: Bytes,
    /// Most sequences the scheduler runs at once.
    pub max_num_seqs: u32,
    /// Token budget per step (decode tokens plus prefill chunks).
    pub max_num_batched_tokens: u32,
    /// A prompt may be split over steps in chunks of the token budget.
    pub chunked_prefill: bool,
    /// A step that carries prompts also advances every decoding sequence (vLLM's chunked
    /// prefill, TensorRT-LLM's in-flight batching); `false`: the scheduler runs waiting
    /// prompts in passes of their own first and the decodes wait (SGLang's default, its
    /// `--enable-mixed-chunk` off). Absent: as `chunked_prefill` (vLLM's two modes); read
    /// it through [`EngineSpec::mixes_prefill_with_decode`].
    #[serde(default)]
    pub prefill_mixes_with_decode: Option<bool>,
    /// Weight formats this engine's kernels dequantize in a separate, memory-bound cast pass
    /// instead of inside the GEMM.
    #[serde(default)]
    pub unfused_dequant: Vec<FormatKind>,
    /// GEMM kernel family this engine runs per weight-format key (`fp8`, `fp8-block`, …)
    /// where it is not the generation's measured one: a family name of the generation's
    /// `[gemm_families]` (`configs/kernels/`).
    #[serde(default)]
    pub gemm_family: BTreeMap<String, String>,
    /// Fused-MoE kernel library this engine runs per weight-format key where it is not the
    /// generation's default one: a library of the generation's `[moe_backends]`
    /// (`configs/kernels/`), e.g. `mxfp4 = "marlin"` (vLLM's `VLLM_MXFP4_USE_MARLIN=1`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moe_library: BTreeMap<String, String>,
    #[serde(default)]
    pub fusion: EngineFusion,
    #[serde(default)]
    pub cpu: CpuCosts,
    /// Host work of a speculative step (EAGLE, MTP, draft model).
    #[serde(default)]
    pub speculation: SpeculationHost,
    #[serde(default)]
    pub kv: KvPolicy,
    /// Most tokens per forward the engine replays from its captured CUDA graphs; a larger
    /// batch (a big decode batch, a prefill chunk) runs eagerly. `None`: no limit.
    #[serde(default)]
    pub cuda_graph_max_tokens: Option<u32>,
    /// What that limit counts for a decode pass: tokens, or sequences (an engine that
    /// captures its graphs per batch size, the speculative verify graph holding each
    /// sequence's draft tokens).
    #[serde(default)]
    pub cuda_graph_counts: GraphCounts,
    /// How the MoE layer's dispatch and combine run when attention is data-parallel.
    #[serde(default)]
    pub moe_all_to_all: MoeAllToAll,
    /// Decode steps between the scheduler's polls for new requests (SGLang's
    /// `--scheduler-recv-interval`; 1: every step). A request that arrives during a stretch
    /// of decodes waits for the next poll.
    #[serde(default = "every_step")]
    pub scheduler_recv_interval: u32,
    /// Most sequences the scheduler runs at once while it drafts with a model (EAGLE heads,
    /// MTP, a draft model), where the engine lowers its own default then (SGLang: 48, unless
    /// the launch sets `--max-running-requests`). `None`: `max_num_seqs` as without
    /// speculation. A lower `max_num_seqs` still binds.
    #[serde(default)]
    pub max_num_seqs_when_speculating: Option<u32>,
    /// Prompts held back to balance data-parallel attention ranks (TensorRT-LLM's
    /// `attention_dp_config` with `enable_balance = true`; `None`: never held). Applies
    /// only when attention is data-parallel.
    #[serde(default)]
    pub attention_dp_balance: Option<AttentionDpBalance>,
    /// Prompts held back to batch them with later ones while the engine decodes
    /// (TensorRT-LLM's `batch_wait_timeout_iters` with `batch_wait_max_tokens_ratio`;
    /// `None`: never held). Applies only when attention is not data-parallel.
    #[serde(default)]
    pub batch_wait: Option<BatchWait>,
}

/// TensorRT-LLM's batch waiting (`batch_wait_timeout_iters`, `batch_wait_max_tokens_ratio`;
/// `py_executor.py` `_schedule` and `_waiting_requests`): in an iteration that would prefill
/// prompts while other requests decode, and without data-parallel attention, the prompts run
/// only when the tokens the iteration would schedule (the prompts' whole lengths and one per
/// decoding request) reach `max_tokens_ratio` of the token budget, or when an iteration
/// counter has reached `timeout_iters`; otherwise the iteration only decodes and the counter
/// advances. The counter starts again at 0 when the prompts run. With nothing decoding the
/// prompts run at once.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BatchWait {
    /// Decode-only iterations the prompts may be held (`batch_wait_timeout_iters`).
    pub timeout_iters: u32,
    /// The share of the token budget that releases them at once
    /// (`batch_wait_max_tokens_ratio`, 0 to 1).
    pub max_tokens_ratio: f64,
}

impl BatchWait {
    /// A timeout of at most [`MAX_BALANCE_ITERS`] iterations and a ratio in [0, 1]; `field`
    /// names where it was given.
    pub fn check(&self, field: &str) -> Result<(), (String, String)> {
        iterations(field, "timeout_iters", self.timeout_iters)?;
        let r = self.max_tokens_ratio;
        if !(r.is_finite() && (0.0..=1.0).contains(&r)) {
            return Err((
                format!("{field}.max_tokens_ratio"),
                "a share of the token budget, 0 to 1".into(),
            ));
        }
        Ok(())
    }
}

/// TensorRT-LLM's attention-DP context balancing (`attention_dp_config`,
/// `py_executor.py` `_balance_adp_requests`): each iteration the ranks compare the prompts
/// they would prefill; when every rank has one they run (after `batching_wait_iters` more
/// iterations where every rank also decodes), otherwise they wait until an iteration counter
/// that runs through every iteration reaches `timeout_iters`, or until some rank has nothing
/// to decode.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AttentionDpBalance {
    /// Iterations the prompts wait for every rank to have one (TensorRT-LLM default 50).
    #[serde(default = "balance_timeout_default")]
    pub timeout_iters: u32,
    /// Iterations more once every rank has one and decodes (TensorRT-LLM default 10).
    #[serde(default = "balance_batching_wait_default")]
    pub batching_wait_iters: u32,
}

fn balance_timeout_default() -> u32 {
    50
}

fn balance_batching_wait_default() -> u32 {
    10
}

/// The most iterations a balancing timeout or wait may name: a bound on a typo.
pub const MAX_BALANCE_ITERS: u32 = 10_000;

impl AttentionDpBalance {
    /// A timeout and a wait of at most [`MAX_BALANCE_ITERS`] iterations each (0: none);
    /// `field` names where it was given.
    pub fn check(&self, field: &str) -> Result<(), (String, String)> {
        iterations(field, "timeout_iters", self.timeout_iters)?;
        iterations(field, "batching_wait_iters", self.batching_wait_iters)
    }
}

/// An iteration count of at most [`MAX_BALANCE_ITERS`], `key` of `field`.
fn iterations(field: &str, key: &str, n: u32) -> Result<(), (String, String)> {
    if n > MAX_BALANCE_ITERS {
        return Err((
            format!("{field}.{key}"),
            format!("0 to {MAX_BALANCE_ITERS} iterations"),
        ));
    }
    Ok(())
}

fn every_step() -> u32 {
    1
}

/// The most decode steps between polls a description may name: far above any engine's
/// setting (SGLang's launch scripts use up to 60), a bound on a typo.
pub const MAX_RECV_INTERVAL: u32 = 10_000;

/// What an engine's CUDA-graph limit counts in a decode pass.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GraphCounts {
    /// Tokens per forward (vLLM's capture sizes): a verify pass of k + 1 tokens per
    /// sequence counts them all.
    #[default]
    Tokens,
    /// Sequences per forward: graphs captured per batch size, each holding its sequences'
    /// tokens (SGLang's `cuda_graph_max_bs`, whose target-verify and draft graphs carry
    /// every draft token). A prefill, or a decode step with prompt tokens mixed in, still
    /// counts tokens.
    Sequences,
}

/// How an engine moves tokens to their experts and back when attention runs data-parallel
/// (each rank holds its own sequences) and the experts are spread over the ranks: the
/// engine's expert-parallel communication backend (vLLM's `--all2all-backend` /
/// `VLLM_ALL2ALL_BACKEND`, SGLang's `--moe-a2a-backend` with `--deepep-mode`).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum MoeAllToAll {
    /// NCCL all-to-all: each token's hidden state goes once to every rank holding one of
    /// its experts, and comes back the same way.
    #[default]
    Nccl,
    /// Every data-parallel replica's tokens all-gathered to every replica (over the
    /// data-parallel group: one GPU per replica, `tp` apart), each GPU runs its experts on
    /// the tokens routed to them, a reduce-scatter returns each replica its tokens' sums, and
    /// a tensor-parallel all-reduce adds the replica's GPUs' experts (vLLM's
    /// `allgather_reducescatter`; TensorRT-LLM's MoE under attention DP without its
    /// all-to-all).
    AllgatherReducescatter,
    /// DeepEP's low-latency kernels: each token goes to each of its top-k experts
    /// separately (FP8 with scales out, BF16 back), no host synchronisation; for decode.
    DeepepLowLatency,
    /// DeepEP's normal (high-throughput) kernels: a token crosses the network once per
    /// destination node and is forwarded over NVLink inside it; a host synchronisation per
    /// call learns the receive counts; for prefill.
    DeepepNormal,
    /// DeepEP with its mode per pass, as SGLang's `--deepep-mode auto`: low-latency for
    /// decode steps, normal for steps that carry prompt tokens.
    DeepepAuto,
}

impl MoeAllToAll {
    pub fn name(self) -> &'static str {
        match self {
            MoeAllToAll::Nccl => "nccl",
            MoeAllToAll::AllgatherReducescatter => "allgather-reducescatter",
            MoeAllToAll::DeepepLowLatency => "deepep-low-latency",
            MoeAllToAll::DeepepNormal => "deepep-normal",
            MoeAllToAll::DeepepAuto => "deepep-auto",
        }
    }

    /// DeepEP in any mode: pure expert parallelism over the whole data-parallel group.
    pub fn is_deepep(self) -> bool {
        matches!(
            self,
            MoeAllToAll::DeepepLowLatency | MoeAllToAll::DeepepNormal | MoeAllToAll::DeepepAuto
        )
    }
}

/// Operators the engine runs inside another operator's kernel rather than as kernels of
/// their own (their work stays, their per-kernel fixed cost goes).
/// What an engine's memory fraction is a fraction of: the rule that sizes its KV cache.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum MemoryFractionOf {
    /// Of the GPU's whole memory, weights and activations included (vLLM's
    /// `gpu_memory_utilization`, SGLang's `mem_fraction_static`): the KV cache gets what
    /// that share leaves after them, and weights beyond it do not fit.
    #[default]
    Total,
    /// Of the memory free once the weights are loaded and the activations measured
    /// (TensorRT-LLM's `free_gpu_memory_fraction`): the KV cache gets that share of what is
    /// left, and weights fit as long as anything is left.
    Free,
}

/// How a block-scaled weight may be split across tensor-parallel ranks.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum WeightBlockSplit {
    /// Each rank's shard is a whole number of blocks (vLLM's and SGLang's FP8 block check).
    #[default]
    WholeBlocks,
    /// A shard may end in a partial block: the scales are laid out `ceil(n / block)` and
    /// split with the weight (TensorRT-LLM's FP8 block-scaled linear layers).
    PartialBlocks,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct EngineFusion {
    /// The tensor-parallel all-reduce kernel also adds the residual and runs the RMSNorm
    /// that follows it.
    #[serde(default)]
    pub allreduce_norm: bool,
    /// The all-reduce fusion runs only for models whose hidden size exceeds this (0: all).
    #[serde(default)]
    pub allreduce_norm_hidden_above: u32,
    /// The attention kernels apply RoPE to the queries and keys (with the cache append):
    /// no separate rotary kernel.
    #[serde(default)]
    pub rope_in_attention: bool,
}

/// CPU work of serving, beside the GPU step.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct CpuCosts {
    /// CPU per running sequence per step: scheduling, input preparation, sampling and output
    /// bookkeeping (the fixed part is `step_overhead`).
    #[serde(default)]
    pub per_seq: Seconds,
    /// API-server process time per streamed token (detokenize, serialize, send one chunk).
    /// A separate process: it bounds the token rate, it does not lengthen the GPU step.
    #[serde(default)]
    pub api_per_token: Seconds,
    /// The CPU work of a step runs while the GPU runs the previous one (async scheduling,
    /// overlap schedulers): step = max(GPU, CPU) instead of GPU + CPU.
    #[serde(default)]
    pub overlap: bool,
    /// Whether that overlap stays on while the engine speculates (absent: as `overlap`).
    /// SGLang turns its overlap scheduler off for EAGLE drafts.
    #[serde(default)]
    pub overlap_when_speculating: Option<bool>,
    /// Whether it stays on while the engine drafts with n-gram lookup or a separate draft
    /// model (absent: as `overlap_when_speculating`). vLLM's default async scheduling
    /// covers EAGLE and MTP drafts only.
    #[serde(default)]
    pub overlap_with_separate_drafts: Option<bool>,
    /// Whether it stays on under pipeline parallelism (absent: as `overlap`). vLLM's default
    /// async scheduling excludes pipeline parallelism.
    #[serde(default)]
    pub overlap_with_pipeline: Option<bool>,
}

/// How a speculative step drafts, as far as the engine's overlap rules tell drafts apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drafting {
    /// Not speculating.
    None,
    /// Heads on the target's hidden states (EAGLE, MTP).
    Heads,
    /// N-gram lookup or a separate draft model.
    Separate,
}

impl CpuCosts {
    /// Whether the engine's CPU work runs beside the GPU for a layout of `pp` pipeline
    /// stages, drafting as `drafting`.
    pub fn overlaps(&self, pp: u32, drafting: Drafting) -> bool {
        let base = match drafting {
            Drafting::None => self.overlap,
            Drafting::Heads => self.overlap_when_speculating.unwrap_or(self.overlap),
            Drafting::Separate => self
                .overlap_with_separate_drafts
                .or(self.overlap_when_speculating)
                .unwrap_or(self.overlap),
        };
        base && (pp <= 1 || self.overlap_with_pipeline.unwrap_or(true))
    }

    /// The engine step from the GPU's pass (`gpu`, its fixed CPU cost `step_overhead`
    /// included, as the evaluator prices it) at `running` sequences: the CPU's fixed and
    /// per-sequence work beside the GPU's kernels with `overlap`, after them without.
    pub fn engine_step(&self, gpu: f64, step_overhead: f64, running: f64, overlap: bool) -> f64 {
        let kernels = gpu - step_overhead;
        let cpu = step_overhead + self.per_seq.0 * running;
        if overlap {
            kernels.max(cpu)
        } else {
            kernels + cpu
        }
    }
}

/// Host work a speculative step adds outside its CUDA graphs, as counted in the engine's
/// source (`[speculation]`): eager glue kernels (KV-slot assignment, tree building, the
/// attention metadata of each pass, the acceptance bookkeeping), each launch-bound at the
/// engine's `kernel_launch`; host synchronisations (`.item()`, `.tolist()`, boolean-mask
/// indexing) after which the GPU waits for the CPU to prepare the next pass; and the extra
/// forward-batch builds of the draft, verify and draft-extend passes. It sits in the step's
/// timeline: an overlap scheduler does not hide it, since the GPU needs its results to go
/// on. An engine without the table prices none.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SpeculationHost {
    /// Eager kernel launches per speculative step, besides those per draft pass.
    #[serde(default)]
    pub eager_launches: u32,
    /// Eager launches per draft pass after the first (its attention metadata).
    #[serde(default)]
    pub eager_launches_per_draft_pass: u32,
    /// Host synchronisations per step.
    #[serde(default)]
    pub host_syncs: u32,
    /// CPU time one synchronisation costs beyond the wait itself.
    #[serde(default)]
    pub host_sync: Seconds,
    /// Forward-batch (inputs and attention metadata) builds per step beyond the plain
    /// step's one.
    #[serde(default)]
    pub extra_forward_batches: u32,
    /// CPU time of one forward-batch build.
    #[serde(default)]
    pub forward_batch: Seconds,
    /// With a tree draft (topk > 1): the extra eager launches and synchronisations, and
    /// the host-side attention plans (a fixed number plus one per draft pass after the
    /// first) its attention backend runs, each costing `tree_plan`.
    #[serde(default)]
    pub tree_eager_launches: u32,
    #[serde(default)]
    pub tree_host_syncs: u32,
    #[serde(default)]
    pub tree_plans: u32,
    #[serde(default)]
    pub tree_plan: Seconds,
}

impl SpeculationHost {
    /// Seconds of host work in one speculative step with `k` draft passes, a tree when
    /// `tree`, at `kernel_launch` seconds per eager launch.
    pub fn step_cost(&self, k: u32, tree: bool, kernel_launch: f64) -> f64 {
        let later = k.saturating_sub(1) as f64;
        let mut launches =
            self.eager_launches as f64 + later * self.eager_launches_per_draft_pass as f64;
        let mut syncs = self.host_syncs as f64;
        let mut plans = 0.0;
        if tree {
            launches += self.tree_eager_launches as f64;
            syncs += self.tree_host_syncs as f64;
            plans = self.tree_plans as f64 + later;
        }
        launches * kernel_launch
            + syncs * self.host_sync.0
            + self.extra_forward_batches as f64 * self.forward_batch.0
            + plans * self.tree_plan.0
    }
}

/// How the KV cache is handed out.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KvPolicy {
    /// Tokens per KV block.
    pub block_size: u32,
    /// Blocks allocated as tokens arrive (a sequence holds input + output/2 on average,
    /// preempted when the cache runs out), rather than reserved for input + output at
    /// admission.
    pub on_demand: bool,
}

impl KvPolicy {
    /// The KV tokens one sequence of `input` prompt and `output` generated tokens holds: on
    /// average input + output/2 where blocks are allocated as tokens arrive, else the whole
    /// request reserved at admission; rounded up to whole blocks.
    pub fn held_tokens(&self, input: f64, output: f64) -> f64 {
        let block = self.block_size.max(1) as f64;
        let held = if self.on_demand {
            input + output / 2.0
        } else {
            input + output
        };
        (held / block).ceil() * block
    }
}

impl Default for KvPolicy {
    /// Reserve the whole request at admission, one-token blocks: the model before engines
    /// carried a policy.
    fn default() -> Self {
        KvPolicy {
            block_size: 1,
            on_demand: false,
        }
    }
}

/// A system's engine: a name (built-in or path) or, in older files, the resolved table.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum EngineRef {
    Name(String),
    Inline(Box<EngineSpec>),
}

/// One size by world size: applies to systems of at most `max_gpus` GPUs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorldSizeRule {
    pub max_gpus: u32,
    pub size: Bytes,
}

/// Scheduler limits by GPU memory: applies to GPUs of at least `min_gpu_memory` whose
/// marketing name contains none of `except_names`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BatchRule {
    pub min_gpu_memory: Bytes,
    /// Parts the rule leaves out, matched case-insensitively against the GPU's `full_name`
    /// (vLLM's `get_batch_defaults` tests its device name for "a100").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except_names: Vec<String>,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
}

impl BatchRule {
    /// Whether the rule applies to `gpu`.
    fn applies_to(&self, gpu: &GpuSpec) -> bool {
        let name = gpu.full_name.to_ascii_lowercase();
        gpu.memory_capacity.0 >= self.min_gpu_memory.0
            && !self
                .except_names
                .iter()
                .any(|n| name.contains(&n.to_ascii_lowercase()))
    }
}

/// An engine release, as `0.15.1` or `0.24` (numeric components; a suffix such as
/// `.post1` or `rc2` after them is ignored). Releases compare component by component, a
/// missing one counting as 0.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(Vec<u32>);

impl Release {
    /// The release a version string names, if it starts with a number.
    pub fn parse(text: &str) -> Option<Release> {
        let mut parts = Vec::new();
        for piece in text.trim().trim_start_matches('v').split('.') {
            let digits: String = piece.chars().take_while(|c| c.is_ascii_digit()).collect();
            if digits.is_empty() {
                break;
            }
            parts.push(digits.parse().ok()?);
            if digits.len() != piece.len() {
                break;
            }
        }
        if parts.is_empty() {
            return None;
        }
        while parts.len() > 1 && parts.last() == Some(&0) {
            parts.pop();
        }
        Some(Release(parts))
    }
}

/// Whether release `at` lies in a rule's range, from `from` (inclusive) to `before`
/// (exclusive); absent bounds are open, and every rule holds when no release is known. The
/// bounds were checked to parse ([`check_bounds`]).
fn within(from: &Option<String>, before: &Option<String>, at: Option<&Release>) -> bool {
    let Some(r) = at else { return true };
    let bound = |b: &Option<String>| b.as_deref().and_then(Release::parse);
    bound(from).is_none_or(|f| *r >= f) && bound(before).is_none_or(|b| *r < b)
}

/// Whether a rule bounded by releases `from` .. `before` holds for the engine `name`
/// (`vllm-v1@0.18.0`): every rule holds for a name without a release.
pub(crate) fn holds_for(name: &str, from: &Option<String>, before: &Option<String>) -> bool {
    let at = name.split_once('@').and_then(|(_, r)| Release::parse(r));
    within(from, before, at.as_ref())
}

/// A rule's bounds, where given, name a release.
pub(crate) fn check_bounds(
    from: &Option<String>,
    before: &Option<String>,
    field: &str,
) -> Result<(), (String, String)> {
    for (name, v) in [("from", from), ("before", before)] {
        if let Some(v) = v {
            if Release::parse(v).is_none() {
                return Err((
                    format!("{field}.{name}"),
                    format!("a release such as \"0.16\", not \"{v}\""),
                ));
            }
        }
    }
    Ok(())
}

/// Weight formats cast in a separate pass on GPUs whose architecture names `arch`, in the
/// engine releases the rule names.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArchRule {
    /// Matched against the GPU description's `architecture` (e.g. `SM120`).
    pub arch: String,
    pub formats: Vec<FormatKind>,
    /// First release the rule holds for (absent: every earlier one).
    #[serde(default)]
    pub from: Option<String>,
    /// First release it no longer holds for (absent: every later one).
    #[serde(default)]
    pub before: Option<String>,
}

/// A GEMM kernel family the engine runs for `formats` (weight-format keys of
/// `configs/kernels/`) on GPUs whose architecture names `arch`, in place of the generation's
/// measured one.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FamilyRule {
    /// Matched against the GPU description's `architecture` (e.g. `SM100`).
    pub arch: String,
    pub formats: Vec<String>,
    /// A family of that generation's `[gemm_families]`.
    pub family: String,
    /// First release the rule holds for (absent: every earlier one).
    #[serde(default)]
    pub from: Option<String>,
    /// First release it no longer holds for (absent: every later one).
    #[serde(default)]
    pub before: Option<String>,
}

/// A fused-MoE kernel library the engine runs for `formats` (weight-format keys of
/// `configs/kernels/`) on GPUs whose architecture names `arch`, in place of the generation's
/// default one.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LibraryRule {
    /// Matched against the GPU description's `architecture` (e.g. `SM90`).
    pub arch: String,
    pub formats: Vec<String>,
    /// A library of that generation's `[moe_backends]` (`marlin`, `triton`, `cutlass`, ...).
    pub library: String,
    /// First release the rule holds for (absent: every earlier one).
    #[serde(default)]
    pub from: Option<String>,
    /// First release it no longer holds for (absent: every later one).
    #[serde(default)]
    pub before: Option<String>,
}

/// One engine, read 1:1 from `configs/engines/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    pub name: String,
    pub description: String,
    /// Versions the description is for.
    pub version: String,
    /// The release the description resolves to when none is named (`--engine NAME@0.24`
    /// names one): the rules bounded by release (`from`, `before`) are picked by it.
    #[serde(default)]
    pub release: Option<String>,
    pub cuda_graphs: bool,
    pub allreduce: AllReduceImpl,
    pub nccl_algorithm: NcclAlgorithm,
    pub nccl_protocol: NcclProtocol,
    /// `NCCL_P2P_LEVEL` as the deployment sets it (default: NCCL's own rule).
    #[serde(default)]
    pub nccl_p2p_level: NcclP2pLevel,
    pub custom_allreduce_max: Bytes,
    /// One-shot limit of the custom all-reduce by world size; the first rule whose
    /// `max_gpus` covers the system applies.
    pub one_shot_max: Vec<WorldSizeRule>,
    /// Largest message of the symmetric-memory all-reduce on NVSwitch systems with NVLS.
    #[serde(default)]
    pub symm_mem_max: Option<Bytes>,
    pub kernel_gap: Seconds,
    pub kernel_launch: Seconds,
    pub step_overhead: Seconds,
    pub gpu_memory_utilization: Fraction,
    #[serde(default)]
    pub memory_fraction_of: MemoryFractionOf,
    #[serde(default)]
    pub weight_block_split: WeightBlockSplit,
    pub activation_reserve: Bytes,
    /// Scheduler defaults by GPU memory; the first rule the GPU reaches applies.
    pub batch_defaults: Vec<BatchRule>,
    pub chunked_prefill: bool,
    /// Whether a step carrying prompts also decodes (absent: as `chunked_prefill`, vLLM's
    /// two modes: chunks mixed into the decode step, or whole prompts in passes of their
    /// own).
    #[serde(default)]
    pub prefill_mixes_with_decode: Option<bool>,
    #[serde(default)]
    pub unfused_dequant: Vec<ArchRule>,
    /// GEMM kernel families the engine runs instead of the generation's measured ones.
    #[serde(default)]
    pub gemm_family: Vec<FamilyRule>,
    /// Fused-MoE libraries the engine runs instead of the generation's default ones.
    #[serde(default)]
    pub moe_library: Vec<LibraryRule>,
    #[serde(default)]
    pub fusion: EngineFusion,
    #[serde(default)]
    pub cpu: CpuCosts,
    /// The first release that overlaps its CPU work with the GPU by default (`cpu.overlap`
    /// from then on, whatever `[cpu]` says for earlier ones): vLLM turns async scheduling on
    /// by default from 0.14.
    #[serde(default)]
    pub overlap_from: Option<String>,
    #[serde(default)]
    pub speculation: SpeculationHost,
    #[serde(default)]
    pub kv: KvPolicy,
    /// Largest batch (tokens per forward) with a captured CUDA graph; larger ones run
    /// eagerly. Absent: every batch is graphed.
    #[serde(default)]
    pub cuda_graph_max_tokens: Option<u32>,
    /// What that limit counts in a decode pass (absent: tokens).
    #[serde(default)]
    pub cuda_graph_counts: GraphCounts,
    /// The MoE dispatch/combine backend under data-parallel attention (absent: NCCL's
    /// all-to-all).
    #[serde(default)]
    pub moe_all_to_all: MoeAllToAll,
    /// Decode steps between the scheduler's polls for new requests (absent: 1, every step).
    #[serde(default = "every_step")]
    pub scheduler_recv_interval: u32,
    /// The engine's own cap on running sequences while it speculates (absent: none).
    #[serde(default)]
    pub max_num_seqs_when_speculating: Option<u32>,
    /// Context balancing over data-parallel attention ranks (absent: none).
    #[serde(default)]
    pub attention_dp_balance: Option<AttentionDpBalance>,
    /// Batch waiting before prefills (absent: none).
    #[serde(default)]
    pub batch_wait: Option<BatchWait>,
    pub sources: BTreeMap<String, String>,
}

impl EngineFile {
    /// The engine as it runs on `gpu_count` of `gpu`, at `release` (else its default release).
    pub fn resolve(
        &self,
        gpu: &GpuSpec,
        gpu_count: u32,
        release: Option<&str>,
    ) -> Result<EngineSpec, (String, String)> {
        for (i, r) in self.unfused_dequant.iter().enumerate() {
            check_bounds(&r.from, &r.before, &format!("unfused_dequant[{i}]"))?;
        }
        for (i, r) in self.gemm_family.iter().enumerate() {
            check_bounds(&r.from, &r.before, &format!("gemm_family[{i}]"))?;
        }
        for (i, r) in self.moe_library.iter().enumerate() {
            check_bounds(&r.from, &r.before, &format!("moe_library[{i}]"))?;
        }
        if let Some(v) = &self.overlap_from {
            if Release::parse(v).is_none() {
                return Err((
                    "overlap_from".into(),
                    format!("a release such as \"0.14\", not \"{v}\""),
                ));
            }
        }
        if let Some(d) = &self.release {
            if Release::parse(d).is_none() {
                return Err((
                    "release".into(),
                    format!("a release such as \"0.15\", not \"{d}\""),
                ));
            }
        }
        let named = release.or(self.release.as_deref());
        let at = match named {
            Some(r) => Some(Release::parse(r).ok_or_else(|| {
                (
                    "release".to_string(),
                    format!("a release such as \"0.24\" after the engine's name, not \"{r}\""),
                )
            })?),
            None => None,
        };
        let one_shot = self
            .one_shot_max
            .iter()
            .find(|r| gpu_count <= r.max_gpus)
            .or(self.one_shot_max.last())
            .ok_or_else(|| ("one_shot_max".to_string(), "at least one rule".to_string()))?;
        let batch = self
            .batch_defaults
            .iter()
            .find(|r| r.applies_to(gpu))
            .ok_or_else(|| {
                (
                    "batch_defaults".to_string(),
                    format!(
                        "a rule for a GPU of {:.1} GB (end with min_gpu_memory = \"0 B\")",
                        gpu.memory_capacity.0 / 1e9
                    ),
                )
            })?;
        let mut unfused = Vec::new();
        for r in &self.unfused_dequant {
            if gpu.architecture.contains(&r.arch) && within(&r.from, &r.before, at.as_ref()) {
                unfused.extend(r.formats.iter().copied());
            }
        }
        let mut gemm_family = BTreeMap::new();
        for r in self.gemm_family.iter().filter(|r| {
            gpu.architecture.contains(&r.arch) && within(&r.from, &r.before, at.as_ref())
        }) {
            for f in &r.formats {
                gemm_family.insert(f.clone(), r.family.clone());
            }
        }
        let mut moe_library = BTreeMap::new();
        for r in self.moe_library.iter().filter(|r| {
            gpu.architecture.contains(&r.arch) && within(&r.from, &r.before, at.as_ref())
        }) {
            for f in &r.formats {
                moe_library.insert(f.clone(), r.library.clone());
            }
        }
        let mut cpu = self.cpu;
        if self.overlap_from.is_some() && within(&self.overlap_from, &None, at.as_ref()) {
            cpu.overlap = true;
        }
        let e = EngineSpec {
            name: match release {
                Some(r) => format!("{}@{r}", self.name),
                None => self.name.clone(),
            },
            cuda_graphs: self.cuda_graphs,
            allreduce: self.allreduce,
            nccl_algorithm: self.nccl_algorithm,
            nccl_protocol: self.nccl_protocol,
            nccl_p2p_level: self.nccl_p2p_level,
            custom_allreduce_max: self.custom_allreduce_max,
            one_shot_max: one_shot.size,
            one_shot_max_4gpu: self
                .one_shot_max
                .iter()
                .find(|r| r.max_gpus <= 4)
                .map(|r| r.size),
            symm_mem_max: self.symm_mem_max,
            kernel_gap: self.kernel_gap,
            kernel_launch: self.kernel_launch,
            step_overhead: self.step_overhead,
            gpu_memory_utilization: self.gpu_memory_utilization,
            memory_fraction_of: self.memory_fraction_of,
            weight_block_split: self.weight_block_split,
            activation_reserve: self.activation_reserve,
            max_num_seqs: batch.max_num_seqs,
            max_num_batched_tokens: batch.max_num_batched_tokens,
            chunked_prefill: self.chunked_prefill,
            prefill_mixes_with_decode: self.prefill_mixes_with_decode,
            unfused_dequant: unfused,
            gemm_family,
            moe_library,
            fusion: self.fusion,
            cpu,
            speculation: self.speculation,
            kv: self.kv,
            cuda_graph_max_tokens: self.cuda_graph_max_tokens.filter(|_| self.cuda_graphs),
            cuda_graph_counts: self.cuda_graph_counts,
            moe_all_to_all: self.moe_all_to_all,
            scheduler_recv_interval: self.scheduler_recv_interval,
            max_num_seqs_when_speculating: self.max_num_seqs_when_speculating,
            attention_dp_balance: self.attention_dp_balance,
            batch_wait: self.batch_wait,
        };
        e.validate()?;
        Ok(e)
    }
}

impl EngineSpec {
    /// Whether a step that carries prompts also decodes: the description's
    /// `prefill_mixes_with_decode`, else its `chunked_prefill`.
    pub fn mixes_prefill_with_decode(&self) -> bool {
        self.prefill_mixes_with_decode
            .unwrap_or(self.chunked_prefill)
    }

    /// Most sequences the scheduler runs at once: `max_num_seqs`, and while it drafts with a
    /// model no more than the engine's own cap then (a lower `max_num_seqs`, as a launch's
    /// `--max-running-requests`, still binds).
    pub fn running_cap(&self, drafting_with_a_model: bool) -> u32 {
        let cap = self.max_num_seqs.max(1);
        match self.max_num_seqs_when_speculating {
            Some(s) if drafting_with_a_model => cap.min(s.max(1)),
            _ => cap,
        }
    }

    /// Memory per GPU the engine may use, bytes, on a GPU of `capacity` bytes.
    pub fn usable_memory(&self, capacity: f64) -> f64 {
        match self.memory_fraction_of {
            MemoryFractionOf::Total => capacity * self.gpu_memory_utilization.0,
            MemoryFractionOf::Free => capacity,
        }
    }

    /// KV-cache budget per GPU, bytes, on a GPU of `capacity` bytes holding `weights`
    /// bytes of weights (negative: the weights and the reserve do not fit).
    pub fn kv_budget(&self, capacity: f64, weights: f64) -> f64 {
        let left = self.usable_memory(capacity) - weights - self.activation_reserve.0;
        match self.memory_fraction_of {
            MemoryFractionOf::Total => left,
            MemoryFractionOf::Free if left > 0.0 => left * self.gpu_memory_utilization.0,
            MemoryFractionOf::Free => left,
        }
    }

    /// Field errors are named as `--set` and inline tables name them (`engine.<field>`).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.max_num_seqs == 0 {
            return Err(("engine.max_num_seqs".into(), "at least 1 sequence".into()));
        }
        if self.max_num_seqs_when_speculating == Some(0) {
            return Err((
                "engine.max_num_seqs_when_speculating".into(),
                "at least 1 sequence (leave it out for max_num_seqs)".into(),
            ));
        }
        if self.max_num_batched_tokens == 0 {
            return Err((
                "engine.max_num_batched_tokens".into(),
                "at least 1 token".into(),
            ));
        }
        for (field, v) in [
            ("engine.kernel_gap", self.kernel_gap),
            ("engine.kernel_launch", self.kernel_launch),
            ("engine.step_overhead", self.step_overhead),
            ("engine.cpu.per_seq", self.cpu.per_seq),
            ("engine.cpu.api_per_token", self.cpu.api_per_token),
        ] {
            if v.0.is_nan() || v.0 > 1.0 {
                return Err((field.into(), "a time of at most 1 s".into()));
            }
        }
        if self.cuda_graph_max_tokens == Some(0) {
            return Err((
                "engine.cuda_graph_max_tokens".into(),
                "at least 1 token (leave it out for no limit)".into(),
            ));
        }
        if self.kv.block_size == 0 {
            return Err(("engine.kv.block_size".into(), "at least 1 token".into()));
        }
        if !(1..=MAX_RECV_INTERVAL).contains(&self.scheduler_recv_interval) {
            return Err((
                "engine.scheduler_recv_interval".into(),
                format!("1 to {MAX_RECV_INTERVAL} decode steps between polls (1: every step)"),
            ));
        }
        if let Some(b) = &self.attention_dp_balance {
            b.check("engine.attention_dp_balance")?;
        }
        if let Some(b) = &self.batch_wait {
            b.check("engine.batch_wait")?;
        }
        let u = self.gpu_memory_utilization.0;
        if !(1e-3..=1.0).contains(&u) {
            return Err((
                "engine.gpu_memory_utilization".into(),
                "a fraction between 0.001 and 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlap's exclusions: pipeline parallelism and drafts other than heads turn it
    /// off where the engine says so, and nothing turns it on.
    #[test]
    fn overlap_rules_exclude_what_the_engine_excludes() {
        let vllm = CpuCosts {
            overlap: true,
            overlap_with_separate_drafts: Some(false),
            overlap_with_pipeline: Some(false),
            ..CpuCosts::default()
        };
        assert!(vllm.overlaps(1, Drafting::None));
        assert!(vllm.overlaps(1, Drafting::Heads));
        assert!(!vllm.overlaps(1, Drafting::Separate));
        assert!(!vllm.overlaps(2, Drafting::None));
        let sglang = CpuCosts {
            overlap: true,
            overlap_when_speculating: Some(false),
            ..CpuCosts::default()
        };
        assert!(sglang.overlaps(4, Drafting::None));
        assert!(!sglang.overlaps(1, Drafting::Heads));
        assert!(!sglang.overlaps(1, Drafting::Separate));
        let sync = CpuCosts::default();
        for d in [Drafting::None, Drafting::Heads, Drafting::Separate] {
            assert!(!sync.overlaps(1, d));
        }
    }

    #[test]
    fn speculation_host_work_counts_a_tree_only_when_drafting_one() {
        let h = SpeculationHost {
            eager_launches: 10,
            eager_launches_per_draft_pass: 2,
            host_syncs: 3,
            host_sync: Seconds(20e-6),
            extra_forward_batches: 2,
            forward_batch: Seconds(100e-6),
            tree_eager_launches: 5,
            tree_host_syncs: 4,
            tree_plans: 2,
            tree_plan: Seconds(50e-6),
        };
        let launch = 7e-6;
        // A chain of 4 passes: 10 + 2·3 launches, 3 syncs, 2 forward batches.
        let chain = 16.0 * launch + 3.0 * 20e-6 + 2.0 * 100e-6;
        assert!((h.step_cost(4, false, launch) - chain).abs() < 1e-15);
        // A tree of depth 4: 5 more launches, 4 more syncs, 2 + 3 attention plans.
        let tree = chain + 5.0 * launch + 4.0 * 20e-6 + 5.0 * 50e-6;
        assert!((h.step_cost(4, true, launch) - tree).abs() < 1e-15);
        assert_eq!(SpeculationHost::default().step_cost(8, true, launch), 0.0);
    }
}
