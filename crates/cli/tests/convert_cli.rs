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
