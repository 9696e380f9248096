//! The dense feed-forward block: norm, MLP split by columns across tensor-parallel ranks, and
//! its all-reduce. Gated (gate and up fused, activation, down) unless the model's activation
//! is ungated (`relu2`: up, activation, down).

use crate::ops::collective::tp_allreduce;
use crate::ops::layers::BuildContext;
use crate::ops::Category;
use crate::ops::{elementwise, push_gemm, Operator};
use crate::spec::WeightFormat;

/// Norm, dense MLP of `width` and its all-reduce for one layer.
pub fn mlp_block(cx: &BuildContext, width: u32, out: &mut Vec<Operator>) {
    // After the mixer's all-reduce.
    out.push(cx.leading_norm("post_attention_layernorm", true));
    let fmt = cx.model.quantization.dense_mlp();
    mlp_ops(
        cx,
        width as f64 / cx.par.tp as f64,
        fmt,
        MlpNames::DENSE,
        out,
    );
    tp_allreduce(cx, "allreduce_mlp", out);
}

/// Operator names and category of one MLP.
#[derive(Debug, Clone, Copy)]
pub struct MlpNames {
    pub up: &'static str,
    pub act: &'static str,
    pub down: &'static str,
    /// Category of the GEMMs and of the activation.
    pub category: Category,
    pub act_category: Category,
}

impl MlpNames {
    pub const DENSE: MlpNames = MlpNames {
        up: "gate_up_proj",
        act: "act_and_mul",
        down: "down_proj",
        category: Category::Gemm,
        act_category: Category::Other,
    };
    pub const SHARED: MlpNames = MlpNames {
        up: "shared_gate_up",
        act: "shared_act",
        down: "shared_down",
        category: Category::Moe,
        act_category: Category::Moe,
    };
}

/// One MLP of width `i` on one GPU, stored as `fmt`.
pub fn mlp_ops(cx: &BuildContext, i: f64, fmt: WeightFormat, n: MlpNames, out: &mut Vec<Operator>) {
    let (h, tokens) = (cx.hidden, cx.tokens);
    let ups = cx.model.mlp_matrices() as f64 - 1.0;
    push_gemm(out, cx.unfused, n.up, n.category, tokens, ups * i, h, fmt);
    out.push(elementwise(
        n.act,
        n.act_category,
        (tokens, i),
        tokens * i * 2.0 * (ups + 1.0),
        tokens * i * 4.0,
        1,
    ));
    push_gemm(out, cx.unfused, n.down, n.category, tokens, h, i, fmt);
}
