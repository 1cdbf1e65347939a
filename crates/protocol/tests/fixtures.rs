//! The shared third-party fixtures: every wire file parses, every stream accumulates to its
//! recorded final message, every Claude Code message reads without losing a tool pair.
//!
//! The fixtures live in `../shared/fixtures` beside the repository; without them these tests
//! say so and pass, except under `CI=true`, where they fail naming what is missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ba_protocol::Content;
use ba_protocol::anthropic::{AnthropicMessage, AnthropicRequest, AnthropicResponse};
use ba_protocol::convert::{
    SequentialStamp, anthropic_to_log, log_to_anthropic, log_to_openai, openai_to_log,
};
use ba_protocol::openai::{ChatRequest, ChatResponse};
use ba_protocol::stream::{anthropic as astream, openai as ostream};
use serde_json::Value;

/// The shared fixtures (a skip, or a failure under CI, when they are absent).
fn fixtures() -> Option<PathBuf> {
    ba_testkit::fixtures()
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some(ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn name(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn anthropic_streams_accumulate() {
    let Some(root) = fixtures() else { return };
    let mut summary = String::new();
    for path in files(&root.join("wire/anthropic/streaming"), "txt") {
        let text = std::fs::read_to_string(&path).expect("read");
        let acc =
            astream::accumulate_sse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        summary.push_str(&format!(
            "== {}\ncomplete: {}\nproblems: {:?}\n{}\n",
            name(&path, &root),
            acc.complete,
            acc.problems,
            serde_json::to_string_pretty(&acc.message).expect("json")
        ));
    }
    insta::assert_snapshot!("anthropic_streams", summary);
}

#[test]
fn unknown_blocks_and_deltas_survive_streams() {
    let Some(root) = fixtures() else { return };
    let text =
        std::fs::read_to_string(root.join("wire/anthropic/streaming/compaction_response.txt"))
            .expect("read");
    let acc = astream::accumulate_sse(&text).expect("accumulates");
    let first = serde_json::to_value(&acc.message.content[0]).expect("json");
    assert_eq!(first["type"], "compaction");
    assert_eq!(first["content"], "Earlier conversation summarized.");
    assert_eq!(
        first["encrypted_content"],
        "EpwBCioIDxgCEAEYASJALd_opaque_compaction_payload"
    );
    let text = std::fs::read_to_string(root.join("wire/anthropic/streaming/fallback_response.txt"))
        .expect("read");
    let acc = astream::accumulate_sse(&text).expect("accumulates");
    let first = serde_json::to_value(&acc.message.content[0]).expect("json");
    assert_eq!(first["type"], "fallback");
    assert_eq!(first["to"]["model"], "claude-sonnet-4-5");
    // Cut stream: reported, repaired as far as it goes, no panic.
    let text = std::fs::read_to_string(
        root.join("wire/anthropic/streaming/incomplete_partial_json_response.txt"),
    )
    .expect("read");
    let acc = astream::accumulate_sse(&text).expect("accumulates");
    assert!(!acc.complete);
    assert!(
        acc.problems.iter().any(|p| p.contains("cut mid-JSON")),
        "{:?}",
        acc.problems
    );
    assert_eq!(acc.message.stop_reason.as_deref(), Some("max_tokens"));
}

/// Each recorded exchange of the tool runner: the request parses, the response parses (JSON) or
/// accumulates (SSE), and the assistant message the next request sends back is exactly what the
/// response accumulated to.
#[test]
fn tool_runner_exchanges_reproduce_the_next_request() {
    let Some(root) = fixtures() else { return };
    let mut checked_streams = 0;
    let mut checked_json = 0;
    for path in files(&root.join("wire/anthropic/tool-runner"), "json") {
        let exchanges: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let mut requests = Vec::new();
        let mut finals = Vec::new();
        for (i, ex) in exchanges.iter().enumerate() {
            let body = &ex["request"]["body"];
            let req = AnthropicRequest::from_json_value(body.clone())
                .unwrap_or_else(|e| panic!("{} [{i}] request: {e}", path.display()));
            // The wire type writes back exactly what it read.
            assert_eq!(
                serde_json::to_value(&req).expect("json"),
                *body,
                "{} [{i}]",
                path.display()
            );
            requests.push(req);
            let response = &ex["response"]["body"];
            let status = ex["response"]["status_code"].as_u64().unwrap_or(0);
            let message = match response {
                Value::String(sse) => Some(
                    astream::accumulate_sse(sse)
                        .expect("stream accumulates")
                        .message,
                ),
                Value::Object(_) if status == 200 => Some(
                    serde_json::from_value::<AnthropicResponse>(response.clone())
                        .unwrap_or_else(|e| panic!("{} [{i}] response: {e}", path.display())),
                ),
                _ => None,
            };
            finals.push((message, response.is_string()));
        }
        for (i, (message, streamed)) in finals.iter().enumerate() {
            let (Some(message), Some(next)) = (message, requests.get(i + 1)) else {
                continue;
            };
            // A runner that compacts instead of continuing sends no assistant turn back.
            let Some(expected) = next
                .messages
                .iter()
                .rev()
                .find(|m| m.role == ba_protocol::Role::Assistant)
            else {
                continue;
            };
            let Content::Blocks(expected_blocks) = &expected.content else {
                panic!("blocks expected")
            };
            assert_eq!(
                &message.content,
                expected_blocks,
                "{} exchange {i}",
                path.display()
            );
            if *streamed {
                checked_streams += 1
            } else {
                checked_json += 1
            }
        }
    }
    assert!(
        checked_streams >= 2 && checked_json >= 5,
        "streams {checked_streams}, json {checked_json}"
    );
}

#[test]
fn tool_runner_requests_convert_both_ways() {
    let Some(root) = fixtures() else { return };
    let mut summary = String::new();
    for path in files(&root.join("wire/anthropic/tool-runner"), "json") {
        let exchanges: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        // The last request holds the whole conversation.
        let Some(last) = exchanges.last() else {
            continue;
        };
        let req =
            AnthropicRequest::from_json_value(last["request"]["body"].clone()).expect("parses");
        let log = anthropic_to_log(&req, &mut SequentialStamp::default()).expect("converts");
        let problems = ba_protocol::check_log(&log.value);
        if last["response"]["status_code"] == 400 {
            // The API refused this request; the check finds why before sending it.
            assert!(
                problems
                    .iter()
                    .any(|p| matches!(p, ba_protocol::Problem::OrphanResult { .. })),
                "{}: {problems:?}",
                path.display()
            );
            continue;
        }
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
        let back = log_to_anthropic(&log.value);
        assert_eq!(
            back.value.conversation_json(),
            req.conversation_json(),
            "{}",
            path.display()
        );
        let openai = log_to_openai(&log.value);
        let again = openai_to_log(&openai.value, &mut SequentialStamp::default());
        assert_eq!(log_to_openai(&again.value).value, openai.value);
        summary.push_str(&format!(
            "== {}\nlosses: {:?}\n{}\n",
            name(&path, &root),
            openai
                .losses
                .iter()
                .map(|l| format!("{}: {}", l.path, l.what))
                .collect::<Vec<_>>(),
            serde_json::to_string_pretty(&openai.value.conversation_json()).expect("json")
        ));
    }
    insta::assert_snapshot!("tool_runner_to_openai", summary);
}

#[test]
fn openai_examples_parse_and_stream() {
    let Some(root) = fixtures() else { return };
    let mut summary = String::new();
    for path in files(&root.join("wire/openai/examples"), "json") {
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        if let Some(request) = doc.get("request").filter(|r| r.get("messages").is_some()) {
            let req = ChatRequest::from_json_value(request.clone())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                serde_json::to_value(&req).expect("json"),
                *request,
                "{}",
                path.display()
            );
            let log = openai_to_log(&req, &mut SequentialStamp::default());
            let anthropic = log_to_anthropic(&log.value);
            summary.push_str(&format!(
                "== {} → anthropic\nlosses: {:?}\n{}\n",
                name(&path, &root),
                anthropic
                    .losses
                    .iter()
                    .map(|l| format!("{}: {}", l.path, l.what))
                    .collect::<Vec<_>>(),
                serde_json::to_string_pretty(&anthropic.value.conversation_json()).expect("json")
            ));
        }
        if let Some(response) = doc.get("response").filter(|r| r.get("choices").is_some()) {
            let parsed: ChatResponse = serde_json::from_value(response.clone())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                serde_json::to_value(&parsed).expect("json"),
                *response,
                "{}",
                path.display()
            );
        }
        if let Some(Value::Array(items)) = doc.get("response").and_then(|r| r.get("data")) {
            for item in items {
                let _: ChatResponse = serde_json::from_value(item.clone())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
        if let Some(Value::Array(chunks)) = doc.get("response_chunks") {
            let acc = ostream::accumulate_chunks(chunks).expect("accumulates");
            assert!(acc.complete, "{:?}", acc.problems);
            summary.push_str(&format!(
                "== {} stream\n{}\n",
                name(&path, &root),
                serde_json::to_string_pretty(&acc.message).expect("json")
            ));
        }
    }
    insta::assert_snapshot!("openai_examples", summary);
}

#[test]
fn openai_parallel_tool_call_stream_split_by_index() {
    // Built from the shape of the recorded chunks: two calls interleaved by `index`, the second
    // call's arguments split mid-key, whitespace-padded data lines.
    let sse = concat!(
        "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{\\\"ci\"}}]},\"finish_reason\":null}]}   \n\n",
        "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"ty\\\": \\\"Rome\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let acc = ostream::accumulate_sse(sse).expect("accumulates");
    assert!(acc.complete, "{:?}", acc.problems);
    let calls = acc.message.choices[0]
        .message
        .tool_calls
        .clone()
        .expect("calls");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].function.arguments, "{\"city\": \"Paris\"}");
    assert_eq!(calls[1].id, "call_b");
    assert_eq!(calls[1].function.arguments, "{\"city\": \"Rome\"}");
}

/// Every message of every Claude Code transcript reads as an Anthropic message, and the log the
/// session converts to keeps every tool_use paired with its tool_result.
#[test]
fn claude_code_transcripts_keep_every_pair() {
    let Some(root) = fixtures() else { return };
    let mut sessions = 0;
    for path in files(&root.join("transcripts"), "jsonl") {
        let text = std::fs::read_to_string(&path).expect("read");
        let mut uses = HashSet::new();
        let mut results = HashSet::new();
        for (i, line) in text.lines().enumerate() {
            let record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
            let Some(message) = record.get("message") else {
                continue;
            };
            let parsed: AnthropicMessage = serde_json::from_value(message.clone())
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
            // Nothing lost: the typed message writes back the same JSON.
            assert_eq!(
                serde_json::to_value(&parsed).expect("json"),
                *message,
                "{}:{}",
                path.display(),
                i + 1
            );
            let m = parsed.to_message();
            uses.extend(m.tool_uses().map(|u| u.id.clone()));
            results.extend(m.tool_results().map(|r| r.tool_use_id.clone()));
        }
        assert_eq!(uses, results, "{}: unpaired tool calls", path.display());
        let log = ba_protocol::claude_code::session_to_log(&text).value;
        let problems = ba_protocol::check_log(&log);
        assert!(
            problems.is_empty(),
            "{}: {:?}",
            path.display(),
            &problems[..problems.len().min(5)]
        );
        let calls: HashSet<String> = log
            .iter()
            .flat_map(|e| e.calls().iter().map(|c| c.id.clone()))
            .collect();
        assert_eq!(calls, uses, "{}", path.display());
        sessions += 1;
    }
    assert!(sessions >= 15, "only {sessions} transcripts found");
}

/// What the converter emits for OpenAI uses only the fields OpenAI's request-message schema
/// defines for each role (the schema of the shared fixtures is the field list).
#[test]
fn emitted_openai_messages_use_schema_fields_only() {
    let Some(root) = fixtures() else { return };
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            root.join("wire/openai/schemas/ChatCompletionRequestMessage.schema.json"),
        )
        .expect("read"),
    )
    .expect("json");
    let defs = &schema["$defs"];
    let fields = |def: &str| -> HashSet<String> {
        defs[def]["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    let mut checked = 0;
    let mut conversations = Vec::new();
    for path in files(&root.join("wire/anthropic/tool-runner"), "json") {
        let exchanges: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        if let Some(last) = exchanges
            .iter()
            .rev()
            .find(|e| e["response"]["status_code"] == 200)
        {
            conversations.push(
                AnthropicRequest::from_json_value(last["request"]["body"].clone()).expect("parses"),
            );
        }
    }
    for req in conversations {
        let log = anthropic_to_log(&req, &mut SequentialStamp::default())
            .expect("converts")
            .value;
        let openai = serde_json::to_value(log_to_openai(&log).value.conversation()).expect("json");
        for message in openai["messages"].as_array().expect("messages") {
            let def = match message["role"].as_str() {
                Some("system") => "ChatCompletionRequestSystemMessage",
                Some("developer") => "ChatCompletionRequestDeveloperMessage",
                Some("user") => "ChatCompletionRequestUserMessage",
                Some("assistant") => "ChatCompletionRequestAssistantMessage",
                Some("tool") => "ChatCompletionRequestToolMessage",
                other => panic!("unexpected role {other:?}"),
            };
            let allowed = fields(def);
            for key in message.as_object().expect("object").keys() {
                assert!(
                    allowed.contains(key),
                    "{def} has no field `{key}`: {message}"
                );
            }
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let allowed = fields("ChatCompletionMessageToolCall");
                assert!(
                    call.as_object()
                        .expect("object")
                        .keys()
                        .all(|k| allowed.contains(k)),
                    "{call}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} messages checked");
}
