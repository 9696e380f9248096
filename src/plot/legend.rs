//! Legends: rows of a swatch (line, band, marker or block) and a label, optionally boxed,
//! and the plot corners a legend can sit in.
//!
//! One legend look for every chart; charts measure a legend ([`legend_size`]) first and then
//! put it outside the plot or in whichever corner covers the least data.

use super::canvas::{draw_box, draw_dashed, Area, Drawn};
use super::font::{line_height, text_width};
use super::layout::PxRect;
use super::marker::{draw_marker, Shape};
use super::palette::{INK, MUTED, WHITE_BG};
use super::text::{draw_text, LEGEND_SIZE};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

/// What a legend row shows beside its label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Swatch {
    /// A line, optionally over a translucent band of the same colour.
    Line {
        color: RGBColor,
        width: u32,
        band: bool,
        dashed: bool,
    },
    Marker {
        shape: Shape,
        color: RGBColor,
    },
    /// A filled square (bars, categories).
    Block(RGBColor),
    /// No swatch: a heading or explanatory row.
    None,
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub label: String,
    pub swatch: Swatch,
}

const SWATCH_W: i32 = 30;
const LEGEND_PAD: i32 = 10;

fn legend_row_h() -> i32 {
    line_height(LEGEND_SIZE) + 7
}

/// Size of a legend box holding `entries`.
pub(crate) fn legend_size(entries: &[Entry]) -> (i32, i32) {
    let w = entries
        .iter()
        .map(|e| {
            let sw = if matches!(e.swatch, Swatch::None) {
                0
            } else {
                SWATCH_W + 8
            };
            sw + text_width(&e.label, LEGEND_SIZE)
        })
        .max()
        .unwrap_or(0);
    (
        w + 2 * LEGEND_PAD,
        entries.len() as i32 * legend_row_h() + 2 * LEGEND_PAD - 6,
    )
}

/// Draw a legend with its top-left corner at `at`; `boxed` puts it on a white box.
pub(crate) fn draw_legend<DB: DrawingBackend>(
    root: &Area<DB>,
    entries: &[Entry],
    at: (i32, i32),
    boxed: bool,
) -> Drawn<DB> {
    if entries.is_empty() {
        return Ok(());
    }
    let (w, h) = legend_size(entries);
    if boxed {
        draw_box(root, PxRect::new(at.0, at.1, at.0 + w, at.1 + h), 0.92)?;
    }
    let rh = legend_row_h();
    for (i, e) in entries.iter().enumerate() {
        let cy = at.1 + LEGEND_PAD + i as i32 * rh + rh / 2 - 3;
        let sx = at.0 + LEGEND_PAD;
        draw_swatch(root, e.swatch, (sx, cy))?;
        // A row without a swatch is a heading or an explanation: flush left, in grey.
        let (tx, color) = if matches!(e.swatch, Swatch::None) {
            (sx, MUTED)
        } else {
            (sx + SWATCH_W + 8, INK)
        };
        draw_text(
            root,
            &e.label,
            (tx, cy),
            LEGEND_SIZE,
            color,
            HPos::Left,
            VPos::Center,
        )?;
    }
    Ok(())
}

/// The swatch of one legend row, its left end at `sx` and centred on row `cy`.
fn draw_swatch<DB: DrawingBackend>(
    root: &Area<DB>,
    swatch: Swatch,
    (sx, cy): (i32, i32),
) -> Drawn<DB> {
    match swatch {
        Swatch::Line {
            color,
            width,
            band,
            dashed,
        } => {
            if band {
                root.draw(&Rectangle::new(
                    [(sx, cy - 7), (sx + SWATCH_W, cy + 7)],
                    color.mix(0.2).filled(),
                ))?;
            }
            if dashed {
                draw_dashed(
                    root,
                    vec![(sx, cy), (sx + SWATCH_W, cy)],
                    color,
                    width,
                    7,
                    4,
                )?;
            } else {
                root.draw(&PathElement::new(
                    vec![(sx, cy), (sx + SWATCH_W, cy)],
                    color.stroke_width(width),
                ))?;
            }
        }
        Swatch::Marker { shape, color } => {
            draw_marker(
                root,
                shape,
                (sx + SWATCH_W / 2, cy),
                6,
                color.to_rgba(),
                Some(WHITE_BG),
            )?;
        }
        Swatch::Block(color) => {
            root.draw(&Rectangle::new(
                [(sx + 6, cy - 8), (sx + 24, cy + 8)],
                color.filled(),
            ))?;
        }
        Swatch::None => {}
    }
    Ok(())
}

/// The four inside corners of `plot` a legend of `size` can go in, in order of preference:
/// upper right, upper left, lower right, lower left.
pub(crate) fn legend_corners(plot: PxRect, size: (i32, i32)) -> [PxRect; 4] {
    let m = 12;
    let (w, h) = size;
    [
        PxRect::new(plot.x1 - m - w, plot.y0 + m, plot.x1 - m, plot.y0 + m + h),
        PxRect::new(plot.x0 + m, plot.y0 + m, plot.x0 + m + w, plot.y0 + m + h),
        PxRect::new(plot.x1 - m - w, plot.y1 - m - h, plot.x1 - m, plot.y1 - m),
        PxRect::new(plot.x0 + m, plot.y1 - m - h, plot.x0 + m + w, plot.y1 - m),
    ]
}
