//! Power while serving: what a priced step draws from the wall, per GPU.
//!
//! Why a module of its own: watts are read off the same priced operators as time (the bytes
//! each moves through DRAM, the FLOPs each runs on the tensor cores), never estimated apart
//! from them, and one place holds the model, its source and its priors.
//!
//! The model is the utilisation-based one of the measured GPU power studies: board power is
//! an idle floor plus, per unit, its utilisation times its dynamic range,
//!
//! ```text
//! P = P_idle + (P_board − P_idle) · (s_mem · U_dram + (1 − s_mem) · U_tensor · r^k)
//! ```
//!
//! clamped to [P_idle, P_limit]. Hong & Kim, "An integrated GPU power and performance model"
//! (ISCA 2010) write runtime power as idle power plus Σ (access rate of a unit × its maximum
//! power); the partition-level A100 models of Vamja et al., "On the partitioning of GPU power
//! among multi-instances" (arXiv 2501.17752, 2025) build on the same utilisation metrics
//! (DRAM and SM/tensor activity). Here the units are the two a roofline prices: `U_dram`,
//! the time-weighted share of peak DRAM bandwidth the step uses (bytes moved / (peak
//! bandwidth × wall time)), and `U_tensor`, the time-weighted share of the dense tensor peak
//! (Σ FLOPs / peak of their dtype, over the wall time). Communication and the fixed CPU,
//! launch and gap time add wall time and no activity: the GPU sits near its floor through
//! them.
//!
//! The split of the dynamic range, `s_mem` = [`MEMORY_SHARE`], is a prior: Ma et al., "The
//! illusion of power capping in LLM decode" (arXiv 2605.11999, 2026) measure memory-bound
//! decode on H200 at 137-300 W of its 700 W while HBM bandwidth saturates; with the H200's
//! 80 W idle, (300 − 80) / (700 − 80) ≈ 0.36 of the dynamic range goes with a saturated DRAM
//! interface (and the SM load/store work that feeds it), rounded to 0.4 [U prior, one study
//! on one GPU]. Under a power limit below the board power the clock falls by `r`
//! ([`GpuSpec::clock_ratio`]) and the tensor part with it as `r^k`; memory is unchanged.

use crate::cost::{Category, OpCost, StepCost};
use crate::spec::GpuSpec;
use serde::Serialize;

/// Share of a GPU's dynamic power range that goes with full DRAM bandwidth (the rest with a
/// full tensor peak) [U prior; derivation in the module doc].
pub const MEMORY_SHARE: f64 = 0.4;

/// What a pass asks of one GPU: bytes through DRAM and seconds of tensor peak.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Work {
    /// Bytes moved to or from DRAM (collectives excluded: their bytes cross the link).
    pub dram_bytes: f64,
    /// Σ FLOPs / dense peak of their math dtype: the seconds the tensor cores would be busy
    /// at their peak.
    pub tensor_seconds: f64,
}

impl Work {
    /// The work of a priced pass on its busiest GPU.
    pub fn of(step: &StepCost, gpu: &GpuSpec) -> Work {
        let mut w = Work::default();
        for (o, n) in step.ops_with_counts() {
            w.add(&o, n as f64, gpu);
        }
        w
    }

    /// Add the work of `n` runs of the priced operator `o` (collectives and pipeline
    /// transfers add none: their bytes cross the link).
    pub fn add(&mut self, o: &OpCost, n: f64, gpu: &GpuSpec) {
        if matches!(
            o.category,
            Category::Allreduce | Category::Alltoall | Category::Pipeline
        ) {
            return;
        }
        self.dram_bytes += o.bytes * n;
        if let Some(p) = o.math.and_then(|d| gpu.peak(d)) {
            self.tensor_seconds += o.flops * n / p.0;
        }
    }

    /// `self − other`, never below zero (the extra work a prompt adds to a decode step).
    pub fn minus(self, other: Work) -> Work {
        Work {
            dram_bytes: (self.dram_bytes - other.dram_bytes).max(0.0),
            tensor_seconds: (self.tensor_seconds - other.tensor_seconds).max(0.0),
        }
    }

    /// `self · f`.
    pub fn scaled(self, f: f64) -> Work {
        Work {
            dram_bytes: self.dram_bytes * f,
            tensor_seconds: self.tensor_seconds * f,
        }
    }

    /// `self + other`.
    pub fn plus(self, other: Work) -> Work {
        Work {
            dram_bytes: self.dram_bytes + other.dram_bytes,
            tensor_seconds: self.tensor_seconds + other.tensor_seconds,
        }
    }
}

/// Time-weighted utilisation of one GPU over a wall-clock span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Utilisation {
    /// Share of peak DRAM bandwidth, 0..1.
    pub dram: f64,
    /// Share of the dense tensor peak, 0..1.
    pub tensor: f64,
}

impl Utilisation {
    /// `work` spread over `wall` seconds on `gpu`; zero for a span of no length.
    pub fn of(work: Work, wall: f64, gpu: &GpuSpec) -> Utilisation {
        if !(wall > 0.0 && wall.is_finite()) {
            return Utilisation {
                dram: 0.0,
                tensor: 0.0,
            };
        }
        let share = |x: f64| (x / wall).clamp(0.0, 1.0);
        Utilisation {
            dram: share(work.dram_bytes / gpu.memory_bandwidth.0),
            tensor: share(work.tensor_seconds),
        }
    }
}

/// One GPU's power model: floor, rating, limit and clock under it, watts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerModel {
    pub idle: f64,
    pub board: f64,
    pub limit: f64,
    /// Sustained clock under the limit over the rated one ([`GpuSpec::clock_ratio`]).
    pub clock_ratio: f64,
    /// `clock_ratio^k` ([`GpuSpec::POWER_CLOCK_EXPONENT`]): the tensor part's scale, worked
    /// out once (`explore` reads watts at millions of points).
    tensor_scale: f64,
}

impl PowerModel {
    /// The model of `gpu`; `None` where its description has no board power.
    pub fn of(gpu: &GpuSpec) -> Option<PowerModel> {
        let board = gpu.board_power?.0;
        let idle = gpu.idle().map_or(0.0, |i| i.0).min(board);
        Some(PowerModel {
            idle,
            board,
            limit: gpu.limit().map_or(board, |l| l.0),
            clock_ratio: gpu.clock_ratio(),
            tensor_scale: gpu.clock_ratio().powf(GpuSpec::POWER_CLOCK_EXPONENT),
        })
    }

    /// Watts drawn at utilisation `u`, in [idle, limit].
    pub fn watts(&self, u: Utilisation) -> f64 {
        let range = (self.board - self.idle).max(0.0);
        let tensor = u.tensor * self.tensor_scale;
        let p = self.idle + range * (MEMORY_SHARE * u.dram + (1.0 - MEMORY_SHARE) * tensor);
        p.clamp(self.idle, self.limit.max(self.idle))
    }

    /// Watts while `work` runs over `wall` seconds on `gpu`.
    pub fn watts_for(&self, work: Work, wall: f64, gpu: &GpuSpec) -> f64 {
        self.watts(Utilisation::of(work, wall, gpu))
    }
}

/// Joules per token: `watts` on each of `gpus` GPUs over the time one token takes at
/// `throughput` tokens/s; `None` without throughput.
pub fn joules_per_token(watts: f64, gpus: u32, throughput: f64) -> Option<f64> {
    (throughput > 0.0 && throughput.is_finite()).then(|| watts * gpus as f64 / throughput)
}
