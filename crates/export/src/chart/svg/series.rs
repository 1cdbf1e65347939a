//! The cartesian series of an option, read into points of one grid: the categories (from the
//! axis, the dataset or the data itself), each series' values (stacked on the series of its
//! stack), its color and style, and the bar group it shares.

use super::grid::Axes;
use super::*;

/// What a cartesian series is drawn as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Rectangles from the base (zero, or the stack below) to the value.
    Bar,
    /// A polyline through the values, with markers and an optional filled area.
    Line,
    /// A dot at each point.
    Scatter,
}

impl Kind {
    /// The kind of series `s`, `None` when it is not drawn on a grid. A series without a type
    /// is a line, as in ECharts.
    pub(super) fn of(s: &Value) -> Option<Self> {
        match s.get("type").and_then(Value::as_str).unwrap_or("line") {
            "bar" => Some(Self::Bar),
            "line" => Some(Self::Line),
            "scatter" => Some(Self::Scatter),
            _ => None,
        }
    }

    /// Its name in a chart's description.
    fn name(self) -> &'static str {
        match self {
            Self::Bar => "bar",
            Self::Line => "line",
            Self::Scatter => "scatter",
        }
    }
}

/// A point: its position (a category index or an x value) and the low and high ends of its
/// value (the low end is zero, or the top of the stack below it).
pub(super) type Point = (f64, f64, f64);

/// One cartesian series, read and stacked.
pub(super) struct Series {
    /// Legend name.
    pub(super) name: String,
    pub(super) kind: Kind,
    /// Fill / stroke color.
    pub(super) color: String,
    /// Its points in data order; `None` where a value is missing (a gap in a line).
    pub(super) pts: Vec<Option<Point>>,
    /// Whether it is stacked on other series.
    pub(super) stacked: bool,
    /// Fill opacity of the area under a line, when `areaStyle` is set.
    pub(super) area: Option<f64>,
    /// Whether line markers are drawn.
    pub(super) symbols: bool,
    /// Scatter dot radius.
    pub(super) radius: f64,
    /// Index of its bar group (bars of one stack share a group).
    pub(super) group: usize,
}

/// The series of one grid and the categories they are drawn over.
pub(super) struct Plotted {
    pub(super) series: Vec<Series>,
    /// The category labels, in order.
    pub(super) labels: Vec<String>,
    /// How many bar groups there are.
    pub(super) groups: usize,
}

impl Plotted {
    /// Every point of every series, with its series.
    pub(super) fn points(&self) -> impl Iterator<Item = (&Series, &Point)> {
        self.series
            .iter()
            .flat_map(|s| s.pts.iter().flatten().map(move |p| (s, p)))
    }

    /// The chart's description: its kinds, its series' names and the range of its categories.
    pub(super) fn describe(&self, by_category: bool) -> String {
        let mut kinds: Vec<&str> = Vec::new();
        for s in &self.series {
            if !kinds.contains(&s.kind.name()) {
                kinds.push(s.kind.name());
            }
        }
        let names: Vec<String> = self
            .series
            .iter()
            .take(10)
            .map(|s| truncate(&s.name, 40))
            .collect();
        let mut desc = format!(
            "{} chart: {}",
            capitalize(&kinds.join(" and ")),
            names.join(", ")
        );
        let labels = &self.labels;
        if let (Some(a), Some(b)) = (labels.first().filter(|_| by_category), labels.last()) {
            desc.push_str(&format!(" by {}", truncate(a, 30)));
            if labels.len() > 1 {
                desc.push_str(&format!("–{}", truncate(b, 30)));
            }
        }
        desc
    }
}

/// Reads `series` of `opt` on the grid `axes` describe; a series without a color of its own
/// takes `f`'s palette color of its place.
pub(super) fn read(opt: &Value, axes: &Axes<'_>, series: &[(Kind, &Value)], f: &Frame) -> Plotted {
    let table = dataset(opt);
    let mut labels = axis_labels(axes.category(), table.as_deref());
    let datas = data(series, table.as_deref());
    if axes.by_category && labels.is_empty() {
        labels = labels_of_data(axes, &datas);
    }
    let index: HashMap<&str, usize> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.as_str(), i))
        .collect();
    let mut left = MAX_POINTS;
    let mut stacks = Stacks::default();
    let mut groups: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Series> = Vec::new();
    for (k, (&(kind, s), data)) in series.iter().zip(&datas).enumerate() {
        let stack = s.get("stack").and_then(str_of);
        let mut pts = Vec::new();
        for (j, item) in data.iter().enumerate() {
            if left == 0 {
                break;
            }
            left = left.saturating_sub(1);
            let point = position(axes, &index, j, item);
            pts.push(point.map(|(p, v)| stacks.put(stack.as_deref(), p, v)));
        }
        let group_key = match &stack {
            Some(key) => format!("s:{key}"),
            None => format!("n:{k}"),
        };
        let next_group = groups.len();
        let group = if kind == Kind::Bar {
            *groups.entry(group_key).or_insert(next_group)
        } else {
            0
        };
        out.push(style(s, k, kind, f, pts, stack.is_some(), group));
    }
    Plotted {
        series: out,
        labels,
        groups: groups.len(),
    }
}

/// The category labels the axis lists, or else the first column of the dataset.
fn axis_labels(axis: Option<&Value>, table: Option<&[Vec<Value>]>) -> Vec<String> {
    let mut labels: Vec<String> = match axis.and_then(|a| a.get("data")) {
        Some(Value::Array(a)) => a
            .iter()
            .take(MAX_POINTS)
            .map(|v| str_of(v).unwrap_or_default())
            .collect(),
        _ => Vec::new(),
    };
    if labels.is_empty()
        && let Some(rows) = table
    {
        labels = rows
            .iter()
            .map(|r| r.first().and_then(str_of).unwrap_or_default())
            .collect();
    }
    labels
}

/// Each series' data: its own `data`, or else the next column of the dataset.
fn data(series: &[(Kind, &Value)], table: Option<&[Vec<Value>]>) -> Vec<Vec<Value>> {
    let mut column = 0usize;
    series
        .iter()
        .map(|(_, s)| match s.get("data") {
            Some(Value::Array(a)) => a.iter().take(MAX_POINTS).cloned().collect(),
            _ => {
                column = column.saturating_add(1);
                let rows = table.into_iter().flatten();
                rows.map(|r| r.get(column).cloned().unwrap_or(Value::Null))
                    .collect()
            }
        })
        .collect()
}

/// The categories named by `[category, value]` pairs in the data, in order of appearance, or
/// else `1`…`n` for the longest series.
fn labels_of_data(axes: &Axes<'_>, datas: &[Vec<Value>]) -> Vec<String> {
    let mut labels = Vec::new();
    let mut seen = HashMap::new();
    for item in datas.iter().flatten() {
        if let Some(l) = item.get(axes.category_element()).and_then(Value::as_str)
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
    labels
}

/// The position and value of the `j`th data item, `None` when it has no number.
fn position(
    axes: &Axes<'_>,
    index: &HashMap<&str, usize>,
    j: usize,
    item: &Value,
) -> Option<(f64, f64)> {
    let item = match item {
        Value::Object(o) => o.get("value").unwrap_or(&Value::Null),
        other => other,
    };
    match item {
        Value::Array(pair) if axes.by_category => {
            pair.get(axes.value_element()).and_then(num_of).map(|v| {
                let cat = pair
                    .get(axes.category_element())
                    .and_then(Value::as_str)
                    .and_then(|c| index.get(c));
                (cat.copied().unwrap_or(j) as f64, v)
            })
        }
        Value::Array(pair) => pair
            .first()
            .and_then(num_of)
            .zip(pair.get(1).and_then(num_of)),
        other => num_of(other).map(|v| (j as f64, v)),
    }
}

/// The tops of the stacks so far.
#[derive(Default)]
struct Stacks {
    /// Per stack, position and sign: the value reached.
    tops: HashMap<(String, u64, bool), f64>,
}

impl Stacks {
    /// The point of value `v` at position `p`: on top of its stack (positive and negative
    /// values stack apart), or from zero when it has none.
    fn put(&mut self, stack: Option<&str>, p: f64, v: f64) -> Point {
        match stack {
            Some(key) => {
                let base = self
                    .tops
                    .entry((key.to_owned(), p.to_bits(), v >= 0.0))
                    .or_insert(0.0);
                let lo = *base;
                *base += v;
                (p, lo, *base)
            }
            None => (p, 0.0, v),
        }
    }
}

/// The series `s`, the `k`th, with its points and the style it asks for.
fn style(
    s: &Value,
    k: usize,
    kind: Kind,
    f: &Frame,
    pts: Vec<Option<Point>>,
    stacked: bool,
    group: usize,
) -> Series {
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
    Series {
        name: s
            .get("name")
            .and_then(str_of)
            .unwrap_or_else(|| format!("Series {}", k.saturating_add(1))),
        stacked,
        kind,
        color,
        pts,
        area,
        symbols: !symbol_none && s.get("showSymbol") != Some(&Value::Bool(false)),
        radius: size / 2.0,
        group,
    }
}
