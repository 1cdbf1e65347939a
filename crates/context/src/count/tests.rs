//! The splitters against the reference regexes, piece by piece.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::LazyLock;

use fancy_regex::Regex;

use super::pieces;
use crate::tokens::Encoding;

/// tiktoken-rs 0.12's cl100k_base pattern (it is inline in `cl100k_base()`, not exported).
const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

static CL100K: LazyLock<Regex> = LazyLock::new(|| Regex::new(CL100K_PATTERN).unwrap());
static O200K: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap());

/// The reference implementation.
fn tiktoken(encoding: Encoding) -> &'static tiktoken_rs::CoreBPE {
    match encoding {
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
    }
}

fn reference(encoding: Encoding, text: &str) -> Vec<&str> {
    let re = match encoding {
        Encoding::Cl100kBase => &*CL100K,
        Encoding::O200kBase => &*O200K,
    };
    re.find_iter(text).map(|m| m.unwrap().as_str()).collect()
}

/// Panics at the first piece where the splitter and the regex part, with some context.
fn same_pieces(text: &str) {
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        let ours = pieces(enc, text);
        let want = reference(enc, text);
        if ours != want {
            let k = ours.iter().zip(&want).take_while(|(a, b)| a == b).count();
            let lo = k.saturating_sub(3);
            panic!(
                "{enc}: pieces differ at piece {k}\n ours: {:?}\n want: {:?}",
                &ours[lo..(k + 3).min(ours.len())],
                &want[lo..(k + 3).min(want.len())]
            );
        }
    }
}

/// Cut at every cut point, the chunks' counts add up to tiktoken-rs's count of the whole.
fn check_chunked(text: &str) {
    let classes = super::CLASSES.as_ref().unwrap();
    let chunks = super::parallel::chunks(text, usize::MAX, 1);
    assert_eq!(chunks.concat(), text);
    for pair in chunks.windows(2) {
        let (before, after) = (pair[0].as_bytes(), pair[1].as_bytes());
        assert!(super::parallel::is_cut(before[before.len() - 1], after[0]));
    }
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        assert_eq!(
            super::parallel::count_chunks(enc, &chunks, classes),
            Some(tiktoken(enc).encode_ordinary(text).len()),
            "{enc}: {} chunks of {text:?}",
            chunks.len()
        );
    }
}

/// Same pieces, and the same count as tiktoken-rs.
fn check(text: &str) {
    same_pieces(text);
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        assert_eq!(
            super::count(enc, text),
            tiktoken(enc).encode_ordinary(text).len(),
            "{enc}: count of {text:?}"
        );
    }
}

#[test]
fn hand_picked_cases() {
    for text in [
        "",
        "a",
        " ",
        "hello world",
        "Hello, WORLD! It's done; they'll've gone, I'M here, we'D see, 'tis",
        "'s 'S 'ſ 'll 'LL 'Ll 've 're 'd 'm 't 'x '' ''s 's'",
        "don't DON'T Don'T don'ſ don’t",
        "HELLOworld helloWORLD HeLLo ABCdef ÀÉÎ éèê",
        "e\u{301}x \u{301}A \u{301} A\u{301} x\u{301}\u{301}y ँक",
        "1 12 123 1234 12345 ١٢٣٤ ½¾ ⅫⅩ ²³",
        "  lead and trail  ",
        "a  b   c    d\t\te\t f \u{a0}g\u{3000}h",
        "line\nline\r\nline\n\n\nx  \n  y\n  \n\tz",
        "end with spaces   ",
        "end with newline\n",
        "end with mixed \n  ",
        "x\n  ",
        "fn main() {\n    let x = 1;\n    // comment\n}\n",
        "SELECT region, SUM(amount) FROM orders WHERE id >= 10;\n",
        "{\"key\": [1, 2, 3], \"ok\": true}\n",
        "a/b//c\n/d /e +/\n/ ...\n\n//",
        "第一季度华东区域销售额同比增长百分之十二。",
        "Привет, мир! Γειά σου Κόσμε. مرحبا بالعالم",
        "emoji 📈📉 👩‍👩‍👧‍👦 🇫🇷 👍🏽 ✔\u{fe0f}",
        "\u{85}x\u{2028}y\u{2029}z\u{b}w\u{c}v",
        " !!! ?? (x) [y] {z}",
        "\r\r\n\n\r",
        "'\n's\n",
        "ǅungla ǈ ǋ ᾈ",
        "ʰʱ ˈstress ʻokina",
    ] {
        check(text);
    }
}

/// Every code point of the planes in use (0–3 and 14) and a sample of the unassigned and
/// private-use ones (4–13, 15–16: one class throughout), each in a dozen contexts.
#[test]
fn every_code_point_in_context() {
    let mut text = String::new();
    let flush = |text: &mut String| {
        same_pieces(text);
        text.clear();
    };
    for cp in 0..=0x10_ffffu32 {
        let plane = cp >> 16;
        if !(plane <= 3 || plane == 14 || cp % 97 == 0) {
            continue;
        }
        let Some(c) = char::from_u32(cp) else {
            continue;
        };
        for part in [
            "x", "A", " ", "1", "'", "\n", "a'", " \t", "(", "A", "/", "  ",
        ] {
            text.push(c);
            text.push_str(part);
        }
        text.push(c);
        text.push(c);
        text.push('\n');
        if text.len() > 1 << 14 {
            flush(&mut text);
        }
    }
    flush(&mut text);
}

/// The tables stay within the sizes the docs state.
#[test]
fn table_sizes() {
    let mib = 1024 * 1024;
    assert!(super::VOCAB_CL100K.heap_bytes() <= 2 * mib + mib / 4);
    assert!(super::VOCAB_O200K.heap_bytes() <= 4 * mib + mib / 4);
}

/// The merge reads ranks from `bpe-openai`'s dictionary: its ids must be tiktoken's ranks.
#[test]
fn dictionary_ids_are_tiktoken_ranks() {
    for (bpe, tik) in [
        (
            &bpe_openai::cl100k_base().bpe,
            tiktoken_rs::cl100k_base_singleton(),
        ),
        (
            &bpe_openai::o200k_base().bpe,
            tiktoken_rs::o200k_base_singleton(),
        ),
    ] {
        for id in 0..bpe.num_tokens() as u32 {
            assert_eq!(
                tik.decode_bytes(&[id]).unwrap(),
                bpe.token_bytes(id),
                "token {id}"
            );
        }
    }
}

/// Random text built to reach the splitters' tricky branches: whitespace runs of every kind
/// (the `\s+(?!\S)`, `\s++$` and newline rules), digit runs longer than three, apostrophes
/// before every contraction letter in both cases (and `ſ`, which folds to `s`), o200k's
/// upper/lower classes with marks, CRLF and `[\r\n/]` tails, and characters of three and four
/// bytes whose tokens split them.
mod random_text {
    use proptest::prelude::*;

    fn whitespace() -> impl Strategy<Value = String> {
        let unit = prop::sample::select(vec![
            " ", " ", " ", "\t", "\n", "\n", "\r\n", "\r", "\u{a0}", "\u{3000}", "\u{2028}",
            "\u{b}", "\u{c}", "\u{85}", "\u{2003}",
        ]);
        prop::collection::vec(unit, 1..48).prop_map(|v| v.concat())
    }

    fn digits() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[0-9]{1,24}",
            1 => "[٠-٩]{1,7}",
            1 => prop::sample::select(vec!["½", "²³", "Ⅻ", "১২৩", "𝟘𝟙"]).prop_map(String::from),
        ]
    }

    fn apostrophe() -> impl Strategy<Value = String> {
        let tail = prop::sample::select(vec![
            "s", "S", "t", "T", "re", "RE", "rE", "ve", "VE", "m", "M", "ll", "LL", "lL", "d", "D",
            "ſ", "l", "r", "v", "x", "'", "", "s'", "sa", "ſx", "LLy", "tion", "REd", "Ve",
        ]);
        (prop::sample::select(vec!["'", "'", "’"]), tail).prop_map(|(a, t)| format!("{a}{t}"))
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z]{1,10}",
            2 => "[A-Z]{1,6}[a-z]{0,6}",
            1 => "[a-zA-Z]{1,12}",
            2 => "[\u{4e00}-\u{9fff}]{1,6}",
            1 => "[\u{20000}-\u{2a6df}]{1,3}",
            1 => "[\u{0400}-\u{04ff}]{1,8}",
            1 => "[\u{0600}-\u{06ff}]{1,6}",
            1 => "[\u{0900}-\u{097f}]{1,6}",
            1 => "[\u{0e00}-\u{0e7f}]{1,6}",
            1 => "[\u{ac00}-\u{d7a3}]{1,4}",
            1 => "[\u{1f00}-\u{1fff}\u{01c4}-\u{01cc}\u{02b0}-\u{02ff}]{1,4}",
        ]
    }

    fn symbols() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[!-/:-@\\[-`{-~]{1,6}",
            1 => "[/\r\n]{1,4}",
            1 => "[(){};,.+]{1,3}[\r\n/]{1,4}",
            1 => "[\u{300}-\u{36f}\u{94d}\u{e31}\u{200d}\u{fe0f}]{1,3}",
            1 => "[\u{1f300}-\u{1faff}]{1,3}",
            1 => prop::sample::select(vec!["👩‍👩‍👧‍👦", "🇫🇷", "👍🏽", "🧑‍💻", "→", "€", "…"])
                .prop_map(String::from),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            3 => whitespace(),
            2 => digits(),
            2 => apostrophe(),
            5 => word(),
            2 => symbols(),
            1 => any::<char>().prop_map(String::from),
        ];
        prop::collection::vec(atom, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The fast count equals tiktoken-rs's `encode_ordinary(..).len()`, and the pieces
        /// equal the reference regex's, in both encodings.
        #[test]
        fn fast_count_equals_tiktoken_rs(text in text()) {
            super::check(&text);
        }

        /// Cut at every cut point (a newline before a visible ASCII character other than
        /// `/`) and counted chunk by chunk on threads, the count is still tiktoken-rs's.
        #[test]
        fn chunked_count_equals_tiktoken_rs(
            lines in prop::collection::vec((text(), "[a-zA-Z0-9{\"'#(/]?"), 1..8)
        ) {
            let text: Vec<String> = lines.into_iter().map(|(l, letter)| letter + &l).collect();
            super::check_chunked(&text.join("\n"));
        }
    }
}
