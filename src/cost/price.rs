//! The price of one operator on one GPU: the only place an [`Operator`] becomes a time.
//!
//! Compute and memory work go through the roofline (`cost::roofline`): GEMMs at the speed of
//! light at the peak of the dtype they compute in, otherwise as the generation's GEMM kernel
//! runs (`cost::kernels::gemm_time`); attention kernels at the BF16
//! rate times the attention efficiency, elementwise kernels at the BF16 peak; all at the
//! attainable DRAM bandwidth. Collectives go through NCCL's or the engine's model
//! (`cost::collective`). Each kernel adds its fixed cost (`Device::overhead`).
//!
//! At the speed of light a separate dequantization pass is free (an ideal kernel fuses it)
//! and the GEMM after it reads the stored, quantized weights.

use crate::cost::breakdown::OpCost;
use crate::cost::collective::{self, AllReduceAlgo, CollectiveCost};
use crate::cost::device::{Device, Harness};
use crate::cost::kernels;
use crate::cost::roofline::{roofline, Bound};
use crate::ops::Category;
use crate::ops::{AttentionKind, CollectiveKind, Op, Operator};

/// An attention call with at most this many queries per sequence runs a decode kernel
/// (one token, or a speculative draft's few).
const DECODE_QUERIES_PER_SEQUENCE: f64 = 16.0;
use crate::spec::{FormatKind, MathDtype, WeightFormat};

/// The last collective priced, reused when the next one is the same call (every TP
/// all-reduce of a pass moves the same bytes over the same ranks).
#[derive(Debug, Clone, Copy, Default)]
pub struct CollectiveMemo(Option<(CollectiveKind, f64, u32, u32, CollectiveCost)>);

/// Price one operator on `dev`.
pub fn cost(op: &Operator, dev: &Device) -> OpCost {
    cost_with(op, dev, &mut CollectiveMemo::default())
}

/// Price every operator of a list.
pub fn cost_all(ops: &[Operator], dev: &Device) -> Vec<OpCost> {
    let mut memo = CollectiveMemo::default();
    ops.iter().map(|o| cost_with(o, dev, &mut memo)).collect()
}

/// [`cost`] reusing `memo` for repeated collectives.
#[inline]
pub fn cost_with(op: &Operator, dev: &Device, memo: &mut CollectiveMemo) -> OpCost {
    let (flops, bytes, time, bound, math, algorithm) = work(op, dev, memo);
    // A collective's modelled call is what a loop of back-to-back calls measures (vLLM's
    // in-graph benchmark, nccl-tests), the dispatch between kernels included: inside a CUDA
    // graph no gap is added to it. Eagerly, its launch still counts.
    let overhead = match op.op {
        Op::Collective { .. } | Op::ExpertExchange(_) if dev.graphs => 0.0,
        _ => dev.overhead(op.kernels, time),
    };
    OpCost {
        name: op.name,
        category: op.category,
        flops,
        bytes,
        time,
        overhead,
        bound,
        kernels: op.kernels,
        math,
        algorithm,
        provenance: dev.params.provenance,
    }
}

type Work = (
    f64,
    f64,
    f64,
    Bound,
    Option<MathDtype>,
    Option<AllReduceAlgo>,
);

fn work(op: &Operator, dev: &Device, memo: &mut CollectiveMemo) -> Work {
    let sol = dev.params.is_sol();
    let mem = dev.mem_bw;
    let plain = |flops: f64, bytes: f64, rate: f64, math: Option<MathDtype>| {
        let (t, b) = roofline(flops, bytes, rate, mem);
        (flops, bytes, t, b, math, None)
    };
    match op.op {
        Op::Gemm {
            m,
            n,
            k,
            weights,
            after_cast,
            ..
        } => {
            let (weight_bytes, kind) = weights_read(n * k, weights, after_cast && !sol);
            let flops = 2.0 * m * n * k;
            let bytes = weight_bytes + (m * k + m * n) * 2.0;
            // A harness repeating a call whose tensors fit in L2 reads them from there: its
            // speed of light is the L2 one, and the kernel model is never under it (validate
            // only; predictions never run a harness).
            let warm = dev.warm_in_l2(bytes);
            if sol && warm {
                let t = harness_sol(dev, 0.0, bytes).max(flops / dev.gemm_rate[kind]);
                let bound = if flops / dev.gemm_rate[kind] >= t {
                    Bound::Compute
                } else {
                    Bound::Memory
                };
                (flops, bytes, t, bound, Some(dev.gemm_math[kind]), None)
            } else if sol {
                plain(flops, bytes, dev.gemm_rate[kind], Some(dev.gemm_math[kind]))
            } else {
                let (t, compute) = kernels::gemm_time(dev, m, n, k, weights, after_cast);
                let t = if warm {
                    t.max(harness_sol(dev, 0.0, bytes))
                } else {
                    t
                };
                let bound = if compute {
                    Bound::Compute
                } else {
                    Bound::Memory
                };
                (flops, bytes, t, bound, Some(dev.gemm_math[kind]), None)
            }
        }
        Op::MoeGemm {
            experts,
            ep,
            tokens,
            routing,
            top_k,
            touched_experts,
            redundant,
            matrices,
            hidden,
            width,
            weights,
            after_cast,
            backend,
            handed_all,
            ..
        } => {
            let shape = kernels::MoeShape {
                handed_all,
                experts,
                ep,
                tokens,
                top_k,
                routing,
                mean_touched: touched_experts,
                redundant,
                matrices,
                hidden,
                width,
                weights,
                cast: after_cast && !sol,
                backend,
            };
            let kind = if shape.cast {
                FormatKind::Bf16
            } else {
                weights.kind
            };
            let (flops, bytes, t, compute) = kernels::moe_time(&shape, dev);
            let bound = if compute {
                Bound::Compute
            } else {
                Bound::Memory
            };
            (flops, bytes, t, bound, Some(dev.gemm_math[kind]), None)
        }
        Op::Dequant { elems, from } => {
            if sol {
                (0.0, 0.0, 0.0, Bound::Memory, None, None)
            } else {
                plain(0.0, elems * (from.bytes_per_weight() + 2.0), 1.0, None)
            }
        }
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
            kv_dtype,
            backend,
            ..
        } => {
            // The speed of light multiplies an FP8 cache at the FP8 tensor rate.
            let rate = if sol {
                dev.attention_peak(kv_dtype) * dev.params.attention_efficiency
            } else {
                dev.attention_rate
            };
            let (t, b) = roofline(flops, bytes, rate, mem);
            // The cache the kernel streams: every sequence's attended positions; the rest of
            // its bytes (queries, outputs, the new token's K/V) are not split across CTAs.
            let kv = (sequences * span * kv_bytes_per_token).min(bytes);
            // MLA's latent decode kernels (FlashMLA, FlashInfer/TRT-LLM MLA, Triton MLA):
            // head tiles, cache stream per tile, per-row cost (`kernels::mla_decode_time`).
            if kind == AttentionKind::MlaAbsorbed
                && queries <= DECODE_QUERIES_PER_SEQUENCE * sequences
            {
                if let Some(k) = kernels::mla_decode_time(
                    dev,
                    &kernels::MlaDecodeShape {
                        sequences,
                        queries,
                        heads,
                        flops,
                        kv_dtype,
                    },
                    kv,
                    bytes - kv,
                ) {
                    let bound = if k > t { Bound::Memory } else { b };
                    return (flops, bytes, k, bound, Some(MathDtype::Bf16), None);
                }
            }
            // Decode kernels (a few queries per sequence) as they run: floor, split-KV
            // occupancy and per-item cost; prefill and the indexer stay on the roofline.
            let decode = matches!(kind, AttentionKind::Gqa | AttentionKind::SlidingWindow)
                && queries <= DECODE_QUERIES_PER_SEQUENCE * sequences;
            let warm = decode && dev.warm_in_l2(kv);
            match decode
                .then(|| {
                    let shape = kernels::DecodeShape {
                        sequences,
                        kv_heads,
                        heads,
                        windowed: kind == AttentionKind::SlidingWindow,
                        span,
                        kv_dtype,
                    };
                    kernels::decode_attention_time(dev, &shape, backend, kv, bytes - kv)
                })
                .flatten()
            {
                // A harness repeating the call on a cache that fits in L2 reads it from
                // there: the kernel model bounds it, not the DRAM roofline at the system's
                // attained fraction; never under the L2 speed of light (validate only).
                Some(k) if warm => {
                    let sol = harness_sol(dev, flops, bytes);
                    (
                        flops,
                        bytes,
                        k.max(sol),
                        Bound::Memory,
                        Some(MathDtype::Bf16),
                        None,
                    )
                }
                Some(k) if k > t => (flops, bytes, k, Bound::Memory, Some(MathDtype::Bf16), None),
                None if sol && decode && dev.harness != Harness::None => (
                    flops,
                    bytes,
                    harness_sol(dev, flops, bytes),
                    Bound::Memory,
                    Some(MathDtype::Bf16),
                    None,
                ),
                _ => (flops, bytes, t, b, Some(MathDtype::Bf16), None),
            }
        }
        Op::Recurrent { flops, bytes, .. } => {
            plain(flops, bytes, dev.attention_rate, Some(MathDtype::Bf16))
        }
        Op::Elementwise { flops, bytes, .. } => plain(flops, bytes, dev.bf16_peak, None),
        Op::Embedding { rows, hidden, .. } => {
            plain(0.0, rows * hidden * 2.0 * 2.0, dev.bf16_peak, None)
        }
        Op::Sampling { rows, vocab } => plain(
            rows * vocab * 6.0,
            rows * vocab * 4.0 * 2.0,
            dev.bf16_peak,
            None,
        ),
        Op::Collective {
            kind,
            bytes,
            ranks,
            stride,
        } => {
            let c = match memo.0 {
                Some((k, b, n, st, c)) if k == kind && b == bytes && n == ranks && st == stride => {
                    c
                }
                _ => {
                    let c = strided_collective_cost(dev, kind, bytes, ranks, stride);
                    memo.0 = Some((kind, bytes, ranks, stride, c));
                    c
                }
            };
            let bound = link_bound(&c);
            (0.0, bytes, c.time(), bound, None, Some(c.algo))
        }
        Op::ExpertExchange(x) => {
            let c = collective::expert_exchange(dev.system, &x, &dev.params);
            let bound = link_bound(&c);
            (
                0.0,
                x.tokens * x.token_bytes,
                c.time(),
                bound,
                None,
                Some(c.algo),
            )
        }
    }
}

/// The speed of light of a call a benchmark harness repeats (validate only): its bytes as
/// [`Device::sol_stream`] streams them (what fits in L2 at the GPU's L2 bandwidth bound,
/// [`crate::spec::GpuSpec::l2_bandwidth`], DRAM's where the description lacks one; what
/// does not, from DRAM), its flops at the BF16 peak. Never above the DRAM speed of light.
fn harness_sol(dev: &Device, flops: f64, bytes: f64) -> f64 {
    dev.sol_stream(bytes).max(flops / dev.bf16_peak)
}

/// Bytes a GEMM reads for `elems` weights stored as `w`, and the format it computes from:
/// BF16 after a separate cast pass, else the stored format.
fn weights_read(elems: f64, w: WeightFormat, cast: bool) -> (f64, FormatKind) {
    if cast {
        (elems * 2.0, FormatKind::Bf16)
    } else {
        (elems * w.bytes_per_weight(), w.kind)
    }
}

/// What bounds a collective: its fixed latency or the link's transfer.
fn link_bound(c: &CollectiveCost) -> Bound {
    if c.latency >= c.transfer {
        Bound::Latency
    } else {
        Bound::Link
    }
}

/// [`collective_cost`] over a group whose GPUs are `stride` apart: on a system of several
/// nodes such a group may span more nodes than a packed one, with fewer of its GPUs (and
/// their NICs) in each; it is priced as a packed group on nodes of that many GPUs.
pub fn strided_collective_cost(
    dev: &Device,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
    stride: u32,
) -> CollectiveCost {
    match collective::strided_system(dev.system, ranks, stride) {
        Some(sys) => {
            let (p, graphs) = (&dev.params, dev.graphs);
            collective_on(&sys, p, graphs, kind, bytes, ranks)
        }
        None => collective_cost(dev, kind, bytes, ranks),
    }
}

/// A collective's cost on `dev`'s system under its parameters.
pub fn collective_cost(
    dev: &Device,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
) -> CollectiveCost {
    collective_on(dev.system, &dev.params, dev.graphs, kind, bytes, ranks)
}

/// A collective's cost on system `s` under parameters `p` (`graphs`: inside a CUDA graph).
fn collective_on(
    s: &crate::spec::System,
    p: &crate::cost::CostParams,
    graphs: bool,
    kind: CollectiveKind,
    bytes: f64,
    ranks: u32,
) -> CollectiveCost {
    match kind {
        CollectiveKind::AllReduce => collective::allreduce_in(s, bytes, ranks, p, graphs),
        CollectiveKind::AllGather => collective::all_gather(s, bytes, ranks, p),
        CollectiveKind::ReduceScatter => collective::reduce_scatter(s, bytes, ranks, p),
        CollectiveKind::AllToAll => collective::all_to_all(s, bytes, ranks, p),
        // A gather to one rank of a group that spans nodes reaches it over the network.
        CollectiveKind::Gather => {
            collective::send_recv_over(s, bytes, p, s.spec.nodes_spanned(ranks) > 1)
        }
        CollectiveKind::SendRecv => collective::send_recv(s, bytes, p),
    }
}

/// Time of a category's share of an operator, for the breakdown: kernel time goes to the
/// operator's category, fixed cost to `overhead`.
pub fn add_to(b: &mut crate::cost::Breakdown, c: &OpCost) {
    b.add(c.category, c.time);
    b.add(Category::Overhead, c.overhead);
}
