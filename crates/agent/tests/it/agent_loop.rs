#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The loop's rules with a replay client: calls without results resumed, the round limit,
//! structured answers that need a correction, sub-agents, skill modifiers, compaction, modes.

use std::sync::Arc;

use ba_agent::{Agent, AgentEvent, Input, ResponseMode, RunStatus, TASK_TOOL};
use ba_model::{DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ReplayClient};
use ba_protocol::{LogEntry, LogRole, LogToolCall, Mode};
use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::{delegating_turns, replay_agent, text_turn};

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    key: String,
}

fn lookup() -> impl ba_tools::Tool {
    typed_tool("lookup", "Looks a key up.", |a: Lookup, _| async move {
        Ok(json!({"key": a.key, "value": a.key.len()}))
    })
}

fn tool_turn(call: &str, key: &str, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": call, "name": "lookup", "input": {"key": key}}]},
        "stop_reason": "tool_use"}})
}

/// Records every request as sent, then lets the replay client answer.
#[derive(Debug)]
struct Recording {
    inner: ReplayClient,
    requests: std::sync::Mutex<Vec<ModelRequest>>,
}

impl Recording {
    fn new(turns: &[Value]) -> Arc<Self> {
        Arc::new(Self {
            inner: ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test")
                .unwrap(),
            requests: Default::default(),
        })
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ModelClient for Recording {
    fn provider(&self) -> &str {
        "recording"
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete_streaming(request, on_delta).await
    }
}

fn agent(
    dir: &std::path::Path,
    turns: &[Value],
    f: impl FnOnce(ba_agent::AgentBuilder) -> ba_agent::AgentBuilder,
) -> Agent {
    replay_agent(dir, turns, |b| f(b.tool(lookup())))
}

#[tokio::test]
async fn resume_runs_the_calls_that_have_no_result_then_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let turns = [text_turn(
        "Both keys are short.",
        json!({"role": "tool", "tool_call_id": "c2"}),
    )];
    let agent = agent(dir.path(), &turns, |b| b);
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    // A log cut after the first of two results, as a crash would leave it.
    let mut call = LogEntry::new("a1", LogRole::Assistant, "t");
    call.tool_calls = Some(vec![
        LogToolCall::new("c1", "lookup", &json!({"key": "ab"})),
        LogToolCall::new("c2", "lookup", &json!({"key": "abc"})),
    ]);
    let mut done = LogEntry::new("r1", LogRole::Tool, "t").with_text("{\"value\": 2}");
    done.tool_call_id = Some("c1".into());
    let user = LogEntry::new("u1", LogRole::User, "t").with_text("Look both up.");
    agent
        .store()
        .append_batch(&id, &[user, call, done], Some(0))
        .await
        .unwrap();

    let events = agent.send(&id, Input::Resume).collect_events().await;
    let ran: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallStarted { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ran, ["c2"], "only the call without a result runs again");
    let Some(AgentEvent::Finished(s)) = events.last() else {
        panic!()
    };
    assert_eq!(s.status, RunStatus::Answered);
    assert_eq!(s.final_answer.as_deref(), Some("Both keys are short."));

    // Resuming a finished conversation gives its answer back without calling the model.
    let again = agent.send(&id, Input::Resume).finish().await;
    assert_eq!(again.status, RunStatus::Answered);
    assert_eq!(again.rounds, 0);
    assert_eq!(again.final_answer.as_deref(), Some("Both keys are short."));
}

#[tokio::test]
async fn the_round_limit_stops_a_run_and_continue_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let turns = [
        tool_turn("c1", "a", json!({"role": "user"})),
        tool_turn("c2", "b", json!({"tool_call_id": "c1"})),
        text_turn("Done.", json!({"role": "user", "text": "continue"})),
    ];
    let agent = agent(dir.path(), &turns, |b| b.configure(|s| s.max_rounds = 2));
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let first = agent.send(&id, Input::message("Go.")).finish().await;
    assert_eq!(first.status, RunStatus::RoundLimit);
    assert_eq!(first.rounds, 2);
    assert!(first.error.unwrap().contains("round limit of 2"));
    let second = agent.send(&id, Input::Continue).finish().await;
    assert_eq!(second.status, RunStatus::Answered);
    let entries = agent.entries(&id).await.unwrap();
    assert!(ba_protocol::check_log(&entries).is_empty());
}

#[tokio::test]
async fn a_malformed_structured_answer_is_sent_back_once_for_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let good = json!({"task_analysis": "t", "execution_plan": "R1", "current_round": 1,
        "action": {"type": "complete", "content": "<div>chart</div> see <code_ref>code_a</code_ref>",
                   "code_blocks": [{"code_id": "code_a", "language": "sql", "code": "SELECT 1", "description": "one"}]}});
    let turns = [
        text_turn(
            "{\"task_analysis\": \"t\", \"current_round\": 1}",
            json!({"role": "user", "text": "Q"}),
        ),
        text_turn(&good.to_string(), json!({"role": "user"})),
    ];
    // The store is a FileStore: its workspace keeps the code block.
    let agent = agent(dir.path(), &turns, |b| {
        b.configure(|s| s.response_mode = ResponseMode::Structured)
    });
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let events = agent.send(&id, Input::message("Q")).collect_events().await;
    assert!(events.iter().any(|e| matches!(e,
        AgentEvent::Error { kind, message, .. } if *kind == ba_agent::ErrorKind::Format && message.contains("execution_plan"))));
    let Some(AgentEvent::Finished(s)) = events.last() else {
        panic!()
    };
    assert_eq!(s.status, RunStatus::Answered, "{s:#?}");
    let r = s.response.as_ref().unwrap();
    assert_eq!(r.response, "<div>chart</div> see {{CODE:0}}");
    assert!(r.metadata.contains_html);
    assert_eq!(r.metadata.code_refs[0].language, "sql");
    let workspace = agent.workspace().unwrap();
    let (meta, code) = ba_storage::get_code(workspace.as_ref(), &id, "code_a")
        .await
        .unwrap();
    assert_eq!(
        (meta.file_name.as_str(), code.as_str()),
        ("code_a.sql", "SELECT 1")
    );
    let entries = agent.entries(&id).await.unwrap();
    let fix = entries
        .iter()
        .find(|e| e.records.kind == Some(ba_protocol::EntryKind::FormatError))
        .unwrap();
    assert!(fix.text().starts_with("FORMAT_ERROR"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_tool_runs_a_child_agent_in_its_own_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let turns = delegating_turns();
    let agent = agent(dir.path(), &turns, |b| b.sub_agents(true));
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let events = agent
        .send(&id, Input::message("Delegate it."))
        .collect_events()
        .await;
    let observation = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResult {
                name, observation, ..
            } if name == TASK_TOOL => Some(observation.clone()),
            _ => None,
        })
        .unwrap();
    // Shown at `full`, the report is spilled: a data file of the conversation, by its id.
    let data_id = observation
        .strip_prefix("Data stored in file: ")
        .and_then(|rest| rest.lines().next())
        .expect(&observation);
    assert_eq!(data_id, "data_001", "{observation}");
    let (_, bytes) = agent
        .workspace()
        .unwrap()
        .read_bytes(&id, data_id, 1 << 20)
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(report["report"], "One, two, three.");
    let child = ConversationId::new(report["conversation_id"].as_str().unwrap()).unwrap();
    let meta = agent.store().metadata(&child).await.unwrap();
    assert_eq!(meta.parent.as_deref(), Some(id.as_str()));
    let Some(AgentEvent::Finished(s)) = events.last() else {
        panic!()
    };
    assert_eq!(s.final_answer.as_deref(), Some("The sub-agent counted."));
}

#[tokio::test]
async fn compaction_starts_later_requests_from_the_summary_and_modes_change_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let turns = [
        text_turn(
            "First answer.",
            json!({"text": "First question about revenue."}),
        ),
        text_turn("Second answer.", json!({"text": "Second question."})),
    ];
    let client = Recording::new(&turns);
    let agent = Agent::builder(client.clone())
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .tool(lookup())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation {
            mode: Some(Mode::Chat),
            ..Default::default()
        })
        .await
        .unwrap();
    agent
        .send(&id, Input::message("First question about revenue."))
        .finish()
        .await;
    let before: Vec<String> = agent
        .entries(&id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(before.len(), 2);
    let c = agent.compact(&id).await.unwrap();
    assert_eq!(c.entries, 2);
    agent.set_mode(&id, Mode::Agent).await.unwrap();
    let s = agent
        .send(&id, Input::message("Second question."))
        .finish()
        .await;
    assert_eq!(s.status, RunStatus::Answered);
    let entries = agent.entries(&id).await.unwrap();
    // One compaction record, whose window is the summary alone.
    let record = entries
        .iter()
        .find_map(|e| e.records.compaction.as_ref())
        .unwrap();
    assert!(record.starts_afresh());
    assert_eq!(record.strategies, ["compact"]);
    assert_eq!(record.dropped.len(), 2);
    let ba_protocol::WindowItem::Entry { entry: summary } = record.items[0].clone() else {
        panic!("the window is not the summary: {:?}", record.items);
    };
    assert_eq!(summary.role, LogRole::System);
    assert!(summary.text().contains("First question about revenue."));
    assert_eq!(entries.last().unwrap().mode, Some(Mode::Agent));
    let report = agent.report(&id).await.unwrap();
    assert_eq!((report.compactions, report.user_messages), (1, 2));

    // What the model was sent: the first request in chat mode over the first question; the
    // second in agent mode (its banner and persona), starting from the summary, with nothing
    // from before the compaction but the summary, then the new question.
    let requests = client.requests();
    assert_eq!(requests.len(), 2);
    let persona = ba_agent::Prompts::builtin().persona;
    let persona = persona.trim();
    assert!(!persona.is_empty());
    let first = &requests[0];
    let first_system = first.system.as_deref().unwrap_or("");
    assert!(first_system.contains("MODE: chat"), "{first_system}");
    assert!(!first_system.contains(persona), "{first_system}");
    let first_texts: Vec<String> = first
        .entries
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    assert_eq!(first_texts, ["First question about revenue."]);
    let second = &requests[1];
    let second_system = second.system.as_deref().unwrap_or("");
    assert!(second_system.contains("MODE: agent"), "{second_system}");
    assert!(!second_system.contains("MODE: chat"), "{second_system}");
    assert!(second_system.contains(persona), "{second_system}");
    assert_eq!(second.entries.len(), 2, "{:#?}", second.entries);
    let sent = second.entries[0].text();
    assert!(
        sent.starts_with(ba_protocol::claude_code::SUMMARY_PREFIX),
        "the request starts from the summary: {sent}"
    );
    assert!(sent.contains("First question about revenue."), "{sent}");
    assert_eq!(second.entries[0].id, summary.id);
    assert_eq!(second.entries[1].text(), "Second question.");
    assert!(
        second.entries.iter().all(|e| !before.contains(&e.id)),
        "an entry from before the compaction was sent: {:#?}",
        second.entries
    );
}

#[tokio::test]
async fn a_skill_restricts_the_tools_run_and_can_change_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills/narrow");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(
        skills.join("SKILL.md"),
        "---\nname: narrow\ndescription: Use only lookup, on the small model.\nallowed-tools: lookup\nmodel: small-model\n---\nOnly look things up.\n",
    )
    .unwrap();
    let turns = [
        json!({"response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "s1", "name": "activate_skill", "input": {"skill": "narrow"}},
            {"type": "tool_use", "id": "s2", "name": "activate_skill", "input": {"skill": "missing"}}]},
            "stop_reason": "tool_use"}}),
        json!({"expect": {"tool_call_id": "s2"}, "response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "o1", "name": "other", "input": {"key": "x"}}]},
            "stop_reason": "tool_use"}}),
        text_turn("Done.", json!({"tool_call_id": "o1"})),
    ];
    let other = typed_tool("other", "Another tool.", |a: Lookup, _| async move {
        Ok(json!(a.key))
    });
    let client = Recording::new(&turns);
    let agent = Agent::builder(client.clone())
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .tool(lookup())
        .tool(other)
        .skills(Arc::new(ba_skills::SkillSet::load([dir
            .path()
            .join("skills")])))
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let events = agent
        .send(&id, Input::message("Go."))
        .collect_events()
        .await;
    let seen: Vec<(String, Vec<String>)> = client
        .requests()
        .into_iter()
        .map(|r| (r.model, r.tools.into_iter().map(|t| t.name).collect()))
        .collect();
    assert_eq!(seen[0].0, "claude-sonnet-4-5");
    assert_eq!(seen[0].1, ["lookup", "other", "activate_skill", "recall"]);
    // While the skill is active: its model; the same tool list (it opens every request, so it
    // never changes), but a call outside the skill's tools is refused by the runtime.
    assert_eq!(seen[1].0, "small-model");
    assert_eq!(seen[1].1, seen[0].1);
    let models: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::RoundStarted { model, .. } => Some(model.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(models, ["claude-sonnet-4-5", "small-model", "small-model"]);
    let results: Vec<(&str, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                call_id, success, ..
            } => Some((call_id.as_str(), *success)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [("s1", true), ("s2", false), ("o1", false)]);
    let entries = agent.entries(&id).await.unwrap();
    let refused = entries
        .iter()
        .find(|e| e.tool_call_id.as_deref() == Some("o1"))
        .unwrap();
    assert!(
        refused.text().contains("permission_denied"),
        "{}",
        refused.text()
    );
    // The activation told the model which tools it may use.
    let activation = entries
        .iter()
        .find(|e| e.tool_call_id.as_deref() == Some("s1"))
        .unwrap();
    assert!(
        activation
            .text()
            .contains("only these tools may run: lookup"),
        "{}",
        activation.text()
    );
    let failed = entries
        .iter()
        .find(|e| e.tool_call_id.as_deref() == Some("s2"))
        .unwrap();
    assert!(failed.text().contains("missing"), "{}", failed.text());
}

/// Fires its signal when dropped.
struct OnDrop(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A model whose first call never answers and says when it starts and when its future is
/// dropped (the run was cancelled); later calls go to the replay client.
#[derive(Debug)]
struct HangsOnce {
    called: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    dropped: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    then: Recording,
}

#[async_trait::async_trait]
impl ModelClient for HangsOnce {
    fn provider(&self) -> &str {
        "hangs-once"
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let dropped = self.dropped.lock().unwrap().take();
        if dropped.is_none() {
            return self.then.complete_streaming(request, on_delta).await;
        }
        let _cancelled = OnDrop(dropped);
        if let Some(called) = self.called.lock().unwrap().take() {
            let _ = called.send(());
        }
        std::future::pending().await
    }
}

/// Generous: it only runs out when the behaviour under test is broken.
const FAILS_AFTER: std::time::Duration = std::time::Duration::from_secs(20);

#[tokio::test]
async fn dropping_a_run_cancels_it_like_a_cancel_and_resume_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (called_tx, called) = tokio::sync::oneshot::channel();
    let (dropped_tx, dropped) = tokio::sync::oneshot::channel();
    let turns = [text_turn(
        "42.",
        json!({"role": "user", "text": "continue"}),
    )];
    let client = Arc::new(HangsOnce {
        called: std::sync::Mutex::new(Some(called_tx)),
        dropped: std::sync::Mutex::new(Some(dropped_tx)),
        then: Recording {
            inner: ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test")
                .unwrap(),
            requests: Default::default(),
        },
    });
    let agent = Agent::builder(client.clone())
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let run = agent.send(&id, Input::message("Total sales?"));
    // The model call is in flight …
    tokio::time::timeout(FAILS_AFTER, called)
        .await
        .expect("the model was never called")
        .unwrap();
    // … and dropping the run drops it: the run was cancelled, not left running.
    drop(run);
    tokio::time::timeout(FAILS_AFTER, dropped)
        .await
        .expect("the model call was still running after the run was dropped")
        .unwrap();
    // The cancel is recorded like any other: the question, then the cut turn (nothing had
    // streamed) as an `llm_error` of kind `cancelled`.
    let s = agent.send(&id, Input::Resume).finish().await;
    let entries = agent.entries(&id).await.unwrap();
    assert_eq!(entries[0].text(), "Total sales?");
    assert_eq!(
        entries[1].llm_error.as_ref().map(|e| e.kind),
        Some(ba_protocol::LlmErrorKind::Cancelled),
        "{:#?}",
        entries[1]
    );

    // The same agent resumes it as soon as the cancelled run has let it go (a new run waits
    // for a cancelled one of its own process, instead of being refused).
    assert_eq!(s.status, RunStatus::Answered, "{s:#?}");
    assert_eq!(s.final_answer.as_deref(), Some("42."));
    let resumed = client.then.requests();
    assert_eq!(resumed.len(), 1);
    let texts: Vec<String> = resumed[0]
        .entries
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    assert_eq!(texts.first().map(String::as_str), Some("Total sales?"));
    assert_eq!(texts.last().map(String::as_str), Some("continue"));
}

/// Records the system prompt of every request, then lets the replay client answer.
#[derive(Debug)]
struct SystemRecording {
    inner: ReplayClient,
    systems: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl ModelClient for SystemRecording {
    fn provider(&self) -> &str {
        "recording"
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let system = request.system.clone().unwrap_or_default();
        self.systems.lock().unwrap().push(system);
        self.inner.complete_streaming(request, on_delta).await
    }
}

fn write_skill(root: &std::path::Path, name: &str, description: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nSteps.\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn a_skills_reload_shows_in_the_next_run_never_in_the_run_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("skills");
    write_skill(&root, "alpha", "Alpha steps.");
    let skills = Arc::new(ba_skills::SkillSet::load([&root]));
    // A tool that adds a skill and reloads the set in the middle of a run, as the chat's
    // file watcher would.
    let adder = {
        let skills = Arc::clone(&skills);
        let root = root.clone();
        typed_tool("add_skill", "Adds a skill.", move |a: Lookup, _| {
            let skills = Arc::clone(&skills);
            let root = root.clone();
            async move {
                write_skill(&root, &a.key, "Beta steps.");
                let report = skills.reload();
                Ok(json!({"added": report.added}))
            }
        })
    };
    let turns = [
        json!({"expect": {"role": "user"}, "response": {"message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "a1", "name": "add_skill",
                         "input": {"key": "beta"}}]}, "stop_reason": "tool_use"}}),
        text_turn("Added.", json!({"tool_call_id": "a1"})),
        text_turn("Both.", json!({"role": "user", "text": "And now?"})),
    ];
    let client = Arc::new(SystemRecording {
        inner: ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test").unwrap(),
        systems: Default::default(),
    });
    let agent = Agent::builder(client.clone())
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .tool(adder)
        .skills(Arc::clone(&skills))
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let first = agent.send(&id, Input::message("Add beta.")).finish().await;
    assert_eq!(first.status, RunStatus::Answered, "{:?}", first.error);
    assert_eq!(skills.names(), ["alpha", "beta"], "the reload happened");
    let second = agent.send(&id, Input::message("And now?")).finish().await;
    assert_eq!(second.status, RunStatus::Answered, "{:?}", second.error);

    let systems = client.systems.lock().unwrap().clone();
    assert_eq!(systems.len(), 3);
    assert!(
        systems[0].contains("<skill name=\"alpha\">"),
        "{}",
        systems[0]
    );
    // The run in flight keeps the catalogue it started with...
    assert_eq!(systems[1], systems[0]);
    assert!(!systems[1].contains("<skill name=\"beta\">"));
    // ...and the next run sees the new one.
    assert!(
        systems[2].contains("<skill name=\"beta\">"),
        "{}",
        systems[2]
    );
    assert!(systems[2].contains("<skill name=\"alpha\">"));
}

/// A conversation the previous version (log schema 1) wrote and compacted — the demo, then a
/// `/compact` — loads, reports, and goes on from its summary; its lines stay as written.
#[tokio::test]
async fn a_log_written_by_version_1_loads_reports_and_goes_on_from_its_summary() {
    const ID: &str = "3b57d050-c343-45ef-a20f-5f1041e14798";
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/logs/v1");
    let dir = tempfile::tempdir().unwrap();
    let conversations = dir.path().join("conversations");
    std::fs::create_dir_all(&conversations).unwrap();
    let log_path = conversations.join(format!("{ID}.jsonl"));
    let written = std::fs::read_to_string(fixtures.join(format!("{ID}.jsonl"))).unwrap();
    assert!(written.contains(r#""schema_version":1"#) && written.contains("compact_boundary"));
    std::fs::write(&log_path, &written).unwrap();
    std::fs::copy(
        fixtures.join(format!("{ID}.meta.json")),
        conversations.join(format!("{ID}.meta.json")),
    )
    .unwrap();

    let client = Recording::new(&[text_turn(
        "East is flat.",
        json!({"text": "And the East region?"}),
    )]);
    let agent = Agent::builder(client.clone())
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .tool(lookup())
        .build()
        .unwrap();
    let id = ConversationId::new(ID).unwrap();
    let entries = agent.entries(&id).await.unwrap();
    assert_eq!(entries.len(), 15);
    // Every record of version 1 read into its typed field: nothing is left untyped.
    for e in &entries {
        assert!(e.extra.is_empty(), "{}: {:?}", e.id, e.extra);
    }
    assert_eq!(
        entries.iter().filter(|e| e.records.usage.is_some()).count(),
        5
    );
    assert!(entries.iter().any(|e| e.records.skill.is_some()));
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.compactions, 1);
    assert_eq!(report.compressions.len(), 2);
    assert!(report.skills.iter().any(|s| s == "sales-report"));
    // The figures the previous version printed for it.
    assert_eq!((report.model_calls, report.input_tokens), (5, 17_475));
    assert_eq!(report.output_tokens, 2_089);

    let s = agent
        .send(&id, Input::message("And the East region?"))
        .finish()
        .await;
    assert_eq!(s.status, RunStatus::Answered, "{s:?}");
    let requests = client.requests();
    let sent = &requests[0].entries;
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert!(
        sent[0]
            .text()
            .starts_with(ba_protocol::claude_code::SUMMARY_PREFIX)
    );
    assert_eq!(sent[1].text(), "And the East region?");
    // The log is append-only: the previous version's lines are still there as written.
    let now = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        now.starts_with(&written),
        "a line of version 1 was rewritten"
    );
}
