//! A long text counted on all cores, cut where no piece can span.
//!
//! **The cut rule.** A cut at byte `p` where `text[p - 1]` is `\n` and `text[p]` is a visible
//! ASCII character other than `/` (a letter, a digit, `{`, `"`, `#`…) leaves every piece whole,
//! in both encodings: the pieces of `text` are those of `text[..p]` followed by those of
//! `text[p..]`. (JSON lines, code and prose all have such points at most line starts.)
//!
//! 1. No piece holds a newline followed by such a character `c`. Going through the
//!    alternatives of both patterns: the contraction (cl100k) is an apostrophe and letters; the
//!    letter alternatives allow one optional prefix character that is not `\r`/`\n`, then
//!    letters (o200k: its upper/lower classes and a contraction); numbers are numbers; the
//!    punctuation alternative ` ?[^\s\p{L}\p{N}]+` holds a newline only in its `[\r\n]*` tail
//!    (o200k: `[\r\n/]*`), which `c` cannot continue; the whitespace alternatives hold
//!    whitespace only, and `c` is not. So the match sequence of `text` has a boundary at `p`.
//! 2. Neither pattern looks behind, so matching resumed at `p` sees what matching `text[p..]`
//!    sees: the pieces from `p` on are the same.
//! 3. Before `p`, only a look at position `p` itself could differ (`c` in `text`, the end in
//!    `text[..p]`). A run that reaches `p - 1` holds the `\n`, so it is a punctuation tail or a
//!    whitespace run. The tail stops at `p` either way. The whitespace run ends at `p` either
//!    way and its last newline is at `p - 1`, so in `text` the newline rule (`\s*[\r\n]`,
//!    `\s*[\r\n]+`) takes it up to `p`; in `text[..p]` cl100k's earlier `\s++$` takes the same
//!    run, and o200k has no rule before the newline one. `\s+(?!\S)`, the only other rule that
//!    looks past its match, comes after the newline rule in both patterns, so it never sees
//!    such a run. Every piece before `p` is the same.
//!
//! The cut is a byte test on ASCII, so it always falls on a character boundary; the tests
//! count random texts cut at every such point against tiktoken-rs.

use std::num::NonZeroUsize;
use std::thread;

use super::classes::Classes;
use crate::tokens::Encoding;

/// The least text a thread is given: below it, starting a thread and warming its cache costs
/// more than it saves.
pub(crate) const MIN_CHUNK: usize = 1 << 20;

/// Whether a cut may fall between `before` and `after` (see the module docs).
#[inline]
pub(crate) fn is_cut(before: u8, after: u8) -> bool {
    before == b'\n' && after.is_ascii_graphic() && after != b'/'
}

/// The first cut point at or after `from`.
fn cut_at_or_after(bytes: &[u8], from: usize) -> Option<usize> {
    let start = from.max(1) - 1;
    bytes
        .get(start..)?
        .windows(2)
        .position(|w| is_cut(w[0], w[1]))
        .map(|k| start + k + 1)
}

/// `text` cut into at most `parts` chunks of at least `min_chunk` bytes (the last may be
/// shorter) at cut points.
pub(crate) fn chunks(text: &str, parts: usize, min_chunk: usize) -> Vec<&str> {
    let bytes = text.as_bytes();
    let step = (text.len() / parts.max(1)).max(min_chunk).max(1);
    let mut out = Vec::with_capacity(parts.min(64));
    let mut start = 0;
    while out.len() + 1 < parts {
        let Some(cut) = cut_at_or_after(bytes, start + step) else {
            break;
        };
        let Some(chunk) = text.get(start..cut) else {
            break;
        };
        out.push(chunk);
        start = cut;
    }
    if let Some(rest) = text.get(start..)
        && !rest.is_empty()
    {
        out.push(rest);
    }
    out
}

/// The count of a text of at least two [`MIN_CHUNK`]s on up to as many threads as the process
/// may use; `None` when one thread would do or the serial count fails.
pub(crate) fn count(encoding: Encoding, text: &str, classes: &Classes) -> Option<usize> {
    let threads = thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let parts = threads.min(text.len() / MIN_CHUNK);
    if parts < 2 {
        return None;
    }
    count_chunks(encoding, &chunks(text, parts, MIN_CHUNK), classes)
}

/// Counts the first chunk here and each other on a scoped thread of its own. A thread that
/// cannot be started, or that fails, leaves its chunk to this thread.
pub(crate) fn count_chunks(
    encoding: Encoding,
    chunks: &[&str],
    classes: &Classes,
) -> Option<usize> {
    let Some((first, rest)) = chunks.split_first() else {
        return Some(0);
    };
    thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .map(|chunk| {
                let handle = thread::Builder::new()
                    .name("ba-context-count".into())
                    .spawn_scoped(scope, move || super::serial(encoding, chunk, classes));
                (chunk, handle)
            })
            .collect();
        let mut total = super::serial(encoding, first, classes)?;
        for (chunk, handle) in handles {
            let counted = handle.ok().and_then(|h| h.join().ok()).flatten();
            total += match counted {
                Some(n) => n,
                None => super::serial(encoding, chunk, classes)?,
            };
        }
        Some(total)
    })
}
