//! Bad input is a typed error naming what is wrong, never a panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::LogEntry;
use ba_protocol::StructuredResponse;
use ba_protocol::anthropic::AnthropicRequest;
use ba_protocol::convert::{SequentialStamp, anthropic_to_log};
use ba_protocol::openai::ChatRequest;
use ba_protocol::{ContentBlock, ProtocolError};
use ba_protocol::{MAX_INPUT_BYTES, validate_log};

#[test]
fn truncated_json_names_the_position() {
    let err =
        AnthropicRequest::from_json(r#"{"messages":[{"role":"user","content":"hi"#).unwrap_err();
    let ProtocolError::Json {
        context,
        line,
        column,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(context, "Anthropic request");
    assert_eq!((*line, *column), (1, 41));
    assert!(
        err.to_string()
            .starts_with("Anthropic request: EOF while parsing"),
        "{err}"
    );
    let err = LogEntry::parse_jsonl(
        "{\"schema_version\":1,\"id\":\"a\",\"role\":\"user\",\"created_at\":\"t\"}\n{\"id\":",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("log line 2:"), "{err}");
}

#[test]
fn wrong_types_name_the_field() {
    let err = AnthropicRequest::from_json(r#"{"messages":[{"role":"user","content":[{"type":"tool_use","id":5,"name":"x","input":{}}]}]}"#)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "messages[0]: field `content`: [0]: `tool_use` block: field `id` must be a string, found a number"
    );
    let err =
        ChatRequest::from_json(r#"{"messages":[{"role":"wizard","content":"x"}]}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "messages[0]: field `role`: unknown role \"wizard\""
    );
    let err = ChatRequest::from_json(r#"{"messages":{"role":"user"}}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "messages: must be an array, found an object"
    );
    let err = LogEntry::from_json(
        r#"{"schema_version":1,"id":"a","role":"user","created_at":"t","duration_ms":"slow"}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("field `duration_ms` must be a non-negative integer, found a string"),
        "{err}"
    );
    let err = serde_json::from_str::<ContentBlock>("[1]").unwrap_err();
    assert!(
        err.to_string()
            .contains("a content block must be an object, found an array"),
        "{err}"
    );
    let err = StructuredResponse::parse(r#"{"task_analysis":"a","execution_plan":"b","current_round":1,"action":{"type":"complete"}}"#)
        .unwrap_err();
    assert_eq!(err.to_string(), "field `action.content`: is missing");
}

#[test]
fn tool_result_without_its_call() {
    let req = AnthropicRequest::from_json(
        r#"{"messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"42"}]}]}"#,
    )
    .expect("well-formed");
    let log = anthropic_to_log(&req, &mut SequentialStamp::default())
        .expect("converts")
        .value;
    let err = validate_log(&log).unwrap_err();
    assert_eq!(
        err.to_string(),
        "log[1].tool_call_id: tool result for `toolu_x` answers no earlier tool call"
    );
}

#[test]
fn empty_message_list() {
    let req = AnthropicRequest::from_json(r#"{"messages":[]}"#).expect("well-formed");
    let log = anthropic_to_log(&req, &mut SequentialStamp::default())
        .expect("converts")
        .value;
    assert_eq!(
        validate_log(&log).unwrap_err().to_string(),
        "messages: the conversation has no messages"
    );
    let err = AnthropicRequest::from_json("{}").unwrap_err();
    assert_eq!(err.to_string(), "messages: missing field `messages`");
}

#[test]
fn fifty_megabyte_string_is_refused_by_size() {
    let big = "x".repeat(50 * 1024 * 1024);
    let body = format!(r#"{{"messages":[{{"role":"user","content":"{big}"}}]}}"#);
    let err = AnthropicRequest::from_json(&body).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::TooLarge {
            context: "Anthropic request".into(),
            size: body.len(),
            limit: MAX_INPUT_BYTES
        }
    );
    assert!(
        err.to_string()
            .contains("is over the limit of 33554432 bytes")
    );
    let err = ChatRequest::from_json(&body).unwrap_err();
    assert!(matches!(err, ProtocolError::TooLarge { .. }));
    let line = format!(
        r#"{{"schema_version":1,"id":"a","role":"user","created_at":"t","content":"{big}"}}"#
    );
    assert!(matches!(
        LogEntry::parse_jsonl(&line).unwrap_err(),
        ProtocolError::TooLarge { .. }
    ));
}

#[test]
fn newer_schema_is_refused_and_legacy_is_migrated() {
    let err =
        LogEntry::from_json(r#"{"schema_version":99,"id":"a","role":"user","created_at":"t"}"#)
            .unwrap_err();
    assert!(
        err.to_string()
            .contains("schema version 99 is newer than the newest this build reads (2)"),
        "{err}"
    );
    // Version 0: the original camelCase message without a schema version.
    let legacy = LogEntry::from_json(
        r#"{"id":"m1","role":"tool","createdAt":"2026-02-05T10:00:00Z","content":"ok","toolName":"query_database","duration":12.6,"isCollapsed":true,"toolCallId":"c1"}"#,
    )
    .expect("migrates");
    assert_eq!(legacy.schema_version, ba_protocol::LOG_SCHEMA_VERSION);
    assert_eq!(legacy.created_at, "2026-02-05T10:00:00Z");
    assert_eq!(legacy.tool_name.as_deref(), Some("query_database"));
    assert_eq!(legacy.duration_ms, Some(13));
    assert_eq!(legacy.collapsed, Some(true));
    assert_eq!(legacy.tool_call_id.as_deref(), Some("c1"));
    assert!(
        legacy.include_in_context,
        "missing new fields take their defaults"
    );
    assert!(legacy.extra.is_empty());
}
