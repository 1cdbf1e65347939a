//! Best-effort reading of JSON cut off mid-value, as a stream cut mid-tool-input leaves it.

use serde_json::Value;

/// Reads `text` as JSON, closing whatever a cut left open: an unterminated string is closed,
/// a dangling key or `,` is dropped, and open arrays and objects are closed. Returns `None`
/// when nothing usable is there.
pub fn repair(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    // Track open containers; remember the last cut point where the prefix is a valid value
    // once the open containers are closed.
    let mut stack: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut candidates: Vec<(usize, Vec<char>, bool)> = Vec::new();
    for (i, c) in text.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                candidates.push((i + 1, stack.clone(), false));
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                candidates.push((i, stack.clone(), false));
            }
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
                candidates.push((i + 1, stack.clone(), false));
            }
            ',' => candidates.push((i, stack.clone(), false)),
            _ if c.is_ascii_digit() || c == 'e' || c == 'l' || c == 'u' => {
                candidates.push((i + c.len_utf8(), stack.clone(), false));
            }
            _ => {}
        }
    }
    if in_string {
        let cut = text.len() - usize::from(escaped);
        candidates.push((cut, stack.clone(), true));
    }
    for (cut, stack, close_string) in candidates.into_iter().rev() {
        let mut attempt = text[..cut].trim_end().to_owned();
        if close_string {
            attempt.push('"');
        }
        let trimmed = attempt
            .trim_end_matches([',', ':', ' ', '\n', '\r', '\t'])
            .to_owned();
        for candidate in [attempt, trimmed] {
            let mut closed = candidate.clone();
            for closer in stack.iter().rev() {
                closed.push(*closer);
            }
            if let Ok(value) = serde_json::from_str(&closed) {
                return Some(value);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn closes_open_string_array_and_object() {
        let v = repair(r#"{"filename": "taxes.txt", "lines": ["a", "b", "Filing tax"#).unwrap();
        assert_eq!(
            v,
            json!({"filename": "taxes.txt", "lines": ["a", "b", "Filing tax"]})
        );
    }

    #[test]
    fn drops_dangling_key() {
        assert_eq!(repair(r#"{"a": 1, "b"#).unwrap(), json!({"a": 1}));
        assert_eq!(repair(r#"{"a": 1, "#).unwrap(), json!({"a": 1}));
        assert_eq!(repair(r#"{"locati"#).unwrap(), json!({}));
    }

    #[test]
    fn nothing_usable() {
        assert_eq!(repair(""), None);
    }
}
