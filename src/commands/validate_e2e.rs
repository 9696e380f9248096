//! `rooftop validate --measured <e2e serving CSV>`: every run of the file predicted with its
//! own model, system and layout, and the TPOT/TTFT errors per group (`--group-by`, default
//! backend × system × model). Kept apart from the kernel-table and single-scenario
//! validation, which compare one scenario.

use crate::cli::{MeasuredArgs, ScenarioArgs, DEFAULT_MODEL, DEFAULT_SYSTEM};
use crate::e2e::{evaluate, E2eValidation, ErrorSummary, GroupField, RunRow};
use crate::error::{Error, Result};
use crate::export::{self, table, Format, Table, Tabular};
use crate::measured::e2e_csv::{is_e2e_csv, parse_e2e_csv};
use crate::spec::overrides::{parse_all, Override};
use std::fmt::Write as _;
use std::path::Path;

/// The text of `path` when it is a file `is` recognises.
pub fn text_if(path: &str, is: fn(&str) -> bool) -> Option<String> {
    let p = Path::new(path);
    if !p.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(p).ok()?;
    is(&text).then_some(text)
}

/// The text of `path` when it is an e2e serving CSV.
pub fn e2e_text(path: &str) -> Option<String> {
    text_if(path, is_e2e_csv)
}

/// The text of `path` when it is a disaggregated serving CSV.
pub fn disagg_text(path: &str) -> Option<String> {
    text_if(path, crate::measured::e2e_disagg_csv::is_disagg_csv)
}

/// Validate against e2e files: disaggregated ones when every `--measured` file is one,
/// aggregated ones otherwise (a mix is refused: the two summaries are not one population).
pub fn run_any(
    args: &ScenarioArgs,
    m: &MeasuredArgs,
    group_by: &[GroupField],
    format: Format,
) -> Result<Vec<u8>> {
    let disagg = m
        .measured
        .iter()
        .filter(|f| disagg_text(f).is_some())
        .count();
    if disagg == 0 {
        return run(args, m, group_by, format);
    }
    if disagg < m.measured.len() {
        return Err(Error::Scenario(
            "give disaggregated serving CSVs (prefill_* and decode_* columns) apart from other measured files: their runs are a population of their own".into(),
        ));
    }
    validate_files(
        args,
        m,
        group_by,
        format,
        |f| {
            let text = disagg_text(f).unwrap_or_default();
            crate::measured::e2e_disagg_csv::parse_disagg_csv(&text, f)
        },
        crate::e2e_disagg::evaluate,
    )
}

/// How a file's runs are evaluated (`crate::e2e::evaluate`'s arguments).
type Evaluate<R> =
    fn(&[R], &str, &[Override], Option<&str>, &[GroupField]) -> Result<E2eValidation>;

/// Every `--measured` file's runs as `read` gives them, evaluated with `evaluate` under the
/// `--set` overrides and `--client` of `args` and `m`, and reported in `format`; the options
/// that would choose a run's model, system, engine or layout are refused.
fn validate_files<R>(
    args: &ScenarioArgs,
    m: &MeasuredArgs,
    group_by: &[GroupField],
    format: Format,
    read: impl Fn(&str) -> Result<Vec<R>>,
    evaluate: Evaluate<R>,
) -> Result<Vec<u8>> {
    refuse_chosen(args)?;
    let sets = parse_all(&args.set)?;
    let mut runs = Vec::new();
    for f in &m.measured {
        runs.extend(read(f)?);
    }
    let v = evaluate(
        &runs,
        &m.measured.join(", "),
        &sets,
        m.client.as_deref(),
        group_by,
    )?;
    nothing_evaluated(&v)?;
    export::export(&v, format, text)
}

/// The options that would choose a run's model, system, engine or layout are refused, not
/// ignored: each run names its own.
pub fn refuse_chosen(args: &ScenarioArgs) -> Result<()> {
    let chosen = [
        ("--model", args.model != DEFAULT_MODEL),
        ("--system", args.system != DEFAULT_SYSTEM),
        ("--engine", args.engine.is_some()),
    ]
    .into_iter()
    .find(|(_, given)| *given)
    .map(|(flag, _)| flag)
    .or_else(|| crate::commands::chosen_layout_flag(args));
    if let Some(flag) = chosen {
        return Err(Error::Scenario(format!(
            "{flag} does not apply to an e2e serving CSV: each run names its own model, system, engine and layout (--set and --client apply to every run)"
        )));
    }
    Ok(())
}

/// Nothing evaluated is no validation: a table of NaN medians (or an empty CSV) with exit
/// 0 read as a pass.
fn nothing_evaluated(v: &E2eValidation) -> Result<()> {
    if v.overall_tpot.n > 0 {
        return Ok(());
    }
    let reasons: Vec<String> = v
        .skipped
        .iter()
        .map(|s| format!("{} x {} (first at line {})", s.runs, s.reason, s.first_line))
        .collect();
    Err(Error::Scenario(format!(
        "{}: none of its {} runs could be evaluated; skipped: {}",
        v.source,
        v.total_runs,
        if reasons.is_empty() {
            "none (the file holds no runs)".to_string()
        } else {
            reasons.join("; ")
        }
    )))
}

/// Validate against the e2e serving CSVs given with `--measured` (all must be e2e files),
/// with the `--set` overrides and `--client` of `args` and `measured`. Each run names its own
/// model, system, engine and layout: the options that would choose those are refused rather
/// than ignored.
pub fn run(
    args: &ScenarioArgs,
    m: &MeasuredArgs,
    group_by: &[GroupField],
    format: Format,
) -> Result<Vec<u8>> {
    validate_files(
        args,
        m,
        group_by,
        format,
        |f| {
            let text = e2e_text(f).ok_or_else(|| {
                Error::Scenario(format!(
                    "{f}: not an e2e serving CSV; give e2e files on their own (each run names its own model and system)"
                ))
            })?;
            parse_e2e_csv(&text, f)
        },
        evaluate,
    )
}

impl Tabular for E2eValidation {
    type Row<'a> = &'a RunRow;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(self.runs.iter().collect())
    }
}

/// A share or an error in per cent, one decimal.
pub fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

fn signed(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

fn summary_cells(s: &ErrorSummary) -> [String; 3] {
    [pct(s.median_abs), pct(s.p90_abs), signed(s.bias)]
}

pub fn text(v: &E2eValidation) -> String {
    let mut o = String::new();
    let evaluated = v.overall_tpot.n;
    let _ = writeln!(
        o,
        "{}: {} runs, {} evaluated, {} skipped",
        v.source,
        v.total_runs,
        evaluated,
        v.total_runs - evaluated
    );
    let _ = writeln!(
        o,
        "error = (predicted - measured) / measured; |error| median and p90, bias = median error"
    );
    let _ = writeln!(o);
    let mut rows: Vec<Vec<String>> = v
        .groups
        .iter()
        .map(|g| {
            let mut r: Vec<String> = g.key.iter().map(|(_, value)| value.clone()).collect();
            r.push(g.tpot.n.to_string());
            r.extend(summary_cells(&g.tpot));
            r.extend(summary_cells(&g.ttft));
            r
        })
        .collect();
    let mut all: Vec<String> = v.group_by.iter().map(|_| String::new()).collect();
    if let Some(first) = all.first_mut() {
        *first = "all".into();
    }
    all.push(v.overall_tpot.n.to_string());
    all.extend(summary_cells(&v.overall_tpot));
    all.extend(summary_cells(&v.overall_ttft));
    rows.push(all);
    let mut headers: Vec<&str> = v.group_by.iter().map(|f| f.name()).collect();
    headers.extend([
        "n",
        "TPOT |err| med",
        "p90",
        "bias",
        "TTFT |err| med",
        "p90",
        "bias",
    ]);
    o.push_str(&table(&headers, &rows));
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "clients (configs/e2e/models.toml [clients], from each run's campaign):"
    );
    let rows: Vec<Vec<String>> = v
        .harnesses
        .iter()
        .map(|h| {
            let campaign = if h.campaign.is_empty() {
                "(none recorded)".to_string()
            } else {
                h.campaign.clone()
            };
            let how = match h.how {
                "default" => "harness unknown: the documented default".to_string(),
                other => other.to_string(),
            };
            vec![campaign, h.runs.to_string(), h.client.clone(), how]
        })
        .collect();
    o.push_str(&table(&["campaign", "runs", "client", "how"], &rows));
    if !v.skipped.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "skipped:");
        let rows: Vec<Vec<String>> = v
            .skipped
            .iter()
            .map(|s| {
                vec![
                    s.runs.to_string(),
                    format!("line {}", s.first_line),
                    s.reason.clone(),
                ]
            })
            .collect();
        o.push_str(&table(&["runs", "first", "reason"], &rows));
    }
    o
}
