#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! Against a real model server: llama.cpp's `llama-server` serving SmolLM2-135M-Instruct with a
//! 4096-token window, as `.ci/llama.sh` starts it (its address in `BA_AGENT_TEST_LLAMA_URL`).
//! `.ci/run` starts the server before the tests; without the variable the tests skip with a
//! message (run them with `eval "$(bash .ci/llama.sh)"` first), and under `CI=true` they fail.
//! The conversations are sized so that a follow-up adds some 600 tokens: the server keeps
//! each slot's prompt, reads only what a request adds to it, and the suite stays within
//! minutes on a small machine while the windows still outgrow the server's 4,096 tokens.
//!
//! The model is small and weak: the tests assert the mechanics — an answer, the server's usage,
//! the window learned from the server, a cancelled stream's slot freed, eight conversations at
//! once — never the quality of its words.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ba_model::{ModelClient, ModelRequest, OpenAiClient, StreamItem};
use ba_protocol::{LogEntry, LogRole};
use futures::StreamExt as _;
use serde_json::Value;

const VAR: &str = "BA_AGENT_TEST_LLAMA_URL";
const HOW: &str = "start llama-server with `eval \"$(bash .ci/llama.sh)\"`";
/// The window `.ci/llama.sh` starts the server with.
const WINDOW: u64 = 4096;

/// The server's address (`http://127.0.0.1:PORT`), or `None` after the skip message.
fn server() -> Option<String> {
    ba_testkit::require_env(VAR, HOW).map(|url| url.trim_end_matches('/').to_owned())
}

/// llama-server says nothing while it reads a prompt, and a shared machine reads a window
/// of 4096 tokens slowly (a few tokens a second under load): the defaults' 90 s without a
/// byte would end a call the server is still working on.
const TIMEOUTS: &str =
    "stream_idle_timeout_secs: 900\nrequest_timeout_secs: 900\ncall_timeout_secs: 1800\n";

/// A configuration as a new user writes it for a local server: no `context_window`, memory on
/// (the CLI's default), so every request carries the memory tool's definition beside the
/// others and the window must make room for them.
fn config(home: &Path, url: &str, extra: &str) -> PathBuf {
    let path = home.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "provider: openai\ncompat: true\nbase_url: {url}/v1\nmodel: smollm2\nhome: {}\n\
             run_python: false\nmax_tokens: 64\n{TIMEOUTS}{extra}",
            home.display()
        ),
    )
    .unwrap();
    path
}

fn ba_agent(config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("BA_AGENT_CONFIG", config)
        .env_remove("BA_AGENT_PROVIDER")
        .env_remove("BA_AGENT_HOME")
        .env_remove("BA_AGENT_MODEL")
        .env_remove("OPENAI_API_KEY");
    cmd
}

/// `ba-agent run --json` with `args`; the run must end with a final answer. Returns the
/// conversation id and the metrics line.
fn run_json(config: &Path, args: &[&str]) -> (String, Value) {
    let out = ba_agent(config)
        .args(["run", "--json"])
        .args(args)
        .output()
        .unwrap();
    let (id, metrics) = read_run(&out);
    assert!(
        out.status.success(),
        "{args:?} ended without an answer:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (id, metrics)
}

/// The conversation id of a `run --json` and its last line, the metrics report.
fn read_run(out: &Output) -> (String, Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let metrics = lines.last().cloned().unwrap_or(Value::Null);
    let id = metrics["conversation_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (id, metrics)
}

/// The entries of the conversation's log as stored (`<home>/conversations/<id>.jsonl`, one
/// `{"seq", "at", "entry"}` line each).
fn log_of(home: &Path, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(home.join(format!("conversations/{id}.jsonl")))
        .unwrap_or_else(|e| panic!("the log of {id}: {e}"));
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|mut line| line.get_mut("entry").map(Value::take))
        .collect()
}

/// The compatible client as the configuration above makes it, with its timeouts.
fn client(url: &str) -> OpenAiClient {
    let slow = Duration::from_secs(900);
    OpenAiClient::compat(None)
        .unwrap()
        .with_http(
            ba_model::HttpConfig::default()
                .with_request_timeout(slow)
                .with_idle_timeout(slow)
                .with_call_timeout(slow * 2),
        )
        .with_base_url(format!("{url}/v1"))
        .unwrap()
}

fn question(text: &str) -> Vec<LogEntry> {
    vec![LogEntry::new("u1", LogRole::User, "2025-01-01T00:00:00Z").with_text(text)]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_plain_question_is_answered_with_the_servers_usage_and_window() {
    let Some(url) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let config = config(home.path(), &url, "");
    let (id, metrics) = run_json(&config, &["--mode", "chat", "--task", "What is 2 plus 2?"]);
    // The server's own figures, not zero and not an estimate.
    assert!(metrics["input_tokens"].as_u64() > Some(0), "{metrics:#}");
    assert!(metrics["output_tokens"].as_u64() > Some(0), "{metrics:#}");
    let log = log_of(home.path(), &id);
    let usage = log
        .iter()
        .find_map(|e| e.get("usage"))
        .unwrap_or_else(|| panic!("no usage in {log:#?}"));
    assert!(usage.get("estimated").is_none(), "{usage}");
    // The window came from the server (`/props`): the request was sized to its 4096 tokens.
    let context = log.iter().find_map(|e| e.get("context")).unwrap();
    assert!(context["used"].as_u64().unwrap() < WINDOW, "{context}");
    // The calibration against the server's count is in the report.
    let report = inspect(&config, &id);
    assert!(
        report["calibration"]["calls"].as_u64() >= Some(1),
        "{report:#}"
    );
    assert!(
        report["calibration"]["ratio"].as_f64() > Some(0.0),
        "{report:#}"
    );
    eprintln!(
        "a plain question: input_tokens {} output_tokens {} (server's usage), window used {} of \
         {WINDOW}, calibration {}",
        metrics["input_tokens"], metrics["output_tokens"], context["used"], report["calibration"]
    );
}

/// The server's count of `text` (`POST /tokenize`).
fn server_tokens(url: &str, text: &str) -> usize {
    let body: Value = runtime().block_on(async {
        reqwest::Client::new()
            .post(format!("{url}/tokenize"))
            .json(&serde_json::json!({ "content": text }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    body["tokens"]
        .as_array()
        .unwrap_or_else(|| panic!("/tokenize answered {body}"))
        .len()
}

#[test]
fn the_calibration_follows_the_servers_tokenizer_not_the_local_one() {
    let Some(url) = server() else { return };
    // The same business prose, counted by the server's tokenizer and by cl100k.
    let text = long_text(3, 800);
    let server = server_tokens(&url, &text);
    let local = ba_context::Encoding::Cl100kBase.count(&text);
    let truth = server as f64 / local as f64;
    eprintln!(
        "{} words: {server} tokens by the server's tokenizer, {local} by cl100k (ratio {truth:.3})",
        text.split_whitespace().count()
    );
    // A conversation on such text: the calibration the log keeps is the server's ratio, as
    // its reported prompt tokens measured it, not the 1.0 the local count assumes.
    let home = tempfile::tempdir().unwrap();
    let config = config(home.path(), &url, "");
    let task = format!("{text}\nWhich region sold most?");
    let (id, _) = run_json(&config, &["--mode", "chat", "--task", &task]);
    let ratio = inspect(&config, &id)["calibration"]["ratio"]
        .as_f64()
        .unwrap();
    eprintln!("calibration after one call: {ratio:.3}");
    assert!(
        (ratio - truth).abs() < 0.15 * truth,
        "calibration {ratio} against the tokenizers' {truth}"
    );
}

fn inspect(config: &Path, id: &str) -> Value {
    let out = ba_agent(config)
        .args(["inspect", id, "--json"])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "inspect {id}: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// About `words` words of business prose, different for each `seed`.
fn long_text(seed: usize, words: usize) -> String {
    let regions = ["North", "South", "East", "West", "Central"];
    let mut out = String::new();
    let mut n = 0;
    while out.split_whitespace().count() < words {
        let region = regions[(seed + n) % regions.len()];
        out.push_str(&format!(
            "In week {} the {region} region sold {} units at an average price of {}.{:02} \
             dollars, with {} returns and a margin of {} percent. ",
            n + 1,
            1000 + (seed * 37 + n * 91) % 9000,
            10 + (seed + n) % 90,
            (seed * 7 + n * 13) % 100,
            (seed + n * 3) % 50,
            5 + (seed * 11 + n) % 30
        ));
        n += 1;
    }
    out
}

/// A question on about 400 words of notes (some 600 tokens), different for each `n`: seven
/// of them are more than the server's window.
fn batch(n: usize) -> String {
    format!(
        "Here are the sales notes of batch {n}:\n{}\nWhich region sold most in batch {n}?",
        long_text(n, 400)
    )
}

#[test]
fn six_long_follow_ups_in_one_conversation_each_end_with_an_answer() {
    let Some(url) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    let config = config(home.path(), &url, "");
    // Together far more than the server's 4096 tokens.
    let (id, first) = run_json(&config, &["--mode", "chat", "--task", &batch(0)]);
    assert!(first["input_tokens"].as_u64() > Some(0), "{first:#}");
    for n in 1..=6 {
        let (same, metrics) = run_json(
            &config,
            &["--mode", "chat", "--conversation", &id, "--task", &batch(n)],
        );
        assert_eq!(same, id);
        assert_eq!(metrics["final_answers"], n as u64 + 1, "{metrics:#}");
        assert_eq!(metrics["model_errors"], 0, "follow-up {n}: {metrics:#}");
    }
    let report = inspect(&config, &id);
    // The windows were compressed to fit: the log says so.
    assert!(
        report["compressions"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{report:#}"
    );
    eprintln!(
        "six follow-ups: {} input and {} output tokens over {} calls, calibration {}",
        report["input_tokens"],
        report["output_tokens"],
        report["model_calls"],
        report["calibration"]
    );
}

/// The window entries of a conversation's log.
fn windows_in(home: &Path, id: &str) -> Vec<Value> {
    log_of(home, id)
        .into_iter()
        .filter_map(|e| e.get("window").cloned())
        .collect()
}

#[test]
fn a_window_configured_too_large_is_learned_from_the_servers_refusal() {
    let Some(url) = server() else { return };
    let home = tempfile::tempdir().unwrap();
    // The person guessed a window the server does not have: the conversation grows until the
    // server refuses a request, names its window, and the round is sent again within it.
    let config = config(home.path(), &url, "context_window: 100000\n");
    let (id, _) = run_json(&config, &["--mode", "chat", "--task", &batch(0)]);
    let mut n = 0;
    while windows_in(home.path(), &id).is_empty() {
        n += 1;
        assert!(n <= 9, "nine follow-ups of 600 tokens and no refusal");
        let (_, metrics) = run_json(
            &config,
            &["--mode", "chat", "--conversation", &id, "--task", &batch(n)],
        );
        assert_eq!(metrics["model_errors"], 0, "follow-up {n}: {metrics:#}");
        assert_eq!(metrics["final_answers"], n as u64 + 1, "{metrics:#}");
    }
    let window = &windows_in(home.path(), &id)[0];
    assert_eq!(window["tokens"], WINDOW, "{window}");
    assert!(window["refused_tokens"].as_u64() > Some(WINDOW), "{window}");
    eprintln!("window learned on follow-up {n}: {window}");
    // Kept for the conversation: the next run sizes its request to it at once.
    let (_, next) = run_json(
        &config,
        &[
            "--mode",
            "chat",
            "--conversation",
            &id,
            "--task",
            &batch(n + 1),
        ],
    );
    assert_eq!(next["model_errors"], 0, "{next:#}");
    assert_eq!(next["window"]["tokens"], WINDOW, "{next:#}");
    assert_eq!(windows_in(home.path(), &id).len(), 1);
}

#[test]
fn the_chat_agent_and_run_modes_each_end_with_an_answer() {
    let Some(url) = server() else { return };
    for mode in ["chat", "agent", "run"] {
        let home = tempfile::tempdir().unwrap();
        let config = config(home.path(), &url, "max_rounds: 3\n");
        let (_, metrics) = run_json(&config, &["--mode", mode, "--task", "Say hello."]);
        assert!(
            metrics["final_answers"].as_u64() >= Some(1),
            "{mode}: {metrics:#}"
        );
        assert!(
            metrics["output_tokens"].as_u64() > Some(0),
            "{mode}: {metrics:#}"
        );
    }
}

#[test]
fn eight_conversations_at_once_are_each_answered() {
    let Some(url) = server() else { return };
    let client: Arc<dyn ModelClient> = Arc::new(client(&url));
    let answers = runtime().block_on(async {
        let calls = (0..8).map(|n| {
            let client = Arc::clone(&client);
            async move {
                let request = ModelRequest::new(
                    "smollm2",
                    question(&format!("Name a colour. This is question {n}.")),
                )
                .with_max_tokens(16)
                .with_stream(true);
                client.complete(&request).await
            }
        });
        futures::future::join_all(calls).await
    });
    for (n, answer) in answers.into_iter().enumerate() {
        let answer = answer.unwrap_or_else(|e| panic!("conversation {n}: {e}"));
        assert!(!answer.message.text().is_empty(), "conversation {n}");
        assert!(
            answer.usage.output_tokens > 0 && !answer.usage.estimated,
            "conversation {n}: {:?}",
            answer.usage
        );
    }
}

/// llama-server's slots (`GET /slots`).
async fn slots(http: &reqwest::Client, url: &str) -> Vec<Value> {
    let body: Value = http
        .get(format!("{url}/slots"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body.as_array().cloned().unwrap_or_default()
}

#[test]
fn a_cancelled_stream_frees_its_slot() {
    let Some(url) = server() else { return };
    let client: Arc<dyn ModelClient> = Arc::new(client(&url));
    let rt = runtime();
    rt.block_on(async {
        // A long answer, dropped after its first piece.
        let long = ModelRequest::new(
            "smollm2",
            question("Write a very long story about a lighthouse keeper, in many chapters."),
        )
        .with_max_tokens(3000)
        .with_stream(true);
        let mut stream = Box::pin(ba_model::stream_response(Arc::clone(&client), long));
        match stream.next().await {
            Some(StreamItem::Delta(_)) => {}
            other => panic!("the long answer did not start: {other:?}"),
        }
        // The slot serving it: the one asked for 3000 tokens (other tests share the server).
        let http = reqwest::Client::new();
        let ours = |all: &[Value]| {
            all.iter()
                .find(|s| s["is_processing"] == true && s["params"]["n_predict"] == 3000)
                .map(|s| (s["id"].clone(), s["id_task"].clone()))
        };
        let (slot, task) =
            ours(&slots(&http, &url).await).expect("no slot is writing the long answer");
        drop(stream);
        // The server notices the closed connection at its next token and lets the slot go,
        // long before 3000 tokens could have been written.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = slots(&http, &url).await;
            let now = all.iter().find(|s| s["id"] == slot).unwrap();
            if now["id_task"] != task || now["is_processing"] == false {
                if now["id_task"] == task {
                    let decoded = now["next_token"][0]["n_decoded"].as_u64().unwrap_or(0);
                    assert!(
                        decoded < 3000,
                        "the cancelled answer ran to its end: {now:#}"
                    );
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "slot {slot} still writes the answer 30 s after its stream was dropped: {now:#}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The next request is served.
        let next = ModelRequest::new("smollm2", question("Say yes.")).with_max_tokens(8);
        let answer = client.complete(&next).await.unwrap();
        assert!(answer.usage.output_tokens > 0, "{:?}", answer.usage);
    });
}

/// The embeddings server `.ci/llama.sh` starts beside the chat one (`--embeddings --pooling
/// mean`, the same model), its address in `BA_AGENT_TEST_LLAMA_EMBED_URL`.
const EMBED_VAR: &str = "BA_AGENT_TEST_LLAMA_EMBED_URL";

fn embeddings_server() -> Option<String> {
    ba_testkit::require_env(EMBED_VAR, HOW).map(|url| url.trim_end_matches('/').to_owned())
}

#[test]
fn the_embeddings_client_reads_the_servers_vectors_in_batches() {
    use ba_model::{Embeddings, OpenAiEmbeddings};
    let Some(url) = embeddings_server() else {
        return;
    };
    let texts: Vec<String> = [
        "freight cost by carrier for week 12 came to 4410.20",
        "revenue by region for week 12",
        "the weather in Lyon",
        "freight cost by carrier for week 12 came to 4410.20",
        "What was the freight cost in week 12?",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // Batches of two: the repeated text goes in another batch than its first copy.
    let client = OpenAiEmbeddings::new(&format!("{url}/v1"), "smollm2", None)
        .unwrap()
        .with_batch_size(2);
    let vectors = runtime().block_on(client.embed(&texts)).unwrap();
    assert_eq!(vectors.len(), texts.len());
    let dim = vectors[0].len();
    assert!(dim > 0 && vectors.iter().all(|v| v.len() == dim), "{dim}");
    let cosine = |a: &[f32], b: &[f32]| -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (n(a) * n(b))
    };
    // The same text gives the same vector whichever batch it is in; others differ.
    assert!(cosine(&vectors[0], &vectors[3]) > 0.999);
    assert!(cosine(&vectors[0], &vectors[2]) < 0.999);
}
