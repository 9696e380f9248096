//! Every chart kind renders to SVG in memory and to PNG on disk, carries its title and
//! labels, and renders byte-identically twice; bad output paths and empty inputs give
//! clear errors or a note, never a panic.

use rooftop::cost::Parallel;
use rooftop::plot::{
    self, breakdown, curves, grouped_bars, heatmap, roofline, CurveChart, GroupedBars, Heatmap,
    Measured, Series, StackedBars,
};
use rooftop::predict::{predict, Prediction, Scenario};
use rooftop::spec::registry::load_model;
use rooftop::spec::{GpuSpec, System};
use std::path::Path;

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

fn kimi(batch: u32) -> (Prediction, GpuSpec) {
    let model = load_model("kimi-k2.5-int4").unwrap();
    let system = System::load("8x-rtx-pro-6000-pcie").unwrap();
    let s = Scenario::new(&model, &system, Parallel::tp(8)).unwrap();
    (predict(&s, batch, 1024).unwrap(), system.gpu.clone())
}

fn curve_chart() -> CurveChart {
    let conc: Vec<f64> = (0..9).map(|i| 2f64.powi(i)).collect();
    CurveChart {
        title: "TPOT vs concurrency: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8".into(),
        x_label: "Concurrency (sequences)".into(),
        y_label: "TPOT (ms)".into(),
        series: vec![
            Series {
                name: "SOL".into(),
                points: conc.iter().map(|c| (*c, 6.0 + 0.05 * c)).collect(),
                band: None,
            },
            Series {
                name: "calibrated".into(),
                points: conc.iter().map(|c| (*c, 13.0 + 0.1 * c)).collect(),
                band: Some(
                    conc.iter()
                        .map(|c| (*c, 12.0 + 0.09 * c, 14.0 + 0.11 * c))
                        .collect(),
                ),
            },
        ],
        measured: vec![Measured {
            name: "measured vLLM".into(),
            points: vec![(1.0, 13.5), (16.0, 15.2), (128.0, 27.0)],
        }],
        markers: vec![(128.0, "plateau C=128".into()), (200.0, "KV limit".into())],
        log_x: true,
        log_y: false,
    }
}

fn stacked() -> StackedBars {
    StackedBars {
        title: "Breakdown by concurrency: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie, TP8".into(),
        y_label: "Time per decode step (ms)".into(),
        bars: [1u32, 8, 64]
            .iter()
            .map(|c| {
                (
                    format!("C={c}"),
                    vec![
                        ("gemm".to_string(), 2.5),
                        ("moe".to_string(), 1.0 + *c as f64 * 0.3),
                        ("allreduce".to_string(), 2.7),
                        ("overhead".to_string(), 5.4),
                    ],
                )
            })
            .collect(),
    }
}

fn grouped() -> GroupedBars {
    GroupedBars {
        title: "TPOT per system: kimi-k2.5-int4, TP8".into(),
        y_label: "TPOT (ms)".into(),
        groups: vec!["batch 1".into(), "batch 64".into()],
        series: vec![
            ("rtx-pro-6000".into(), vec![12.4, 61.2]),
            ("h200".into(), vec![6.2, 17.9]),
        ],
    }
}

fn heat() -> Heatmap {
    Heatmap {
        title: "Speculative decoding speedup: kimi-k2.5-int4, TP8".into(),
        x_label: "Draft length (tokens)".into(),
        y_label: "Acceptance rate".into(),
        xs: vec!["1".into(), "2".into(), "4".into()],
        ys: vec!["0.6".into(), "0.8".into()],
        values: vec![vec![1.21, 1.25, 0.93], vec![1.48, 1.87, 2.11]],
    }
}

/// Render to PNG twice in a temp dir: the file has the PNG signature and the same bytes.
fn png_twice(write: impl Fn(&Path) -> rooftop::Result<()>) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.png");
    let b = dir.path().join("b.png");
    write(&a).unwrap();
    write(&b).unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert!(bytes.len() > 1000, "PNG of {} bytes", bytes.len());
    assert_eq!(bytes[..8], PNG_SIGNATURE);
    assert!(
        bytes == std::fs::read(&b).unwrap(),
        "PNG differs between runs"
    );
}

fn assert_contains_all(svg: &str, needles: &[&str]) {
    assert!(svg.starts_with("<svg"), "not an SVG document");
    for n in needles {
        assert!(svg.contains(n), "SVG lacks {n:?}");
    }
}

#[test]
fn roofline_names_roofs_ridges_and_largest_ops() {
    for batch in [1, 128] {
        let (p, gpu) = kimi(batch);
        let svg = roofline::render_svg_string(&p, &gpu).unwrap();
        assert_contains_all(
            &svg,
            &[
                "Roofline: kimi-k2.5-int4 on 8x-rtx-pro-6000-pcie",
                &format!("batch {batch}"),
                "Arithmetic intensity (FLOP/byte)",
                "Attainable performance (FLOP/s)",
                "bf16 dense peak 503.8 TFLOP/s",
                "fp4 dense peak",
                "fp8 / int8 dense peak",
                "ridge 281 FLOP/B",
                "DRAM 1.79 TB/s",
                "routed_experts",
                "gemm",
                "moe",
                // Collectives have no FLOPs: listed in the note, not plotted.
                "Not on the roofline",
                "allreduce_moe",
            ],
        );
        assert_eq!(svg, roofline::render_svg_string(&p, &gpu).unwrap());
        png_twice(|path| roofline(&p, &gpu, path));
    }
}

#[test]
fn curves_show_series_bands_measured_points_and_markers() {
    let c = curve_chart();
    let svg = curves::render_svg_string(&c).unwrap();
    assert_contains_all(
        &svg,
        &[
            "TPOT vs concurrency",
            "Concurrency (sequences)",
            "TPOT (ms)",
            "SOL",
            "calibrated",
            "measured vLLM",
            "plateau C=128",
            "KV limit",
            // log-2 ticks
            ">\n128\n<",
            "<polygon",
        ],
    );
    assert_eq!(svg, curves::render_svg_string(&c).unwrap());
    png_twice(|path| curves(&c, path));
}

#[test]
fn breakdown_labels_bars_and_categories() {
    let b = stacked();
    let svg = breakdown::render_svg_string(&b).unwrap();
    assert_contains_all(
        &svg,
        &[
            "Breakdown by concurrency",
            "Time per decode step (ms)",
            "C=1",
            "C=64",
            "gemm",
            "moe",
            "allreduce",
            "overhead",
        ],
    );
    assert!(
        !svg.contains(">\nattention\n<"),
        "absent category in legend"
    );
    assert_eq!(svg, breakdown::render_svg_string(&b).unwrap());
    png_twice(|path| breakdown(&b, path));
}

#[test]
fn per_layer_breakdown_of_a_prediction_adds_up_to_tpot() {
    let (p, _) = kimi(1);
    let b = StackedBars::per_layer(&p);
    assert_eq!(b.bars.len(), p.layers.len() + 1);
    assert_eq!(b.bars.last().unwrap().0, "non-layer");
    let total: f64 = b
        .bars
        .iter()
        .flat_map(|(_, c)| c.iter().map(|(_, v)| v))
        .sum();
    assert!(
        (total - p.tpot_ms).abs() < 1e-9 * p.tpot_ms,
        "{total} vs {}",
        p.tpot_ms
    );
    let svg = breakdown::render_svg_string(&b).unwrap();
    assert_contains_all(&svg, &["Time per layer", "L0", "non-layer"]);
}

#[test]
fn grouped_bars_label_groups_series_and_values() {
    let g = grouped();
    let svg = grouped_bars::render_svg_string(&g).unwrap();
    assert_contains_all(
        &svg,
        &[
            "TPOT per system",
            "TPOT (ms)",
            "batch 1",
            "batch 64",
            "rtx-pro-6000",
            "h200",
            "61.2",
        ],
    );
    assert_eq!(svg, grouped_bars::render_svg_string(&g).unwrap());
    png_twice(|path| grouped_bars(&g, path));
}

#[test]
fn heatmap_prints_every_value() {
    let h = heat();
    let svg = heatmap::render_svg_string(&h).unwrap();
    assert_contains_all(
        &svg,
        &[
            "Speculative decoding speedup",
            "Draft length (tokens)",
            "Acceptance rate",
            "1.21",
            "0.93",
            "2.11",
            "0.8",
        ],
    );
    assert_eq!(svg, heatmap::render_svg_string(&h).unwrap());
    png_twice(|path| heatmap(&h, path));
}

#[test]
fn prediction_plots_are_written_as_png_and_svg() {
    let (p, gpu) = kimi(8);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plots");
    let files = plot::write_prediction_plots(&p, &gpu, &out).unwrap();
    assert_eq!(files.len(), 4);
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(!bytes.is_empty(), "{}", f.display());
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("kimi-k2.5-int4_8x-rtx-pro-6000-pcie_"),
            "{name}"
        );
        match f.extension().unwrap().to_str().unwrap() {
            "png" => assert_eq!(bytes[..8], PNG_SIGNATURE),
            "svg" => assert!(bytes.starts_with(b"<svg")),
            other => panic!("unexpected extension {other}"),
        }
    }
    assert!(files
        .iter()
        .any(|f| f.to_str().unwrap().ends_with("_roofline.svg")));
    assert!(files
        .iter()
        .any(|f| f.to_str().unwrap().ends_with("_layers.png")));
}

#[test]
fn unknown_extension_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chart.jpeg");
    let err = grouped_bars(&grouped(), &path).unwrap_err().to_string();
    assert!(err.contains("chart.jpeg"), "{err}");
    assert!(err.contains(".svg") && err.contains(".png"), "{err}");
    assert!(!path.exists());
}

#[test]
fn missing_output_directory_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["nope/chart.png", "nope/chart.svg"] {
        let path = dir.path().join(name);
        let err = heatmap(&heat(), &path).unwrap_err().to_string();
        assert!(err.contains("chart."), "{err}");
    }
}

#[test]
fn empty_inputs_render_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let svgs = [
        curves::render_svg_string(&CurveChart::default()).unwrap(),
        breakdown::render_svg_string(&StackedBars::default()).unwrap(),
        grouped_bars::render_svg_string(&GroupedBars::default()).unwrap(),
        heatmap::render_svg_string(&Heatmap::default()).unwrap(),
    ];
    for svg in &svgs {
        assert!(svg.contains("No data to plot"));
    }
    curves(&CurveChart::default(), &dir.path().join("c.png")).unwrap();
    breakdown(&StackedBars::default(), &dir.path().join("b.png")).unwrap();
    grouped_bars(&GroupedBars::default(), &dir.path().join("g.png")).unwrap();
    heatmap(&Heatmap::default(), &dir.path().join("h.png")).unwrap();

    let (mut p, gpu) = kimi(1);
    p.ops.clear();
    p.layers.clear();
    let svg = roofline::render_svg_string(&p, &gpu).unwrap();
    assert!(svg.contains("no operators"), "note for an empty op list");
    assert!(svg.contains("bf16 dense peak"), "roofs still drawn");
    roofline(&p, &gpu, &dir.path().join("r.png")).unwrap();
}

#[test]
fn odd_values_are_left_out_with_a_note() {
    let mut c = curve_chart();
    c.log_y = true;
    c.series[0].points.push((0.0, 5.0));
    c.series[0].points.push((4.0, -1.0));
    c.series[1].points.push((8.0, f64::NAN));
    let svg = curves::render_svg_string(&c).unwrap();
    assert!(svg.contains("3 points not shown"), "note on skipped points");

    let mut g = grouped();
    g.series[1].1 = vec![f64::INFINITY];
    let svg = grouped_bars::render_svg_string(&g).unwrap();
    assert!(svg.contains("2 missing or non-finite values"));

    let mut h = heat();
    h.values[1].pop();
    let svg = heatmap::render_svg_string(&h).unwrap();
    assert!(svg.contains("1 cell without a value"));
}

/// `plot breakdown --by system` draws each system's whole box at tensor parallelism with its
/// defaults: a layout flag or a calibration it would drop is a usage error (exit 2).
#[test]
fn breakdown_by_system_refuses_what_it_would_drop() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.svg");
    for flag in [["--tp", "4"], ["--pp", "2"]] {
        let args = [
            "plot",
            "breakdown",
            "--by",
            "system",
            "--systems",
            "8x-h100-nvlink,8x-b200-nvlink",
            "--model",
            "llama-3.1-8b",
            flag[0],
            flag[1],
            "--out",
            out.to_str().unwrap(),
        ];
        let o = assert_cmd::Command::cargo_bin("rooftop")
            .unwrap()
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(flag[0]));
        assert!(!out.exists(), "no chart is drawn");
    }
}
