//! # ba-context
//!
//! Token counting, context budgets, compression strategies and the context builder.
//!
//! Every item is at the root, one path each:
//! - exact tiktoken encodings ([`Encoding`]: `cl100k_base`, `o200k_base`) that implement
//!   [`ba_protocol::TokenCounter`], and the model → encoding map with the Claude safety margin
//!   ([`ModelTokenizer`]);
//! - per-message counts with the OpenAI cookbook overhead, cached by entry id and content hash
//!   ([`MessageCounter`]), so a counter kept between turns only encodes new or changed entries;
//! - [`ContextBudget`] and [`ContextUsage`];
//! - the log cut into units kept or dropped whole ([`Window`]: a tool group is the assistant
//!   entry with its results), repair on read and the invariants;
//! - the [`CompressionStrategy`] trait and its implementations: [`Truncate`], [`KeyMessages`],
//!   [`ImportanceStrategy`], [`SummaryStrategy`] (through the [`Summarizer`] trait) and hybrid,
//!   and retrieval, which brings back the passages of what left the window most related
//!   to the current task ([`RetrievalStrategy`], BM25 and optionally an [`Embedder`]), tried in
//!   order until the window fits ([`Pipeline`]);
//! - the per-mode system prompt, file list, refocus, read-file synopsis and debug data around
//!   the pipeline ([`ContextBuilder`]), and the compaction the log records, from which
//!   later windows start ([`Effective`], [`record_window`]);
//! - what a tool output is and which of its figures matter, each with its label
//!   ([`read_output`]: tables, JSON and YAML documents, logs, tracebacks, prose), and what makes
//!   a line or a sentence worth keeping ([`line_salience`], [`key_sentences`]).
//!
//! The crate reads [`ba_protocol::LogEntry`] slices and returns entries; it depends on
//! `ba-protocol` only. The orchestrator (`ba-agent`) implements [`Summarizer`] with a model and
//! renders the window in a provider's wire format.
//!
//! ```
//! use ba_context::{block_on, ContextBudget, Encoding, MessageCounter, Pipeline};
//! use ba_protocol::{LogEntry, LogRole};
//!
//! let log: Vec<LogEntry> = (0..40)
//!     .map(|i| {
//!         let role = if i % 2 == 0 { LogRole::User } else { LogRole::Assistant };
//!         LogEntry::new(format!("m{i}"), role, "2026-01-01T00:00:00Z")
//!             .with_text("a fairly long message about quarterly revenue ".repeat(10))
//!     })
//!     .collect();
//! let counter = MessageCounter::exact(Encoding::Cl100kBase);
//! let budget = ContextBudget::new(2_000, 500);
//! let pipeline = Pipeline::named("key-messages", None)?;
//! let out = block_on(pipeline.run(&log, "Be brief.", &budget, &counter))?;
//! assert!(out.used <= 1_500);
//! let kept = out.window.kept_ids();
//! // What did not fit was shortened (old messages to their key sentences) or left out, each
//! // with its reason; the latest user message is there whole.
//! assert!(!out.window.changed.is_empty() || kept.len() < log.len());
//! assert!(kept.iter().any(|id| id == "m38"));
//! # Ok::<(), ba_context::ContextError>(())
//! ```
#![deny(missing_docs)]

// The README's example, compiled and run with the documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

mod budget;
mod builder;
mod compaction;
mod count;
mod error;
mod message;
mod pipeline;
mod salience;
mod strategy;
mod structure;
mod tokens;
mod window;

pub use budget::{ContextBudget, ContextUsage, UsageStatus};
pub use builder::{
    BuildRequest, BuilderSettings, BuiltContext, ContextBuilder, DebugData, NOTE_PART_TYPE,
    PromptParts, ReadFile, RunState, SessionFile,
};
pub use compaction::{Effective, RecordProblem, record_of, record_window, summary_record};
pub use error::{ContextError, Result};
pub use message::{
    FastHasher, IMAGE_TOKENS, MessageCounter, MessageOverhead, entry_hash, entry_texts,
};
pub use pipeline::{Compressed, Pipeline, STRATEGY_NAMES, When};
pub use salience::{
    KeySentences, Salience, TRACE_MARK, key_sentences, line_salience, salient_lines,
    sentence_salience, sentences, trace_text,
};
pub use strategy::{
    CompressCx, CompressionStrategy, EmbedError, Embedder, ExtractiveSummarizer, Importance,
    ImportanceStrategy, KeyMessages, RECALL_MARK, RetrievalStrategy, SCORE_CHARS, Score,
    Summarizer, SummaryError, SummaryStrategy, Truncate,
};
pub use structure::{KeyItem, OutputKind, Reading, read_output};
pub use tokens::{DEFAULT_CLAUDE_MARGIN, Encoding, ModelTokenizer};
pub use window::{
    RESUME_TEXT, Unit, UnitKind, Window, aborted_text, holds_provider_compaction, is_summary_text,
};

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};

/// Runs a future to completion on the current thread.
///
/// The strategies are async only because a [`Summarizer`] may call a model; callers without a
/// runtime (the CLI, with the offline summarizer) drive them with this.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}
