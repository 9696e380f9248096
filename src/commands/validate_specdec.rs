//! `rooftop validate --measured <specdec runs CSV>`: every measured speculative-decoding run
//! predicted on its own model, system, engine, layout and draft settings, with its measured
//! acceptance; speedup errors and gain/loss calls per method and engine.

use crate::cli::{MeasuredArgs, ScenarioArgs, DEFAULT_MODEL, DEFAULT_SYSTEM};
use crate::error::{Error, Result};
use crate::export::{self, table, Format, Table, Tabular};
use crate::measured::specdec_csv::{is_specdec_csv, parse_specdec_csv};
use crate::specdec_runs::{evaluate, SpecGroup, SpecRunRow, SpecValidation};
use std::fmt::Write as _;

/// The text of `path` when it is a speculative-decoding runs CSV.
pub fn specdec_text(path: &str) -> Option<String> {
    crate::commands::validate_e2e::text_if(path, is_specdec_csv)
}

pub fn run(args: &ScenarioArgs, m: &MeasuredArgs, format: Format) -> Result<Vec<u8>> {
    let chosen = [
        ("--model", args.model != DEFAULT_MODEL),
        ("--system", args.system != DEFAULT_SYSTEM),
        ("--engine", args.engine.is_some()),
        ("--tp", args.tp.is_some()),
        ("--calibration", args.calibration.is_some()),
        ("--set", !args.set.is_empty()),
    ];
    if let Some((flag, _)) = chosen.iter().find(|(_, given)| *given) {
        return Err(Error::Scenario(format!(
            "{flag} does not apply to a speculative-decoding runs CSV: each run names its own model, system, engine and layout"
        )));
    }
    let mut runs = Vec::new();
    for f in &m.measured {
        let text = specdec_text(f).ok_or_else(|| {
            Error::Scenario(format!(
                "{f}: not a speculative-decoding runs CSV; give such files on their own"
            ))
        })?;
        runs.extend(parse_specdec_csv(&text, f)?);
    }
    let v = evaluate(&runs, &m.measured.join(", "))?;
    if v.rows.is_empty() {
        return Err(Error::Scenario(format!(
            "{}: none of its {} runs could be evaluated ({} without an acceptance figure)",
            v.source, v.total_rows, v.without_acceptance
        )));
    }
    export::export(&v, format, text)
}

impl Tabular for SpecValidation {
    type Row<'a> = &'a SpecRunRow;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(self.rows.iter().collect())
    }
}

fn group_cells(g: &SpecGroup, from: &str) -> Vec<String> {
    vec![
        g.method.clone(),
        g.engine.clone(),
        from.to_string(),
        g.n.to_string(),
        format!("{:.1} %", g.median_abs_error * 100.0),
        format!("{:+.1} %", g.bias * 100.0),
        format!("{:.0} %", g.gain_loss_right * 100.0),
    ]
}

/// C, with the sequences running at once where fewer: `56 (48/56)` (speculating/plain).
fn running(c: u32, spec: u32, plain: u32) -> String {
    if spec == c && plain == c {
        c.to_string()
    } else {
        format!("{c} ({spec}/{plain})")
    }
}

pub fn text(v: &SpecValidation) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} runs, {} evaluated, {} without an acceptance figure (acceptance is an input), {} not evaluated for other reasons",
        v.source,
        v.total_rows,
        v.rows.len(),
        v.without_acceptance,
        v.not_evaluated.len() - v.without_acceptance
    );
    let _ = writeln!(
        o,
        "error = (predicted - measured) / measured speedup; gain/loss right = both on the same side of 1"
    );
    let _ = writeln!(o);
    let mut rows: Vec<Vec<String>> = v.groups.iter().map(|g| group_cells(g, "row")).collect();
    rows.push(group_cells(&v.overall, "row"));
    rows.extend(
        v.supplied_groups
            .iter()
            .map(|g| group_cells(g, "runs.toml")),
    );
    o.push_str(&table(
        &[
            "method",
            "engine",
            "acceptance",
            "n",
            "|err| med",
            "bias",
            "gain/loss right",
        ],
        &rows,
    ));
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = v
        .rows
        .iter()
        .map(|r| {
            vec![
                r.line.to_string(),
                r.method.clone(),
                r.model.clone(),
                r.parallel.clone(),
                running(r.concurrency, r.running, r.plain_running),
                format!("{}x{}/{}", r.k, r.topk, r.verify_tokens),
                format!("{:.2}", r.expected_tokens_per_step),
                r.acceptance_from.clone(),
                format!("{:.2}", r.measured_speedup),
                format!("{:.2}", r.predicted_speedup),
                format!("{:+.1} %", r.error * 100.0),
                format!("{:.2}", r.measured_step_in_plain_steps),
                format!("{:.2}", r.predicted_step_in_plain_steps),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "line",
            "method",
            "model",
            "layout",
            "C",
            "k x topk/verify",
            "tokens/step",
            "from",
            "measured",
            "predicted",
            "error",
            "step/plain measured",
            "predicted",
        ],
        &rows,
    ));
    let _ = writeln!(
        o,
        "step/plain: one speculative step in plain decode steps (measured: tokens per step x running / plain running / measured speedup)"
    );
    let _ = writeln!(
        o,
        "from: the acceptance figure is the row's own, or one configs/specdec/runs.toml supplies (with its source) for a source that prints none"
    );
    if !v.implied_series.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "rows without their own acceptance: the tokens per step each measured speedup implies under rooftop's step, per batch sweep"
        );
        let _ = writeln!(
            o,
            "(acceptance does not depend on the batch: a spread above 1 is the step's growth with C mispriced, whatever the true acceptance)"
        );
        let rows: Vec<Vec<String>> = v
            .implied_series
            .iter()
            .map(|s| {
                let pairs: Vec<String> = s
                    .concurrency
                    .iter()
                    .zip(&s.implied_tokens_per_step)
                    .map(|(c, e)| format!("{c}:{e:.2}"))
                    .collect();
                vec![
                    s.method.clone(),
                    s.model.clone(),
                    s.parallel.clone(),
                    s.shape.clone(),
                    pairs.join(" "),
                    format!("{:.2}", s.spread),
                ]
            })
            .collect();
        o.push_str(&table(
            &[
                "method",
                "model",
                "layout",
                "k x topk/verify",
                "C:implied tokens/step",
                "spread",
            ],
            &rows,
        ));
    }
    let others: Vec<_> = v
        .not_evaluated
        .iter()
        .filter(|n| !n.reason.starts_with("no acceptance figure"))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "not evaluated:");
        for n in others {
            let _ = writeln!(o, "  line {}: {}", n.line, n.reason);
        }
    }
    o
}
