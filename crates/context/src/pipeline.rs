//! The pipeline: strategies in order until the window is under the target, the invariants
//! checked after each, and a last fit to the hard limit.

use std::sync::Arc;

use ba_protocol::LogEntry;

use crate::budget::{ContextBudget, ContextUsage};
use crate::error::{ContextError, Result};
use crate::message::MessageCounter;
use crate::strategy::{
    CompressCx, CompressionStrategy, Embedder, ExtractiveSummarizer, ImportanceStrategy,
    KeyMessages, RetrievalStrategy, Summarizer, SummaryStrategy, Truncate,
};
use crate::window::{DropReason, Window};

/// The names [`Pipeline::named`] accepts.
pub const STRATEGY_NAMES: &[&str] = &[
    "truncate",
    "key-messages",
    "importance",
    "summary",
    "hybrid",
    "retrieval",
];

/// A window that fits its budget.
#[derive(Debug, Clone)]
pub struct Compressed {
    /// The window.
    pub window: Window,
    /// Tokens of the system prompt.
    pub system_tokens: usize,
    /// Tokens of the whole request: system prompt, messages and reply priming.
    pub used: usize,
    /// `used` against the budget.
    pub usage: ContextUsage,
    /// Whether usage was over the trigger, so strategies ran.
    pub compressed: bool,
}

/// When the strategies of a pipeline run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// When the window is over the trigger.
    OverTrigger,
    /// Now, towards the target (a compaction the caller asks for).
    Now,
    /// Not at all: the window only gets the last fit to the hard limit (a window that was
    /// compacted and has nothing new).
    Never,
}

/// Strategies applied in order.
#[derive(Debug, Default)]
pub struct Pipeline {
    strategies: Vec<Box<dyn CompressionStrategy>>,
}

impl Pipeline {
    /// A pipeline of `strategies`, tried in order.
    pub fn new(strategies: Vec<Box<dyn CompressionStrategy>>) -> Self {
        Self { strategies }
    }

    /// The pipeline of one named strategy (see [`STRATEGY_NAMES`]); `summary` and `hybrid` use
    /// `summarizer`, or the [`ExtractiveSummarizer`] when none is given; `retrieval` is
    /// key-messages with retrieval around it (BM25 alone: see [`Pipeline::named_with`]).
    pub fn named(name: &str, summarizer: Option<Arc<dyn Summarizer>>) -> Result<Self> {
        Self::named_with(name, summarizer, None)
    }

    /// [`Pipeline::named`], with `retrieval` scoring by `embedder`'s vectors too.
    pub fn named_with(
        name: &str,
        summarizer: Option<Arc<dyn Summarizer>>,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<Self> {
        let summarizer = summarizer.unwrap_or_else(|| Arc::new(ExtractiveSummarizer));
        let s: Box<dyn CompressionStrategy> = match name {
            "truncate" => Box::new(Truncate::default()),
            "key-messages" => Box::new(KeyMessages::default()),
            "importance" => Box::new(ImportanceStrategy::default()),
            "summary" => Box::new(SummaryStrategy::new(summarizer)),
            "hybrid" => Box::new(SummaryStrategy::hybrid(summarizer)),
            "retrieval" => {
                let r = RetrievalStrategy::default();
                Box::new(match embedder {
                    Some(e) => r.with_embedder(e),
                    None => r,
                })
            }
            _ => {
                return Err(ContextError::UnknownStrategy {
                    name: name.to_owned(),
                });
            }
        };
        Ok(Self::new(vec![s]))
    }

    /// The strategies' names.
    pub fn names(&self) -> Vec<&str> {
        self.strategies.iter().map(|s| s.name()).collect()
    }

    /// Builds the window of `entries` for a request whose system prompt is `system`.
    ///
    /// Below the trigger the window is the repaired log. Above it, strategies run in order
    /// until the window is under the target; the invariants are checked after each one, and
    /// what is still over the hard limit is dropped oldest first. Errors: an empty budget, a
    /// system prompt that does not fit, no user message, a latest user message that does not
    /// fit.
    pub async fn run(
        &self,
        entries: &[LogEntry],
        system: &str,
        budget: &ContextBudget,
        counter: &MessageCounter,
    ) -> Result<Compressed> {
        self.run_with(
            entries,
            counter.system(system),
            When::OverTrigger,
            budget,
            counter,
        )
        .await
    }

    /// [`Pipeline::run`] with the tokens outside the messages given (the system prompt and any
    /// note sent after the window) and a say in when strategies run.
    pub async fn run_with(
        &self,
        entries: &[LogEntry],
        system_tokens: usize,
        when: When,
        budget: &ContextBudget,
        counter: &MessageCounter,
    ) -> Result<Compressed> {
        let available = budget.available()?;
        if system_tokens >= available {
            return Err(ContextError::SystemTooLarge {
                system: system_tokens,
                available,
            });
        }
        let limit = available - system_tokens;
        let mut window = Window::prepare(entries, counter);
        let latest = window
            .latest_user()
            .and_then(|i| window.units[i].entries.first())
            .map(|e| e.id.clone())
            .ok_or(ContextError::NoUserMessage)?;
        let trigger = budget.trigger_tokens().saturating_sub(system_tokens);
        let target = match budget.target_tokens().checked_sub(system_tokens) {
            Some(t) if t > 0 => t,
            _ => limit,
        };
        let mut compressed = match when {
            When::OverTrigger => window.tokens() > trigger,
            When::Now => true,
            When::Never => false,
        };
        let dropped_on_read = window.dropped.len();
        if compressed {
            // Over the trigger but within the target (the system prompt and tool definitions
            // take so much of the budget that the target is the whole limit): nothing to do,
            // and no compaction to report.
            if when == When::OverTrigger && window.tokens() <= target {
                compressed = false;
            }
            for strategy in &self.strategies {
                if window.tokens() <= target {
                    break;
                }
                let cx = CompressCx {
                    counter,
                    target,
                    trigger: trigger.max(target),
                    limit,
                };
                window = strategy.compress(window, cx).await?;
                window.strategies.push(strategy.name().to_owned());
                window.check(Some(&latest), usize::MAX).map_err(|detail| {
                    ContextError::Invariant {
                        strategy: strategy.name().to_owned(),
                        detail,
                    }
                })?;
            }
        }
        if !window.fit_keeping_pending(limit, DropReason::OverBudget) {
            // What is left is the latest user message and the results the model is about to
            // read: without them the next answer would be made up.
            let needed = window.tokens() + system_tokens + budget.reserved_for_response;
            return Err(match window.pending_start() {
                Some(p) => ContextError::PendingTooLarge {
                    call: window.units[p]
                        .entries
                        .first()
                        .map_or_else(String::new, |e| e.id.clone()),
                    needed,
                    budget: budget.total,
                },
                None => ContextError::LatestUserTooLarge {
                    id: latest,
                    needed: window.tokens(),
                    available: limit,
                },
            });
        }
        if window.dropped.len() > dropped_on_read {
            window.open_with_user(counter, limit);
        }
        window
            .check(Some(&latest), limit)
            .map_err(|detail| ContextError::Invariant {
                strategy: "pipeline".to_owned(),
                detail,
            })?;
        let used = system_tokens + window.tokens();
        Ok(Compressed {
            usage: budget.usage(used),
            used,
            system_tokens,
            window,
            compressed,
        })
    }
}
