//! `rooftop compare`, `rooftop sensitivity` and `rooftop explore`.

use crate::cli::{CompareArgs, ComparisonArgs, ExploreArgs, ScenarioArgs, SensitivityArgs};
use crate::commands::load;
use crate::cost::Parallel;
use crate::error::{Error, Result};
use crate::explore::{explore, Selection, Stream};
use crate::export::Tabular;
use crate::export::{self, num, table, Format};

use crate::serve::{TpotDef, Workload};
use crate::spec::overrides::parse_all;
use crate::spec::WeightFormat;
use crate::whatif::{compare_row, sensitivity, CompareRow, Comparison, SensitivityReport};
use std::fmt::Write as _;

/// The layouts of `--parallel`, or the system's default (`None`) when none is given.
/// `--parallel` as the layouts to run (none: each system's own), refusing one given twice:
/// two rows of one layout cannot be told apart, as two systems of one label cannot.
fn layouts(list: &[Parallel]) -> Result<Vec<Option<Parallel>>> {
    if list.is_empty() {
        return Ok(vec![None]);
    }
    for (i, p) in list.iter().enumerate() {
        if list[..i].contains(p) {
            return Err(Error::Usage(format!(
                "--parallel names {p} twice: give each layout once"
            )));
        }
    }
    Ok(list.iter().copied().map(Some).collect())
}

fn workload(i: u32, o: u32) -> Result<Workload> {
    crate::commands::sweep::request_shape(i, o, TpotDef::Itl, false)
}

/// The comparison record for `--systems` × `--parallel`.
#[allow(clippy::too_many_arguments)]
pub fn build_comparison(args: &ScenarioArgs, c: &ComparisonArgs) -> Result<Comparison> {
    // Each row's layout is one of --parallel's: a layout flag would be silently dropped.
    if let Some(flag) = crate::commands::chosen_layout_flag(args).filter(|f| *f != "--calibration")
    {
        return Err(Error::Usage(format!(
            "{flag} does not apply to compare: each row's layout comes from --parallel \
             (e.g. --parallel tp8,tp4pp2,tp1ep8dp8)"
        )));
    }
    let (systems, parallel, concurrency, context) =
        (&c.systems, &c.parallel[..], &c.concurrency[..], c.context);
    let (input_len, output_len) = (c.request.input_len, c.request.output_len);
    let model = crate::commands::load_model(args)?;
    let sets = parse_all(&args.set)?;
    let w = workload(input_len, output_len)?;
    if concurrency.is_empty() || concurrency.contains(&0) {
        return Err(Error::Scenario(
            "--concurrency needs positive integers".into(),
        ));
    }
    let targets = crate::whatif::Targets {
        tpot_ms: c.tpot_target.map(|t| t.0.ms()),
        ttft_ms: c.ttft_target.map(|t| t.0.ms()),
    };
    let lays = layouts(parallel)?;
    let names = &systems.0;
    // A calibration describes the run it was fitted on (model, system, engine, layout):
    // rows of that system use it where the rest matches too, as `predict` would, and carry
    // `predict`'s refusal where it does not; the other systems' rows keep their defaults.
    // With --transfer-calibration every row takes what transfers (`Calibration::for_run`).
    let calibration = args
        .calibration
        .as_deref()
        .map(|f| crate::calibrate::Calibration::load(f).map(|c| (f, c)))
        .transpose()?;
    let mut rows = Vec::new();
    let mut used = false;
    let variants = crate::whatif::load_variants(names, args.engine.as_deref(), &sets)?;
    for ((label, sys), spec) in variants.into_iter().zip(names) {
        // The row's own `[key=value]` overrides count as its `--set` against a calibration.
        let row_sets = match &calibration {
            Some(_) => {
                let mut v = sets.clone();
                v.extend(crate::whatif::variant_overrides(spec)?);
                v
            }
            None => Vec::new(),
        };
        for l in &lays {
            let par = l.unwrap_or(Parallel::tp(sys.spec.gpu_count));
            let fitted = match &calibration {
                Some((file, c)) if args.transfer_calibration || c.system == sys.spec.name => {
                    Some(c.for_run(
                        &model.name,
                        &sys,
                        &par.to_string(),
                        args.transfer_calibration,
                        file,
                    ))
                }
                _ => None,
            };
            used |= fitted.is_some();
            let row = |c: Option<&crate::calibrate::Calibration>| {
                compare_row(
                    &model,
                    &label,
                    &sys,
                    par,
                    c,
                    concurrency,
                    w,
                    context,
                    targets,
                )
            };
            let row = match fitted {
                Some(Err(e)) => {
                    let mut r = row(None);
                    r.refuse(format!("--calibration: {e}"));
                    r
                }
                Some(Ok((c, note))) => {
                    if let Some((file, _)) = &calibration {
                        c.refuse_overridden(&row_sets, file)?;
                    }
                    if let Some(n) = note {
                        crate::cli::stderr_line(&format!("note: {label} {par}: {n}"));
                    }
                    row(Some(&c))
                }
                None => row(None),
            };
            rows.push(row);
        }
    }
    if let (Some((file, c)), false) = (&calibration, used) {
        crate::cli::stderr_line(&format!(
            "note: {file} was fitted on {}; no row is of that system, so every row keeps its \
             defaults (--transfer-calibration carries what transfers to other systems)",
            c.system
        ));
    }
    // Rows that cannot run say why beside the others; a comparison where none can is no
    // comparison.
    if rows.iter().all(|r| r.error.is_some()) {
        let why: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{} {}: {}",
                    r.system,
                    r.parallel,
                    r.error.as_deref().unwrap_or("")
                )
            })
            .collect();
        return Err(Error::Scenario(format!(
            "no system and layout can run:\n  {}",
            why.join("\n  ")
        )));
    }
    Ok(Comparison {
        model: model.name.clone(),
        input_len,
        output_len,
        context,
        concurrency: concurrency.to_vec(),
        targets,
        rows,
    })
}

#[allow(clippy::too_many_arguments)]
pub fn run_compare(a: &CompareArgs) -> Result<Vec<u8>> {
    if a.deployment.asked()? {
        return crate::commands::deploy::run_compare(a);
    }
    if a.plot.is_some() && a.objective.is_none() {
        return Err(Error::Usage(
            "--plot draws the buyer's cost chart: give --objective cost|energy|latency|throughput \
             with it"
                .into(),
        ));
    }
    let r = build_comparison(&a.scenario, &a.comparison)?;
    if let Some(objective) = a.objective {
        let b = crate::whatif::buyer_table(&r, objective);
        if let Some(path) = &a.plot {
            crate::plot::curves(&crate::plot::records::compare_cost_curves(&r), path)?;
            crate::cli::stderr_line(&format!("wrote {}", path.display()));
        }
        return match a.format {
            Format::Csv => export::csv(&export::Table::flat(b.rows.clone())),
            Format::Json => export::json(&b),
            Format::Text => Ok(buyer_text(&b).into_bytes()),
        };
    }
    match a.format {
        Format::Csv => export::rows::compare_csv(&r),
        Format::Json => export::json(&r),
        Format::Text => Ok(compare_text(&r).into_bytes()),
    }
}

/// The buyer's table as text: one row per system at the targets.
fn buyer_text(b: &crate::whatif::BuyerTable) -> String {
    let mut o = String::new();
    let t = &b.targets;
    let target = match (t.tpot_ms, t.ttft_ms) {
        (None, None) => "no latency target (each at its highest throughput)".to_string(),
        (tp, tt) => [
            tp.map(|v| format!("TPOT <= {v} ms")),
            tt.map(|v| format!("TTFT <= {v} ms")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", "),
    };
    let _ = writeln!(
        o,
        "{}: {} in / {} out, {}; ranked by {}",
        b.model,
        b.input_len,
        b.output_len,
        target,
        b.objective_label()
    );
    let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    let mut notes = String::new();
    let rows: Vec<Vec<String>> = b
        .rows
        .iter()
        .map(|r| {
            let mut v = vec![r.system.clone(), r.parallel.clone(), r.gpus.to_string()];
            match &r.unmet {
                Some(why) => {
                    // The reason goes below the table, so that its length does not widen a
                    // column.
                    let _ = writeln!(notes, "{} {}: {why}", r.system, r.parallel);
                    v.push(if why.starts_with("cannot run") {
                        "cannot run".into()
                    } else {
                        "misses the target".into()
                    });
                }
                None => {
                    v.push(opt(r.concurrency.map(|c| c as f64), 0));
                    v.push(opt(r.tpot_ms, 2));
                    v.push(opt(r.tok_s_per_user, 1));
                    v.push(opt(r.throughput_per_gpu_tok_s, 1));
                    v.push(opt(r.watts_per_gpu, 0));
                    v.push(opt(r.joules_per_token, 3));
                    v.push(opt(r.usd_per_million_output_tokens, 2));
                    v.push(opt(r.usd_per_million_total_tokens, 3));
                    v.push(r.limited_by.clone());
                }
            }
            v
        })
        .collect();
    o.push_str(&table(
        &[
            "system",
            "layout",
            "GPUs",
            "C",
            "TPOT ms",
            "tok/s/user",
            "tok/s/GPU",
            "W/GPU",
            "J/tok",
            "$/Mtok out",
            "$/Mtok in+out",
            "limited by",
        ],
        &rows,
    ));
    o.push_str(&notes);
    let _ = writeln!(
        o,
        "W/GPU: idle + DRAM and tensor utilisation of the step (power model in the README)\n\
         $/Mtok: GPUs x (rent, or capital / amortisation + W x electricity) / throughput; \
         \"-\" where a system has no price"
    );
    o
}

fn compare_text(r: &Comparison) -> String {
    let concurrency = &r.concurrency;
    use CompareRow as R;
    let mut notes = String::new();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: TPOT at context {}, plateau for {} in / {} out",
        r.model, r.context, r.input_len, r.output_len
    );
    let mut header: Vec<String> = vec!["system".into(), "layout".into()];
    for c in concurrency {
        header.push(format!("C={c} ms"));
        header.push(format!("C={c} tok/s"));
        header.push(format!("C={c} largest"));
    }
    header.extend(["plateau tok/s", "weights GB/GPU", "KV tokens", "$/M tok"].map(String::from));
    // With a latency target, where each row meets it best: the plateau's cost may be at a
    // TPOT far past the target.
    let targeted = r.targets.tpot_ms.is_some() || r.targets.ttft_ms.is_some();
    if targeted {
        header.extend(["at target C", "at target tok/s", "at target $/M tok"].map(String::from));
    }
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|x| {
            let layout = if x.provenance == "calibrated" {
                format!("{} (calibrated)", x.parallel)
            } else {
                x.parallel.clone()
            };
            let mut v = vec![x.system.clone(), layout];
            if let Some(e) = &x.error {
                // The reason goes below the table, so that its length does not widen a column.
                let _ = writeln!(notes, "{} {}: cannot run: {e}", x.system, x.parallel);
                v.push("cannot run".into());
                return v;
            }
            for &c in concurrency {
                if let Some(why) = R::at(&x.does_not_fit, c) {
                    let _ = writeln!(notes, "{} {} at C={c}: {why}", x.system, x.parallel);
                    v.extend(["does not fit".into(), String::new(), String::new()]);
                    continue;
                }
                v.push(
                    R::at(&x.tpot_ms, c)
                        .map(|t| format!("{t:.2}"))
                        .unwrap_or_default(),
                );
                v.push(
                    R::at(&x.throughput_tok_s, c)
                        .map(|t| format!("{t:.0}"))
                        .unwrap_or_default(),
                );
                v.push(R::at(&x.dominant, c).cloned().unwrap_or_default());
            }
            v.push(
                x.plateau_tok_s
                    .map(|p| format!("{p:.0}"))
                    .unwrap_or_default(),
            );
            v.push(format!(
                "{:.1}{}",
                x.weights_per_gpu_gb,
                if x.fits { "" } else { " (no fit)" }
            ));
            v.push(format!("{:.0}", x.max_kv_tokens));
            v.push(
                x.usd_per_million_tokens
                    .map(|u| format!("{u:.2}"))
                    .unwrap_or_else(|| "-".into()),
            );
            if targeted {
                match &x.at_target {
                    Some(t) => v.extend([
                        t.concurrency.to_string(),
                        format!("{:.0}", t.throughput_tok_s),
                        t.usd_per_million_output_tokens
                            .map(|u| format!("{u:.2}"))
                            .unwrap_or_else(|| "-".into()),
                    ]),
                    None => {
                        let why = x.target_unmet.as_deref().unwrap_or("no point meets it");
                        let _ = writeln!(notes, "{} {}: {why}", x.system, x.parallel);
                        v.extend(["unmet".into(), String::new(), String::new()]);
                    }
                }
            }
            v
        })
        .collect();
    let h: Vec<&str> = header.iter().map(|s| s.as_str()).collect();
    o.push_str(&table(&h, &rows));
    if targeted {
        let _ = writeln!(
            o,
            "at target: the swept point of highest throughput within{}{}; $/M tok beside the plateau is at the plateau, whatever its latency",
            r.targets
                .tpot_ms
                .map(|t| format!(" TPOT {t:.1} ms"))
                .unwrap_or_default(),
            r.targets
                .ttft_ms
                .map(|t| format!(" TTFT {t:.0} ms"))
                .unwrap_or_default()
        );
    }
    o.push_str(&notes);
    o
}

#[allow(clippy::too_many_arguments)]
pub fn run_sensitivity(a: &SensitivityArgs) -> Result<Vec<u8>> {
    let args = &a.scenario;
    let (concurrency, target, format) = (a.concurrency, a.target_tpot, a.format);
    let (input_len, output_len) = (a.request.input_len, a.request.output_len);
    let l = load(args)?;
    let s = l.scenario()?;
    let w = workload(input_len, output_len)?;
    if concurrency == 0 {
        return Err(Error::Scenario("--concurrency must be at least 1".into()));
    }
    let target_ms = target.map(|t| t.0.ms());
    let r = sensitivity(
        &l.model,
        &l.system,
        l.parallel,
        s.params,
        concurrency,
        w,
        target_ms,
    )?;
    export::export(&r, format, sensitivity_text)
}

fn sensitivity_text(r: &SensitivityReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} on {} ({}), C = {} requests of {} in / {} out: TPOT {:.2} ms, plateau {:.0} tok/s",
        r.model,
        r.system,
        r.parallel,
        r.concurrency,
        r.input_len,
        r.output_len,
        r.tpot_ms,
        r.plateau_tok_s
    );
    let _ = writeln!(o);
    let mut header = vec!["+10 % of", "TPOT", "plateau", "elasticity", "floor ms"];
    if r.target_tpot_ms.is_some() {
        header.push("to reach target");
    }
    let rows: Vec<Vec<String>> = r
        .parameters
        .iter()
        .map(|p| {
            let mut v = vec![
                p.name.to_string(),
                format!("{:+.2} %", p.tpot_change_pct_for_plus_10),
                format!("{:+.2} %", p.plateau_change_pct_for_plus_10),
                format!("{:+.3}", p.tpot_elasticity),
                format!("{:.2}", p.tpot_floor_ms),
            ];
            if let Some(t) = r.target_tpot_ms {
                v.push(match p.factor_for_target {
                    Some(f) if (f - 1.0).abs() < 1e-9 => "already there".into(),
                    Some(f) => format!("x{f:.3}"),
                    // Met already, and no value within x1000 (or /1000) misses it.
                    None if r.tpot_ms <= t => "met at any".into(),
                    None => "cannot alone".into(),
                });
            }
            v
        })
        .collect();
    o.push_str(&table(&header, &rows));
    match r.target_tpot_ms {
        Some(t) if r.tpot_ms <= t => {
            let _ = writeln!(o, "target TPOT {t:.2} ms is already met ({:.2} ms): \"x f\" is how far the parameter alone can move, the slow way, before the TPOT rises to the target; \"met at any\" means no value within x1000 (or /1000) misses it", r.tpot_ms);
        }
        Some(t) => {
            let _ = writeln!(o, "target TPOT {t:.2} ms: \"x f\" is the factor the parameter alone must be scaled by; \"cannot alone\" means even x1000 (or /1000) leaves TPOT above the target, at the floor shown");
        }
        None => {}
    }
    if !r.alternatives.is_empty() {
        let _ = writeln!(o);
        let rows: Vec<Vec<String>> = r
            .alternatives
            .iter()
            .map(|a| {
                vec![
                    a.change.clone(),
                    format!("{:.2} ms ({:+.1} %)", a.tpot_ms, a.tpot_change_pct),
                    format!(
                        "{:.0} tok/s ({:+.1} %)",
                        a.plateau_tok_s, a.plateau_change_pct
                    ),
                ]
            })
            .collect();
        o.push_str(&table(&["software change", "TPOT", "plateau"], &rows));
    }
    o
}

#[allow(clippy::too_many_arguments)]
/// The grid's size, counted before anything runs, and refused past `max_points` with the
/// time it would take (each combination's set-up and the cost per point, measured on slices
/// of the grid, the points spread over the cores); a long run says its estimate on stderr.
/// It was 10-100x too long when one sample's rate, the process's one-time set-up included,
/// stood for the whole grid.
fn bounded_grid(
    model: &crate::spec::ModelSpec,
    syss: &[(String, crate::spec::System)],
    lays: &[Option<Parallel>],
    quants: &[Option<WeightFormat>],
    batches: &[u32],
    contexts: &[u32],
    max_points: u64,
) -> Result<u64> {
    let total = [
        syss.len(),
        lays.len(),
        quants.len(),
        batches.len(),
        contexts.len(),
    ]
    .iter()
    .fold(1u64, |n, &k| n.saturating_mul(k as u64));
    // The time, measured on slices of the grid: every combination at one point (a first
    // run pays the process's one-time set-up, parsing the kernel tables, and is discarded;
    // the second is each combination's own set-up), then at a few batches and contexts (the
    // cost per point, on as many threads as that slice used). A grid where nothing can run
    // says why here, before any estimate.
    let slice = |b: usize, c: usize| {
        explore(
            model,
            syss,
            lays,
            quants,
            &batches[..batches.len().min(b)],
            &contexts[..contexts.len().min(c)],
            Stream::None,
            true,
            &Selection::default(),
            &mut std::io::sink(),
            false,
        )
        .map(|(_, s)| s)
    };
    slice(1, 1)?;
    let setup = slice(1, 1)?;
    // A slice long enough to time: one that runs in a few milliseconds gives timer noise
    // (a rate of 10^13 points/s), so it grows fourfold each way until it takes 20 ms more
    // than the set-up or holds the whole grid.
    let (mut b, mut c) = (4, 256);
    let mut sample = slice(b, c)?;
    while sample.seconds - setup.seconds < 0.02 && (b < batches.len() || c < contexts.len()) {
        (b, c) = (b * 4, c * 4);
        sample = slice(b, c)?;
    }
    let combos = setup.points_evaluated.max(1);
    let per_point = (sample.seconds - setup.seconds).max(0.0)
        / (sample
            .points_evaluated
            .saturating_sub(setup.points_evaluated))
        .max(1) as f64;
    // The whole grid runs its chunks (16,384 points of whole context rows) on every core.
    let rows_per_chunk = (16_384 / contexts.len().max(1)).max(1) as u64;
    let chunks = combos * (batches.len() as u64).div_ceil(rows_per_chunk);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let speedup = cores.min(chunks).max(1) as f64 / sample.threads.max(1) as f64;
    let eta = setup.seconds + per_point * total as f64 / speedup;
    let rate = total as f64 / eta.max(1e-9);
    let eta_text = if eta < 1.0 {
        "under 1 s".to_string()
    } else if eta < 120.0 {
        format!("about {eta:.0} s")
    } else if eta < 2.0 * 3600.0 {
        format!("about {:.0} min", eta / 60.0)
    } else if eta < 100.0 * 3600.0 {
        format!("about {:.1} h", eta / 3600.0)
    } else {
        format!("about {:.1e} h", eta / 3600.0)
    };
    if total > max_points {
        return Err(Error::Scenario(format!(
            "explore: {total} design points ({} systems × {} layouts × {} quantizations × {} batches × {} contexts), \
             {eta_text} at the {rate:.0} points/s measured here; more than --max-points {max_points}. \
             Narrow the ranges (a step 1024..131072:1024 or a factor 1..4096:x2) or raise --max-points",
            syss.len(),
            lays.len(),
            quants.len(),
            batches.len(),
            contexts.len()
        )));
    }
    if eta > 10.0 {
        crate::cli::stderr_line(&format!(
            "explore: {total} design points, {eta_text} at {rate:.0} points/s"
        ));
    }
    Ok(total)
}

pub fn run_explore(a: &ExploreArgs) -> Result<Vec<u8>> {
    let ExploreArgs {
        scenario: args,
        systems,
        parallel,
        batch: batches,
        context: contexts,
        quant,
        pareto,
        format,
        max_points: _,
        objective,
        top,
        tpot_target,
        request,
    } = a;
    let (systems, pareto, format) = (systems.as_ref(), *pareto, *format);
    // explore's layouts are its --parallel list: a single-layout flag would be ignored.
    if let Some(flag) = crate::commands::chosen_layout_flag(args) {
        return Err(Error::Usage(if flag == "--calibration" {
            "--calibration does not apply to explore: it prices every system and layout \
             with the default parameters (a fit belongs to the one system it was made on)"
                .into()
        } else {
            format!(
                "{flag} does not apply to explore: give its layouts as --parallel (e.g. \
                 --parallel tp4,tp8,tp4pp2); with none it prices each system's own"
            )
        }));
    }
    let model = crate::commands::load_model(args)?;
    let sets = parse_all(&args.set)?;
    let names = match systems {
        Some(s) => s.0.clone(),
        None => vec![args.system.clone()],
    };
    let syss = crate::whatif::load_variants(&names, args.engine.as_deref(), &sets)?;
    // An objective some system has no figure for is refused before anything runs.
    if let Some(o) = *objective {
        if let Some(why) = syss
            .iter()
            .find_map(|(l, s)| crate::explore::refusal(o, l, s))
        {
            return Err(Error::Usage(why));
        }
    }
    let selection = Selection {
        objective: *objective,
        tpot_target_ms: tpot_target.map(|t| t.0.ms()),
        top: *top as usize,
        tokens_per_output: crate::economics::tokens_per_output(
            request.input_len,
            request.output_len,
        ),
    };
    let lays = layouts(parallel)?;
    let (batches, contexts) = (&batches.0, &contexts.0);
    let quants: Vec<Option<WeightFormat>> = if quant.is_empty() {
        vec![None]
    } else {
        quant
            .iter()
            .map(|q| q.parse::<WeightFormat>().map(Some).map_err(Error::Scenario))
            .collect::<Result<_>>()?
    };
    let stream = match (format, pareto) {
        (_, true) | (Format::Text, _) => Stream::None,
        (Format::Json, false) => Stream::JsonLines,
        (Format::Csv, false) => Stream::Csv,
    };
    bounded_grid(
        &model,
        &syss,
        &lays,
        &quants,
        batches,
        contexts,
        a.max_points,
    )?;
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let (_combos, summary) = explore(
        &model, &syss, &lays, &quants, batches, contexts, stream, pareto, &selection, &mut lock,
        true,
    )?;
    drop(lock);
    let mut o = Vec::new();
    match format {
        Format::Json if pareto => o = export::json(&summary)?,
        Format::Csv if pareto => {
            o = export::csv(&summary.table())?;
            // stdout stays rows only (a CSV reader takes a trailing `#` line for a row).
            crate::cli::stderr_line(&format!(
                "points_evaluated {} seconds {:.3} ({:.0} points/s)",
                summary.points_evaluated, summary.seconds, summary.points_per_second
            ));
        }
        Format::Text => {
            let mut t = String::new();
            let _ = writeln!(
                t,
                "points_evaluated {} in {:.3} s ({:.0} points/s on {} threads)",
                summary.points_evaluated,
                summary.seconds,
                summary.points_per_second,
                summary.threads
            );
            if let Some(o) = objective {
                let what = match o {
                    crate::cli::Objective::Cost => "$ per million output tokens",
                    crate::cli::Objective::Energy => "joules per output token",
                    crate::cli::Objective::Latency => "TPOT",
                    crate::cli::Objective::Throughput => "tok/s per GPU (highest first)",
                };
                let which = if pareto {
                    "the Pareto front".to_string()
                } else {
                    format!("the best {} points", summary.top.len())
                };
                let _ = writeln!(t, "{which}, ranked by {what}");
            }
            if pareto || objective.is_some() {
                let (cols, header): (Vec<&str>, Vec<&str>) = [
                    ("system", "system"),
                    ("parallel", "layout"),
                    ("quant", "quant"),
                    ("batch", "batch"),
                    ("context", "context"),
                    ("tpot_ms", "TPOT ms"),
                    ("tok_s_per_user", "tok/s/user"),
                    ("throughput_per_gpu_tok_s", "tok/s per GPU"),
                    ("watts_per_gpu", "W/GPU"),
                    ("joules_per_token", "J/tok"),
                    ("usd_per_million_output_tokens", "$/Mtok out"),
                    ("usd_per_million_total_tokens", "$/Mtok in+out"),
                ]
                .into_iter()
                .unzip();
                let rows = if pareto {
                    &summary.pareto
                } else {
                    &summary.top
                };
                t.push_str(&table(&header, &pareto_rows(rows, &cols)));
                let _ = writeln!(
                    t,
                    "W/GPU: idle + DRAM and tensor utilisation of the step (power model in the README)\n\
                     $/Mtok: GPUs x (rent, or capital / amortisation + W x electricity) / throughput; \
                     in+out counts {} in / {} out per request; \"-\" where a system has no price",
                    request.input_len, request.output_len
                );
            }
            o = t.into_bytes();
        }
        _ => {
            // streamed rows already written; the summary goes to stderr so stdout stays data
            crate::cli::stderr_line(&format!(
                "points_evaluated {} seconds {:.3} ({:.0} points/s)",
                summary.points_evaluated, summary.seconds, summary.points_per_second
            ));
        }
    }
    for s in &summary.skipped {
        crate::cli::stderr_line(&format!("skipped: {s}"));
    }
    if summary.points_over_target > 0 {
        crate::cli::stderr_line(&format!(
            "not shown: {} of {} points over the TPOT target",
            summary.points_over_target, summary.points_evaluated
        ));
    }
    if summary.points_over_target > 0
        && summary.points_over_target + summary.points_not_fitting == summary.points_evaluated
    {
        // Nothing meets the target: exit 1 with why, never 0 with no rows.
        return Err(Error::Scenario(format!(
            "no point of the grid meets the TPOT target: {} of {} are over it{}",
            summary.points_over_target,
            summary.points_evaluated,
            if summary.points_not_fitting > 0 {
                format!(" and {} do not fit", summary.points_not_fitting)
            } else {
                String::new()
            }
        )));
    }
    if summary.points_not_fitting > 0 && summary.points_not_fitting == summary.points_evaluated {
        // Nothing of the grid can run: exit 1 with why, never 0 with no rows.
        return Err(Error::Scenario(format!(
            "no point of the grid fits: all {} do not fit (in memory or the context window): {}",
            summary.points_evaluated,
            summary.not_fitting.join("; ")
        )));
    }
    if summary.points_not_fitting > 0 {
        crate::cli::stderr_line(&format!(
            "not shown: {} of {} points do not fit (in memory or the context window)",
            summary.points_not_fitting, summary.points_evaluated
        ));
        for s in &summary.not_fitting {
            crate::cli::stderr_line(&format!("  {s}"));
        }
    }
    Ok(o)
}

/// Points (the front or the best) as text rows of `cols`: strings as they are, numbers
/// with up to 4 decimals, "-" for a figure the point has none of (no price).
fn pareto_rows(
    points: &[std::collections::BTreeMap<&'static str, serde_json::Value>],
    cols: &[&str],
) -> Vec<Vec<String>> {
    points
        .iter()
        .map(|m| {
            cols.iter()
                .map(|k| match m.get(k) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.as_f64().map_or("-".to_string(), |x| num(x, 4)),
                    None => String::new(),
                })
                .collect()
        })
        .collect()
}
