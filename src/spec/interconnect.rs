//! Interconnect descriptions: the links GPUs exchange collective traffic over.
//!
//! The all-reduce model needs per-direction bandwidth (raw and achievable), the per-hop
//! latency with and without peer-to-peer access, and NCCL's own latency constants for the
//! transport (from NCCL's `src/graph/tuning.cc`), so the collective cost follows the same
//! reasoning NCCL uses to choose its algorithm and protocol.

use crate::units::{Bytes, BytesPerSec, Fraction, Seconds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Link family; decides which NCCL latency table applies and whether vLLM's custom
/// all-reduce can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    Pcie,
    Nvlink,
    /// AMD Infinity Fabric (xGMI): one point-to-point link per GPU pair; the description's
    /// bandwidths are one link's.
    Xgmi,
}

impl LinkKind {
    /// How people write it.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Pcie => "PCIe",
            LinkKind::Nvlink => "NVLink",
            LinkKind::Xgmi => "xGMI (Infinity Fabric)",
        }
    }

    /// The topologies a machine with this link has, the one a swapped-in link brings first:
    /// NVLink boxes are NVSwitch ones; PCIe GPUs sit on root ports or under switches.
    pub fn topologies(self) -> &'static [super::system::Topology] {
        use super::system::Topology;
        match self {
            LinkKind::Pcie => &[Topology::RootComplex, Topology::PcieSwitch],
            LinkKind::Nvlink => &[Topology::Nvswitch],
            LinkKind::Xgmi => &[Topology::FullMesh],
        }
    }
}

/// Latency per NCCL protocol.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProtocolLatency {
    pub ll: Seconds,
    pub ll128: Seconds,
    pub simple: Seconds,
}

/// Latency per NCCL algorithm and protocol.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AlgorithmLatency {
    pub ring: ProtocolLatency,
    pub tree: ProtocolLatency,
}

/// Achievable NCCL bus bandwidth (Simple protocol, large messages) by the slowest path a
/// collective's ring crosses, as fractions of `bandwidth_per_direction`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BusFraction {
    /// GPUs under one PCIe switch, or every pair through NVSwitch.
    pub switch: Fraction,
    /// GPUs on one CPU socket, through its root complex (PCIe; defaults to `switch`).
    #[serde(default)]
    pub root_complex: Option<Fraction>,
    /// GPUs on different CPU sockets (PCIe; defaults to `root_complex`).
    #[serde(default)]
    pub cross_socket: Option<Fraction>,
}

/// NCCL's NVLink SHARP all-reduce (NVLS): the reduction happens in the NVSwitch.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NvlsSpec {
    /// Achievable all-reduce bus bandwidth as a fraction of `bandwidth_per_direction`.
    pub bus_fraction: Fraction,
    /// Time of an NVLS all-reduce with no payload (setup and pipeline fill).
    pub latency: Seconds,
    /// Fewest ranks at which NCCL's tuner is seen to pick NVLS over the ring.
    pub min_ranks: u32,
}

/// Latency of one NCCL point-to-point call (all-to-all, send/recv) by protocol.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct P2pLatency {
    pub ll: Seconds,
    pub simple: Seconds,
}

/// How collectives run over this link, beyond NCCL's published latency tables: the protocols
/// NCCL enables, the bus bandwidth rings reach by path, NVLS, point-to-point calls and vLLM's
/// custom all-reduce kernel.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CollectiveModel {
    /// NCCL enables LL128 over this link (NVLink only, by default).
    pub ll128: bool,
    pub bus_fraction: BusFraction,
    /// NCCL's ring bus bandwidth (Simple, large messages) per unit of the P2P copy rate on the
    /// same path: applied to a system's measured `[paths]` (defaults to 1).
    #[serde(default)]
    pub ring_efficiency: Option<Fraction>,
    /// Achievable all-to-all bus bandwidth, where it differs from the ring's.
    #[serde(default)]
    pub alltoall_bus_fraction: Option<Fraction>,
    #[serde(default)]
    pub nvls: Option<NvlsSpec>,
    pub p2p_call_latency: P2pLatency,
    /// Per-peer message size up to which NCCL's point-to-point uses LL.
    pub p2p_ll_threshold: Bytes,
    /// vLLM's custom all-reduce kernel time with no payload, inside a CUDA graph.
    #[serde(default)]
    pub custom_allreduce_latency: Option<Seconds>,
    /// vLLM's custom all-reduce called eagerly (no CUDA graph): the host-side time of one
    /// call, under which the GPU work hides (none: the in-graph floor).
    #[serde(default)]
    pub custom_allreduce_eager_latency: Option<Seconds>,
    /// The collective library's tuner estimate of LL's bus bandwidth as a share of Simple's,
    /// where it is the library's own constant rather than NCCL's one half (RCCL's `bwRatio`
    /// for the ring's LL protocol). Absent: NCCL's.
    #[serde(default)]
    pub ll_tuner_share: Option<Fraction>,
    /// Latency of one remote load over this link as vLLM's custom all-reduce issues them
    /// (peer memory read through P2P): with its fixed grid of CTAs, the loads in flight over
    /// this latency bound the kernel's rate (Little's law). None: no cap measured.
    #[serde(default)]
    pub custom_allreduce_remote_load_latency: Option<Seconds>,
}

/// One link type, read 1:1 from `configs/interconnects/<name>.toml`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct InterconnectSpec {
    pub name: String,
    pub full_name: String,
    pub kind: LinkKind,
    /// Raw signalling bandwidth, one direction.
    pub bandwidth_per_direction: BytesPerSec,
    /// Achievable GPU-to-GPU bandwidth, one direction, between GPUs on one socket or switch.
    pub p2p_bandwidth: BytesPerSec,
    /// Achievable GPU-to-GPU bandwidth across CPU sockets (PCIe only; defaults to
    /// `p2p_bandwidth`).
    #[serde(default)]
    pub cross_socket_bandwidth: Option<BytesPerSec>,
    /// One-hop latency with peer-to-peer access enabled.
    pub p2p_latency: Seconds,
    /// One-hop latency when P2P is disabled and traffic is staged through host memory.
    #[serde(default)]
    pub staged_latency: Option<Seconds>,
    /// NCCL's base latency per collective call.
    pub nccl_base_latency: AlgorithmLatency,
    /// NCCL's per-step hardware latency for this transport.
    pub nccl_step_latency: AlgorithmLatency,
    /// Protocols, bus bandwidth by path, NVLS and point-to-point; without it the model falls
    /// back to the P2P bandwidths above and NCCL's published latencies.
    #[serde(default)]
    pub collective: Option<CollectiveModel>,
    pub sources: BTreeMap<String, String>,
}

impl InterconnectSpec {
    /// Check what serde cannot: bandwidths of at least 1 MB/s, achievable no higher than raw,
    /// and latencies of at most 1 s (a hop is microseconds), so no collective time the model
    /// derives from them can overflow.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (field, v) in [
            ("bandwidth_per_direction", self.bandwidth_per_direction),
            ("p2p_bandwidth", self.p2p_bandwidth),
        ] {
            if !v.is_plausible() {
                return Err((
                    field.into(),
                    format!("a bandwidth {}", BytesPerSec::PLAUSIBLE_TEXT),
                ));
            }
        }
        let mut latencies = vec![
            ("p2p_latency".to_string(), self.p2p_latency),
            (
                "staged_latency".to_string(),
                self.staged_latency.unwrap_or(self.p2p_latency),
            ),
        ];
        for (table, a) in [
            ("nccl_base_latency", self.nccl_base_latency),
            ("nccl_step_latency", self.nccl_step_latency),
        ] {
            for (algo, p) in [("ring", a.ring), ("tree", a.tree)] {
                for (proto, v) in [("ll", p.ll), ("ll128", p.ll128), ("simple", p.simple)] {
                    latencies.push((format!("{table}.{algo}.{proto}"), v));
                }
            }
        }
        if let Some(c) = &self.collective {
            latencies.push((
                "collective.p2p_call_latency.ll".into(),
                c.p2p_call_latency.ll,
            ));
            latencies.push((
                "collective.p2p_call_latency.simple".into(),
                c.p2p_call_latency.simple,
            ));
            if let Some(n) = c.nvls {
                latencies.push(("collective.nvls.latency".into(), n.latency));
                if n.min_ranks < 2 {
                    return Err((
                        "collective.nvls.min_ranks".into(),
                        "at least 2 ranks".into(),
                    ));
                }
            }
            if let Some(l) = c.custom_allreduce_latency {
                latencies.push(("collective.custom_allreduce_latency".into(), l));
            }
            if let Some(l) = c.custom_allreduce_eager_latency {
                latencies.push(("collective.custom_allreduce_eager_latency".into(), l));
            }
            if let Some(l) = c.custom_allreduce_remote_load_latency {
                latencies.push(("collective.custom_allreduce_remote_load_latency".into(), l));
            }
            if c.ll_tuner_share
                .is_some_and(|f| !(f.0 >= 1e-3 && f.0 <= 1.0))
            {
                return Err((
                    "collective.ll_tuner_share".into(),
                    "a fraction between 0.001 and 1".into(),
                ));
            }
            if c.ring_efficiency
                .is_some_and(|f| !(f.0 >= 1e-3 && f.0 <= 1.0))
            {
                return Err((
                    "collective.ring_efficiency".into(),
                    "a fraction between 0.001 and 1".into(),
                ));
            }
            if c.bus_fraction.switch.0 * self.bandwidth_per_direction.0 < 1e6 {
                return Err((
                    "collective.bus_fraction.switch".into(),
                    "a bus bandwidth of at least 1 MB/s".into(),
                ));
            }
        }
        if let Some((field, _)) = latencies
            .into_iter()
            .find(|(_, v)| v.0.is_nan() || v.0 > 1.0)
        {
            return Err((field, "a latency of at most 1 s".into()));
        }
        if self.p2p_bandwidth.0 > self.bandwidth_per_direction.0 * 1.0001 {
            return Err((
                "p2p_bandwidth".into(),
                "an achievable bandwidth no higher than bandwidth_per_direction".into(),
            ));
        }
        if let Some(c) = self.cross_socket_bandwidth {
            if !c.is_plausible() {
                return Err((
                    "cross_socket_bandwidth".into(),
                    format!("a bandwidth {}", BytesPerSec::PLAUSIBLE_TEXT),
                ));
            }
        }
        Ok(())
    }
}
