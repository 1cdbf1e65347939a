//! The lines of a tool output worth keeping when it leaves the window: totals and other
//! aggregates with their figures, identifiers, errors, lines shaped unlike the rest — and the
//! trace made of them.

use super::{Salience, contains_word, has_code, has_path, longest_number};

/// Words that mark an aggregate: the figure a reader of a large output looks for.
const AGGREGATE_WORDS: &[&str] = &[
    "total", "subtotal", "sum", "grand", "overall", "net", "合计", "总计", "总和", "小计",
    "average", "avg", "mean", "median", "count", "growth", "change", "share", "rate", "平均",
    "增长", "占比",
];

/// The aggregate words that name a whole (a total, a sum) rather than a statistic of it: the
/// first [`STRONG_AGGREGATES`] of [`AGGREGATE_WORDS`].
const STRONG_AGGREGATES: usize = 10;

/// Words that mark a failure.
const ERROR_WORDS: &[&str] = &["error", "failed", "failure", "exception", "warning", "错误"];

/// Whether `text` names an exception the way Python, Java or Rust print one (`ValueError:`,
/// `java.io.IOException`).
fn names_an_exception(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.len() > 5 && (w.ends_with("Error") || w.ends_with("Exception")))
}

/// Where the figure of a long line is: the first aggregate word followed by a number of four
/// digits or more, else the longest number of three digits or more; as a char range
/// `[start, end)` to keep in view. `None` (keep the line's start) when no number is a figure: a
/// version, a line number or a count of one or two digits says less than the line's words.
fn focus(line: &str) -> Option<(usize, usize)> {
    let chars: Vec<char> = line.chars().collect();
    let lower: String = line.to_lowercase();
    let lower_chars: Vec<char> = lower.chars().collect();
    // Numbers: (start, end, digits).
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            let mut digits = 0;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || ((chars[i] == ',' || chars[i] == '.')
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                digits += usize::from(chars[i].is_ascii_digit());
                i += 1;
            }
            numbers.push((start, i, digits));
        } else {
            i += 1;
        }
    }
    let aggregate = AGGREGATE_WORDS
        .iter()
        .filter_map(|w| {
            let at = lower.find(w)?;
            Some(lower[..at].chars().count())
        })
        .filter(|&at| {
            numbers
                .iter()
                .any(|&(s, _, d)| s >= at && d >= 4 && s - at <= 60)
        })
        .min();
    if lower_chars.len() != chars.len() {
        // Lower-casing changed the length (some scripts): the longest number only.
        return numbers
            .iter()
            .filter(|n| n.2 >= 3)
            .max_by_key(|n| n.2)
            .map(|&(s, e, _)| (s, e));
    }
    match aggregate {
        Some(at) => numbers
            .iter()
            .find(|&&(s, _, d)| s >= at && d >= 4)
            .map(|&(_, e, _)| (at, e)),
        None => numbers
            .iter()
            .filter(|n| n.2 >= 3)
            .max_by_key(|n| n.2)
            .map(|&(s, e, _)| (s, e)),
    }
}

/// `line` cut to `max` chars around its figure (see [`focus`]), `…` where it was cut.
fn clip_line(line: &str, max: usize) -> String {
    let line = line.trim_end();
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= max {
        return line.to_owned();
    }
    let max = max.max(8);
    let piece = |from: usize, to: usize| -> String {
        let mut out = String::new();
        if from > 0 {
            out.push('…');
        }
        out.extend(&chars[from..to]);
        if to < chars.len() {
            out.push('…');
        }
        out
    };
    match focus(line) {
        Some((s, e)) if e > max - 1 => {
            // The figure is past the first `max - 1` chars: keep what names it (the aggregate
            // word) and the figure itself, with `…` for what is left out between.
            let width = max - 2;
            let end = (e + 2).min(chars.len());
            if end - s <= width {
                piece(s, (s + width).min(chars.len()))
            } else {
                let head = (width / 3).max(1);
                let tail = width - head - 1;
                let mut out = piece(s, s + head);
                out.extend(&chars[end - tail..end]);
                if end < chars.len() {
                    out.push('…');
                }
                out
            }
        }
        _ => piece(0, max - 1),
    }
}

/// The salience of one line of a tool output: aggregates, figures, identifiers, key-value
/// pairs, paths and errors raise it; lines of bare structure (`},`, `]`) lower it.
pub fn line_salience(line: &str) -> Salience {
    let mut s = Salience::default();
    let trimmed = line.trim();
    if trimmed.is_empty() {
        s.add("empty", -5);
        return s;
    }
    let lower = trimmed.to_lowercase();
    if AGGREGATE_WORDS[..STRONG_AGGREGATES]
        .iter()
        .any(|w| contains_word(&lower, w))
    {
        s.add("aggregate", 4);
    } else if AGGREGATE_WORDS.iter().any(|w| contains_word(&lower, w)) {
        s.add("aggregate", 3);
    }
    let digits = longest_number(trimmed);
    if digits >= 4 {
        s.add("figure", 2);
    } else if digits > 0 {
        s.add("number", 1);
    }
    if trimmed.contains('%') && digits > 0 {
        s.add("percent", 1);
    }
    if has_code(trimmed) {
        s.add("identifier", 2);
    }
    if has_path(trimmed) {
        s.add("path", 2);
    }
    if ERROR_WORDS.iter().any(|w| contains_word(&lower, w)) || names_an_exception(trimmed) {
        s.add("error", 2);
    }
    if s.parts.iter().any(|p| p.0 == "aggregate") && digits >= 4 {
        // A total with its figure on the same line: what a reader of the output wants first.
        s.add("aggregate figure", 2);
    }
    let letters = trimmed.chars().filter(|c| c.is_alphanumeric()).count();
    if letters * 3 < trimmed.chars().count() {
        s.add("structure", -2);
    }
    if trimmed.chars().count() > 400 {
        s.add("long", -1);
    }
    s
}

/// What a line of a listing looks like, ignoring its values: its separators and whether it
/// opens with a digit or a letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Shape {
    commas: u16,
    pipes: u16,
    tabs: u16,
    colons: u16,
    equals: u16,
    words: u16,
    lead: u8,
}

impl Shape {
    fn of(line: &str) -> Self {
        let n = |c: char| u16::try_from(line.matches(c).count()).unwrap_or(u16::MAX);
        let trimmed = line.trim_start();
        Self {
            commas: n(','),
            pipes: n('|'),
            tabs: n('\t'),
            colons: n(':'),
            equals: n('='),
            words: u16::try_from(trimmed.split_whitespace().count().min(12)).unwrap_or(12),
            lead: match trimmed.chars().next() {
                Some(c) if c.is_ascii_digit() => 1,
                Some(c) if c.is_alphabetic() => 2,
                Some(_) => 3,
                None => 0,
            },
        }
    }
}

/// What a line shaped unlike the majority adds to its salience.
const DISTINCT_SHAPE: i32 = 2;

/// The shape of more than half of the lines, when there is one.
fn common_shape(shapes: &[Shape]) -> Option<Shape> {
    let mut counts: std::collections::HashMap<Shape, usize> = std::collections::HashMap::new();
    for s in shapes {
        *counts.entry(*s).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(s, n)| (n, s.commas, s.words))
        .filter(|&(_, n)| n * 2 > shapes.len())
        .map(|(s, _)| s)
}

/// The lines worth keeping of a listing, as (index, score), best first (ties: earlier first):
/// lines scoring at least 3 by [`line_salience`], plus 3 for the first and last lines (a
/// header row, a row count) and [`DISTINCT_SHAPE`] for a line shaped unlike most others (a
/// total under table rows, a note in a listing).
fn ranked_lines(lines: &[&str]) -> Vec<(usize, i32)> {
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let shapes: Vec<Shape> = lines.iter().map(|l| Shape::of(l)).collect();
    let common = common_shape(&shapes);
    let mut ranked: Vec<(usize, i32)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            // The first and last lines (a header row, a row count) count for their place, but
            // not over a line that carries a figure: a figure on an edge line scores as one.
            let edge = if (Some(i) == first || Some(i) == last) && longest_number(l) < 4 {
                3
            } else {
                0
            };
            let distinct = if common.is_some_and(|c| c != shapes[i]) && !l.trim().is_empty() {
                DISTINCT_SHAPE
            } else {
                0
            };
            (i, line_salience(l).total + edge + distinct)
        })
        .filter(|&(_, score)| score >= 3)
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
}

/// The `n` most salient lines of a tool output (figures, identifiers, totals; never its first
/// or last line for their place alone), best first.
pub fn salient_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().filter(|l| *l != "…").collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    ranked_lines(&lines)
        .into_iter()
        .filter(|&(i, score)| {
            let edge = Some(i) == first || Some(i) == last;
            !edge || score >= 6
        })
        .take(n)
        .map(|(i, _)| lines[i].trim())
        .collect()
}

/// The marker that opens every trace, so a trace is never traced again.
pub const TRACE_MARK: &str = "[trace of ";

/// What a tool output that leaves the window leaves behind: a header naming the tool, its
/// status, its size and where the full output is; the first line (a header row, say); the most
/// salient lines (figures, identifiers, totals) in their order; the last line — at most
/// `max_chars` characters of lines (the header aside; 0 leaves the header alone).
///
/// A trace can be traced again with a smaller cap: its header stays and its lines are chosen
/// again. `None` when the text already fits.
pub fn trace_text(
    text: &str,
    tool: &str,
    ok: bool,
    full_output: &str,
    max_chars: usize,
) -> Option<String> {
    let (header, body) = match text.strip_prefix(TRACE_MARK) {
        Some(_) => {
            let (head, rest) = text.split_once('\n').unwrap_or((text, ""));
            (head.to_owned(), rest.to_owned())
        }
        None => {
            let status = if ok { "ok" } else { "error" };
            let header = format!(
                "{TRACE_MARK}{tool} · {status} · {} lines; full output: {full_output}]",
                text.lines().count()
            );
            (header, text.to_owned())
        }
    };
    let is_trace = text.starts_with(TRACE_MARK);
    // A trace's gap markers are not lines it keeps: a trace traced again at the cap it was
    // made with stays as it is (a compaction that finds it does not rewrite it).
    let body_chars = if is_trace {
        body.lines()
            .filter(|l| *l != "…")
            .map(|l| l.chars().count() + 1)
            .sum::<usize>()
            .saturating_sub(1)
    } else {
        body.chars().count()
    };
    if body_chars <= max_chars && (is_trace || body_chars + header.chars().count() <= max_chars) {
        return None;
    }
    if max_chars == 0 {
        return Some(header);
    }
    // Lines a previous trace wrote as gap markers are not content. A long line of prose is
    // ranked sentence by sentence.
    let lines: Vec<&str> = body
        .lines()
        .filter(|l| *l != "…")
        .flat_map(|l| {
            if l.chars().count() > 400 {
                l.split_inclusive(". ").collect::<Vec<_>>()
            } else {
                vec![l]
            }
        })
        .collect();
    // Room for three lines; a trace of one key line may use all of it.
    let line_cap = if max_chars <= 80 {
        max_chars
    } else {
        (max_chars / 3).max(40)
    };
    let mut ranked = ranked_lines(&lines);
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut keep: Vec<usize> = Vec::new();
    let mut used = 0;
    for (i, _) in ranked {
        let n = clip_line(lines[i], line_cap).chars().count() + 1;
        if used + n > max_chars {
            continue;
        }
        used += n;
        keep.push(i);
    }
    keep.sort_unstable();
    let mut out = header;
    let mut prev: Option<usize> = None;
    for &i in &keep {
        if prev.is_some_and(|p| i > p + 1) || (prev.is_none() && i > 0) {
            out.push_str("\n…");
        }
        out.push('\n');
        out.push_str(&clip_line(lines[i], line_cap));
        prev = Some(i);
    }
    if prev.is_some_and(|p| p + 1 < lines.len()) {
        out.push_str("\n…");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_is_traced_by_its_total_sentence() {
        let mut text = String::new();
        for i in 0..12 {
            text.push_str(&format!(
                "In EAST the Dock line sold {} units at an average of 3{i}627.53 per order. ",
                500 + i
            ));
            if i == 5 {
                text.push_str("Net revenue for EAST over the period came to 84123.45. ");
            }
        }
        let t = trace_text(&text, "run_python", true, "data_001", 60).unwrap();
        assert!(t.contains("84123.45"), "{t}");
    }

    #[test]
    fn a_long_line_is_cut_around_its_figure() {
        let line = r#"  {"summary": {"region": "CENTRAL", "total": 84123.45, "rows": 90}}"#;
        let cut = clip_line(line, 40);
        assert!(cut.contains("84123.45"), "{cut}");
        assert!(cut.chars().count() <= 40, "{cut}");
        assert!(cut.starts_with('…') && cut.ends_with('…'), "{cut}");
        // A line whose figure is in its first chars keeps its start.
        assert_eq!(
            clip_line("TOTAL 1234.5 and then a very long tail of words", 20),
            "TOTAL 1234.5 and th…"
        );
        assert_eq!(clip_line("short", 20), "short");
    }

    #[test]
    fn line_scores_are_explained() {
        let s = line_salience("Grand total West Q3: 444,645.00 (INV-2024-0042)");
        let names: Vec<&str> = s.parts.iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            ["aggregate", "figure", "identifier", "aggregate figure"]
        );
        assert_eq!(s.total, 10);
        // An exception's name marks an error; a statistic weighs less than a total.
        let e = line_salience("ValueError: EAST total 84123.45 does not match");
        assert!(e.parts.iter().any(|p| p.0 == "error"), "{e:?}");
        assert!(
            line_salience("Net revenue came to 12,345.67.").total
                > line_salience("sold 504 units at an average of 31627.53").total
        );
        assert!(line_salience("    ],").total < 0);
        assert_eq!(line_salience("North,Q1,12").total, 1);
    }

    #[test]
    fn traces_keep_head_totals_and_tail() {
        let mut text = String::from("region,product,amount\n");
        for i in 0..300 {
            text.push_str(&format!("R{},P{},{}\n", i % 5, i % 7, i * 3));
            if i == 150 {
                text.push_str("TOTAL,all,1234567.89\n");
            }
        }
        text.push_str("300 rows");
        let trace = trace_text(&text, "query_database", true, "data/q1.json", 300).unwrap();
        assert!(trace.starts_with("[trace of query_database · ok · 303 lines;"));
        assert!(trace.contains("full output: data/q1.json]"));
        assert!(trace.contains("\nregion,product,amount\n"), "{trace}");
        assert!(trace.contains("TOTAL,all,1234567.89"), "{trace}");
        assert!(trace.ends_with("300 rows"), "{trace}");
        // A trace shrinks again with a smaller cap, keeping its header and its total first.
        let smaller = trace_text(&trace, "ignored", false, "ignored", 40).unwrap();
        assert!(smaller.starts_with("[trace of query_database · ok · 303 lines"));
        assert!(smaller.contains("TOTAL,all,1234567.89"), "{smaller}");
        assert!(trace_text(&smaller, "x", true, "x", 1_000).is_none());
        let header = trace_text(&smaller, "x", true, "x", 0).unwrap();
        assert!(!header.contains('\n') && header.ends_with("data/q1.json]"));
        // A trace traced again at the cap it was made with is left as it is, gap markers and
        // all: a later compaction does not rewrite it.
        // Totals on every other line: the kept lines fill the cap, with a gap marker between
        // each two.
        let mut text = String::new();
        for i in 0..200 {
            if i % 2 == 0 {
                text.push_str(&format!("TOTAL region {i}: {}.50 units\n", i * 1000 + 1234));
            } else {
                text.push_str("-\n");
            }
        }
        for cap in [60, 80, 120, 160, 200, 240, 300, 400] {
            let made = trace_text(&text, "query_database", true, "data/q1.json", cap).unwrap();
            assert!(
                trace_text(&made, "x", true, "x", cap).is_none(),
                "at {cap}: {made}"
            );
        }
    }

    #[test]
    fn a_line_without_a_figure_is_cut_at_its_end() {
        let line = "○ spotter-4te [EPIC] · End-to-end OpenTelemetry tracing (plugin -> Phoenix) [● P1 · open]";
        assert_eq!(clip_line(line, 30), "○ spotter-4te [EPIC] · End-to…");
    }
}
