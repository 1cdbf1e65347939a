//! A bounded per-thread cache from a short piece to its token count.
//!
//! Real text repeats its pieces heavily (" the", "\n", "    ", "fn", "\":"): in a megabyte of
//! skill Markdown 215 k pieces are 15 k distinct ones. A cache hit costs a few dozen
//! instructions on memory that stays in L2; a miss costs a vocabulary probe or a BPE merge over
//! tables of megabytes ([`Vocab`]).
//!
//! [`PieceCache`] is direct-mapped: [`SLOTS`] slots of 32 bytes, each holding one piece of at
//! most [`MAX_PIECE`] bytes (compared in full, so a hit is exact) and its count; a miss
//! overwrites the slot. That bounds it at `SLOTS × 32` bytes (256 KiB) per thread and encoding,
//! allocated on the thread's first count in that encoding and freed with the thread. It lives in
//! a thread-local, so threads never share or lock it.

use super::vocab::Vocab;

/// Slots in one cache (a power of two).
pub(crate) const SLOTS: usize = 8192;
/// The longest piece cached or looked up in the vocabulary; longer pieces are rare and go
/// straight to the BPE.
pub(crate) const MAX_PIECE: usize = 24;

const BITS: u32 = SLOTS.trailing_zeros();

/// A piece of at most [`MAX_PIECE`] bytes as three little-endian words, zero-padded, with its
/// hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    words: [u64; 3],
    len: usize,
    pub(crate) hash: u64,
}

/// `MASKS[n]` keeps the low `n` bytes of a word.
const MASKS: [u64; 9] = {
    let mut masks = [u64::MAX; 9];
    let mut n = 0;
    while n < 8 {
        masks[n] = (1u64 << (8 * n)) - 1;
        n += 1;
    }
    masks
};

#[inline(always)]
fn mask(valid: usize) -> u64 {
    MASKS[valid.min(8)]
}

#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_le_bytes)
}

impl Key {
    /// The key of `bytes[start..start + len]` (`1 < len <= MAX_PIECE`). Reads whole words from
    /// the text when it extends far enough past the piece, masking off the bytes that follow.
    #[inline(always)]
    pub(crate) fn new(bytes: &[u8], start: usize, len: usize) -> Self {
        let mut words = [0u64; 3];
        if start + MAX_PIECE <= bytes.len() {
            words[0] = word(bytes, start) & mask(len);
            if len > 8 {
                words[1] = word(bytes, start + 8) & mask(len - 8);
                if len > 16 {
                    words[2] = word(bytes, start + 16) & mask(len - 16);
                }
            }
        } else {
            for (k, &b) in bytes.iter().skip(start).take(len).enumerate() {
                words[k / 8] |= u64::from(b) << (8 * (k % 8));
            }
        }
        let hash = ((words[0] ^ (len as u64).rotate_left(56))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(23)
            ^ words[1].wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ words[2].wrapping_mul(0x1656_67b1_9e37_79f9))
        .wrapping_mul(0xff51_afd7_ed55_8ccd);
        Self { words, len, hash }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    words: [u64; 3],
    /// Piece length in the low 32 bits (0 = empty), count in the high 32.
    meta: u64,
}

/// One encoding's cache.
#[derive(Debug)]
pub(crate) struct PieceCache {
    slots: Box<[Slot]>,
}

impl Default for PieceCache {
    fn default() -> Self {
        Self {
            slots: vec![Slot::default(); SLOTS].into_boxed_slice(),
        }
    }
}

impl PieceCache {
    /// The token count of `bytes[start..end]`.
    #[inline(always)]
    pub(crate) fn count(&mut self, bytes: &[u8], start: usize, end: usize, vocab: &Vocab) -> usize {
        let len = end - start;
        if len <= 1 {
            // Every single byte is a token.
            return len;
        }
        let piece = bytes.get(start..end).unwrap_or_default();
        if len > MAX_PIECE {
            return vocab.count_long(piece);
        }
        let key = Key::new(bytes, start, len);
        let i = (key.hash >> (64 - BITS)) as usize;
        let Some(slot) = self.slots.get_mut(i) else {
            return vocab.count(piece, &key);
        };
        if slot.meta as u32 as usize == len && slot.words == key.words {
            return (slot.meta >> 32) as usize;
        }
        let n = vocab.count(piece, &key);
        *slot = Slot {
            words: key.words,
            meta: len as u64 | ((n as u64) << 32),
        };
        n
    }
}
