//! The Responses API: recorded objects and streams (written in the documented shapes, in
//! `tests/data/responses/`) read, accumulate and convert exactly; what other APIs cannot take
//! is named.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::convert::{
    RESPONSES_KEY, SequentialStamp, anthropic_to_log, log_to_anthropic, log_to_openai,
    log_to_responses, openai_to_log, reasoning_of, response_to_log, responses_to_anthropic,
    responses_to_log, responses_to_openai,
};
use ba_protocol::responses::{ResponseItem, ResponsesRequest, ResponsesResponse};
use ba_protocol::stream::responses::accumulate_sse;
use ba_protocol::{Content, ContentBlock, LogEntry, LogRole, check_log};
use serde_json::{Value, json};

fn data(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/responses")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_of(name: &str) -> Value {
    serde_json::from_str(&data(name)).unwrap()
}

#[test]
fn a_request_reads_and_writes_back_the_same_json() {
    let text = data("request-tools.json");
    let req = ResponsesRequest::from_json(&text).unwrap();
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json_of("request-tools.json")
    );
    let items = req.items();
    let kinds: Vec<&str> = items.iter().map(ResponseItem::kind).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "compaction",
            "message",
            "message"
        ]
    );
    assert!(matches!(&items[8], ResponseItem::Other(raw) if raw["type"] == "compaction"));
}

#[test]
fn a_request_goes_through_the_log_and_back_unchanged() {
    let req = ResponsesRequest::from_json(&data("request-tools.json")).unwrap();
    let log = responses_to_log(&req, &mut SequentialStamp::default()).unwrap();
    // The other request fields are named, not carried.
    let lost: Vec<&str> = log.losses.iter().map(|l| l.path.as_str()).collect();
    for field in ["model", "store", "include", "tools", "prompt_cache_key"] {
        assert!(lost.contains(&field), "{field} not named: {lost:?}");
    }
    let entries = log.value;
    assert!(check_log(&entries).is_empty(), "{:?}", check_log(&entries));
    let roles: Vec<LogRole> = entries.iter().map(|e| e.role).collect();
    use LogRole::*;
    assert_eq!(
        roles,
        [
            System, Developer, User, Assistant, Tool, Tool, Assistant, Assistant, User
        ]
    );
    // The reasoning, the text and both calls are one assistant turn; the calls keep their
    // `call_id`, and the reasoning its encrypted content.
    let turn = &entries[3];
    assert_eq!(turn.calls().len(), 2);
    assert_eq!(turn.calls()[0].id, "call_Qm2x7Jf1sT9bV4nL8pR3wK6y");
    let Some(Content::Blocks(blocks)) = &turn.content else {
        panic!("{turn:?}")
    };
    let ContentBlock::Thinking(thinking) = &blocks[0] else {
        panic!("{blocks:?}")
    };
    assert!(thinking.thinking.starts_with("**Comparing two regions**"));
    let reasoning = reasoning_of(thinking).expect("the reasoning item is kept");
    assert!(
        reasoning
            .encrypted_content
            .unwrap()
            .starts_with("gAAAAABowfCj")
    );
    // Through the log's JSON, as a store keeps it, and back: the same conversation.
    let stored = LogEntry::parse_jsonl(&LogEntry::to_jsonl(&entries)).unwrap();
    let back = log_to_responses(&stored);
    assert!(back.losses.is_empty(), "{:?}", back.losses);
    assert_eq!(back.value.conversation_json(), req.conversation_json());
}

#[test]
fn toward_anthropic_and_chat_the_losses_are_named_and_the_turns_kept() {
    let req = ResponsesRequest::from_json(&data("request-tools.json")).unwrap();
    let anthropic = responses_to_anthropic(&req).unwrap();
    let what: Vec<&str> = anthropic.losses.iter().map(|l| l.what.as_str()).collect();
    assert!(
        what.iter().any(|w| w.contains("reasoning item")),
        "{what:?}"
    );
    assert!(
        what.iter().any(|w| w.contains("`compaction` item")),
        "{what:?}"
    );
    assert!(
        what.iter().any(|w| w.contains("`logprobs` was left out")),
        "{what:?}"
    );
    let body = serde_json::to_value(anthropic.value.conversation()).unwrap();
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a business analyst. Answer from the data."},
               {"type": "text", "text": "Amounts are in euros."}])
    );
    assert_eq!(body["messages"][0]["content"][1]["type"], "image");
    assert_eq!(
        body["messages"][0]["content"][1]["source"]["media_type"],
        "image/png"
    );
    let assistant = &body["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "text", "text": "I'll pull both regions' Q3 revenue."})
    );
    assert_eq!(assistant[1]["id"], "call_Qm2x7Jf1sT9bV4nL8pR3wK6y");
    assert_eq!(
        assistant[2]["input"]["sql"],
        "SELECT SUM(amount) FROM sales WHERE region = 'APAC' AND quarter = 'Q3'"
    );
    assert_eq!(
        body["messages"][2]["content"][1]["tool_use_id"],
        "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r"
    );

    let chat = responses_to_openai(&req).unwrap();
    let what: Vec<&str> = chat.losses.iter().map(|l| l.what.as_str()).collect();
    assert!(
        what.iter().any(|w| w.contains("reasoning item")),
        "{what:?}"
    );
    assert!(
        what.iter().any(|w| w.contains("`compaction` item")),
        "{what:?}"
    );
    let body = serde_json::to_value(chat.value.conversation()).unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[2]["content"][1]["type"], "image_url");
    assert_eq!(
        messages[3]["tool_calls"][1]["id"],
        "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r"
    );
    assert_eq!(messages[5]["tool_call_id"], "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r");
    // No Responses-only field leaks into the Chat body.
    assert!(!body.to_string().contains(RESPONSES_KEY), "{body}");
    assert!(!body.to_string().contains("encrypted_content"), "{body}");
}

#[test]
fn streams_accumulate_to_the_recorded_response() {
    for (stream, object) in [
        ("stream-parallel-calls.sse", "response-parallel-calls.json"),
        ("stream-refusal.sse", "response-refusal.json"),
    ] {
        let acc = accumulate_sse(&data(stream)).unwrap();
        assert!(acc.complete, "{stream}: {:?}", acc.problems);
        let expected = ResponsesResponse::from_json(&data(object)).unwrap();
        assert_eq!(acc.message, expected, "{stream}");
        assert_eq!(
            serde_json::to_value(&acc.message).unwrap(),
            json_of(object),
            "{stream}"
        );
    }
}

#[test]
fn a_response_is_one_assistant_turn_in_the_log() {
    let resp = ResponsesResponse::from_json(&data("response-parallel-calls.json")).unwrap();
    let usage = resp.usage.as_ref().unwrap();
    assert_eq!(
        (usage.cached_tokens(), usage.reasoning_tokens()),
        (1536, 256)
    );
    let log = response_to_log(&resp, &mut SequentialStamp::default()).unwrap();
    assert_eq!(log.value.len(), 1);
    let turn = &log.value[0];
    assert_eq!(turn.calls().len(), 2);
    assert!(log.losses.iter().any(|l| l.path == "usage"));
    // Back to Responses: the output items as they were.
    let back = log_to_responses(&log.value);
    assert!(back.losses.is_empty(), "{:?}", back.losses);
    assert_eq!(back.value.items().into_owned(), resp.output);

    let refusal = ResponsesResponse::from_json(&data("response-refusal.json")).unwrap();
    assert!(refusal.output_text().starts_with("I can't help"));
    let log = response_to_log(&refusal, &mut SequentialStamp::default()).unwrap();
    let anthropic = log_to_anthropic(&log.value);
    // Anthropic has no refusal part: named, not dropped silently.
    assert!(
        anthropic.losses.iter().any(|l| l.what.contains("refusal")),
        "{:?}",
        anthropic.losses
    );
    let chat = log_to_openai(&log.value);
    let body = serde_json::to_value(chat.value.conversation()).unwrap();
    assert_eq!(body["messages"][0]["content"][0]["type"], "refusal");
}

#[test]
fn a_cut_stream_keeps_what_came_and_says_what_is_missing() {
    let text = data("stream-parallel-calls.sse");
    let cut_at = text
        .find("\"output_index\": 3, \"delta\"")
        .and_then(|at| text[at..].find("\n\n").map(|end| at + end + 2))
        .unwrap();
    let acc = accumulate_sse(&text[..cut_at]).unwrap();
    assert!(!acc.complete);
    assert!(
        acc.problems
            .iter()
            .any(|p| p.contains("output[3]") && p.contains("not complete JSON")),
        "{:?}",
        acc.problems
    );
    assert!(
        acc.problems
            .iter()
            .any(|p| p.contains("response.completed")),
        "{:?}",
        acc.problems
    );
    assert_eq!(acc.message.output.len(), 4);
    assert_eq!(
        acc.message.output_text(),
        "I'll pull both regions' Q3 revenue."
    );
}

#[test]
fn bad_input_is_named() {
    let err = ResponsesRequest::from_json(r#"{"input": [{"type": "message", "role": "user", "content": "hi"}, {"type": "function_call", "name": "f"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("input[1]") && err.contains("call_id"), "{err}");
    let err = ResponsesRequest::from_json(r#"{"input": [{"role": "robot", "content": "hi"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("input[0]") && err.contains("robot"), "{err}");
    let err = ResponsesRequest::from_json(r#"{"input": 3}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("input") && err.contains("number"), "{err}");
    let err = ResponsesResponse::from_json(r#"{"id": "r", "output": [{"content": "x"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("output[0]"), "{err}");
}

#[test]
fn anthropic_thinking_is_named_toward_responses() {
    let req = ba_protocol::anthropic::AnthropicRequest::from_json(
        r#"{"messages": [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                                {"type": "text", "text": "hello"}]}]}"#,
    )
    .unwrap();
    let log = anthropic_to_log(&req, &mut SequentialStamp::default())
        .unwrap()
        .value;
    let out = log_to_responses(&log);
    assert!(
        out.losses.iter().any(|l| l.what.contains("thinking")),
        "{:?}",
        out.losses
    );
    assert_eq!(
        serde_json::to_value(&out.value.input).unwrap(),
        json!([{"type": "message", "role": "user", "content": "hi"},
               {"type": "message", "role": "assistant", "content": "hello"}])
    );
    // Chat → Responses: plain text stays plain.
    let chat = ba_protocol::openai::ChatRequest::from_json(
        r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#,
    )
    .unwrap();
    let log = openai_to_log(&chat, &mut SequentialStamp::default()).value;
    let out = log_to_responses(&log);
    assert!(out.losses.is_empty());
    assert_eq!(
        serde_json::to_value(&out.value.input).unwrap(),
        json!([{"type": "message", "role": "user", "content": "hi"},
               {"type": "message", "role": "assistant", "content": "hello"}])
    );
}

#[test]
fn a_part_index_past_the_bound_is_ignored_and_named() {
    let text = "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n\
event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":1000000000000,\"delta\":\"x\"}\n\n\
event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"West\"}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\"}}\n\n";
    let acc = accumulate_sse(text).unwrap();
    assert_eq!(acc.message.output_text(), "West");
    assert!(
        acc.problems
            .iter()
            .any(|p| p.contains("1 event(s) named a part past 4096")),
        "{:?}",
        acc.problems
    );
}
