//! System descriptions: GPUs, how many, how they are joined, and the engine they serve with.
//!
//! The same GPUs behave very differently under different engines and topologies (CUDA graphs
//! on or off, NCCL vs a custom all-reduce, fused vs separate dequantization): a system names
//! its default engine (`configs/engines/`, see `spec::engine`), and carries the default
//! efficiencies the prediction uses. Every number carries its source in the file's
//! `[sources]` table.

pub use crate::spec::engine::{EngineRef, EngineSpec};
use crate::spec::model::FormatKind;
use crate::units::{BytesPerSec, Fraction, Period, Usd, UsdPerHour, UsdPerKwh};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the GPUs reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Every GPU directly on a CPU root port; traffic between sockets crosses the CPU link.
    RootComplex,
    /// GPUs behind PCIe switches; peer traffic stays in the switch.
    PcieSwitch,
    /// All-to-all NVLink through NVSwitch: every pair at full link bandwidth.
    Nvswitch,
    /// A fully connected mesh of point-to-point links (AMD Infinity Fabric / xGMI in an
    /// 8-GPU OAM box): each GPU pair has one direct link of the interconnect's
    /// `bandwidth_per_direction`, so a GPU reaches `n − 1` peers of an `n`-GPU group over
    /// `n − 1` links and a single peer over one.
    FullMesh,
}

impl Topology {
    /// As the system files write it.
    pub fn name(self) -> &'static str {
        match self {
            Topology::RootComplex => "root-complex",
            Topology::PcieSwitch => "pcie-switch",
            Topology::Nvswitch => "nvswitch",
            Topology::FullMesh => "full-mesh",
        }
    }
}

/// Which all-reduce implementation the engine uses for tensor-parallel reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllReduceImpl {
    /// NCCL ring/tree for every size.
    Nccl,
    /// vLLM's rule: its custom one-shot/two-shot kernel when the world size is 2 or all GPUs
    /// are NVLink-connected and the message is under the size limit, NCCL otherwise.
    VllmAuto,
    /// A custom one-shot/two-shot kernel for every size under the limit (e.g. a PCIe
    /// one-shot kernel from a community fork).
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NcclAlgorithm {
    Ring,
    Tree,
    /// The faster of the two for each message, as NCCL's tuner picks.
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NcclProtocol {
    Ll,
    Ll128,
    Simple,
    /// The fastest for each message, as NCCL's tuner picks.
    Auto,
}

/// The host CPUs' maker, where NCCL's defaults depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuVendor {
    Amd,
    Intel,
    Arm,
}

/// The farthest PCIe path over which NCCL lets two GPUs exchange data peer to peer; past it
/// a hop is staged through host memory (NCCL's SHM transport). `nvidia-smi topo -m` names
/// each pair's path with the same words (PIX, PXB, PHB or NODE, SYS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NcclP2pLevel {
    /// NCCL's own choice (2.23 and later): PXB, i.e. peer to peer only inside a PCIe switch
    /// tree, except between the two GPUs of a 2-GPU communicator on an AMD host (SYS).
    #[default]
    Default,
    /// At most one PCIe switch.
    Pix,
    /// Through PCIe switches, not a CPU's host bridge.
    Pxb,
    /// Through a CPU's root complex (one NUMA node).
    Phb,
    /// Across CPU sockets too.
    Sys,
}

/// NCCL's ring bus bandwidth on one kind of hop, as nccl-tests measured it on the box (the
/// slope between its large messages for Simple, between 64 and 512 KiB for LL).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RingRate {
    pub simple: BytesPerSec,
    /// LL's rate; absent, the default rule for the hop's transport.
    #[serde(default)]
    pub ll: Option<BytesPerSec>,
    /// NCCL's all-to-all (its point-to-point transport, every pair at once) over a
    /// communicator whose slowest hop this is, as bus bandwidth; absent, `simple`.
    #[serde(default)]
    pub alltoall: Option<BytesPerSec>,
}

/// NCCL's measured ring rates on a box by transport and path (`[paths.nccl]`): peer to peer
/// under one switch, through one root complex, across sockets; staged through host memory
/// (NCCL's SHM transport) within one socket or across sockets. A hop without a figure here
/// runs at NCCL's ring efficiency of its path's P2P copy rate.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct NcclRings {
    #[serde(default)]
    pub p2p_switch: Option<RingRate>,
    #[serde(default)]
    pub p2p_root_complex: Option<RingRate>,
    #[serde(default)]
    pub p2p_cross_socket: Option<RingRate>,
    #[serde(default)]
    pub staged_socket: Option<RingRate>,
    #[serde(default)]
    pub staged_cross_socket: Option<RingRate>,
}

impl NcclRings {
    /// The figures given, with their field names.
    fn fields(&self) -> Vec<(String, BytesPerSec)> {
        let hops = [
            ("p2p_switch", self.p2p_switch),
            ("p2p_root_complex", self.p2p_root_complex),
            ("p2p_cross_socket", self.p2p_cross_socket),
            ("staged_socket", self.staged_socket),
            ("staged_cross_socket", self.staged_cross_socket),
        ];
        let mut out = Vec::new();
        for (hop, r) in hops {
            let Some(r) = r else { continue };
            for (what, b) in [
                ("simple", Some(r.simple)),
                ("ll", r.ll),
                ("alltoall", r.alltoall),
            ] {
                if let Some(b) = b {
                    out.push((format!("paths.nccl.{hop}.{what}"), b));
                }
            }
        }
        out
    }

    /// The same rates `ratio` times as fast.
    fn scaled(self, ratio: f64) -> NcclRings {
        let s = |r: Option<RingRate>| {
            r.map(|r| RingRate {
                simple: BytesPerSec(r.simple.0 * ratio),
                ll: r.ll.map(|b| BytesPerSec(b.0 * ratio)),
                alltoall: r.alltoall.map(|b| BytesPerSec(b.0 * ratio)),
            })
        };
        NcclRings {
            p2p_switch: s(self.p2p_switch),
            p2p_root_complex: s(self.p2p_root_complex),
            p2p_cross_socket: s(self.p2p_cross_socket),
            staged_socket: s(self.staged_socket),
            staged_cross_socket: s(self.staged_cross_socket),
        }
    }
}

/// Compute efficiency per weight format's GEMM path.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GemmEfficiency {
    pub bf16: Fraction,
    pub fp8: Fraction,
    pub int8: Fraction,
    pub int4: Fraction,
    pub nvfp4: Fraction,
    pub mxfp4: Fraction,
}

impl GemmEfficiency {
    pub fn get(&self, f: FormatKind) -> f64 {
        match f {
            FormatKind::Bf16 => self.bf16.0,
            FormatKind::Fp8 => self.fp8.0,
            FormatKind::Int8 => self.int8.0,
            FormatKind::Int4 => self.int4.0,
            FormatKind::Nvfp4 => self.nvfp4.0,
            FormatKind::Mxfp4 => self.mxfp4.0,
        }
    }
}

/// Default efficiencies: fractions of datasheet peaks the engine's kernels reach.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EfficiencySpec {
    /// Achieved fraction of peak DRAM bandwidth by memory-bound kernels.
    pub memory: Fraction,
    /// Achieved fraction of dense tensor peak by GEMMs, per weight format.
    pub gemm: GemmEfficiency,
    /// Achieved fraction of dense BF16 peak by attention kernels when compute-bound.
    pub attention: Fraction,
    /// Achieved fraction of the link's achievable P2P bandwidth by collectives.
    pub link: Fraction,
}

/// Achievable GPU-to-GPU copy bandwidth, one direction, by the slowest path a transfer
/// crosses on this platform. How fast peers reach each other is a property of the box (its
/// switches, root complexes, socket link, BIOS), not a fixed fraction of the link: two boxes
/// with the same PCIe generation differ by more than an order of magnitude across sockets.
/// Collectives reach the link's `[collective] ring_efficiency` of these rates.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PathBandwidth {
    /// GPUs under one PCIe switch (`pcie-switch` topology; defaults to `root_complex`).
    #[serde(default)]
    pub switch: Option<BytesPerSec>,
    /// GPUs on one CPU socket, through its root complex.
    pub root_complex: BytesPerSec,
    /// GPUs on different CPU sockets, or any pair when P2P is off and copies are staged
    /// through host memory (defaults to `root_complex`).
    #[serde(default)]
    pub cross_socket: Option<BytesPerSec>,
    /// NCCL's ring rates measured on this box by transport and path (`[paths.nccl]`);
    /// absent: every hop runs at NCCL's ring efficiency of its path's P2P figure above.
    #[serde(default)]
    pub nccl: Option<NcclRings>,
}

impl PathBandwidth {
    /// The paths given, with their field names.
    pub fn fields(&self) -> impl Iterator<Item = (String, BytesPerSec)> + '_ {
        [
            ("paths.switch", self.switch),
            ("paths.root_complex", Some(self.root_complex)),
            ("paths.cross_socket", self.cross_socket),
        ]
        .into_iter()
        .filter_map(|(f, b)| b.map(|b| (f.to_string(), b)))
        .chain(self.nccl.iter().flat_map(|n| n.fields()))
    }

    /// The same platform on a link `ratio` times as fast: every path keeps its share.
    pub fn scaled(self, ratio: f64) -> PathBandwidth {
        let s = |b: BytesPerSec| BytesPerSec(b.0 * ratio);
        PathBandwidth {
            switch: self.switch.map(s),
            root_complex: s(self.root_complex),
            cross_socket: self.cross_socket.map(s),
            nccl: self.nccl.map(|n| n.scaled(ratio)),
        }
    }
}

/// One system, read 1:1 from `configs/systems/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    pub name: String,
    pub description: String,
    /// GPU name (a built-in or a path).
    pub gpu: String,
    pub gpu_count: u32,
    /// Interconnect name (a built-in or a path).
    pub interconnect: String,
    pub topology: Topology,
    /// CPU sockets the GPUs are spread over (PCIe root-complex systems).
    #[serde(default = "one")]
    pub sockets: u32,
    /// GPUs behind one PCIe switch (`pcie-switch` topology; defaults to all of a socket's).
    #[serde(default)]
    pub gpus_per_switch: Option<u32>,
    /// Peer-to-peer access between GPUs enabled.
    pub p2p: bool,
    /// The host CPUs' maker (NCCL's default P2P level depends on it); absent: not known,
    /// and NCCL's rule for other hosts applies.
    #[serde(default)]
    pub cpu_vendor: Option<CpuVendor>,
    /// Achievable P2P bandwidth by path on this platform (without it, the interconnect's
    /// `[collective] bus_fraction` of the raw link).
    #[serde(default)]
    pub paths: Option<PathBandwidth>,
    /// The old bare-number price key: refused by `validate` with the new one's name (a
    /// number whose unit the reader must guess is what the descriptions never hold).
    #[serde(default, skip_serializing)]
    pub price_per_gpu_hour_usd: Option<f64>,
    /// Rent per GPU-hour (`"2.50 USD/h"`), power included; exclusive with `capital_per_gpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_gpu_hour: Option<UsdPerHour>,
    /// Purchase price per GPU (`"8500 USD"`), written off over `amortisation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capital_per_gpu: Option<Usd>,
    /// Period the capital is written off over (`"3 years"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amortisation: Option<Period>,
    /// Price of the electricity an owned GPU draws (`"0.12 USD/kWh"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub electricity: Option<UsdPerKwh>,
    /// Several nodes joined by NICs (`[nodes]`): `gpu_count` GPUs in `nodes.count` nodes of
    /// equal size, each node's GPUs joined by `interconnect` and `topology`. Absent: one box,
    /// or one NVLink domain however large (GB200 NVL72).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<NodesSpec>,
    /// The engine the system serves with by default: a built-in or path under
    /// `configs/engines/` (or, in older files, the resolved engine table inline).
    pub engine: EngineRef,
    pub efficiency: EfficiencySpec,
    pub sources: BTreeMap<String, String>,
}

fn one() -> u32 {
    1
}

/// The network between the nodes of a multi-node system: each node's NICs on the compute
/// fabric, as NCCL and the expert-parallel libraries use them (GPUDirect RDMA, one NIC per
/// GPU in a rail-optimized node).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodesSpec {
    /// Nodes in the system; `gpu_count / count` GPUs each.
    pub count: u32,
    /// Compute-fabric NICs per node.
    pub nics_per_node: u32,
    /// Line rate of one NIC, per direction (`"400 Gb/s"`).
    pub nic_rate: BytesPerSec,
    /// InfiniBand or RoCE (Ethernet): reported, priced alike (NCCL's network latencies are
    /// one table for every network transport).
    pub fabric: Fabric,
    /// Goodput of NCCL's large transfers over the line rate.
    pub nic_efficiency: Fraction,
    /// The fabric's switches reduce in the network (InfiniBand SHARP), and NCCL runs its
    /// CollNet algorithm over them (the SHARP plugin installed). Default false.
    #[serde(default)]
    pub sharp: bool,
}

/// The compute fabric between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fabric {
    Infiniband,
    Roce,
}

impl Fabric {
    pub fn name(self) -> &'static str {
        match self {
            Fabric::Infiniband => "InfiniBand",
            Fabric::Roce => "RoCE",
        }
    }
}

impl SystemSpec {
    /// GPUs in one node: the whole system without `[nodes]`.
    pub fn gpus_per_node(&self) -> u32 {
        match self.nodes {
            Some(n) if n.count > 0 => (self.gpu_count / n.count).max(1),
            _ => self.gpu_count.max(1),
        }
    }

    /// Nodes in the system (1 without `[nodes]`).
    pub fn node_count(&self) -> u32 {
        self.nodes.map_or(1, |n| n.count.max(1))
    }

    /// Nodes a group of `n` GPUs spans, packed into as few nodes as it fits (a TP, EP or
    /// pipeline-stage group fills a node before it takes the next).
    pub fn nodes_spanned(&self, n: u32) -> u32 {
        match self.nodes {
            Some(_) => n.div_ceil(self.gpus_per_node()).max(1),
            None => 1,
        }
    }

    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.gpu_count == 0 {
            return Err(("gpu_count".into(), "at least 1 GPU".into()));
        }
        if let Some(n) = &self.nodes {
            if n.count < 2 {
                return Err((
                    "nodes.count".into(),
                    "at least 2 nodes (a single box needs no [nodes] table)".into(),
                ));
            }
            if !self.gpu_count.is_multiple_of(n.count) {
                return Err((
                    "nodes.count".into(),
                    format!(
                        "a count that divides gpu_count ({}) into equal nodes",
                        self.gpu_count
                    ),
                ));
            }
            if n.nics_per_node == 0 {
                return Err(("nodes.nics_per_node".into(), "at least 1 NIC".into()));
            }
            if !n.nic_rate.is_plausible() {
                return Err((
                    "nodes.nic_rate".into(),
                    format!(
                        "a rate {} such as \"400 Gb/s\"",
                        BytesPerSec::PLAUSIBLE_TEXT
                    ),
                ));
            }
            if !(n.nic_efficiency.0 >= 1e-3 && n.nic_efficiency.0 <= 1.0) {
                return Err((
                    "nodes.nic_efficiency".into(),
                    "a fraction between 0.001 and 1".into(),
                ));
            }
        }
        if self.sockets == 0 {
            return Err(("sockets".into(), "at least 1 socket".into()));
        }
        if self.gpus_per_switch == Some(0) {
            return Err(("gpus_per_switch".into(), "at least 1 GPU".into()));
        }
        if let Some(p) = &self.paths {
            if let Some((field, _)) = p.fields().find(|(_, b)| !b.is_plausible()) {
                return Err((
                    field,
                    format!("a bandwidth {}", BytesPerSec::PLAUSIBLE_TEXT),
                ));
            }
        }
        if let EngineRef::Inline(e) = &self.engine {
            e.validate()?;
        }
        // Efficiencies divide peaks: one so small it is zero in all but name would turn
        // times infinite. No kernel reaches less than 0.1 % of its hardware's peak.
        let f = &self.efficiency;
        let g = &f.gemm;
        for (field, v) in [
            ("efficiency.memory", f.memory),
            ("efficiency.attention", f.attention),
            ("efficiency.link", f.link),
            ("efficiency.gemm.bf16", g.bf16),
            ("efficiency.gemm.fp8", g.fp8),
            ("efficiency.gemm.int8", g.int8),
            ("efficiency.gemm.int4", g.int4),
            ("efficiency.gemm.nvfp4", g.nvfp4),
            ("efficiency.gemm.mxfp4", g.mxfp4),
        ] {
            if !(v.0 >= 1e-3 && v.0 <= 1.0) {
                return Err((field.into(), "a fraction between 0.001 and 1".into()));
            }
        }
        if let Some(p) = self.price_per_gpu_hour_usd {
            return Err((
                "price_per_gpu_hour_usd".into(),
                format!(
                    "no bare number: the key is now price_per_gpu_hour = \"{p} USD/h\" (rent), \
                     or capital_per_gpu = \"... USD\" with amortisation = \"3 years\" and \
                     electricity = \"0.12 USD/kWh\" (owned)"
                ),
            ));
        }
        crate::economics::Pricing::of(self)?;
        Ok(())
    }
}
