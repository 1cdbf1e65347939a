//! Logs and tracebacks: what a run printed as it went. A log's lines are read by their shape
//! (the line with its numbers and ids taken out): a shape that occurs once says something the
//! others do not, and a line's level says how much it matters. A traceback is read for its
//! exception and the frame that raised it.

use std::collections::HashMap;

use super::{KeyItem, line_items, numbers};

/// Levels of the logging libraries (syslog's severities and the names log4j, Python's
/// `logging`, Elixir's Logger and the `log` crate print), with what each adds to a line.
const LEVELS: &[(&str, i32)] = &[
    ("emergency", 3),
    ("alert", 3),
    ("critical", 3),
    ("crit", 3),
    ("fatal", 3),
    ("error", 3),
    ("err", 3),
    ("warning", 2),
    ("warn", 2),
    ("notice", 1),
    ("info", 0),
    ("debug", 0),
    ("trace", 0),
];

/// Where a line's message starts when it opens with a time (`2024-10-02T08:00:01Z`,
/// `08:00:01.123`, `[2024-10-02 08:00:01]`) or a level; `None` when it opens with neither.
fn message_start(line: &str) -> Option<usize> {
    let cs: Vec<char> = line.chars().collect();
    let mut i = 0;
    if cs.first() == Some(&'[') {
        i = 1;
    }
    let digits_at =
        |k: usize, n: usize| (k..k + n).all(|j| cs.get(j).is_some_and(char::is_ascii_digit));
    // A date may come first; a time must.
    if digits_at(i, 4)
        && cs.get(i + 4) == Some(&'-')
        && digits_at(i + 5, 2)
        && cs.get(i + 7) == Some(&'-')
        && digits_at(i + 8, 2)
        && matches!(cs.get(i + 10), Some('T' | ' '))
    {
        i += 11;
    }
    if digits_at(i, 2) && cs.get(i + 2) == Some(&':') && digits_at(i + 3, 2) {
        i += 5;
        while i < cs.len() && !cs[i].is_whitespace() && cs[i] != ']' {
            i += 1;
        }
        while i < cs.len() && (cs[i].is_whitespace() || cs[i] == ']') {
            i += 1;
        }
        return Some(cs[..i.min(cs.len())].iter().map(|c| c.len_utf8()).sum());
    }
    level(line).map(|_| 0)
}

/// The level named in the first words of `line`, with its weight: a level word written the
/// way loggers print it (in capitals, in brackets, or before a colon), not a word of prose.
fn level(line: &str) -> Option<i32> {
    line.split_whitespace().take(4).find_map(|token| {
        let word = token
            .trim_start_matches('[')
            .trim_end_matches([']', ':', '|']);
        let printed = token.starts_with('[')
            || token.ends_with(':')
            || token.ends_with(']')
            || (word.chars().all(|c| c.is_ascii_uppercase()) && word.len() >= 3);
        if !printed {
            return None;
        }
        let w = word.to_lowercase();
        LEVELS.iter().find(|(name, _)| *name == w).map(|(_, v)| *v)
    })
}

/// A line with its level, numbers and ids taken out: what lines of the same kind share
/// (the same message at another level is the same kind of line).
fn shape(message: &str) -> String {
    message
        .split_whitespace()
        .filter(|w| level(w).is_none())
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_digit()) {
                "#"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The key items of a log, or `None` when most lines do not open with a time or a level.
pub(super) fn log(lines: &[&str]) -> Option<Vec<KeyItem>> {
    let content: Vec<usize> = (0..lines.len())
        .filter(|&i| !lines[i].trim().is_empty())
        .collect();
    let starts: Vec<Option<usize>> = lines.iter().map(|l| message_start(l)).collect();
    let logged = content.iter().filter(|&&i| starts[i].is_some()).count();
    if logged < 3 || logged * 10 < content.len() * 6 {
        return None;
    }
    let message = |i: usize| lines[i][starts[i].unwrap_or(0)..].trim();
    let mut shapes: HashMap<String, usize> = HashMap::new();
    for &i in &content {
        if starts[i].is_some() {
            *shapes.entry(shape(message(i))).or_default() += 1;
        }
    }
    let last = content.last().copied();
    let mut items = Vec::new();
    for &i in &content {
        if starts[i].is_none() {
            // A continuation (a stack frame, a wrapped message): weighed as a line.
            for mut item in line_items(&[lines[i]], i) {
                item.weight -= 2;
                items.push(item);
            }
            continue;
        }
        let m = message(i);
        let mut w = 1 + level(lines[i]).unwrap_or(0);
        if logged >= 5 && shapes.get(&shape(m)).copied() == Some(1) {
            w += 4;
        }
        if numbers(m).iter().any(|n| n.2 >= 4) {
            w += 1;
        }
        if Some(i) == last {
            w += 2;
        }
        items.push(KeyItem::line(w, i, "log line", m));
    }
    Some(items)
}

/// The key items of a traceback (Python, Java or JavaScript, Elixir, Rust, Go), or `None`
/// when the lines hold none.
pub(super) fn traceback(lines: &[&str]) -> Option<Vec<KeyItem>> {
    let trimmed: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
    let python = trimmed.contains(&"Traceback (most recent call last):");
    let frames_at = trimmed.iter().filter(|l| l.starts_with("at ")).count();
    let indented_at = lines
        .iter()
        .filter(|l| l.starts_with(char::is_whitespace) && l.trim_start().starts_with("at "))
        .count();
    let elixir = trimmed.iter().any(|l| l.starts_with("** ("));
    let rust = trimmed.iter().any(|l| l.contains("panicked at"));
    let go = trimmed.iter().any(|l| l.starts_with("panic: "))
        && trimmed.iter().any(|l| l.starts_with("goroutine "));
    let jvm = frames_at >= 2 && indented_at >= 2;
    if !(python || jvm || elixir || rust || go) {
        return None;
    }
    let mut key: Vec<(usize, i32, &'static str)> = Vec::new();
    if python {
        // An exception line: at the margin, after an indented frame, not a chaining remark.
        let mut found = Vec::new();
        for i in 1..lines.len() {
            let l = lines[i];
            if l.is_empty() || l.starts_with(char::is_whitespace) {
                continue;
            }
            let prev = (0..i).rev().find(|&j| !lines[j].trim().is_empty());
            let after_frame = prev.is_some_and(|j| lines[j].starts_with(char::is_whitespace));
            let remark = l.starts_with("Traceback")
                || l.starts_with("During handling")
                || l.starts_with("The above exception");
            if after_frame && !remark {
                found.push(i);
            }
        }
        let last = found.last().copied();
        for &i in &found {
            key.push((i, if Some(i) == last { 10 } else { 8 }, "exception"));
        }
        // The frame that raised the last exception: the last `File …` line before it.
        if let Some(e) = last
            && let Some(f) = (0..e).rev().find(|&j| trimmed[j].starts_with("File "))
        {
            key.push((f, 5, "raising frame"));
            if f + 1 < e {
                key.push((f + 1, 4, "raising code"));
            }
        }
    }
    if jvm {
        let first_frame = trimmed.iter().position(|l| l.starts_with("at "));
        if let Some(f) = first_frame {
            if let Some(e) = (0..f).rev().find(|&j| !trimmed[j].is_empty()) {
                key.push((e, 10, "exception"));
            }
            key.push((f, 4, "raising frame"));
        }
        for (i, l) in trimmed.iter().enumerate() {
            if l.starts_with("Caused by:") {
                key.push((i, 8, "cause"));
            }
        }
    }
    for (i, l) in trimmed.iter().enumerate() {
        if (elixir && l.starts_with("** ("))
            || (rust && l.contains("panicked at"))
            || (go && l.starts_with("panic: "))
        {
            key.push((i, 10, "exception"));
            if rust && i + 1 < lines.len() && !trimmed[i + 1].is_empty() {
                key.push((i + 1, 9, "panic message"));
            }
        }
    }
    let mut items: Vec<KeyItem> = key
        .iter()
        .map(|&(i, w, why)| KeyItem::line(w, i, why, lines[i]))
        .collect();
    for (i, l) in lines.iter().enumerate() {
        if key.iter().any(|k| k.0 == i) {
            continue;
        }
        for mut item in line_items(&[l], i) {
            item.weight -= 2;
            items.push(item);
        }
    }
    Some(items)
}
