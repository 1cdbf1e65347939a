#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! Hooks with real scripts, in Claude Code's shape, around a model that decides (the scripted
//! model of `ba-testkit`): a `pre_tool_use` hook that blocks code with `import os` (the model
//! reads why), one that rewrites the arguments, one that hangs (killed at its timeout; the call
//! goes on), one that exits 1 (reported, not blocking); a `user_prompt_submit` hook that adds
//! context; a `stop` hook that sends the model back once. Every run of a hook is in the log.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ba_agent::{Agent, CommandHook, Input, RunStatus};
use ba_model::{AnthropicClient, ApiKey};
use ba_protocol::{EntryKind, HookEvent, HookRecord, HookVerdict};
use ba_storage::{ConversationId, ConversationStore as _, FileStore, NewConversation};
use ba_testkit::model::{ScriptedModel, Turn};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Code {
    /// Python code.
    code: String,
}

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "report the result",
            |r| r.last_result().is_some_and(|t| t.name == "run_python"),
            |r| {
                let t = r.last_result().unwrap();
                let head = if t.is_error { "Failed" } else { "Result" };
                Turn::text(format!("{head}: {}", t.text))
            },
        )
        .rule(
            "run code with os",
            |r| r.last_user_text().contains("list the files") && r.tool_results().is_empty(),
            |_| {
                Turn::call(
                    "run_python",
                    json!({"code": "import os\nprint(os.listdir('.'))"}),
                )
            },
        )
        .rule(
            "run plain code",
            |r| r.last_user_text().contains("compute") && r.tool_results().is_empty(),
            |_| Turn::call("run_python", json!({"code": "print(6 * 7)"})),
        )
        .rule(
            "answer anything else",
            |r| r.tool_results().is_empty(),
            |r| Turn::text(format!("You said: {}", r.last_user_text())),
        )
        .start()
        .await
}

/// A script file in `dir`, run with `python3`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    format!("python3 {}", path.display())
}

struct Setup {
    agent: Agent,
    id: ConversationId,
    ran: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

async fn setup(model: &ScriptedModel, hooks: impl FnOnce(&Path) -> Vec<CommandHook>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&ran);
    let python = typed_tool("run_python", "Runs Python.", move |c: Code, _| {
        let r = Arc::clone(&r);
        async move {
            r.lock().unwrap().push(c.code.clone());
            Ok(Value::String(format!("ran {} bytes", c.code.len())))
        }
    });
    let mut builder = Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir.path().join("store")).unwrap()))
        .tool(python)
        .sub_agents(false);
    for h in hooks(dir.path()) {
        builder = builder.hook(Arc::new(h));
    }
    let agent = builder.build().unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    Setup {
        agent,
        id,
        ran,
        _dir: dir,
    }
}

async fn hook_records(s: &Setup) -> Vec<HookRecord> {
    s.agent
        .store()
        .load(&s.id)
        .await
        .unwrap()
        .into_entries()
        .into_iter()
        .filter(|e| e.kind() == Some(EntryKind::Hook))
        .filter_map(|e| e.records.hook)
        .collect()
}

/// The event and verdict of every hook run in the log, in order.
async fn hook_events(s: &Setup) -> Vec<(HookEvent, HookVerdict)> {
    hook_records(s)
        .await
        .iter()
        .map(|r| (r.event, r.verdict))
        .collect()
}

/// Whether a `sleep ARG` process is alive (read from /proc).
fn sleeping(arg: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|p| {
        std::fs::read(p.path().join("cmdline")).is_ok_and(|c| {
            let parts: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            parts.first().is_some_and(|p| p.ends_with(b"sleep"))
                && parts.get(1).is_some_and(|a| *a == arg.as_bytes())
        })
    })
}

const BLOCK_OS: &str = r#"
import json, sys
event = json.load(sys.stdin)
assert event["hook_event_name"] == "PreToolUse", event
if "import os" in event["tool_input"].get("code", ""):
    print("import os is not allowed here: use file_reader", file=sys.stderr)
    sys.exit(2)
"#;

#[tokio::test]
async fn a_pre_tool_use_hook_blocks_code_that_imports_os() {
    let model = model().await;
    let s = setup(&model, |d| {
        vec![
            CommandHook::new(HookEvent::PreToolUse, script(d, "block.py", BLOCK_OS))
                .with_matcher("run_python"),
        ]
    })
    .await;
    let done = s
        .agent
        .send(&s.id, Input::message("Please list the files."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let answer = done.final_answer.unwrap();
    assert!(answer.starts_with("Failed"), "{answer}");
    assert!(answer.contains("import os is not allowed here"), "{answer}");
    assert!(s.ran.lock().unwrap().is_empty(), "the blocked call ran");
    let records = hook_records(&s).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].verdict, HookVerdict::Block);
    assert_eq!(records[0].exit_code, Some(2));
    assert_eq!(records[0].tool.as_deref(), Some("run_python"));
    // The same hook lets other code through.
    let done = s
        .agent
        .send(&s.id, Input::message("Now compute it."))
        .finish()
        .await;
    assert_eq!(done.final_answer.as_deref(), Some("Result: ran 12 bytes"));
    assert_eq!(*s.ran.lock().unwrap(), ["print(6 * 7)"]);
}

const REWRITE: &str = r##"
import json, sys
event = json.load(sys.stdin)
code = event["tool_input"]["code"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "updatedInput": {"code": "# checked\n" + code}}}))
"##;

#[tokio::test]
async fn a_pre_tool_use_hook_rewrites_the_arguments() {
    let model = model().await;
    let s = setup(&model, |d| {
        vec![CommandHook::new(
            HookEvent::PreToolUse,
            script(d, "rewrite.py", REWRITE),
        )]
    })
    .await;
    let done = s
        .agent
        .send(&s.id, Input::message("Please compute 6 times 7."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered);
    assert_eq!(*s.ran.lock().unwrap(), ["# checked\nprint(6 * 7)"]);
    let answer = done.final_answer.unwrap();
    assert!(
        answer.contains("a hook changed"),
        "the model is told: {answer}"
    );
    assert!(hook_records(&s).await[0].changed_input);
}

#[tokio::test]
async fn a_hook_that_hangs_is_killed_and_one_that_fails_does_not_block() {
    let model = model().await;
    let s = setup(&model, |d| {
        vec![
            // A child of the shell: only a kill of the whole group ends it.
            CommandHook::new(HookEvent::PreToolUse, "sleep 617.25; true")
                .with_timeout(Duration::from_millis(500)),
            CommandHook::new(
                HookEvent::PreToolUse,
                script(
                    d,
                    "fail.py",
                    "import sys\nprint('broken', file=sys.stderr)\nsys.exit(1)\n",
                ),
            ),
        ]
    })
    .await;
    let start = std::time::Instant::now();
    let done = s
        .agent
        .send(&s.id, Input::message("Please compute 6 times 7."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert!(
        start.elapsed() < Duration::from_secs(300),
        "the hanging hook was waited for: {:?}",
        start.elapsed()
    );
    assert_eq!(s.ran.lock().unwrap().len(), 1, "the call ran");
    assert!(
        !sleeping("617.25"),
        "the hook's child outlived its timeout (the group was not killed)"
    );
    let records = hook_records(&s).await;
    let verdicts: Vec<HookVerdict> = records.iter().map(|r| r.verdict).collect();
    assert_eq!(verdicts, [HookVerdict::TimedOut, HookVerdict::Failed]);
    assert!(
        records[1].message.as_deref().unwrap().contains("broken"),
        "{records:?}"
    );
    assert_eq!(records[1].exit_code, Some(1));
}

#[tokio::test]
async fn a_user_prompt_submit_hook_adds_context_and_a_stop_hook_sends_back_once() {
    let model = model().await;
    let stop = r#"
import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print("say which fiscal year", file=sys.stderr)
    sys.exit(2)
"#;
    let s = setup(&model, |d| {
        vec![
            CommandHook::new(
                HookEvent::UserPromptSubmit,
                "echo 'Fiscal years start in April.'",
            ),
            CommandHook::new(HookEvent::Stop, script(d, "stop.py", stop)),
        ]
    })
    .await;
    let done = s
        .agent
        .send(&s.id, Input::message("Hello there."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    // The model saw the context with the message.
    let first = &model.requests()[0];
    assert!(first.last_user_text().contains("Hello there."));
    assert!(first.shows("Fiscal years start in April."));
    // Sent back once with the stop hook's reason; the second answer stands.
    assert_eq!(
        done.final_answer.as_deref(),
        Some("You said: [stop hook] say which fiscal year")
    );
    let events = hook_events(&s).await;
    assert_eq!(
        events,
        [
            (HookEvent::UserPromptSubmit, HookVerdict::Allow),
            (HookEvent::Stop, HookVerdict::Block),
            (HookEvent::Stop, HookVerdict::Allow),
        ]
    );
}

#[tokio::test]
async fn a_post_tool_use_hook_adds_to_the_result_and_a_pre_compact_hook_is_told() {
    let model = model().await;
    let post = r#"
import json, sys
event = json.load(sys.stdin)
assert event["hook_event_name"] == "PostToolUse", event
assert event["tool_response"]["success"] is True, event
print(json.dumps({"decision": "block", "reason": "check the units of " + event["tool_name"]}))
"#;
    let s = setup(&model, |d| {
        vec![
            CommandHook::new(HookEvent::PostToolUse, script(d, "post.py", post)),
            CommandHook::new(HookEvent::PreCompact, "cat > /dev/null; echo compacting"),
        ]
    })
    .await;
    let done = s
        .agent
        .send(&s.id, Input::message("Please compute 6 times 7."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let answer = done.final_answer.unwrap();
    assert!(answer.starts_with("Result: ran 12 bytes"), "{answer}");
    assert!(
        answer.contains("[hook: check the units of run_python]"),
        "{answer}"
    );
    assert_eq!(s.ran.lock().unwrap().len(), 1);
    s.agent.compact(&s.id).await.unwrap();
    let events = hook_events(&s).await;
    assert_eq!(
        events,
        [
            (HookEvent::PostToolUse, HookVerdict::Block),
            (HookEvent::PreCompact, HookVerdict::Allow),
        ]
    );
}
