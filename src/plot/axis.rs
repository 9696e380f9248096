//! Numeric axes: linear, log-2 and log-10 scales, their ranges, and where their ticks go.
//!
//! Pure arithmetic on axis units (the exponent on a log axis), kept apart from drawing so it
//! can be tested alone. Ranges are chosen for the data (whole decades for a roofline, a tick
//! on top for a value axis from zero), and ticks are thinned by measuring their labels
//! ([`fit_ticks`]) so they never overlap.

use super::font::line_height;
use super::numbers::{compact, compact_sig};
use super::text::{widest, TICK_SIZE};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
