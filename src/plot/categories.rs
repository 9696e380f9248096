//! Labels of a category axis (systems, layers, concurrencies under bars or heat-map cells).
//!
//! Category names are often long and many, so the layout is chosen from their measured
//! widths: level when they fit, thinned when they are short, reading upwards otherwise; the
//! last label always shows, so a closing bar such as a total keeps its name.

use super::canvas::{Area, Drawn};
use super::font::{line_height, text_width};
use super::palette::INK;
use super::text::{draw_text, draw_text_vertical, fit_text, widest, TICK_SIZE};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

/// How the labels of a category axis are laid out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CategoryLabels {
    /// Turned a quarter to read upwards.
    pub vertical: bool,
    /// Show every n-th label.
    pub every: usize,
    /// Pixels the labels need below the axis.
    pub height: i32,
    /// Longest label length in pixels (labels are cut to it).
    pub max_len: i32,
}

/// Choose horizontal labels when they fit their slot, thinned horizontal ones when they are
/// short (numbers, layer names), and upward-reading ones otherwise, thinned to the slot
/// height. The last label is always shown (see [`draw_category_labels`]), so a distinct
/// last bar such as a total keeps its name; it does not set the thinning.
pub(crate) fn category_labels(labels: &[String], slot: f64) -> CategoryLabels {
    let body = if labels.len() > 2 {
        &labels[..labels.len() - 1]
    } else {
        labels
    };
    let w = widest(body, TICK_SIZE);
    let w_all = widest(labels, TICK_SIZE);
    let lh = line_height(TICK_SIZE);
    let nice = |k: usize| -> usize {
        [1usize, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000]
            .into_iter()
            .find(|n| *n >= k)
            .unwrap_or(k)
    };
    if (w_all + 10) as f64 <= slot {
        return CategoryLabels {
            vertical: false,
            every: 1,
            height: lh + 12,
            max_len: w_all,
        };
    }
    if w <= 60 {
        let k = ((w + 14) as f64 / slot).ceil() as usize;
        return CategoryLabels {
            vertical: false,
            every: nice(k.max(1)),
            height: lh + 12,
            max_len: w_all.min(200),
        };
    }
    let k = ((lh + 4) as f64 / slot).ceil() as usize;
    let max_len = w_all.min(220);
    CategoryLabels {
        vertical: true,
        every: nice(k.max(1)),
        height: max_len + 14,
        max_len,
    }
}

/// Draw category labels under the plot at pixel columns `xs`: every n-th from the first,
/// plus the last, dropping the one before it when the two would touch.
pub(crate) fn draw_category_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    labels: &[String],
    xs: &[i32],
    y: i32,
    layout: &CategoryLabels,
) -> Drawn<DB> {
    let n = labels.len().min(xs.len());
    if n == 0 {
        return Ok(());
    }
    let shown: Vec<String> = labels
        .iter()
        .map(|l| fit_text(l, TICK_SIZE, layout.max_len))
        .collect();
    let extent = |i: usize| {
        if layout.vertical {
            line_height(TICK_SIZE)
        } else {
            text_width(&shown[i], TICK_SIZE)
        }
    };
    let mut keep: Vec<usize> = (0..n).filter(|i| i % layout.every == 0).collect();
    if keep.last() != Some(&(n - 1)) {
        while let Some(&prev) = keep.last() {
            let room = (xs[n - 1] - xs[prev]).abs();
            if room >= (extent(prev) + extent(n - 1)) / 2 + 10 {
                break;
            }
            keep.pop();
        }
        keep.push(n - 1);
    }
    for i in keep {
        let (label, x) = (&shown[i], xs[i]);
        if layout.vertical {
            let w = text_width(label, TICK_SIZE);
            draw_text_vertical(root, label, (x, y + 8 + w / 2), TICK_SIZE, INK)?;
        } else {
            draw_text(
                root,
                label,
                (x, y + 8),
                TICK_SIZE,
                INK,
                HPos::Center,
                VPos::Top,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_thin_long_labels_turn() {
        let nums: Vec<String> = (0..61).map(|i| i.to_string()).collect();
        let l = category_labels(&nums, 15.0);
        assert!(!l.vertical && l.every >= 2);
        let long: Vec<String> = (0..8).map(|i| format!("a long system name {i}")).collect();
        let l = category_labels(&long, 60.0);
        assert!(l.vertical);
        assert_eq!(l.every, 1);
    }
}
