#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The offline demo end to end: the event stream (snapshotted with timings, ids, paths and
//! token figures redacted), the log it leaves, and the `demo` and `inspect` commands.

use std::path::Path;
use std::process::Command;

use ba_agent::{AgentEvent, Input, RunStatus};
use ba_cli::demo;
use ba_protocol::LogRole;
use ba_storage::ConversationId;
use serde_json::Value;

/// Replaces what changes from run to run or machine to machine.
fn redact(event: &AgentEvent, dir: &Path) -> Value {
    let mut v = serde_json::to_value(event).unwrap();
    let dir = dir.display().to_string();
    fn walk(v: &mut Value, dir: &str, key: Option<&str>, tool: Option<&str>) {
        match v {
            Value::Object(map) => {
                let tool = map
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or(tool.map(str::to_owned));
                for (k, child) in map.iter_mut() {
                    walk(child, dir, Some(k), tool.as_deref());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|c| walk(c, dir, key, tool)),
            Value::Number(_) => {
                if let Some(
                    "duration_ms" | "input_tokens" | "output_tokens" | "tokens_before"
                    | "tokens_after",
                ) = key
                {
                    *v = Value::String("<redacted>".into());
                }
            }
            Value::String(s) => match key {
                Some("conversation_id" | "activation_id") => *v = Value::String("<id>".into()),
                Some("observation") if tool == Some("run_python") => {
                    *v = Value::String("<python output>".into());
                }
                Some("observation" | "text" | "final_answer" | "response") => {
                    let mut t = s.replace(dir, "<dir>");
                    if t.chars().count() > 240 {
                        t = t.chars().take(240).collect::<String>() + "…";
                    }
                    *v = Value::String(t);
                }
                _ => {}
            },
            _ => {}
        }
    }
    walk(&mut v, &dir, None, None);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_session_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let d = demo::setup(dir.path(), None).await.unwrap();
    let events = d
        .agent
        .send(&d.conversation, Input::message(demo::QUESTION))
        .collect_events()
        .await;

    // The run: five rounds, a skill, parallel calls, compressions that keep the skill, a
    // final report with resolved code.
    let Some(AgentEvent::Finished(summary)) = events.last() else {
        panic!("no summary: {events:#?}")
    };
    assert_eq!(summary.status, RunStatus::Answered, "{summary:#?}");
    assert_eq!(summary.rounds, 5);
    let response = summary.response.as_ref().unwrap();
    assert!(response.response.contains("{{CODE:0}}"));
    assert_eq!(response.metadata.code_refs[0].code_id, "code_west_growth");
    assert_eq!(response.metadata.code_refs[0].language, "python");
    assert_eq!(response.metadata.saved_codes[0].code_id, "code_west_growth");
    let conversation = ConversationId::new(&summary.conversation_id).unwrap();
    let (meta, code) = ba_storage::get_code(
        d.agent.workspace().unwrap().as_ref(),
        &conversation,
        "code_west_growth",
    )
    .await
    .unwrap();
    assert_eq!(meta.language, "python");
    assert!(!code.trim().is_empty());
    let compressions: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ContextCompressed { .. }))
        .collect();
    assert!(
        !compressions.is_empty(),
        "the small budget forces a compression"
    );
    for c in compressions {
        let AgentEvent::ContextCompressed {
            tokens_before,
            tokens_after,
            skills_reinjected,
            ..
        } = c
        else {
            unreachable!()
        };
        assert!(tokens_after < tokens_before);
        assert_eq!(skills_reinjected, &["sales-report".to_owned()]);
    }
    assert!(events.iter().any(|e| matches!(e,
        AgentEvent::SkillActivated { skill, allowed_tools: Some(t), .. }
            if skill == "sales-report" && t.len() == 3)));
    let results: Vec<(&str, bool, &str)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                name,
                success,
                observation,
                ..
            } => Some((name.as_str(), *success, observation.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 6);
    let python = results.iter().find(|r| r.0 == "run_python").unwrap();
    // Under CI, python3 must be there; elsewhere its absence checks the error path instead.
    if ba_testkit::require_tool("python3") {
        assert!(python.1 && python.2.contains("vs_target"), "{}", python.2);
        assert!(python.2.contains("2.199"), "{}", python.2);
    } else {
        eprintln!("python3 is absent: run_python fails with a clear error instead");
        assert!(!python.1 && python.2.contains("python3"), "{}", python.2);
    }
    for (name, ok, text) in &results {
        assert!(*ok || *name == "run_python", "{name} failed: {text}");
    }

    // The log holds every entry, pairs intact, usage and context records on model turns.
    let entries = d.agent.entries(&d.conversation).await.unwrap();
    // Each compaction is in the log as a record later requests start from.
    let records = entries.iter().filter(|e| e.is_compaction()).count();
    let compactions = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ContextCompressed { .. }))
        .count();
    assert_eq!(records, compactions);
    assert_eq!(entries.len() - records, 12);
    assert!(ba_protocol::check_log(&entries).is_empty());
    for e in entries.iter().filter(|e| e.role == LogRole::Assistant) {
        assert!(e.records.usage.is_some() && e.records.context.is_some());
    }
    let report = d.agent.report(&d.conversation).await.unwrap();
    assert_eq!(report.model_calls, 5);
    assert_eq!(report.tools.values().map(|t| t.calls).sum::<u64>(), 6);
    assert_eq!(report.skills, ["sales-report"]);
    assert!(!report.compressions.is_empty());

    let shown: Vec<String> = events
        .iter()
        .filter(|e| !matches!(e, AgentEvent::TextDelta { .. }))
        .map(|e| serde_json::to_string(&redact(e, dir.path())).unwrap())
        .collect();
    insta::assert_snapshot!("demo_event_stream", shown.join("\n"));
}

#[test]
fn demo_and_inspect_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["demo", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rounds = stdout.find("── Round 5").expect("five rounds printed");
    let report = stdout
        .find("\nFinal report\n============\n")
        .expect("report heading");
    let metrics = stdout.find("Metrics of conversation").expect("metrics");
    assert!(rounds < report && report < metrics, "{stdout}");
    assert!(
        stdout.contains("```python\nimport json"),
        "code expanded: {stdout}"
    );
    assert!(stdout.contains("context compressed"), "{stdout}");
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Inspect it again with: ba-agent inspect "))
        .and_then(|l| l.split_whitespace().next())
        .expect("conversation id")
        .to_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["inspect", &id, "--json", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["model_calls"], 5);
    assert_eq!(report["skills"][0], "sales-report");
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["inspect", "no-such-conversation", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-conversation"));

    // `report`: the last answer as Markdown on stdout, as HTML in a file; refusals named.
    let report = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ba-agent"))
            .arg("report")
            .args(args)
            .arg("--home")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = report(&[&id, "--format", "md"]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(md.starts_with("# West Q3 2024 sales\n"), "{md}");
    assert!(
        md.contains("> Why did the West region's sales jump"),
        "{md}"
    );
    assert!(
        md.contains("| Sales | 132,538 | 444,645 | 139,000 |"),
        "{md}"
    );
    assert!(md.contains("\n\n```python\nimport json\n"), "{md}");
    let file = dir.path().join("report.html");
    let out = report(&[&id, "--out", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.contains("<td>444,645</td>"), "{html}");
    assert!(
        html.contains("<figure class=\"code\"><figcaption>python"),
        "{html}"
    );
    assert!(!html.contains("<script"), "{html}");
    // With `.zip`, one archive: the report under a folder of its name.
    let file = dir.path().join("report.zip");
    let out = report(&[&id, "--format", "md", "--out", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = ba_testkit::files::unzip(&std::fs::read(&file).unwrap());
    let names: Vec<&String> = entries.keys().collect();
    assert_eq!(names.len(), 1, "the demo's answer names no file: {names:?}");
    assert!(names[0].ends_with("/report.md"), "{names:?}");
    let md = String::from_utf8_lossy(&entries[names[0]]);
    assert!(md.starts_with("# West Q3 2024 sales\n"), "{md}");
    let out = report(&[&id, "--seq", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("entry 1 of conversation") && err.contains("is not a final answer"),
        "{err}"
    );
    let out = report(&[&id, "--format", "pdf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("unknown report format \"pdf\": use md or html")
    );
}

#[test]
fn demo_workflow_runs_the_example_offline() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["demo", "--workflow", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps = [
        "▶ workflow monthly-sales-review (month=2024-09): load → figures → targets → shortfall",
        "✓ node load done (issues, rows) → figures",
        "✓ node figures done (chart, summary) → targets",
        "✓ node targets done (gaps, verdict) → end",
        "■ workflow monthly-sales-review complete",
        "<h2>September 2024: every region on track</h2>",
    ];
    let mut at = 0;
    for step in steps {
        let found = stdout[at..]
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} in order: {stdout}"));
        at += found + step.len();
    }
    // The real tools answered what the recording says: 184 rows in September.
    assert!(
        stdout.contains("\"rows\": [ [ 184, 5, 0, \"2024-09-01\", \"2"),
        "{stdout}"
    );
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Inspect it again with: ba-agent inspect "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    let out = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["inspect", &id, "--json", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &report["workflow_runs"][0];
    assert_eq!(run["workflow"], "monthly-sales-review");
    assert_eq!(run["active"], Value::Null);
    assert_eq!(run["completed"][0][1]["rows"], 184);
    assert_eq!(run["completed"][2][1]["verdict"], "on_track");
}
