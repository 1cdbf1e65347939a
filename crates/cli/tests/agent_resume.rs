#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! A run killed after a tool result was stored resumes from the log alone to the same final
//! answer as a run that was never interrupted.

use ba_testkit as support;

use std::path::Path;
use std::process::Stdio;

use ba_protocol::{LogEntry, LogRole};
use ba_storage::{ConversationId, ConversationStore, FileStore};
use serde_json::{Value, json};
use support::{Block, End, MockServer, Reply, answer};
use tokio::io::{AsyncBufReadExt, BufReader};

const TASK: &str = "Which region sold the most in 2024?";
const QUERY: &str = "SELECT region, ROUND(SUM(amount), 0) AS sales FROM sales GROUP BY region ORDER BY sales DESC LIMIT 1";
const FINAL: &str = "East sold the most in 2024.";

/// The configuration of one home folder, and the recording the replay provider plays: the
/// same two model turns the mock server would give.
fn setup(home: &Path) -> std::path::PathBuf {
    let data = home.join("data");
    std::fs::create_dir_all(&data).unwrap();
    ba_builtins::demo_data::generate(&data).unwrap();
    let recording = json!([
        {"expect": {"role": "user", "text": TASK},
         "response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "query_database", "input": {"query": QUERY}}]},
          "stop_reason": "tool_use"}},
        {"expect": {"role": "tool", "tool_call_id": "toolu_1"},
         "response": {"message": {"role": "assistant", "content": FINAL}, "stop_reason": "end_turn"}}
    ]);
    let replay = home.join("recording.json");
    std::fs::write(&replay, recording.to_string()).unwrap();
    let config = home.join("config.yaml");
    let text = format!(
        "home: {home}\nmodel: claude-test\ndatabase: {db}\ndata: [{data}]\nreplay: {replay}\nrun_python: false\nsub_agents: false\n",
        home = home.display(),
        db = data.join("sales.db").display(),
        data = data.display(),
        replay = replay.display(),
    );
    std::fs::write(&config, text).unwrap();
    config
}

fn command(config: &Path, provider: &str, base_url: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("BA_AGENT_CONFIG", config)
        .env("BA_AGENT_PROVIDER", provider)
        .env("BA_AGENT_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env_remove("BA_AGENT_HOME")
        .env_remove("BA_AGENT_MODEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The `finished` event of a `--json` run's output.
fn finished(stdout: &[u8]) -> Value {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "finished")
        .unwrap_or_else(|| panic!("no finished event in {}", String::from_utf8_lossy(stdout)))
}

async fn log_of(home: &Path, id: &str) -> Vec<LogEntry> {
    FileStore::open(home)
        .unwrap()
        .load(&ConversationId::new(id).unwrap())
        .await
        .unwrap()
        .into_entries()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_run_resumes_from_the_log_to_the_same_answer() {
    // The reference: the whole session replayed without interruption.
    let reference_home = tempfile::tempdir().unwrap();
    let reference_config = setup(reference_home.path());
    let out = command(&reference_config, "replay", "http://unused.invalid")
        .args(["run", "--json", "--task", TASK])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = finished(&out.stdout);
    assert_eq!(reference["final_answer"], FINAL);

    // The live run: the model asks for a query, the result is stored, and the process is
    // killed while it waits for the model's next answer (the mock server never sends it).
    let home = tempfile::tempdir().unwrap();
    let config = setup(home.path());
    let tool_call = answer(
        "msg_1",
        &[Block::Tool(
            "toolu_1",
            "query_database",
            vec![&json!({"query": QUERY}).to_string()],
        )],
        "tool_use",
        true,
    );
    let server = MockServer::start(vec![
        Reply::sse(&tool_call, 64, End::Complete),
        Reply::sse("", 1, End::Silent),
    ])
    .await;
    let mut child = command(&config, "anthropic", &server.base_url)
        .args(["run", "--json", "--task", TASK])
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "run_started");
    let id = first["conversation_id"].as_str().unwrap().to_owned();
    // The second request is only sent once the tool result is in the store.
    server.wait_for_requests(2).await;
    child.kill().await.unwrap();

    // What the model reads (the memory index a run writes first is kept out of it).
    let log: Vec<LogEntry> = log_of(home.path(), &id)
        .await
        .into_iter()
        .filter(|e| e.include_in_context)
        .collect();
    let roles: Vec<LogRole> = log.iter().map(|e| e.role).collect();
    assert_eq!(roles, [LogRole::User, LogRole::Assistant, LogRole::Tool]);
    assert_eq!(log[2].tool_call_id.as_deref(), Some("toolu_1"));

    // Resume from the log alone, with the replay client going on where the log stops.
    let out = command(&config, "replay", "http://unused.invalid")
        .args(["run", "--json", "--resume", &id])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let resumed = finished(&out.stdout);
    assert_eq!(resumed["final_answer"], reference["final_answer"]);
    assert_eq!(resumed["status"], "answered");
    assert_eq!(resumed["rounds"], 1, "only the missing model turn was made");

    // The query ran once, and its result is the one the uninterrupted run got.
    let log = log_of(home.path(), &id).await;
    assert!(ba_protocol::check_log(&log).is_empty());
    let results: Vec<&LogEntry> = log.iter().filter(|e| e.role == LogRole::Tool).collect();
    assert_eq!(results.len(), 1);
    let reference_id = reference["conversation_id"].as_str().unwrap();
    let reference_log = log_of(reference_home.path(), reference_id).await;
    let reference_result = reference_log
        .iter()
        .find(|e| e.role == LogRole::Tool)
        .unwrap();
    assert_eq!(results[0].text(), reference_result.text());
    assert_eq!(log.last().unwrap().text(), FINAL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_line_in_the_log_costs_no_later_entry_and_no_sequence_number() {
    let home = tempfile::tempdir().unwrap();
    let config = setup(home.path());
    // A third turn for the run that goes on with the damaged conversation.
    let more = "And in 2023?";
    let recording = json!([
        {"expect": {"role": "user", "text": TASK},
         "response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "query_database", "input": {"query": QUERY}}]},
          "stop_reason": "tool_use"}},
        {"expect": {"role": "tool", "tool_call_id": "toolu_1"},
         "response": {"message": {"role": "assistant", "content": FINAL}, "stop_reason": "end_turn"}},
        {"expect": {"role": "user", "text": more},
         "response": {"message": {"role": "assistant", "content": "East again."}, "stop_reason": "end_turn"}}
    ]);
    std::fs::write(home.path().join("recording.json"), recording.to_string()).unwrap();
    let out = command(&config, "replay", "http://unused.invalid")
        .args(["run", "--json", "--task", TASK])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = finished(&out.stdout)["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = home
        .path()
        .join("conversations")
        .join(format!("{id}.jsonl"));
    // The first line (the task) is damaged beyond reading its sequence number.
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let before = lines.len();
    lines[0] = "#### damaged ####";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let out = command(&config, "replay", "http://unused.invalid")
        .args(["run", "--json", "--conversation", &id, "--task", more])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(finished(&out.stdout)["final_answer"], "East again.");
    // Every number in the file is used once, in order, and the new entries follow the old.
    let seqs: Vec<u64> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["seq"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (2..=seqs.len() as u64 + 1).collect();
    assert_eq!(seqs, expected);
    assert!(seqs.len() > before - 1);
    let log = log_of(home.path(), &id).await;
    assert_eq!(log.len(), seqs.len());
    assert_eq!(log.last().unwrap().text(), "East again.");
}
