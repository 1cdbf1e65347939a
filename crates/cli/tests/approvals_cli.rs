#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on a broken invariant"
)]

//! `ba-agent run` with a person in the loop: a run whose `query_database` call asks for
//! approval exits 3 with the waiting call as its last JSON line; a second process decides
//! (`--approve CALL_ID`, `--reject CALL_ID --reason`, `--approve-all`) and the run goes on
//! from the log. The model is the scripted one of `ba-testkit`; the database is the project's
//! demo SQLite file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ba_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

const HANG: Duration = Duration::from_secs(120);

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "answer from the query",
            |r| r.tool_results().iter().any(|t| t.name == "query_database"),
            |r| {
                let t = r
                    .tool_results()
                    .iter()
                    .find(|t| t.name == "query_database")
                    .unwrap();
                if t.is_error {
                    Turn::text(format!("Not run: {}", t.text))
                } else {
                    Turn::text(format!("Counted: {}", t.text))
                }
            },
        )
        .rule(
            "count the rows",
            |r| r.last_user_text().contains("rows") && r.tool_results().is_empty(),
            |_| {
                Turn::call(
                    "query_database",
                    json!({"query": "SELECT count(*) AS n FROM sales"}),
                )
            },
        )
        .start()
        .await
}

fn config(dir: &Path, model: &ScriptedModel) -> PathBuf {
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo/sales.db");
    let path = dir.join("ba-agent.yaml");
    std::fs::write(
        &path,
        format!(
            "provider: anthropic\nmodel: claude-approvals\nbase_url: {}\nsub_agents: false\n\
             run_python: false\ndatabase: {}\napprovals:\n  mode: ask\n  tools:\n    \
             query_database: ask\n",
            model.anthropic_base_url(),
            db.display()
        ),
    )
    .unwrap();
    path
}

async fn ba_agent(config: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg("run")
        .arg("--config")
        .arg(config)
        .arg("--home")
        .arg(home)
        .args(args)
        .kill_on_drop(true);
    tokio::time::timeout(HANG, cmd.output())
        .await
        .unwrap()
        .unwrap()
}

/// The last line of stdout, as JSON.
fn last_json(out: &std::process::Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}\n{text}"))
}

/// Asks the question; returns the conversation and the waiting call's id.
async fn paused(config: &Path, home: &Path) -> (String, String) {
    let out = ba_agent(
        config,
        home,
        &["--task", "How many rows has the sales table?", "--json"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pause = last_json(&out);
    assert_eq!(pause["status"], "awaiting_approval");
    assert_eq!(pause["pending"][0]["tool"], "query_database");
    assert_eq!(
        pause["pending"][0]["arguments"]["query"],
        "SELECT count(*) AS n FROM sales"
    );
    (
        pause["conversation"].as_str().unwrap().to_owned(),
        pause["pending"][0]["call_id"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_paused_run_exits_3_and_a_second_process_approves_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let config = config(dir.path(), &model);
    let home = dir.path().join("home");
    let (id, call) = paused(&config, &home).await;
    // A call that does not wait is bad input, named.
    let wrong = ba_agent(
        &config,
        &home,
        &["--conversation", &id, "--approve", "nope"],
    )
    .await;
    assert_eq!(wrong.status.code(), Some(2));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("\"nope\"") && err.contains(&call), "{err}");
    let out = ba_agent(&config, &home, &["--conversation", &id, "--approve", &call]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Counted:"), "{text}");
    // Nothing waits any more.
    let again = ba_agent(&config, &home, &["--conversation", &id, "--approve-all"]).await;
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("no call waits"));
}

#[tokio::test]
async fn a_rejection_from_the_command_line_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let config = config(dir.path(), &model);
    let home = dir.path().join("home");
    let (id, call) = paused(&config, &home).await;
    let out = ba_agent(
        &config,
        &home,
        &[
            "--conversation",
            &id,
            "--reject",
            &call,
            "--reason",
            "not on the production copy",
        ],
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Not run:"), "{text}");
    assert!(text.contains("not on the production copy"), "{text}");
}

/// `ba-agent chat` on a pseudo-terminal (util-linux `script` gives it one): a waiting call is
/// asked about on the terminal — `n` with a reason, which the model reads; `a`, after which the
/// same tool is not asked about again in the conversation.
#[tokio::test]
async fn chat_asks_on_the_terminal() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if !ba_testkit::require_tool("script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let config = config(dir.path(), &model);
    let home = dir.path().join("home");
    let command = format!(
        "'{}' chat --config '{}' --home '{}'",
        env!("CARGO_BIN_EXE_ba-agent"),
        config.display(),
        home.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("SHELL", "/bin/sh")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = tokio::spawn(async move {
        let mut all = Vec::new();
        let _ = stdout.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all).into_owned()
    });
    for line in [
        "How many rows has the sales table?",
        "n",
        "use the sample copy",
        "How many rows now?",
        "a",
        "And the rows once more?",
        "/exit",
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let status = tokio::time::timeout(HANG, child.wait())
        .await
        .unwrap()
        .unwrap();
    drop(stdin);
    let text = tokio::time::timeout(HANG, reader).await.unwrap().unwrap();
    assert!(status.success(), "{text}");
    assert_eq!(
        text.matches("Approval needed: query_database").count(),
        2,
        "asked twice, then approved for the conversation: {text}"
    );
    assert!(
        text.contains("Not run:") && text.contains("use the sample copy"),
        "{text}"
    );
    // Three answers: the rejection's, then two counts (each streamed, then in its report).
    assert_eq!(text.matches("Final report").count(), 3, "{text}");
    let last = text.rsplit("Final report").next().unwrap();
    assert!(last.contains("Counted:") && last.contains("1942"), "{text}");
}

/// Hooks from the configuration file: a `pre_tool_use` command with a matcher blocks the query
/// (exit 2, its stderr read by the model), and `inspect` lists the hook's run.
#[tokio::test]
async fn a_configured_hook_blocks_the_query_and_inspect_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let db = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo/sales.db");
    let config = dir.path().join("hooks.yaml");
    std::fs::write(
        &config,
        format!(
            "provider: anthropic\nmodel: claude-hooks\nbase_url: {}\nsub_agents: false\n\
             run_python: false\ndatabase: {}\nhooks:\n  pre_tool_use:\n    - matcher: \
             query_database\n      command: \"echo 'no queries today' >&2; exit 2\"\n      \
             timeout_secs: 10\n",
            model.anthropic_base_url(),
            db.display()
        ),
    )
    .unwrap();
    let home = dir.path().join("home");
    let out = ba_agent(
        &config,
        &home,
        &["--task", "How many rows has the sales table?", "--json"],
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("Not run:") && text.contains("no queries today"),
        "{text}"
    );
    let report = last_json(&out);
    assert_eq!(report["hooks"][0]["event"], "pre_tool_use");
    assert_eq!(report["hooks"][0]["verdict"], "block");
    assert_eq!(report["hooks"][0]["tool"], "query_database");
}
