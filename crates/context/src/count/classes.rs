//! The character classes the two split patterns test, for every code point.
//!
//! The tables are read from `regex-syntax`, the crate whose Unicode tables the reference regex
//! (tiktoken-rs's pattern run by fancy-regex over regex) uses: `\p{L}`, `\p{N}`, `\s`, the o200k
//! upper/lower classes and the simple case folds of the contraction letters come from the same
//! data, so the hand-written splitters cannot disagree with the regex about a category.

use std::collections::HashMap;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, HirKind};

/// `\p{L}`.
pub(crate) const LETTER: u8 = 1;
/// `\p{N}`.
pub(crate) const NUMBER: u8 = 1 << 1;
/// `\s` (White_Space).
pub(crate) const SPACE: u8 = 1 << 2;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const UPPER: u8 = 1 << 3;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const LOWER: u8 = 1 << 4;
/// `\r` or `\n`.
pub(crate) const CR_LF: u8 = 1 << 5;
/// Past the end of the text (never set in the tables).
pub(crate) const END: u8 = 1 << 6;

/// The class bits of each byte as a character: the ASCII ones (checked against the Unicode
/// tables when they are built), and 0 for the bytes of multi-byte characters, which the
/// callers decode and look up in [`Classes`].
pub(crate) static BYTES: [u8; 256] = byte_classes();

const fn byte_classes() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 128 {
        table[b] = match b as u8 {
            b'a'..=b'z' => LETTER | LOWER,
            b'A'..=b'Z' => LETTER | UPPER,
            b'0'..=b'9' => NUMBER,
            b'\r' | b'\n' => SPACE | CR_LF,
            b'\t' | 0x0b | 0x0c | b' ' => SPACE,
            _ => 0,
        };
        b += 1;
    }
    table
}

/// Code points per block of the two-level table.
const BLOCK: usize = 128;
const CODE_POINTS: usize = 0x11_0000;

/// Class bits of every code point, as a two-level table of deduplicated 128-entry blocks
/// (about 46 KB for all of Unicode).
#[derive(Debug)]
pub(crate) struct Classes {
    index: Vec<u16>,
    blocks: Vec<[u8; BLOCK]>,
    /// Non-ASCII characters that fold to an ASCII contraction letter, with that letter
    /// (`ſ` → `s`).
    folds: Vec<(char, u8)>,
}

/// The ranges of a one-class pattern such as `\p{L}`.
fn ranges(pattern: &str) -> Option<Vec<ClassUnicodeRange>> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => Some(class.ranges().to_vec()),
        _ => None,
    }
}

impl Classes {
    /// Builds the tables; `None` only if regex-syntax lacks its Unicode tables, in which case
    /// the caller counts with the regex-based tokenizer instead.
    pub(crate) fn build() -> Option<Self> {
        let mut all = vec![0u8; CODE_POINTS];
        let sets: [(&str, u8); 5] = [
            (r"\p{L}", LETTER),
            (r"\p{N}", NUMBER),
            (r"\s", SPACE),
            (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UPPER),
            (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LOWER),
        ];
        for (pattern, bit) in sets {
            for r in ranges(pattern)? {
                for slot in all.get_mut(r.start() as usize..=r.end() as usize)? {
                    *slot |= bit;
                }
            }
        }
        all[usize::from(b'\r')] |= CR_LF;
        all[usize::from(b'\n')] |= CR_LF;

        if all[..128] != BYTES[..128] {
            return None;
        }
        let mut blocks: Vec<[u8; BLOCK]> = Vec::new();
        let mut seen: HashMap<[u8; BLOCK], u16> = HashMap::new();
        let mut index = Vec::with_capacity(CODE_POINTS / BLOCK);
        for chunk in all.chunks_exact(BLOCK) {
            let mut block = [0u8; BLOCK];
            block.copy_from_slice(chunk);
            let next = u16::try_from(blocks.len()).ok()?;
            let id = *seen.entry(block).or_insert(next);
            if id == next {
                blocks.push(block);
            }
            index.push(id);
        }

        let mut folds = Vec::new();
        for letter in *b"sdmtlvre" {
            let c = char::from(letter);
            let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
            class.try_case_fold_simple().ok()?;
            for r in class.ranges() {
                for other in r.start()..=r.end() {
                    if !other.is_ascii() {
                        folds.push((other, letter));
                    }
                }
            }
        }
        Some(Self {
            index,
            blocks,
            folds,
        })
    }

    /// The class bits of `c`.
    #[inline(always)]
    pub(crate) fn of(&self, c: u32) -> u8 {
        if c < 128 {
            return BYTES[c as usize];
        }
        let block = self.index.get((c as usize) / BLOCK).copied().unwrap_or(0);
        self.blocks
            .get(usize::from(block))
            .map_or(0, |b| b[(c as usize) % BLOCK])
    }

    /// The lower-case ASCII contraction letter (`s d m t l v r e`) that `c` matches under
    /// `(?i)`, or 0.
    #[inline(always)]
    pub(crate) fn contraction_letter(&self, c: u32) -> u8 {
        if c < 128 {
            let lower = (c as u8).to_ascii_lowercase();
            return if b"sdmtlvre".contains(&lower) {
                lower
            } else {
                0
            };
        }
        self.folds
            .iter()
            .find(|(f, _)| *f as u32 == c)
            .map_or(0, |&(_, letter)| letter)
    }

    /// How much memory the tables hold, for the docs' claims.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.index.len() * 2 + self.blocks.len() * BLOCK + self.folds.len() * 8
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_few_code_points() {
        let c = Classes::build().unwrap();
        assert_eq!(c.of('a' as u32), LETTER | LOWER);
        assert_eq!(c.of('A' as u32), LETTER | UPPER);
        assert_eq!(c.of('7' as u32), NUMBER);
        assert_eq!(c.of(' ' as u32), SPACE);
        assert_eq!(c.of('\n' as u32), SPACE | CR_LF);
        assert_eq!(c.of('\u{a0}' as u32), SPACE);
        assert_eq!(c.of('\u{3000}' as u32), SPACE);
        assert_eq!(c.of('增' as u32), LETTER | UPPER | LOWER);
        assert_eq!(c.of('\u{301}' as u32), UPPER | LOWER); // a combining mark
        assert_eq!(c.of('½' as u32), NUMBER);
        assert_eq!(c.of('(' as u32), 0);
        assert_eq!(c.of(0x10_ffff), 0);
        assert_eq!(c.contraction_letter('S' as u32), b's');
        assert_eq!(c.contraction_letter('ſ' as u32), b's');
        assert_eq!(c.contraction_letter('k' as u32), 0);
        assert!(c.heap_bytes() < 64 * 1024, "{}", c.heap_bytes());
    }
}
