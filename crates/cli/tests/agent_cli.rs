#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! `ba-agent run` and `ba-agent chat` from the command line, on a replayed model.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::json;

fn setup(home: &std::path::Path, turns: serde_json::Value) -> std::path::PathBuf {
    let replay = home.join("recording.json");
    std::fs::write(&replay, turns.to_string()).unwrap();
    let skills = home.join("skills/brief");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(
        skills.join("SKILL.md"),
        "---\nname: brief\ndescription: Answer in one sentence.\n---\nOne sentence only.\n",
    )
    .unwrap();
    let config = home.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "provider: replay\nreplay: {}\nhome: {}\nskills: [{}]\nrun_python: false\n",
            replay.display(),
            home.display(),
            home.join("skills").display()
        ),
    )
    .unwrap();
    config
}

fn ba_agent(config: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("BA_AGENT_CONFIG", config)
        .env_remove("BA_AGENT_PROVIDER")
        .env_remove("BA_AGENT_HOME")
        .env_remove("BA_AGENT_MODEL");
    cmd
}

#[test]
fn run_prints_rounds_the_report_and_metrics() {
    let home = tempfile::tempdir().unwrap();
    let config = setup(
        home.path(),
        json!([{"expect": {"text": "Say hi."}, "response": {"message": {"role": "assistant",
            "content": "Hi, I am ready to analyse your sales."}, "stop_reason": "end_turn"}}]),
    );
    let out = ba_agent(&config)
        .args(["run", "--task", "Say hi."])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("── Round 1"), "{stdout}");
    assert!(stdout.contains("Hi, I am ready"), "streamed text: {stdout}");
    assert!(stdout.contains("Final report\n============"), "{stdout}");
    assert!(stdout.contains("Metrics of conversation"), "{stdout}");
}

#[test]
fn run_without_a_provider_says_how_to_configure_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["run", "--task", "x"])
        .env_remove("BA_AGENT_PROVIDER")
        .env_remove("BA_AGENT_CONFIG")
        .env("BA_AGENT_HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("BA_AGENT_PROVIDER") && stderr.contains("ba-agent demo"),
        "{stderr}"
    );
    let bad = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(bad.path(), "provider: replay\ncolour: blue\n").unwrap();
    let out = ba_agent(bad.path())
        .args(["run", "--task", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("colour"));
}

#[test]
fn chat_takes_commands_and_messages() {
    let home = tempfile::tempdir().unwrap();
    let config = setup(
        home.path(),
        json!([{"expect": {"text": "hello"}, "response": {"message": {"role": "assistant",
            "content": "Hello! Ask me about sales."}, "stop_reason": "end_turn"}}]),
    );
    let mut child = ba_agent(&config)
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"/skills\n/mode run\n/bogus\nhello\n/compact\n/exit\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("brief"), "skills listed: {stdout}");
    assert!(stdout.contains("mode: run"), "{stdout}");
    assert!(stdout.contains("unknown command /bogus"), "{stdout}");
    assert!(stdout.contains("Hello! Ask me about sales."), "{stdout}");
    assert!(stdout.contains("compacted 2 entries"), "{stdout}");
}

/// A reader that goes away while the agent runs (`ba-agent demo | head`): the process ends with
/// status 0 and nothing on stderr, after the round that was running has landed in the log —
/// no call is left without its result.
#[test]
fn a_closed_pipe_stops_the_agent_between_rounds() {
    use std::io::{BufRead as _, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["demo", "--dir"])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read until the first round starts, then stop reading.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("── Round 1") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "no round printed");
    }
    drop(reader);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?} {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
    // The conversation in the demo folder: whole rounds only.
    let conversations = dir.path().join("conversations");
    let log = std::fs::read_dir(&conversations)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let entries: Vec<ba_protocol::LogEntry> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            serde_json::from_value(v["entry"].clone()).unwrap()
        })
        .collect();
    assert!(!entries.is_empty());
    let problems = ba_protocol::validate::check_log(&entries);
    assert!(problems.is_empty(), "{problems:?}");
    let calls = entries.iter().flat_map(|e| e.calls()).count();
    let results = entries
        .iter()
        .filter(|e| e.role == ba_protocol::LogRole::Tool)
        .count();
    assert_eq!(calls, results, "every call has its result");
}
