//! The parameters the costs read: efficiencies and fixed costs.
//!
//! Three sets matter and stay visible side by side: speed-of-light (η = 1, no fixed costs,
//! ideal links), the default (datasheet peaks × the system file's documented efficiency
//! priors and engine fixed costs), and a calibrated set fitted to measurements. Calibration
//! changes only these numbers; the cost formulas are the same for all three.

use crate::spec::{FormatKind, PerFormat, System};
use serde::{Deserialize, Serialize};

/// Which parameter set produced a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    /// Efficiency 1, no fixed costs: the hardware bound.
    SpeedOfLight,
    /// Datasheet peaks with the system's default efficiencies and fixed costs.
    Default,
    /// Parameters fitted to measurements.
    Calibrated,
}

impl Provenance {
    pub fn name(self) -> &'static str {
        match self {
            Provenance::SpeedOfLight => "speed-of-light",
            Provenance::Default => "default",
            Provenance::Calibrated => "calibrated",
        }
    }
}

/// Efficiencies and fixed costs. Fractions are of datasheet peaks; times in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostParams {
    pub provenance: Provenance,
    /// Achieved fraction of peak DRAM bandwidth.
    pub memory_efficiency: f64,
    /// Achieved fraction of dense tensor peak per weight format (indexed by `FormatKind`).
    pub gemm_efficiency: PerFormat<f64>,
    /// Achieved fraction of BF16 peak by attention kernels.
    pub attention_efficiency: f64,
    /// Achieved fraction of the link's achievable bandwidth by collectives.
    pub link_efficiency: f64,
    /// Multiplier on the collective latency model (NCCL's α terms). 1 by default; a fit
    /// above 1 says collectives wait longer than NCCL's model (skew between ranks, sync).
    pub collective_latency_scale: f64,
    /// GPU idle time between kernels inside a CUDA graph, seconds.
    pub kernel_gap: f64,
    /// CPU launch cost per kernel when CUDA graphs are off, seconds.
    pub kernel_launch: f64,
    /// Per decode step CPU cost (scheduler, sampling, output), seconds.
    pub step_overhead: f64,
    /// Requests in flight at most, fitted by calibration when a measured curve goes flat
    /// (a client connection cap or max_num_seqs the descriptions do not know of); `None`:
    /// only the engine's, the client's and the KV cache's own limits apply.
    pub inflight_cap: Option<f64>,
    /// API-server time per streamed token (s) fitted by calibration in place of the engine's
    /// prior; `None`: the engine's.
    pub api_per_token: Option<f64>,
    /// Latency every request spends outside the engine loop before its first token reaches
    /// the client (tokenizing, the hops between API server, scheduler and detokenizer,
    /// HTTP), seconds. It delays each TTFT and holds the request's slot that much longer per
    /// cycle, but takes no engine step. No description prices it (0): calibration fits it
    /// from measured TTFTs.
    pub request_latency: f64,
}

impl CostParams {
    /// The system's defaults, `--set` overrides included.
    pub fn default_for(system: &System) -> CostParams {
        CostParams::from_efficiency(system, &system.spec.efficiency)
    }

    /// The system description's own priors, before any `--set`: what a generation's
    /// measured kernel fractions are scaled against (see [`System::described_efficiency`]).
    pub fn described_for(system: &System) -> CostParams {
        CostParams::from_efficiency(system, &system.described_efficiency)
    }

    fn from_efficiency(system: &System, e: &crate::spec::system::EfficiencySpec) -> CostParams {
        let g = &e.gemm;
        let eng = &system.engine;
        CostParams {
            provenance: Provenance::Default,
            memory_efficiency: e.memory.0,
            gemm_efficiency: PerFormat::from_fn(|f| g.get(f)),
            attention_efficiency: e.attention.0,
            link_efficiency: e.link.0,
            collective_latency_scale: 1.0,
            kernel_gap: eng.kernel_gap.0,
            kernel_launch: eng.kernel_launch.0,
            step_overhead: eng.step_overhead.0,
            inflight_cap: None,
            api_per_token: None,
            request_latency: 0.0,
        }
    }

    /// Speed of light: every efficiency 1, no fixed costs.
    pub fn speed_of_light() -> CostParams {
        CostParams {
            provenance: Provenance::SpeedOfLight,
            memory_efficiency: 1.0,
            gemm_efficiency: PerFormat::splat(1.0),
            attention_efficiency: 1.0,
            link_efficiency: 1.0,
            collective_latency_scale: 1.0,
            kernel_gap: 0.0,
            kernel_launch: 0.0,
            step_overhead: 0.0,
            inflight_cap: None,
            api_per_token: None,
            request_latency: 0.0,
        }
    }

    pub fn is_sol(&self) -> bool {
        self.provenance == Provenance::SpeedOfLight
    }

    pub fn gemm(&self, f: FormatKind) -> f64 {
        self.gemm_efficiency[f]
    }

    pub fn set_gemm(&mut self, f: FormatKind, v: f64) {
        self.gemm_efficiency[f] = v;
    }
}
