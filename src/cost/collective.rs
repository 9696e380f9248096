//! Collective communication cost: tensor-parallel all-reduce, all-gather, reduce-scatter,
//! all-to-all and point-to-point, as NCCL and vLLM run them.
//!
//! NCCL (`src/graph/tuning.cc`): each algorithm × protocol costs a base latency per call, a
//! per-step hardware latency times its steps (ring all-reduce `2(n−1)`, all-gather and
//! reduce-scatter `n−1`), and its bus bytes at the protocol's rate. NCCL's tuner *chooses*
//! the protocol from its own estimates: Simple at the bus bandwidth its topology gives a hop,
//! LL128 (only where the link enables it: NVLink) 0.92 of it, LL 1/4 of it for all-reduce and
//! 1/3 for other collectives; on NVSwitch systems with NVLS the switch-side reduction is one
//! more candidate. The chosen protocol then *runs* at what the path delivers: Simple and LL128
//! at the ring's bus bandwidth (and 0.92 of it), LL at half the path's P2P rate, as every
//! 8-byte LL line carries 4 bytes of data and a 4-byte flag. The two differ where a box's
//! slowest path is far below its best hop (the L40S box across sockets: NCCL keeps LL up to
//! ~512 KiB although LL there runs at half of Simple's rate) and where LL outruns the tuner's
//! quarter (2-GPU rings). The bus bandwidth a ring reaches is set by the slowest path
//! it crosses (one PCIe switch or NVSwitch, one CPU root complex, or across sockets), so it is
//! a property of the platform *and* of how many GPUs join: a system states the P2P rate it
//! reaches on each path (`[paths]`, measured on that box), and the ring gets NCCL's ring
//! efficiency of it (the link's `ring_efficiency`); a system without `[paths]` takes the
//! link's bus fractions of its raw rate. Point-to-point (all-to-all, send/recv)
//! uses LL up to NCCL's per-peer threshold and Simple above.
//!
//! vLLM's custom all-reduce runs inside CUDA graphs where the engine allows it: one-shot
//! (`(n−1)·S` read per rank) on two GPUs and below its size limit, two-shot
//! (`2(n−1)/n·S`, one more barrier) up to its buffer; on NVSwitch systems with NVLS its
//! symmetric-memory all-reduce takes over above that, so the time has no step at the buffer
//! limit. Without peer access vLLM runs NCCL, whose hops are staged through host memory.
//! Called eagerly (no CUDA graph), the kernel first copies its input into the registered
//! buffer, and a call takes no less than its host-side time (~20 µs in the dev tables).
//!
//! Every rate and latency comes from the interconnect's description
//! (`configs/interconnects/*.toml`, `[collective]`), with its source; NCCL's protocol factors
//! below are properties of NCCL, not of a link. The speed-of-light bound is the better of an
//! ideal ring and an ideal one-shot at the raw link rate with only hop latency.

use crate::cost::params::CostParams;
use crate::ops::{DeepEpMode, ExpertExchange};
use crate::spec::{
    AllReduceImpl, BusFraction, CollectiveModel, CpuVendor, InterconnectSpec, LinkKind,
    NcclAlgorithm, NcclP2pLevel, NcclProtocol, NodesSpec, NvlsSpec, P2pLatency, System, Topology,
};
use crate::units::{Bytes, Fraction, Seconds};

/// LL's share of the ring's bus bandwidth in NCCL's tuner estimate, which picks the
/// protocol: one half for every collective since NCCL 2.19 (`src/graph/tuning.cc`, v2.27.3
/// and v2.29.2, the versions of every measured table: `busBw = std::min(llMaxBw, busBw *
/// .5)`; 2.18 and before used 1/4 for all-reduce and 1/3 for the others, as
/// shared/reference/engines.md quotes) [V: NCCL source].
const LL_ALLREDUCE: f64 = 0.5;
const LL_OTHER: f64 = 0.5;
/// LL128's share of the bus bandwidth (120 of every 128 bytes are data; NCCL tuning.cc via
/// shared/reference/hardware.md, ~92 % [V]).
const LL128: f64 = 0.92;
/// LL's data share of what it puts on the wire: each 8-byte line is 4 bytes of data and a
/// 4-byte flag, so LL moves data at half the path's P2P rate (NCCL `src/device/prims_ll.h`;
/// shared/reference/hardware.md: "LL reaches about half the link" [V]).
const LL_WIRE: f64 = 0.5;
/// NCCL's default per-peer size up to which point-to-point uses LL (`NCCL_P2P_LL_THRESHOLD`).
const P2P_LL_THRESHOLD: f64 = 16384.0;

/// Which implementation carried a collective, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllReduceAlgo {
    None,
    NcclRing(NcclProtocol),
    NcclTree(NcclProtocol),
    NcclNvls,
    /// NVLS inside each node, NCCL's tree across nodes.
    NcclNvlsTree,
    /// NCCL's CollNet: the reduction in the network's switches (SHARP).
    NcclCollnet,
    /// NCCL point-to-point (all-to-all, send/recv) with this protocol.
    NcclP2p(NcclProtocol),
    OneShot,
    TwoShot,
    SymmMem,
    /// DeepEP's low-latency or normal kernels (MoE dispatch and combine).
    DeepEpLowLatency,
    DeepEpNormal,
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
            AllReduceAlgo::NcclNvls => "nccl-nvls",
            AllReduceAlgo::NcclNvlsTree => "nccl-nvls-tree",
            AllReduceAlgo::NcclCollnet => "nccl-collnet",
            AllReduceAlgo::NcclP2p(NcclProtocol::Ll) => "nccl-p2p-ll",
            AllReduceAlgo::NcclP2p(_) => "nccl-p2p-simple",
            AllReduceAlgo::OneShot => "custom-one-shot",
            AllReduceAlgo::TwoShot => "custom-two-shot",
            AllReduceAlgo::SymmMem => "symm-mem",
            AllReduceAlgo::DeepEpLowLatency => "deepep-low-latency",
            AllReduceAlgo::DeepEpNormal => "deepep-normal",
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

/// The slowest path a collective over `n` GPUs crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Under one PCIe switch, or through NVSwitch.
    Switch,
    /// Through one CPU's root complex.
    RootComplex,
    /// Across CPU sockets.
    CrossSocket,
}

/// Which path `n` GPUs of the system cross: GPUs fill a switch, then a socket, then the next.
pub fn path(system: &System, n: u32) -> Path {
    let s = &system.spec;
    let per_socket = s.gpus_per_node().div_ceil(s.sockets).max(1);
    let beyond_socket = s.sockets > 1 && n > per_socket;
    match s.topology {
        Topology::Nvswitch | Topology::FullMesh => Path::Switch,
        _ if beyond_socket => Path::CrossSocket,
        Topology::PcieSwitch if n <= s.gpus_per_switch.unwrap_or(per_socket) => Path::Switch,
        _ => Path::RootComplex,
    }
}

/// Links a GPU reaches the others of an `n`-GPU group over, each at the interconnect's
/// `bandwidth_per_direction`: on a fully connected mesh one direct link per peer, the
/// `n − 1` links among those GPUs (a ring library runs as many rings as links, each hop on
/// its own link; an all-to-all sends each peer's share over that peer's link; a one-shot
/// kernel reads each peer over its link), and no more than the box's `gpu_count − 1`. Every
/// other topology gives one GPU the link's whole rate to any group: one.
pub fn mesh_links(system: &System, n: u32) -> f64 {
    match system.spec.topology {
        Topology::FullMesh => (n.min(system.spec.gpus_per_node()).max(2) - 1) as f64,
        _ => 1.0,
    }
}

/// The link's collective model: its `[collective]` table, or for a description without one,
/// the P2P bandwidths as bus bandwidths and NCCL's published latencies.
pub fn model(l: &InterconnectSpec) -> CollectiveModel {
    if let Some(c) = l.collective {
        return c;
    }
    let raw = l.bandwidth_per_direction.0;
    let frac = |b: f64| Fraction((b / raw).clamp(1e-9, 1.0));
    let (base, step) = (l.nccl_base_latency.ring, l.nccl_step_latency.ring);
    CollectiveModel {
        ll128: l.kind == LinkKind::Nvlink,
        bus_fraction: BusFraction {
            switch: frac(l.p2p_bandwidth.0),
            root_complex: None,
            cross_socket: l.cross_socket_bandwidth.map(|c| frac(c.0)),
        },
        ring_efficiency: None,
        alltoall_bus_fraction: None,
        nvls: None,
        p2p_call_latency: P2pLatency {
            ll: Seconds(base.ll.0 + step.ll.0),
            simple: Seconds(base.simple.0 + step.simple.0),
        },
        p2p_ll_threshold: Bytes(P2P_LL_THRESHOLD),
        custom_allreduce_latency: None,
        custom_allreduce_eager_latency: None,
        custom_allreduce_remote_load_latency: None,
        ll_tuner_share: None,
    }
}

/// Achievable bus bandwidth (bytes/s) on `path` for a group of `n` GPUs, after the fitted
/// link efficiency: the system's measured P2P rate on that path times NCCL's ring efficiency
/// over it, or without a `[paths]` table the link's own bus fractions; on a full mesh, over
/// the group's [`mesh_links`].
fn path_bandwidth(system: &System, m: &CollectiveModel, path: Path, n: u32, p: &CostParams) -> f64 {
    let bus = match system.spec.paths {
        Some(paths) => {
            let rc = paths.root_complex.0;
            let rate = match path {
                Path::Switch => paths.switch.map_or(rc, |b| b.0),
                Path::RootComplex => rc,
                Path::CrossSocket => paths.cross_socket.map_or(rc, |b| b.0),
            };
            rate * m.ring_efficiency.map_or(1.0, |f| f.0)
        }
        None => {
            let f = &m.bus_fraction;
            let rc = f.root_complex.unwrap_or(f.switch);
            let frac = match path {
                Path::Switch => f.switch,
                Path::RootComplex => rc,
                Path::CrossSocket => f.cross_socket.unwrap_or(rc),
            };
            system.link.bandwidth_per_direction.0 * frac.0
        }
    };
    bus * mesh_links(system, n) * p.link_efficiency
}

/// How NCCL moves a hop's data: GPU to GPU (its P2P transport, the sender writing into the
/// receiver's memory), or through a buffer in host memory (its SHM transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    P2p,
    Staged,
}

/// The transport NCCL uses for a hop on `path` in a communicator of `n` GPUs: peer to peer
/// where the GPUs allow it (`p2p`) and the path lies within NCCL's P2P level, staged
/// otherwise. NCCL's own level (2.23 and later, `src/graph/paths.cc` ncclTopoCheckP2p) is PXB,
/// peer to peer only inside a PCIe switch tree, raised to SYS for a communicator of at most
/// two GPUs on an AMD host; `NCCL_P2P_LEVEL` (the engine's `nccl_p2p_level`) replaces it.
pub fn transport(system: &System, path: Path, n: u32) -> Transport {
    let s = &system.spec;
    if !s.p2p {
        return Transport::Staged;
    }
    if matches!(s.topology, Topology::Nvswitch | Topology::FullMesh) {
        return Transport::P2p;
    }
    let level = match system.engine.nccl_p2p_level {
        NcclP2pLevel::Default if s.cpu_vendor == Some(CpuVendor::Amd) && n <= 2 => {
            NcclP2pLevel::Sys
        }
        NcclP2pLevel::Default => NcclP2pLevel::Pxb,
        l => l,
    };
    let rank = |l: NcclP2pLevel| match l {
        NcclP2pLevel::Pix => 0,
        NcclP2pLevel::Pxb | NcclP2pLevel::Default => 1,
        NcclP2pLevel::Phb => 2,
        NcclP2pLevel::Sys => 3,
    };
    let needs = match path {
        Path::Switch => NcclP2pLevel::Pix,
        Path::RootComplex => NcclP2pLevel::Phb,
        Path::CrossSocket => NcclP2pLevel::Sys,
    };
    if rank(needs) <= rank(level) {
        Transport::P2p
    } else {
        Transport::Staged
    }
}

/// What NCCL's ring over `n` GPUs reaches on its slowest hop, bytes/s of bus bandwidth: the
/// Simple protocol's rate, LL's and all-to-all's.
#[derive(Debug, Clone, Copy)]
pub struct RingRates {
    pub simple: f64,
    pub ll: f64,
    /// NCCL's all-to-all over the same communicator.
    pub alltoall: f64,
    /// The box measured this ring (`[paths.nccl]`), rather than its rate being derived.
    pub measured: bool,
}

/// Whether the system states a measured ring rate for a hop staged through host memory: then
/// NCCL's SHM transport is priced at it with NCCL's ordinary per-step latency (the box's
/// small messages show no more per step than its P2P hops); without one, a staged hop runs
/// at its path's P2P figure, and with P2P off each step pays the link's staged copy latency.
fn states_staged(system: &System) -> bool {
    system
        .spec
        .paths
        .and_then(|p| p.nccl)
        .is_some_and(|n| n.staged_socket.is_some() || n.staged_cross_socket.is_some())
}

/// [`RingRates`] of a ring over `n` GPUs on its slowest path: the box's measured rate for
/// that transport and path (`[paths.nccl]`) where it states one; else NCCL's ring efficiency
/// of the path's P2P copy rate for Simple and half that copy rate for LL (each 16-byte LL line
/// carries 8 bytes of data), and without peer access the slowest path's.
pub fn ring_rates(system: &System, m: &CollectiveModel, n: u32, p: &CostParams) -> RingRates {
    let slowest = path(system, n);
    let transport = transport(system, slowest, n);
    let measured =
        system
            .spec
            .paths
            .and_then(|x| x.nccl)
            .and_then(|r| match (transport, slowest) {
                (Transport::P2p, Path::Switch) => r.p2p_switch,
                (Transport::P2p, Path::RootComplex) => r.p2p_root_complex,
                (Transport::P2p, Path::CrossSocket) => r.p2p_cross_socket,
                (Transport::Staged, Path::CrossSocket) => r.staged_cross_socket,
                (Transport::Staged, _) => r.staged_socket,
            });
    let path = if system.spec.p2p {
        slowest
    } else {
        Path::CrossSocket
    };
    let fallback = path_bandwidth(system, m, path, n, p);
    match measured {
        Some(r) => {
            let simple = r.simple.0 * p.link_efficiency;
            let ll = r.ll.map_or_else(
                || match transport {
                    Transport::P2p => ll_rate(system, m, fallback),
                    Transport::Staged => LL_WIRE * simple,
                },
                |b| b.0 * p.link_efficiency,
            );
            RingRates {
                simple,
                ll,
                alltoall: r.alltoall.map_or(simple, |b| b.0 * p.link_efficiency),
                measured: true,
            }
        }
        None => RingRates {
            simple: fallback,
            ll: ll_rate(system, m, fallback),
            alltoall: fallback,
            measured: false,
        },
    }
}

/// LL's data rate over a path whose ring reaches `ring` bytes/s of bus bandwidth: half the
/// path's P2P copy rate (the ring's rate over NCCL's ring efficiency where the system states
/// its paths; without `[paths]` the ring's rate is the only figure for the path).
fn ll_rate(system: &System, m: &CollectiveModel, ring: f64) -> f64 {
    let copy = match system.spec.paths {
        Some(_) => ring / m.ring_efficiency.map_or(1.0, |f| f.0),
        None => ring,
    };
    LL_WIRE * copy
}

/// Bus bandwidth of NCCL's Simple ring over `n` GPUs ([`ring_rates`]).
fn ring_bandwidth(system: &System, m: &CollectiveModel, n: u32, p: &CostParams) -> f64 {
    ring_rates(system, m, n, p).simple
}

/// The P2P rate between `n` GPUs of the system, as a kernel that reads or writes peers'
/// memory directly reaches it (vLLM's custom all-reduce: IPC buffers, whatever NCCL's P2P
/// level), at NCCL's ring efficiency of the slowest path's copy rate.
fn direct_bandwidth(system: &System, m: &CollectiveModel, n: u32, p: &CostParams) -> f64 {
    path_bandwidth(system, m, path(system, n), n, p)
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

/// A collective's shape for NCCL's model: bus bytes, steps and LL's share of the bus.
struct Shape {
    bus_bytes: f64,
    steps: f64,
    ll_share: f64,
}

/// One protocol NCCL's tuner weighs: its latency, the rate the tuner believes it has, the rate
/// it reaches on the path, and its label.
#[derive(Clone, Copy)]
struct Candidate {
    latency: f64,
    /// The tuner's own latency estimate: its tables, not the fitted latency scale.
    estimated_latency: f64,
    estimated_rate: f64,
    rate: f64,
    algo: AllReduceAlgo,
}

/// At most three protocols of one algorithm, and NVLS.
const MAX_CANDIDATES: usize = 4;

/// The candidate NCCL's tuner estimates fastest for `bus_bytes`, costed at its path rate.
fn tuner_pick(candidates: &[Candidate], bus_bytes: f64) -> CollectiveCost {
    let mut best = CollectiveCost {
        latency: f64::INFINITY,
        transfer: 0.0,
        algo: AllReduceAlgo::None,
    };
    let mut best_estimate = f64::INFINITY;
    for c in candidates {
        let estimate = c.estimated_latency + bus_bytes / c.estimated_rate;
        if estimate < best_estimate {
            best_estimate = estimate;
            best = CollectiveCost {
                latency: c.latency,
                transfer: bus_bytes / c.rate,
                algo: c.algo,
            };
        }
    }
    best
}

/// NCCL's model for one collective over `n` GPUs run as `algo`: for each protocol the link
/// and engine allow, base latency + steps × hardware latency + bus bytes at the
/// protocol's rate, and NVLS where `nvls` and the system offer it. The candidate NCCL's tuner
/// estimates fastest is taken, costed at the rate its protocol reaches on the ring's path.
///
/// Where the tuner keeps a protocol past the size at which another would already run faster
/// (LL across a slow socket link), the real time drops where it finally switches. A message
/// is still never priced below a smaller one: the time is the highest the tuner's choices
/// give at any size up to this one, so that more tokens never make a step cheaper.
fn nccl_best(
    system: &System,
    algo: NcclAlgorithm,
    shape: Shape,
    nvls: bool,
    n: u32,
    p: &CostParams,
) -> CollectiveCost {
    let eng = &system.engine;
    let link = &system.link;
    let m = model(link);
    // What the ring's slowest path delivers, and what NCCL's tuner believes it delivers. The
    // tuner's figure comes out of its own topology search: where the box measured its rings,
    // their Simple rate (the Server box's 4- and 8-GPU staged rings switch from LL to Simple
    // between 512 KiB and 1 MiB, where a tuner that believed ~23 GB/s switches); else the
    // box's best path (one switch), not a slow root complex or socket link it has not
    // measured [U].
    let rates = ring_rates(system, &m, n, p);
    let bw = rates.simple;
    // Its estimate is its own: a fitted link efficiency changes what the hops deliver, not
    // where the tuner switches protocol.
    let tuner_bw = if rates.measured {
        rates.simple
    } else {
        path_bandwidth(system, &m, Path::Switch, n, p)
    } / p.link_efficiency.max(1e-9);
    let allowed = |proto| eng.nccl_protocol == NcclProtocol::Auto || eng.nccl_protocol == proto;
    let mut candidates = [Candidate {
        latency: 0.0,
        estimated_latency: 0.0,
        estimated_rate: 1.0,
        rate: 1.0,
        algo: AllReduceAlgo::None,
    }; MAX_CANDIDATES];
    let mut count = 0;
    let mut consider = |latency: f64, estimated_rate: f64, rate: f64, algo| {
        candidates[count] = Candidate {
            latency: latency * p.collective_latency_scale,
            estimated_latency: latency,
            estimated_rate,
            rate,
            algo,
        };
        count += 1;
    };
    let (base, step) = match algo {
        NcclAlgorithm::Tree => (link.nccl_base_latency.tree, link.nccl_step_latency.tree),
        _ => (link.nccl_base_latency.ring, link.nccl_step_latency.ring),
    };
    // (protocol, base latency, step latency, tuner's rate, rate on the path)
    let protocols = [
        (
            NcclProtocol::Ll,
            base.ll.0,
            step.ll.0,
            tuner_bw * m.ll_tuner_share.map_or(shape.ll_share, |f| f.0),
            rates.ll,
        ),
        (
            NcclProtocol::Ll128,
            base.ll128.0,
            step.ll128.0,
            tuner_bw * LL128,
            bw * LL128,
        ),
        (
            NcclProtocol::Simple,
            base.simple.0,
            step.simple.0,
            tuner_bw,
            bw,
        ),
    ];
    for (proto, b, s, estimated_rate, rate) in protocols {
        // LL128 only where the link enables it by default, or where the engine forces it.
        let default_off = proto == NcclProtocol::Ll128 && !m.ll128;
        if !allowed(proto) || (default_off && eng.nccl_protocol == NcclProtocol::Auto) {
            continue;
        }
        // Without P2P, on a box that states no staged rates, each step pays the link's
        // copy latency through host memory.
        let s = if system.spec.p2p || states_staged(system) {
            s
        } else {
            s.max(hop_latency(system))
        };
        let label = match algo {
            NcclAlgorithm::Tree => AllReduceAlgo::NcclTree(proto),
            _ => AllReduceAlgo::NcclRing(proto),
        };
        consider(b + shape.steps * s, estimated_rate, rate, label);
    }
    if let Some(v) = nvls_switch(system, &m, n).filter(|_| nvls) {
        let usable = eng.nccl_algorithm == NcclAlgorithm::Auto && allowed(NcclProtocol::Simple);
        if usable {
            let rate = nvls_rate(system, &v, p);
            consider(
                v.latency.0,
                rate / p.link_efficiency.max(1e-9),
                rate,
                AllReduceAlgo::NcclNvls,
            );
        }
    }
    let candidates = &candidates[..count];
    let mut cost = tuner_pick(candidates, shape.bus_bytes);
    // The tuner's choice changes only where two estimates cross; within each stretch the
    // time grows with the message, so the highest time at any smaller size is the highest
    // just below one of those crossings.
    for (i, a) in candidates.iter().enumerate() {
        for b in &candidates[i + 1..] {
            let per_byte = 1.0 / a.estimated_rate - 1.0 / b.estimated_rate;
            let crossing = (b.estimated_latency - a.estimated_latency) / per_byte;
            if crossing.is_finite() && crossing > 0.0 && crossing < shape.bus_bytes {
                let below = tuner_pick(candidates, crossing * (1.0 - 1e-9));
                if below.time() > cost.time() {
                    cost.transfer = below.time() - cost.latency;
                }
            }
        }
    }
    cost
}

/// NCCL's all-reduce of `bytes` per rank over `n` GPUs, whatever the engine would use: ring
/// (and tree when asked for), NVLS where the system has it.
pub fn nccl_allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    if system.spec.nodes_spanned(n) > 1 {
        return internode_allreduce(system, bytes, n, p);
    }
    if p.is_sol() {
        return ideal_allreduce(system, bytes, n);
    }
    // `auto` prices the ring (and NVLS); NCCL's single-node tree is a chain its tuner does
    // not prefer there, so it is priced only when asked for.
    let algo = match system.engine.nccl_algorithm {
        NcclAlgorithm::Tree => NcclAlgorithm::Tree,
        _ => NcclAlgorithm::Ring,
    };
    let steps = 2.0 * (n as f64 - 1.0);
    let shape = Shape {
        bus_bytes: steps / n as f64 * bytes,
        steps,
        ll_share: LL_ALLREDUCE,
    };
    not_below(
        nccl_best(system, algo, shape, true, n, p),
        ideal_allreduce(system, bytes, n),
    )
}

/// vLLM's custom all-reduce kernel inside a CUDA graph: one-shot reads every peer's buffer
/// (`(n−1)·S`) after one barrier; two-shot is a reduce-scatter and an all-gather
/// (`2(n−1)/n·S`) with a barrier each. Two GPUs always take one-shot.
fn custom_allreduce(
    system: &System,
    bytes: f64,
    n: u32,
    p: &CostParams,
    graphs: bool,
) -> CollectiveCost {
    let eng = &system.engine;
    let m = model(&system.link);
    // The kernel runs a fixed grid of CTAs, each thread holding one 16-byte load per peer in
    // flight: over a remote load latency that is all the rate the grid can pull, whatever
    // the link could carry (Little's law).
    let link = direct_bandwidth(system, &m, n, p);
    let bw = m.custom_allreduce_remote_load_latency.map_or(link, |l| {
        link.min(custom_allreduce_loads_in_flight(n) / l.0)
    });
    let floor = m
        .custom_allreduce_latency
        .map_or(2.0 * hop_latency(system), |l| l.0)
        * p.collective_latency_scale;
    let nf = n as f64;
    let one_shot_max = if n <= 4 {
        eng.one_shot_max_4gpu.unwrap_or(eng.one_shot_max).0
    } else {
        eng.one_shot_max.0
    };
    let kernel = if n == 2 || bytes < one_shot_max {
        CollectiveCost {
            latency: floor,
            transfer: (nf - 1.0) * bytes / bw,
            algo: AllReduceAlgo::OneShot,
        }
    } else {
        CollectiveCost {
            latency: 2.0 * floor,
            transfer: 2.0 * (nf - 1.0) / nf * bytes / bw,
            algo: AllReduceAlgo::TwoShot,
        }
    };
    match m.custom_allreduce_eager_latency.filter(|_| !graphs) {
        // Eagerly, the input is not a registered buffer: vLLM copies it into its IPC buffer
        // first (read and write `S` at the memory rate), and the GPU work hides under the
        // host-side time of the call. (An isolated call also waits for its launch when the
        // GPU work is longer; in a pass the CPU runs ahead and hides it, so it is left out.)
        Some(host) => {
            let copy = 2.0 * bytes / (system.gpu.memory_bandwidth.0 * p.memory_efficiency);
            let gpu = kernel.time() + copy;
            let time = gpu.max(host.0 * p.collective_latency_scale);
            CollectiveCost {
                latency: time - kernel.transfer - copy,
                transfer: kernel.transfer + copy,
                algo: kernel.algo,
            }
        }
        None => kernel,
    }
}

/// The world sizes vLLM's custom all-reduce runs on [V: vLLM source].
const VLLM_CUSTOM_WORLD_SIZES: [u32; 4] = [2, 4, 6, 8];

/// CTAs of vLLM's custom all-reduce at most (`block_limit`, `defaultBlockLimit` in vLLM's
/// csrc/custom_all_reduce.cuh), its threads per CTA, and the bytes one thread loads at once
/// (a packed 16-byte vector) [V: vLLM source].
const CUSTOM_AR_BLOCKS: f64 = 36.0;
const CUSTOM_AR_THREADS: f64 = 512.0;
const CUSTOM_AR_PACK: f64 = 16.0;

/// Bytes vLLM's custom all-reduce has in flight from remote peers at once over `n` GPUs: one
/// packed load per peer per thread of its full grid. (A message too small to fill the grid
/// takes one round trip, which the kernel's floor already holds.)
fn custom_allreduce_loads_in_flight(n: u32) -> f64 {
    CUSTOM_AR_BLOCKS * CUSTOM_AR_THREADS * CUSTOM_AR_PACK * (n.max(2) - 1) as f64
}

/// NVLS where the system's NVSwitch can reduce for `n` ranks (peer access on, at least the
/// link's `min_ranks`).
fn nvls_switch(system: &System, m: &CollectiveModel, n: u32) -> Option<NvlsSpec> {
    m.nvls.filter(|v| {
        system.spec.topology == Topology::Nvswitch && system.spec.p2p && n >= v.min_ranks
    })
}

/// The bus rate NVLS reaches, bytes/s, after the fitted link efficiency.
fn nvls_rate(system: &System, v: &NvlsSpec, p: &CostParams) -> f64 {
    system.link.bandwidth_per_direction.0 * v.bus_fraction.0 * p.link_efficiency
}

/// vLLM's symmetric-memory all-reduce on NVSwitch systems: a two-shot kernel whose traffic
/// runs at the NVLS bus rate where NCCL would use NVLS, at the ring's otherwise.
fn symm_mem_allreduce(
    system: &System,
    bytes: f64,
    n: u32,
    p: &CostParams,
    graphs: bool,
) -> CollectiveCost {
    let m = model(&system.link);
    let rate = match nvls_switch(system, &m, n) {
        Some(v) => nvls_rate(system, &v, p),
        None => ring_bandwidth(system, &m, n, p),
    };
    let c = custom_allreduce(system, 0.0, n.max(5), p, graphs);
    CollectiveCost {
        latency: c.latency,
        transfer: 2.0 * (n as f64 - 1.0) / n as f64 * bytes / rate,
        algo: AllReduceAlgo::SymmMem,
    }
}

/// Cost of one all-reduce of `bytes` per rank over `n` GPUs, with the implementation the
/// engine picks for that size, in a pass the engine graphs as its `cuda_graphs` says.
pub fn allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    allreduce_in(system, bytes, n, p, system.engine.cuda_graphs)
}

/// [`allreduce`] in a pass replayed from a CUDA graph (`graphs`) or launched eagerly.
pub fn allreduce_in(
    system: &System,
    bytes: f64,
    n: u32,
    p: &CostParams,
    graphs: bool,
) -> CollectiveCost {
    if n <= 1 || bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    // Across nodes only NCCL runs: vLLM's custom and symmetric-memory kernels map peers'
    // memory, which needs one node.
    if system.spec.nodes_spanned(n) > 1 {
        return nccl_allreduce(system, bytes, n, p);
    }
    if p.is_sol() {
        return ideal_allreduce(system, bytes, n);
    }
    let spec = &system.spec;
    let eng = &system.engine;
    let nvswitch = spec.topology == Topology::Nvswitch;
    // vLLM's rule: world size 2 or every pair directly connected (NVSwitch, or an xGMI mesh:
    // one hop between any two GPUs).
    let fully_connected = nvswitch || spec.topology == Topology::FullMesh;
    // Its kernel runs on 2, 4, 6 or 8 GPUs only (`CustomAllreduce._SUPPORTED_WORLD_SIZES`,
    // vllm/distributed/device_communicators/custom_all_reduce.py): a larger NVLink domain
    // (an NVL72 rack) all-reduces through NCCL.
    let custom_allowed = spec.p2p
        && match eng.allreduce {
            AllReduceImpl::Nccl => false,
            AllReduceImpl::Custom => true,
            AllReduceImpl::VllmAuto => {
                VLLM_CUSTOM_WORLD_SIZES.contains(&n) && (n == 2 || fully_connected)
            }
        };
    let symm_max = eng
        .symm_mem_max
        .filter(|_| custom_allowed && nvswitch && model(&system.link).nvls.is_some())
        .map_or(0.0, |b| b.0);
    let chosen = |bytes: f64| {
        if custom_allowed && bytes < eng.custom_allreduce_max.0 {
            custom_allreduce(system, bytes, n, p, graphs)
        } else if bytes < symm_max {
            symm_mem_allreduce(system, bytes, n, p, graphs)
        } else {
            nccl_allreduce(system, bytes, n, p)
        }
    };
    // The engine switches implementation at fixed sizes (one-shot → two-shot → symmetric
    // memory → NCCL), tuned so that the next one is no faster there. Where this model's
    // formulas disagree with the engine's tuning, a message just above a switch point would
    // come out cheaper than one just below it, and a larger batch would decode faster than a
    // smaller one. A message is never cheaper than any switch-point message below it.
    let mut c = chosen(bytes);
    if custom_allowed {
        let one_shot = [
            eng.one_shot_max,
            eng.one_shot_max_4gpu.unwrap_or(eng.one_shot_max),
        ];
        for limit in one_shot
            .map(|b| b.0)
            .into_iter()
            .chain([eng.custom_allreduce_max.0, symm_max])
        {
            // just below the switch point: the last size the cheaper implementation takes
            let below = limit * (1.0 - 1e-9);
            if below > 0.0 && below < bytes {
                c = not_below(c, chosen(below));
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
    let raw = system.link.bandwidth_per_direction.0 * mesh_links(system, n);
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

/// One hop at the raw link rate over `links` links: no collective moving `bus_bytes` per
/// rank is faster.
fn ideal_hop(system: &System, bus_bytes: f64, links: f64) -> CollectiveCost {
    CollectiveCost {
        latency: system.link.p2p_latency.0,
        transfer: bus_bytes / (system.link.bandwidth_per_direction.0 * links),
        algo: AllReduceAlgo::Ideal,
    }
}

/// NCCL point-to-point moving `bus_bytes` per rank in messages of `per_peer` bytes over hops
/// where Simple reaches `rate` and LL `ll_rate`: LL up to the per-peer threshold, Simple
/// above; `staged_hops` hops through host memory when P2P is off on a box that states no
/// staged rates; `links` the links the traffic spreads over (its speed of light).
fn p2p(
    system: &System,
    bus_bytes: f64,
    per_peer: f64,
    (rate, ll_rate): (f64, f64),
    (staged_hops, links): (f64, f64),
    p: &CostParams,
) -> CollectiveCost {
    let m = model(&system.link);
    let staged = if system.spec.p2p || states_staged(system) {
        0.0
    } else {
        staged_hops * hop_latency(system)
    };
    let threshold = m.p2p_ll_threshold.0;
    let ll_allowed = system.engine.nccl_protocol != NcclProtocol::Simple;
    let ll = per_peer <= threshold && ll_allowed;
    let (call, link_rate, proto) = if ll {
        (m.p2p_call_latency.ll.0, ll_rate, NcclProtocol::Ll)
    } else {
        (m.p2p_call_latency.simple.0, rate, NcclProtocol::Simple)
    };
    let mut c = not_below(
        CollectiveCost {
            latency: (call + staged) * p.collective_latency_scale,
            transfer: bus_bytes / link_rate,
            algo: AllReduceAlgo::NcclP2p(proto),
        },
        ideal_hop(system, bus_bytes, links),
    );
    // NCCL switches LL → Simple at a fixed per-peer size, not where Simple becomes faster:
    // a message just above it is never cheaper than the threshold message itself.
    if ll_allowed && per_peer > threshold {
        let at = bus_bytes * threshold / per_peer;
        c = not_below(
            c,
            p2p(
                system,
                at,
                threshold,
                (rate, ll_rate),
                (staged_hops, links),
                p,
            ),
        );
    }
    c
}

/// All-to-all where each rank sends `bytes` in total, spread evenly over the `n` ranks
/// (expert-parallel dispatch or combine, or nccl-tests' alltoall): `(n−1)/n · S` leaves each
/// rank, in messages of `S/n`.
pub fn all_to_all(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    if system.spec.nodes_spanned(n) > 1 {
        return internode_all_to_all(system, bytes, n, p);
    }
    let nf = n as f64;
    let bus = (nf - 1.0) / nf * bytes;
    let links = mesh_links(system, n);
    if p.is_sol() {
        return ideal_hop(system, bus, links);
    }
    let rates = alltoall_rates(system, n, p);
    p2p(system, bus, bytes / nf, rates, (nf - 1.0, links), p)
}

/// The rates (Simple, LL) at which one GPU's point-to-point traffic leaves it in an
/// all-to-all over `n` GPUs of one node: the switch's measured all-to-all share where the
/// link states one, else the ring's rates.
fn alltoall_rates(system: &System, n: u32, p: &CostParams) -> (f64, f64) {
    let m = model(&system.link);
    match m.alltoall_bus_fraction {
        Some(f) if system.spec.p2p && path(system, n) == Path::Switch => {
            let links = mesh_links(system, n);
            let r = system.link.bandwidth_per_direction.0 * links * f.0 * p.link_efficiency;
            (r, LL_WIRE * r)
        }
        _ => {
            let r = ring_rates(system, &m, n, p);
            (r.alltoall, r.ll)
        }
    }
}

/// Host round trip DeepEP's normal mode waits for in each call: the notify kernel's receive
/// counts copied to the host, which sizes the receive buffers before the data moves [V:
/// DeepEP README: the normal kernels need a CPU-GPU synchronisation and cannot be captured
/// in a CUDA graph]; 15 us is a prior, the host-sync cost the SGLang engine description uses
/// [U].
const DEEPEP_HOST_SYNC: f64 = 15e-6;

/// Probability that none of `k` distinct picks of `e` experts falls in a given group of `g`
/// of them: `C(e − g, k) / C(e, k)`.
fn group_missed(e: f64, g: f64, k: f64) -> f64 {
    let k = k.round().max(0.0) as u32;
    let mut q = 1.0;
    for i in 0..k {
        let (num, den) = (e - g - i as f64, e - i as f64);
        if num <= 0.0 || den <= 0.0 {
            return 0.0;
        }
        q *= num / den;
    }
    q
}

/// One DeepEP dispatch or combine over `x.ranks` GPUs, as its kernels move data: NVLink
/// between the GPUs of a node, each GPU's NIC (RDMA) between nodes, the two in parallel.
///
/// - Low-latency: each token-expert pair is a message; `(ppn − 1)/n` of a token's `top_k`
///   pairs stay in its node and `(n − ppn)/n` cross the network (no deduplication, the
///   design's price for no host round trip). The pairs for the node's own GPUs go over
///   NVLink, as DeepEP does where NVLink joins them (`allow_nvlink_for_low_latency_mode`);
///   its first releases sent them through the NIC as well ("pure RDMA") [U: which release an
///   engine ships is not described].
/// - Normal: a token goes once to each other rank of its node that holds one of its
///   experts, and once to each other node that does (to the GPU on the same rail), which
///   forwards it over NVLink to its ranks there; a notify round and a host synchronisation
///   come first.
///
/// The busiest rank's routing skew scales the bytes on its links. Never faster than the bytes
/// at the links' raw rates.
pub fn expert_exchange(system: &System, x: &ExpertExchange, p: &CostParams) -> CollectiveCost {
    let n = x.ranks;
    if n <= 1 || x.tokens <= 0.0 || x.token_bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    let nf = n as f64;
    let net = system
        .spec
        .nodes
        .filter(|_| system.spec.nodes_spanned(n) > 1);
    let (nodes, ppn, nic_rate, nic_raw) = match &net {
        Some(net) => spread(system, net, n, p),
        None => (1.0, nf, 0.0, 0.0),
    };
    let payload = x.tokens * x.token_bytes * x.skew.max(1.0);
    let (local, remote) = match x.mode {
        DeepEpMode::LowLatency => (
            payload * x.top_k * (ppn - 1.0) / nf,
            payload * x.top_k * (nf - ppn) / nf,
        ),
        DeepEpMode::Normal => {
            let per_rank = x.experts / nf;
            let rank_hit = 1.0 - group_missed(x.experts, per_rank, x.top_k);
            let node_hit = 1.0 - group_missed(x.experts, per_rank * ppn, x.top_k);
            let remote_ranks = (nf - ppn) * rank_hit;
            (
                payload * ((ppn - 1.0) * rank_hit + remote_ranks * (ppn - 1.0) / ppn),
                payload * (nodes - 1.0) * node_hit,
            )
        }
    };
    let local_ppn = ppn.round().max(1.0) as u32;
    let nvlink_raw = system.link.bandwidth_per_direction.0 * mesh_links(system, local_ppn);
    let nic_share_raw = nic_raw / ppn;
    let raw_time = |bytes: f64, rate: f64| if bytes > 0.0 { bytes / rate } else { 0.0 };
    let ideal = CollectiveCost {
        latency: system.link.p2p_latency.0,
        transfer: raw_time(local, nvlink_raw).max(raw_time(remote, nic_share_raw)),
        algo: AllReduceAlgo::Ideal,
    };
    if p.is_sol() {
        return ideal;
    }
    let m = model(&system.link);
    let across = if net.is_some() { 1.0 } else { 0.0 };
    let (intra_rate, _) = alltoall_rates(system, local_ppn.max(2), p);
    let transfer = raw_time(local, intra_rate).max(raw_time(remote, nic_rate / ppn));
    let (latency, algo) = match x.mode {
        DeepEpMode::LowLatency => (
            m.p2p_call_latency.ll.0 + across * NET_RING_STEP[0],
            AllReduceAlgo::DeepEpLowLatency,
        ),
        DeepEpMode::Normal => (
            // The notify round, the host's wait for its counts, then the data's call.
            m.p2p_call_latency.ll.0
                + m.p2p_call_latency.simple.0
                + across * (NET_RING_STEP[0] + NET_RING_STEP[2])
                + DEEPEP_HOST_SYNC,
            AllReduceAlgo::DeepEpNormal,
        ),
    };
    not_below(
        CollectiveCost {
            latency: latency * p.collective_latency_scale,
            transfer,
            algo,
        },
        ideal,
    )
}

/// All-gather or reduce-scatter as NCCL's ring runs them: `n − 1` steps, `bus_bytes` per
/// rank, the fastest protocol the link and engine allow; never faster than one hop at the
/// raw link rate.
fn ring_collective(system: &System, bus_bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    if n <= 1 || bus_bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    if system.spec.nodes_spanned(n) > 1 {
        return internode_ring_collective(system, bus_bytes, n, p);
    }
    let links = mesh_links(system, n);
    if p.is_sol() {
        return ideal_hop(system, bus_bytes, links);
    }
    let shape = Shape {
        bus_bytes,
        steps: n as f64 - 1.0,
        ll_share: LL_OTHER,
    };
    not_below(
        nccl_best(system, NcclAlgorithm::Ring, shape, false, n, p),
        ideal_hop(system, bus_bytes, links),
    )
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

/// Point-to-point send of `bytes` between neighbouring pipeline stages, over the slowest
/// path of one node's GPUs.
pub fn send_recv(system: &System, bytes: f64, p: &CostParams) -> CollectiveCost {
    send_recv_over(system, bytes, p, false)
}

/// [`send_recv`], or between two nodes over the sender's NIC (`across_nodes`, on a
/// multi-node system).
pub fn send_recv_over(
    system: &System,
    bytes: f64,
    p: &CostParams,
    across_nodes: bool,
) -> CollectiveCost {
    if bytes <= 0.0 {
        return CollectiveCost::ZERO;
    }
    if let Some(net) = system.spec.nodes.filter(|_| across_nodes) {
        return internode_send(system, &net, bytes, p);
    }
    if p.is_sol() {
        return ideal_hop(system, bytes, 1.0);
    }
    let m = model(&system.link);
    // On a full mesh a send reaches its one peer over their one link: a pair's rate.
    let n = match system.spec.topology {
        Topology::FullMesh => 2,
        _ => system.spec.gpus_per_node(),
    };
    let r = ring_rates(system, &m, n, p);
    p2p(system, bytes, bytes, (r.simple, r.ll), (1.0, 1.0), p)
}

// ---------------------------------------------------------------------------------------
// Across nodes.
//
// A multi-node system (`[nodes]`) joins nodes of `gpus_per_node` GPUs by their NICs. A group
// of `n` GPUs fills a node before it takes the next, so it spans `N = ⌈n / g⌉` nodes, `ppn =
// min(n, g)` GPUs in a full one and what remains in the last, and uses the NICs of its GPUs
// (rail-optimized nodes: one NIC per GPU, `nics_per_node / g` each). `B` is what the NICs of
// the group's GPUs in its last (least-equipped) node move out per second: NICs × line rate ×
// `nic_efficiency`.
//
// NCCL runs (src/graph/tuning.cc, the latency model; the rates follow from the traffic):
// - ring: one ring per NIC, each leaving a node once, so a node sends out exactly what one
//   GPU sends along the ring; bus rate = min(intra-node ring rate, B). Latency: base +
//   intra steps × the intra-node step (× 1.8 for LL once nodes > 1) + 2(N − 1) network
//   steps.
// - tree: reduce inside each node, a double binary tree across nodes, broadcast back,
//   pipelined: the slower of the intra-node part (2(ppn − 1)/ppn · S per GPU) and the
//   inter-node part (2(N − 1)/N · S per node over B). Latency: base + 2((ppn − 1) intra
//   steps + log2 N network steps).
// - NVLS tree where the node's NVSwitch reduces (NVLS): the intra-node part at NVLS's rate.
// - CollNet where the network's switches reduce (`[nodes] sharp`): the node's part as above,
//   then S per node over B, whatever N (the others send 2(N − 1)/N · S).
// Of these the fastest is taken; NCCL's tuner picks from its own estimates, which are not
// modelled across nodes [U]. A reduction across nodes holds one within a node over the same
// bytes, so it is never priced below that one.
// ---------------------------------------------------------------------------------------

/// NCCL's per-step hardware latency over the network (`hwLat`, the NET row of
/// src/graph/tuning.cc): ring and tree, each LL / LL128 / Simple, seconds.
const NET_RING_STEP: [f64; 3] = [2.7e-6, 4.0e-6, 14.0e-6];
const NET_TREE_STEP: [f64; 3] = [5.0e-6, 8.5e-6, 14.0e-6];
/// NCCL's network latency of its CollNet (SHARP) chain, Simple (`hwLat`, NET row), seconds.
const NET_COLLNET_STEP: f64 = 30.0e-6;
/// NCCL scales the intra-node LL step by 1.8 once a communicator spans nodes.
const LL_INTRA_ACROSS_NODES: f64 = 1.8;

/// How a group of `n` GPUs lies over the nodes: (nodes N, GPUs in a full node ppn, what the
/// NICs of its least-equipped node move out per second, B; their raw line rate, for the
/// bound).
fn spread(system: &System, net: &NodesSpec, n: u32, p: &CostParams) -> (f64, f64, f64, f64) {
    let spec = &system.spec;
    let g = spec.gpus_per_node();
    let spanned = spec.nodes_spanned(n);
    // The group fills its nodes in order: every node but the last holds g GPUs, the last
    // what remains; its NICs, the fewest, bind the network part.
    let ppn = n.min(g) as f64;
    let last = n.saturating_sub((spanned - 1) * g).max(1) as f64;
    let nodes = spanned as f64;
    let g = g as f64;
    let nics = (net.nics_per_node as f64 * last / g).max(1.0);
    let raw = nics * net.nic_rate.0;
    let rate = if p.is_sol() {
        raw
    } else {
        raw * net.nic_efficiency.0
    };
    (nodes, ppn, rate, raw)
}

/// The protocols NCCL may run across nodes: (index into the latency rows, protocol, the
/// factor of the path's rate it reaches).
fn internode_protocols(system: &System) -> Vec<(usize, NcclProtocol, f64)> {
    let eng = &system.engine;
    let m = model(&system.link);
    let allowed = |proto| eng.nccl_protocol == NcclProtocol::Auto || eng.nccl_protocol == proto;
    [
        (0, NcclProtocol::Ll, LL_WIRE),
        (1, NcclProtocol::Ll128, LL128),
        (2, NcclProtocol::Simple, 1.0),
    ]
    .into_iter()
    .filter(|&(_, proto, _)| {
        let default_off = proto == NcclProtocol::Ll128 && !m.ll128;
        allowed(proto) && !(default_off && eng.nccl_protocol == NcclProtocol::Auto)
    })
    .collect()
}

/// What a protocol's intra-node steps cost across nodes: (the factor on the link's step
/// latency, NCCL's 1.8 for LL; the rate it reaches on the node's ring).
fn intra_node_part(proto: NcclProtocol, factor: f64, intra: &RingRates) -> (f64, f64) {
    match proto {
        NcclProtocol::Ll => (LL_INTRA_ACROSS_NODES, intra.ll),
        _ => (1.0, intra.simple * factor),
    }
}

/// A protocol's entry (LL, LL128, Simple by index) of a latency row, seconds.
fn proto_of(l: &crate::spec::interconnect::ProtocolLatency, i: usize) -> f64 {
    [l.ll.0, l.ll128.0, l.simple.0][i]
}

/// NCCL's all-reduce over `n` GPUs spanning nodes (see the section's notes).
fn internode_allreduce(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    let Some(net) = system.spec.nodes else {
        return nccl_allreduce(system, bytes, n, p);
    };
    let (nodes, ppn, b, raw) = spread(system, &net, n, p);
    // A node sends out 2(N − 1)/N of the message at least, or once the message where the
    // switches reduce (SHARP).
    let share = if net.sharp {
        1.0
    } else {
        2.0 * (nodes - 1.0) / nodes
    };
    let ideal = internode_ideal(
        ideal_allreduce(system, bytes, ppn as u32),
        share * bytes / raw,
    );
    if p.is_sol() {
        return ideal;
    }
    let link = &system.link;
    let m = model(link);
    let intra = ring_rates(system, &m, ppn as u32, p);
    let nf = n as f64;
    let scale = p.collective_latency_scale;
    let log_nodes = nodes.log2().floor().max(1.0);
    let mut best = CollectiveCost {
        latency: f64::INFINITY,
        transfer: 0.0,
        algo: AllReduceAlgo::None,
    };
    let mut keep = |c: CollectiveCost| {
        if c.time() < best.time() {
            best = c;
        }
    };
    for (i, proto, factor) in internode_protocols(system) {
        let (ll, intra_rate) = intra_node_part(proto, factor, &intra);
        let net_rate = b * factor;
        // Ring over every GPU: 2(n − 1) steps, 2(N − 1) of them over the network.
        let (steps, net_steps) = (2.0 * (nf - 1.0), 2.0 * (nodes - 1.0));
        keep(CollectiveCost {
            latency: (proto_of(&link.nccl_base_latency.ring, i)
                + (steps - net_steps) * proto_of(&link.nccl_step_latency.ring, i) * ll
                + net_steps * NET_RING_STEP[i])
                * scale,
            transfer: steps / nf * bytes / intra_rate.min(net_rate),
            algo: AllReduceAlgo::NcclRing(proto),
        });
        // Tree: the node's part and the network's, pipelined.
        keep(CollectiveCost {
            latency: (proto_of(&link.nccl_base_latency.tree, i)
                + 2.0
                    * ((ppn - 1.0) * proto_of(&link.nccl_step_latency.tree, i) * ll
                        + log_nodes * NET_TREE_STEP[i]))
                * scale,
            transfer: (2.0 * (ppn - 1.0) / ppn * bytes / intra_rate)
                .max(2.0 * (nodes - 1.0) / nodes * bytes / net_rate),
            algo: AllReduceAlgo::NcclTree(proto),
        });
    }
    // NVLS and CollNet run the Simple protocol under NCCL's own algorithm choice.
    let eng = &system.engine;
    let simple_auto = eng.nccl_algorithm == NcclAlgorithm::Auto
        && matches!(eng.nccl_protocol, NcclProtocol::Auto | NcclProtocol::Simple);
    let node_nvls = nvls_switch(system, &m, ppn as u32).filter(|_| simple_auto);
    // NVLS inside each node, the tree across.
    if let Some(v) = node_nvls {
        keep(CollectiveCost {
            latency: (v.latency.0 + 2.0 * log_nodes * NET_TREE_STEP[2]) * scale,
            transfer: (2.0 * (ppn - 1.0) / ppn * bytes / nvls_rate(system, &v, p))
                .max(2.0 * (nodes - 1.0) / nodes * bytes / b),
            algo: AllReduceAlgo::NcclNvlsTree,
        });
    }
    // In-network reduction (SHARP switches, NCCL's CollNet): each node sends its reduced
    // share up once and receives the sum, S per node over B whatever the node count.
    if net.sharp && simple_auto {
        let within_rate = node_nvls.map_or(intra.simple, |v| nvls_rate(system, &v, p));
        keep(CollectiveCost {
            latency: (link.nccl_base_latency.tree.simple.0
                + 2.0 * (ppn - 1.0) * link.nccl_step_latency.tree.simple.0
                + NET_COLLNET_STEP)
                * scale,
            transfer: (2.0 * (ppn - 1.0) / ppn * bytes / within_rate).max(bytes / b),
            algo: AllReduceAlgo::NcclCollnet,
        });
    }
    if !best.time().is_finite() {
        return ideal;
    }
    // It holds a reduction within one node over the same bytes.
    let within = nccl_allreduce(system, bytes, ppn as u32, p);
    not_below(not_below(best, within), ideal)
}

/// The bound across nodes: the slower of the bound inside a node and the NICs' line rate
/// moving `net_transfer` seconds' worth of bytes, after one network hop.
fn internode_ideal(within: CollectiveCost, net_transfer: f64) -> CollectiveCost {
    let net = CollectiveCost {
        latency: NET_RING_STEP[0],
        transfer: net_transfer,
        algo: AllReduceAlgo::Ideal,
    };
    if net.time() > within.time() {
        net
    } else {
        CollectiveCost {
            algo: AllReduceAlgo::Ideal,
            ..within
        }
    }
}

/// All-to-all across nodes (NCCL point-to-point): each GPU sends `S/n` to every peer; the
/// share for other nodes, `(n − ppn)/n · S` per GPU, leaves through the node's NICs, the rest
/// over the node's link; the two run at once, the slower sets the time. Each call pays
/// NCCL's point-to-point latency and one network step; LL up to NCCL's per-peer threshold,
/// Simple above, and a message just above it is never cheaper than the threshold message.
fn internode_all_to_all(system: &System, bytes: f64, n: u32, p: &CostParams) -> CollectiveCost {
    let Some(net) = system.spec.nodes else {
        return all_to_all(system, bytes, n, p);
    };
    let (_, ppn, b, raw) = spread(system, &net, n, p);
    let nf = n as f64;
    let remote_per_node = ppn * (nf - ppn) / nf * bytes;
    let ideal = internode_ideal(
        ideal_hop(
            system,
            (nf - 1.0) / nf * bytes,
            gpu_links_raw(system, &net, n) / system.link.bandwidth_per_direction.0,
        ),
        remote_per_node / raw,
    );
    if p.is_sol() {
        return ideal;
    }
    let m = model(&system.link);
    let threshold = m.p2p_ll_threshold.0;
    let ll_allowed = system.engine.nccl_protocol != NcclProtocol::Simple;
    let per_peer = bytes / nf;
    let ll = per_peer <= threshold && ll_allowed;
    let (call, rate, proto, step) = if ll {
        let s = NET_RING_STEP[0];
        (m.p2p_call_latency.ll.0, LL_WIRE * b, NcclProtocol::Ll, s)
    } else {
        let s = NET_RING_STEP[2];
        (m.p2p_call_latency.simple.0, b, NcclProtocol::Simple, s)
    };
    // The node's own peers: an all-to-all over its ppn GPUs with the same message per peer.
    let within = all_to_all(system, bytes * ppn / nf, ppn as u32, p);
    let mut c = not_below(
        CollectiveCost {
            latency: ((call + step) * p.collective_latency_scale).max(within.latency),
            transfer: (remote_per_node / rate).max(within.transfer),
            algo: AllReduceAlgo::NcclP2p(proto),
        },
        ideal,
    );
    if ll_allowed && per_peer > threshold {
        c = not_below(
            c,
            internode_all_to_all(system, bytes * threshold / per_peer, n, p),
        );
    }
    // Each GPU still sends (n − 1)/n of its bytes, more than within one node: never less
    // time than the same bytes spread over one node's GPUs.
    not_below(c, all_to_all(system, bytes, ppn as u32, p))
}

/// The system a group of `n` GPUs `stride` apart sees, where it spans more nodes than a
/// packed group would: nodes of as many GPUs as the group has in each, with the NICs those
/// GPUs own (their share of the node's), so that the packed-group rules price it. `None`
/// where the group lies as a packed one does (one node, or a stride of 1).
pub fn strided_system(system: &System, n: u32, stride: u32) -> Option<System> {
    let net = system.spec.nodes?;
    let g = system.spec.gpus_per_node();
    if stride <= 1 || n <= 1 {
        return None;
    }
    let span = n.saturating_mul(stride);
    let touched = system.spec.nodes_spanned(span).min(n);
    if touched <= system.spec.nodes_spanned(n) {
        return None;
    }
    let per_node = n.div_ceil(touched).max(1);
    let mut s = system.clone();
    s.spec.gpu_count = per_node.saturating_mul(net.count);
    s.spec.nodes = Some(NodesSpec {
        nics_per_node: (net.nics_per_node.saturating_mul(per_node) / g).max(1),
        ..net
    });
    Some(s)
}

/// The raw rate at which one GPU of a group of `n` spanning nodes can move data: its link
/// into the node plus its share of the node's NICs, bytes/s.
fn gpu_links_raw(system: &System, net: &NodesSpec, n: u32) -> f64 {
    let g = system.spec.gpus_per_node() as f64;
    system.link.bandwidth_per_direction.0 * mesh_links(system, n)
        + net.nics_per_node as f64 / g * net.nic_rate.0
}

/// All-gather or reduce-scatter across nodes as NCCL's ring runs them (one ring per NIC):
/// `bus_bytes` per GPU at the slower of the node's ring and its NICs; `n − 1` steps, `N − 1`
/// of them over the network.
fn internode_ring_collective(
    system: &System,
    bus_bytes: f64,
    n: u32,
    p: &CostParams,
) -> CollectiveCost {
    let Some(net) = system.spec.nodes else {
        return ring_collective(system, bus_bytes, n, p);
    };
    let (nodes, ppn, b, raw) = spread(system, &net, n, p);
    let nf = n as f64;
    // A GPU moves bus_bytes over its link and its NIC share at most; a node's NICs carry
    // what the other nodes hold, (N − 1)/N of the n/(n − 1) · bus_bytes in all.
    let within = ideal_hop(
        system,
        bus_bytes,
        gpu_links_raw(system, &net, n) / system.link.bandwidth_per_direction.0,
    );
    let ideal = internode_ideal(
        within,
        bus_bytes * (nodes - 1.0) / nodes * nf / (nf - 1.0) / raw,
    );
    if p.is_sol() {
        return ideal;
    }
    let link = &system.link;
    let m = model(link);
    let intra = ring_rates(system, &m, ppn as u32, p);
    let net_steps = nodes - 1.0;
    let mut best = CollectiveCost {
        latency: f64::INFINITY,
        transfer: 0.0,
        algo: AllReduceAlgo::None,
    };
    for (i, proto, factor) in internode_protocols(system) {
        let (ll, intra_rate) = intra_node_part(proto, factor, &intra);
        let c = CollectiveCost {
            latency: (proto_of(&link.nccl_base_latency.ring, i)
                + (nf - 1.0 - net_steps) * proto_of(&link.nccl_step_latency.ring, i) * ll
                + net_steps * NET_RING_STEP[i])
                * p.collective_latency_scale,
            transfer: bus_bytes / intra_rate.min(b * factor),
            algo: AllReduceAlgo::NcclRing(proto),
        };
        if c.time() < best.time() {
            best = c;
        }
    }
    if !best.time().is_finite() {
        return ideal;
    }
    not_below(best, ideal)
}

/// One GPU's send to a GPU of another node: over its own share of the node's NICs, with
/// NCCL's point-to-point call latency and one network step.
fn internode_send(system: &System, net: &NodesSpec, bytes: f64, p: &CostParams) -> CollectiveCost {
    let per_gpu =
        (net.nics_per_node as f64 / system.spec.gpus_per_node() as f64).max(1.0) * net.nic_rate.0;
    let ideal = CollectiveCost {
        latency: NET_RING_STEP[0],
        transfer: bytes / per_gpu,
        algo: AllReduceAlgo::Ideal,
    };
    if p.is_sol() {
        return ideal;
    }
    let m = model(&system.link);
    not_below(
        CollectiveCost {
            latency: (m.p2p_call_latency.simple.0 + NET_RING_STEP[2]) * p.collective_latency_scale,
            transfer: bytes / (per_gpu * net.nic_efficiency.0),
            algo: AllReduceAlgo::NcclP2p(NcclProtocol::Simple),
        },
        ideal,
    )
}
