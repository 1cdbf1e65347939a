//! Hand-written pre-tokenisers for the split patterns of cl100k_base and o200k_base.
//!
//! Each function returns the end of the piece that starts at a given byte offset, the piece the
//! reference regex (tiktoken-rs's pattern, leftmost-first alternation) would match there. Every
//! position of a text starts a match of both patterns (their last alternatives take any
//! whitespace, and the others any letter, number or other character), and no alternative
//! matches the empty string, so the pieces tile the text and the splitter only ever asks "where
//! does the piece starting here end".
//!
//! cl100k_base, as tiktoken-rs writes it:
//!
//! ```text
//! '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
//! | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
//! ```
//!
//! o200k_base (U = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, W = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`,
//! C = `(?i:'s|'t|'re|'ve|'m|'ll|'d)`):
//!
//! ```text
//! [^\r\n\p{L}\p{N}]?U*W+C? | [^\r\n\p{L}\p{N}]?U+W*C? | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]*
//! | \s*[\r\n]+ | \s+(?!\S) | \s+
//! ```
//!
//! How the whitespace alternatives resolve, for a maximal whitespace run `i..e` that no earlier
//! alternative took: `\s*[\r\n]` (and `\s*[\r\n]+`) end after the run's last `\r`/`\n`;
//! `\s++$` takes the whole run when it reaches the end of the text (cl100k tries it before the
//! newline rule, o200k has no such rule and reaches the same place through `\s+(?!\S)`);
//! `\s+(?!\S)` gives back the run's last character when the run has two or more; otherwise one
//! character is left.
//!
//! o200k's optional prefix and U/W classes overlap (a mark is in the prefix class, in U and in
//! W; Lm and Lo are in U and W), so [`Splitter::o200k_core_lower`] follows the regex's
//! backtracking order exactly: prefix taken before not taken, U* longest first.

use super::classes::{BYTES, CR_LF, Classes, END, LETTER, LOWER, NUMBER, SPACE, UPPER};

/// A text and the class table, with the two piece-end functions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Splitter<'a> {
    bytes: &'a [u8],
    classes: &'a Classes,
}

impl<'a> Splitter<'a> {
    pub(crate) fn new(text: &'a str, classes: &'a Classes) -> Self {
        Self {
            bytes: text.as_bytes(),
            classes,
        }
    }

    /// The code point at byte `i` (a character boundary) and its length; `(0, 0)` at the end.
    #[inline(always)]
    fn decode(&self, i: usize) -> (u32, usize) {
        let b = self.bytes;
        let Some(&b0) = b.get(i) else {
            return (0, 0);
        };
        let cont = |k: usize| u32::from(b.get(i + k).copied().unwrap_or(0x80) & 0x3f);
        let b0 = u32::from(b0);
        if b0 < 0x80 {
            (b0, 1)
        } else if b0 < 0xe0 {
            (((b0 & 0x1f) << 6) | cont(1), 2)
        } else if b0 < 0xf0 {
            (((b0 & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
        } else {
            (
                ((b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
                4,
            )
        }
    }

    /// The class bits of the character at byte `i` and its length; `END` past the text.
    #[inline(always)]
    fn at(&self, i: usize) -> (u8, usize) {
        match self.bytes.get(i) {
            None => (END, 0),
            Some(&b) if b < 0x80 => (BYTES[usize::from(b)], 1),
            Some(_) => {
                let (c, len) = self.decode(i);
                (self.classes.of(c), len)
            }
        }
    }

    /// The end of the run of characters having any bit of `any`, from `i`.
    #[inline(always)]
    fn run(&self, mut i: usize, any: u8) -> usize {
        while let Some(&b) = self.bytes.get(i) {
            if BYTES[usize::from(b)] & any != 0 {
                i += 1;
            } else if b < 0x80 {
                return i;
            } else {
                let (c, len) = self.decode(i);
                if self.classes.of(c) & any == 0 {
                    return i;
                }
                i += len;
            }
        }
        i
    }

    /// The end of the run of characters that are neither letter, number nor whitespace.
    #[inline(always)]
    fn run_other(&self, mut i: usize) -> usize {
        loop {
            let (c, len) = self.at(i);
            if c & (LETTER | NUMBER | SPACE | END) != 0 {
                return i;
            }
            i += len;
        }
    }

    /// The end of the run of bytes in `set` (all ASCII), from `i`.
    #[inline(always)]
    fn run_bytes(&self, mut i: usize, set: &[u8]) -> usize {
        while self.bytes.get(i).is_some_and(|b| set.contains(b)) {
            i += 1;
        }
        i
    }

    /// Up to three numbers from `i` (the first is one).
    #[inline(always)]
    fn numbers(&self, mut i: usize) -> usize {
        for _ in 0..3 {
            let (c, len) = self.at(i);
            if c & NUMBER == 0 {
                break;
            }
            i += len;
        }
        i
    }

    /// The contraction letter of the character at `i` and its length.
    #[inline(always)]
    fn letter(&self, i: usize) -> (u8, usize) {
        let (c, len) = self.decode(i);
        if len == 0 {
            return (0, 0);
        }
        (self.classes.contraction_letter(c), len)
    }

    /// After an apostrophe ending at `i`: the end of `(?i:s|t|re|ve|m|ll|d)` from `i`, if any.
    #[inline(always)]
    fn contraction_tail(&self, i: usize) -> Option<usize> {
        let (first, len) = self.letter(i);
        let second = |want: u8| {
            let (c, len2) = self.letter(i + len);
            (c == want).then_some(i + len + len2)
        };
        match first {
            b's' | b'd' | b'm' | b't' => Some(i + len),
            b'l' => second(b'l'),
            b'v' | b'r' => second(b'e'),
            _ => None,
        }
    }

    /// The whitespace alternatives for the run starting at `i`; `at_end_whole` is cl100k's
    /// `\s++$`, tried before the newline rule.
    #[inline(always)]
    fn whitespace(&self, i: usize, at_end_whole: bool) -> usize {
        let mut j = i;
        let mut after_newline = None;
        let mut last_start = i;
        let mut chars = 0usize;
        loop {
            let (c, len) = self.at(j);
            if c & SPACE == 0 {
                break;
            }
            if c & CR_LF != 0 {
                after_newline = Some(j + len);
            }
            last_start = j;
            j += len;
            chars += 1;
        }
        let at_end = j == self.bytes.len();
        if at_end && at_end_whole {
            return j;
        }
        if let Some(end) = after_newline {
            return end;
        }
        if at_end || chars < 2 {
            return j;
        }
        last_start
    }

    /// The end of the cl100k_base piece starting at byte `i` (`i` < text length).
    pub(crate) fn cl100k(&self, i: usize) -> usize {
        let (c, len) = self.at(i);
        if self.bytes.get(i) == Some(&b'\'')
            && let Some(end) = self.contraction_tail(i + 1)
        {
            return end;
        }
        if c & LETTER != 0 {
            return self.run(i + len, LETTER);
        }
        if c & (CR_LF | NUMBER) == 0 {
            let (next, next_len) = self.at(i + len);
            if next & LETTER != 0 {
                return self.run(i + len + next_len, LETTER);
            }
        }
        if c & NUMBER != 0 {
            return self.numbers(i);
        }
        if c & SPACE == 0 {
            let end = self.run_other(i + len);
            return self.run_bytes(end, b"\r\n");
        }
        if self.bytes.get(i) == Some(&b' ') {
            let (next, next_len) = self.at(i + 1);
            if next & (LETTER | NUMBER | SPACE | END) == 0 {
                let end = self.run_other(i + 1 + next_len);
                return self.run_bytes(end, b"\r\n");
            }
        }
        self.whitespace(i, true)
    }

    /// o200k's `U*W+` from `j`, backtracking as the regex does: the longest U run whose end
    /// is followed by a W run, else the U run cut after its last W character.
    #[inline(always)]
    fn o200k_core_lower(&self, j: usize) -> Option<usize> {
        let mut k = j;
        let mut after_last_lower = None;
        loop {
            let (c, len) = self.at(k);
            if c & UPPER == 0 {
                if c & LOWER != 0 {
                    return Some(self.run(k + len, LOWER));
                }
                return after_last_lower;
            }
            k += len;
            if c & LOWER != 0 {
                after_last_lower = Some(k);
            }
        }
    }

    /// o200k's `U+W*` from `j`.
    #[inline(always)]
    fn o200k_core_upper(&self, j: usize) -> Option<usize> {
        let k = self.run(j, UPPER);
        (k > j).then(|| self.run(k, LOWER))
    }

    /// o200k's optional contraction after a word ending at `i`.
    #[inline(always)]
    fn o200k_contraction(&self, i: usize) -> usize {
        if self.bytes.get(i) == Some(&b'\'') {
            self.contraction_tail(i + 1).unwrap_or(i)
        } else {
            i
        }
    }

    /// The end of the o200k_base piece starting at byte `i` (`i` < text length).
    pub(crate) fn o200k(&self, i: usize) -> usize {
        let (c, len) = self.at(i);
        let prefix = c & (CR_LF | LETTER | NUMBER | END) == 0;
        if c & (UPPER | LOWER) != 0 || prefix {
            let word = (prefix.then(|| self.o200k_core_lower(i + len)).flatten())
                .or_else(|| self.o200k_core_lower(i))
                .or_else(|| prefix.then(|| self.o200k_core_upper(i + len)).flatten())
                .or_else(|| self.o200k_core_upper(i));
            if let Some(end) = word {
                return self.o200k_contraction(end);
            }
        }
        if c & NUMBER != 0 {
            return self.numbers(i);
        }
        if self.bytes.get(i) == Some(&b' ') {
            let (next, next_len) = self.at(i + 1);
            if next & (LETTER | NUMBER | SPACE | END) == 0 {
                let end = self.run_other(i + 1 + next_len);
                return self.run_bytes(end, b"\r\n/");
            }
        }
        if c & (LETTER | NUMBER | SPACE) == 0 {
            let end = self.run_other(i + len);
            return self.run_bytes(end, b"\r\n/");
        }
        self.whitespace(i, false)
    }
}
