//! Kernel constants per GPU architecture generation: what a dense GEMM, a fused-MoE kernel or
//! a decode attention kernel attains, and its minimum time.
//!
//! These are not per-GPU numbers. A kernel family (FlashAttention 3 on Hopper, FlashInfer's
//! TRT-LLM decode kernels on Blackwell SM100, …) behaves alike on every GPU of its
//! generation, so one file per generation (`configs/kernels/<generation>.toml`, embedded)
//! holds its achievable fractions, floors and tile sizes, each with its source. A GPU finds
//! its generation from the `SMnn` compute capability in its description's `architecture`.
//! Each file was fitted to its generation's measured tables (Ada, Hopper and SM100 to
//! `shared/measured/dev`, SM120 to `shared/measured/dev-sm120`); a kernel or format no table
//! measures is a prior, marked in its `kernel` and sources. Ampere (SM80) has no measured
//! table at all: every constant of `configs/kernels/ampere.toml` is a prior, copied from the
//! measured generation that runs the same kernel on the same kind of SM (Ada's FlashAttention 2,
//! Triton and Marlin fits; both generations issue `mma.sync`, neither has TMA or `wgmma`) and
//! said so in its sources. `rooftop --kernels FILE` replaces one generation's file for a run.
//!
//! SM103 (Blackwell Ultra: B300, GB300) has no file of its own: it runs the SM100 kernels.
//! vLLM gates its data-center Blackwell paths with `is_device_capability_family(100)`, which
//! is true for any 10.x device (vllm/platforms/interface.py: capability // 10 == family // 10),
//! and FlashInfer builds its SM100 kernels for `sm_100a` and `sm_103a` alike
//! (`flashinfer/jit/core.py`, `sm103a_nvcc_flags`), so the libraries, tiles and code paths
//! the SM100 constants describe are the ones a B300 runs; its own rates (FP4 peak, bandwidth,
//! SMs) come from its GPU description.

use crate::error::{Error, Result};
use crate::spec::{FormatKind, GpuSpec, WeightFormat};
use crate::units::{BytesPerSec, Seconds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// An architecture generation whose kernels share constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Ampere, SM80 (A100): priors only, no measured table.
    Ampere,
    /// Ada Lovelace, SM89 (L40S, RTX 6000 Ada, L4).
    Ada,
    /// Hopper, SM90 (H100, H200).
    Hopper,
    /// Data-center Blackwell, SM100 (B200, GB200) and SM103 (B300, GB300).
    BlackwellSm100,
    /// Workstation/consumer Blackwell, SM120 (RTX PRO 6000, RTX 5090).
    BlackwellSm120,
    /// AMD CDNA3, gfx942 (Instinct MI300X, MI325X).
    Cdna3,
    /// AMD CDNA4, gfx950 (Instinct MI355X).
    Cdna4,
}

impl Generation {
    /// The generation a GPU description's `architecture` names by its `SMnn` capability
    /// (NVIDIA) or its `gfxNNN` target (AMD).
    pub fn of(gpu: &GpuSpec) -> Result<Generation> {
        match gpu.gfx_target() {
            Some(942) => return Ok(Generation::Cdna3),
            Some(950) => return Ok(Generation::Cdna4),
            _ => {}
        }
        match gpu.compute_capability() {
            Some(80) => Ok(Generation::Ampere),
            Some(89) => Ok(Generation::Ada),
            Some(90) => Ok(Generation::Hopper),
            // Blackwell Ultra runs the SM100 family's kernels (see the module doc).
            Some(100 | 103) => Ok(Generation::BlackwellSm100),
            Some(120) => Ok(Generation::BlackwellSm120),
            _ => Err(Error::Scenario(format!(
                "GPU {}: `architecture` = \"{}\" names no generation with kernel constants; \
                 expected its compute capability as SM80 (Ampere), SM89 (Ada), SM90 (Hopper), \
                 SM100, SM103 or SM120 (Blackwell), or its gfx target as gfx942 (CDNA3) or \
                 gfx950 (CDNA4)",
                gpu.name, gpu.architecture
            ))),
        }
    }

    fn file(self) -> (&'static str, &'static str) {
        match self {
            Generation::Ampere => ("ampere", include_str!("../../configs/kernels/ampere.toml")),
            Generation::Ada => ("ada", include_str!("../../configs/kernels/ada.toml")),
            Generation::Hopper => ("hopper", include_str!("../../configs/kernels/hopper.toml")),
            Generation::BlackwellSm100 => (
                "blackwell-sm100",
                include_str!("../../configs/kernels/blackwell-sm100.toml"),
            ),
            Generation::BlackwellSm120 => (
                "blackwell-sm120",
                include_str!("../../configs/kernels/blackwell-sm120.toml"),
            ),
            Generation::Cdna3 => ("cdna3", include_str!("../../configs/kernels/cdna3.toml")),
            Generation::Cdna4 => ("cdna4", include_str!("../../configs/kernels/cdna4.toml")),
        }
    }

    /// The generation a kernel-constants file names in its `generation` field.
    pub fn from_name(name: &str) -> Option<Generation> {
        ALL_GENERATIONS.into_iter().find(|g| g.file().0 == name)
    }

    /// This generation's kernel constants: a file installed with [`install_kernel_files`]
    /// (`--kernels`), else the embedded `configs/kernels/` one (parsed once).
    pub fn kernels(self) -> &'static KernelConstants {
        if let Some(k) = OVERRIDES
            .get()
            .and_then(|o| o.iter().find(|k| k.generation == self))
        {
            k.read.store(true, std::sync::atomic::Ordering::Relaxed);
            return k.constants;
        }
        static CELLS: [OnceLock<KernelConstants>; ALL_GENERATIONS.len()] =
            [const { OnceLock::new() }; ALL_GENERATIONS.len()];
        let i = self as usize;
        CELLS[i].get_or_init(|| {
            let (name, text) = self.file();
            // Embedded and covered by a test: a parse error is a build defect.
            toml::from_str(text)
                .unwrap_or_else(|e| panic!("configs/kernels/{name}.toml is invalid: {e}"))
        })
    }
}

impl Generation {
    /// Why the engine cannot run weights stored as `w` on `gpu`'s generation (its kernel
    /// file's `[refused]` entry), naming format, GPU and reason; `None` where it can.
    pub fn refusal(gpu: &GpuSpec, w: WeightFormat) -> Option<String> {
        let g = Generation::of(gpu).ok()?;
        let key = moe_key(w);
        g.kernels().refused.get(key).map(|why| {
            format!(
                "{key} weights cannot run on {} ({}): {why} (configs/kernels/{}.toml [refused])",
                gpu.full_name,
                gpu.architecture,
                g.file().0
            )
        })
    }
}

/// Every generation with a kernel-constants file.
pub const ALL_GENERATIONS: [Generation; 7] = [
    Generation::Ampere,
    Generation::Ada,
    Generation::Hopper,
    Generation::BlackwellSm100,
    Generation::BlackwellSm120,
    Generation::Cdna3,
    Generation::Cdna4,
];

/// Kernel-constants files given in place of the embedded ones, once per process.
static OVERRIDES: OnceLock<Vec<InstalledKernels>> = OnceLock::new();

/// One `--kernels` file: the generation it replaces, its constants, and whether anything
/// in the run read them.
struct InstalledKernels {
    generation: Generation,
    constants: &'static KernelConstants,
    path: String,
    read: std::sync::atomic::AtomicBool,
}

/// The `--kernels` files nothing in the run read (path, generation): the run priced no GPU
/// of their generation, so they changed no number, which the user should hear.
pub fn unread_kernel_files() -> Vec<(String, &'static str)> {
    OVERRIDES
        .get()
        .map(|o| {
            o.iter()
                .filter(|k| !k.read.load(std::sync::atomic::Ordering::Relaxed))
                .map(|k| (k.path.clone(), k.generation.file().0))
                .collect()
        })
        .unwrap_or_default()
}

/// Use the kernel constants in `files` (path, text) in place of the embedded
/// `configs/kernels/<generation>.toml` of the generation each names, for the rest of the
/// process (`rooftop --kernels FILE`): a user's own fit of a generation, or a trial of new
/// constants, priced by the same formulas. Each file is read like the embedded ones
/// (unknown keys and wrong units are errors naming the file) and must name a known
/// `generation`, at most once. Call it before anything is priced; a second call is an error.
pub fn install_kernel_files(files: &[(String, String)]) -> Result<()> {
    let mut out: Vec<InstalledKernels> = Vec::new();
    for (path, text) in files {
        let k: KernelConstants = crate::spec::registry::parse_toml(text, path)?;
        k.validate().map_err(|(field, expected)| Error::Invalid {
            file: path.clone(),
            line: crate::error::line_of_field(text, &field),
            field,
            expected,
        })?;
        let g = Generation::from_name(&k.generation).ok_or_else(|| Error::Invalid {
            file: path.clone(),
            line: crate::error::line_of_field(text, "generation"),
            field: "generation".into(),
            expected: format!("one of {}", ALL_GENERATIONS.map(|g| g.file().0).join(", ")),
        })?;
        if out.iter().any(|h| h.generation == g) {
            return Err(Error::Invalid {
                file: path.clone(),
                line: crate::error::line_of_field(text, "generation"),
                field: "generation".into(),
                expected: format!(
                    "a generation no other --kernels file names ({})",
                    k.generation
                ),
            });
        }
        out.push(InstalledKernels {
            generation: g,
            constants: Box::leak(Box::new(k)),
            path: path.clone(),
            read: std::sync::atomic::AtomicBool::new(false),
        });
    }
    OVERRIDES.set(out).map_err(|_| {
        Error::Scenario("kernel-constants files can be installed only once per run".into())
    })
}

/// The kernel constants of one generation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelConstants {
    pub generation: String,
    /// Fused-MoE kernel per weight-format key (`bf16`, `fp8`, `fp8-block`, `int4`, `mxfp4`,
    /// `nvfp4`): the one the engine runs for that format on this generation.
    pub moe: BTreeMap<String, MoeKernel>,
    /// Other fused-MoE libraries measured on this generation, by library then format key:
    /// the constants a call that names that library runs at (a measured table's `kernel`).
    #[serde(default)]
    pub moe_backends: BTreeMap<MoeBackend, BTreeMap<String, MoeKernel>>,
    /// Dense GEMM kernel per weight-format key (the same keys as `moe`): the family the
    /// measured GEMM tables ran, which an engine runs unless it names another below.
    pub gemm: BTreeMap<String, GemmKernel>,
    /// Other GEMM kernel families of this generation, by family name, then weight-format key:
    /// what an engine that runs a different kernel for a format selects
    /// (`[[gemm_family]]` in `configs/engines/*.toml`).
    #[serde(default)]
    pub gemm_families: BTreeMap<String, BTreeMap<String, GemmKernel>>,
    /// The decode attention kernel (paged KV, split-KV) the engine runs on this generation.
    pub decode_attention: DecodeAttentionKernel,
    /// Other decode attention libraries measured on this generation, by library: the
    /// constants a call that names that library runs at (a measured table's `kernel`).
    #[serde(default)]
    pub decode_attention_backends: BTreeMap<AttentionBackend, DecodeAttentionKernel>,
    /// The MLA latent decode attention kernel (absorbed form).
    pub mla_decode: MlaDecodeKernel,
    /// Weight formats (keys of [`KERNEL_FORMATS`]) the engine has no kernel for on this
    /// generation, each with the reason: a model storing any weight group in one is refused,
    /// never priced at another format's kernel. A refused format has no [moe.*] or [gemm.*].
    #[serde(default)]
    pub refused: BTreeMap<String, String>,
    pub sources: BTreeMap<String, String>,
}

/// The name a library key has in the files (`cutlass`, `flashinfer-trtllm`): its serde form.
fn key_name<T: Serialize>(key: &T) -> String {
    serde_json::to_value(key)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

impl KernelConstants {
    /// Physically possible constants: attained fractions in (0, 1], tiles and splits of at
    /// least one, harness factors that never slow a call, a source for each section, and
    /// every weight format's MoE kernel matched by a GEMM kernel. The error names the field
    /// (`moe.nvfp4.memory_fraction`) and what it must be.
    pub fn validate(&self) -> std::result::Result<(), (String, String)> {
        let fraction = |field: String, v: f64| {
            if v > 0.0 && v <= 1.0 {
                Ok(())
            } else {
                Err((field, format!("a fraction in (0, 1], not {v}")))
            }
        };
        let time = |field: String, v: Seconds| {
            if v.0 >= 0.0 && v.0 < 1.0 {
                Ok(())
            } else {
                Err((field, "a time from 0 to 1 s".to_string()))
            }
        };
        let at_least_one = |field: String, v: f64| {
            if v >= 1.0 && v.is_finite() {
                Ok(())
            } else {
                Err((field, format!("a factor of at least 1, not {v}")))
            }
        };
        for key in ["moe", "gemm", "decode_attention", "mla_decode"] {
            if !self.sources.contains_key(key) {
                return Err((format!("sources.{key}"), "a source for the section".into()));
            }
        }
        let families = self.moe.iter().map(|(f, m)| (format!("moe.{f}"), m)).chain(
            self.moe_backends.iter().flat_map(|(b, ms)| {
                let b = key_name(b);
                ms.iter()
                    .map(move |(f, m)| (format!("moe_backends.{b}.{f}"), m))
            }),
        );
        for (at, m) in families {
            fraction(format!("{at}.memory_fraction"), m.memory_fraction)?;
            fraction(format!("{at}.compute_fraction"), m.compute_fraction)?;
            time(format!("{at}.floor"), m.floor)?;
            time(format!("{at}.per_expert"), m.per_expert)?;
            time(format!("{at}.expert_map_fixed"), m.expert_map_fixed)?;
            at_least_one(
                format!("{at}.harness_warm_l2_speedup"),
                m.harness_warm_l2_speedup,
            )?;
            if m.tile_m < 16 {
                return Err((format!("{at}.tile_m"), "at least 16 rows".into()));
            }
            for (field, v) in [
                ("pair_passes", m.pair_passes),
                ("all_pair_passes", m.all_pair_passes),
            ] {
                if !(v >= 0.0 && v.is_finite()) {
                    return Err((format!("{at}.{field}"), "a count of at least 0".into()));
                }
            }
            if m.routing_inside && !self.sources.contains_key("moe_routing") {
                return Err((
                    "sources.moe_routing".into(),
                    "a source for a monolithic MoE family (routing_inside)".into(),
                ));
            }
        }
        let gemms = self
            .gemm
            .iter()
            .map(|(f, g)| (format!("gemm.{f}"), g))
            .chain(self.gemm_families.iter().flat_map(|(fam, gs)| {
                gs.iter()
                    .map(move |(f, g)| (format!("gemm_families.{fam}.{f}"), g))
            }));
        for (at, g) in gemms {
            fraction(format!("{at}.memory_fraction"), g.memory_fraction)?;
            fraction(format!("{at}.compute_fraction"), g.compute_fraction)?;
            if let Some(f) = g.cta_compute_fraction {
                fraction(format!("{at}.cta_compute_fraction"), f)?;
            }
            if let Some(f) = g.output_memory_fraction {
                fraction(format!("{at}.output_memory_fraction"), f)?;
            }
            if !(g.fixed.0 >= 0.0 && g.fixed.0 < 50e-6) {
                return Err((format!("{at}.fixed"), "a time from 0 to 50 us".into()));
            }
            at_least_one(
                format!("{at}.harness_weight_copies"),
                g.harness_weight_copies,
            )?;
            at_least_one(
                format!("{at}.harness_warm_l2_speedup"),
                g.harness_warm_l2_speedup,
            )?;
            for [m, n] in g.tile.iter().chain(g.tile_by_m.iter().map(|s| &s.tile)) {
                if *m == 0 || *n == 0 {
                    return Err((format!("{at}.tile"), "a tile of at least 1 x 1".into()));
                }
            }
            if !g.tile_by_m.is_empty() {
                if g.tile.is_some() || g.min_tile_m.is_some() {
                    return Err((
                        format!("{at}.tile_by_m"),
                        "a tile ladder in place of `tile` and `min_tile_m`, not beside them".into(),
                    ));
                }
                let steps = &g.tile_by_m;
                let ordered = steps.windows(2).all(|w| match (w[0].max_m, w[1].max_m) {
                    (Some(a), Some(b)) => a < b,
                    (Some(_), None) => true,
                    (None, _) => false,
                });
                if !ordered || steps.last().is_some_and(|s| s.max_m.is_some()) {
                    return Err((
                        format!("{at}.tile_by_m"),
                        "steps in rising max_m, the last one without max_m".into(),
                    ));
                }
            }
            if g.max_split_k == 0 {
                return Err((format!("{at}.max_split_k"), "at least 1".into()));
            }
            if let Some(b) = g.sm_load_bandwidth {
                if b.0 <= 0.0 {
                    return Err((format!("{at}.sm_load_bandwidth"), "a rate above 0".into()));
                }
            }
        }
        for (key, reason) in &self.refused {
            if !KERNEL_FORMATS.contains(&key.as_str()) {
                return Err((
                    format!("refused.{key}"),
                    format!("a weight-format key ({})", KERNEL_FORMATS.join(", ")),
                ));
            }
            if self.moe.contains_key(key) || self.gemm.contains_key(key) {
                return Err((
                    format!("refused.{key}"),
                    format!("a format with no [moe.{key}] or [gemm.{key}] kernel, or not refused"),
                ));
            }
            if reason.trim().is_empty() {
                return Err((format!("refused.{key}"), "the reason it is refused".into()));
            }
        }
        for key in KERNEL_FORMATS {
            if self.refused.contains_key(key) {
                continue;
            }
            for (section, has) in [
                ("moe", self.moe.contains_key(key)),
                ("gemm", self.gemm.contains_key(key)),
            ] {
                if !has {
                    return Err((
                        format!("{section}.{key}"),
                        format!("a {section} kernel for `{key}`, or `{key}` under [refused]"),
                    ));
                }
            }
        }
        for key in self.moe.keys() {
            if !self.gemm.contains_key(key) {
                return Err((
                    format!("gemm.{key}"),
                    format!("a GEMM kernel for `{key}`, as [moe.{key}] has"),
                ));
            }
        }
        let attention = std::iter::once(("decode_attention".to_string(), &self.decode_attention))
            .chain(self.decode_attention_backends.iter().map(|(b, a)| {
                let b = key_name(b);
                (format!("decode_attention_backends.{b}"), a)
            }));
        for (at, a) in attention {
            fraction(format!("{at}.memory_fraction"), a.memory_fraction)?;
            fraction(format!("{at}.fp8_kv_load_rate"), a.fp8_kv_load_rate)?;
            time(format!("{at}.floor"), a.floor)?;
            time(format!("{at}.per_item"), a.per_item)?;
            at_least_one(
                format!("{at}.harness_warm_l2_speedup"),
                a.harness_warm_l2_speedup,
            )?;
            if a.max_splits == 0 || a.split_block == 0 {
                return Err((
                    format!("{at}.max_splits"),
                    "at least one split of at least one position".into(),
                ));
            }
            if a.sm_load_bandwidth.0 <= 0.0 {
                return Err((format!("{at}.sm_load_bandwidth"), "a rate above 0".into()));
            }
            if a.splits_only_packed && !a.windowed_per_query_head {
                return Err((
                    format!("{at}.windowed_per_query_head"),
                    "true where splits_only_packed is (an unpacked call runs per query head)"
                        .into(),
                ));
            }
        }
        for (b, a) in &self.decode_attention_backends {
            if a.backend != Some(*b) {
                return Err((
                    "decode_attention_backends".into(),
                    format!("each entry's `backend` equal to its key ({b:?})"),
                ));
            }
        }
        if !self.decode_attention_backends.is_empty()
            && !self.sources.contains_key("decode_attention_backends")
        {
            return Err((
                "sources.decode_attention_backends".into(),
                "a source for the decode attention backends".into(),
            ));
        }
        if !self.gemm_families.is_empty() && !self.sources.contains_key("gemm_families") {
            return Err((
                "sources.gemm_families".into(),
                "a source for the GEMM families".into(),
            ));
        }
        for (family, kernels) in &self.gemm_families {
            for (key, g) in kernels {
                if !KERNEL_FORMATS.contains(&key.as_str()) {
                    return Err((
                        format!("gemm_families.{family}.{key}"),
                        format!("a weight-format key ({})", KERNEL_FORMATS.join(", ")),
                    ));
                }
                if !(g.harness_floor.is_empty() && g.harness_scale_relayout.is_empty()) {
                    return Err((
                        format!("gemm_families.{family}.{key}.harness_floor"),
                        "harness costs only under [gemm.*]".into(),
                    ));
                }
            }
        }
        let m = &self.mla_decode;
        fraction("mla_decode.memory_fraction".into(), m.memory_fraction)?;
        fraction("mla_decode.compute_fraction".into(), m.compute_fraction)?;
        time("mla_decode.per_row".into(), m.per_row)?;
        if m.head_tile == 0 {
            return Err(("mla_decode.head_tile".into(), "at least 1 head".into()));
        }
        Ok(())
    }
}

/// Which token-expert pairs a fused-MoE kernel's elementwise passes run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PairScope {
    /// Only the pairs routed to this GPU's experts (permute/unpermute kernels).
    Local,
    /// Every token's top-k pairs, local or not (vLLM's Triton path with an expert map sizes
    /// its intermediate buffers, activation and sum by all of them).
    All,
}

/// A fused-MoE kernel library: which code runs the grouped GEMMs of a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoeBackend {
    /// FlashInfer's CUTLASS fused MoE (permute, grouped GEMMs, finalize).
    Cutlass,
    /// FlashInfer's TensorRT-LLM fused MoE (routing, batched GEMMs; SM100), called as one
    /// monolithic kernel that routes the logits itself.
    Trtllm,
    /// The same GEMMs behind vLLM's modular kernel: routing, activation quantization and
    /// permutation done by the framework before the TRT-LLM experts, and a finalize after
    /// (`...expertsmodular`): other fixed costs and another tile choice.
    TrtllmModular,
    /// The same with MXFP8-quantized activations against MXFP4 weights: block-scaled MMA at
    /// the FP8 rate, not BF16 math on dequantized weights.
    TrtllmMxfp8,
    /// Marlin's mixed-precision MoE (weight-only 4-bit, BF16 math on `mma.sync`).
    Marlin,
    /// vLLM's Triton fused_moe (or OpenAI's Triton MXFP4 kernels).
    Triton,
}

impl MoeBackend {
    /// Every library, in the order of the enum.
    pub const ALL: [MoeBackend; 6] = [
        MoeBackend::Cutlass,
        MoeBackend::Trtllm,
        MoeBackend::TrtllmModular,
        MoeBackend::TrtllmMxfp8,
        MoeBackend::Marlin,
        MoeBackend::Triton,
    ];

    /// The library's name as descriptions write it (`[moe_backends.<key>]`, an engine's
    /// `moe_library`).
    pub fn key(self) -> &'static str {
        match self {
            MoeBackend::Cutlass => "cutlass",
            MoeBackend::Trtllm => "trtllm",
            MoeBackend::TrtllmModular => "trtllm-modular",
            MoeBackend::TrtllmMxfp8 => "trtllm-mxfp8",
            MoeBackend::Marlin => "marlin",
            MoeBackend::Triton => "triton",
        }
    }

    /// The library a measured table's `kernel` name says ran (vLLM's class names:
    /// `..._flashinfer_cutlass_...`, `..._flashinfer_trtllm_...`, `..._marlin_...`,
    /// `..._triton_...`; `_mxfp4_mxfp8_` for MXFP8 activations, `expertsmodular` for the
    /// TRT-LLM experts behind vLLM's modular kernel), if any.
    pub fn from_kernel_name(name: &str) -> Option<MoeBackend> {
        library_named(
            name,
            &[
                ("marlin", MoeBackend::Marlin),
                ("mxfp8", MoeBackend::TrtllmMxfp8),
                ("expertsmodular", MoeBackend::TrtllmModular),
                ("trtllm", MoeBackend::Trtllm),
                ("cutlass", MoeBackend::Cutlass),
                ("triton", MoeBackend::Triton),
            ],
        )
    }
}

/// The first library whose key a kernel name contains (case-insensitive): the keys are in
/// the order that tells overlapping names apart (`mxfp8` before `trtllm`).
fn library_named<T: Copy>(name: &str, keys: &[(&str, T)]) -> Option<T> {
    let n = name.to_ascii_lowercase();
    keys.iter().find(|(k, _)| n.contains(k)).map(|(_, b)| *b)
}

/// A decode attention kernel library: which code runs a paged-KV decode attention call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionBackend {
    /// FlashAttention 2 (vLLM's `flash_attn` on SM80/SM89).
    Fa2,
    /// FlashAttention 3 (Hopper: TMA, warp-specialized).
    Fa3,
    /// FlashAttention 4 (CuTe DSL).
    Fa4,
    /// FlashInfer's own decode kernels (`BatchDecodeWithPagedKVCache`).
    Flashinfer,
    /// FlashInfer's TensorRT-LLM generated decode kernels (SM100).
    FlashinferTrtllm,
    /// vLLM's Triton unified attention.
    Triton,
}

impl AttentionBackend {
    /// The library a measured table's `kernel` name says ran (`vllm_flash_attn_fa2`,
    /// `vllm_flashinfer_trtllmdecode`, `vllm_flashinfer_fidecode`, `vllm_triton_attn`), if
    /// any.
    pub fn from_kernel_name(name: &str) -> Option<AttentionBackend> {
        library_named(
            name,
            &[
                ("fa2", AttentionBackend::Fa2),
                ("fa3", AttentionBackend::Fa3),
                ("fa4", AttentionBackend::Fa4),
                ("trtllm", AttentionBackend::FlashinferTrtllm),
                ("flashinfer", AttentionBackend::Flashinfer),
                ("triton", AttentionBackend::Triton),
            ],
        )
    }
}

/// A fused-MoE kernel family.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeKernel {
    /// What runs (for the reader).
    pub kernel: String,
    /// The library it is, where one is named: a call naming another library runs at that
    /// library's constants (`moe_backends`) when the generation has them.
    #[serde(default)]
    pub backend: Option<MoeBackend>,
    /// Minimum time of the whole fused call (routing sort, both GEMMs, activation, sum).
    pub floor: Seconds,
    /// Fraction of DRAM bandwidth the expert-weight stream attains.
    pub memory_fraction: f64,
    /// Fraction of the math dtype's dense peak the grouped GEMMs attain.
    pub compute_fraction: f64,
    /// Largest row tile per expert; an expert's rows are padded to the smallest power of two
    /// from 16 up to this that holds them.
    pub tile_m: u32,
    /// Passes over each token-expert pair's activations (`hidden + width` BF16 values).
    pub pair_passes: f64,
    pub pairs: PairScope,
    /// Further passes over every token's top-k pairs, local or not: routing, permutation
    /// and finalize kernels that walk the whole batch's expanded activations before the
    /// expert map drops the pairs of other ranks' experts.
    #[serde(default)]
    pub all_pair_passes: f64,
    /// Fixed time per expert the busiest rank computes: the grouped GEMMs set up each
    /// expert's problem (operand descriptors, tile schedule) before its tiles run.
    #[serde(default)]
    pub per_expert: Seconds,
    /// How much faster than DRAM the expert-weight stream runs when the weights the call
    /// reads fit in L2 and the benchmark harness repeats the call on the same weights (warm
    /// L2). Only `validate` applies it, to the measured MoE rows; in serving each layer reads
    /// its own experts, which no earlier call left in L2.
    #[serde(default = "no_speedup")]
    pub harness_warm_l2_speedup: f64,
    /// Monolithic: the kernel takes the router logits and picks each token's top-k experts
    /// itself, so no separate top-k kernel runs before it (its floor holds that work).
    #[serde(default)]
    pub routing_inside: bool,
    /// Fixed time an expert map adds: the kernels that remap each pair's expert to a local
    /// one (or none) and rebuild the routing data over the local experts. Absent without
    /// expert parallelism.
    #[serde(default)]
    pub expert_map_fixed: Seconds,
    /// The row tile is one block height for every expert, picked from the mean load the
    /// kernel's host code computes, all of the call's pairs over its local experts (vLLM's
    /// Marlin MoE: the first of 8, 16, 32, 48, 64 rows with mean / block < 0.9). Under expert
    /// parallelism that mean counts every rank's pairs, so the block is taller than the local
    /// load needs. false (the default): each expert's rows pad to the power of two that holds
    /// them, up to `tile_m`.
    #[serde(default)]
    pub block_from_mean_load: bool,
}

/// A dense GEMM kernel family: a roofline at attained fractions plus a fixed time, after an
/// activation-quantization pass where the format quantizes activations.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmKernel {
    /// What runs (for the reader).
    pub kernel: String,
    /// Fraction of the math dtype's dense peak the kernel attains.
    pub compute_fraction: f64,
    /// Fraction of DRAM bandwidth the kernel (and its quantization pass) attains.
    pub memory_fraction: f64,
    /// Fixed time of one call on top of the engine's kernel gap.
    pub fixed: Seconds,
    /// Activations quantized to the weight format by a separate memory-bound pass over the
    /// m x k activations (BF16 read, quantized values written); the GEMM then reads them
    /// quantized.
    pub quantize_activations: bool,
    /// Benchmark-harness floors by the measured table's `kernel` name: the measured call of
    /// that kernel never ran faster than this (CPU-side launch of eager, unfused calls).
    /// Only `validate` applies them, to rows naming that kernel; predictions never do.
    #[serde(default)]
    pub harness_floor: BTreeMap<String, Seconds>,
    /// Benchmark-harness cost by the measured table's `kernel` name, added to its floor when
    /// the activations' block scales must be copied into the TMA-aligned layout the kernel
    /// reads: m not a multiple of 4 (16-byte rows of FP32 scales) and k longer than one
    /// 128-wide scale block (one column of scales is already aligned). An eager call's
    /// allocation and copy; only `validate` applies it, predictions never do.
    #[serde(default)]
    pub harness_scale_relayout: BTreeMap<String, Seconds>,
    /// Output tile of one CTA, `[tile_m, tile_n]`; absent, the kernel is priced as a plain
    /// roofline with no grid (priors without a table).
    #[serde(default)]
    pub tile: Option<[u32; 2]>,
    /// A dispatch that picks the whole tile from m (vLLM's SM120 CUTLASS FP8 kernels: 16 x 64
    /// up to m = 16, 32 x 64 up to 32, 64 x 64 up to 256, 128 x 128 beyond): the first step
    /// whose `max_m` holds m, the last one (no `max_m`) beyond. In place of `tile`.
    #[serde(default)]
    pub tile_by_m: Vec<TileStep>,
    /// Most slices the library splits k into when the output tiles leave SMs idle (1: no
    /// split-K, each CTA walks all of k for its tile).
    #[serde(default = "one")]
    pub max_split_k: u32,
    /// Fewest k elements one split-K slice takes: the library splits k only while each
    /// slice keeps at least this much of it (cuBLAS splits long-k calls of few tiles, not
    /// short ones). Absent: as many slices as the idle SMs allow, up to `max_split_k`.
    #[serde(default)]
    pub split_k_block: Option<u32>,
    /// Rate at which one SM loads its tile's operands (from L2 or DRAM): a grid of few CTAs
    /// streams k at this rate per CTA, not at the whole GPU's bandwidth.
    #[serde(default)]
    pub sm_load_bandwidth: Option<BytesPerSec>,
    /// Time of one wave of the activation-quantization pass, which runs one CTA per row of
    /// the m x k activations (per-token scales): `ceil(m / SMs)` waves.
    #[serde(default)]
    pub quantize_row_wave: Seconds,
    /// Rate at which one SM moves the activation-quantization pass's bytes (BF16 read,
    /// quantized values written): a pass whose loads are latency-bound (few loads in flight
    /// per thread) runs at this rate per SM, below the DRAM rate. Absent: only the DRAM
    /// stream and the row waves bound the pass.
    #[serde(default)]
    pub quantize_sm_bandwidth: Option<BytesPerSec>,
    /// Smallest tile height of an m-dependent tile choice: the library picks the tile
    /// height from m (CUTLASS's SM89 FP8 dispatch: 16 rows for m <= 16, 32 for m <= 32, ...,
    /// up to `tile[0]`), i.e. `clamp(next_pow2(m), min_tile_m, tile_m)`. Absent: the tile
    /// height is `tile[0]` whatever m.
    #[serde(default)]
    pub min_tile_m: Option<u32>,
    /// Fraction of one SM's share of the dense peak at which one CTA computes its tile (a
    /// grid of few CTAs is not held to the whole-GPU `compute_fraction`, which a full
    /// machine under sustained load attains). Absent: `compute_fraction`.
    #[serde(default)]
    pub cta_compute_fraction: Option<f64>,
    /// Fraction of DRAM bandwidth at which the epilogue stores the m x n output (an
    /// epilogue that writes slower than the main loop reads). Absent: `memory_fraction`.
    #[serde(default)]
    pub output_memory_fraction: Option<f64>,
    /// Benchmark harness only (validate, never predictions): a call whose weights,
    /// activations and output together fit in L2 moves its bytes this many times faster than
    /// DRAM at `memory_fraction` (the harness repeats the call on the same tensors).
    #[serde(default = "no_speedup")]
    pub harness_warm_l2_speedup: f64,
    /// Copies of the weights the GEMM benchmark harness cycles through between repeats of a
    /// call: a repeat finds its weights in L2 only when that many copies, its activations
    /// and its output fit there (`harness_warm_l2_speedup`). Only `validate` applies it, to
    /// the measured GEMM rows; predictions never do.
    #[serde(default = "one_copy")]
    pub harness_weight_copies: f64,
}

/// One step of a GEMM kernel's tile ladder (`GemmKernel::tile_by_m`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileStep {
    /// Largest m this step's tile serves; absent on the last step (every larger m).
    #[serde(default)]
    pub max_m: Option<u32>,
    /// `[tile_m, tile_n]` of one CTA.
    pub tile: [u32; 2],
}

impl GemmKernel {
    /// The output tile a call of `m` rows runs, if the kernel runs on a grid.
    pub fn tile_for(&self, m: f64) -> Option<[u32; 2]> {
        if self.tile_by_m.is_empty() {
            return self.tile;
        }
        self.tile_by_m
            .iter()
            .find(|s| s.max_m.is_none_or(|x| m <= x as f64))
            .or(self.tile_by_m.last())
            .map(|s| s.tile)
    }
}

fn one() -> u32 {
    1
}

fn one_copy() -> f64 {
    1.0
}

/// A decode attention kernel: one CTA per (sequence, KV head, KV split).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeAttentionKernel {
    pub kernel: String,
    /// The library it is: a call naming another library runs at that library's constants
    /// (`decode_attention_backends`) when the generation has them.
    #[serde(default)]
    pub backend: Option<AttentionBackend>,
    /// Under a sliding window the kernel runs one work item per (sequence, query head), not
    /// per (sequence, KV head): FlashAttention 2 packs a KV head's query heads into one
    /// item only without a window (its `seqlenq_ngroups_swapped` path).
    #[serde(default)]
    pub windowed_per_query_head: bool,
    /// The kernel splits a sequence's KV only on its packed path (a KV head's query heads
    /// in one work item: GQA without a sliding window); otherwise it runs one unsplit CTA
    /// per (sequence, query head). FlashAttention 2's varlen forward applies its split-KV
    /// heuristic only under `seqlenq_ngroups_swapped`.
    #[serde(default)]
    pub splits_only_packed: bool,
    /// Minimum time of one call.
    pub floor: Seconds,
    /// Fraction of DRAM bandwidth the KV stream attains once every SM is busy.
    pub memory_fraction: f64,
    /// Rate at which one CTA (one SM) streams its share of the cache, from DRAM or L2: a
    /// call of few work items and splits cannot pull the whole GPU's bandwidth.
    pub sm_load_bandwidth: BytesPerSec,
    /// Fraction of `sm_load_bandwidth` (in bytes) at which one CTA consumes an FP8 cache.
    /// An FP8 cache holds twice the elements per byte, and a kernel whose FP8 path does more
    /// work per element in the SM (FlashAttention 3 quantizes the query, converts and
    /// transposes each V tile in shared memory for its FP8 MMAs) consumes fewer bytes per
    /// second per SM; DRAM moves bytes at the same rate whatever they hold, so the call's
    /// DRAM stream is unchanged. Under 0.5 a CTA takes longer over an FP8 cache than over
    /// the BF16 one of the same shape (twice the bytes). 1 (the default): the per-SM byte
    /// rate does not depend on the element type.
    #[serde(default = "no_speedup")]
    pub fp8_kv_load_rate: f64,
    /// Most KV splits the kernel uses for one (sequence, KV head).
    pub max_splits: u32,
    /// KV positions one split covers at least.
    pub split_block: u32,
    /// KV positions of a 16-bit cache one CTA's pass takes at least, at its per-SM rate: the
    /// kernel loads and multiplies whole KV tiles (masked past the context), so a CTA whose
    /// share is shorter still pays one tile. Tiles are sized in shared-memory bytes, so a
    /// tile of an FP8 cache holds twice the positions (the same bytes). 0 (the default): a
    /// CTA pays only for its share.
    #[serde(default)]
    pub min_block: u32,
    /// Time of the separate kernel that quantizes the queries to FP8 before a call over an
    /// FP8 cache (vLLM runs `scaled_fp8_quant` on the query for FlashAttention 3's FP8
    /// path); 0 (the default) for a kernel that reads BF16 queries.
    #[serde(default)]
    pub fp8_query_quant: Seconds,
    /// Fixed time per (sequence, KV head) work item and SM: page-table walk, softmax
    /// merge, output write; spread over the SMs.
    pub per_item: Seconds,
    /// How much faster than DRAM the KV stream runs when the call's cache fits in L2 and the
    /// benchmark harness repeats the call on the same cache (warm L2). Only `validate`
    /// applies it, to the measured attention rows; in serving every layer reads its own
    /// cache, which no earlier call left in L2.
    #[serde(default = "no_speedup")]
    pub harness_warm_l2_speedup: f64,
    /// Flat cost the benchmark harness adds to each measured call (eager launch: the
    /// attention tables are not among those collected inside CUDA graphs). Only `validate`
    /// adds it; predictions never do.
    #[serde(default)]
    pub harness_floor: Seconds,
    /// Time the benchmark harness's call takes per (sequence, KV head) in series, whatever
    /// the shape: the measured call is the slower of that and the kernel. Only `validate`
    /// applies it; 0 (the default) where the table shows no such cost.
    #[serde(default)]
    pub harness_per_item: Seconds,
    /// Largest batch whose harness call pays `harness_per_item` (0: every batch).
    #[serde(default)]
    pub harness_per_item_max_batch: u64,
}

fn no_speedup() -> f64 {
    1.0
}

/// An MLA latent decode kernel (FlashMLA, FlashInfer/TRT-LLM MLA, Triton MLA): one CTA per
/// (sequence, tile of `head_tile` query heads), each streaming the sequence's latent cache.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaDecodeKernel {
    pub kernel: String,
    /// Fraction of DRAM bandwidth the latent-cache stream attains.
    pub memory_fraction: f64,
    /// Fraction of the dense BF16 peak the score and value products attain.
    pub compute_fraction: f64,
    /// Query heads one CTA holds: heads are padded to a multiple of it (compute) and each
    /// tile streams the cache again.
    pub head_tile: u32,
    /// Time per (query, head) row and SM: the 576-wide query load, the softmax state, the
    /// 512-wide output write and its split-KV merge; spread over the SMs.
    pub per_row: Seconds,
    /// Benchmark-harness cost of one eager call of the MLA backend (metadata build, Python
    /// launch of its kernels): only `validate` adds it, to the measured MLA module rows.
    #[serde(default)]
    pub harness_floor: Seconds,
    /// The harness's serial cost per sequence (the scheduler metadata built per call), added
    /// by `validate` only.
    #[serde(default)]
    pub harness_per_sequence: Seconds,
    /// Rate at which one CTA streams its share of a sequence's latent cache. With it the call
    /// runs on a grid: one work item per (sequence, head tile), each split over at most
    /// `max_splits` CTAs while the items leave SMs idle, and no CTA streams faster than this
    /// (a grid of about one item per SM is bound by it, not by DRAM). Absent: no grid bound.
    #[serde(default)]
    pub sm_load_bandwidth: Option<BytesPerSec>,
    /// Most CTAs one item's cache is split over (with `sm_load_bandwidth`).
    #[serde(default = "one")]
    pub max_splits: u32,
    /// CTAs resident on one SM at once: a wave holds `SMs × ctas_per_sm` of them.
    #[serde(default = "one")]
    pub ctas_per_sm: u32,
    /// Whether each head tile of a sequence reads the cache from DRAM again (false: the tiles
    /// of one sequence run together and the later ones hit L2).
    #[serde(default = "yes")]
    pub tiles_reread_dram: bool,
    /// Whether an FP8 cache is multiplied at the FP8 tensor rate (the query quantized to
    /// FP8) rather than dequantized to BF16 math.
    #[serde(default)]
    pub fp8_kv_math: bool,
}

fn yes() -> bool {
    true
}

/// The key a weight format's fused-MoE kernel is filed under.
/// The kernel families' weight formats, as keys of `configs/kernels/` sections.
pub const KERNEL_FORMATS: [&str; 7] =
    ["bf16", "fp8", "fp8-block", "int8", "int4", "mxfp4", "nvfp4"];

/// The format kind each of [`KERNEL_FORMATS`] computes from.
pub const KERNEL_FORMAT_KINDS: [FormatKind; 7] = [
    FormatKind::Bf16,
    FormatKind::Fp8,
    FormatKind::Fp8,
    FormatKind::Int8,
    FormatKind::Int4,
    FormatKind::Mxfp4,
    FormatKind::Nvfp4,
];

/// Index of a weight format's kernel family in [`KERNEL_FORMATS`].
pub fn kernel_format_index(w: WeightFormat) -> usize {
    match w.kind {
        FormatKind::Bf16 => 0,
        FormatKind::Fp8 if w.group_size > 0 => 2,
        FormatKind::Fp8 => 1,
        FormatKind::Int8 => 3,
        FormatKind::Int4 => 4,
        FormatKind::Mxfp4 => 5,
        FormatKind::Nvfp4 => 6,
    }
}

pub fn moe_key(w: WeightFormat) -> &'static str {
    match w.kind {
        FormatKind::Bf16 => "bf16",
        FormatKind::Fp8 if w.group_size > 0 => "fp8-block",
        FormatKind::Fp8 => "fp8",
        FormatKind::Int8 => "int8",
        FormatKind::Int4 => "int4",
        FormatKind::Mxfp4 => "mxfp4",
        FormatKind::Nvfp4 => "nvfp4",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's `key` is the name its `[moe_backends.<key>]` tables are read under.
    #[test]
    fn moe_library_keys_are_their_description_names() {
        for b in MoeBackend::ALL {
            let named: MoeBackend =
                serde_json::from_value(serde_json::Value::String(b.key().into())).unwrap();
            assert_eq!(named, b);
        }
    }

    #[test]
    fn attention_kernel_names_parse_to_their_library() {
        use AttentionBackend::*;
        for (name, b) in [
            ("vllm_flash_attn_fa2", Fa2),
            ("vllm_flash_attn_fa3", Fa3),
            ("vllm_flash_attn_fa4", Fa4),
            ("vllm_flashinfer_fidecode", Flashinfer),
            ("vllm_flashinfer_trtllmdecode", FlashinferTrtllm),
            ("vllm_triton_attn", Triton),
        ] {
            assert_eq!(AttentionBackend::from_kernel_name(name), Some(b), "{name}");
        }
        assert_eq!(AttentionBackend::from_kernel_name("cutlass_gemm"), None);
    }

    /// SM120's fits rest on its own tables (shared/measured/dev-sm120); what those tables do
    /// not measure is a prior. Where SM120 runs Ada's kernel for it (vLLM's Triton fused_moe
    /// for FP8 block-scaled and INT8 experts, the Triton MLA decode kernel), the prior is Ada's
    /// current fit, so a refit of Ada decides for both; Kimi's INT4 experts run the Marlin
    /// MoE kernel its MXFP4 rows measure, so [moe.int4] is that fit.
    #[test]
    fn sm120_priors_follow_the_fits_of_the_kernels_they_run() {
        let (ada, sm120) = (
            Generation::Ada.kernels(),
            Generation::BlackwellSm120.kernels(),
        );
        let unnamed = |m: &MoeKernel| {
            let mut m = m.clone();
            m.kernel.clear();
            format!("{m:?}")
        };
        for format in ["fp8-block", "int8"] {
            assert_eq!(
                unnamed(&ada.moe[format]),
                unnamed(&sm120.moe[format]),
                "[moe.{format}]"
            );
        }
        let mla = |k: &MlaDecodeKernel| {
            let mut k = k.clone();
            k.kernel.clear();
            format!("{k:?}")
        };
        assert_eq!(mla(&ada.mla_decode), mla(&sm120.mla_decode));
        // The same Marlin kernel: every constant alike but the compute fraction, which
        // rooftop reads against the FP4 peak for MXFP4 and the BF16 one for INT4 (Marlin
        // multiplies in BF16 for both; the FP4 peak is four times the BF16 one).
        let mut as_int4 = sm120.moe["mxfp4"].clone();
        as_int4.compute_fraction *= 4.0;
        assert_eq!(unnamed(&sm120.moe["int4"]), unnamed(&as_int4));
        assert_eq!(sm120.moe["int4"].backend, Some(MoeBackend::Marlin));
        // The measured kernels are SM120's own: FlashInfer CUTLASS for BF16, FP8 and NVFP4
        // experts, FlashAttention 2 for what predictions run.
        for format in ["bf16", "fp8", "nvfp4"] {
            assert_eq!(
                sm120.moe[format].backend,
                Some(MoeBackend::Cutlass),
                "{format}"
            );
        }
        assert_eq!(sm120.decode_attention.backend, Some(AttentionBackend::Fa2));
    }

    /// Ampere has no measured table: each section copies the measured fit of the kernel vLLM
    /// runs on it (Ada's FlashAttention 2, Triton fused_moe and Triton MLA; Ada's one measured
    /// Marlin MoE fit for every weight-only MoE format), so a refit of Ada moves both. Only the
    /// harness fields, which validate alone reads, are left at their defaults.
    #[test]
    fn ampere_priors_follow_the_fits_of_the_kernels_they_run() {
        let (ada, ampere) = (Generation::Ada.kernels(), Generation::Ampere.kernels());
        let moe = |m: &MoeKernel| {
            let mut m = m.clone();
            m.kernel.clear();
            m.backend = None;
            m.harness_warm_l2_speedup = 1.0;
            format!("{m:?}")
        };
        for (ampere_key, ada_key) in [
            ("bf16", "bf16"),
            ("int8", "int8"),
            ("fp8", "mxfp4"),
            ("fp8-block", "mxfp4"),
            ("int4", "mxfp4"),
            ("mxfp4", "mxfp4"),
            ("nvfp4", "mxfp4"),
        ] {
            assert_eq!(
                moe(&ampere.moe[ampere_key]),
                moe(&ada.moe[ada_key]),
                "[moe.{ampere_key}] copies Ada's [moe.{ada_key}]"
            );
        }
        let attention = |a: &DecodeAttentionKernel| {
            let mut a = a.clone();
            a.kernel.clear();
            a.harness_warm_l2_speedup = 1.0;
            a.harness_floor = Seconds(0.0);
            format!("{a:?}")
        };
        assert_eq!(
            attention(&ampere.decode_attention),
            attention(&ada.decode_attention)
        );
        let mla = |k: &MlaDecodeKernel| {
            let mut k = k.clone();
            k.kernel.clear();
            k.harness_floor = Seconds(0.0);
            format!("{k:?}")
        };
        assert_eq!(mla(&ampere.mla_decode), mla(&ada.mla_decode));
        // Every weight-only format computes in BF16 on a kernel that leaves the activations
        // alone; INT8 alone has tensor cores of its own.
        for key in ["fp8", "fp8-block", "int4", "mxfp4", "nvfp4"] {
            assert!(!ampere.gemm[key].quantize_activations, "[gemm.{key}]");
        }
        assert!(ampere.gemm["int8"].quantize_activations);
        assert!(ampere.sources["generation"].contains("priors"));
    }

    #[test]
    fn every_generation_file_parses_with_sources() {
        for g in ALL_GENERATIONS {
            let k = g.kernels();
            assert!(!k.moe.is_empty());
            assert_eq!(Generation::from_name(&k.generation), Some(g));
            if let Err((field, expected)) = k.validate() {
                panic!(
                    "configs/kernels/{}.toml: `{field}`: expected {expected}",
                    k.generation
                );
            }
        }
    }

    /// A refused format has a reason and no kernel; every other format has both kernels. The
    /// AMD generations refuse NVFP4 (no vLLM kernel on ROCm) and price every other format.
    #[test]
    fn refused_formats_have_a_reason_and_no_kernel() {
        for g in [Generation::Cdna3, Generation::Cdna4] {
            let k = g.kernels();
            assert_eq!(k.refused.keys().collect::<Vec<_>>(), ["nvfp4"]);
            let mut bad = k.clone();
            bad.refused.clear();
            assert_eq!(bad.validate().unwrap_err().0, "moe.nvfp4");
            let mut bad = k.clone();
            bad.refused.insert("fp8".into(), "why".into());
            assert_eq!(bad.validate().unwrap_err().0, "refused.fp8");
            let mut bad = k.clone();
            bad.refused.insert("nvfp4".into(), " ".into());
            assert_eq!(bad.validate().unwrap_err().0, "refused.nvfp4");
        }
        for g in [
            Generation::Ada,
            Generation::Hopper,
            Generation::BlackwellSm100,
        ] {
            assert!(g.kernels().refused.is_empty());
        }
    }

    /// A user's kernel file is checked like the embedded ones: an impossible fraction is an
    /// error naming its field, and a well-formed copy validates.
    #[test]
    fn kernel_files_are_validated_field_by_field() {
        let text = Generation::BlackwellSm120.file().1;
        let k: KernelConstants = toml::from_str(text).unwrap();
        assert!(k.validate().is_ok());
        let mut bad = k.clone();
        bad.moe.get_mut("nvfp4").unwrap().memory_fraction = 1.3;
        let (field, expected) = bad.validate().unwrap_err();
        assert_eq!(field, "moe.nvfp4.memory_fraction");
        assert!(expected.contains("(0, 1]"), "{expected}");
        let mut bad = k.clone();
        bad.gemm.get_mut("bf16").unwrap().harness_weight_copies = 0.5;
        assert_eq!(
            bad.validate().unwrap_err().0,
            "gemm.bf16.harness_weight_copies"
        );
        let mut bad = k;
        bad.sources.remove("moe");
        assert_eq!(bad.validate().unwrap_err().0, "sources.moe");
    }
}
