use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::http::{fill, read_until};
use super::*;

mod responses;

/// An Anthropic conversation: a question naming two uploads, a round of two tool calls (one
/// failed), and their results.
fn anthropic_body() -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are an analyst."},
                   {"type": "text", "text": "Cite files as <file_ref>."}],
        "tools": [{"name": "file_reader", "description": "Reads.", "input_schema": {}},
                  {"name": "run_python", "description": "Runs.", "input_schema": {}}],
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
            {"role": "user", "content": [{"type": "text",
                "text": "Compare <file_ref>upload_002</file_ref> with upload_001, not xupload_003 or upload_12."}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Both.", "signature": "s"},
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_a", "name": "file_reader", "input": {"path": "upload_002"}},
                {"type": "tool_use", "id": "toolu_b", "name": "run_python", "input": {"code": "1/0"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a",
                 "content": [{"type": "text", "text": "a,b\n1,2"}]},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "ZeroDivisionError",
                 "is_error": true}]}
        ],
        "stream": true
    })
}

/// The same conversation on the OpenAI wire.
fn openai_body() -> Value {
    json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are an analyst."},
            {"role": "developer", "content": [{"type": "text", "text": "Cite files as <file_ref>."}]},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": [{"type": "text",
                "text": "Compare <file_ref>upload_002</file_ref> with upload_001, not xupload_003 or upload_12."}]},
            {"role": "assistant", "content": "Reading both.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "file_reader", "arguments": "{\"path\":\"upload_002\"}"}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "run_python", "arguments": "{\"code\":\"1/0\"}"}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "a,b\n1,2"},
            {"role": "tool", "tool_call_id": "call_b",
             "content": "Operation failed.\n\nError Type: execution_error\nError Message: ZeroDivisionError"}
        ],
        "tools": [{"type": "function", "function": {"name": "file_reader", "parameters": {}}},
                  {"type": "function", "function": {"name": "run_python", "parameters": {}}}]
    })
}

#[test]
fn every_wire_reads_the_same() {
    for (wire, body, streams) in [
        (Wire::Anthropic, anthropic_body(), true),
        (Wire::OpenAi, openai_body(), false),
        (Wire::Responses, responses::responses_body(), true),
    ] {
        let r = Request::new(wire, body);
        assert_eq!(r.wire(), wire);
        assert_eq!(r.streams(), streams, "{wire}");
        assert_eq!(r.tools(), ["file_reader", "run_python"], "{wire}");
        assert!(r.offers("run_python") && !r.offers("web_search"), "{wire}");
        assert_eq!(
            r.system(),
            "You are an analyst.\n\nCite files as <file_ref>.",
            "{wire}"
        );
        assert!(r.last_user_text().starts_with("Compare "), "{wire}");
        assert_eq!(r.uploads(), ["upload_002", "upload_001"], "{wire}");
        assert_eq!(r.round(), 1, "{wire}");
        let roles: Vec<Role> = r.messages().iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool
            ],
            "{wire}"
        );
        assert_eq!(r.messages()[3].text, "Reading both.", "{wire}");
        assert_eq!(r.messages()[3].calls.len(), 2, "{wire}");
        let results = r.tool_results();
        assert_eq!(results.len(), 2, "{wire}");
        assert_eq!(results[0].name, "file_reader", "{wire}");
        assert_eq!(results[0].input, json!({"path": "upload_002"}), "{wire}");
        assert_eq!(results[0].text, "a,b\n1,2", "{wire}");
        assert!(!results[0].is_error, "{wire}");
        let last = r.last_result().unwrap();
        assert_eq!(last.name, "run_python", "{wire}");
        assert!(last.is_error, "{wire}");
        assert!(last.text.contains("ZeroDivisionError"), "{wire}");
    }
}

#[test]
fn a_first_question_is_round_zero_without_results() {
    let r = Request::new(
        Wire::Anthropic,
        json!({"model": "m", "messages": [{"role": "user", "content": "Read upload_001"}]}),
    );
    assert_eq!(r.round(), 0);
    assert!(r.tool_results().is_empty() && r.last_result().is_none());
    assert_eq!(r.uploads(), ["upload_001"]);
    assert!(!r.streams());
    assert_eq!(r.system(), "");
    assert_eq!(r.model(), "m");
    assert!(r.tools().is_empty());
}

#[test]
fn a_new_user_message_starts_the_rounds_again() {
    let mut body = openai_body();
    body["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": "Done."}),
        json!({"role": "user", "content": "And <file_ref> upload_009 </file_ref>?"}),
    ]);
    let r = Request::new(Wire::OpenAi, body);
    assert_eq!(r.round(), 0);
    assert!(r.tool_results().is_empty());
    assert_eq!(r.uploads(), ["upload_009"]);
    assert_eq!(r.last_user_text(), "And <file_ref> upload_009 </file_ref>?");
}

#[test]
fn a_result_of_an_unknown_call_has_no_name() {
    let r = Request::new(
        Wire::OpenAi,
        json!({"messages": [{"role": "user", "content": "q"},
            {"role": "tool", "tool_call_id": "call_x", "content": "orphan"}]}),
    );
    let result = r.last_result().unwrap();
    assert_eq!((result.name.as_str(), &result.input), ("", &Value::Null));
    assert_eq!(result.call_id, "call_x");
}

#[test]
fn shows_finds_text_anywhere_in_the_body() {
    let r = Request::new(Wire::Anthropic, anthropic_body());
    assert!(r.shows("ZeroDivisionError"));
    assert!(r.shows("Cite files"));
    assert!(!r.shows("/home/"));
}

#[test]
fn upload_ids_are_whole_words_in_order_once() {
    assert_eq!(
        upload_ids("upload_001, upload_001 and upload_1234; upload_01 upload_002x"),
        ["upload_001", "upload_1234"]
    );
    assert_eq!(
        upload_ids(
            "<file_ref>report.csv</file_ref> then upload_003 <file_ref>upload_003</file_ref>"
        ),
        ["report.csv", "upload_003"]
    );
    assert!(upload_ids("<file_ref>unclosed upload").is_empty());
    assert_eq!(upload_ids("文件 upload_007。"), ["upload_007"]);
}

#[test]
fn pieces_keep_characters_whole() {
    let text = "数据分析 report ✓";
    let cut: Vec<&str> = pieces(text, 3).collect();
    assert_eq!(cut.concat(), text);
    assert!(cut.iter().all(|p| p.chars().count() <= 3));
    assert_eq!(pieces("", 3).count(), 0);
}

fn answer(thinking: bool) -> Answer {
    Answer {
        index: 3,
        model: "m".into(),
        thinking: thinking.then(|| "Let me think.".to_owned()),
        text: Some("Reading the file now.".into()),
        calls: vec![Call {
            id: "toolu_1".into(),
            name: "file_reader".into(),
            input: json!({"path": "upload_001", "note": "数据"}),
        }],
        input_tokens: 100,
        output_tokens: 20,
        cached_tokens: 0,
        cache_write_tokens: 0,
        stop_reason: None,
    }
}

/// The `data` of each event.
fn data(events: &[String]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let line = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            serde_json::from_str(line).unwrap_or(Value::String(line.to_owned()))
        })
        .collect()
}

#[test]
fn anthropic_stream_rebuilds_the_json_answer() {
    let a = answer(true);
    let events = data(&a.anthropic_events());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"message_start"));
    assert_eq!(&types[types.len() - 2..], ["message_delta", "message_stop"]);
    // Rebuild the blocks from the deltas, as a client does.
    let mut blocks: Vec<Value> = Vec::new();
    let mut json_input: Vec<String> = Vec::new();
    for e in &events {
        match e["type"].as_str().unwrap() {
            "content_block_start" => {
                assert_eq!(e["index"], json!(blocks.len()));
                blocks.push(e["content_block"].clone());
                json_input.push(String::new());
            }
            "content_block_delta" => {
                let i = e["index"].as_u64().unwrap() as usize;
                let d = &e["delta"];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        let t = blocks[i]["text"].as_str().unwrap().to_owned();
                        blocks[i]["text"] = json!(t + d["text"].as_str().unwrap());
                    }
                    "thinking_delta" => {
                        let t = blocks[i]["thinking"].as_str().unwrap().to_owned();
                        blocks[i]["thinking"] = json!(t + d["thinking"].as_str().unwrap());
                    }
                    "signature_delta" => blocks[i]["signature"] = d["signature"].clone(),
                    "input_json_delta" => json_input[i] += d["partial_json"].as_str().unwrap(),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let i = e["index"].as_u64().unwrap() as usize;
                if blocks[i]["type"] == "tool_use" {
                    blocks[i]["input"] = serde_json::from_str(&json_input[i]).unwrap();
                }
            }
            _ => {}
        }
    }
    let whole = a.anthropic_json();
    assert_eq!(Value::Array(blocks), whole["content"]);
    assert_eq!(whole["stop_reason"], "tool_use");
    assert_eq!(events.last().unwrap()["type"], "message_stop");
    let delta = &events[events.len() - 2];
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 20);
    assert_eq!(events[0]["message"]["usage"]["input_tokens"], 100);
}

#[test]
fn openai_stream_rebuilds_the_json_answer() {
    let a = answer(true);
    let chunks = a.openai_chunks(true);
    assert_eq!(chunks.last().unwrap(), "data: [DONE]\n\n");
    let chunks = data(&chunks[..chunks.len() - 1]);
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        if !c["usage"].is_null() {
            usage = Some(c["usage"].clone());
        }
        for choice in c["choices"].as_array().unwrap() {
            let d = &choice["delta"];
            content += d["content"].as_str().unwrap_or_default();
            reasoning += d["reasoning_content"].as_str().unwrap_or_default();
            for call in d["tool_calls"].as_array().into_iter().flatten() {
                let i = call["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    calls.push(Default::default());
                }
                if let Some(id) = call["id"].as_str() {
                    calls[i].0 = id.to_owned();
                }
                calls[i].1 += call["function"]["name"].as_str().unwrap_or_default();
                calls[i].2 += call["function"]["arguments"].as_str().unwrap_or_default();
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_owned());
            }
        }
    }
    let whole = a.openai_json();
    let message = &whole["choices"][0]["message"];
    assert_eq!(content, message["content"].as_str().unwrap());
    assert_eq!(reasoning, message["reasoning_content"].as_str().unwrap());
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, message["tool_calls"][0]["id"].as_str().unwrap());
    assert_eq!(calls[0].1, "file_reader");
    let args: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(args, json!({"path": "upload_001", "note": "数据"}));
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(usage.unwrap()["total_tokens"], 120);
    // Without include_usage there is no usage chunk.
    assert!(
        !a.openai_chunks(false)
            .iter()
            .any(|c| c.contains("\"usage\""))
    );
}

#[test]
fn a_text_turn_stops_as_a_final_answer() {
    let a = Answer {
        calls: Vec::new(),
        ..answer(false)
    };
    assert_eq!(a.anthropic_json()["stop_reason"], "end_turn");
    assert_eq!(a.openai_json()["choices"][0]["finish_reason"], "stop");
    assert!(
        a.openai_json()["choices"][0]["message"]
            .get("tool_calls")
            .is_none()
    );
    let forced = Answer {
        stop_reason: Some("max_tokens".into()),
        ..answer(false)
    };
    assert_eq!(forced.anthropic_json()["stop_reason"], "max_tokens");
}

// --- over HTTP, with a raw client ----------------------------------------------------------

/// Sends raw requests on one connection and reads `n` responses: (status line, headers, body
/// with any chunked framing removed).
async fn exchange(base: &str, raw: &[u8], n: usize) -> Vec<(String, String, String)> {
    let addr = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(raw).await.unwrap();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let head_end = read_until(&mut stream, &mut buf, 0, b"\r\n\r\n")
            .await
            .unwrap();
        let head = String::from_utf8(buf.drain(..head_end + 4).collect()).unwrap();
        let lower = head.to_ascii_lowercase();
        let body = if lower.starts_with("http/1.1 1") {
            // An interim response has no body.
            Vec::new()
        } else if lower.contains("transfer-encoding: chunked") {
            let mut body = Vec::new();
            loop {
                let end = read_until(&mut stream, &mut buf, 0, b"\r\n").await.unwrap();
                let size =
                    usize::from_str_radix(std::str::from_utf8(&buf[..end]).unwrap(), 16).unwrap();
                buf.drain(..end + 2);
                while buf.len() < size + 2 {
                    fill(&mut stream, &mut buf).await.unwrap();
                }
                body.extend(buf.drain(..size));
                buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
            body
        } else {
            let length: usize = lower
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            while buf.len() < length {
                fill(&mut stream, &mut buf).await.unwrap();
            }
            buf.drain(..length).collect()
        };
        let status = head.lines().next().unwrap().to_owned();
        out.push((status, lower, String::from_utf8(body).unwrap()));
    }
    out
}

fn post(path: &str, body: &Value, close: bool) -> Vec<u8> {
    let body = body.to_string();
    let connection = if close { "connection: close\r\n" } else { "" };
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{connection}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn post_chunked(path: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    let mut raw = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nexpect: 100-continue\r\n\r\n"
    );
    for piece in body.as_bytes().chunks(7) {
        raw += &format!(
            "{:X};ext=1\r\n{}\r\n",
            piece.len(),
            std::str::from_utf8(piece).unwrap()
        );
    }
    raw += "0\r\ntrailer: t\r\n\r\n";
    raw.into_bytes()
}

#[tokio::test]
async fn answers_requests_on_one_kept_alive_connection_in_any_body_framing() {
    let model = ScriptedModel::builder()
        .rule(
            "call",
            |r| r.round() == 0,
            |r| Turn::call("file_reader", json!({"path": r.uploads()[0]})),
        )
        .start()
        .await;
    let question = json!({"model": "m", "messages": [{"role": "user", "content": "upload_001"}]});
    let mut raw = post("/v1/messages", &question, false);
    // Chunked with `expect: 100-continue`: the interim 100 comes first.
    raw.extend(post_chunked("/v1/chat/completions", &question));
    let mut streamed = question.clone();
    streamed["stream"] = json!(true);
    raw.extend(post("/v1/chat/completions", &streamed, true));
    let replies = exchange(model.base_url(), &raw, 4).await;
    assert!(replies[0].0.starts_with("HTTP/1.1 200"), "{replies:?}");
    let first: Value = serde_json::from_str(&replies[0].2).unwrap();
    assert_eq!(first["content"][0]["input"], json!({"path": "upload_001"}));
    assert!(replies[1].0.starts_with("HTTP/1.1 100"), "{replies:?}");
    let second: Value = serde_json::from_str(&replies[2].2).unwrap();
    let call = &second["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], "{\"path\":\"upload_001\"}");
    assert!(replies[3].1.contains("content-type: text/event-stream"));
    assert!(replies[3].1.contains("connection: close"));
    assert!(replies[3].2.ends_with("data: [DONE]\n\n"));
    // Ids are unique across the server.
    let first_id = first["content"][0]["id"].as_str().unwrap();
    assert_ne!(first_id, call["id"].as_str().unwrap());
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests.iter().map(Request::wire).collect::<Vec<_>>(),
        [Wire::Anthropic, Wire::OpenAi, Wire::OpenAi]
    );
    assert_eq!(requests[1].body(), &question);
    assert!(requests[2].streams());
    assert_eq!(requests[2].index(), 2);
    assert_eq!(model.fired(), vec![Some("call".to_owned()); 3]);
}

#[tokio::test]
async fn an_unmatched_request_fails_clearly_and_is_not_retried() {
    let model = ScriptedModel::builder()
        .rule("never", |_| false, |_| Turn::text("no"))
        .rule(
            "panics",
            |r| r.last_user_text() == "boom",
            |r| Turn::text(&r.last_result().unwrap().text),
        )
        .start()
        .await;
    let ask = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    let mut raw = post("/v1/messages", &ask("what is in upload_004?"), false);
    raw.extend(post("/v1/chat/completions", &ask("boom"), false));
    raw.extend(post("/v1/moderations", &ask("x"), true));
    let replies = exchange(model.base_url(), &raw, 3).await;
    assert!(replies[0].0.starts_with("HTTP/1.1 500"));
    assert!(replies[0].1.contains("x-should-retry: false"));
    let error: Value = serde_json::from_str(&replies[0].2).unwrap();
    assert_eq!(error["type"], "error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("no rule matched"), "{message}");
    assert!(message.contains("what is in upload_004?"), "{message}");
    assert!(message.contains("never"), "{message}");
    let error: Value = serde_json::from_str(&replies[1].2).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("a rule panicked"), "{message}");
    assert!(replies[2].0.starts_with("HTTP/1.1 404"));
    assert_eq!(model.fired(), [None, None]);
    model.wait_for_requests(2).await;
}

#[tokio::test]
async fn a_failing_turn_is_an_error_in_the_wire_shape() {
    let model = ScriptedModel::builder()
        .rule("overloaded", |_| true, |_| Turn::fail(529, "Overloaded"))
        .start()
        .await;
    let raw = post("/v1/messages", &json!({"messages": []}), true);
    let replies = exchange(model.base_url(), &raw, 1).await;
    assert!(replies[0].0.starts_with("HTTP/1.1 529"));
    assert!(!replies[0].1.contains("x-should-retry"));
    let error: Value = serde_json::from_str(&replies[0].2).unwrap();
    assert_eq!(
        error,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[tokio::test]
async fn dropping_the_model_stops_the_server() {
    let model = ScriptedModel::builder().start().await;
    let addr = model.base_url().trim_start_matches("http://").to_owned();
    // A connection left open is closed too.
    let mut open = TcpStream::connect(&addr).await.unwrap();
    tokio::task::yield_now().await;
    drop(model);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let mut byte = [0u8; 1];
    assert_eq!(open.read(&mut byte).await.unwrap_or(0), 0);
    assert!(TcpStream::connect(&addr).await.is_err());
}
