//! Where things go on the image, in pixels: rectangles, the margins around the plot area,
//! and choosing the spot that covers the least data.
//!
//! Charts decide placement (of the plot area, legends and labels) before drawing anything;
//! this is the arithmetic they share for it, with no drawing in it.

use super::font::line_height;
use super::text::AXIS_TITLE_SIZE;

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
