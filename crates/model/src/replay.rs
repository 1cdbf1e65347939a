//! A client that plays a recorded session: no network, no key, the same answers every time.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ba_protocol::ApproxCounter;
use ba_protocol::{ContentBlock, LlmError, LogRole, Message, TokenCounter};
use serde::{Deserialize, Serialize};

use super::error::ModelError;
use super::{DeltaSink, ModelClient, ModelRequest, ModelResponse, StopReason, StreamDelta};
use ba_protocol::Usage;

/// What a recorded turn expects of the request: the last user or tool entry sent. Fields left
/// out are not checked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExpectedRequest {
    /// Role of the last user or tool entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<LogRole>,
    /// Its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The call it answers, for a tool entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ExpectedRequest {
    /// The summary of `request`: its last user or tool entry that goes to the model.
    pub fn of(request: &ModelRequest) -> Self {
        request
            .entries
            .iter()
            .rev()
            .filter(|e| e.include_in_context)
            .find(|e| matches!(e.role, LogRole::User | LogRole::Tool))
            .map(|e| Self {
                role: Some(e.role),
                text: Some(e.text().into_owned()),
                tool_call_id: e.tool_call_id.clone(),
            })
            .unwrap_or_default()
    }

    /// `None` when `found` matches every field given here; otherwise what differs, in words.
    fn mismatch(&self, found: &Self) -> Option<(String, String)> {
        if self.role.is_some() && self.role != found.role {
            return Some((
                format!("the last entry to be a {} entry", role_name(self.role)),
                format!("a {} entry", role_name(found.role)),
            ));
        }
        if self.tool_call_id.is_some() && self.tool_call_id != found.tool_call_id {
            return Some((
                format!(
                    "a result of call {:?}",
                    self.tool_call_id.as_deref().unwrap_or("")
                ),
                format!(
                    "a result of call {:?}",
                    found.tool_call_id.as_deref().unwrap_or("")
                ),
            ));
        }
        if let Some(text) = &self.text
            && Some(text) != found.text.as_ref()
        {
            return Some((
                format!("text {:?}", clip(text)),
                format!("text {:?}", clip(found.text.as_deref().unwrap_or(""))),
            ));
        }
        None
    }
}

fn role_name(role: Option<LogRole>) -> &'static str {
    role.map_or("(none)", LogRole::as_str)
}

fn clip(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A recorded answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedResponse {
    /// The assistant message.
    pub message: Message,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Token figures.
    #[serde(default)]
    pub usage: Usage,
    /// The provider's id.
    #[serde(default)]
    pub id: String,
    /// The model name.
    #[serde(default)]
    pub model: String,
}

/// What a recorded turn gives back: an answer, or a failure as the log recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayOutcome {
    /// An answer.
    Response(RecordedResponse),
    /// A failure (kind, message, partial output).
    Error(LlmError),
}

/// One model turn of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayTurn {
    /// What the request must look like.
    #[serde(default)]
    pub expect: ExpectedRequest,
    /// What to give back.
    #[serde(flatten)]
    pub outcome: ReplayOutcome,
}

impl ReplayTurn {
    /// Records a live call: the request's summary and its answer or failure.
    pub fn record(request: &ModelRequest, result: &Result<ModelResponse, ModelError>) -> Self {
        let outcome = match result {
            Ok(r) => ReplayOutcome::Response(RecordedResponse {
                message: r.message.clone(),
                stop_reason: r.stop_reason.clone(),
                usage: r.usage,
                id: r.id.clone(),
                model: r.model.clone(),
            }),
            Err(e) => ReplayOutcome::Error(e.to_llm_error()),
        };
        Self {
            expect: ExpectedRequest::of(request),
            outcome,
        }
    }
}

/// Plays a recording (a JSON list of [`ReplayTurn`]s) turn by turn. A request that does not
/// match its turn's expectation fails with [`ModelError::ReplayDiverged`] naming the turn; a
/// request past the end fails with [`ModelError::ReplayExhausted`]. A turn recorded without
/// token figures reports the request and the answer as counted by the client's
/// [`TokenCounter`] (set with [`ReplayClient::with_token_counter`]; a rough four-bytes-a-token
/// estimate otherwise).
pub struct ReplayClient {
    turns: Vec<ReplayTurn>,
    next: Mutex<usize>,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for ReplayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayClient")
            .field("turns", &self.turns.len())
            .field("played", &self.played())
            .field("counter", &self.counter.name())
            .finish()
    }
}

impl ReplayClient {
    /// A client over these turns.
    pub fn new(turns: Vec<ReplayTurn>) -> Self {
        Self {
            turns,
            next: Mutex::new(0),
            counter: Arc::new(ApproxCounter),
        }
    }

    /// The counter that estimates the usage of turns recorded without token figures (an exact
    /// tiktoken encoding from `ba-context`, say).
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// Reads a recording from JSON text; `source` names it in errors.
    pub fn from_json(text: &str, source: &str) -> Result<Self, ModelError> {
        let turns: Vec<ReplayTurn> =
            serde_json::from_str(text).map_err(|e| ModelError::ReplayFile {
                path: source.to_owned(),
                message: format!("line {}, column {}: {e}", e.line(), e.column()),
            })?;
        Ok(Self::new(turns))
    }

    /// Reads a recording file.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::ReplayFile {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// The same client with its first `played` turns marked as played: for a conversation
    /// resumed from a log that already holds their answers.
    pub fn with_played(self, played: usize) -> Self {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = played.min(self.turns.len());
        self
    }

    /// The turns of the recording.
    pub fn turns(&self) -> &[ReplayTurn] {
        &self.turns
    }

    /// How many turns have been played.
    pub fn played(&self) -> usize {
        *self.next.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next turn's index, advanced only when the request matches it.
    fn take_turn(&self, request: &ModelRequest) -> Result<(usize, &ReplayTurn), ModelError> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let index = *next;
        let turn = self.turns.get(index).ok_or(ModelError::ReplayExhausted {
            turns: self.turns.len(),
        })?;
        if let Some((expected, found)) = turn.expect.mismatch(&ExpectedRequest::of(request)) {
            return Err(ModelError::ReplayDiverged {
                turn: index + 1,
                expected,
                found,
            });
        }
        *next += 1;
        Ok((index, turn))
    }
}

#[async_trait]
impl ModelClient for ReplayClient {
    fn provider(&self) -> &str {
        "replay"
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let (index, turn) = self.take_turn(request)?;
        let recorded = match &turn.outcome {
            ReplayOutcome::Response(r) => r,
            ReplayOutcome::Error(error) => {
                return Err(ModelError::Replayed {
                    turn: index + 1,
                    error: error.clone(),
                });
            }
        };
        if request.stream {
            for (index, block) in recorded.message.content.iter().enumerate() {
                for delta in deltas_of(index, block) {
                    on_delta(delta);
                }
            }
        }
        let usage = if recorded.usage == Usage::default() {
            super::estimated_usage(&*self.counter, request, &recorded.message)
        } else {
            recorded.usage
        };
        Ok(ModelResponse {
            message: recorded.message.clone(),
            stop_reason: recorded.stop_reason.clone(),
            usage,
            id: recorded.id.clone(),
            model: recorded.model.clone(),
            retries: 0,
            problems: Vec::new(),
        })
    }
}

/// The deltas a stream of `block` would have carried, one of each kind.
fn deltas_of(index: usize, block: &ContentBlock) -> Vec<StreamDelta> {
    match block {
        ContentBlock::Text(t) => vec![StreamDelta::Text {
            index,
            text: t.text.clone(),
        }],
        ContentBlock::Thinking(t) => vec![StreamDelta::Thinking {
            index,
            text: t.thinking.clone(),
        }],
        ContentBlock::ToolUse(u) => vec![
            StreamDelta::ToolCallStarted {
                index,
                id: u.id.clone(),
                name: u.name.clone(),
            },
            StreamDelta::ToolInput {
                index,
                partial_json: u.input.to_string(),
            },
        ],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{LlmErrorKind, LogEntry};

    const RECORDING: &str = r#"[
      {"expect": {"role": "user", "text": "Total sales?"},
       "response": {"message": {"role": "assistant", "content": [
          {"type": "text", "text": "Querying."},
          {"type": "tool_use", "id": "toolu_1", "name": "query_database", "input": {"sql": "SELECT 1"}}]},
        "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5,
        "cache_read_tokens": 0, "cache_write_tokens": 0}, "id": "msg_1", "model": "m"}},
      {"expect": {"role": "tool", "tool_call_id": "toolu_1"},
       "response": {"message": {"role": "assistant", "content": "Sales were 42."},
        "stop_reason": "end_turn"}}
    ]"#;

    fn user(text: &str) -> LogEntry {
        LogEntry::new("u", LogRole::User, "t").with_text(text)
    }

    fn tool_result(call: &str) -> LogEntry {
        let mut e = LogEntry::new("r", LogRole::Tool, "t").with_text("42");
        e.tool_call_id = Some(call.to_owned());
        e
    }

    #[tokio::test]
    async fn plays_turns_in_order_with_deltas() {
        let client = ReplayClient::from_json(RECORDING, "inline").unwrap();
        let mut deltas = Vec::new();
        let first = client
            .complete_streaming(
                &ModelRequest::new("m", vec![user("Total sales?")]).with_stream(true),
                &mut |d| deltas.push(d),
            )
            .await
            .unwrap();
        assert_eq!(first.stop_reason, StopReason::ToolUse);
        assert_eq!(first.usage.input_tokens, 10);
        assert_eq!(deltas.len(), 3);
        assert!(
            matches!(&deltas[1], StreamDelta::ToolCallStarted { name, .. } if name == "query_database")
        );
        let second = client
            .complete(&ModelRequest::new(
                "m",
                vec![user("Total sales?"), tool_result("toolu_1")],
            ))
            .await
            .unwrap();
        assert_eq!(second.message.text(), "Sales were 42.");
        assert_eq!(client.played(), 2);
        let err = client
            .complete(&ModelRequest::new("m", vec![user("again")]))
            .await
            .unwrap_err();
        assert!(matches!(err, ModelError::ReplayExhausted { turns: 2 }));
    }

    #[tokio::test]
    async fn divergence_names_the_turn_and_what_differs() {
        let client = ReplayClient::from_json(RECORDING, "inline").unwrap();
        client
            .complete(&ModelRequest::new("m", vec![user("Total sales?")]))
            .await
            .unwrap();
        let err = client
            .complete(&ModelRequest::new(
                "m",
                vec![user("Total sales?"), tool_result("toolu_9")],
            ))
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ModelError::ReplayDiverged { turn: 2, .. }),
            "{text}"
        );
        assert!(
            text.contains("toolu_1") && text.contains("toolu_9"),
            "{text}"
        );
        assert_eq!(client.played(), 1, "a diverged turn is not consumed");
    }

    #[tokio::test]
    async fn recorded_failures_replay_as_errors_and_records_round_trip() {
        let request = ModelRequest::new("m", vec![user("hi")]);
        let failure: Result<ModelResponse, ModelError> = Err(ModelError::StreamCut {
            provider: "anthropic".into(),
            message: "cut".into(),
            partial: Box::new(crate::PartialOutput {
                text: "Half an ans".into(),
                ..Default::default()
            }),
        });
        let turn = ReplayTurn::record(&request, &failure);
        let json = serde_json::to_string(&vec![turn]).unwrap();
        let client = ReplayClient::from_json(&json, "inline").unwrap();
        let err = client.complete(&request).await.unwrap_err();
        assert_eq!(err.kind(), LlmErrorKind::StreamCut);
        assert_eq!(
            err.to_llm_error().partial_output.as_deref(),
            Some("Half an ans")
        );
    }

    #[test]
    fn bad_recording_names_the_source_and_position() {
        let err = ReplayClient::from_json("[{\"expect\": {}}]", "demo.json").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("demo.json") && text.contains("line 1"),
            "{text}"
        );
    }
}
