//! What one GPU holds, read off the operator lists: the weights its operators keep resident
//! and the cache bytes its attention kernels keep per token. The same lists price a step, so
//! the memory a model needs and the bytes a step reads come from one description.
//!
//! Pipeline stages split the layers as the evaluator does: `ceil(layers / pp)` each, the last
//! ones take what is left (5 layers over 4 stages: 2, 2, 1, 0). Stage 0 also holds the
//! embedding, the last stage lm_head. The busiest stage sets the memory a GPU needs.

use crate::ops::{BuildContext, LayerPlan, Op, Operator, Parallel, Pass};
use crate::spec::ModelSpec;
use serde::Serialize;

/// Resident weight bytes and KV bytes per token of one block kind on one GPU.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    weight_bytes: f64,
    weight_elems: f64,
    kv_bytes_per_token: f64,
}

fn held(ops: &[Operator]) -> Held {
    ops.iter().fold(Held::default(), |h, o| Held {
        weight_bytes: h.weight_bytes + o.resident_weight_bytes(),
        weight_elems: h.weight_elems + o.resident_weight_elems(),
        kv_bytes_per_token: h.kv_bytes_per_token + o.kv_bytes_per_token(),
    })
}

/// What one GPU holds per stage under a layout: (weight bytes, KV bytes per token) of every
/// pipeline stage.
fn per_stage(model: &ModelSpec, par: &Parallel) -> Vec<(f64, f64)> {
    let plan = LayerPlan::new(model);
    // Residency does not depend on the pass or on how the engine dequantizes.
    let cx = BuildContext::new(model, *par, &[], Pass::decode(1.0, 0.0));
    let blocks: Vec<Held> = plan
        .blocks
        .iter()
        .map(|&k| {
            let mut v = Vec::new();
            cx.block_ops(k, &mut v);
            held(&v)
        })
        .collect();
    let mut head = Vec::new();
    cx.head_ops(&mut head);
    let (embed, out): (Vec<Operator>, Vec<Operator>) = head
        .into_iter()
        .partition(|o| matches!(o.op, Op::Embedding { .. }));
    let (embed, out) = (held(&embed), held(&out));
    let pp = par.pp.max(1) as usize;
    let layers = plan.layers.len();
    let per = layers.div_ceil(pp);
    (0..pp)
        .map(|s| {
            let lo = (s * per).min(layers);
            let hi = ((s + 1) * per).min(layers);
            let mut w = 0.0;
            let mut kv = 0.0;
            for &(a, f) in &plan.layers[lo..hi] {
                w += blocks[a].weight_bytes + blocks[f].weight_bytes;
                kv += blocks[a].kv_bytes_per_token + blocks[f].kv_bytes_per_token;
            }
            if s == 0 {
                w += embed.weight_bytes;
            }
            if s == pp - 1 {
                w += out.weight_bytes;
            }
            (w, kv)
        })
        .collect()
}

/// Weight bytes one GPU holds under a layout (the most loaded pipeline stage).
pub fn weight_bytes_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    per_stage(model, par)
        .iter()
        .map(|s| s.0)
        .fold(0.0, f64::max)
}

/// KV-cache bytes one token occupies on one GPU (the most loaded stage): MLA's latent cache
/// is replicated on every TP rank; GQA's KV heads are split across ranks (replicated when
/// TP exceeds the KV heads).
pub fn kv_bytes_per_token_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    per_stage(model, par)
        .iter()
        .map(|s| s.1)
        .fold(0.0, f64::max)
}

/// Total and active parameter counts (MTP layers excluded, as published totals do).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamCount {
    pub total: f64,
    pub active: f64,
}

/// Parameters of the model counted from its operators on one GPU holding everything: all
/// resident weights, and the same less the routed experts a token does not use.
pub fn count_params(model: &ModelSpec) -> ParamCount {
    let plan = LayerPlan::new(model);
    let cx = BuildContext::new(model, Parallel::tp(1), &[], Pass::decode(1.0, 0.0));
    let mut total = 0.0;
    let mut inactive = 0.0;
    let mut v = Vec::new();
    for (b, &kind) in plan.blocks.iter().enumerate() {
        v.clear();
        cx.block_ops(kind, &mut v);
        let n = plan.uses(b, 0, plan.layers.len()) as f64;
        total += n * held(&v).weight_elems;
        for o in &v {
            if let Op::MoeGemm {
                local_experts,
                top_k,
                expert_elems,
                ..
            } = o.op
            {
                inactive += n * (local_experts - top_k) * expert_elems;
            }
        }
    }
    v.clear();
    cx.head_ops(&mut v);
    total += held(&v).weight_elems;
    ParamCount {
        total,
        active: total - inactive,
    }
}
