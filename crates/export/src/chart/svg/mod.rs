//! Drawing of one ECharts option as a static, script-free SVG picture.
//!
//! Drawn: `bar` (vertical, horizontal, grouped, stacked), `line` (markers, `areaStyle`,
//! stacks), `scatter`, mixes of these on one grid, and `pie` (donut too). Any other series
//! kind gives a picture that says, in words, that the chart is not drawn.
//!
//! A picture is a [`Frame`] (title, legend, the SVG document around them). A chart with series
//! on a grid is read by [`series`] (categories, points, stacks, bar groups), laid out by
//! [`grid`] (the plot area, its scales and axes), and each series kind draws itself on the grid
//! in its own module: [`bar`], [`line`], [`scatter`]; [`pie`] draws a chart of its own.

use serde_json::Value;
use std::collections::HashMap;

mod bar;
mod grid;
mod line;
mod pie;
mod scale;
mod scatter;
mod series;

use grid::{Axes, Grid};
use pie::pie;
use series::Kind;

/// ECharts' default series colors.
const PALETTE: [&str; 9] = [
    "#5470c6", "#91cc75", "#fac858", "#ee6666", "#73c0de", "#3ba272", "#fc8452", "#9a60b4",
    "#ea7ccc",
];
/// Most data points drawn in one chart, over all its series.
const MAX_POINTS: usize = 5000;
/// Most series read from one chart.
const MAX_SERIES: usize = 64;
/// Most pie slices drawn.
const MAX_SLICES: usize = 200;
/// Estimated width of one character of 12px sans-serif text.
const CHAR_W: f64 = 6.6;
/// Color of axis lines and tick labels.
const AXIS: &str = "#6e7079";
/// Color of grid lines.
const GRID: &str = "#e0e6f1";

/// Draws `opt` in a `w` × `h` picture; returns the SVG and the title text, if any.
pub(super) fn render_option(opt: &Value, w: f64, h: f64) -> (String, Option<String>) {
    let t = first(opt.get("title"));
    let text_of = |key: &str| {
        t.and_then(|t| t.get(key))
            .and_then(str_of)
            .filter(|s| !s.trim().is_empty())
    };
    let (title, subtitle) = (text_of("text"), text_of("subtext"));
    let series: Vec<&Value> = match opt.get("series") {
        Some(Value::Array(a)) => a
            .iter()
            .filter(|s| s.is_object())
            .take(MAX_SERIES)
            .collect(),
        Some(s @ Value::Object(_)) => vec![s],
        _ => Vec::new(),
    };
    let kind = |s: &Value| {
        s.get("type")
            .and_then(Value::as_str)
            .unwrap_or("line")
            .to_string()
    };
    let drawn: Vec<&Value> = series
        .iter()
        .copied()
        .filter(|s| matches!(kind(s).as_str(), "bar" | "line" | "scatter" | "pie"))
        .collect();
    let reason = match (series.first(), drawn.is_empty()) {
        (None, _) => Some("it has no data series".to_string()),
        (Some(s), true) => Some(format!(
            "'{}' charts are not drawn in the static export",
            truncate(&kind(s), 40)
        )),
        _ => None,
    };
    if let Some(reason) = reason {
        return (render_message(&reason, title.as_deref(), w, h), title);
    }
    let mut f = Frame::new(w, h, opt);
    let centered = t.and_then(|t| t.get("left")).and_then(Value::as_str) == Some("center");
    f.header(title.as_deref(), subtitle.as_deref(), centered);
    let show_legend =
        first(opt.get("legend")).is_some_and(|l| l.get("show") != Some(&Value::Bool(false)));
    let cartesian: Vec<(Kind, &Value)> = drawn
        .iter()
        .filter_map(|s| Kind::of(s).map(|k| (k, *s)))
        .collect();
    let desc = match (cartesian.is_empty(), drawn.first()) {
        (true, Some(pie_series)) => pie(&mut f, opt, pie_series),
        _ => plot(&mut f, opt, &cartesian, show_legend || cartesian.len() > 1),
    };
    (f.finish(title.as_deref(), &desc), title)
}

/// A picture that says the chart is not drawn, and why (`reason` completes "Chart not drawn: ").
pub(super) fn render_message(reason: &str, title: Option<&str>, w: f64, h: f64) -> String {
    let mut f = Frame::new(w, h, &Value::Null);
    f.header(title, None, false);
    let (cx, cy) = (w / 2.0, (f.top + h) / 2.0);
    f.body.push_str(&format!(
        r##"<rect x="20" y="{}" width="{}" height="{}" fill="#f6f7f9" stroke="{GRID}"/>"##,
        n(f.top),
        n(w - 40.0),
        n((h - f.top - 12.0).max(20.0))
    ));
    f.text(cx, cy - 6.0, "middle", 14.0, "#464646", "Chart not drawn");
    f.text(cx, cy + 14.0, "middle", 12.0, AXIS, reason);
    f.finish(title, &format!("Chart not drawn: {reason}"))
}

/// The picture being built.
struct Frame {
    /// Width of the picture.
    w: f64,
    /// Height of the picture.
    h: f64,
    /// Elements drawn so far.
    body: String,
    /// First free y below the title and legend.
    top: f64,
    /// Series colors.
    palette: Vec<String>,
}

impl Frame {
    /// An empty picture with the option's `color` list (or ECharts' defaults) as its palette.
    fn new(w: f64, h: f64, opt: &Value) -> Self {
        let mut palette: Vec<String> = match opt.get("color") {
            Some(Value::Array(a)) => a.iter().filter_map(safe_color).take(64).collect(),
            _ => Vec::new(),
        };
        if palette.is_empty() {
            palette = PALETTE.iter().map(|c| c.to_string()).collect();
        }
        Frame {
            w,
            h,
            body: String::new(),
            top: 10.0,
            palette,
        }
    }

    /// The `i`th palette color.
    fn color(&self, i: usize) -> String {
        let len = self.palette.len().max(1);
        self.palette
            .get(i.checked_rem(len).unwrap_or(0))
            .cloned()
            .unwrap_or_else(|| "#5470c6".into())
    }

    /// Draws escaped `content` at (x, y).
    fn text(&mut self, x: f64, y: f64, anchor: &str, size: f64, fill: &str, content: &str) {
        self.body.push_str(&format!(
            r#"<text x="{}" y="{}" text-anchor="{anchor}" font-size="{}" fill="{fill}">{}</text>"#,
            n(x),
            n(y),
            n(size),
            esc(content)
        ));
    }

    /// Draws a line from (x1, y1) to (x2, y2).
    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str) {
        self.body.push_str(&format!(
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}"/>"#,
            n(x1),
            n(y1),
            n(x2),
            n(y2)
        ));
    }

    /// Draws the title and subtitle, and moves `top` below them.
    fn header(&mut self, title: Option<&str>, subtitle: Option<&str>, centered: bool) {
        let (x, anchor) = if centered {
            (self.w / 2.0, "middle")
        } else {
            (16.0, "start")
        };
        if let Some(t) = title {
            self.body.push_str(&format!(
                r##"<text class="title" x="{}" y="28" text-anchor="{anchor}" font-size="16" font-weight="bold" fill="#464646">{}</text>"##,
                n(x),
                esc(&truncate(t, 90))
            ));
            self.top = 38.0;
        }
        if let Some(s) = subtitle {
            self.text(x, self.top + 10.0, anchor, 12.0, AXIS, &truncate(s, 110));
            self.top += 18.0;
        }
    }

    /// Draws legend entries (name, color) in centered rows, and moves `top` below them.
    fn legend(&mut self, items: &[(String, String)]) {
        let mut rows: Vec<Vec<(String, &str, f64)>> = vec![Vec::new()];
        let mut row_w = 0.0;
        for (name, color) in items {
            let name = truncate(name, 28);
            let item_w = 34.0 + text_width(&name);
            if row_w + item_w > self.w - 40.0 && row_w > 0.0 {
                rows.push(Vec::new());
                row_w = 0.0;
            }
            row_w += item_w;
            if let Some(row) = rows.last_mut() {
                row.push((name, color.as_str(), item_w));
            }
        }
        let mut y = self.top + 6.0;
        for row in rows.iter().filter(|r| !r.is_empty()).take(4) {
            let total: f64 = row.iter().map(|(_, _, iw)| iw).sum();
            let mut x = (self.w - total + 14.0) / 2.0;
            for (name, color, iw) in row {
                self.body.push_str(&format!(
                    r##"<g class="legend"><rect x="{}" y="{}" width="12" height="12" rx="2" fill="{color}"/><text x="{}" y="{}" font-size="12" fill="#333">{}</text></g>"##,
                    n(x),
                    n(y),
                    n(x + 17.0),
                    n(y + 10.5),
                    esc(name)
                ));
                x += iw;
            }
            y += 20.0;
        }
        self.top = y + 2.0;
    }

    /// The finished SVG document, described by `title` and `desc`.
    fn finish(self, title: Option<&str>, desc: &str) -> String {
        let label = match title {
            Some(t) => format!("{t}. {desc}"),
            None => desc.to_string(),
        };
        let label = esc(&truncate(&label, 300));
        format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{label}" font-family="sans-serif"><title>{label}</title><rect class="background" width="{w}" height="{h}" fill="#ffffff"/>{body}</svg>"##,
            w = n(self.w),
            h = n(self.h),
            body = self.body
        )
    }
}

/// Draws bar, line and scatter series on one grid; returns the chart's description.
fn plot(f: &mut Frame, opt: &Value, series: &[(Kind, &Value)], legend: bool) -> String {
    let axes = Axes::of(opt, series);
    let plotted = series::read(opt, &axes, series, f);
    if legend {
        let items: Vec<(String, String)> = plotted
            .series
            .iter()
            .map(|s| (s.name.clone(), s.color.clone()))
            .collect();
        f.legend(&items);
    }
    let grid = Grid::lay_out(f, &axes, &plotted);
    grid.draw_ticks(f);
    let bar_w = bar::width(&grid, &plotted);
    for s in &plotted.series {
        match s.kind {
            Kind::Bar => bar::draw(f, &grid, s, bar_w),
            Kind::Line => line::draw(f, &grid, s),
            Kind::Scatter => scatter::draw(f, &grid, s),
        }
    }
    grid.draw_axes(f);
    plotted.describe(axes.by_category)
}

/// `dataset.source` as rows (header row dropped; rows of objects read in key order).
fn dataset(opt: &Value) -> Option<Vec<Vec<Value>>> {
    let source = first(opt.get("dataset"))?.get("source")?.as_array()?;
    let rows: Vec<Vec<Value>> = source
        .iter()
        .take(MAX_POINTS)
        .filter_map(|r| match r {
            Value::Array(a) => Some(a.clone()),
            Value::Object(o) => {
                let (cats, nums): (Vec<&Value>, Vec<&Value>) =
                    o.values().partition(|v| num_of(v).is_none());
                Some(cats.into_iter().take(1).chain(nums).cloned().collect())
            }
            _ => None,
        })
        .collect();
    let header = rows.first().is_some_and(|r| {
        r.iter()
            .skip(1)
            .all(|v| v.is_string() && num_of(v).is_none())
    });
    Some(rows.into_iter().skip(usize::from(header)).collect())
}

/// The value itself, or the first element when it is an array.
fn first(v: Option<&Value>) -> Option<&Value> {
    match v {
        Some(Value::Array(a)) => a.first(),
        other => other,
    }
}

/// A string or number as text.
fn str_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(x) => Some(x.to_string()),
        _ => None,
    }
}

/// A finite number from a number or numeric string (`'-'` and others give `None`).
fn num_of(v: &Value) -> Option<f64> {
    match v {
        Value::Number(x) => x.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// A color that is safe to put in an attribute: `#hex`, `rgb()/rgba()/hsl()/hsla()` of
/// numbers, or a plain color name.
fn safe_color(v: &Value) -> Option<String> {
    let s = v.as_str()?.trim();
    let hex = s.strip_prefix('#').is_some_and(|h| {
        matches!(h.len(), 3 | 4 | 6 | 8) && h.chars().all(|c| c.is_ascii_hexdigit())
    });
    let func = ["rgb(", "rgba(", "hsl(", "hsla("]
        .iter()
        .any(|p| s.starts_with(p))
        && s.ends_with(')')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "(),.% ".contains(c));
    let name = !s.is_empty() && s.len() <= 20 && s.chars().all(|c| c.is_ascii_alphabetic());
    (s.len() <= 40 && (hex || func || name)).then(|| s.to_string())
}

/// `text` escaped for XML text and attributes; characters XML cannot hold are dropped and
/// line breaks become spaces.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `s`, with `…` when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Estimated width of 12px text.
fn text_width(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// `s` with its first letter in upper case.
fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A formatted decimal number with `,` between groups of three integer digits.
fn group_thousands(num: &str) -> String {
    let (sign, rest) = num.strip_prefix('-').map_or(("", num), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, ""), |(i, f)| (i, f));
    let mut out = String::from(sign);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && int.len().saturating_sub(i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// A coordinate with at most one decimal.
fn n(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.is_finite() {
        format!("{}", if r == 0.0 { 0.0 } else { r })
    } else {
        "0".into()
    }
}

#[cfg(test)]
mod tests;
