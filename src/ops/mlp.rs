//! The dense feed-forward block: norm, gated MLP (gate and up fused, activation, down) split
//! by columns across tensor-parallel ranks, and its all-reduce.

use crate::ops::collective::tp_allreduce;
use crate::ops::layers::BuildContext;
use crate::ops::Category;
use crate::ops::{elementwise, norm, push_gemm, Operator};

/// Norm, dense MLP and its all-reduce for one layer.
pub fn mlp_block(cx: &BuildContext, out: &mut Vec<Operator>) {
    out.push(norm("post_attention_layernorm", cx.tokens, cx.hidden));
    mlp_ops(cx, out);
    tp_allreduce(cx, "allreduce_mlp", out);
}

/// The gated MLP of the model's dense width on one GPU.
pub fn mlp_ops(cx: &BuildContext, out: &mut Vec<Operator>) {
    let c = &cx.model.config;
    let i = c.intermediate_size.unwrap_or(0) as f64 / cx.par.tp as f64;
    let fmt = cx.model.quantization.dense_mlp();
    let (h, tokens) = (cx.hidden, cx.tokens);
    push_gemm(
        out,
        cx.unfused,
        "gate_up_proj",
        Category::Gemm,
        tokens,
        2.0 * i,
        h,
        fmt,
    );
    out.push(elementwise(
        "act_and_mul",
        Category::Other,
        (tokens, i),
        tokens * i * 2.0 * 3.0,
        tokens * i * 4.0,
        1,
    ));
    push_gemm(
        out,
        cx.unfused,
        "down_proj",
        Category::Gemm,
        tokens,
        h,
        i,
        fmt,
    );
}
