//! The attention block: input norm, MLA or GQA projections and kernels, and the all-reduce
//! that joins the heads' outputs across tensor-parallel ranks.
//!
//! MLA (DeepSeek-V2/V3, Kimi): the low-rank down-projections are replicated on every rank;
//! the up- and out-projections are split by heads. Decode runs the absorbed form (attention
//! in the latent space, `W_UK`/`W_UV` folded into per-head batched matmuls); prefill the
//! expanded form (`kv_b_proj` materialises per-head K/V for every cached token). The latent
//! cache is replicated on every rank. DeepSeek sparse attention adds an indexer that scores
//! every cached position and restricts attention to its top-k.
//!
//! GQA: K/V heads are split across ranks (replicated when TP exceeds them); a sliding-window
//! layer attends to at most its window.

use crate::ops::collective::tp_allreduce;
use crate::ops::layers::BuildContext;
use crate::ops::Category;
use crate::ops::{elementwise, norm, push_gemm, push_weight_gemm, AttentionKind, Op, Operator};
use crate::spec::Attention;

/// Norm, attention and its all-reduce, for one layer with `window` (if sliding).
pub fn attention_block(cx: &BuildContext, window: Option<u32>, out: &mut Vec<Operator>) {
    out.push(norm("input_layernorm", cx.tokens, cx.hidden));
    match cx.model.attention() {
        Attention::Mla {
            q_lora_rank,
            kv_lora_rank,
            nope,
            rope,
            v,
        } => mla_ops(
            cx,
            MlaDims {
                q_rank: q_lora_rank.map(|r| r as f64),
                kv: kv_lora_rank as f64,
                nope: nope as f64,
                rope: rope as f64,
                v: v as f64,
            },
            out,
        ),
        Attention::Gqa { kv_heads, head_dim } => {
            gqa_ops(cx, kv_heads as f64, head_dim as f64, window, out)
        }
    }
    tp_allreduce(cx, "allreduce_attn", out);
}

/// MLA's dimensions: query rank (absent: full-rank query), latent KV rank, the per-head
/// no-rotary and rotary query/key widths and the value width.
#[derive(Debug, Clone, Copy)]
pub struct MlaDims {
    pub q_rank: Option<f64>,
    pub kv: f64,
    pub nope: f64,
    pub rope: f64,
    pub v: f64,
}

/// MLA projections and kernels.
pub fn mla_ops(cx: &BuildContext, d: MlaDims, out: &mut Vec<Operator>) {
    let c = &cx.model.config;
    let q = &cx.model.quantization;
    let fmt = q.attention();
    let kvb = q.kv_cache.bytes();
    let u = cx.unfused;
    let (h, heads, tokens, own, mixed) = (cx.hidden, cx.heads, cx.tokens, cx.own, cx.mixed);
    let MlaDims {
        kv, nope, rope, v, ..
    } = d;
    // Low-rank down-projections, replicated on every rank; the query's only when the model
    // has a query rank (else its projection is full-rank and sharded).
    if let Some(r) = d.q_rank {
        push_gemm(out, u, "q_a_proj", Category::Gemm, tokens, r, h, fmt);
    }
    push_gemm(
        out,
        u,
        "kv_a_proj_with_mqa",
        Category::Gemm,
        tokens,
        kv + rope,
        h,
        fmt,
    );
    let (name, width, kernels) = match d.q_rank {
        Some(r) => ("q_kv_a_layernorm", r + kv, 2),
        None => ("kv_a_layernorm", kv, 1),
    };
    out.push(elementwise(
        name,
        Category::Other,
        (tokens, width),
        tokens * width * 2.0 * 2.0,
        tokens * width * 4.0,
        kernels,
    ));
    match d.q_rank {
        Some(r) => push_gemm(
            out,
            u,
            "q_b_proj",
            Category::Gemm,
            tokens,
            heads * (nope + rope),
            r,
            fmt,
        ),
        None => push_gemm(
            out,
            u,
            "q_proj",
            Category::Gemm,
            tokens,
            heads * (nope + rope),
            h,
            fmt,
        ),
    }
    out.push(elementwise(
        "rotary_emb",
        Category::Other,
        (tokens, (heads + 1.0) * rope),
        tokens * (heads + 1.0) * rope * 2.0 * 2.0,
        tokens * heads * rope * 6.0,
        1,
    ));
    let (span, cached) = (cx.span, cx.cached);
    let seqs = cx.seqs;
    // DSA: attend only to the indexer's top-k positions, after the indexer scores all.
    let (span_eff, cached_eff) = match c.index_topk {
        Some(k) => {
            let k = k as f64;
            let ih = c.index_n_heads.unwrap_or(64) as f64;
            let id = c.index_head_dim.unwrap_or(128) as f64;
            let flops = 2.0 * own * ih * cached * id + 2.0 * mixed * ih * cx.mixed_span * id;
            let bytes = seqs * cached * id * kvb + mixed * id * kvb + tokens * ih * id * 2.0;
            // The indexer's keys are cached at the KV dtype beside the latent cache.
            let key_bytes = match c.index_head_dim {
                Some(d) => d as f64 * kvb,
                None => 0.0,
            };
            out.push(attention_kernel(
                "dsa_indexer",
                AttentionKind::SparseIndexer,
                (own, ih, cached),
                (seqs, 1.0),
                flops,
                bytes,
                key_bytes,
            ));
            (span.min(k), cached.min(k + cx.new))
        }
        None => (span, cached),
    };
    let latent_bytes = (kv + rope) * kvb;
    match cx.pass.phase {
        crate::ops::Phase::Decode => {
            // Absorbed form: attention in the latent space.
            push_gemm(
                out,
                u,
                "w_uk_absorbed",
                Category::Gemm,
                own,
                heads * kv,
                nope,
                fmt,
            );
            let flops =
                2.0 * own * heads * span_eff * (kv + rope) + 2.0 * own * heads * span_eff * kv;
            let bytes = seqs * cached_eff * (kv + rope) * kvb
                + own * (kv + rope) * kvb
                + own * heads * (2.0 * kv + rope) * 2.0;
            out.push(Operator::new(
                "mla_decode_attention",
                Category::Attention,
                3,
                Op::Attention {
                    kind: AttentionKind::MlaAbsorbed,
                    queries: own,
                    heads,
                    sequences: seqs,
                    kv_heads: 1.0,
                    span: span_eff,
                    flops,
                    bytes,
                    kv_bytes_per_token: latent_bytes,
                },
            ));
            push_gemm(
                out,
                u,
                "w_uv_absorbed",
                Category::Gemm,
                own,
                heads * v,
                kv,
                fmt,
            );
            if mixed > 0.0 {
                // Mixed-in prompts: expanded form over their own tokens, reading the same
                // kv_b tensor the absorbed GEMMs hold.
                push_weight_gemm(
                    out,
                    u,
                    "kv_b_proj_prefill",
                    Category::Gemm,
                    (mixed, heads * (nope + v), kv),
                    fmt,
                    false,
                );
                let flops = 2.0 * mixed * heads * cx.mixed_span * (nope + rope + v);
                let bytes =
                    mixed * heads * (nope + rope + v) * 2.0 * 2.0 + mixed * (kv + rope) * kvb;
                out.push(attention_kernel(
                    "mla_prefill_attention",
                    AttentionKind::MlaExpanded,
                    (mixed, heads, cx.mixed_span),
                    (mixed, 1.0),
                    flops,
                    bytes,
                    0.0,
                ));
            }
        }
        crate::ops::Phase::Prefill => {
            // Expanded form: kv_b_proj materialises per-head K/V for every cached token.
            let rows = seqs * cached;
            push_gemm(
                out,
                u,
                "kv_b_proj",
                Category::Gemm,
                rows,
                heads * (nope + v),
                kv,
                fmt,
            );
            let flops = 2.0 * own * heads * span_eff * (nope + rope + v);
            let bytes = rows * heads * (nope + rope + v) * 2.0
                + own * heads * (nope + rope + v) * 2.0
                + own * (kv + rope) * kvb;
            out.push(attention_kernel(
                "mla_prefill_attention",
                AttentionKind::MlaExpanded,
                (own, heads, span_eff),
                (seqs, 1.0),
                flops,
                bytes,
                latent_bytes,
            ));
        }
    }
    push_gemm(out, u, "o_proj", Category::Gemm, tokens, h, heads * v, fmt);
}

/// GQA projections and kernel with `kv_heads` K/V heads of `d` dimensions.
pub fn gqa_ops(
    cx: &BuildContext,
    kv_heads: f64,
    d: f64,
    window: Option<u32>,
    out: &mut Vec<Operator>,
) {
    let q = &cx.model.quantization;
    let fmt = q.attention();
    let kvb = q.kv_cache.bytes();
    let (h, heads, tokens, own, mixed) = (cx.hidden, cx.heads, cx.tokens, cx.own, cx.mixed);
    let kv_local = (kv_heads / cx.par.tp as f64).max(1.0);
    push_gemm(
        out,
        cx.unfused,
        "qkv_proj",
        Category::Gemm,
        tokens,
        (heads + 2.0 * kv_local) * d,
        h,
        fmt,
    );
    out.push(elementwise(
        "rotary_emb",
        Category::Other,
        (tokens, (heads + kv_local) * d),
        tokens * (heads + kv_local) * d * 2.0 * 2.0,
        tokens * (heads + kv_local) * d * 3.0,
        1,
    ));
    let (span_eff, cached_eff) = match window {
        Some(w) => (cx.span.min(w as f64), cx.cached.min(w as f64 + cx.new)),
        None => (cx.span, cx.cached),
    };
    let mixed_eff = match window {
        Some(w) => cx.mixed_span.min(w as f64),
        None => cx.mixed_span,
    };
    let flops = 4.0 * own * heads * span_eff * d + 4.0 * mixed * heads * mixed_eff * d;
    let bytes = cx.seqs * cached_eff * 2.0 * kv_local * d * kvb
        + tokens * 2.0 * kv_local * d * kvb
        + tokens * heads * d * 2.0 * 2.0;
    let name = match cx.pass.phase {
        crate::ops::Phase::Decode => "decode_attention",
        crate::ops::Phase::Prefill => "prefill_attention",
    };
    let kind = match window {
        Some(_) => AttentionKind::SlidingWindow,
        None => AttentionKind::Gqa,
    };
    // Sliding layers are charged a full-context cache, as the engine allocates one.
    let kv_bytes = 2.0 * kv_local * d * kvb;
    out.push(attention_kernel(
        name,
        kind,
        (own, heads, span_eff),
        (cx.seqs, kv_local),
        flops,
        bytes,
        kv_bytes,
    ));
    push_gemm(
        out,
        cx.unfused,
        "o_proj",
        Category::Gemm,
        tokens,
        h,
        heads * d,
        fmt,
    );
}

/// An attention kernel (2 kernels: the main pass and its reduction).
fn attention_kernel(
    name: &'static str,
    kind: AttentionKind,
    (queries, heads, span): (f64, f64, f64),
    (sequences, kv_heads): (f64, f64),
    flops: f64,
    bytes: f64,
    kv_bytes_per_token: f64,
) -> Operator {
    Operator::new(
        name,
        Category::Attention,
        2,
        Op::Attention {
            kind,
            queries,
            heads,
            sequences,
            kv_heads,
            span,
            flops,
            bytes,
            kv_bytes_per_token,
        },
    )
}
