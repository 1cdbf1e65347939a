//! A bounded, per-thread cache from a short piece to its token count.
//!
//! Real text repeats its pieces heavily (" the", "\n", "    ", "fn", "\":"), and a piece's BPE
//! count costs a few hundred instructions and two allocations, a cache hit about thirty. The
//! cache is direct-mapped: [`SLOTS`] slots of 32 bytes, each holding one piece of at most
//! [`MAX_PIECE`] bytes (compared in full, so a hit is exact) and its count; a miss counts the
//! piece and overwrites the slot. That bounds it at 128 KiB per thread and encoding. It lives in
//! a thread-local, so threads never share or lock it.

use bpe_openai::byte_pair_encoding::BytePairEncoding;

/// Slots in one cache (a power of two).
pub(crate) const SLOTS: usize = 4096;
/// The longest piece cached; longer pieces are rare and counted directly.
pub(crate) const MAX_PIECE: usize = 24;

const BITS: u32 = SLOTS.trailing_zeros();

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

#[inline]
fn words(piece: &[u8]) -> [u64; 3] {
    let mut buf = [0u8; MAX_PIECE];
    buf[..piece.len()].copy_from_slice(piece);
    let word = |k: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[k * 8..k * 8 + 8]);
        u64::from_le_bytes(w)
    };
    [word(0), word(1), word(2)]
}

#[inline]
fn slot_of(words: &[u64; 3], len: usize) -> usize {
    let h = (words[0] ^ (len as u64).rotate_left(56))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(23)
        ^ words[1].wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ words[2].wrapping_mul(0x1656_67b1_9e37_79f9);
    (h.wrapping_mul(0xff51_afd7_ed55_8ccd) >> (64 - BITS)) as usize
}

impl PieceCache {
    /// The token count of `piece` under `bpe`, from the cache when it holds the piece.
    #[inline]
    pub(crate) fn count(&mut self, piece: &[u8], bpe: &BytePairEncoding) -> usize {
        let len = piece.len();
        if len <= 1 {
            // Every single byte is a token.
            return len;
        }
        if len > MAX_PIECE {
            return bpe.count(piece);
        }
        let w = words(piece);
        let i = slot_of(&w, len);
        if let Some(slot) = self.slots.get_mut(i) {
            if slot.meta as u32 as usize == len && slot.words == w {
                return (slot.meta >> 32) as usize;
            }
            let n = bpe.count(piece);
            *slot = Slot {
                words: w,
                meta: len as u64 | ((n as u64) << 32),
            };
            return n;
        }
        bpe.count(piece)
    }
}
