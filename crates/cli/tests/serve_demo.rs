#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! `ba-agent serve --demo`: the binary on 127.0.0.1:0 answers the recorded question over HTTP
//! (the whole demo conversation through the event stream), and SIGTERM ends it cleanly with a
//! stream still open.

use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const TOKEN: &str = "serve-demo-token";
const LIMIT: Duration = Duration::from_secs(120);

/// Reads SSE frames (`event`, JSON `data`) up to and including `finished`.
async fn until_finished(r: reqwest::Response) -> Vec<(String, Value)> {
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    let mut frames = Vec::new();
    loop {
        while let Some(pos) = buf.find("\n\n") {
            let block: String = buf.drain(..pos + 2).collect();
            let mut event = String::new();
            let mut data = String::new();
            let mut id = false;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                } else if line.starts_with("id:") {
                    id = true;
                }
            }
            if data.is_empty() {
                continue;
            }
            assert!(id, "every frame has an id: {block}");
            let done = event == "finished";
            frames.push((event, serde_json::from_str(&data).unwrap()));
            if done {
                return frames;
            }
        }
        let chunk = tokio::time::timeout(LIMIT, body.next())
            .await
            .expect("the stream stalled")
            .expect("the stream ended before `finished`")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_conversation_over_http() {
    let home = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args([
            "serve",
            "--demo",
            "--bind",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--home",
        ])
        .arg(home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    assert!(
        !first.contains(TOKEN),
        "a given token is not printed: {first}"
    );
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).bearer_auth(TOKEN);

    assert_eq!(
        http.get(format!("{base}/api/v1/demo/questions"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let questions: Vec<String> = get("/api/v1/demo/questions")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(questions, ba_cli::demo::QUESTIONS);
    let created = http
        .post(format!("{base}/api/v1/conversations"))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stream = get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let run = http
        .post(format!("{base}/api/v1/conversations/{id}/runs"))
        .bearer_auth(TOKEN)
        .json(&json!({"request_id": "demo-1", "input": {"type": "message", "text": questions[0]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 202);
    let frames = until_finished(stream).await;
    let names: Vec<&str> = frames.iter().map(|(e, _)| e.as_str()).collect();
    for e in [
        "run_started",
        "plan",
        "skill_activated",
        "tool_result",
        "context_compressed",
        "final_answer",
    ] {
        assert!(names.contains(&e), "{e} missing: {names:?}");
    }
    let (_, finished) = frames.last().unwrap();
    assert_eq!(finished["status"], "answered", "{finished:#}");
    let entries: Vec<u64> = frames
        .iter()
        .filter(|(e, _)| e == "entry")
        .map(|(_, d)| d["seq"].as_u64().unwrap())
        .collect();
    let messages: Value = get(&format!("/api/v1/conversations/{id}/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let logged = messages["entries"].as_array().unwrap().len() as u64;
    assert_eq!(
        entries,
        (1..=logged).collect::<Vec<_>>(),
        "one entry event per log entry"
    );
    let code: Value = get(&format!("/api/v1/conversations/{id}/code"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let code_id = code[0]["code_id"]
        .as_str()
        .expect("the report's code is saved");
    let download = get(&format!(
        "/api/v1/conversations/{id}/code/{code_id}/download"
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(download.status(), 200);
    assert!(
        download.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains(".py")
    );

    // SIGTERM with an event stream open: the server ends it and exits 0.
    let _open = get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
