//! One GPU of a system under a parameter set: the rates an operator's price reads, derived
//! once so that pricing an operator is a few multiplications.
//!
//! A figure the GPU description lacks is an error here, at construction, not a silent
//! fallback later: the BF16 peak must exist (every GPU the model handles has one), and a
//! low-precision format computes natively only where the GPU states a peak for it.

use crate::cost::generation::{
    kernel_format_index, moe_key, AttentionBackend, DecodeAttentionKernel, GemmKernel, Generation,
    KernelConstants, MoeBackend, MoeKernel, KERNEL_FORMATS, KERNEL_FORMAT_KINDS,
};
use crate::cost::params::CostParams;
use crate::error::{Error, Result};
use crate::spec::{FormatKind, KvDtype, MathDtype, ModelSpec, PerFormat, System};

/// How the call being priced runs: in a model step, or repeated by a benchmark harness that
/// leaves in L2 what fits there (`validate` only; the measured kernel tables' harnesses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// In a model step: each layer reads its own weights and caches, which no earlier call
    /// left in L2 (every prediction).
    None,
    /// Repeated on one set of data (the attention, MoE and MLA module harnesses).
    RepeatsOneSet,
    /// Repeated while cycling through copies of the weights, one set of activations and one
    /// output (the GEMM harness; `GemmKernel::harness_weight_copies`).
    CyclesWeightCopies,
}

/// One GPU of `system` priced under `params`.
#[derive(Debug, Clone)]
pub struct Device<'a> {
    pub system: &'a System,
    pub params: CostParams,
    /// The pass replays a captured CUDA graph (the engine's, when its batch is within the
    /// capture sizes); else its kernels are launched eagerly.
    pub graphs: bool,
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
    /// Dense peak of the math dtype each format computes in, FLOP/s.
    pub gemm_peak: PerFormat<f64>,
    /// Streaming multiprocessors.
    pub sm_count: f64,
    /// The parameter set's memory efficiency and its default (the system's prior): the kernel
    /// models' attained fractions (per generation, `configs/kernels/`) hold at the default,
    /// and a calibration moves them with it (`Device::attained`), so fitted efficiencies
    /// reach every kernel.
    pub mem_eff: (f64, f64),
    /// The same for each format's GEMM efficiency.
    pub gemm_eff: PerFormat<(f64, f64)>,
    /// The system's prior attention efficiency (the MLA kernel's fractions hold at it).
    pub attention_prior: f64,
    /// The GPU generation's kernel constants (fused MoE, decode attention).
    pub kernels: &'static KernelConstants,
    /// Whether a benchmark harness repeats the call, and on what (set by `validate` for the
    /// kernel tables; predictions run `Harness::None`).
    pub harness: Harness,
    /// The generation's fused-MoE kernel per weight format, indexed by kernel_format_index.
    moe_kernels: Vec<&'static MoeKernel>,
    /// The generation's GEMM kernel per weight format, indexed the same way, with its
    /// attained memory bandwidth and compute rate under this parameter set (bytes/s, FLOP/s).
    gemm_kernels: Vec<(&'static GemmKernel, f64, f64)>,
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
        let gemm_peak = PerFormat::from_fn(|f| native[f].1);
        let prior = CostParams::described_for(system);
        let mem_eff = (params.memory_efficiency, prior.memory_efficiency);
        let gemm_eff = PerFormat::from_fn(|f| (params.gemm(f), prior.gemm(f)));
        let kernels = Generation::of(g)?.kernels();
        // Looked up once here, by format, not by string per operator.
        let mut moe_kernels: Vec<&'static MoeKernel> = Vec::with_capacity(KERNEL_FORMATS.len());
        let mut gemm_kernels = Vec::with_capacity(KERNEL_FORMATS.len());
        for (key, kind) in KERNEL_FORMATS.into_iter().zip(KERNEL_FORMAT_KINDS) {
            // A format the generation refuses has no kernel: its slot holds the BF16 one, which
            // nothing prices, as every model and GEMM in a refused format is refused before a
            // device prices it (`Parallel::validate`, `rooftop op gemm`: `Generation::refusal`).
            let key = if kernels.refused.contains_key(key) {
                "bf16"
            } else {
                key
            };
            let missing = |what: &str| {
                Error::Scenario(format!(
                    "configs/kernels/{}.toml has no {what} kernel for `{key}`",
                    kernels.generation
                ))
            };
            moe_kernels.push(moe_kernel_for(system, kernels, key, missing)?);
            let gk = gemm_kernel_for(system, kernels, key)?;
            gemm_kernels.push((
                gk,
                Device::attained(gk.memory_fraction, mem_eff) * g.memory_bandwidth.0,
                Device::attained(gk.compute_fraction, gemm_eff[kind]) * gemm_peak[kind],
            ));
        }
        let sm_count = g.sm_count.ok_or_else(|| {
            Error::Scenario(format!(
                "GPU {} has no `sm_count`; the kernel model needs it",
                g.name
            ))
        })? as f64;
        Ok(Device {
            system,
            params,
            graphs: system.engine.cuda_graphs,
            mem_bw: g.memory_bandwidth.0 * params.memory_efficiency,
            bf16_peak,
            attention_rate: bf16_peak * params.attention_efficiency,
            gemm_math,
            gemm_rate,
            gemm_peak,
            sm_count,
            mem_eff,
            gemm_eff,
            attention_prior: prior.attention_efficiency,
            kernels,
            harness: Harness::None,
            moe_kernels,
            gemm_kernels,
        })
    }

    /// The fused-MoE kernel this generation runs for weights stored as `w` (checked present
    /// at construction).
    pub fn moe_kernel(&self, w: crate::spec::WeightFormat) -> &'static MoeKernel {
        self.moe_kernels[kernel_format_index(w)]
    }

    /// The fused-MoE kernel a call naming `backend` runs for weights stored as `w`: that
    /// library's constants where the generation has them, else the engine's default kernel.
    pub fn moe_kernel_on(
        &self,
        w: crate::spec::WeightFormat,
        backend: Option<MoeBackend>,
    ) -> &'static MoeKernel {
        let default = self.moe_kernel(w);
        match backend {
            Some(b) if default.backend != Some(b) => self
                .kernels
                .moe_backends
                .get(&b)
                .and_then(|m| m.get(moe_key(w)))
                .unwrap_or(default),
            _ => default,
        }
    }

    /// The decode attention kernel a call naming `backend` runs: that library's constants
    /// where the generation has them, else the engine's default kernel.
    pub fn decode_attention_on(
        &self,
        backend: Option<AttentionBackend>,
    ) -> &'static DecodeAttentionKernel {
        let default = &self.kernels.decode_attention;
        match backend {
            Some(b) if default.backend != Some(b) => self
                .kernels
                .decode_attention_backends
                .get(&b)
                .unwrap_or(default),
            _ => default,
        }
    }

    /// A kernel's attained fraction of peak under this parameter set, from its fraction at the
    /// default (`base`) and the parameter's (value, default): proportional below the default,
    /// and rising linearly to the whole peak as the parameter reaches 1, so an efficiency of 1
    /// means every kernel at its hardware's peak whatever its default fraction.
    pub fn attained(base: f64, (value, prior): (f64, f64)) -> f64 {
        if value <= prior || prior >= 1.0 {
            base * value / prior
        } else {
            base + (1.0 - base).max(0.0) * (value - prior) / (1.0 - prior)
        }
    }

    /// The dense GEMM kernel this generation runs for weights stored as `w` (checked present
    /// at construction), with its attained bandwidth and compute rate (bytes/s, FLOP/s).
    pub fn gemm_kernel(&self, w: crate::spec::WeightFormat) -> (&'static GemmKernel, f64, f64) {
        self.gemm_kernels[kernel_format_index(w)]
    }

    /// Whether `bytes` stay in L2 across the calls of a benchmark harness that repeats the
    /// call (`harness`, validate only): never in predictions.
    pub fn warm_in_l2(&self, bytes: f64) -> bool {
        self.harness != Harness::None && self.fits_in_l2(bytes)
    }

    /// The least time a call streams `bytes` in at the speed of light (validate only where a
    /// harness runs): from DRAM at its peak in predictions; in a harness that repeats the
    /// call, what L2 can hold of them may stay there from the last repeat, so only the rest
    /// must come from DRAM, and all of them still cross L2 at its bandwidth (DRAM's where the
    /// description names none): `max((bytes − L2) / B_dram, bytes / B_l2)`. A bound, not the
    /// kernel model: a repeated call just larger than L2 was priced at DRAM for every byte,
    /// and 28 dev attention and MoE rows ran faster than that "speed of light".
    pub fn sol_stream(&self, bytes: f64) -> f64 {
        let gpu = &self.system.gpu;
        let dram = gpu.memory_bandwidth.0;
        match (self.harness, gpu.l2_cache) {
            (Harness::None, _) | (_, None) => bytes / dram,
            (_, Some(l2)) => {
                let l2_bw = gpu.l2_bandwidth().unwrap_or(dram);
                ((bytes - l2.0).max(0.0) / dram).max(bytes / l2_bw)
            }
        }
    }

    /// Whether `bytes` fit in this GPU's L2 (none when it names no L2 size).
    pub fn fits_in_l2(&self, bytes: f64) -> bool {
        self.system.gpu.l2_cache.is_some_and(|l2| bytes <= l2.0)
    }

    /// The same GPU for a pass launched eagerly (a batch beyond the engine's capture sizes).
    pub fn eager(&self) -> Device<'a> {
        Device {
            graphs: false,
            ..self.clone()
        }
    }

    /// Fixed cost of `kernels` kernels of an operator whose kernel time is `time`: inside a
    /// CUDA graph, the GPU-side gap per kernel; launched eagerly, the same gap or, when the
    /// CPU cannot enqueue kernels as fast as the GPU finishes them, the launch time the
    /// kernels fail to hide.
    #[inline]
    pub fn overhead(&self, kernels: u32, time: f64) -> f64 {
        let p = &self.params;
        let gaps = kernels as f64 * p.kernel_gap;
        if self.graphs {
            gaps
        } else {
            gaps.max(kernels as f64 * p.kernel_launch - time)
        }
    }

    /// The dense peak attention over a cache of `kv` can multiply at: the FP8 tensor rate for
    /// an FP8 cache on a GPU that has one (query quantized to FP8), BF16 otherwise.
    pub fn attention_peak(&self, kv: KvDtype) -> f64 {
        match kv {
            KvDtype::Fp8 => self
                .system
                .gpu
                .peak(MathDtype::Fp8)
                .map_or(self.bf16_peak, |p| p.0.max(self.bf16_peak)),
            _ => self.bf16_peak,
        }
    }
}

/// The fused-MoE kernel `system` runs for weight-format key `key`: the engine's own library
/// where it names one (`moe_library`), else the generation's default.
fn moe_kernel_for(
    system: &System,
    kernels: &'static KernelConstants,
    key: &str,
    missing: impl Fn(&str) -> Error,
) -> Result<&'static MoeKernel> {
    let default = kernels.moe.get(key).ok_or_else(|| missing("fused-MoE"))?;
    let Some(library) = system.engine.moe_library.get(key) else {
        return Ok(default);
    };
    let named = kernels
        .moe_backends
        .iter()
        .find(|(b, _)| b.key() == library.as_str());
    match named.and_then(|(_, m)| m.get(key)) {
        Some(k) => Ok(k),
        None if default.backend.is_some_and(|b| b.key() == library.as_str()) => Ok(default),
        None => Err(Error::Scenario(format!(
            "engine {} runs fused-MoE library `{library}` for `{key}`, but \
             configs/kernels/{}.toml has no [moe_backends.{library}.{key}] (libraries: {})",
            system.engine.name,
            kernels.generation,
            MoeBackend::ALL.map(MoeBackend::key).join(", ")
        ))),
    }
}

/// The dense GEMM kernel `system` runs for weight-format key `key`: the engine's own family
/// where it names one, else the generation's measured one.
fn gemm_kernel_for(
    system: &System,
    kernels: &'static KernelConstants,
    key: &str,
) -> Result<&'static GemmKernel> {
    match system.engine.gemm_family.get(key) {
        Some(family) => kernels
            .gemm_families
            .get(family)
            .and_then(|f| f.get(key))
            .ok_or_else(|| {
                Error::Scenario(format!(
                    "engine {} runs GEMM family `{family}` for `{key}`, but \
                     configs/kernels/{}.toml has no [gemm_families.{family}.{key}]",
                    system.engine.name, kernels.generation
                ))
            }),
        None => kernels.gemm.get(key).ok_or_else(|| {
            Error::Scenario(format!(
                "configs/kernels/{}.toml has no GEMM kernel for `{key}`",
                kernels.generation
            ))
        }),
    }
}

/// The tensor-core dtype a weight format computes in natively, if it is not BF16.
fn native_dtype(f: FormatKind) -> Option<MathDtype> {
    match f {
        FormatKind::Bf16 | FormatKind::Int4 => None,
        FormatKind::Fp8 => Some(MathDtype::Fp8),
        FormatKind::Int8 => Some(MathDtype::Int8),
        FormatKind::Nvfp4 | FormatKind::Mxfp4 => Some(MathDtype::Fp4),
    }
}

/// Refuse weights the GPU cannot run: a format its generation's kernel file refuses outright
/// (`[refused]`: no engine kernel on that generation), and weights whose GEMM needs a
/// tensor-core dtype the GPU lacks. A format without its
/// native dtype runs only where the generation's kernel for it is weight-only (dequantized to
/// BF16 in registers: Marlin FP8 / FP4 on Ampere, Marlin FP4 on Ada and Hopper), and is then
/// priced at the BF16 peak; a kernel that quantizes the activations to the format (W8A8,
/// W4A4) has no such path, and pricing it at any peak would invent a rate the GPU does not
/// have. The error names the format, the GPU, the missing dtype and the kernel.
pub fn check_formats_run(model: &ModelSpec, system: &System) -> Result<()> {
    let gpu = &system.gpu;
    let formats = model.weight_formats();
    // First what the generation's kernel file refuses outright (`[refused]`).
    if let Some(why) = formats.iter().find_map(|w| Generation::refusal(gpu, *w)) {
        return Err(Error::Scenario(format!(
            "{} cannot run on {}: {why}",
            model.name, system.spec.name
        )));
    }
    let kernels = Generation::of(gpu)?.kernels();
    for w in formats {
        let Some(d) = native_dtype(w.kind).filter(|d| gpu.peak(*d).is_none()) else {
            continue;
        };
        let key = moe_key(w);
        let gk = gemm_kernel_for(system, kernels, key)?;
        if gk.quantize_activations {
            return Err(Error::Scenario(format!(
                "model {}: weights stored as `{key}` need {} tensor cores, which GPU {} \
                 lacks (no dense_peak.{} in its description); the GEMM configs/kernels/{}.toml \
                 runs for `{key}` ({}) quantizes the activations to {}, and this generation \
                 has no weight-only path for the format",
                model.name,
                d.name().to_uppercase(),
                gpu.name,
                d.name(),
                kernels.generation,
                gk.kernel,
                d.name().to_uppercase(),
            )));
        }
    }
    Ok(())
}

/// Math dtype a weight format's GEMM runs in on this GPU, and that dtype's dense peak: native
/// low precision where the tensor cores have it, BF16 after dequantization otherwise (W4A16
/// always).
fn native_math(system: &System, f: FormatKind, bf16_peak: f64) -> (MathDtype, f64) {
    native_dtype(f)
        .and_then(|d| system.gpu.peak(d).map(|p| (d, p.0)))
        .unwrap_or((MathDtype::Bf16, bf16_peak))
}
