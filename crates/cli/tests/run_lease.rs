#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! One run per conversation whatever the front end: `ba-agent run` takes the store's run lease
//! like `serve` does, so a second process is refused with the holder's name; `ba-agent cancel`
//! stops a run of another process through the store; and the lease of a process that was
//! killed is taken over (the kernel drops its lock with it). The model is the scripted one of
//! `ba-testkit`, holding the first question open for as long as the test needs a run going.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ba_storage::{ConversationId, ConversationStore as _, FileStore};
use ba_testkit::model::{ScriptedModel, Turn};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// A bound for waits that must end; far above what any of them takes on a slow machine, so
/// that a broken cancel fails the test instead of hanging it.
const HANG: Duration = Duration::from_secs(120);

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "hold the slow question open",
            |r| r.last_user_text().contains("slow"),
            |_| Turn::hold(),
        )
        .rule(
            "answer the quick one",
            |r| r.last_user_text().contains("quick"),
            |_| Turn::text("Quick answer."),
        )
        .start()
        .await
}

fn config(dir: &Path, model: &ScriptedModel) -> PathBuf {
    let path = dir.join("ba-agent.yaml");
    std::fs::write(
        &path,
        format!(
            "provider: anthropic\nmodel: claude-lease\nbase_url: {}\nsub_agents: false\n",
            model.anthropic_base_url()
        ),
    )
    .unwrap();
    path
}

/// `ba-agent SUB [--config CONFIG] --home HOME`, with a key for the scripted model.
fn ba_agent(sub: &str, config: Option<&Path>, home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg(sub);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.arg("--home").arg(home).kill_on_drop(true);
    cmd
}

/// `ba-agent run` of `task` in conversation `id`.
async fn run_in(config: &Path, home: &Path, id: &str, task: &str) -> std::process::Output {
    let mut cmd = ba_agent("run", Some(config), home);
    cmd.args(["--conversation", id, "--task", task]);
    tokio::time::timeout(HANG, cmd.output())
        .await
        .unwrap()
        .unwrap()
}

/// `ba-agent cancel ID`.
async fn cancel(home: &Path, id: &str) -> std::process::Output {
    let mut cmd = ba_agent("cancel", None, home);
    cmd.arg(id);
    tokio::time::timeout(HANG, cmd.output())
        .await
        .unwrap()
        .unwrap()
}

/// `ba-agent run --task …` started, its conversation id read from its first line, and the
/// model holding its question: the run holds the lease until it is cancelled or killed.
async fn start_slow_run(config: &Path, home: &Path, model: &ScriptedModel) -> (Child, String) {
    let mut cmd = ba_agent("run", Some(config), home);
    cmd.args(["--task", "A slow question about revenue."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(HANG, lines.next_line())
        .await
        .expect("the first run printed nothing")
        .unwrap()
        .expect("the first run ended before printing its conversation");
    let id = first
        .strip_prefix("Conversation ")
        .expect("the first line names the conversation")
        .trim()
        .to_owned();
    // The rest of its output is drained, so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    tokio::time::timeout(HANG, model.wait_for_requests(1))
        .await
        .expect("the first run never called the model");
    (child, id)
}

#[tokio::test]
async fn a_second_process_is_refused_naming_the_holder_and_a_cancel_through_the_store_stops_the_first()
 {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let model = model().await;
    let config = config(dir.path(), &model);
    let (mut first, id) = start_slow_run(&config, &home, &model).await;
    let first_pid = first.id().unwrap();

    let out = run_in(&config, &home, &id, "A quick question.").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {stderr}");
    assert!(
        stderr.contains(&format!(
            "conversation {id} already has a run going: run run_"
        )) && stderr.contains(&format!("ba-agent run, pid {first_pid} on ")),
        "the refusal names the holder: {stderr}"
    );
    // Nothing of the refused run reached the model or the log.
    assert_eq!(model.requests().len(), 1);
    let store = FileStore::open(&home).unwrap();
    let conv = ConversationId::new(&id).unwrap();
    let users = |entries: &[ba_protocol::LogEntry]| {
        entries
            .iter()
            .filter(|e| e.role == ba_protocol::LogRole::User)
            .count()
    };
    assert_eq!(users(&store.load(&conv).await.unwrap().into_entries()), 1);

    let asked = cancel(&home, &id).await;
    let said = String::from_utf8_lossy(&asked.stdout);
    assert!(
        asked.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    assert!(
        said.contains(&format!("ba-agent run, pid {first_pid}")),
        "{said}"
    );
    let status = tokio::time::timeout(HANG, first.wait())
        .await
        .expect("the cancelled run did not end")
        .unwrap();
    assert_eq!(status.code(), Some(1), "a cancelled run is not a success");
    let entries = store.load(&conv).await.unwrap().into_entries();
    let last = entries.last().unwrap();
    assert_eq!(
        last.llm_error.as_ref().map(|e| e.kind),
        Some(ba_protocol::LlmErrorKind::Cancelled),
        "the cancel is in the log: {last:?}"
    );
    assert!(
        store.cancel_requested(&conv).await.unwrap().is_none(),
        "the request was cleared"
    );

    // Free again: the next run goes through, and nothing is left to cancel.
    let out = run_in(&config, &home, &id, "A quick question.").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = cancel(&home, &id).await;
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
}

#[tokio::test]
async fn the_lease_of_a_killed_process_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let model = model().await;
    let config = config(dir.path(), &model);
    let (mut first, id) = start_slow_run(&config, &home, &model).await;
    let store = FileStore::open(&home).unwrap();
    let conv = ConversationId::new(&id).unwrap();
    let holder = store.run_holder(&conv).await.unwrap();
    assert!(
        holder
            .as_ref()
            .is_some_and(|h| h.holder.contains("ba-agent run")),
        "the running process holds the lease: {holder:?}"
    );
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    // The kernel released the dead process's lock with its files: the bound is zero.
    assert_eq!(store.run_holder(&conv).await.unwrap(), None);
    let out = run_in(&config, &home, &id, "A quick question.").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Quick answer."), "{stdout}");
}
