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

fn group_cells(g: &SpecGroup) -> Vec<String> {
    vec![
        g.method.clone(),
        g.engine.clone(),
        g.n.to_string(),
        format!("{:.1} %", g.median_abs_error * 100.0),
        format!("{:+.1} %", g.bias * 100.0),
        format!("{:.0} %", g.gain_loss_right * 100.0),
    ]
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
    let mut rows: Vec<Vec<String>> = v.groups.iter().map(group_cells).collect();
    rows.push(group_cells(&v.overall));
    o.push_str(&table(
        &[
            "method",
            "engine",
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
                r.concurrency.to_string(),
                format!("{}x{}/{}", r.k, r.topk, r.verify_tokens),
                format!("{:.2}", r.expected_tokens_per_step),
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
        "step/plain: one speculative step in plain decode steps (measured: tokens per step / measured speedup)"
    );
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
