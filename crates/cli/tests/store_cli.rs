//! The store from the command line under damage and in the hands of a new user: one store
//! flag and one environment variable for every command, read-only commands that create
//! nothing, `log verify` on duplicate ids and empty or unfinished conversations, a corrupt
//! middle line, concurrent imports, and the smaller findings of the hostile-input review
//! (losses reported by default, `system` in an OpenAI body, log JSONL detection, tool names
//! of imported sessions, error texts).
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use ba_testkit::{Block, answer};

fn cmd(cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    c.current_dir(cwd)
        .args(args)
        .env_remove("BA_AGENT_HOME")
        .env_remove("BA_AGENT_CONFIG");
    c
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    cmd(cwd, args).output().unwrap()
}

fn run_in(cwd: &Path, args: &[&str], input: &str) -> Output {
    use std::io::Write as _;
    let mut child = cmd(cwd, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// A small Claude Code session: a call and its result, a result whose call is missing.
const SESSION: &str = r#"{"type":"user","sessionId":"s","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}
{"type":"assistant","sessionId":"s","uuid":"u2","timestamp":"2026-01-01T00:00:01Z","message":{"id":"msg_1","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","sessionId":"s","uuid":"u3","timestamp":"2026-01-01T00:00:02Z","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"a.txt","is_error":false}]}}
{"type":"user","sessionId":"s","uuid":"u4","timestamp":"2026-01-01T00:00:03Z","message":{"role":"user","content":[{"tool_use_id":"toolu_gone","type":"tool_result","content":"orphan","is_error":false}]}}
{"type":"assistant","sessionId":"s","uuid":"u5","timestamp":"2026-01-01T00:00:04Z","message":{"id":"msg_2","role":"assistant","model":"m","content":[{"type":"text","text":"done"}]}}
"#;

fn session(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("session.jsonl");
    std::fs::write(&path, SESSION).unwrap();
    path
}

fn import(cwd: &Path, extra: &[&str]) -> (String, String) {
    let file = session(cwd);
    let mut args = vec![
        "log",
        "import",
        "--from",
        "claude-code",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = run(cwd, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    (stdout(&o).trim().to_owned(), stderr(&o))
}

#[test]
fn every_command_takes_the_store_from_home_or_ba_agent_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("elsewhere");
    let file = session(dir.path());
    let o = cmd(
        dir.path(),
        &[
            "log",
            "import",
            "--from",
            "claude-code",
            file.to_str().unwrap(),
        ],
    )
    .env("BA_AGENT_HOME", &home)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let id = stdout(&o).trim().to_owned();
    assert!(
        home.join("conversations")
            .join(format!("{id}.jsonl"))
            .is_file()
    );
    assert!(!dir.path().join(".ba-agent").exists());
    let home_s = home.to_str().unwrap();
    // `--home` on `log`, the old `--store` as an alias, and the variable for `log list`.
    for args in [
        vec!["log", "list", "--home", home_s],
        vec!["log", "list", "--store", home_s],
    ] {
        let o = run(dir.path(), &args);
        assert!(stdout(&o).starts_with(&id), "{args:?}: {}", stderr(&o));
    }
    let o = cmd(dir.path(), &["log", "show", &id])
        .env("BA_AGENT_HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cmd(dir.path(), &["inspect", &id, "--store", home_s])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn read_only_commands_create_no_store() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["log", "list"][..],
        &["log", "show", "c1"],
        &["log", "verify", "c1"],
        &["log", "export", "c1", "--to", "openai"],
        &["inspect", "c1"],
    ] {
        let o = run(dir.path(), args);
        assert!(
            !dir.path().join(".ba-agent").exists(),
            "{args:?} created the store"
        );
        if args[1] != "list" {
            assert_eq!(o.status.code(), Some(2), "{args:?}");
            assert!(
                stderr(&o).contains("no conversation store at .ba-agent"),
                "{args:?}: {}",
                stderr(&o)
            );
        } else {
            assert!(o.status.success() && stdout(&o).is_empty());
        }
    }
}

/// Writes a conversation file the way the store does (plus its metadata file when `meta`).
fn stored(dir: &Path, id: &str, lines: &[String], meta: bool) {
    let conv = dir.join(".ba-agent/conversations");
    std::fs::create_dir_all(&conv).unwrap();
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(conv.join(format!("{id}.jsonl")), text).unwrap();
    if meta {
        std::fs::write(
            conv.join(format!("{id}.meta.json")),
            r#"{"title":"t","mode":null,"parent":null,"created_ms":1,"updated_ms":1}"#,
        )
        .unwrap();
    }
}

fn record(seq: u64, id: &str, role: &str, text: &str) -> String {
    format!(
        r#"{{"seq":{seq},"at":1,"entry":{{"schema_version":1,"id":"{id}","role":"{role}","created_at":"2026-01-01T00:00:00Z","content":"{text}"}}}}"#
    )
}

#[test]
fn verify_reports_duplicate_ids_and_empty_and_unfinished_conversations() {
    let dir = tempfile::tempdir().unwrap();
    stored(
        dir.path(),
        "dup",
        &[
            record(1, "m1", "user", "hi"),
            record(2, "m2", "assistant", "hello"),
            record(3, "m1", "user", "again"),
        ],
        true,
    );
    stored(dir.path(), "empty", &[], true);
    stored(
        dir.path(),
        "unfinished",
        &[record(1, "m1", "user", "hi")],
        false,
    );
    let o = run(dir.path(), &["log", "verify", "dup"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("duplicate id: entry 3: id `m1` is already used by entry 1"),
        "{}",
        stdout(&o)
    );
    let o = run(dir.path(), &["log", "verify", "empty"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("empty: "), "{}", stdout(&o));
    let o = run(dir.path(), &["log", "verify", "unfinished"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("unfinished: "), "{}", stdout(&o));
}

#[test]
fn a_corrupt_middle_line_hides_nothing_after_it() {
    let dir = tempfile::tempdir().unwrap();
    stored(
        dir.path(),
        "c",
        &[
            record(1, "m1", "user", "one"),
            "}}} garbage {{{".to_owned(),
            record(3, "m3", "assistant", "three"),
            record(4, "m4", "user", "four"),
        ],
        true,
    );
    // A garbage index and a garbage metadata file beside it cost nothing either.
    std::fs::write(dir.path().join(".ba-agent/index.json"), "").unwrap();
    stored(dir.path(), "other", &[record(1, "x", "user", "x")], false);
    std::fs::write(
        dir.path().join(".ba-agent/conversations/other.meta.json"),
        "garbage",
    )
    .unwrap();
    let o = run(dir.path(), &["log", "show", "c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    let seqs: Vec<&str> = shown
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(seqs, ["1", "3", "4"], "{}", stdout(&o));
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
    assert!(stderr(&o).contains("index.json"), "{}", stderr(&o));
    let o = run(dir.path(), &["log", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
    let o = run(dir.path(), &["log", "verify", "c"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("c: 3 entries, 1 problem(s)"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn concurrent_imports_keep_every_conversation_in_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let file = session(dir.path());
    let file = file.to_str().unwrap();
    let mut children: Vec<_> = (0..12)
        .map(|_| {
            cmd(
                dir.path(),
                &["log", "import", "--from", "claude-code", file],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(".ba-agent/index.json")).unwrap())
            .unwrap();
    assert_eq!(index["conversations"].as_object().unwrap().len(), 12);
}

#[test]
fn import_warns_of_a_result_without_its_call_and_inspect_names_the_tools() {
    let dir = tempfile::tempdir().unwrap();
    let (id, err) = import(dir.path(), &[]);
    assert!(
        err.contains("warning: ") && err.contains("`toolu_gone` answers no earlier tool call"),
        "{err}"
    );
    let o = run(dir.path(), &["inspect", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Bash"), "{text}");
    // The orphan result has no call to name it; the answered one does.
    assert_eq!(text.matches("(unknown)").count(), 1, "{text}");
}

#[test]
fn convert_reports_losses_by_default_and_a_refusal_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let cut = answer("msg_1", &[Block::Text("partial")], "end_turn", false);
    let o = run_in(dir.path(), &["convert", "--to", "openai"], &cut);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("lost: stream"), "{}", stderr(&o));
    let o = run_in(
        dir.path(),
        &["convert", "--to", "openai", "--quiet-losses"],
        &cut,
    );
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let refused = answer("msg_2", &[Block::Text("I can't")], "refusal", true);
    for to in ["anthropic", "openai", "log"] {
        let o = run_in(dir.path(), &["convert", "--to", to], &refused);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("lost: stream.stop_reason: `refusal`"),
            "{to}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn convert_from_openai_refuses_an_anthropic_system_field() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"{"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#;
    let o = run_in(
        dir.path(),
        &["convert", "--from", "openai", "--to", "anthropic"],
        body,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("`system`"), "{}", stderr(&o));
}

#[test]
fn tokens_and_context_build_read_a_log_jsonl_of_one_line_and_a_stored_file() {
    let dir = tempfile::tempdir().unwrap();
    let one = r#"{"schema_version":1,"id":"m1","role":"user","created_at":"2026-01-01T00:00:00Z","content":"hello there"}"#;
    let stored = format!("{}\n", record(1, "m1", "user", "hello there"));
    for input in [one, stored.as_str()] {
        let o = run_in(dir.path(), &["tokens", "--conversation"], input);
        assert!(o.status.success(), "{input}: {}", stderr(&o));
        let o = run_in(
            dir.path(),
            &["context", "build", "--budget", "1000", "-"],
            input,
        );
        assert!(o.status.success(), "{input}: {}", stderr(&o));
        let o = run_in(dir.path(), &["convert", "--to", "openai"], input);
        assert!(stdout(&o).contains("hello there"), "{}", stderr(&o));
    }
}

#[test]
fn an_os_error_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let home = blocker.join("store");
    let file = session(dir.path());
    let o = run(
        dir.path(),
        &[
            "log",
            "import",
            "--from",
            "claude-code",
            file.to_str().unwrap(),
            "--home",
            home.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).matches("os error").count(), 1, "{}", stderr(&o));
}

#[test]
fn skills_show_takes_root_before_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("skills/demo-skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: demo-skill\ndescription: Shows the argument order works.\n---\nThe body.\n",
    )
    .unwrap();
    let o = run(
        dir.path(),
        &["skills", "show", "--root", "skills", "demo-skill"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("The body."), "{}", stdout(&o));
}
