//! Token mixers with a fixed-size state per sequence: Gated DeltaNet linear attention
//! (Qwen3-Next, Qwen3.5/3.6) and Mamba-2 (Nemotron-H). Each is the layer's attention half:
//! norm, input projection, causal depthwise convolution, the recurrent scan, a gated norm,
//! the output projection and its all-reduce.
//!
//! Why they are apart from `attention`: their work per token does not grow with the context
//! and their memory is a state per sequence, not a cache per token. A decode step reads and
//! writes every sequence's state once; a prefill pass runs the chunked form of the scan
//! (chunks of 64 tokens: the state is read and written once per chunk, and each token
//! attends to the earlier tokens of its chunk). Heads are split across tensor-parallel ranks
//! as vLLM does (value heads for Gated DeltaNet, SSM heads for Mamba-2; the B/C groups and
//! key heads with them).
//!
//! Work per token and head, counted from the recurrences:
//! - Gated DeltaNet, state S of d_k × d_v: decay (1 FLOP per element), the delta read
//!   k^T S (2), the rank-1 update (2), the output q^T S (2): 7 d_k d_v.
//! - Mamba-2, state h of head_dim × d_state: decay and input (3 per element), the output
//!   C h (2): 5 head_dim d_state.

use crate::ops::collective::tp_allreduce;
use crate::ops::layers::BuildContext;
use crate::ops::{elementwise, push_gemm, Category, Op, Operator, Phase, RecurrentKind};

/// Tokens per chunk of the chunked (prefill) scan.
const CHUNK: f64 = 64.0;

/// The scan's work on one GPU: (flops, bytes) for `heads` local heads with a state of
/// `state_elems` elements each at `state_bytes` per element, `per_token_flops` per head and
/// token, `head_width` (key plus value width) per head for the intra-chunk products of
/// prefill, and `io` activation elements per token in and out.
fn scan_work(
    cx: &BuildContext,
    (heads, state_elems, state_bytes): (f64, f64, f64),
    per_token_flops: f64,
    head_width: f64,
    io: f64,
) -> (f64, f64) {
    let tokens = cx.tokens;
    let state_rw = 2.0 * heads * state_elems * state_bytes;
    let (passes, intra) = match cx.pass.phase {
        // Each sequence's state is read and written once per step.
        Phase::Decode => (
            cx.seqs + cx.mixed / CHUNK,
            cx.mixed * heads * CHUNK * head_width,
        ),
        // Once per chunk; within a chunk each token meets half a chunk of earlier tokens
        // (scores and weighted sum: 2 FLOP per element each).
        Phase::Prefill => (tokens / CHUNK, tokens * heads * CHUNK * head_width),
    };
    let flops = tokens * heads * per_token_flops + intra;
    let bytes = passes.max(cx.seqs) * state_rw + tokens * io * 2.0 * 2.0;
    (flops, bytes)
}

/// The short causal convolution both mixers run over their `conv_width` channels with a
/// kernel of `k` taps: it reads and writes each token's channels and each sequence's conv
/// state (its last `k − 1` positions) in BF16, at `2k` FLOPs per channel and token.
fn causal_conv1d(cx: &BuildContext, tokens: f64, conv_width: f64, k: f64) -> Operator {
    elementwise(
        "causal_conv1d",
        Category::Other,
        (tokens, conv_width),
        tokens * conv_width * 2.0 * 2.0 + cx.seqs * conv_width * (k - 1.0) * 2.0 * 2.0,
        tokens * conv_width * 2.0 * k,
        1,
    )
}

/// Norm, Gated DeltaNet and its all-reduce for one layer.
pub fn gated_deltanet_block(cx: &BuildContext, out: &mut Vec<Operator>) {
    let m = cx.model;
    let tp = cx.par.tp as f64;
    let (nk, nv, dk, dv, k) = m.gdn_dims();
    let nk_l = (nk / tp).max(1.0);
    let nv_l = (nv / tp).max(1.0);
    let fmt = m.quantization.attention();
    let u = cx.unfused;
    let (h, tokens) = (cx.hidden, cx.tokens);
    out.push(cx.leading_norm("input_layernorm", cx.ffn_ends_in_allreduce()));
    // q, k (key heads), v, z (value heads); then the per-head decay and beta.
    let conv_width = 2.0 * nk_l * dk + nv_l * dv;
    push_gemm(
        out,
        u,
        "in_proj_qkvz",
        Category::Gemm,
        tokens,
        conv_width + nv_l * dv,
        h,
        fmt,
    );
    push_gemm(
        out,
        u,
        "in_proj_ba",
        Category::Gemm,
        tokens,
        2.0 * nv_l,
        h,
        fmt,
    );
    out.push(causal_conv1d(cx, tokens, conv_width, k));
    let sb = m.config.ssm_state_dtype.map_or(4.0, |d| d.bytes());
    let (flops, bytes) = scan_work(
        cx,
        (nv_l, dk * dv, sb),
        7.0 * dk * dv,
        dk + dv,
        conv_width + nv_l * dv,
    );
    out.push(Operator::new(
        "gated_delta_rule",
        Category::Attention,
        2,
        Op::Recurrent {
            kind: RecurrentKind::GatedDeltaNet,
            tokens,
            heads: nv_l,
            flops,
            bytes,
            state_bytes_per_seq: nv_l * dk * dv * sb + conv_width * (k - 1.0).max(0.0) * 2.0,
        },
    ));
    out.push(elementwise(
        "gated_rmsnorm",
        Category::Other,
        (tokens, nv_l * dv),
        tokens * nv_l * dv * 2.0 * 3.0,
        tokens * nv_l * dv * 6.0,
        1,
    ));
    push_gemm(
        out,
        u,
        "out_proj",
        Category::Gemm,
        tokens,
        h,
        nv_l * dv,
        fmt,
    );
    tp_allreduce(cx, "allreduce_attn", out);
}

/// Norm, Mamba-2 mixer and its all-reduce for one layer.
pub fn mamba2_block(cx: &BuildContext, out: &mut Vec<Operator>) {
    let m = cx.model;
    let tp = cx.par.tp as f64;
    let (nh, hd, ds, ng, k) = m.mamba_dims();
    let nh_l = (nh / tp).max(1.0);
    let ng_l = (ng / tp).max(1.0);
    let inner = nh_l * hd;
    let fmt = m.quantization.attention();
    let u = cx.unfused;
    let (h, tokens) = (cx.hidden, cx.tokens);
    out.push(cx.leading_norm("input_layernorm", cx.ffn_ends_in_allreduce()));
    let conv_width = inner + 2.0 * ng_l * ds;
    // z, x, B, C and dt.
    push_gemm(
        out,
        u,
        "in_proj",
        Category::Gemm,
        tokens,
        inner + conv_width + nh_l,
        h,
        fmt,
    );
    out.push(causal_conv1d(cx, tokens, conv_width, k));
    let sb = m.config.ssm_state_dtype.map_or(4.0, |d| d.bytes());
    let (flops, bytes) = scan_work(
        cx,
        (nh_l, hd * ds, sb),
        5.0 * hd * ds,
        hd + ds,
        conv_width + inner,
    );
    out.push(Operator::new(
        "selective_state_update",
        Category::Attention,
        2,
        Op::Recurrent {
            kind: RecurrentKind::Mamba2,
            tokens,
            heads: nh_l,
            flops,
            bytes,
            state_bytes_per_seq: nh_l * hd * ds * sb + conv_width * (k - 1.0).max(0.0) * 2.0,
        },
    ));
    out.push(elementwise(
        "gated_rmsnorm",
        Category::Other,
        (tokens, inner),
        tokens * inner * 2.0 * 3.0,
        tokens * inner * 6.0,
        1,
    ));
    push_gemm(out, u, "out_proj", Category::Gemm, tokens, h, inner, fmt);
    tp_allreduce(cx, "allreduce_attn", out);
}
