//! Compression strategies behind one trait, chosen at construction.

mod importance;
mod key_messages;
mod retrieval;
mod summary;
mod truncate;

pub use importance::{Importance, ImportanceStrategy};
pub use key_messages::{KeyMessages, SCORE_CHARS, Score};
pub use retrieval::{EmbedError, Embedder, RECALL_MARK, RetrievalStrategy};
pub use summary::{ExtractiveSummarizer, Summarizer, SummaryError, SummaryStrategy};
pub use truncate::Truncate;

use async_trait::async_trait;

use crate::error::Result;
use crate::message::MessageCounter;
use crate::window::Window;

/// What a strategy is given besides the window.
#[derive(Debug, Clone, Copy)]
pub struct CompressCx<'a> {
    /// Counts entries the strategy changes or adds.
    pub counter: &'a MessageCounter,
    /// Tokens the window should come under (messages only; the system prompt is outside).
    pub target: usize,
    /// Tokens at which the next compaction starts: a window left above it is compacted again
    /// at the next request.
    pub trigger: usize,
    /// Tokens the window must never exceed.
    pub limit: usize,
}

/// One way of making a window smaller.
///
/// A strategy takes the window and returns a smaller one. It keeps tool groups whole, keeps the
/// latest user message, and records every entry it drops or changes; the pipeline checks the
/// invariants after every strategy and fits what is still over the limit.
#[async_trait]
pub trait CompressionStrategy: Send + Sync + std::fmt::Debug {
    /// The name used in reports and on the command line.
    fn name(&self) -> &str;

    /// Compresses `window` towards `cx.target`.
    async fn compress(&self, window: Window, cx: CompressCx<'_>) -> Result<Window>;
}

#[async_trait]
impl<T: CompressionStrategy + ?Sized> CompressionStrategy for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn compress(&self, window: Window, cx: CompressCx<'_>) -> Result<Window> {
        (**self).compress(window, cx).await
    }
}

#[async_trait]
impl<T: CompressionStrategy + ?Sized> CompressionStrategy for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    async fn compress(&self, window: Window, cx: CompressCx<'_>) -> Result<Window> {
        (**self).compress(window, cx).await
    }
}

fn _object_safe(_: &dyn CompressionStrategy, _: &dyn Summarizer, _: &dyn Embedder) {}

/// Cuts `text` to at most `max_chars` characters, keeping `head` of it at the start and the
/// rest at the end, with a marker saying how much was left out.
pub(crate) fn head_tail(text: &str, max_chars: usize, head_share: f64) -> Option<String> {
    let total = text.chars().count();
    if total <= max_chars {
        return None;
    }
    let head_n = (max_chars as f64 * head_share) as usize;
    let tail_n = max_chars.saturating_sub(head_n);
    let head: String = text.chars().take(head_n).collect();
    let tail: String = text.chars().skip(total - tail_n).collect();
    Some(format!(
        "{head}\n[… {} characters left out …]\n{tail}",
        total - head_n - tail_n
    ))
}
