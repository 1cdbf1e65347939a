//! The plot area of a cartesian chart: which axis holds the categories, the scales of both
//! axes, where a point lands, and the grid lines, ticks and axis names drawn around the series.

use super::scale::Scale;
use super::series::{Kind, Plotted};
use super::*;

/// The option's axes and how the grid reads them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Axes<'a> {
    x: Option<&'a Value>,
    y: Option<&'a Value>,
    /// Categories run up the y axis and values along x (horizontal bars).
    pub(super) horizontal: bool,
    /// Points sit at category indices (rather than at x values).
    pub(super) by_category: bool,
}

impl<'a> Axes<'a> {
    /// The axes of `opt` for `series`: an axis is of categories when its type or its data says
    /// so; when neither says, x is, unless every series is a scatter or y is.
    pub(super) fn of(opt: &'a Value, series: &[(Kind, &Value)]) -> Self {
        let (x, y) = (first(opt.get("xAxis")), first(opt.get("yAxis")));
        let all_scatter = series.iter().all(|(kind, _)| *kind == Kind::Scatter);
        // Some(true) / Some(false) when the axis says what it is, by its type or its data.
        let said = |a: Option<&Value>| match a.and_then(|a| a.get("type")).and_then(Value::as_str) {
            Some(t) => Some(t == "category" || t == "time"),
            None => a
                .and_then(|a| a.get("data"))
                .is_some_and(Value::is_array)
                .then_some(true),
        };
        let y_cat = said(y) == Some(true);
        let x_cat = said(x).unwrap_or(!all_scatter && !y_cat);
        let horizontal = !x_cat && y_cat;
        Axes {
            x,
            y,
            horizontal,
            by_category: x_cat || horizontal,
        }
    }

    /// The axis of categories (or of x positions).
    pub(super) fn category(&self) -> Option<&'a Value> {
        if self.horizontal { self.y } else { self.x }
    }

    /// The axis of values.
    fn value(&self) -> Option<&'a Value> {
        if self.horizontal { self.x } else { self.y }
    }

    /// Where a `[a, b]` data pair holds its category.
    pub(super) fn category_element(&self) -> usize {
        usize::from(self.horizontal)
    }

    /// Where a `[a, b]` data pair holds its value.
    pub(super) fn value_element(&self) -> usize {
        usize::from(!self.horizontal)
    }
}

/// The plot area, its scales and the labels around it.
pub(super) struct Grid {
    /// Left edge of the plot area.
    x: f64,
    /// Top edge of the plot area.
    y: f64,
    /// Width of the plot area.
    w: f64,
    /// Height of the plot area.
    h: f64,
    pub(super) horizontal: bool,
    pub(super) by_category: bool,
    /// Whether a category sits in the middle of its band (rather than on its edge).
    gap: bool,
    /// The room of one category along its axis.
    pub(super) band: f64,
    /// The value axis.
    val: Scale,
    /// The position axis of a chart without categories.
    pos: Scale,
    val_labels: Vec<String>,
    cat_labels: Vec<String>,
    pos_labels: Vec<String>,
    x_name: Option<String>,
    y_name: Option<String>,
}

impl Grid {
    /// The grid of `plotted` below what `f` holds so far: its scales cover every point, and the
    /// plot area leaves room for the widest tick label and the axis names.
    pub(super) fn lay_out(f: &Frame, axes: &Axes<'_>, plotted: &Plotted) -> Self {
        let (cat_axis, val_axis) = (axes.category(), axes.value());
        let horizontal = axes.horizontal;
        let val_scale = val_axis.and_then(|a| a.get("scale")) == Some(&Value::Bool(true));
        let vals = plotted.points().flat_map(|(s, &(_, lo, hi))| {
            let with_lo = s.kind == Kind::Bar || s.stacked;
            [Some(hi), with_lo.then_some(lo)]
        });
        let val = Scale::new(vals.flatten(), val_axis, !val_scale);
        let pos = Scale::new(
            plotted.points().map(|(_, p)| p.0),
            cat_axis,
            cat_axis.and_then(|a| a.get("scale")) != Some(&Value::Bool(true)),
        );
        let val_labels: Vec<String> = val.ticks.iter().map(|t| val.label(*t, val_axis)).collect();
        let cat_labels: Vec<String> = plotted.labels.iter().map(|l| truncate(l, 18)).collect();
        let pos_labels: Vec<String> = pos.ticks.iter().map(|t| pos.label(*t, cat_axis)).collect();
        let y_label_w = if horizontal {
            widest(&cat_labels)
        } else {
            widest(&val_labels)
        };
        let name_of = |a: Option<&Value>| {
            a.and_then(|a| a.get("name"))
                .and_then(str_of)
                .filter(|s| !s.is_empty())
        };
        let (x_name, y_name) = (name_of(axes.x), name_of(axes.y));
        let left_px = (y_label_w + 16.0).clamp(36.0, 220.0);
        let top = f.top + 10.0 + if y_name.is_some() { 18.0 } else { 0.0 };
        let bottom = 28.0 + if x_name.is_some() { 18.0 } else { 0.0 };
        let w = (f.w - left_px - 28.0).max(40.0);
        let h = (f.h - top - bottom).max(30.0);
        let n_cat = plotted.labels.len().max(1) as f64;
        let gap =
            cat_axis.and_then(|a| a.get("boundaryGap")) != Some(&Value::Bool(false)) || n_cat < 2.0;
        let cat_len = if horizontal { h } else { w };
        let band = if gap {
            cat_len / n_cat
        } else {
            cat_len / (n_cat - 1.0)
        };
        Grid {
            x: left_px,
            y: top,
            w,
            h,
            horizontal,
            by_category: axes.by_category,
            gap,
            band,
            val,
            pos,
            val_labels,
            cat_labels,
            pos_labels,
            x_name,
            y_name,
        }
    }

    /// Where position `p` lies along the category (or x) axis.
    pub(super) fn along(&self, p: f64) -> f64 {
        let off = if self.gap {
            (p + 0.5) * self.band
        } else {
            p * self.band
        };
        match (self.by_category, self.horizontal) {
            (true, true) => self.y + self.h - off,
            (true, false) => self.x + off,
            _ => self.x + self.pos.frac(p) * self.w,
        }
    }

    /// Where value `v` lies across the value axis.
    pub(super) fn across(&self, v: f64) -> f64 {
        if self.horizontal {
            self.x + self.val.frac(v) * self.w
        } else {
            self.y + self.h - self.val.frac(v) * self.h
        }
    }

    /// The picture's coordinates of the value `v` at position `p`.
    pub(super) fn point(&self, p: f64, v: f64) -> (f64, f64) {
        if self.horizontal {
            (self.across(v), self.along(p))
        } else {
            (self.along(p), self.across(v))
        }
    }

    /// `v` kept inside the value axis.
    pub(super) fn clamp(&self, v: f64) -> f64 {
        self.val.clamp(v)
    }

    /// Zero, or the end of the value axis nearest it: where bars and areas start.
    pub(super) fn zero(&self) -> f64 {
        self.val.clamp(0.0)
    }

    /// The width of the plot area.
    pub(super) fn plot_width(&self) -> f64 {
        self.w
    }

    /// Draws the grid lines and the tick labels of both axes (under the series).
    pub(super) fn draw_ticks(&self, f: &mut Frame) {
        let (px, py, pw, ph) = (self.x, self.y, self.w, self.h);
        for (t, l) in self.val.ticks.iter().zip(&self.val_labels) {
            let c = self.across(*t);
            if self.horizontal {
                f.line((c, py), (c, py + ph), GRID);
                f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
            } else {
                f.line((px, c), (px + pw, c), GRID);
                f.text(px - 8.0, c + 4.0, "end", 12.0, AXIS, l);
            }
        }
        if self.by_category {
            let need = if self.horizontal {
                16.0
            } else {
                widest(&self.cat_labels) + 10.0
            };
            let step = (need / self.band.max(1.0)).ceil().max(1.0) as usize;
            for (i, l) in self.cat_labels.iter().enumerate().step_by(step) {
                let c = self.along(i as f64);
                if self.horizontal {
                    f.text(px - 8.0, c + 4.0, "end", 12.0, AXIS, l);
                } else {
                    f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
                }
            }
        } else {
            for (t, l) in self.pos.ticks.iter().zip(&self.pos_labels) {
                let c = self.along(*t);
                f.line((c, py), (c, py + ph), GRID);
                f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
            }
        }
    }

    /// Draws the zero lines and the axis names (over the series).
    pub(super) fn draw_axes(&self, f: &mut Frame) {
        let (px, py, pw, ph) = (self.x, self.y, self.w, self.h);
        let z = self.across(self.zero());
        if self.horizontal {
            f.line((z, py), (z, py + ph), AXIS);
        } else {
            f.line((px, z), (px + pw, z), AXIS);
        }
        if !self.by_category {
            let zx = self.along(self.pos.clamp(0.0));
            f.line((zx, py), (zx, py + ph), AXIS);
        }
        if let Some(name) = &self.y_name {
            f.text(px, py - 10.0, "middle", 12.0, AXIS, &truncate(name, 40));
        }
        if let Some(name) = &self.x_name {
            f.text(
                px + pw / 2.0,
                py + ph + 38.0,
                "middle",
                12.0,
                AXIS,
                &truncate(name, 60),
            );
        }
    }
}

/// The estimated width of the widest of `labels`.
fn widest(labels: &[String]) -> f64 {
    labels.iter().map(|l| text_width(l)).fold(0.0, f64::max)
}
