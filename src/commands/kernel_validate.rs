//! `rooftop validate` on kernel tables: every row measured vs speed of light, default and
//! calibrated, then the error per GPU, family and format (`kernel_check`).
//!
//! A `--measured` argument that is a directory stands for every kernel table in it (other
//! files, such as end-to-end serving runs, are listed as skipped). Each table is priced on
//! the system whose GPU its file name names, or on `--system` when it names none or the
//! same GPU; a `--system` whose GPU no table names is refused.

use crate::calibrate::Calibration;
use crate::cli::ScenarioArgs;
use crate::cost::CostParams;
use crate::error::{Error, Result};
use crate::export::{self, round, table, Format, Table, Tabular};
use crate::kernel_check::{
    check_table, implausible, names_other_gpu, summarize, system_for_table, ErrorSummary,
    KernelCheckRow,
};
use crate::measured::kernel_table::{read_kernel_table, sniff, Family};
use crate::spec::System;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One table validated, and the system it was priced on.
#[derive(Debug, Serialize)]
pub struct TableInfo {
    pub file: String,
    pub family: Family,
    pub system: String,
    pub rows: usize,
}

/// The kernel `validate` record.
#[derive(Debug, Serialize)]
pub struct KernelValidation {
    pub tables: Vec<TableInfo>,
    /// Files in a directory argument that are not kernel tables.
    pub skipped: Vec<String>,
    pub rows: Vec<KernelCheckRow>,
    pub summary: Vec<ErrorSummary>,
}

/// Kernel tables among `--measured`: `Some` when every argument is a kernel table or a
/// directory, `None` when none is; mixing them with other measurements is an error.
pub fn kernel_tables(measured: &[String]) -> Result<Option<(Vec<PathBuf>, Vec<String>)>> {
    let mut tables = Vec::new();
    let mut skipped = Vec::new();
    let mut other = Vec::new();
    for m in measured {
        let p = Path::new(m);
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|error| Error::Io {
                    path: p.to_path_buf(),
                    error,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            entries.sort();
            for e in entries {
                if is_kernel_table(&e) {
                    tables.push(e);
                } else {
                    skipped.push(e.display().to_string());
                }
            }
        } else if p.is_file() && is_kernel_table(p) {
            tables.push(p.to_path_buf());
        } else {
            other.push(m.clone());
        }
    }
    match (tables.is_empty() && skipped.is_empty(), other.is_empty()) {
        (true, _) => Ok(None),
        (false, true) => Ok(Some((tables, skipped))),
        (false, false) => Err(Error::Scenario(format!(
            "--measured mixes kernel tables with other measurements ({}); validate them \
             in separate runs",
            other.join(", ")
        ))),
    }
}

fn is_kernel_table(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        && std::fs::read_to_string(p)
            .ok()
            .and_then(|t| sniff(&t))
            .is_some()
}

/// Validate kernel tables against the model.
pub fn validation(
    args: &ScenarioArgs,
    tables: &[PathBuf],
    skipped: Vec<String>,
) -> Result<KernelValidation> {
    if tables.is_empty() {
        return Err(Error::Scenario(
            "no kernel tables found in the --measured directory".into(),
        ));
    }
    let sets = crate::spec::overrides::parse_all(&args.set)?;
    let given = System::load_with_engine(&args.system, args.engine.as_deref(), &sets)?;
    let calibration = args
        .calibration
        .as_deref()
        .map(Calibration::load)
        .transpose()?;
    if let (Some(c), Some(file)) = (&calibration, args.calibration.as_deref()) {
        c.refuse_overridden(&sets, file)?;
    }
    let mut infos = Vec::new();
    let mut rows = Vec::new();
    let read = tables
        .iter()
        .map(|p| read_kernel_table(p))
        .collect::<Result<Vec<_>>>()?;
    // A `--system` the user named must price some table: where every table names another
    // GPU, it would be dropped without a word.
    let unused = args.system != crate::cli::DEFAULT_SYSTEM
        && read.iter().all(|t| names_other_gpu(t, &given));
    for (p, t) in tables.iter().zip(&read) {
        let sys = system_for_table(t, &given, unused)?;
        if let (Some(c), Some(file)) = (&calibration, args.calibration.as_deref()) {
            c.for_gpu(&sys.gpu.name, &p.display().to_string(), file)?;
        }
        let cal = calibration
            .as_ref()
            .map(|c| c.params(&CostParams::default_for(&sys)));
        let r = check_table(t, &sys, cal.as_ref())?;
        let bad = implausible(&r);
        if !bad.is_empty() {
            return Err(Error::Scenario(format!(
                "{} row(s) measured at less than half of what {} allows (its speed of light, \
                 with the bytes that fit in L2 read at L2's bandwidth), which no kernel can be \
                 (a wrong unit, GPU or shape?): {}",
                bad.len(),
                sys.gpu.name,
                bad.iter()
                    .take(5)
                    .map(|(o, m, s)| format!("{o}: {m:.4e} us < {s:.4e} us"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        infos.push(TableInfo {
            file: t.file.clone(),
            family: t.family,
            system: sys.spec.name.clone(),
            rows: r.len(),
        });
        rows.extend(r);
    }
    let summary = summarize(&rows);
    Ok(KernelValidation {
        tables: infos,
        skipped,
        rows,
        summary,
    })
}

pub fn run(
    args: &ScenarioArgs,
    tables: &[PathBuf],
    skipped: Vec<String>,
    format: Format,
) -> Result<Vec<u8>> {
    let v = validation(args, tables, skipped)?;
    export::export(&v, format, text)
}

/// `validate --format csv` on kernel tables: one row per measured kernel.
#[derive(Debug, Serialize)]
pub struct KernelCsvRow<'a> {
    pub origin: &'a str,
    pub gpu: &'a str,
    pub family: &'a str,
    pub format: &'a str,
    pub kernel: &'a str,
    pub point: &'a str,
    pub unit: &'a str,
    pub measured: f64,
    pub sol: f64,
    pub default: f64,
    pub calibrated: Option<f64>,
    pub default_error: f64,
    pub calibrated_error: Option<f64>,
}

impl Tabular for KernelValidation {
    type Row<'a> = KernelCsvRow<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(
            self.rows
                .iter()
                .map(|r| KernelCsvRow {
                    origin: &r.origin,
                    gpu: &r.gpu,
                    family: r.family.name(),
                    format: &r.format,
                    kernel: &r.kernel,
                    point: &r.point,
                    unit: r.unit,
                    measured: round(r.measured, 4),
                    sol: round(r.sol, 4),
                    default: round(r.default, 4),
                    calibrated: r.calibrated.map(|c| round(c, 4)),
                    default_error: round(r.default_error, 4),
                    calibrated_error: r.calibrated_error.map(|c| round(c, 4)),
                })
                .collect(),
        )
    }
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

pub fn text(v: &KernelValidation) -> String {
    let mut o = String::new();
    for t in &v.tables {
        let _ = writeln!(
            o,
            "{} ({}, {} rows) on {}",
            t.file,
            t.family.name(),
            t.rows,
            t.system
        );
    }
    let below: Vec<&str> = v
        .rows
        .iter()
        .filter(|r| r.below_floor)
        .map(|r| r.origin.as_str())
        .collect();
    if !below.is_empty() {
        let _ = writeln!(
            o,
            "{} row(s) measured below the hardware floor (the model's mapping of them is off): {}{}",
            below.len(),
            below.iter().take(8).copied().collect::<Vec<_>>().join(", "),
            if below.len() > 8 { ", ..." } else { "" }
        );
    }
    for s in &v.skipped {
        let _ = writeln!(o, "skipped {s} (not a kernel table)");
    }
    let _ = writeln!(o);
    let has_cal = v.rows.iter().any(|r| r.calibrated.is_some());
    let rows: Vec<Vec<String>> = v
        .rows
        .iter()
        .map(|r| {
            let mut c = vec![
                r.origin.clone(),
                r.point.clone(),
                format!("{:.2}", r.measured),
                format!("{:.2}", r.sol),
                format!("{:.2} ({})", r.default, pct(r.default_error)),
            ];
            if has_cal {
                c.push(match (r.calibrated, r.calibrated_error) {
                    (Some(x), Some(e)) => format!("{x:.2} ({})", pct(e)),
                    _ => "-".into(),
                });
            }
            c
        })
        .collect();
    let mut header = vec![
        "row",
        "shape",
        "measured us",
        "SOL us",
        "default us (error)",
    ];
    if has_cal {
        header.push("calibrated us (error)");
    }
    o.push_str(&table(&header, &rows));
    let _ = writeln!(o);
    let _ = writeln!(o, "{}", summary_text(&v.summary));
    o
}

/// The summary table: per GPU, family and format, n, median and p90 of |error| and the mean
/// signed error (bias).
pub fn summary_text(s: &[ErrorSummary]) -> String {
    let rows: Vec<Vec<String>> = s
        .iter()
        .map(|s| {
            vec![
                s.gpu.clone(),
                s.family.name().to_string(),
                s.format.clone(),
                s.n.to_string(),
                format!("{:.1} %", s.median_abs_error * 100.0),
                format!("{:.1} %", s.p90_abs_error * 100.0),
                pct(s.mean_signed_error),
            ]
        })
        .collect();
    table(
        &[
            "gpu",
            "family",
            "format",
            "n",
            "median |err|",
            "p90 |err|",
            "bias",
        ],
        &rows,
    )
}
