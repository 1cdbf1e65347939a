//! Property tests for the Responses API: Responses → log → Responses is the identity (through
//! the log's JSON too), and a Responses conversation taken through Anthropic Messages or Chat
//! Completions and back keeps every text, call and result, in order, with each thing the other
//! API cannot carry named as a loss.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::convert::{
    SequentialStamp, anthropic_to_log, log_to_responses, openai_to_log, responses_to_anthropic,
    responses_to_log, responses_to_openai,
};
use ba_protocol::responses::{
    FunctionOutput, MessageContent, ResponseItem, ResponsesInput, ResponsesRequest,
};
use ba_protocol::{JsonMap, LogEntry};
use proptest::prelude::*;
use serde_json::{Value, json};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,!?]{1,40}",
        "[\\p{Han}a-z ]{1,20}",
        Just("line one\nline two\n\t\"quoted\" \\ back".to_owned()),
        Just("emoji 👍🏽 and flags 🇫🇷".to_owned()),
    ]
}

fn item(value: Value) -> ResponseItem {
    ResponseItem::from_value(value).unwrap()
}

fn user_message() -> impl Strategy<Value = ResponseItem> {
    let content = prop_oneof![
        text().prop_map(Value::from),
        (text(), any::<bool>()).prop_map(|(t, image)| {
            let mut parts = vec![json!({"type": "input_text", "text": t})];
            if image {
                parts.push(json!({"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}));
            }
            Value::Array(parts)
        }),
    ];
    (content, any::<bool>()).prop_map(|(content, typed)| {
        let mut m = json!({"role": "user", "content": content});
        if typed {
            m["type"] = json!("message");
        }
        item(m)
    })
}

fn assistant_message(n: usize) -> impl Strategy<Value = ResponseItem> {
    let part = (text(), 0..3u8).prop_map(|(t, shape)| match shape {
        0 => json!({"type": "output_text", "text": t, "annotations": []}),
        1 => json!({"type": "output_text", "text": t, "annotations": [{"type": "url_citation", "url": "https://example.com", "start_index": 0, "end_index": 1}], "logprobs": []}),
        _ => json!({"type": "refusal", "refusal": t}),
    });
    let content = prop_oneof![
        text().prop_map(Value::from),
        prop::collection::vec(part, 1..3).prop_map(Value::Array),
    ];
    (content, any::<bool>()).prop_map(move |(content, with_id)| {
        let mut m = json!({"type": "message", "role": "assistant", "content": content});
        if with_id {
            m["id"] = json!(format!("msg_{n}"));
            m["status"] = json!("completed");
        }
        item(m)
    })
}

fn reasoning(n: usize) -> impl Strategy<Value = ResponseItem> {
    (
        prop::collection::vec(text(), 0..3),
        prop::option::of("[A-Za-z0-9+/=]{8,40}"),
    )
        .prop_map(move |(summary, encrypted)| {
            let summary: Vec<Value> = summary
                .into_iter()
                .map(|t| json!({"type": "summary_text", "text": t}))
                .collect();
            let mut r = json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": summary});
            if let Some(e) = encrypted {
                r["encrypted_content"] = json!(e);
            }
            item(r)
        })
}

fn arguments() -> impl Strategy<Value = String> {
    prop_oneof![
        ("[a-z]{1,6}", text()).prop_map(|(k, v)| json!({ k: v }).to_string()),
        Just("{\n  \"sql\": \"SELECT 1\"\n}".to_owned()),
        Just("{}".to_owned()),
    ]
}

/// One assistant run (reasoning, messages and calls, in any order when `any_order`) and the
/// outputs of its calls.
fn turn(n: usize, any_order: bool) -> impl Strategy<Value = Vec<ResponseItem>> {
    let calls = prop::collection::vec(("[a-z_]{1,10}", arguments(), any::<bool>()), 0..4);
    let outputs = prop::collection::vec((text(), any::<bool>()), 4);
    (
        prop::option::of(reasoning(n)),
        prop::collection::vec(assistant_message(n), 0..2),
        calls,
        outputs,
        any::<u64>(),
        prop::option::of(text()),
    )
        .prop_map(move |(reasoning, messages, calls, outputs, seed, compaction)| {
            let mut run: Vec<ResponseItem> = reasoning.into_iter().collect();
            run.extend(messages);
            let mut call_ids = Vec::new();
            for (k, (name, arguments, with_id)) in calls.into_iter().enumerate() {
                let call_id = format!("call_{n}_{k}");
                let mut c = json!({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments});
                if with_id {
                    c["id"] = json!(format!("fc_{n}_{k}"));
                    c["status"] = json!("completed");
                }
                call_ids.push(call_id);
                run.push(item(c));
            }
            if any_order && run.len() > 1 {
                let by = usize::try_from(seed % run.len() as u64).unwrap_or(0);
                run.rotate_left(by);
            }
            for (call_id, (out, parts)) in call_ids.into_iter().zip(outputs) {
                let output = if parts {
                    json!([{"type": "input_text", "text": out}])
                } else {
                    json!(out)
                };
                run.push(item(json!({"type": "function_call_output", "call_id": call_id, "output": output})));
            }
            if let Some(c) = compaction {
                run.push(item(json!({"type": "compaction", "id": format!("cmp_{n}"), "encrypted_content": c})));
            }
            run
        })
}

fn conversation(any_order: bool) -> impl Strategy<Value = ResponsesRequest> {
    (
        prop::option::of(text()),
        prop::option::of(text()),
        prop::collection::vec(user_message(), 4),
        0usize..4,
        (
            turn(0, any_order),
            turn(1, any_order),
            turn(2, any_order),
            turn(3, any_order),
        ),
    )
        .prop_map(|(instructions, developer, users, turns, runs)| {
            let mut items = Vec::new();
            if let Some(d) = developer {
                items.push(item(json!({"role": "developer", "content": d})));
            }
            let runs = [runs.0, runs.1, runs.2, runs.3];
            for (user, run) in users.into_iter().zip(runs).take(turns + 1) {
                items.push(user);
                items.extend(run);
            }
            let mut map = JsonMap::new();
            map.insert("model".to_owned(), json!("gpt-5"));
            ResponsesRequest {
                instructions,
                input: ResponsesInput::Items(items),
                extra: map,
            }
        })
}

/// What any API carries: texts (by role, system and developer alike), calls and results,
/// in order.
#[derive(Debug, PartialEq)]
enum Atom {
    Text(&'static str, String),
    Call(String, String, Value),
    Output(String, String),
}

fn atoms(req: &ResponsesRequest) -> Vec<Atom> {
    let mut out = Vec::new();
    if let Some(i) = &req.instructions {
        out.push(Atom::Text("system", i.clone()));
    }
    for item in req.items().iter() {
        match item {
            ResponseItem::Message(m) => {
                let role = match m.role.as_str() {
                    "developer" | "system" => "system",
                    "user" => "user",
                    _ => "assistant",
                };
                match &m.content {
                    MessageContent::Text(t) => out.push(Atom::Text(role, t.clone())),
                    MessageContent::Parts(parts) => {
                        for p in parts {
                            if let Some(t) = p.get("text").and_then(Value::as_str) {
                                out.push(Atom::Text(role, t.to_owned()));
                            }
                        }
                    }
                }
            }
            ResponseItem::FunctionCall(c) => out.push(Atom::Call(
                c.call_id.clone(),
                c.name.clone(),
                serde_json::from_str(&c.arguments).unwrap(),
            )),
            ResponseItem::FunctionCallOutput(o) => {
                let text = match &o.output {
                    FunctionOutput::Text(t) => t.clone(),
                    FunctionOutput::Parts(parts) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                out.push(Atom::Output(o.call_id.clone(), text));
            }
            ResponseItem::Reasoning(_) | ResponseItem::Other(_) => {}
        }
    }
    out
}

/// `atoms` with an assistant's text parts that follow each other joined, paragraphs apart: a
/// turn written from the log without the API's ids goes as one input message of plain text.
fn joined(atoms: Vec<Atom>) -> Vec<Atom> {
    let mut out: Vec<Atom> = Vec::new();
    for atom in atoms {
        if let (Atom::Text("assistant", next), Some(Atom::Text("assistant", text))) =
            (&atom, out.last_mut())
        {
            text.push_str("\n\n");
            text.push_str(next);
            continue;
        }
        out.push(atom);
    }
    out
}

fn count(req: &ResponsesRequest, kind: &str) -> usize {
    req.items().iter().filter(|i| i.kind() == kind).count()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn responses_log_responses_is_identity(req in conversation(true)) {
        let log = responses_to_log(&req, &mut SequentialStamp::default()).unwrap();
        prop_assert!(ba_protocol::check_log(&log.value).is_empty(), "{:?}", ba_protocol::check_log(&log.value));
        let stored = LogEntry::parse_jsonl(&LogEntry::to_jsonl(&log.value)).unwrap();
        let back = log_to_responses(&stored);
        prop_assert!(back.losses.is_empty(), "losses: {:?}", back.losses);
        prop_assert_eq!(back.value.conversation_json(), req.conversation_json());
    }

    #[test]
    fn through_anthropic_the_conversation_is_kept_and_reasoning_named(req in conversation(true)) {
        let anthropic = responses_to_anthropic(&req).unwrap();
        let reasoning = anthropic.losses.iter().filter(|l| l.what.contains("reasoning item")).count();
        prop_assert_eq!(reasoning, count(&req, "reasoning"));
        let foreign = anthropic.losses.iter().filter(|l| l.what.contains("`compaction` item")).count();
        prop_assert_eq!(foreign, count(&req, "compaction"));
        let log = anthropic_to_log(&anthropic.value, &mut SequentialStamp::default()).unwrap().value;
        let back = log_to_responses(&log).value;
        prop_assert_eq!(joined(atoms(&back)), joined(atoms(&req)));
    }

    #[test]
    fn through_chat_completions_the_conversation_is_kept_and_reasoning_named(req in conversation(false)) {
        let chat = responses_to_openai(&req).unwrap();
        let reasoning = chat.losses.iter().filter(|l| l.what.contains("reasoning item")).count();
        prop_assert_eq!(reasoning, count(&req, "reasoning"));
        let log = openai_to_log(&chat.value, &mut SequentialStamp::default()).value;
        let back = log_to_responses(&log).value;
        prop_assert_eq!(joined(atoms(&back)), joined(atoms(&req)));
    }
}
