//! The CSV rows of every record: flat structs, one doc line per field, built from the records
//! the commands return. Column names are the field names; columns named only at run time
//! (breakdown categories, per-concurrency values) follow them (see [`super::Table`]).
//! Numbers keep the decimals their columns always had ([`round`]).

use super::{round, Table, Tabular};
use crate::calibrate::Calibration;
use crate::explore::{Combo, DesignPoint, ExploreSummary, Stream};
use crate::predict::Prediction;
use crate::serve::Sweep;
use crate::specdec::SpecDec;
use crate::whatif::{Comparison, SensitivityReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `v` rounded to `digits` decimals, `None` (an empty cell, a JSON null) kept.
fn round_opt(v: Option<f64>, digits: i32) -> Option<f64> {
    v.map(|x| round(x, digits))
}

/// `(name_ms, value)` columns of a category → ms map, in the map's order.
fn breakdown_columns(b: &BTreeMap<&'static str, f64>) -> (Vec<String>, Vec<Option<f64>>) {
    b.iter()
        .map(|(k, v)| (format!("{k}_ms"), Some(round(*v, 4))))
        .unzip()
}

/// `predict --format csv`: the headline numbers, then one `<category>_ms` column each.
#[derive(Debug, Serialize)]
pub struct PredictRow<'a> {
    /// Model name.
    pub model: &'a str,
    /// System name.
    pub system: &'a str,
    /// Layout, e.g. `tp8`.
    pub parallel: &'a str,
    /// Sequences decoded per step.
    pub batch: u32,
    /// Tokens in each sequence's KV cache.
    pub context: u32,
    /// Time per output token, ms.
    pub tpot_ms: f64,
    /// Speed-of-light TPOT, ms.
    pub sol_tpot_ms: f64,
    /// Output tokens per second of the server.
    pub throughput_tok_s: f64,
    /// Weight bytes per GPU, GB.
    pub weights_per_gpu_gb: f64,
    /// KV-cache tokens that fit per replica.
    pub max_kv_tokens: f64,
    /// Whether this point fits in memory.
    pub fits: bool,
    /// Power per GPU, W (empty without a power model).
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all GPUs, J.
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens (empty without a price).
    pub usd_per_million_output_tokens: Option<f64>,
}

impl Tabular for Prediction {
    type Row<'a> = PredictRow<'a>;
    fn table(&self) -> Table<PredictRow<'_>> {
        let p = self;
        let (extra_columns, extra) = breakdown_columns(&p.breakdown_ms);
        Table {
            rows: vec![PredictRow {
                model: &p.model,
                system: &p.system,
                parallel: &p.parallel,
                batch: p.batch,
                context: p.context,
                tpot_ms: round(p.tpot_ms, 4),
                sol_tpot_ms: round(p.sol_tpot_ms, 4),
                throughput_tok_s: round(p.throughput_tok_s, 2),
                weights_per_gpu_gb: round(p.memory.weights_per_gpu_gb, 3),
                max_kv_tokens: round(p.memory.max_kv_tokens, 0),
                fits: p.memory.fits,
                watts_per_gpu: round_opt(p.watts_per_gpu, 1),
                joules_per_token: round_opt(p.joules_per_token, 6),
                usd_per_million_output_tokens: round_opt(p.usd_per_million_output_tokens, 4),
            }],
            extra_columns,
            extra: vec![extra],
        }
    }
}

/// `sweep --format csv`: one row per concurrency, then one `<category>_ms` column each.
#[derive(Debug, Serialize)]
pub struct SweepRow {
    /// Concurrent requests offered.
    pub concurrency: u32,
    /// Requests running at once.
    pub running: u32,
    /// Requests waiting for a slot.
    pub queued: u32,
    /// TPOT under the sweep's definition, ms.
    pub tpot_ms: f64,
    /// Inter-token latency, ms.
    pub tpot_itl_ms: f64,
    /// E2E / tokens, ms.
    pub tpot_e2e_ms: f64,
    /// Time to first token, ms.
    pub ttft_ms: f64,
    /// Output tokens per second of the server.
    pub throughput_tok_s: f64,
    /// Speed-of-light TPOT, ms.
    pub sol_tpot_ms: f64,
    /// 95 % interval of `tpot_ms` from a calibration, ms (empty without one).
    pub tpot_ci95_low_ms: Option<f64>,
    pub tpot_ci95_high_ms: Option<f64>,
    /// Mean power per GPU, W (empty without a power model).
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all GPUs, J.
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens (empty without a price).
    pub usd_per_million_output_tokens: Option<f64>,
    /// US dollars per million tokens in and out (empty without a price).
    pub usd_per_million_total_tokens: Option<f64>,
}

impl Tabular for Sweep {
    type Row<'a> = SweepRow;
    fn table(&self) -> Table<SweepRow> {
        let extra_columns = self
            .points
            .first()
            .map(|p| breakdown_columns(&p.breakdown_ms).0)
            .unwrap_or_default();
        Table {
            rows: self
                .points
                .iter()
                .map(|p| SweepRow {
                    concurrency: p.concurrency,
                    running: p.running,
                    queued: p.queued,
                    tpot_ms: round(p.tpot_ms, 4),
                    tpot_itl_ms: round(p.tpot_itl_ms, 4),
                    tpot_e2e_ms: round(p.tpot_e2e_ms, 4),
                    ttft_ms: round(p.ttft_ms, 3),
                    throughput_tok_s: round(p.throughput_tok_s, 2),
                    sol_tpot_ms: round(p.sol_tpot_ms, 4),
                    tpot_ci95_low_ms: round_opt(p.tpot_ci95_ms.map(|c| c[0]), 4),
                    tpot_ci95_high_ms: round_opt(p.tpot_ci95_ms.map(|c| c[1]), 4),
                    watts_per_gpu: round_opt(p.watts_per_gpu, 1),
                    joules_per_token: round_opt(p.joules_per_token, 6),
                    usd_per_million_output_tokens: round_opt(p.usd_per_million_output_tokens, 4),
                    usd_per_million_total_tokens: round_opt(p.usd_per_million_total_tokens, 4),
                })
                .collect(),
            extra_columns,
            extra: self
                .points
                .iter()
                .map(|p| breakdown_columns(&p.breakdown_ms).1)
                .collect(),
        }
    }
}

/// `specdec --format csv`: one row per draft length and concurrency.
#[derive(Debug, Serialize)]
pub struct SpecdecRow {
    /// Draft length.
    pub k: u32,
    /// Concurrent requests.
    pub concurrency: u32,
    /// Sequences decoding at once (max_num_seqs and the KV cache permitting).
    pub running: u32,
    /// The same without speculation.
    pub plain_running: u32,
    /// Plain decoding's TPOT at this concurrency, ms.
    pub plain_tpot_ms: Option<f64>,
    /// Time per output token with speculation, ms.
    pub tpot_ms: f64,
    /// Its 95 % interval with a calibration, ms (empty without one).
    pub tpot_ci95_low_ms: Option<f64>,
    pub tpot_ci95_high_ms: Option<f64>,
    /// Output tokens per second of the server.
    pub throughput_tok_s: f64,
    /// Plain-decode TPOT over this TPOT.
    pub speedup: f64,
    /// Tokens emitted per verify step.
    pub expected_tokens_per_step: f64,
    /// Drafting time per step, ms.
    pub draft_ms: f64,
    /// Verification time per step, ms.
    pub verify_ms: f64,
    /// The whole speculative step as the engine schedules it, ms.
    pub step_ms: f64,
}

impl Tabular for SpecDec {
    type Row<'a> = SpecdecRow;
    fn table(&self) -> Table<SpecdecRow> {
        Table::flat(
            self.points
                .iter()
                .map(|p| SpecdecRow {
                    k: p.k,
                    concurrency: p.concurrency,
                    running: p.running,
                    plain_running: p.plain_running,
                    plain_tpot_ms: self
                        .baseline_tpot_ms
                        .iter()
                        .find(|(c, _)| *c == p.concurrency)
                        .map(|(_, t)| round(*t, 4)),
                    tpot_ms: round(p.tpot_ms, 4),
                    tpot_ci95_low_ms: round_opt(p.tpot_ci95_ms.map(|c| c[0]), 4),
                    tpot_ci95_high_ms: round_opt(p.tpot_ci95_ms.map(|c| c[1]), 4),
                    throughput_tok_s: round(p.throughput_tok_s, 2),
                    speedup: round(p.speedup, 4),
                    expected_tokens_per_step: round(p.expected_tokens_per_step, 4),
                    draft_ms: round(p.draft_ms, 4),
                    verify_ms: round(p.verify_ms, 4),
                    step_ms: round(p.step_ms, 4),
                })
                .collect(),
        )
    }
}

/// `compare --format csv`: one row per system and layout. Per concurrency C, the columns
/// `tpot_ms_cC`, `throughput_tok_s_cC` and `dominant_cC` come first (see [`CompareRowTail`]).
#[derive(Debug, Serialize)]
pub struct CompareRowHead<'a> {
    /// System label.
    pub system: &'a str,
    /// Layout.
    pub parallel: &'a str,
    /// GPUs of the layout.
    pub gpus: u32,
}

/// One concurrency's columns of a compare row.
#[derive(Debug, Serialize)]
pub struct ComparePoint<'a> {
    /// TPOT at this concurrency, ms.
    pub tpot_ms: Option<f64>,
    /// Output tokens per second at this concurrency.
    pub throughput_tok_s: Option<f64>,
    /// The largest breakdown category at this concurrency.
    pub dominant: Option<&'a str>,
}

/// The columns of a compare row after the per-concurrency ones.
#[derive(Debug, Serialize)]
pub struct CompareRowTail<'a> {
    /// Highest throughput of the serving sweep, tok/s (empty when the row cannot run).
    pub plateau_tok_s: Option<f64>,
    /// Weight bytes per GPU, GB.
    pub weights_per_gpu_gb: f64,
    /// KV-cache tokens that fit per replica.
    pub max_kv_tokens: f64,
    /// Whether the model fits.
    pub fits: bool,
    /// Cost per million output tokens at the plateau, where the system has a price.
    pub usd_per_million_tokens: Option<f64>,
    /// The point of highest throughput that meets the targets (the plateau's without
    /// them): its concurrency, tok/s and cost per million output tokens; empty where none
    /// meets them.
    pub at_target_concurrency: Option<u32>,
    pub at_target_throughput_tok_s: Option<f64>,
    pub at_target_usd_per_million_tokens: Option<f64>,
    /// Why the layout cannot run, if it cannot.
    pub error: Option<&'a str>,
}

/// A compare row: head, one [`ComparePoint`] per concurrency, tail. Its header is written
/// by [`compare_csv`], since the per-concurrency names carry the concurrency.
pub type CompareRow<'a> = (
    CompareRowHead<'a>,
    Vec<ComparePoint<'a>>,
    CompareRowTail<'a>,
);

/// The CSV of a comparison over `concurrency`.
pub fn compare_csv(r: &Comparison) -> crate::error::Result<Vec<u8>> {
    let concurrency = &r.concurrency;
    use crate::whatif::CompareRow as R;
    let mut header: Vec<String> = vec!["system".into(), "parallel".into(), "gpus".into()];
    for c in concurrency {
        header.push(format!("tpot_ms_c{c}"));
        header.push(format!("throughput_tok_s_c{c}"));
        header.push(format!("dominant_c{c}"));
    }
    header.extend(
        [
            "plateau_tok_s",
            "weights_per_gpu_gb",
            "max_kv_tokens",
            "fits",
            "usd_per_million_tokens",
            "at_target_concurrency",
            "at_target_throughput_tok_s",
            "at_target_usd_per_million_tokens",
            "error",
        ]
        .map(String::from),
    );
    let rows: Vec<CompareRow> = r
        .rows
        .iter()
        .map(|x| {
            (
                CompareRowHead {
                    system: &x.system,
                    parallel: &x.parallel,
                    gpus: x.gpus,
                },
                concurrency
                    .iter()
                    .map(|&c| ComparePoint {
                        tpot_ms: R::at(&x.tpot_ms, c).map(|t| round(*t, 4)),
                        throughput_tok_s: R::at(&x.throughput_tok_s, c).map(|t| round(*t, 2)),
                        // A batch that does not fit says so where its category would be.
                        dominant: match R::at(&x.does_not_fit, c) {
                            Some(_) => Some("does not fit"),
                            None => R::at(&x.dominant, c).map(|d| d.as_str()),
                        },
                    })
                    .collect(),
                CompareRowTail {
                    plateau_tok_s: x.plateau_tok_s.map(|p| round(p, 1)),
                    weights_per_gpu_gb: round(x.weights_per_gpu_gb, 2),
                    max_kv_tokens: round(x.max_kv_tokens, 0),
                    fits: x.fits,
                    usd_per_million_tokens: x.usd_per_million_tokens.map(|u| round(u, 4)),
                    at_target_concurrency: x.at_target.as_ref().map(|t| t.concurrency),
                    at_target_throughput_tok_s: x
                        .at_target
                        .as_ref()
                        .map(|t| round(t.throughput_tok_s, 2)),
                    at_target_usd_per_million_tokens: x
                        .at_target
                        .as_ref()
                        .and_then(|t| t.usd_per_million_output_tokens)
                        .map(|u| round(u, 4)),
                    error: x.error.as_deref(),
                },
            )
        })
        .collect();
    super::csv_with_header(&header, &rows)
}

/// `sensitivity --format csv`: one row per parameter.
#[derive(Debug, Serialize)]
pub struct SensitivityRow {
    /// The parameter scaled.
    pub parameter: &'static str,
    /// d ln TPOT / d ln parameter.
    pub tpot_elasticity: f64,
    /// d ln plateau / d ln parameter.
    pub plateau_elasticity: f64,
    /// TPOT change for +10 % of the parameter, percent.
    pub tpot_change_pct_for_plus_10: f64,
    /// Plateau change for +10 % of the parameter, percent.
    pub plateau_change_pct_for_plus_10: f64,
    /// Factor the parameter alone must be scaled by to reach `--target-tpot`.
    pub factor_for_target: Option<f64>,
    /// TPOT with this parameter taken to its limit, ms.
    pub tpot_floor_ms: f64,
}

impl Tabular for SensitivityReport {
    type Row<'a> = SensitivityRow;
    fn table(&self) -> Table<SensitivityRow> {
        Table::flat(
            self.parameters
                .iter()
                .map(|p| SensitivityRow {
                    parameter: p.name,
                    tpot_elasticity: round(p.tpot_elasticity, 4),
                    plateau_elasticity: round(p.plateau_elasticity, 4),
                    tpot_change_pct_for_plus_10: round(p.tpot_change_pct_for_plus_10, 3),
                    plateau_change_pct_for_plus_10: round(p.plateau_change_pct_for_plus_10, 3),
                    factor_for_target: p.factor_for_target.map(|f| round(f, 4)),
                    tpot_floor_ms: round(p.tpot_floor_ms, 4),
                })
                .collect(),
        )
    }
}

/// `calibrate --format csv`: one row per fitted parameter.
#[derive(Debug, Serialize)]
pub struct CalibrationRow<'a> {
    /// Parameter name.
    pub parameter: &'a str,
    /// Fitted value.
    pub value: f64,
    /// Standard error.
    pub stderr: f64,
    /// Lower end of the 95 % interval.
    pub ci95_low: f64,
    /// Upper end of the 95 % interval.
    pub ci95_high: f64,
    /// The prior's value.
    pub prior: f64,
    /// Whether the measurements say anything about it.
    pub informed_by_data: bool,
}

impl Tabular for Calibration {
    type Row<'a> = CalibrationRow<'a>;
    fn table(&self) -> Table<CalibrationRow<'_>> {
        Table::flat(
            self.parameters
                .iter()
                .map(|p| CalibrationRow {
                    parameter: &p.name,
                    value: round(p.value, 6),
                    stderr: round(p.stderr, 6),
                    ci95_low: round(p.ci95_low, 6),
                    ci95_high: round(p.ci95_high, 6),
                    prior: round(p.prior, 6),
                    informed_by_data: p.informed_by_data,
                })
                .collect(),
        )
    }
}

/// `validate --format csv`: one row per measured point.
#[derive(Debug, Serialize)]
pub struct ValidationRow<'a> {
    /// The measured point, described.
    pub point: &'a str,
    /// Unit of the values (`ms`, `%`, `tok/s`, ...), in SI base (seconds for `ms`).
    pub unit: &'a str,
    /// Measured value.
    pub measured: f64,
    /// Speed-of-light prediction.
    pub sol: f64,
    /// Prediction with default parameters.
    pub default: f64,
    /// Prediction with calibrated parameters.
    pub calibrated: f64,
    /// Lower end of the calibrated 95 % interval.
    pub calibrated_ci95_low: f64,
    /// Upper end of the calibrated 95 % interval.
    pub calibrated_ci95_high: f64,
    /// SOL / measured for times (measured / SOL for rates).
    pub efficiency: Option<f64>,
    /// Relative error of the default prediction.
    pub default_error: f64,
    /// Relative error of the calibrated prediction.
    pub calibrated_error: f64,
}

/// `op ... --format csv`: the operator's one row.
#[derive(Debug, Serialize)]
pub struct OpRow<'a> {
    /// The operator and its shape.
    pub op: &'a str,
    /// What it ran on.
    pub context: &'a str,
    /// Predicted time with default efficiencies, microseconds.
    pub time_us: f64,
    /// Speed-of-light time, microseconds.
    pub sol_time_us: f64,
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes moved.
    pub bytes: f64,
    /// What bound the largest part.
    pub bound: &'a str,
}

/// `list --format csv`: one built-in description.
#[derive(Debug, Serialize)]
pub struct CatalogRow {
    /// Built-in name.
    pub name: String,
    /// One line about it.
    pub description: String,
}

/// `explore --format csv|json`: one design point, streamed.
#[derive(Debug, Serialize)]
pub struct ExploreRow<'a> {
    /// System label.
    pub system: &'a str,
    /// Layout.
    pub parallel: &'a str,
    /// Weight format of the routed experts (MoE) or all weights (dense).
    pub quant: &'a str,
    /// Sequences decoded per step.
    pub batch: u32,
    /// Tokens in each sequence's KV cache.
    pub context: u32,
    /// Time per output token, ms (6 decimals).
    pub tpot_ms: f64,
    /// Output tokens per second of the server (3 decimals).
    pub throughput_tok_s: f64,
    /// Output tokens per second per GPU (3 decimals).
    pub throughput_per_gpu_tok_s: f64,
    /// Whether the KV cache holds this batch at this context.
    pub fits: bool,
    /// Watts per GPU (1 decimal; empty without a power model).
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all GPUs, J (6 decimals).
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens (4 decimals; empty without a price).
    pub usd_per_million_output_tokens: Option<f64>,
    /// US dollars per million tokens in and out (4 decimals; empty without a price).
    pub usd_per_million_total_tokens: Option<f64>,
}

impl<'a> ExploreRow<'a> {
    /// Append this point to `out` as a CSV row or a JSON line.
    pub fn write(&self, out: &mut String, stream: Stream) {
        let mut bytes = Vec::new();
        let _ = match stream {
            Stream::Csv => super::csv_row(&mut bytes, self),
            Stream::JsonLines => super::json_line(&mut bytes, self),
            Stream::None => Ok(()),
        };
        out.push_str(&String::from_utf8_lossy(&bytes));
    }

    pub fn new(c: &'a Combo, p: &DesignPoint) -> ExploreRow<'a> {
        ExploreRow {
            system: &c.system,
            parallel: &c.parallel,
            quant: &c.quant,
            batch: p.batch,
            context: p.context,
            tpot_ms: round(p.tpot_ms, 6),
            throughput_tok_s: round(p.throughput_tok_s, 3),
            throughput_per_gpu_tok_s: round(p.throughput_per_gpu_tok_s, 3),
            fits: p.fits,
            watts_per_gpu: round_opt(p.watts_per_gpu, 1),
            joules_per_token: round_opt(p.joules_per_token, 6),
            usd_per_million_output_tokens: round_opt(p.usd_per_million_output_tokens, 4),
            usd_per_million_total_tokens: round_opt(p.usd_per_million_total_tokens, 4),
        }
    }
}

/// `explore --pareto --format csv`: one point of the Pareto front.
#[derive(Debug, Serialize, Deserialize)]
pub struct ParetoRow {
    /// System label.
    pub system: String,
    /// Layout.
    pub parallel: String,
    /// Weight format.
    pub quant: String,
    /// Sequences decoded per step.
    pub batch: u32,
    /// Tokens in each sequence's KV cache.
    pub context: u32,
    /// Time per output token, ms.
    pub tpot_ms: f64,
    /// Output tokens per second of the server.
    pub throughput_tok_s: f64,
    /// Output tokens per second per GPU.
    pub throughput_per_gpu_tok_s: f64,
    /// Output tokens per second one sequence sees (1000 / TPOT).
    pub tok_s_per_user: Option<f64>,
    /// Watts per GPU (empty without a power model).
    pub watts_per_gpu: Option<f64>,
    /// Energy per output token over all GPUs, J.
    pub joules_per_token: Option<f64>,
    /// US dollars per million output tokens (empty without a price).
    pub usd_per_million_output_tokens: Option<f64>,
    /// US dollars per million tokens in and out (empty without a price).
    pub usd_per_million_total_tokens: Option<f64>,
}

impl Tabular for ExploreSummary {
    type Row<'a> = ParetoRow;
    fn table(&self) -> Table<ParetoRow> {
        Table::flat(
            self.pareto
                .iter()
                .filter_map(|m| {
                    let obj = m.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                    serde_json::from_value::<ParetoRow>(serde_json::Value::Object(obj)).ok()
                })
                .map(|p| ParetoRow {
                    tpot_ms: round(p.tpot_ms, 4),
                    throughput_tok_s: round(p.throughput_tok_s, 4),
                    throughput_per_gpu_tok_s: round(p.throughput_per_gpu_tok_s, 4),
                    tok_s_per_user: round_opt(p.tok_s_per_user, 4),
                    watts_per_gpu: round_opt(p.watts_per_gpu, 1),
                    joules_per_token: round_opt(p.joules_per_token, 6),
                    usd_per_million_output_tokens: round_opt(p.usd_per_million_output_tokens, 4),
                    usd_per_million_total_tokens: round_opt(p.usd_per_million_total_tokens, 4),
                    ..p
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explore_header_is_the_row_fields() {
        let c = Combo {
            system: "a,b".into(),
            parallel: "tp8".into(),
            quant: "fp8".into(),
            gpus: 8,
        };
        let p = DesignPoint {
            combo: 0,
            batch: 1,
            context: 2,
            tpot_ms: 1.0,
            throughput_tok_s: 2.0,
            throughput_per_gpu_tok_s: 3.0,
            fits: true,
            watts_per_gpu: None,
            joules_per_token: None,
            usd_per_million_output_tokens: None,
            usd_per_million_total_tokens: None,
        };
        let row = ExploreRow::new(&c, &p);
        assert_eq!(
            super::super::csv_header(&row).unwrap(),
            crate::explore::CSV_HEADER
        );
        let mut s = String::new();
        row.write(&mut s, Stream::Csv);
        assert!(s.starts_with("\"a,b\",tp8,fp8,1,2,"), "{s}");
    }
}
