//! The lines of a tool output worth keeping when it leaves the window: totals and other
//! aggregates with their figures, identifiers, errors, lines shaped unlike the rest — and the
//! trace made of them.

use super::{Salience, contains_word, has_code, has_path, longest_number};
use crate::structure::names::WORDS as WHOLE_WORDS;
use crate::structure::{OutputKind, clip, read_output};

/// Words of a line that name a statistic of a whole: the other set functions of SQL
/// (ISO/IEC 9075) and the rows of pandas' `describe()`.
const STATISTIC_WORDS: &[&str] = &["avg", "mean", "median", "count", "std", "min", "max"];

/// Words test runners, compilers and loggers print for a failure.
const ERROR_WORDS: &[&str] = &["error", "failed", "failure", "exception", "warning", "错误"];

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
    if WHOLE_WORDS.iter().any(|w| contains_word(&lower, w)) {
        s.add("aggregate", 4);
    } else if STATISTIC_WORDS.iter().any(|w| contains_word(&lower, w)) {
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
    if ERROR_WORDS.iter().any(|w| contains_word(&lower, w)) {
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
/// status, its size, what the output was read as and where the full output is; then the
/// output's key items, best first — its figures with their labels (an aggregate row with its
/// first cells and column titles, a document value with its path, an exception, a log line of
/// its own kind; see [`read_output`]), or for an output of no known structure its most salient
/// lines — at most `max_chars` characters of lines (the header aside; 0 leaves the header
/// alone).
///
/// A trace can be traced again with a smaller cap: its header stays and its first lines that
/// fit stay (they are best first). `None` when the text already fits.
pub fn trace_text(
    text: &str,
    tool: &str,
    ok: bool,
    full_output: &str,
    max_chars: usize,
) -> Option<String> {
    let is_trace = text.starts_with(TRACE_MARK);
    let (header, body) = if is_trace {
        let (head, rest) = text.split_once('\n').unwrap_or((text, ""));
        (head.to_owned(), rest.to_owned())
    } else {
        (String::new(), text.to_owned())
    };
    // A trace's gap markers (of traces made before traces were best first) are not lines it
    // keeps: a trace traced again at the cap it was made with stays as it is.
    let body_chars = if is_trace {
        body.lines()
            .filter(|l| *l != "…")
            .map(|l| l.chars().count() + 1)
            .sum::<usize>()
            .saturating_sub(1)
    } else {
        body.chars().count()
    };
    let new_header = |kind: OutputKind| {
        let status = if ok { "ok" } else { "error" };
        let read = match kind {
            OutputKind::Lines => String::new(),
            other => format!(" · {}", other.name()),
        };
        format!(
            "{TRACE_MARK}{tool} · {status} · {} lines{read}; full output: {full_output}]",
            text.lines().count()
        )
    };
    if is_trace && body_chars <= max_chars {
        return None;
    }
    // Room for three lines; a trace of one key line may use all of it.
    let line_cap = if max_chars <= 80 {
        max_chars.saturating_sub(1)
    } else {
        (max_chars / 3).max(40)
    };
    // The best line may take more room than the others: what it says matters most.
    let wide = max_chars.saturating_sub(1).min(line_cap.max(160));
    let (header, candidates): (String, Vec<String>) = if is_trace {
        let lines = body
            .lines()
            .filter(|l| *l != "…" && !l.trim().is_empty())
            .enumerate()
            .map(|(k, l)| clip(l, if k == 0 { wide } else { line_cap }))
            .collect();
        (header, lines)
    } else {
        let reading = read_output(&body);
        let header = new_header(reading.kind);
        if body_chars + header.chars().count() <= max_chars {
            return None;
        }
        let lines = reading
            .items
            .iter()
            .enumerate()
            .map(|(k, i)| i.render(if k == 0 { wide } else { line_cap }))
            .collect();
        (header, lines)
    };
    if max_chars == 0 {
        return Some(header);
    }
    let mut out = header;
    let mut used = 0;
    let mut kept: Vec<&str> = Vec::new();
    for line in &candidates {
        let n = line.chars().count() + 1;
        if used + n > max_chars || kept.contains(&line.as_str()) {
            continue;
        }
        used += n;
        kept.push(line);
    }
    for line in kept {
        out.push('\n');
        out.push_str(line);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paragraph_is_traced_by_the_sentence_of_its_largest_figure() {
        let mut text = String::new();
        for i in 0..12 {
            text.push_str(&format!(
                "Depot {i} loaded {} pallets, {}4.5 kg each on average. ",
                300 + i,
                10 + i
            ));
            if i == 5 {
                text.push_str("The depots moved 4127.5 tonnes between them this week. ");
            }
        }
        let t = trace_text(&text, "run_python", true, "data_001", 70).unwrap();
        assert!(
            t.starts_with("[trace of run_python · ok · 1 lines · prose;"),
            "{t}"
        );
        assert!(t.contains("4127.5 tonnes"), "{t}");
    }

    #[test]
    fn line_scores_are_explained() {
        let s = line_salience("Sum of refunds, March: 18,204.10 (REF-0311-77)");
        let names: Vec<&str> = s.parts.iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            ["aggregate", "figure", "identifier", "aggregate figure"]
        );
        assert_eq!(s.total, 10);
        // A failure word marks an error; a statistic weighs less than a whole.
        let e = line_salience("upload failed after 3 retries");
        assert!(e.parts.iter().any(|p| p.0 == "error"), "{e:?}");
        assert!(
            line_salience("the total came to 9,870.00").total
                > line_salience("the median stay was 4 nights").total
        );
        assert!(line_salience("    ],").total < 0);
        assert_eq!(line_salience("Lisbon,W2,9").total, 1);
    }

    #[test]
    fn a_trace_keeps_the_figure_with_its_label_best_first() {
        let mut text = String::from("clinic,doctor,visits\n");
        let mut sum = 0;
        for i in 0..300 {
            text.push_str(&format!("C{},D{},{}\n", i % 5, i % 7, i % 40));
            sum += i % 40;
        }
        text.push_str(&format!("Total,,{sum}\n"));
        let trace = trace_text(&text, "query_database", true, "data/q1.json", 300).unwrap();
        assert!(
            trace.starts_with("[trace of query_database · ok · 302 lines · table;"),
            "{trace}"
        );
        assert!(trace.contains("full output: data/q1.json]"));
        let lines: Vec<&str> = trace.lines().skip(1).collect();
        assert_eq!(lines[0], format!("Total · visits = {sum}"), "{trace}");
        assert_eq!(lines[1], "clinic | doctor | visits", "{trace}");
        // A trace shrinks again with a smaller cap, keeping its header and its first lines.
        let smaller = trace_text(&trace, "ignored", false, "ignored", 30).unwrap();
        assert!(smaller.starts_with("[trace of query_database · ok · 302 lines"));
        assert_eq!(smaller.lines().nth(1), Some(lines[0]), "{smaller}");
        assert!(trace_text(&smaller, "x", true, "x", 1_000).is_none());
        let header = trace_text(&smaller, "x", true, "x", 0).unwrap();
        assert!(!header.contains('\n') && header.ends_with("data/q1.json]"));
        // A trace traced again at the cap it was made with is left as it is: a later
        // compaction does not rewrite it.
        let mut text = String::new();
        for i in 0..200 {
            if i % 2 == 0 {
                text.push_str(&format!(
                    "checksum of shard {i}: {}.25 ok\n",
                    i * 1000 + 1234
                ));
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
}
