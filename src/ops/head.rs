//! What runs once per pass, outside the layers: the embedding lookup (vocabulary split over
//! tensor-parallel ranks, so its output is all-reduced), the final norm, lm_head, the gather
//! of every rank's logits, and sampling.
//!
//! Only the last position of each prompt is sampled in prefill; every new token is scored in
//! decode and verify.

use crate::ops::collective::{collective, tp_allreduce};
use crate::ops::layers::BuildContext;
use crate::ops::{norm, push_weight_gemm, CollectiveKind, Op, Operator};
use crate::ops::{Category, Phase};

/// Embedding, final norm, lm_head, logits gather and sampling for one pass.
pub fn head_ops(cx: &BuildContext, out: &mut Vec<Operator>) {
    let m = cx.model;
    let c = &m.config;
    let q = &m.quantization;
    let tp = cx.par.tp;
    let dp = cx.par.dp as f64;
    let h = cx.hidden;
    let vocab = c.vocab_size as f64;
    let pass = &cx.pass;
    let mixed_prompts = if pass.mixed_prefill_tokens > 0.0 {
        pass.mixed_prefill_tokens / pass.mixed_prefill_len
    } else {
        0.0
    };
    let rows = match pass.phase {
        Phase::Decode => pass.replica_own_tokens(cx.par.dp),
        Phase::Prefill => pass.replica_sequences(cx.par.dp),
    } + mixed_prompts / dp;
    out.push(Operator::new(
        "embedding",
        Category::Other,
        1,
        Op::Embedding {
            rows: cx.tokens,
            hidden: h,
            vocab: vocab / tp as f64,
            weights: q.embedding(),
        },
    ));
    tp_allreduce(cx, "allreduce_embedding", out);
    out.push(norm("final_norm", rows, h));
    // A tied lm_head reads the embedding table: no second copy is held.
    push_weight_gemm(
        out,
        cx.unfused,
        "lm_head",
        Category::Gemm,
        (rows, vocab / tp as f64, h),
        q.lm_head(),
        !c.tie_word_embeddings,
    );
    if tp > 1 {
        let bytes = rows * vocab * 2.0 * (tp as f64 - 1.0) / tp as f64;
        out.extend(collective(
            "logits_gather",
            Category::Other,
            CollectiveKind::Gather,
            bytes,
            tp,
        ));
    }
    out.push(Operator::new(
        "sampling",
        Category::Other,
        3,
        Op::Sampling { rows, vocab },
    ));
}
