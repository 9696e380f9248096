//! The roofline of one design point on one GPU: attainable FLOP/s against arithmetic
//! intensity on log-log axes, with every operator of the step placed where it ran.
//!
//! Roofs: the memory roof (peak DRAM bandwidth × intensity) and one flat compute roof per
//! dtype the GPU has a dense peak for; dtypes with the same peak share a roof. The ridge
//! point of each roof (peak ÷ bandwidth) is marked and labelled. Each operator with FLOPs
//! sits at (its FLOP/byte, its FLOPs ÷ kernel time per call), coloured by category, its
//! marker area proportional to its share of the step (summed over the layers that run it);
//! the largest few are named. Operators without FLOPs (collectives, pure copies) have no
//! place on a roofline: a note under the chart lists them with their share of the step.

use super::{
    axis::*, canvas::*, font::*, layout::*, legend::*, marker::*, numbers::*, palette::*, text::*,
};
use super::{render_svg, write_chart, Chart};
use crate::error::Result;
use crate::predict::{OpRow, Prediction};
use crate::spec::{GpuSpec, MathDtype};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use std::path::Path;

/// Image size of the roofline, pixels.
pub const SIZE: (u32, u32) = (1600, 900);

/// Operators named on the chart, at most.
const LABELLED: usize = 7;

/// Write the roofline of `p` on `gpu` to `path` (`.svg` or `.png`).
pub fn roofline(p: &Prediction, gpu: &GpuSpec, path: &Path) -> Result<()> {
    write_chart(&Roofline { p, gpu }, path)
}

/// The roofline of `p` on `gpu` as an SVG document.
pub fn render_svg_string(p: &Prediction, gpu: &GpuSpec) -> Result<String> {
    render_svg(&Roofline { p, gpu })
}

struct Roofline<'a> {
    p: &'a Prediction,
    gpu: &'a GpuSpec,
}

/// An operator placed on the chart.
struct OpPoint<'a> {
    op: &'a OpRow,
    /// FLOP per byte.
    ai: f64,
    /// Achieved FLOP/s per call.
    perf: f64,
    /// Fraction of the step's time (all calls).
    share: f64,
}

/// The compute roofs: dtype names sharing a dense peak, and the peak in FLOP/s, lowest first.
fn roofs(gpu: &GpuSpec) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for d in MathDtype::ALL {
        let Some(peak) = gpu
            .peak(d)
            .map(|p| p.0)
            .filter(|p| p.is_finite() && *p > 0.0)
        else {
            continue;
        };
        match out
            .iter_mut()
            .find(|(_, q)| (q - peak).abs() <= 1e-3 * peak)
        {
            Some((names, _)) => {
                names.push_str(" / ");
                names.push_str(d.name());
            }
            None => out.push((d.name().to_string(), peak)),
        }
    }
    out.sort_by(|a, b| a.1.total_cmp(&b.1));
    out
}

/// An operator's name placed beside its marker.
struct OpLabel {
    rect: PxRect,
    /// Marker centre and radius, pixels.
    at: (i32, i32),
    radius: i32,
    text: String,
    /// Far enough from the marker to need a leader line.
    leader: bool,
}

fn op_label(op: &OpRow, share: f64) -> String {
    let count = if op.count > 1 {
        format!(" ×{}", op.count)
    } else {
        String::new()
    };
    format!("{}{count} · {:.1}%", op.name, share * 100.0)
}

/// Marker radius for a share of the step: area proportional to the share.
fn radius(share: f64) -> i32 {
    (3.0 + 40.0 * share.max(0.0).sqrt()).min(32.0).round() as i32
}

/// The note listing the operators left off the chart.
fn excluded_note(excluded: &[&OpRow], tpot_ms: f64) -> Option<String> {
    if excluded.is_empty() {
        return None;
    }
    // Merge the rows of one op name (dense and MoE layers list it separately).
    let mut merged: Vec<(&str, u32, f64)> = Vec::new();
    for op in excluded {
        match merged.iter_mut().find(|(n, _, _)| *n == op.name) {
            Some(m) => {
                m.1 += op.count;
                m.2 += op.total_ms;
            }
            None => merged.push((op.name, op.count, op.total_ms)),
        }
    }
    merged.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(b.0)));
    let ms: f64 = merged.iter().map(|m| m.2).sum();
    let share = if tpot_ms > 0.0 {
        format!(", {:.1}% of the step", 100.0 * ms / tpot_ms)
    } else {
        String::new()
    };
    let names: Vec<String> = merged
        .iter()
        .map(|(n, c, _)| {
            if *c > 1 {
                format!("{n} ×{c}")
            } else {
                n.to_string()
            }
        })
        .collect();
    Some(format!(
        "Not on the roofline (no FLOPs or no kernel time): {} ops, {} ms{share}: {}.",
        merged.len(),
        sig_digits(ms, 3),
        names.join(", ")
    ))
}

impl Chart for Roofline<'_> {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    /// Title, notes, then the layers bottom to top: frame, roofs, operator markers, the
    /// memory roof's label, operator names, legend. Each label is placed clear of what was
    /// placed before it, so the order is also the order of precedence.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let (p, gpu) = (self.p, self.gpu);
        root.fill(&WHITE_BG)?;
        let (title, subtitle) = titles(p, gpu);
        let top = draw_title(root, &title, Some(&subtitle))?;
        let (points, excluded) = split_ops(p);
        let notes = notes(p, &points, &excluded);
        let (w, _) = root.dim_in_pixel();
        let bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        let bw = gpu.memory_bandwidth.0;
        let roofs = roofs(gpu);
        if !(bw.is_finite() && bw > 0.0) || roofs.is_empty() {
            return draw_no_roofs(root, gpu, top, bottom);
        }
        let (xa, ya) = axes(&points, &roofs, bw);
        let plot = draw_frame(root, xa, ya, top, bottom)?;
        let RoofMarks {
            lines: roof_lines,
            labels: mut obstacles,
        } = draw_roofs(root, &plot, bw, &roofs)?;
        let placed = draw_ops(root, &plot, &points)?;
        let mem_box = draw_memory_label(root, &plot, bw, &roofs, &placed, &obstacles)?;
        obstacles.push(mem_box);

        let entries = legend_entries(&placed);
        let legend_rect = legend_rect(plot.r, &entries, &roof_lines, &placed, &obstacles);
        if !entries.is_empty() {
            obstacles.push(legend_rect);
        }
        for label in place_op_labels(plot.r, &placed, &roof_lines, &mut obstacles) {
            draw_op_label(root, &label)?;
        }
        if !entries.is_empty() {
            draw_legend(root, &entries, (legend_rect.x0, legend_rect.y0), true)?;
        }
        Ok(())
    }
}

/// Title and subtitle: the design point, and the GPU with the step time it predicts.
fn titles(p: &Prediction, gpu: &GpuSpec) -> (String, String) {
    let title = format!(
        "Roofline: {} on {}, {}, batch {}, context {}",
        p.model, p.system, p.parallel, p.batch, p.context
    );
    let subtitle = format!(
        "one {} · TPOT {} ms ({} parameters)",
        gpu.full_name,
        sig_digits(p.tpot_ms, 4),
        p.provenance
    );
    (title, subtitle)
}

/// The operators with a place on the roofline (FLOPs, bytes and kernel time), largest share
/// first so that small markers are drawn on top of large ones, and those without.
fn split_ops(p: &Prediction) -> (Vec<OpPoint<'_>>, Vec<&OpRow>) {
    let mut points: Vec<OpPoint> = Vec::new();
    let mut excluded: Vec<&OpRow> = Vec::new();
    for op in &p.ops {
        let time = op.time_us * 1e-6;
        if op.flops > 0.0 && op.bytes > 0.0 && time > 0.0 && op.flops.is_finite() {
            points.push(OpPoint {
                op,
                ai: op.flops / op.bytes,
                perf: op.flops / time,
                share: if p.tpot_ms > 0.0 {
                    op.total_ms / p.tpot_ms
                } else {
                    0.0
                },
            });
        } else {
            excluded.push(op);
        }
    }
    points.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.op.name.cmp(b.op.name)));
    (points, excluded)
}

/// The notes under the chart: how to read a point, the operators left off, and why no
/// operator is placed when none is.
fn notes(p: &Prediction, points: &[OpPoint], excluded: &[&OpRow]) -> Vec<String> {
    let mut notes = vec![String::from(
        "Each point is one operator: achieved FLOP/s = FLOPs ÷ kernel time per call (fixed \
         per-kernel costs excluded); marker area ∝ its share of the step time over all \
         layers that run it.",
    )];
    notes.extend(excluded_note(excluded, p.tpot_ms));
    if points.is_empty() {
        notes.push(if p.ops.is_empty() {
            "The prediction lists no operators: only the roofs are drawn.".into()
        } else {
            "No operator has FLOPs to place on the roofline: only the roofs are drawn.".into()
        });
    }
    notes
}

/// An empty frame with a note, for a GPU without the figures a roofline is drawn from.
fn draw_no_roofs<DB: DrawingBackend>(
    root: &Area<DB>,
    gpu: &GpuSpec,
    top: i32,
    bottom: i32,
) -> Drawn<DB> {
    let m = Margins {
        top,
        bottom,
        right: 0,
        x_ticks: 0,
        y_ticks: 0,
        has_x_title: false,
        has_y_title: false,
    };
    draw_empty(
        root,
        plot_rect(SIZE, &m),
        &format!(
            "{}: no memory bandwidth or dense peak to draw a roofline from",
            gpu.name
        ),
    )
}

/// Log-log axes over every operator and the roofs: from well left of the lowest ridge
/// point (where the memory roof starts) to right of the highest, and up past the top roof.
fn axes(points: &[OpPoint], roofs: &[(String, f64)], bw: f64) -> (Axis, Axis) {
    let ridge_lo = roofs[0].1 / bw;
    let ridge_hi = roofs[roofs.len() - 1].1 / bw;
    let peak_hi = roofs[roofs.len() - 1].1;
    let mut xs: Vec<f64> = points.iter().map(|q| q.ai).collect();
    xs.extend([ridge_lo / 30.0, ridge_hi * 6.0]);
    let xa = Axis::decades(&xs);
    let mut ys: Vec<f64> = points.iter().map(|q| q.perf).collect();
    ys.extend([bw * xa.inv(xa.lo), peak_hi * 2.0]);
    (xa, Axis::decades(&ys))
}

/// The plot area between the title (`top`) and the notes (`bottom`), sized for the tick
/// labels of `ya`, with its grid, frame, ticks and axis titles drawn.
fn draw_frame<DB: DrawingBackend>(
    root: &Area<DB>,
    xa: Axis,
    ya: Axis,
    top: i32,
    bottom: i32,
) -> Drawn<DB, Plot> {
    let y_labels: Vec<String> = ya.ticks(12).iter().map(|t| ya.label(*t)).collect();
    let m = Margins {
        top,
        bottom,
        right: 0,
        x_ticks: line_height(TICK_SIZE) + 12,
        y_ticks: widest(&y_labels, TICK_SIZE),
        has_x_title: true,
        has_y_title: true,
    };
    let r = plot_rect(SIZE, &m);
    let plot = Plot { r, xa, ya };
    let x_ticks = fit_ticks(&xa, r.width(), true);
    let y_ticks = fit_ticks(&ya, r.height(), false);
    draw_axes(
        root,
        &plot,
        &x_ticks,
        &y_ticks,
        true,
        "Arithmetic intensity (FLOP/byte)",
        "Attainable performance (FLOP/s)",
        r.y1 + m.x_ticks + 6,
    )?;
    Ok(plot)
}

/// What the roofs cover, for the labels and the legend placed later to keep clear of.
struct RoofMarks {
    /// Points every 3 px along every roof.
    lines: Vec<(i32, i32)>,
    /// Boxes of the peak and ridge labels.
    labels: Vec<PxRect>,
}

/// The memory roof in axis units (log10, where it is y = log10(bw) + x): from the left
/// edge of the plot to the ridge point of the highest compute roof.
fn memory_roof(xa: &Axis, bw: f64, roofs: &[(String, f64)]) -> [(f64, f64); 2] {
    let peak_hi = roofs[roofs.len() - 1].1;
    let ridge_hi = peak_hi / bw;
    [
        (xa.lo, bw.log10() + xa.lo),
        (ridge_hi.log10(), peak_hi.log10()),
    ]
}

/// The memory roof, and each compute roof with its peak labelled at the right edge and its
/// ridge point marked and labelled above and left of it, where the memory roof has
/// already dropped away.
fn draw_roofs<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    bw: f64,
    roofs: &[(String, f64)],
) -> Drawn<DB, RoofMarks> {
    let mem = memory_roof(&plot.xa, bw, roofs);
    let mem_px = vec![plot.pt(mem[0]), plot.pt(mem[1])];
    let mut lines = densify(&mem_px, 3.0);
    root.draw(&PathElement::new(mem_px, INK.stroke_width(2)))?;
    let mut labels = Vec::new();
    for (names, peak) in roofs {
        let a = plot.pt(((peak / bw).log10(), peak.log10()));
        let b = plot.pt((plot.xa.hi, peak.log10()));
        root.draw(&PathElement::new(vec![a, b], INK.stroke_width(2)))?;
        lines.extend(densify(&[a, b], 3.0));
        let label = format!("{names} dense peak {}", with_unit(*peak, 4, "FLOP/s"));
        labels.push(draw_label_above_left(
            root,
            &label,
            (plot.r.x1 - 10, a.1 - 5),
            INK,
        )?);
        root.draw(&Circle::new(a, 5, INK.filled()))?;
        let ridge = format!("ridge {} FLOP/B", sig_digits(peak / bw, 3));
        labels.push(draw_label_above_left(
            root,
            &ridge,
            (a.0 - 8, a.1 - 7),
            MUTED,
        )?);
    }
    Ok(RoofMarks { lines, labels })
}

/// `text` with its lower right corner at `at`; returns the box it covers.
fn draw_label_above_left<DB: DrawingBackend>(
    root: &Area<DB>,
    text: &str,
    at: (i32, i32),
    color: RGBColor,
) -> Drawn<DB, PxRect> {
    let (w, h) = text_size(text, LABEL_SIZE);
    draw_text(root, text, at, LABEL_SIZE, color, HPos::Right, VPos::Bottom)?;
    Ok(PxRect::new(at.0 - w, at.1 - h, at.0, at.1))
}

/// An operator's marker as placed on the chart.
struct PlacedOp<'a> {
    /// Centre, pixels.
    at: (i32, i32),
    /// Radius, pixels.
    radius: i32,
    q: &'a OpPoint<'a>,
}

impl PlacedOp<'_> {
    /// The square around the marker.
    fn bbox(&self) -> PxRect {
        let (c, rad) = (self.at, self.radius);
        PxRect::new(c.0 - rad, c.1 - rad, c.0 + rad, c.1 + rad)
    }
}

/// A marker per operator the axes can show, in the order given (largest first).
fn draw_ops<'a, DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    points: &'a [OpPoint<'a>],
) -> Drawn<DB, Vec<PlacedOp<'a>>> {
    let placed: Vec<PlacedOp> = points
        .iter()
        .filter_map(|q| {
            plot.data(q.ai, q.perf).map(|at| PlacedOp {
                at,
                radius: radius(q.share),
                q,
            })
        })
        .collect();
    for m in &placed {
        let color = category_color(m.q.op.category);
        root.draw(&Circle::new(m.at, m.radius, color.mix(0.6).filled()))?;
        root.draw(&Circle::new(
            m.at,
            m.radius,
            darker(color, 0.35).stroke_width(1),
        ))?;
    }
    Ok(placed)
}

/// The memory roof's label: left of and above a point on the roof (where nothing can run),
/// at the first of a few spots along it that no marker covers. Returns its box.
fn draw_memory_label<DB: DrawingBackend>(
    root: &Area<DB>,
    plot: &Plot,
    bw: f64,
    roofs: &[(String, f64)],
    placed: &[PlacedOp],
    obstacles: &[PxRect],
) -> Drawn<DB, PxRect> {
    let label = format!("DRAM {}", with_unit(bw, 3, "B/s"));
    let (mw, mh) = text_size(&label, LABEL_SIZE);
    let mem = memory_roof(&plot.xa, bw, roofs);
    let lbw = bw.log10();
    let spot = |f: f64| {
        let lx = mem[0].0 + f * (mem[1].0 - mem[0].0);
        let lp = plot.pt((lx, lbw + lx));
        PxRect::new(lp.0 - 6 - mw, lp.1 - 6 - mh, lp.0 - 6, lp.1 - 6)
    };
    let marker_boxes: Vec<PxRect> = placed.iter().map(PlacedOp::bbox).collect();
    // Preferred spots first (a third of the way along); the first with room around it
    // wins, else the one with the most.
    let spots = [0.3, 0.4, 0.2, 0.5, 0.15, 0.6, 0.1, 0.7, 0.05];
    let free: Vec<(f64, PxRect)> = spots
        .iter()
        .map(|f| spot(*f))
        .filter(|b| plot.r.contains_rect(b) && obstacles.iter().all(|o| !o.overlaps(b)))
        .map(|b| (clearance(&b, &marker_boxes), b))
        .collect();
    let b = free
        .iter()
        .find(|(c, _)| *c >= 60.0)
        .or_else(|| free.iter().max_by(|a, b| a.0.total_cmp(&b.0)))
        .map(|(_, b)| *b)
        .unwrap_or_else(|| spot(0.3));
    draw_label_above_left(root, &label, (b.x1, b.y1), INK)
}

/// Clearance of a box: pixels to the nearest marker (boxes apart count 0), at most 200.
fn clearance(b: &PxRect, markers: &[PxRect]) -> f64 {
    markers
        .iter()
        .map(|m| {
            let dx = (m.x0 - b.x1).max(b.x0 - m.x1).max(0);
            let dy = (m.y0 - b.y1).max(b.y0 - m.y1).max(0);
            ((dx * dx + dy * dy) as f64).sqrt()
        })
        .fold(f64::INFINITY, f64::min)
        .min(200.0)
}

/// Legend entries: the categories present, in the fixed order, and how to read marker
/// size; none when no operator is placed.
fn legend_entries(placed: &[PlacedOp]) -> Vec<Entry> {
    let cats = category_palette(placed.iter().map(|m| m.q.op.category));
    let mut entries: Vec<Entry> = cats
        .iter()
        .map(|(n, c)| Entry {
            label: n.clone(),
            swatch: Swatch::Marker {
                shape: Shape::Circle,
                color: *c,
            },
        })
        .collect();
    if !entries.is_empty() {
        entries.push(Entry {
            label: "marker area ∝ share of step".into(),
            swatch: Swatch::None,
        });
    }
    entries
}

/// The legend's box: upper left if that is free (it usually is: nothing runs above the
/// memory roof), else the inside corner covering the fewest roof and marker pixels.
fn legend_rect(
    r: PxRect,
    entries: &[Entry],
    roof_lines: &[(i32, i32)],
    placed: &[PlacedOp],
    obstacles: &[PxRect],
) -> PxRect {
    let corners = legend_corners(r, legend_size(entries));
    let mut data_px: Vec<(i32, i32)> = roof_lines.to_vec();
    for PlacedOp {
        at: c, radius: rad, ..
    } in placed
    {
        data_px.extend([
            *c,
            (c.0 - rad, c.1),
            (c.0 + rad, c.1),
            (c.0, c.1 - rad),
            (c.0, c.1 + rad),
        ]);
    }
    least_covered(
        &[corners[1], corners[0], corners[2], corners[3]],
        &data_px,
        obstacles,
    )
}

/// Names of the largest operators (at most [`LABELLED`], each at least 1% of the step),
/// each at the cheapest spot near its marker that crosses no roof and overlaps nothing
/// placed before it: roof labels, the legend, the named markers, earlier names. Adds the
/// named markers and the names to `obstacles`.
fn place_op_labels(
    r: PxRect,
    placed: &[PlacedOp],
    roof_lines: &[(i32, i32)],
    obstacles: &mut Vec<PxRect>,
) -> Vec<OpLabel> {
    let labelled: Vec<&PlacedOp> = placed
        .iter()
        .filter(|m| m.q.share >= 0.01)
        .take(LABELLED)
        .collect();
    obstacles.extend(labelled.iter().map(|m| m.bbox()));
    let inner = r.grow(-4);
    let mut labels: Vec<OpLabel> = Vec::new();
    for m in labelled {
        let text = op_label(m.q.op, m.q.share);
        let (tw, th) = text_size(&text, LABEL_SIZE);
        let spot = label_spots(m, (tw + 8, th + 6)).into_iter().find(|b| {
            inner.contains_rect(b)
                && obstacles.iter().all(|o| !o.overlaps(b))
                && roof_lines.iter().all(|p| !b.grow(2).contains(*p))
        });
        if let Some(b) = spot {
            let (c, rad) = (m.at, m.radius);
            let leader = (b.y0 + b.y1) / 2 - c.1;
            let far = leader.abs() > rad || b.x0 > c.0 + rad + 20 || b.x1 < c.0 - rad - 20;
            labels.push(OpLabel {
                rect: b,
                at: c,
                radius: rad,
                text,
                leader: far,
            });
            obstacles.push(b);
        }
    }
    labels
}

/// Boxes of `(width, height)` for a marker's label, cheapest first. Cost is the distance
/// moved from level with the marker, up or down a box height at a time and outwards in
/// 70 px steps, plus 12 on the left, so right of the marker wins among equals.
fn label_spots(m: &PlacedOp, (lw, bh): (i32, i32)) -> Vec<PxRect> {
    let (c, rad) = (m.at, m.radius);
    let mut cands: Vec<(f64, PxRect)> = Vec::new();
    for k in 0..=12i32 {
        for sign in [1, -1] {
            if k == 0 && sign == -1 {
                continue;
            }
            let dy = sign * k * (bh + 3);
            for extra in [0, 70, 140] {
                for right in [true, false] {
                    let x0 = if right {
                        c.0 + rad + 8 + extra
                    } else {
                        c.0 - rad - 8 - extra - lw
                    };
                    let y0 = c.1 + dy - bh / 2;
                    let cost = (dy.abs() + extra) as f64 + if right { 0.0 } else { 12.0 };
                    cands.push((cost, PxRect::new(x0, y0, x0 + lw, y0 + bh)));
                }
            }
        }
    }
    // Stable: of equal cost, the earlier candidate stays first.
    cands.sort_by(|a, b| a.0.total_cmp(&b.0));
    cands.into_iter().map(|(_, b)| b).collect()
}

/// An operator's name in a box, with a leader line from the marker's edge when the box
/// sits away from the marker.
fn draw_op_label<DB: DrawingBackend>(root: &Area<DB>, label: &OpLabel) -> Drawn<DB> {
    let OpLabel {
        rect: b,
        at: c,
        radius: rad,
        text,
        leader,
    } = label;
    if *leader {
        let (tx, ty) = if b.x0 > c.0 {
            (b.x0, (b.y0 + b.y1) / 2)
        } else {
            (b.x1, (b.y0 + b.y1) / 2)
        };
        // Start the leader at the marker's edge.
        let (dx, dy) = ((tx - c.0) as f64, (ty - c.1) as f64);
        let d = (dx * dx + dy * dy).sqrt().max(1.0);
        let s = (
            c.0 + (dx / d * *rad as f64).round() as i32,
            c.1 + (dy / d * *rad as f64).round() as i32,
        );
        root.draw(&PathElement::new(vec![s, (tx, ty)], MUTED.stroke_width(1)))?;
    }
    draw_boxed_label(root, *b, text, 0.85)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::registry::load_gpu;

    #[test]
    fn equal_peaks_share_a_roof() {
        let gpu = load_gpu("rtx-pro-6000").unwrap();
        let r = roofs(&gpu);
        let names: Vec<&str> = r.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["bf16", "fp8 / int8", "fp4"]);
    }

    #[test]
    fn marker_area_grows_with_share() {
        assert!(radius(0.0) >= 3);
        assert!(radius(0.01) < radius(0.1));
        assert!(radius(1.0) <= 32);
    }
}
