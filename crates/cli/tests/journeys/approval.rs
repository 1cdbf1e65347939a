//! A call waiting for a person where it meets edits, rewinds, compactions, workflows, restarts,
//! a second server, a cancel and the operator's hooks.

use serde_json::{Value, json};

use crate::day::{Day, Person, Served, analyst, answer, entry_text, finished, workflow};

/// Asks a question whose code waits for approval: the waiting call's id.
async fn waiting(server: &Served, id: &str, question: &str) -> String {
    let frames = server.question(id, question, &[]).await;
    assert_eq!(finished(&frames), "awaiting_approval", "{frames:#?}");
    let pending = server.pending(id).await;
    assert_eq!(pending.len(), 1, "{pending:#?}");
    pending[0]["call_id"].as_str().unwrap().to_owned()
}

/// The text of the conversation's last entry.
async fn last_text(server: &Served, id: &str) -> String {
    entry_text(server.entries(id).await.last().unwrap())
}

const ASK_PYTHON: &str = "approvals:\n  tools:\n    run_python: ask\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_edit() {
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let server = day.serve().await;
    let id = server.create().await;
    waiting(&server, &id, "[files] What is here?").await;
    // The person edits the question instead of deciding: the branch has nothing waiting.
    let branch = server.fork(&id, 0).await;
    assert_eq!(server.pending(&branch).await, Vec::<Value>::new());
    let frames = server.question(&branch, "[seen] Something else", &[]).await;
    assert_eq!(answer(&frames), "SEEN [seen] Something else");
    let view = server.settled(&branch).await;
    assert_eq!(view["status"], "idle", "{view}");
    // The conversation edited still waits for its decision.
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "awaiting_approval", "{view}");
    assert_eq!(server.pending(&id).await.len(), 1);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_rewind() {
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let server = day.serve().await;
    let id = server.create().await;
    waiting(&server, &id, "[files] What is here?").await;
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/rewind"),
            json!({"to_seq": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The question and its waiting call left the history: nothing waits any more.
    assert_eq!(server.pending(&id).await, Vec::<Value>::new());
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    let frames = server.question(&id, "[seen] Start over", &[]).await;
    assert_eq!(answer(&frames), "SEEN [seen] Start over");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_compaction() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[seen] A first question", &[]).await;
    let call = waiting(&server, &id, "[files] What is here?").await;
    // Compacting while a call waits keeps the call waiting, and its decision still runs it.
    let (status, body) = server
        .send(&format!("/api/v1/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let pending = server.pending(&id).await;
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["call_id"], call.as_str());
    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    let text = last_text(&server, &id).await;
    assert!(
        text.contains("RESULT run_python:") && text.contains("FILES:"),
        "{text}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_workflow() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let root = day.folder("workflows");
    workflow(&root, "review", &["a", "b"], true);
    append_config(&day, &format!("workflows: [{}]\n", root.display()));
    let server = day.serve().await;
    let id = server.create().await;
    let frames = run_workflow(&server, &id, "review").await;
    // The first node's code waits for a person: the run pauses inside node `a`.
    assert_eq!(finished(&frames), "awaiting_approval", "{frames:#?}");
    let started: Vec<String> = frames
        .iter()
        .filter(|(e, _)| e == "node_started")
        .map(|(_, d)| node_id(d))
        .collect();
    assert_eq!(started, ["a"], "{frames:#?}");
    let call = server.pending(&id).await[0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    let frames = tokio::time::timeout(
        crate::support::LIMIT,
        crate::support::until_finished(events),
    )
    .await
    .unwrap();
    // Approved, the run goes on in node `a`: the code runs, `a` completes, then `b`.
    let order: Vec<String> = frames
        .iter()
        .filter_map(|(e, d)| match e.as_str() {
            "tool_result" => Some(format!("tool {}", d["name"].as_str().unwrap_or_default())),
            "node_completed" => Some(format!("completed {}", node_id(d))),
            "node_started" => Some(format!("started {}", node_id(d))),
            _ => None,
        })
        .collect();
    assert_eq!(
        order[..3],
        ["tool run_python", "tool complete_node", "completed a"],
        "{order:#?}"
    );
    assert!(
        frames.iter().any(|(e, _)| e == "workflow_completed"),
        "{order:#?}"
    );
    server.terminate().await;
}

/// The id of the node a `node_started` / `node_completed` frame names.
pub fn node_id(data: &Value) -> String {
    data["node"].as_str().unwrap_or_default().to_owned()
}

/// Adds `yaml` to the day's configuration.
pub fn append_config(day: &Day, yaml: &str) {
    let before = std::fs::read_to_string(&day.config).unwrap();
    std::fs::write(&day.config, format!("{before}{yaml}")).unwrap();
}

/// Starts workflow `name` with its defaults and reads the run's events to `finished`.
pub async fn run_workflow(server: &Served, id: &str, name: &str) -> Vec<(String, Value)> {
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server
        .start(
            id,
            json!({"request_id": format!("wf-{name}"), "input": {"type": "workflow", "name": name, "inputs": {}}}),
        )
        .await;
    tokio::time::timeout(
        crate::support::LIMIT,
        crate::support::until_finished(events),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_restart() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let server = day.serve().await;
    let id = server.create().await;
    let call = waiting(&server, &id, "[files] What is here?").await;
    server.terminate().await;
    // Tomorrow, on a new server: the call still waits, and the decision runs it.
    let server = day.serve().await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "awaiting_approval", "{view}");
    assert_eq!(server.pending(&id).await[0]["call_id"], call.as_str());
    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    assert!(last_text(&server, &id).await.contains("FILES:"));
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_second_server() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, ASK_PYTHON);
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    let call = waiting(&a, &id, "[files] What is here?").await;
    // The other server sees the waiting call and its decision runs it there.
    assert_eq!(b.pending(&id).await[0]["call_id"], call.as_str());
    b.decide(
        &id,
        &call,
        json!({"decision": "reject", "reason": "not today"}),
    )
    .await;
    let view = b.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    let text = last_text(&a, &id).await;
    assert!(
        text.contains("run_python failed") && text.contains("not today"),
        "the model read the reason: {text}"
    );
    assert_eq!(a.settled(&id).await["status"], "idle");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_cancel() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst_slow_code().await;
    let day = Day::new(&model, ASK_PYTHON);
    let server = day.serve().await;
    let id = server.create().await;
    let call = waiting(&server, &id, "[slow] Crunch it").await;
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    // The approved code runs long; the person stops it.
    let view = server.running(&id).await;
    let run = view["active_run_id"].as_str().unwrap().to_owned();
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let frames = tokio::time::timeout(
        crate::support::LIMIT,
        crate::support::until_finished(events),
    )
    .await
    .unwrap();
    assert_eq!(finished(&frames), "cancelled", "{frames:#?}");
    let view = server.settled(&id).await;
    assert_ne!(view["status"], "awaiting_approval", "{view}");
    assert_eq!(server.pending(&id).await, Vec::<Value>::new());
    server.terminate().await;
}

/// [`analyst`] with `[slow]`: code that runs until it is stopped.
async fn analyst_slow_code() -> ba_testkit::model::ScriptedModel {
    crate::day::analyst_with(ba_testkit::model::ScriptedModel::builder().rule(
        "slow: code that runs until stopped",
        |r| r.last_user_text().starts_with("[slow]") && r.round() == 0,
        |_| {
            ba_testkit::model::Turn::call(
                "run_python",
                json!({"code": "import time\nwhile True:\n    time.sleep(1)\n"}),
            )
        },
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_x_hooks() {
    let model = analyst().await;
    let day = Day::new(
        &model,
        "approvals:\n  tools:\n    run_python: ask\nhooks:\n  pre_tool_use:\n    - matcher: run_python\n      command: echo 'no code on Fridays' >&2; exit 2\n",
    );
    let server = day.serve().await;
    let id = server.create().await;
    let call = waiting(&server, &id, "[files] What is here?").await;
    // The person approves; the operator's hook still has the last word, and the model reads it.
    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    let text = last_text(&server, &id).await;
    assert!(
        text.contains("run_python failed") && text.contains("no code on Fridays"),
        "{text}"
    );
    server.terminate().await;
}
