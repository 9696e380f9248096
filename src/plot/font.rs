//! The embedded font: DejaVu Sans registered with plotters, measured, and rasterised by
//! hand for bitmap output.
//!
//! Charts must render the same bytes on every machine and need no system font library, so
//! the one font they use is compiled into the binary. Text is measured here (so labels can
//! be placed before they are drawn) with the same glyph metrics that draw it. For PNG output
//! this module also puts the glyphs on the bitmap itself, because plotters' own ab_glyph
//! renderer snaps each glyph to a whole pixel and drops its side bearing.

use super::canvas::{Area, Drawn};
use crate::error::{Error, Result};
use ab_glyph::{point, Font, FontRef, OutlinedGlyph, PxScale, ScaleFont};
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, VPos};
use plotters::style::FontStyle;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};

/// DejaVu Sans 2.37 from Debian's fonts-dejavu-core (Bitstream Vera licence, see
/// `assets/fonts/LICENSE-DejaVu.txt`).
pub(crate) static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family the embedded font is registered under.
pub(crate) const FAMILY: &str = "sans-serif";

thread_local! {
    static RASTER_TEXT: Cell<bool> = const { Cell::new(false) };
}

/// While alive, [`raster_text`] (and so `text::draw_text`) rasterises text itself (for bitmap output) instead of handing
/// it to the backend: plotters' ab_glyph renderer puts every glyph on a whole pixel and
/// drops its side bearing, which spaces letters unevenly ("Outpu t"). SVG output keeps
/// real `<text>` elements.
pub(crate) struct RasterText {
    prev: bool,
}

impl RasterText {
    pub fn on() -> RasterText {
        RasterText {
            prev: RASTER_TEXT.with(|c| c.replace(true)),
        }
    }
}

impl Drop for RasterText {
    fn drop(&mut self) {
        RASTER_TEXT.with(|c| c.set(self.prev));
    }
}

/// The embedded font, parsed once.
fn font_data() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(DEJAVU_SANS).ok())
        .as_ref()
}

/// Advance width of `text` at `size` (the em-box height plotters calls the font size).
fn advance(font: &FontRef<'static>, text: &str, size: f64) -> f32 {
    let sf = font.as_scaled(PxScale::from(size as f32));
    let mut w = 0.0;
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            w += sf.kern(p, id);
        }
        w += sf.h_advance(id);
        prev = Some(id);
    }
    w
}

/// Width and height of `text` at `size`, pixels.
pub(crate) fn text_size(text: &str, size: f64) -> (i32, i32) {
    match font_data() {
        Some(f) => (advance(f, text, size).ceil() as i32, size.round() as i32),
        None => (
            (text.chars().count() as f64 * size * 0.55) as i32,
            size as i32,
        ),
    }
}

pub(crate) fn text_width(text: &str, size: f64) -> i32 {
    text_size(text, size).0
}

/// Height of one line of text at `size`.
pub(crate) fn line_height(size: f64) -> i32 {
    (size * 1.1).ceil() as i32
}

static FONTS: Once = Once::new();
static FONTS_OK: AtomicBool = AtomicBool::new(false);

/// Register the embedded font as plotters' "sans-serif" (normal and bold) once per process.
pub(crate) fn ensure_fonts() -> Result<()> {
    FONTS.call_once(|| {
        let ok = [FontStyle::Normal, FontStyle::Bold]
            .into_iter()
            .all(|style| register_font(FAMILY, style, DEJAVU_SANS).is_ok());
        FONTS_OK.store(ok, Ordering::SeqCst);
    });
    if FONTS_OK.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(Error::Plot(
            "the embedded DejaVu Sans font could not be loaded".into(),
        ))
    }
}

/// Rasterise `text` with sub-pixel glyph positions, anchored at `at` by `(h, v)` (the box
/// runs from the ascender to the descender line); `upward` turns it a quarter to the left
/// about the anchor. `None` (nothing drawn) unless a [`RasterText`] guard is alive and the
/// font parsed: the caller then hands the text to the backend.
pub(crate) fn raster_text<DB: DrawingBackend>(
    root: &Area<DB>,
    text: &str,
    at: (i32, i32),
    size: f64,
    color: RGBColor,
    (h, v): (HPos, VPos),
    upward: bool,
) -> Option<Drawn<DB>> {
    if !RASTER_TEXT.with(|c| c.get()) {
        return None;
    }
    let font = font_data()?;
    let scale = PxScale::from(size as f32);
    let sf = font.as_scaled(scale);
    let width = advance(font, text, size);
    let mut pen = match h {
        HPos::Left => 0.0,
        HPos::Center => -width / 2.0,
        HPos::Right => -width,
    };
    let (asc, desc) = (sf.ascent(), sf.descent());
    let baseline = match v {
        VPos::Top => asc,
        VPos::Center => (asc + desc) / 2.0,
        VPos::Bottom => desc,
    };
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            pen += sf.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(scale, point(pen, baseline));
        pen += sf.h_advance(id);
        if let Some(outline) = font.outline_glyph(glyph) {
            if let Err(e) = draw_glyph(root, &outline, at, color, upward) {
                return Some(Err(e));
            }
        }
    }
    Some(Ok(()))
}

/// Blend one outlined glyph onto `root`, offset by `at` (turned upwards when `upward`),
/// clipped to the drawing area.
fn draw_glyph<DB: DrawingBackend>(
    root: &Area<DB>,
    outline: &OutlinedGlyph,
    at: (i32, i32),
    color: RGBColor,
    upward: bool,
) -> Drawn<DB> {
    let (w, hgt) = root.dim_in_pixel();
    let b = outline.px_bounds();
    let mut pixels = Vec::new();
    outline.draw(|x, y, cov| {
        if cov > 0.0 {
            pixels.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, cov));
        }
    });
    for (lx, ly, cov) in pixels {
        let (sx, sy) = if upward {
            (at.0 + ly, at.1 - lx)
        } else {
            (at.0 + lx, at.1 + ly)
        };
        if sx >= 0 && sy >= 0 && (sx as u32) < w && (sy as u32) < hgt {
            root.draw_pixel((sx, sy), &color.mix(cov.min(1.0) as f64))?;
        }
    }
    Ok(())
}
