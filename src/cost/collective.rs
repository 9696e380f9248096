//! Collective communication cost: tensor-parallel all-reduce, all-to-all, point-to-point.
//!
//! The all-reduce follows NCCL's own cost model (`src/graph/tuning.cc`): a base latency per
//! call plus a per-step hardware latency times the ring's `2(n−1)` steps, plus the bus-bytes
//! term `2(n−1)/n · S / B` where the protocol reaches a fraction of the link (LL ~1/2,
//! LL128 ~0.92, Simple ~1). With `auto`, the fastest algorithm/protocol is taken, as NCCL's
//! tuner does. vLLM's custom all-reduce (one-shot: `(n−1)·S / B`; two-shot:
//! `2(n−1)/n · S / B`) is used where the engine's rule allows it. The speed-of-light bound is
//! the better of an ideal ring and an ideal one-shot at the raw link rate with only hop
//! latency.

use crate::cost::params::CostParams;
use crate::spec::{AllReduceImpl, LinkKind, NcclAlgorithm, NcclProtocol, System, Topology};

/// Fraction of the link bandwidth each NCCL protocol reaches (NCCL tuning.cc: LL moves 8
/// bytes of which 4 are flags; LL128 120 of 128; Simple the full line).
const PROTOCOL_BANDWIDTH: [(NcclProtocol, f64); 3] = [
    (NcclProtocol::Ll, 0.5),
    (NcclProtocol::Ll128, 0.92),
    (NcclProtocol::Simple, 1.0),
];

/// Which implementation carried an all-reduce, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllReduceAlgo {
    None,
    NcclRing(NcclProtocol),
    NcclTree(NcclProtocol),
    OneShot,
    TwoShot,
    Ideal,
}

impl AllReduceAlgo {
    pub fn name(self) -> &'static str {
        match self {
            AllReduceAlgo::None => "none",
            AllReduceAlgo::NcclRing(NcclProtocol::Ll) => "nccl-ring-ll",
            AllReduceAlgo::NcclRing(NcclProtocol::Ll128) => "nccl-ring-ll128",
            AllReduceAlgo::NcclRing(_) => "nccl-ring-simple",
            AllReduceAlgo::NcclTree(NcclProtocol::Ll) => "nccl-tree-ll",
            AllReduceAlgo::NcclTree(NcclProtocol::Ll128) => "nccl-tree-ll128",
            AllReduceAlgo::NcclTree(_) => "nccl-tree-simple",
            AllReduceAlgo::OneShot => "custom-one-shot",
            AllReduceAlgo::TwoShot => "custom-two-shot",
            AllReduceAlgo::Ideal => "ideal",
        }
    }
}

impl serde::Serialize for AllReduceAlgo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A collective's time split into its latency and bandwidth parts (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectiveCost {
    pub latency: f64,
    pub transfer: f64,
    pub algo: AllReduceAlgo,
}

impl CollectiveCost {
    pub const ZERO: CollectiveCost = CollectiveCost {
        latency: 0.0,
        transfer: 0.0,
        algo: AllReduceAlgo::None,
    };
    pub fn time(&self) -> f64 {
        self.latency + self.transfer
    }
}

/// Achievable per-direction bandwidth (bytes/s) of the slowest hop among `n` GPUs, before
/// efficiency: NVSwitch and switches give every pair the P2P rate; a root-complex layout
/// that spans sockets is limited by the cross-socket rate.
pub fn link_bandwidth(system: &System, n: u32) -> f64 {
    let l = &system.link;
    let s = &system.spec;
    let spans_sockets = s.sockets > 1 && n > s.gpu_count.div_ceil(s.sockets);
    match (s.topology, l.kind) {
        (Topology::RootComplex, LinkKind::Pcie) if spans_sockets => {
            l.cross_socket_bandwidth.unwrap_or(l.p2p_bandwidth).0
        }
        _ => l.p2p_bandwidth.0,
    }
}

/// One-hop latency (seconds): P2P, or staged through host memory when P2P is off.
fn hop_latency(system: &System) -> f64 {
    let l = &system.link;
    if system.spec.p2p {
        l.p2p_latency.0
    } else {
        l.staged_latency.unwrap_or(l.p2p_latency).0
    }
}

fn nccl_allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    let steps = 2.0 * (n as f64 - 1.0);
    let algos: &[NcclAlgorithm] = match system.engine.nccl_algorithm {
        NcclAlgorithm::Auto => &[NcclAlgorithm::Ring, NcclAlgorithm::Tree],
        NcclAlgorithm::Ring => &[NcclAlgorithm::Ring],
        NcclAlgorithm::Tree => &[NcclAlgorithm::Tree],
    };
    nccl_best(system, algos, steps / n as f64 * bytes, steps, n, p)
}

/// NCCL's model for `bus_bytes` over `steps` hops among `n` GPUs: base latency per call,
/// hardware latency per step, and the bus bytes at the protocol's share of the link; the
/// fastest of `algos` × the protocols the engine allows, as NCCL's tuner picks.
fn nccl_best(
    system: &System,
    algos: &[NcclAlgorithm],
    bus_bytes: f64,
    steps: f64,
    n: u32,
    p: &CostParams,
) -> CollectiveCost {
    let eng = &system.engine;
    let link = &system.link;
    let bw = link_bandwidth(system, n) * p.link_efficiency;
    let mut best = CollectiveCost {
        latency: f64::INFINITY,
        transfer: 0.0,
        algo: AllReduceAlgo::None,
    };
    for &algo in algos {
        let (base, step) = match algo {
            NcclAlgorithm::Tree => (link.nccl_base_latency.tree, link.nccl_step_latency.tree),
            _ => (link.nccl_base_latency.ring, link.nccl_step_latency.ring),
        };
        for &(proto, frac) in PROTOCOL_BANDWIDTH.iter() {
            if eng.nccl_protocol != NcclProtocol::Auto && eng.nccl_protocol != proto {
                continue;
            }
            let (b, s) = match proto {
                NcclProtocol::Ll => (base.ll.0, step.ll.0),
                NcclProtocol::Ll128 => (base.ll128.0, step.ll128.0),
                _ => (base.simple.0, step.simple.0),
            };
            // Without P2P every hop is staged through host memory.
            let s = if system.spec.p2p {
                s
            } else {
                s.max(hop_latency(system))
            };
            let latency = (b + steps * s) * p.collective_latency_scale;
            let transfer = bus_bytes / (bw * frac);
            if latency + transfer < best.time() {
                best = CollectiveCost {
                    latency,
                    transfer,
                    algo: match algo {
                        NcclAlgorithm::Tree => AllReduceAlgo::NcclTree(proto),
                        _ => AllReduceAlgo::NcclRing(proto),
                    },
                };
            }
        }
    }
    best
}

fn custom_allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    let eng = &system.engine;
    let bw = link_bandwidth(system, n) * p.link_efficiency;
    let hop = hop_latency(system);
    let nf = n as f64;
    if bytes <= eng.one_shot_max.0 {
        // one barrier, one read of every peer's buffer
        CollectiveCost {
            latency: 2.0 * hop * p.collective_latency_scale,
            transfer: (nf - 1.0) * bytes / bw,
            algo: AllReduceAlgo::OneShot,
        }
    } else {
        // reduce-scatter + all-gather, a barrier around each
        CollectiveCost {
            latency: 4.0 * hop * p.collective_latency_scale,
            transfer: 2.0 * (nf - 1.0) / nf * bytes / bw,
            algo: AllReduceAlgo::TwoShot,
        }
    }
}

/// Cost of one all-reduce of `bytes` per rank over `n` GPUs.
pub fn allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    if p.is_sol() {
        return ideal_allreduce(system, bytes, n);
    }
    let eng = &system.engine;
    let custom_allowed = match eng.allreduce {
        AllReduceImpl::Nccl => false,
        AllReduceImpl::Custom => true,
        AllReduceImpl::VllmAuto => n == 2 || system.spec.topology == Topology::Nvswitch,
    };
    let chosen = |bytes: f64| {
        if custom_allowed && bytes <= eng.custom_allreduce_max.0 {
            custom_allreduce(system, bytes, n, p)
        } else {
            nccl_allreduce(system, bytes, n, p)
        }
    };
    // The engine switches implementation at fixed sizes (one-shot → two-shot → NCCL), tuned
    // so that the next one is no faster there. Where this model's formulas disagree with the
    // engine's tuning, a message just above a switch point would come out cheaper than one
    // just below it, and a larger batch would decode faster than a smaller one. A message is
    // never cheaper than any switch-point message below it: time never falls with size.
    let mut c = chosen(bytes);
    if custom_allowed {
        for limit in [eng.one_shot_max.0, eng.custom_allreduce_max.0] {
            if limit > 0.0 && limit < bytes {
                c = not_below(c, chosen(limit));
            }
        }
    }
    // No implementation beats the hardware: a fitted latency scale below 1 cannot take a
    // collective under its speed-of-light time.
    not_below(c, ideal_allreduce(system, bytes, n))
}

/// Speed of light: raw link rate, hop latency only, the best of ring (`2(n−1)` hops),
/// one-shot (one hop, `(n−1)·S` per link) and two-shot (two hops, `2(n−1)/n·S`).
fn ideal_allreduce(system: &System, bytes: f64, n: u32) -> CollectiveCost {
    let raw = system.link.bandwidth_per_direction.0;
    let hop = system.link.p2p_latency.0;
    let nf = n as f64;
    let candidates = [
        (2.0 * (nf - 1.0) * hop, 2.0 * (nf - 1.0) / nf * bytes / raw),
        (hop, (nf - 1.0) * bytes / raw),
        (2.0 * hop, 2.0 * (nf - 1.0) / nf * bytes / raw),
    ];
    let (latency, transfer) = candidates
        .into_iter()
        .min_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)))
        .unwrap_or((0.0, 0.0));
    CollectiveCost {
        latency,
        transfer,
        algo: AllReduceAlgo::Ideal,
    }
}

/// All-to-all where each rank sends `bytes` in total, spread evenly over the other `n − 1`
/// ranks (expert-parallel dispatch or combine): `(n−1)/n · S / B` plus one hop per peer
/// round, NCCL's base latency for the call.
pub fn all_to_all(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    let nf = n as f64;
    let ideal = CollectiveCost {
        latency: system.link.p2p_latency.0,
        transfer: (nf - 1.0) / nf * bytes / system.link.bandwidth_per_direction.0,
        algo: AllReduceAlgo::Ideal,
    };
    if p.is_sol() {
        return ideal;
    }
    let bw = link_bandwidth(system, n) * p.link_efficiency;
    let base = system.link.nccl_base_latency.ring.simple.0;
    not_below(
        CollectiveCost {
            latency: (base + (nf - 1.0) * hop_latency(system)) * p.collective_latency_scale,
            transfer: (nf - 1.0) / nf * bytes / bw,
            algo: AllReduceAlgo::NcclRing(NcclProtocol::Simple),
        },
        ideal,
    )
}

/// All-gather where each rank contributes `bytes` (NCCL ring: `n − 1` steps, bus bytes
/// `(n−1) · S`), or reduce-scatter of `bytes` per rank (`(n−1)/n · S`), with the fastest
/// protocol the engine allows; never faster than one hop at the raw link rate.
fn ring_collective(system: &System, bus_bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bus_bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    let ideal = CollectiveCost {
        latency: system.link.p2p_latency.0,
        transfer: bus_bytes / system.link.bandwidth_per_direction.0,
        algo: AllReduceAlgo::Ideal,
    };
    if p.is_sol() {
        return ideal;
    }
    let best = nccl_best(
        system,
        &[NcclAlgorithm::Ring],
        bus_bytes,
        n as f64 - 1.0,
        n,
        p,
    );
    not_below(best, ideal)
}

/// All-gather: each of `n` ranks contributes `bytes` and ends with all `n · bytes`.
pub fn all_gather(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    ring_collective(system, (n as f64 - 1.0) * bytes, n, p)
}

/// Reduce-scatter: each of `n` ranks holds `bytes` and ends with its `1/n` share of the sum.
pub fn reduce_scatter(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    ring_collective(system, (n as f64 - 1.0) / n as f64 * bytes, n, p)
}

/// A modelled collective, never faster than its ideal counterpart.
fn not_below(c: CollectiveCost, ideal: CollectiveCost) -> CollectiveCost {
    if c.time() < ideal.time() {
        CollectiveCost {
            algo: c.algo,
            ..ideal
        }
    } else {
        c
    }
}

/// Point-to-point send of `bytes` between neighbouring pipeline stages.
pub fn send_recv(system: &System, bytes: f64, p: &CostParams) -> CollectiveCost {
    if bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    let ideal = CollectiveCost {
        latency: system.link.p2p_latency.0,
        transfer: bytes / system.link.bandwidth_per_direction.0,
        algo: AllReduceAlgo::Ideal,
    };
    if p.is_sol() {
        return ideal;
    }
    let bw = link_bandwidth(system, system.spec.gpu_count) * p.link_efficiency;
    let base = system.link.nccl_base_latency.ring.simple.0;
    not_below(
        CollectiveCost {
            latency: (base + hop_latency(system)) * p.collective_latency_scale,
            transfer: bytes / bw,
            algo: AllReduceAlgo::NcclRing(NcclProtocol::Simple),
        },
        ideal,
    )
}
