//! Workflow runs with a model that decides (the scripted model of `ba-testkit`, which reads
//! the node it is at from the `NODE_BRIEF` of each request): a run goes node by node with the
//! right parts in each request, a `complete_node` with a missing output is refused and
//! retried, a branch follows a produced value, a run cut inside node 2 goes on at node 2 with
//! node 1's outputs, and two runs in one conversation are kept apart by their `run_id`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ba_agent::{Agent, AgentEvent, Input, RunStatus, WorkflowRun};
use ba_model::{AnthropicClient, ApiKey};
use ba_protocol::{LogEntry, Mode};
use ba_skills::WorkflowSet;
use ba_storage::{ConversationId, ConversationStore as _, FileStore, NewConversation};
use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::json;

const REVIEW: &str = "---
name: review
description: The monthly sales review.
inputs:
  month: {type: month, default: \"2024-09\"}
nodes:
  - id: load
    title: Load the month
    brief: Load the month's sales and check them.
    tools: [query_database]
    outputs:
      rows: {kind: value, description: rows loaded}
  - id: figures
    title: Compute the figures
    brief: Compute the month's totals by region.
    outputs:
      summary: {kind: table}
      total: value
  - id: judge
    title: Compare with the targets
    brief: Say whether the month is on track.
    outputs:
      verdict: {kind: decision, options: [on_track, behind]}
    next: {on: verdict, cases: {on_track: end, behind: shortfall}}
  - id: shortfall
    title: Explain the shortfall
    brief: Explain why the month is behind.
    outputs:
      causes: text
---
Keep every figure.
";

/// Whether the request is at node `id` (its `NODE_BRIEF` names it).
fn at(r: &Request, id: &str) -> bool {
    r.system().contains(&format!(": `{id}` — "))
}

fn retrying(r: &Request) -> bool {
    r.last_result()
        .is_some_and(|t| t.name == "complete_node" && t.is_error)
}

/// A model that works a node at a time; `broken` makes it fail at node 2.
async fn model(broken: Arc<AtomicBool>) -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "report once the run is complete",
            |r| r.system().contains("POST_RUN_PROTOCOL") && !r.system().contains("NODE_BRIEF"),
            |r| Turn::text(format!("Report: {}", r.last_result().map_or("", |t| t.text.as_str()))),
        )
        .rule(
            "a tool the node does not name",
            |r| at(r, "load") && r.last_user_text().contains("2024-11"),
            |r| match r.last_result() {
                Some(t) if t.name == "lookup" => Turn::text(format!("Refused: {}", t.text)),
                _ => Turn::call("lookup", json!({})),
            },
        )
        .rule("load", |r| at(r, "load"), |_| {
            Turn::call("complete_node", json!({"node": "load", "outputs": {"rows": 1200}}))
        })
        .rule(
            "fail inside node 2",
            move |r| broken.load(Ordering::SeqCst) && at(r, "figures"),
            |_| Turn::fail(400, "the model went away"),
        )
        .rule("figures, all outputs after a refusal", |r| at(r, "figures") && retrying(r), |_| {
            Turn::call(
                "complete_node",
                json!({"node": "figures", "outputs": {
                    "summary": [{"region": "West", "sales": 444645}], "total": 1043202}}),
            )
        })
        .rule("figures, one output missing", |r| at(r, "figures"), |_| {
            Turn::call(
                "complete_node",
                json!({"node": "figures", "outputs": {"summary": [{"region": "West", "sales": 444645}]}}),
            )
        })
        .rule("judge", |r| at(r, "judge"), |r| {
            let verdict = if r.system().contains("\"month\":\"2024-10\"") { "behind" } else { "on_track" };
            Turn::call("complete_node", json!({"node": "judge", "outputs": {"verdict": verdict}}))
        })
        .rule("shortfall", |r| at(r, "shortfall"), |_| {
            Turn::call("complete_node", json!({"node": "shortfall", "outputs": {"causes": "a lost distributor"}}))
        })
        .rule("answer anything else", |_| true, |_| Turn::text("Noted."))
        .start()
        .await
}

fn agent(model: &ScriptedModel, dir: &std::path::Path) -> Agent {
    agent_with(model, dir, "review", REVIEW)
}

/// An agent whose one workflow is `text`, called `name`.
fn agent_with(model: &ScriptedModel, dir: &std::path::Path, name: &str, text: &str) -> Agent {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let mut set = WorkflowSet::default();
    set.add_text(text, &std::path::Path::new(name).join("WORKFLOW.md"));
    assert!(set.get(name).is_some(), "{:?}", set.diagnostics());
    let lookup = ba_tools::typed_tool(
        "lookup",
        "Looks something up.",
        |_: serde_json::Map<String, serde_json::Value>, _| async { Ok(json!("looked up")) },
    );
    Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir).unwrap()))
        .tool(lookup)
        .workflows(Arc::new(set))
        .sub_agents(false)
        .build()
        .unwrap()
}

fn review(month: Option<&str>) -> Input {
    Input::Workflow {
        name: "review".into(),
        inputs: month
            .map(|m| ("month".to_owned(), m.to_owned()))
            .into_iter()
            .collect(),
    }
}

/// The system prompt of a request, with the run's random id made stable.
fn system_of(r: &Request, run_id: &str) -> String {
    r.system().replace(run_id, "wfr_ID")
}

async fn conversation(agent: &Agent) -> ConversationId {
    agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap()
}

async fn entries(agent: &Agent, id: &ConversationId) -> Vec<LogEntry> {
    agent.store().load(id).await.unwrap().into_entries()
}

#[tokio::test]
async fn a_run_goes_node_by_node_with_its_brief_and_context_in_each_request() {
    let model = model(Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path());
    let id = conversation(&agent).await;
    let events = agent.send(&id, review(None)).collect_events().await;
    let done = match events.last() {
        Some(AgentEvent::Finished(summary)) => summary.clone(),
        other => panic!("the last event is not finished: {other:?}"),
    };
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    // The events: started, each node started and completed, the run completed.
    let names: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::WorkflowStarted { workflow, .. } => Some(format!("started {workflow}")),
            AgentEvent::NodeStarted { node, .. } => Some(format!("node {node}")),
            AgentEvent::NodeCompleted { node, next, .. } => Some(format!(
                "done {node} → {}",
                next.as_deref().unwrap_or("end")
            )),
            AgentEvent::WorkflowCompleted { .. } => Some("completed".into()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "started review",
            "node load",
            "done load → figures",
            "node figures",
            "done figures → judge",
            "node judge",
            "done judge → end",
            "completed"
        ]
    );
    let log = entries(&agent, &id).await;
    let state = WorkflowRun::from_log(&log).unwrap();
    assert!(state.is_complete());
    let run_id = state.run_id.clone();
    // Every entry of the run carries its ids; the final report comes after the run.
    let (tagged, untagged): (Vec<&LogEntry>, Vec<&LogEntry>) = log
        .iter()
        .partition(|e| e.run_id.as_deref() == Some(run_id.as_str()));
    assert!(
        tagged
            .iter()
            .all(|e| e.workflow_id.as_deref() == Some("review"))
    );
    assert_eq!(
        tagged.len(),
        9,
        "the start, the 4 calls and their 4 results"
    );
    assert!(untagged.iter().all(|e| e.run_id.is_none()), "{untagged:?}");
    // The requests: node 1, node 2 (twice: the refusal), node 3, then the report.
    let requests = model.requests();
    let fired = model.fired();
    assert_eq!(
        fired,
        [
            Some("load".to_owned()),
            Some("figures, one output missing".to_owned()),
            Some("figures, all outputs after a refusal".to_owned()),
            Some("judge".to_owned()),
            Some("report once the run is complete".to_owned()),
        ]
    );
    let refusal = requests[2].last_result().unwrap();
    assert!(refusal.is_error);
    assert!(
        refusal.text.contains("node `figures` is not complete"),
        "{}",
        refusal.text
    );
    assert!(refusal.text.contains("total"), "{}", refusal.text);
    assert!(requests.iter().all(|r| r.offers("complete_node")));
    insta::assert_snapshot!("workflow_system_node_1", system_of(&requests[0], &run_id));
    insta::assert_snapshot!("workflow_system_node_3", system_of(&requests[3], &run_id));
    insta::assert_snapshot!(
        "workflow_system_completed",
        system_of(&requests[4], &run_id)
    );
    assert_eq!(
        done.final_answer.as_deref(),
        Some(
            "Report: Node `judge` is complete, and with it the workflow run. Report its results to the user."
        )
    );
    let meta = agent.store().metadata(&id).await.unwrap();
    assert_eq!(meta.mode, Some(Mode::Run));
    assert_eq!(meta.title.as_deref(), Some("review: month=2024-09"));
}

#[tokio::test]
async fn a_branch_follows_the_decision_and_two_runs_keep_apart() {
    let model = model(Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path());
    let id = conversation(&agent).await;
    let first = agent.send(&id, review(None)).finish().await;
    assert_eq!(first.status, RunStatus::Answered, "{first:?}");
    let first_id = WorkflowRun::from_log(&entries(&agent, &id).await)
        .unwrap()
        .run_id;
    let second = agent.send(&id, review(Some("2024-10"))).finish().await;
    assert_eq!(second.status, RunStatus::Answered, "{second:?}");
    let log = entries(&agent, &id).await;
    let state = WorkflowRun::from_log(&log).unwrap();
    assert_ne!(state.run_id, first_id);
    let path: Vec<&str> = state.completed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        path,
        ["load", "figures", "judge", "shortfall"],
        "behind → shortfall"
    );
    assert_eq!(state.inputs.get("month"), Some(&json!("2024-10")));
    // Each run's entries name only that run, and no entry of one sits among the other's.
    let runs: Vec<&str> = log.iter().filter_map(|e| e.run_id.as_deref()).collect();
    let first_last = runs.iter().rposition(|r| *r == first_id).unwrap();
    let second_first = runs.iter().position(|r| *r == state.run_id).unwrap();
    assert!(first_last < second_first, "{runs:?}");
    assert_eq!(
        runs.iter()
            .filter(|r| **r != first_id && **r != state.run_id)
            .count(),
        0
    );
}

#[tokio::test]
async fn a_run_cut_inside_node_two_goes_on_there_after_a_restart() {
    let broken = Arc::new(AtomicBool::new(true));
    let model = model(Arc::clone(&broken)).await;
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let agent = agent(&model, dir.path());
        let id = conversation(&agent).await;
        let cut = agent.send(&id, review(None)).finish().await;
        assert_eq!(cut.status, RunStatus::ModelFailed, "{cut:?}");
        id
    };
    // Another process on the same store: the state is read from the log alone.
    broken.store(false, Ordering::SeqCst);
    let agent = agent(&model, dir.path());
    let state = WorkflowRun::from_log(&entries(&agent, &id).await).unwrap();
    assert_eq!(state.active.as_deref(), Some("figures"));
    assert_eq!(
        state.completed,
        [(
            "load".to_owned(),
            json!({"rows": 1200}).as_object().unwrap().clone()
        )]
    );
    let before = model.requests().len();
    let done = agent.send(&id, Input::Continue).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let after = &model.requests()[before];
    assert!(
        at(after, "figures"),
        "the first request after the restart is at node 2"
    );
    assert!(
        after.system().contains("- load: {\"rows\":1200}"),
        "{}",
        after.system()
    );
    assert!(
        WorkflowRun::from_log(&entries(&agent, &id).await)
            .unwrap()
            .is_complete()
    );
}

#[tokio::test]
async fn an_unknown_workflow_or_a_bad_input_is_refused_by_name() {
    let model = model(Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path());
    let id = conversation(&agent).await;
    let unknown = agent
        .send(
            &id,
            Input::Workflow {
                name: "nope".into(),
                inputs: BTreeMap::new(),
            },
        )
        .finish()
        .await;
    assert_eq!(unknown.status, RunStatus::Failed);
    assert_eq!(
        unknown.error.as_deref(),
        Some("no workflow named \"nope\" (known: review)")
    );
    let bad = agent.send(&id, review(Some("September"))).finish().await;
    assert_eq!(bad.status, RunStatus::Failed);
    let error = bad.error.unwrap_or_default();
    assert!(
        error.starts_with("workflow \"review\": ") && error.contains("month"),
        "{error}"
    );
    assert!(model.requests().is_empty(), "nothing reached the model");
}

#[tokio::test]
async fn complete_node_is_offered_in_run_mode_only() {
    let model = model(Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path());
    let chat = conversation(&agent).await;
    let done = agent.send(&chat, Input::message("Hello.")).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let asked = model.requests();
    assert!(!asked[0].offers("complete_node"), "{:?}", asked[0].tools());
    // A conversation in run mode is offered it.
    let run = conversation(&agent).await;
    agent
        .store()
        .update_metadata(
            &run,
            ba_storage::MetaUpdate {
                mode: Some(Mode::Run),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let done = agent
        .send(&run, Input::message("Hello again."))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert!(model.requests()[1].offers("complete_node"));
}

#[tokio::test]
async fn a_node_calls_only_the_tools_it_names() {
    let model = model(Arc::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path());
    let id = conversation(&agent).await;
    let done = agent.send(&id, review(Some("2024-11"))).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let answer = done.final_answer.unwrap_or_default();
    assert!(
        answer.contains("tool `lookup` is not allowed while the active skill or workflow node restricts tools (allowed: query_database)"),
        "{answer}"
    );
}

const CHART: &str = "---
name: chart
description: Draw the month.
nodes:
  - id: draw
    title: Draw the chart
    brief: Draw the month's sales by region.
    outputs:
      chart: {kind: figure, description: the chart}
---
Draw it.
";

/// A `figure` output that names a file no tool wrote is refused as a tool error the model
/// reads (naming the file and the files there are), and the node stays open.
#[tokio::test]
async fn a_figure_naming_no_file_of_the_conversation_is_refused() {
    use ba_storage::NewFile;
    let model = ScriptedModel::builder()
        .rule("say what was refused", retrying, |r| {
            Turn::text(format!("Refused: {}", r.last_result().unwrap().text))
        })
        .rule(
            "name a chart no tool wrote",
            |r| at(r, "draw"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "draw", "outputs": {"chart": "chart.png"}}),
                )
            },
        )
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent_with(&model, dir.path(), "chart", CHART);
    let id = conversation(&agent).await;
    agent
        .workspace()
        .unwrap()
        .put_bytes(
            &id,
            NewFile::upload("sales.csv", ""),
            b"region,amount\nWest,7\n",
        )
        .await
        .unwrap();
    let input = Input::Workflow {
        name: "chart".into(),
        inputs: BTreeMap::new(),
    };
    let done = agent.send(&id, input).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let answer = done.final_answer.unwrap();
    assert!(
        answer.contains("node `draw` is not complete")
            && answer.contains("`chart.png`")
            && answer.contains("`sales.csv` (upload_001)"),
        "{answer}"
    );
    let log = entries(&agent, &id).await;
    let refusal = log
        .iter()
        .find(|e| e.tool_name.as_deref() == Some("complete_node"))
        .unwrap();
    assert_eq!(refusal.is_error, Some(true));
    let state = WorkflowRun::from_log(&log).unwrap();
    assert!(!state.is_complete(), "the node stays open");
    assert_eq!(state.active_node().map(|n| n.id.as_str()), Some("draw"));
}
