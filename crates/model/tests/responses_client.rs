//! The Responses client against a local mock server playing recorded objects and streams
//! (written in the documented shapes, in `ba-protocol`'s `tests/data/responses/`).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use ba_model::{
    ApiKey, HttpConfig, ModelClient, ModelError, ModelRequest, ResponsesClient, RetryPolicy,
    StopReason, StreamDelta,
};
use ba_protocol::convert::{SequentialStamp, reasoning_of};
use ba_protocol::{ContentBlock, LogEntry, LogRole, ToolSpec};
use ba_testkit::{End, MockServer, Reply};
use serde_json::{Value, json};

fn data(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../protocol/tests/data/responses")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn client(server: &MockServer) -> ResponsesClient {
    ResponsesClient::new(Some(ApiKey::new("sk-test")))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
        .with_http(
            HttpConfig::default().with_retry(
                RetryPolicy::default()
                    .with_base_delay(Duration::from_millis(50))
                    .with_jitter(0.0),
            ),
        )
}

fn request(stream: bool) -> ModelRequest {
    ModelRequest::new(
        "gpt-5",
        vec![
            LogEntry::new("u1", LogRole::User, "t")
                .with_text("Compare Q3 revenue of EMEA and APAC."),
        ],
    )
    .with_tools(vec![ToolSpec::new(
        "query_database",
        "Run a read-only SQL query.",
        json!({"type": "object"}),
    )])
    .with_stream(stream)
}

#[tokio::test]
async fn a_streamed_and_a_whole_answer_give_the_same_response() {
    let whole = MockServer::start(vec![Reply::json(
        200,
        &data("response-parallel-calls.json"),
    )])
    .await;
    let streamed = MockServer::start(vec![Reply::sse(
        &data("stream-parallel-calls.sse"),
        97,
        End::Close,
    )])
    .await;
    let a = client(&whole).complete(&request(false)).await.unwrap();
    let mut deltas = Vec::new();
    let b = client(&streamed)
        .complete_streaming(&request(true), &mut |d| deltas.push(d))
        .await
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (
            a.usage.input_tokens,
            a.usage.cache_read_tokens,
            a.usage.output_tokens
        ),
        (294, 1536, 412)
    );
    let calls: Vec<(String, Value)> = a
        .message
        .tool_uses()
        .map(|u| (u.id.clone(), u.input.clone()))
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].0, "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r");
    // The deltas: thinking, text, two calls announced with their call ids, their arguments in
    // pieces that add up.
    let started: Vec<&str> = deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::ToolCallStarted { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [
            "call_Qm2x7Jf1sT9bV4nL8pR3wK6y",
            "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r"
        ]
    );
    let args: String = deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::ToolInput {
                index: 3,
                partial_json,
            } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), calls[1].1);
    assert!(
        deltas
            .iter()
            .any(|d| matches!(d, StreamDelta::Thinking { index: 0, .. }))
    );
    // Into the log: the reasoning item, encrypted content and all, rides in the thinking block.
    let entries = a.to_log_entries(&mut SequentialStamp::default()).unwrap();
    let ba_protocol::Content::Blocks(blocks) = entries[0].content.as_ref().unwrap() else {
        panic!()
    };
    let ContentBlock::Thinking(t) = &blocks[0] else {
        panic!("{blocks:?}")
    };
    assert!(reasoning_of(t).unwrap().encrypted_content.is_some());
    // The request: store off, the call went to /responses with the key.
    let sent = &whole.received()[0];
    assert_eq!(sent.path, "/responses");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.body["store"], false);
}

#[tokio::test]
async fn a_refusal_stops_with_refusal() {
    let server = MockServer::start(vec![Reply::sse(
        &data("stream-refusal.sse"),
        64,
        End::Close,
    )])
    .await;
    let r = client(&server).complete(&request(true)).await.unwrap();
    assert_eq!(r.stop_reason, StopReason::Refusal);
    assert!(
        r.message.text().starts_with("I can't help"),
        "{:?}",
        r.message
    );
}

#[tokio::test]
async fn a_cut_stream_is_reported_with_the_call_it_cut() {
    let text = data("stream-parallel-calls.sse");
    let at = text.find("\"output_index\": 3, \"delta\"").unwrap();
    let cut = at + text[at..].find("\n\n").unwrap() + 2;
    let server = MockServer::start(vec![Reply::sse(&text[..cut], 64, End::Close)]).await;
    let err = client(&server).complete(&request(true)).await.unwrap_err();
    assert!(matches!(err, ModelError::StreamCut { .. }), "{err}");
    let partial = err.partial_output().unwrap();
    assert_eq!(partial.text, "I'll pull both regions' Q3 revenue.");
    assert_eq!(partial.cut_tool_calls.len(), 1);
    assert_eq!(
        partial.cut_tool_calls[0].id,
        "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r"
    );
}

#[tokio::test]
async fn a_failed_response_and_an_error_event_are_errors() {
    let failed = json!({"id": "resp_1", "object": "response", "status": "failed", "output": [],
        "error": {"code": "server_error", "message": "The model failed."}});
    let server = MockServer::start(vec![Reply::json(200, &failed.to_string())]).await;
    let err = client(&server).complete(&request(false)).await.unwrap_err();
    assert!(err.to_string().contains("The model failed."), "{err}");
    let events = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_2\",\"status\":\"in_progress\",\"output\":[]}}\n\nevent: error\ndata: {\"type\":\"error\",\"sequence_number\":1,\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down.\",\"param\":null}\n\n";
    let server = MockServer::start(vec![Reply::sse(events, 40, End::Close)]).await;
    let err = client(&server).complete(&request(true)).await.unwrap_err();
    assert!(
        err.to_string().contains("rate_limit_exceeded: Slow down."),
        "{err}"
    );
}

/// The first events of an answer with one message, streaming.
fn head() -> String {
    let text = data("stream-refusal.sse");
    // response.created and response.in_progress.
    let second = text.match_indices("\n\n").nth(1).unwrap().0 + 2;
    text[..second].to_owned()
        + "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n"
}

#[tokio::test]
async fn the_shared_bounds_and_retries_hold() {
    // A rate limit, then the answer: retried after the wait the server asked for.
    let server = MockServer::start(vec![
        Reply::json(429, r#"{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":null}}"#)
            .header("retry-after", "0"),
        Reply::json(200, &data("response-refusal.json")),
    ])
    .await;
    let r = client(&server).complete(&request(false)).await.unwrap();
    assert_eq!(r.retries, 1);
    assert_eq!(server.received()[0].body, server.received()[1].body);

    // A message that never ends: the answer's size bound ends it, with what came.
    let delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\""
        .to_owned()
        + &"x".repeat(16 * 1024)
        + "\"}\n\n";
    let mut endless = Reply::sse(&head(), usize::MAX, End::Endless { pause_ms: 0 });
    endless.pieces.push(delta.into_bytes());
    let server = MockServer::start(vec![endless]).await;
    let bounded = client(&server).with_http(
        HttpConfig::default()
            .with_max_response_bytes(2 * 1024 * 1024)
            .with_retry(RetryPolicy::default().with_max_retries(0)),
    );
    let err = bounded.complete(&request(true)).await.unwrap_err();
    match &err {
        ModelError::TooLarge { partial, .. } => {
            assert!(partial.text.len() > 1024 * 1024, "{}", partial.text.len());
        }
        other => panic!("{other:?}"),
    }

    // Silence after the first events: the idle timeout.
    let server = MockServer::start(vec![Reply::sse(&head(), usize::MAX, End::Hang)]).await;
    let idle = client(&server).with_http(
        HttpConfig::default()
            .with_idle_timeout(Duration::from_millis(300))
            .with_retry(RetryPolicy::default().with_max_retries(0)),
    );
    let started = std::time::Instant::now();
    let err = idle.complete(&request(true)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                phase: ba_model::TimeoutPhase::StreamIdle,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_server_that_answers_a_stream_request_with_one_json_body_is_read_whole() {
    let server = MockServer::start(vec![Reply::json(
        200,
        &data("response-parallel-calls.json"),
    )])
    .await;
    let mut deltas = Vec::new();
    let r = client(&server)
        .complete_streaming(&request(true), &mut |d| deltas.push(d))
        .await
        .unwrap();
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.message.tool_uses().count(), 2);
    assert!(deltas.is_empty(), "no stream, no deltas");
    assert_eq!(server.received()[0].body["stream"], true);
}

/// Every place `body` breaks OpenAI's published schema of a Responses request
/// (`CreateResponse`, in the shared fixtures), as `path: error` lines; `None` (a skip, or a
/// failure under CI) when the fixtures are missing.
fn create_response_errors(bodies: &[(String, Value)]) -> Option<Vec<String>> {
    let schema = ba_testkit::openai_responses_schema("CreateResponse")?;
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut errors = Vec::new();
    for (name, body) in bodies {
        for e in validator.iter_errors(body) {
            let text: String = e.to_string().chars().take(200).collect();
            errors.push(format!("{name} {}: {text}", e.instance_path()));
        }
    }
    Some(errors)
}

#[tokio::test]
async fn every_request_body_the_client_writes_meets_the_published_schema() {
    let server = MockServer::start(vec![Reply::json(
        200,
        &data("response-parallel-calls.json"),
    )])
    .await;
    let client = client(&server);
    // A conversation the API answered (reasoning, text, two calls), its results, and the next
    // question: the answer goes back as the log kept it.
    let answer = client.complete(&request(false)).await.unwrap();
    let mut stamp = SequentialStamp::new("e", "2025-03-01T10:00:00Z");
    let mut entries = request(false).entries;
    entries.extend(answer.to_log_entries(&mut stamp).unwrap());
    for call in answer.message.tool_uses() {
        let mut result =
            LogEntry::new(format!("r-{}", call.id), LogRole::Tool, "t").with_text("[[1200.5]]");
        result.tool_call_id = Some(call.id.clone());
        entries.push(result);
    }
    entries.push(LogEntry::new("u2", LogRole::User, "t").with_text("And for LATAM?"));
    let follow_up = ModelRequest::new("gpt-5", entries)
        .with_system("You are a business analyst.")
        .with_tools(request(false).tools)
        .with_thinking_budget(4000)
        .with_stream(true);
    let mut bodies = vec![("follow-up".to_owned(), client.request_body(&follow_up))];
    // A conversation that came from Anthropic: its assistant turns have no ids to send.
    let mut stamp = SequentialStamp::new("a", "2025-03-01T10:00:00Z");
    let anthropic = ba_protocol::anthropic::AnthropicRequest::from_json_value(json!({
        "system": "You are a business analyst.",
        "messages": [
            {"role": "user", "content": "Total sales in March?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Querying the database."},
                {"type": "tool_use", "id": "toolu_1", "name": "query_database",
                 "input": {"sql": "SELECT SUM(amount) FROM sales"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[[48210.5]]"}]},
            {"role": "assistant", "content": "March sales were 48,210.50."},
            {"role": "user", "content": "And April?"}
        ]
    }))
    .unwrap();
    let entries = ba_protocol::convert::anthropic_to_log(&anthropic, &mut stamp)
        .unwrap()
        .value;
    let body = client.request_body(&ModelRequest::new("gpt-5", entries));
    let assistant: Vec<&Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "assistant")
        .collect();
    assert_eq!(
        assistant,
        [
            &json!({"type": "message", "role": "assistant", "content": "Querying the database."}),
            &json!({"type": "message", "role": "assistant", "content": "March sales were 48,210.50."})
        ]
    );
    bodies.push(("from-anthropic".to_owned(), body));
    // Claude Code sessions of the shared fixtures.
    for name in ["short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"] {
        let Some(path) = ba_testkit::fixture(&format!("transcripts/spotter/{name}")) else {
            return;
        };
        let text = std::fs::read_to_string(path).unwrap();
        let entries = ba_protocol::claude_code::session_to_log(&text).value;
        bodies.push((
            name.to_owned(),
            client.request_body(&ModelRequest::new("gpt-5", entries)),
        ));
    }
    let Some(errors) = create_response_errors(&bodies) else {
        return;
    };
    assert!(
        errors.is_empty(),
        "{} error(s): {:#?}",
        errors.len(),
        &errors[..errors.len().min(8)]
    );
}
