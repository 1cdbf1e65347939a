//! The request bodies the provider clients build from a log, snapshotted: what the model sees.

// The fixture builder is test code too: a broken fixture should stop the test loudly.
#![allow(clippy::unwrap_used)]

use ba_model::{AnthropicClient, ModelError, ModelRequest, OpenAiClient, PartialOutput, ToolSpec};
use ba_protocol::anthropic::AnthropicRequest;
use ba_protocol::convert::{SequentialStamp, anthropic_to_log};
use ba_protocol::{LlmErrorKind, LogEntry, LogRole};
use serde_json::json;

/// A log with a tool round, a stream cut recorded with its partial output, and the user's
/// "continue": the failure must reach the next request so the model can resume.
fn resumed_conversation() -> ModelRequest {
    let earlier = AnthropicRequest::from_json_value(json!({
        "system": "You are a business analyst.",
        "messages": [
            {"role": "user", "content": "Total sales in March?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Query the sales table.", "signature": "sig-1"},
                {"type": "text", "text": "Querying the database."},
                {"type": "tool_use", "id": "toolu_1", "name": "query_database",
                 "input": {"sql": "SELECT SUM(amount) FROM sales WHERE month = 3"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[[48210.5]]"}
            ]}
        ]
    }))
    .unwrap();
    let mut stamp = SequentialStamp::new("e", "2025-03-01T10:00:00Z");
    let mut entries = anthropic_to_log(&earlier, &mut stamp).unwrap().value;

    let cut = ModelError::StreamCut {
        provider: "anthropic".into(),
        message: "the stream ended without message_stop".into(),
        partial: Box::new(PartialOutput {
            text: "March sales were 48,210.50, up".into(),
            ..PartialOutput::default()
        }),
    };
    let entry = cut.to_log_entry("e9", "2025-03-01T10:00:05Z");
    assert_eq!(
        entry.llm_error.as_ref().map(|e| e.kind),
        Some(LlmErrorKind::StreamCut)
    );
    entries.push(entry);
    let mut hidden = LogEntry::new("e10", LogRole::User, "2025-03-01T10:00:06Z")
        .with_text("(UI notice: reconnecting)");
    hidden.include_in_context = false;
    entries.push(hidden);
    entries.push(LogEntry::new("e11", LogRole::User, "2025-03-01T10:00:07Z").with_text("continue"));

    ModelRequest::new("analyst-model", entries)
        .with_tools(vec![ToolSpec::new(
            "query_database",
            "Runs a read-only SQL query.",
            json!({"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}),
        )])
        .with_max_tokens(2048)
        .with_thinking_budget(1024)
        .with_stream(true)
}

#[test]
fn anthropic_body_of_a_resumed_conversation() {
    let body = AnthropicClient::request_body(&resumed_conversation());
    let text = body.to_string();
    assert!(text.contains("LLM_ERROR"), "{text}");
    assert_eq!(
        text.matches("48,210.50, up").count(),
        1,
        "partial output sent once"
    );
    assert!(
        !text.contains("reconnecting"),
        "hidden entries are not sent"
    );
    insta::assert_json_snapshot!(body);
}

#[test]
fn openai_body_of_a_resumed_conversation() {
    let client = OpenAiClient::new(None).unwrap();
    let body = client.request_body(&resumed_conversation().with_system("Answer in English."));
    let text = body.to_string();
    assert!(text.contains("LLM_ERROR"), "{text}");
    assert!(
        !text.contains("reconnecting"),
        "hidden entries are not sent"
    );
    insta::assert_json_snapshot!(body);
}
