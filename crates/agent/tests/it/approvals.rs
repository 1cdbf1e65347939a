#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! A person in the loop, with a model that decides (the scripted model of `ba-testkit`): a
//! call whose tool asks for approval pauses the run (recorded in the log, status
//! `awaiting_approval`); a decision — taken by another agent on the same store, as after a
//! restart — goes on from the log alone. Rejections reach the model with their reason, edits
//! run their arguments, an approval for the conversation is not asked again, a call that needs
//! no approval runs at once beside one that waits, and a new message leaves the waiting call
//! unrun.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ba_agent::{
    Agent, AgentEvent, AgentSettings, ApprovalAnswer, ApprovalSettings, Input, RunStatus,
};
use ba_model::{AnthropicClient, ApiKey};
use ba_protocol::{ApprovalMode, EntryKind, ToolApproval};
use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation};
use ba_testkit::model::{ScriptedModel, Turn};
use ba_tools::{ToolCapabilities, typed_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Query {
    /// The database.
    database: String,
    /// The SQL.
    sql: String,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// The tools' calls, as they ran.
#[derive(Default)]
struct Ran {
    queries: std::sync::Mutex<Vec<(String, String)>>,
    lookups: AtomicUsize,
}

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "answer from the query's result",
            |r| r.tool_results().iter().any(|t| t.name == "query_database"),
            |r| {
                let t = r
                    .tool_results()
                    .iter()
                    .find(|t| t.name == "query_database")
                    .unwrap();
                if t.is_error {
                    Turn::text(format!("The query did not run: {}", t.text))
                } else {
                    Turn::text(format!("The query says: {}", t.text))
                }
            },
        )
        .rule(
            "query and look up at once",
            |r| r.last_user_text().contains("both") && r.tool_results().is_empty(),
            |_| {
                Turn::calls([
                    (
                        "query_database",
                        json!({"database": "prod", "sql": "SELECT count(*) FROM sales"}),
                    ),
                    ("lookup", json!({})),
                ])
            },
        )
        .rule(
            "query when asked",
            |r| r.last_user_text().contains("rows") && r.tool_results().is_empty(),
            |_| {
                Turn::call(
                    "query_database",
                    json!({"database": "prod", "sql": "SELECT count(*) FROM sales"}),
                )
            },
        )
        .rule(
            "answer anything else",
            |r| r.tool_results().is_empty(),
            |r| Turn::text(format!("You said: {}", r.last_user_text())),
        )
        .start()
        .await
}

fn agent(
    model: &ScriptedModel,
    dir: &std::path::Path,
    ran: &Arc<Ran>,
    mode: ApprovalMode,
) -> Agent {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let r = Arc::clone(ran);
    let query = typed_tool("query_database", "Runs SQL.", move |q: Query, _| {
        let r = Arc::clone(&r);
        async move {
            r.queries.lock().unwrap().push((q.database.clone(), q.sql));
            Ok(Value::String(format!("42 rows in {}", q.database)))
        }
    })
    .with_capabilities(
        ToolCapabilities::default()
            .with_approval(ToolApproval::Ask)
            .with_writes(true),
    );
    let r = Arc::clone(ran);
    let lookup = typed_tool("lookup", "Looks something up.", move |_: Nothing, _| {
        let r = Arc::clone(&r);
        async move {
            r.lookups.fetch_add(1, Ordering::SeqCst);
            Ok(Value::String("looked up".into()))
        }
    });
    let settings = AgentSettings {
        approvals: ApprovalSettings {
            mode,
            ..ApprovalSettings::default()
        },
        ..AgentSettings::default()
    };
    Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir).unwrap()))
        .settings(settings)
        .tool(query)
        .tool(lookup)
        .sub_agents(false)
        .build()
        .unwrap()
}

async fn conversation(agent: &Agent) -> ConversationId {
    agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap()
}

/// An agent in the `ask` mode whose conversation waits on its `query_database` call.
struct Paused {
    ran: Arc<Ran>,
    agent: Agent,
    id: ConversationId,
    call: ba_protocol::PendingApproval,
    _dir: tempfile::TempDir,
    _model: ScriptedModel,
}

async fn paused() -> Paused {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let ran = Arc::new(Ran::default());
    let agent = agent(&model, dir.path(), &ran, ApprovalMode::Ask);
    let id = conversation(&agent).await;
    let done = agent
        .send(&id, Input::message("How many rows has sales?"))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::AwaitingApproval, "{done:?}");
    let call = agent.pending_approvals(&id).await.unwrap().remove(0);
    Paused {
        ran,
        agent,
        id,
        call,
        _dir: dir,
        _model: model,
    }
}

/// The kinds of the hidden approval entries in the log, in order.
async fn approval_entries(agent: &Agent, id: &ConversationId) -> Vec<EntryKind> {
    agent
        .store()
        .load(id)
        .await
        .unwrap()
        .into_entries()
        .into_iter()
        .filter_map(|e| e.kind())
        .filter(|k| matches!(k, EntryKind::ApprovalRequest | EntryKind::ApprovalDecision))
        .collect()
}

#[tokio::test]
async fn a_paused_run_goes_on_from_the_log_in_another_agent_and_runs_the_call_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let ran = Arc::new(Ran::default());
    let first = agent(&model, dir.path(), &ran, ApprovalMode::Ask);
    let id = conversation(&first).await;
    let events = first
        .send(&id, Input::message("How many rows has sales?"))
        .collect_events()
        .await;
    let requested = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ApprovalRequested { calls, .. } => Some(calls.clone()),
            _ => None,
        })
        .expect("no approval_requested event");
    let Some(AgentEvent::Finished(summary)) = events.last() else {
        panic!("no finished event: {events:?}");
    };
    assert_eq!(summary.status, RunStatus::AwaitingApproval);
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0].tool, "query_database");
    assert_eq!(requested[0].arguments["database"], "prod");
    assert!(
        ran.queries.lock().unwrap().is_empty(),
        "ran before approval"
    );
    // The process goes away; another agent on the same store finds the pause in the log.
    drop(first);
    let second = agent(&model, dir.path(), &ran, ApprovalMode::Ask);
    let pending = second.pending_approvals(&id).await.unwrap();
    assert_eq!(pending, requested);
    // A resume before any decision does not run it.
    let again = second.send(&id, Input::Resume).finish().await;
    assert_eq!(again.status, RunStatus::AwaitingApproval);
    assert!(ran.queries.lock().unwrap().is_empty());
    let done = second
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::approve(&pending[0].call_id)]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert_eq!(
        done.final_answer.as_deref(),
        Some("The query says: 42 rows in prod")
    );
    assert_eq!(ran.queries.lock().unwrap().len(), 1, "the call ran once");
    assert!(second.pending_approvals(&id).await.unwrap().is_empty());
    assert_eq!(
        approval_entries(&second, &id).await,
        [EntryKind::ApprovalRequest, EntryKind::ApprovalDecision],
        "one request (the resume did not ask again), one decision"
    );
    // A decision about a call that no longer waits is refused.
    let late = second
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::approve(&pending[0].call_id)]),
        )
        .finish()
        .await;
    assert_eq!(late.status, RunStatus::Failed);
    assert!(
        late.error
            .as_deref()
            .unwrap_or_default()
            .contains("not waiting"),
        "{late:?}"
    );
}

#[tokio::test]
async fn a_rejection_reaches_the_model_with_its_reason() {
    let Paused {
        ran,
        agent,
        id,
        call,
        _dir,
        _model,
    } = paused().await;
    let done = agent
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::reject(
                &call.call_id,
                "use the sample database",
            )]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered);
    let answer = done.final_answer.unwrap();
    assert!(answer.starts_with("The query did not run"), "{answer}");
    assert!(answer.contains("use the sample database"), "{answer}");
    assert!(ran.queries.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_edit_runs_the_edited_arguments() {
    let Paused {
        ran,
        agent,
        id,
        call,
        _dir,
        _model,
    } = paused().await;
    let bad = agent
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::edit(&call.call_id, json!("sample"))]),
        )
        .finish()
        .await;
    assert_eq!(bad.status, RunStatus::Failed, "an edit needs an object");
    let edited = json!({"database": "sample", "sql": "SELECT count(*) FROM sales"});
    let done = agent
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::edit(&call.call_id, edited)]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered);
    assert_eq!(
        *ran.queries.lock().unwrap(),
        [("sample".to_owned(), "SELECT count(*) FROM sales".to_owned())]
    );
    let answer = done.final_answer.unwrap();
    assert!(answer.contains("42 rows in sample"), "{answer}");
    assert!(
        answer.contains("a person changed"),
        "the model is told: {answer}"
    );
}

#[tokio::test]
async fn an_approval_for_the_conversation_is_not_asked_again() {
    let Paused {
        ran,
        agent,
        id,
        call,
        _dir,
        _model,
    } = paused().await;
    let done = agent
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::approve_for_conversation(
                &call.call_id,
            )]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered);
    let next = agent
        .send(&id, Input::message("And how many rows now?"))
        .finish()
        .await;
    assert_eq!(next.status, RunStatus::Answered, "{next:?}");
    assert_eq!(ran.queries.lock().unwrap().len(), 2);
    // Another conversation is asked again.
    let other = conversation(&agent).await;
    let asked = agent
        .send(&other, Input::message("How many rows has sales?"))
        .finish()
        .await;
    assert_eq!(asked.status, RunStatus::AwaitingApproval);
}

#[tokio::test]
async fn a_call_that_needs_no_approval_runs_beside_one_that_waits() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let ran = Arc::new(Ran::default());
    let agent = agent(&model, dir.path(), &ran, ApprovalMode::Ask);
    let id = conversation(&agent).await;
    let paused = agent
        .send(&id, Input::message("Do both, please."))
        .finish()
        .await;
    assert_eq!(paused.status, RunStatus::AwaitingApproval);
    assert_eq!(
        ran.lookups.load(Ordering::SeqCst),
        1,
        "the lookup ran at once"
    );
    let pending = agent.pending_approvals(&id).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "query_database");
    let done = agent
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::approve(&pending[0].call_id)]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert_eq!(ran.lookups.load(Ordering::SeqCst), 1, "and only once");
    assert_eq!(ran.queries.lock().unwrap().len(), 1);
    // The model saw both results after its calls.
    let last = model.requests().pop().unwrap();
    let names: Vec<&str> = last
        .tool_results()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"lookup") && names.contains(&"query_database"));
}

#[tokio::test]
async fn a_new_message_leaves_the_waiting_call_unrun() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let ran = Arc::new(Ran::default());
    let agent = agent(&model, dir.path(), &ran, ApprovalMode::Ask);
    let id = conversation(&agent).await;
    agent
        .send(&id, Input::message("How many rows has sales?"))
        .finish()
        .await;
    let next = agent
        .send(&id, Input::message("Never mind, hello."))
        .finish()
        .await;
    assert_eq!(next.status, RunStatus::Answered, "{next:?}");
    assert_eq!(
        next.final_answer.as_deref(),
        Some("You said: Never mind, hello.")
    );
    assert!(ran.queries.lock().unwrap().is_empty());
    assert!(agent.pending_approvals(&id).await.unwrap().is_empty());
    let entries = agent.store().load(&id).await.unwrap().into_entries();
    let result = entries
        .iter()
        .find(|e| e.tool_name.as_deref() == Some("query_database"))
        .expect("the waiting call got a result");
    assert_eq!(result.is_error, Some(true));
    assert!(result.text().contains("NOT_DECIDED"), "{}", result.text());
}

#[tokio::test]
async fn the_modes_auto_and_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let ran = Arc::new(Ran::default());
    let auto = agent(&model, dir.path(), &ran, ApprovalMode::Auto);
    let id = conversation(&auto).await;
    let done = auto
        .send(&id, Input::message("How many rows has sales?"))
        .finish()
        .await;
    assert_eq!(
        done.status,
        RunStatus::Answered,
        "auto runs what policy allows"
    );
    assert_eq!(ran.queries.lock().unwrap().len(), 1);
    let read_only = agent(&model, dir.path(), &ran, ApprovalMode::ReadOnly);
    let id = conversation(&read_only).await;
    let done = read_only
        .send(&id, Input::message("How many rows has sales?"))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered);
    let answer = done.final_answer.unwrap();
    assert!(answer.contains("read-only"), "{answer}");
    assert_eq!(ran.queries.lock().unwrap().len(), 1, "a write is refused");
}
