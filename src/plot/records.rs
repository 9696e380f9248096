//! Chart data from result records: the sweep, specdec and compare records become the small
//! chart types of this module, with nothing recomputed.

use crate::measured::{MeasuredSet, Quantity};
use crate::plot::{CurveChart, GroupedBars, Heatmap, Measured, Series, StackedBars};
use crate::serve::{ServePoint, Sweep};
use crate::specdec::SpecDec;
use crate::whatif::Comparison;

/// What a sweep chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum SweepMetric {
    /// Output tokens per second of the server.
    #[default]
    Throughput,
    /// Time per output token under the sweep's TPOT definition.
    Tpot,
    /// Time to first token.
    Ttft,
}

fn value(m: SweepMetric, p: &ServePoint) -> f64 {
    match m {
        SweepMetric::Throughput => p.throughput_tok_s,
        SweepMetric::Tpot => p.tpot_ms,
        SweepMetric::Ttft => p.ttft_ms,
    }
}

fn band(m: SweepMetric, p: &ServePoint) -> Option<(f64, f64)> {
    match m {
        SweepMetric::Throughput => p.throughput_ci95_tok_s.map(|[a, b]| (a, b)),
        SweepMetric::Tpot => p.tpot_ci95_ms.map(|[a, b]| (a, b)),
        SweepMetric::Ttft => None,
    }
}

/// `metric` against concurrency for the SOL, default and (optional) calibrated sweeps, with
/// the calibrated interval as a band, measured points overlaid, and the plateau and KV limit
/// marked.
pub fn sweep_chart(
    metric: SweepMetric,
    sol: &Sweep,
    default: &Sweep,
    calibrated: Option<&Sweep>,
    measured: Option<&MeasuredSet>,
) -> CurveChart {
    let line = |name: &str, s: &Sweep, with_band: bool| Series {
        name: name.to_string(),
        points: s
            .points
            .iter()
            .map(|p| (p.concurrency as f64, value(metric, p)))
            .collect(),
        band: if with_band {
            s.points
                .iter()
                .map(|p| band(metric, p).map(|(a, b)| (p.concurrency as f64, a, b)))
                .collect()
        } else {
            None
        },
    };
    let mut series = vec![
        line("speed of light", sol, false),
        line("default", default, false),
    ];
    if let Some(c) = calibrated {
        series.push(line("calibrated (95 % band)", c, true));
    }
    let main = calibrated.unwrap_or(default);
    let mut markers = Vec::new();
    if main.plateau_reached {
        markers.push((
            main.plateau_concurrency as f64,
            format!(
                "plateau C={} ({:.0} tok/s)",
                main.plateau_concurrency, main.plateau_tok_s
            ),
        ));
    }
    let last = main.points.last().map(|p| p.concurrency).unwrap_or(0);
    if main.kv_max_concurrency > 0 && main.kv_max_concurrency < last {
        markers.push((
            main.kv_max_concurrency as f64,
            format!("KV limit C={}", main.kv_max_concurrency),
        ));
    }
    let mut meas = Vec::new();
    if let Some(set) = measured {
        let pts: Vec<(f64, f64)> = set
            .observations
            .iter()
            .filter_map(|o| match (&o.quantity, metric) {
                (
                    Quantity::Throughput {
                        concurrency,
                        tokens_per_second,
                        ..
                    },
                    SweepMetric::Throughput,
                ) => Some((*concurrency as f64, *tokens_per_second)),
                (
                    Quantity::Tpot {
                        concurrency,
                        seconds,
                        ..
                    },
                    SweepMetric::Tpot,
                ) => Some((*concurrency as f64, seconds * 1e3)),
                (
                    Quantity::Ttft {
                        concurrency,
                        seconds,
                        ..
                    },
                    SweepMetric::Ttft,
                ) => Some((*concurrency as f64, seconds * 1e3)),
                _ => None,
            })
            .collect();
        if !pts.is_empty() {
            meas.push(Measured {
                name: "measured".into(),
                points: pts,
            });
        }
    }
    let (y_label, what) = match metric {
        SweepMetric::Throughput => ("Output throughput (tok/s)".to_string(), "throughput"),
        SweepMetric::Tpot => (format!("TPOT, {} definition (ms)", main.tpot_def), "TPOT"),
        SweepMetric::Ttft => ("Time to first token (ms)".to_string(), "TTFT"),
    };
    CurveChart {
        title: format!(
            "{} vs concurrency: {} on {} ({}), {} in / {} out",
            what, main.model, main.system, main.parallel, main.input_len, main.output_len
        ),
        x_label: "Concurrency (requests in flight)".into(),
        y_label,
        series,
        measured: meas,
        markers,
        log_x: true,
        log_y: metric != SweepMetric::Throughput,
    }
}

/// Decode time per category at each concurrency of a sweep.
pub fn sweep_breakdown(s: &Sweep) -> StackedBars {
    StackedBars {
        title: format!(
            "Decode step by category: {} on {} ({}), {} parameters",
            s.model, s.system, s.parallel, s.provenance
        ),
        y_label: "Time per decode step (ms)".into(),
        bars: s
            .points
            .iter()
            .map(|p| {
                (
                    format!("C={}", p.concurrency),
                    p.breakdown_ms
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                )
            })
            .collect(),
    }
}

/// TPOT per system/layout at each concurrency of a comparison.
pub fn compare_bars(c: &Comparison) -> GroupedBars {
    let rows: Vec<_> = c.rows.iter().filter(|r| r.error.is_none()).collect();
    let groups: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.system, r.parallel))
        .collect();
    // A concurrency that does not fit has no bar.
    let series = c
        .concurrency
        .iter()
        .map(|&cc| {
            (
                format!("TPOT at C={cc} (ms)"),
                rows.iter()
                    .map(|r| {
                        crate::whatif::CompareRow::at(&r.tpot_ms, cc)
                            .copied()
                            .unwrap_or(f64::NAN)
                    })
                    .collect(),
            )
        })
        .collect();
    GroupedBars {
        title: format!("{}: TPOT by system and layout", c.model),
        y_label: "TPOT (ms)".into(),
        groups,
        series,
    }
}

/// Plateau throughput per system/layout of a comparison.
pub fn compare_plateau_bars(c: &Comparison) -> GroupedBars {
    let rows: Vec<_> = c.rows.iter().filter(|r| r.error.is_none()).collect();
    GroupedBars {
        title: format!(
            "{}: throughput plateau by system and layout ({} in / {} out)",
            c.model, c.input_len, c.output_len
        ),
        y_label: "Output throughput (tok/s)".into(),
        groups: rows
            .iter()
            .map(|r| format!("{} {}", r.system, r.parallel))
            .collect(),
        series: vec![(
            "plateau".into(),
            rows.iter()
                .map(|r| r.plateau_tok_s.unwrap_or(f64::NAN))
                .collect(),
        )],
    }
}

/// $ per million output tokens (y) against tokens/s one user sees (x), one line per system
/// and layout with a price: the buyer's trade of speed against cost along the sweep.
pub fn compare_cost_curves(c: &Comparison) -> CurveChart {
    let series = c
        .rows
        .iter()
        .filter(|r| r.error.is_none())
        .filter_map(|r| {
            let mut points: Vec<(f64, f64)> = r
                .curve
                .iter()
                .filter_map(|p| {
                    let y = p.usd_per_million_output_tokens?;
                    (p.tok_s_per_user.is_finite() && y.is_finite()).then_some((p.tok_s_per_user, y))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!points.is_empty()).then(|| Series {
                name: format!("{} {}", r.system, r.parallel),
                points,
                band: None,
            })
        })
        .collect();
    let markers = c
        .targets
        .tpot_ms
        .map(|t| vec![(1e3 / t, format!("TPOT {t} ms"))])
        .unwrap_or_default();
    CurveChart {
        title: format!(
            "{}: cost against speed per user ({} in / {} out)",
            c.model, c.input_len, c.output_len
        ),
        x_label: "Output tokens/s per user".into(),
        y_label: "USD per million output tokens".into(),
        series,
        measured: vec![],
        markers,
        log_x: false,
        log_y: true,
    }
}

/// Speedup over draft length (x) and acceptance (y) at one concurrency, one run per
/// acceptance value.
pub fn specdec_heatmap(runs: &[(f64, SpecDec)], concurrency: u32) -> Heatmap {
    let first = runs.first().map(|r| &r.1);
    let ks: Vec<u32> = first
        .map(|r| {
            r.points
                .iter()
                .filter(|p| p.concurrency == concurrency)
                .map(|p| p.k)
                .collect()
        })
        .unwrap_or_default();
    Heatmap {
        title: first
            .map(|r| {
                format!(
                    "Speculative decoding speedup: {} on {} ({}), draft {}, C={}",
                    r.model, r.system, r.parallel, r.draft, concurrency
                )
            })
            .unwrap_or_default(),
        x_label: "Draft length k (tokens)".into(),
        y_label: "Acceptance per position".into(),
        xs: ks.iter().map(|k| k.to_string()).collect(),
        ys: runs.iter().map(|(a, _)| format!("{a:.2}")).collect(),
        values: runs
            .iter()
            .map(|(_, r)| {
                ks.iter()
                    .map(|k| {
                        r.points
                            .iter()
                            .find(|p| p.k == *k && p.concurrency == concurrency)
                            .map(|p| p.speedup)
                            .unwrap_or(f64::NAN)
                    })
                    .collect()
            })
            .collect(),
    }
}
