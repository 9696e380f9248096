//! The command line: clap definitions only. Validated options become scenarios in
//! `commands/`.

use crate::cost::Parallel;
use crate::export::Format;
use crate::options::{
    AcceptanceArg, CpuMicros, DraftKind, DraftLengths, Duration, Positive, Systems, Values,
};
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "rooftop",
    version,
    about = "Analytical performance model and roofline for LLM inference",
    long_about = "Analytical performance model and roofline for LLM inference.\n\n\
With no subcommand, runs the embedded default scenario: Kimi-K2.5 INT4 on the team's\n\
8 x RTX PRO 6000 PCIe box, compared with its measurement (same as `rooftop validate`\n\
with the built-in measurement k25b6000bench1).",
    after_help = "Examples:\n  rooftop predict --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --batch 1\n  rooftop op gemm --gpu h200 --m 16 --n 7168 --k 2048 --dtype int4\n  rooftop list models\n  rooftop show 8x-rtx-pro-6000-pcie"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// With no subcommand: write the default charts into this folder (default: plots/ of
    /// the rooftop checkout when run inside it; elsewhere none are written).
    #[arg(long, value_name = "DIR")]
    pub plots: Option<std::path::PathBuf>,
    /// Kernel constants of a GPU generation in place of the built-in ones (a file in the
    /// form of configs/kernels/*.toml; its `generation` names which it replaces), for every
    /// command of this run: your own fit of a generation, or a trial of new constants.
    /// Repeatable, one file per generation.
    #[arg(long, value_name = "FILE", global = true)]
    pub kernels: Vec<std::path::PathBuf>,
}

/// Read the `--kernels` files and install them for the rest of the run.
pub fn install_kernels(files: &[std::path::PathBuf]) -> crate::error::Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let mut texts = Vec::with_capacity(files.len());
    for f in files {
        let text = crate::files::read_text(f)?;
        texts.push((f.display().to_string(), text));
    }
    crate::cost::generation::install_kernel_files(&texts)
}

/// Where a bare `rooftop` writes its charts: `--plots DIR`, else `plots/` of the checkout
/// the binary was built from when the working folder is inside it, else nowhere (a tool
/// run from another folder must not litter it).
pub fn default_plots_dir(
    plots: Option<&std::path::Path>,
    cwd: &std::path::Path,
) -> Option<std::path::PathBuf> {
    if let Some(p) = plots {
        return Some(p.to_path_buf());
    }
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let inside = match (cwd.canonicalize(), checkout.canonicalize()) {
        (Ok(c), Ok(k)) => c.starts_with(&k),
        _ => false,
    };
    inside.then(|| checkout.join("plots"))
}

/// The model of `--model` when none is given: the team's deployment.
pub const DEFAULT_MODEL: &str = "kimi-k2.5-int4";
/// The system of `--system` when none is given: the team's box.
pub const DEFAULT_SYSTEM: &str = "8x-rtx-pro-6000-pcie";

/// The model/system/layout every prediction command takes.
#[derive(Debug, Args, Clone)]
pub struct ScenarioArgs {
    /// Model: a built-in name (see `rooftop list models`), a model TOML, or an HF config.json
    /// (or the checkpoint folder that holds one).
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// System: a built-in name (see `rooftop list systems`) or a path to a system TOML.
    #[arg(long, default_value = DEFAULT_SYSTEM)]
    pub system: String,
    /// Serving engine in place of the system's default: a built-in (see `rooftop list
    /// engines`: vllm-v1, vllm-v1-async, sglang, trtllm) or a path to an engine TOML.
    #[arg(long)]
    pub engine: Option<String>,
    /// Tensor-parallel degree (default: the system's GPUs / (pp × dp)).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub tp: Option<u32>,
    /// Expert-parallel groups among the tp × dp GPUs of a stage (default 1).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub ep: Option<u32>,
    /// Pipeline stages (default 1).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub pp: Option<u32>,
    /// Data-parallel attention replicas (default 1).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub dp: Option<u32>,
    /// EPLB's redundant expert slots per expert-parallel group (default 0): replicas of the
    /// busiest experts that balance the groups' loads. vLLM's `num_redundant_experts` and
    /// SGLang's `--ep-num-redundant-experts` count them over all groups (this × ep).
    #[arg(value_parser = crate::options::slots_u32, long)]
    pub redundant_experts: Option<u32>,
    /// Predict with parameters fitted by `rooftop calibrate` (a calibration TOML).
    #[arg(long)]
    pub calibration: Option<String>,
    /// Apply a calibration fitted on another model, system, engine or layout, carrying over
    /// only the engine's fixed costs (kernel gap, launch, step overhead), not the
    /// efficiencies of another GPU or link.
    #[arg(long, requires = "calibration")]
    pub transfer_calibration: bool,
    /// Override a description field for this run, with units: gpu.memory_bandwidth="2.4 TB/s",
    /// interconnect.bandwidth="128 GB/s", system.interconnect=nvlink5, system.cuda_graphs=false,
    /// efficiency.memory=0.9, model.quantization.routed_experts=nvfp4. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Measured files and what they do not say.
#[derive(Debug, Args, Clone)]
pub struct MeasuredArgs {
    /// Measured files (the team's log, vLLM benchmark JSON, nccl-tests output, GEMM CSV,
    /// profiler trace, rooftop measurement TOML) or built-in measurement names; for
    /// `validate`, also kernel tables (gemm, moe, attention_decode, mla_decode_module, nccl,
    /// vllm_custom_allreduce columns) or a directory of them.
    #[arg(long, num_args = 1.., default_value = "k25b6000bench1")]
    pub measured: Vec<String>,
    /// Prompt length to assume where a measurement does not give it (the team's record does
    /// not: 32 tokens stands for a short chat prompt with its template).
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 32)]
    pub assume_input_len: u32,
    /// Output length to assume where a measurement does not give it.
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 32)]
    pub assume_output_len: u32,
    /// The client that took the measurements (see `rooftop list clients`), e.g. team-macro.
    #[arg(long)]
    pub client: Option<String>,
    /// GPUs in nccl-tests output that does not say.
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub nccl_gpus: Option<u32>,
    /// Concurrency at which a profiler trace was taken (default 1).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub trace_concurrency: Option<u32>,
}

/// Where draft tokens come from (specdec and its plot).
#[derive(Debug, Args, Clone)]
pub struct DraftArgs {
    /// mtp (the model's own MTP layer), eagle3 (its [eagle_head] as published: the head's
    /// own layer and draft vocabulary), eagle (the same layer as an EAGLE-1/2 head, through
    /// the target's lm_head), ngram, or model:NAME.
    #[arg(long, default_value = "eagle3")]
    pub draft: DraftKind,
    /// Tensor parallelism of a separate draft model (default: the target's, or the
    /// largest that divides the draft's heads).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub draft_tp: Option<u32>,
    /// CPU time per step of n-gram lookup, microseconds (a prior; measure yours). Default 50;
    /// only with --draft ngram.
    #[arg(long)]
    pub ngram_cpu_us: Option<CpuMicros>,
}

/// Request lengths of a serving workload (shared by sweep, compare, sensitivity, plots).
#[derive(Debug, Args, Clone)]
pub struct RequestArgs {
    /// Prompt tokens per request.
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 1000)]
    pub input_len: u32,
    /// Output tokens per request.
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 1000)]
    pub output_len: u32,
}

/// Request shape and concurrency list of a serving sweep.
#[derive(Debug, Args, Clone)]
pub struct ServingArgs {
    /// Concurrent requests (comma-separated).
    #[arg(
        value_parser = crate::options::positive_u32,
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256"
    )]
    pub concurrency: Vec<u32>,
    #[command(flatten)]
    pub request: RequestArgs,
    /// TPOT definition to report: itl (decode only, as vLLM's benchmark) or e2e (E2E / tokens,
    /// prefill included). Default: the --client's own definition (its `tpot`), else itl.
    #[arg(long, value_enum)]
    pub tpot_def: Option<crate::serve::TpotDef>,
    /// Benchmark client (see `rooftop list clients`: vllm-bench-serve, bench-serve-sweep,
    /// aiohttp-default, team-macro, closed-loop, poisson) or a client TOML; default an ideal
    /// closed loop.
    #[arg(long)]
    pub client: Option<String>,
}

/// A disaggregated deployment (sweep and compare): a prefill pool and a decode pool, each
/// `workers=N` and its layout, on the command's system(s).
#[derive(Debug, Args, Clone, Default)]
pub struct DeploymentArgs {
    /// The prefill pool: workers=1,tp=8,ep=8 (keys workers, tp, ep, pp, dp and batch, prompts
    /// per pass per attention-DP replica; missing degrees are 1, workers 1). With --decode.
    #[arg(
        long,
        value_name = "POOL",
        requires = "decode",
        conflicts_with = "deployment"
    )]
    pub prefill: Option<crate::deploy::Pool>,
    /// The decode pool: workers=2,dp=8,ep=8 (batch: sequences per attention-DP replica).
    #[arg(
        long,
        value_name = "POOL",
        requires = "prefill",
        conflicts_with = "deployment"
    )]
    pub decode: Option<crate::deploy::Pool>,
    /// A deployment TOML: [prefill] and [decode] tables (workers, tp, ep, pp, dp, batch) and
    /// an optional kv_link.
    #[arg(long, value_name = "FILE")]
    pub deployment: Option<std::path::PathBuf>,
    /// The link KV caches cross between the pools: the built-in cx7-8x400g (8 x 400 Gb/s
    /// ConnectX-7 per 8-GPU node, RDMA) or a KV-link TOML in its form.
    #[arg(long, value_name = "NAME|FILE")]
    pub kv_link: Option<String>,
}

impl DeploymentArgs {
    /// Whether a disaggregated deployment was asked for.
    pub fn given(&self) -> bool {
        self.prefill.is_some() || self.decode.is_some() || self.deployment.is_some()
    }

    /// Whether a disaggregated deployment was asked for, refusing `--kv-link` without one:
    /// an aggregated run moves no KV cache between pools, and the link was accepted
    /// unread (even a name that is no link).
    pub fn asked(&self) -> crate::error::Result<bool> {
        if !self.given() && self.kv_link.is_some() {
            return Err(crate::error::Error::Usage(
                "--kv-link applies to a disaggregated deployment only: give --prefill and \
                 --decode (or --deployment FILE) with it, or drop it"
                    .into(),
            ));
        }
        Ok(self.given())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Predict TPOT, its breakdown, throughput, SOL bound and memory fit for one design point.
    #[command(
        after_help = "Examples:\n  rooftop predict --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --batch 1\n  rooftop predict --model deepseek-v3-fp8 --system 8x-h200-nvlink --batch 64 --context 4096 --format json\n  rooftop predict --model llama-3.1-70b --system 8x-h100-nvlink --tp 4\n  rooftop predict --model deepseek-v3-fp8 --system 2x8-h200-ib --tp 1 --ep 16 --dp 16 --batch 2048 --redundant-experts 1 --set engine.moe_all_to_all=deepep-auto   (wide EP: DeepEP, one EPLB slot per group)"
    )]
    Predict(PredictArgs),
    /// TPOT, TTFT and throughput against concurrency: the plateau, what sets it, KV limits.
    #[command(
        after_help = "Examples:\n  rooftop sweep --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --input-len 1000 --output-len 32 --tpot-def e2e\n  rooftop sweep --concurrency 1,8,64,512 --format csv\n  rooftop sweep --model deepseek-v3-fp8 --system 8x-h200-nvlink --format json\n\nDisaggregated (a prefill pool and a decode pool, KV caches moved over the nodes' NICs):\n  rooftop sweep --model deepseek-v3-fp8 --system 8x-b200-nvlink --prefill workers=1,tp=8,ep=8 --decode workers=2,dp=8,ep=8 --input-len 8192 --output-len 1024 --concurrency 64,256,1024\n  rooftop sweep --model deepseek-v3-fp8 --system 8x-h200-nvlink --deployment deploy.toml --client inferencemax --format json\n  rooftop sweep --model llama-3.1-70b-fp8 --system 8x-h100-nvlink --prefill workers=2,tp=4 --decode workers=1,tp=8,batch=256 --kv-link my-link.toml"
    )]
    Sweep(SweepArgs),
    /// Fit efficiencies and fixed costs to measurements, with confidence intervals.
    #[command(
        after_help = "Examples:\n  rooftop calibrate --measured k25b6000bench1 --out calibrated.toml\n  rooftop calibrate --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --measured bench/*.json nccl.txt --format json\n  rooftop predict --calibration calibrated.toml --batch 64\n  rooftop calibrate --measured e2e_serving.csv --holdout 3   (fit each deployment on 3 runs; coverage of the rest)"
    )]
    Calibrate(CalibrateArgs),
    /// Why a measured throughput curve stops growing: every mechanism that could hold the
    /// plateau, the value it needs, how plausible that is, ranked, and the separating test.
    #[command(
        after_help = "Examples:\n  rooftop explain --measured k25b6000bench1\n  rooftop explain --measured k25b6000bench1 --client team-macro --format json\n  rooftop explain --measured k25b6000bench1 --format csv"
    )]
    Explain(ExplainArgs),
    /// Measured vs speed-of-light vs default vs calibrated, point by point.
    #[command(
        after_help = "Examples:\n  rooftop validate\n  rooftop validate --measured k25b6000bench1 trace.json --format json\n  rooftop validate --system 8x-h100-nvlink --measured tests/data/dev/gemm_h100-sxm.csv\n  rooftop validate --measured tests/data/dev   (every kernel table in it, each on its GPU's system)\n  rooftop validate --measured tests/data/dev/e2e_serving.csv --group-by backend,version,precision\n  rooftop validate --measured tests/data/dev/e2e_disagg.csv   (disaggregated runs: prefill and decode pools)"
    )]
    Validate(ValidateArgs),
    /// Speculative decoding: TPOT, throughput and speedup per draft length and concurrency.
    #[command(
        after_help = "Examples:\n  rooftop specdec --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --draft eagle3 --k 1..6 --acceptance 0.75,0.5,0.3\n  rooftop specdec --model deepseek-v3-fp8 --system 8x-h200-nvlink --draft mtp --k 1..3 --acceptance 0.85 --concurrency 1,8,64\n  rooftop specdec --model llama-3.1-70b --system 8x-h100-nvlink --draft model:llama-3.1-8b --k 4 --acceptance accepted_lengths.txt"
    )]
    Specdec(SpecdecArgs),
    /// Systems and layouts side by side: TPOT, throughput, plateau, memory fit, cost.
    #[command(
        after_help = "Examples:\n  rooftop compare --model kimi-k2.5-int4 --systems 8x-rtx-pro-6000-pcie,8x-h200-nvlink,8x-b200-nvlink --concurrency 1,128\n  rooftop compare --systems '8x-rtx-pro-6000-pcie,8x-rtx-pro-6000-pcie[system.interconnect=pcie-gen6-x16],8x-rtx-pro-6000-pcie[system.interconnect=nvlink5]'\n  rooftop compare --model deepseek-v3-fp8 --systems 8x-h200-nvlink --parallel tp8,tp8ep8,tp4pp2 --format csv\n  rooftop compare --model deepseek-v3-fp8 --systems 8x-h200-nvlink,8x-b200-nvlink --prefill workers=1,tp=8,ep=8 --decode workers=1,dp=8,ep=8 --concurrency 64,512"
    )]
    Compare(CompareArgs),
    /// Elasticity of TPOT and plateau to each parameter, and what it takes to reach a target.
    #[command(
        after_help = "Examples:\n  rooftop sensitivity --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie\n  rooftop sensitivity --concurrency 128 --format json\n  rooftop sensitivity --target-tpot 8ms"
    )]
    Sensitivity(SensitivityArgs),
    /// Evaluate a Cartesian design space on every core; stream rows or keep the Pareto front.
    #[command(
        after_help = "Examples:\n  rooftop explore --model kimi-k2.5-int4 --systems 8x-rtx-pro-6000-pcie,8x-h200-nvlink,8x-b200-nvlink,8x-h100-nvlink --batch 1..4096 --context 1024..131072:1024 --pareto\n  rooftop explore --systems 8x-h200-nvlink --parallel tp8,tp4pp2 --batch 1..1024:x2 --context 1024,8192 --format csv > grid.csv\n  rooftop explore --quant int4-g32,nvfp4,fp8 --batch 1,8,64 --context 4096 --format json\n  rooftop explore --model kimi-k2.5-int4 --systems 8x-h200-nvlink,8x-b200-nvlink --batch 1..4096 --context 1024..131072:1024 --objective cost --tpot-target 50ms --format text\n  rooftop explore --systems 8x-h200-nvlink,8x-b200-nvlink,8x-rtx-pro-6000-pcie --batch 1..1024:x2 --context 1024..32768:x2 --objective energy --pareto --format text\n  rooftop explore --systems 8x-h200-nvlink --batch 1..512 --context 8192 --objective throughput --top 5 --input-len 8000 --output-len 500 --format csv"
    )]
    Explore(ExploreArgs),
    /// Size a deployment: the aggregated and disaggregated layouts of a GPU budget that meet a
    /// TTFT and TPOT target, as the Pareto front of tokens/s per GPU against tokens/s per user.
    #[command(
        after_help = "Examples:\n  rooftop plan --model deepseek-v3-fp8 --system 2x8-h200-ib --input-len 1000 --output-len 1000 --tpot-target 50ms\n  rooftop plan --model llama-3.1-70b-fp8 --system 8x-h100-nvlink --gpus 8 --tpot-target 30ms --ttft-target 2s --client inferencemax --format json\n  rooftop plan --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --tpot-target 50ms --aggregated-only --format csv"
    )]
    Plan(PlanArgs),
    /// Draw charts (PNG or SVG by the --out extension).
    #[command(subcommand)]
    Plot(PlotCommand),
    /// Predict one operator's time, to hold against a micro-benchmark.
    #[command(subcommand)]
    Op(OpCommand),
    /// List built-in descriptions.
    #[command(after_help = "Examples:\n  rooftop list gpus\n  rooftop list systems --format json")]
    List(ListArgs),
    /// Print a built-in description's TOML.
    #[command(
        after_help = "Examples:\n  rooftop show rtx-pro-6000\n  rooftop show kimi-k2.5-int4"
    )]
    Show(ShowArgs),
    /// Turn a Hugging Face config.json (and its quantization description) into a model TOML.
    #[command(
        after_help = "Examples:\n  rooftop import-hf Kimi-K2.5/config.json --name kimi-k2.5 --out kimi-k2.5.toml\n  rooftop import-hf GLM-5-NVFP4/config.json --quant-config GLM-5-NVFP4/hf_quant_config.json\n  rooftop import-hf GLM-5-NVFP4   (a checkpoint folder: its config.json and hf_quant_config.json)\n  rooftop predict --model Kimi-K2.5/config.json --batch 8\n\nWarnings (fields not mapped, approximations) go to stderr and into [sources].notes."
    )]
    ImportHf(ImportHfArgs),
}

/// Arguments of `Command::Predict`.
#[derive(Debug, Args, Clone)]
pub struct PredictArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Concurrent sequences decoded per step.
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub batch: u32,
    /// Tokens already in each sequence's KV cache.
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    /// Show every operator (text format).
    #[arg(long)]
    pub ops: bool,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Sweep`.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Calibrate`.
#[derive(Debug, Args, Clone)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub measured: MeasuredArgs,
    /// Write the calibration TOML here (for --calibration).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// With e2e serving CSVs: fit each deployment on N of its runs (a seeded draw) and
    /// report how often the calibrated 95 % intervals cover the held-out rest, per
    /// deployment and backend.
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub holdout: Option<u32>,
    /// Seed of --holdout's draw of the runs to fit on.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Explain`.
#[derive(Debug, Args, Clone)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub measured: MeasuredArgs,
    /// text: the tables; json: the record (`mechanisms` per basis: name, needed, prior,
    /// plausibility); csv: one row per basis and mechanism.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Validate`.
#[derive(Debug, Args, Clone)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub measured: MeasuredArgs,
    /// For an e2e serving CSV: the run fields its error summary is grouped by (default
    /// backend,system,model), e.g. backend,version,precision to see one engine version's runs
    /// apart from another's.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub group_by: Option<Vec<crate::e2e::GroupField>>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Specdec`.
#[derive(Debug, Args, Clone)]
pub struct SpecdecArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub draft: DraftArgs,
    /// Draft lengths: a range 1..8 (1..8:2 for a step) or a list 1,2,4.
    #[arg(long, default_value = "1..6")]
    pub k: DraftLengths,
    /// Acceptance: a constant (0.8), per-position rates (0.85,0.6,0.4; the last repeats),
    /// or a file of measured accepted lengths (drafts accepted per step, one or more per
    /// line).
    #[arg(long, default_value = "0.75,0.5,0.3")]
    pub acceptance: AcceptanceArg,
    /// Which statistic --acceptance gives, as the engine prints it: per-position
    /// conditional rates (default), vLLM's per-position (unconditional) rates, vLLM's mean
    /// acceptance length (bonus token counted), mean accepted drafts (no bonus), SGLang's
    /// average accept length (bonus counted), or TensorRT-LLM's acceptance rate (accepted /
    /// drafted tokens).
    #[arg(long, value_enum, default_value_t)]
    pub acceptance_stat: crate::specdec::AcceptanceStat,
    /// Draft length a single acceptance figure (a length or a rate) was measured at; one
    /// --k serves when this is not given.
    #[arg(long, value_parser = crate::options::positive_u32)]
    pub acceptance_k: Option<u32>,
    #[arg(value_parser = crate::options::positive_u32, long, value_delimiter = ',', default_value = "1,8,64")]
    pub concurrency: Vec<u32>,
    /// Tokens already in each sequence's KV cache.
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub comparison: ComparisonArgs,
    /// Print one buyer's table at the targets, ranked by cost ($ per million output
    /// tokens), energy (J per token), latency (TPOT) or throughput (tok/s per GPU).
    #[arg(long, value_enum)]
    pub objective: Option<Objective>,
    /// With --objective: also draw $ per million output tokens against tokens/s per user,
    /// one line per system (PNG or SVG by the extension).
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub deployment: DeploymentArgs,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// What a buyer's comparison is ranked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// US dollars per million output tokens, lowest first.
    Cost,
    /// Joules per output token, lowest first.
    Energy,
    /// TPOT, lowest first.
    Latency,
    /// Output tokens/s per GPU, highest first.
    Throughput,
}

/// `compare`'s `--context` when none is given, tokens.
pub const DEFAULT_CONTEXT: u32 = 1024;

/// What a comparison runs over (compare and its plot).
#[derive(Debug, Args, Clone)]
pub struct ComparisonArgs {
    /// Systems (built-ins or paths), each optionally with overrides in brackets:
    /// name[key=value;key=value].
    #[arg(long)]
    pub systems: Systems,
    /// Layouts: tp8, tp4ep2, pp2tp4, tp8ep8dp8 ... (default: TP over all GPUs).
    #[arg(long, value_delimiter = ',')]
    pub parallel: Vec<Parallel>,
    #[arg(value_parser = crate::options::positive_u32, long, value_delimiter = ',', default_value = "1,128")]
    pub concurrency: Vec<u32>,
    /// Tokens in each sequence's KV cache for the TPOT columns.
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = DEFAULT_CONTEXT)]
    pub context: u32,
    #[command(flatten)]
    pub request: RequestArgs,
    /// Cost and energy are read at the highest-throughput serving point whose TPOT is at
    /// most this (e.g. 50ms).
    #[arg(long)]
    pub tpot_target: Option<Duration>,
    /// ... and whose TTFT is at most this (e.g. 2s).
    #[arg(long)]
    pub ttft_target: Option<Duration>,
}

/// Arguments of `Command::Plan`.
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// GPUs the deployment may use at most, 1 to 65,536 (default: the system's).
    #[arg(long, value_parser = crate::options::plan_gpus)]
    pub gpus: Option<u32>,
    #[command(flatten)]
    pub request: RequestArgs,
    /// Keep only points whose TPOT (inter-token latency) is at most this (e.g. 50ms).
    #[arg(long)]
    pub tpot_target: Option<Duration>,
    /// ... and whose mean TTFT is at most this (e.g. 2s).
    #[arg(long)]
    pub ttft_target: Option<Duration>,
    /// Benchmark client whose TTFT the targets are read against (see `rooftop list clients`;
    /// default an ideal closed loop).
    #[arg(long)]
    pub client: Option<String>,
    /// Price aggregated deployments only (no prefill/decode split).
    #[arg(long)]
    pub aggregated_only: bool,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Sensitivity`.
#[derive(Debug, Args, Clone)]
pub struct SensitivityArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Concurrent requests, as `sweep` takes them (running as the KV cache and the scheduler
    /// allow, the rest queued).
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub concurrency: u32,
    #[command(flatten)]
    pub request: RequestArgs,
    /// A TPOT to reach (e.g. 8ms): how far must each parameter alone move?
    #[arg(long)]
    pub target_tpot: Option<Duration>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Explore`.
#[derive(Debug, Args, Clone)]
pub struct ExploreArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Systems, as for compare (default: --system).
    #[arg(long)]
    pub systems: Option<Systems>,
    /// Layouts to price on every system (comma-separated: tp8,tp4pp2,tp1ep8dp8; default
    /// each system's own); --tp, --ep, --pp and --dp do not apply to explore.
    #[arg(long, value_delimiter = ',')]
    pub parallel: Vec<Parallel>,
    /// Batch sizes: 1..4096, 1..4096:x2, 1,8,64.
    #[arg(long, default_value = "1..256:x2")]
    pub batch: Positive,
    /// Context lengths: 1024..131072:1024, 1024,8192.
    #[arg(long, default_value = "1024")]
    pub context: Values,
    /// Weight formats for the routed experts (MoE) or all weights (dense): int4-g32, nvfp4,
    /// fp8 ... (default: as shipped).
    #[arg(long, value_delimiter = ',')]
    pub quant: Vec<String>,
    /// Print only the Pareto front (TPOT vs throughput per GPU; under --objective cost or
    /// energy, $ or J per output token vs tokens/s per user) and a summary.
    #[arg(long)]
    pub pareto: bool,
    /// Rank by cost ($ per million output tokens), energy (J per output token), latency
    /// (TPOT) or throughput (tok/s per GPU): the best --top points, best first, or with
    /// --pareto the front in that order. Without it, rows stream in the grid's order.
    #[arg(long, value_enum)]
    pub objective: Option<Objective>,
    /// With --objective and no --pareto: how many of the best points to print.
    #[arg(long, value_parser = crate::options::positive_u32, default_value_t = 20, requires = "objective")]
    pub top: u32,
    /// Keep only points whose TPOT is at most this (e.g. 50ms), as compare reads cost at
    /// the highest-throughput point meeting it; the others are counted, not written. There
    /// is no --ttft-target: explore prices decode steps, not prompts (compare has it).
    #[arg(long)]
    pub tpot_target: Option<Duration>,
    /// --input-len and --output-len: the request shape $ per million tokens in and out
    /// counts ((input + output) / output tokens per output token).
    #[command(flatten)]
    pub request: RequestArgs,
    /// Most design points to evaluate: a larger grid is refused, with its estimated time,
    /// before it starts.
    #[arg(long, value_parser = crate::options::points_u64, default_value_t = 100_000_000)]
    pub max_points: u64,
    /// csv or json (JSON lines); text prints the summary only.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: Format,
}

/// Arguments of `Command::List`.
#[derive(Debug, Args, Clone)]
pub struct ListArgs {
    /// gpus, interconnects, systems, models, engines, clients or measured.
    #[arg(value_parser = ["gpus", "interconnects", "systems", "models", "engines", "clients", "measured"])]
    pub kind: String,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `Command::Show`.
#[derive(Debug, Args, Clone)]
pub struct ShowArgs {
    /// Name of a built-in GPU, interconnect, system, model or measurement.
    pub name: String,
}

/// Arguments of `Command::ImportHf`.
#[derive(Debug, Args, Clone)]
pub struct ImportHfArgs {
    /// Path to the model's config.json, or the checkpoint folder that holds it.
    pub path: std::path::PathBuf,
    /// Model name in the TOML (default: the folder holding config.json).
    #[arg(long)]
    pub name: Option<String>,
    /// ModelOpt hf_quant_config.json (default: the one beside config.json, if any).
    #[arg(long)]
    pub quant_config: Option<std::path::PathBuf>,
    /// Write the TOML to this file instead of stdout.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum OpCommand {
    /// One GEMM (m × k by k × n) on one GPU.
    #[command(
        after_help = "Examples:\n  rooftop op gemm --gpu rtx-pro-6000 --m 1 --n 7168 --k 2048 --dtype int4\n  rooftop op gemm --gpu h100-sxm --m 8192 --n 8192 --k 8192 --dtype bf16 --format json"
    )]
    Gemm(OpGemmArgs),
    /// One all-reduce on a system's interconnect, as the engine runs it (vLLM's custom
    /// kernel where it applies, else NCCL).
    #[command(
        after_help = "Examples:\n  rooftop op allreduce --system 8x-rtx-pro-6000-pcie --bytes 14336\n  rooftop op allreduce --system 8x-h200-nvlink --bytes 1048576 --gpus 4 --format json\n  rooftop op allreduce --system 2x8-h100-ib --bytes 1GiB --gpus 16   (across two nodes: NCCL over the NICs)\n  rooftop op allreduce --system 8x-rtx-pro-6000-pcie --bytes \"1.8 MB\" --set interconnect.bandwidth=\"128 GB/s\""
    )]
    Allreduce(OpAllreduceArgs),
    /// One NCCL all-gather: each rank contributes --bytes and ends with all of them.
    #[command(
        after_help = "Examples:\n  rooftop op allgather --system 8x-l40s-pcie --bytes \"1 MiB\" --gpus 2\n  rooftop op allgather --system 8x-b200-nvlink --bytes 65536 --format json"
    )]
    Allgather(OpAllgatherArgs),
    /// One NCCL reduce-scatter: each rank holds --bytes and ends with its 1/n share of the sum.
    #[command(
        after_help = "Examples:\n  rooftop op reducescatter --system 8x-h100-nvlink --bytes \"16 MiB\" --gpus 4"
    )]
    Reducescatter(OpReducescatterArgs),
    /// One NCCL all-to-all: each rank sends --bytes in total, spread evenly over the ranks.
    #[command(
        after_help = "Examples:\n  rooftop op alltoall --system 8x-h200-nvlink --bytes \"7 MB\"\n  rooftop op alltoall --system 8x-rtx-pro-6000-pcie --bytes 131072 --gpus 4 --set system.p2p=false\n  rooftop op alltoall --system 4x8-b200-ib --bytes \"7 MB\" --gpus 32   (four nodes: each GPU's share for the others over its NIC)"
    )]
    Alltoall(OpAlltoallArgs),
    /// One MoE layer (router, routed and shared experts, its all-reduce) on one GPU.
    #[command(
        after_help = "Examples:\n  rooftop op moe --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --tokens 128"
    )]
    Moe(OpMoeArgs),
    /// One layer's attention (projections, attention over the KV cache, all-reduce) on one GPU.
    #[command(
        after_help = "Examples:\n  rooftop op attention --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --batch 32 --context 4096\n  rooftop op attention --model gpt-oss-120b --system 8x-h100-nvlink --context 32768 --layer 1   (a global layer)"
    )]
    Attention(OpAttentionArgs),
}

/// Arguments of `OpCommand::Gemm`.
#[derive(Debug, Args, Clone)]
pub struct OpGemmArgs {
    /// GPU name or path.
    #[arg(long)]
    pub gpu: String,
    /// System whose efficiencies to use (default: the first built-in system with this GPU).
    #[arg(long)]
    pub system: Option<String>,
    #[arg(value_parser = crate::options::positive_u64, long)]
    pub m: u64,
    #[arg(value_parser = crate::options::positive_u64, long)]
    pub n: u64,
    #[arg(value_parser = crate::options::positive_u64, long)]
    pub k: u64,
    /// Weight format: bf16, fp8, int8, int4 (W4A16 g32), nvfp4, mxfp4, or a full format
    /// string such as int4-g128.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `OpCommand::Allreduce`.
#[derive(Debug, Args, Clone)]
pub struct OpAllreduceArgs {
    #[command(flatten)]
    pub collective: OpCollectiveArgs,
}

/// Arguments of `OpCommand::Allgather`.
#[derive(Debug, Args, Clone)]
pub struct OpAllgatherArgs {
    #[command(flatten)]
    pub collective: OpCollectiveArgs,
}

/// Arguments of `OpCommand::Reducescatter`.
#[derive(Debug, Args, Clone)]
pub struct OpReducescatterArgs {
    #[command(flatten)]
    pub collective: OpCollectiveArgs,
}

/// Arguments of `OpCommand::Alltoall`.
#[derive(Debug, Args, Clone)]
pub struct OpAlltoallArgs {
    #[command(flatten)]
    pub collective: OpCollectiveArgs,
}

/// What every collective `op` takes: where, how much, over how many GPUs.
#[derive(Debug, Args, Clone)]
pub struct OpCollectiveArgs {
    #[arg(long)]
    pub system: String,
    /// Message size per rank in bytes (a number, or a unit string such as "14 KB").
    #[arg(long)]
    pub bytes: String,
    /// GPUs in the collective (default: all of the system's).
    #[arg(value_parser = crate::options::positive_u32, long)]
    pub gpus: Option<u32>,
    /// Override a description field for this run, with units: interconnect.bandwidth="128 GB/s",
    /// system.p2p=false, system.paths.cross_socket="20 GB/s", efficiency.link=0.9. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `OpCommand::Moe`.
#[derive(Debug, Args, Clone)]
pub struct OpMoeArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    /// Tokens in the batch.
    #[arg(value_parser = crate::options::positive_tokens_u32, long)]
    pub tokens: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Arguments of `OpCommand::Attention`.
#[derive(Debug, Args, Clone)]
pub struct OpAttentionArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub batch: u32,
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    /// The decoder layer whose attention block is priced (0-based). Layers differ where the
    /// model mixes kinds: sliding-window and global attention, linear attention or Mamba
    /// mixers beside full attention; `rooftop predict` lists them per layer.
    #[arg(long, default_value_t = 0)]
    pub layer: usize,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Measured points to overlay on a chart (optional), and what they do not say.
#[derive(Debug, Args, Clone)]
pub struct PlotMeasuredArgs {
    /// Measured files or built-in measurement names to overlay (and calibrate against, when
    /// no --calibration is given).
    #[arg(long, num_args = 1..)]
    pub measured: Vec<String>,
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 32)]
    pub assume_input_len: u32,
    #[arg(value_parser = crate::options::positive_tokens_u32, long, default_value_t = 32)]
    pub assume_output_len: u32,
}

/// How to split a breakdown chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BreakdownBy {
    /// One bar per concurrency of a serving sweep.
    Concurrency,
    /// One bar per layer of one design point.
    Layer,
    /// One bar per system (--systems) at one design point.
    System,
}

#[derive(Debug, Subcommand)]
pub enum PlotCommand {
    /// Roofline of one GPU with every operator of one decode step placed on it.
    #[command(
        after_help = "Examples:\n  rooftop plot roofline --model kimi-k2.5-int4 --system 8x-rtx-pro-6000-pcie --batch 1 --out roofline.png\n  rooftop plot roofline --batch 128 --out roofline.svg"
    )]
    Roofline(PlotRooflineArgs),
    /// A metric against concurrency: SOL, default and calibrated lines, measured points.
    #[command(
        after_help = "Examples:\n  rooftop plot sweep --measured k25b6000bench1 --input-len 32 --output-len 32 --out throughput.png\n  rooftop plot sweep --metric tpot --tpot-def e2e --calibration cal.toml --out tpot.svg"
    )]
    Sweep(PlotSweepArgs),
    /// Stacked bars of decode time by category: per concurrency, per layer, or per system.
    #[command(
        after_help = "Examples:\n  rooftop plot breakdown --by concurrency --out breakdown.png\n  rooftop plot breakdown --by layer --batch 64 --out layers.svg\n  rooftop plot breakdown --by system --systems 8x-rtx-pro-6000-pcie,8x-h200-nvlink --out systems.png"
    )]
    Breakdown(PlotBreakdownArgs),
    /// Grouped bars across systems and layouts: TPOT per concurrency, or plateau throughput.
    #[command(
        after_help = "Examples:\n  rooftop plot compare --systems 8x-rtx-pro-6000-pcie,8x-h200-nvlink,8x-b200-nvlink --out compare.png\n  rooftop plot compare --systems 8x-h200-nvlink --parallel tp8,tp8ep8 --plateau --out plateau.svg"
    )]
    Compare(PlotCompareArgs),
    /// Speculative-decoding speedup over draft length and acceptance at one concurrency.
    #[command(
        after_help = "Examples:\n  rooftop plot specdec --draft eagle3 --out specdec.png\n  rooftop plot specdec --model deepseek-v3-fp8 --system 8x-h200-nvlink --draft mtp --concurrency 64 --out mtp.svg"
    )]
    Specdec(PlotSpecdecArgs),
}

/// Arguments of `PlotCommand::Roofline`.
#[derive(Debug, Args, Clone)]
pub struct PlotRooflineArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub batch: u32,
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    /// Output file, .png or .svg.
    #[arg(long)]
    pub out: std::path::PathBuf,
}

/// Arguments of `PlotCommand::Sweep`.
#[derive(Debug, Args, Clone)]
pub struct PlotSweepArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    #[command(flatten)]
    pub measured: PlotMeasuredArgs,
    #[arg(long, value_enum, default_value_t)]
    pub metric: crate::plot::records::SweepMetric,
    #[arg(long)]
    pub out: std::path::PathBuf,
}

/// Arguments of `PlotCommand::Breakdown`.
#[derive(Debug, Args, Clone)]
pub struct PlotBreakdownArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    #[arg(long, value_enum, default_value = "concurrency")]
    pub by: BreakdownBy,
    /// Systems for --by system, as for compare.
    #[arg(long)]
    pub systems: Option<Systems>,
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub batch: u32,
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    #[arg(long)]
    pub out: std::path::PathBuf,
}

/// Arguments of `PlotCommand::Compare`.
#[derive(Debug, Args, Clone)]
pub struct PlotCompareArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub comparison: ComparisonArgs,
    /// Plot plateau throughput instead of TPOT.
    #[arg(long)]
    pub plateau: bool,
    /// Plot $ per million output tokens against tokens/s per user, one line per system.
    #[arg(long, conflicts_with = "plateau")]
    pub cost: bool,
    #[arg(long)]
    pub out: std::path::PathBuf,
}

/// Arguments of `PlotCommand::Specdec`.
#[derive(Debug, Args, Clone)]
pub struct PlotSpecdecArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub draft: DraftArgs,
    #[arg(long, default_value = "1..8")]
    pub k: DraftLengths,
    /// Constant acceptance rates, one heat-map row each.
    #[arg(long, value_delimiter = ',', default_value = "0.4,0.5,0.6,0.7,0.8,0.9")]
    pub acceptance: Vec<f64>,
    #[arg(value_parser = crate::options::positive_u32, long, default_value_t = 1)]
    pub concurrency: u32,
    #[arg(value_parser = crate::options::tokens_u32, long, default_value_t = 1024)]
    pub context: u32,
    #[arg(long)]
    pub out: std::path::PathBuf,
}

/// Whether a line meant for stderr could not be written (a closed or full stderr): the
/// binary then exits 1 instead of 0, having lost a note, warning or progress line.
static STDERR_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write `line` and a newline to stderr: notes, warnings and progress. Unlike `eprintln!`
/// it never panics (a panic exits 101); a failure is remembered for [`stderr_failed`].
pub fn stderr_line(line: &str) {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    if writeln!(e, "{line}").and_then(|_| e.flush()).is_err() {
        STDERR_FAILED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether any [`stderr_line`] failed in this process.
pub fn stderr_failed() -> bool {
    STDERR_FAILED.load(std::sync::atomic::Ordering::Relaxed)
}
