//! The collectives a layout adds between blocks: tensor-parallel all-reduces of the hidden
//! state, and expert-parallel dispatch and combine when attention runs data-parallel.
//!
//! A collective over one GPU, or of no bytes, does not run: no operator is emitted, so it
//! adds neither time nor a kernel.

use crate::ops::layers::BuildContext;
use crate::ops::routing::{busiest_rank, Routing};
use crate::ops::Category;
use crate::ops::{CollectiveKind, DeepEpMode, ExpertExchange, Op, Operator, Phase};
use crate::spec::engine::MoeAllToAll;

/// A collective operator, or nothing when it would not run.
pub fn collective(
    name: &'static str,
    category: Category,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
) -> Option<Operator> {
    collective_strided(name, category, kind, bytes, ranks, 1)
}

/// [`collective`] over a group whose GPUs are `stride` apart in the layout's order (a
/// data-parallel group: one GPU of each replica's tensor-parallel group).
pub fn collective_strided(
    name: &'static str,
    category: Category,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
    stride: u32,
) -> Option<Operator> {
    let runs = bytes > 0.0 && (ranks > 1 || kind == CollectiveKind::SendRecv);
    runs.then(|| {
        Operator::new(
            name,
            category,
            1,
            Op::Collective {
                kind,
                bytes,
                ranks,
                stride: stride.max(1),
            },
        )
    })
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

/// Expert-parallel dispatch and combine over all `tp × dp` GPUs of a stage, as the engine's
/// backend runs them ([`MoeAllToAll`]): NCCL's all-to-all (below) or DeepEP's kernels
/// ([`deepep_exchange`]).
///
/// NCCL: each token's hidden state goes to (at most) `min(top_k, ep)` expert groups and comes
/// back. Under LatentMoE (`moe_latent_size`) the token crosses in its latent form: the
/// down-projection runs before the dispatch and the up-projection after the combine, which
/// is the point of the design as the Nemotron-3 Super report states it (all-to-all traffic
/// scales with the latent width) [assumption: read from the report, not from an engine's
/// dispatch code].
pub fn ep_all_to_all(cx: &BuildContext, top_k: f64, out: &mut Vec<Operator>) {
    let width = cx.model.config.moe_latent_size.map_or(cx.hidden, f64::from);
    if let Some(mode) = deepep_mode(cx.moe_all_to_all, cx) {
        deepep_exchange(cx, top_k, width, mode, out);
        return;
    }
    let par = cx.par;
    let n = par.tp * par.dp;
    if cx.moe_all_to_all == MoeAllToAll::AllgatherReducescatter {
        // Each GPU contributes its replica's tokens (BF16) to the data-parallel group's
        // all-gather and gets its replica's share of the sums back from the reduce-scatter.
        let own = cx.tokens * width * 2.0;
        for (name, kind, bytes) in [
            ("moe_dispatch", CollectiveKind::AllGather, own),
            (
                "moe_combine",
                CollectiveKind::ReduceScatter,
                own * par.dp as f64,
            ),
        ] {
            out.extend(collective_strided(
                name,
                Category::Alltoall,
                kind,
                bytes,
                par.dp,
                par.tp,
            ));
        }
        tp_allreduce(cx, "allreduce_moe", out);
        return;
    }
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

/// The DeepEP kernels a pass runs under `backend` (none: not DeepEP). `deepep-auto` picks as
/// SGLang's `--deepep-mode auto` does: low-latency for a decode batch, normal for one that
/// carries prompt tokens (an extend batch).
fn deepep_mode(backend: MoeAllToAll, cx: &BuildContext) -> Option<DeepEpMode> {
    match backend {
        MoeAllToAll::Nccl | MoeAllToAll::AllgatherReducescatter => None,
        MoeAllToAll::DeepepLowLatency => Some(DeepEpMode::LowLatency),
        MoeAllToAll::DeepepNormal => Some(DeepEpMode::Normal),
        MoeAllToAll::DeepepAuto => {
            let decode = cx.pass.phase == Phase::Decode && cx.pass.mixed_prefill_tokens == 0.0;
            Some(if decode {
                DeepEpMode::LowLatency
            } else {
                DeepEpMode::Normal
            })
        }
    }
}

/// Elements per FP32 scale of DeepEP's FP8 low-latency dispatch (one per 128 channels, as
/// DeepSeek-V3's activation quantization) [V: DeepEP README, `low_latency_dispatch(...,
/// use_fp8=True)`: FP8 with per-128-channel scales].
const DEEPEP_FP8_GROUP: f64 = 128.0;

/// DeepEP's dispatch and combine for one MoE layer. Every rank is its own expert-parallel
/// rank (`ep = tp × dp`, checked with the layout); each sends its share of its replica's
/// tokens (a replica's tensor-parallel ranks split its tokens, as SGLang scatters them before
/// the dispatch). Both modes send FP8 with scales out and BF16 back; low-latency mode sends
/// each token-expert pair as its own message, normal mode a token once per destination rank
/// (or node). The busiest rank's extra load under skewed routing rides on every message.
fn deepep_exchange(
    cx: &BuildContext,
    top_k: f64,
    width: f64,
    mode: DeepEpMode,
    out: &mut Vec<Operator>,
) {
    let Some(moe) = cx.model.moe() else {
        return;
    };
    let par = cx.par;
    let n = par.tp * par.dp;
    if n <= 1 || cx.tokens <= 0.0 {
        return;
    }
    let experts = moe.experts as f64;
    let skew = routing_skew(cx, experts, top_k, cx.pass.all_tokens(), n);
    let tokens = cx.tokens / par.tp as f64;
    // FP8 with its scales out, BF16 back, in both modes: the setting DeepEP is built and
    // measured for (DeepSeek-V3's) [V: DeepEP README (V1): "FP8 dispatching and BF16
    // combining"]; an engine that dispatches BF16 sends twice the dispatch bytes [U].
    let (dispatch_bytes, combine_bytes) = (width * (1.0 + 4.0 / DEEPEP_FP8_GROUP), width * 2.0);
    for (name, token_bytes) in [
        ("moe_dispatch", dispatch_bytes),
        ("moe_combine", combine_bytes),
    ] {
        out.push(Operator::new(
            name,
            Category::Alltoall,
            1,
            Op::ExpertExchange(ExpertExchange {
                mode,
                tokens,
                token_bytes,
                experts: par.expert_slots(experts),
                top_k,
                ranks: n,
                skew,
            }),
        ));
    }
}

/// The busiest of `ranks` expert-parallel ranks' token-expert pairs over the mean when
/// `tokens` tokens pick `top_k` of `experts` under the model's routing, with the layout's
/// redundant replicas placed by EPLB (1 for balanced routing).
fn routing_skew(cx: &BuildContext, experts: f64, top_k: f64, tokens: f64, ranks: u32) -> f64 {
    let routing = cx.model.routing;
    if matches!(routing, Routing::Balanced | Routing::RoundRobin) || tokens <= 0.0 {
        return 1.0;
    }
    let ep = ranks as f64;
    let mean = tokens * top_k / ep;
    let redundant = cx.par.redundant_experts as f64;
    let slots = cx.par.expert_slots(experts);
    let touched = routing.touched_per_rank(slots, top_k, tokens, ep);
    let busiest = busiest_rank(experts, top_k, tokens, ep, routing, touched, redundant).pairs;
    (busiest / mean).max(1.0)
}
