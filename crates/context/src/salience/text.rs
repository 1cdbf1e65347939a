//! The sentences of a user or assistant text worth keeping when it must shrink: requirements,
//! numbers, codes, paths and names.

use super::{Salience, contains_word, has_code, has_path, longest_number};

/// Words that state an obligation, a prohibition or a need:
/// - English: the modals of obligation and necessity that grammars of English list (`must`,
///   `should`, `have to`, `need to`, `ought to`, `had better`, `be supposed to`; Biber et al.,
///   *Longman Grammar of Spoken and Written English*, on modals of obligation) and the verbal
///   forms of a requirement in the ISO/IEC Directives, Part 2 (`shall`, `required`);
/// - Chinese: the modal verbs of obligation and prohibition (必须, 应该, 应当, 需要, 务必,
///   不得, 不要, 不许, 禁止) and the forms of GB/T 1.1—2020 for a requirement (`应` and `不应`,
///   written here as 应该, 应当 and 不应: the single character is part of too many words).
const REQUIREMENT_WORDS: &[&str] = &[
    "must",
    "should",
    "have to",
    "has to",
    "need to",
    "needs to",
    "ought to",
    "had better",
    "supposed to",
    "shall",
    "required",
    "必须",
    "应该",
    "应当",
    "不应",
    "需要",
    "务必",
    "不得",
    "不要",
    "不许",
    "禁止",
];

/// The salience of one sentence of a user or assistant text: requirement words, numbers,
/// codes, paths and proper names raise it; a question matters too.
pub fn sentence_salience(sentence: &str) -> Salience {
    let mut s = Salience::default();
    let trimmed = sentence.trim();
    if trimmed.is_empty() {
        return s;
    }
    let lower = trimmed.to_lowercase();
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

/// The words of a text that say what a set of texts says once: a sentence that holds words no
/// other text of the set holds (a code, a name, a figure, a term used once) says something the
/// rest of the conversation does not; one made of words every turn repeats adds little.
#[derive(Debug, Default)]
pub(crate) struct Rarity {
    /// In how many texts each word occurs.
    texts_with: std::collections::HashMap<String, usize>,
}

impl Rarity {
    /// The counts of `texts`' words.
    pub(crate) fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut texts_with: std::collections::HashMap<String, usize> = Default::default();
        for t in texts {
            let mut seen: Vec<String> = words(t);
            seen.sort_unstable();
            seen.dedup();
            for w in seen {
                *texts_with.entry(w).or_default() += 1;
            }
        }
        Self { texts_with }
    }

    /// How many of `sentence`'s words occur in one text of the set only, at most 3.
    pub(crate) fn novelty(&self, sentence: &str) -> i32 {
        let mut ws = words(sentence);
        ws.sort_unstable();
        ws.dedup();
        let once = ws
            .iter()
            .filter(|w| self.texts_with.get(*w).copied().unwrap_or(0) <= 1)
            .count();
        i32::try_from(once.min(3)).unwrap_or(3)
    }
}

/// The words of `text`: runs of letters, digits and `-_.` (lower-cased), and each pair of
/// adjacent CJK characters (Chinese is not written with spaces).
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_cjk: Option<char> = None;
    let cjk =
        |c: char| ('\u{3400}'..='\u{9fff}').contains(&c) || ('\u{3040}'..='\u{30ff}').contains(&c);
    for c in text.chars() {
        if cjk(c) {
            if let Some(p) = prev_cjk {
                out.push(format!("{p}{c}"));
            }
            prev_cjk = Some(c);
        } else {
            prev_cjk = None;
        }
        if c.is_alphanumeric() && !cjk(c) || (!word.is_empty() && matches!(c, '-' | '_' | '.')) {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            let w = word.trim_end_matches(['-', '_', '.']).to_owned();
            if w.chars().count() >= 2 {
                out.push(w);
            }
            word.clear();
        }
    }
    let w = word.trim_end_matches(['-', '_', '.']).to_owned();
    if w.chars().count() >= 2 {
        out.push(w);
    }
    out
}

/// A text that [`key_sentences`] (or a compaction) cut before: what it kept, and how many
/// sentences it had left out.
pub(crate) fn cut_parts(text: &str) -> (&str, usize) {
    match text.rsplit_once(" [… ") {
        Some((kept, marker)) if marker.ends_with(" sentence(s) left out]") => (
            kept,
            marker
                .trim_end_matches(" sentence(s) left out]")
                .parse::<usize>()
                .unwrap_or(0),
        ),
        _ => match text
            .strip_prefix("[… ")
            .and_then(|m| m.strip_suffix(" sentence(s) left out]"))
        {
            Some(n) => ("", n.parse::<usize>().unwrap_or(0)),
            None => (text, 0),
        },
    }
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
    let (text, before) = cut_parts(text);
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
        let text = "We start at the port. The crane log names lift LFT-2207 twice. \
                    Gulls were loud. Coffee was cold. Nobody minded.";
        let once = key_sentences(text, 90).unwrap();
        let twice = key_sentences(&once.text, 50).unwrap();
        assert_eq!(twice.text.matches("left out]").count(), 1, "{}", twice.text);
        assert_eq!(twice.left_out, 4, "{}", twice.text);
        assert!(twice.text.contains("LFT-2207"), "{}", twice.text);
    }

    #[test]
    fn sentences_split_on_marks_and_lines() {
        let s = sentences("Ship by rail. Skip Leeds!\nWhy did Oslo dip? 运费上涨。下一步");
        assert_eq!(
            s,
            [
                "Ship by rail.",
                "Skip Leeds!",
                "Why did Oslo dip?",
                "运费上涨。",
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
