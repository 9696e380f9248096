//! Weight inventory: how many parameters each group holds, how they are split across GPUs,
//! and what they occupy in memory.
//!
//! The same shapes drive the parameter count (checked against published totals), the
//! per-GPU weight memory (does the model fit?), and the bytes each decode step reads.

use crate::cost::scenario::Parallel;
use crate::spec::{Attention, ModelSpec};
use serde::Serialize;

/// Parameter counts of one decoder layer's attention, split by how TP shards them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    /// Replicated on every TP rank (MLA's low-rank down-projections).
    pub replicated: f64,
    /// Split across TP ranks by heads.
    pub sharded: f64,
}

pub fn attention_params(model: &ModelSpec) -> AttentionParams {
    let c = &model.config;
    let h = c.hidden_size as f64;
    let heads = c.num_attention_heads as f64;
    match model.attention() {
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            nope,
            rope,
            v,
        } => {
            let (kv, nope, rope, v) = (kv_lora_rank as f64, nope as f64, rope as f64, v as f64);
            let (q_rep, q_shard) = match q_lora_rank {
                Some(r) => (h * r as f64, r as f64 * heads * (nope + rope)),
                None => (0.0, h * heads * (nope + rope)),
            };
            AttentionParams {
                replicated: q_rep + h * (kv + rope),
                sharded: q_shard + kv * heads * (nope + v) + heads * v * h,
            }
        }
        Attention::Gqa { kv_heads, head_dim } => {
            let d = head_dim as f64;
            AttentionParams {
                replicated: 0.0,
                sharded: h * heads * d + 2.0 * h * kv_heads as f64 * d + heads * d * h,
            }
        }
    }
}

/// Parameters of one gated MLP (gate, up, down) of width `i`.
pub fn mlp_params(hidden: f64, i: f64) -> f64 {
    3.0 * hidden * i
}

/// Total and active parameter counts (MTP layers excluded, as published totals do).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamCount {
    pub total: f64,
    pub active: f64,
}

pub fn count_params(model: &ModelSpec) -> ParamCount {
    let c = &model.config;
    let h = c.hidden_size as f64;
    let layers = c.num_hidden_layers as f64;
    let a = attention_params(model);
    let attn = layers * (a.replicated + a.sharded);
    let dense =
        model.dense_layers() as f64 * mlp_params(h, c.intermediate_size.unwrap_or(0) as f64);
    let embed = c.vocab_size as f64 * h;
    let head = if c.tie_word_embeddings { 0.0 } else { embed };
    let (moe_total, moe_active) = match model.moe() {
        Some(m) => {
            let per_expert = mlp_params(h, m.expert_intermediate as f64);
            let router = h * m.experts as f64;
            let n = model.moe_layers() as f64;
            (
                n * (router + (m.experts + m.shared) as f64 * per_expert),
                n * (router + (m.top_k + m.shared) as f64 * per_expert),
            )
        }
        None => (0.0, 0.0),
    };
    ParamCount {
        total: attn + dense + embed + head + moe_total,
        active: attn + dense + embed + head + moe_active,
    }
}

/// Weight bytes one GPU holds under a layout (the most loaded pipeline stage).
pub fn weight_bytes_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    let c = &model.config;
    let q = &model.quantization;
    let h = c.hidden_size as f64;
    let tp = par.tp as f64;
    let a = attention_params(model);
    // With more TP ranks than KV heads, every rank holds a whole KV head (the engine
    // replicates them), as the step's qkv_proj reads: add the replicas' share.
    let kv_replicas = match model.attention() {
        Attention::Gqa { kv_heads, head_dim } if par.tp > kv_heads => {
            2.0 * h * head_dim as f64 * (1.0 - kv_heads as f64 / tp)
        }
        _ => 0.0,
    };
    let attn = (a.replicated + a.sharded / tp + kv_replicas) * q.attention().bytes_per_weight();
    let dense = mlp_params(h, c.intermediate_size.unwrap_or(0) as f64) / tp
        * q.dense_mlp().bytes_per_weight();
    let moe = match model.moe() {
        Some(m) => {
            let per_expert = mlp_params(h, m.expert_intermediate as f64);
            let local_experts = m.experts as f64 / par.ep as f64;
            h * m.experts as f64 * q.router().bytes_per_weight()
                + local_experts * per_expert / par.moe_tp() as f64
                    * q.routed_experts().bytes_per_weight()
                + m.shared as f64 * per_expert / tp * q.shared_experts().bytes_per_weight()
        }
        None => 0.0,
    };
    let embed = c.vocab_size as f64 * h / tp * q.embedding().bytes_per_weight();
    let head = if c.tie_word_embeddings {
        0.0
    } else {
        c.vocab_size as f64 * h / tp * q.lm_head().bytes_per_weight()
    };
    // Stages split the layers as the evaluator does: ceil(layers / pp) each, the last ones
    // take what is left (5 layers over 4 stages: 2, 2, 1, 0). Dense layers come first; stage
    // 0 also holds the embedding, the last stage lm_head. The busiest stage sets the memory
    // a GPU needs: with dense layers first, that is often a middle stage of MoE layers.
    let pp = par.pp.max(1);
    let layers = c.num_hidden_layers;
    let per_stage = layers.div_ceil(pp);
    let dense_layers = model.dense_layers();
    (0..pp)
        .map(|s| {
            let lo = (s * per_stage).min(layers);
            let hi = ((s + 1) * per_stage).min(layers);
            let n = hi - lo;
            let d = dense_layers.clamp(lo, hi) - lo;
            n as f64 * attn
                + d as f64 * dense
                + (n - d) as f64 * moe
                + if s == 0 { embed } else { 0.0 }
                + if s == pp - 1 { head } else { 0.0 }
        })
        .fold(0.0, f64::max)
}

/// KV-cache bytes one token occupies on one GPU (the most loaded stage): MLA's latent cache
/// is replicated on every TP rank; GQA's KV heads are split across ranks (replicated when
/// TP exceeds the KV heads).
pub fn kv_bytes_per_token_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    let all_layers = model.kv_bytes_per_token();
    let per_stage = model.config.num_hidden_layers.div_ceil(par.pp.max(1)) as f64
        / model.config.num_hidden_layers as f64;
    let share = match model.attention() {
        Attention::Mla { .. } => 1.0,
        Attention::Gqa { kv_heads, .. } => {
            let local = (kv_heads as f64 / par.tp as f64).max(1.0);
            local / kv_heads as f64
        }
    };
    all_layers * per_stage * share
}
