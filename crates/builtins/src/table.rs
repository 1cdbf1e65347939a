//! What CSV files and worksheets have in common: typed cells, header detection, column
//! profiles (type, count, nulls, min/max/mean) and the one-paragraph summary that tells the
//! model what part of the table it is looking at and how much is left.

use serde_json::{Value, json};

/// A cell with its type, as inferred from CSV text or read from a workbook.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Number(f64),
    Bool(bool),
    /// ISO 8601 text (`2024-07-01`, `2024-07-01T09:30:00`).
    Date(String),
    Text(String),
    /// A spreadsheet error, by its name (`#DIV/0!`).
    Error(String),
}

impl Cell {
    /// The JSON value shown in rows: numbers as numbers (integers without `.0`), dates as ISO
    /// text, errors by name.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Number(n) => number_json(*n),
            Self::Bool(b) => Value::Bool(*b),
            Self::Date(s) | Self::Text(s) | Self::Error(s) => Value::String(s.clone()),
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }
}

pub(crate) fn number_json(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        // Exact: the value is an integer well inside i64's range.
        #[allow(clippy::cast_possible_truncation)]
        return json!(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// The type of a CSV field's text: empty is null; numbers (`-1.5`, `1e3`, `1,234.5` with
/// thousands separators), booleans (`true`/`false`), ISO dates (`2024-07-01`, optionally
/// with a time) are recognised; the rest is text.
pub(crate) fn classify(text: &str) -> Cell {
    let t = text.trim();
    if t.is_empty() {
        return Cell::Null;
    }
    if let Some(n) = parse_number(t) {
        return Cell::Number(n);
    }
    if t.eq_ignore_ascii_case("true") {
        return Cell::Bool(true);
    }
    if t.eq_ignore_ascii_case("false") {
        return Cell::Bool(false);
    }
    if is_iso_date(t) {
        return Cell::Date(t.to_owned());
    }
    Cell::Text(t.to_owned())
}

fn parse_number(t: &str) -> Option<f64> {
    let first = t.as_bytes().first()?;
    if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
        return None;
    }
    if let Ok(n) = t.parse::<f64>() {
        return n.is_finite().then_some(n);
    }
    // 1,234,567.89: groups of three after the first.
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = int.trim_start_matches(['-', '+']);
    let mut groups = digits.split(',');
    let head = groups.next()?;
    let grouped = (1..=3).contains(&head.len())
        && head.bytes().all(|b| b.is_ascii_digit())
        && groups.all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit()))
        && digits.contains(',')
        && frac.bytes().all(|b| b.is_ascii_digit());
    if !grouped {
        return None;
    }
    t.replace(',', "").parse::<f64>().ok()
}

fn is_iso_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && (b[4] == b'-' || b[4] == b'/')
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b[4]
        && b[8..10].iter().all(u8::is_ascii_digit)
        && (b.len() == 10 || matches!(b[10], b'T' | b' '))
}

/// Whether `first` looks like a header above `next`: every non-empty cell of `first` is
/// text, and some column is text in `first` but not in `next` (or there is no `next` and
/// `first` has text).
pub(crate) fn looks_like_header(first: &[Cell], next: Option<&[Cell]>) -> bool {
    let texts = first.iter().filter(|c| matches!(c, Cell::Text(_))).count();
    let others = first
        .iter()
        .filter(|c| !matches!(c, Cell::Text(_) | Cell::Null))
        .count();
    if texts == 0 || others > 0 {
        return false;
    }
    match next {
        None => true,
        Some(next) => {
            let differs = first.iter().zip(next).any(|(a, b)| {
                matches!(a, Cell::Text(_)) && !matches!(b, Cell::Text(_) | Cell::Null)
            });
            // All-text tables: a first row of distinct names is taken as the header.
            differs || next.iter().all(|c| matches!(c, Cell::Text(_) | Cell::Null))
        }
    }
}

/// Column names from a header row: trimmed, empty ones named by position, repeats numbered.
pub(crate) fn column_names(header: &[Cell], width: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(width);
    for i in 0..width.max(header.len()) {
        let raw = match header.get(i) {
            Some(Cell::Null) | None => String::new(),
            Some(cell) => match cell.to_json() {
                Value::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            },
        };
        let base = if raw.is_empty() {
            format!("column_{}", i + 1)
        } else {
            raw
        };
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// Names `column_1 … column_n` for a table without a header.
pub(crate) fn positional_names(width: usize) -> Vec<String> {
    (1..=width).map(|i| format!("column_{i}")).collect()
}

/// Running statistics of one column.
#[derive(Debug, Clone, Default)]
pub(crate) struct ColumnProfile {
    numbers: u64,
    bools: u64,
    dates: u64,
    texts: u64,
    errors: u64,
    nulls: u64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
    min_date: Option<String>,
    max_date: Option<String>,
}

impl ColumnProfile {
    pub(crate) fn add(&mut self, cell: &Cell) {
        match cell {
            Cell::Null => self.nulls += 1,
            Cell::Number(n) => {
                self.numbers += 1;
                self.sum += n;
                self.min = Some(self.min.map_or(*n, |m| m.min(*n)));
                self.max = Some(self.max.map_or(*n, |m| m.max(*n)));
            }
            Cell::Bool(_) => self.bools += 1,
            Cell::Date(d) => {
                self.dates += 1;
                if self.min_date.as_ref().is_none_or(|m| d < m) {
                    self.min_date = Some(d.clone());
                }
                if self.max_date.as_ref().is_none_or(|m| d > m) {
                    self.max_date = Some(d.clone());
                }
            }
            Cell::Text(_) => self.texts += 1,
            Cell::Error(_) => self.errors += 1,
        }
    }

    fn count(&self) -> u64 {
        self.numbers + self.bools + self.dates + self.texts + self.errors
    }

    /// `number`, `date`, `boolean`, `text`, `empty`, or `mixed` (then the counts say what).
    pub(crate) fn kind(&self) -> &'static str {
        let kinds = [
            (self.numbers, "number"),
            (self.dates, "date"),
            (self.bools, "boolean"),
            (self.texts, "text"),
        ];
        let present: Vec<&str> = kinds
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(_, k)| *k)
            .collect();
        match present.as_slice() {
            [] if self.errors > 0 => "error",
            [] => "empty",
            [one] => one,
            _ => "mixed",
        }
    }

    pub(crate) fn to_json(&self, name: &str) -> Value {
        let mut v = json!({
            "name": name,
            "type": self.kind(),
            "count": self.count(),
            "nulls": self.nulls,
        });
        if let (Some(min), Some(max)) = (self.min, self.max) {
            v["min"] = number_json(min);
            v["max"] = number_json(max);
            #[allow(clippy::cast_precision_loss)]
            let mean = self.sum / self.numbers as f64;
            v["mean"] = number_json((mean * 1000.0).round() / 1000.0);
            if self.kind() != "number" {
                v["numbers"] = json!(self.numbers);
            }
        }
        if let (Some(min), Some(max)) = (&self.min_date, &self.max_date) {
            v["min_date"] = json!(min);
            v["max_date"] = json!(max);
        }
        if self.errors > 0 {
            v["errors"] = json!(self.errors);
        }
        v
    }

    /// `target number 88000..190000 mean 132050`, for the summary line.
    fn short(&self, name: &str) -> String {
        let mut s = format!("{name} {}", self.kind());
        if let (Some(min), Some(max)) = (self.min, self.max) {
            #[allow(clippy::cast_precision_loss)]
            let mean = self.sum / self.numbers as f64;
            s.push_str(&format!(
                " {}..{} mean {}",
                number_json(min),
                number_json(max),
                number_json((mean * 100.0).round() / 100.0)
            ));
        } else if let (Some(min), Some(max)) = (&self.min_date, &self.max_date) {
            s.push_str(&format!(" {min}..{max}"));
        }
        if self.nulls > 0 {
            s.push_str(&format!(" ({} empty)", self.nulls));
        }
        s
    }
}

/// A table being read: its columns, the rows kept, and the profiles of every row seen.
#[derive(Debug, Default)]
pub(crate) struct TableBuilder {
    pub(crate) columns: Vec<String>,
    pub(crate) rows: Vec<Value>,
    pub(crate) profiles: Vec<ColumnProfile>,
    /// Data rows seen (kept or not).
    pub(crate) seen: u64,
}

impl TableBuilder {
    pub(crate) fn new(columns: Vec<String>) -> Self {
        let profiles = vec![ColumnProfile::default(); columns.len()];
        Self {
            columns,
            rows: Vec::new(),
            profiles,
            seen: 0,
        }
    }

    /// Profiles a data row, and keeps its values when `keep`.
    pub(crate) fn push(&mut self, cells: &[Cell], keep: Option<Value>) {
        self.seen += 1;
        if cells.len() > self.profiles.len() {
            self.profiles.resize(cells.len(), ColumnProfile::default());
        }
        for (i, profile) in self.profiles.iter_mut().enumerate() {
            profile.add(cells.get(i).unwrap_or(&Cell::Null));
        }
        if let Some(row) = keep {
            self.rows.push(row);
        }
    }

    /// The profile of every column, named (columns past the header get positional names).
    pub(crate) fn profile_json(&self) -> Value {
        let names = self.all_names();
        Value::Array(
            self.profiles
                .iter()
                .zip(&names)
                .map(|(p, n)| p.to_json(n))
                .collect(),
        )
    }

    fn all_names(&self) -> Vec<String> {
        let mut names = self.columns.clone();
        for i in names.len()..self.profiles.len() {
            names.push(format!("column_{}", i + 1));
        }
        names
    }

    /// `4 columns: region text, quarter text, target number 88000..190000 mean 132050`.
    pub(crate) fn columns_line(&self) -> String {
        let names = self.all_names();
        let parts: Vec<String> = self
            .profiles
            .iter()
            .zip(&names)
            .map(|(p, n)| p.short(n))
            .collect();
        format!("{} columns: {}", names.len(), parts.join("; "))
    }

    /// Whether every cell of a row is null (a blank spreadsheet row).
    pub(crate) fn is_blank(cells: &[Cell]) -> bool {
        cells.iter().all(Cell::is_null)
    }
}

/// `1.0 GB`, `12 KB`, `300 bytes`.
pub(crate) fn human_bytes(n: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    if n >= 1 << 30 {
        format!("{:.1} GB", f / f64::from(1u32 << 30))
    } else if n >= 1 << 20 {
        format!("{:.1} MB", f / f64::from(1u32 << 20))
    } else if n >= 1 << 10 {
        format!("{:.0} KB", f / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_classified() {
        assert_eq!(classify(" 12 "), Cell::Number(12.0));
        assert_eq!(classify("-1.5e3"), Cell::Number(-1500.0));
        assert_eq!(classify("1,234,567.5"), Cell::Number(1_234_567.5));
        assert_eq!(classify("1,23"), Cell::Text("1,23".into()));
        assert_eq!(classify("2024-07-01"), Cell::Date("2024-07-01".into()));
        assert_eq!(
            classify("2024-07-01 09:30"),
            Cell::Date("2024-07-01 09:30".into())
        );
        assert_eq!(classify("TRUE"), Cell::Bool(true));
        assert_eq!(classify("inf"), Cell::Text("inf".into()));
        assert_eq!(classify("NaN"), Cell::Text("NaN".into()));
        assert_eq!(classify(""), Cell::Null);
    }

    #[test]
    fn headers_are_detected() {
        let t = |s: &str| classify(s);
        let header = [t("region"), t("amount")];
        let row = [t("West"), t("12")];
        assert!(looks_like_header(&header, Some(&row)));
        assert!(!looks_like_header(&row, Some(&row)));
        assert!(looks_like_header(
            &[t("a"), t("b")],
            Some(&[t("x"), t("y")])
        ));
        assert!(!looks_like_header(&[t("1"), t("2")], None));
        assert_eq!(
            column_names(&[t("a"), Cell::Null, t("a")], 4),
            ["a", "column_2", "a_2", "column_4"]
        );
    }

    #[test]
    fn profiles_count_and_summarise() {
        let mut b = TableBuilder::new(vec!["n".into(), "d".into()]);
        for (n, d) in [("1", "2024-01-02"), ("", "2023-12-31"), ("4", "x")] {
            b.push(&[classify(n), classify(d)], None);
        }
        let p = b.profile_json();
        assert_eq!(p[0]["type"], "number");
        assert_eq!(p[0]["count"], 2);
        assert_eq!(p[0]["nulls"], 1);
        assert_eq!(p[0]["mean"], 2.5);
        assert_eq!(p[1]["type"], "mixed");
        assert_eq!(p[1]["min_date"], "2023-12-31");
        assert!(
            b.columns_line()
                .contains("n number 1..4 mean 2.5 (1 empty)")
        );
    }
}
