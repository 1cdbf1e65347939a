//! Text a person gave that the store keeps and others show: titles and file names. A terminal
//! acts on control characters (an escape sequence can clear the screen or retitle the window)
//! and a bidirectional override reorders what follows it (`report` U+202E `xsl.exe` reads
//! `reportexe.lsx`), so neither is kept in a title or a name: the store cleans them when they
//! are written, and titles again when they are read (a title written before this rule is shown
//! clean too).

/// The Unicode format characters (general category Cf) other than the two joiners, as
/// inclusive ranges: bidirectional marks, embeddings, overrides and isolates, zero-width and
/// invisible operators, the byte-order mark, interlinear annotations, tags.
const FORMAT: &[(char, char)] = &[
    ('\u{00AD}', '\u{00AD}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061C}', '\u{061C}'),
    ('\u{06DD}', '\u{06DD}'),
    ('\u{070F}', '\u{070F}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08E2}', '\u{08E2}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{200B}', '\u{200B}'),
    ('\u{200E}', '\u{200F}'),
    ('\u{2028}', '\u{202E}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206F}'),
    ('\u{FEFF}', '\u{FEFF}'),
    ('\u{FFF9}', '\u{FFFB}'),
    ('\u{110BD}', '\u{110BD}'),
    ('\u{110CD}', '\u{110CD}'),
    ('\u{13430}', '\u{1343F}'),
    ('\u{1BCA0}', '\u{1BCA3}'),
    ('\u{1D173}', '\u{1D17A}'),
    ('\u{E0001}', '\u{E0001}'),
    ('\u{E0020}', '\u{E007F}'),
];

/// Whether `c` acts on what shows it instead of showing as itself: a control character (C0,
/// DEL, C1 — line breaks and tabs included) or a format character such as U+202E RIGHT-TO-LEFT
/// OVERRIDE (the line and paragraph separators too). The zero-width joiners (U+200C, U+200D)
/// are not: emoji sequences and several scripts need them.
pub fn is_hidden_char(c: char) -> bool {
    c.is_control() || FORMAT.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// `text` with each run of hidden characters ([`is_hidden_char`]) replaced by `with`.
pub(crate) fn replace_hidden(text: &str, with: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for c in text.chars() {
        if is_hidden_char(c) {
            if !in_run {
                out.push(with);
            }
            in_run = true;
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
}

/// A title as the store keeps it: each run of hidden characters a space, trimmed.
pub fn clean_title(title: &str) -> String {
    if title.chars().any(is_hidden_char) {
        replace_hidden(title, ' ').trim().to_owned()
    } else {
        title.trim().to_owned()
    }
}

/// [`clean_title`] of an optional title.
pub(crate) fn clean_title_opt(title: Option<String>) -> Option<String> {
    title.map(|t| clean_title(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_overrides_are_hidden_joiners_are_not() {
        for c in [
            '\0',
            '\u{1b}',
            '\n',
            '\t',
            '\u{7f}',
            '\u{85}',
            '\u{9b}',
            '\u{202e}',
            '\u{2066}',
            '\u{200b}',
            '\u{feff}',
            '\u{2028}',
            '\u{e0041}',
            '\u{061c}',
        ] {
            assert!(is_hidden_char(c), "{c:?}");
        }
        for c in [
            'a', ' ', 'é', '销', '\u{200c}', '\u{200d}', '👍', '\u{0627}',
        ] {
            assert!(!is_hidden_char(c), "{c:?}");
        }
    }

    #[test]
    fn titles_lose_their_hidden_characters() {
        assert_eq!(
            clean_title("Q3\u{1b}[2J\u{0}review\u{202e}cod.exe"),
            "Q3 [2J review cod.exe"
        );
        assert_eq!(clean_title("  West\tsales\r\n"), "West sales");
        assert_eq!(clean_title("\u{202e}\u{0}"), "");
        assert_eq!(clean_title("销售 👨‍👩‍👧"), "销售 👨‍👩‍👧");
        assert_eq!(replace_hidden("a\u{1b}\u{1b}b\u{202e}c", '_'), "a_b_c");
    }
}
