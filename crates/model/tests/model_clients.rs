//! The provider clients against a local mock server serving recorded exchanges.

// The helpers below are test code too: a broken fixture should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::panic)]

use ba_testkit as support;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use ba_model::{
    AnthropicClient, ApiKey, HttpConfig, ModelClient, ModelError, ModelRequest, ModelResponse,
    OpenAiClient, RetryPolicy, StopReason, StreamDelta, TimeoutPhase,
};
use ba_protocol::ToolSpec;
use ba_protocol::anthropic::{AnthropicMessage, AnthropicRequest, AnthropicResponse};
use ba_protocol::convert::{SequentialStamp, anthropic_to_log};
use ba_protocol::{JsonMap, LlmErrorKind, LogEntry};
use serde_json::{Value, json};
use support::{End, MockServer, Reply};
use tokio::time::Instant;

#[path = "model_clients/openai.rs"]
mod openai;

const KEY: &str = "sk-test-key-0123";

fn anthropic(server: &MockServer, config: HttpConfig) -> AnthropicClient {
    AnthropicClient::new(ApiKey::new(KEY))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
        .with_http(config)
}

fn openai(server: &MockServer, config: HttpConfig) -> OpenAiClient {
    OpenAiClient::new(Some(ApiKey::new(KEY)))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
        .with_http(config)
}

/// Quick, deterministic retries for tests.
/// Retries after 200 ms, doubling, no jitter. The timing tests below run on real time over
/// real loopback sockets (a paused clock would jump over a socket's wait to the next timer):
/// each checks that a wait was at least what the rule says — a timer never fires early — and
/// bounds it loosely above, so that a loaded machine, slower by ten, still passes.
fn config() -> HttpConfig {
    HttpConfig::default().with_retry(
        RetryPolicy::default()
            .with_base_delay(Duration::from_millis(200))
            .with_jitter(0.0),
    )
}

/// Far above any wait these tests expect: only a hang or a wait of the wrong order reaches it.
const LOOSE: Duration = Duration::from_secs(30);

/// A model request rebuilt from a recorded Anthropic request body.
fn request_from_anthropic_body(body: &Value) -> ModelRequest {
    let parsed = AnthropicRequest::from_json_value(body.clone()).unwrap();
    let entries = anthropic_to_log(&parsed, &mut SequentialStamp::default())
        .unwrap()
        .value;
    let mut request = ModelRequest::new(body["model"].as_str().unwrap(), entries)
        .with_max_tokens(body["max_tokens"].as_u64().unwrap() as u32)
        .with_stream(body["stream"] == json!(true));
    if let Some(tools) = body["tools"].as_array() {
        request.tools = tools
            .iter()
            .filter(|t| t.get("input_schema").is_some())
            .map(|t| {
                ToolSpec::new(
                    t["name"].as_str().unwrap(),
                    t["description"].as_str().unwrap_or_default(),
                    t["input_schema"].clone(),
                )
            })
            .collect();
    }
    request
}

/// Whether every tool is one a `ToolSpec` expresses: name, description and input schema only
/// (server tools such as web search, or `allowed_callers`, are beyond it).
fn all_plain_tools(body: &Value) -> bool {
    body["tools"].as_array().is_none_or(|tools| {
        tools.iter().all(|t| {
            t.as_object().is_some_and(|t| {
                t.contains_key("input_schema")
                    && t.keys()
                        .all(|k| ["name", "description", "input_schema"].contains(&k.as_str()))
            })
        })
    })
}

/// The reply a recorded response becomes: its status, its meaningful headers, its body.
fn reply_from_recording(response: &Value) -> Reply {
    let status = response["status_code"].as_u64().unwrap() as u16;
    let mut reply = match &response["body"] {
        Value::String(sse) => Reply::sse(sse, 97, End::Close),
        body => Reply::json(status, &body.to_string()),
    };
    reply.status = status;
    for name in ["retry-after", "x-should-retry", "request-id"] {
        if let Some(v) = response["headers"][name].as_str() {
            reply = reply.header(name, v);
        }
    }
    reply
}

fn tool_runner_files(fixtures: &std::path::Path) -> Vec<PathBuf> {
    let root = fixtures.join("wire/anthropic/tool-runner/test_runners");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            files.push(file.unwrap().path());
        }
    }
    files.sort();
    files
}

fn collect(deltas: &[StreamDelta]) -> (String, Vec<(String, String)>, String) {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut input = String::new();
    for d in deltas {
        match d {
            StreamDelta::Text { text: t, .. } => text.push_str(t),
            StreamDelta::ToolCallStarted { id, name, .. } => calls.push((id.clone(), name.clone())),
            StreamDelta::ToolInput { partial_json, .. } => input.push_str(partial_json),
            _ => {}
        }
    }
    (text, calls, input)
}

#[tokio::test]
async fn anthropic_replays_every_recorded_tool_runner_exchange() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let mut exchanges = 0;
    for file in tool_runner_files(&fixtures) {
        let recording: Value = serde_json::from_str(&support::read(&file)).unwrap();
        for (i, exchange) in recording.as_array().unwrap().iter().enumerate() {
            let at = format!("{} #{i}", file.display());
            let recorded_body = &exchange["request"]["body"];
            let server = MockServer::start(vec![reply_from_recording(&exchange["response"])]).await;
            let request = request_from_anthropic_body(recorded_body);
            let mut deltas = Vec::new();
            let result = anthropic(&server, config())
                .complete_streaming(&request, &mut |d| deltas.push(d))
                .await;

            let received = server.received();
            assert_eq!(received.len(), 1, "{at}: one request, no retry");
            let sent = &received[0];
            assert_eq!(sent.method, "POST", "{at}");
            assert_eq!(sent.path, "/v1/messages", "{at}");
            assert_eq!(sent.header("x-api-key"), Some(KEY), "{at}");
            assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"), "{at}");
            for field in ["messages", "model", "max_tokens", "system", "stream"] {
                assert_eq!(
                    sent.body.get(field),
                    recorded_body.get(field),
                    "{at}: `{field}`"
                );
            }
            if all_plain_tools(recorded_body) {
                assert_eq!(
                    sent.body.get("tools"),
                    recorded_body.get("tools"),
                    "{at}: tools"
                );
            }

            let status = exchange["response"]["status_code"].as_u64().unwrap();
            let body = &exchange["response"]["body"];
            if status != 200 {
                let err = result.unwrap_err();
                assert!(
                    matches!(&err, ModelError::Rejected { status: 400, error_type, .. } if error_type == "invalid_request_error"),
                    "{at}: {err}"
                );
                assert!(err.to_string().contains("tool_use_id"), "{at}: {err}");
                continue;
            }
            let response = result.unwrap_or_else(|e| panic!("{at}: {e}"));
            let expected: AnthropicResponse = match body {
                Value::String(sse) => {
                    ba_protocol::stream::anthropic::accumulate_sse(sse)
                        .unwrap()
                        .message
                }
                body => serde_json::from_value(body.clone()).unwrap(),
            };
            assert_eq!(response.message.content, expected.content, "{at}");
            assert_eq!(response.id, expected.id, "{at}");
            assert_eq!(
                response.stop_reason,
                StopReason::from_provider(expected.stop_reason.as_deref().unwrap()),
                "{at}"
            );
            assert_eq!(
                response.usage.input_tokens, expected.usage.input_tokens,
                "{at}"
            );
            assert_eq!(
                response.usage.output_tokens, expected.usage.output_tokens,
                "{at}"
            );
            assert!(
                response.problems.is_empty(),
                "{at}: {:?}",
                response.problems
            );
            if body.is_string() {
                let (text, calls, input) = collect(&deltas);
                assert_eq!(text, response.message.text(), "{at}: text deltas");
                let uses: Vec<_> = response.message.tool_uses().collect();
                assert_eq!(calls.len(), uses.len(), "{at}: call deltas");
                if let Some(call) = uses.first() {
                    assert_eq!(calls[0], (call.id.clone(), call.name.clone()), "{at}");
                    let streamed: Value = serde_json::from_str(&input).unwrap();
                    assert_eq!(streamed, call.input, "{at}: input deltas");
                }
            } else {
                assert!(deltas.is_empty(), "{at}: no deltas without streaming");
            }
            exchanges += 1;
        }
    }
    assert!(exchanges >= 20, "only {exchanges} exchanges replayed");
}

/// Two tool rounds: each answer goes back into the log, the recorded tool results are
/// appended, and the next request must be byte-for-byte the one the recording made.
#[tokio::test]
async fn two_tool_rounds_rebuild_the_recorded_requests() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let file = fixtures.join(
        "wire/anthropic/tool-runner/test_runners/TestSyncRunTools/e075a6c2-de4d-4125-9709-f0e178058190.json",
    );
    let recording: Value = serde_json::from_str(&support::read(&file)).unwrap();
    let exchanges = recording.as_array().unwrap();
    let server = MockServer::start(
        exchanges
            .iter()
            .map(|x| reply_from_recording(&x["response"]))
            .collect(),
    )
    .await;
    let client = anthropic(&server, config());
    let mut stamp = SequentialStamp::default();

    let mut request = request_from_anthropic_body(&exchanges[0]["request"]["body"]);
    let mut answers: Vec<ModelResponse> = Vec::new();
    for (round, exchange) in exchanges.iter().enumerate() {
        if round > 0 {
            // The tool results the recording sent: the last user message of its request.
            let messages = exchange["request"]["body"]["messages"].as_array().unwrap();
            let results = AnthropicRequest {
                system: None,
                messages: vec![
                    serde_json::from_value::<AnthropicMessage>(messages.last().unwrap().clone())
                        .unwrap(),
                ],
                extra: JsonMap::new(),
            };
            let previous = answers.last().unwrap();
            request
                .entries
                .extend(previous.to_log_entries(&mut stamp).unwrap());
            request
                .entries
                .extend(anthropic_to_log(&results, &mut stamp).unwrap().value);
        }
        let answer = client.complete(&request).await.unwrap();
        assert_eq!(answer.stop_reason, StopReason::ToolUse, "round {round}");
        assert_eq!(answer.message.tool_uses().count(), 1, "round {round}");
        answers.push(answer);
    }
    let received = server.received();
    assert_eq!(received.len(), 2);
    for (round, exchange) in exchanges.iter().enumerate() {
        assert_eq!(
            received[round].body["messages"], exchange["request"]["body"]["messages"],
            "round {round}: the request sent differs from the recording"
        );
    }
}

#[tokio::test]
async fn anthropic_streaming_fixtures_accumulate_like_the_protocol_does() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let dir = fixtures.join("wire/anthropic/streaming");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert!(names.len() >= 7);
    for path in names {
        let text = support::read(&path);
        let server = MockServer::start(vec![Reply::sse(&text, 61, End::Close)]).await;
        let request = ModelRequest::new("m", vec![user("hi")]).with_stream(true);
        let mut deltas = Vec::new();
        let response = anthropic(&server, config())
            .complete_streaming(&request, &mut |d| deltas.push(d))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let expected = ba_protocol::stream::anthropic::accumulate_sse(&text).unwrap();
        assert_eq!(
            response.message.content,
            expected.message.content,
            "{}",
            path.display()
        );
        assert_eq!(
            collect(&deltas).0,
            response.message.text(),
            "{}",
            path.display()
        );
        if path.ends_with("incomplete_partial_json_response.txt") {
            // The provider ended the message at max_tokens with a tool input cut short: an
            // answer, flagged, not a transport failure.
            assert_eq!(response.stop_reason, StopReason::MaxTokens);
            assert!(
                response.problems.iter().any(|p| p.contains("cut mid-JSON")),
                "{:?}",
                response.problems
            );
        } else {
            assert!(response.problems.is_empty(), "{}", path.display());
        }
    }
}

fn user(text: &str) -> LogEntry {
    LogEntry::new("u1", ba_protocol::LogRole::User, "2025-01-01T00:00:00Z").with_text(text)
}

const OK_BODY: &str = r#"{"id":"msg_ok","type":"message","role":"assistant","model":"m",
  "content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn",
  "usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":1}}"#;

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let server = MockServer::start(vec![
        Reply::json(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )
        .header("retry-after", "1"),
        Reply::json(200, OK_BODY),
    ])
    .await;
    let start = Instant::now();
    let response = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap();
    let waited = start.elapsed();
    // Retry-After (1 s) rules, not the 200 ms backoff.
    assert!(
        waited >= Duration::from_secs(1) && waited < LOOSE,
        "{waited:?}"
    );
    assert_eq!(response.retries, 1);
    assert_eq!(response.usage.cache_read_tokens, 1);
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(
        received[0].body, received[1].body,
        "the retry resends the same body"
    );
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    // Two seconds ahead; an HTTP date has whole seconds, so the wait is over one second.
    let when = SystemTime::now() + Duration::from_secs(2);
    let date = time::OffsetDateTime::from(when)
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap();
    let server = MockServer::start(vec![
        Reply::json(429, "{}").header("retry-after", &date),
        Reply::json(200, OK_BODY),
    ])
    .await;
    let start = Instant::now();
    let response = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < LOOSE,
        "{waited:?}"
    );
    assert_eq!(response.retries, 1);
}

#[tokio::test]
async fn server_error_backs_off_then_succeeds_and_gives_up_after_max_retries() {
    let server = MockServer::start(vec![
        Reply::json(
            500,
            r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#,
        ),
        Reply::json(200, OK_BODY),
    ])
    .await;
    let start = Instant::now();
    let response = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < LOOSE,
        "base delay, no jitter: {waited:?}"
    );
    assert_eq!(response.message.text(), "Done.");
    assert_eq!(response.retries, 1);

    let server = MockServer::start(vec![
        Reply::json(503, "upstream busy"),
        Reply::json(502, "bad gateway"),
        Reply::json(
            529,
            r#"{"error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ])
    .await;
    let start = Instant::now();
    let policy = RetryPolicy::default()
        .with_max_retries(2)
        .with_base_delay(Duration::from_millis(100))
        .with_jitter(0.0);
    let err = anthropic(&server, HttpConfig::default().with_retry(policy))
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap_err();
    // Two waits, doubling: 100 ms then 200 ms; three attempts in all (counted below).
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(100 + 200) && waited < LOOSE,
        "{waited:?}"
    );
    assert!(
        matches!(&err, ModelError::Server { status: 529, attempts: 3, message, .. } if message == "Overloaded"),
        "{err}"
    );
    assert_eq!(err.kind(), LlmErrorKind::Server);
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    // A port that was open a moment ago and is closed now refuses connections.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let policy = RetryPolicy::default()
        .with_max_retries(1)
        .with_base_delay(Duration::from_millis(300))
        .with_jitter(0.0);
    let start = Instant::now();
    let err = AnthropicClient::new(ApiKey::new(KEY))
        .unwrap()
        .with_base_url(format!("http://{addr}"))
        .unwrap()
        .with_http(HttpConfig::default().with_retry(policy))
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Network { .. }), "{err}");
    assert_eq!(err.kind(), LlmErrorKind::Network);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < LOOSE,
        "one retry: {waited:?}"
    );
    assert!(!err.to_string().contains(KEY));
}

/// The position just after the `n`-th `input_json_delta` event of a stream.
fn after_input_delta(text: &str, n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        let found = text[at..].find("input_json_delta").unwrap();
        at += found;
        at += text[at..].find("\n\n").unwrap() + 2;
    }
    at
}

#[tokio::test]
async fn stream_cut_mid_tool_input_reports_its_partial_output() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let text = support::read(&fixtures.join("wire/anthropic/streaming/tool_use_response.txt"));
    let cut = after_input_delta(&text, 3);
    for end in [End::CutShort, End::Close] {
        let server = MockServer::start(vec![Reply::sse(&text[..cut], 53, end)]).await;
        let mut deltas = Vec::new();
        let err = anthropic(&server, config())
            .complete_streaming(
                &ModelRequest::new("m", vec![user("hi")]).with_stream(true),
                &mut |d| deltas.push(d),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::StreamCut { .. }),
            "{end:?}: {err}"
        );
        assert_eq!(server.received().len(), 1, "a cut stream is not retried");
        let (streamed_text, calls, streamed_input) = collect(&deltas);
        assert_eq!(calls.len(), 1, "{end:?}");
        let partial = err.partial_output().unwrap();
        assert_eq!(partial.text, streamed_text, "{end:?}");
        assert_eq!(partial.cut_tool_calls.len(), 1, "{end:?}");
        let cut_call = &partial.cut_tool_calls[0];
        assert_eq!((cut_call.id.clone(), cut_call.name.clone()), calls[0]);
        assert_eq!(cut_call.partial_json, streamed_input, "{end:?}");
        assert!(serde_json::from_str::<Value>(&cut_call.partial_json).is_err());
        // The rebuilt message keeps the call, its input repaired as far as it goes.
        let message = partial.message.as_ref().unwrap();
        let call = message.tool_uses().next().unwrap();
        assert_eq!(call.id, cut_call.id);
        assert!(call.input.is_object(), "{end:?}: {}", call.input);
        let logged = err.to_llm_error();
        assert_eq!(logged.kind, LlmErrorKind::StreamCut);
        let logged_partial = logged.partial_output.unwrap();
        assert!(logged_partial.contains(&cut_call.name), "{logged_partial}");
        assert!(
            logged_partial.contains(&cut_call.partial_json),
            "{logged_partial}"
        );
    }
}

#[tokio::test]
async fn idle_stream_times_out_with_what_it_streamed() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let text = support::read(&fixtures.join("wire/anthropic/streaming/basic_response.txt"));
    let first_text = text.find("text_delta").unwrap();
    let cut = first_text + text[first_text..].find("\n\n").unwrap() + 2;
    let server = MockServer::start(vec![Reply::sse(&text[..cut], 40, End::Hang)]).await;
    // The pieces come 40 ms apart, then nothing: 2 s of silence is the idle timeout.
    let config = config().with_idle_timeout(Duration::from_secs(2));
    let mut deltas = Vec::new();
    let start = Instant::now();
    let err = anthropic(&server, config)
        .complete_streaming(
            &ModelRequest::new("m", vec![user("hi")]).with_stream(true),
            &mut |d| deltas.push(d),
        )
        .await
        .unwrap_err();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < LOOSE,
        "{waited:?}"
    );
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                phase: TimeoutPhase::StreamIdle,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), LlmErrorKind::Timeout);
    let streamed = collect(&deltas).0;
    assert!(!streamed.is_empty());
    assert_eq!(err.partial_output().unwrap().text, streamed);
    assert_eq!(
        err.to_llm_error().partial_output.as_deref(),
        Some(streamed.as_str())
    );
}

#[tokio::test]
async fn silent_server_hits_the_request_timeout_on_every_attempt() {
    let server = MockServer::start(vec![
        Reply::sse("", 1, End::Silent),
        Reply::sse("", 1, End::Silent),
    ])
    .await;
    let policy = RetryPolicy::default()
        .with_max_retries(1)
        .with_base_delay(Duration::from_millis(100))
        .with_jitter(0.0);
    let config = HttpConfig::default()
        .with_request_timeout(Duration::from_secs(1))
        .with_retry(policy);
    let start = Instant::now();
    let err = anthropic(&server, config)
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap_err();
    // A whole timeout per attempt, the backoff between them.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1000 + 100 + 1000) && waited < LOOSE,
        "{waited:?}"
    );
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                phase: TimeoutPhase::Request,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn one_request_timeout_covers_headers_and_body() {
    let mut reply = Reply::json(200, OK_BODY);
    reply.pieces = vec![OK_BODY.as_bytes()[..30].to_vec()];
    reply.end = End::Hang;
    let server = MockServer::start(vec![reply]).await;
    let config = config().with_request_timeout(Duration::from_secs(1));
    let start = Instant::now();
    let err = anthropic(&server, config)
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap_err();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < LOOSE,
        "{waited:?}"
    );
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                phase: TimeoutPhase::Request,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        server.received().len(),
        1,
        "a body already started is not retried"
    );
}

#[tokio::test]
async fn malformed_bodies_are_reported_not_retried() {
    let server = MockServer::start(vec![Reply::json(200, r#"{"id": "msg_1", "content": ["#)]).await;
    let err = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::InvalidResponse { .. }), "{err}");
    assert_eq!(err.kind(), LlmErrorKind::InvalidResponse);
    assert_eq!(server.received().len(), 1);

    let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[]}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half\"}}\n\n\
event: content_block_delta\ndata: {this is not json}\n\n";
    let server = MockServer::start(vec![Reply::sse(stream, 1000, End::Close)]).await;
    let err = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]).with_stream(true))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::InvalidResponse { .. }), "{err}");
    assert_eq!(err.partial_output().unwrap().text, "Half");

    let server = MockServer::start(vec![Reply::sse(
        "data: {\"choices\": 7}\n\n",
        100,
        End::Close,
    )])
    .await;
    let err = openai(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]).with_stream(true))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::InvalidResponse { .. }), "{err}");
}

#[tokio::test]
async fn error_event_inside_a_stream_keeps_the_partial_output() {
    let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[]}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"So far\"}}\n\n\
event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let server = MockServer::start(vec![Reply::sse(stream, 1000, End::Close)]).await;
    let err = anthropic(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]).with_stream(true))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 529, .. }),
        "{err}"
    );
    assert_eq!(err.partial_output().unwrap().text, "So far");
    assert_eq!(
        server.received().len(),
        1,
        "deltas were delivered: no retry"
    );
}
