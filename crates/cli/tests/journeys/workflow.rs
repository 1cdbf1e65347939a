//! A workflow run where it meets restarts, a second server, exports and a cancel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ba_testkit::model::{ScriptedModel, Turn};
use serde_json::json;

use crate::approval::{append_config, node_id, run_workflow};
use crate::day::{Day, Person, Served, active_node, analyst, analyst_with, finished, workflow};

/// [`analyst`] whose first request at node `b` is held (a model call under way until the run
/// is stopped); later ones are answered.
async fn held_once_at_b() -> ScriptedModel {
    let held = Arc::new(AtomicBool::new(false));
    analyst_with(ScriptedModel::builder().rule(
        "hold the first call at node b",
        move |r| active_node(r).as_deref() == Some("b") && !held.swap(true, Ordering::SeqCst),
        |_| Turn::hold(),
    ))
    .await
}

/// A day with the three-node workflow `review` (no code in its nodes).
fn review_day(model: &ScriptedModel, extra: &str) -> Day {
    let day = Day::new(model, extra);
    let root = day.folder("workflows");
    workflow(&root, "review", &["a", "b", "c"], false);
    append_config(&day, &format!("workflows: [{}]\n", root.display()));
    day
}

/// The nodes completed among `frames`, in order.
fn completed(frames: &[(String, serde_json::Value)]) -> Vec<String> {
    frames
        .iter()
        .filter(|(e, _)| e == "node_completed")
        .map(|(_, d)| node_id(d))
        .collect()
}

/// Starts `input` on `id` and reads the events to `finished`.
async fn go(
    server: &Served,
    id: &str,
    input: serde_json::Value,
) -> Vec<(String, serde_json::Value)> {
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server.start(id, input).await;
    tokio::time::timeout(
        crate::support::LIMIT,
        crate::support::until_finished(events),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_x_restart() {
    let model = held_once_at_b().await;
    let day = review_day(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server
        .start(
            &id,
            json!({"request_id": "wf", "input": {"type": "workflow", "name": "review", "inputs": {}}}),
        )
        .await;
    // The server stops while node `b` is under way.
    tokio::time::timeout(crate::support::LIMIT, async {
        while !model
            .requests()
            .iter()
            .any(|r| active_node(r).as_deref() == Some("b"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    server.terminate().await;
    // The next server resumes it at node `b`, not at the start and not past it.
    let server = day.serve().await;
    assert_eq!(server.settled(&id).await["status"], "interrupted");
    let frames = go(
        &server,
        &id,
        json!({"request_id": "on", "input": {"type": "resume"}}),
    )
    .await;
    assert_eq!(completed(&frames), ["b", "c"], "{frames:#?}");
    assert!(frames.iter().any(|(e, _)| e == "workflow_completed"));
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_x_second_server() {
    let model = held_once_at_b().await;
    let day = review_day(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    let run = a
        .start(
            &id,
            json!({"request_id": "wf", "input": {"type": "workflow", "name": "review", "inputs": {}}}),
        )
        .await;
    // The other server shows the run under way, and a cancel through it stops the run.
    let view = b.running(&id).await;
    assert_eq!(view["active_run_id"], run.as_str(), "{view}");
    tokio::time::timeout(crate::support::LIMIT, async {
        while !model
            .requests()
            .iter()
            .any(|r| active_node(r).as_deref() == Some("b"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let (status, body) = b
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    a.settled(&id).await;
    // B goes on with it from node `b`.
    let frames = go(
        &b,
        &id,
        json!({"request_id": "on", "input": {"type": "continue"}}),
    )
    .await;
    assert_eq!(completed(&frames), ["b", "c"], "{frames:#?}");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_x_export() {
    let model = analyst().await;
    let day = review_day(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    let frames = run_workflow(&server, &id, "review").await;
    assert!(
        frames.iter().any(|(e, _)| e == "workflow_completed"),
        "{frames:#?}"
    );
    assert_eq!(finished(&frames), "answered", "{frames:#?}");
    // The run's report exports without the run's internal ids.
    let (status, html) = server
        .fetch(&format!(
            "/api/v1/conversations/{id}/report/last?format=html"
        ))
        .await;
    assert_eq!(status, 200);
    let html = String::from_utf8(html).unwrap();
    assert!(
        html.contains("complete_node") || html.contains("c done"),
        "{html}"
    );
    assert!(!html.contains(&id), "no conversation id in the report");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_x_cancel() {
    let model = held_once_at_b().await;
    let day = review_day(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    let run = server
        .start(
            &id,
            json!({"request_id": "wf", "input": {"type": "workflow", "name": "review", "inputs": {}}}),
        )
        .await;
    tokio::time::timeout(crate::support::LIMIT, async {
        while !model
            .requests()
            .iter()
            .any(|r| active_node(r).as_deref() == Some("b"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let (status, _) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(server.settled(&id).await["status"], "interrupted");
    // Continue goes on at the node it was in.
    let frames = go(
        &server,
        &id,
        json!({"request_id": "on", "input": {"type": "continue"}}),
    )
    .await;
    assert_eq!(completed(&frames), ["b", "c"], "{frames:#?}");
    server.terminate().await;
}
