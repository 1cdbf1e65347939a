//! The token-counting seam shared by the middle crates.

/// Counts the tokens of a text.
///
/// Defined here so that `skills` (level costs), `tools` (metrics) and `context` can all use a
/// counter without depending on each other; `ba-context` implements it with exact tiktoken
/// encodings.
pub trait TokenCounter: Send + Sync {
    /// The number of tokens `text` encodes to.
    fn count(&self, text: &str) -> usize;

    /// A short name of the encoding, for reports (`cl100k_base`, …).
    fn name(&self) -> &str {
        "unknown"
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Box<T> {
    fn count(&self, text: &str) -> usize {
        (**self).count(text)
    }
    fn name(&self) -> &str {
        (**self).name()
    }
}

/// A rough counter (one token per four bytes, rounded up) for tests and for places where no
/// exact encoding is configured. Never use it for budgets.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxCounter;

impl TokenCounter for ApproxCounter {
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }
    fn name(&self) -> &str {
        "approx-4-bytes"
    }
}

fn _object_safe(_: &dyn TokenCounter) {}
