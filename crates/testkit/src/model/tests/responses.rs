//! The OpenAI Responses API wire: input items read into the view, answers as a `response`
//! object and as its typed event stream, over HTTP with a raw client.

use super::*;

/// The conversation of [`openai_body`] as Responses API input items, with a reasoning item
/// sent back before the round of calls.
pub(super) fn responses_body() -> Value {
    json!({
        "model": "gpt-test",
        "instructions": "You are an analyst.",
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "Cite files as <file_ref>."}]},
            {"role": "user", "content": "Hello"},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text",
                 "text": "Compare <file_ref>upload_002</file_ref> with upload_001, not xupload_003 or upload_12."},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Both."}],
             "encrypted_content": "enc-1"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Reading both.", "annotations": []}]},
            {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "file_reader",
             "arguments": "{\"path\":\"upload_002\"}", "status": "completed"},
            {"type": "function_call", "call_id": "call_b", "name": "run_python",
             "arguments": "{\"code\":\"1/0\"}"},
            {"type": "function_call_output", "call_id": "call_a", "output": "a,b\n1,2"},
            {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text",
             "text": "Operation failed.\n\nError Type: execution_error\nError Message: ZeroDivisionError"}]}
        ],
        "tools": [{"type": "function", "name": "file_reader", "description": "Reads.",
                   "parameters": {}, "strict": false},
                  {"type": "function", "name": "run_python", "parameters": {}},
                  {"type": "web_search"}],
        "stream": true
    })
}

#[test]
fn responses_items_make_one_assistant_turn_and_keep_the_reasoning_sent_back() {
    let r = Request::new(Wire::Responses, responses_body());
    assert_eq!(r.path(), "/v1/responses");
    assert_eq!(r.reasoning_sent_back(), ["enc-1"]);
    // The reasoning, the assistant message and both calls are one turn; calls go by call_id.
    let ids: Vec<&str> = r.messages()[3]
        .calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    assert_eq!(r.tool_results()[0].call_id, "call_a");
    assert!(
        Request::new(Wire::OpenAi, openai_body())
            .reasoning_sent_back()
            .is_empty()
    );

    // A string input is one user message.
    let r = Request::new(
        Wire::Responses,
        json!({"instructions": "Be brief.", "input": "Read upload_001"}),
    );
    assert_eq!(
        (r.last_user_text(), r.system(), r.round()),
        ("Read upload_001", "Be brief.", 0)
    );
    assert_eq!(r.uploads(), ["upload_001"]);
    assert!(r.messages().len() == 1 && r.reasoning_sent_back().is_empty());

    // Two rounds; items of other types are left out; a refusal is text; reasoning without
    // encrypted content is not sent back.
    let r = Request::new(
        Wire::Responses,
        json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "reasoning", "id": "rs_x", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "t", "arguments": ""},
            {"type": "function_call_output", "call_id": "c1", "output": "r1"},
            {"type": "reasoning", "id": "rs_y", "summary": [], "encrypted_content": "e2"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "refusal", "refusal": "I cannot."}]},
            {"type": "function_call", "call_id": "c2", "name": "t", "arguments": "not json"},
            {"type": "item_reference", "id": "msg_9"},
            {"type": "function_call_output", "call_id": "c2", "output": "r2"}
        ]}),
    );
    let roles: Vec<Role> = r.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool
        ]
    );
    assert_eq!(r.round(), 2);
    assert_eq!(r.messages()[1].calls[0].input, json!({}));
    assert_eq!(r.messages()[3].text, "I cannot.");
    assert_eq!(r.messages()[3].calls[0].input, json!("not json"));
    assert_eq!(r.reasoning_sent_back(), ["e2"]);
    let last = r.last_result().unwrap();
    assert_eq!((last.name.as_str(), last.text.as_str()), ("t", "r2"));
    assert_eq!(r.tool_results().len(), 2);
}

/// `(event name, data)` of each event, checking the name is the data's `type`.
fn typed(events: &[String]) -> Vec<Value> {
    let values = data(events);
    for (event, value) in events.iter().zip(&values) {
        let name = event
            .lines()
            .next()
            .unwrap()
            .strip_prefix("event: ")
            .unwrap();
        assert_eq!(value["type"], name, "{event}");
        assert!(event.ends_with("}\n\n"), "{event}");
    }
    values
}

/// The event types with each run of deltas written once.
fn shape(events: &[Value]) -> Vec<&str> {
    let mut types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    types.dedup_by(|a, b| a == b && a.ends_with(".delta"));
    types
}

fn without_created_at(mut response: Value) -> Value {
    response.as_object_mut().unwrap().remove("created_at");
    response
}

#[test]
fn responses_stream_rebuilds_the_json_answer() {
    let a = answer(true);
    let events = typed(&a.responses_events());
    assert_eq!(
        shape(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], json!(i), "{e}");
    }
    let started = &events[0]["response"];
    assert_eq!(started["status"], "in_progress");
    assert_eq!(started["output"], json!([]));
    assert_eq!(events[1]["response"], *started);

    // Rebuild the items from the deltas, as a client does.
    let mut items: Vec<Value> = Vec::new();
    let mut argument_pieces: Vec<String> = Vec::new();
    for e in &events {
        let kind = e["type"].as_str().unwrap();
        let at = e["output_index"].as_u64().map(|i| i as usize);
        if let Some(i) = at.filter(|_| kind != "response.output_item.added") {
            assert_eq!(
                e["item_id"].as_str().or(e["item"]["id"].as_str()),
                items[i]["id"].as_str()
            );
        }
        let append = |value: &mut Value, piece: &Value| {
            *value = json!(value.as_str().unwrap().to_owned() + piece.as_str().unwrap());
        };
        match kind {
            "response.output_item.added" => {
                assert_eq!(at, Some(items.len()));
                items.push(e["item"].clone());
            }
            "response.reasoning_summary_part.added" => {
                items[at.unwrap()]["summary"] = json!([e["part"]]);
            }
            "response.reasoning_summary_text.delta" => {
                append(&mut items[at.unwrap()]["summary"][0]["text"], &e["delta"]);
            }
            "response.reasoning_summary_text.done" | "response.reasoning_summary_part.done" => {
                let text = e["text"].as_str().or(e["part"]["text"].as_str());
                assert_eq!(items[at.unwrap()]["summary"][0]["text"].as_str(), text);
            }
            "response.content_part.added" => {
                items[at.unwrap()]["content"] = json!([e["part"]]);
            }
            "response.output_text.delta" => {
                append(&mut items[at.unwrap()]["content"][0]["text"], &e["delta"]);
            }
            "response.output_text.done" | "response.content_part.done" => {
                let text = e["text"].as_str().or(e["part"]["text"].as_str());
                assert_eq!(items[at.unwrap()]["content"][0]["text"].as_str(), text);
            }
            "response.function_call_arguments.delta" => {
                argument_pieces.push(e["delta"].as_str().unwrap().to_owned());
                append(&mut items[at.unwrap()]["arguments"], &e["delta"]);
            }
            "response.function_call_arguments.done" => {
                assert_eq!(items[at.unwrap()]["arguments"], e["arguments"]);
            }
            "response.output_item.done" => {
                let item = &mut items[at.unwrap()];
                assert_eq!(
                    item["status"].as_str().unwrap_or("in_progress"),
                    "in_progress"
                );
                // What the deltas do not carry: the status and the reasoning's content.
                for key in ["status", "encrypted_content"] {
                    if let Some(value) = e["item"].get(key) {
                        item[key] = value.clone();
                    }
                }
                assert_eq!(*item, e["item"]);
            }
            _ => {}
        }
    }
    let deltas = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert!((2..=3).contains(&deltas("response.reasoning_summary_text.delta")));
    assert!((2..=3).contains(&deltas("response.output_text.delta")));
    // The arguments are cut inside their strings (a piece with an odd number of quotes).
    assert!(argument_pieces.len() >= 2);
    assert!(
        argument_pieces
            .iter()
            .any(|p| p.matches('"').count() % 2 == 1)
    );

    let whole = a.responses_json();
    assert_eq!(Value::Array(items), whole["output"]);
    let completed = events.last().unwrap()["response"].clone();
    assert_eq!(
        without_created_at(completed),
        without_created_at(whole.clone())
    );
    assert_eq!(whole["status"], "completed");
    assert_eq!(whole["incomplete_details"], Value::Null);
    assert_eq!(whole["id"], "resp_scripted_0003");
    let output = whole["output"].as_array().unwrap();
    assert_eq!(output[0]["summary"][0]["text"], "Let me think.");
    assert!(!output[0]["encrypted_content"].as_str().unwrap().is_empty());
    assert_eq!(output[1]["content"][0]["text"], "Reading the file now.");
    assert_eq!(output[2]["call_id"], "toolu_1");
    let arguments: Value = serde_json::from_str(output[2]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"path": "upload_001", "note": "数据"}));
    let usage = &whole["usage"];
    assert_eq!(usage["input_tokens"], 100);
    assert_eq!(usage["output_tokens"], 20);
    assert_eq!(usage["total_tokens"], 120);
    assert!(
        usage["output_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn a_max_tokens_stop_is_an_incomplete_response() {
    for reason in ["max_tokens", "length"] {
        let a = Answer {
            calls: Vec::new(),
            stop_reason: Some(reason.into()),
            ..answer(false)
        };
        let whole = a.responses_json();
        assert_eq!(whole["status"], "incomplete", "{reason}");
        assert_eq!(
            whole["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        let events = typed(&a.responses_events());
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.incomplete");
        assert_eq!(last["response"]["status"], "incomplete");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
        assert!(!events.iter().any(|e| e["type"] == "response.completed"));
        // Still in progress when the stream starts.
        assert_eq!(events[0]["response"]["incomplete_details"], Value::Null);
    }
}

#[test]
fn cached_tokens_reach_every_streamed_usage() {
    let a = Answer {
        cached_tokens: 80,
        ..answer(false)
    };
    let anthropic = data(&a.anthropic_events());
    assert_eq!(
        anthropic[0]["message"]["usage"]["cache_read_input_tokens"],
        80
    );
    assert_eq!(anthropic[0]["message"]["usage"]["input_tokens"], 100);
    let chunks = a.openai_chunks(true);
    let usage = &data(&chunks[chunks.len() - 2..chunks.len() - 1])[0]["usage"];
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 80);
    assert_eq!(usage["prompt_tokens"], 180);
    let events = data(&a.responses_events());
    let usage = &events.last().unwrap()["response"]["usage"];
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 80);
    assert_eq!(usage["input_tokens"], 180);
    assert_eq!(usage["total_tokens"], 200);
}

// --- over HTTP ------------------------------------------------------------------------------

fn tool() -> Value {
    json!([{"type": "function", "name": "lookup", "description": "Looks a thing up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        "strict": false}])
}

#[tokio::test]
async fn a_responses_client_is_answered_by_rules() {
    let model = ScriptedModel::builder()
        .rule(
            "look it up",
            |r| r.offers("lookup") && r.round() == 0,
            |r| {
                Turn::call("lookup", json!({"query": r.last_user_text()}))
                    .with_thinking("The user wants a lookup.")
            },
        )
        .rule(
            "answer",
            |r| r.last_result().is_some(),
            |r| Turn::text(format!("Found: {}", r.last_result().unwrap().text)),
        )
        .start()
        .await;
    assert_eq!(
        model.responses_base_url(),
        format!("{}/v1", model.base_url())
    );
    let question = json!({"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "capital of France"}]});
    let mut request = json!({"model": "gpt-test", "instructions": "You are terse.",
        "input": [question], "tools": tool(), "store": false,
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "conversation-1"});
    let replies = exchange(model.base_url(), &post("/v1/responses", &request, true), 1).await;
    assert!(replies[0].0.starts_with("HTTP/1.1 200"), "{replies:?}");
    assert!(replies[0].1.contains("content-type: application/json"));
    let first: Value = serde_json::from_str(&replies[0].2).unwrap();
    assert_eq!(first["object"], "response");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["model"], "gpt-test");
    assert!(first["id"].as_str().unwrap().starts_with("resp_scripted_"));
    assert!(first["created_at"].as_u64().unwrap() > 0);
    let output = first["output"].as_array().unwrap().clone();
    assert_eq!(output.len(), 2, "{first}");
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[0]["summary"][0]["text"], "The user wants a lookup.");
    let encrypted = output[0]["encrypted_content"].as_str().unwrap().to_owned();
    let call = &output[1];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "lookup");
    assert_eq!(call["status"], "completed");
    assert!(call["id"].as_str().unwrap().starts_with("fc_scripted_"));
    let call_id = call["call_id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("call_scripted_"), "{call_id}");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"query": "capital of France"}));

    // The client sends the reasoning and the call back with the call's output, on the path
    // without `/v1`.
    request["input"] = json!([question, output[0], output[1],
        {"type": "function_call_output", "call_id": call_id, "output": "Paris"}]);
    let replies = exchange(model.base_url(), &post("/responses", &request, true), 1).await;
    let second: Value = serde_json::from_str(&replies[0].2).unwrap();
    assert_eq!(
        second["output"],
        json!([{"type": "message", "id": "msg_scripted_0001", "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Found: Paris", "annotations": []}]}])
    );
    assert_eq!(second["id"], "resp_scripted_0001");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.wire() == Wire::Responses));
    assert_eq!(requests[1].path(), "/responses");
    assert_eq!(requests[0].tools(), ["lookup"]);
    assert_eq!(requests[0].round(), 0);
    assert_eq!(requests[1].round(), 1);
    assert_eq!(requests[1].system(), "You are terse.");
    assert_eq!(requests[1].last_user_text(), "capital of France");
    let result = requests[1].last_result().unwrap();
    assert_eq!(
        (result.call_id.as_str(), result.name.as_str()),
        (call_id.as_str(), "lookup")
    );
    assert_eq!(result.input, json!({"query": "capital of France"}));
    assert_eq!(result.text, "Paris");
    assert!(!result.is_error);
    assert!(requests[0].reasoning_sent_back().is_empty());
    assert_eq!(requests[1].reasoning_sent_back(), [encrypted]);
    let body = requests[1].body();
    assert_eq!(body["prompt_cache_key"], "conversation-1");
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        model.fired(),
        [Some("look it up".to_owned()), Some("answer".to_owned())]
    );
}

#[tokio::test]
async fn a_responses_stream_goes_out_as_typed_events() {
    let model = ScriptedModel::builder()
        .rule(
            "both",
            |_| true,
            |_| {
                Turn::text("Looking that up for you.")
                    .with_call("lookup", json!({"query": "a \"quoted\" name"}))
            },
        )
        .start()
        .await;
    let request = json!({"model": "gpt-test", "input": "who?", "tools": tool(), "stream": true});
    let replies = exchange(model.base_url(), &post("/v1/responses", &request, true), 1).await;
    assert!(replies[0].0.starts_with("HTTP/1.1 200"), "{replies:?}");
    assert!(replies[0].1.contains("content-type: text/event-stream"));
    assert!(replies[0].1.contains("transfer-encoding: chunked"));
    assert!(!replies[0].2.contains("[DONE]"));
    let frames: Vec<String> = replies[0]
        .2
        .split_inclusive("\n\n")
        .map(str::to_owned)
        .collect();
    let events = typed(&frames);
    assert_eq!(events[0]["type"], "response.created");
    assert_eq!(events.last().unwrap()["type"], "response.completed");
    let numbers: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    let joined = |kind: &str| {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["delta"].as_str().unwrap())
            .collect::<String>()
    };
    let output = &events.last().unwrap()["response"]["output"];
    assert_eq!(
        joined("response.output_text.delta"),
        output[0]["content"][0]["text"].as_str().unwrap()
    );
    assert_eq!(
        joined("response.function_call_arguments.delta"),
        output[1]["arguments"].as_str().unwrap()
    );
    assert_eq!(output[1]["call_id"].as_str().unwrap(), "call_scripted_0001");
    assert_eq!(output[1]["id"].as_str().unwrap(), "fc_scripted_0001");
}

#[tokio::test]
async fn cached_tokens_are_counted_the_way_each_wire_counts_them() {
    let model = ScriptedModel::builder()
        .rule(
            "cached",
            |r| r.last_user_text() == "cached",
            |_| Turn::text("ok").with_usage(100, 20).with_cached_tokens(80),
        )
        .rule("plain", |_| true, |_| Turn::text("ok").with_usage(100, 20))
        .start()
        .await;
    let ask = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    let mut raw = post("/v1/messages", &ask("cached"), false);
    raw.extend(post("/v1/chat/completions", &ask("cached"), false));
    raw.extend(post("/v1/responses", &json!({"input": "cached"}), false));
    raw.extend(post("/v1/messages", &ask("plain"), false));
    raw.extend(post("/v1/chat/completions", &ask("plain"), false));
    raw.extend(post("/v1/responses", &json!({"input": "plain"}), true));
    let replies = exchange(model.base_url(), &raw, 6).await;
    let usage: Vec<Value> = replies
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.2).unwrap()["usage"].clone())
        .collect();
    assert_eq!(
        usage[0],
        json!({"input_tokens": 100, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 80, "output_tokens": 20})
    );
    assert_eq!(
        usage[1],
        json!({"prompt_tokens": 180, "completion_tokens": 20, "total_tokens": 200,
            "prompt_tokens_details": {"cached_tokens": 80},
            "completion_tokens_details": {"reasoning_tokens": 0}})
    );
    assert_eq!(
        usage[2],
        json!({"input_tokens": 180, "input_tokens_details": {"cached_tokens": 80},
            "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 200})
    );
    // Without cached tokens the counts are the turn's.
    assert_eq!(usage[3]["input_tokens"], 100);
    assert_eq!(usage[3]["cache_read_input_tokens"], 0);
    assert_eq!(usage[4]["prompt_tokens"], 100);
    assert_eq!(usage[4]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage[5]["input_tokens"], 100);
    assert_eq!(usage[5]["input_tokens_details"]["cached_tokens"], 0);
}

#[tokio::test]
async fn responses_errors_have_the_openai_shape() {
    let model = ScriptedModel::builder()
        .rule(
            "limited",
            |r| r.last_user_text() == "slow",
            |_| Turn::fail(429, "Rate limited"),
        )
        .rule(
            "cut",
            |r| r.last_user_text() == "long",
            |_| Turn::text("partial").with_stop_reason("length"),
        )
        .start()
        .await;
    let mut raw = post("/v1/responses", &json!({"input": "slow"}), false);
    raw.extend(post("/v1/responses", &json!({"input": "long"}), false));
    raw.extend(post("/v1/responses", &json!({"input": "other"}), false));
    raw.extend(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\n{x}");
    raw.extend(post("/v1/moderations", &json!({"input": "x"}), true));
    let replies = exchange(model.base_url(), &raw, 5).await;
    let bodies: Vec<Value> = replies
        .iter()
        .map(|r| serde_json::from_str(&r.2).unwrap())
        .collect();
    assert!(replies[0].0.starts_with("HTTP/1.1 429"));
    assert!(!replies[0].1.contains("x-should-retry"));
    assert_eq!(
        bodies[0],
        json!({"error": {"message": "Rate limited", "type": "invalid_request_error",
            "param": null, "code": null}})
    );
    assert!(replies[1].0.starts_with("HTTP/1.1 200"));
    assert_eq!(bodies[1]["status"], "incomplete");
    assert_eq!(
        bodies[1]["incomplete_details"]["reason"],
        "max_output_tokens"
    );
    assert!(replies[2].0.starts_with("HTTP/1.1 500"));
    assert!(replies[2].1.contains("x-should-retry: false"));
    assert_eq!(bodies[2]["error"]["type"], "server_error");
    let message = bodies[2]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no rule matched request #2 (responses, round 0"),
        "{message}"
    );
    assert!(message.contains("\"other\""), "{message}");
    assert!(replies[3].0.starts_with("HTTP/1.1 400"));
    assert_eq!(bodies[3]["error"]["type"], "invalid_request_error");
    assert!(replies[4].0.starts_with("HTTP/1.1 404"));
    let message = bodies[4]["error"]["message"].as_str().unwrap();
    assert!(message.contains("POST /v1/responses"), "{message}");
}
