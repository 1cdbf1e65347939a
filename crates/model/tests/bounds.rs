//! What a misbehaving model server cannot do to the client: a stream that never ends grows it
//! to its size limit and no further, a stream of keep-alive pings ends at the idle timeout, a
//! server that accepts and never answers ends at the call's deadline — each a clear error with
//! what was received, and the process's memory stays small.
//!
//! One test in its own binary, so the process's peak memory is this test's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::time::Duration;

use ba_model::{
    AnthropicClient, ApiKey, HttpConfig, ModelClient, ModelError, ModelRequest, RetryPolicy,
    TimeoutPhase,
};
use ba_protocol::{LlmErrorKind, LogEntry, LogRole};
use ba_testkit::{End, MockServer, Reply, event};
use serde_json::json;

fn request() -> ModelRequest {
    ModelRequest::new(
        "claude-test",
        vec![LogEntry::new("u1", LogRole::User, "t").with_text("Tell me everything.")],
    )
    .with_stream(true)
}

fn client(server: &MockServer, http: HttpConfig) -> AnthropicClient {
    AnthropicClient::new(ApiKey::new("sk-test"))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
        .with_http(http.with_retry(RetryPolicy::default().with_max_retries(0)))
}

/// The start of an answer with one text block, then `repeat` sent again and again.
fn endless(repeat: String, pause_ms: u64) -> Reply {
    let head = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ) + &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    let mut reply = Reply::sse(&head, usize::MAX, End::Endless { pause_ms });
    reply.pieces.push(repeat.into_bytes());
    reply
}

/// The peak resident memory of this process, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_streams_end_at_their_bounds() {
    // A text block that never ends: 64 KiB deltas, as fast as the client reads.
    let chunk = "x".repeat(64 * 1024);
    let delta = event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": chunk}}),
    );
    let server = MockServer::start(vec![endless(delta, 0)]).await;
    let limit = 48 * 1024 * 1024;
    let http = HttpConfig::default().with_max_response_bytes(limit);
    let err = client(&server, http)
        .complete(&request())
        .await
        .unwrap_err();
    match &err {
        ModelError::TooLarge {
            limit: l, partial, ..
        } => {
            assert_eq!(*l, limit);
            assert!(
                partial.text.len() > 40 * 1024 * 1024,
                "{}",
                partial.text.len()
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.kind(), LlmErrorKind::InvalidResponse);
    // The failure goes to the log with what was received, cut to the log's own bound.
    let logged = err.to_log_entry("e1", "t").llm_error.unwrap();
    assert!(logged.message.contains("limit of"));
    let partial = logged.partial_output.unwrap();
    assert!(partial.chars().count() < ba_model::MAX_LOGGED_PARTIAL + 200);
    assert!(partial.contains("characters of the partial output left out"));

    // Only keep-alive pings: the idle timeout runs from the last progress, pings aside.
    let server = MockServer::start(vec![endless(event("ping", json!({"type": "ping"})), 20)]).await;
    let http = HttpConfig::default().with_idle_timeout(Duration::from_millis(600));
    let started = tokio::time::Instant::now();
    let err = client(&server, http)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Timeout {
                phase: TimeoutPhase::StreamIdle,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));

    // Accepted, never answered: the call's deadline ends it, whatever the other timeouts.
    let server = MockServer::start(vec![Reply::json(200, "{}").with_end(End::Silent)]).await;
    let http = HttpConfig::default().with_call_timeout(Duration::from_millis(500));
    let err = client(&server, http)
        .complete(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err:?}");

    let peak = peak_rss();
    assert!(peak < 200 * 1024 * 1024, "peak memory {peak} bytes");
}
