//! Render one of every chart kind into a directory, to look at them:
//!
//! ```text
//! cargo run --example plot_gallery -- /tmp/plotcheck
//! ```
//!
//! The rooflines and layer breakdowns come from the model (Kimi K2.5 on the team's
//! 8× RTX PRO 6000 box); the curves, bars and heat map use made-up but plausible numbers.

use rooftop::cost::Parallel;
use rooftop::plot::{self, CurveChart, GroupedBars, Heatmap, Measured, Series, StackedBars};
use rooftop::predict::{predict, Scenario};
use rooftop::spec::registry::load_model;
use rooftop::spec::System;
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "/tmp/plotcheck".into()),
    );
    std::fs::create_dir_all(&dir)?;
    let model = load_model("kimi-k2.5-int4")?;
    let system = System::load("8x-rtx-pro-6000-pcie")?;
    let s = Scenario::new(&model, &system, Parallel::tp(8))?;
    let mut written = Vec::new();
    for batch in [1, 128] {
        let p = predict(&s, batch, 1024)?;
        written.extend(plot::write_prediction_plots(&p, &system.gpu, &dir)?);
    }

    // TPOT vs concurrency: SOL, default with a band, calibrated, measured.
    let conc: Vec<f64> = (0..10).map(|i| 2f64.powi(i)).collect();
    let tpot = |c: f64, base: f64, slope: f64| base + slope * c.powf(0.85);
    let series = vec![
        Series {
            name: "SOL".into(),
            points: conc.iter().map(|c| (*c, tpot(*c, 6.1, 0.05))).collect(),
            band: None,
        },
        Series {
            name: "default".into(),
            points: conc.iter().map(|c| (*c, tpot(*c, 12.4, 0.11))).collect(),
            band: Some(
                conc.iter()
                    .map(|c| {
                        let v = tpot(*c, 12.4, 0.11);
                        (*c, v * 0.88, v * 1.12)
                    })
                    .collect(),
            ),
        },
        Series {
            name: "calibrated".into(),
            points: conc.iter().map(|c| (*c, tpot(*c, 14.0, 0.13))).collect(),
            band: None,
        },
    ];
    let measured = vec![Measured {
        name: "measured (vLLM, 2025-06)".into(),
        points: [1.0, 4.0, 16.0, 64.0, 128.0, 256.0]
            .iter()
            .map(|c| (*c, tpot(*c, 14.6, 0.128) * (1.0 + 0.03 * c.log2().sin())))
            .collect(),
    }];
    let curves = CurveChart {
        title: "TPOT vs concurrency: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8".into(),
        x_label: "Concurrency (sequences)".into(),
        y_label: "TPOT (ms)".into(),
        series,
        measured,
        markers: vec![
            (128.0, "plateau C=128".into()),
            (400.0, "KV limit C=400".into()),
        ],
        log_x: true,
        log_y: false,
    };
    let path = dir.join("curves_tpot.png");
    plot::curves(&curves, &path)?;
    written.push(path);

    // Throughput: rises then flattens, so the legend belongs top left.
    let thr = CurveChart {
        title: "Output throughput vs concurrency: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8"
            .into(),
        x_label: "Concurrency (sequences)".into(),
        y_label: "Throughput (tokens/s)".into(),
        series: curves
            .series
            .iter()
            .map(|s| Series {
                name: s.name.clone(),
                points: s.points.iter().map(|(c, t)| (*c, c * 1000.0 / t)).collect(),
                band: s.band.as_ref().map(|b| {
                    b.iter()
                        .map(|(c, lo, hi)| (*c, c * 1000.0 / hi, c * 1000.0 / lo))
                        .collect()
                }),
            })
            .collect(),
        measured: curves
            .measured
            .iter()
            .map(|m| Measured {
                name: m.name.clone(),
                points: m.points.iter().map(|(c, t)| (*c, c * 1000.0 / t)).collect(),
            })
            .collect(),
        markers: vec![(128.0, "plateau C=128".into())],
        log_x: true,
        log_y: true,
    };
    let path = dir.join("curves_throughput.png");
    plot::curves(&thr, &path)?;
    written.push(path);

    // Breakdown per concurrency.
    let mut bars = Vec::new();
    for c in [1u32, 8, 32, 64, 128, 256] {
        let p = predict(&s, c, 1024)?;
        bars.push((
            format!("C={c}"),
            p.breakdown_ms
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        ));
    }
    let stacked = StackedBars {
        title: "TPOT breakdown by concurrency: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8, context 1024"
            .into(),
        y_label: "Time per decode step (ms)".into(),
        bars,
    };
    let path = dir.join("breakdown_concurrency.png");
    plot::breakdown(&stacked, &path)?;
    written.push(path);

    let grouped = GroupedBars {
        title: "TPOT per system: kimi-k2.5-int4, TP8, context 1024".into(),
        y_label: "TPOT (ms)".into(),
        groups: ["batch 1", "batch 8", "batch 32", "batch 128"]
            .map(String::from)
            .to_vec(),
        series: vec![
            (
                "8x RTX PRO 6000 (PCIe)".into(),
                vec![12.4, 15.1, 24.9, 80.5],
            ),
            ("8x H200 (NVLink)".into(), vec![6.2, 7.0, 9.8, 21.3]),
            ("8x B200 (NVLink)".into(), vec![4.9, 5.4, 7.1, 14.6]),
        ],
    };
    let path = dir.join("grouped_tpot.png");
    plot::grouped_bars(&grouped, &path)?;
    written.push(path);

    let ks = [1, 2, 3, 4, 5, 6, 8];
    let accs = [0.5, 0.6, 0.7, 0.8, 0.9];
    let values = accs
        .iter()
        .map(|a: &f64| {
            ks.iter()
                .map(|k| {
                    let expected = (1.0 - a.powi(*k + 1)) / (1.0 - a);
                    expected / (1.0 + 0.11 * *k as f64)
                })
                .collect()
        })
        .collect();
    let heat = Heatmap {
        title: "Speculative decoding speedup: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8, batch 1"
            .into(),
        x_label: "Draft length (tokens)".into(),
        y_label: "Acceptance rate".into(),
        xs: ks.iter().map(|k| k.to_string()).collect(),
        ys: accs.iter().map(|a| format!("{a:.1}")).collect(),
        values,
    };
    let path = dir.join("heatmap_specdec.png");
    plot::heatmap(&heat, &path)?;
    written.push(path);

    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}
