//! The window a conversation's requests are sized to, in the server's tokens, and the budget
//! that keeps them inside it in the local count.
//!
//! The window is the configured one (or the one the server said it serves) until a server
//! refuses a request as too long and names its size: that size is appended to the log as a
//! [`WindowRecord`] and kept for the conversation. The local counter (cl100k, o200k) and the
//! server's tokenizer differ by tens of percent on the same text, so the budget is calibrated:
//! the prompt tokens the server reported for the latest calls of the model, over what the
//! window counted locally for them (both are in the log), with a margin on top.
//!
//! [`Builders`] holds the agent's window builders: the one of the configured budget and those
//! of the budgets a conversation's learned window or calibration gives, each with its token
//! cache.

use std::sync::{Arc, Mutex, PoisonError};

use ba_context::{
    BuilderSettings, ContextBudget, ContextBuilder, Embedder, MessageCounter, ModelTokenizer,
    Pipeline, RetrievalStrategy, Summarizer,
};
use ba_protocol::{LogEntry, WindowRecord};
use serde::Serialize;

use crate::prompts::Prompts;

/// The latest calls of a model that calibrate the count.
const CALIBRATION_CALLS: usize = 8;
/// Kept below the window beyond the calibration: the ratio moves from call to call.
const CALIBRATION_MARGIN: f64 = 0.05;
/// Ratios outside these bounds are taken as a misreading (a server that counted something
/// else), not as a tokenizer's difference.
const RATIO_BOUNDS: (f64, f64) = (0.25, 4.0);
/// Budgets whose builders are kept (each with its own token cache).
const KEPT_BUILDERS: usize = 4;

/// How a model's server counts a request against the local count, from the log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// The model, as its server named it.
    pub model: String,
    /// Server tokens per local token over the calls.
    pub ratio: f64,
    /// The calls it was measured on.
    pub calls: usize,
    /// Whether the server's prompt tokens hold the tool definitions. A server whose chat
    /// template has no place for tools (llama.cpp's without `--jinja`, say) drops them from
    /// the prompt, and they take none of its window.
    pub tools_counted: bool,
}

/// The calibration of the model of the latest answered call: its server's prompt tokens over
/// the window's local count, summed over its latest calls whose usage the server reported.
/// See `calibration_with_tools`.
pub fn calibration(log: &[LogEntry]) -> Option<Calibration> {
    calibration_with_tools(log, 0)
}

/// [`calibration`], with `tool_tokens` (the local count of the tool definitions sent with each
/// call) standing for the definitions of calls whose record left them out of `used` (logs
/// written before they were counted).
///
/// The server counts the definitions where its prompt holds them, and not at all where its
/// template drops them; the prompt tokens it reports say which. Of the two readings — the
/// ratio over everything sent and the ratio over the system prompt and messages alone — the
/// one nearer to 1 is taken: two tokenizers differ by tens of percent, while definitions a
/// server drops (or counts) move the ratio by their whole share of the request.
pub(crate) fn calibration_with_tools(log: &[LogEntry], tool_tokens: usize) -> Option<Calibration> {
    let answered = |e: &&LogEntry| {
        let r = &e.records;
        let reported = r
            .usage
            .is_some_and(|u| !u.estimated && u.prompt_tokens() > 0);
        let counted = r.context.as_ref().is_some_and(|c| c.used > 0);
        reported && counted && r.model.as_ref().is_some_and(|m| m.name.is_some())
    };
    let model = log
        .iter()
        .rev()
        .find(answered)
        .and_then(|e| e.records.model.as_ref())
        .and_then(|m| m.name.clone())?;
    let (mut server, mut with_tools, mut without, mut calls) = (0u64, 0u64, 0u64, 0usize);
    for e in log.iter().rev().filter(answered) {
        if e.records.model.as_ref().and_then(|m| m.name.as_deref()) != Some(model.as_str()) {
            continue;
        }
        let Some(c) = e.records.context.as_ref() else {
            continue;
        };
        server += e.records.usage.map_or(0, |u| u.prompt_tokens());
        let (sent, tools) = if c.tool_tokens == 0 {
            (c.used + tool_tokens, tool_tokens)
        } else {
            (c.used, c.tool_tokens)
        };
        with_tools += sent as u64;
        without += sent.saturating_sub(tools).max(1) as u64;
        calls += 1;
        if calls == CALIBRATION_CALLS {
            break;
        }
    }
    let (all, bare) = (
        server as f64 / with_tools as f64,
        server as f64 / without as f64,
    );
    let tools_counted = all.ln().abs() <= bare.ln().abs();
    let ratio = if tools_counted { all } else { bare };
    (RATIO_BOUNDS.0..=RATIO_BOUNDS.1)
        .contains(&ratio)
        .then_some(Calibration {
            model,
            ratio,
            calls,
            tools_counted,
        })
}

/// How the next request is sized, from one reading of the calibration (it sums the latest
/// calls of the log, and a build asks for both answers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sizing {
    /// The budget, in the local count.
    pub(crate) budget: ContextBudget,
    /// Whether the window makes room for the tool definitions: yes unless the calibration
    /// found the server leaves them out of its prompt.
    pub(crate) tools_take_room: bool,
}

/// The sizing of the next request: see [`budget_for`] and [`Sizing::tools_take_room`].
pub(crate) fn sizing(base: ContextBudget, log: &[LogEntry], tool_tokens: usize) -> Sizing {
    let calibration = calibration_with_tools(log, tool_tokens);
    Sizing {
        budget: budget_with(base, log, calibration.as_ref()),
        tools_take_room: calibration.is_none_or(|c| c.tools_counted),
    }
}

/// The last window the log keeps for the conversation.
pub fn window_record(log: &[LogEntry]) -> Option<&WindowRecord> {
    log.iter().rev().find_map(|e| e.records.window.as_ref())
}

/// The budget of the next request, in the local count: the window (the log's, or the
/// configured `base`), shrunk (or grown) by the calibration.
pub(crate) fn budget_for(
    base: ContextBudget,
    log: &[LogEntry],
    tool_tokens: usize,
) -> ContextBudget {
    budget_with(base, log, calibration_with_tools(log, tool_tokens).as_ref())
}

/// [`budget_for`] with the calibration read already.
fn budget_with(
    base: ContextBudget,
    log: &[LogEntry],
    calibration: Option<&Calibration>,
) -> ContextBudget {
    let (total, reserve) = match window_record(log) {
        Some(w) => {
            let total = usize::try_from(w.tokens).unwrap_or(usize::MAX);
            (total, base.reserved_for_response.min(total / 4))
        }
        None => (base.total, base.reserved_for_response),
    };
    let scale = calibration.map_or(1.0, |c| {
        // In steps of 1/64, so a ratio that wobbles does not make a new budget every call.
        (c.ratio * (1.0 + CALIBRATION_MARGIN) * 64.0).ceil() / 64.0
    });
    let local = |n: usize| (n as f64 / scale) as usize;
    ContextBudget::new(local(total), local(reserve)).with_thresholds(base.trigger, base.target)
}

/// The agent's window builders: one for the configured budget (the strategy's pipeline and the
/// one token cache), and those of the budgets a conversation's learned window or calibration
/// gives, made like it and kept for the next calls.
pub(crate) struct Builders {
    own: Arc<ContextBuilder>,
    kept: Mutex<Vec<(ContextBudget, Arc<ContextBuilder>)>>,
    prompts: Prompts,
    settings: BuilderSettings,
    strategy: Strategy,
    model: String,
}

/// The compression strategy of the windows: its name (one of [`ba_context::STRATEGY_NAMES`])
/// and what it is made with.
#[derive(Clone)]
pub(crate) struct Strategy {
    pub(crate) name: String,
    pub(crate) summarizer: Option<Arc<dyn Summarizer>>,
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    pub(crate) retrieval_share: f64,
}

impl Strategy {
    /// The pipeline of the strategy: `retrieval` takes its share and the embedder, the others
    /// are [`Pipeline::named`].
    fn pipeline(&self) -> Result<Pipeline, ba_context::ContextError> {
        if self.name == "retrieval" {
            let mut r = RetrievalStrategy::default().with_share(self.retrieval_share);
            if let Some(e) = &self.embedder {
                r = r.with_embedder(Arc::clone(e));
            }
            return Ok(Pipeline::new(vec![Box::new(r)]));
        }
        Pipeline::named(&self.name, self.summarizer.clone())
    }
}

impl Builders {
    /// The builders of windows by `strategy` in `budget`, counted with `model`'s tokenizer.
    pub(crate) fn new(
        prompts: Prompts,
        settings: BuilderSettings,
        budget: ContextBudget,
        strategy: Strategy,
        model: &str,
    ) -> Result<Self, ba_context::ContextError> {
        let pipeline = strategy.pipeline()?;
        let own = Arc::new(ContextBuilder::new(
            prompts.parts(),
            settings,
            budget,
            pipeline,
            MessageCounter::new(tokenizer_for(model)),
        ));
        Ok(Self {
            own,
            kept: Mutex::default(),
            prompts,
            settings,
            strategy,
            model: model.to_owned(),
        })
    }

    /// The token count every builder uses.
    pub(crate) fn counter(&self) -> &MessageCounter {
        self.own.counter()
    }

    /// The prompt texts the windows are built with.
    pub(crate) fn prompts(&self) -> &Prompts {
        &self.prompts
    }

    /// The builder of windows for `budget`: the configured one's, else one made like it (same
    /// prompts, strategy and tokenizer) and kept for the next calls.
    pub(crate) fn for_budget(&self, budget: ContextBudget) -> Arc<ContextBuilder> {
        if budget == self.own.budget {
            return Arc::clone(&self.own);
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, b)) = kept.iter().find(|(k, _)| *k == budget) {
            return Arc::clone(b);
        }
        // The strategy's name was checked when the first builder was made.
        let pipeline = self
            .strategy
            .pipeline()
            .unwrap_or_else(|_| Pipeline::new(Vec::new()));
        let builder = Arc::new(ContextBuilder::new(
            self.prompts.parts(),
            self.settings,
            budget,
            pipeline,
            MessageCounter::new(tokenizer_for(&self.model)),
        ));
        if kept.len() == KEPT_BUILDERS {
            kept.remove(0);
        }
        kept.push((budget, Arc::clone(&builder)));
        builder
    }

    /// The local count of tool definitions, as they are sent (their JSON).
    pub(crate) fn spec_tokens(&self, specs: &[ba_protocol::ToolSpec]) -> usize {
        let json = serde_json::to_string(specs).unwrap_or_default();
        self.counter().text(&json)
    }
}

/// The tokenizer of `model`; `cl100k_base` for a model the context crate does not know.
pub(crate) fn tokenizer_for(model: &str) -> ModelTokenizer {
    ModelTokenizer::for_model(model)
        .unwrap_or_else(|| ModelTokenizer::exact(ba_context::Encoding::Cl100kBase))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::new_id;
    use ba_protocol::LogRole;
    use ba_protocol::{ContextRecord, ModelRecord, Usage};

    fn answered(server: u64, local: usize, model: &str, estimated: bool) -> LogEntry {
        let mut e = LogEntry::new(new_id(), LogRole::Assistant, "t").with_text("ok");
        e.records.usage = Some(Usage {
            input_tokens: server / 2,
            cache_read_tokens: server - server / 2,
            output_tokens: 5,
            estimated,
            ..Usage::default()
        });
        e.records.context = Some(ContextRecord {
            used: local,
            ..ContextRecord::default()
        });
        e.records.model = Some(ModelRecord {
            provider: "openai".into(),
            name: Some(model.into()),
        });
        e
    }

    #[test]
    fn the_calibration_is_the_latest_model_calls_server_count_over_the_local_one() {
        let log = vec![
            answered(9_000, 1_000, "other", false),
            answered(1_300, 1_000, "smollm2", false),
            answered(2_600, 2_000, "smollm2", false),
            // Estimated figures are the local count again: they calibrate nothing.
            answered(100, 2_000, "smollm2", true),
        ];
        let c = calibration(&log).unwrap();
        assert_eq!((c.model.as_str(), c.calls), ("smollm2", 2));
        assert!((c.ratio - 1.3).abs() < 1e-9, "{c:?}");
        assert!(calibration(&log[3..]).is_none());
    }

    #[test]
    fn the_budget_holds_the_window_in_the_servers_tokens() {
        let base = ContextBudget::new(200_000, 8_192);
        // No record and no calibration: the configured budget.
        assert_eq!(budget_for(base, &[], 0), base);
        let mut window = LogEntry::new("w", LogRole::System, "t");
        window.records.window = Some(WindowRecord {
            tokens: 4096,
            model: None,
            refused_tokens: Some(10_862),
            previous: Some(200_000),
        });
        let log = vec![window.clone()];
        let budget = budget_for(base, &log, 0);
        assert_eq!((budget.total, budget.reserved_for_response), (4096, 1024));
        // A server that counts 1.3 tokens for each local one: the local budget is smaller,
        // so a window counted locally at the budget is within the server's 4096.
        let log = vec![window, answered(1_300, 1_000, "smollm2", false)];
        let budget = budget_for(base, &log, 0);
        assert!(budget.total < 4096 * 100 / 130, "{budget:?}");
        assert!((budget.total as f64) * 1.3 > 4096.0 * 0.9, "{budget:?}");
    }

    #[test]
    fn the_tool_definitions_the_server_counts_do_not_shrink_the_messages_budget() {
        let base = ContextBudget::new(10_000, 1_000);
        // The server counted 2 300 tokens where the window counted 1 000 and the tool
        // definitions another 1 000: its tokenizer counts 1.15 of ours, not 2.3.
        let log = vec![answered(2_300, 1_000, "m", false)];
        let without = budget_for(base, &log, 0);
        let with = budget_for(base, &log, 1_000);
        assert!(without.total < 10_000 * 10 / 23, "{without:?}");
        assert!(with.total > 10_000 * 100 / 125, "{with:?}");
        assert!(with.total < 10_000 * 100 / 115, "{with:?}");
    }

    /// A call whose record counts `tools` tokens of definitions in its `local` tokens.
    fn answered_with_tools(server: u64, local: usize, tools: usize) -> LogEntry {
        let mut e = answered(server, local, "m", false);
        if let Some(c) = e.records.context.as_mut() {
            c.tool_tokens = tools;
        }
        e
    }

    #[test]
    fn a_server_that_drops_the_tool_definitions_is_calibrated_on_the_rest() {
        // 1 500 tokens sent, 1 200 of them definitions; the server read 340: its template
        // left the definitions out, and its tokenizer counts 1.13 of ours on the rest.
        let dropped = calibration(&[answered_with_tools(340, 1_500, 1_200)]).unwrap();
        assert!(!dropped.tools_counted);
        assert!((dropped.ratio - 340.0 / 300.0).abs() < 1e-9, "{dropped:?}");
        let base = ContextBudget::new(10_000, 1_000);
        let room = |log: &[LogEntry]| sizing(base, log, 1_200).tools_take_room;
        assert!(!room(&[answered_with_tools(340, 1_500, 1_200)]));
        // The same request where the server read 1 700: it counted the definitions.
        let counted = calibration(&[answered_with_tools(1_700, 1_500, 1_200)]).unwrap();
        assert!(counted.tools_counted);
        assert!(
            (counted.ratio - 1_700.0 / 1_500.0).abs() < 1e-9,
            "{counted:?}"
        );
        assert!(room(&[answered_with_tools(1_700, 1_500, 1_200)]));
        // Nothing to calibrate on: room is made.
        assert!(room(&[]));
    }
}
