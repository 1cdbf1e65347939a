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
        "retrieval",
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
    // The same replay with no compression: larger requests, each repeating the one before it
    // nearly whole; ours over its uncached tokens and cost, as the totals say.
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap();
    let whole = &totals["no_compression"];
    assert!(
        n(whole, "request_tokens") > n(totals, "request_tokens"),
        "{totals}"
    );
    assert!(
        whole["cacheable_share"].as_f64().unwrap() > share,
        "{totals}"
    );
    let ratio = totals["uncached_vs_no_compression"].as_f64().unwrap();
    let expected = n(totals, "uncached_tokens") as f64 / n(whole, "uncached_tokens") as f64;
    assert!((ratio - expected).abs() < 1e-9, "{totals}");
    let cost =
        |v: &serde_json::Value| n(v, "uncached_tokens") as f64 + 0.1 * n(v, "cached_tokens") as f64;
    assert!((totals["cost"].as_f64().unwrap() - cost(totals)).abs() < 1e-6);
    let cost_ratio = totals["cost_vs_no_compression"].as_f64().unwrap();
    assert!(
        (cost_ratio - cost(totals) / cost(whole)).abs() < 1e-9,
        "{totals}"
    );
    assert!(cost_ratio < 1.0, "{totals}");
    for r in requests {
        assert!(r["input_tokens"].as_u64().unwrap() <= 6_000 - 750, "{r}");
        assert!(n(r, "cached_tokens") <= n(r, "request_tokens"), "{r}");
    }
    // Between compactions, each request repeats the one before it but its last message (where
    // the note after the window rode): the tool list, the system prompt and every other message
    // are served by the cache.
    for pair in requests.windows(2) {
        if !pair[1]["compacted"].as_bool().unwrap() {
            let cached = n(&pair[1], "cached_tokens");
            assert!(
                cached * 10 >= n(&pair[0], "request_tokens") * 6,
                "{} after {}",
                pair[1],
                pair[0]
            );
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

/// Every long Claude Code session of the shared fixtures, replayed at a 32k budget: the
/// uncached tokens stay within 1.5× those of the same replay with no compression, and the input
/// cost (cached tokens at a tenth) within 0.8× of its cost.
#[test]
fn claude_code_sessions_meet_the_cost_goals() {
    let Some(dir) = ba_testkit::fixtures() else {
        return;
    };
    let dir = dir.join("transcripts/spotter");
    let mut sessions: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 1_000_000))
        .collect();
    sessions.sort();
    assert_eq!(sessions.len(), 5, "{}", dir.display());
    let totals: Vec<(String, serde_json::Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .iter()
            .map(|session| {
                scope.spawn(move || {
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
                    let name = session.file_stem().unwrap().to_string_lossy().into_owned();
                    (name, v["totals"].clone())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (name, t) in &totals {
        let uncached = t["uncached_vs_no_compression"].as_f64().unwrap();
        let cost = t["cost_vs_no_compression"].as_f64().unwrap();
        eprintln!("{name}: uncached {uncached:.2}×, cost {cost:.2}×");
        assert!(uncached <= 1.5, "{name}: uncached {uncached:.2}× ({t})");
        assert!(cost <= 0.8, "{name}: cost {cost:.2}× ({t})");
        assert!(
            t["cacheable_share"].as_f64().unwrap() >= 0.90,
            "{name}: {t}"
        );
    }
}

/// A conversation whose early tool result (seventy items, item 35 worth 777123.45) leaves a
/// 1,500-token window, and whose last question names item 35 (answered when `answered`).
fn item_conversation(answered: bool) -> String {
    let rows: String = (0..70)
        .map(|i| {
            let v = if i == 35 {
                "777123.45".to_owned()
            } else {
                format!("{}.{:02}", 10_000 + (i * 7_919) % 80_000, i % 100)
            };
            format!("item {i}: value {v}\n")
        })
        .collect();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a analyst."}),
        serde_json::json!({"role": "user", "content": "Read the items table."}),
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_items", "type": "function", "function": {"name": "items", "arguments": "{}"}}
        ]}),
        serde_json::json!({"role": "tool", "tool_call_id": "call_items", "content": rows}),
        serde_json::json!({"role": "assistant", "content": "I read the items table."}),
    ];
    for i in 0..4 {
        messages.push(
            serde_json::json!({"role": "user", "content": format!("Tell me about region {i}.")}),
        );
        messages.push(serde_json::json!({"role": "assistant", "content": format!("Region {i}: {}", "sales were steady ".repeat(20))}));
    }
    messages.push(serde_json::json!({"role": "user", "content": "What is the value of item 35?"}));
    if answered {
        messages.push(
            serde_json::json!({"role": "assistant", "content": "Item 35 is worth 777123.45."}),
        );
    }
    serde_json::json!({"messages": messages}).to_string()
}

/// `context build --strategy retrieval --embeddings URL`: the passages are embedded by the
/// endpoint and the figure the last question names comes back, marked as recalled; an endpoint
/// that fails leaves BM25 to recall it, with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_build_recalls_with_an_embeddings_endpoint() {
    use ba_testkit::model::{EmbeddingsReply, ScriptedModel};
    let model = ScriptedModel::builder().start().await;
    let f = file(&item_conversation(false));
    let path = f.path().to_str().unwrap().to_owned();
    let url = model.embeddings_base_url();
    let build = move |extra: &[&str]| {
        let mut args: Vec<String> = [
            "context",
            "build",
            "--budget",
            "1500",
            "--reserve",
            "200",
            "--strategy",
            "retrieval",
            "--embeddings",
            &url,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push(path.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args, None)
    };
    let with = {
        let build = build.clone();
        tokio::task::spawn_blocking(move || build(&["--embeddings-model", "nomic"]))
            .await
            .unwrap()
    };
    assert!(with.status.success(), "{}", stderr(&with));
    assert!(stderr(&with).is_empty(), "{}", stderr(&with));
    let v: serde_json::Value = serde_json::from_str(&stdout(&with)).unwrap();
    let recalled: Vec<&serde_json::Value> = v["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "recalled")
        .collect();
    assert_eq!(recalled.len(), 1, "{}", v["changed"]);
    let messages = v["messages"].to_string();
    assert!(messages.contains("[recalled "), "{messages}");
    assert!(messages.contains("item 35: value 777123.45"), "{messages}");
    let sent = model.embedding_requests();
    assert!(!sent.is_empty());
    assert!(sent.iter().all(|r| r.model == "nomic"));
    assert!(
        sent[0].input[0].contains("What is the value of item 35?"),
        "the question is embedded first: {:?}",
        sent[0].input
    );

    model.set_embeddings(EmbeddingsReply::Status(503, "loading the model".to_owned()));
    let failed = tokio::task::spawn_blocking(move || build(&[]))
        .await
        .unwrap();
    assert!(failed.status.success(), "{}", stderr(&failed));
    let err = stderr(&failed);
    assert!(
        err.contains("warning: the embeddings endpoint failed; retrieval ranked by BM25 alone")
            && err.contains("HTTP 503")
            && err.contains("loading the model"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&failed)).unwrap();
    assert!(
        v["messages"]
            .to_string()
            .contains("item 35: value 777123.45")
    );
}

#[test]
fn embeddings_apply_to_retrieval_only() {
    let f = file(&item_conversation(false));
    let o = run(
        &[
            "context",
            "build",
            "--budget",
            "1500",
            "--embeddings",
            "http://127.0.0.1:9/v1",
            f.path().to_str().unwrap(),
        ],
        None,
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--embeddings applies to --strategy retrieval only"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_replay_embeds_through_the_endpoint_too() {
    use ba_testkit::model::ScriptedModel;
    let model = ScriptedModel::builder().start().await;
    let f = file(&item_conversation(true));
    let path = f.path().to_str().unwrap().to_owned();
    let url = model.embeddings_base_url();
    let o = tokio::task::spawn_blocking(move || {
        run(
            &[
                "context",
                "replay",
                "--budget",
                "1500",
                "--strategy",
                "retrieval",
                "--embeddings",
                &url,
                "--json",
                &path,
            ],
            None,
        )
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    // Retrieval runs when a request compacts; each time the question of that request is
    // embedded first, then the passages (32 texts a request).
    let questions = ["Tell me about region", "What is the value of item 35?"];
    let sent = model.embedding_requests();
    assert!(
        sent.iter().any(|r| r
            .input
            .first()
            .is_some_and(|t| questions.iter().any(|q| t.contains(q)))),
        "{sent:?}"
    );
}
