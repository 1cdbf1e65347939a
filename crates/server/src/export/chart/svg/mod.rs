//! Drawing of one ECharts option as a static, script-free SVG picture.
//!
//! Drawn: `bar` (vertical, horizontal, grouped, stacked), `line` (markers, `areaStyle`,
//! stacks), `scatter`, mixes of these on one grid, and `pie` (donut too). Any other series
//! kind gives a picture that says, in words, that the chart is not drawn.

use serde_json::Value;
use std::collections::HashMap;

mod pie;
mod scale;

use pie::pie;
use scale::Scale;

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
    let cartesian: Vec<&Value> = drawn.iter().copied().filter(|s| kind(s) != "pie").collect();
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

/// One cartesian series, read and stacked.
struct Series {
    /// Legend name.
    name: String,
    /// `bar`, `line` or `scatter`.
    kind: String,
    /// Fill / stroke color.
    color: String,
    /// Points as (position, low end, high end): position is a category index or an x value.
    pts: Vec<Option<(f64, f64, f64)>>,
    /// Whether it is stacked on other series.
    stacked: bool,
    /// Fill opacity of the area under a line, when `areaStyle` is set.
    area: Option<f64>,
    /// Whether line markers are drawn.
    symbols: bool,
    /// Scatter dot radius.
    radius: f64,
    /// Index of its bar group (bars of one stack share a group).
    group: usize,
}

/// Draws bar, line and scatter series on one grid; returns the chart's description.
fn plot(f: &mut Frame, opt: &Value, series: &[&Value], legend: bool) -> String {
    let (xa, ya) = (first(opt.get("xAxis")), first(opt.get("yAxis")));
    let all_scatter = series
        .iter()
        .all(|s| s.get("type").and_then(Value::as_str) == Some("scatter"));
    // Some(true) / Some(false) when the axis says what it is, by its type or its data.
    let said = |a: Option<&Value>| match a.and_then(|a| a.get("type")).and_then(Value::as_str) {
        Some(t) => Some(t == "category" || t == "time"),
        None => a
            .and_then(|a| a.get("data"))
            .is_some_and(Value::is_array)
            .then_some(true),
    };
    let y_cat = said(ya) == Some(true);
    let x_cat = said(xa).unwrap_or(!all_scatter && !y_cat);
    let horizontal = !x_cat && y_cat;
    let by_category = x_cat || horizontal;
    let (cat_axis, val_axis) = if horizontal { (ya, xa) } else { (xa, ya) };
    let table = dataset(opt);
    let mut labels: Vec<String> = match cat_axis.and_then(|a| a.get("data")) {
        Some(Value::Array(a)) => a
            .iter()
            .take(MAX_POINTS)
            .map(|v| str_of(v).unwrap_or_default())
            .collect(),
        _ => Vec::new(),
    };
    if labels.is_empty()
        && let Some(rows) = &table
    {
        labels = rows
            .iter()
            .map(|r| r.first().and_then(str_of).unwrap_or_default())
            .collect();
    }
    let (cat_elem, val_elem) = if horizontal { (1, 0) } else { (0, 1) };
    let mut column = 0usize;
    let datas: Vec<Vec<Value>> = series
        .iter()
        .map(|s| match s.get("data") {
            Some(Value::Array(a)) => a.iter().take(MAX_POINTS).cloned().collect(),
            _ => {
                column = column.saturating_add(1);
                let rows = table.iter().flatten();
                rows.map(|r| r.get(column).cloned().unwrap_or(Value::Null))
                    .collect()
            }
        })
        .collect();
    if by_category && labels.is_empty() {
        let mut seen = HashMap::new();
        for item in datas.iter().flatten() {
            if let Some(l) = item.get(cat_elem).and_then(Value::as_str)
                && seen.len() < MAX_POINTS
                && !seen.contains_key(l)
            {
                seen.insert(l.to_string(), seen.len());
                labels.push(l.to_string());
            }
        }
        if labels.is_empty() {
            let longest = datas.iter().map(Vec::len).max().unwrap_or(0);
            labels = (1..=longest).map(|i| i.to_string()).collect();
        }
    }
    let index: HashMap<&str, usize> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    let mut left = MAX_POINTS;
    let mut stacks: HashMap<(String, u64, bool), f64> = HashMap::new();
    let mut groups: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Series> = Vec::new();
    for (k, (s, data)) in series.iter().zip(&datas).enumerate() {
        let kind = s
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("line")
            .to_string();
        let stack = s.get("stack").and_then(str_of);
        let mut pts = Vec::new();
        for (j, item) in data.iter().enumerate() {
            if left == 0 {
                break;
            }
            left = left.saturating_sub(1);
            let item = match item {
                Value::Object(o) => o.get("value").unwrap_or(&Value::Null),
                other => other,
            };
            let point = match item {
                Value::Array(pair) if by_category => pair.get(val_elem).and_then(num_of).map(|v| {
                    let cat = pair
                        .get(cat_elem)
                        .and_then(Value::as_str)
                        .and_then(|c| index.get(c));
                    (cat.copied().unwrap_or(j) as f64, v)
                }),
                Value::Array(pair) => pair
                    .first()
                    .and_then(num_of)
                    .zip(pair.get(1).and_then(num_of)),
                other => num_of(other).map(|v| (j as f64, v)),
            };
            pts.push(point.map(|(p, v)| match &stack {
                Some(key) => {
                    let base = stacks
                        .entry((key.clone(), p.to_bits(), v >= 0.0))
                        .or_insert(0.0);
                    let lo = *base;
                    *base += v;
                    (p, lo, *base)
                }
                None => (p, 0.0, v),
            }));
        }
        let group_key = match &stack {
            Some(key) => format!("s:{key}"),
            None => format!("n:{k}"),
        };
        let next_group = groups.len();
        let group = if kind == "bar" {
            *groups.entry(group_key).or_insert(next_group)
        } else {
            0
        };
        let color = [
            s.get("itemStyle").and_then(|i| i.get("color")),
            s.get("color"),
            s.get("lineStyle").and_then(|l| l.get("color")),
        ]
        .into_iter()
        .flatten()
        .find_map(safe_color)
        .unwrap_or_else(|| f.color(k));
        let area = s.get("areaStyle").filter(|a| a.is_object()).map(|a| {
            a.get("opacity")
                .and_then(num_of)
                .unwrap_or(0.3)
                .clamp(0.0, 1.0)
        });
        let symbol_none = s.get("symbol").and_then(Value::as_str) == Some("none");
        let size = s
            .get("symbolSize")
            .and_then(num_of)
            .unwrap_or(10.0)
            .clamp(2.0, 60.0);
        out.push(Series {
            name: s
                .get("name")
                .and_then(str_of)
                .unwrap_or_else(|| format!("Series {}", k.saturating_add(1))),
            stacked: stack.is_some(),
            kind,
            color,
            pts,
            area,
            symbols: !symbol_none && s.get("showSymbol") != Some(&Value::Bool(false)),
            radius: size / 2.0,
            group,
        });
    }
    if legend {
        let items: Vec<(String, String)> = out
            .iter()
            .map(|s| (s.name.clone(), s.color.clone()))
            .collect();
        f.legend(&items);
    }
    let all = || {
        out.iter()
            .flat_map(|s| s.pts.iter().flatten().map(move |p| (s, p)))
    };
    let val_scale = val_axis.and_then(|a| a.get("scale")) == Some(&Value::Bool(true));
    let vals = all().flat_map(|(s, &(_, lo, hi))| {
        let with_lo = s.kind == "bar" || s.stacked;
        [Some(hi), with_lo.then_some(lo)]
    });
    let val_dom = Scale::new(vals.flatten(), val_axis, !val_scale);
    let pos_dom = Scale::new(
        all().map(|(_, p)| p.0),
        cat_axis,
        cat_axis.and_then(|a| a.get("scale")) != Some(&Value::Bool(true)),
    );
    let val_labels: Vec<String> = val_dom
        .ticks
        .iter()
        .map(|t| val_dom.label(*t, val_axis))
        .collect();
    let cat_labels: Vec<String> = labels.iter().map(|l| truncate(l, 18)).collect();
    let pos_labels: Vec<String> = pos_dom
        .ticks
        .iter()
        .map(|t| pos_dom.label(*t, cat_axis))
        .collect();
    let widest = |ls: &[String]| ls.iter().map(|l| text_width(l)).fold(0.0, f64::max);
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
    let (x_name, y_name) = (name_of(xa), name_of(ya));
    let left_px = (y_label_w + 16.0).clamp(36.0, 220.0);
    let top = f.top + 10.0 + if y_name.is_some() { 18.0 } else { 0.0 };
    let bottom = 28.0 + if x_name.is_some() { 18.0 } else { 0.0 };
    let (px, py) = (left_px, top);
    let pw = (f.w - left_px - 28.0).max(40.0);
    let ph = (f.h - top - bottom).max(30.0);
    let n_cat = labels.len().max(1) as f64;
    let gap =
        cat_axis.and_then(|a| a.get("boundaryGap")) != Some(&Value::Bool(false)) || n_cat < 2.0;
    let cat_len = if horizontal { ph } else { pw };
    let band = if gap {
        cat_len / n_cat
    } else {
        cat_len / (n_cat - 1.0)
    };
    let along = |p: f64| -> f64 {
        let off = if gap { (p + 0.5) * band } else { p * band };
        match (by_category, horizontal) {
            (true, true) => py + ph - off,
            (true, false) => px + off,
            _ => px + pos_dom.frac(p) * pw,
        }
    };
    let across = |v: f64| {
        if horizontal {
            px + val_dom.frac(v) * pw
        } else {
            py + ph - val_dom.frac(v) * ph
        }
    };
    let point = |p: f64, v: f64| {
        if horizontal {
            (across(v), along(p))
        } else {
            (along(p), across(v))
        }
    };
    for (t, l) in val_dom.ticks.iter().zip(&val_labels) {
        let c = across(*t);
        if horizontal {
            f.line((c, py), (c, py + ph), GRID);
            f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
        } else {
            f.line((px, c), (px + pw, c), GRID);
            f.text(px - 8.0, c + 4.0, "end", 12.0, AXIS, l);
        }
    }
    if by_category {
        let need = if horizontal {
            16.0
        } else {
            widest(&cat_labels) + 10.0
        };
        let step = (need / band.max(1.0)).ceil().max(1.0) as usize;
        for (i, l) in cat_labels.iter().enumerate().step_by(step) {
            let c = along(i as f64);
            if horizontal {
                f.text(px - 8.0, c + 4.0, "end", 12.0, AXIS, l);
            } else {
                f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
            }
        }
    } else {
        for (t, l) in pos_dom.ticks.iter().zip(&pos_labels) {
            let c = along(*t);
            f.line((c, py), (c, py + ph), GRID);
            f.text(c, py + ph + 18.0, "middle", 12.0, AXIS, l);
        }
    }
    let n_groups = groups.len().max(1) as f64;
    let bar_w = if by_category {
        band * 0.8 / (n_groups + (n_groups - 1.0) * 0.3)
    } else {
        (pw / (all().count().max(1) as f64 + 1.0) * 0.6).clamp(1.0, 40.0)
    };
    let zero = val_dom.clamp(0.0);
    for s in &out {
        let segments = s.pts.split(Option::is_none).filter(|seg| !seg.is_empty());
        match s.kind.as_str() {
            "bar" => {
                let off = if by_category {
                    -band * 0.4 + bar_w * (s.group as f64 * 1.3 + 0.5)
                } else {
                    0.0
                };
                for &(p, lo, hi) in s.pts.iter().flatten() {
                    let c = along(p) + if horizontal { -off } else { off };
                    let (a, b) = (
                        across(val_dom.clamp(if s.stacked { lo } else { zero })),
                        across(val_dom.clamp(hi)),
                    );
                    let (x, y, rw, rh) = if horizontal {
                        (a.min(b), c - bar_w / 2.0, (a - b).abs(), bar_w)
                    } else {
                        (c - bar_w / 2.0, a.min(b), bar_w, (a - b).abs())
                    };
                    f.body.push_str(&format!(
                        r#"<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
                        n(x),
                        n(y),
                        n(rw),
                        n(rh),
                        s.color
                    ));
                }
            }
            "line" => {
                for seg in segments {
                    let pts: Vec<(f64, f64, f64)> = seg.iter().flatten().copied().collect();
                    let path = |it: &mut dyn Iterator<Item = (f64, f64)>| {
                        it.map(|(x, y)| format!("{},{}", n(x), n(y)))
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    if let Some(op) = s.area {
                        let base = |lo: f64| if s.stacked { lo } else { zero };
                        let upper = pts.iter().map(|&(p, _, hi)| point(p, val_dom.clamp(hi)));
                        let lower = pts
                            .iter()
                            .rev()
                            .map(|&(p, lo, _)| point(p, val_dom.clamp(base(lo))));
                        f.body.push_str(&format!(
                            r#"<polygon class="area" points="{}" fill="{}" fill-opacity="{}"/>"#,
                            path(&mut upper.chain(lower)),
                            s.color,
                            n(op)
                        ));
                    }
                    let line = path(&mut pts.iter().map(|&(p, _, hi)| point(p, val_dom.clamp(hi))));
                    f.body.push_str(&format!(r#"<polyline class="line" points="{line}" fill="none" stroke="{}" stroke-width="2"/>"#, s.color));
                }
                if s.symbols && s.pts.len() <= 200 {
                    for &(p, _, hi) in s.pts.iter().flatten() {
                        let (x, y) = point(p, val_dom.clamp(hi));
                        f.body.push_str(&format!(r##"<circle class="point" cx="{}" cy="{}" r="3" fill="#fff" stroke="{}" stroke-width="2"/>"##, n(x), n(y), s.color));
                    }
                }
            }
            _ => {
                for &(p, _, hi) in s.pts.iter().flatten() {
                    let (x, y) = point(p, val_dom.clamp(hi));
                    f.body.push_str(&format!(r#"<circle class="dot" cx="{}" cy="{}" r="{}" fill="{}" fill-opacity="0.8"/>"#, n(x), n(y), n(s.radius), s.color));
                }
            }
        }
    }
    let z = across(zero);
    if horizontal {
        f.line((z, py), (z, py + ph), AXIS);
    } else {
        f.line((px, z), (px + pw, z), AXIS);
    }
    if !by_category {
        let zx = along(pos_dom.clamp(0.0));
        f.line((zx, py), (zx, py + ph), AXIS);
    }
    if let Some(name) = &y_name {
        f.text(px, py - 10.0, "middle", 12.0, AXIS, &truncate(name, 40));
    }
    if let Some(name) = &x_name {
        f.text(
            px + pw / 2.0,
            py + ph + 38.0,
            "middle",
            12.0,
            AXIS,
            &truncate(name, 60),
        );
    }
    let mut kinds: Vec<&str> = Vec::new();
    for s in &out {
        if !kinds.contains(&s.kind.as_str()) {
            kinds.push(&s.kind);
        }
    }
    let names: Vec<String> = out.iter().take(10).map(|s| truncate(&s.name, 40)).collect();
    let mut desc = format!(
        "{} chart: {}",
        capitalize(&kinds.join(" and ")),
        names.join(", ")
    );
    if let (Some(a), Some(b)) = (labels.first().filter(|_| by_category), labels.last()) {
        desc.push_str(&format!(" by {}", truncate(a, 30)));
        if labels.len() > 1 {
            desc.push_str(&format!("–{}", truncate(b, 30)));
        }
    }
    desc
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
