//! Explainable salience of lines and sentences: what a shortened text must keep.
//!
//! A tool output that leaves the window keeps its head and tail and the lines that carry
//! figures, identifiers and totals ([`trace_text`]); a user or assistant text that must shrink
//! keeps its requirement sentences and those with numbers, codes, names and paths
//! ([`key_sentences`]). Every choice comes from a [`Salience`] whose parts say which signal
//! added what, so a kept or dropped line can be explained.

/// The salience of a line or a sentence, with the part each signal contributed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Salience {
    /// The sum of the parts.
    pub total: i32,
    /// Each signal and its contribution.
    pub parts: Vec<(&'static str, i32)>,
}

impl Salience {
    fn add(&mut self, name: &'static str, value: i32) {
        self.total += value;
        self.parts.push((name, value));
    }
}

/// Words that mark an aggregate: the figure a reader of a large output looks for.
const AGGREGATE_WORDS: &[&str] = &[
    "total", "subtotal", "sum", "grand", "overall", "net", "合计", "总计", "总和", "小计",
    "average", "avg", "mean", "median", "count", "growth", "change", "share", "rate", "平均",
    "增长", "占比",
];

/// The aggregate words that name a whole (a total, a sum) rather than a statistic of it: the
/// first [`STRONG_AGGREGATES`] of [`AGGREGATE_WORDS`].
const STRONG_AGGREGATES: usize = 10;

/// Words that mark a requirement, a constraint or a decision.
const REQUIREMENT_WORDS: &[&str] = &[
    "must",
    "should",
    "need",
    "needs",
    "required",
    "require",
    "only",
    "never",
    "always",
    "don't",
    "do not",
    "avoid",
    "exclude",
    "excluding",
    "include",
    "ensure",
    "make sure",
    "please",
    "deadline",
    "budget",
    "limit",
    "decided",
    "decision",
    "必须",
    "需要",
    "不要",
    "务必",
    "不能",
    "不得",
    "禁止",
    "一律",
    "排除",
];

/// Phrases that hold a requirement word without being a requirement ("能不能", can you).
const NOT_REQUIREMENTS: &[&str] = &["能不能"];

/// Words that mark a failure.
const ERROR_WORDS: &[&str] = &["error", "failed", "failure", "exception", "warning", "错误"];

fn contains_word(lower: &str, word: &str) -> bool {
    if !word.is_ascii() {
        return lower.contains(word);
    }
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(at) = lower[from..].find(word) {
        let start = from + at;
        let end = start + word.len();
        let before = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        // A word may take a plural or a past tense ("totals", "required").
        let after = end >= bytes.len() || !bytes[end].is_ascii_alphabetic() || {
            let rest = &lower[end..];
            rest.starts_with("s ") || rest.starts_with("ed") || rest == "s"
        };
        if before && after {
            return true;
        }
        from = end;
    }
    false
}

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

/// The longest run of digits in `text`, thousands separators and one decimal point included.
fn longest_number(text: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_digit() {
            run += 1;
        } else if (c == ',' || c == '.' || c == '_')
            && run > 0
            && chars.get(i + 1).is_some_and(char::is_ascii_digit)
        {
            // A separator inside a number keeps the run going.
        } else {
            best = best.max(run);
            run = 0;
        }
    }
    best.max(run)
}

/// Whether `text` holds a code or identifier: a token mixing letters and digits, or with an
/// inner `-`/`_` between letters and digits (`INV-2024-0042`, `BX4471`, `a1b2c3d4`).
fn has_code(text: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .any(|token| {
            let token = token.trim_matches(|c| c == '-' || c == '_');
            token.len() >= 4
                && token.len() <= 40
                && token.chars().any(|c| c.is_ascii_digit())
                && token.chars().any(|c| c.is_ascii_alphabetic())
                // Plain ordinals and units ("2024th", "10kg") are not codes.
                && (token.contains(['-', '_'])
                    || token.chars().filter(char::is_ascii_uppercase).count() >= 2
                    || token.chars().filter(char::is_ascii_digit).count() >= 3)
        })
}

/// Whether `text` holds a file path (a word with a slash and a dot, or a known extension).
pub(crate) fn has_path(text: &str) -> bool {
    const EXT: &[&str] = &[
        ".rs", ".py", ".ts", ".js", ".md", ".json", ".csv", ".xlsx", ".xls", ".sql", ".toml",
        ".yaml", ".txt", ".parquet", ".db",
    ];
    text.split(|c: char| {
        c.is_whitespace() || c == '`' || c == '"' || c == '\'' || c == '(' || c == ')'
    })
    .any(|w| {
        (w.contains('/') && w.contains('.') && !w.starts_with("http"))
            || EXT.iter().any(|e| w.ends_with(e) && w.len() > e.len())
    })
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

/// The salience of one sentence of a user or assistant text: requirement words, numbers,
/// codes, paths and proper names raise it; a question matters too.
pub fn sentence_salience(sentence: &str) -> Salience {
    let mut s = Salience::default();
    let trimmed = sentence.trim();
    if trimmed.is_empty() {
        return s;
    }
    let mut lower = trimmed.to_lowercase();
    for phrase in NOT_REQUIREMENTS {
        lower = lower.replace(phrase, " ");
    }
    if REQUIREMENT_WORDS.iter().any(|w| contains_word(&lower, w)) {
        s.add("requirement", 3);
    }
    if longest_number(trimmed) > 0 {
        s.add("number", 2);
    }
    if has_code(trimmed) {
        s.add("code", 2);
    }
    if has_path(trimmed) {
        s.add("path", 2);
    }
    // Capitalised words after the first: names of regions, products, people, tables.
    let names = trimmed
        .split_whitespace()
        .skip(1)
        .filter(|w| {
            let mut cs = w.chars();
            cs.next().is_some_and(char::is_uppercase) && cs.any(char::is_lowercase)
        })
        .count();
    // In Chinese or Japanese text, a word in Latin letters is a name, a code or a unit: the
    // words a reader cannot guess.
    let cjk = trimmed
        .chars()
        .any(|c| ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{4e00}'..='\u{9fff}').contains(&c));
    let latin = cjk
        && trimmed
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w.len() >= 2 && w.chars().any(|c| c.is_ascii_alphabetic()));
    if latin {
        s.add("name", 2);
    } else if names > 0 {
        s.add("name", 1);
    }
    if trimmed.ends_with('?') || trimmed.ends_with('？') {
        s.add("question", 1);
    }
    s
}

/// Splits a text into sentences: at line ends, and after `.`, `!`, `?` (or their CJK forms)
/// followed by a space or the end. The pieces keep their punctuation.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let end_mark = matches!(c, '.' | '!' | '?' | '。' | '！' | '？' | '；');
            let next_is_break = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
            let cjk = matches!(c, '。' | '！' | '？' | '；');
            if end_mark && (next_is_break || cjk) {
                let end = i + c.len_utf8();
                let piece = line[start..end].trim();
                if !piece.is_empty() {
                    out.push(piece);
                }
                start = end;
            }
        }
        let piece = line[start..].trim();
        if !piece.is_empty() {
            out.push(piece);
        }
    }
    out
}

/// What [`key_sentences`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySentences {
    /// The kept sentences, in their order, with a closing marker when some were left out.
    pub text: String,
    /// Sentences left out.
    pub left_out: usize,
}

/// The sentences of `text` worth keeping within `max_chars`: the first one, then the most
/// salient (requirements, numbers, codes, paths, names) in their original order. `None` when
/// the text already fits.
pub fn key_sentences(text: &str, max_chars: usize) -> Option<KeySentences> {
    if text.chars().count() <= max_chars {
        return None;
    }
    // A text cut before: its marker is not a sentence, and its count carries over.
    let (text, before) = match text.rsplit_once(" [… ") {
        Some((kept, marker)) if marker.ends_with(" sentence(s) left out]") => (
            kept,
            marker
                .trim_end_matches(" sentence(s) left out]")
                .parse::<usize>()
                .unwrap_or(0),
        ),
        _ => (text, 0),
    };
    let all = sentences(text);
    let mut ranked: Vec<(usize, i32)> = all
        .iter()
        .enumerate()
        .map(|(i, s)| (i, sentence_salience(s).total))
        .filter(|&(_, score)| score > 0)
        // The first sentence, when it says something, opens the text: it wins a tie.
        .map(|(i, score)| (i, if i == 0 { score + 1 } else { score }))
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0;
    for (i, _) in ranked {
        // A sentence said twice is kept once.
        if chosen.iter().any(|&c| all[c] == all[i]) {
            continue;
        }
        let n = all[i].chars().count() + 1;
        if used + n > max_chars {
            continue;
        }
        used += n;
        chosen.push(i);
    }
    if chosen.is_empty() {
        // Nothing scores: the lead of the text, cut.
        let lead: String = text.chars().take(max_chars.saturating_sub(1)).collect();
        return Some(KeySentences {
            text: format!("{lead}…"),
            left_out: all.len().saturating_sub(1) + before,
        });
    }
    chosen.sort_unstable();
    let left_out = all.len() - chosen.len() + before;
    let mut out = chosen.iter().map(|&i| all[i]).collect::<Vec<_>>().join(" ");
    if left_out > 0 {
        out.push_str(&format!(" [… {left_out} sentence(s) left out]"));
    }
    Some(KeySentences {
        text: out,
        left_out,
    })
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
    fn a_text_cut_again_keeps_one_marker_with_the_whole_count() {
        let text = "First we look. Then we check the EUR totals for CC-7741 please. \
                    Some filler here. More filler there. And one more filler.";
        let once = key_sentences(text, 90).unwrap();
        let twice = key_sentences(&once.text, 50).unwrap();
        assert_eq!(twice.text.matches("left out]").count(), 1, "{}", twice.text);
        assert_eq!(twice.left_out, 4, "{}", twice.text);
        assert!(twice.text.contains("CC-7741"), "{}", twice.text);
    }

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
    fn words_match_whole_words() {
        assert!(contains_word("the totals are in", "total"));
        assert!(contains_word("sum: 4", "sum"));
        assert!(!contains_word("summer sales", "sum"));
        assert!(!contains_word("only sums", "count"));
        assert!(contains_word("必须用欧元", "必须"));
    }

    #[test]
    fn sentences_split_on_marks_and_lines() {
        let s = sentences("Use EUR. Exclude Central!\nWhy did West jump? 价格上涨。下一步");
        assert_eq!(
            s,
            [
                "Use EUR.",
                "Exclude Central!",
                "Why did West jump?",
                "价格上涨。",
                "下一步"
            ]
        );
        assert_eq!(sentences("v1.2 is out"), ["v1.2 is out"]);
    }

    #[test]
    fn key_sentences_keep_requirements_and_figures() {
        let text = format!(
            "Please analyse Q3. {} You must report in EUR. The budget code is BX-4471. {}",
            "It was a sunny day and everyone was happy. ".repeat(20),
            "Nothing else matters here at all. ".repeat(10)
        );
        let cut = key_sentences(&text, 150).unwrap();
        assert!(cut.text.starts_with("Please analyse Q3."), "{}", cut.text);
        assert!(cut.text.contains("You must report in EUR."), "{}", cut.text);
        assert!(cut.text.contains("BX-4471"), "{}", cut.text);
        assert!(!cut.text.contains("sunny"));
        assert!(cut.left_out > 20);
        assert!(key_sentences("short", 100).is_none());
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
        assert!(trace_text(&trace, "x", true, "x", 300).is_none(), "{trace}");
    }

    #[test]
    fn a_line_without_a_figure_is_cut_at_its_end() {
        let line = "○ spotter-4te [EPIC] · End-to-end OpenTelemetry tracing (plugin -> Phoenix) [● P1 · open]";
        assert_eq!(clip_line(line, 30), "○ spotter-4te [EPIC] · End-to…");
    }
}
