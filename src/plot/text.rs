//! Styled text on a chart: the type sizes, drawing a label level or reading upwards,
//! cutting and wrapping it to a width, and the title and notes every chart carries.
//!
//! Charts place text by measuring it first ([`text_width`]), so these helpers take a pixel
//! budget and never let a label spill; the glyphs themselves come from `font`.

use super::canvas::{Area, Drawn};
use super::font::{line_height, text_width};
use super::font::{raster_text, FAMILY};
use super::palette::{INK, MUTED};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontDesc, FontFamily, FontStyle, FontTransform};

// Text sizes, pixels (plotters' font size: the em box is size / 1.24).
pub(crate) const TITLE_SIZE: f64 = 28.0;
pub(crate) const SUBTITLE_SIZE: f64 = 18.0;
pub(crate) const AXIS_TITLE_SIZE: f64 = 20.0;
pub(crate) const TICK_SIZE: f64 = 17.0;
pub(crate) const LEGEND_SIZE: f64 = 17.0;
pub(crate) const NOTE_SIZE: f64 = 15.0;
pub(crate) const LABEL_SIZE: f64 = 15.0;

pub(crate) fn font(size: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FAMILY), size, FontStyle::Normal)
}

pub(crate) fn style(size: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    font(size).color(&color).pos(Pos::new(h, v))
}

/// Draw `text` at `pos` anchored by `(h, v)`.
pub(crate) fn draw_text<DB: DrawingBackend>(
    root: &Area<DB>,
    text: &str,
    pos: (i32, i32),
    size: f64,
    color: RGBColor,
    h: HPos,
    v: VPos,
) -> Drawn<DB> {
    if let Some(drawn) = raster_text(root, text, pos, size, color, (h, v), false) {
        return drawn;
    }
    root.draw(&Text::new(text.to_string(), pos, style(size, color, h, v)))
}

/// Draw `text` turned a quarter to the left (reading upwards), centred on `center`.
pub(crate) fn draw_text_vertical<DB: DrawingBackend>(
    root: &Area<DB>,
    text: &str,
    center: (i32, i32),
    size: f64,
    color: RGBColor,
) -> Drawn<DB> {
    let centre = (HPos::Center, VPos::Center);
    if let Some(drawn) = raster_text(root, text, center, size, color, centre, true) {
        return drawn;
    }
    let s = style(size, color, HPos::Center, VPos::Center).transform(FontTransform::Rotate270);
    root.draw(&Text::new(text.to_string(), center, s))
}

/// `text` cut to at most `width` pixels, with an ellipsis when cut.
pub(crate) fn fit_text(text: &str, size: f64, width: i32) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut n = chars.len();
    while n > 0 {
        let s: String = chars[..n].iter().collect::<String>() + "…";
        if text_width(&s, size) <= width {
            return s;
        }
        n -= 1;
    }
    String::new()
}

/// Split `text` into lines no wider than `width`, breaking at spaces.
pub(crate) fn wrap_text(text: &str, size: f64, width: i32) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if text_width(&candidate, size) <= width || cur.is_empty() {
            cur = candidate;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// Draw the chart title (and an optional subtitle under it), centred, wrapping a title too
/// wide for the image onto a second line. Returns the height used from the top.
pub(crate) fn draw_title<DB: DrawingBackend>(
    root: &Area<DB>,
    title: &str,
    subtitle: Option<&str>,
) -> std::result::Result<i32, DrawingAreaErrorKind<DB::ErrorType>> {
    let (w, _) = root.dim_in_pixel();
    let avail = w as i32 - 60;
    let mut y = 14;
    let mut size = TITLE_SIZE;
    // Shrink a little before wrapping: one line reads better than two.
    while text_width(title, size) > avail && size > TITLE_SIZE * 0.8 {
        size -= 1.0;
    }
    for line in wrap_text(title, size, avail).iter().take(3) {
        let line = fit_text(line, size, avail);
        draw_text(
            root,
            &line,
            (w as i32 / 2, y),
            size,
            INK,
            HPos::Center,
            VPos::Top,
        )?;
        y += line_height(size) + 4;
    }
    if let Some(sub) = subtitle.filter(|s| !s.is_empty()) {
        for line in wrap_text(sub, SUBTITLE_SIZE, avail).iter().take(2) {
            let line = fit_text(line, SUBTITLE_SIZE, avail);
            draw_text(
                root,
                &line,
                (w as i32 / 2, y),
                SUBTITLE_SIZE,
                MUTED,
                HPos::Center,
                VPos::Top,
            )?;
            y += line_height(SUBTITLE_SIZE) + 2;
        }
    }
    Ok(y + 10)
}

/// Height the notes at the bottom of the image need.
pub(crate) fn notes_height(notes: &[String], width: i32) -> i32 {
    let lines: usize = notes
        .iter()
        .map(|n| wrap_text(n, NOTE_SIZE, width - 48).len().min(2))
        .sum();
    if lines == 0 {
        0
    } else {
        lines as i32 * (line_height(NOTE_SIZE) + 3) + 14
    }
}

/// Draw the notes (small grey lines) at the bottom of the image, each wrapped to at most
/// two lines.
pub(crate) fn draw_notes<DB: DrawingBackend>(root: &Area<DB>, notes: &[String]) -> Drawn<DB> {
    let (w, h) = root.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let total = notes_height(notes, w);
    let mut y = h - total + 6;
    for n in notes {
        let lines = wrap_text(n, NOTE_SIZE, w - 48);
        for (i, line) in lines.iter().take(2).enumerate() {
            let line = if i == 1 && lines.len() > 2 {
                fit_text(
                    &format!("{line} {}", lines[2..].join(" ")),
                    NOTE_SIZE,
                    w - 48,
                )
            } else {
                line.clone()
            };
            draw_text(
                root,
                &line,
                (24, y),
                NOTE_SIZE,
                MUTED,
                HPos::Left,
                VPos::Top,
            )?;
            y += line_height(NOTE_SIZE) + 3;
        }
    }
    Ok(())
}

/// Widest label among `labels` at tick size.
pub(crate) fn widest(labels: &[String], size: f64) -> i32 {
    labels
        .iter()
        .map(|l| text_width(l, size))
        .max()
        .unwrap_or(0)
}
