//! Point markers: the shapes that tell series of measured points apart.
//!
//! Drawn as polygons in pixels rather than with plotters' marker elements, so every shape
//! can take the same fill-plus-outline treatment and a legend swatch matches its points.

use super::canvas::{Area, Drawn};
use plotters::prelude::*;

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
