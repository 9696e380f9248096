//! Measured kernels against the model: each row of a kernel table
//! (`measured::kernel_table`) becomes the operator list the model would run for it, priced
//! by `cost::price::cost_all` on the table's GPU at speed of light, with default parameters
//! and (given a calibration) calibrated ones; then errors are summarised per GPU, family and
//! format.
//!
//! [`operators`] is the one place a row's shape becomes operators, one arm per family, so a
//! better kernel model changes what a family maps to here or how `cost/` prices it, and
//! every table, `rooftop validate` and the regression test see the change at once. Nothing
//! here fits anything: the summary is a measurement of the model, not an input to it.

use crate::cost::device::Harness;
use crate::cost::generation::{moe_key, AttentionBackend, Generation, MoeBackend};
use crate::cost::price::cost_all;
use crate::cost::{Bound, CostParams, Device, Pass};
use crate::error::{Error, Result};
use crate::measured::kernel_table::{
    CollectiveName, Family, KernelRow, KernelShape, KernelTable, MoeDtype, Routing,
};
use crate::ops::{
    collective_ops, gemm_ops, BlockKind, BuildContext, Category, CollectiveKind, Op, Operator,
    Parallel,
};
use crate::spec::{
    model::{ModelConfig, QuantSpec},
    registry, AllReduceImpl, KvDtype, ModelSpec, System, WeightFormat,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// The model DeepSeek-V3's MLA module rows are built from.
const MLA_MODEL: &str = "deepseek-v3-fp8";

/// One measured row beside the model's predictions, all in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct KernelCheckRow {
    /// `file:line` of the row.
    pub origin: String,
    pub gpu: String,
    pub system: String,
    pub family: Family,
    pub format: String,
    pub kernel: String,
    /// The measured shape, described.
    pub point: String,
    /// Unit of `measured`, `sol`, `default` and `calibrated`.
    pub unit: &'static str,
    pub measured: f64,
    pub sol: f64,
    pub default: f64,
    pub calibrated: Option<f64>,
    /// (default − measured) / measured: a signed relative error, as a fraction.
    pub default_error: f64,
    /// (calibrated − measured) / measured, as a fraction.
    pub calibrated_error: Option<f64>,
    /// The least time the hardware allows, us: the speed of light with every byte that
    /// fits in L2 free (a benchmark repeating the call may find its data there), i.e.
    /// max(compute, link and latency time at SOL, (DRAM bytes − L2) / bandwidth).
    pub floor: f64,
    /// Measured below `floor`: the model's mapping of this row (or its bound) is wrong.
    pub below_floor: bool,
}

/// Errors of one group of rows (fractions).
#[derive(Debug, Clone, Serialize)]
pub struct ErrorSummary {
    pub gpu: String,
    pub family: Family,
    /// The format, or `all` for the family as a whole.
    pub format: String,
    pub n: usize,
    /// Median of |default error|.
    pub median_abs_error: f64,
    /// 90th percentile of |default error|.
    pub p90_abs_error: f64,
    /// Mean signed default error: above 0, the model is slow on average.
    pub mean_signed_error: f64,
}

/// Micro-seconds: the one unit every row is reported in.
pub const UNIT: &str = "us";

/// The system a table is priced on: `given` when its GPU is the one the table names (so
/// `--set` overrides and `--calibration` apply), else the first built-in system with the
/// named GPU, else `given` when the table names no GPU rooftop knows.
///
/// With `refuse_other` (a system the user named that no table of the run is measured on),
/// a table of another GPU is refused: a kernel measured on one GPU validates nothing about
/// another, and pricing it on the table's GPU instead would drop the user's `--system`.
pub fn system_for_table(table: &KernelTable, given: &System, refuse_other: bool) -> Result<System> {
    match &table.gpu {
        Some(g) if names_other_gpu(table, given) => {
            if refuse_other {
                return Err(Error::Measured {
                    file: table.file.clone(),
                    line: None,
                    message: format!(
                        "measured on GPU \"{g}\" (its file name), but --system \"{}\" has GPU \"{}\"; \
                         a kernel table of another GPU validates nothing (drop --system, or give \
                         a system with GPU \"{g}\")",
                        given.spec.name, given.gpu.name
                    ),
                });
            }
            system_with_gpu(g)
                .map_err(|e| Error::Scenario(format!("{}: names GPU \"{g}\" and {e}", table.file)))
        }
        _ => Ok(given.clone()),
    }
}

/// Whether `table` names a GPU rooftop knows other than `given`'s.
pub fn names_other_gpu(table: &KernelTable, given: &System) -> bool {
    table
        .gpu
        .as_ref()
        .is_some_and(|g| *g != given.gpu.name && registry::load_gpu(g).is_ok())
}

/// The built-in system that stands for `gpu`: the first single box with it (a kernel is
/// measured on one box; `8x-h100-nvlink`, not `2x8-h100-ib`, which sorts first), else the
/// first multi-node system with it.
pub fn system_with_gpu(gpu: &str) -> Result<System> {
    let mut multi_node = None;
    for n in registry::builtin_names(registry::Kind::System) {
        let s = System::load(n)?;
        if s.gpu.name == gpu {
            if s.spec.nodes.is_none() {
                return Ok(s);
            }
            multi_node.get_or_insert(s);
        }
    }
    multi_node.ok_or_else(|| {
        Error::Scenario(format!(
            "no built-in system uses GPU \"{gpu}\"; give --system to choose one"
        ))
    })
}

/// Every row of `table` on `system`, with `calibrated` parameters when given.
pub fn check_table(
    table: &KernelTable,
    system: &System,
    calibrated: Option<&CostParams>,
) -> Result<Vec<KernelCheckRow>> {
    let default = CostParams::default_for(system);
    let sol = CostParams::speed_of_light();
    let mla = if table.family == Family::MlaDecodeModule {
        Some(registry::load_model(MLA_MODEL)?)
    } else {
        None
    };
    let mut out = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let origin = format!("{}:{}", table.file, row.line);
        let pricing = RowPricing::of_row(&row.shape, &row.kernel, system, mla.as_ref()).map_err(
            |e| match e {
                Error::Scenario(m) => Error::Scenario(format!("{origin}: {m}")),
                e => e,
            },
        )?;
        let sys = &pricing.sys;
        let price = |p: &CostParams| pricing.price(p);
        let (s, d) = (price(&sol)?, price(&default)?);
        let c = calibrated.map(price).transpose()?;
        let floor = floor(&pricing.ops, sys)?;
        let measured = row.seconds;
        out.push(KernelCheckRow {
            origin,
            gpu: sys.gpu.name.clone(),
            system: sys.spec.name.clone(),
            family: table.family,
            format: row.format.clone(),
            kernel: row.kernel.clone(),
            point: describe(row),
            unit: UNIT,
            measured: measured * 1e6,
            sol: s * 1e6,
            default: d * 1e6,
            calibrated: c.map(|c| c * 1e6),
            default_error: (d - measured) / measured,
            calibrated_error: c.map(|c| (c - measured) / measured),
            floor: floor * 1e6,
            below_floor: measured < floor * (1.0 - 1e-9),
        });
    }
    Ok(out)
}

/// One measured call as its benchmark harness ran it, ready to price at any parameters: the
/// system as the harness ran it ([`system_for_row`]), the operators the row maps to, and the
/// harness's own costs ([`harness`]). The one pricing of a kernel row, shared by `validate`'s
/// tables and `calibrate`'s GEMM rows, so that a fit and its check see the same call.
pub struct RowPricing {
    sys: System,
    ops: Vec<Operator>,
    /// How the harness repeats the call (which data stay in L2 between repeats).
    repeats: Harness,
    /// An MLA module: its calls stay warm only when the whole module fits in L2.
    module: bool,
    /// The call alone, without its launch gap (a collective's measured kernel).
    call_only: bool,
    /// The harness's floor (the measured call is the slower of it and the kernel) and the
    /// cost it adds on top, seconds.
    harness_floor: f64,
    harness_add: f64,
}

impl RowPricing {
    /// A kernel table's row.
    pub fn of_row(
        shape: &KernelShape,
        kernel: &str,
        system: &System,
        mla: Option<&ModelSpec>,
    ) -> Result<RowPricing> {
        if let KernelShape::Gemm { m, n, k, dtype } = *shape {
            return RowPricing::of_gemm(m, n, k, dtype.format(), kernel, system);
        }
        let sys = system_for_row(system, shape);
        let mut ops = operators(shape, &sys, mla)?;
        // The MoE or attention library the row names runs its kernel.
        let named = MoeBackend::from_kernel_name(kernel);
        let attention = AttentionBackend::from_kernel_name(kernel);
        for o in &mut ops {
            match &mut o.op {
                Op::MoeGemm { backend, .. } => *backend = named,
                Op::Attention { backend, .. } => *backend = attention,
                _ => {}
            }
        }
        // A collective's measured call (nccl-tests, vLLM's in-graph benchmark) is the kernel
        // alone: its model latency already holds launch and barriers, so the gap between
        // kernels in a graph is not added. Eager calls keep their CPU launch cost.
        let call_only = matches!(
            shape,
            KernelShape::Nccl { .. } | KernelShape::VllmCustomAllreduce { graph: true, .. }
        );
        // The benchmark harness's own costs for this row (applied here only, never in
        // predictions): a floor the measured call is the slower of, and a cost added on top.
        let (harness_floor, harness_add) = harness(shape, attention, &sys)?;
        // The harness repeats the attention call on one cache, the MoE call on one set of
        // weights: a cache or weights that fit in L2 are read from there
        // (`harness_warm_l2_speedup`). (The GEMM harness cycles through copies of the
        // weights: [`RowPricing::of_gemm`].)
        let repeats = match shape {
            KernelShape::AttentionDecode { .. } | KernelShape::Moe { .. } => Harness::RepeatsOneSet,
            _ => Harness::None,
        };
        Ok(RowPricing {
            sys,
            ops,
            repeats,
            module: matches!(shape, KernelShape::MlaDecodeModule { .. }),
            call_only,
            harness_floor,
            harness_add,
        })
    }

    /// One GEMM call of a micro-benchmark (a GEMM CSV's row, which may be of any weight
    /// format): priced as a GEMM table's row of that shape, format and kernel.
    pub fn of_gemm(
        m: u64,
        n: u64,
        k: u64,
        format: WeightFormat,
        kernel: &str,
        system: &System,
    ) -> Result<RowPricing> {
        let mut sys = with_the_tables_kernels(system);
        name_gemm_family(&mut sys, format, kernel)?;
        let ops = gemm_ops(
            &sys.engine.unfused_dequant,
            m as f64,
            n as f64,
            k as f64,
            format,
        );
        let harness_floor = gemm_harness_floor(&sys, format, m, k, kernel)?;
        Ok(RowPricing {
            sys,
            ops,
            // The GEMM harness cycles through copies of the weights between repeats
            // (`harness_weight_copies`).
            repeats: Harness::CyclesWeightCopies,
            module: false,
            call_only: false,
            harness_floor,
            harness_add: 0.0,
        })
    }

    /// The measured call's time at parameters `p`, seconds: the harness's floor and added
    /// cost apply except at the speed of light.
    pub fn price(&self, p: &CostParams) -> Result<f64> {
        let mut dev = Device::new(&self.sys, *p)?;
        dev.harness = self.repeats;
        let mut costs = cost_all(&self.ops, &dev);
        // The MLA module's several calls share L2: they stay warm across the harness's
        // repeats only when the whole module (every projection's weights, the cache)
        // fits in it; a larger module evicts each call's data before its next repeat.
        if self.module && dev.fits_in_l2(costs.iter().map(|c| c.bytes).sum()) {
            dev.harness = Harness::RepeatsOneSet;
            costs = cost_all(&self.ops, &dev);
        }
        let t = costs
            .iter()
            .map(|c| if self.call_only { c.time } else { c.total() })
            .sum::<f64>();
        Ok(if p.is_sol() {
            t
        } else {
            t.max(self.harness_floor) + self.harness_add
        })
    }
}

/// The benchmark harness's costs for a row on its GPU's generation, as (floor, added) (a
/// GEMM row's: [`gemm_harness_floor`], through [`RowPricing::of_gemm`]):
/// - a decode attention row: its library's serial cost per (sequence, KV head) as the floor
///   (up to the batch it was seen at), and its flat eager cost added;
/// - an MLA module row: the backend's flat cost plus its serial cost per sequence, added
///   (CPU-side and per call, before the kernels run).
///
/// (0, 0) for other families.
fn harness(
    shape: &KernelShape,
    attention: Option<AttentionBackend>,
    sys: &System,
) -> Result<(f64, f64)> {
    Ok(match *shape {
        KernelShape::AttentionDecode {
            batch, kv_heads, ..
        } => {
            let dev = Device::new(sys, CostParams::default_for(sys))?;
            let k = dev.decode_attention_on(attention);
            let serial = k.harness_per_item_max_batch == 0 || batch <= k.harness_per_item_max_batch;
            let floor = if serial {
                k.harness_per_item.0 * batch as f64 * kv_heads as f64
            } else {
                0.0
            };
            (floor, k.harness_floor.0)
        }
        KernelShape::MlaDecodeModule { batch, .. } => {
            let k = &Generation::of(&sys.gpu)?.kernels().mla_decode;
            (
                0.0,
                k.harness_floor.0 + k.harness_per_sequence.0 * batch as f64,
            )
        }
        _ => (0.0, 0.0),
    })
}

/// A GEMM row's harness floor: the flat floor its kernel's constants name for the format (an
/// eager call's CPU-side cost; the measured call is the slower of it and the kernel),
/// raised by the kernel's `harness_scale_relayout` when its block scales must first be
/// copied into an aligned layout ([`scales_need_relayout`]), seconds.
fn gemm_harness_floor(
    sys: &System,
    format: WeightFormat,
    m: u64,
    k: u64,
    kernel: &str,
) -> Result<f64> {
    let g = Generation::of(&sys.gpu)?
        .kernels()
        .gemm
        .get(moe_key(format));
    let floor = g
        .and_then(|g| g.harness_floor.get(kernel))
        .map_or(0.0, |s| s.0);
    let relayout = if scales_need_relayout(m, k) {
        g.and_then(|g| g.harness_scale_relayout.get(kernel))
            .map_or(0.0, |s| s.0)
    } else {
        0.0
    };
    Ok(floor + relayout)
}

/// Whether an m x k activation's 1 x 128 block scales, stored column-major in FP32, need a
/// copy into a TMA-aligned layout before a kernel that loads them by TMA can read them: a
/// column of m scales must span whole 16-byte units (m a multiple of 4), unless there is
/// only one column (k within one 128-wide block), which no stride misaligns.
fn scales_need_relayout(m: u64, k: u64) -> bool {
    !m.is_multiple_of(4) && k > 128
}

/// The hardware's least time for `ops` (see [`KernelCheckRow::floor`]), seconds.
fn floor(ops: &[Operator], sys: &System) -> Result<f64> {
    let dev = Device::new(sys, CostParams::speed_of_light())?;
    let costs = cost_all(ops, &dev);
    // Attention over an FP8 cache may compute in FP8 (FlashMLA, TRT-LLM decode kernels):
    // its bound is the fastest of the BF16 and FP8 peaks, what an FP8 cache may reach.
    let attention_peak = dev.attention_peak(KvDtype::Fp8);
    let fixed: f64 = costs
        .iter()
        .map(|c| match c.bound {
            Bound::Memory => 0.0,
            Bound::Compute if c.category == Category::Attention => c.flops / attention_peak,
            _ => c.time,
        })
        .sum();
    let dram: f64 = costs
        .iter()
        .filter(|c| !matches!(c.bound, Bound::Link | Bound::Latency))
        .map(|c| c.bytes)
        .sum();
    let l2 = sys.gpu.l2_cache.map_or(0.0, |b| b.0);
    // What fits in L2 is not free: it still crosses L2, at most at its bandwidth (a stated
    // prior bound; `GpuSpec::l2_bandwidth`). Without this a call small enough to fit had a
    // floor of zero, and a row of 0.1 ns passed as a measurement.
    let cached = dram.min(l2) / sys.gpu.l2_bandwidth().unwrap_or(dev.mem_bw);
    Ok(fixed.max((dram - l2).max(0.0) / dev.mem_bw).max(cached))
}

/// How far below the floor a row must be to be refused rather than flagged. The floor
/// rests on the family's mapping of the row to operators, which for some families is an
/// estimate (experts touched under a routing, the dtype an attention kernel computes in), so
/// a row a little below it says the mapping is off; a row at half of it says the data is
/// (a wrong unit, GPU or shape).
pub const REFUSE_BELOW_FLOOR: f64 = 0.5;

/// Rows measured faster than the hardware allows by more than [`REFUSE_BELOW_FLOOR`]:
/// `(origin, measured us, floor us)`.
pub fn implausible(rows: &[KernelCheckRow]) -> Vec<(&str, f64, f64)> {
    rows.iter()
        .filter(|r| r.measured < r.floor * REFUSE_BELOW_FLOOR)
        .map(|r| (r.origin.as_str(), r.measured, r.floor))
        .collect()
}

/// `system` running the kernels the tables measured, one engine's kernel selection (vLLM
/// 0.24): the generation's `[gemm.*]` families, whatever another engine version runs
/// instead, and each quantized format computed by the kernel the row names on its own
/// weights (FlashInfer's CUTLASS NVFP4 GEMMs and MoE run FP4 natively on SM120 there), with
/// no cast pass that an older engine's path put before it.
fn with_the_tables_kernels(system: &System) -> System {
    let mut s = system.clone();
    s.engine.gemm_family.clear();
    s.engine.unfused_dequant.clear();
    s
}

/// The system as the measured harness ran it: NCCL rows with NCCL alone, vLLM custom
/// all-reduce rows with the custom kernel (eager rows without CUDA graphs). (A GEMM row's:
/// [`RowPricing::of_gemm`].)
fn system_for_row(system: &System, shape: &KernelShape) -> System {
    let mut s = with_the_tables_kernels(system);
    match shape {
        KernelShape::Nccl { .. } => {
            // nccl-tests: NCCL alone, its tuner free to pick algorithm and protocol.
            s.engine.allreduce = AllReduceImpl::Nccl;
            s.engine.nccl_algorithm = crate::spec::NcclAlgorithm::Auto;
            s.engine.nccl_protocol = crate::spec::NcclProtocol::Auto;
        }
        KernelShape::VllmCustomAllreduce { graph, .. } => {
            s.engine.allreduce = AllReduceImpl::Custom;
            s.engine.cuda_graphs = *graph;
        }
        _ => {}
    }
    s
}

/// A GEMM of `format` through `kernel`: the generation's family of that name where it has one
/// for the format (`[gemm_families.<kernel>.<format>]`), at that family's constants (a fit to
/// the table's kernel that predictions do not use), else its default GEMM.
fn name_gemm_family(s: &mut System, format: WeightFormat, kernel: &str) -> Result<()> {
    let key = moe_key(format);
    let named = Generation::of(&s.gpu)?
        .kernels()
        .gemm_families
        .get(kernel)
        .is_some_and(|f| f.contains_key(key));
    if named {
        s.engine
            .gemm_family
            .insert(key.to_string(), kernel.to_string());
    }
    Ok(())
}

fn format(s: &str) -> WeightFormat {
    s.parse().expect("built-in weight format names parse")
}

/// Weight format an MoE (or MLA projection) dtype is stored in. W4A16 Marlin: INT4 with a
/// BF16 scale per 128 weights; MXFP4 variants as MXFP4 (their activation precision is not
/// yet a separate kernel family).
fn moe_format(d: MoeDtype) -> WeightFormat {
    match d {
        MoeDtype::Bf16 => WeightFormat::BF16,
        MoeDtype::Fp8 => format("fp8"),
        MoeDtype::Fp8Block => format("fp8-block128"),
        MoeDtype::Int4Wo => format("int4-g128"),
        MoeDtype::W4a16Mxfp4 | MoeDtype::W4a8Mxfp4Mxfp8 => format("mxfp4"),
        MoeDtype::Nvfp4 => format("nvfp4"),
    }
}

/// A model description holding only what a row's builder reads.
fn bare_model(config: ModelConfig, quant: QuantSpec) -> ModelSpec {
    ModelSpec {
        name: "kernel-table-row".into(),
        full_name: "shape of one measured kernel".into(),
        architecture: String::new(),
        published_total_params: None,
        published_active_params: None,
        config,
        quantization: quant,
        routing: Default::default(),
        eagle_head: None,
        vision: None,
        sources: BTreeMap::new(),
    }
}

fn quant(default: WeightFormat, kv_cache: KvDtype) -> QuantSpec {
    QuantSpec {
        default,
        attention: None,
        dense_mlp: None,
        shared_experts: None,
        routed_experts: None,
        lm_head: None,
        embedding: None,
        router: None,
        kv_cache,
    }
}

/// The operators one GPU runs for a measured row: the one place each family's rows map to
/// the model (the MoE library the row names is set by the caller).
pub fn operators(
    shape: &KernelShape,
    system: &System,
    mla_model: Option<&ModelSpec>,
) -> Result<Vec<Operator>> {
    let unfused = &system.engine.unfused_dequant;
    // A collective over more GPUs than the system has ran on another system: refused, as
    // calibrate refuses it, not priced over GPUs that are not there.
    if let KernelShape::Nccl { gpus, .. } | KernelShape::VllmCustomAllreduce { gpus, .. } = *shape {
        if gpus > system.spec.gpu_count {
            return Err(Error::Scenario(format!(
                "a collective over {gpus} GPUs, but {} has {}: measured on another system",
                system.spec.name, system.spec.gpu_count
            )));
        }
    }
    Ok(match *shape {
        KernelShape::Gemm { m, n, k, dtype } => {
            gemm_ops(unfused, m as f64, n as f64, k as f64, dtype.format())
        }
        KernelShape::Moe {
            dtype,
            tokens,
            hidden,
            inter,
            topk,
            experts,
            tp,
            ep,
            routing,
            gated,
        } => {
            let config = ModelConfig {
                num_hidden_layers: 1,
                hidden_size: hidden as u32,
                num_attention_heads: 1,
                moe_intermediate_size: Some(inter as u32),
                n_routed_experts: Some(experts),
                num_experts_per_tok: Some(topk),
                vocab_size: 1,
                // An ungated expert is two matrices (up, down), as the model reads `relu2`.
                mlp_hidden_act: (!gated).then(|| "relu2".to_string()),
                ..Default::default()
            };
            let mut model = bare_model(config, quant(moe_format(dtype), KvDtype::Bf16));
            // The row's routing skew: the busiest EP rank sets the kernel's time. The
            // tables' `balanced` rows deal each token's picks to the experts in turn
            // (aiconfigurator's collector, `balanced_logits`: token i's j-th pick is expert
            // `(i + j × ceil(E / k)) mod E`, spread over the stride when there are fewer
            // tokens than it [U: the collector as recalled, not read in this repository]),
            // so `tokens × k` pairs touch `min(E, tokens × k)` experts, not the fewer that
            // uniform random picks would. The tables bear it: the top-1 rows of 128 experts
            // run 1.2-1.4x over their uniform-routing prediction (t=160 h=5120: 23.9 ms
            // measured, 92 experts expected uniformly, 128 dealt in turn).
            // A shape whose model's router is group-limited (DeepSeek-V3's keeps 4 of 8
            // groups; configs/kernel-tables/moe-experts.toml) passes the deal through it.
            let limit = crate::measured::moe_experts::ExpertShapes::builtin()?
                .group_limited(hidden, inter, topk, experts);
            model.routing = match routing {
                Routing::Balanced => match limit {
                    Some(l) => crate::ops::routing::Routing::RoundRobinGroupLimited {
                        groups: l.groups,
                        topk_groups: l.topk_groups,
                    },
                    None => crate::ops::routing::Routing::RoundRobin,
                },
                Routing::Uniform => crate::ops::routing::Routing::Balanced,
                Routing::PowerLaw(a) => crate::ops::routing::Routing::PowerLaw(a),
            };
            // moe_tp = tp·dp/ep = the row's tp with its ep expert groups.
            let par = Parallel {
                tp: tp * ep,
                ep,
                pp: 1,
                dp: 1,
                redundant_experts: 0,
            };
            let cx = BuildContext::new(&model, par, unfused, Pass::decode(tokens as f64, 0.0));
            let mut v = Vec::new();
            crate::ops::moe::moe_ops(&cx, &mut v);
            // The table excludes the router.
            v.retain(|o| !o.name.starts_with("router"));
            v
        }
        KernelShape::AttentionDecode {
            batch,
            context,
            heads,
            kv_heads,
            head_dim,
            kv_dtype,
            window,
        } => {
            let config = ModelConfig {
                num_hidden_layers: 1,
                hidden_size: heads * head_dim,
                num_attention_heads: heads,
                num_key_value_heads: Some(kv_heads),
                head_dim: Some(head_dim),
                vocab_size: 1,
                ..Default::default()
            };
            let model = bare_model(config, quant(WeightFormat::BF16, kv_dtype));
            // `context` is the KV length including the new token.
            let pass = Pass::decode(batch as f64, (context as f64 - 1.0).max(0.0));
            let cx = BuildContext::new(&model, Parallel::tp(1), unfused, pass);
            let w = (window > 0).then_some(window as u32);
            let mut v = Vec::new();
            let (kv_heads, head_dim) = model.gqa_shape_of_layer(0);
            cx.block_ops(
                BlockKind::Attention {
                    window: w,
                    chunked: false,
                    kv_heads,
                    head_dim,
                    indexer: false,
                    compress: 0,
                },
                &mut v,
            );
            v.retain(|o| o.category == Category::Attention);
            v
        }
        KernelShape::MlaDecodeModule {
            heads,
            batch,
            context,
            kv_dtype,
            gemm_dtype,
        } => {
            let base = mla_model.ok_or_else(|| {
                Error::Scenario(format!("the MLA rows need the {MLA_MODEL} description"))
            })?;
            let all = base.config.num_attention_heads;
            if heads == 0 || all % heads != 0 {
                return Err(Error::Scenario(format!(
                    "`heads` = {heads} does not divide {MLA_MODEL}'s {all} heads"
                )));
            }
            let mut model = base.clone();
            model.quantization.attention = Some(moe_format(gemm_dtype));
            model.quantization.kv_cache = kv_dtype;
            let pass = Pass::decode(batch as f64, (context as f64 - 1.0).max(0.0));
            let cx = BuildContext::new(&model, Parallel::tp(all / heads), unfused, pass);
            let mut v = Vec::new();
            cx.block_ops(BlockKind::mixer(&model, 0), &mut v);
            // Projections and the latent attention: not the layer's norm or all-reduce.
            v.retain(|o| o.category != Category::Allreduce && o.name != "input_layernorm");
            v
        }
        KernelShape::Nccl {
            collective,
            gpus,
            bytes,
        } => {
            let (kind, per_rank) = match collective {
                CollectiveName::AllReduce => (CollectiveKind::AllReduce, bytes as f64),
                // nccl-tests convention: the size is the gathered (or scattered) buffer;
                // each rank contributes 1/n of it.
                CollectiveName::AllGather => {
                    (CollectiveKind::AllGather, bytes as f64 / gpus as f64)
                }
                CollectiveName::ReduceScatter => (CollectiveKind::ReduceScatter, bytes as f64),
                CollectiveName::AllToAll => (CollectiveKind::AllToAll, bytes as f64),
            };
            collective_ops("nccl", kind, per_rank, gpus)
        }
        KernelShape::VllmCustomAllreduce { gpus, bytes, .. } => collective_ops(
            "custom_allreduce",
            CollectiveKind::AllReduce,
            bytes as f64,
            gpus,
        ),
    })
}

/// The row's shape in a few words.
fn describe(r: &KernelRow) -> String {
    match &r.shape {
        KernelShape::Gemm { m, n, k, .. } => format!("gemm {} m={m} n={n} k={k}", r.format),
        KernelShape::Moe {
            tokens,
            hidden,
            inter,
            topk,
            experts,
            tp,
            ep,
            routing,
            gated,
            ..
        } => format!(
            "moe {} t={tokens} h={hidden} i={inter} top{topk}/{experts} tp{tp} ep{ep} {}{}",
            r.format,
            match routing {
                Routing::Balanced => "balanced".to_string(),
                Routing::Uniform => "uniform".to_string(),
                Routing::PowerLaw(a) => format!("power-law {a}"),
            },
            if *gated { "" } else { " ungated" }
        ),
        KernelShape::AttentionDecode {
            batch,
            context,
            heads,
            kv_heads,
            head_dim,
            window,
            ..
        } => format!(
            "attention b={batch} ctx={context} h={heads}/{kv_heads}x{head_dim} win={window} {}",
            r.format
        ),
        KernelShape::MlaDecodeModule {
            heads,
            batch,
            context,
            ..
        } => format!("mla h={heads} b={batch} ctx={context} {}", r.format),
        KernelShape::Nccl { gpus, bytes, .. } => {
            format!("{} {gpus} GPUs {bytes} B", r.format)
        }
        KernelShape::VllmCustomAllreduce { gpus, bytes, .. } => {
            format!("custom all-reduce {} {gpus} GPUs {bytes} B", r.format)
        }
    }
}

/// The `q`-quantile of sorted `v` (linear interpolation), NaN when empty.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let x = q * (v.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
}

fn summary_of(gpu: &str, family: Family, format: &str, errs: &[f64]) -> ErrorSummary {
    let mut abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    ErrorSummary {
        gpu: gpu.to_string(),
        family,
        format: format.to_string(),
        n: errs.len(),
        median_abs_error: quantile(&abs, 0.5),
        p90_abs_error: quantile(&abs, 0.9),
        mean_signed_error: errs.iter().sum::<f64>() / errs.len().max(1) as f64,
    }
}

/// Per GPU and family: one summary over all its rows (format `all`), then one per format.
pub fn summarize(rows: &[KernelCheckRow]) -> Vec<ErrorSummary> {
    let mut groups: BTreeMap<(String, Family, String), Vec<f64>> = BTreeMap::new();
    for r in rows {
        for f in ["all", r.format.as_str()] {
            groups
                .entry((r.gpu.clone(), r.family, f.to_string()))
                .or_default()
                .push(r.default_error);
        }
    }
    let mut out: Vec<ErrorSummary> = groups
        .iter()
        .map(|((g, fam, f), e)| summary_of(g, *fam, f, e))
        .collect();
    // `all` first within each GPU and family.
    out.sort_by(|a, b| {
        (&a.gpu, a.family, a.format != "all", &a.format).cmp(&(
            &b.gpu,
            b.family,
            b.format != "all",
            &b.format,
        ))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measured::kernel_table::parse_kernel_table;
    use crate::spec::FormatKind;

    /// A one-row MoE table: the family's columns, then `last` (a column name) and `row`.
    fn moe_table(last: &str, row: &str) -> KernelTable {
        let head = Family::Moe.columns().join(",");
        parse_kernel_table(&format!("{head},latency_ms,{last}\n{row}\n"), "t.csv").unwrap()
    }

    #[test]
    fn marlin_mxfp4_rows_run_the_marlin_library_on_mxfp4_bytes() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        let row = |kernel: &str| {
            let table = moe_table(
                "kernel",
                &format!("w4a16_mxfp4,8,2880,2880,4,128,1,1,balanced,0.1,{kernel}"),
            );
            let r = &table.rows[0];
            let ops = operators(&r.shape, &sys, None).unwrap();
            let w = ops
                .iter()
                .find_map(|o| match o.op {
                    crate::ops::Op::MoeGemm { weights, .. } => Some(weights),
                    _ => None,
                })
                .unwrap();
            (
                w,
                MoeBackend::from_kernel_name(&r.kernel),
                check_table(&table, &sys, None).unwrap()[0].default,
            )
        };
        let (marlin, marlin_lib, marlin_us) =
            row("vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts");
        let (trtllm, trtllm_lib, trtllm_us) =
            row("vllm_gptossmxfp4moe_flashinfer_trtllm_mxfp4_bf16_trtllmmxfp4expertsmonolithic");
        assert_eq!(marlin_lib, Some(MoeBackend::Marlin));
        assert_eq!(trtllm_lib, Some(MoeBackend::Trtllm));
        // The same bytes: 4 bits and an 8-bit scale per 32 weights.
        assert_eq!(marlin.kind, FormatKind::Mxfp4);
        assert!((marlin.bits_per_weight() - 4.25).abs() < 1e-12);
        assert_eq!(marlin.bits_per_weight(), trtllm.bits_per_weight());
        // Different libraries, different prices.
        assert!(
            (marlin_us - trtllm_us).abs() > 1.0,
            "{marlin_us} {trtllm_us}"
        );
    }

    /// An ungated expert (up, down) is two matrices where a gated one (gate, up, down) is
    /// three: a row whose experts all stream from DRAM (256 tokens over 64 experts) and a
    /// compute-bound one (16,384 tokens over 8) are each priced at about 2/3 of the gated
    /// reading of the same shape.
    #[test]
    fn ungated_expert_rows_stream_and_compute_two_matrices_of_three() {
        let sys = System::load("8x-h100-nvlink").unwrap();
        for (tokens, experts, topk) in [(256, 64, 8), (16384, 8, 2)] {
            let price = |activation: &str| {
                let table = moe_table(
                    "activation",
                    &format!(
                        "bfloat16,{tokens},4096,4096,{topk},{experts},1,1,balanced,1.0,{activation}"
                    ),
                );
                check_table(&table, &sys, None).unwrap()[0].clone()
            };
            let (gated, ungated) = (price("silu"), price("relu2"));
            let ratio = ungated.default / gated.default;
            assert!(
                ratio > 0.6 && ratio < 0.75,
                "{tokens} tokens: default {ratio}"
            );
            let sol_ratio = ungated.sol / gated.sol;
            assert!(
                sol_ratio > 0.6 && sol_ratio < 0.7,
                "{tokens} tokens: sol {sol_ratio}"
            );
        }
    }

    /// A `balanced` row is the collector's dealt routing: 160 top-1 tokens over 128 experts
    /// touch all 128, where `uniform` picks touch about 92 (E (1 - (1 - 1/E)^160)); with
    /// the expert weights streaming from DRAM the dealt row costs about 128/92 as much.
    #[test]
    fn balanced_rows_deal_their_picks_and_uniform_rows_pick_at_random() {
        let sys = System::load("8x-h100-nvlink").unwrap();
        let price = |distribution: &str| {
            let table = moe_table(
                "kernel",
                &format!("fp8,160,5120,8192,1,128,1,1,{distribution},1.0,x"),
            );
            check_table(&table, &sys, None).unwrap()[0].default
        };
        let ratio = price("balanced") / price("uniform");
        assert!(ratio > 1.25 && ratio < 128.0 / 92.0 + 0.01, "{ratio}");
    }

    /// A DeepGEMM row whose block scales need the aligned copy (m not a multiple of 4, k
    /// over one 128-wide block) carries the harness's relayout cost on top of its floor;
    /// an aligned m, a single block of k, and the CUTLASS kernel (which reads the scales
    /// as they are) do not.
    #[test]
    fn deepgemm_rows_with_unaligned_scales_pay_the_relayout() {
        let sys = System::load("8x-b200-nvlink").unwrap();
        let price = |m: u64, k: u64, kernel: &str| {
            let t = format!("m,n,k,dtype,latency_ms,kernel\n{m},512,{k},fp8_block,0.2,{kernel}\n");
            let table = parse_kernel_table(&t, "t.csv").unwrap();
            check_table(&table, &sys, None).unwrap()[0].default
        };
        let deep = "DeepGemmFp8BlockScaledMMKernel";
        let cutlass = "CutlassFp8BlockScaledMMKernel";
        assert!(scales_need_relayout(6, 4096));
        assert!(!scales_need_relayout(8, 4096));
        assert!(!scales_need_relayout(7, 128));
        let relayout = price(6, 4096, deep) - price(8, 4096, deep);
        assert!(relayout > 20.0, "relayout {relayout} us");
        assert!((price(7, 128, deep) - price(8, 128, deep)).abs() < 1.0);
        assert!((price(6, 4096, cutlass) - price(8, 4096, cutlass)).abs() < 1.0);
    }

    /// An MLA module row runs warm (its BF16 projections at the harness's L2 speedup) only
    /// when the whole module fits in L2: on L40S (96 MB L2) 16 heads' BF16 module (about 73
    /// MB) is priced below the same row's cold price, 64 heads' (about 190 MB) exactly at it.
    #[test]
    fn mla_rows_run_warm_only_when_the_whole_module_fits_in_l2() {
        let sys = System::load("8x-l40s-pcie").unwrap();
        let mla = registry::load_model(MLA_MODEL).unwrap();
        for (heads, warm) in [(16, true), (64, false)] {
            let t = format!(
                "heads,batch,context,kv_dtype,gemm_dtype,latency_ms\n\
                 {heads},2,8,bfloat16,bfloat16,0.1\n"
            );
            let table = parse_kernel_table(&t, "t.csv").unwrap();
            let priced = check_table(&table, &sys, None).unwrap()[0].default * 1e-6;
            let ops = operators(&table.rows[0].shape, &sys, Some(&mla)).unwrap();
            let cold_dev = Device::new(&sys, CostParams::default_for(&sys)).unwrap();
            let cold: f64 = cost_all(&ops, &cold_dev).iter().map(|c| c.total()).sum();
            let (floor, added) = harness(&table.rows[0].shape, None, &sys).unwrap();
            let cold = cold.max(floor) + added;
            if warm {
                assert!(
                    priced < cold * 0.99,
                    "{heads} heads: {priced} vs cold {cold}"
                );
            } else {
                assert!((priced - cold).abs() <= cold * 1e-12, "{heads} heads");
            }
        }
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert!((quantile(&v, 0.9) - 4.6).abs() < 1e-12);
    }

    #[test]
    fn every_family_prices_above_zero_and_sol_below_default() {
        let sys = System::load("8x-h100-nvlink").unwrap();
        let text = [
            "m,n,k,dtype,latency_ms\n4096,4096,4096,fp8,0.1\n",
            "dtype,tokens,hidden,inter,topk,experts,tp,ep,distribution,latency_ms\n\
             fp8_block,64,7168,2048,8,256,8,1,balanced,0.1\n",
            "batch,context,heads,kv_heads,head_dim,kv_dtype,window,latency_ms\n\
             8,4096,32,8,128,fp8,0,0.1\n",
            "heads,batch,context,kv_dtype,gemm_dtype,latency_ms\n16,8,4096,fp8,fp8_block,0.1\n",
            "collective,gpus,bytes,latency_ms\nall_gather,8,1048576,0.1\n",
            "gpus,bytes,mode,latency_ms\n8,1048576,vllm_eager,0.1\n",
        ];
        for t in text {
            let table = parse_kernel_table(t, "t.csv").unwrap();
            let rows = check_table(&table, &sys, None).unwrap();
            let r = &rows[0];
            assert!(r.sol > 0.0 && r.sol <= r.default, "{t}: {r:?}");
            assert!((r.default_error - (r.default - r.measured) / r.measured).abs() < 1e-12);
        }
    }

    /// The speed of light of a benchmark attention call whose cache fits in L2 streams it at
    /// the L2 bound: never above the DRAM speed of light of the same bytes, never above the
    /// model's prediction; a cache larger than L2 keeps the DRAM speed of light of what L2
    /// cannot hold.
    #[test]
    fn l2_resident_attention_sol_is_under_the_dram_sol_and_the_model() {
        for sys in ["8x-h100-nvlink", "8x-l40s-pcie", "8x-b200-nvlink"] {
            let sys = System::load(sys).unwrap();
            let (mem, l2) = (
                sys.gpu.memory_bandwidth.0,
                sys.gpu.l2_bandwidth().expect("dev GPUs describe their L2"),
            );
            assert!(l2 >= mem);
            // (batch, context): 8 x 1024 x 8 heads x 128 x 2 x 2 B = 33.6 MB fits in every
            // L2 here; 64 x 32768 (2.1 GB) fits in none.
            for (batch, context, fits) in [(8u64, 1024u64, true), (64, 32768, false)] {
                for dtype in ["bfloat16", "fp8"] {
                    let t = format!(
                        "batch,context,heads,kv_heads,head_dim,kv_dtype,window,latency_ms\n\
                         {batch},{context},32,8,128,{dtype},0,0.1\n"
                    );
                    let table = parse_kernel_table(&t, "t.csv").unwrap();
                    let r = &check_table(&table, &sys, None).unwrap()[0];
                    let elem = if dtype == "fp8" { 1.0 } else { 2.0 };
                    let kv = (batch * context * 8 * 128 * 2) as f64 * elem;
                    let dram_sol = kv / mem * 1e6;
                    assert!(r.sol <= r.default, "{}: {r:?}", sys.spec.name);
                    if fits {
                        assert!(r.sol < dram_sol, "{}: {r:?}", sys.spec.name);
                        assert!(r.sol >= 0.99 * kv / l2 * 1e6, "{}: {r:?}", sys.spec.name);
                    } else {
                        // What L2 cannot hold comes from DRAM at every repeat.
                        let l2_bytes = sys.gpu.l2_cache.unwrap().0;
                        let rest = (kv - l2_bytes) / mem * 1e6;
                        assert!(
                            r.sol >= rest && r.sol < dram_sol,
                            "{}: {r:?}",
                            sys.spec.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn summary_reports_the_median_and_the_bias() {
        let row = |e: f64, f: &str| KernelCheckRow {
            origin: String::new(),
            gpu: "g".into(),
            system: "s".into(),
            family: Family::Gemm,
            format: f.into(),
            kernel: String::new(),
            point: String::new(),
            unit: UNIT,
            measured: 1.0,
            sol: 0.5,
            default: 1.0 + e,
            calibrated: None,
            default_error: e,
            calibrated_error: None,
            floor: 0.0,
            below_floor: false,
        };
        let s = summarize(&[row(-0.1, "a"), row(0.2, "a"), row(0.4, "b")]);
        assert_eq!(s[0].format, "all");
        assert_eq!(s[0].n, 3);
        assert!((s[0].median_abs_error - 0.2).abs() < 1e-12);
        assert!((s[0].mean_signed_error - 0.5 / 3.0).abs() < 1e-12);
        assert_eq!(s[1].format, "a");
        assert_eq!(s[1].n, 2);
    }
}
