//! The request bodies the provider clients build from a log, snapshotted: what the model sees.

// The fixture builder is test code too: a broken fixture should stop the test loudly.
#![allow(clippy::unwrap_used)]

use ba_model::{AnthropicClient, ModelError, ModelRequest, OpenAiClient, PartialOutput};
use ba_protocol::ToolSpec;
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

/// Where the markers of an Anthropic body are: `(where, index)` for every `cache_control`.
fn breakpoints(body: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if t.get("cache_control").is_some() {
            out.push(format!("tools[{i}]"));
        }
    }
    for (i, b) in body["system"].as_array().into_iter().flatten().enumerate() {
        if b.get("cache_control").is_some() {
            out.push(format!("system[{i}]"));
        }
    }
    for (m, msg) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in msg["content"].as_array().into_iter().flatten().enumerate() {
            if block.get("cache_control").is_some() {
                out.push(format!("messages[{m}].content[{b}]"));
            }
        }
    }
    out
}

#[test]
fn anthropic_body_with_cache_breakpoints() {
    // The first four entries (system, question, answer with its call, result) are the stable
    // window; the failure and "continue" came after it. The system prompt is the log's system
    // entry (set again on the request, it would be sent twice).
    let request = resumed_conversation().with_cache(ba_model::CacheHint {
        stable_entries: 4,
        key: Some("conv-1".into()),
    });
    let body = AnthropicClient::request_body(&request);
    assert_eq!(
        breakpoints(&body),
        [
            "tools[0]",
            "system[0]",
            "messages[2].content[0]",
            "messages[4].content[0]"
        ],
        "{body:#}"
    );
    insta::assert_json_snapshot!(body);
    // Without a hint, nothing is marked.
    assert!(breakpoints(&AnthropicClient::request_body(&resumed_conversation())).is_empty());
}

#[test]
fn openai_bodies_carry_the_cache_key_to_openai_only() {
    let request = resumed_conversation().with_cache(ba_model::CacheHint {
        stable_entries: 4,
        key: Some("conv-1".into()),
    });
    let official = OpenAiClient::new(None).unwrap().request_body(&request);
    assert_eq!(official["prompt_cache_key"], "conv-1");
    let local = OpenAiClient::new(None)
        .unwrap()
        .with_base_url("http://127.0.0.1:8080/v1")
        .unwrap();
    assert!(
        local
            .request_body(&request)
            .get("prompt_cache_key")
            .is_none()
    );
    let forced = local.with_prompt_cache_key(true).request_body(&request);
    assert_eq!(forced["prompt_cache_key"], "conv-1");
}
