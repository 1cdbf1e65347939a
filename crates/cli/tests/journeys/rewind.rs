//! A rewind (the entries after a point leave the history the model sees) where it meets
//! compactions, workflows, restarts, a second server, exports and a cancel.

use serde_json::json;

use crate::approval::{append_config, node_id, run_workflow};
use crate::day::{Day, Person, Served, analyst, answer, seq_of, seq_when, workflow};

/// Rewinds `id` to `to_seq`: the status and body.
async fn rewind(server: &Served, id: &str, to_seq: u64) -> (u16, serde_json::Value) {
    server
        .send(
            &format!("/api/v1/conversations/{id}/rewind"),
            json!({"to_seq": to_seq}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_compaction() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server.question(&id, "[q2] East?", &[]).await;
    let before = server.entries(&id).await.last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    let (status, body) = server
        .send(&format!("/api/v1/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    // Rewinding to before the compaction takes it back: the questions are whole again.
    let (status, body) = rewind(&server, &id, before).await;
    assert_eq!(status, 200, "{body}");
    let frames = server.question(&id, "[seen] Whole again?", &[]).await;
    assert_eq!(
        answer(&frames),
        "SEEN [q1] West? | [q2] East? | [seen] Whole again?"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_workflow() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let root = day.folder("workflows");
    workflow(&root, "review", &["a", "b", "c"], true);
    append_config(&day, &format!("workflows: [{}]\n", root.display()));
    let server = day.serve().await;
    let id = server.create().await;
    let frames = run_workflow(&server, &id, "review").await;
    assert!(
        frames.iter().any(|(e, _)| e == "workflow_completed"),
        "{frames:#?}"
    );
    // Rewound to just after node `a` completed, the run's state goes back with the history:
    // resumed, it does `b` and `c` again (not nothing, as a finished run would).
    let entries = server.entries(&id).await;
    let a_done = entries
        .iter()
        .find(|e| {
            e["entry"]["workflow"]["event"] == "node_completed"
                && e["entry"]["workflow"]["node"] == "a"
        })
        .unwrap_or_else(|| panic!("node a's completion: {entries:#?}"))["seq"]
        .as_u64()
        .unwrap();
    let (status, body) = rewind(&server, &id, a_done).await;
    assert_eq!(status, 200, "{body}");
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server
        .start(
            &id,
            json!({"request_id": "again", "input": {"type": "resume"}}),
        )
        .await;
    let frames = tokio::time::timeout(
        crate::support::LIMIT,
        crate::support::until_finished(events),
    )
    .await
    .unwrap();
    let completed: Vec<String> = frames
        .iter()
        .filter(|(e, _)| e == "node_completed")
        .map(|(_, d)| node_id(d))
        .collect();
    assert_eq!(completed, ["b", "c"], "{frames:#?}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_restart() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server.question(&id, "[q2] East?", &[]).await;
    let q2 = seq_of(&server.entries(&id).await, "user", "[q2]");
    let (status, body) = rewind(&server, &id, q2 - 1).await;
    assert_eq!(status, 200, "{body}");
    server.terminate().await;
    // Tomorrow the taken-back question is still shown as taken back, and still unseen.
    let server = day.serve().await;
    let entries = server.entries(&id).await;
    let q2_entry = entries.iter().find(|e| e["seq"] == q2).unwrap();
    assert_eq!(q2_entry["rewound"], true, "{q2_entry}");
    let frames = server.question(&id, "[seen] Tomorrow", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] Tomorrow");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_second_server() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    a.question(&id, "[q1] West?", &[]).await;
    let run = a
        .start(
            &id,
            json!({"request_id": "held", "input": {"type": "message", "text": "[hold] Think long"}}),
        )
        .await;
    b.running(&id).await;
    let before = seq_when(&b, &id, "user", "[hold]").await - 1;
    // While a run of A holds the conversation, a rewind through B is refused.
    let (status, body) = rewind(&b, &id, before).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&run),
        "the refusal names the run: {body}"
    );
    let (status, body) = b
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    a.settled(&id).await;
    b.settled(&id).await;
    let (status, body) = rewind(&b, &id, before).await;
    assert_eq!(status, 200, "{body}");
    let frames = a.question(&id, "[seen] Where are we?", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] Where are we?");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_export() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server.question(&id, "[q2] East?", &[]).await;
    let q2 = seq_of(&server.entries(&id).await, "user", "[q2]");
    let (status, body) = rewind(&server, &id, q2 - 1).await;
    assert_eq!(status, 200, "{body}");
    // The last answer to export is the last one the history holds, not the one taken back.
    let (status, md) = server
        .fetch(&format!("/api/v1/conversations/{id}/report/last?format=md"))
        .await;
    assert_eq!(status, 200);
    let md = crate::servers::markdown_of(&md);
    assert!(md.contains("ANSWER to [q1] West?"), "{md}");
    assert!(!md.contains("East"), "{md}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_x_cancel() {
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
    let before = seq_when(&server, &id, "user", "[hold]").await - 1;
    let (status, body) = rewind(&server, &id, before).await;
    assert_eq!(
        status, 409,
        "a rewind while a run holds the conversation: {body}"
    );
    let (status, _) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(server.settled(&id).await["status"], "interrupted");
    // The stopped question is taken back: the next one does not see it.
    let (status, body) = rewind(&server, &id, before).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.settled(&id).await["status"], "idle");
    let frames = server.question(&id, "[seen] Fresh", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] Fresh");
    server.terminate().await;
}
