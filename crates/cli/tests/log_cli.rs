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

/// What a conversation holds reaches the terminal escaped: a title written raw before titles
/// were cleaned (an escape sequence, NUL, a right-to-left override) is read back clean by
/// `log list` and `inspect`, and a question's text is shown with its control characters as
/// `\u{…}` by `log show`.
#[test]
fn list_show_and_inspect_print_no_control_or_bidi_characters() {
    use ba_storage::{ConversationId, ConversationStore as _, FileStore};
    let cwd = tempfile::tempdir().unwrap();
    let home = cwd.path().join(".ba-agent");
    let id = ConversationId::new("raw-title").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = FileStore::open(&home).unwrap();
        store
            .create(&id, ba_storage::NewConversation::default())
            .await
            .unwrap();
        let entry =
            ba_protocol::LogEntry::new("q1", ba_protocol::LogRole::User, "2026-01-01T00:00:00Z")
                .with_text("Sales\u{1b}]0;owned\u{7}\u{1b}[2J by\u{202e}noiger");
        store.append(&id, &entry, None).await.unwrap();
    });
    // As an older version wrote it.
    let meta = home.join("conversations/raw-title.meta.json");
    let mut raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    raw["title"] = "Q3\u{1b}[2J\u{0}review\u{202e}fdp.exe".into();
    std::fs::write(&meta, serde_json::to_vec(&raw).unwrap()).unwrap();
    // Its cache goes too, so the store reads the title from the file.
    std::fs::remove_file(home.join("index.json")).unwrap();
    let home_arg = home.to_str().unwrap();
    let raw_free = |what: &str, o: &Output| {
        assert!(o.status.success(), "{what}: {}", stderr(o));
        let out = stdout(o);
        for c in ['\u{1b}', '\u{0}', '\u{7}', '\u{202e}'] {
            assert!(!out.contains(c), "{what} printed {c:?} raw: {out:?}");
        }
        out
    };
    let list = raw_free(
        "log list",
        &run(cwd.path(), &["log", "list", "--home", home_arg]),
    );
    assert!(list.contains("\tQ3 [2J review fdp.exe\n"), "{list:?}");
    let show = raw_free(
        "log show",
        &run(
            cwd.path(),
            &["log", "show", "raw-title", "--home", home_arg],
        ),
    );
    assert!(
        show.contains("Sales\\u{1b}]0;owned\\u{7}\\u{1b}[2J by\\u{202e}noiger"),
        "{show:?}"
    );
    let inspect = raw_free(
        "inspect",
        &run(cwd.path(), &["inspect", "raw-title", "--home", home_arg]),
    );
    assert!(
        inspect.starts_with("Q3 [2J review fdp.exe · "),
        "{inspect:?}"
    );
}

/// `convert --from claude-code` and `log import --from claude-code` refuse a line past 32 MiB
/// as soon as they are past it, naming the line and the bound: the input here is a 40 MiB
/// line streamed through a pipe, and the command stops reading it at the bound.
#[test]
fn an_over_long_line_is_refused_naming_it_and_the_bound() {
    use std::io::Write as _;
    use std::process::Stdio;
    const SENT: usize = 40 << 20;
    let cwd = tempfile::tempdir().unwrap();
    let home = cwd.path().join("home");
    let home_arg = home.to_str().unwrap().to_owned();
    let commands: [&[&str]; 2] = [
        &["convert", "--from", "claude-code", "--to", "log", "-"],
        &[
            "log",
            "import",
            "--from",
            "claude-code",
            "/dev/stdin",
            "--home",
            &home_arg,
        ],
    ];
    for args in commands {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ba-agent"))
            .current_dir(cwd.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // The line never ends while the command reads; a command that stops reading ends it.
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'x'; 1 << 20];
            let mut sent = 0;
            while sent < SENT {
                if stdin.write_all(&chunk).is_err() {
                    break;
                }
                sent += chunk.len();
            }
            sent
        });
        let out = child.wait_with_output().unwrap();
        let sent = writer.join().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("line 1 of") && err.contains("over the limit of 32 MiB"),
            "{args:?}: {err}"
        );
        assert!(sent < SENT, "{args:?}: all {sent} bytes were read");
    }
}
