//! The drawing surface every chart draws on: the plot area with its two axes, mapping data
//! to pixels, and the frame, grid, ticks and axis titles around it.
//!
//! The charts draw in pixel coordinates on the root area instead of through plotters'
//! `ChartBuilder` mesh: that gives every chart the same look, tick labels that are measured
//! before they are placed (so they never overlap), log axes with ticks on whole powers, PNG
//! text drawn by `font` rather than by the backend, and one place that decides where legends
//! and labels go. The pieces live beside this file: `axis`, `layout`, `text`, `legend`,
//! `marker`, `categories`, `palette`, `numbers`.

use super::axis::Axis;
use super::font::line_height;
use super::layout::PxRect;
use super::palette::{AXIS, GRID, GRID_MINOR, INK, MUTED, WHITE_BG};
use super::text::{
    draw_text, draw_text_vertical, fit_text, AXIS_TITLE_SIZE, LABEL_SIZE, TICK_SIZE,
};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

pub(crate) type Area<DB> = DrawingArea<DB, Shift>;
/// The result of drawing: `T` is what a step hands on to later ones (a layout, the boxes
/// it covered), `()` for most.
pub(crate) type Drawn<DB, T = ()> =
    std::result::Result<T, DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// The plot area in pixels with its two axes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plot {
    pub r: PxRect,
    pub xa: Axis,
    pub ya: Axis,
}

impl Plot {
    /// Pixel column of `t` (x axis units).
    pub fn px(&self, t: f64) -> f64 {
        let f = (t - self.xa.lo) / (self.xa.hi - self.xa.lo);
        self.r.x0 as f64 + f * self.r.width() as f64
    }
    /// Pixel row of `t` (y axis units).
    pub fn py(&self, t: f64) -> f64 {
        let f = (t - self.ya.lo) / (self.ya.hi - self.ya.lo);
        self.r.y1 as f64 - f * self.r.height() as f64
    }
    /// Pixel of a point in axis units.
    pub fn pt(&self, (x, y): (f64, f64)) -> (i32, i32) {
        (self.px(x).round() as i32, self.py(y).round() as i32)
    }
    /// Pixel of a data point, `None` where an axis cannot show it.
    pub fn data(&self, x: f64, y: f64) -> Option<(i32, i32)> {
        Some(self.pt((self.xa.t(x)?, self.ya.t(y)?)))
    }
}

/// Grid, frame, numeric tick labels and axis titles. `x_ticks` empty leaves the x axis
/// without numeric labels (for category axes); `x_grid` false leaves out vertical grid lines.
#[allow(clippy::too_many_arguments)]
pub(crate) fn draw_axes<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    x_ticks: &[f64],
    y_ticks: &[f64],
    x_grid: bool,
    x_title: &str,
    y_title: &str,
    x_title_y: i32,
) -> Drawn<DB> {
    draw_grid(root, plot, x_ticks, y_ticks, x_grid)?;
    draw_outline(root, plot.r, AXIS)?;
    draw_tick_labels(root, plot, x_ticks, y_ticks)?;
    draw_axis_titles(root, plot.r, x_title, y_title, x_title_y)
}

/// Minor grid lines under major ones, vertical (when `x_grid`) before horizontal.
fn draw_grid<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    x_ticks: &[f64],
    y_ticks: &[f64],
    x_grid: bool,
) -> Drawn<DB> {
    let r = plot.r;
    let x_minor = plot.xa.minor_ticks(x_ticks);
    let y_minor = plot.ya.minor_ticks(y_ticks);
    for (xs, ys, color) in [
        (&x_minor[..], &y_minor[..], GRID_MINOR),
        (x_ticks, y_ticks, GRID),
    ] {
        if x_grid {
            for t in xs {
                let x = plot.px(*t).round() as i32;
                root.draw(&PathElement::new(vec![(x, r.y0), (x, r.y1)], color))?;
            }
        }
        for t in ys {
            let y = plot.py(*t).round() as i32;
            root.draw(&PathElement::new(vec![(r.x0, y), (r.x1, y)], color))?;
        }
    }
    Ok(())
}

/// Tick marks outside the frame with their labels: under the x axis, left of the y axis.
fn draw_tick_labels<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    x_ticks: &[f64],
    y_ticks: &[f64],
) -> Drawn<DB> {
    let r = plot.r;
    for t in x_ticks {
        let x = plot.px(*t).round() as i32;
        root.draw(&PathElement::new(vec![(x, r.y1), (x, r.y1 + 6)], AXIS))?;
        draw_text(
            root,
            &plot.xa.label(*t),
            (x, r.y1 + 10),
            TICK_SIZE,
            INK,
            HPos::Center,
            VPos::Top,
        )?;
    }
    for t in y_ticks {
        let y = plot.py(*t).round() as i32;
        root.draw(&PathElement::new(vec![(r.x0 - 6, y), (r.x0, y)], AXIS))?;
        draw_text(
            root,
            &plot.ya.label(*t),
            (r.x0 - 10, y),
            TICK_SIZE,
            INK,
            HPos::Right,
            VPos::Center,
        )?;
    }
    Ok(())
}

/// The x axis title centred under the plot at `x_title_y`, the y title reading upwards at
/// the left edge of the image; an empty title is left out.
fn draw_axis_titles<DB: DrawingBackend>(
    root: &Area<DB>,
    r: PxRect,
    x_title: &str,
    y_title: &str,
    x_title_y: i32,
) -> Drawn<DB> {
    if !x_title.is_empty() {
        draw_text(
            root,
            &fit_text(x_title, AXIS_TITLE_SIZE, r.width()),
            ((r.x0 + r.x1) / 2, x_title_y),
            AXIS_TITLE_SIZE,
            INK,
            HPos::Center,
            VPos::Top,
        )?;
    }
    if !y_title.is_empty() {
        draw_text_vertical(
            root,
            &fit_text(y_title, AXIS_TITLE_SIZE, r.height()),
            (20 + line_height(AXIS_TITLE_SIZE) / 2, (r.y0 + r.y1) / 2),
            AXIS_TITLE_SIZE,
            INK,
        )?;
    }
    Ok(())
}

/// A centred grey message in `r` (for charts with nothing to show).
pub(crate) fn draw_empty<DB: DrawingBackend>(
    root: &Area<DB>,
    r: PxRect,
    message: &str,
) -> Drawn<DB> {
    draw_outline(root, r, GRID)?;
    draw_text(
        root,
        &fit_text(message, AXIS_TITLE_SIZE, r.width() - 20),
        ((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2),
        AXIS_TITLE_SIZE,
        MUTED,
        HPos::Center,
        VPos::Center,
    )
}

/// A dashed polyline in pixels.
pub(crate) fn draw_dashed<DB: DrawingBackend>(
    root: &Area<DB>,
    points: Vec<(i32, i32)>,
    color: RGBColor,
    width: u32,
    dash: i32,
    gap: i32,
) -> Drawn<DB> {
    root.draw(&plotters::element::DashedPathElement::new(
        points,
        dash,
        gap,
        color.stroke_width(width),
    ))
}

/// A white box with a light border behind `r` (for labels and legends over data).
pub(crate) fn draw_box<DB: DrawingBackend>(root: &Area<DB>, r: PxRect, alpha: f64) -> Drawn<DB> {
    root.draw(&Rectangle::new(
        [(r.x0, r.y0), (r.x1, r.y1)],
        WHITE_BG.mix(alpha).filled(),
    ))?;
    draw_outline(root, r, GRID)
}

/// `text` at label size in a box `r` over the data (see [`draw_box`]), 4 px in from its
/// left edge.
pub(crate) fn draw_boxed_label<DB: DrawingBackend>(
    root: &Area<DB>,
    r: PxRect,
    text: &str,
    alpha: f64,
) -> Drawn<DB> {
    draw_box(root, r, alpha)?;
    draw_text(
        root,
        text,
        (r.x0 + 4, (r.y0 + r.y1) / 2),
        LABEL_SIZE,
        INK,
        HPos::Left,
        VPos::Center,
    )
}

/// A one-pixel `color` outline of `r`.
fn draw_outline<DB: DrawingBackend>(root: &Area<DB>, r: PxRect, color: RGBColor) -> Drawn<DB> {
    root.draw(&Rectangle::new(
        [(r.x0, r.y0), (r.x1, r.y1)],
        ShapeStyle {
            color: color.to_rgba(),
            filled: false,
            stroke_width: 1,
        },
    ))
}
