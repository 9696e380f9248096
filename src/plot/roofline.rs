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

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB> {
        let (p, gpu) = (self.p, self.gpu);
        root.fill(&WHITE_BG)?;
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
        let top = draw_title(root, &title, Some(&subtitle))?;

        let bw = gpu.memory_bandwidth.0;
        let roofs = roofs(gpu);
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
        // Largest first, so small markers are drawn on top of large ones.
        points.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.op.name.cmp(b.op.name)));

        let mut notes = vec![String::from(
            "Each point is one operator: achieved FLOP/s = FLOPs ÷ kernel time per call (fixed \
             per-kernel costs excluded); marker area ∝ its share of the step time over all \
             layers that run it.",
        )];
        notes.extend(excluded_note(&excluded, p.tpot_ms));
        if points.is_empty() {
            notes.push(if p.ops.is_empty() {
                "The prediction lists no operators: only the roofs are drawn.".into()
            } else {
                "No operator has FLOPs to place on the roofline: only the roofs are drawn.".into()
            });
        }
        let (w, _) = root.dim_in_pixel();
        let bottom = notes_height(&notes, w as i32);
        draw_notes(root, &notes)?;

        if !(bw.is_finite() && bw > 0.0) || roofs.is_empty() {
            let m = Margins {
                top,
                bottom,
                right: 0,
                x_ticks: 0,
                y_ticks: 0,
                has_x_title: false,
                has_y_title: false,
            };
            return draw_empty(
                root,
                plot_rect(SIZE, &m),
                &format!(
                    "{}: no memory bandwidth or dense peak to draw a roofline from",
                    gpu.name
                ),
            );
        }

        let ridge_lo = roofs[0].1 / bw;
        let ridge_hi = roofs[roofs.len() - 1].1 / bw;
        let peak_hi = roofs[roofs.len() - 1].1;
        let mut xs: Vec<f64> = points.iter().map(|q| q.ai).collect();
        xs.extend([ridge_lo / 30.0, ridge_hi * 6.0]);
        let xa = Axis::decades(&xs);
        let mut ys: Vec<f64> = points.iter().map(|q| q.perf).collect();
        ys.extend([bw * xa.inv(xa.lo), peak_hi * 2.0]);
        let ya = Axis::decades(&ys);

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

        // Roofs, in axis units (log10): the memory roof is y = log10(bw) + x.
        let lbw = bw.log10();
        let mem_start = (xa.lo, lbw + xa.lo);
        let mem_end = (ridge_hi.log10(), peak_hi.log10());
        let mut roof_lines: Vec<(i32, i32)> = densify(&[plot.pt(mem_start), plot.pt(mem_end)], 3.0);
        root.draw(&PathElement::new(
            vec![plot.pt(mem_start), plot.pt(mem_end)],
            INK.stroke_width(2),
        ))?;
        let mut obstacles: Vec<PxRect> = Vec::new();
        for (names, peak) in &roofs {
            let a = plot.pt(((peak / bw).log10(), peak.log10()));
            let b = plot.pt((xa.hi, peak.log10()));
            root.draw(&PathElement::new(vec![a, b], INK.stroke_width(2)))?;
            roof_lines.extend(densify(&[a, b], 3.0));
            let label = format!("{names} dense peak {}", with_unit(*peak, 4, "FLOP/s"));
            let (lw, lh) = text_size(&label, LABEL_SIZE);
            draw_text(
                root,
                &label,
                (r.x1 - 10, a.1 - 5),
                LABEL_SIZE,
                INK,
                HPos::Right,
                VPos::Bottom,
            )?;
            obstacles.push(PxRect::new(
                r.x1 - 10 - lw,
                a.1 - 5 - lh,
                r.x1 - 10,
                a.1 - 5,
            ));
            // Ridge point: marked, and labelled above and left of it, where the memory roof
            // has already dropped away.
            root.draw(&Circle::new(a, 5, INK.filled()))?;
            let ridge = format!("ridge {} FLOP/B", sig_digits(peak / bw, 3));
            let (rw, rh) = text_size(&ridge, LABEL_SIZE);
            draw_text(
                root,
                &ridge,
                (a.0 - 8, a.1 - 7),
                LABEL_SIZE,
                MUTED,
                HPos::Right,
                VPos::Bottom,
            )?;
            obstacles.push(PxRect::new(a.0 - 8 - rw, a.1 - 7 - rh, a.0 - 8, a.1 - 7));
        }
        // Operators.
        let placed: Vec<((i32, i32), i32, &OpPoint)> = points
            .iter()
            .filter_map(|q| plot.data(q.ai, q.perf).map(|c| (c, radius(q.share), q)))
            .collect();
        for (c, rad, q) in &placed {
            let color = category_color(q.op.category);
            root.draw(&Circle::new(*c, *rad, color.mix(0.6).filled()))?;
            root.draw(&Circle::new(*c, *rad, darker(color, 0.35).stroke_width(1)))?;
        }

        // Memory roof label: left of and above a point on the roof (where nothing can run),
        // at the first of a few spots along it that no marker covers.
        let mem_label = format!("DRAM {}", with_unit(bw, 3, "B/s"));
        let (mw, mh) = text_size(&mem_label, LABEL_SIZE);
        let marker_boxes: Vec<PxRect> = placed
            .iter()
            .map(|(c, rad, _)| PxRect::new(c.0 - rad, c.1 - rad, c.0 + rad, c.1 + rad))
            .collect();
        let mem_rect = |f: f64| {
            let lx = mem_start.0 + f * (mem_end.0 - mem_start.0);
            let lp = plot.pt((lx, lbw + lx));
            PxRect::new(lp.0 - 6 - mw, lp.1 - 6 - mh, lp.0 - 6, lp.1 - 6)
        };
        // Clearance of a spot: pixels to the nearest marker (boxes apart count 0).
        let clearance = |b: &PxRect| {
            marker_boxes
                .iter()
                .map(|m| {
                    let dx = (m.x0 - b.x1).max(b.x0 - m.x1).max(0);
                    let dy = (m.y0 - b.y1).max(b.y0 - m.y1).max(0);
                    ((dx * dx + dy * dy) as f64).sqrt()
                })
                .fold(f64::INFINITY, f64::min)
                .min(200.0)
        };
        // Preferred spots first (a third of the way along); the first with room around it
        // wins, else the one with the most.
        let spots = [0.3, 0.4, 0.2, 0.5, 0.15, 0.6, 0.1, 0.7, 0.05];
        let free: Vec<(f64, PxRect)> = spots
            .iter()
            .map(|f| mem_rect(*f))
            .filter(|b| r.contains_rect(b) && obstacles.iter().all(|o| !o.overlaps(b)))
            .map(|b| (clearance(&b), b))
            .collect();
        let mem_box = free
            .iter()
            .find(|(c, _)| *c >= 60.0)
            .or_else(|| free.iter().max_by(|a, b| a.0.total_cmp(&b.0)))
            .map(|(_, b)| *b)
            .unwrap_or_else(|| mem_rect(0.3));
        draw_text(
            root,
            &mem_label,
            (mem_box.x1, mem_box.y1),
            LABEL_SIZE,
            INK,
            HPos::Right,
            VPos::Bottom,
        )?;
        obstacles.push(mem_box);

        // Legend: categories present, in the fixed order, upper left if that is free (it
        // usually is: nothing runs above the memory roof).
        let cats = category_palette(placed.iter().map(|(_, _, q)| q.op.category));
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
        let lsize = legend_size(&entries);
        let corners = legend_corners(r, lsize);
        let mut data_px: Vec<(i32, i32)> = roof_lines.clone();
        for (c, rad, _) in &placed {
            data_px.extend([
                *c,
                (c.0 - rad, c.1),
                (c.0 + rad, c.1),
                (c.0, c.1 - rad),
                (c.0, c.1 + rad),
            ]);
        }
        let legend_rect = least_covered(
            &[corners[1], corners[0], corners[2], corners[3]],
            &data_px,
            &obstacles,
        );
        if !entries.is_empty() {
            obstacles.push(legend_rect);
        }

        // Names of the largest operators, placed where they overlap no other label.
        let labelled: Vec<&((i32, i32), i32, &OpPoint)> = placed
            .iter()
            .filter(|(_, _, q)| q.share >= 0.01)
            .take(LABELLED)
            .collect();
        for (c, rad, _) in &labelled {
            obstacles.push(PxRect::new(c.0 - rad, c.1 - rad, c.0 + rad, c.1 + rad));
        }
        let inner = r.grow(-4);
        let mut labels: Vec<OpLabel> = Vec::new();
        for (c, rad, q) in &labelled {
            let text = op_label(q.op, q.share);
            let (tw, th) = text_size(&text, LABEL_SIZE);
            let (lw, bh) = (tw + 8, th + 6);
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
            cands.sort_by(|a, b| a.0.total_cmp(&b.0));
            let spot = cands.into_iter().map(|(_, b)| b).find(|b| {
                inner.contains_rect(b)
                    && obstacles.iter().all(|o| !o.overlaps(b))
                    && roof_lines.iter().all(|p| !b.grow(2).contains(*p))
            });
            if let Some(b) = spot {
                let leader = (b.y0 + b.y1) / 2 - c.1;
                let far = leader.abs() > *rad || b.x0 > c.0 + rad + 20 || b.x1 < c.0 - rad - 20;
                labels.push(OpLabel {
                    rect: b,
                    at: *c,
                    radius: *rad,
                    text,
                    leader: far,
                });
                obstacles.push(b);
            }
        }
        for OpLabel {
            rect: b,
            at: c,
            radius: rad,
            text,
            leader,
        } in &labels
        {
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
            draw_box(root, *b, 0.85)?;
            draw_text(
                root,
                text,
                (b.x0 + 4, (b.y0 + b.y1) / 2),
                LABEL_SIZE,
                INK,
                HPos::Left,
                VPos::Center,
            )?;
        }
        if !entries.is_empty() {
            draw_legend(root, &entries, (legend_rect.x0, legend_rect.y0), true)?;
        }
        Ok(())
    }
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
