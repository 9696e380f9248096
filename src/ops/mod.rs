//! What runs: the operators of a forward pass as data, with their shapes and formats and no
//! prices.
//!
//! A decoder layer is two blocks, attention (norm, projections, the attention kernel, its
//! all-reduce) and feed-forward (norm, dense MLP or router + experts, its collective). The
//! builders here are pure functions of (model, layout, engine, pass) that return the
//! [`Operator`]s one GPU runs for one block, or for the once-per-pass head (embedding,
//! lm_head, sampling). Pricing lives in `cost/`: nothing here knows a GPU's speed.
//!
//! The same lists answer "what does one GPU hold": every operator that reads a weight tensor
//! says so ([`Operator::resident_weight_bytes`]), and every attention kernel says how many
//! bytes of cache one token occupies ([`Operator::kv_bytes_per_token`]). Weight memory and
//! KV capacity are sums over these lists, so they cannot disagree with what a step reads.
//!
//! To add an operator: a variant of [`Op`] (its shape and work), a builder that emits it,
//! and its price in `cost/price.rs`.

pub mod attention;
pub mod category;
pub mod collective;
pub mod head;
pub mod layers;
pub mod mlp;
pub mod moe;
pub mod recurrent;
pub mod routing;
pub mod scenario;

use crate::cost::generation::{AttentionBackend, MoeBackend};
use crate::spec::{FormatKind, KvDtype, WeightFormat};
use serde::Serialize;

pub use category::Category;
pub use layers::{BlockKind, BuildContext, Fusion, LayerPlan};
pub use scenario::{Parallel, Pass, Phase};

/// Which collective an operator performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveKind {
    /// Every rank ends with the sum of every rank's `bytes` (tensor-parallel reduction).
    AllReduce,
    /// Every rank ends with every rank's `bytes`.
    AllGather,
    /// Every rank ends with its `1/n` share of the sum.
    ReduceScatter,
    /// Each rank sends `bytes` in total, spread evenly over the others (EP dispatch/combine).
    AllToAll,
    /// One rank collects the others' shards, `bytes` in all arriving (logits gather).
    Gather,
    /// Point-to-point send between neighbouring ranks (pipeline stages).
    SendRecv,
}

/// DeepEP's two kernel families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeepEpMode {
    /// Each token-expert pair is its own message (no deduplication), written straight into
    /// the receiver's buffer; CUDA-graph capturable, no host synchronisation.
    LowLatency,
    /// One copy per destination rank inside a node and per destination node across the
    /// network (forwarded over NVLink there), after a notify round whose counts the host
    /// waits for.
    Normal,
}

/// One DeepEP dispatch or combine: what each of `ranks` expert-parallel ranks sends. The
/// token's destinations follow from the routing (`top_k` of `experts`, spread evenly over the
/// ranks); where they lie (same node or another) from the system, at pricing time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExpertExchange {
    pub mode: DeepEpMode,
    /// Tokens each rank sends (dispatch) or receives back (combine).
    pub tokens: f64,
    /// Bytes of one token's payload in one message.
    pub token_bytes: f64,
    /// Expert slots over all ranks (the model's experts plus any redundant replicas).
    pub experts: f64,
    pub top_k: f64,
    pub ranks: u32,
    /// The busiest rank's token-expert pairs over the mean (routing skew, at least 1): its
    /// links carry that much more than the average rank's.
    pub skew: f64,
}

/// Which attention kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKind {
    /// MLA in its absorbed form: queries attend in the latent space (decode).
    MlaAbsorbed,
    /// MLA in its expanded form: per-head K/V materialised (prefill).
    MlaExpanded,
    /// Grouped-query (or multi-head) attention over the full context.
    Gqa,
    /// Grouped-query attention over a sliding window.
    SlidingWindow,
    /// DeepSeek sparse attention's indexer, scoring every cached position.
    SparseIndexer,
    /// Attention within fixed chunks of the sequence (Llama-4 local layers).
    Chunked,
    /// Single-head (MQA) attention over compressed KV entries (DeepSeek-V4).
    Compressed,
}

/// Which recurrent (fixed-state) token mixer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecurrentKind {
    /// Gated DeltaNet (Qwen3-Next, Qwen3.5): delta-rule update of a d_k × d_v state per head.
    GatedDeltaNet,
    /// Mamba-2 selective scan (Nemotron-H): a head_dim × d_state state per head.
    Mamba2,
}

/// An operator's shape and the work it implies on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// A weight GEMM: `m` rows × (`k` → `n`) with the `n × k` weights stored as `weights`.
    /// With `after_cast`, a separate pass has cast the weights to BF16 first (an engine that
    /// does not fuse this format's dequantization), and the GEMM reads BF16.
    Gemm {
        m: f64,
        n: f64,
        k: f64,
        weights: WeightFormat,
        after_cast: bool,
        /// This GEMM's weights are held in memory for it (false when another operator's
        /// tensor is reused: tied lm_head, MLA's expanded kv_b_proj next to its absorbed form).
        resident: bool,
    },
    /// Routed experts as a fused MoE kernel runs them: every touched local expert's weights
    /// read once, each routed token through its expert's gate/up and down GEMMs.
    MoeGemm {
        /// Experts in the model.
        experts: f64,
        /// Expert-parallel ranks the experts are spread over.
        ep: f64,
        /// Tokens that reach the expert group (every data-parallel replica's).
        tokens: f64,
        /// How tokens spread over experts; the busiest rank sets the time.
        #[serde(serialize_with = "serialize_display")]
        routing: routing::Routing,
        /// Expert slots this GPU holds: its `experts / ep` and its group's redundant
        /// replicas.
        local_experts: f64,
        /// EPLB's redundant expert slots per expert-parallel group.
        #[serde(skip_serializing_if = "is_zero")]
        redundant: f64,
        /// Expected experts this GPU's share of the batch touches.
        touched_experts: f64,
        /// Experts each token is routed to.
        top_k: f64,
        /// Weight matrices per expert, each `hidden × width`: 3 gated (gate, up, down), 2
        /// ungated (up, down).
        matrices: f64,
        /// Token-expert pairs this GPU computes.
        routed_tokens: f64,
        /// The kernel is handed every token of `tokens` and drops, through its expert map,
        /// the pairs of other ranks' experts (no attention DP: each GPU holds the whole
        /// batch; or an all-gather dispatch); otherwise (an all-to-all dispatch) it is
        /// handed only the pairs routed to its experts.
        handed_all: bool,
        hidden: f64,
        /// Expert MLP width on this GPU.
        width: f64,
        weights: WeightFormat,
        after_cast: bool,
        /// The MoE library that runs it where a measurement names one; `None`: the
        /// generation's default kernel for the format.
        #[serde(skip_serializing_if = "Option::is_none")]
        backend: Option<MoeBackend>,
    },
    /// A separate dequantization pass: reads `elems` weights stored as `from`, writes BF16.
    Dequant { elems: f64, from: WeightFormat },
    /// An attention kernel over the cache, with its work already counted from its shape.
    Attention {
        kind: AttentionKind,
        /// Query tokens attending.
        queries: f64,
        /// Attention heads on this GPU.
        heads: f64,
        /// Sequences the queries belong to.
        sequences: f64,
        /// KV heads on this GPU (1 for MLA's shared latent): with `sequences`, the kernel's
        /// independent work items.
        kv_heads: f64,
        /// Mean positions each query attends to.
        span: f64,
        flops: f64,
        bytes: f64,
        /// Cache bytes one cached token occupies on this GPU for this layer (0 when the
        /// kernel reads a cache another operator holds).
        kv_bytes_per_token: f64,
        /// Positions per sequence the cache keeps at most (sliding window, chunk); absent:
        /// the whole context.
        #[serde(skip_serializing_if = "Option::is_none")]
        kv_window: Option<f64>,
        /// Element type of the cache the kernel streams.
        kv_dtype: KvDtype,
        /// The decode attention library that runs it where a measurement names one; `None`:
        /// the generation's default kernel.
        #[serde(skip_serializing_if = "Option::is_none")]
        backend: Option<AttentionBackend>,
    },
    /// A recurrent token mixer's scan (linear attention, SSM): work per token independent of
    /// the context, a fixed state per sequence read and written each step.
    Recurrent {
        kind: RecurrentKind,
        /// Tokens scanned.
        tokens: f64,
        /// Heads on this GPU.
        heads: f64,
        flops: f64,
        bytes: f64,
        /// State one sequence holds on this GPU for this layer, bytes.
        state_bytes_per_seq: f64,
    },
    /// A memory-bound elementwise kernel over `rows × width` (norm, activation, rotary,
    /// top-k).
    Elementwise {
        rows: f64,
        width: f64,
        flops: f64,
        bytes: f64,
    },
    /// Embedding lookup: `rows` rows of `hidden` gathered from a table of `vocab` rows on this
    /// GPU.
    Embedding {
        rows: f64,
        hidden: f64,
        vocab: f64,
        weights: WeightFormat,
    },
    /// Sampling over `rows × vocab` logits (softmax, top-k/p, draw).
    Sampling { rows: f64, vocab: f64 },
    /// A collective of `bytes` per rank over `ranks` GPUs, `stride` GPUs apart (1: a packed
    /// group; a data-parallel group strided by the tensor-parallel degree is `tp` apart).
    Collective {
        kind: CollectiveKind,
        bytes: f64,
        ranks: u32,
        #[serde(skip_serializing_if = "is_one")]
        stride: u32,
    },
    /// Expert-parallel dispatch or combine as DeepEP runs it.
    ExpertExchange(ExpertExchange),
}

impl Op {
    /// The shape in a line, for people (`--ops`).
    pub fn shape(&self) -> String {
        let n = short;
        match *self {
            Op::Gemm {
                m,
                n: cols,
                k,
                weights,
                after_cast,
                ..
            } => format!(
                "[{} x {}] x [{} x {}] {weights}{}",
                n(m),
                n(k),
                n(k),
                n(cols),
                if after_cast { " (cast to bf16)" } else { "" }
            ),
            Op::MoeGemm {
                local_experts,
                touched_experts,
                routed_tokens,
                hidden,
                width,
                weights,
                ..
            } => format!(
                "{} of {} experts, {} token-experts, {} -> {} -> {} {weights}",
                n(touched_experts),
                n(local_experts),
                n(routed_tokens),
                n(hidden),
                n(width),
                n(hidden)
            ),
            Op::Dequant { elems, from } => format!("{} weights {from} -> bf16", n(elems)),
            Op::Attention {
                kind,
                queries,
                heads,
                span,
                ..
            } => format!(
                "{} {} queries x {} heads over {} positions",
                serde_name(&kind),
                n(queries),
                n(heads),
                n(span)
            ),
            Op::Recurrent {
                kind,
                tokens,
                heads,
                state_bytes_per_seq,
                ..
            } => format!(
                "{} {} tokens x {} heads, state {} B per sequence",
                serde_name(&kind),
                n(tokens),
                n(heads),
                n(state_bytes_per_seq)
            ),
            Op::Elementwise { rows, width, .. } => format!("[{} x {}]", n(rows), n(width)),
            Op::Embedding {
                rows,
                hidden,
                vocab,
                weights,
            } => format!(
                "{} rows of [{} x {}] {weights}",
                n(rows),
                n(vocab),
                n(hidden)
            ),
            Op::Sampling { rows, vocab } => format!("[{} x {}] logits", n(rows), n(vocab)),
            Op::Collective {
                kind,
                bytes,
                ranks,
                stride,
            } => {
                let apart = if stride > 1 {
                    format!(", {stride} apart")
                } else {
                    String::new()
                };
                format!(
                    "{} of {} B over {ranks} GPUs{apart}",
                    serde_name(&kind),
                    n(bytes)
                )
            }
            Op::ExpertExchange(x) => format!(
                "deepep-{} of {} tokens x {} B, top-{} of {} experts over {} GPUs",
                serde_name(&x.mode),
                n(x.tokens),
                n(x.token_bytes),
                n(x.top_k),
                n(x.experts),
                x.ranks
            ),
        }
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

/// The name serde gives a unit variant.
fn serde_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// A number in a shape: whole numbers exactly, others to 4 significant digits.
fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

fn serialize_display<T: std::fmt::Display, S: serde::Serializer>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// One operator one GPU runs, with what a report names it by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Operator {
    /// What the serving stack runs (e.g. `q_b_proj`, `routed_experts`, `allreduce_attn`).
    pub name: &'static str,
    pub category: Category,
    /// Kernels it launches.
    pub kernels: u32,
    #[serde(flatten)]
    pub op: Op,
}

impl Operator {
    pub fn new(name: &'static str, category: Category, kernels: u32, op: Op) -> Operator {
        Operator {
            name,
            category,
            kernels,
            op,
        }
    }

    /// Weight elements this operator keeps resident on its GPU, and their format.
    pub fn resident_weights(&self) -> Option<(f64, WeightFormat)> {
        match self.op {
            Op::Gemm {
                n,
                k,
                weights,
                resident: true,
                ..
            } => Some((n * k, weights)),
            Op::MoeGemm {
                local_experts,
                matrices,
                hidden,
                width,
                weights,
                ..
            } => Some((
                local_experts * moe::expert_elems(matrices, hidden, width),
                weights,
            )),
            Op::Embedding {
                hidden,
                vocab,
                weights,
                ..
            } => Some((vocab * hidden, weights)),
            _ => None,
        }
    }

    /// Weight elements this operator keeps resident on its GPU.
    pub fn resident_weight_elems(&self) -> f64 {
        self.resident_weights().map_or(0.0, |(e, _)| e)
    }

    /// Weight bytes this operator keeps resident on its GPU, scales included.
    pub fn resident_weight_bytes(&self) -> f64 {
        self.resident_weights()
            .map_or(0.0, |(e, w)| e * w.bytes_per_weight())
    }

    /// Cache bytes one token occupies on this GPU for this operator (whole-context caches
    /// only; a windowed cache is [`Operator::windowed_kv`]).
    pub fn kv_bytes_per_token(&self) -> f64 {
        match self.op {
            Op::Attention {
                kv_bytes_per_token,
                kv_window: None,
                ..
            } => kv_bytes_per_token,
            _ => 0.0,
        }
    }

    /// A cache bounded by a window: (bytes per cached token, positions kept).
    pub fn windowed_kv(&self) -> Option<(f64, f64)> {
        match self.op {
            Op::Attention {
                kv_bytes_per_token,
                kv_window: Some(w),
                ..
            } if kv_bytes_per_token > 0.0 => Some((kv_bytes_per_token, w)),
            _ => None,
        }
    }

    /// Recurrent state one sequence holds on this GPU for this operator, bytes.
    pub fn state_bytes_per_seq(&self) -> f64 {
        match self.op {
            Op::Recurrent {
                state_bytes_per_seq,
                ..
            } => state_bytes_per_seq,
            _ => 0.0,
        }
    }

    /// Whether the operator's work depends on the cached context (not only on the tokens).
    pub fn reads_context(&self) -> bool {
        matches!(self.op, Op::Attention { .. })
    }
}

/// One weight GEMM named `gemm` as an operator list (with its cast pass when the engine
/// does not fuse the format's dequantization): what `rooftop op gemm` and a measured GEMM
/// table price.
pub fn gemm_ops(
    unfused: &[FormatKind],
    m: f64,
    n: f64,
    k: f64,
    weights: WeightFormat,
) -> Vec<Operator> {
    let mut v = Vec::with_capacity(2);
    push_gemm(&mut v, unfused, "gemm", Category::Gemm, m, n, k, weights);
    v
}

/// One collective as an operator list (empty when it would not run).
pub fn collective_ops(
    name: &'static str,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
) -> Vec<Operator> {
    let category = match kind {
        CollectiveKind::AllToAll => Category::Alltoall,
        _ => Category::Allreduce,
    };
    collective::collective(name, category, kind, bytes, ranks)
        .into_iter()
        .collect()
}

/// A weight GEMM, preceded by its cast pass when the engine does not fuse the format's
/// dequantization (`unfused`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn push_gemm(
    out: &mut Vec<Operator>,
    unfused: &[FormatKind],
    name: &'static str,
    category: Category,
    m: f64,
    n: f64,
    k: f64,
    weights: WeightFormat,
) {
    push_weight_gemm(out, unfused, name, category, (m, n, k), weights, true);
}

/// [`push_gemm`] with the residency stated: `resident = false` for a GEMM that reads a
/// tensor another operator already holds.
pub(crate) fn push_weight_gemm(
    out: &mut Vec<Operator>,
    unfused: &[FormatKind],
    name: &'static str,
    category: Category,
    (m, n, k): (f64, f64, f64),
    weights: WeightFormat,
    resident: bool,
) {
    let after_cast = casts(unfused, weights);
    if after_cast {
        out.push(Operator::new(
            "dequant_cast",
            Category::Dequant,
            1,
            Op::Dequant {
                elems: n * k,
                from: weights,
            },
        ));
    }
    out.push(Operator::new(
        name,
        category,
        1,
        Op::Gemm {
            m,
            n,
            k,
            weights,
            after_cast,
            resident,
        },
    ));
}

/// The engine casts weights of this format in a separate pass.
pub(crate) fn casts(unfused: &[FormatKind], w: WeightFormat) -> bool {
    w.kind != FormatKind::Bf16 && unfused.contains(&w.kind)
}

/// An elementwise kernel over `rows × width`.
pub(crate) fn elementwise(
    name: &'static str,
    category: Category,
    (rows, width): (f64, f64),
    bytes: f64,
    flops: f64,
    kernels: u32,
) -> Operator {
    Operator::new(
        name,
        category,
        kernels,
        Op::Elementwise {
            rows,
            width,
            flops,
            bytes,
        },
    )
}

/// A norm over `rows × width` in BF16: read, write, read the weight row; 4 FLOP per element.
pub(crate) fn norm(name: &'static str, rows: f64, width: f64) -> Operator {
    elementwise(
        name,
        Category::Other,
        (rows, width),
        rows * width * 2.0 * 3.0,
        rows * width * 4.0,
        1,
    )
}
