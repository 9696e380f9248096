//! Reader for measured speculative-decoding runs in the `specdec_runs.csv` form (one row per
//! run with its no-speculation baseline: source, GPU, engine, model, layout, method and draft
//! settings, concurrency, the metric as the source names it, baseline and speculative values,
//! and the acceptance statistic as the engine printed it).
//!
//! The file is a collection from papers, blogs and threads, so most fields are free text
//! (`4 (ep 1)`, `steps=3 topk=3 num_draft_tokens=4`, `2 concurrent requests per rank`): they
//! are kept as written and read by `crate::specdec_runs`, which says why a row it cannot read
//! is not evaluated. What this reader refuses, naming the row, is a number that is there but
//! impossible: a baseline or speculative value that is not a positive finite number.

use super::measured_error;
use crate::error::Result;
use serde::Serialize;

/// Columns every file must have.
pub const COLUMNS: [&str; 16] = [
    "gpu",
    "num_gpus",
    "engine",
    "model_id",
    "precision",
    "tp",
    "method",
    "spec_tokens",
    "input_len",
    "output_len",
    "concurrency_or_batch",
    "metric",
    "baseline_value",
    "spec_value",
    "acceptance_metric",
    "acceptance_value",
];

/// One measured run, its fields as written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecRun {
    /// 1-based line in the file.
    pub line: usize,
    pub gpu: String,
    pub num_gpus: String,
    pub engine: String,
    pub model_id: String,
    pub precision: String,
    pub tp: String,
    pub method: String,
    pub spec_tokens: String,
    pub input_len: String,
    pub output_len: String,
    pub concurrency: String,
    pub metric: String,
    /// The no-speculation value; `None` where the source states only a ratio.
    pub baseline: Option<f64>,
    pub spec: Option<f64>,
    pub acceptance_metric: String,
    pub acceptance_value: String,
    /// `per_position_acceptance`, where the file has the column.
    pub per_position: String,
    /// `source_url`, where the file has the column: where the run was published.
    pub source_url: String,
}

/// Whether `text` looks like a speculative-decoding runs CSV (its header names
/// `spec_value`, `baseline_value` and `spec_tokens`).
pub fn is_specdec_csv(text: &str) -> bool {
    super::csv_header_has(text, &["spec_value", "baseline_value", "spec_tokens"])
}

/// Parse a speculative-decoding runs CSV. `file` labels errors.
pub fn parse_specdec_csv(text: &str, file: &str) -> Result<Vec<SpecRun>> {
    let kind = "a speculative-decoding runs CSV";
    super::read_rows(
        text,
        file,
        kind,
        &COLUMNS,
        &["per_position_acceptance", "source_url"],
        |row| {
            let get = |c: usize| row.text(c);
            let value = |c: usize| -> Result<Option<f64>> {
                let t = row.get(c);
                if t.is_empty() {
                    return Ok(None);
                }
                match t.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(v)),
                    _ => Err(row.err(c, "a positive number")),
                }
            };
            let (baseline, spec) = (value(12)?, value(13)?);
            if row.get(3).is_empty() {
                return Err(measured_error(
                    file,
                    Some(row.line),
                    "`model_id` is empty: expected the model the run served",
                ));
            }
            Ok(SpecRun {
                line: row.line,
                gpu: get(0),
                num_gpus: get(1),
                engine: get(2),
                model_id: get(3),
                precision: get(4),
                tp: get(5),
                method: get(6),
                spec_tokens: get(7),
                input_len: get(8),
                output_len: get(9),
                concurrency: get(10),
                metric: get(11),
                baseline,
                spec,
                acceptance_metric: get(14),
                acceptance_value: get(15),
                per_position: row.extra(0).to_string(),
                source_url: row.extra(1).trim().to_string(),
            })
        },
    )
}
