//! How a model's layers group into blocks, and the per-pass quantities every builder reads.
//!
//! A layer's blocks come from the model's per-layer description (`layer_types`,
//! `mlp_layer_types`, per-layer widths: see [`ModelSpec::mixer_of_layer`] and
//! [`ModelSpec::ffn_of_layer`]), so a hybrid of linear attention, SSM, sliding, chunked and
//! full attention, with MoE at any stride, is data and not code. Identical blocks are built
//! (and priced) once: [`LayerPlan`] is compiled once per (model, layout) and lists, for every
//! layer, which token-mixer block and which feed-forward block it runs (either may be
//! [`BlockKind::Empty`]). [`BuildContext`] turns one pass into the row counts one GPU
//! sees (its data-parallel share of the tokens, the mixed-in prompt tokens, the attended
//! span), so every builder reads the same numbers.

use crate::ops::scenario::{Parallel, Pass};
use crate::ops::{attention, head, mlp, moe, norm, recurrent, Operator};
use crate::spec::engine::{EngineFusion, MoeAllToAll};
use crate::spec::model::{Ffn, Mixer};
use crate::spec::{FormatKind, ModelSpec};
use serde::Serialize;

/// A block kind a layer is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "block", rename_all = "kebab-case")]
pub enum BlockKind {
    /// Norm, softmax attention in the model's form (GQA / MLA / compressed) and its
    /// all-reduce. `window` bounds the attended and cached span (sliding, or a chunk when
    /// `chunked`); `kv_heads` and `head_dim` are this layer's GQA shape (0 for MLA);
    /// `indexer`: the layer runs its own DSA indexer; `compress`: DeepSeek-V4 KV
    /// compression ratio (0: none).
    Attention {
        window: Option<u32>,
        chunked: bool,
        kv_heads: u32,
        head_dim: u32,
        indexer: bool,
        compress: u32,
    },
    /// Norm, Gated DeltaNet linear attention (fixed state per sequence) and its all-reduce.
    LinearAttention,
    /// Norm, Mamba-2 mixer (fixed state per sequence) and its all-reduce.
    Mamba,
    /// Norm, dense MLP of `width` and its all-reduce.
    DenseMlp { width: u32 },
    /// Norm, router, routed and shared experts and their collective.
    Moe,
    /// Nothing: a layer without this half (skipped attention, mixer-only layers).
    Empty,
}

impl BlockKind {
    /// The attention block of layer `i`, as the model describes it.
    pub fn mixer(model: &ModelSpec, i: u32) -> BlockKind {
        match model.mixer_of_layer(i) {
            Mixer::Attention { window, chunked } => {
                let (kv_heads, head_dim) = model.gqa_shape_of_layer(i);
                BlockKind::Attention {
                    window,
                    chunked,
                    kv_heads,
                    head_dim,
                    indexer: model.runs_indexer(i),
                    compress: model.compress_ratio(i),
                }
            }
            Mixer::Linear => BlockKind::LinearAttention,
            Mixer::Mamba => BlockKind::Mamba,
            Mixer::None => BlockKind::Empty,
        }
    }

    /// The feed-forward block of layer `i`.
    pub fn ffn(model: &ModelSpec, i: u32) -> BlockKind {
        match model.ffn_of_layer(i) {
            Ffn::Dense { width } => BlockKind::DenseMlp { width },
            Ffn::Moe => BlockKind::Moe,
            Ffn::None => BlockKind::Empty,
        }
    }

    /// Whether the block's work depends on the cached context.
    pub fn reads_context(&self) -> bool {
        matches!(self, BlockKind::Attention { .. })
    }
}

/// Which blocks every layer runs, compiled once per (model, layout).
#[derive(Debug, Clone, PartialEq)]
pub struct LayerPlan {
    /// Distinct block kinds.
    pub blocks: Vec<BlockKind>,
    /// For every layer in order: (attention block, feed-forward block), indices into `blocks`.
    pub layers: Vec<(usize, usize)>,
}

impl LayerPlan {
    pub fn new(model: &ModelSpec) -> LayerPlan {
        let mut blocks: Vec<BlockKind> = Vec::new();
        let mut index_of = |b: BlockKind| match blocks.iter().position(|x| *x == b) {
            Some(i) => i,
            None => {
                blocks.push(b);
                blocks.len() - 1
            }
        };
        let layers = (0..model.config.num_hidden_layers)
            .map(|i| {
                let a = index_of(BlockKind::mixer(model, i));
                let f = index_of(BlockKind::ffn(model, i));
                (a, f)
            })
            .collect();
        LayerPlan { blocks, layers }
    }

    /// Layers that run block `b`, among layers `lo..hi`.
    pub fn uses(&self, b: usize, lo: usize, hi: usize) -> usize {
        self.layers[lo..hi]
            .iter()
            .filter(|(a, f)| *a == b || *f == b)
            .count()
    }
}

/// One pass as one GPU sees it, for the builders.
#[derive(Debug, Clone, Copy)]
pub struct BuildContext<'a> {
    pub model: &'a ModelSpec,
    pub par: Parallel,
    /// Formats the engine dequantizes in a separate pass.
    pub unfused: &'a [FormatKind],
    pub pass: Pass,
    /// Rows of every GEMM, norm and all-reduce: own tokens plus mixed-in prompt tokens.
    pub tokens: f64,
    /// Tokens that attend over the cached context (the pass's own).
    pub own: f64,
    /// Mixed-in prompt tokens.
    pub mixed: f64,
    /// Sequences of the busiest data-parallel replica (an even share unless the pass says).
    pub seqs: f64,
    /// Mean positions a mixed-in prompt token attends to (causally within its prompt).
    pub mixed_span: f64,
    /// New tokens per sequence.
    pub new: f64,
    /// Mean positions each new token attends to (causal among the new tokens).
    pub span: f64,
    /// Cached positions per sequence after the pass.
    pub cached: f64,
    pub hidden: f64,
    /// Attention heads on one GPU.
    pub heads: f64,
    /// Work that runs inside another operator's kernels.
    pub fusion: Fusion,
    /// How the engine runs the MoE dispatch and combine under data-parallel attention.
    pub moe_all_to_all: MoeAllToAll,
}

/// Work the kernels that run fold into one another, so that it is no kernel of its own: what
/// the generation's kernel families (`configs/kernels/`) and the engine
/// (`configs/engines/`) fuse. The default fuses nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fusion {
    /// The routed experts' fused-MoE kernel is monolithic: it takes the router logits and
    /// picks the top-k itself, so no separate top-k operator runs.
    pub moe_routing_inside: bool,
    /// The engine's fusions (all-reduce with the next norm, RoPE inside attention).
    pub engine: EngineFusion,
}

impl Fusion {
    /// Kernels of a rotary-embedding pass: none where the attention kernels apply RoPE.
    pub fn rotary_kernels(&self) -> u32 {
        u32::from(!self.engine.rope_in_attention)
    }
}

impl<'a> BuildContext<'a> {
    pub fn new(model: &'a ModelSpec, par: Parallel, unfused: &'a [FormatKind], pass: Pass) -> Self {
        let dp = par.dp as f64;
        let new = pass.tokens_per_sequence;
        BuildContext {
            model,
            par,
            unfused,
            pass,
            tokens: pass.replica_tokens(par.dp),
            own: pass.replica_own_tokens(par.dp),
            mixed: pass.mixed_prefill_tokens / dp,
            seqs: pass.replica_sequences(par.dp),
            mixed_span: (pass.mixed_prefill_len + 1.0) / 2.0,
            new,
            span: pass.context + (new + 1.0) / 2.0,
            cached: pass.context + new,
            hidden: model.config.hidden_size as f64,
            heads: model.config.num_attention_heads as f64 / par.tp as f64,
            fusion: Fusion::default(),
            moe_all_to_all: MoeAllToAll::default(),
        }
    }

    /// The RMSNorm that opens a block, after the previous block's collective
    /// (`after_tp_allreduce`: a tensor-parallel all-reduce of the hidden state). Where the
    /// engine's all-reduce kernel adds the residual and normalizes, the norm's work is still
    /// priced but it is no kernel of its own.
    pub fn leading_norm(&self, name: &'static str, after_tp_allreduce: bool) -> Operator {
        let mut op = norm(name, self.tokens, self.hidden);
        let e = &self.fusion.engine;
        let fused = e.allreduce_norm && self.hidden > e.allreduce_norm_hidden_above as f64;
        if fused && after_tp_allreduce && self.par.tp > 1 {
            op.kernels = 0;
        }
        op
    }

    /// Whether the feed-forward block before a layer's mixer ends in a tensor-parallel
    /// all-reduce (MoE with data-parallel attention ends in the expert-parallel combine, and
    /// under all-gather/reduce-scatter in the replica's all-reduce after it).
    pub fn ffn_ends_in_allreduce(&self) -> bool {
        let agrs = self.moe_all_to_all == MoeAllToAll::AllgatherReducescatter && self.par.tp > 1;
        self.par.dp == 1 || self.model.moe().is_none() || agrs
    }

    /// The same context with the kernels' fusions.
    pub fn with_fusion(self, fusion: Fusion) -> Self {
        BuildContext { fusion, ..self }
    }

    /// The same context with the engine's expert-parallel communication backend.
    pub fn with_moe_all_to_all(self, moe_all_to_all: MoeAllToAll) -> Self {
        BuildContext {
            moe_all_to_all,
            ..self
        }
    }

    /// Bytes of one tensor-parallel all-reduce of the hidden state.
    pub fn allreduce_bytes(&self) -> f64 {
        self.tokens * self.hidden * 2.0
    }

    /// The operators of block `kind` for this pass, appended to `out`.
    pub fn block_ops(&self, kind: BlockKind, out: &mut Vec<Operator>) {
        match kind {
            BlockKind::Attention { .. } => attention::attention_block(self, kind, out),
            BlockKind::LinearAttention => recurrent::gated_deltanet_block(self, out),
            BlockKind::Mamba => recurrent::mamba2_block(self, out),
            BlockKind::DenseMlp { width } => mlp::mlp_block(self, width, out),
            BlockKind::Moe => moe::moe_block(self, out),
            BlockKind::Empty => {}
        }
    }

    /// The operators that run once per pass, appended to `out`.
    pub fn head_ops(&self, out: &mut Vec<Operator>) {
        head::head_ops(self, out)
    }
}
