//! Grouped bars: one group per label (a metric, a concurrency, a model), one bar per series
//! in each group (a system, a parameter set), e.g. TPOT per system at several batch sizes.
//!
//! Series take colours from the shared palette in order; the legend sits outside on the
//! right. Values are printed above the bars when they fit.

use super::{
    axis::*, canvas::*, categories::*, font::*, layout::*, legend::*, numbers::*, palette::*,
    text::*,
};
use super::{render_svg, write_chart, Chart};
use crate::error::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Image size of a grouped-bar chart, pixels.
pub const SIZE: (u32, u32) = (1200, 800);

/// Grouped bars.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GroupedBars {
    /// Chart title; name model, system and parallelism in it.
    pub title: String,
    /// y axis title with its unit.
    pub y_label: String,
    /// Group labels along the x axis.
    pub groups: Vec<String>,
    /// (series name, one value per group). A missing or non-finite value leaves a gap.
    pub series: Vec<(String, Vec<f64>)>,
}

/// Write `bars` to `path` (`.svg` or `.png`).
pub fn grouped_bars(bars: &GroupedBars, path: &Path) -> Result<()> {
    write_chart(bars, path)
}

/// `bars` as an SVG document.
pub fn render_svg_string(bars: &GroupedBars) -> Result<String> {
    render_svg(bars)
}

impl GroupedBars {
    fn value(&self, series: usize, group: usize) -> Option<f64> {
        self.series
            .get(series)?
            .1
            .get(group)
            .copied()
            .filter(|v| v.is_finite())
    }
}

impl Chart for GroupedBars {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        root.fill(&WHITE_BG)?;
        let top = draw_title(root, &self.title, None)?;
        let ng = self.groups.len();
        let ns = self.series.len();
        let values: Vec<f64> = (0..ns)
            .flat_map(|s| (0..ng).filter_map(move |g| self.value(s, g)))
            .collect();
        let missing = ng * ns - values.len();

        let mut notes = Vec::new();
        if missing > 0 && !values.is_empty() {
            notes.push(format!(
                "{missing} missing or non-finite value{} left as gaps.",
                if missing == 1 { "" } else { "s" }
            ));
        }
        let (w, _) = root.dim_in_pixel();
        let bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        let entries: Vec<Entry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (n, _))| Entry {
                label: n.clone(),
                swatch: Swatch::Block(PALETTE[i % PALETTE.len()]),
            })
            .collect();
        let lsize = legend_size(&entries);
        let ya = Axis::fit(Scale::Linear, &values, true);
        let y_labels: Vec<String> = ya.ticks(12).iter().map(|t| ya.label(*t)).collect();
        let mut m = Margins {
            top,
            bottom,
            right: if entries.is_empty() { 0 } else { lsize.0 + 16 },
            x_ticks: line_height(TICK_SIZE) + 12,
            y_ticks: widest(&y_labels, TICK_SIZE),
            has_x_title: false,
            has_y_title: !self.y_label.is_empty(),
        };
        if values.is_empty() {
            m.right = 0;
            return draw_empty(root, plot_rect(SIZE, &m), "No data to plot");
        }
        let slot = plot_rect(SIZE, &m).width() as f64 / ng as f64;
        let cat = category_labels(&self.groups, slot);
        m.x_ticks = cat.height;
        let r = plot_rect(SIZE, &m);
        let xa = Axis {
            scale: Scale::Linear,
            lo: 0.0,
            hi: ng as f64,
        };
        let plot = Plot { r, xa, ya };
        let y_ticks = fit_ticks(&ya, r.height(), false);
        draw_axes(root, &plot, &[], &y_ticks, false, "", &self.y_label, 0)?;

        let slot = r.width() as f64 / ng as f64;
        let inner = slot * 0.8;
        let bar_w = inner / ns.max(1) as f64;
        let zero = plot.py(0.0).round() as i32;
        // Values above the bars only when every label fits its bar.
        let dec = decimals_for(&values);
        let labels: Vec<String> = values.iter().map(|v| format!("{v:.dec$}")).collect();
        let show_values = widest(&labels, LABEL_SIZE) + 4 <= bar_w as i32;
        for g in 0..ng {
            let left = plot.px(g as f64 + 0.5) - inner / 2.0;
            for s in 0..ns {
                let Some(v) = self.value(s, g) else { continue };
                let x0 = (left + s as f64 * bar_w + 1.0).round() as i32;
                let x1 = (left + (s + 1) as f64 * bar_w - 1.0).round() as i32;
                let y = plot.py(v).round() as i32;
                let color = PALETTE[s % PALETTE.len()];
                root.draw(&Rectangle::new(
                    [(x0, y), (x1.max(x0 + 1), zero)],
                    color.filled(),
                ))?;
                if show_values {
                    let (pos, vpos) = if v >= 0.0 {
                        ((x0 + x1) / 2, y - 4)
                    } else {
                        ((x0 + x1) / 2, y + 4)
                    };
                    draw_text(
                        root,
                        &format!("{v:.dec$}"),
                        (pos, vpos),
                        LABEL_SIZE,
                        MUTED,
                        HPos::Center,
                        if v >= 0.0 { VPos::Bottom } else { VPos::Top },
                    )?;
                }
            }
        }
        if ya.lo < 0.0 {
            root.draw(&PathElement::new(vec![(r.x0, zero), (r.x1, zero)], AXIS))?;
        }
        let centers: Vec<i32> = (0..ng)
            .map(|g| plot.px(g as f64 + 0.5).round() as i32)
            .collect();
        draw_category_labels(root, &self.groups, &centers, r.y1, &cat)?;
        draw_legend(root, &entries, (r.x1 + 16, r.y0), false)?;
        Ok(())
    }
}
