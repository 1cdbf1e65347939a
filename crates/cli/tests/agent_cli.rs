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
    let problems = ba_protocol::check_log(&entries);
    assert!(problems.is_empty(), "{problems:?}");
    let calls = entries.iter().flat_map(|e| e.calls()).count();
    let results = entries
        .iter()
        .filter(|e| e.role == ba_protocol::LogRole::Tool)
        .count();
    assert_eq!(calls, results, "every call has its result");
}

/// Whether python3 runs: a skip with a message when it does not, a failure under CI.
fn require_python() -> bool {
    ba_testkit::require_tool("python3")
}

/// `run_python` as the configuration sets it up: sandboxed through `ba-agent sandbox-exec`;
/// the conversation store, the uploads folder (a conversation's uploads reach its code as copies
/// in the working folder) and everything outside the scratch folder are not readable.
#[test]
fn run_python_is_sandboxed_by_default() {
    if !require_python() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("uploads")).unwrap();
    std::fs::write(home.path().join("uploads/upload_1.csv"), "a\n1\n").unwrap();
    let code = format!(
        "import json\nr = {{}}\nfor name, path, mode in [('store', {index:?}, 'r'), \
         ('outside', {out:?}, 'w'), ('upload', {upload:?}, 'r')]:\n    try:\n        \
         open(path, mode).close()\n        r[name] = 'ok'\n    except OSError as e:\n        \
         r[name] = type(e).__name__\nprint(json.dumps(r, sort_keys=True))\n",
        index = home.path().join("index.json").display().to_string(),
        out = outside.path().join("x").display().to_string(),
        upload = home
            .path()
            .join("uploads/upload_1.csv")
            .display()
            .to_string(),
    );
    let config = setup(
        home.path(),
        json!([
            {"expect": {"text": "Check the sandbox."}, "response": {"message": {"role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_python",
                             "input": {"code": code}}]}, "stop_reason": "tool_use"}},
            {"expect": {"role": "tool", "tool_call_id": "toolu_1"}, "response": {"message":
                {"role": "assistant", "content": "Checked."}, "stop_reason": "end_turn"}}
        ]),
    );
    // The shared setup turns run_python off; this test wants the default.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("run_python: false\n", "");
    std::fs::write(&config, text).unwrap();
    let out = ba_agent(&config)
        .args(["run", "--json", "--task", "Check the sandbox."])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {stdout}"));
    let observation: serde_json::Value =
        serde_json::from_str(result["observation"].as_str().unwrap()).unwrap();
    let seen: serde_json::Value =
        serde_json::from_str(observation["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen,
        json!({"outside": "PermissionError", "store": "PermissionError",
               "upload": "PermissionError"})
    );
    assert!(!outside.path().join("x").exists());
}

/// Live (not zombie) processes whose command line mentions `marker`.
fn processes_with(marker: &std::path::Path) -> Vec<i32> {
    let marker = marker.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(&marker) {
            found.push(pid);
        }
    }
    found
}

/// The agent killed with SIGKILL while its code runs: the code dies with it (the sandbox's
/// parent-death signal), nothing is left behind.
#[test]
fn code_dies_with_a_killed_agent() {
    // Blocked (not busy, so no CPU limit would end it) on a pipe nobody writes to.
    const BLOCKED: &str = "import random\nr, w = random._os.pipe()\nrandom._os.read(r, 1)";
    if !require_python() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let marks = tempfile::tempdir().unwrap();
    let config = setup(
        home.path(),
        json!([
            {"expect": {"text": "Wait."}, "response": {"message": {"role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_python",
                             "input": {"code": BLOCKED, "timeout": 300}}]},
                "stop_reason": "tool_use"}}
        ]),
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("run_python: false\n", "");
    std::fs::write(&config, text).unwrap();
    // The scratch folder, and so the code's command line, is under `marks`.
    let mut agent = ba_agent(&config)
        .args(["run", "--task", "Wait."])
        .env("TMPDIR", marks.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while processes_with(marks.path()).is_empty() {
        assert!(
            agent.try_wait().unwrap().is_none(),
            "the agent ended before its code ran"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the code never started"
        );
        std::thread::yield_now();
    }
    agent.kill().unwrap();
    agent.wait().unwrap();
    // SIGKILL of the parent reaches the code at once; its exit is asynchronous.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes_with(marks.path()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the code outlived the agent: {:?}",
            processes_with(marks.path())
        );
        std::thread::yield_now();
    }
}

/// `users add` prints the token alone on its last line; `run --user` makes the conversation
/// the person's, `log list --user` shows a person theirs only, and another person's is not
/// found for them (an admin sees it); `inspect` names the owner and who ran it.
#[test]
fn people_own_their_conversations_from_the_command_line() {
    let home = tempfile::tempdir().unwrap();
    let config = setup(
        home.path(),
        json!([{"response": {"message": {"role": "assistant", "content": "Alice's answer."},
            "stop_reason": "end_turn"}}]),
    );
    let users = |args: &[&str]| {
        let out = ba_agent(&config).arg("users").args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.code(),
            text,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, added, _) = users(&["add", "alice"]);
    assert_eq!(code, Some(0), "{added}");
    let token = added.lines().last().unwrap();
    assert_eq!(token.len(), 64, "the token alone on the last line: {added}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    users(&["add", "bob"]);
    users(&["add", "maria", "--role", "admin"]);
    let (code, _, err) = users(&["add", "alice"]);
    assert_eq!(code, Some(2), "a taken name is refused: {err}");
    let (code, _, err) = users(&["add", "../x"]);
    assert_eq!(code, Some(2), "a bad name is refused: {err}");
    let (_, listed, _) = users(&["list"]);
    assert!(
        listed.contains("alice") && listed.contains("analyst"),
        "{listed}"
    );
    assert!(
        listed.contains("maria") && listed.contains("admin"),
        "{listed}"
    );
    // The secret is never stored: only its hash is.
    let people = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .flat_map(|d| walk(&d.path()))
        .any(|p| std::fs::read(&p).is_ok_and(|b| contains(&b, token.as_bytes())));
    assert!(!people, "the token was found in the store's files");

    let out = ba_agent(&config)
        .args(["run", "--task", "Hello.", "--user", "alice"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Conversation "))
        .unwrap()
        .trim()
        .to_owned();
    let log = |args: &[&str]| {
        let out = ba_agent(&config).arg("log").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (_, alices, _) = log(&["list", "--user", "alice"]);
    assert!(alices.contains(&id), "{alices}");
    let (_, bobs, _) = log(&["list", "--user", "bob"]);
    assert!(!bobs.contains(&id), "{bobs}");
    let (code, _, err) = log(&["show", &id, "--user", "bob"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no conversation"), "{err}");
    let (code, shown, _) = log(&["show", &id, "--user", "maria"]);
    assert_eq!(code, Some(0), "an admin reads it");
    assert!(shown.contains("Alice's answer."), "{shown}");
    let out = ba_agent(&config)
        .args(["run", "--resume", &id, "--user", "bob"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "bob cannot run alice's conversation"
    );

    let out = ba_agent(&config)
        .args(["inspect", &id, "--user", "alice"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("people: alice (1 run)"), "{text}");
    assert!(text.contains("owner alice"), "{text}");
}

fn walk(path: &std::path::Path) -> Vec<std::path::PathBuf> {
    if path.is_dir() {
        std::fs::read_dir(path)
            .unwrap()
            .flatten()
            .flat_map(|d| walk(&d.path()))
            .collect()
    } else {
        vec![path.to_owned()]
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn schedules_are_added_listed_paused_resumed_run_now_and_removed() {
    let home = tempfile::tempdir().unwrap();
    let config = setup(
        home.path(),
        json!([
            {"response": {"message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c1", "name": "complete_node",
                 "input": {"node": "only", "outputs": {}}}]}, "stop_reason": "tool_use"}},
            {"response": {"message": {"role": "assistant", "content": "Reviewed."},
                "stop_reason": "end_turn"}}
        ]),
    );
    let flow = home.path().join("flows/small");
    std::fs::create_dir_all(&flow).unwrap();
    let mut yaml = std::fs::read_to_string(&config).unwrap();
    yaml.push_str(&format!(
        "workflows: [{}]\n",
        home.path().join("flows").display()
    ));
    std::fs::write(&config, yaml).unwrap();
    std::fs::write(
        flow.join("WORKFLOW.md"),
        "---\nname: small\ndescription: A small one.\ninputs:\n  month: {type: string, default: x}\nnodes:\n  - {id: only, title: Only, brief: Do it.}\n---\n",
    )
    .unwrap();
    let schedules = |args: &[&str]| {
        let out = ba_agent(&config)
            .arg("schedules")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = schedules(&["add", "Bad", "--cron", "sometimes", "--workflow", "small"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cron expression `sometimes`"), "{err}");
    let (code, added, err) = schedules(&[
        "add",
        "Monthly review",
        "--cron",
        "0 6 1 * *",
        "--time-zone",
        "Europe/Berlin",
        "--workflow",
        "small",
        "--input",
        "month={{previous_month}}",
        "--webhook",
        "http://127.0.0.1:9/hook",
        "--webhook-secret",
        "s3cret",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let id = added.split_whitespace().nth(1).unwrap().to_owned();
    assert!(id.starts_with("sch_"), "{added}");
    assert!(added.contains("next run "), "{added}");
    let (_, listed, _) = schedules(&["list"]);
    assert!(
        listed.contains(&id)
            && listed.contains("`0 6 1 * *` Europe/Berlin")
            && listed.contains("never run"),
        "{listed}"
    );
    let (_, paused, _) = schedules(&["pause", &id]);
    assert_eq!(paused, format!("paused {id} (Monthly review)\n"));
    let (_, listed, _) = schedules(&["list"]);
    assert!(listed.contains("next paused"), "{listed}");
    let (_, resumed, _) = schedules(&["resume", &id]);
    assert_eq!(resumed, format!("resumed {id} (Monthly review)\n"));
    let (code, ran, err) = schedules(&["run-now", &id]);
    assert_eq!(code, Some(0), "{err}");
    assert!(ran.starts_with(&format!("{id} answered in {id}-")), "{ran}");
    let (_, listed, _) = schedules(&["list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["last_run"]["status"], "answered");
    assert_eq!(listed[0]["webhook"]["secret"], serde_json::Value::Null);
    assert!(!listed.to_string().contains("s3cret"));
    let (_, removed, _) = schedules(&["rm", &id]);
    assert_eq!(removed, format!("removed {id}\n"));
    let (code, _, err) = schedules(&["rm", &id]);
    assert_eq!(code, Some(2), "{err}");
    let (_, listed, _) = schedules(&["list"]);
    assert!(listed.starts_with("no schedules"), "{listed}");
}
