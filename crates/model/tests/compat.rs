//! The OpenAI client against streams and bodies written in the shapes of compatible servers
//! (vLLM, llama.cpp's server, Ollama), served from a loopback server: the exact answers they
//! read to, and what the `compat` profile leaves out of the request.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ba_model::{
    CacheHint, ModelClient, ModelRequest, ModelResponse, OpenAiClient, OpenAiCompat, StopReason,
    StreamDelta,
};
use ba_protocol::{ContentBlock, LogEntry, LogRole, Message, Role, ToolSpec, Usage};
use ba_testkit::{End, MockServer, Received, Reply};
use serde_json::{Value, json};

fn data(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compat/")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn request(stream: bool) -> ModelRequest {
    ModelRequest::new(
        "local-model",
        vec![LogEntry::new("u1", LogRole::User, "2025-01-01T00:00:00Z").with_text("Add 2 and 3.")],
    )
    .with_tools(vec![ToolSpec::new(
        "calc",
        "Adds two numbers.",
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
    )])
    .with_thinking_budget(4000)
    .with_cache(CacheHint {
        stable_entries: 1,
        key: Some("conversation-1".into()),
    })
    .with_stream(stream)
}

/// Serves `reply` to a client built by `client` and returns the answer, the deltas streamed
/// and the request the server received.
async fn exchange(
    reply: Reply,
    client: impl FnOnce(&str) -> OpenAiClient,
    stream: bool,
) -> (ModelResponse, Vec<StreamDelta>, Received) {
    let server = MockServer::start(vec![reply]).await;
    let client = client(&server.base_url);
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&deltas);
    let response = client
        .complete_streaming(&request(stream), &mut |d| sink.lock().unwrap().push(d))
        .await
        .unwrap();
    let received = server.received().remove(0);
    let deltas = deltas.lock().unwrap().clone();
    (response, deltas, received)
}

fn compat(base_url: &str) -> OpenAiClient {
    OpenAiClient::compat(None)
        .unwrap()
        .with_base_url(base_url)
        .unwrap()
}

/// A stream cut into pieces of 37 bytes, so events and lines split as a socket would split them.
fn sse(name: &str) -> Reply {
    Reply::sse(&data(name), 37, End::Close)
}

fn answer(id: &str, model: &str, blocks: Vec<ContentBlock>) -> ModelResponse {
    ModelResponse {
        message: Message::new(Role::Assistant, blocks).with_id(id),
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        id: id.to_owned(),
        model: model.to_owned(),
        retries: 0,
        problems: Vec::new(),
    }
}

/// The answer with its usage checked to be the client's own estimate (the server sent none),
/// then left out of the comparison.
fn estimated(mut response: ModelResponse) -> ModelResponse {
    let usage = response.usage;
    assert!(
        usage.estimated && usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    response.usage = Usage::default();
    response
}

/// The calls announced and the tool input streamed, call by call.
fn streamed_calls(deltas: &[StreamDelta]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(usize, String, String, String)> = Vec::new();
    for delta in deltas {
        match delta {
            StreamDelta::ToolCallStarted { index, id, name } => {
                calls.push((*index, id.clone(), name.clone(), String::new()))
            }
            StreamDelta::ToolInput {
                index,
                partial_json,
            } => {
                let call = calls.iter_mut().find(|c| c.0 == *index).unwrap();
                call.3.push_str(partial_json);
            }
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(_, id, n, input)| (id, n, input))
        .collect()
}

fn streamed_thinking(deltas: &[StreamDelta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Thinking { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn compat_requests_leave_out_what_servers_refuse() {
    let (_, _, received) = exchange(sse("vllm_reasoning_tool_call.sse"), compat, true).await;
    let body = &received.body;
    assert_eq!(received.path, "/chat/completions");
    assert!(received.header("authorization").is_none());
    // Usage is asked for: llama.cpp's server, vLLM and Ollama send it.
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    for field in ["prompt_cache_key", "reasoning_effort"] {
        assert!(body.get(field).is_none(), "{field} sent: {body:#}");
    }
    assert!(body.get("max_completion_tokens").is_none(), "{body:#}");
    assert_eq!(body["max_tokens"], json!(4096));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["tools"][0]["function"]["name"], json!("calc"));
}

#[tokio::test]
async fn the_default_client_still_asks_streams_for_usage() {
    let client = |url: &str| OpenAiClient::new(None).unwrap().with_base_url(url).unwrap();
    let (_, _, received) = exchange(sse("vllm_reasoning_tool_call.sse"), client, true).await;
    assert_eq!(
        received.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(received.body["reasoning_effort"], json!("medium"));
    // The profiles as values: the default is OpenAI's.
    assert_eq!(
        OpenAiClient::new(None).unwrap().compat_profile(),
        OpenAiCompat::openai()
    );
    let mut profile = OpenAiCompat::server();
    profile.stream_usage = false;
    let client = |url: &str| {
        OpenAiClient::new(None)
            .unwrap()
            .with_compat(profile)
            .with_base_url(url)
            .unwrap()
    };
    let (_, _, received) = exchange(sse("vllm_reasoning_tool_call.sse"), client, true).await;
    assert!(received.body.get("stream_options").is_none());
    assert!(received.body.get("reasoning_effort").is_none());
}

#[tokio::test]
async fn vllm_reasoning_then_a_call_whose_arguments_come_whole_and_no_usage() {
    let (response, deltas, _) = exchange(sse("vllm_reasoning_tool_call.sse"), compat, true).await;
    assert_eq!(
        estimated(response),
        answer(
            "chatcmpl-b7e1c0",
            "Qwen/Qwen3-8B",
            vec![
                ContentBlock::thinking("The user wants the sum of 2 and 3.", None),
                ContentBlock::text("Let me add them."),
                ContentBlock::tool_use("chatcmpl-tool-4f0c2a", "calc", json!({"a": 2, "b": 3})),
            ],
        )
    );
    assert_eq!(
        streamed_thinking(&deltas),
        "The user wants the sum of 2 and 3."
    );
    assert_eq!(
        streamed_calls(&deltas),
        [(
            "chatcmpl-tool-4f0c2a".to_owned(),
            "calc".to_owned(),
            r#"{"a": 2, "b": 3}"#.to_owned()
        )]
    );
}

#[tokio::test]
async fn llama_cpp_ids_and_names_repeated_in_every_delta_are_taken_once() {
    let (response, deltas, _) = exchange(sse("llamacpp_repeated_ids.sse"), compat, true).await;
    let sql = "SELECT region, SUM(amount) FROM sales GROUP BY region";
    let mut expected = answer(
        "chatcmpl-Zq8WmT1fJ",
        "qwen2.5-coder-7b-instruct-q4_k_m.gguf",
        vec![ContentBlock::tool_use(
            "call_Vn3sQ0aL",
            "query_database",
            json!({"sql": sql}),
        )],
    );
    expected.usage = Usage {
        input_tokens: 412,
        output_tokens: 31,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    assert_eq!(response, expected);
    assert_eq!(
        streamed_calls(&deltas),
        [(
            "call_Vn3sQ0aL".to_owned(),
            "query_database".to_owned(),
            format!(r#"{{"sql": "{sql}"}}"#)
        )]
    );
}

#[tokio::test]
async fn ollama_reasoning_and_object_arguments_without_index_under_stop() {
    let (response, deltas, _) = exchange(sse("ollama_object_arguments.sse"), compat, true).await;
    assert_eq!(
        estimated(response),
        answer(
            "chatcmpl-317",
            "qwen3:8b",
            vec![
                ContentBlock::thinking("Paris weather, in celsius.", None),
                ContentBlock::tool_use(
                    "call_k2j4x9pq",
                    "get_weather",
                    json!({"city": "Paris", "unit": "celsius"}),
                ),
            ],
        )
    );
    assert_eq!(streamed_thinking(&deltas), "Paris weather, in celsius.");
    let calls = streamed_calls(&deltas);
    assert_eq!(calls.len(), 1);
    let input: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(input, json!({"city": "Paris", "unit": "celsius"}));
}

#[tokio::test]
async fn a_non_streamed_answer_with_object_arguments_and_no_usage() {
    let reply = Reply::json(200, &data("nonstream_object_arguments.json"));
    let (response, deltas, received) = exchange(reply, compat, false).await;
    assert!(deltas.is_empty());
    assert!(received.body.get("stream").is_none());
    assert_eq!(
        estimated(response),
        answer(
            "chatcmpl-582",
            "llama3.1:8b",
            vec![
                ContentBlock::thinking("Two numbers to add.", None),
                ContentBlock::tool_use("call_r8d1", "calc", json!({"a": 2, "b": 3})),
            ],
        )
    );
}

#[tokio::test]
async fn two_parallel_calls_without_ids_get_stable_ones() {
    let calls = |suffix: &str| {
        vec![
            ContentBlock::tool_use(format!("call_0_{suffix}"), "calc", json!({"a": 1, "b": 2})),
            ContentBlock::tool_use(format!("call_1_{suffix}"), "calc", json!({"a": 3, "b": 4})),
        ]
    };
    // Streamed, one call a chunk without index, and ended by [DONE] alone.
    let (response, deltas, _) = exchange(sse("parallel_without_ids.sse"), compat, true).await;
    assert_eq!(
        estimated(response),
        answer("chatcmpl-9001", "local-model", calls("chatcmpl-9001"))
    );
    assert_eq!(
        streamed_calls(&deltas),
        [
            (
                "call_0_chatcmpl-9001".to_owned(),
                "calc".to_owned(),
                r#"{"a":1,"b":2}"#.to_owned()
            ),
            (
                "call_1_chatcmpl-9001".to_owned(),
                "calc".to_owned(),
                r#"{"a":3,"b":4}"#.to_owned()
            ),
        ]
    );
    // Not streamed.
    let reply = Reply::json(200, &data("parallel_without_ids.json"));
    let (response, _, _) = exchange(reply, compat, false).await;
    let mut expected = answer("chatcmpl-9002", "local-model", calls("chatcmpl-9002"));
    expected.usage = Usage {
        input_tokens: 50,
        output_tokens: 20,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    assert_eq!(response, expected);
}

#[tokio::test]
async fn a_text_answer_ended_by_done_alone_ends_the_turn() {
    let text = "data: {\"id\":\"c7\",\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"Hi.\"}}]}\n\n\
                data: [DONE]\n\n";
    let (response, _, _) = exchange(Reply::sse(text, 64, End::Close), compat, true).await;
    let mut expected = answer("c7", "m", vec![ContentBlock::text("Hi.")]);
    expected.stop_reason = StopReason::EndTurn;
    assert_eq!(estimated(response), expected);
}

/// One llama.cpp stream chunk of text.
fn llama_chunk(text: &str, finish: Option<&str>, extra: Value) -> String {
    let mut chunk = json!({"id": "chatcmpl-l1", "object": "chat.completion.chunk",
        "model": "smollm2", "choices": [{"index": 0, "delta": {"content": text},
        "finish_reason": finish}]});
    if let (Value::Object(chunk), Value::Object(extra)) = (&mut chunk, extra) {
        chunk.extend(extra);
    }
    format!("data: {chunk}\n\n")
}

#[tokio::test]
async fn llama_cpp_usage_and_cached_prompt_tokens_are_read_from_its_last_chunk() {
    // What llama-server sends when asked for `include_usage`: a last chunk with no choice.
    let text = llama_chunk("Hello", None, json!({}))
        + &llama_chunk("", Some("stop"), json!({}))
        + "data: {\"id\":\"chatcmpl-l1\",\"object\":\"chat.completion.chunk\",\"model\":\"smollm2\",\"choices\":[],\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":230,\"total_tokens\":232,\"prompt_tokens_details\":{\"cached_tokens\":200}},\"timings\":{\"cache_n\":200,\"prompt_n\":30,\"predicted_n\":2}}\n\n\
        data: [DONE]\n\n";
    let (response, _, received) = exchange(Reply::sse(&text, 41, End::Close), compat, true).await;
    assert_eq!(
        received.body["stream_options"],
        json!({"include_usage": true})
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 30,
            output_tokens: 2,
            cache_read_tokens: 200,
            cache_write_tokens: 0,
            estimated: false,
        }
    );
}

#[tokio::test]
async fn llama_cpp_timings_give_the_usage_when_none_was_asked_for() {
    let text = llama_chunk("Hello", None, json!({}))
        + &llama_chunk(
            "",
            Some("stop"),
            json!({"timings": {"cache_n": 12, "prompt_n": 40, "predicted_n": 3}}),
        )
        + "data: [DONE]\n\n";
    let (response, _, _) = exchange(Reply::sse(&text, 41, End::Close), compat, true).await;
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 40,
            output_tokens: 3,
            cache_read_tokens: 12,
            cache_write_tokens: 0,
            estimated: false,
        }
    );
}

#[tokio::test]
async fn a_server_that_refuses_stream_options_is_asked_again_without_it_and_never_again() {
    let refusal = Reply::json(
        400,
        r#"{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}"#,
    );
    let text = llama_chunk("Hi.", Some("stop"), json!({})) + "data: [DONE]\n\n";
    let server = MockServer::start(vec![
        refusal,
        Reply::sse(&text, 64, End::Close),
        Reply::sse(&text, 64, End::Close),
    ])
    .await;
    let client = compat(&server.base_url);
    let first = client.complete(&request(true)).await.unwrap();
    assert_eq!(first.message.text(), "Hi.");
    // No usage came: the client's own count, marked, never zero.
    assert!(
        first.usage.estimated && first.usage.input_tokens > 0,
        "{:?}",
        first.usage
    );
    client.complete(&request(true)).await.unwrap();
    let sent: Vec<bool> = server
        .received()
        .iter()
        .map(|r| r.body.get("stream_options").is_some())
        .collect();
    assert_eq!(sent, [true, false, false]);
}

#[tokio::test]
async fn a_context_overflow_is_one_typed_error_carrying_the_window() {
    let llama = Reply::json(
        400,
        r#"{"error":{"code":400,"message":"request (10862 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10862,"n_ctx":4096}}"#,
    );
    let server = MockServer::start(vec![llama]).await;
    let err = compat(&server.base_url)
        .complete(&request(true))
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ba_protocol::LlmErrorKind::ContextOverflow,
        "{err}"
    );
    match &err {
        ba_model::ModelError::ContextOverflow {
            limit, requested, ..
        } => assert_eq!((*limit, *requested), (Some(4096), Some(10862))),
        other => panic!("{other:?}"),
    }
    // Not retried: the same request cannot fit.
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn the_window_is_learned_from_llama_cpp_props_or_the_model_list() {
    let props = Reply::json(
        200,
        r#"{"default_generation_settings":{"n_ctx":4096},"total_slots":4,"model_path":"m.gguf"}"#,
    );
    let server = MockServer::start(vec![props]).await;
    let client = OpenAiClient::compat(None)
        .unwrap()
        .with_base_url(format!("{}/v1", server.base_url))
        .unwrap();
    assert_eq!(client.context_window("smollm2").await, Some(4096));
    let received = server.received();
    assert_eq!(
        (received[0].method.as_str(), received[0].path.as_str()),
        ("GET", "/props")
    );
    // vLLM has no `/props`; its model list says `max_model_len`.
    let models = Reply::json(
        200,
        r#"{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","max_model_len":32768}]}"#,
    );
    let server = MockServer::start(vec![Reply::json(404, "{}"), models]).await;
    let client = compat(&format!("{}/v1", server.base_url));
    assert_eq!(client.context_window("Qwen/Qwen3-8B").await, Some(32768));
    assert_eq!(server.received()[1].path, "/v1/models");
    // A server that says nothing: no window.
    let server = MockServer::start(vec![Reply::json(404, "{}"), Reply::json(404, "{}")]).await;
    assert_eq!(compat(&server.base_url).context_window("m").await, None);
}
