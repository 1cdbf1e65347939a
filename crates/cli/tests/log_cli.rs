//! `ba-agent log …` end to end: import, list, show, export, verify, and the bad-input paths.
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

/// The Claude Code sessions of the shared fixtures (a skip, or a failure under CI, when absent).
fn fixtures() -> Option<std::path::PathBuf> {
    ba_testkit::fixture("transcripts/spotter")
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn import(cwd: &Path, from: &str, file: &Path) -> String {
    let o = run(
        cwd,
        &["log", "import", "--from", from, file.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "import prints one line: {out}");
    out.trim().to_owned()
}

#[test]
fn import_show_export_verify_a_claude_code_session() {
    let Some(dir) = fixtures() else { return };
    let cwd = tempfile::tempdir().unwrap();
    let id = import(cwd.path(), "claude-code", &dir.join("tool_heavy.jsonl"));
    assert!(
        cwd.path()
            .join(".ba-agent/conversations")
            .join(format!("{id}.jsonl"))
            .is_file()
    );

    let list = stdout(&run(cwd.path(), &["log", "list"]));
    let fields: Vec<&str> = list.trim_end().split('\t').collect();
    assert_eq!(fields[0], id);
    assert_eq!(fields[1], "19");

    let show = run(cwd.path(), &["log", "show", &id]);
    assert!(show.status.success());
    insta::assert_snapshot!("show_tool_heavy", stdout(&show));

    // `log export` prints what `convert` prints for the same entries.
    let as_log = stdout(&run(cwd.path(), &["log", "export", &id, "--to", "log"]));
    let log_file = cwd.path().join("entries.jsonl");
    std::fs::write(&log_file, as_log).unwrap();
    for to in ["anthropic", "openai"] {
        let exported = run(cwd.path(), &["log", "export", &id, "--to", to]);
        assert!(exported.status.success(), "{}", stderr(&exported));
        let converted = run(
            cwd.path(),
            &[
                "convert",
                "--from",
                "log",
                "--to",
                to,
                log_file.to_str().unwrap(),
            ],
        );
        assert_eq!(stdout(&exported), stdout(&converted), "--to {to}");
    }

    let verify = run(cwd.path(), &["log", "verify", &id]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    assert_eq!(stdout(&verify), format!("{id}: 19 entries, 0 problem(s)\n"));

    // Damage the file: a garbage line and a torn tail.
    let file = cwd
        .path()
        .join(".ba-agent/conversations")
        .join(format!("{id}.jsonl"));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"garbage in the middle\n{\"seq\":20,\"at\":1,\"entry\":{\"id\"");
    std::fs::write(&file, bytes).unwrap();
    let verify = run(cwd.path(), &["log", "verify", &id]);
    assert_eq!(verify.status.code(), Some(1));
    let report = stdout(&verify).replace(&id, "[id]");
    insta::assert_snapshot!("verify_damaged", report);
}

#[test]
fn verify_reports_broken_pairs() {
    let cwd = tempfile::tempdir().unwrap();
    let rollout = cwd.path().join("rollout.jsonl");
    std::fs::write(
        &rollout,
        concat!(
            r#"{"timestamp":"2025-09-01T10:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"ls"}]}}"#,
            "\n",
            r#"{"timestamp":"2025-09-01T10:00:01Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"call_1"}}"#,
            "\n",
            r#"{"timestamp":"2025-09-01T10:00:02Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_9","output":"x"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let id = import(cwd.path(), "codex", &rollout);
    let verify = run(cwd.path(), &["log", "verify", &id]);
    assert_eq!(verify.status.code(), Some(1));
    insta::assert_snapshot!("verify_pairs", stdout(&verify).replace(&id, "[id]"));
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let cwd = tempfile::tempdir().unwrap();
    let o = run(cwd.path(), &["log", "show", "../etc/passwd"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "error: invalid conversation id `../etc/passwd`: it contains `..`\n"
    );

    // In a store that exists: the conversation is what is missing.
    std::fs::create_dir_all(cwd.path().join(".ba-agent/conversations")).unwrap();
    let o = run(
        cwd.path(),
        &["log", "export", "missing", "--to", "anthropic"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o), "error: conversation `missing` does not exist\n");

    let binary = cwd.path().join("binary.jsonl");
    std::fs::write(&binary, b"{\"type\":\"user\"}\n\xff\xfe").unwrap();
    let o = run(
        cwd.path(),
        &[
            "log",
            "import",
            "--from",
            "claude-code",
            binary.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).ends_with("binary.jsonl: not UTF-8 text (invalid byte at offset 16)\n"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
}

/// `log fork ID --at SEQ` prints the fork's id on its last line; the fork shows the parent's
/// entries up to the cut and verifies clean; with its parent's files gone by hand, `verify`
/// names the broken link (exit 1) instead of failing to read.
#[test]
fn fork_prints_the_new_id_and_verify_checks_the_link() {
    let cwd = tempfile::tempdir().unwrap();
    let rollout = cwd.path().join("rollout.jsonl");
    std::fs::write(
        &rollout,
        concat!(
            r#"{"timestamp":"2025-09-01T10:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"first question"}]}}"#,
            "\n",
            r#"{"timestamp":"2025-09-01T10:00:01Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"first answer"}]}}"#,
            "\n",
            r#"{"timestamp":"2025-09-01T10:00:02Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"second question"}]}}"#,
            "\n"
        ),
    )
    .unwrap();
    let parent = import(cwd.path(), "codex", &rollout);
    let past = run(cwd.path(), &["log", "fork", &parent, "--at", "9"]);
    assert_eq!(past.status.code(), Some(2));
    assert!(
        stderr(&past).contains("past its last entry"),
        "{}",
        stderr(&past)
    );
    let forked = run(cwd.path(), &["log", "fork", &parent, "--at", "2"]);
    assert!(forked.status.success(), "{}", stderr(&forked));
    let out = stdout(&forked);
    let child = out.lines().last().unwrap().trim().to_owned();
    assert_ne!(child, parent);
    let show = stdout(&run(cwd.path(), &["log", "show", &child]));
    assert!(show.contains("first answer"), "{show}");
    assert!(!show.contains("second question"), "{show}");
    let verify = run(cwd.path(), &["log", "verify", &child]);
    assert!(verify.status.success(), "{}", stdout(&verify));
    let conversations = cwd.path().join(".ba-agent/conversations");
    std::fs::remove_file(conversations.join(format!("{parent}.jsonl"))).unwrap();
    std::fs::remove_file(conversations.join(format!("{parent}.meta.json"))).unwrap();
    let broken = run(cwd.path(), &["log", "verify", &child]);
    assert_eq!(broken.status.code(), Some(1));
    assert!(
        stdout(&broken).contains(&format!("broken fork: its parent {parent} cannot be read")),
        "{}",
        stdout(&broken)
    );
}
