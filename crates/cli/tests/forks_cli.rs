#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! `ba-agent chat --fork ID [--at SEQ]`: the chat goes on in a fork, the original is not
//! changed. The model is the scripted one of `ba-testkit`.

use std::path::Path;
use std::time::Duration;

use ba_storage::{ConversationId, ConversationStore as _, FileStore};
use ba_testkit::model::{ScriptedModel, Turn};
use tokio::io::AsyncWriteExt as _;
use tokio::process::Command;

const HANG: Duration = Duration::from_secs(120);

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "answer what was said",
            |r| r.tool_results().is_empty(),
            |r| Turn::text(format!("Answer to: {}", r.last_user_text())),
        )
        .start()
        .await
}

fn command(sub: &str, config: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg(sub)
        .arg("--config")
        .arg(config)
        .arg("--home")
        .arg(home)
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn chat_goes_on_in_a_fork_and_leaves_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        format!(
            "provider: anthropic\nmodel: claude-forks\nbase_url: {}\nsub_agents: false\n\
             run_python: false\n",
            model.anthropic_base_url()
        ),
    )
    .unwrap();
    let home = dir.path().join("home");
    let first = tokio::time::timeout(
        HANG,
        command("run", &config, &home)
            .args(["--task", "First question"])
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let text = String::from_utf8_lossy(&first.stdout);
    let parent = text
        .lines()
        .next()
        .unwrap()
        .strip_prefix("Conversation ")
        .unwrap()
        .trim()
        .to_owned();
    let mut chat = command("chat", &config, &home)
        // Entry 1 is the memory index the first run wrote; entry 2 the first question.
        .args(["--fork", &parent, "--at", "2"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    stdin
        .write_all(b"Another second question\n/exit\n")
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(HANG, chat.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("Forked {parent} at entry 2.")),
        "{text}"
    );
    assert!(
        text.contains("Answer to: Another second question"),
        "{text}"
    );
    let child = text
        .lines()
        .find_map(|l| l.strip_prefix("Conversation "))
        .map(|l| l.split('.').next().unwrap().trim().to_owned())
        .unwrap();
    assert_ne!(child, parent);
    let store = FileStore::open(&home).unwrap();
    let texts = |id: String| {
        let store = store.clone();
        async move {
            store
                .load(&ConversationId::new(id).unwrap())
                .await
                .unwrap()
                .into_entries()
                .iter()
                .filter(|e| e.include_in_context)
                .map(|e| e.text().into_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        texts(parent.clone()).await,
        ["First question", "Answer to: First question"]
    );
    assert_eq!(
        texts(child).await,
        [
            "First question",
            "Another second question",
            "Answer to: Another second question"
        ]
    );
}
