//! A heat map over two discrete axes (e.g. draft length × acceptance rate), each cell
//! coloured by its value and the value printed in it, with a colour bar.
//!
//! Made for ratios such as speedups: when the values straddle 1 the scale diverges from 1
//! (red below, blue above, near-white at 1), so a slowdown never looks like a small
//! speedup; otherwise it is sequential (viridis) from the smallest value to the largest.

use super::{
    axis::*, canvas::*, categories::*, font::*, layout::*, numbers::*, palette::*, text::*,
};
use super::{render_svg, write_chart, Chart};
use crate::error::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Image size of a heat map, pixels.
pub const SIZE: (u32, u32) = (1200, 800);

/// A heat map: `values[j][i]` belongs to `xs[i]` and `ys[j]` (one row per y). The first y
/// is drawn at the bottom, like a y axis.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Heatmap {
    /// Chart title; name model, system and what the values are.
    pub title: String,
    /// x axis title with its unit, e.g. `Draft length (tokens)`.
    pub x_label: String,
    /// y axis title with its unit, e.g. `Acceptance rate`.
    pub y_label: String,
    pub xs: Vec<String>,
    pub ys: Vec<String>,
    /// One row per y, one value per x; missing or non-finite cells show as "–".
    pub values: Vec<Vec<f64>>,
}

/// Write `map` to `path` (`.svg` or `.png`).
pub fn heatmap(map: &Heatmap, path: &Path) -> Result<()> {
    write_chart(map, path)
}

/// `map` as an SVG document.
pub fn render_svg_string(map: &Heatmap) -> Result<String> {
    render_svg(map)
}

/// How values map to colours.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ColorScale {
    /// Red below 1, blue above, white at 1; `span` is the largest distance from 1.
    Diverging { span: f64 },
    /// Viridis from `lo` to `hi`.
    Sequential { lo: f64, hi: f64 },
}

const RDBU: [(f64, (u8, u8, u8)); 5] = [
    (-1.0, (0xB2, 0x18, 0x2B)),
    (-0.5, (0xEF, 0x8A, 0x62)),
    (0.0, (0xF7, 0xF7, 0xF7)),
    (0.5, (0x67, 0xA9, 0xCF)),
    (1.0, (0x21, 0x66, 0xAC)),
];

const VIRIDIS: [(f64, (u8, u8, u8)); 5] = [
    (0.0, (0x44, 0x01, 0x54)),
    (0.25, (0x3B, 0x52, 0x8B)),
    (0.5, (0x21, 0x91, 0x8C)),
    (0.75, (0x5E, 0xC9, 0x62)),
    (1.0, (0xFD, 0xE7, 0x25)),
];

const MISSING: RGBColor = RGBColor(0xE4, 0xE4, 0xE4);

fn interpolate(stops: &[(f64, (u8, u8, u8))], t: f64) -> RGBColor {
    let t = t.clamp(stops[0].0, stops[stops.len() - 1].0);
    for w in stops.windows(2) {
        let ((a, ca), (b, cb)) = (w[0], w[1]);
        if t <= b {
            let f = if b > a { (t - a) / (b - a) } else { 0.0 };
            let mix = |x: u8, y: u8| (x as f64 + f * (y as f64 - x as f64)).round() as u8;
            return RGBColor(mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2));
        }
    }
    let c = stops[stops.len() - 1].1;
    RGBColor(c.0, c.1, c.2)
}

impl ColorScale {
    fn for_range(lo: f64, hi: f64) -> ColorScale {
        if lo < 1.0 && hi > 1.0 {
            ColorScale::Diverging {
                span: (1.0 - lo).max(hi - 1.0),
            }
        } else {
            ColorScale::Sequential { lo, hi }
        }
    }

    fn color(&self, v: f64) -> RGBColor {
        match *self {
            ColorScale::Diverging { span } => interpolate(&RDBU, (v - 1.0) / span),
            ColorScale::Sequential { lo, hi } => {
                let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
                interpolate(&VIRIDIS, t)
            }
        }
    }
}

impl Heatmap {
    fn value(&self, xi: usize, yi: usize) -> Option<f64> {
        self.values
            .get(yi)?
            .get(xi)
            .copied()
            .filter(|v| v.is_finite())
    }

    /// The cells' finite values, row by row from the first y.
    fn finite_values(&self) -> Vec<f64> {
        let (nx, ny) = (self.xs.len(), self.ys.len());
        (0..ny)
            .flat_map(|j| (0..nx).filter_map(move |i| self.value(i, j)))
            .collect()
    }
}

impl Chart for Heatmap {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    /// The margins are settled in steps, each needing the last: the colour bar's width
    /// sets the right margin, the cell width then the x label height, the cell size then
    /// whether values are printed, which adds a note and so the bottom margin.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        root.fill(&WHITE_BG)?;
        let top = draw_title(root, &self.title, None)?;
        let (nx, ny) = (self.xs.len(), self.ys.len());
        let finite = self.finite_values();
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let bar = ColorBar::new(lo, hi);
        let mut notes = self.missing_note(finite.len());
        let mut m = Margins {
            top,
            bottom: 0,
            right: bar.width(),
            x_ticks: line_height(TICK_SIZE) + 12,
            y_ticks: widest(&self.ys, TICK_SIZE).min(260),
            has_x_title: !self.x_label.is_empty(),
            has_y_title: !self.y_label.is_empty(),
        };
        if nx == 0 || ny == 0 || finite.is_empty() {
            m.right = 0;
            return draw_empty(root, plot_rect(SIZE, &m), "No data to plot");
        }
        let slot = plot_rect(SIZE, &m).width() as f64 / nx as f64;
        let cat = category_labels(&self.xs, slot);
        m.x_ticks = cat.height;
        let dec = decimals_for(&finite);
        let value_size = value_size(plot_rect(SIZE, &m), (nx, ny), &finite, dec);
        if value_size.is_none() {
            notes.push(
                "Cells too small to print their values; read them off the colour bar.".into(),
            );
        }
        let (w, _) = root.dim_in_pixel();
        m.bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        let plot = self.draw_frame(root, &m)?;
        let scale = ColorScale::for_range(lo, hi);
        self.draw_cells(root, &plot, scale, dec, value_size)?;
        let centers: Vec<i32> = (0..nx)
            .map(|i| plot.px(i as f64 + 0.5).round() as i32)
            .collect();
        draw_category_labels(root, &self.xs, &centers, plot.r.y1, &cat)?;
        self.draw_y_labels(root, &plot, m.y_ticks)?;
        bar.draw(root, plot.r, scale)
    }
}

impl Heatmap {
    /// The note counting cells without a value, when some have one.
    fn missing_note(&self, finite: usize) -> Vec<String> {
        let missing = self.xs.len() * self.ys.len() - finite;
        if missing == 0 || finite == 0 {
            return Vec::new();
        }
        vec![format!(
            "{missing} cell{} without a value, shown as –.",
            if missing == 1 { "" } else { "s" }
        )]
    }

    /// The plot area with one unit per cell on each axis, framed, with the axis titles
    /// (the category labels are drawn with the cells).
    fn draw_frame<DB: DrawingBackend>(&self, root: &Area<DB>, m: &Margins) -> Drawn<DB, Plot> {
        let r = plot_rect(SIZE, m);
        let unit = |n: usize| Axis {
            scale: Scale::Linear,
            lo: 0.0,
            hi: n as f64,
        };
        let plot = Plot {
            r,
            xa: unit(self.xs.len()),
            ya: unit(self.ys.len()),
        };
        let x_title_y = r.y1 + m.x_ticks + 6;
        draw_axes(
            root,
            &plot,
            &[],
            &[],
            false,
            &self.x_label,
            &self.y_label,
            x_title_y,
        )?;
        Ok(plot)
    }

    /// Each cell filled by its value (grey without one), with the value printed in it at
    /// `value_size` when there is one.
    fn draw_cells<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        plot: &Plot,
        scale: ColorScale,
        dec: usize,
        value_size: Option<f64>,
    ) -> Drawn<DB> {
        for j in 0..self.ys.len() {
            for i in 0..self.xs.len() {
                let x0 = plot.px(i as f64).round() as i32;
                let x1 = plot.px(i as f64 + 1.0).round() as i32;
                let y1 = plot.py(j as f64).round() as i32;
                let y0 = plot.py(j as f64 + 1.0).round() as i32;
                let v = self.value(i, j);
                let fill = v.map(|v| scale.color(v)).unwrap_or(MISSING);
                root.draw(&Rectangle::new(
                    [(x0 + 1, y0 + 1), (x1 - 1, y1 - 1)],
                    fill.filled(),
                ))?;
                if let Some(size) = value_size {
                    let text = v
                        .map(|v| format!("{v:.dec$}"))
                        .unwrap_or_else(|| "–".into());
                    let at = ((x0 + x1) / 2, (y0 + y1) / 2);
                    let color = text_on(fill);
                    draw_text(root, &text, at, size, color, HPos::Center, VPos::Center)?;
                }
            }
        }
        Ok(())
    }

    /// The y labels left of the rows, cut to `width`; every n-th only when rows are too
    /// short for a line of text each.
    fn draw_y_labels<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        plot: &Plot,
        width: i32,
    ) -> Drawn<DB> {
        let r = plot.r;
        let cell_h = r.height() as f64 / self.ys.len() as f64;
        let every = ((line_height(TICK_SIZE) + 2) as f64 / cell_h)
            .ceil()
            .max(1.0) as usize;
        for (j, label) in self.ys.iter().enumerate() {
            if j % every != 0 {
                continue;
            }
            let y = plot.py(j as f64 + 0.5).round() as i32;
            draw_text(
                root,
                &fit_text(label, TICK_SIZE, width),
                (r.x0 - 10, y),
                TICK_SIZE,
                INK,
                HPos::Right,
                VPos::Center,
            )?;
        }
        Ok(())
    }
}

/// Font size for the values in cells of plot area `r` with `(nx, ny)` cells: the largest up
/// to 18 px (and 45% of a cell's height) at which every value fits its cell's width; none
/// below 10 px.
fn value_size(r: PxRect, (nx, ny): (usize, usize), finite: &[f64], dec: usize) -> Option<f64> {
    let (cw, ch) = (r.width() as f64 / nx as f64, r.height() as f64 / ny as f64);
    let texts: Vec<String> = finite.iter().map(|v| format!("{v:.dec$}")).collect();
    let mut size = (ch * 0.45).min(18.0);
    while size >= 10.0 && widest(&texts, size) as f64 > cw - 8.0 {
        size -= 1.0;
    }
    (size >= 10.0).then_some(size)
}

/// Width of the colour bar, pixels.
const BAR_W: i32 = 22;

/// The colour bar right of the cells: the values' range with its ticks. Equal values get
/// a range of 1 around them, so the bar still has an extent.
struct ColorBar {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    labels: Vec<String>,
}

impl ColorBar {
    fn new(lo: f64, hi: f64) -> ColorBar {
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else {
            (lo - 0.5, hi + 0.5)
        };
        let axis = Axis {
            scale: Scale::Linear,
            lo,
            hi,
        };
        let ticks = axis.ticks(6);
        let labels = ticks.iter().map(|t| axis.label(*t)).collect();
        ColorBar {
            lo,
            hi,
            ticks,
            labels,
        }
    }

    /// Room it takes right of the plot: gap, bar, tick marks and labels.
    fn width(&self) -> i32 {
        24 + BAR_W + 8 + widest(&self.labels, TICK_SIZE)
    }

    /// The bar beside plot area `r` and as tall, in 2 px bands of `scale`'s colours,
    /// framed, with its ticks and labels on the right.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, r: PxRect, scale: ColorScale) -> Drawn<DB> {
        let (bx0, bx1) = (r.x1 + 24, r.x1 + 24 + BAR_W);
        let step = 2;
        let mut y = r.y0;
        while y < r.y1 {
            let f = (r.y1 - y) as f64 / r.height() as f64;
            let v = self.lo + f * (self.hi - self.lo);
            root.draw(&Rectangle::new(
                [(bx0, y), (bx1, (y + step).min(r.y1))],
                scale.color(v).filled(),
            ))?;
            y += step;
        }
        let frame = ShapeStyle {
            color: AXIS.to_rgba(),
            filled: false,
            stroke_width: 1,
        };
        root.draw(&Rectangle::new([(bx0, r.y0), (bx1, r.y1)], frame))?;
        for (t, label) in self.ticks.iter().zip(&self.labels) {
            let f = (t - self.lo) / (self.hi - self.lo);
            let y = (r.y1 as f64 - f * r.height() as f64).round() as i32;
            root.draw(&PathElement::new(vec![(bx1, y), (bx1 + 5, y)], AXIS))?;
            draw_text(
                root,
                label,
                (bx1 + 8, y),
                TICK_SIZE,
                INK,
                HPos::Left,
                VPos::Center,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedups_straddling_one_diverge_from_white_at_one() {
        let s = ColorScale::for_range(0.8, 2.0);
        assert_eq!(s, ColorScale::Diverging { span: 1.0 });
        assert_eq!(s.color(1.0), RGBColor(0xF7, 0xF7, 0xF7));
        let below = s.color(0.8);
        let above = s.color(2.0);
        assert!(below.0 > below.2, "red below 1");
        assert!(above.2 > above.0, "blue above 1");
        assert!(matches!(
            ColorScale::for_range(1.1, 3.0),
            ColorScale::Sequential { .. }
        ));
    }

    #[test]
    fn cell_text_contrasts_with_its_fill() {
        assert_eq!(text_on(interpolate(&VIRIDIS, 0.0)), WHITE_BG);
        assert_eq!(text_on(interpolate(&VIRIDIS, 1.0)), INK);
    }
}
