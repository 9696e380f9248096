//! One GPU of a system under a parameter set: the rates an operator's price reads, derived
//! once so that pricing an operator is a few multiplications.
//!
//! A figure the GPU description lacks is an error here, at construction, not a silent
//! fallback later: the BF16 peak must exist (every GPU the model handles has one), and a
//! low-precision format computes natively only where the GPU states a peak for it.

use crate::cost::params::CostParams;
use crate::error::{Error, Result};
use crate::spec::{FormatKind, MathDtype, PerFormat, System};

/// One GPU of `system` priced under `params`.
#[derive(Debug, Clone)]
pub struct Device<'a> {
    pub system: &'a System,
    pub params: CostParams,
    /// Attainable DRAM bandwidth, bytes/s.
    pub mem_bw: f64,
    /// Dense BF16 peak, FLOP/s (elementwise kernels are priced against it).
    pub bf16_peak: f64,
    /// Attainable attention-kernel rate, FLOP/s.
    pub attention_rate: f64,
    /// Math dtype a GEMM on weights of each format runs in.
    pub gemm_math: PerFormat<MathDtype>,
    /// Attainable GEMM rate per format it computes from, FLOP/s.
    pub gemm_rate: PerFormat<f64>,
}

impl<'a> Device<'a> {
    pub fn new(system: &'a System, params: CostParams) -> Result<Device<'a>> {
        let g = &system.gpu;
        let bf16_peak = g
            .peak(MathDtype::Bf16)
            .ok_or_else(|| {
                Error::Scenario(format!(
                    "GPU {} has no dense BF16 peak (dense_peak.bf16); the cost model needs one",
                    g.name
                ))
            })?
            .0;
        let native = PerFormat::from_fn(|f| native_math(system, f, bf16_peak));
        let gemm_math = PerFormat::from_fn(|f| native[f].0);
        let gemm_rate = PerFormat::from_fn(|f| native[f].1 * params.gemm(f));
        Ok(Device {
            system,
            params,
            mem_bw: g.memory_bandwidth.0 * params.memory_efficiency,
            bf16_peak,
            attention_rate: bf16_peak * params.attention_efficiency,
            gemm_math,
            gemm_rate,
        })
    }

    /// Fixed cost of `kernels` kernels of an operator whose kernel time is `time`: inside a
    /// CUDA graph, the GPU-side gap per kernel; launched eagerly, the same gap or, when the
    /// CPU cannot enqueue kernels as fast as the GPU finishes them, the launch time the
    /// kernels fail to hide.
    #[inline]
    pub fn overhead(&self, kernels: u32, time: f64) -> f64 {
        let p = &self.params;
        let gaps = kernels as f64 * p.kernel_gap;
        if self.system.engine.cuda_graphs {
            gaps
        } else {
            gaps.max(kernels as f64 * p.kernel_launch - time)
        }
    }
}

/// Math dtype a weight format's GEMM runs in on this GPU, and that dtype's dense peak: native
/// low precision where the tensor cores have it, BF16 after dequantization otherwise (W4A16
/// always).
fn native_math(system: &System, f: FormatKind, bf16_peak: f64) -> (MathDtype, f64) {
    let native = match f {
        FormatKind::Bf16 | FormatKind::Int4 => None,
        FormatKind::Fp8 => Some(MathDtype::Fp8),
        FormatKind::Int8 => Some(MathDtype::Int8),
        FormatKind::Nvfp4 | FormatKind::Mxfp4 => Some(MathDtype::Fp4),
    };
    native
        .and_then(|d| system.gpu.peak(d).map(|p| (d, p.0)))
        .unwrap_or((MathDtype::Bf16, bf16_peak))
}
