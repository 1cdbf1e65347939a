//! The token count of one piece, by tiktoken's own rule, over an index of the vocabulary.
//!
//! tiktoken counts a piece in two steps: a piece that is itself a token is one token; otherwise
//! it starts from single bytes and repeatedly merges the adjacent pair whose concatenation is
//! the token of lowest rank (the leftmost such pair on a tie) until no adjacent pair forms a
//! token. [`Vocab::count`] does exactly that for pieces of up to [`MAX_PIECE`] bytes, with the
//! ranks read from `bpe-openai`'s dictionary (its token ids are tiktoken's ranks; a test checks
//! every one against tiktoken-rs). Longer pieces go to `bpe-openai`'s exact count.
//!
//! Why not `bpe-openai`'s count for every piece: on o200k_base it spends one to three
//! microseconds on a short multi-token piece (its backtracking encoder re-runs an Aho-Corasick
//! automaton and a pair table spread over tens of megabytes, and allocates twice), where the
//! merge below looks up two-byte pairs in a 256 KiB table and longer candidates in the index.
//!
//! Memory, built once per process and encoding: the index holds every token of 2 to
//! [`MAX_PIECE`] bytes at a load of at most one half (2 MiB for cl100k_base, 4 MiB for
//! o200k_base), plus the 256 KiB pair table.

use bpe_openai::byte_pair_encoding::BytePairEncoding;

use super::cache::{Key, MAX_PIECE};

/// An index of one encoding's short tokens.
pub(crate) struct Vocab {
    bpe: &'static BytePairEncoding,
    /// `(hash high 32 bits) << 32 | (token id + 1)`, open addressing; 0 = empty.
    table: Vec<u64>,
    mask: usize,
    /// The rank of every two-byte token by its bytes (`u32::MAX`: not a token).
    pairs: Vec<u32>,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab")
            .field("tokens", &self.bpe.num_tokens())
            .field("slots", &self.table.len())
            .finish_non_exhaustive()
    }
}

/// A piece copied into a zero-padded buffer, so that [`Key::new`] reads whole words from it.
const BUF: usize = 2 * MAX_PIECE;

impl Vocab {
    /// Indexes the tokens of `bpe` of 2 to [`MAX_PIECE`] bytes.
    pub(crate) fn build(bpe: &'static BytePairEncoding) -> Self {
        let size = (bpe.num_tokens() * 2).next_power_of_two().max(1024);
        let mut table = vec![0u64; size];
        let mask = size - 1;
        let mut pairs = vec![u32::MAX; 1 << 16];
        for id in 0..bpe.num_tokens() {
            let Ok(id) = u32::try_from(id) else { break };
            let token = bpe.token_bytes(id);
            if let [a, b] = *token
                && let Some(slot) = pairs.get_mut(usize::from(a) << 8 | usize::from(b))
            {
                *slot = id;
            }
            if token.len() > MAX_PIECE || token.len() < 2 {
                continue;
            }
            let key = Key::new(token, 0, token.len());
            let mut i = key.hash as usize & mask;
            while table.get(i).is_some_and(|&e| e != 0) {
                i = (i + 1) & mask;
            }
            if let Some(slot) = table.get_mut(i) {
                *slot = (key.hash >> 32 << 32) | u64::from(id + 1);
            }
        }
        Self {
            bpe,
            table,
            mask,
            pairs,
        }
    }

    /// The id of the token that `piece` (2 to [`MAX_PIECE`] bytes, with key `key`) is, if any.
    #[inline]
    fn lookup(&self, piece: &[u8], key: &Key) -> Option<u32> {
        let fingerprint = key.hash >> 32 << 32;
        let mut i = key.hash as usize & self.mask;
        loop {
            let entry = self.table.get(i).copied().unwrap_or(0);
            if entry == 0 {
                return None;
            }
            if entry & 0xffff_ffff_0000_0000 == fingerprint {
                let id = (entry as u32).wrapping_sub(1);
                if self.bpe.token_bytes(id) == piece {
                    return Some(id);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The rank of `buf[start..end]` as a token, or `u32::MAX`.
    #[inline]
    fn rank(&self, buf: &[u8; BUF], start: usize, end: usize) -> u32 {
        match end - start {
            2 => self
                .pairs
                .get(usize::from(buf[start]) << 8 | usize::from(buf[start + 1]))
                .copied()
                .unwrap_or(u32::MAX),
            len => {
                let key = Key::new(buf, start, len);
                buf.get(start..end)
                    .and_then(|piece| self.lookup(piece, &key))
                    .unwrap_or(u32::MAX)
            }
        }
    }

    /// The token count of `piece` (2 to [`MAX_PIECE`] bytes, with key `key`).
    pub(crate) fn count(&self, piece: &[u8], key: &Key) -> usize {
        if self.lookup(piece, key).is_some() {
            return 1;
        }
        self.merge(piece)
    }

    /// The token count of a piece longer than [`MAX_PIECE`] bytes.
    pub(crate) fn count_long(&self, piece: &[u8]) -> usize {
        self.bpe.count(piece)
    }

    /// The number of parts left when merging `piece` pair by pair, lowest rank first.
    fn merge(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        if n > MAX_PIECE {
            return self.bpe.count(piece);
        }
        let mut buf = [0u8; BUF];
        buf[..n].copy_from_slice(piece);
        // Part k is buf[starts[k]..starts[k + 1]]; ranks[k] is the rank of parts k and k + 1
        // joined.
        let mut starts = [0usize; MAX_PIECE + 1];
        for (k, s) in starts.iter_mut().enumerate().take(n + 1) {
            *s = k;
        }
        let mut ranks = [u32::MAX; MAX_PIECE];
        for (k, r) in ranks.iter_mut().enumerate().take(n.saturating_sub(1)) {
            *r = self.rank(&buf, k, k + 2);
        }
        let mut parts = n;
        while parts > 1 {
            let mut best = u32::MAX;
            let mut at = 0;
            for (k, &r) in ranks.iter().enumerate().take(parts - 1) {
                if r < best {
                    best = r;
                    at = k;
                }
            }
            if best == u32::MAX {
                break;
            }
            // Join parts `at` and `at + 1`: drop the start of `at + 1` and the pair rank that
            // began there, then rank the joined part with its neighbours.
            starts.copy_within(at + 2..=parts, at + 1);
            ranks.copy_within(at + 1..parts - 1, at);
            parts -= 1;
            ranks[parts - 1] = u32::MAX;
            if at + 1 < parts {
                ranks[at] = self.rank(&buf, starts[at], starts[at + 2]);
            }
            if at > 0 {
                ranks[at - 1] = self.rank(&buf, starts[at - 1], starts[at + 1]);
            }
        }
        parts
    }

    /// The tables' size in bytes.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.len() * 8 + self.pairs.len() * 4
    }
}
