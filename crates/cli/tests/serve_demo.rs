#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! `ba-agent serve --demo`: the binary on 127.0.0.1:0 answers the recorded question over HTTP
//! (the whole demo conversation through the event stream), and SIGTERM ends it cleanly with a
//! stream still open.

mod support;

use serde_json::Value;

use crate::support::{Served, until_finished};

const TOKEN: &str = "serve-demo-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_conversation_over_http() {
    let home = tempfile::tempdir().unwrap();
    let served = Served::start(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent")),
        TOKEN,
        home.path(),
    )
    .await;
    let (base, http) = (&served.base, &served.http);
    assert!(
        !served.banner.contains(TOKEN),
        "a given token is not printed: {}",
        served.banner
    );
    let get = |path: &str| served.get(path);

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
    let id = served.create().await;
    let stream = get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    served.ask(&id, "demo-1", &questions[0]).await;
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
    served.terminate().await;
}

/// A reader of the banner that goes away (`ba-agent serve | head -1`) does not stop the server:
/// standard output is a pipe already closed when the server starts, and it still answers, says
/// why (with its address) on standard error, and stops cleanly on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_standard_output_does_not_stop_the_server() {
    use tokio::io::AsyncBufReadExt as _;

    let home = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--token", TOKEN])
        .arg("--home")
        .arg(home.path())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let said = tokio::time::timeout(support::LIMIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.contains("could not print the address") {
                return line;
            }
        }
        panic!(
            "the server stopped without a word: {:?}",
            child.wait().await
        );
    })
    .await
    .unwrap();
    let addr = said
        .split_once("serving on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {said:?}"));
    let health = reqwest::get(format!("http://{addr}/health")).await.unwrap();
    assert_eq!(health.status(), 200);

    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(support::LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_bind_beyond_loopback_needs_a_token() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["serve", "--demo", "--bind", "0.0.0.0:0", "--home"])
        .arg(home.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("0.0.0.0:0 (not loopback) needs a token"),
        "{err}"
    );
    // An empty token file is no token either.
    let file = home.path().join("token");
    std::fs::write(&file, "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .arg("--home")
        .arg(home.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the token is empty"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_file_and_allowed_hosts_are_honoured() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("token");
    std::fs::write(&file, "from-a-file-42\nignored second line\n").unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .args(["--allow-host", "analytics.internal:8080", "--home"])
        .arg(home.path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (banner, base) = support::banner(&mut child).await;
    assert!(!banner.contains("from-a-file-42"), "{banner}");
    let http = reqwest::Client::new();
    let with = |host: Option<&str>, token: &str| {
        let mut r = http
            .get(format!("{base}/api/v1/conversations"))
            .bearer_auth(token);
        if let Some(h) = host {
            r = r.header("host", h);
        }
        r.send()
    };
    // The file's first line is the token.
    assert_eq!(with(None, "from-a-file-42").await.unwrap().status(), 200);
    assert_eq!(
        with(None, "ignored second line").await.unwrap().status(),
        401
    );
    // A host the operator allowed is accepted beside loopback; any other is refused.
    assert_eq!(
        with(Some("analytics.internal:8080"), "from-a-file-42")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        with(Some("evil.example:8080"), "from-a-file-42")
            .await
            .unwrap()
            .status(),
        403
    );
    child.kill().await.unwrap();
}

/// `serve --demo --config F` lends the file's approvals to the offline demo: the recorded
/// question pauses at its first query, a decision over HTTP (approve for the conversation)
/// lets it finish, and after a restart of the server the conversation is idle with its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_pauses_for_approval_and_goes_on_after_a_decision() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("approvals.yaml");
    std::fs::write(&config, "approvals:\n  tools:\n    query_database: ask\n").unwrap();
    let args = ["--demo", "--config", config.to_str().unwrap()];
    let start = || async {
        Served::start_with(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent")),
            TOKEN,
            home.path(),
            &args,
        )
        .await
    };
    let served = start().await;
    let id = served.create().await;
    let events = served
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    served.ask(&id, "demo-1", ba_cli::demo::QUESTIONS[0]).await;
    let frames = until_finished(events).await;
    assert!(frames.iter().any(|(e, _)| e == "approval_requested"));
    assert_eq!(frames.last().unwrap().1["status"], "awaiting_approval");
    let pending: Value = served
        .get(&format!("/api/v1/conversations/{id}/approvals"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let call = pending["pending"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(pending["pending"][0]["tool"], "query_database");
    let events = served
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    let decided = served
        .post(
            &format!("/api/v1/conversations/{id}/approvals/{call}"),
            &serde_json::json!({"decision": "approve_for_conversation"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 202);
    let frames = until_finished(events).await;
    assert_eq!(frames.last().unwrap().1["status"], "answered", "{frames:?}");
    served.terminate().await;
    // Tomorrow: the same folder, a new server.
    let served = start().await;
    let conv: Value = served
        .get(&format!("/api/v1/conversations/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(conv["status"], "idle", "{conv}");
    served.terminate().await;
}

/// The team contract: `users add NAME --home DIR` prints the token alone on its last line, and
/// `serve --auth users --home DIR` takes each person's token; another person's conversation
/// answers 404 and is not listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_the_stores_users_takes_each_persons_token() {
    let home = tempfile::tempdir().unwrap();
    let add = |name: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
            .args(["users", "add", name, "--home"])
            .arg(home.path())
            .env_remove("BA_AGENT_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .to_owned()
    };
    let (alice, bob) = (add("alice"), add("bob"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args([
            "serve",
            "--demo",
            "--auth",
            "users",
            "--bind",
            "127.0.0.1:0",
            "--home",
        ])
        .arg(home.path())
        .env_remove("BA_AGENT_CONFIG")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (banner, base) = support::banner(&mut child).await;
    assert!(
        !banner.contains("token"),
        "no single token is made: {banner}"
    );
    let http = reqwest::Client::new();
    let list = |token: &str| {
        http.get(format!("{base}/api/v1/conversations"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(list(&alice).await.unwrap().status(), 200);
    assert_eq!(list("not-a-token").await.unwrap().status(), 401);
    let created: serde_json::Value = http
        .post(format!("{base}/api/v1/conversations"))
        .bearer_auth(&alice)
        .json(&serde_json::json!({"title": "alice's"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    let read = |token: &str| {
        http.get(format!("{base}/api/v1/conversations/{id}"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(read(&alice).await.unwrap().status(), 200);
    assert_eq!(read(&bob).await.unwrap().status(), 404);
    let bobs: serde_json::Value = list(&bob).await.unwrap().json().await.unwrap();
    assert!(!bobs.to_string().contains(id), "{bobs}");
    let alices: serde_json::Value = list(&alice).await.unwrap().json().await.unwrap();
    assert!(alices["items"].to_string().contains(id), "{alices}");
    child.kill().await.unwrap();
}
