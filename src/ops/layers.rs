//! How a model's layers group into blocks, and the per-pass quantities every builder reads.
//!
//! Identical blocks are built (and priced) once: a model of 61 layers has one attention block
//! kind per window length and two feed-forward kinds (dense, MoE). [`LayerPlan`] is compiled
//! once per (model, layout) and lists, for every layer, which attention and which
//! feed-forward block it runs. [`BuildContext`] turns one pass into the row counts one GPU
//! sees (its data-parallel share of the tokens, the mixed-in prompt tokens, the attended
//! span), so every builder reads the same numbers.

use crate::ops::scenario::{Parallel, Pass};
use crate::ops::{attention, head, mlp, moe, Operator};
use crate::spec::{FormatKind, ModelSpec};
use serde::Serialize;

/// A block kind a layer is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "block", rename_all = "kebab-case")]
pub enum BlockKind {
    /// Norm, attention (with its sliding window, if any) and its all-reduce.
    Attention { window: Option<u32> },
    /// Norm, dense gated MLP and its all-reduce.
    DenseMlp,
    /// Norm, router, routed and shared experts and their collective.
    Moe,
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
        let dense = model.dense_layers();
        let layers = (0..model.config.num_hidden_layers)
            .map(|i| {
                let a = index_of(BlockKind::Attention {
                    window: model.window_of_layer(i),
                });
                let f = index_of(if i >= dense && model.moe().is_some() {
                    BlockKind::Moe
                } else {
                    BlockKind::DenseMlp
                });
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
    /// Sequences of this data-parallel replica.
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
            tokens: pass.all_tokens() / dp,
            own: pass.tokens() / dp,
            mixed: pass.mixed_prefill_tokens / dp,
            seqs: pass.sequences / dp,
            mixed_span: (pass.mixed_prefill_len + 1.0) / 2.0,
            new,
            span: pass.context + (new + 1.0) / 2.0,
            cached: pass.context + new,
            hidden: model.config.hidden_size as f64,
            heads: model.config.num_attention_heads as f64 / par.tp as f64,
        }
    }

    /// Bytes of one tensor-parallel all-reduce of the hidden state.
    pub fn allreduce_bytes(&self) -> f64 {
        self.tokens * self.hidden * 2.0
    }

    /// The operators of block `kind` for this pass, appended to `out`.
    pub fn block_ops(&self, kind: BlockKind, out: &mut Vec<Operator>) {
        match kind {
            BlockKind::Attention { window } => attention::attention_block(self, window, out),
            BlockKind::DenseMlp => mlp::mlp_block(self, out),
            BlockKind::Moe => moe::moe_block(self, out),
        }
    }

    /// The operators that run once per pass, appended to `out`.
    pub fn head_ops(&self, out: &mut Vec<Operator>) {
        head::head_ops(self, out)
    }
}
