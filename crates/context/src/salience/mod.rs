//! Explainable salience of lines and sentences: what a shortened text must keep.
//!
//! A tool output that leaves the window keeps its head and tail and the lines that carry
//! figures, identifiers and totals ([`trace_text`], in `output`); a user or assistant text
//! that must shrink keeps its requirement sentences and those with numbers, codes, names and
//! paths ([`key_sentences`], in `text`). Every choice comes from a [`Salience`] whose parts
//! say which signal added what, so a kept or dropped line can be explained. This file holds
//! what both read: the score and the signals of words, numbers, codes and paths.

mod output;
mod text;

pub use output::{TRACE_MARK, line_salience, salient_lines, trace_text};
pub use text::{KeySentences, key_sentences, sentence_salience, sentences};
pub(crate) use text::{Rarity, cut_parts, words};

/// The salience of a line or a sentence, with the part each signal contributed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Salience {
    /// The sum of the parts.
    pub total: i32,
    /// Each signal and its contribution.
    pub parts: Vec<(&'static str, i32)>,
}

impl Salience {
    pub(crate) fn add(&mut self, name: &'static str, value: i32) {
        self.total += value;
        self.parts.push((name, value));
    }
}

pub(crate) fn contains_word(lower: &str, word: &str) -> bool {
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

/// The longest run of digits in `text`, thousands separators and one decimal point included.
pub(crate) fn longest_number(text: &str) -> usize {
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
pub(crate) fn has_code(text: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_match_whole_words() {
        assert!(contains_word("the totals are in", "total"));
        assert!(contains_word("sum: 4", "sum"));
        assert!(!contains_word("summer sales", "sum"));
        assert!(!contains_word("only sums", "count"));
        assert!(contains_word("必须用欧元", "必须"));
    }
}
