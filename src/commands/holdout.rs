//! `rooftop calibrate --measured <e2e serving CSV> --holdout N`: fit each deployment of the
//! file on N of its runs and report how often the calibrated 95 % intervals cover the rest
//! (see [`crate::holdout`]). A user runs it on their own file to learn whether the intervals
//! can be trusted there.

use crate::cli::CalibrateArgs;
use crate::commands::validate_e2e::{e2e_text, pct, refuse_chosen};
use crate::error::{Error, Result};
use crate::export::{self, round, table, Table, Tabular};
use crate::holdout::{evaluate, HoldoutReport};
use crate::measured::e2e_csv::parse_e2e_csv;
use crate::spec::overrides::parse_all;
use serde::Serialize;
use std::fmt::Write as _;

/// `--format csv`: one row per held-out run.
#[derive(Debug, Serialize)]
pub struct HoldoutRow<'a> {
    /// What the deployment's runs share (backend and build, model, precision, system,
    /// layout, client).
    pub deployment: &'a str,
    /// Line of the held-out run in its file.
    pub line: usize,
    pub concurrency: u32,
    pub input_len: u32,
    pub output_len: u32,
    pub measured_tpot_ms: f64,
    pub default_tpot_ms: f64,
    pub calibrated_tpot_ms: f64,
    /// Ends of the calibrated 95 % interval.
    pub tpot_ci95_low_ms: f64,
    pub tpot_ci95_high_ms: f64,
    /// The measurement lies inside the interval.
    pub covered: bool,
}

impl Tabular for HoldoutReport {
    type Row<'a> = HoldoutRow<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(
            self.deployments
                .iter()
                .flat_map(|d| {
                    d.held_out.iter().map(|h| HoldoutRow {
                        deployment: &d.deployment,
                        line: h.line,
                        concurrency: h.concurrency,
                        input_len: h.input_len,
                        output_len: h.output_len,
                        measured_tpot_ms: round(h.measured_tpot_ms, 4),
                        default_tpot_ms: round(h.default_tpot_ms, 4),
                        calibrated_tpot_ms: round(h.calibrated_tpot_ms, 4),
                        tpot_ci95_low_ms: round(h.tpot_ci95_ms[0], 4),
                        tpot_ci95_high_ms: round(h.tpot_ci95_ms[1], 4),
                        covered: h.covered,
                    })
                })
                .collect(),
        )
    }
}

/// Run the held-out check of `a` (whose `holdout` is `fit_points`).
pub fn run(a: &CalibrateArgs, fit_points: usize) -> Result<Vec<u8>> {
    refuse_chosen(&a.scenario)?;
    if a.out.is_some() {
        return Err(Error::Scenario(
            "--out does not apply with --holdout: it fits one calibration per deployment and writes none".into(),
        ));
    }
    let sets = parse_all(&a.scenario.set)?;
    let mut runs = Vec::new();
    for f in &a.measured.measured {
        let text = e2e_text(f).ok_or_else(|| {
            Error::Scenario(format!(
                "{f}: --holdout reads e2e serving CSVs (the columns of `validate --measured e2e_serving.csv`), one deployment per group of runs; this is not one"
            ))
        })?;
        runs.extend(parse_e2e_csv(&text, f)?);
    }
    let source = a.measured.measured.join(", ");
    let counter = crate::progress::Counter::new(
        "calibrate --holdout {bar:40} {pos}/{len} deployments fitted, ETA {eta}",
    );
    let progress = |done: usize, total: usize| counter.tell(done as u64, total as u64);
    let r = evaluate(
        &runs,
        &source,
        &sets,
        a.measured.client.as_deref(),
        fit_points,
        a.seed,
        &progress,
    )?;
    export::export(&r, a.format, text)
}

pub fn text(r: &HoldoutReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} deployments fitted on {} runs each (seed {}), {} runs held out",
        r.source,
        r.deployments.len(),
        r.fit_points,
        r.seed,
        r.held_out_runs
    );
    let _ = writeln!(
        o,
        "coverage: share of held-out TPOTs inside their calibrated 95 % interval (goal: near 95 %)\n"
    );
    let rows: Vec<Vec<String>> = r
        .deployments
        .iter()
        .map(|d| {
            vec![
                d.deployment.clone(),
                d.held_out.len().to_string(),
                pct(d.coverage),
                pct(d.default_median_abs_error),
                pct(d.calibrated_median_abs_error),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "deployment",
            "held out",
            "coverage",
            "|err| default",
            "|err| calibrated",
        ],
        &rows,
    ));
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = r
        .by_backend
        .iter()
        .map(|(b, n, c)| vec![b.clone(), n.to_string(), pct(*c)])
        .chain(std::iter::once(vec![
            "all".into(),
            r.held_out_runs.to_string(),
            pct(r.coverage),
        ]))
        .collect();
    o.push_str(&table(&["backend", "held out", "coverage"], &rows));
    if !r.skipped.is_empty() {
        let _ = writeln!(o, "\nruns not checked:");
        for (why, n) in &r.skipped {
            let _ = writeln!(o, "  {n} x {why}");
        }
    }
    o
}
