//! `rooftop calibrate` and `rooftop validate`: measurements against the model.

use crate::calibrate::{
    calibrate, category_share, describe, error_of, is_share, measured_value, predict_observation,
    report_scale, si_unit, Assumptions, Calibration,
};
use crate::cli::{CalibrateArgs, MeasuredArgs, ScenarioArgs, ValidateArgs};
use crate::commands::load;
use crate::cost::{CostParams, Pass};
use crate::error::{Error, Result};
use crate::export::{self, round, table, Table, Tabular};
use crate::measured::MAX_SERVING_SECONDS;
use crate::measured::{self, MeasuredSet, Quantity, ReadOptions, TraceCategory};
use crate::predict::{breakdown_ms, Scenario};
use crate::spec::registry::{builtin_text, Kind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Read measured files, or built-in measurements by name.
pub fn load_measured(a: &MeasuredArgs) -> Result<(MeasuredSet, Vec<String>)> {
    // An e2e serving CSV holds many deployments, each run naming its own model, system and
    // layout: one fit of them all (calibrate's, explain's) would describe none. Said so,
    // before any file is read, not read as a kernel table.
    for f in &a.measured {
        if let Some(how) = serving_csv_reading(f) {
            return Err(Error::Scenario(format!(
                "{f}: a serving CSV of runs of many deployments (each names its own model, \
                 system and layout): one fit of them all describes none. Use {how} for the \
                 uncalibrated errors"
            )));
        }
    }
    let opts = ReadOptions {
        format: None,
        gpus: a.nccl_gpus,
        concurrency: a.trace_concurrency,
    };
    let mut set = MeasuredSet::default();
    let mut sources: Vec<String> = Vec::new();
    // Files that name different models or systems measured different things: one fit
    // cannot describe both.
    let mut merge = |set: &mut MeasuredSet, one: MeasuredSet, label: &str| -> Result<()> {
        for (what, have, new) in [
            ("model", &set.model, &one.model),
            ("system", &set.system, &one.system),
        ] {
            if let (Some(h), Some(n)) = (have, new) {
                if h != n {
                    return Err(Error::Measured {
                        file: label.into(),
                        line: None,
                        message: format!(
                            "names {what} \"{n}\", but {} named \"{h}\"; measure one {what} per run",
                            sources.join(", ")
                        ),
                    });
                }
            }
        }
        set.merge(one);
        sources.push(label.into());
        Ok(())
    };
    for m in &a.measured {
        let p = Path::new(m);
        if !p.exists() {
            if let Some(text) = builtin_text(Kind::Measured, m) {
                let label = format!("configs/measured/{m}.toml");
                let one = measured::parse_text(text, &label, measured::FileFormat::Toml, &opts)?;
                merge(&mut set, one, &label)?;
                continue;
            }
        }
        let mut one = measured::read_file_with(p, &opts)?;
        if one.system.is_none() {
            one.system = system_of_kernel_file(p)?;
        }
        merge(&mut set, one, m)?;
    }
    Ok((set, sources))
}

/// How to read `path` where it is a serving CSV (e2e or disaggregated), `None` otherwise.
fn serving_csv_reading(path: &str) -> Option<String> {
    if crate::commands::validate_e2e::e2e_text(path).is_some() {
        Some(format!(
            "`rooftop calibrate --measured {path} --holdout 3` to fit each deployment on 3 of \
             its runs and check the rest, or `rooftop validate --measured {path}`"
        ))
    } else if crate::commands::validate_e2e::disagg_text(path).is_some() {
        Some(format!("`rooftop validate --measured {path}`"))
    } else {
        None
    }
}

/// The system a kernel table's file name stands for, as `validate` reads it
/// (`gemm_h100-sxm.csv` → `8x-h100-nvlink`, [`crate::kernel_check::system_with_gpu`]): its
/// rows measured that GPU, so a fit of them belongs to it, and a `--system` with another
/// GPU is refused as any file naming another system is. `None` for a name that names no
/// built-in GPU.
fn system_of_kernel_file(p: &Path) -> Result<Option<String>> {
    use crate::measured::kernel_table::{gpu_of_file_name, Family};
    for family in Family::ALL {
        if let Some(g) = gpu_of_file_name(p, family) {
            if crate::spec::registry::load_gpu(&g).is_ok() {
                let s = crate::kernel_check::system_with_gpu(&g)?;
                return Ok(Some(s.spec.name));
            }
        }
    }
    Ok(None)
}

/// Whether a Hugging Face id (`moonshotai/Kimi-K2.5`) names the rooftop model `name` /
/// `full_name`: its last part, letters and digits only, begins the name or appears in the
/// full name (`kimik25` in `kimik25int4`).
fn same_model(hf_id: &str, name: &str, full_name: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let id = norm(hf_id.rsplit('/').next().unwrap_or(hf_id));
    !id.is_empty() && (norm(name).starts_with(&id) || norm(full_name).contains(&id))
}

/// The scenario options for measurements: the model and system the files name are the
/// default, a `--model`/`--system` that names another is an error (a fit of one model to
/// another's data reports a small error and means nothing), and so is a name that is
/// neither a built-in nor a file.
pub fn scenario_for(
    args: &ScenarioArgs,
    set: &MeasuredSet,
    sources: &[String],
) -> Result<ScenarioArgs> {
    let mut args = args.clone();
    let files = sources.join(", ");
    for (what, named, given, default) in [
        (
            "model",
            &set.model,
            &mut args.model,
            crate::cli::DEFAULT_MODEL,
        ),
        (
            "system",
            &set.system,
            &mut args.system,
            crate::cli::DEFAULT_SYSTEM,
        ),
    ] {
        let Some(named) = named else { continue };
        let known = match what {
            "model" => crate::spec::registry::load_model(named).map(|_| ()),
            _ => crate::spec::registry::load_system_spec(named).map(|_| ()),
        };
        if let Err(e) = known {
            // A serving benchmark names the model by its Hugging Face id
            // (`moonshotai/Kimi-K2.5`): it must be the --model's, read loosely.
            let hf_match = what == "model"
                && crate::spec::registry::load_model(given)
                    .is_ok_and(|m| same_model(named, &m.name, &m.full_name));
            if hf_match {
                continue;
            }
            return Err(Error::Measured {
                file: files.clone(),
                line: None,
                message: if what == "model" && named.contains('/') {
                    format!(
                        "names model \"{named}\", which is not --model \"{given}\"; \
                         pass --model with the rooftop model it measured"
                    )
                } else {
                    format!("names {what} \"{named}\", which cannot be loaded: {e}")
                },
            });
        }
        if given == named {
            continue;
        }
        if given == default {
            *given = named.clone();
            continue;
        }
        return Err(Error::Measured {
            file: files.clone(),
            line: None,
            message: format!(
                "measured on {what} \"{named}\", but --{what} is \"{given}\"; \
                 a fit to another {what}'s measurements means nothing (drop --{what}, or measure \"{given}\")"
            ),
        });
    }
    Ok(args)
}

pub fn assumptions(a: &MeasuredArgs) -> Result<Assumptions> {
    if a.assume_input_len == 0 || a.assume_output_len == 0 {
        return Err(Error::Scenario(
            "--assume-input-len and --assume-output-len must be at least 1".into(),
        ));
    }
    Ok(Assumptions {
        input_len: a.assume_input_len,
        output_len: a.assume_output_len,
        client: crate::commands::sweep::client_model(a.client.as_deref())?,
    })
}

/// The smallest share of a trace's kernel time, in a category the layout does not run,
/// that marks the trace as another model's or layout's: below it, stray kernels a
/// categorizer put there by name.
const MIN_FOREIGN_SHARE: f64 = 0.01;

/// Refuse serving measurements no run can produce: faster than the speed-of-light bound of
/// this model on this system (with the assumed lengths), or slower than
/// `MAX_SERVING_SECONDS`. The error names the row and the bound, instead of a fit that
/// reports an error of +3e21 %. Kernel rows (GEMM, all-reduce) may not run below half their
/// bound, nor over more GPUs than the system has. A trace's share of kernels this layout
/// does not run (all-reduce at TP 1, MoE in a dense model) is another layout's.
pub fn check_plausible(s: &Scenario, set: &MeasuredSet, a: &Assumptions) -> Result<()> {
    check_devices(&s.system.gpu, set)?;
    let sol = CostParams::speed_of_light();
    // Rounding in the files (TPOT printed to 0.1 ms) is not a violation.
    let slack = 0.02;
    for o in &set.observations {
        let (v, _) = measured_value(o);
        let row = || {
            let (x, unit) = match o.quantity {
                Quantity::Throughput { .. } => (v, "tok/s"),
                Quantity::CategoryShare { .. } => (v * 1e2, "% of kernel time"),
                _ => (v * 1e3, "ms"),
            };
            if x.abs() >= 1e6 {
                format!("{} = {x:.3e} {unit}", describe(o))
            } else {
                format!("{} = {x} {unit}", describe(o))
            }
        };
        let refuse = |why: String| Error::Measured {
            file: o.origin.file.clone(),
            line: o.origin.line,
            message: format!("{}: {why}", row()),
        };
        let time = match o.quantity {
            Quantity::Tpot { .. } | Quantity::Ttft { .. } => true,
            Quantity::Throughput { .. } => false,
            Quantity::AllReduce { gpus, .. } if gpus > s.system.spec.gpu_count => {
                return Err(refuse(format!(
                    "an all-reduce over {gpus} GPUs, but {} has {}; give --nccl-gpus (or the \
                     file's -g) for a run on this system",
                    s.system.spec.name, s.system.spec.gpu_count
                )));
            }
            Quantity::AllReduce { .. } | Quantity::Gemm { .. } => {
                // A kernel has no serving ceiling, but never beats its hardware bound by
                // more than a factor two (the kernel tables' rule: caches can help, not more).
                let bound = predict_observation(s, &sol, o, a)?;
                if v < 0.5 * bound {
                    return Err(refuse(format!(
                        "below half the speed-of-light bound on {} ({:.4e} s); check the value \
                         and its unit",
                        s.system.spec.name, bound
                    )));
                }
                continue;
            }
            Quantity::CategoryShare { category, .. } => {
                // A share of kernels the layout does not run at all (all-reduce at TP 1,
                // MoE in a dense model) was measured on another model or layout: held
                // against this one it would fit nothing and report a large error.
                let predicted = predict_observation(s, &CostParams::default_for(s.system), o, a)?;
                // Only these two are structural; whether an engine runs dequantisation
                // as kernels of its own is its kernels' choice, which a trace may know better.
                let structural = matches!(category, TraceCategory::Allreduce | TraceCategory::Moe);
                if structural && v >= MIN_FOREIGN_SHARE && predicted == 0.0 {
                    return Err(refuse(format!(
                        "{} kernels, which {} on {} at {} does not run; the trace was taken on \
                         another model or layout (check --model, --tp, --ep)",
                        category.name(),
                        s.model.name,
                        s.system.spec.name,
                        s.parallel
                    )));
                }
                continue;
            }
        };
        if time && v > MAX_SERVING_SECONDS {
            return Err(refuse(format!(
                "longer than {MAX_SERVING_SECONDS} s; not a plausible serving measurement (a unit slip?)"
            )));
        }
        // A throughput is a time per token for each of its requests: C / rate seconds.
        if let Quantity::Throughput { concurrency, .. } = o.quantity {
            let per_token = concurrency as f64 / v;
            if per_token > MAX_SERVING_SECONDS {
                return Err(refuse(format!(
                    "{per_token:.3e} s per token for each of its {concurrency} requests, longer \
                     than {MAX_SERVING_SECONDS} s; not a plausible serving measurement (a unit slip?)"
                )));
            }
        }
        let bound = predict_observation(s, &sol, o, a)?;
        let beyond = if time {
            v < bound * (1.0 - slack)
        } else {
            v > bound * (1.0 + slack)
        };
        if beyond {
            let b = if time {
                format!("{:.3} ms", bound * 1e3)
            } else {
                format!("{bound:.0} tok/s")
            };
            return Err(refuse(format!(
                "beyond the speed-of-light bound of {} on {} ({b}, {}); check the value{}",
                s.model.name,
                s.system.spec.name,
                lengths_used(&o.quantity, a),
                match o.quantity.stated_lengths() {
                    Some((Some(_), Some(_))) | None => " or its unit",
                    _ => ", its unit, or --assume-input-len / --assume-output-len",
                }
            )));
        }
    }
    Ok(())
}

/// Refuse a file whose reported GPU device is another GPU than the system's: the built-in
/// GPU whose full name shares the most words with the device name (`NVIDIA H100 80GB
/// HBM3` → the H100s) must include the system's. A device name that matches no built-in
/// GPU, or the system's as well as any other, passes: only a clear mismatch is refused.
fn check_devices(gpu: &crate::spec::GpuSpec, set: &MeasuredSet) -> Result<()> {
    for d in &set.devices {
        let (best, names) = crate::spec::registry::gpus_named_by(&d.name);
        if best == 0 || names.contains(&gpu.name) {
            continue;
        }
        return Err(Error::Measured {
            file: d.file.clone(),
            line: Some(d.line),
            message: format!(
                "measured on \"{}\" (GPU {}), but the system's GPU is {} ({}); a measurement \
                 of another GPU calibrates nothing here (give --system with that GPU)",
                d.name,
                names.join(" or "),
                gpu.name,
                gpu.full_name
            ),
        });
    }
    Ok(())
}

/// The request lengths a serving row is predicted at, each marked where the file is silent
/// and it is the assumed one.
fn lengths_used(q: &Quantity, a: &Assumptions) -> String {
    let (i, out) = q.stated_lengths().unwrap_or((None, None));
    let mark = |stated: Option<u32>, assumed: u32| match stated {
        Some(n) => format!("{n}"),
        None => format!("{assumed} (assumed: the file does not say)"),
    };
    format!(
        "prompt {} / output {} tokens",
        mark(i, a.input_len),
        mark(out, a.output_len)
    )
}

pub fn run_calibrate(a: &CalibrateArgs) -> Result<Vec<u8>> {
    if let Some(n) = a.holdout {
        return crate::commands::holdout::run(a, n as usize);
    }
    let (args, m, out, format) = (&a.scenario, &a.measured, a.out.as_deref(), a.format);
    let (set, sources) = load_measured(m)?;
    let l = load(&scenario_for(args, &set, &sources)?)?;
    let s = Scenario::new(&l.model, &l.system, l.parallel)?;
    check_plausible(&s, &set, &assumptions(m)?)?;
    let c = calibrate(&s, &set, assumptions(m)?, sources)?;
    if let Some(path) = out {
        let text = c.to_toml();
        // What this writes, `--calibration` must read: checked before the file exists.
        Calibration::from_text(&text, &path.display().to_string()).map_err(|e| {
            Error::Scenario(format!(
                "the fit is not a usable calibration, so {} was not written: {e}",
                path.display()
            ))
        })?;
        std::fs::write(path, text).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
    }
    export::export(&c, format, |c| {
        let mut o = calibration_text(c);
        if let Some(p) = out {
            let _ = writeln!(o, "\nwrote {} (use with --calibration)", p.display());
        }
        o
    })
}
/// A signed difference to one decimal; one that rounds to zero prints "+0.0", never "-0.0".
fn signed1(x: f64) -> String {
    let x = if (x * 10.0).round() == 0.0 { 0.0 } else { x };
    format!("{x:+.1}")
}

pub fn calibration_text(c: &Calibration) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "calibration of {} on {} ({}) against {}",
        c.model,
        c.system,
        c.parallel,
        c.sources.join(", ")
    );
    let (i, out) = (c.assumptions.input_len, c.assumptions.output_len);
    let _ = match c.assumed_lengths {
        Some((false, false)) => writeln!(o, "every serving point gives its request lengths"),
        Some((true, false)) => writeln!(o, "assumed where the data is silent: prompt {i} tokens"),
        Some((false, true)) => writeln!(o, "assumed where the data is silent: output {out} tokens"),
        _ => writeln!(
            o,
            "assumed where the data is silent: prompt {i} tokens, output {out} tokens"
        ),
    };
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = c
        .parameters
        .iter()
        .map(|p| {
            let note = match (p.informed_by_data, p.at_bound) {
                (_, true) => "at bound",
                (true, false) => "fitted",
                (false, false) => "prior (data silent)",
            };
            vec![
                p.name.clone(),
                format!("{:.4}", p.value),
                format!("[{:.4}, {:.4}]", p.ci95_low, p.ci95_high),
                format!("{:.4}", p.stderr),
                format!("{:.4}", p.prior),
                note.into(),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "parameter",
            "value",
            "95 % interval",
            "std err",
            "prior",
            "",
        ],
        &rows,
    ));
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = c
        .residuals
        .iter()
        .map(|r| {
            let (k, label) = report_scale(&r.unit, r.measured);
            let scale = |v: f64| v * k;
            let err = if is_share(&r.unit) {
                format!("{} pt", signed1(r.error * 100.0))
            } else {
                format!("{} %", signed1(r.error * 100.0))
            };
            vec![
                prose_marked(&r.point, r.prose.is_some()),
                format!("{:.2} {label}", scale(r.measured)),
                format!("{:.2}", scale(r.default)),
                format!("{:.2}", scale(r.calibrated)),
                err,
                r.loo_prediction
                    .map(|v| format!("{:.2}", scale(v)))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "point",
            "measured",
            "default",
            "calibrated",
            "error",
            "leave-one-out",
        ],
        &rows,
    ));
    if c.residuals.iter().any(|r| r.prose.is_some()) {
        let _ = writeln!(o, "{PROSE_NOTE}");
    }
    let _ = writeln!(
        o,
        "rms error {:.2} %{}; degrees of freedom {}{}",
        c.rms_error * 100.0,
        c.loo_rms_error
            .map(|e| format!(", leave-one-out {:.2} %", e * 100.0))
            .unwrap_or_default(),
        c.degrees_of_freedom,
        if c.degrees_of_freedom <= 0 {
            " (fewer points than informed parameters: intervals lean on the priors)"
        } else {
            ""
        }
    );
    if let Some(l) = &c.serving_limit {
        o.push_str(&serving_limit_text(l));
    }
    o
}

/// The serving-mechanism choice: every candidate with its value, prior and score.
fn serving_limit_text(l: &crate::calibrate::ServingLimit) -> String {
    let mut o = String::new();
    let _ = writeln!(o);
    let chosen = l
        .candidates
        .iter()
        .find(|c| c.mechanism == l.chosen)
        .map(|c| {
            let p = crate::calibrate::ParamKind::InflightCap.name();
            let what = if c.parameter == p {
                "client connection cap or max_num_seqs: throughput alone cannot tell them apart"
                    .to_string()
            } else {
                format!("read as {}", c.reading)
            };
            format!("{} = {:.0} {} ({what})", c.mechanism, c.value, c.unit)
        })
        .unwrap_or_else(|| "none: the GPU loop alone fits the curve best".into());
    let _ = writeln!(o, "what holds the throughput curve flat: {chosen}");
    let mut rows = vec![vec![
        "none (GPU loop alone)".to_string(),
        "-".into(),
        "-".into(),
        "-".into(),
        format!("{:.2} %", l.none_rms_error * 100.0),
        format!("{:.1}", l.none_score),
    ]];
    rows.extend(l.candidates.iter().map(|c| {
        vec![
            c.mechanism.clone(),
            format!("{:.0} {}", c.value, c.unit),
            format!("{} {:.0} {}", c.reading, c.prior, c.unit),
            format!("{:.1}x", 10f64.powf(c.prior_distance)),
            format!("{:.2} %", c.rms_error * 100.0),
            format!("{:.1}", c.score),
        ]
    }));
    o.push_str(&table(
        &[
            "mechanism",
            "fitted",
            "nearest prior",
            "off prior",
            "rms error",
            "score",
        ],
        &rows,
    ));
    let _ = writeln!(
        o,
        "score = chi-square + (log10 distance from the prior / 0.5)^2; the lowest is chosen if it beats none by more than 2 (Akaike)\nto tell the readings apart: {}",
        l.separating_test
    );
    o
}

/// One measured point beside the model's three predictions.
#[derive(Debug, Serialize)]
pub struct ValidationRow {
    pub point: String,
    pub origin: String,
    /// The record's words the point is read from, where it is prose and not a measurement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prose: Option<String>,
    pub unit: &'static str,
    pub measured: f64,
    pub sol: f64,
    pub default: f64,
    pub calibrated: f64,
    /// Calibrated 95 % interval.
    pub calibrated_ci95: (f64, f64),
    /// SOL / measured for times (measured / SOL for rates): how close to the hardware bound.
    pub efficiency: Option<f64>,
    pub default_error: f64,
    pub calibrated_error: f64,
}

/// Predicted category shares of decode kernel time beside a measured one.
#[derive(Debug, Serialize)]
pub struct ShareRow {
    pub category: &'static str,
    pub measured: Option<f64>,
    pub default: f64,
    pub calibrated: f64,
}

/// The `validate` record.
#[derive(Debug, Serialize)]
pub struct Validation {
    pub model: String,
    pub system: String,
    pub parallel: String,
    pub rows: Vec<ValidationRow>,
    pub shares: Vec<ShareRow>,
    /// Decode step at concurrency 1, by category: SOL, default, calibrated (ms).
    pub gap_ms: BTreeMap<&'static str, [f64; 3]>,
    pub calibration: Calibration,
}

pub fn validation(args: &ScenarioArgs, m: &MeasuredArgs) -> Result<Validation> {
    let (set, sources) = load_measured(m)?;
    let l = load(&scenario_for(args, &set, &sources)?)?;
    let s = Scenario::new(&l.model, &l.system, l.parallel)?;
    let a = assumptions(m)?;
    check_plausible(&s, &set, &a)?;
    let cal = match &l.calibration {
        Some(c) => c.clone(),
        None => calibrate(&s, &set, a, sources)?,
    };
    let base = CostParams::default_for(&l.system);
    let sol_p = CostParams::speed_of_light();
    let cal_p = cal.params(&base);
    let mut rows = Vec::new();
    for o in &set.observations {
        let (mv, _) = measured_value(o);
        let sol = predict_observation(&s, &sol_p, o, &a)?;
        let d = predict_observation(&s, &base, o, &a)?;
        let c = predict_observation(&s, &cal_p, o, &a)?;
        let at = |p: &CostParams| predict_observation(&s, p, o, &a).unwrap_or(f64::NAN);
        let ci = match o.quantity {
            Quantity::CategoryShare { .. } => cal.share_interval(&base, at),
            _ => cal.prediction_interval(&base, o.quantity.kind_name(), at),
        };
        let efficiency = match o.quantity {
            Quantity::CategoryShare { .. } => None,
            Quantity::Throughput { .. } => Some(mv / sol),
            _ => Some(sol / mv),
        };
        let unit = si_unit(o);
        rows.push(ValidationRow {
            point: describe(o),
            origin: o.origin.label(),
            prose: o.origin.prose.clone(),
            unit,
            measured: mv,
            sol,
            default: d,
            calibrated: c,
            calibrated_ci95: ci,
            efficiency,
            default_error: error_of(&o.quantity, d, mv),
            calibrated_error: error_of(&o.quantity, c, mv),
        });
    }
    // Category shares of decode kernel time at the concurrency of the measured shares.
    let share_c = set
        .observations
        .iter()
        .find_map(|o| match o.quantity {
            Quantity::CategoryShare { concurrency, .. } => Some(concurrency),
            _ => None,
        })
        .unwrap_or(1);
    let ctx = a.input_len as f64 + a.output_len as f64 / 2.0;
    let step = |p: &CostParams| -> Result<crate::cost::Breakdown> {
        Ok(
            crate::cost::Evaluator::new(&l.model, &l.system, l.parallel, *p)?
                .evaluate(&Pass::decode(share_c as f64, ctx))
                .breakdown,
        )
    };
    let (bs, bd, bc) = (step(&sol_p)?, step(&base)?, step(&cal_p)?);
    let mut shares = Vec::new();
    for tc in TraceCategory::ALL {
        let part = |b: &crate::cost::Breakdown| category_share(b, tc);
        let measured = set.observations.iter().find_map(|o| match o.quantity {
            Quantity::CategoryShare {
                category, share, ..
            } if category == tc => Some(share),
            _ => None,
        });
        shares.push(ShareRow {
            category: tc.name(),
            measured,
            default: part(&bd),
            calibrated: part(&bc),
        });
    }
    let (ms, md, mc) = (breakdown_ms(&bs), breakdown_ms(&bd), breakdown_ms(&bc));
    let gap_ms = ms.keys().map(|k| (*k, [ms[k], md[k], mc[k]])).collect();
    Ok(Validation {
        model: l.model.name.clone(),
        system: l.system.spec.name.clone(),
        parallel: l.parallel.to_string(),
        rows,
        shares,
        gap_ms,
        calibration: cal,
    })
}

pub fn run_validate(a: &ValidateArgs) -> Result<Vec<u8>> {
    let (args, m, format) = (&a.scenario, &a.measured, a.format);
    // End-to-end serving runs name their own model and system: a path of their own.
    if m.measured.iter().any(|f| {
        crate::commands::validate_e2e::e2e_text(f).is_some()
            || crate::commands::validate_e2e::disagg_text(f).is_some()
    }) {
        let group_by = a
            .group_by
            .as_deref()
            .unwrap_or(&crate::e2e::GroupField::DEFAULT);
        return crate::commands::validate_e2e::run_any(args, m, group_by, format);
    }
    // Speculative-decoding runs also name their own model, system and draft settings.
    if m.measured
        .iter()
        .any(|f| crate::commands::validate_specdec::specdec_text(f).is_some())
    {
        return crate::commands::validate_specdec::run(args, m, format);
    }
    if a.group_by.is_some() {
        return Err(crate::error::Error::Scenario(
            "--group-by applies to an e2e serving CSV only".into(),
        ));
    }
    if let Some((tables, skipped)) = crate::commands::kernel_validate::kernel_tables(&m.measured)? {
        return crate::commands::kernel_validate::run(args, &tables, skipped, format);
    }
    let v = validation(args, m)?;
    export::export(&v, format, validation_text)
}

impl Tabular for Validation {
    type Row<'a> = export::rows::ValidationRow<'a>;
    fn table(&self) -> Table<Self::Row<'_>> {
        Table::flat(
            self.rows
                .iter()
                .map(|r| export::rows::ValidationRow {
                    point: &r.point,
                    unit: r.unit,
                    measured: round(r.measured, 6),
                    sol: round(r.sol, 6),
                    default: round(r.default, 6),
                    calibrated: round(r.calibrated, 6),
                    calibrated_ci95_low: round(r.calibrated_ci95.0, 6),
                    calibrated_ci95_high: round(r.calibrated_ci95.1, 6),
                    efficiency: r.efficiency.map(|e| round(e, 4)),
                    default_error: round(r.default_error, 4),
                    calibrated_error: round(r.calibrated_error, 4),
                })
                .collect(),
        )
    }
}

pub fn validation_text(v: &Validation) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on {} ({}): measured vs model",
        v.model, v.system, v.parallel
    );
    let _ = writeln!(o);
    let rows: Vec<Vec<String>> = v
        .rows
        .iter()
        .map(|r| {
            let (k, label) = report_scale(r.unit, r.measured);
            let scale = |_: &str, v: f64| v * k;
            let e = |x: f64| {
                if is_share(r.unit) {
                    format!("{} pt", signed1(x * 100.0))
                } else {
                    format!("{} %", signed1(x * 100.0))
                }
            };
            vec![
                prose_marked(&r.point, r.prose.is_some()),
                format!("{:.2} {label}", scale(r.unit, r.measured)),
                format!("{:.2}", scale(r.unit, r.sol)),
                format!("{:.2} ({})", scale(r.unit, r.default), e(r.default_error)),
                format!(
                    "{:.2} ({})",
                    scale(r.unit, r.calibrated),
                    e(r.calibrated_error)
                ),
                format!(
                    "[{:.2}, {:.2}]",
                    scale(r.unit, r.calibrated_ci95.0),
                    scale(r.unit, r.calibrated_ci95.1)
                ),
                r.efficiency
                    .map(|e| format!("{:.0} %", e * 100.0))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    o.push_str(&table(
        &[
            "point",
            "measured",
            "SOL",
            "default (error)",
            "calibrated (error)",
            "95 % interval",
            "SOL/measured",
        ],
        &rows,
    ));
    if v.rows.iter().any(|r| r.prose.is_some()) {
        let _ = writeln!(o, "{PROSE_NOTE}");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "share of decode kernel time:");
    let rows: Vec<Vec<String>> = v
        .shares
        .iter()
        .filter(|r| r.measured.is_some() || r.default > 0.001 || r.calibrated > 0.001)
        .map(|r| {
            vec![
                r.category.to_string(),
                r.measured
                    .map(|m| format!("{:.1} %", m * 100.0))
                    .unwrap_or_else(|| "-".into()),
                format!("{:.1} %", r.default * 100.0),
                format!("{:.1} %", r.calibrated * 100.0),
            ]
        })
        .collect();
    o.push_str(&table(
        &["category", "measured", "default", "calibrated"],
        &rows,
    ));
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "decode step at C=1 by category, and what separates the bound from the prediction:"
    );
    let mut g: Vec<(&&str, &[f64; 3])> = v
        .gap_ms
        .iter()
        .filter(|(_, x)| x.iter().any(|y| *y > 0.0))
        .collect();
    g.sort_by(|a, b| (b.1[2] - b.1[0]).total_cmp(&(a.1[2] - a.1[0])));
    let tot = |i: usize| v.gap_ms.values().map(|x| x[i]).sum::<f64>();
    let mut rows: Vec<Vec<String>> = g
        .iter()
        .map(|(k, x)| {
            vec![
                k.to_string(),
                format!("{:.3}", x[0]),
                format!("{:.3}", x[1]),
                format!("{:.3}", x[2]),
                format!("{:+.3}", x[2] - x[0]),
            ]
        })
        .collect();
    rows.push(vec![
        "total".into(),
        format!("{:.3}", tot(0)),
        format!("{:.3}", tot(1)),
        format!("{:.3}", tot(2)),
        format!("{:+.3}", tot(2) - tot(0)),
    ]);
    o.push_str(&table(
        &[
            "category",
            "SOL ms",
            "default ms",
            "calibrated ms",
            "calibrated - SOL",
        ],
        &rows,
    ));
    let gap = tot(2) - tot(0);
    if gap > 0.0 {
        let parts: Vec<String> = g
            .iter()
            .take(3)
            .filter(|(_, x)| x[2] > x[0])
            .map(|(k, x)| format!("{k} {:.0} %", 100.0 * (x[2] - x[0]) / gap))
            .collect();
        let _ = writeln!(
            o,
            "the gap between the hardware bound and the calibrated step is {:.2} ms: {}",
            gap,
            parts.join(", ")
        );
    }
    let _ = writeln!(o);
    o.push_str(&calibration_text(&v.calibration));
    o
}

/// A point's label with ` [prose]` where it is read from the record's words.
fn prose_marked(point: &str, prose: bool) -> String {
    if prose {
        format!("{point} [prose]")
    } else {
        point.to_string()
    }
}

/// The note printed under a table that holds prose points.
pub const PROSE_NOTE: &str = "[prose]: read from the record's words (quoted in the measurement file), not from a benchmark's output";
