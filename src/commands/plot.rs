//! `rooftop plot ...`: build the same records the other commands export, then draw them.
//! Also the charts `cargo run --release` writes for the team's box.

use crate::calibration::Calibration;
use crate::cli::{
    BreakdownBy, MeasuredArgs, PlotBreakdownArgs, PlotCommand, PlotCompareArgs, PlotMeasuredArgs,
    PlotRooflineArgs, PlotSpecdecArgs, PlotSweepArgs, ScenarioArgs, ServingArgs,
};
use crate::commands::calibrate::load_measured;
use crate::commands::sweep::workload;
use crate::commands::{load, Loaded};
use crate::cost::{CostParams, Parallel};
use crate::error::{Error, Result};
use crate::measured::MeasuredSet;
use crate::plot::records::{
    compare_bars, compare_plateau_bars, specdec_heatmap, sweep_breakdown, sweep_chart, SweepMetric,
};
use crate::plot::{self, StackedBars};
use crate::predict::{predict_fitting, Scenario};
use crate::serve::{sweep, Sweep, Workload};
use crate::specdec::{specdec, Acceptance};
use std::path::{Path, PathBuf};

/// SOL, default and (when a calibration is given or measurements are) calibrated sweeps.
pub struct SweepSet {
    pub sol: Sweep,
    pub default: Sweep,
    pub calibrated: Option<Sweep>,
    pub measured: Option<MeasuredSet>,
}

/// The sweeps a chart draws: SOL, default, and calibrated when `cal` is given (read from a
/// calibration file; never fitted here).
pub fn sweep_set(
    l: &Loaded,
    cal: Option<&Calibration>,
    conc: &[u32],
    w: Workload,
    m: &PlotMeasuredArgs,
) -> Result<SweepSet> {
    let s = Scenario::new(&l.model, &l.system, l.parallel)?;
    let default = sweep(&s, conc, w)?;
    let sol = sweep(
        &Scenario {
            params: CostParams::speed_of_light(),
            ..s.clone()
        },
        conc,
        w,
    )?;
    let measured = if m.measured.is_empty() {
        None
    } else {
        let a = MeasuredArgs {
            measured: m.measured.clone(),
            assume_input_len: m.assume_input_len,
            assume_output_len: m.assume_output_len,
            client: None,
            nccl_gpus: None,
            trace_concurrency: None,
        };
        Some(load_measured(&a)?)
    };
    let calibrated = match cal {
        Some(c) => Some(sweep(&s.clone().calibrated(c), conc, w)?),
        None => None,
    };
    Ok(SweepSet {
        sol,
        default,
        calibrated,
        measured: measured.map(|m| m.0),
    })
}

fn concurrency(a: &ServingArgs) -> Vec<u32> {
    let mut c = a.concurrency.clone();
    c.sort_unstable();
    c.dedup();
    c
}

pub fn run(cmd: &PlotCommand) -> Result<String> {
    let done = |p: &Path| format!("wrote {}\n", p.display());
    match cmd {
        PlotCommand::Roofline(PlotRooflineArgs {
            scenario,
            batch,
            context,
            out,
        }) => {
            let l = load(scenario)?;
            let p = predict_fitting(&l.scenario()?, *batch, *context)?;
            plot::roofline(&p, &l.system.gpu, out)?;
            Ok(done(out))
        }
        PlotCommand::Sweep(PlotSweepArgs {
            scenario,
            serving,
            measured,
            metric,
            out,
        }) => {
            let (l, w) = load_serving(scenario, serving)?;
            let set = sweep_set(
                &l,
                l.calibration.as_ref(),
                &concurrency(serving),
                w,
                measured,
            )?;
            plot::curves(
                &sweep_chart(
                    *metric,
                    &set.sol,
                    &set.default,
                    set.calibrated.as_ref(),
                    set.measured.as_ref(),
                ),
                out,
            )?;
            Ok(done(out))
        }
        PlotCommand::Breakdown(PlotBreakdownArgs {
            scenario,
            serving,
            by,
            systems,
            batch,
            context,
            out,
        }) => {
            let bars = match by {
                BreakdownBy::Concurrency => {
                    let (l, w) = load_serving(scenario, serving)?;
                    sweep_breakdown(&sweep(&l.scenario()?, &concurrency(serving), w)?)
                }
                BreakdownBy::Layer => {
                    let l = load(scenario)?;
                    StackedBars::per_layer(&predict_fitting(&l.scenario()?, *batch, *context)?)
                }
                BreakdownBy::System => {
                    // Each system's bar is its whole box at tensor parallelism, uncalibrated:
                    // a layout or a calibration given would be dropped.
                    if let Some(flag) = crate::commands::chosen_layout_flag(scenario) {
                        return Err(Error::Usage(format!(
                            "{flag} does not apply to plot breakdown --by system: each bar is \
                             a system's whole box at tensor parallelism, with its defaults"
                        )));
                    }
                    let names = &systems
                        .as_ref()
                        .ok_or_else(|| Error::Scenario("--by system needs --systems".into()))?
                        .0;
                    let sets = crate::spec::overrides::parse_all(&scenario.set)?;
                    let l = load(scenario)?;
                    let mut bars = Vec::new();
                    for (label, sys) in
                        crate::whatif::load_variants(names, scenario.engine.as_deref(), &sets)?
                    {
                        let s = Scenario::new(&l.model, &sys, Parallel::tp(sys.spec.gpu_count))?;
                        let p = predict_fitting(&s, *batch, *context)
                            .map_err(|e| Error::Scenario(format!("{label}: {e}")))?;
                        bars.push((
                            label,
                            p.breakdown_ms
                                .iter()
                                .map(|(k, v)| (k.to_string(), *v))
                                .collect(),
                        ));
                    }
                    StackedBars {
                        title: format!(
                            "Decode step by category: {} at batch {batch}, context {context}",
                            l.model.name
                        ),
                        y_label: "Time per decode step (ms)".into(),
                        bars,
                    }
                }
            };
            plot::breakdown(&bars, out)?;
            Ok(done(out))
        }
        PlotCommand::Compare(PlotCompareArgs {
            scenario,
            comparison,
            plateau,
            cost,
            out,
        }) => {
            let c = crate::commands::whatif::build_comparison(scenario, comparison)?;
            if *cost {
                plot::curves(&crate::plot::records::compare_cost_curves(&c), out)?;
                return Ok(done(out));
            }
            let bars = if *plateau {
                compare_plateau_bars(&c)
            } else {
                compare_bars(&c)
            };
            plot::grouped_bars(&bars, out)?;
            Ok(done(out))
        }
        PlotCommand::Specdec(PlotSpecdecArgs {
            scenario,
            draft,
            k,
            acceptance,
            concurrency,
            context,
            out,
        }) => {
            let l = load(scenario)?;
            let s = l.scenario()?;
            let d = crate::commands::specdec::draft(draft, &l)?;
            let mut runs = Vec::new();
            for a in acceptance {
                let acc = Acceptance(vec![*a]);
                runs.push((*a, specdec(&s, &d, &acc, &k.0, &[*concurrency], *context)?));
            }
            plot::heatmap(&specdec_heatmap(&runs, *concurrency), out)?;
            Ok(done(out))
        }
    }
}

/// The charts `cargo run --release` writes for the default scenario into `dir`.
pub fn default_plots(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let args = ScenarioArgs {
        model: "kimi-k2.5-int4".into(),
        system: "8x-rtx-pro-6000-pcie".into(),
        engine: None,
        tp: None,
        ep: None,
        pp: None,
        dp: None,
        redundant_experts: None,
        calibration: None,
        transfer_calibration: false,
        set: vec![],
    };
    let l = load(&args)?;
    let mut written = Vec::new();
    let s = l.scenario()?;
    for (b, name) in [(1u32, "roofline_b1"), (128, "roofline_b128")] {
        let p = predict_fitting(&s, b, 1024)?;
        for ext in ["png", "svg"] {
            let path = dir.join(format!("{name}.{ext}"));
            plot::roofline(&p, &l.system.gpu, &path)?;
            written.push(path);
        }
        if b == 1 {
            let path = dir.join("layers_b1.png");
            plot::breakdown(&StackedBars::per_layer(&p), &path)?;
            written.push(path);
        }
    }
    // The team's measurement: lengths as calibrate assumes them (32 in / 32 out).
    let m = PlotMeasuredArgs {
        measured: vec!["k25b6000bench1".into()],
        assume_input_len: 32,
        assume_output_len: 32,
    };
    let conc: Vec<u32> = (0..=8).map(|i| 1u32 << i).collect();
    let w = Workload {
        input_len: 32,
        output_len: 32,
        tpot_def: crate::serve::TpotDef::E2e,
        client: Default::default(),
    };
    // The calibrated curve: fitted here, at the command's level, and handed to the records.
    let (measured, sources) = load_measured(&MeasuredArgs {
        measured: m.measured.clone(),
        assume_input_len: m.assume_input_len,
        assume_output_len: m.assume_output_len,
        nccl_gpus: None,
        trace_concurrency: None,
        client: None,
    })?;
    let cal = crate::calibrate::calibrate(
        &Scenario::new(&l.model, &l.system, l.parallel)?,
        &measured,
        crate::calibrate::Assumptions {
            input_len: m.assume_input_len,
            output_len: m.assume_output_len,
            client: crate::serve::ClientModel::IDEAL,
        },
        sources,
    )?;
    let set = sweep_set(&l, Some(&cal), &conc, w, &m)?;
    for (metric, name) in [
        (SweepMetric::Throughput, "sweep_throughput"),
        (SweepMetric::Tpot, "sweep_tpot"),
    ] {
        for ext in ["png", "svg"] {
            let path = dir.join(format!("{name}.{ext}"));
            plot::curves(
                &sweep_chart(
                    metric,
                    &set.sol,
                    &set.default,
                    set.calibrated.as_ref(),
                    set.measured.as_ref(),
                ),
                &path,
            )?;
            written.push(path);
        }
    }
    let path = dir.join("breakdown_by_concurrency.png");
    plot::breakdown(
        &sweep_breakdown(set.calibrated.as_ref().unwrap_or(&set.default)),
        &path,
    )?;
    written.push(path);
    let comparison = crate::cli::ComparisonArgs {
        systems: "8x-rtx-pro-6000-pcie[label=RTX PRO 6000 PCIe5],8x-rtx-pro-6000-pcie[label=RTX PRO 6000 PCIe6;system.interconnect=pcie-gen6-x16],8x-rtx-pro-6000-pcie[label=RTX PRO 6000 NVLink5;system.interconnect=nvlink5],8x-h200-nvlink[label=8x H200 NVLink],8x-b200-nvlink[label=8x B200 NVLink]"
            .parse::<crate::options::Systems>()
            .map_err(Error::Scenario)?,
        parallel: vec![],
        concurrency: vec![1, 128],
        context: 1024,
        request: crate::cli::RequestArgs {
            input_len: 1000,
            output_len: 1000,
        },
        tpot_target: None,
        ttft_target: None,
    };
    let c = crate::commands::whatif::build_comparison(&args, &comparison)?;
    let path = dir.join("compare_tpot.png");
    plot::grouped_bars(&compare_bars(&c), &path)?;
    written.push(path);
    let d = crate::specdec::Draft::Eagle3;
    let mut runs = Vec::new();
    for a in [0.4, 0.5, 0.6, 0.7, 0.8, 0.9] {
        runs.push((
            a,
            specdec(
                &s,
                &d,
                &Acceptance(vec![a]),
                &(1..=8).collect::<Vec<_>>(),
                &[1],
                1024,
            )?,
        ));
    }
    let path = dir.join("specdec_eagle_c1.png");
    plot::heatmap(&specdec_heatmap(&runs, 1), &path)?;
    written.push(path);
    Ok(written)
}

/// The scenario and the serving workload as `sweep` takes them: the client's launch
/// scripts' server settings set on the loaded system and model.
fn load_serving(scenario: &ScenarioArgs, serving: &ServingArgs) -> Result<(Loaded, Workload)> {
    let mut l = load(scenario)?;
    let w = workload(serving, &mut l.system, &mut l.model)?;
    Ok((l, w))
}
