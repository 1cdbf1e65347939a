//! The structural reader: what a tool output is, read as that, before any word of it is
//! weighed.
//!
//! A tool output is recognised as tables (delimited — CSV, TSV, Markdown — or aligned — psql,
//! pandas, fixed-width reports — with their header, rule and footer lines, several in one
//! output), a JSON or YAML document, a log, a traceback, or prose; what fits none of these is
//! left to line salience ([`crate::line_salience`]). Each reading yields [`KeyItem`]s: the
//! figures a reader of the output comes back for, each *with its label* — a table cell with its
//! row's first cells and its column's title, a document value with its path, a log or exception
//! line with its words — so a kept figure still says what it is.
//!
//! What makes a figure key is read from the structure: in a table, an aggregate row or column
//! (named like one — see [`names`] — or adding up the rows or columns it closes, or a row whose
//! grouping cells are empty the way `ROLLUP` prints its totals), a result of one row, a footer;
//! in a document, values outside the lists of records; in a log, the lines whose shape occurs
//! once; in a traceback, the exception and the frame it was raised in.

mod document;
mod events;
pub(crate) mod names;
mod table;

use crate::salience::{line_salience, sentence_salience, sentences};

/// What a tool output was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputKind {
    /// One table (delimited or aligned), perhaps with a title and footer.
    Table,
    /// Several tables, with text between them.
    Tables,
    /// A JSON document (or JSON lines).
    Json,
    /// A YAML document.
    Yaml,
    /// A log: lines that open with a time or a level.
    Log,
    /// A traceback or stack trace.
    Traceback,
    /// Prose: sentences.
    Prose,
    /// None of these: lines weighed one by one.
    Lines,
}

impl OutputKind {
    /// The kind's name, as a trace's header says it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Tables => "tables",
            Self::Json => "JSON",
            Self::Yaml => "YAML",
            Self::Log => "log",
            Self::Traceback => "traceback",
            Self::Prose => "prose",
            Self::Lines => "lines",
        }
    }
}

/// A figure (or a line) worth keeping, with what labels it.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyItem {
    /// How much it is worth keeping; items are kept best first.
    pub weight: i32,
    /// Where it is in the output (its line), for ties.
    pub at: usize,
    /// Why it is key: `aggregate row`, `one-row result`, `footer`, …
    pub why: &'static str,
    /// What the values belong to: a row's first cells, a document path ("" for none).
    pub label: String,
    /// `(title, value)` pairs, most important first: a column's title and the cell, a key and
    /// its value. Empty for a line kept as it is.
    pub pairs: Vec<(String, String)>,
    /// A line kept as it is (when `pairs` is empty).
    pub line: String,
}

impl KeyItem {
    fn line(weight: i32, at: usize, why: &'static str, line: &str) -> Self {
        Self {
            weight,
            at,
            why,
            label: String::new(),
            pairs: Vec::new(),
            line: line.trim().to_owned(),
        }
    }

    /// The item as one line of at most `width` characters: `label · title = value; title =
    /// value`, pairs left out from the least important when it is too long, the label cut in
    /// its middle before the one value left; a kept line cut around its first figure.
    pub fn render(&self, width: usize) -> String {
        let width = width.max(12);
        if self.pairs.is_empty() {
            if matches!(self.why, "header" | "title") {
                // Titles are words: cut at the end.
                return end_cut(&self.line, width);
            }
            return clip(&self.line, width);
        }
        let mut pairs: Vec<String> = self
            .pairs
            .iter()
            .map(|(t, v)| {
                if t.is_empty() {
                    v.clone()
                } else {
                    format!("{t} = {v}")
                }
            })
            .collect();
        let join = |label: &str, pairs: &[String]| {
            if label.is_empty() {
                pairs.join("; ")
            } else {
                format!("{label} · {}", pairs.join("; "))
            }
        };
        while pairs.len() > 1 && chars(&join(&self.label, &pairs)) > width {
            pairs.pop();
        }
        let out = join(&self.label, &pairs);
        if chars(&out) <= width {
            return out;
        }
        // One pair left: keep it whole and as much of the label as fits, cut in its middle.
        let pair = &pairs[0];
        let room = width.saturating_sub(chars(pair) + 3);
        if room >= 5 && !self.label.is_empty() {
            return format!("{} · {pair}", middle_cut(&self.label, room));
        }
        clip(pair, width)
    }
}

/// A tool output read by its structure.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// What it was read as.
    pub kind: OutputKind,
    /// Its key figures and lines, best first.
    pub items: Vec<KeyItem>,
}

/// Bytes of an output the reader reads at most: past it, the output's head and tail are read
/// (a spilled output of megabytes is not parsed whole to choose a few lines).
const READ_BYTES: usize = 512 * 1024;

/// Reads `text` by its structure: its kind and its key items, best first.
pub fn read_output(text: &str) -> Reading {
    let text = bounded(text);
    let text = text.as_ref();
    let lines: Vec<&str> = text.lines().collect();
    let (kind, mut items) = if let Some(items) = document::json(text) {
        (OutputKind::Json, items)
    } else if let Some(items) = events::traceback(&lines) {
        (OutputKind::Traceback, items)
    } else if let Some(items) = document::yaml(&lines) {
        (OutputKind::Yaml, items)
    } else if let Some(items) = events::log(&lines) {
        (OutputKind::Log, items)
    } else if let Some((tables, items)) = table::tables(&lines) {
        let kind = if tables > 1 {
            OutputKind::Tables
        } else {
            OutputKind::Table
        };
        (kind, items)
    } else if let Some(items) = prose(&lines) {
        (OutputKind::Prose, items)
    } else {
        (OutputKind::Lines, line_items(&lines, 0))
    };
    items.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.at.cmp(&b.at)));
    Reading { kind, items }
}

/// `text`, or its head and tail when it is longer than [`READ_BYTES`].
fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= READ_BYTES {
        return text.into();
    }
    let mut head = READ_BYTES / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - READ_BYTES / 2;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}\n{}", &text[..head], &text[tail..]).into()
}

/// Lines weighed one by one (what no structure explains): the lines line salience scores at
/// 3 or more, the first and last lines for their place.
pub(crate) fn line_items(lines: &[&str], offset: usize) -> Vec<KeyItem> {
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && l.trim() != "…")
        .map(|(i, l)| {
            let edge = if Some(i) == first || Some(i) == last {
                2
            } else {
                0
            };
            KeyItem::line(line_salience(l).total + edge, offset + i, "line", l)
        })
        .filter(|item| item.weight >= 3)
        .collect()
}

/// Prose: few lines, most of them long sentences. Each sentence weighs what sentence salience
/// says; the sentence holding the largest figure of the text more (a whole is larger than its
/// parts, and a paragraph of figures names its total once); and a sentence built unlike the
/// others more again, when the others repeat one build (a generated report's lines, one of
/// which says something else).
fn prose(lines: &[&str]) -> Option<Vec<KeyItem>> {
    let body: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let total: usize = body.iter().map(|l| chars(l)).sum();
    if body.is_empty() || total / body.len() < 100 {
        return None;
    }
    let marks = body
        .iter()
        .flat_map(|l| l.chars())
        .filter(|c| matches!(c, '.' | '。' | '!' | '?' | '！' | '？'))
        .count();
    if marks * 200 < total {
        return None;
    }
    let mut all: Vec<(usize, &str)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        for s in sentences(l) {
            all.push((i, s));
        }
    }
    let largest = all
        .iter()
        .enumerate()
        .filter_map(|(k, (_, s))| largest_figure(s).map(|v| (k, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k);
    let shapes: Vec<String> = all.iter().map(|(_, s)| sentence_shape(s)).collect();
    let mut counts: std::collections::HashMap<&str, usize> = Default::default();
    for s in &shapes {
        *counts.entry(s.as_str()).or_default() += 1;
    }
    let repeated = counts.values().any(|n| *n >= 3);
    Some(
        all.iter()
            .enumerate()
            .map(|(k, (i, s))| {
                let mut w = sentence_salience(s).total;
                if Some(k) == largest {
                    w += 3;
                }
                if repeated && counts.get(shapes[k].as_str()) == Some(&1) {
                    w += 6;
                }
                KeyItem::line(w, *i * 1_000 + k, "sentence", s)
            })
            .filter(|item| item.weight >= 2)
            .collect(),
    )
}

/// How a sentence is built, its figures and names aside: words with digits become `#`, a run
/// of capitalised words `N`.
fn sentence_shape(sentence: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for w in sentence.split_whitespace() {
        let shape = if w.chars().any(|c| c.is_ascii_digit()) {
            "#"
        } else if w.chars().next().is_some_and(char::is_uppercase) {
            "N"
        } else {
            w
        };
        if shape == "N" && out.last() == Some(&"N") {
            continue;
        }
        out.push(shape);
    }
    out.join(" ")
}

/// The largest number of `text` with four digits or more.
fn largest_figure(text: &str) -> Option<f64> {
    numbers(text)
        .into_iter()
        .filter(|(_, _, digits, _)| *digits >= 4)
        .map(|n| n.3.abs())
        .max_by(f64::total_cmp)
}

/// The numbers of `text`: (char start, char end, digits, value). A comma between groups of
/// three digits and one decimal point belong to the number.
pub(crate) fn numbers(text: &str) -> Vec<(usize, usize, usize, f64)> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        // Digits inside a word or an identifier (`B-123`, `Q3`, `v2`) are not a number.
        let inside = i > 0
            && (cs[i - 1].is_alphanumeric()
                || cs[i - 1] == '_'
                || (cs[i - 1] == '-' && i > 1 && cs[i - 2].is_alphanumeric()));
        if !cs[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        if inside {
            while i < cs.len() && (cs[i].is_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            continue;
        }
        let start = if i > 0 && cs[i - 1] == '-' { i - 1 } else { i };
        let mut s = String::new();
        if start < i {
            s.push('-');
        }
        let mut digits = 0;
        let mut point = false;
        while i < cs.len() {
            let c = cs[i];
            let next_digit = cs.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() {
                digits += 1;
                s.push(c);
            } else if c == '.' && !point && next_digit {
                point = true;
                s.push(c);
            } else if c == ',' && !point && next_digit {
                // Part of the number when three digits follow.
                let group = cs[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                if group != 3 {
                    break;
                }
            } else {
                break;
            }
            i += 1;
        }
        if let Ok(v) = s.parse::<f64>() {
            out.push((start, i, digits, v));
        }
    }
    out
}

/// The value of a table cell or document scalar that is a number: digits with an optional
/// sign, thousands separators, decimal point, currency sign or percent sign.
pub(crate) fn number(cell: &str) -> Option<f64> {
    let t = cell.trim();
    let t = t
        .trim_start_matches(['$', '€', '£', '¥'])
        .trim_end_matches('%')
        .trim();
    if t.is_empty() || !t.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '-' | '+' | 'e' | 'E' | '_'))
    {
        return None;
    }
    t.replace([',', '_'], "").parse::<f64>().ok()
}

pub(crate) fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `s` cut to `width` characters at its end (`…` where it was cut).
fn end_cut(s: &str, width: usize) -> String {
    if chars(s) <= width {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `s` cut to `width` characters in its middle (`…` where it was cut).
fn middle_cut(s: &str, width: usize) -> String {
    let cs: Vec<char> = s.chars().collect();
    if cs.len() <= width {
        return s.to_owned();
    }
    let head = (width - 1) / 2;
    let tail = width - 1 - head;
    let mut out: String = cs[..head].iter().collect();
    out.push('…');
    out.extend(&cs[cs.len() - tail..]);
    out
}

/// A line cut to `width` characters: its start (what names what follows) and, when its first
/// figure lies past the start, a window around that figure, `…` where it was cut.
pub(crate) fn clip(line: &str, width: usize) -> String {
    let line = line.trim();
    let cs: Vec<char> = line.chars().collect();
    let width = width.max(8);
    if cs.len() <= width {
        return line.to_owned();
    }
    let head = width / 3;
    // The line's figure — its first number of the most digits (three or more) — kept whole,
    // with the start of the line before it.
    let all = numbers(line);
    let most = all.iter().map(|n| n.2).max().unwrap_or(0);
    let figure = all
        .into_iter()
        .find(|n| n.2 == most && most >= 3)
        .filter(|n| n.1 > width - 1)
        .map(|n| (n.0, n.1));
    match figure {
        Some((s, e)) => {
            let piece = e - s;
            // The head, `…`, the figure with what comes just before it, `…`.
            let room = width.saturating_sub(head + 2);
            if piece > room {
                let mut out: String = cs[..width - 1].iter().collect();
                out.push('…');
                return out;
            }
            let before = (room - piece).min(s.saturating_sub(head));
            let from = s - before;
            let mut out: String = cs[..head].iter().collect();
            out.push('…');
            out.extend(&cs[from..e]);
            if e < cs.len() {
                out.push('…');
            }
            out
        }
        None => {
            let mut out: String = cs[..width - 1].iter().collect();
            out.push('…');
            out
        }
    }
}

#[cfg(test)]
mod tests;
