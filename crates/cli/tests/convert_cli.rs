//! `ba-agent convert`: the stable contract scripts rely on.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ba-agent"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sample() -> PathBuf {
    repo().join("fixtures/conversations/sales-analysis.anthropic.json")
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ba-agent");
    if let Some(input) = stdin {
        // A command that fails on its arguments exits before reading stdin.
        match child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
        {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.expect("write stdin"),
        }
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("wait")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[test]
fn sample_to_each_format() {
    let path = sample();
    let path = path.to_str().expect("utf-8 path");
    insta::assert_snapshot!(
        "sample_to_openai",
        stdout(&run(&["convert", "--to", "openai", path], None))
    );
    insta::assert_snapshot!(
        "sample_to_log",
        stdout(&run(
            &["convert", "--from", "anthropic", "--to", "log", path],
            None
        ))
    );
}

#[test]
fn anthropic_to_log_and_back_is_identity() {
    let original = std::fs::read_to_string(sample()).expect("read sample");
    let log = stdout(&run(&["convert", "--to", "log", "-"], Some(&original)));
    let back = stdout(&run(
        &["convert", "--from", "log", "--to", "anthropic"],
        Some(&log),
    ));
    let a: serde_json::Value = serde_json::from_str(&original).expect("json");
    let b: serde_json::Value = serde_json::from_str(&back).expect("json");
    assert_eq!(a, b);
    // And through OpenAI, only the thinking block is lost, and the loss is reported.
    let openai = run(
        &["convert", "--to", "openai", "--report-losses", "-"],
        Some(&original),
    );
    let stderr = String::from_utf8_lossy(&openai.stderr);
    assert!(
        stderr.contains(
            "thinking block (and its signature) has no OpenAI Chat Completions equivalent"
        ),
        "{stderr}"
    );
}

#[test]
fn openai_without_system_prints_no_system_key() {
    let input = r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"ok"}]}"#;
    let out = stdout(&run(
        &["convert", "--from", "openai", "--to", "anthropic"],
        Some(input),
    ));
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(v.get("system").is_none());
    assert_eq!(v["messages"][2]["content"][0]["type"], "tool_result");
}

#[test]
fn sse_streams_become_one_message() {
    let Some(dir) = ba_testkit::fixture("wire/anthropic/streaming") else {
        return;
    };
    let path = dir.join("tool_use_response.txt");
    let out = stdout(&run(
        &[
            "convert",
            "--from",
            "auto",
            "--to",
            "anthropic",
            path.to_str().expect("path"),
        ],
        None,
    ));
    insta::assert_snapshot!("tool_use_stream_to_anthropic", out);
    let chunks = r#"data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}

data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}

data: [DONE]
"#;
    let out = stdout(&run(
        &["convert", "--from", "openai-sse", "--to", "openai"],
        Some(chunks),
    ));
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["messages"][0]["content"], "Hello");
}

fn error_of(args: &[&str], stdin: &str) -> String {
    let out = run(args, Some(stdin));
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).expect("utf-8")
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = error_of(
        &["convert", "--to", "log"],
        r#"{"messages": [{"role":"user","content":"hi"}"#,
    );
    assert!(
        e.starts_with("error: reading stdin: Anthropic request: EOF while parsing"),
        "{e}"
    );
    assert!(e.contains("(line 1, column"), "{e}");
    let e = error_of(&["convert", "--to", "log"], r#"{"messages": []}"#);
    assert_eq!(
        e.trim(),
        "error: reading stdin: messages: the conversation has no messages"
    );
    let e = error_of(
        &["convert", "--from", "openai", "--to", "log"],
        r#"{"messages": [{"role":"user","content":[{"type":"text"}]}]}"#,
    );
    assert_eq!(
        e.trim(),
        "error: reading stdin: messages[0]: field `content`: [0]: `text` block: missing field `text`"
    );
    let e = error_of(
        &["convert", "--from", "log", "--to", "openai"],
        "{\"schema_version\":1,\"id\":\"a\",\"role\":\"user\",\"created_at\":\"t\"}\nnot json\n",
    );
    assert!(
        e.starts_with("error: reading stdin: log line 2: expected ident"),
        "{e}"
    );
    let e = error_of(&["convert", "--to", "openai"], "");
    assert_eq!(e.trim(), "error: reading stdin: the input is empty");
    let out = run(&["convert", "--to", "yaml"], Some("{}"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'yaml'"));
    let out = run(
        &["convert", "--to", "log", "/nonexistent/conversation.json"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reading /nonexistent/conversation.json")
    );
}

/// A reader that stops early (`ba-agent convert … | head`) ends the command quietly: status 0,
/// nothing on stderr, no panic — for the commands that write through `print!` (`context`, the
/// agent commands) and those that write in one piece (`convert`).
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    use std::io::{BufRead as _, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let mut messages = Vec::new();
    for i in 0..20_000 {
        messages.push(
            serde_json::json!({"role": "user", "content": format!("question {i} about sales")}),
        );
        messages.push(serde_json::json!({"role": "assistant", "content": format!("answer {i}")}));
    }
    std::fs::write(
        &big,
        serde_json::to_string(&serde_json::json!({ "messages": messages })).unwrap(),
    )
    .unwrap();
    let big = big.to_str().unwrap();
    for args in [
        vec!["convert", "--to", "log", big],
        vec!["context", "build", "--budget", "2000000", big],
    ] {
        let mut child = bin()
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        drop(reader);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

fn responses_data(name: &str) -> String {
    repo()
        .join("crates/protocol/tests/data/responses")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn losses(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("lost: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_responses_request_converts_both_ways_with_its_losses_named() {
    let request = responses_data("request-tools.json");
    // Responses → Anthropic: the reasoning, the compaction item and the logprobs are named.
    let out = run(
        &[
            "convert",
            "--from",
            "responses",
            "--to",
            "anthropic",
            &request,
        ],
        None,
    );
    let anthropic = stdout(&out);
    let lost = losses(&out).join("\n");
    assert!(lost.contains("reasoning item"), "{lost}");
    assert!(lost.contains("`compaction` item"), "{lost}");
    assert!(lost.contains("request field `store`"), "{lost}");
    let body: serde_json::Value = serde_json::from_str(&anthropic).unwrap();
    assert_eq!(
        body["messages"][1]["content"][1]["id"],
        "call_Qm2x7Jf1sT9bV4nL8pR3wK6y"
    );
    // … and back: Anthropic → Responses keeps the calls and results by call id; Anthropic's
    // system blocks become a system message.
    let out = run(
        &["convert", "--from", "anthropic", "--to", "responses", "-"],
        Some(&anthropic),
    );
    let back: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let input = back["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
            "message"
        ]
    );
    assert_eq!(input[4]["call_id"], "call_Zt5c1Hd8kW2nP7qX4mB9vJ3r");
    // Responses → log → Responses: the same conversation, nothing lost.
    let out = run(
        &["convert", "--from", "responses", "--to", "log", &request],
        None,
    );
    let log = stdout(&out);
    let out = run(&["convert", "--to", "responses", "-"], Some(&log));
    assert!(losses(&out).is_empty(), "{:?}", losses(&out));
    let again: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let original: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&request).unwrap()).unwrap();
    assert_eq!(again["input"], original["input"]);
    assert_eq!(again["instructions"], original["instructions"]);
    // Chat Completions → Responses.
    let out = run(&["convert", "--to", "openai", &request], None);
    let chat = stdout(&out);
    let out = run(
        &["convert", "--from", "openai", "--to", "responses", "-"],
        Some(&chat),
    );
    let from_chat: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(from_chat["input"][4]["name"], "query_database");
}

#[test]
fn a_responses_answer_and_its_stream_convert_alike() {
    let whole = run(
        &[
            "convert",
            "--to",
            "anthropic",
            &responses_data("response-parallel-calls.json"),
        ],
        None,
    );
    let streamed = run(
        &[
            "convert",
            "--from",
            "responses-sse",
            "--to",
            "anthropic",
            &responses_data("stream-parallel-calls.sse"),
        ],
        None,
    );
    assert_eq!(stdout(&whole), stdout(&streamed));
    let lost = losses(&whole).join("\n");
    assert!(lost.contains("response field `usage`"), "{lost}");
    assert!(lost.contains("reasoning item"), "{lost}");
    // Auto-detected stream, to Responses: the reasoning goes back with its encrypted content.
    let out = run(
        &[
            "convert",
            "--to",
            "responses",
            &responses_data("stream-parallel-calls.sse"),
        ],
        None,
    );
    let body: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(body["input"][0]["type"], "reasoning");
    assert!(
        body["input"][0]["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAA")
    );
    let err = error_of(
        &["convert", "--from", "responses", "--to", "log", "-"],
        r#"{"input": [{"type": "function_call"}]}"#,
    );
    assert!(err.contains("input[0]") && err.contains("call_id"), "{err}");
}

/// OpenAI's published schema of a Responses request (`CreateResponse`), from the shared
/// fixtures; `None` (a skip, or a failure under CI) when they are missing.
fn create_response_schema() -> Option<jsonschema::Validator> {
    let schema = ba_testkit::openai_responses_schema("CreateResponse")?;
    Some(jsonschema::validator_for(&schema).unwrap())
}

/// Every place `body` breaks the schema, as `path: error` lines.
fn schema_errors(validator: &jsonschema::Validator, body: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(body)
        .map(|e| {
            let text = e.to_string();
            format!(
                "{}: {}",
                e.instance_path(),
                text.chars().take(200).collect::<String>()
            )
        })
        .collect()
}

#[test]
fn convert_to_responses_of_every_fixture_session_meets_the_published_schema() {
    let Some(validator) = create_response_schema() else {
        return;
    };
    let Some(dir) = ba_testkit::fixture("transcripts/spotter") else {
        return;
    };
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    sessions.sort();
    assert!(sessions.len() >= 8, "{sessions:?}");
    let mut checked_assistant_turns = 0;
    for session in &sessions {
        let out = run(
            &["convert", "--to", "responses", session.to_str().unwrap()],
            None,
        );
        let body: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let errors = schema_errors(&validator, &body);
        assert!(
            errors.is_empty(),
            "{}: {} error(s), first: {:#?}",
            session.display(),
            errors.len(),
            &errors[..errors.len().min(5)]
        );
        // The assistant's text turns go as input messages with string content: no id or
        // status to invent, and what every server accepts.
        for item in body["input"].as_array().unwrap() {
            if item["role"] == "assistant" {
                assert!(item["content"].is_string(), "{item:#}");
                checked_assistant_turns += 1;
            }
        }
    }
    assert!(checked_assistant_turns > 100, "{checked_assistant_turns}");
}
