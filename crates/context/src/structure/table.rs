//! Tables: delimited (CSV, TSV, semicolons, Markdown) and aligned (psql with its `-+-` rule
//! and `(N rows)` footer; pandas, fixed-width reports and other text aligned in columns), one
//! or several in an output, each with its title, header, rows, rules and footers. The figures
//! a table is read for are its aggregate rows and columns and its results of one row; each is
//! kept with its row's first cells and its column's title.

use super::names::is_aggregate;
use super::{KeyItem, chars, line_items, number};
use crate::salience::line_salience;

/// A table read from an output.
#[derive(Debug, Default)]
struct Table {
    /// The line above the header that names the table (`By region:`), if any.
    title: Option<(usize, String)>,
    /// The column titles ("" where a column has none).
    header: Vec<String>,
    header_at: Option<usize>,
    rows: Vec<Row>,
    /// Lines after the rows that belong to the table (`(12 rows)`, a note).
    footers: Vec<(usize, String)>,
    /// Lines inside the table that are not rows (a note between CSV rows).
    odd: Vec<(usize, String)>,
}

#[derive(Debug)]
struct Row {
    at: usize,
    cells: Vec<String>,
    /// Whether a rule line (`-----`, `=====`) comes just before the row.
    after_rule: bool,
    /// The line as printed.
    line: String,
}

/// The tables of `lines`, when tables are most of them: how many, and the key items of the
/// whole output (tables first, the lines between them weighed by line salience).
pub(super) fn tables(lines: &[&str]) -> Option<(usize, Vec<KeyItem>)> {
    let mut found: Vec<Table> = Vec::new();
    let mut covered = vec![false; lines.len()];
    let mut start = 0;
    while start < lines.len() {
        if lines[start].trim().is_empty() {
            start += 1;
            continue;
        }
        let end = (start..lines.len())
            .find(|&i| lines[i].trim().is_empty())
            .unwrap_or(lines.len());
        for t in read_block(lines, start, end) {
            mark(&t, &mut covered);
            found.push(t);
        }
        start = end;
    }
    let content = lines.iter().filter(|l| !l.trim().is_empty()).count();
    let table_lines = covered.iter().filter(|c| **c).count();
    if found.is_empty() || table_lines * 2 < content {
        return None;
    }
    let mut items = Vec::new();
    for t in &found {
        items.extend(table_items(t));
    }
    // Lines outside the tables: a footer of the table above (`[120 rows x 5 columns]`), a
    // title, a remark — weighed as lines, below the tables' own figures.
    let outside: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| !covered[*i] && !l.trim().is_empty())
        .map(|(i, l)| (i, *l))
        .collect();
    for (i, l) in outside {
        if is_footer(l) {
            items.push(KeyItem::line(4, i, "footer", l));
        } else {
            for mut item in line_items(&[l], i) {
                item.weight -= 1;
                items.push(item);
            }
        }
    }
    Some((found.len(), items))
}

fn mark(t: &Table, covered: &mut [bool]) {
    let mut set = |i: usize| {
        if let Some(c) = covered.get_mut(i) {
            *c = true;
        }
    };
    if let Some((i, _)) = t.title {
        set(i);
    }
    if let Some(i) = t.header_at {
        set(i);
    }
    for r in &t.rows {
        set(r.at);
    }
    for (i, _) in t.footers.iter().chain(&t.odd) {
        set(*i);
    }
    // Rules between the header and the last row.
    if let (Some(h), Some(last)) = (t.header_at, t.rows.last()) {
        for i in h..=last.at {
            set(i);
        }
    }
}

/// `(12 rows)`, `(1 row)` (psql), `[120 rows x 5 columns]`, `Name: amount, dtype: float64`
/// (pandas).
fn is_footer(line: &str) -> bool {
    let t = line.trim();
    if t.starts_with("dtype: ") || (t.starts_with("Name: ") && t.contains(", dtype: ")) {
        return true;
    }
    let inner = t
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')));
    inner.is_some_and(|r| {
        let mut words = r.split_whitespace();
        words.next().is_some_and(|n| n.parse::<u64>().is_ok())
            && words.next().is_some_and(|w| w == "rows" || w == "row")
    })
}

/// A rule line: dashes, equals signs or box lines (and `+` or `|` where columns meet).
fn is_rule(line: &str) -> bool {
    let t = line.trim();
    chars(t) >= 3
        && t.chars()
            .all(|c| matches!(c, '-' | '=' | '+' | '|' | ':' | ' ' | '─' | '═' | '┼'))
        && t.chars()
            .filter(|c| matches!(c, '-' | '=' | '─' | '═'))
            .count()
            * 2
            >= chars(t)
}

/// The tables of the block `lines[start..end]` (no blank line inside).
fn read_block(lines: &[&str], start: usize, end: usize) -> Vec<Table> {
    if let Some(t) = markdown(lines, start, end) {
        return vec![t];
    }
    let psql_tables = psql(lines, start, end);
    if !psql_tables.is_empty() {
        return psql_tables;
    }
    if let Some(t) = delimited(lines, start, end) {
        return vec![t];
    }
    aligned(lines, start, end).into_iter().collect()
}

/// Splits a delimited line on `d`, honouring double quotes.
fn split_delimited(line: &str, d: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut cs = line.chars().peekable();
    while let Some(c) = cs.next() {
        if c == '"' {
            if quoted && cs.peek() == Some(&'"') {
                cell.push('"');
                cs.next();
            } else {
                quoted = !quoted;
            }
        } else if c == d && !quoted {
            out.push(std::mem::take(&mut cell));
        } else {
            cell.push(c);
        }
    }
    out.push(cell);
    out.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// A Markdown table: `|`-framed lines with a `|---|` line under the header.
fn markdown(lines: &[&str], start: usize, end: usize) -> Option<Table> {
    let framed = |l: &str| {
        let t = l.trim();
        t.starts_with('|') && t.ends_with('|') && chars(t) >= 3
    };
    let cells = |l: &str| {
        let t = l.trim();
        let inner = &t[1..t.len() - 1];
        split_delimited(inner, '|')
    };
    let sep = (start + 1..end).find(|&i| {
        framed(lines[i])
            && cells(lines[i]).iter().all(|c| {
                let c = c.trim_matches(':');
                !c.is_empty() && c.chars().all(|x| x == '-')
            })
    })?;
    if !framed(lines[sep - 1]) {
        return None;
    }
    let mut t = Table {
        header: cells(lines[sep - 1]),
        header_at: Some(sep - 1),
        ..Table::default()
    };
    if sep >= start + 2 {
        t.title = Some((sep - 2, lines[sep - 2].trim().to_owned()));
    }
    for (i, line) in lines.iter().enumerate().take(end).skip(sep + 1) {
        if framed(line) {
            t.rows.push(Row {
                at: i,
                cells: cells(line),
                after_rule: false,
                line: line.trim().to_owned(),
            });
        } else {
            t.footers.push((i, line.trim().to_owned()));
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

/// psql's aligned tables: a header, a rule of dashes (with `+` where columns meet), rows cut
/// at the same places, `(N rows)`. A block may hold several.
fn psql(lines: &[&str], start: usize, end: usize) -> Vec<Table> {
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < end {
        let rule = lines[i].trim_end();
        let is_psql_rule = chars(rule.trim()) >= 3
            && rule.trim().chars().all(|c| c == '-' || c == '+')
            && !rule.trim().starts_with('+')
            && chars(lines[i - 1].trim()) > 0;
        if !is_psql_rule {
            i += 1;
            continue;
        }
        let rule_cs: Vec<char> = rule.chars().collect();
        let cuts: Vec<usize> = rule_cs
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == '+')
            .map(|(k, _)| k)
            .collect();
        let cut = |line: &str| -> Vec<String> {
            let cs: Vec<char> = line.chars().collect();
            let piece = |a: usize, b: usize| -> String {
                let (a, b) = (a.min(cs.len()), b.min(cs.len()));
                cs[a..b].iter().collect::<String>().trim().to_owned()
            };
            let mut cells = Vec::new();
            let mut from = 0;
            for &c in &cuts {
                cells.push(piece(from, c));
                from = c + 1;
            }
            cells.push(piece(from, cs.len()));
            cells
        };
        let fits = |line: &str| {
            let cs: Vec<char> = line.chars().collect();
            cuts.iter().all(|&c| c >= cs.len() || cs[c] == '|')
        };
        if !fits(lines[i - 1]) {
            i += 1;
            continue;
        }
        let mut t = Table {
            header: cut(lines[i - 1]),
            header_at: Some(i - 1),
            ..Table::default()
        };
        if i >= start + 2 && !is_footer(lines[i - 2]) {
            t.title = Some((i - 2, lines[i - 2].trim().to_owned()));
        }
        let mut j = i + 1;
        while j < end {
            let l = lines[j];
            if is_footer(l) {
                t.footers.push((j, l.trim().to_owned()));
                j += 1;
                break;
            }
            if !fits(l) {
                break;
            }
            t.rows.push(Row {
                at: j,
                cells: cut(l),
                after_rule: false,
                line: l.trim().to_owned(),
            });
            j += 1;
        }
        out.push(t);
        i = j + 1;
    }
    out
}

/// CSV, TSV or semicolon-separated lines: the delimiter that cuts most lines into the same
/// number of cells (two or more). Lines cut otherwise, inside the table, are notes.
fn delimited(lines: &[&str], start: usize, end: usize) -> Option<Table> {
    let n = end - start;
    if n < 3 {
        return None;
    }
    let mut best: Option<(char, usize, usize)> = None;
    for d in ['\t', ',', ';', '|'] {
        let counts: Vec<usize> = lines[start..end]
            .iter()
            .map(|l| split_delimited(l, d).len())
            .collect();
        let mut freq: std::collections::HashMap<usize, usize> = Default::default();
        for &c in &counts {
            *freq.entry(c).or_default() += 1;
        }
        let Some((&k, &m)) = freq
            .iter()
            .filter(|(k, _)| **k >= 2)
            .max_by_key(|(k, m)| (**m, **k))
        else {
            continue;
        };
        if m * 10 >= n * 8 && best.is_none_or(|b| m > b.2) {
            best = Some((d, k, m));
        }
    }
    let (d, k, _) = best?;
    // A comma splits prose too: ask for numbers in the cells.
    let cells_of = |l: &str| split_delimited(l, d);
    let numeric_cells = lines[start..end]
        .iter()
        .flat_map(|l| cells_of(l))
        .filter(|c| number(c).is_some())
        .count();
    if numeric_cells * 4 < n {
        return None;
    }
    if d == ',' && k == 2 && lines[start..end].iter().any(|l| chars(l) > 200) {
        return None;
    }
    let first = (start..end).find(|&i| cells_of(lines[i]).len() == k)?;
    let mut t = Table::default();
    if first > start {
        t.title = Some((first - 1, lines[first - 1].trim().to_owned()));
    }
    let head = cells_of(lines[first]);
    let body_numeric = head.iter().filter(|c| number(c).is_some()).count();
    let rows_from = if body_numeric == 0 {
        t.header = head;
        t.header_at = Some(first);
        first + 1
    } else {
        t.header = vec![String::new(); k];
        first
    };
    let last = (start..end)
        .rev()
        .find(|&i| cells_of(lines[i]).len() == k)
        .unwrap_or(first);
    for (i, line) in lines.iter().enumerate().take(end).skip(rows_from) {
        let cells = cells_of(line);
        if cells.len() == k {
            t.rows.push(Row {
                at: i,
                cells,
                after_rule: false,
                line: line.trim().to_owned(),
            });
        } else if i > last {
            t.footers.push((i, line.trim().to_owned()));
        } else {
            t.odd.push((i, line.trim().to_owned()));
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

/// Columns of text aligned by spaces (pandas, fixed-width reports, `column -t`): the places
/// where every line has a space (or has ended) cut the lines into cells. Leading lines that do
/// not follow the columns are the table's title; rule lines mark the rows after them.
fn aligned(lines: &[&str], start: usize, end: usize) -> Option<Table> {
    for skip in 0..3usize.min(end - start) {
        for min_gap in [2, 1] {
            if let Some(t) = aligned_from(lines, start + skip, end, start, min_gap) {
                return Some(t);
            }
        }
    }
    None
}

/// Whether a line is a row of dots (pandas' cut in the middle of a frame).
fn is_ellipsis(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == '.' || c == ' ' || c == '…')
}

fn aligned_from(
    lines: &[&str],
    from: usize,
    end: usize,
    block_start: usize,
    min_gap: usize,
) -> Option<Table> {
    let content: Vec<usize> = (from..end)
        .filter(|&i| !is_rule(lines[i]) && !is_footer(lines[i]) && !is_ellipsis(lines[i]))
        .collect();
    if content.len() < 2 || (min_gap == 1 && content.len() < 4) {
        return None;
    }
    let rows_cs: Vec<Vec<char>> = content
        .iter()
        .map(|&i| lines[i].chars().collect())
        .collect();
    let width = rows_cs.iter().map(Vec::len).max().unwrap_or(0);
    let space = |p: usize| rows_cs.iter().all(|r| r.get(p).is_none_or(|c| *c == ' '));
    // Column ranges: runs of positions that are not gaps of `min_gap` spaces or more.
    let mut is_gap = vec![false; width];
    let mut p = 0;
    while p < width {
        if space(p) {
            let q = (p..width).find(|&k| !space(k)).unwrap_or(width);
            if q - p >= min_gap || p == 0 || q == width {
                for g in &mut is_gap[p..q] {
                    *g = true;
                }
            }
            p = q;
        } else {
            p += 1;
        }
    }
    let mut cols: Vec<(usize, usize)> = Vec::new();
    let mut p = 0;
    while p < width {
        if is_gap[p] {
            p += 1;
            continue;
        }
        let q = (p..width).find(|&k| is_gap[k]).unwrap_or(width);
        cols.push((p, q));
        p = q;
    }
    if cols.len() < 2 {
        return None;
    }
    let cut = |line: &str| -> Vec<String> {
        let cs: Vec<char> = line.chars().collect();
        cols.iter()
            .map(|&(a, b)| {
                cs.get(a.min(cs.len())..b.min(cs.len()))
                    .map(|s| s.iter().collect::<String>().trim().to_owned())
                    .unwrap_or_default()
            })
            .collect()
    };
    let header_cells = cut(lines[content[0]]);
    let header_numeric = header_cells.iter().any(|c| number(c).is_some());
    let body: Vec<usize> = if header_numeric {
        content.clone()
    } else {
        content[1..].to_vec()
    };
    if body.is_empty() {
        return None;
    }
    let full = body
        .iter()
        .filter(|&&i| cut(lines[i]).iter().filter(|c| !c.is_empty()).count() >= 2)
        .count();
    let numeric = body
        .iter()
        .flat_map(|&i| cut(lines[i]))
        .filter(|c| number(c).is_some())
        .count();
    if full * 10 < body.len() * 7 || numeric < body.len() {
        return None;
    }
    let mut t = Table::default();
    if !header_numeric {
        t.header = header_cells;
        t.header_at = Some(content[0]);
    } else {
        t.header = vec![String::new(); cols.len()];
    }
    if from > block_start {
        t.title = Some((from - 1, lines[from - 1].trim().to_owned()));
    }
    let mut rule = false;
    let first_body = body.first().copied().unwrap_or(end);
    for (i, line) in lines.iter().enumerate().take(end).skip(from) {
        if Some(i) == t.header_at {
            continue;
        }
        if is_rule(line) {
            rule = i > first_body;
            continue;
        }
        if is_footer(line) {
            t.footers.push((i, line.trim().to_owned()));
            continue;
        }
        if is_ellipsis(line) {
            continue;
        }
        let cells = cut(line);
        // The index's name under the header (pandas): its only cell is the first.
        if t.rows.is_empty()
            && t.header_at.is_some()
            && cells.iter().skip(1).all(String::is_empty)
            && number(&cells[0]).is_none()
            && i < first_body + 1
        {
            continue;
        }
        t.rows.push(Row {
            at: i,
            cells,
            after_rule: rule,
            line: line.trim().to_owned(),
        });
        rule = false;
    }
    (!t.rows.is_empty()).then_some(t)
}

/// Whether `a` and `b` are the same amount as printed figures add up (cents of rounding per
/// term aside).
fn same(a: f64, b: f64, terms: usize) -> bool {
    (a - b).abs() <= 0.006 * terms as f64 + 1e-9 * b.abs().max(1.0)
}

/// The key items of a table: its title, header, footers and odd lines, then what sums it up
/// (aggregate rows, an aggregate column's cells) or, when nothing does, its salient rows.
fn table_items(t: &Table) -> Vec<KeyItem> {
    let cols = Columns::read(t);
    let mut items = frame_items(t);
    if let [r] = t.rows.as_slice() {
        items.extend(one_row_item(&cols, r));
        return items;
    }
    let col_score: Vec<i32> = (0..cols.n).map(|c| cols.aggregate_score(c)).collect();
    let (row_score, flagged) = cols.row_scores();
    let order_cols = |r: &Row| -> Vec<(String, String)> {
        let mut figures: Vec<usize> = cols.figures().filter(|&c| !cell(r, c).is_empty()).collect();
        figures.sort_by_key(|&c| (-col_score[c], std::cmp::Reverse(c)));
        figures
            .into_iter()
            .map(|c| (cols.title(c), cell(r, c).to_owned()))
            .collect()
    };
    let last_flagged = flagged.iter().rposition(|f| *f);
    for (k, r) in t.rows.iter().enumerate() {
        if flagged[k] {
            let pairs = order_cols(r);
            if pairs.is_empty() {
                continue;
            }
            let best_col = pairs
                .first()
                .and_then(|(h, _)| (0..cols.n).find(|&c| cols.title(c) == *h))
                .map_or(0, |c| col_score[c]);
            items.push(KeyItem {
                weight: 6 + row_score[k] + best_col / 2 + i32::from(Some(k) == last_flagged),
                at: r.at,
                why: "aggregate row",
                label: cols.row_label(r),
                pairs,
                line: r.line.clone(),
            });
        } else {
            // An aggregate column's cell of an ordinary row.
            for c in (0..cols.n).filter(|&c| col_score[c] >= 4) {
                if cell(r, c).is_empty() {
                    continue;
                }
                items.push(KeyItem {
                    weight: 1 + col_score[c] / 3,
                    at: r.at,
                    why: "aggregate column",
                    label: cols.row_label(r),
                    pairs: vec![(cols.title(c), cell(r, c).to_owned())],
                    line: r.line.clone(),
                });
            }
            // Ordinary rows speak for a table only when nothing sums it up: then they are
            // weighed as lines.
            let w = line_salience(&r.line).total;
            if w >= 3 && last_flagged.is_none() {
                items.push(KeyItem::line(w, r.at, "row", &r.line));
            }
        }
    }
    items
}

/// A cell as a value: pandas prints `...` where it cut columns out, which is none.
fn cell(r: &Row, c: usize) -> &str {
    let v = r.cells.get(c).map_or("", String::as_str);
    if v == "..." || v == "…" { "" } else { v }
}

/// The lines around the rows: title, header, footers and lines unlike the rows.
fn frame_items(t: &Table) -> Vec<KeyItem> {
    let mut items = Vec::new();
    if let Some((at, line)) = &t.title {
        items.push(KeyItem::line(2, *at, "title", line));
    }
    if let Some(at) = t.header_at {
        let titles: Vec<&str> = t
            .header
            .iter()
            .map(String::as_str)
            .filter(|h| !h.is_empty() && *h != "..." && *h != "…")
            .collect();
        if !titles.is_empty() {
            items.push(KeyItem::line(3, at, "header", &titles.join(" | ")));
        }
    }
    for (at, line) in &t.footers {
        let w = if is_footer(line) {
            4
        } else {
            2 + line_salience(line).total
        };
        items.push(KeyItem::line(w, *at, "footer", line));
    }
    for (at, line) in &t.odd {
        items.push(KeyItem::line(
            2 + line_salience(line).total,
            *at,
            "line unlike the rows",
            line,
        ));
    }
    items
}

/// A one-row result: its figures, last column first, under the row's label.
fn one_row_item(cols: &Columns<'_>, r: &Row) -> Option<KeyItem> {
    let pairs: Vec<(String, String)> = cols
        .figures()
        .rev()
        .map(|c| (cols.title(c), cell(r, c).to_owned()))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let label = cols.row_label(r);
    Some(KeyItem {
        weight: 14,
        at: r.at,
        why: "one-row result",
        label: if label == "(all)" {
            String::new()
        } else {
            label
        },
        pairs,
        line: r.line.clone(),
    })
}

/// A table's columns as the key items read them: which hold labels and which figures.
struct Columns<'t> {
    table: &'t Table,
    /// The widest row's cell count.
    n: usize,
    /// Each row's cells as numbers, where they read as one.
    values: Vec<Vec<Option<f64>>>,
    /// Cells with something in them, per column.
    filled: Vec<usize>,
    /// Whether the first column is pandas' index: untitled increasing whole numbers (cut in the
    /// middle when a long frame is printed), perhaps with a named row (`Total`) among them.
    index: bool,
    label: Vec<bool>,
    figure: Vec<bool>,
}

impl<'t> Columns<'t> {
    fn read(t: &'t Table) -> Self {
        let n = t.rows.iter().map(|r| r.cells.len()).max().unwrap_or(0);
        let values: Vec<Vec<Option<f64>>> = t
            .rows
            .iter()
            .map(|r| (0..n).map(|c| number(cell(r, c))).collect())
            .collect();
        let filled: Vec<usize> = (0..n)
            .map(|c| t.rows.iter().filter(|r| !cell(r, c).is_empty()).count())
            .collect();
        // A column is numeric when most of its filled cells are numbers.
        let numeric: Vec<bool> = (0..n)
            .map(|c| {
                let k = values.iter().filter(|v| v[c].is_some()).count();
                k > 0 && k * 10 >= filled[c] * 6
            })
            .collect();
        let index = n > 0 && {
            let ints: Vec<f64> = values.iter().filter_map(|v| v[0]).collect();
            t.header.first().is_none_or(String::is_empty)
                && ints.len() >= 2
                && ints.iter().all(|v| v.fract() == 0.0 && *v >= 0.0)
                && ints.windows(2).all(|w| w[1] > w[0])
        };
        let label: Vec<bool> = (0..n).map(|c| !numeric[c] || (c == 0 && index)).collect();
        let figure = (0..n).map(|c| numeric[c] && !label[c]).collect();
        Self {
            table: t,
            n,
            values,
            filled,
            index,
            label,
            figure,
        }
    }

    /// The columns that hold figures, left to right.
    fn figures(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.n).filter(|&c| self.figure[c])
    }

    /// Column `c`'s title ("" for none, or for pandas' `...`).
    fn title(&self, c: usize) -> String {
        let h = self.table.header.get(c).cloned().unwrap_or_default();
        if h == "..." || h == "…" {
            String::new()
        } else {
            h
        }
    }

    /// What a row is about: its label cells joined; an index's numbers count rows and are
    /// left out, its names (`Total`) label them; "(all)" for a row whose labels are empty.
    fn row_label(&self, r: &Row) -> String {
        let label_cells: Vec<&str> = (0..self.n)
            .filter(|&c| self.label[c])
            .map(|c| cell(r, c))
            .enumerate()
            .filter(|(c, v)| !(*c == 0 && self.index && number(v).is_some()))
            .map(|(_, v)| v)
            .collect();
        let said: Vec<&str> = label_cells
            .iter()
            .copied()
            .filter(|s| !s.is_empty())
            .collect();
        if said.is_empty() && !label_cells.is_empty() {
            "(all)".to_owned()
        } else {
            said.join(", ")
                .trim_matches(|c: char| c == '*' || c == '_')
                .to_owned()
        }
    }

    /// How much figure column `c` looks like an aggregate: named like one (4), the sum of
    /// its row's other figures in most rows (5).
    fn aggregate_score(&self, c: usize) -> i32 {
        if !self.figure[c] {
            return 0;
        }
        let mut s = 0;
        if is_aggregate(&self.title(c)) {
            s += 4;
        }
        let others: Vec<usize> = self.figures().filter(|&o| o != c).collect();
        let checked: Vec<bool> = self
            .values
            .iter()
            .filter(|v| v[c].is_some() && others.iter().filter(|&&o| v[o].is_some()).count() >= 2)
            .map(|v| {
                let sum: f64 = others.iter().filter_map(|&o| v[o]).sum();
                same(v[c].unwrap_or(0.0), sum, others.len())
            })
            .collect();
        if checked.len() >= 2 && checked.iter().filter(|x| **x).count() * 10 >= checked.len() * 7 {
            s += 5;
        }
        s
    }

    /// Each row's aggregate score and whether it is an aggregate row: named like one,
    /// grouping cells left empty (ROLLUP), after a rule, fewer cells than the rows (first
    /// pass); then the sum of all the other rows or of the rows since the previous aggregate.
    fn row_scores(&self) -> (Vec<i32>, Vec<bool>) {
        let rows = &self.table.rows;
        let usual_cells = {
            let mut freq: std::collections::HashMap<usize, usize> = Default::default();
            for r in rows {
                *freq
                    .entry(r.cells.iter().filter(|c| !c.is_empty()).count())
                    .or_default() += 1;
            }
            freq.into_iter()
                .max_by_key(|(k, n)| (*n, *k))
                .map_or(0, |(k, _)| k)
        };
        let mut flagged = vec![false; rows.len()];
        let mut row_score = vec![0i32; rows.len()];
        for (k, r) in rows.iter().enumerate() {
            let mut s = 0;
            if (0..self.n).any(|c| self.label[c] && is_aggregate(cell(r, c))) {
                s += 6;
            }
            let blank_groups = (0..self.n)
                .filter(|&c| self.label[c] && !(c == 0 && self.index))
                .filter(|&c| cell(r, c).is_empty() && self.filled[c] * 10 >= rows.len() * 7)
                .count();
            if blank_groups > 0 && self.figures().any(|c| self.values[k][c].is_some()) {
                s += 5;
            }
            if r.after_rule {
                s += 3;
            }
            if r.cells.iter().filter(|c| !c.is_empty()).count() < usual_cells {
                s += 1;
            }
            row_score[k] = s;
            flagged[k] = s >= 5;
        }
        for k in 0..rows.len() {
            row_score[k] += self.sum_score(k, &flagged);
            flagged[k] = row_score[k] >= 5;
        }
        (row_score, flagged)
    }

    /// How much row `k`'s figures sum others up: all the other rows (or half of them, when
    /// the total is among them) 6, the rows since the previous aggregate row 4.
    fn sum_score(&self, k: usize, flagged: &[bool]) -> i32 {
        let mut best = 0;
        for c in self.figures() {
            let Some(v) = self.values[k][c] else { continue };
            let others: Vec<f64> = (0..self.values.len())
                .filter(|&o| o != k)
                .filter_map(|o| self.values[o][c])
                .collect();
            if others.len() >= 2 {
                let sum: f64 = others.iter().sum();
                if same(v, sum, others.len()) || same(2.0 * v, sum, others.len()) {
                    best = best.max(6);
                    continue;
                }
            }
            // A subtotal: the rows since the previous aggregate row.
            let mut run = Vec::new();
            for o in (0..k).rev() {
                if flagged[o] {
                    break;
                }
                if let Some(x) = self.values[o][c] {
                    run.push(x);
                }
            }
            if run.len() >= 2 && same(v, run.iter().sum(), run.len()) {
                best = best.max(4);
            }
        }
        best
    }
}
