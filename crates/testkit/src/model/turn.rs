//! What a rule answers: a [`Turn`] of the scripted model.

use serde_json::Value;

/// What the model answers: text (a final answer), tool calls, or both (text first); optionally
/// thinking before them. Or an HTTP error ([`Turn::fail`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub(super) thinking: Option<String>,
    pub(super) text: Option<String>,
    pub(super) calls: Vec<(String, Value)>,
    pub(super) usage: Option<(u64, u64)>,
    pub(super) cached_tokens: u64,
    pub(super) cache_write_tokens: u64,
    pub(super) stop_reason: Option<String>,
    pub(super) failure: Option<(u16, String)>,
    pub(super) held: bool,
}

impl Turn {
    fn empty() -> Self {
        Self {
            thinking: None,
            text: None,
            calls: Vec::new(),
            usage: None,
            cached_tokens: 0,
            cache_write_tokens: 0,
            stop_reason: None,
            failure: None,
            held: false,
        }
    }

    /// No reply at all: the connection is held open until the client closes it (a run
    /// cancelled or killed) or the server stops — a model call that is still under way for as
    /// long as the test needs one.
    pub fn hold() -> Self {
        Self {
            held: true,
            ..Self::empty()
        }
    }

    /// A text answer (stop reason `end_turn` / `stop`).
    pub fn text(text: impl Into<String>) -> Self {
        Self::empty().with_text(text)
    }

    /// One tool call (stop reason `tool_use` / `tool_calls`); its id is generated.
    pub fn call(name: impl Into<String>, input: Value) -> Self {
        Self::empty().with_call(name, input)
    }

    /// Tool calls, in order, each `(name, input)`; their ids are generated, unique on the
    /// server.
    pub fn calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self {
            calls: calls.into_iter().map(|(n, v)| (n.into(), v)).collect(),
            ..Self::empty()
        }
    }

    /// An HTTP error reply of this status, with the message in the wire's error shape
    /// (`{"type":"error","error":{…}}` on Anthropic's, `{"error":{…}}` on both OpenAI wires);
    /// the client's retry policy applies.
    pub fn fail(status: u16, message: impl Into<String>) -> Self {
        Self {
            failure: Some((status, message.into())),
            ..Self::empty()
        }
    }

    /// The same turn with this text (before its tool calls, if any).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// The same turn with one more tool call.
    pub fn with_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.calls.push((name.into(), input));
        self
    }

    /// The same turn with thinking before the rest (an Anthropic `thinking` block with a
    /// signature; `reasoning_content` on Chat Completions, as compatible servers send it; a
    /// `reasoning` item with the thinking as its summary and an `encrypted_content` on the
    /// Responses API).
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    /// The same turn with these token counts instead of the estimate (a quarter of the
    /// request body's bytes in, a quarter of the answer's out). The input count is of the
    /// tokens *not* read from the prompt cache (see [`Turn::with_cached_tokens`]).
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// The same turn with `n` input tokens served from the provider's prompt cache (0
    /// unless set). Each wire counts them its own way: Anthropic's
    /// `usage.cache_read_input_tokens = n` beside an `input_tokens` that leaves them out;
    /// Chat Completions' `usage.prompt_tokens_details.cached_tokens = n` and the Responses
    /// API's `usage.input_tokens_details.cached_tokens = n`, both included in the
    /// `prompt_tokens` / `input_tokens` beside them (the input count of the turn plus `n`).
    /// So one script reads the same through a client that normalises the wires: `n` cached,
    /// the turn's input count uncached.
    pub fn with_cached_tokens(mut self, n: u64) -> Self {
        self.cached_tokens = n;
        self
    }

    /// The same turn with `n` input tokens written to the provider's prompt cache (0 unless
    /// set): Anthropic's `usage.cache_creation_input_tokens = n`, beside an `input_tokens` that
    /// leaves them out. The OpenAI wires have no such figure and ignore it.
    pub fn with_cache_write_tokens(mut self, n: u64) -> Self {
        self.cache_write_tokens = n;
        self
    }

    /// The same turn with this stop reason as the wire spells it (`max_tokens`, `length`, …)
    /// instead of the one its content implies. The Responses API has no stop reason: there
    /// `max_tokens`, `length` or `max_output_tokens` make the response `incomplete` with
    /// `incomplete_details.reason` `max_output_tokens` (`content_filter` likewise with its own
    /// reason), and any other reason leaves it `completed`.
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }
}
