//! Charts of rooftop's result records: the roofline of one design point, metric-vs-
//! concurrency curves, stacked time breakdowns, grouped bars and speedup heat maps.
//!
//! Plots are a consumer of the same records the JSON export writes: every chart function
//! takes plain data (a [`Prediction`], or one of the small chart records defined here that
//! the sweep, specdec and compare commands fill) and an output path, and never recomputes a
//! scenario. The file extension picks the backend (`.svg` or `.png`), and each chart has a
//! `render_svg_string` twin that renders in memory for tests.
//!
//! Text is drawn with DejaVu Sans embedded in the binary (`assets/fonts`, licence beside
//! it) and registered with plotters before the first chart, so rendering needs no system
//! font library and the same input gives byte-identical files on every machine.

mod axis;
pub mod breakdown;
mod canvas;
mod categories;
pub mod curves;
mod font;
pub mod grouped_bars;
pub mod heatmap;
mod layout;
mod legend;
mod marker;
mod numbers;
mod palette;
pub mod records;
pub mod roofline;
mod text;

pub use breakdown::{breakdown, StackedBars};
pub use curves::{curves, CurveChart, Measured, Series};
pub use grouped_bars::{grouped_bars, GroupedBars};
pub use heatmap::{heatmap, Heatmap};
pub use roofline::roofline;

use crate::error::{Error, Result};
use crate::predict::Prediction;
use crate::spec::GpuSpec;
use canvas::Drawn;
use font::ensure_fonts;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Image formats a chart can be written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    /// The format named by `path`'s extension (case-insensitive).
    pub fn from_path(path: &Path) -> Result<ImageFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("svg") => Ok(ImageFormat::Svg),
            Some("png") => Ok(ImageFormat::Png),
            _ => Err(Error::Plot(format!(
                "{}: cannot tell the image format from the file name; use a .svg or .png extension",
                path.display()
            ))),
        }
    }
}

/// A chart that can draw itself on any plotters backend.
pub(crate) trait Chart {
    /// Image size, pixels.
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Drawn<DB>;
}

/// Render `chart` to an SVG document in memory.
pub(crate) fn render_svg<C: Chart>(chart: &C) -> Result<String> {
    ensure_fonts()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, chart.size()).into_drawing_area();
        chart
            .draw(&root)
            .map_err(|e| Error::Plot(format!("rendering SVG: {e}")))?;
        root.present()
            .map_err(|e| Error::Plot(format!("rendering SVG: {e}")))?;
    }
    Ok(out)
}

/// Write `chart` to `path`, as SVG or PNG by the extension.
pub(crate) fn write_chart<C: Chart>(chart: &C, path: &Path) -> Result<()> {
    match ImageFormat::from_path(path)? {
        ImageFormat::Svg => {
            let svg = render_svg(chart)?;
            std::fs::write(path, svg).map_err(|error| Error::Io {
                path: path.to_path_buf(),
                error,
            })
        }
        ImageFormat::Png => {
            ensure_fonts()?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return Err(Error::Plot(format!(
                        "{}: cannot write the chart: directory {} does not exist",
                        path.display(),
                        dir.display()
                    )));
                }
            }
            // Open the file first: an OS error (a folder, no permission) is then reported as
            // one, not as the backend's debug dump.
            std::fs::File::create(path).map_err(|error| Error::Io {
                path: path.to_path_buf(),
                error,
            })?;
            // plotters places ab_glyph glyphs on whole pixels without their side bearings,
            // which spaces letters unevenly; PNG text is rasterised by `font` instead.
            let _raster = font::RasterText::on();
            let root = BitMapBackend::new(path, chart.size()).into_drawing_area();
            chart
                .draw(&root)
                .map_err(|e| Error::Plot(format!("{}: rendering PNG: {e}", path.display())))?;
            root.present()
                .map_err(|e| Error::Plot(format!("{}: writing PNG: {e}", path.display())))
        }
    }
}

/// A file-name-safe form of `s`: letters, digits, `.`, `_` and `-` kept, the rest `-`.
fn slug(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_string()
}

/// Write the roofline and the per-layer time breakdown of one design point into `dir`
/// (created if missing), each as PNG and SVG. File names carry model, system, layout,
/// batch and context. Returns the paths written.
pub fn write_prediction_plots(p: &Prediction, gpu: &GpuSpec, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let stem = slug(&format!(
        "{}_{}_{}_b{}_c{}",
        p.model, p.system, p.parallel, p.batch, p.context
    ));
    let layers = StackedBars::per_layer(p);
    let mut written = Vec::new();
    for ext in ["png", "svg"] {
        let path = dir.join(format!("{stem}_roofline.{ext}"));
        roofline(p, gpu, &path)?;
        written.push(path);
        let path = dir.join(format!("{stem}_layers.{ext}"));
        breakdown(&layers, &path)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_comes_from_the_extension() {
        assert_eq!(
            ImageFormat::from_path(Path::new("a/b.SVG")).unwrap(),
            ImageFormat::Svg
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("x.png")).unwrap(),
            ImageFormat::Png
        );
        let e = ImageFormat::from_path(Path::new("out/chart.jpg"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("out/chart.jpg") && e.contains(".svg") && e.contains(".png"),
            "{e}"
        );
        assert!(ImageFormat::from_path(Path::new("noext")).is_err());
    }

    #[test]
    fn slugs_are_file_name_safe() {
        assert_eq!(
            slug("kimi-k2.5-int4_8x rtx/pro_TP8 EP1_b1"),
            "kimi-k2.5-int4_8x-rtx-pro_TP8-EP1_b1"
        );
    }

    /// One small chart of every kind that is not a roofline (that one needs a prediction:
    /// see tests/plots.rs).
    fn small_charts() -> (CurveChart, StackedBars, GroupedBars, Heatmap) {
        (
            CurveChart {
                title: "curve title".into(),
                x_label: "Concurrency".into(),
                y_label: "TPOT (ms)".into(),
                series: vec![Series {
                    name: "default".into(),
                    points: vec![(1.0, 10.0), (2.0, 11.0), (4.0, 13.0)],
                    band: Some(vec![(1.0, 9.0, 11.0), (4.0, 12.0, 14.0)]),
                }],
                measured: vec![Measured {
                    name: "measured".into(),
                    points: vec![(2.0, 11.5)],
                }],
                markers: vec![(4.0, "KV limit".into())],
                log_x: true,
                log_y: false,
            },
            StackedBars {
                title: "stacked title".into(),
                y_label: "ms".into(),
                bars: vec![(
                    "C=1".into(),
                    vec![("gemm".into(), 1.0), ("moe".into(), 2.0)],
                )],
            },
            GroupedBars {
                title: "grouped title".into(),
                y_label: "ms".into(),
                groups: vec!["g1".into()],
                series: vec![("s1".into(), vec![1.0]), ("s2".into(), vec![2.0])],
            },
            Heatmap {
                title: "heat title".into(),
                x_label: "k".into(),
                y_label: "p".into(),
                xs: vec!["1".into(), "2".into()],
                ys: vec!["0.5".into()],
                values: vec![vec![0.9, 1.4]],
            },
        )
    }

    #[test]
    fn every_chart_kind_renders_svg_and_png_deterministically() {
        let (c, s, g, h) = small_charts();
        let svgs = [
            (curves::render_svg_string(&c).unwrap(), "curve title"),
            (breakdown::render_svg_string(&s).unwrap(), "stacked title"),
            (
                grouped_bars::render_svg_string(&g).unwrap(),
                "grouped title",
            ),
            (heatmap::render_svg_string(&h).unwrap(), "heat title"),
        ];
        for (svg, title) in &svgs {
            assert!(svg.starts_with("<svg") && svg.contains(title), "{title}");
        }
        assert_eq!(svgs[0].0, curves::render_svg_string(&c).unwrap());

        let dir = tempfile::tempdir().unwrap();
        let write = |i: usize, path: &Path| match i {
            0 => curves(&c, path),
            1 => breakdown(&s, path),
            2 => grouped_bars(&g, path),
            _ => heatmap(&h, path),
        };
        for (i, (in_memory, _)) in svgs.iter().enumerate() {
            let (a, b) = (
                dir.path().join(format!("{i}a.png")),
                dir.path().join(format!("{i}b.png")),
            );
            write(i, &a).unwrap();
            write(i, &b).unwrap();
            let bytes = std::fs::read(&a).unwrap();
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "chart {i}");
            assert_eq!(bytes, std::fs::read(&b).unwrap(), "chart {i}");
            // The SVG written to a file is the in-memory one.
            let svg = dir.path().join(format!("{i}.svg"));
            write(i, &svg).unwrap();
            assert_eq!(&std::fs::read_to_string(&svg).unwrap(), in_memory);
        }
    }

    #[test]
    fn fonts_register_once_and_measure_text() {
        ensure_fonts().unwrap();
        ensure_fonts().unwrap();
        let (w, h) = font::text_size("Roofline", 20.0);
        assert!(w > 40 && h > 10, "{w}x{h}");
    }
}
