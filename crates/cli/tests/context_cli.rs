//! `ba-agent tokens` and `ba-agent context build`.

// Helpers outside #[test] fns fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        // A process that rejects its arguments exits before reading: a broken pipe is fine.
        let _ = child.stdin.take().unwrap().write_all(text.as_bytes());
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn tokens_of_a_text() {
    let o = run(&["tokens", "-"], Some("hello world"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2\n");
    let o = run(
        &["tokens", "--encoding", "o200k_base", "--json", "-"],
        Some("hello world"),
    );
    assert_eq!(
        stdout(&o),
        "{\"tokens\":2,\"encoding\":\"o200k_base\",\"bytes\":11}\n"
    );
    // Special-token text is ordinary text.
    let o = run(&["tokens", "-"], Some("<|endoftext|>"));
    assert_eq!(stdout(&o), "7\n");
    // Claude: cl100k with the +15 % margin, rounded up.
    let o = run(
        &["tokens", "--model", "claude-sonnet-4-5", "-"],
        Some("hello world"),
    );
    assert_eq!(stdout(&o), "3\n");
}

#[test]
fn tokens_of_a_conversation() {
    let conv = r#"{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello world"}]}"#;
    let o = run(&["tokens", "--conversation", "-"], Some(conv));
    assert!(o.status.success(), "{}", stderr(&o));
    // (3 + system 1 + 3) + (3 + user 1 + 2) + 3 reply priming
    assert_eq!(stdout(&o), "16\n");
}

#[test]
fn tokens_bad_input() {
    let o = run(&["tokens", "--encoding", "p50k_base", "-"], Some("x"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: --encoding: unknown encoding `p50k_base`"),
        "{}",
        stderr(&o)
    );
    let o = run(&["tokens", "--model", "mystery-1", "-"], Some("x"));
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["tokens", "/nonexistent/file.txt"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/file.txt"));
    let o = run(&["tokens", "--conversation", "-"], Some("{\"messages\": ["));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("error: reading stdin"),
        "{}",
        stderr(&o)
    );
}

fn long_openai() -> String {
    let mut messages = vec![serde_json::json!({"role": "system", "content": "You are a analyst."})];
    for i in 0..12 {
        messages.push(serde_json::json!({"role": "user", "content": format!("Question {i}: {}", "revenue by region ".repeat(20))}));
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function", "function": {"name": "query", "arguments": format!("{{\"q\":{i}}}")}}
        ]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": "row ".repeat(60)}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!("Answer {i}: {}", "north grew ".repeat(15))}));
    }
    messages.push(serde_json::json!({"role": "user", "content": "Summarise everything."}));
    serde_json::json!({"messages": messages}).to_string()
}

#[test]
fn context_build_contract() {
    let f = file(&long_openai());
    let path = f.path().to_str().unwrap();
    for strategy in [
        "truncate",
        "key-messages",
        "importance",
        "summary",
        "hybrid",
    ] {
        let o = run(
            &[
                "context",
                "build",
                "--budget",
                "1500",
                "--reserve",
                "200",
                "--strategy",
                strategy,
                path,
            ],
            None,
        );
        assert!(o.status.success(), "{strategy}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["strategy"], strategy);
        assert_eq!(v["system"], "You are a analyst.");
        assert_eq!(v["usage"]["budget"], 1500);
        let used = v["usage"]["used"].as_u64().unwrap();
        assert!(used <= 1300, "{strategy}: used {used}");
        assert!(!v["dropped"].as_array().unwrap().is_empty());
        let kept: Vec<&str> = v["kept"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert!(!kept.is_empty());
        // OpenAI input → OpenAI output: every tool call is answered in the messages.
        let msgs = v["messages"].as_array().unwrap();
        let calls: Vec<&str> = msgs
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        let results: Vec<&str> = msgs
            .iter()
            .filter_map(|m| m["tool_call_id"].as_str())
            .collect();
        assert_eq!(calls, results, "{strategy}");
        assert_eq!(msgs.last().unwrap()["content"], "Summarise everything.");
        if strategy == "key-messages" {
            insta::assert_snapshot!("context_build_key_messages", stdout(&o));
        }
    }
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "1500",
            "--to",
            "anthropic",
            "--mode",
            "agent",
            path,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["system"], "You are a analyst.\n\nMODE: agent");
    assert_eq!(v["messages"][0]["role"], "user");
    // For the Responses API: the window as input items (finished rounds folded into traces, as
    // for the other wires), every call left answered by its call_id.
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "1500",
            "--to",
            "responses",
            path,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["system"], "You are a analyst.");
    let items = v["messages"].as_array().unwrap();
    let ids = |kind: &str| -> Vec<String> {
        items
            .iter()
            .filter(|i| i["type"] == kind)
            .map(|i| i["call_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(items.iter().all(|i| i["type"].is_string()), "{v}");
    assert_eq!(ids("function_call"), ids("function_call_output"));
    assert_eq!(items.last().unwrap()["content"], "Summarise everything.");
}

#[test]
fn context_build_bad_input() {
    let f = file(&long_openai());
    let path = f.path().to_str().unwrap();
    let o = run(&["context", "build", "--budget", "0", path], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("leaves no room"), "{}", stderr(&o));
    let o = run(&["context", "build", "--budget", "8", path], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("system prompt takes"), "{}", stderr(&o));
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "100",
            "--strategy",
            "magic",
            path,
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let empty = file("");
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "100",
            empty.path().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("empty"), "{}", stderr(&o));
    let big = file(
        &serde_json::json!({"messages": [{"role": "user", "content": "word ".repeat(400)}]})
            .to_string(),
    );
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "100",
            big.path().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("latest user message"), "{}", stderr(&o));
    let orphan = file(
        r#"{"messages":[{"role":"tool","tool_call_id":"x","content":"r"},{"role":"user","content":"hi"}]}"#,
    );
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "100",
            orphan.path().to_str().unwrap(),
        ],
        None,
    );
    // A file with a result that answers no call is refused as bad input (the library's
    // repair-on-read, which drops such results, is for logs the pipeline wrote itself).
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("tool result for `x` answers no earlier tool call"),
        "{}",
        stderr(&o)
    );
}

/// A long analysis conversation as an Anthropic request: rounds of a question, a query with a
/// large result, and an answer.
fn long_conversation(rounds: usize) -> String {
    let mut messages = Vec::new();
    for r in 0..rounds {
        messages.push(serde_json::json!({"role": "user", "content": format!("Question {r}: how did region {} do? Keep amounts in EUR.", r % 5)}));
        let rows: String = (0..120).map(|i| format!("R{i},{}\n", i * 17 + r)).collect();
        messages.push(serde_json::json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{r}"), "name": "query_database", "input": {"query": format!("SELECT * FROM sales WHERE r = {r}")}}]}));
        messages.push(serde_json::json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{r}"), "content": format!("region,amount\n{rows}TOTAL,{}\n", 1_000 + r)}]}));
        messages.push(serde_json::json!({"role": "assistant", "content": format!("Round {r}: the total is {}.", 1_000 + r)}));
    }
    serde_json::json!({"system": "You are a business analyst.", "messages": messages}).to_string()
}

#[test]
fn context_replay_plays_requests_with_persisted_compaction() {
    let f = file(&long_conversation(40));
    let path = f.path().to_str().unwrap();
    let emit = tempfile::tempdir().unwrap();
    let o = run(
        &[
            "context",
            "replay",
            "--budget",
            "6000",
            "--json",
            "--emit",
            emit.path().to_str().unwrap(),
            path,
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let requests = v["requests"].as_array().unwrap();
    // One request per assistant turn: the call and the answer of each round.
    assert_eq!(requests.len(), 80);
    let totals = &v["totals"];
    let compactions = totals["compactions"].as_u64().unwrap();
    assert!(compactions >= 1, "{totals}");
    let share = totals["cacheable_share"].as_f64().unwrap();
    // The limit no compression reaches: larger requests, each repeating the previous one whole,
    // and the ratio of the tokens no cache serves, ours over the limit's.
    let n = |k: &str| totals[k].as_u64().unwrap();
    assert!(n("limit_input_tokens") > n("input_tokens"), "{totals}");
    assert!(
        totals["limit_cacheable_share"].as_f64().unwrap() > share,
        "{totals}"
    );
    let ours = (n("input_tokens") - n("repeated_prefix_tokens")) as f64;
    let limit = (n("limit_input_tokens") - n("limit_repeated_prefix_tokens")) as f64;
    let ratio = totals["uncached_vs_limit"].as_f64().unwrap();
    assert!((ratio - ours / limit).abs() < 1e-9, "{totals}");
    assert!(ratio > 1.0, "{totals}");
    for r in requests {
        assert!(r["input_tokens"].as_u64().unwrap() <= 6_000 - 750, "{r}");
    }
    // Between compactions, each request repeats the one before it: all of it but the tokens
    // priming the reply and the note that rides after the window (a reminder of the task).
    for pair in requests.windows(2) {
        if !pair[1]["compacted"].as_bool().unwrap() {
            let repeated = pair[1]["repeated_prefix_tokens"].as_u64().unwrap();
            let previous = pair[0]["input_tokens"].as_u64().unwrap();
            assert!(repeated + 64 >= previous, "{} after {}", pair[1], pair[0]);
        }
    }
    // Without persisted compaction, far less repeats.
    let o = run(
        &[
            "context",
            "replay",
            "--budget",
            "6000",
            "--json",
            "--stateless",
            path,
        ],
        None,
    );
    let stateless: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let before = stateless["totals"]["cacheable_share"].as_f64().unwrap();
    assert!(share > before, "persisted {share} vs stateless {before}");
    // A compaction is kept until the trigger is crossed again, not redone every request.
    let redone = stateless["totals"]["compactions"].as_u64().unwrap();
    assert!(
        compactions * 2 < redone,
        "{compactions} kept vs {redone} redone"
    );
    // The emitted bodies are what Anthropic would receive, breakpoints included.
    let first = std::fs::read_to_string(emit.path().join("0001.json")).unwrap();
    let body: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(
        body["messages"].is_array() && first.contains("cache_control"),
        "{first}"
    );
    assert!(emit.path().join("0080.json").is_file());
}

/// The long Claude Code sessions of the shared fixtures at a 32k budget: the front of most
/// input tokens repeats the previous request, so a prompt cache serves it.
#[test]
fn claude_code_sessions_replay_mostly_from_the_cache() {
    let Some(dir) = ba_testkit::fixtures() else {
        return;
    };
    let session = dir.join("transcripts/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl");
    let o = run(
        &[
            "context",
            "replay",
            "--budget",
            "32000",
            "--json",
            session.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let share = v["totals"]["cacheable_share"].as_f64().unwrap();
    assert!(share >= 0.90, "{}", v["totals"]);
}
