//! The MoE feed-forward block: norm, router (gate GEMM and top-k), routed experts as one
//! fused kernel, shared experts, and the collective that returns the result: a TP
//! all-reduce, or dispatch and combine across expert-parallel groups when attention runs
//! data-parallel.
//!
//! Each GPU holds `experts / ep` experts, tensor-split over its group's `tp × dp / ep` GPUs.
//! Tokens of every data-parallel replica reach the experts, and a GPU reads only the experts
//! its share of the batch touches (`ops::routing::Routing::touched_per_rank`).

use crate::ops::collective::{ep_all_to_all, tp_allreduce};
use crate::ops::layers::BuildContext;
use crate::ops::mlp::{mlp_ops, MlpNames};
use crate::ops::Category;
use crate::ops::{casts, elementwise, push_gemm, Op, Operator};

/// Norm, router, experts and the block's collective for one MoE layer.
pub fn moe_block(cx: &BuildContext, out: &mut Vec<Operator>) {
    // After the mixer's all-reduce.
    out.push(cx.leading_norm("post_attention_layernorm", true));
    let Some(moe) = cx.model.moe() else {
        return;
    };
    moe_ops(cx, out);
    if cx.par.dp > 1 {
        ep_all_to_all(cx, moe.top_k as f64, out);
    } else {
        tp_allreduce(cx, "allreduce_moe", out);
    }
}

/// Weight elements of one routed expert on a GPU: `matrices` (`Op::MoeGemm::matrices`)
/// matrices of `hidden × width`.
pub fn expert_elems(matrices: f64, hidden: f64, width: f64) -> f64 {
    matrices * hidden * width
}

/// Router, routed experts and shared experts on one GPU.
pub fn moe_ops(cx: &BuildContext, out: &mut Vec<Operator>) {
    let Some(moe) = cx.model.moe() else {
        return;
    };
    let q = &cx.model.quantization;
    let par = cx.par;
    let (h, tokens) = (cx.hidden, cx.tokens);
    let e = moe.experts as f64;
    let k = moe.top_k as f64;
    let ie = moe.expert_intermediate as f64;
    // LatentMoE: the experts' input and output width. The two latent projections are
    // replicated Linear layers in vLLM's NemotronHMoE (`ReplicatedLinear`), so every rank
    // holds and runs them whole, and they are stored as the shared-expert group is (they
    // are the always-on matrices of the MoE block beside the shared expert).
    let latent = cx.model.config.moe_latent_size.map(f64::from);
    let eh = latent.unwrap_or(h);
    push_gemm(
        out,
        cx.unfused,
        "router_gate",
        Category::Moe,
        tokens,
        e,
        h,
        q.router(),
    );
    // A monolithic fused-MoE kernel picks the top-k from the logits itself.
    if !cx.fusion.moe_routing_inside {
        out.push(elementwise(
            "router_topk",
            Category::Moe,
            (tokens, e),
            tokens * e * 4.0 * 2.0,
            tokens * e * 8.0,
            2,
        ));
    }
    let all_tokens = cx.pass.all_tokens();
    let ep = par.ep as f64;
    let moe_tp = par.moe_tp() as f64;
    // EPLB's replicas add slots to every group; tokens spread over the slots.
    let redundant = par.redundant_experts as f64;
    let slots = par.expert_slots(e);
    let local_experts = slots / ep;
    let touched = cx.model.routing.touched_per_rank(slots, k, all_tokens, ep);
    let fmt = q.routed_experts();
    let matrices = cx.model.mlp_matrices() as f64;
    let width = ie / moe_tp;
    let expert_elems = expert_elems(matrices, eh, width);
    if let Some(l) = latent {
        push_gemm(
            out,
            cx.unfused,
            "fc1_latent_proj",
            Category::Moe,
            tokens,
            l,
            h,
            q.shared_experts(),
        );
    }
    let after_cast = casts(cx.unfused, fmt);
    let touched = touched.min(local_experts);
    // An engine that does not fuse the format's dequantization casts the layer's expert
    // weights to BF16 as tensors, before the grouped GEMMs run on them: every local expert's,
    // as the cast runs on the whole weight tensor ahead of the routing the fused call
    // resolves (a cast that knew the routing would cast the touched ones only) [U: the
    // mechanism of the older engines' SM120 NVFP4 path is inferred, not read].
    if after_cast {
        out.push(Operator::new(
            "experts_dequant_cast",
            Category::Dequant,
            1,
            Op::Dequant {
                elems: local_experts * expert_elems,
                from: fmt,
            },
        ));
    }
    // align/sort, gate_up, activation, down, weighted sum
    out.push(Operator::new(
        "routed_experts",
        Category::Moe,
        5,
        Op::MoeGemm {
            experts: e,
            ep,
            tokens: all_tokens,
            routing: cx.model.routing,
            local_experts,
            redundant,
            touched_experts: touched,
            top_k: k,
            matrices,
            routed_tokens: all_tokens * k / ep,
            // Attention DP with an all-to-all dispatch (NCCL's or DeepEP's) delivers each
            // GPU only the pairs routed to its experts; without DP, or with an all-gather,
            // its kernel sees every token ([`crate::ops::ep_all_to_all`]).
            handed_all: par.dp <= 1
                || cx.moe_all_to_all == crate::spec::engine::MoeAllToAll::AllgatherReducescatter,
            hidden: eh,
            width,
            weights: fmt,
            after_cast,
            backend: None,
        },
    ));
    if let Some(l) = latent {
        push_gemm(
            out,
            cx.unfused,
            "fc2_latent_proj",
            Category::Moe,
            tokens,
            h,
            l,
            q.shared_experts(),
        );
    }
    let shared = cx.model.shared_expert_width() as f64;
    if shared > 0.0 {
        let si = shared / par.tp as f64;
        mlp_ops(cx, si, q.shared_experts(), MlpNames::SHARED, out);
    }
}
