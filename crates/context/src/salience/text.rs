//! The sentences of a user or assistant text worth keeping when it must shrink: requirements,
//! numbers, codes, paths and names.

use super::{Salience, contains_word, has_code, has_path, longest_number};

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
}
