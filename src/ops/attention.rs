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
use crate::ops::{
    elementwise, push_gemm, push_weight_gemm, AttentionKind, BlockKind, Op, Operator,
};
use crate::spec::{Attention, KvDtype, WeightFormat};

/// Norm, attention and its all-reduce, for one layer of block `kind`
/// ([`BlockKind::Attention`]).
pub fn attention_block(cx: &BuildContext, kind: BlockKind, out: &mut Vec<Operator>) {
    let BlockKind::Attention {
        window,
        chunked,
        kv_heads,
        head_dim,
        indexer,
        compress,
    } = kind
    else {
        return;
    };
    out.push(cx.leading_norm("input_layernorm", cx.ffn_ends_in_allreduce()));
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
            indexer,
            out,
        ),
        Attention::Gqa { .. } => gqa_ops(
            cx,
            GqaLayer {
                kv_heads: kv_heads as f64,
                d: head_dim as f64,
                window,
                chunked,
            },
            out,
        ),
        Attention::Compressed {
            q_lora_rank,
            head_dim,
            o_lora_rank,
            o_groups,
        } => compressed_ops(
            cx,
            CompressedLayer {
                q_rank: q_lora_rank as f64,
                d: head_dim as f64,
                o_rank: o_lora_rank as f64,
                groups: o_groups as f64,
                window: window.or(cx.model.config.sliding_window),
                compress,
                indexer,
            },
            out,
        ),
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

/// DeepSeek sparse attention's indexer for one layer: its projections (replicated on every
/// rank, as vLLM and SGLang run them: `wq_b` from the query latent of rank `q_in`, `wk` and
/// `weights_proj` from the hidden state), the scoring kernel over every cached position, and
/// its key cache (FP8 keys plus one FP32 scale per token). Returns the (span, cached)
/// positions the attention then reads: at most `index_topk`.
fn dsa_indexer(cx: &BuildContext, q_in: f64, ratio: f64, out: &mut Vec<Operator>) -> (f64, f64) {
    let c = &cx.model.config;
    let Some(k) = c.index_topk else {
        return (cx.span, cx.cached);
    };
    let k = k as f64;
    let (own, mixed, tokens, seqs) = (cx.own, cx.mixed, cx.tokens, cx.seqs);
    // Both present wherever index_topk is (ModelSpec::validate refuses a model without).
    let (Some(ih), Some(id)) = (c.index_n_heads, c.index_head_dim) else {
        return (cx.span, cx.cached);
    };
    let (ih, id) = (ih as f64, id as f64);
    let fmt = cx.model.quantization.attention();
    let u = cx.unfused;
    push_gemm(
        out,
        u,
        "indexer_wq_b",
        Category::Gemm,
        tokens,
        ih * id,
        q_in,
        fmt,
    );
    push_gemm(
        out,
        u,
        "indexer_wk",
        Category::Gemm,
        tokens,
        id,
        cx.hidden,
        fmt,
    );
    push_gemm(
        out,
        u,
        "indexer_weights_proj",
        Category::Gemm,
        tokens,
        ih,
        cx.hidden,
        WeightFormat::BF16,
    );
    let cached = cx.cached / ratio;
    // FP8 keys plus one FP32 scale per token, whatever the KV dtype (vLLM's and SGLang's
    // DSA indexer cache).
    let key_bytes = id + 4.0;
    let flops = 2.0 * own * ih * cached * id + 2.0 * mixed * ih * cx.mixed_span / ratio * id;
    let bytes = seqs * cached * key_bytes + mixed * key_bytes + tokens * ih * id * 2.0;
    out.push(attention_kernel(
        "dsa_indexer",
        AttentionKind::SparseIndexer,
        (own, ih, cached),
        (seqs, 1.0),
        flops,
        bytes,
        (key_bytes / ratio, None, cx.model.quantization.kv_cache),
    ));
    (cx.span.min(k), cx.cached.min(k + cx.new))
}

/// MLA projections and kernels; `indexer`: this layer runs its own DSA indexer (a layer of a
/// DSA model without one reuses the previous indexer's top-k).
pub fn mla_ops(cx: &BuildContext, d: MlaDims, indexer: bool, out: &mut Vec<Operator>) {
    let c = &cx.model.config;
    let q = &cx.model.quantization;
    let fmt = q.attention();
    let kvb = q.kv_cache.bytes();
    let u = cx.unfused;
    let (h, heads, tokens, own, mixed) = (cx.hidden, cx.heads, cx.tokens, cx.own, cx.mixed);
    let MlaDims {
        kv, nope, rope, v, ..
    } = d;
    // Low-rank down-projections, replicated on every rank. With a query rank the engines
    // run the query's and the latent's as one GEMM over the concatenated weights (vLLM's
    // `fused_qkv_a_proj`, SGLang's `fused_qkv_a_proj_with_mqa`, TensorRT-LLM's `fused_a`);
    // without one the query's projection is full-rank and sharded (`q_proj` below).
    let (name, width) = match d.q_rank {
        Some(r) => ("fused_qkv_a_proj", r + kv + rope),
        None => ("kv_a_proj_with_mqa", kv + rope),
    };
    push_gemm(out, u, name, Category::Gemm, tokens, width, h, fmt);
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
        cx.fusion.rotary_kernels(),
    ));
    let (span, cached) = (cx.span, cx.cached);
    let seqs = cx.seqs;
    // DSA: attend only to the indexer's top-k positions, after the indexer scores all.
    let (span_eff, cached_eff) = match c.index_topk {
        Some(_) if indexer => dsa_indexer(cx, d.q_rank.unwrap_or(h), 1.0, out),
        Some(k) => (span.min(k as f64), cached.min(k as f64 + cx.new)),
        None => (span, cached),
    };
    let latent_bytes = (kv + rope) * kvb;
    match cx.pass.phase {
        crate::ops::Phase::Decode => {
            // Absorbed form: attention in the latent space.
            // vLLM dequantizes `kv_b_proj` to BF16 at load time for the absorbed BMMs
            // (`W_UK_T`, `W_UV`): they run in BF16 whatever the checkpoint's format.
            push_gemm(
                out,
                u,
                "w_uk_absorbed",
                Category::Gemm,
                own,
                heads * kv,
                nope,
                WeightFormat::BF16,
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
                    kv_window: None,
                    kv_dtype: q.kv_cache,
                    backend: None,
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
                WeightFormat::BF16,
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
                    (0.0, None, cx.model.quantization.kv_cache),
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
                (latent_bytes, None, cx.model.quantization.kv_cache),
            ));
        }
    }
    push_gemm(out, u, "o_proj", Category::Gemm, tokens, h, heads * v, fmt);
}

/// One GQA layer's shape: K/V heads and head width, and the window bounding its span (a
/// chunk when `chunked`).
#[derive(Debug, Clone, Copy)]
pub struct GqaLayer {
    pub kv_heads: f64,
    pub d: f64,
    pub window: Option<u32>,
    pub chunked: bool,
}

/// GQA projections and kernel. Sliding layers attend to at most their window; chunked
/// layers (Llama-4) are priced as a window of the chunk length, an upper bound of the
/// in-chunk span (its mean over a long sequence is half a chunk). Full layers with
/// `attention_k_eq_v` (Gemma-4) project and cache one tensor as both keys and values; an
/// `attn_output_gate` (Qwen3.5) doubles the query projection and adds a sigmoid gate.
pub fn gqa_ops(cx: &BuildContext, l: GqaLayer, out: &mut Vec<Operator>) {
    let GqaLayer {
        kv_heads,
        d,
        window,
        chunked,
    } = l;
    let c = &cx.model.config;
    let q = &cx.model.quantization;
    let fmt = q.attention();
    let kvb = q.kv_cache.bytes();
    let (h, heads, tokens, own, mixed) = (cx.hidden, cx.heads, cx.tokens, cx.own, cx.mixed);
    let kv_local = (kv_heads / cx.par.tp as f64).max(1.0);
    let tensors = if c.attention_k_eq_v && window.is_none() {
        1.0
    } else {
        2.0
    };
    let q_width = if c.attn_output_gate { 2.0 } else { 1.0 } * heads;
    push_gemm(
        out,
        cx.unfused,
        "qkv_proj",
        Category::Gemm,
        tokens,
        (q_width + tensors * kv_local) * d,
        h,
        fmt,
    );
    out.push(elementwise(
        "rotary_emb",
        Category::Other,
        (tokens, (heads + kv_local) * d),
        tokens * (heads + kv_local) * d * 2.0 * 2.0,
        tokens * (heads + kv_local) * d * 3.0,
        cx.fusion.rotary_kernels(),
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
    let bytes = cx.seqs * cached_eff * tensors * kv_local * d * kvb
        + tokens * tensors * kv_local * d * kvb
        + tokens * heads * d * 2.0 * 2.0;
    let name = match cx.pass.phase {
        crate::ops::Phase::Decode => "decode_attention",
        crate::ops::Phase::Prefill => "prefill_attention",
    };
    let kind = match window {
        Some(_) if chunked => AttentionKind::Chunked,
        Some(_) => AttentionKind::SlidingWindow,
        None => AttentionKind::Gqa,
    };
    // A sliding or chunked layer keeps at most its window of keys and values per sequence
    // (vLLM's hybrid KV-cache manager frees the blocks that fall out of the window).
    let kv_window = window.map(|w| w as f64);
    let kv_bytes = tensors * kv_local * d * kvb;
    out.push(attention_kernel(
        name,
        kind,
        (own, heads, span_eff),
        (cx.seqs, kv_local),
        flops,
        bytes,
        (kv_bytes, kv_window, cx.model.quantization.kv_cache),
    ));
    if c.attn_output_gate {
        out.push(elementwise(
            "attn_output_gate",
            Category::Other,
            (tokens, heads * d),
            tokens * heads * d * 2.0 * 3.0,
            tokens * heads * d * 4.0,
            1,
        ));
    }
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

/// One DeepSeek-V4 layer's attention shape.
#[derive(Debug, Clone, Copy)]
pub struct CompressedLayer {
    pub q_rank: f64,
    /// Width of the one shared K/V head (rotary part included).
    pub d: f64,
    pub o_rank: f64,
    pub groups: f64,
    /// Uncompressed local window.
    pub window: Option<u32>,
    /// KV compression ratio (0: the local window only).
    pub compress: u32,
    pub indexer: bool,
}

/// DeepSeek-V4-style attention, built from its `config.json` fields. Assumptions (the
/// modeling code was not available to check them; each is a named approximation):
/// - one K/V head of `head_dim` shared by every query head (MQA; K and V one tensor), its
///   projection `wkv` (hidden → head_dim) replicated on every rank;
/// - the query is low-rank: `wq_a` (hidden → q_lora_rank, replicated), `wq_b`
///   (q_lora_rank → heads × head_dim, split by heads);
/// - the output is grouped low-rank: `wo_a` (each of `o_groups` head groups →
///   o_lora_rank, split by groups), `wo_b` (o_groups × o_lora_rank → hidden, split by rows);
/// - every layer keeps the last `sliding_window` tokens uncompressed; a layer with
///   compression ratio r also keeps one compressed entry of head_dim per r tokens, produced
///   by a compressor of 2 × head_dim outputs (entry and gate) from the hidden state; ratios
///   below 16 (4 in V4-Flash) select `index_topk` entries with a DSA indexer over the
///   compressed entries, larger ratios (128) attend to all of them;
/// - hyper-connections (`hc_mult`) are left out: mixing matrices of a few hidden × hc_mult
///   weights per layer.
pub fn compressed_ops(cx: &BuildContext, l: CompressedLayer, out: &mut Vec<Operator>) {
    let q = &cx.model.quantization;
    let fmt = q.attention();
    let kvb = q.kv_cache.bytes();
    let u = cx.unfused;
    let (h, heads, tokens, own, mixed) = (cx.hidden, cx.heads, cx.tokens, cx.own, cx.mixed);
    let d = l.d;
    let tp = cx.par.tp as f64;
    push_gemm(out, u, "wq_a", Category::Gemm, tokens, l.q_rank, h, fmt);
    push_gemm(
        out,
        u,
        "wq_b",
        Category::Gemm,
        tokens,
        heads * d,
        l.q_rank,
        fmt,
    );
    push_gemm(out, u, "wkv", Category::Gemm, tokens, d, h, fmt);
    out.push(elementwise(
        "rotary_emb",
        Category::Other,
        (tokens, (heads + 1.0) * d),
        tokens * (heads + 1.0) * d * 2.0 * 2.0,
        tokens * (heads + 1.0) * d * 3.0,
        cx.fusion.rotary_kernels(),
    ));
    let w = l.window.unwrap_or(0) as f64;
    let local_span = cx.span.min(w);
    let flops = 4.0 * own * heads * local_span * d + 4.0 * mixed * heads * cx.mixed_span.min(w) * d;
    let bytes = cx.seqs * cx.cached.min(w + cx.new) * d * kvb + tokens * heads * d * 2.0 * 2.0;
    out.push(attention_kernel(
        "local_attention",
        AttentionKind::SlidingWindow,
        (own, heads, local_span),
        (cx.seqs, 1.0),
        flops,
        bytes,
        (d * kvb, Some(w), cx.model.quantization.kv_cache),
    ));
    if l.compress > 0 {
        let r = l.compress as f64;
        push_gemm(
            out,
            u,
            "compressor",
            Category::Gemm,
            tokens,
            2.0 * d,
            h,
            fmt,
        );
        let (span, cached) = if l.indexer {
            let (s, c) = dsa_indexer(cx, l.q_rank, r, out);
            (s.min(cx.span / r), c.min(cx.cached / r))
        } else {
            (cx.span / r, cx.cached / r)
        };
        let flops = 4.0 * own * heads * span * d + 4.0 * mixed * heads * cx.mixed_span / r * d;
        let bytes = cx.seqs * cached * d * kvb + tokens * heads * d * 2.0;
        out.push(attention_kernel(
            "compressed_attention",
            AttentionKind::Compressed,
            (own, heads, span),
            (cx.seqs, 1.0),
            flops,
            bytes,
            (d * kvb / r, None, cx.model.quantization.kv_cache),
        ));
    }
    let groups_local = (l.groups / tp).max(1.0);
    push_gemm(
        out,
        u,
        "wo_a",
        Category::Gemm,
        tokens,
        groups_local * l.o_rank,
        heads * d / groups_local,
        fmt,
    );
    push_gemm(
        out,
        u,
        "wo_b",
        Category::Gemm,
        tokens,
        h,
        groups_local * l.o_rank,
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
    (kv_bytes_per_token, kv_window, kv_dtype): (f64, Option<f64>, KvDtype),
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
            kv_window,
            kv_dtype,
            backend: None,
        },
    )
}
