//! Anthropic context editing over a loopback server: the `context_management` body and the
//! beta header sent only with the option, another beta joined with a comma, and the edits the
//! API reports logged (from a JSON answer and from a stream's `message_delta`); server-side
//! compaction asked for, and the compaction block of its answer kept in the log and sent back
//! as it came.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ba_model::{
    AnthropicClient, ApiKey, ContextEditing, ModelClient, ModelRequest, ServerCompaction,
    StopReason,
};
use ba_protocol::{LogEntry, LogRole, Usage};
use ba_testkit::{Block, End, MockServer, Received, Reply, answer, event};
use serde_json::{Value, json};

fn request(stream: bool) -> ModelRequest {
    ModelRequest::new(
        "claude-test",
        vec![LogEntry::new("u1", LogRole::User, "2025-01-01T00:00:00Z").with_text("Hi")],
    )
    .with_thinking_budget(2048)
    .with_stream(stream)
}

fn client(server: &MockServer) -> AnthropicClient {
    AnthropicClient::new(ApiKey::new("sk-test"))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
}

fn json_answer(context_management: Option<Value>) -> Reply {
    let mut body = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-test", "content": [{"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 30, "output_tokens": 4}});
    if let Some(applied) = context_management {
        body["context_management"] = applied;
    }
    Reply::json(200, &body.to_string())
}

async fn one_call(client: AnthropicClient, server: &MockServer, stream: bool) -> Received {
    let response = client.complete(&request(stream)).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    server.received().remove(0)
}

#[tokio::test]
async fn without_the_option_no_body_field_and_no_beta_header() {
    let server = MockServer::start(vec![json_answer(None)]).await;
    let received = one_call(client(&server), &server, false).await;
    assert!(received.body.get("context_management").is_none());
    assert!(received.header("anthropic-beta").is_none());
}

#[tokio::test]
async fn the_option_sends_its_edits_and_the_beta() {
    let server = MockServer::start(vec![json_answer(None)]).await;
    let editing = ContextEditing::new()
        .with_trigger_tokens(50_000)
        .with_keep_tool_uses(4)
        .with_clear_at_least(10_000)
        .with_exclude_tools(["query_database"])
        .with_clear_tool_inputs(true)
        .with_keep_thinking_turns(2);
    let received = one_call(
        client(&server).with_context_editing(editing),
        &server,
        false,
    )
    .await;
    assert_eq!(
        received.body["context_management"],
        json!({"edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
            {"type": "clear_tool_uses_20250919",
             "trigger": {"type": "input_tokens", "value": 50000},
             "keep": {"type": "tool_uses", "value": 4},
             "clear_at_least": {"type": "input_tokens", "value": 10000},
             "exclude_tools": ["query_database"],
             "clear_tool_inputs": true},
        ]})
    );
    assert_eq!(
        received.header("anthropic-beta"),
        Some("context-management-2025-06-27")
    );
}

#[tokio::test]
async fn another_beta_is_joined_with_a_comma() {
    let server = MockServer::start(vec![json_answer(None), json_answer(None)]).await;
    let with_beta = client(&server).with_beta("interleaved-thinking-2025-05-14");
    with_beta.complete(&request(false)).await.unwrap();
    with_beta
        .with_context_editing(ContextEditing::new())
        .complete(&request(false))
        .await
        .unwrap();
    let received = server.received();
    assert_eq!(
        received[0].header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14")
    );
    assert!(received[0].body.get("context_management").is_none());
    assert_eq!(
        received[1].header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14,context-management-2025-06-27")
    );
    assert_eq!(
        received[1].body["context_management"],
        json!({"edits": [{"type": "clear_tool_uses_20250919"}]})
    );
}

/// The info events logged while a test runs, as their fields.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for Events {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::INFO
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(fields);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

fn cleared(events: &Events) -> Vec<(String, String, String)> {
    events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|f| f.contains_key("cleared_input_tokens"))
        .map(|f| {
            let field = |k: &str| f.get(k).cloned().unwrap_or_default();
            (
                field("edit"),
                field("cleared_tool_uses"),
                field("cleared_input_tokens"),
            )
        })
        .collect()
}

#[tokio::test]
async fn applied_edits_are_logged_from_answers_and_streams() {
    let applied = json!({"applied_edits": [{"type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 8, "cleared_input_tokens": 50000}]});
    // The stream carries them beside the delta of `message_delta`, as the API sends them.
    let mut stream = answer("msg_2", &[Block::Text("Hello.")], "end_turn", true);
    let stop = event("message_stop", json!({"type": "message_stop"}));
    stream.truncate(stream.len() - stop.len());
    let delta_at = stream.rfind("event: message_delta").unwrap();
    stream.truncate(delta_at);
    stream += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 42},
            "context_management": applied}),
    );
    stream += &stop;
    let server = MockServer::start(vec![
        json_answer(Some(applied.clone())),
        Reply::sse(&stream, 53, End::Close),
    ])
    .await;
    let events = Events::default();
    let _guard = tracing::subscriber::set_default(events.clone());
    let client = client(&server).with_context_editing(ContextEditing::new());
    let first = client.complete(&request(false)).await.unwrap();
    assert_eq!(first.message.text(), "Hello.");
    let logged = (
        "clear_tool_uses_20250919".to_owned(),
        "8".to_owned(),
        "50000".to_owned(),
    );
    assert_eq!(cleared(&events), std::slice::from_ref(&logged));
    let second = client.complete(&request(true)).await.unwrap();
    assert_eq!(second.message.text(), "Hello.");
    assert_eq!(
        second.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 42,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            estimated: false,
        }
    );
    assert_eq!(cleared(&events), [logged.clone(), logged]);
}

#[tokio::test]
async fn server_compaction_is_asked_for_and_its_block_goes_back_through_the_log() {
    let Some(path) = ba_testkit::fixture("wire/anthropic/streaming/compaction_response.txt") else {
        return;
    };
    let stream = std::fs::read_to_string(path).unwrap();
    let server = MockServer::start(vec![
        Reply::sse(&stream, 97, End::Complete),
        json_answer(None),
    ])
    .await;
    let editing = ContextEditing::new().with_compaction(
        ServerCompaction::new()
            .with_trigger_tokens(60_000)
            .with_instructions("Keep every figure with its label."),
    );
    let client = client(&server).with_context_editing(editing);
    let answer = client.complete(&request(true)).await.unwrap();
    // Compaction alone: its edit only (no tool-result clearing), its beta only.
    let first = server.received().remove(0);
    assert_eq!(
        first.body["context_management"],
        json!({"edits": [{"type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 60000},
            "instructions": "Keep every figure with its label."}]})
    );
    assert_eq!(first.header("anthropic-beta"), Some("compact-2026-01-12"));
    // The answer opens with the compaction block, kept in the log entry as it came — through
    // the log's JSON too.
    let mut stamp = ba_protocol::convert::SequentialStamp::new("a", "2025-01-01T00:00:01Z");
    let entry = answer.to_log_entries(&mut stamp).unwrap().pop().unwrap();
    let stored: LogEntry = serde_json::from_str(&serde_json::to_string(&entry).unwrap()).unwrap();
    assert_eq!(stored, entry);
    let block = json!({"type": "compaction", "content": "Earlier conversation summarized.",
        "encrypted_content": "EpwBCioIDxgCEAEYASJALd_opaque_compaction_payload"});
    let blocks = serde_json::to_value(&stored.content).unwrap();
    assert_eq!(blocks[0], block, "{blocks}");
    assert_eq!(stored.text(), "Hello there!");
    // The next request sends it back first in the assistant message, unchanged.
    let log = vec![
        LogEntry::new("u1", LogRole::User, "2025-01-01T00:00:00Z").with_text("Hi"),
        stored,
        LogEntry::new("u2", LogRole::User, "2025-01-01T00:00:02Z").with_text("And now?"),
    ];
    client
        .complete(&ModelRequest::new("claude-test", log))
        .await
        .unwrap();
    let second = server.received().remove(1);
    assert_eq!(second.body["messages"][1]["role"], json!("assistant"));
    assert_eq!(second.body["messages"][1]["content"][0], block);
    assert_eq!(second.header("anthropic-beta"), Some("compact-2026-01-12"));
}
