//! `/compact` (the conversation so far summarised into one entry) where it meets workflows,
//! restarts, a second server, exports, a cancel and the hooks.

use serde_json::json;

use crate::approval::{append_config, run_workflow};
use crate::day::{Day, Person, Served, analyst, answer, workflow};

/// Compacts `id`: the status and body.
async fn compact(server: &Served, id: &str) -> (u16, serde_json::Value) {
    server
        .send(&format!("/api/v1/conversations/{id}/compact"), json!({}))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_workflow() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "approvals:\n  tools:\n    run_python: ask\n");
    let root = day.folder("workflows");
    workflow(&root, "review", &["a", "b"], true);
    append_config(&day, &format!("workflows: [{}]\n", root.display()));
    let server = day.serve().await;
    let id = server.create().await;
    let frames = run_workflow(&server, &id, "review").await;
    assert_eq!(
        crate::day::finished(&frames),
        "awaiting_approval",
        "{frames:#?}"
    );
    // With only the run in progress there is nothing to compact: the turn stays whole.
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "nothing_to_compact", "{body}");
    server.terminate().await;

    // After an earlier question, the compaction summarises it and keeps the run whole: the
    // node, its brief and the run's inputs survive, and the run completes both nodes after
    // the decision.
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let frames = run_workflow(&server, &id, "review").await;
    assert_eq!(
        crate::day::finished(&frames),
        "awaiting_approval",
        "{frames:#?}"
    );
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 200, "{body}");
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
    assert!(
        frames.iter().any(|(e, _)| e == "workflow_completed"),
        "{frames:#?}"
    );
    let last = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| crate::day::active_node(r).as_deref() == Some("b"))
        .unwrap();
    assert!(
        last.shows("2024-09"),
        "the run's inputs survive the compaction"
    );
    assert!(last.shows("a done"), "node a's outputs reach node b");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_restart() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 200, "{body}");
    server.terminate().await;
    // The compaction is in the log: the next server's window starts from it.
    let server = day.serve().await;
    let frames = server.question(&id, "[seen] Tomorrow", &[]).await;
    assert_eq!(answer(&frames), "SEEN [seen] Tomorrow", "{frames:#?}");
    let last = model.requests().pop().unwrap();
    assert!(
        last.shows("West?"),
        "the summary keeps the question's words"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_second_server() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    a.question(&id, "[q1] West?", &[]).await;
    let (status, body) = compact(&a, &id).await;
    assert_eq!(status, 200, "{body}");
    let frames = b.question(&id, "[seen] Through B", &[]).await;
    assert_eq!(answer(&frames), "SEEN [seen] Through B", "{frames:#?}");
    let context = crate::day::json_of(&b, &format!("/api/v1/conversations/{id}/context")).await;
    assert!(
        context.to_string().contains("compaction") || context.to_string().contains("summar"),
        "B's context shows the compaction A made: {context}"
    );
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_export() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 200, "{body}");
    // The report exports the answer as it was given, not as the summary holds it.
    let (status, md) = server
        .fetch(&format!("/api/v1/conversations/{id}/report/last?format=md"))
        .await;
    assert_eq!(status, 200);
    let md = crate::servers::markdown_of(&md);
    assert!(md.contains("ANSWER to [q1] West?"), "{md}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_cancel() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let run = server
        .start(
            &id,
            json!({"request_id": "held", "input": {"type": "message", "text": "[hold] Think long"}}),
        )
        .await;
    server.running(&id).await;
    let (status, body) = compact(&server, &id).await;
    assert_eq!(
        status, 409,
        "a compaction while a run holds the conversation: {body}"
    );
    let (status, _) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202);
    server.settled(&id).await;
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 200, "{body}");
    // After the stop and the compaction the conversation goes on; the stopped question, the
    // turn in progress, stays whole beside the summary.
    let frames = server.question(&id, "[seen] Next", &[]).await;
    assert_eq!(
        answer(&frames),
        "SEEN [hold] Think long | [seen] Next",
        "{frames:#?}"
    );
    assert_eq!(server.settled(&id).await["status"], "idle");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_x_hooks() {
    let model = analyst().await;
    let probe = tempfile::tempdir().unwrap();
    let seen = probe.path().join("pre_compact.json");
    let day = Day::new(
        &model,
        &format!(
            "hooks:\n  pre_compact:\n    - command: cat > {}\n",
            seen.display()
        ),
    );
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let (status, body) = compact(&server, &id).await;
    assert_eq!(status, 200, "{body}");
    // The operator's hook was told, with the conversation it is about.
    let event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(event["hook_event_name"], "PreCompact", "{event}");
    assert_eq!(event["session_id"], id.as_str(), "{event}");
    server.terminate().await;
}
