//! `rooftop predict`: one design point, in text, JSON or CSV.

use crate::cli::PredictArgs;
use crate::commands::load;
use crate::error::Result;
use crate::export::{self, table};
use crate::predict::{predict_fitting, Prediction};
use std::fmt::Write as _;

pub fn run(a: &PredictArgs) -> Result<Vec<u8>> {
    let PredictArgs {
        scenario: args,
        batch,
        context,
        ops: show_ops,
        format,
    } = a.clone();
    let args = &args;
    // A step of no sequences has no TPOT: refused, as sweep and op refuse their zeros.
    if batch == 0 {
        return Err(crate::error::Error::Scenario(
            "--batch must be at least 1".into(),
        ));
    }
    let l = load(args)?;
    let s = l.scenario()?;
    let p = predict_fitting(&s, batch, context)?;
    export::export(&p, format, |p| text(p, show_ops))
}

/// Breakdown rows (category, default ms, share, SOL ms), largest first, zero rows dropped.
pub fn breakdown_table(p: &Prediction) -> String {
    let mut cats: Vec<(&str, f64, f64)> = p
        .breakdown_ms
        .iter()
        .map(|(k, v)| (*k, *v, p.sol_breakdown_ms.get(k).copied().unwrap_or(0.0)))
        .collect();
    cats.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut rows: Vec<Vec<String>> = cats
        .iter()
        .filter(|(_, v, s)| *v > 0.0 || *s > 0.0)
        .map(|(k, v, s)| {
            vec![
                k.to_string(),
                format!("{:.3}", v),
                format!("{:.1} %", 100.0 * v / p.tpot_ms),
                format!("{:.3}", s),
            ]
        })
        .collect();
    rows.push(vec![
        "total".into(),
        format!("{:.3}", p.tpot_ms),
        "100.0 %".into(),
        format!("{:.3}", p.sol_tpot_ms),
    ]);
    table(
        &[
            "category",
            &format!("{} ms", p.provenance),
            "share",
            "SOL ms",
        ],
        &rows,
    )
}

/// `1 GPU`, `8 GPUs`.
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub fn text(p: &Prediction, show_ops: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on {} ({}, {}), batch {}, context {}",
        p.model,
        p.system,
        p.parallel,
        plural(p.gpus as u64, "GPU"),
        p.batch,
        p.context
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "TPOT ({})      {:>9.3} ms   {:>10.1} tok/s",
        p.provenance, p.tpot_ms, p.throughput_tok_s
    );
    if let Some([lo, hi]) = p.tpot_ci95_ms {
        let _ = writeln!(
            o,
            "  95 % interval   [{lo:.3}, {hi:.3}] ms (calibration covariance)"
        );
    }
    let _ = writeln!(
        o,
        "speed of light     {:>9.3} ms   {:>10.1} tok/s",
        p.sol_tpot_ms, p.sol_throughput_tok_s
    );
    if let (Some(w), Some(j)) = (p.watts_per_gpu, p.joules_per_token) {
        let usd = p
            .usd_per_million_output_tokens
            .map_or("- (no price)".to_string(), |u| format!("{u:.2}"));
        let _ = writeln!(
            o,
            "power              {w:>9.0} W/GPU  {j:>10.3} J/token; $ per million output tokens {usd}"
        );
    }
    if p.allreduces_per_step == 0 {
        let _ = writeln!(
            o,
            "all-reduces/step   {:>9}      (one GPU per stage: none); {} kernels/step",
            0, p.kernels_per_step
        );
    } else {
        let _ = writeln!(
            o,
            "all-reduces/step   {:>9}      of {:.1} KB each; {} kernels/step",
            p.allreduces_per_step,
            p.allreduce_bytes / 1e3,
            p.kernels_per_step
        );
    }
    let _ = writeln!(o);
    o.push_str(&breakdown_table(p));
    let _ = writeln!(o);
    let m = &p.memory;
    // A negative budget is no KV cache, said in words (JSON keeps the signed figure).
    let kv = if m.kv_budget_gb > 0.0 {
        format!("{:.1} GB for KV", m.kv_budget_gb)
    } else {
        format!("no room for KV (short by {:.1} GB)", -m.kv_budget_gb)
    };
    let _ = writeln!(
        o,
        "memory per GPU: {:.1} GB weights + {:.1} GB reserve of {:.1} GB usable ({:.1} GB capacity) -> {kv}",
        m.weights_per_gpu_gb, m.activation_reserve_gb, m.usable_gb, m.capacity_gb
    );
    let _ = writeln!(
        o,
        "KV cache: {:.0} B/token/GPU; holds {:.0} tokens = {:.0} sequences at this context; this point needs {:.2} GB/GPU: {}",
        m.kv_bytes_per_token_per_gpu,
        m.max_kv_tokens,
        m.max_sequences_at_context,
        m.kv_needed_gb,
        if m.fits { "fits" } else { "DOES NOT FIT" }
    );
    let _ = writeln!(o);
    // Per layer: consecutive layers of the same kind and time collapse into one line.
    let _ = writeln!(o, "per layer:");
    let mut i = 0;
    while i < p.layers.len() {
        let l = &p.layers[i];
        let mut j = i;
        while j + 1 < p.layers.len()
            && p.layers[j + 1].kind == l.kind
            && p.layers[j + 1].window == l.window
        {
            j += 1;
        }
        let range = if i == j {
            format!("layer {i}")
        } else {
            format!("layers {i}-{j}")
        };
        let w = l
            .window
            .map(|w| format!(", window {w}"))
            .unwrap_or_default();
        let top: Vec<String> = {
            let mut v: Vec<(&&str, &f64)> =
                l.breakdown_ms.iter().filter(|(_, v)| **v > 0.0).collect();
            v.sort_by(|a, b| b.1.total_cmp(a.1));
            v.iter()
                .take(3)
                .map(|(k, v)| format!("{k} {:.1} us", **v * 1e3))
                .collect()
        };
        let _ = writeln!(
            o,
            "  {range:<14} {:<5}{w} {:>8.1} us each ({})",
            l.kind,
            l.time_ms * 1e3,
            top.join(", ")
        );
        i = j + 1;
    }
    let _ = writeln!(o);
    if show_ops {
        // The operator list as data, in the order one layer runs it: every op with its shape.
        let _ = writeln!(o, "operators per step, in order (x = times per step):");
        let rows: Vec<Vec<String>> = p
            .ops
            .iter()
            .map(|r| {
                vec![
                    r.block.to_string(),
                    r.name.to_string(),
                    r.count.to_string(),
                    r.shape.shape(),
                    format!("{:.2}", r.time_us),
                    format!("{:.3}", r.total_ms),
                    r.bound.to_string(),
                ]
            })
            .collect();
        o.push_str(&table(
            &["block", "op", "x", "shape", "us/call", "ms/step", "bound"],
            &rows,
        ));
        let _ = writeln!(o, "{}", outside_operators_line(p));
        return o;
    }
    let mut ops = p.ops.clone();
    ops.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    let n = 10.min(ops.len());
    let _ = writeln!(
        o,
        "top operators by time per step (--ops for all, with shapes):"
    );
    let rows: Vec<Vec<String>> = ops[..n]
        .iter()
        .map(|r| {
            vec![
                r.name.to_string(),
                r.category.to_string(),
                r.count.to_string(),
                format!("{:.2}", r.time_us),
                format!("{:.2}", r.overhead_us),
                format!("{:.3}", r.total_ms),
                format!("{:.1}", r.bytes / 1e6),
                format!("{:.1}", r.intensity),
                r.bound.to_string(),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "op", "category", "x", "us/call", "fixed us", "ms/step", "MB/call", "FLOP/B", "bound",
        ],
        &rows,
    ));
    let _ = writeln!(o, "{}", outside_operators_line(p));
    o
}

/// What the step costs beyond its operators: with the operators' ms/step, the TPOT.
fn outside_operators_line(p: &Prediction) -> String {
    let x = p.outside_operators_ms;
    format!(
        "beyond the operators: pipeline {:.3} ms, engine CPU not hidden by the kernels {:.3} ms (with every operator's ms/step: the TPOT, {:.3} ms)",
        x.pipeline, x.engine_cpu, p.tpot_ms
    )
}
