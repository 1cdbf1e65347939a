//! Fast exact token counts: a hand-written pre-tokeniser per encoding, then each piece's count
//! through a small per-thread cache, a vocabulary index and tiktoken's merge rule.
//!
//! The profile of `bpe-openai`'s own `count` (callgrind, 1 MB of skill Markdown, cl100k_base:
//! 289 M instructions) put 46 % in its regex pre-tokeniser and 53 % in the BPE of the pieces,
//! over a third of that in `malloc`/`free` of two buffers per piece; tiktoken-rs spends 85–90 %
//! of its instructions in fancy-regex. Here:
//!
//! - [`split`]: the pieces, by a byte loop over a class table read from regex-syntax, equal to
//!   the reference regexes piece for piece (tested on every code point and on random text).
//! - [`cache`]: a direct-mapped cache of piece counts, 8192 slots of 32 bytes per thread and
//!   encoding (256 KiB), compared in full.
//! - [`vocab`]: on a miss, a piece that is a token counts 1; another is merged pair by pair by
//!   tiktoken's rule over an index of the dictionary. Pieces over 24 bytes go to `bpe-openai`.
//! - [`parallel`]: a text of two megabytes or more is cut where no piece can span (proved in
//!   that module) and counted on all cores.
//!
//! Exactness does not rest on the fast path alone: if the class tables cannot be built, or the
//! splitter ever failed to advance, the text is counted by `bpe-openai`'s regex tokenizer.

mod cache;
mod classes;
mod parallel;
mod split;
mod vocab;

use std::cell::RefCell;
use std::sync::LazyLock;

use bpe_openai::Tokenizer;

use crate::tokens::Encoding;
use cache::PieceCache;
use classes::Classes;
use split::Splitter;
use vocab::Vocab;

static CLASSES: LazyLock<Option<Classes>> = LazyLock::new(Classes::build);
static VOCAB_CL100K: LazyLock<Vocab> =
    LazyLock::new(|| Vocab::build(&bpe_openai::cl100k_base().bpe));
static VOCAB_O200K: LazyLock<Vocab> = LazyLock::new(|| Vocab::build(&bpe_openai::o200k_base().bpe));

thread_local! {
    /// One cache per encoding, allocated on the thread's first count in that encoding.
    static CACHES: RefCell<[Option<PieceCache>; 2]> = const { RefCell::new([None, None]) };
}

fn tokenizer(encoding: Encoding) -> &'static Tokenizer {
    match encoding {
        Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        Encoding::O200kBase => bpe_openai::o200k_base(),
    }
}

/// The number of tokens of `text` in `encoding`, special-token text counted as ordinary text.
pub(crate) fn count(encoding: Encoding, text: &str) -> usize {
    let tokenizer = tokenizer(encoding);
    let Some(classes) = CLASSES.as_ref() else {
        return tokenizer.count(text);
    };
    if text.len() >= 2 * parallel::MIN_CHUNK
        && let Some(n) = parallel::count(encoding, text, classes)
    {
        return n;
    }
    serial(encoding, text, classes).unwrap_or_else(|| tokenizer.count(text))
}

/// Counts on this thread, through its cache when the cache is free (it always is, unless a
/// count is running on this thread already or the thread is shutting down).
fn serial(encoding: Encoding, text: &str, classes: &Classes) -> Option<usize> {
    let counter = Counter {
        vocab: match encoding {
            Encoding::Cl100kBase => &VOCAB_CL100K,
            Encoding::O200kBase => &VOCAB_O200K,
        },
        splitter: Splitter::new(text, classes),
        bytes: text.as_bytes(),
    };
    let slot = match encoding {
        Encoding::Cl100kBase => 0,
        Encoding::O200kBase => 1,
    };
    let cached = CACHES.try_with(|cell| {
        let mut caches = cell.try_borrow_mut().ok()?;
        let cache = caches[slot].get_or_insert_with(PieceCache::default);
        Some(counter.walk(encoding, cache))
    });
    match cached {
        Ok(Some(n)) => n,
        _ => counter.walk(encoding, &mut PieceCache::default()),
    }
}

/// What counting one text needs.
struct Counter<'a> {
    vocab: &'a Vocab,
    splitter: Splitter<'a>,
    bytes: &'a [u8],
}

impl Counter<'_> {
    /// The sum of the counts of the pieces; `None` if the splitter failed to advance.
    fn walk(&self, encoding: Encoding, cache: &mut PieceCache) -> Option<usize> {
        match encoding {
            Encoding::Cl100kBase => self.walk_with(cache, |i| self.splitter.cl100k(i)),
            Encoding::O200kBase => self.walk_with(cache, |i| self.splitter.o200k(i)),
        }
    }

    #[inline(always)]
    fn walk_with(
        &self,
        cache: &mut PieceCache,
        piece_end: impl Fn(usize) -> usize,
    ) -> Option<usize> {
        let len = self.bytes.len();
        let mut total = 0;
        let mut i = 0;
        while i < len {
            let end = piece_end(i);
            if end <= i || end > len {
                return None;
            }
            total += cache.count(self.bytes, i, end, self.vocab);
            i = end;
        }
        Some(total)
    }
}

/// The pieces of `text`, for tests against the reference regex.
#[cfg(test)]
pub(crate) fn pieces(encoding: Encoding, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let Some(classes) = CLASSES.as_ref() else {
        return out;
    };
    let splitter = Splitter::new(text, classes);
    let mut i = 0;
    while i < text.len() {
        let end = match encoding {
            Encoding::Cl100kBase => splitter.cl100k(i),
            Encoding::O200kBase => splitter.o200k(i),
        };
        match text.get(i..end) {
            Some(p) if !p.is_empty() => out.push(p),
            _ => {
                out.push("<splitter failed>");
                return out;
            }
        }
        i = end;
    }
    out
}

#[cfg(test)]
mod tests;
