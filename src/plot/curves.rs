//! Line charts of a metric against concurrency (or any x): named series, each with an
//! optional uncertainty band, measured points on top, and labelled vertical markers such as
//! a throughput plateau or the KV-cache limit.
//!
//! The sweep, speculative-decoding and compare commands fill a [`CurveChart`]; this module
//! only draws it. The x axis is log-2 when `log_x` is set (concurrency doubles), the y axis
//! log-10 when `log_y` is set and linear from zero otherwise.

use super::{axis::*, canvas::*, font::*, layout::*, legend::*, marker::*, palette::*, text::*};
use super::{render_svg, write_chart, Chart};
use crate::error::Result;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Image size of a curve chart, pixels.
pub const SIZE: (u32, u32) = (1200, 800);

/// One predicted curve.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Series {
    /// Legend label, e.g. `SOL`, `default`, `calibrated`.
    pub name: String,
    /// (x, y) points; drawn in order of x.
    pub points: Vec<(f64, f64)>,
    /// Optional (x, lower, upper) band, drawn as a translucent area behind the line.
    pub band: Option<Vec<(f64, f64, f64)>>,
}

/// Measured points, drawn as markers without a line.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Measured {
    /// Legend label, e.g. `measured (vLLM 0.11)`.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// A metric-vs-x line chart.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CurveChart {
    /// Chart title; name model, system and parallelism in it.
    pub title: String,
    /// x axis title with its unit, e.g. `Concurrency (sequences)`.
    pub x_label: String,
    /// y axis title with its unit, e.g. `TPOT (ms)`.
    pub y_label: String,
    pub series: Vec<Series>,
    pub measured: Vec<Measured>,
    /// Vertical marker lines: x and label (e.g. `plateau C=128`, `KV limit`).
    pub markers: Vec<(f64, String)>,
    /// Log-2 x axis.
    pub log_x: bool,
    /// Log-10 y axis.
    pub log_y: bool,
}

/// Write `chart` to `path` (`.svg` or `.png`).
pub fn curves(chart: &CurveChart, path: &Path) -> Result<()> {
    write_chart(chart, path)
}

/// `chart` as an SVG document.
pub fn render_svg_string(chart: &CurveChart) -> Result<String> {
    render_svg(chart)
}

/// The chart's data in axis units, with what could not be shown counted.
struct Prepared {
    /// Per series: line points and band polygon points (axis units), sorted by x.
    lines: Vec<Vec<(f64, f64)>>,
    bands: Vec<Vec<(f64, f64, f64)>>,
    measured: Vec<Vec<(f64, f64)>>,
    markers: Vec<(f64, String)>,
    skipped: usize,
}

fn prepare(c: &CurveChart, xa: &Axis, ya: &Axis) -> Prepared {
    let mut skipped = 0;
    let mut pt = |x: f64, y: f64| match (xa.t(x), ya.t(y)) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => {
            skipped += 1;
            None
        }
    };
    let sort = |mut v: Vec<(f64, f64)>| {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let mut lines = Vec::new();
    for s in &c.series {
        lines.push(sort(
            s.points.iter().filter_map(|(x, y)| pt(*x, *y)).collect(),
        ));
    }
    let mut measured = Vec::new();
    for m in &c.measured {
        measured.push(m.points.iter().filter_map(|(x, y)| pt(*x, *y)).collect());
    }
    let mut bands = Vec::new();
    for s in &c.series {
        let mut b: Vec<(f64, f64, f64)> = Vec::new();
        for (x, lo, hi) in s.band.iter().flatten() {
            match (xa.t(*x), ya.t(*lo), ya.t(*hi)) {
                (Some(x), Some(lo), Some(hi)) => b.push((x, lo.min(hi), lo.max(hi))),
                _ => skipped += 1,
            }
        }
        b.sort_by(|a, b| a.0.total_cmp(&b.0));
        bands.push(b);
    }
    let markers = c
        .markers
        .iter()
        .filter_map(|(x, l)| xa.t(*x).map(|t| (t, l.clone())))
        .collect();
    Prepared {
        lines,
        bands,
        measured,
        markers,
        skipped,
    }
}

/// Marker labels along the top of the plot: right of their line where there is room, left
/// otherwise, in as many rows as it takes for none to overlap. Returns (rect, line x) per
/// marker and the number of rows.
fn layout_markers(plot: &Plot, markers: &[(f64, String)]) -> (Vec<PxRect>, usize) {
    let lh = line_height(LABEL_SIZE) + 6;
    let mut order: Vec<usize> = (0..markers.len()).collect();
    order.sort_by(|a, b| markers[*a].0.total_cmp(&markers[*b].0));
    let mut rects = vec![PxRect::new(0, 0, 0, 0); markers.len()];
    let mut rows = 0;
    let mut placed: Vec<PxRect> = Vec::new();
    for i in order {
        let (t, label) = &markers[i];
        let x = plot.px(*t).round() as i32;
        let w = text_width(label, LABEL_SIZE) + 8;
        let mut row = 0;
        loop {
            let y0 = plot.r.y0 + 6 + row as i32 * (lh + 4);
            let right = PxRect::new(x + 4, y0, x + 4 + w, y0 + lh);
            let left = PxRect::new(x - 4 - w, y0, x - 4, y0 + lh);
            let free = |r: &PxRect| {
                r.x0 >= plot.r.x0 + 2
                    && r.x1 <= plot.r.x1 - 2
                    && placed.iter().all(|p| !p.grow(3).overlaps(r))
            };
            let pick = [right, left].into_iter().find(free);
            if let Some(r) = pick.or(if row >= 8 { Some(right) } else { None }) {
                placed.push(r);
                rects[i] = r;
                rows = rows.max(row + 1);
                break;
            }
            row += 1;
        }
    }
    (rects, rows)
}

impl Chart for CurveChart {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    /// Title and notes, then the layout (which needs the data in axis units and the
    /// legend's size), then the layers bottom to top: frame, bands, marker lines, series,
    /// measured points, marker labels, legend.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        root.fill(&WHITE_BG)?;
        let top = draw_title(root, &self.title, None)?;
        let (x_scale, y_scale) = self.scales();
        let (xs, ys) = self.extent(x_scale, y_scale);
        let xa = Axis::fit(x_scale, &xs, false);
        let ya0 = Axis::fit(y_scale, &ys, !self.log_y);
        let data = prepare(self, &xa, &ya0);
        let notes = self.notes(data.skipped);
        let (w, _) = root.dim_in_pixel();
        let bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        let frame = Frame {
            chart: self,
            data: &data,
            top,
            bottom,
            xa,
            ya0,
        };
        if ys.is_empty() {
            let m = frame.margins(&ya0, 0);
            return draw_empty(root, plot_rect(SIZE, &m), "No data to plot");
        }
        let entries = self.legend_entries(&data);
        let Layout {
            plot,
            x_ticks_h,
            marker_labels,
            legend_at,
        } = frame.layout(&entries);
        let r = plot.r;
        let x_ticks = fit_ticks(&plot.xa, r.width(), true);
        let y_ticks = fit_ticks(&plot.ya, r.height(), false);
        let x_title_y = r.y1 + x_ticks_h + 6;
        let (x_label, y_label) = (&self.x_label, &self.y_label);
        draw_axes(
            root, &plot, &x_ticks, &y_ticks, true, x_label, y_label, x_title_y,
        )?;

        draw_bands(root, &plot, &data.bands)?;
        draw_marker_lines(root, &plot, &data.markers)?;
        draw_lines(root, &plot, &data.lines)?;
        draw_measured(root, &plot, &data.measured)?;
        draw_marker_labels(root, &data.markers, &marker_labels)?;
        if let Some(at) = legend_at {
            draw_legend(root, &entries, at, true)?;
        }
        Ok(())
    }
}

impl CurveChart {
    /// The axis scales the chart asks for.
    fn scales(&self) -> (Scale, Scale) {
        let x = if self.log_x {
            Scale::Log2
        } else {
            Scale::Linear
        };
        let y = if self.log_y {
            Scale::Log10
        } else {
            Scale::Linear
        };
        (x, y)
    }

    /// The values the axes must span: each point and band edge that both scales can show,
    /// and the x of each marker. The y values are empty when there is no data to draw.
    fn extent(&self, x_scale: Scale, y_scale: Scale) -> (Vec<f64>, Vec<f64>) {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        let mut keep = |x: f64, y: &[f64]| {
            if Axis::accepts(x_scale, x) && y.iter().all(|v| Axis::accepts(y_scale, *v)) {
                xs.push(x);
                ys.extend_from_slice(y);
            }
        };
        for s in &self.series {
            for (x, y) in &s.points {
                keep(*x, &[*y]);
            }
            for (x, lo, hi) in s.band.iter().flatten() {
                keep(*x, &[*lo, *hi]);
            }
        }
        for m in &self.measured {
            for (x, y) in &m.points {
                keep(*x, &[*y]);
            }
        }
        xs.extend(
            self.markers
                .iter()
                .map(|(x, _)| *x)
                .filter(|x| Axis::accepts(x_scale, *x)),
        );
        (xs, ys)
    }

    /// The note under the chart counting the points it could not show, if any.
    fn notes(&self, skipped: usize) -> Vec<String> {
        if skipped == 0 {
            return Vec::new();
        }
        vec![format!(
            "{} point{} not shown: not finite{}.",
            skipped,
            if skipped == 1 { "" } else { "s" },
            if self.log_x || self.log_y {
                ", or not positive on a log axis"
            } else {
                ""
            }
        )]
    }

    /// One entry per series (its line, with a band swatch if it has one), then one per
    /// measured set (its marker).
    fn legend_entries(&self, data: &Prepared) -> Vec<Entry> {
        let mut entries: Vec<Entry> = Vec::new();
        for (i, s) in self.series.iter().enumerate() {
            entries.push(Entry {
                label: s.name.clone(),
                swatch: Swatch::Line {
                    color: PALETTE[i % PALETTE.len()],
                    width: 3,
                    band: !data.bands[i].is_empty(),
                    dashed: i >= PALETTE.len(),
                },
            });
        }
        for (i, m) in self.measured.iter().enumerate() {
            entries.push(Entry {
                label: m.name.clone(),
                swatch: Swatch::Marker {
                    shape: MEASURED_SHAPES[i % MEASURED_SHAPES.len()],
                    color: measured_color(i),
                },
            });
        }
        entries
    }
}

impl Prepared {
    /// The highest y drawn (axis units), band tops included.
    fn data_hi(&self) -> f64 {
        self.lines
            .iter()
            .chain(&self.measured)
            .flatten()
            .map(|p| p.1)
            .chain(self.bands.iter().flatten().map(|b| b.2))
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Pixels the drawn data covers, every few pixels along lines, band edges, band
    /// middles and marker lines: what a legend box is scored against.
    fn pixels(&self, plot: &Plot) -> Vec<(i32, i32)> {
        let mut px: Vec<(i32, i32)> = Vec::new();
        for l in &self.lines {
            let v: Vec<(i32, i32)> = l.iter().map(|p| plot.pt(*p)).collect();
            px.extend(densify(&v, 4.0));
            px.extend(v.iter().copied());
        }
        for b in &self.bands {
            for part in [
                b.iter()
                    .map(|(x, lo, _)| plot.pt((*x, *lo)))
                    .collect::<Vec<_>>(),
                b.iter().map(|(x, _, hi)| plot.pt((*x, *hi))).collect(),
                b.iter()
                    .map(|(x, lo, hi)| plot.pt((*x, (lo + hi) / 2.0)))
                    .collect(),
            ] {
                px.extend(densify(&part, 4.0));
            }
        }
        for m in &self.measured {
            px.extend(m.iter().map(|p| plot.pt(*p)));
        }
        for (t, _) in &self.markers {
            let x = plot.px(*t).round() as i32;
            px.extend(densify(&[(x, plot.r.y0), (x, plot.r.y1)], 4.0));
        }
        px
    }
}

/// What the plot area is laid out from: the chart, its data in axis units, the room the
/// title and notes take, and the axes before any headroom for marker labels.
struct Frame<'a> {
    chart: &'a CurveChart,
    data: &'a Prepared,
    top: i32,
    bottom: i32,
    xa: Axis,
    ya0: Axis,
}

/// The plot area chosen, with where its labels and legend go.
struct Layout {
    plot: Plot,
    /// Height of the x tick labels, pixels.
    x_ticks_h: i32,
    /// Marker label boxes, in the order of the markers.
    marker_labels: Vec<PxRect>,
    /// Top-left corner of the legend; none without entries.
    legend_at: Option<(i32, i32)>,
}

impl Frame<'_> {
    /// Margins for tick labels of `ya`, with `right` pixels kept free right of the plot.
    fn margins(&self, ya: &Axis, right: i32) -> Margins {
        let labels: Vec<String> = ya.ticks(12).iter().map(|t| ya.label(*t)).collect();
        Margins {
            top: self.top,
            bottom: self.bottom,
            right,
            x_ticks: line_height(TICK_SIZE) + 12,
            y_ticks: widest(&labels, TICK_SIZE),
            has_x_title: !self.chart.x_label.is_empty(),
            has_y_title: !self.chart.y_label.is_empty(),
        }
    }

    /// The plot area with `right` pixels free beside it, and the marker labels in it. The
    /// y axis gets headroom above the data for as many rows as the labels take; that can
    /// change the y tick labels and so the plot's width, so the labels are laid out again
    /// on the final plot.
    fn plot(&self, right: i32) -> (Plot, Margins, Vec<PxRect>) {
        let (xa, ya0, markers) = (self.xa, self.ya0, &self.data.markers);
        let m = self.margins(&ya0, right);
        let r = plot_rect(SIZE, &m);
        let (_, rows) = layout_markers(&Plot { r, xa, ya: ya0 }, markers);
        let ya = if rows > 0 {
            let need = rows as i32 * (line_height(LABEL_SIZE) + 10) + 12;
            ya0.with_headroom(self.data.data_hi(), need as f64 / r.height() as f64)
        } else {
            ya0
        };
        let m = self.margins(&ya, right);
        let plot = Plot {
            r: plot_rect(SIZE, &m),
            xa,
            ya,
        };
        let (labels, _) = layout_markers(&plot, markers);
        (plot, m, labels)
    }

    /// The legend goes in the inside corner covering the least data; when every corner
    /// covers some, outside on the right, and the plot narrows to make room.
    fn layout(&self, entries: &[Entry]) -> Layout {
        let (mut plot, mut m, mut marker_labels) = self.plot(0);
        let mut legend_at = None;
        if !entries.is_empty() {
            let lsize = legend_size(entries);
            let px = self.data.pixels(&plot);
            let cands = legend_corners(plot.r, lsize);
            let best = least_covered(&cands, &px, &marker_labels);
            let covered = px.iter().any(|p| best.grow(4).contains(*p))
                || marker_labels.iter().any(|l| l.overlaps(&best));
            if covered {
                (plot, m, marker_labels) = self.plot(lsize.0 + 16);
                legend_at = Some((plot.r.x1 + 16, plot.r.y0));
            } else {
                legend_at = Some((best.x0, best.y0));
            }
        }
        Layout {
            plot,
            x_ticks_h: m.x_ticks,
            marker_labels,
            legend_at,
        }
    }
}

/// Each band with two points or more, as a translucent area in its series' colour.
fn draw_bands<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    bands: &[Vec<(f64, f64, f64)>],
) -> Drawn<DB> {
    for (i, b) in bands.iter().enumerate() {
        if b.len() < 2 {
            continue;
        }
        let color = PALETTE[i % PALETTE.len()];
        let mut poly: Vec<(i32, i32)> = b.iter().map(|(x, _, hi)| plot.pt((*x, *hi))).collect();
        poly.extend(b.iter().rev().map(|(x, lo, _)| plot.pt((*x, *lo))));
        root.draw(&Polygon::new(poly, color.mix(0.18).filled()))?;
    }
    Ok(())
}

/// A dashed vertical line at each marker, across the plot.
fn draw_marker_lines<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    markers: &[(f64, String)],
) -> Drawn<DB> {
    for (t, _) in markers {
        let x = plot.px(*t).round() as i32;
        draw_dashed(root, vec![(x, plot.r.y1), (x, plot.r.y0)], MUTED, 2, 8, 5)?;
    }
    Ok(())
}

/// Each series as a line with a dot per point; past the palette's length the colours
/// repeat, so those lines are dashed.
fn draw_lines<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    lines: &[Vec<(f64, f64)>],
) -> Drawn<DB> {
    for (i, l) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let px: Vec<(i32, i32)> = l.iter().map(|p| plot.pt(*p)).collect();
        if i >= PALETTE.len() {
            draw_dashed(root, px.clone(), color, 3, 10, 5)?;
        } else {
            root.draw(&PathElement::new(px.clone(), color.stroke_width(3)))?;
        }
        for c in &px {
            root.draw(&Circle::new(*c, 4, color.filled()))?;
        }
    }
    Ok(())
}

/// Each measured set's points as white-filled markers, a shape per set.
fn draw_measured<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    measured: &[Vec<(f64, f64)>],
) -> Drawn<DB> {
    for (i, pts) in measured.iter().enumerate() {
        let shape = MEASURED_SHAPES[i % MEASURED_SHAPES.len()];
        for p in pts {
            draw_marker(
                root,
                shape,
                plot.pt(*p),
                6,
                measured_color(i).to_rgba(),
                Some(WHITE_BG),
            )?;
        }
    }
    Ok(())
}

/// Each marker's label in its box (from [`layout_markers`]).
fn draw_marker_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    markers: &[(f64, String)],
    boxes: &[PxRect],
) -> Drawn<DB> {
    for ((_, label), b) in markers.iter().zip(boxes) {
        draw_boxed_label(root, *b, label, 0.9)?;
    }
    Ok(())
}

/// Colour of the i-th measured set: near-black first, then dark shades unlike the lines.
fn measured_color(i: usize) -> RGBColor {
    const C: [RGBColor; 4] = [
        RGBColor(0x1A, 0x1A, 0x1A),
        RGBColor(0x8B, 0x1A, 0x1A),
        RGBColor(0x1A, 0x4D, 0x2E),
        RGBColor(0x3D, 0x2B, 0x6B),
    ];
    C[i % C.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> CurveChart {
        CurveChart {
            title: "TPOT vs concurrency".into(),
            x_label: "Concurrency".into(),
            y_label: "TPOT (ms)".into(),
            series: vec![Series {
                name: "default".into(),
                points: vec![(4.0, 20.0), (1.0, 10.0), (2.0, 12.0)],
                band: Some(vec![(1.0, 9.0, 11.0), (4.0, 18.0, 22.0)]),
            }],
            measured: vec![Measured {
                name: "measured".into(),
                points: vec![(2.0, 13.0), (0.0, 5.0)],
            }],
            markers: vec![(3.0, "KV limit".into())],
            log_x: true,
            log_y: false,
        }
    }

    #[test]
    fn prepare_sorts_lines_and_counts_points_a_log_axis_cannot_show() {
        let c = chart();
        let xa = Axis::fit(Scale::Log2, &[1.0, 4.0], false);
        let ya = Axis::fit(Scale::Linear, &[5.0, 22.0], true);
        let p = prepare(&c, &xa, &ya);
        let xs: Vec<f64> = p.lines[0].iter().map(|p| p.0).collect();
        assert_eq!(xs, [0.0, 1.0, 2.0]);
        assert_eq!(p.skipped, 1, "x = 0 on a log-2 axis");
        assert_eq!(p.bands[0].len(), 2);
        assert_eq!(p.markers.len(), 1);
    }

    #[test]
    fn empty_chart_renders_a_note() {
        let svg = render_svg_string(&CurveChart {
            title: "nothing yet".into(),
            ..Default::default()
        })
        .unwrap();
        assert!(svg.contains("No data to plot"));
        assert!(svg.contains("nothing yet"));
    }
}
