//! The collectives a layout adds between blocks: tensor-parallel all-reduces of the hidden
//! state, and expert-parallel dispatch and combine when attention runs data-parallel.
//!
//! A collective over one GPU, or of no bytes, does not run: no operator is emitted, so it
//! adds neither time nor a kernel.

use crate::ops::layers::BuildContext;
use crate::ops::Category;
use crate::ops::{CollectiveKind, Op, Operator};

/// A collective operator, or nothing when it would not run.
pub fn collective(
    name: &'static str,
    category: Category,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
) -> Option<Operator> {
    let runs = bytes > 0.0 && (ranks > 1 || kind == CollectiveKind::SendRecv);
    runs.then(|| Operator::new(name, category, 1, Op::Collective { kind, bytes, ranks }))
}

/// The all-reduce of the hidden state across the tensor-parallel ranks.
pub fn tp_allreduce(cx: &BuildContext, name: &'static str, out: &mut Vec<Operator>) {
    out.extend(collective(
        name,
        Category::Allreduce,
        CollectiveKind::AllReduce,
        cx.allreduce_bytes(),
        cx.par.tp,
    ));
}

/// Expert-parallel dispatch and combine over all `tp × dp` GPUs of a stage: each token's
/// hidden state goes to (at most) `min(top_k, ep)` expert groups and comes back. Under
/// LatentMoE (`moe_latent_size`) the token crosses in its latent form: the down-projection
/// runs before the dispatch and the up-projection after the combine, which is the point of
/// the design as the Nemotron-3 Super report states it (all-to-all traffic scales with the
/// latent width) [assumption: read from the report, not from an engine's dispatch code].
pub fn ep_all_to_all(cx: &BuildContext, top_k: f64, out: &mut Vec<Operator>) {
    let par = cx.par;
    let n = par.tp * par.dp;
    let width = cx.model.config.moe_latent_size.map_or(cx.hidden, f64::from);
    let bytes = cx.tokens * top_k.min(par.ep as f64) * width * 2.0;
    for name in ["moe_dispatch", "moe_combine"] {
        out.extend(collective(
            name,
            Category::Alltoall,
            CollectiveKind::AllToAll,
            bytes,
            n,
        ));
    }
}
