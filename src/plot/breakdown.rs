//! Stacked bars of time by category: one bar per concurrency, per system or per layer, each
//! split into the breakdown categories (gemm, attention, moe, all-reduce, …).
//!
//! A category keeps one colour in every chart (see `palette::CATEGORY_COLORS`) and stacks
//! in the same order, so charts side by side compare at a glance. The legend sits outside
//! the plot on the right, top to bottom in the order the segments stack, so it never covers
//! a bar.

use super::{
    axis::*, canvas::*, categories::*, font::*, layout::*, legend::*, numbers::*, palette::*,
    text::*,
};
use super::{render_svg, write_chart, Chart};
use crate::error::Result;
use crate::predict::Prediction;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Image size of a stacked-bar chart, pixels.
pub const SIZE: (u32, u32) = (1200, 800);

/// Stacked bars: one bar per label, each a list of (category, value).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StackedBars {
    /// Chart title; name model, system and parallelism in it.
    pub title: String,
    /// y axis title with its unit, e.g. `Time per decode step (ms)`.
    pub y_label: String,
    /// (bar label, [(category, value)]). A category repeated within a bar is summed;
    /// negative and non-finite values are left out (and counted in a note).
    pub bars: Vec<(String, Vec<(String, f64)>)>,
}

impl StackedBars {
    /// Time of each layer of `p` by category (bars `L0`, `L1`, …), plus a last bar,
    /// `non-layer`, for what runs outside the layers (embedding, final norm, lm_head,
    /// sampling, the engine's per-step cost).
    pub fn per_layer(p: &Prediction) -> StackedBars {
        let mut bars: Vec<(String, Vec<(String, f64)>)> = p
            .layers
            .iter()
            .map(|l| {
                (
                    format!("L{}", l.index),
                    l.breakdown_ms
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                )
            })
            .collect();
        let rest: Vec<(String, f64)> = p
            .breakdown_ms
            .iter()
            .map(|(k, total)| {
                let in_layers: f64 = p
                    .layers
                    .iter()
                    .map(|l| l.breakdown_ms.get(k).copied().unwrap_or(0.0))
                    .sum();
                // Rounding can leave a few attoseconds either way.
                let v = total - in_layers;
                (
                    k.to_string(),
                    if v > 1e-9 * total.abs().max(1.0) {
                        v
                    } else {
                        0.0
                    },
                )
            })
            .collect();
        if rest.iter().any(|(_, v)| *v > 0.0) {
            bars.push(("non-layer".into(), rest));
        }
        StackedBars {
            title: format!(
                "Time per layer: {} on {}, {}, batch {}, context {} (TPOT {} ms)",
                p.model,
                p.system,
                p.parallel,
                p.batch,
                p.context,
                sig_digits(p.tpot_ms, 4)
            ),
            y_label: "Time per decode step (ms)".into(),
            bars,
        }
    }
}

/// Write `bars` to `path` (`.svg` or `.png`).
pub fn breakdown(bars: &StackedBars, path: &Path) -> Result<()> {
    write_chart(bars, path)
}

/// `bars` as an SVG document.
pub fn render_svg_string(bars: &StackedBars) -> Result<String> {
    render_svg(bars)
}

/// Per bar: the values in category order (index into the palette), and values dropped.
fn stacks(b: &StackedBars) -> (Vec<(String, RGBColor)>, Vec<Vec<f64>>, usize) {
    let mut dropped = 0;
    let mut names: Vec<&str> = Vec::new();
    for (_, cats) in &b.bars {
        for (c, v) in cats {
            if v.is_finite() && *v > 0.0 {
                names.push(c.as_str());
            } else if !(v.is_finite() && *v == 0.0) {
                dropped += 1;
            }
        }
    }
    let palette = category_palette(names);
    let values = b
        .bars
        .iter()
        .map(|(_, cats)| {
            palette
                .iter()
                .map(|(name, _)| {
                    cats.iter()
                        .filter(|(c, v)| c == name && v.is_finite() && *v > 0.0)
                        .map(|(_, v)| *v)
                        .sum()
                })
                .collect()
        })
        .collect();
    (palette, values, dropped)
}

impl Chart for StackedBars {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        root.fill(&WHITE_BG)?;
        let top = draw_title(root, &self.title, None)?;
        let (palette, values, dropped) = stacks(self);
        let totals: Vec<f64> = values.iter().map(|v| v.iter().sum()).collect();

        let mut notes = Vec::new();
        if dropped > 0 {
            notes.push(format!(
                "{dropped} negative or non-finite value{} left out.",
                if dropped == 1 { "" } else { "s" }
            ));
        }
        let (w, _) = root.dim_in_pixel();
        let bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        // Legend outside on the right, top of the stack first.
        let entries: Vec<Entry> = palette
            .iter()
            .rev()
            .map(|(n, c)| Entry {
                label: n.clone(),
                swatch: Swatch::Block(*c),
            })
            .collect();
        let lsize = legend_size(&entries);
        let right = if entries.is_empty() { 0 } else { lsize.0 + 16 };

        let ya = Axis::fit(Scale::Linear, &totals, true);
        let y_labels: Vec<String> = ya.ticks(12).iter().map(|t| ya.label(*t)).collect();
        let labels: Vec<String> = self.bars.iter().map(|(l, _)| l.clone()).collect();
        let mut m = Margins {
            top,
            bottom,
            right,
            x_ticks: line_height(TICK_SIZE) + 12,
            y_ticks: widest(&y_labels, TICK_SIZE),
            has_x_title: false,
            has_y_title: !self.y_label.is_empty(),
        };
        if self.bars.is_empty() || totals.iter().all(|t| *t <= 0.0) {
            m.right = 0;
            return draw_empty(root, plot_rect(SIZE, &m), "No data to plot");
        }
        let n = self.bars.len();
        let slot = plot_rect(SIZE, &m).width() as f64 / n as f64;
        let cat = category_labels(&labels, slot);
        m.x_ticks = cat.height;
        let r = plot_rect(SIZE, &m);
        let xa = Axis {
            scale: Scale::Linear,
            lo: 0.0,
            hi: n as f64,
        };
        let plot = Plot { r, xa, ya };
        let y_ticks = fit_ticks(&ya, r.height(), false);
        draw_axes(root, &plot, &[], &y_ticks, false, "", &self.y_label, 0)?;

        let slot = r.width() as f64 / n as f64;
        let frac = if n > 30 { 0.8 } else { 0.65 };
        let bar_w = (slot * frac).max(1.0);
        let centers: Vec<i32> = (0..n)
            .map(|i| plot.px(i as f64 + 0.5).round() as i32)
            .collect();
        for (i, vals) in values.iter().enumerate() {
            let x0 = (plot.px(i as f64 + 0.5) - bar_w / 2.0).round() as i32;
            let x1 = (plot.px(i as f64 + 0.5) + bar_w / 2.0).round() as i32;
            let mut acc = 0.0;
            for (v, (_, color)) in vals.iter().zip(&palette) {
                if *v <= 0.0 {
                    continue;
                }
                let y0 = plot.py(acc).round() as i32;
                acc += v;
                let y1 = plot.py(acc).round() as i32;
                if y0 == y1 {
                    continue;
                }
                root.draw(&Rectangle::new([(x0, y1), (x1, y0)], color.filled()))?;
                // A hairline between segments keeps neighbours of similar colour apart.
                if bar_w >= 6.0 && y0 - y1 >= 3 {
                    root.draw(&PathElement::new(vec![(x0, y1), (x1, y1)], WHITE_BG))?;
                }
            }
        }
        // Totals above the bars when every one fits its slot.
        // Three significant digits each: totals are read one by one, not down a column.
        let total_labels: Vec<String> = totals.iter().map(|t| sig_digits(*t, 3)).collect();
        if widest(&total_labels, LABEL_SIZE) + 6 <= slot as i32 {
            for (i, t) in total_labels.iter().enumerate() {
                let y = plot.py(totals[i]).round() as i32;
                draw_text(
                    root,
                    t,
                    (centers[i], y - 4),
                    LABEL_SIZE,
                    MUTED,
                    HPos::Center,
                    VPos::Bottom,
                )?;
            }
        }
        draw_category_labels(root, &labels, &centers, r.y1, &cat)?;
        draw_legend(root, &entries, (r.x1 + 16, r.y0), false)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_stack_in_the_fixed_order_and_repeats_add_up() {
        let b = StackedBars {
            title: "t".into(),
            y_label: "ms".into(),
            bars: vec![(
                "C=1".into(),
                vec![
                    ("overhead".into(), 1.0),
                    ("gemm".into(), 2.0),
                    ("gemm".into(), 0.5),
                    ("moe".into(), f64::NAN),
                    ("other".into(), 0.0),
                ],
            )],
        };
        let (palette, values, dropped) = stacks(&b);
        let names: Vec<&str> = palette.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["gemm", "overhead"]);
        assert_eq!(values[0], vec![2.5, 1.0]);
        assert_eq!(dropped, 1);
    }
}
