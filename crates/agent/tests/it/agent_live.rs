#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The agent over a real provider client against a local mock server: a 429 then success, two
//! parallel tool calls, a stream cut in the middle of a tool input (persisted with its partial
//! output), `continue`, a second tool round and the final answer.

use ba_testkit as support;

use std::sync::Arc;
use std::time::Duration;

use ba_agent::{Agent, AgentEvent, Input, RunStatus};
use ba_builtins::{demo_data, demo_tools};
use ba_model::{AnthropicClient, ApiKey, HttpConfig, RetryPolicy};
use ba_protocol::{LlmErrorKind, LogRole};
use ba_storage::{FileStore, NewConversation};
use support::{Block, End, MockServer, Reply, answer};

fn sse(body: &str, end: End) -> Reply {
    Reply::sse(body, 37, end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_provider_rounds_failures_and_continue() {
    let dir = tempfile::tempdir().unwrap();
    demo_data::generate(dir.path()).unwrap();
    let quarterly = r#"{"query": "SELECT region, ROUND(SUM(amount), 0) FROM sales GROUP BY region ORDER BY region"}"#;
    let replies = vec![
        Reply::json(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )
        .header("retry-after", "0"),
        sse(
            &answer(
                "msg_1",
                &[
                    Block::Text("Reading the targets and the totals."),
                    Block::Tool(
                        "toolu_1",
                        "file_reader",
                        vec![r#"{"path": "sal"#, r#"es.csv", "nrows": 3}"#],
                    ),
                    Block::Tool(
                        "toolu_2",
                        "query_database",
                        vec![&quarterly[..20], &quarterly[20..]],
                    ),
                ],
                "tool_use",
                true,
            ),
            End::Complete,
        ),
        sse(
            &answer(
                "msg_2",
                &[
                    Block::Text("Now West by month."),
                    Block::Tool(
                        "toolu_3",
                        "query_database",
                        vec![
                            r#"{"query": "SELECT substr(date"#,
                            r#", 1, 7), SUM(amount) FROM sales"#,
                            r#" WHERE region = 'West' GROUP BY 1"}"#,
                        ],
                    ),
                ],
                "tool_use",
                false,
            ),
            End::CutShort,
        ),
        sse(
            &answer(
                "msg_3",
                &[Block::Tool(
                    "toolu_4",
                    "query_database",
                    vec![
                        r#"{"query": "SELECT substr(date, 1, 7), SUM(amount) FROM sales WHERE region = 'West' GROUP BY 1"}"#,
                    ],
                )],
                "tool_use",
                true,
            ),
            End::Complete,
        ),
        sse(
            &answer(
                "msg_4",
                &[Block::Text("West tripled its sales in Q3.")],
                "end_turn",
                true,
            ),
            End::Complete,
        ),
    ];
    let server = MockServer::start(replies).await;
    let client = AnthropicClient::new(ApiKey::new("sk-test"))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap()
        .with_http(
            HttpConfig::default().with_retry(
                RetryPolicy::default()
                    .with_base_delay(Duration::from_millis(5))
                    .with_jitter(0.0),
            ),
        );
    let store = Arc::new(FileStore::open(dir.path().join("store")).unwrap());
    let agent = Agent::builder(Arc::new(client))
        .store(store)
        .tools(demo_tools(dir.path()))
        .model("claude-test")
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();

    // First run: the 429 is retried inside the client; round 1 runs two calls; round 2's
    // stream is cut in the middle of a tool input.
    let events = agent
        .send(&id, Input::message("How did West do in 2024?"))
        .collect_events()
        .await;
    let Some(AgentEvent::Finished(first)) = events.last() else {
        panic!("{events:#?}")
    };
    assert_eq!(first.status, RunStatus::ModelFailed, "{first:#?}");
    assert_eq!(first.rounds, 2);
    let answered: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelAnswered { retries, .. } => Some(*retries),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [1], "one answer, after one retry");
    let results: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                call_id, success, ..
            } => Some((call_id.as_str(), *success)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [("toolu_1", true), ("toolu_2", true)]);
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.contains("Reading the targets") && deltas.contains("Now West by month."));
    assert!(events.iter().any(|e| matches!(e,
        AgentEvent::Error { kind, resumable: true, .. } if *kind == ba_agent::ErrorKind::StreamCut)));

    // The cut answer is in the log with what streamed before the cut.
    let log = agent.entries(&id).await.unwrap();
    let failed = log.last().unwrap();
    assert_eq!(failed.role, LogRole::Assistant);
    let error = failed.llm_error.as_ref().unwrap();
    assert_eq!(error.kind, LlmErrorKind::StreamCut);
    let partial = error.partial_output.as_deref().unwrap();
    assert!(
        partial.contains("Now West by month.") && partial.contains("toolu_3"),
        "{partial}"
    );
    assert!(partial.contains("SELECT substr(date"), "{partial}");

    // `continue`: the failed turn and its LLM_ERROR block go with the request; a second tool
    // round and the final answer follow.
    let second = agent.send(&id, Input::Continue).finish().await;
    assert_eq!(second.status, RunStatus::Answered, "{second:#?}");
    assert_eq!(
        second.final_answer.as_deref(),
        Some("West tripled its sales in Q3.")
    );

    let received = server.received();
    assert_eq!(
        received.len(),
        5,
        "429, round 1, cut round 2, continue, final"
    );
    assert_eq!(
        received[0].body, received[1].body,
        "the retry resends the same request"
    );
    let round2 = received[2].body["messages"].to_string();
    assert!(
        round2.contains("toolu_1") && round2.contains("toolu_2") && round2.contains("tool_result")
    );
    let resumed = received[3].body["messages"].as_array().unwrap();
    let resumed_text = serde_json::to_string(resumed).unwrap();
    assert!(resumed_text.contains("LLM_ERROR"), "{resumed_text}");
    assert!(
        resumed_text.contains("SELECT substr(date"),
        "{resumed_text}"
    );
    assert_eq!(resumed.last().unwrap()["role"], "user");
    assert!(resumed.last().unwrap().to_string().contains("continue"));
    for r in &received {
        assert_eq!(r.header("x-api-key"), Some("sk-test"));
        assert_eq!(r.body["stream"], true);
        let tools: Vec<&str> = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(tools.contains(&"query_database") && tools.contains(&"file_reader"));
    }
    let log = agent.entries(&id).await.unwrap();
    assert!(ba_protocol::check_log(&log).is_empty());
    let report = agent.report(&id).await.unwrap();
    assert_eq!(
        (
            report.model_calls,
            report.model_errors,
            report.model_retries
        ),
        (3, 1, 1)
    );
    assert_eq!(report.tools["query_database"].calls, 2);
}

/// An answer whose usage reports prompt-cache reads and writes, as the Messages API does.
fn cached_answer(id: &str, text: &str, read: u64, written: u64) -> String {
    use serde_json::json;
    use support::event;
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 50, "output_tokens": 1,
            "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}}),
    );
    out += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    out += &event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    );
    out += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    out += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"output_tokens": 12}}),
    );
    out += &event("message_stop", json!({"type": "message_stop"}));
    out
}

/// Requests carry cache breakpoints, the cache figures the provider reports are kept with
/// each answer, and the metrics report shows the share of input read from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_figures_reach_the_metrics_report() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start(vec![
        sse(
            &cached_answer("msg_1", "First answer.", 0, 900),
            End::Complete,
        ),
        sse(
            &cached_answer("msg_2", "Second answer.", 900, 40),
            End::Complete,
        ),
    ])
    .await;
    let client = AnthropicClient::new(ApiKey::new("sk-test"))
        .unwrap()
        .with_base_url(&server.base_url)
        .unwrap();
    let agent = Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .model("claude-test")
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    for question in ["First question?", "Second question?"] {
        let s = agent.send(&id, Input::message(question)).finish().await;
        assert_eq!(s.status, RunStatus::Answered, "{s:#?}");
    }
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.input_tokens, 100);
    assert_eq!(report.cache_read_tokens, 900);
    assert_eq!(report.cache_write_tokens, 940);
    // 900 of 100 + 900 + 940 input tokens came from the cache.
    assert!((report.cache_read_share - 900.0 / 1940.0).abs() < 1e-9);
    assert!(
        report
            .render(false)
            .contains("46.4 % of input read from the cache")
    );
    // The second request marks the end of its window for the cache, and its front is the
    // first request's window.
    let received = server.received();
    let second = received[1].body.to_string();
    assert!(second.contains("cache_control"), "{second}");
    let first_messages = received[0].body["messages"].as_array().unwrap().len();
    assert_eq!(
        received[1].body["messages"].as_array().unwrap()[..first_messages - 1],
        received[0].body["messages"].as_array().unwrap()[..first_messages - 1]
    );
}
