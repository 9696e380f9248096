//! The drawing toolkit every chart shares: text, colours, number formatting, axes, the plot
//! frame, legends, markers and label placement.
//!
//! The charts draw in pixel coordinates on the root area instead of through plotters'
//! `ChartBuilder` mesh: that gives every chart the same look, tick labels that are measured
//! before they are placed (so they never overlap), log axes with ticks on whole powers, and
//! one place that decides where legends and labels go.

use ab_glyph::{point, Font, FontRef, PxScale, ScaleFont};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontDesc, FontFamily, FontStyle, FontTransform};
use std::cell::Cell;
use std::sync::OnceLock;

/// The family the embedded font is registered under.
pub(crate) const FAMILY: &str = "sans-serif";

pub(crate) type Area<DB> = DrawingArea<DB, Shift>;
pub(crate) type Drawn<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

// Text sizes, pixels (plotters' font size: the em box is size / 1.24).
pub(crate) const TITLE_SIZE: f64 = 28.0;
pub(crate) const SUBTITLE_SIZE: f64 = 18.0;
pub(crate) const AXIS_TITLE_SIZE: f64 = 20.0;
pub(crate) const TICK_SIZE: f64 = 17.0;
pub(crate) const LEGEND_SIZE: f64 = 17.0;
pub(crate) const NOTE_SIZE: f64 = 15.0;
pub(crate) const LABEL_SIZE: f64 = 15.0;

pub(crate) const WHITE_BG: RGBColor = RGBColor(255, 255, 255);
pub(crate) const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
pub(crate) const MUTED: RGBColor = RGBColor(0x5A, 0x5A, 0x5A);
pub(crate) const AXIS: RGBColor = RGBColor(0x80, 0x80, 0x80);
pub(crate) const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);
pub(crate) const GRID_MINOR: RGBColor = RGBColor(0xEF, 0xEF, 0xEF);

/// Colours for series without a fixed meaning (Tableau 10, in its order).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xB0, 0x7A, 0xA1),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0xED, 0xC9, 0x48),
    RGBColor(0x9C, 0x75, 0x5F),
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0xBA, 0xB0, 0xAC),
];

/// The breakdown categories in stacking order, each with its fixed colour, so one category
/// looks the same in every chart.
pub(crate) const CATEGORY_COLORS: [(&str, RGBColor); 9] = [
    ("gemm", RGBColor(0x4E, 0x79, 0xA7)),
    ("attention", RGBColor(0xF2, 0x8E, 0x2B)),
    ("moe", RGBColor(0x59, 0xA1, 0x4F)),
    ("dequant", RGBColor(0xED, 0xC9, 0x48)),
    ("allreduce", RGBColor(0xE1, 0x57, 0x59)),
    ("alltoall", RGBColor(0xB0, 0x7A, 0xA1)),
    ("pipeline", RGBColor(0x9C, 0x75, 0x5F)),
    ("other", RGBColor(0x76, 0xB7, 0xB2)),
    ("overhead", RGBColor(0xBA, 0xB0, 0xAC)),
];

/// Colours for category names outside the fixed set, handed out in order of appearance.
const EXTRA_CATEGORY_COLORS: [RGBColor; 6] = [
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0x17, 0xBE, 0xCF),
    RGBColor(0xBC, 0xBD, 0x22),
    RGBColor(0x8C, 0x56, 0x4B),
    RGBColor(0x7F, 0x7F, 0x7F),
    RGBColor(0x1F, 0x3A, 0x5F),
];

/// Order the category names present in `names` (fixed ones first, in stacking order, then
/// the rest in order of first appearance) and give each its colour.
pub(crate) fn category_palette<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, RGBColor)> {
    let mut seen: Vec<&str> = Vec::new();
    for n in names {
        if !seen.contains(&n) {
            seen.push(n);
        }
    }
    let mut out: Vec<(String, RGBColor)> = CATEGORY_COLORS
        .iter()
        .filter(|(n, _)| seen.contains(n))
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
    let mut extra = 0;
    for n in seen {
        if !CATEGORY_COLORS.iter().any(|(k, _)| *k == n) {
            out.push((
                n.to_string(),
                EXTRA_CATEGORY_COLORS[extra % EXTRA_CATEGORY_COLORS.len()],
            ));
            extra += 1;
        }
    }
    out
}

/// Colour of a fixed category name (grey for an unknown one).
pub(crate) fn category_color(name: &str) -> RGBColor {
    CATEGORY_COLORS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .unwrap_or(EXTRA_CATEGORY_COLORS[4])
}

/// A darker shade of `c` (for outlines).
pub(crate) fn darker(c: RGBColor, f: f64) -> RGBColor {
    let s = |v: u8| (v as f64 * (1.0 - f)).round() as u8;
    RGBColor(s(c.0), s(c.1), s(c.2))
}

/// Black or white, whichever reads better on `bg`.
pub(crate) fn text_on(bg: RGBColor) -> RGBColor {
    let lin = |v: u8| {
        let c = v as f64 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(bg.0) + 0.7152 * lin(bg.1) + 0.0722 * lin(bg.2);
    if l > 0.33 {
        INK
    } else {
        WHITE_BG
    }
}

// ---------------------------------------------------------------------------------------
// Text

pub(crate) fn font(size: f64) -> FontDesc<'static> {
    FontDesc::new(FontFamily::Name(FAMILY), size, FontStyle::Normal)
}

pub(crate) fn style(size: f64, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    font(size).color(&color).pos(Pos::new(h, v))
}

thread_local! {
    static RASTER_TEXT: Cell<bool> = const { Cell::new(false) };
}

/// While alive, [`draw_text`] rasterises text itself (for bitmap output) instead of handing
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
    FONT.get_or_init(|| FontRef::try_from_slice(super::DEJAVU_SANS).ok())
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

/// Rasterise `text` with sub-pixel glyph positions, anchored at `at` by `(h, v)` (the box
/// runs from the ascender to the descender line); `upward` turns it a quarter to the left
/// about the anchor.
#[allow(clippy::too_many_arguments)]
fn raster_text<DB: DrawingBackend>(
    root: &Area<DB>,
    font: &FontRef<'static>,
    text: &str,
    at: (i32, i32),
    size: f64,
    color: RGBColor,
    h: HPos,
    v: VPos,
    upward: bool,
) -> Drawn<DB> {
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
    let (w, hgt) = root.dim_in_pixel();
    let mut prev = None;
    for c in text.chars() {
        let id = sf.glyph_id(c);
        if let Some(p) = prev {
            pen += sf.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(scale, point(pen, baseline));
        pen += sf.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue;
        };
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
    }
    Ok(())
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
    if RASTER_TEXT.with(|c| c.get()) {
        if let Some(f) = font_data() {
            return raster_text(root, f, text, pos, size, color, h, v, false);
        }
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
    if RASTER_TEXT.with(|c| c.get()) {
        if let Some(f) = font_data() {
            return raster_text(
                root,
                f,
                text,
                center,
                size,
                color,
                HPos::Center,
                VPos::Center,
                true,
            );
        }
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

// ---------------------------------------------------------------------------------------
// Numbers

/// `v` with at most `sig` significant digits, trailing zeros dropped.
pub(crate) fn sig_digits(v: f64, sig: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            format!("{v}")
        };
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (sig - 1 - mag).clamp(0, 9) as usize;
    let s = format!("{:.*}", decimals, v);
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// Compact number: `1.5k`, `10k`, `2.5M`, `1T`, `0.25`; up to four significant digits.
pub(crate) fn compact(v: f64) -> String {
    compact_sig(v, 4)
}

pub(crate) fn compact_sig(v: f64, sig: i32) -> String {
    let a = v.abs();
    const PREFIXES: [(f64, &str); 5] =
        [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, p) in PREFIXES {
        // Round first so 999.96 becomes "1k", not "1000".
        if a >= scale * 0.99995 {
            return format!("{}{p}", sig_digits(v / scale, sig));
        }
    }
    if a != 0.0 && a < 1e-3 {
        return format!("{:.0e}", v);
    }
    sig_digits(v, sig)
}

/// Decimals that give the largest of `values` three significant digits, so numbers
/// printed side by side line up (`7.0` beside `80.5`).
pub(crate) fn decimals_for(values: &[f64]) -> usize {
    let max = values
        .iter()
        .map(|v| v.abs())
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if max <= 0.0 {
        return 0;
    }
    (2 - max.log10().floor() as i32).clamp(0, 3) as usize
}

/// `v` with an SI prefix and a unit: `503.8 TFLOP/s`, `1.79 TB/s`, `12 FLOP/s`.
pub(crate) fn with_unit(v: f64, sig: i32, unit: &str) -> String {
    let c = compact_sig(v, sig);
    match c.chars().last() {
        Some(p) if "kMGTP".contains(p) => format!("{} {p}{unit}", &c[..c.len() - 1]),
        _ => format!("{c} {unit}"),
    }
}

// ---------------------------------------------------------------------------------------
// Axes

/// How an axis maps data to position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scale {
    Linear,
    /// Powers of two (concurrency, batch).
    Log2,
    /// Powers of ten (FLOP/s, intensity).
    Log10,
}

/// One axis: its scale and its range in transformed units (the exponent on a log axis).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Axis {
    pub scale: Scale,
    pub lo: f64,
    pub hi: f64,
}

/// A "nice" step (1, 2, 2.5 or 5 times a power of ten) near `raw`.
pub(crate) fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

impl Axis {
    /// The value in axis units; `None` where it cannot be shown (not finite, or not
    /// positive on a log axis).
    pub fn t(&self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        match self.scale {
            Scale::Linear => Some(v),
            Scale::Log2 if v > 0.0 => Some(v.log2()),
            Scale::Log10 if v > 0.0 => Some(v.log10()),
            _ => None,
        }
    }

    /// Whether `v` can be shown on an axis of this scale.
    pub fn accepts(scale: Scale, v: f64) -> bool {
        v.is_finite() && (scale == Scale::Linear || v > 0.0)
    }

    pub fn inv(&self, t: f64) -> f64 {
        match self.scale {
            Scale::Linear => t,
            Scale::Log2 => t.exp2(),
            Scale::Log10 => 10f64.powf(t),
        }
    }

    /// An axis covering `values` (already filtered to ones the scale accepts). Linear axes
    /// start at zero when `zero` is set and all values are on one side of it, and end on a
    /// tick; log-10 axes cover whole decades; log-2 axes get a little room at the ends so
    /// the first and last points are not on the frame.
    pub fn fit(scale: Scale, values: &[f64], zero: bool) -> Axis {
        let vals: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| Axis::accepts(scale, *v))
            .collect();
        let (mut lo, mut hi) = match (
            vals.iter().copied().reduce(f64::min),
            vals.iter().copied().reduce(f64::max),
        ) {
            (Some(a), Some(b)) => (a, b),
            _ => match scale {
                Scale::Linear => (0.0, 1.0),
                _ => (1.0, 10.0),
            },
        };
        match scale {
            Scale::Linear => {
                if zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if hi - lo <= 0.0 {
                    let d = if lo.abs() > 0.0 { lo.abs() * 0.1 } else { 1.0 };
                    lo -= d;
                    hi += d;
                }
                let pad = (hi - lo) * 0.04;
                if !zero {
                    // A free axis (x): a little room at both ends, no rounding.
                    return Axis {
                        scale,
                        lo: lo - pad,
                        hi: hi + pad,
                    };
                }
                // A value axis from zero: end on a tick, a little above the largest value.
                if lo != 0.0 {
                    lo -= pad;
                }
                if hi != 0.0 {
                    hi += pad;
                }
                let step = nice_step((hi - lo) / 6.0);
                Axis {
                    scale,
                    lo: (lo / step).floor() * step,
                    hi: (hi / step).ceil() * step,
                }
            }
            Scale::Log10 => {
                let (a, b) = (lo.log10(), hi.log10());
                let pad = ((b - a) * 0.04).max(0.05);
                Axis {
                    scale,
                    lo: a - pad,
                    hi: b + pad,
                }
            }
            Scale::Log2 => {
                let (a, b) = (lo.log2(), hi.log2());
                let pad = ((b - a) * 0.04).max(0.25);
                Axis {
                    scale,
                    lo: a - pad,
                    hi: b + pad,
                }
            }
        }
    }

    /// A log-10 axis from the decade below the smallest positive value to the decade above
    /// the largest (the classic roofline frame).
    pub fn decades(values: &[f64]) -> Axis {
        let logs: Vec<f64> = values
            .iter()
            .filter(|v| Axis::accepts(Scale::Log10, **v))
            .map(|v| v.log10())
            .collect();
        let lo = logs.iter().copied().reduce(f64::min).unwrap_or(0.0);
        let hi = logs.iter().copied().reduce(f64::max).unwrap_or(1.0);
        let (lo, hi) = ((lo - 0.02).floor(), (hi + 0.02).ceil());
        Axis {
            scale: Scale::Log10,
            lo,
            hi: if hi > lo { hi } else { lo + 1.0 },
        }
    }

    /// Raise the top, if needed, so data up to `data_hi` (axis units) stays out of the top
    /// `frac` of the height: room for labels drawn above the data.
    pub fn with_headroom(self, data_hi: f64, frac: f64) -> Axis {
        let frac = frac.clamp(0.0, 0.6);
        let hi = self.lo + (data_hi - self.lo) / (1.0 - frac);
        if hi <= self.hi {
            return self;
        }
        match self.scale {
            Scale::Linear => {
                let step = nice_step((hi - self.lo) / 6.0);
                Axis {
                    hi: (hi / step).ceil() * step,
                    ..self
                }
            }
            _ => Axis { hi, ..self },
        }
    }

    /// Major ticks (axis units), at most about `max` of them.
    pub fn ticks(&self, max: usize) -> Vec<f64> {
        let max = max.max(2);
        let eps = (self.hi - self.lo).abs() * 1e-9;
        match self.scale {
            Scale::Linear => {
                let mut step = nice_step((self.hi - self.lo) / max as f64);
                while ((self.hi - self.lo) / step).floor() as usize + 1 > max + 1 {
                    step = nice_step(step * 1.01);
                }
                let first = (self.lo / step - 1e-9).ceil() as i64;
                let last = (self.hi / step + 1e-9).floor() as i64;
                (first..=last).map(|k| k as f64 * step).collect()
            }
            Scale::Log2 | Scale::Log10 => {
                let first = (self.lo - eps).ceil() as i64;
                let last = (self.hi + eps).floor() as i64;
                let n = (last - first + 1).max(0) as usize;
                if self.scale == Scale::Log10 && n <= 3 {
                    // Up to three powers in range: ticks at 1, 2 and 5 times each power
                    // too, when there is room for them (always under two powers).
                    let mut out = Vec::new();
                    for e in (first - 1)..=last {
                        for m in [1.0f64, 2.0, 5.0] {
                            let t = e as f64 + m.log10();
                            if t >= self.lo - eps && t <= self.hi + eps {
                                out.push(t);
                            }
                        }
                    }
                    if out.len() <= max || n < 2 {
                        return out;
                    }
                }
                let every = n.div_ceil(max).max(1) as i64;
                (first..=last)
                    .filter(|e| (e - first) % every == 0)
                    .map(|e| e as f64)
                    .collect()
            }
        }
    }

    /// Minor grid positions: 2..9 times each power on a log-10 axis, skipped powers on a
    /// log-2 axis, nothing on a linear one.
    pub fn minor_ticks(&self, major: &[f64]) -> Vec<f64> {
        let eps = 1e-9;
        match self.scale {
            Scale::Linear => Vec::new(),
            Scale::Log10 => {
                let mut out = Vec::new();
                for e in (self.lo.floor() as i64)..=(self.hi.ceil() as i64) {
                    for m in 2..=9 {
                        let t = e as f64 + (m as f64).log10();
                        if t > self.lo + eps
                            && t < self.hi - eps
                            && !major.iter().any(|x| (x - t).abs() < 1e-6)
                        {
                            out.push(t);
                        }
                    }
                }
                out
            }
            Scale::Log2 => ((self.lo.ceil() as i64)..=(self.hi.floor() as i64))
                .map(|e| e as f64)
                .filter(|t| !major.iter().any(|x| (x - t).abs() < 1e-6))
                .collect(),
        }
    }

    /// Tick label for a tick at `t` (axis units).
    pub fn label(&self, t: f64) -> String {
        let v = self.inv(t);
        match self.scale {
            Scale::Linear => compact(if v.abs() < 1e-12 { 0.0 } else { v }),
            Scale::Log10 => compact_sig(v, 3),
            Scale::Log2 => {
                let r = v.round();
                if (v - r).abs() < 1e-6 * v.max(1.0) && (1.0..1e4).contains(&r) {
                    format!("{}", r as i64)
                } else {
                    compact_sig(v, 3)
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The plot frame

/// A pixel rectangle, `x0 < x1`, `y0 < y1` (y grows downwards).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PxRect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl PxRect {
    pub fn new(x0: i32, y0: i32, x1: i32, y1: i32) -> PxRect {
        PxRect {
            x0: x0.min(x1),
            y0: y0.min(y1),
            x1: x0.max(x1),
            y1: y0.max(y1),
        }
    }
    pub fn width(&self) -> i32 {
        self.x1 - self.x0
    }
    pub fn height(&self) -> i32 {
        self.y1 - self.y0
    }
    pub fn overlaps(&self, o: &PxRect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
    pub fn contains_rect(&self, o: &PxRect) -> bool {
        o.x0 >= self.x0 && o.x1 <= self.x1 && o.y0 >= self.y0 && o.y1 <= self.y1
    }
    pub fn contains(&self, (x, y): (i32, i32)) -> bool {
        x >= self.x0 && x <= self.x1 && y >= self.y0 && y <= self.y1
    }
    pub fn grow(&self, d: i32) -> PxRect {
        PxRect::new(self.x0 - d, self.y0 - d, self.x1 + d, self.y1 + d)
    }
}

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

/// Space around the plot area, pixels.
pub(crate) struct Margins {
    /// Title (and anything else) above.
    pub top: i32,
    /// Notes below the axis title.
    pub bottom: i32,
    /// A legend outside on the right.
    pub right: i32,
    /// Tick labels under the x axis.
    pub x_ticks: i32,
    /// Widest y tick label.
    pub y_ticks: i32,
    pub has_x_title: bool,
    pub has_y_title: bool,
}

/// The plot rectangle inside an image of `size` with these margins.
pub(crate) fn plot_rect(size: (u32, u32), m: &Margins) -> PxRect {
    let (w, h) = (size.0 as i32, size.1 as i32);
    let y_title = if m.has_y_title {
        line_height(AXIS_TITLE_SIZE) + 12
    } else {
        0
    };
    let x_title = if m.has_x_title {
        line_height(AXIS_TITLE_SIZE) + 10
    } else {
        0
    };
    let x0 = 20 + y_title + m.y_ticks + 12;
    let x1 = w - 30 - m.right;
    let y0 = m.top;
    let y1 = h - m.bottom - x_title - m.x_ticks - 14;
    PxRect::new(x0, y0, x1.max(x0 + 10), y1.max(y0 + 10))
}

/// Widest label among `labels` at tick size.
pub(crate) fn widest(labels: &[String], size: f64) -> i32 {
    labels
        .iter()
        .map(|l| text_width(l, size))
        .max()
        .unwrap_or(0)
}

/// Numeric ticks for an axis, thinned until their labels have room (`along` is the axis
/// length in pixels; `horizontal` is true for the x axis).
pub(crate) fn fit_ticks(axis: &Axis, along: i32, horizontal: bool) -> Vec<f64> {
    let mut max = if horizontal {
        (along / 70).clamp(2, 14) as usize
    } else {
        (along / 75).clamp(2, 10) as usize
    };
    loop {
        let ticks = axis.ticks(max);
        let labels: Vec<String> = ticks.iter().map(|t| axis.label(*t)).collect();
        let need = if horizontal {
            widest(&labels, TICK_SIZE) + 14
        } else {
            line_height(TICK_SIZE) * 2
        };
        let span = along as f64 / (axis.hi - axis.lo);
        let gap = ticks
            .windows(2)
            .map(|w| ((w[1] - w[0]) * span) as i32)
            .min()
            .unwrap_or(i32::MAX);
        if gap >= need || max <= 2 {
            return ticks;
        }
        max -= 1;
    }
}

/// White background, grid, frame, numeric tick labels and axis titles. `x_ticks` empty
/// leaves the x axis without numeric labels (for category axes).
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
    let r = plot.r;
    let x_minor = plot.xa.minor_ticks(x_ticks);
    let y_minor = plot.ya.minor_ticks(y_ticks);
    if x_grid {
        for t in &x_minor {
            let x = plot.px(*t).round() as i32;
            root.draw(&PathElement::new(vec![(x, r.y0), (x, r.y1)], GRID_MINOR))?;
        }
    }
    for t in &y_minor {
        let y = plot.py(*t).round() as i32;
        root.draw(&PathElement::new(vec![(r.x0, y), (r.x1, y)], GRID_MINOR))?;
    }
    if x_grid {
        for t in x_ticks {
            let x = plot.px(*t).round() as i32;
            root.draw(&PathElement::new(vec![(x, r.y0), (x, r.y1)], GRID))?;
        }
    }
    for t in y_ticks {
        let y = plot.py(*t).round() as i32;
        root.draw(&PathElement::new(vec![(r.x0, y), (r.x1, y)], GRID))?;
    }
    root.draw(&Rectangle::new(
        [(r.x0, r.y0), (r.x1, r.y1)],
        ShapeStyle {
            color: AXIS.to_rgba(),
            filled: false,
            stroke_width: 1,
        },
    ))?;
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
    root.draw(&Rectangle::new(
        [(r.x0, r.y0), (r.x1, r.y1)],
        ShapeStyle {
            color: GRID.to_rgba(),
            filled: false,
            stroke_width: 1,
        },
    ))?;
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

// ---------------------------------------------------------------------------------------
// Category axes

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

// ---------------------------------------------------------------------------------------
// Markers and lines

/// Point marker shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Circle,
    Diamond,
    Square,
    TriangleUp,
    TriangleDown,
    Cross,
}

/// Marker shapes for measured series, in order.
pub(crate) const MEASURED_SHAPES: [Shape; 6] = [
    Shape::Diamond,
    Shape::Square,
    Shape::TriangleUp,
    Shape::Cross,
    Shape::TriangleDown,
    Shape::Circle,
];

/// Draw a marker of "radius" `r` at `c`, filled with `fill` and outlined with `outline`.
pub(crate) fn draw_marker<DB: DrawingBackend>(
    root: &Area<DB>,
    shape: Shape,
    c: (i32, i32),
    r: i32,
    fill: RGBAColor,
    outline: Option<RGBColor>,
) -> Drawn<DB> {
    let (x, y) = c;
    let poly: Vec<(i32, i32)> = match shape {
        Shape::Circle => {
            root.draw(&Circle::new(c, r, fill.filled()))?;
            if let Some(o) = outline {
                root.draw(&Circle::new(c, r, o.stroke_width(1)))?;
            }
            return Ok(());
        }
        Shape::Cross => {
            let st = |col: RGBAColor, w: u32| ShapeStyle {
                color: col,
                filled: false,
                stroke_width: w,
            };
            if let Some(o) = outline {
                for seg in [
                    [(x - r, y - r), (x + r, y + r)],
                    [(x - r, y + r), (x + r, y - r)],
                ] {
                    root.draw(&PathElement::new(seg.to_vec(), st(o.to_rgba(), 5)))?;
                }
            }
            for seg in [
                [(x - r, y - r), (x + r, y + r)],
                [(x - r, y + r), (x + r, y - r)],
            ] {
                root.draw(&PathElement::new(seg.to_vec(), st(fill, 3)))?;
            }
            return Ok(());
        }
        Shape::Diamond => {
            let r = r + 1;
            vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)]
        }
        Shape::Square => vec![
            (x - r, y - r),
            (x + r, y - r),
            (x + r, y + r),
            (x - r, y + r),
        ],
        Shape::TriangleUp => vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
        Shape::TriangleDown => vec![(x - r - 1, y - r), (x + r + 1, y - r), (x, y + r + 1)],
    };
    root.draw(&Polygon::new(poly.clone(), fill.filled()))?;
    if let Some(o) = outline {
        let mut closed = poly.clone();
        closed.push(poly[0]);
        root.draw(&PathElement::new(closed, o.stroke_width(1)))?;
    }
    Ok(())
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
    root.draw(&Rectangle::new(
        [(r.x0, r.y0), (r.x1, r.y1)],
        ShapeStyle {
            color: GRID.to_rgba(),
            filled: false,
            stroke_width: 1,
        },
    ))
}

// ---------------------------------------------------------------------------------------
// Legends

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
        match e.swatch {
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
        let tx = if matches!(e.swatch, Swatch::None) {
            sx
        } else {
            sx + SWATCH_W + 8
        };
        let color = if matches!(e.swatch, Swatch::None) {
            MUTED
        } else {
            INK
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

/// Of `candidates`, the one covering the fewest of `points` and none of `avoid`
/// (earlier candidates win ties).
pub(crate) fn least_covered(
    candidates: &[PxRect],
    points: &[(i32, i32)],
    avoid: &[PxRect],
) -> PxRect {
    let score = |r: &PxRect| {
        let hits = points.iter().filter(|p| r.grow(4).contains(**p)).count();
        let blocked = avoid.iter().filter(|a| a.overlaps(r)).count();
        blocked * 1_000_000 + hits
    };
    let mut best = candidates[0];
    let mut best_score = score(&best);
    for c in &candidates[1..] {
        let s = score(c);
        if s < best_score {
            best = *c;
            best_score = s;
        }
    }
    best
}

/// Points every few pixels along the segments of a polyline (to test what a box covers).
pub(crate) fn densify(points: &[(i32, i32)], step: f64) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let d = (((b.0 - a.0) as f64).powi(2) + ((b.1 - a.1) as f64).powi(2)).sqrt();
        let n = (d / step).ceil().max(1.0) as i32;
        for i in 0..n {
            let f = i as f64 / n as f64;
            out.push((
                (a.0 as f64 + f * (b.0 - a.0) as f64).round() as i32,
                (a.1 as f64 + f * (b.1 - a.1) as f64).round() as i32,
            ));
        }
    }
    if let Some(l) = points.last() {
        out.push(*l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_numbers() {
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(1500.0), "1.5k");
        assert_eq!(compact(10_000.0), "10k");
        assert_eq!(compact(2.5e12), "2.5T");
        assert_eq!(compact(0.25), "0.25");
        assert_eq!(compact(999.99), "1k");
        assert_eq!(compact_sig(503.8e12, 3), "504T");
        assert_eq!(compact(-2000.0), "-2k");
        assert_eq!(with_unit(1.792e12, 3, "B/s"), "1.79 TB/s");
        assert_eq!(with_unit(12.0, 3, "FLOP/s"), "12 FLOP/s");
    }

    #[test]
    fn log10_axis_covers_whole_decades_with_ticks_on_powers() {
        let a = Axis::decades(&[0.6, 3000.0, -1.0]);
        assert_eq!((a.lo, a.hi), (-1.0, 4.0));
        assert_eq!(a.ticks(10), vec![-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(a.label(3.0), "1k");
        assert_eq!(a.label(-1.0), "0.1");
    }

    #[test]
    fn log2_axis_labels_powers_of_two() {
        let a = Axis::fit(Scale::Log2, &[1.0, 512.0], false);
        let t = a.ticks(12);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(t.last(), Some(&9.0));
        assert_eq!(a.label(9.0), "512");
        // Thinned to every other power when asked for fewer labels.
        assert_eq!(a.ticks(5).len(), 5);
    }

    #[test]
    fn printed_values_share_decimals_set_by_the_largest() {
        assert_eq!(decimals_for(&[4.9, 80.5]), 1);
        assert_eq!(decimals_for(&[0.38, 1.37]), 2);
        assert_eq!(decimals_for(&[1500.0, 20.0]), 0);
        assert_eq!(decimals_for(&[]), 0);
    }

    #[test]
    fn free_linear_axis_is_padded_not_rounded() {
        let a = Axis::fit(Scale::Linear, &[10.0, 200.0], false);
        assert!(a.lo < 10.0 && a.lo > 0.0, "{a:?}");
        assert!(a.hi > 200.0 && a.hi < 220.0, "{a:?}");
    }

    #[test]
    fn linear_axis_starts_at_zero_and_ends_on_a_tick() {
        let a = Axis::fit(Scale::Linear, &[3.0, 87.0], true);
        assert_eq!(a.lo, 0.0);
        let t = a.ticks(8);
        assert_eq!(t.first(), Some(&0.0));
        assert!((t.last().unwrap() - a.hi).abs() < 1e-9, "{t:?} {a:?}");
        assert!(a.hi >= 87.0);
    }

    #[test]
    fn unknown_categories_get_distinct_colours_after_the_fixed_ones() {
        let p = category_palette(["zeta", "moe", "gemm", "zeta", "eta"]);
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["gemm", "moe", "zeta", "eta"]);
        assert_ne!(p[2].1, p[3].1);
        assert_eq!(p[0].1, category_color("gemm"));
    }

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
