//! Layer 8: output levels — which level a call is shown at and how raw data is rendered
//! at that level.
//!
//! Every rendering is bounded: [`format_observation`] never returns more than
//! [`FormatBounds::max_bytes`] for the level. Text that does not fit is cut in the middle,
//! keeping its head and its tail, with a marker saying how many lines and bytes were omitted.

use std::borrow::Cow;

use ba_protocol::OutputLevel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Decides the level of one call: explicit in the call > the tool's default > a nearly
/// full context (usage above `brief_above`) forces `brief` > the global default.
pub fn resolve_level(
    explicit: Option<OutputLevel>,
    tool_default: Option<OutputLevel>,
    context_usage: f64,
    brief_above: f64,
    global_default: OutputLevel,
) -> OutputLevel {
    explicit
        .or(tool_default)
        .unwrap_or(if context_usage > brief_above {
            OutputLevel::Brief
        } else {
            global_default
        })
}

/// Size bounds of the renderings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FormatBounds {
    /// Most bytes of a `brief` observation.
    pub brief_max_bytes: usize,
    /// Most bytes of a `standard` observation.
    pub standard_max_bytes: usize,
    /// Most lines of a `standard` observation.
    pub standard_max_lines: usize,
    /// Items listed from the start of a list at `standard`.
    pub standard_head_items: usize,
    /// Items listed from the end of a long list at `standard`.
    pub standard_tail_items: usize,
    /// Most bytes of one list item at `standard`.
    pub item_max_bytes: usize,
    /// Most bytes of a `full` observation shown inline (when the data is not spilled).
    pub full_max_bytes: usize,
    /// Most bytes of the preview in a spill observation.
    pub preview_max_bytes: usize,
}

impl Default for FormatBounds {
    fn default() -> Self {
        Self {
            brief_max_bytes: 300,
            standard_max_bytes: 4096,
            standard_max_lines: 80,
            standard_head_items: 5,
            standard_tail_items: 2,
            item_max_bytes: 400,
            full_max_bytes: 1024 * 1024,
            preview_max_bytes: 1024,
        }
    }
}

impl FormatBounds {
    /// The smallest byte bound accepted: room for a truncation marker and some text.
    pub const MIN_BYTES: usize = 128;

    /// The byte bound of `level` when shown inline.
    pub fn max_bytes(&self, level: OutputLevel) -> usize {
        match level {
            OutputLevel::Brief => self.brief_max_bytes,
            OutputLevel::Standard => self.standard_max_bytes,
            OutputLevel::Full => self.full_max_bytes,
        }
    }
}

/// Renders `data` at `level`, inline (no spill), within the level's bound.
pub fn format_observation(data: &Value, level: OutputLevel, bounds: &FormatBounds) -> String {
    match level {
        OutputLevel::Brief => format_brief(data, bounds),
        OutputLevel::Standard => format_standard(data, bounds),
        OutputLevel::Full => format_full(data, bounds),
    }
}

/// Key facts only: `Found 12 items`, `Success: …`, `Result has 3 fields: …`.
pub fn format_brief(data: &Value, bounds: &FormatBounds) -> String {
    let text = match data {
        Value::Array(items) => format!("Found {} items", items.len()),
        Value::Object(map) => match map.get("success").and_then(Value::as_bool) {
            Some(ok) => {
                let default = if ok {
                    "Operation completed"
                } else {
                    "Operation failed"
                };
                let message = match map.get("message") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => default.to_owned(),
                };
                let status = if ok { "Success" } else { "Failed" };
                format!("{status}: {message}")
            }
            None => {
                let keys: Vec<&str> = map.keys().take(10).map(String::as_str).collect();
                let more = if map.len() > keys.len() { ", …" } else { "" };
                if keys.is_empty() {
                    "Result has 0 fields".to_owned()
                } else {
                    format!("Result has {} fields: {}{more}", map.len(), keys.join(", "))
                }
            }
        },
        Value::String(s) => head_chars(s, 100),
        scalar => scalar.to_string(),
    };
    // Brief is one line: a newline in a string would make it look like more.
    let one_line = text.replace('\n', " ");
    truncate_middle(&one_line, bounds.brief_max_bytes, 1).into_owned()
}

/// Actionable information: the count and the first and last items of a list, pretty JSON of
/// an object, the text of a string — bounded.
pub fn format_standard(data: &Value, bounds: &FormatBounds) -> String {
    let text = match data {
        Value::Array(items) => list_preview(items, bounds),
        Value::String(s) => s.clone(),
        other => pretty(other),
    };
    truncate_middle(&text, bounds.standard_max_bytes, bounds.standard_max_lines).into_owned()
}

/// Everything: pretty JSON (a string as its text), bounded by `full_max_bytes`.
pub fn format_full(data: &Value, bounds: &FormatBounds) -> String {
    let text = match data {
        Value::String(s) => s.clone(),
        other => pretty(other),
    };
    truncate_middle(&text, bounds.full_max_bytes, usize::MAX).into_owned()
}

/// A one-line summary of the data's shape, kept with spilled data.
pub fn summarize(data: &Value) -> String {
    match data {
        Value::Array(items) => {
            let first = match items.first() {
                None => "none".to_owned(),
                Some(Value::Object(map)) => {
                    let keys: Vec<&str> = map.keys().take(10).map(String::as_str).collect();
                    format!("keys {}", keys.join(", "))
                }
                Some(other) => json_kind(other).to_owned(),
            };
            format!("List with {} items. First item: {first}", items.len())
        }
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(10).map(String::as_str).collect();
            format!(
                "Dictionary with {} keys. Top keys: {}",
                map.len(),
                keys.join(", ")
            )
        }
        Value::String(s) => format!(
            "Text of {} characters: {}",
            s.chars().count(),
            head_chars(&s.replace('\n', " "), 200)
        ),
        scalar => head_chars(&scalar.to_string(), 200),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn list_preview(items: &[Value], bounds: &FormatBounds) -> String {
    let n = items.len();
    let mut out = format!("Found {n} items");
    if n == 0 {
        return out;
    }
    out.push(':');
    let head = bounds.standard_head_items.max(1);
    let shown_tail = if n > head + bounds.standard_tail_items {
        bounds.standard_tail_items
    } else {
        n.saturating_sub(head)
    };
    let shown_head = n - shown_tail;
    let shown_head = shown_head.min(head);
    for item in &items[..shown_head] {
        push_item(&mut out, item, bounds);
    }
    let omitted = n - shown_head - shown_tail;
    if omitted > 0 {
        out.push_str(&format!("\n  … {omitted} more items …"));
    }
    for item in &items[n - shown_tail..] {
        push_item(&mut out, item, bounds);
    }
    out
}

fn push_item(out: &mut String, item: &Value, bounds: &FormatBounds) {
    let text = match item {
        Value::String(s) => s.replace('\n', " "),
        other => other.to_string(),
    };
    out.push_str("\n  - ");
    out.push_str(&truncate_middle(&text, bounds.item_max_bytes, 1));
}

/// The first `n` characters of `s`, saying how many more there were.
fn head_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        None => s.to_owned(),
        Some((cut, _)) => {
            let rest = s[cut..].chars().count();
            format!("{}… ({rest} more characters)", &s[..cut])
        }
    }
}

/// Cuts `text` to at most `max_bytes` bytes and `max_lines` lines, keeping its head and its
/// tail and putting a marker saying what was omitted between them.
pub fn truncate_middle(text: &str, max_bytes: usize, max_lines: usize) -> Cow<'_, str> {
    let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
    if text.len() <= max_bytes && lines <= max_lines {
        return Cow::Borrowed(text);
    }
    let inline = max_lines <= 1;
    // The marker is sized for the largest counts it could show, so the total never overshoots.
    let reserve = marker(lines, text.len(), inline).len();
    if max_bytes < reserve + 16 {
        return Cow::Owned(text[..floor_boundary(text, max_bytes)].to_owned());
    }
    let budget = max_bytes - reserve;
    let head_bytes = budget * 2 / 3;
    let tail_bytes = budget - head_bytes;
    let budget_lines = max_lines.saturating_sub(1).max(1);
    let head_lines = budget_lines.div_ceil(2).max(1);
    let tail_lines = budget_lines - head_lines.min(budget_lines);

    let mut head_end = floor_boundary(text, head_bytes);
    if !inline {
        if let Some(i) = nth_newline(text, head_lines) {
            head_end = head_end.min(i + 1);
        }
        // Prefer a whole last line when a line break is near.
        if let Some(i) = text[..head_end].rfind('\n')
            && head_end - i < 200
            && i > 0
        {
            head_end = i + 1;
        }
    }
    let mut tail_start = ceil_boundary(text, text.len().saturating_sub(tail_bytes));
    if !inline {
        let body = text.strip_suffix('\n').unwrap_or(text);
        let by_lines = if tail_lines == 0 {
            text.len()
        } else {
            nth_newline_from_end(body, tail_lines).map_or(0, |i| i + 1)
        };
        tail_start = tail_start.max(by_lines);
        if let Some(i) = text[tail_start..].find('\n')
            && i < 200
            && tail_start + i + 1 < text.len()
            && tail_start > 0
            && text.as_bytes()[tail_start - 1] != b'\n'
        {
            tail_start += i + 1;
        }
    }
    if tail_start < head_end {
        tail_start = head_end;
    }
    let omitted = &text[head_end..tail_start];
    let omitted_lines = omitted.bytes().filter(|&b| b == b'\n').count();
    let mut out = String::with_capacity(max_bytes);
    out.push_str(
        text[..head_end]
            .strip_suffix('\n')
            .unwrap_or(&text[..head_end]),
    );
    out.push_str(&marker(omitted_lines, omitted.len(), inline));
    out.push_str(&text[tail_start..]);
    Cow::Owned(out)
}

fn marker(lines: usize, bytes: usize, inline: bool) -> String {
    if inline {
        format!(" … [{bytes} bytes omitted] … ")
    } else {
        format!("\n… [{lines} lines, {bytes} bytes omitted] …\n")
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// Byte index of the `n`-th (1-based) newline.
fn nth_newline(s: &str, n: usize) -> Option<usize> {
    s.bytes()
        .enumerate()
        .filter(|&(_, b)| b == b'\n')
        .nth(n.checked_sub(1)?)
        .map(|(i, _)| i)
}

/// Byte index of the `n`-th (1-based) newline counting from the end.
fn nth_newline_from_end(s: &str, n: usize) -> Option<usize> {
    s.bytes()
        .enumerate()
        .rev()
        .filter(|&(_, b)| b == b'\n')
        .nth(n.checked_sub(1)?)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn level_decision_follows_t2() {
        use OutputLevel::*;
        assert_eq!(
            resolve_level(Some(Full), Some(Brief), 0.95, 0.8, Standard),
            Full
        );
        assert_eq!(resolve_level(None, Some(Full), 0.95, 0.8, Standard), Full);
        assert_eq!(resolve_level(None, None, 0.81, 0.8, Standard), Brief);
        assert_eq!(resolve_level(None, None, 0.8, 0.8, Standard), Standard);
        assert_eq!(resolve_level(None, None, 0.1, 0.8, Full), Full);
    }

    #[test]
    fn truncation_keeps_head_and_tail_and_counts() {
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let out = truncate_middle(&text, 400, 20);
        assert!(out.len() <= 400, "{}", out.len());
        assert!(out.starts_with("line 1\nline 2\n"));
        assert!(out.ends_with("line 1000\n"));
        let kept: usize = out.lines().filter(|l| l.starts_with("line ")).count();
        let omitted = 1000 - kept;
        assert!(out.contains(&format!("[{omitted} lines, ")), "{out}");
        assert_eq!(truncate_middle("short", 400, 20), "short");
    }

    #[test]
    fn ten_thousand_items_at_standard_stay_bounded() {
        let items: Vec<Value> = (0..10_000)
            .map(|i| json!({"id": i, "name": format!("customer {i}"), "revenue": i * 10}))
            .collect();
        let bounds = FormatBounds::default();
        let out = format_standard(&Value::Array(items), &bounds);
        assert!(out.len() <= bounds.standard_max_bytes);
        assert!(out.starts_with("Found 10000 items:"));
        assert!(out.contains("… 9993 more items …"), "{out}");
        assert!(out.contains("\"id\":9999"), "{out}");
    }

    proptest! {
        #[test]
        fn every_rendering_respects_its_bound(
            value in arb_json(),
            level in prop_oneof![
                Just(OutputLevel::Brief), Just(OutputLevel::Standard), Just(OutputLevel::Full)
            ],
            small in 128usize..600,
        ) {
            let bounds = FormatBounds {
                brief_max_bytes: small,
                standard_max_bytes: small * 2,
                standard_max_lines: 12,
                item_max_bytes: small / 2 + 64,
                full_max_bytes: small * 3,
                ..FormatBounds::default()
            };
            let out = format_observation(&value, level, &bounds);
            let cap = bounds.max_bytes(level);
            prop_assert!(out.len() <= cap, "{} > {}", out.len(), cap);
            if level != OutputLevel::Full {
                prop_assert!(out.lines().count() <= bounds.standard_max_lines.max(1));
            }
        }

        #[test]
        fn truncation_is_bounded_for_any_text(
            text in "(?s).{0,3000}",
            max in 128usize..2000,
            lines in 1usize..50,
        ) {
            let out = truncate_middle(&text, max, lines);
            prop_assert!(out.len() <= max);
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "(?s).{0,400}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 200, 40, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..60).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\n]{0,12}", inner, 0..20)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
