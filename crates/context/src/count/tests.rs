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

/// Same pieces, and the same count as tiktoken-rs.
fn check(text: &str) {
    same_pieces(text);
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        assert_eq!(
            super::count(enc, text),
            enc.encode(text).len(),
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
