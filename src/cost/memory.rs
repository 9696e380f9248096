//! What one GPU holds, read off the operator lists: the weights its operators keep resident
//! and the cache bytes its attention kernels keep per token. The same lists price a step, so
//! the memory a model needs and the bytes a step reads come from one description.
//!
//! Pipeline stages split the layers as the evaluator does: `ceil(layers / pp)` each, the last
//! ones take what is left (5 layers over 4 stages: 2, 2, 1, 0). Stage 0 also holds the
//! embedding, the last stage lm_head. The busiest stage sets the memory a GPU needs.

use crate::ops::{BlockKind, BuildContext, LayerPlan, Op, Operator, Parallel, Pass};
use crate::spec::ModelSpec;
use serde::Serialize;

/// Resident weights and the cache one block kind holds on one GPU.
#[derive(Debug, Clone, Default)]
struct Held {
    weight_bytes: f64,
    weight_elems: f64,
    /// Cache bytes per token of the caches that grow with the whole context.
    kv_bytes_per_token: f64,
    /// Caches bounded by a window: (bytes per token, positions kept).
    windowed: Vec<(f64, f64)>,
    /// Recurrent state per sequence, bytes.
    state_bytes_per_seq: f64,
}

fn held(ops: &[Operator]) -> Held {
    let mut h = Held::default();
    for o in ops {
        h.weight_bytes += o.resident_weight_bytes();
        h.weight_elems += o.resident_weight_elems();
        h.kv_bytes_per_token += o.kv_bytes_per_token();
        h.state_bytes_per_seq += o.state_bytes_per_seq();
        h.windowed.extend(o.windowed_kv());
    }
    h
}

/// The cache one GPU holds per sequence, by how it grows with the context: linearly
/// (full-attention layers), up to a window (sliding and chunked layers), or not at all
/// (linear-attention and SSM layers' state).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CacheFootprint {
    /// Bytes per cached token of the caches that grow with the whole context.
    pub bytes_per_token: f64,
    /// Windowed caches: (bytes per cached token, positions kept at most).
    pub windowed: Vec<(f64, f64)>,
    /// Fixed state per sequence, bytes.
    pub state_bytes_per_seq: f64,
}

impl CacheFootprint {
    /// Bytes one sequence of `positions` cached positions holds.
    pub fn bytes_per_sequence(&self, positions: f64) -> f64 {
        let p = positions.max(0.0);
        self.bytes_per_token * p
            + self
                .windowed
                .iter()
                .map(|(b, w)| b * p.min(*w))
                .sum::<f64>()
            + self.state_bytes_per_seq
    }

    fn add(&mut self, h: &Held) {
        self.bytes_per_token += h.kv_bytes_per_token;
        self.windowed.extend(h.windowed.iter().copied());
        self.state_bytes_per_seq += h.state_bytes_per_seq;
    }
}

/// What one GPU holds per stage under a layout: (weight bytes, cache) of every pipeline
/// stage.
fn per_stage(model: &ModelSpec, par: &Parallel) -> Vec<(f64, CacheFootprint)> {
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
            let mut cache = CacheFootprint::default();
            for &(a, f) in &plan.layers[lo..hi] {
                w += blocks[a].weight_bytes + blocks[f].weight_bytes;
                cache.add(&blocks[a]);
                cache.add(&blocks[f]);
            }
            if s == 0 {
                w += embed.weight_bytes;
            }
            if s == pp - 1 {
                w += out.weight_bytes;
            }
            (w, cache)
        })
        .collect()
}

/// What one GPU holds under a layout, per pipeline stage, read off the operator lists once:
/// weights, and caches per token, per window and per sequence.
#[derive(Debug, Clone)]
pub struct Residency(Vec<(f64, CacheFootprint)>);

impl Residency {
    pub fn new(model: &ModelSpec, par: &Parallel) -> Residency {
        Residency(per_stage(model, par))
    }

    /// Weight bytes one GPU holds (the most loaded pipeline stage).
    pub fn weight_bytes(&self) -> f64 {
        self.0.iter().map(|s| s.0).fold(0.0, f64::max)
    }

    /// KV-cache bytes one token occupies on one GPU (the most loaded stage) in the caches
    /// that grow with the whole context: MLA's latent cache is replicated on every TP rank;
    /// GQA's KV heads are split across ranks (replicated when TP exceeds the KV heads).
    /// Windowed caches and recurrent state are in [`Residency::cache_footprint`].
    pub fn kv_bytes_per_token(&self) -> f64 {
        self.0
            .iter()
            .map(|s| s.1.bytes_per_token)
            .fold(0.0, f64::max)
    }

    /// KV-cache bytes one token occupies on one GPU of each pipeline stage, summed over the
    /// stages: what one tensor-parallel rank's share of a replica holds for the whole model.
    pub fn kv_bytes_per_token_all_stages(&self) -> f64 {
        self.0.iter().map(|s| s.1.bytes_per_token).sum()
    }

    /// The cache one GPU holds per sequence (the stage holding the most at `positions`).
    pub fn cache_footprint(&self, positions: f64) -> CacheFootprint {
        self.0
            .iter()
            .map(|s| &s.1)
            .fold(None::<&CacheFootprint>, |best, c| match best {
                Some(b) if b.bytes_per_sequence(positions) >= c.bytes_per_sequence(positions) => {
                    Some(b)
                }
                _ => Some(c),
            })
            .cloned()
            .unwrap_or_default()
    }
}

/// Weight bytes one GPU holds under a layout (the most loaded pipeline stage).
pub fn weight_bytes_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    Residency::new(model, par).weight_bytes()
}

/// KV-cache bytes one token occupies on one GPU ([`Residency::kv_bytes_per_token`]).
pub fn kv_bytes_per_token_per_gpu(model: &ModelSpec, par: &Parallel) -> f64 {
    Residency::new(model, par).kv_bytes_per_token()
}

/// Parameter counts of a model, counted from its operators. `total` and `active` cover the
/// decoder and its embedding/lm_head, as publishers count them; the multi-token-prediction
/// layers and the vision encoder are apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamCount {
    pub total: f64,
    /// Per token: the total less the routed experts a token does not use.
    pub active: f64,
    /// MTP layers (weights held, no per-token cost unless speculation runs them).
    pub mtp: f64,
    /// Vision encoder (prefill-time only), when the description has one.
    pub vision: f64,
    /// Bytes of `total`'s weights as stored (scales included), the whole model.
    pub weight_bytes: f64,
    /// The input embedding table, within `total` and `active` (some publishers leave it out
    /// of their active count: a token reads one row of it).
    pub embedding: f64,
}

/// Weight elements of one pass's blocks on one GPU holding everything, with the elements of
/// the routed experts a token does not touch.
fn block_params(cx: &BuildContext, kind: BlockKind, v: &mut Vec<Operator>) -> (f64, f64) {
    v.clear();
    cx.block_ops(kind, v);
    let total = held(v).weight_elems;
    let inactive = v
        .iter()
        .map(|o| match o.op {
            Op::MoeGemm {
                local_experts,
                top_k,
                matrices,
                hidden,
                width,
                ..
            } => (local_experts - top_k) * crate::ops::moe::expert_elems(matrices, hidden, width),
            _ => 0.0,
        })
        .sum::<f64>();
    (total, inactive)
}

/// Parameters of the model counted from its operators on one GPU holding everything.
pub fn count_params(model: &ModelSpec) -> ParamCount {
    let plan = LayerPlan::new(model);
    let cx = BuildContext::new(model, Parallel::tp(1), &[], Pass::decode(1.0, 0.0));
    let mut total = 0.0;
    let mut inactive = 0.0;
    let mut bytes = 0.0;
    let mut v = Vec::new();
    for (b, &kind) in plan.blocks.iter().enumerate() {
        let n = plan.uses(b, 0, plan.layers.len()) as f64;
        let (t, i) = block_params(&cx, kind, &mut v);
        total += n * t;
        inactive += n * i;
        bytes += n * held(&v).weight_bytes;
    }
    v.clear();
    cx.head_ops(&mut v);
    total += held(&v).weight_elems;
    bytes += held(&v).weight_bytes;
    let embedding = v
        .iter()
        .filter(|o| matches!(o.op, Op::Embedding { .. }))
        .map(Operator::resident_weight_elems)
        .sum();
    // An MTP layer: one decoder layer shaped like the last one (full attention, the last
    // layer's feed-forward), its projection of [embedding; hidden] (2h x h) and norms; it
    // shares the embedding and lm_head.
    let last = model.config.num_hidden_layers.saturating_sub(1);
    let mtp_attn = match BlockKind::mixer(model, last) {
        BlockKind::Attention {
            kv_heads, head_dim, ..
        } => BlockKind::Attention {
            window: None,
            chunked: false,
            kv_heads,
            head_dim,
            indexer: model.config.index_topk.is_some(),
            compress: 0,
        },
        _ => {
            let (kv_heads, head_dim) = model.gqa_shape_of_layer(last);
            BlockKind::Attention {
                window: None,
                chunked: false,
                kv_heads,
                head_dim,
                indexer: false,
                compress: 0,
            }
        }
    };
    let h = model.config.hidden_size as f64;
    let mtp_layer = block_params(&cx, mtp_attn, &mut v).0
        + block_params(&cx, BlockKind::ffn(model, last), &mut v).0
        + 2.0 * h * h;
    ParamCount {
        total,
        active: total - inactive,
        mtp: model.mtp_layers() as f64 * mtp_layer,
        vision: model.vision.as_ref().map_or(0.0, |v| v.params()),
        weight_bytes: bytes,
        embedding,
    }
}
