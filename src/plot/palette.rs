//! The charts' colours: ink and grid greys, the series palette, and one fixed colour per
//! breakdown category.
//!
//! A category (gemm, attention, moe, …) is the same colour in every chart so charts side by
//! side compare at a glance; names outside the fixed set still get distinct colours, handed
//! out in order of appearance so the same input always gets the same picture.

use plotters::prelude::*;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_categories_get_distinct_colours_after_the_fixed_ones() {
        let p = category_palette(["zeta", "moe", "gemm", "zeta", "eta"]);
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["gemm", "moe", "zeta", "eta"]);
        assert_ne!(p[2].1, p[3].1);
        assert_eq!(p[0].1, category_color("gemm"));
    }
}
