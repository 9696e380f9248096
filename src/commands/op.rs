//! `rooftop op`: one operator's predicted time, to hold against a micro-benchmark.

use crate::cli::{
    OpAllgatherArgs, OpAllreduceArgs, OpAlltoallArgs, OpAttentionArgs, OpCollectiveArgs, OpCommand,
    OpGemmArgs, OpMoeArgs, OpReducescatterArgs, ScenarioArgs,
};
use crate::commands::load;
use crate::cost::price::{collective_cost, cost_all};
use crate::cost::{Category, CostParams, Device, Evaluator, OpCost, Pass};
use crate::error::{Error, Result};
use crate::export::{self, round, table, Format, Table, Tabular};
use crate::ops::{gemm_ops, BlockKind, CollectiveKind};
use crate::spec::registry::load_gpu;
use crate::spec::{System, WeightFormat};
use crate::units::Bytes;
use serde::Serialize;
use std::fmt::Write as _;

/// The record every `op` subcommand reports.
#[derive(Debug, Serialize)]
pub struct OpReport {
    pub op: String,
    /// What it ran on.
    pub context: String,
    /// Predicted time with default efficiencies, microseconds.
    pub time_us: f64,
    /// Speed-of-light time, microseconds.
    pub sol_time_us: f64,
    pub flops: f64,
    pub bytes: f64,
    /// What bound the largest part.
    pub bound: String,
    /// Algorithm (collectives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// The kernels it is made of.
    pub parts: Vec<Part>,
}

#[derive(Debug, Serialize)]
pub struct Part {
    pub name: &'static str,
    pub time_us: f64,
    pub overhead_us: f64,
    pub flops: f64,
    pub bytes: f64,
    pub bound: &'static str,
}

fn report(
    op: String,
    context: String,
    ops: &[OpCost],
    sol: &[OpCost],
    algorithm: Option<String>,
) -> OpReport {
    let main = ops.iter().max_by(|a, b| a.time.total_cmp(&b.time));
    OpReport {
        op,
        context,
        // Folded from +0: an empty sum of floats is -0.0 in Rust, which prints as "-0.0"
        // for a collective over one GPU (no operator at all).
        time_us: ops.iter().fold(0.0, |t, o| t + o.total()) * 1e6,
        sol_time_us: sol.iter().fold(0.0, |t, o| t + o.total()) * 1e6,
        flops: ops.iter().fold(0.0, |t, o| t + o.flops),
        bytes: ops.iter().fold(0.0, |t, o| t + o.bytes),
        bound: main
            .map(|o| o.bound.name().to_string())
            .unwrap_or_else(|| "none".into()),
        algorithm,
        parts: ops
            .iter()
            .map(|o| Part {
                name: o.name,
                time_us: o.time * 1e6,
                overhead_us: o.overhead * 1e6,
                flops: o.flops,
                bytes: o.bytes,
                bound: o.bound.name(),
            })
            .collect(),
    }
}

impl Tabular for OpReport {
    type Row<'a> = export::rows::OpRow<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(vec![export::rows::OpRow {
            op: &self.op,
            context: &self.context,
            time_us: round(self.time_us, 3),
            sol_time_us: round(self.sol_time_us, 3),
            flops: round(self.flops, 0),
            bytes: round(self.bytes, 0),
            bound: &self.bound,
        }])
    }
}

fn render(r: &OpReport, format: Format) -> Result<Vec<u8>> {
    export::export(r, format, text)
}

fn text(r: &OpReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} on {}", r.op, r.context);
    let _ = writeln!(
        o,
        "time {:.3} us (speed of light {:.3} us), {:.4} GFLOP, {:.4} MB, {}-bound{}",
        r.time_us,
        r.sol_time_us,
        r.flops / 1e9,
        r.bytes / 1e6,
        r.bound,
        r.algorithm
            .as_ref()
            .map(|a| format!(", {a}"))
            .unwrap_or_default()
    );
    if r.parts.len() > 1 {
        let rows: Vec<Vec<String>> = r
            .parts
            .iter()
            .map(|p| {
                vec![
                    p.name.to_string(),
                    format!("{:.3}", p.time_us),
                    format!("{:.3}", p.overhead_us),
                    format!("{:.4}", p.bytes / 1e6),
                    p.bound.to_string(),
                ]
            })
            .collect();
        o.push_str(&table(&["part", "us", "fixed us", "MB", "bound"], &rows));
    }
    o
}

/// A system to take efficiencies from: the one named, or the built-in that stands for this
/// GPU ([`crate::kernel_check::system_with_gpu`]).
fn system_for_gpu(gpu: &str, system: Option<&str>) -> Result<System> {
    if let Some(s) = system {
        // The GPU set as an override, so the engine's rules (the GEMM family it runs per
        // architecture) resolve for this GPU, not the system's own.
        let set = crate::spec::overrides::parse_all(&[format!("system.gpu={gpu}")])?;
        return System::load_with(s, &set);
    }
    let g = load_gpu(gpu)?;
    crate::kernel_check::system_with_gpu(&g.name)
}

fn parse_dtype(d: &str) -> Result<WeightFormat> {
    crate::measured::gemm_csv::weight_format_of(d).map_err(Error::Scenario)
}

/// A message size of at least one byte: an all-reduce of nothing is no operation, and
/// would print a time of -0.000 us.
fn parse_bytes(s: &str) -> Result<f64> {
    let v = match s.trim().parse::<f64>() {
        Ok(v) => v,
        Err(_) => Bytes::parse(s)
            .map(|b| b.0)
            .map_err(|e| Error::Scenario(format!("--bytes: {e}")))?,
    };
    if !(v.is_finite() && v >= 1.0 && v.fract() == 0.0) {
        return Err(Error::Scenario(format!(
            "--bytes {s}: expected a message of at least 1 byte, in whole bytes, e.g. 14336 \
             or \"14 KB\""
        )));
    }
    Ok(v)
}

/// Which block of a layer `block_ops` prices: the first MoE block, or the attention (token
/// mixer) block of one decoder layer.
#[derive(Debug, Clone, Copy)]
enum BlockOf {
    FirstMoe,
    AttentionOfLayer(usize),
}

fn block_ops(
    args: &ScenarioArgs,
    pass: Pass,
    which: BlockOf,
    params_of: fn(&System) -> CostParams,
) -> Result<(Vec<OpCost>, String)> {
    let l = load(args)?;
    let ev = Evaluator::new(&l.model, &l.system, l.parallel, params_of(&l.system))?;
    let step = ev.evaluate(&pass);
    let moe_block = matches!(which, BlockOf::FirstMoe);
    let (block, what) = match which {
        BlockOf::FirstMoe => (
            step.blocks
                .iter()
                .find(|b| b.kind == BlockKind::Moe)
                .ok_or_else(|| {
                    Error::Scenario(format!("model {} has no MoE layer", l.model.name))
                })?,
            "one layer".to_string(),
        ),
        BlockOf::AttentionOfLayer(i) => {
            let &(a, _) = step.layers.get(i).ok_or_else(|| {
                Error::Scenario(format!(
                    "--layer {i}: model {} has {} decoder layers (0 to {})",
                    l.model.name,
                    step.layers.len(),
                    step.layers.len().saturating_sub(1)
                ))
            })?;
            let b = &step.blocks[a];
            (b, format!("layer {i} ({})", mixer_name(b.kind)))
        }
    };
    let ops: Vec<OpCost> = if moe_block {
        block
            .ops
            .iter()
            .copied()
            .filter(|o| o.category != Category::Other)
            .collect()
    } else {
        block.ops.clone()
    };
    Ok((
        ops,
        format!(
            "{} on {} ({}), {what}, one GPU",
            l.model.name, l.system.spec.name, l.parallel
        ),
    ))
}

/// A layer's token mixer in words.
fn mixer_name(kind: BlockKind) -> String {
    match kind {
        BlockKind::Attention {
            window: Some(w),
            chunked: true,
            ..
        } => format!("attention within {w}-token chunks"),
        BlockKind::Attention {
            window: Some(w), ..
        } => format!("attention over a {w}-token sliding window"),
        BlockKind::Attention { .. } => "full attention".into(),
        BlockKind::LinearAttention => "linear attention".into(),
        BlockKind::Mamba => "Mamba mixer".into(),
        _ => "no token mixer".into(),
    }
}

/// One collective of `kind` on a system (with `--set` applied), against its speed of light.
fn collective_op(
    a: &OpCollectiveArgs,
    kind: CollectiveKind,
    name: &'static str,
) -> Result<Vec<u8>> {
    let sets = crate::spec::overrides::parse_all(&a.set)?;
    let sys = System::load_with(&a.system, &sets)?;
    let b = parse_bytes(&a.bytes)?;
    // No collective's buffer is larger than the memory of the GPU that holds it.
    let memory = sys.gpu.memory_capacity.0;
    if b > memory {
        return Err(Error::Scenario(format!(
            "--bytes {}: larger than one {}'s memory ({}): no collective moves a buffer its GPU \
             cannot hold",
            a.bytes,
            sys.gpu.name,
            Bytes(memory)
        )));
    }
    let n = a.gpus.unwrap_or(sys.spec.gpu_count);
    if n == 0 || n > sys.spec.gpu_count {
        return Err(Error::Scenario(format!(
            "--gpus must be 1..={} for {}",
            sys.spec.gpu_count, sys.spec.name
        )));
    }
    let list = crate::ops::collective_ops(name, kind, b, n);
    let run = |p: CostParams| {
        let dev = Device::new(&sys, p)?;
        let algo = collective_cost(&dev, kind, b, n).algo;
        Ok::<_, Error>((cost_all(&list, &dev), algo.name().to_string()))
    };
    let (ops, algo) = run(CostParams::default_for(&sys))?;
    let (sol, _) = run(CostParams::speed_of_light())?;
    let r = report(
        format!("{name} {} over {n} GPUs", Bytes(b)),
        sys.spec.name.clone(),
        &ops,
        &sol,
        Some(algo),
    );
    render(&r, a.format)
}

pub fn run(cmd: &OpCommand) -> Result<Vec<u8>> {
    match cmd {
        OpCommand::Gemm(OpGemmArgs {
            gpu,
            system,
            m,
            n,
            k,
            dtype,
            format,
        }) => {
            let mut sys = system_for_gpu(gpu, system.as_deref())?;
            sys.gpu = load_gpu(gpu)?;
            let fmt = parse_dtype(dtype)?;
            if let Some(why) = crate::cost::generation::Generation::refusal(&sys.gpu, fmt) {
                return Err(Error::Scenario(why));
            }
            if *m == 0 || *n == 0 || *k == 0 {
                return Err(Error::Scenario(
                    "--m, --n and --k must be at least 1".into(),
                ));
            }
            let list = gemm_ops(
                &sys.engine.unfused_dequant,
                *m as f64,
                *n as f64,
                *k as f64,
                fmt,
            );
            let run = |p: CostParams| Ok::<_, Error>(cost_all(&list, &Device::new(&sys, p)?));
            let ops = run(CostParams::default_for(&sys))?;
            let sol = run(CostParams::speed_of_light())?;
            let r = report(
                format!("gemm m={m} n={n} k={k} {fmt}"),
                format!("{} (efficiencies of {})", sys.gpu.name, sys.spec.name),
                &ops,
                &sol,
                None,
            );
            render(&r, *format)
        }
        OpCommand::Allreduce(OpAllreduceArgs { collective }) => {
            collective_op(collective, CollectiveKind::AllReduce, "allreduce")
        }
        OpCommand::Allgather(OpAllgatherArgs { collective }) => {
            collective_op(collective, CollectiveKind::AllGather, "allgather")
        }
        OpCommand::Reducescatter(OpReducescatterArgs { collective }) => {
            collective_op(collective, CollectiveKind::ReduceScatter, "reducescatter")
        }
        OpCommand::Alltoall(OpAlltoallArgs { collective }) => {
            collective_op(collective, CollectiveKind::AllToAll, "alltoall")
        }
        OpCommand::Moe(OpMoeArgs {
            scenario,
            tokens,
            format,
        }) => {
            if *tokens == 0 {
                return Err(Error::Scenario("--tokens must be at least 1".into()));
            }
            let pass = Pass::decode(*tokens as f64, 0.0);
            let (ops, ctx) = block_ops(scenario, pass, BlockOf::FirstMoe, CostParams::default_for)?;
            let (sol, _) = block_ops(scenario, pass, BlockOf::FirstMoe, |_| {
                CostParams::speed_of_light()
            })?;
            render(
                &report(format!("moe layer, {tokens} tokens"), ctx, &ops, &sol, None),
                *format,
            )
        }
        OpCommand::Attention(OpAttentionArgs {
            scenario,
            batch,
            context,
            layer,
            format,
        }) => {
            if *batch == 0 {
                return Err(Error::Scenario("--batch must be at least 1".into()));
            }
            let pass = Pass::decode(*batch as f64, *context as f64);
            let which = BlockOf::AttentionOfLayer(*layer);
            let (ops, ctx) = block_ops(scenario, pass, which, CostParams::default_for)?;
            let (sol, _) = block_ops(scenario, pass, which, |_| CostParams::speed_of_light())?;
            render(
                &report(
                    format!("attention block, batch {batch}, context {context}"),
                    ctx,
                    &ops,
                    &sol,
                    None,
                ),
                *format,
            )
        }
    }
}
