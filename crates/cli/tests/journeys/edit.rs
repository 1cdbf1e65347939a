//! Editing a question (a branch: a fork at the entry before it) where it meets rewinds,
//! compactions, workflows, restarts, a second server and a cancel.

use serde_json::json;

use crate::approval::{append_config, node_id, run_workflow};
use crate::day::{Day, Person, analyst, answer, seq_of, workflow};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_rewind() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server.question(&id, "[q2] East?", &[]).await;
    let entries = server.entries(&id).await;
    let q2 = seq_of(&entries, "user", "[q2]");
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/rewind"),
            json!({"to_seq": q2 - 1}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let frames = server.question(&id, "[seen] After the rewind", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] After the rewind");
    // A branch at the entry before the rewind brings the taken-back question back.
    let entries = server.entries(&id).await;
    let rewind = entries
        .iter()
        .find(|e| e["entry"]["rewind"].is_object())
        .unwrap_or_else(|| panic!("a rewind entry: {entries:#?}"))["seq"]
        .as_u64()
        .unwrap();
    let branch = server.fork(&id, rewind - 1).await;
    let frames = server.question(&branch, "[seen] The old branch", &[]).await;
    assert_eq!(
        answer(&frames),
        "SEEN [q1] West? | [q2] East? | [seen] The old branch"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_compaction() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server.question(&id, "[q2] East?", &[]).await;
    let entries = server.entries(&id).await;
    let q2 = seq_of(&entries, "user", "[q2]");
    let (status, body) = server
        .send(&format!("/api/v1/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let frames = server.question(&id, "[seen] After compacting", &[]).await;
    assert!(
        !answer(&frames).contains("[q1] West?"),
        "the compacted question is summarised: {frames:#?}"
    );
    // Editing the second question: the branch is cut before the compaction, so the first
    // question is whole in its window again.
    let branch = server.fork(&id, q2 - 1).await;
    let frames = server.question(&branch, "[seen] East, edited", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] East, edited");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_workflow() {
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
    // A branch cut just after node `a` completed goes on from node `b`, with `a`'s outputs.
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
    let branch = server.fork(&id, a_done).await;
    let events = server
        .get(&format!("/api/v1/conversations/{branch}/events"))
        .send()
        .await
        .unwrap();
    server
        .start(
            &branch,
            json!({"request_id": "go-on", "input": {"type": "resume"}}),
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
    let c_request = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| crate::day::active_node(r).as_deref() == Some("c"))
        .unwrap();
    assert!(c_request.shows("a done"), "node a's outputs reach node c");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_restart() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let branch = server.fork(&id, 0).await;
    server.question(&branch, "[q1] East?", &[]).await;
    server.terminate().await;
    // Tomorrow both versions of the question are there, and the branch says where it came from.
    let server = day.serve().await;
    let branches =
        crate::day::json_of(&server, &format!("/api/v1/conversations/{id}/branches")).await;
    assert_eq!(branches["forks"][0]["id"], branch.as_str(), "{branches}");
    let view = crate::day::json_of(&server, &format!("/api/v1/conversations/{branch}")).await;
    assert_eq!(view["fork"]["parent"], id.as_str(), "{view}");
    let frames = server.question(&branch, "[seen] Still here?", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] East? | [seen] Still here?");
    let frames = server.question(&id, "[seen] And here?", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] And here?");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_second_server() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    a.question(&id, "[q1] West?", &[]).await;
    let branch = a.fork(&id, 0).await;
    // The branch made through one server is asked through the other.
    let frames = b.question(&branch, "[seen] Through B", &[]).await;
    assert_eq!(answer(&frames), "SEEN [seen] Through B");
    let branches = crate::day::json_of(&b, &format!("/api/v1/conversations/{id}/branches")).await;
    assert_eq!(branches["forks"][0]["id"], branch.as_str(), "{branches}");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_cancel() {
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
    // While the question runs, the person edits it: the branch runs beside it.
    let entries = server.entries(&id).await;
    let held = seq_of(&entries, "user", "[hold]");
    let branch = server.fork(&id, held - 1).await;
    let frames = server.question(&branch, "[seen] Think short", &[]).await;
    assert_eq!(answer(&frames), "SEEN [q1] West? | [seen] Think short");
    // Stopping the first leaves the branch's answer alone.
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(server.settled(&id).await["status"], "interrupted");
    assert_eq!(server.settled(&branch).await["status"], "idle");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_x_export() {
    if !ba_testkit::require_python_modules(&["matplotlib"]) {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server
        .upload(&id, "sales.csv", "text/csv", b"region,amount\nWest,1\n")
        .await;
    server
        .question(&id, "[q1] Describe my upload", &["upload_001"])
        .await;
    // The edited question charts instead; its branch's report carries the branch's chart and
    // the edited words.
    let branch = server.fork(&id, 0).await;
    let frames = server
        .question(&branch, "[chart] Chart my upload instead", &["upload_001"])
        .await;
    assert!(answer(&frames).contains("chart.png"), "{frames:#?}");
    let (status, zip) = server
        .fetch(&format!(
            "/api/v1/conversations/{branch}/report/last?format=zip"
        ))
        .await;
    assert_eq!(status, 200);
    let files = ba_testkit::files::unzip(&zip);
    let (_, html) = files
        .iter()
        .find(|(k, _)| k.ends_with("report.html"))
        .unwrap_or_else(|| panic!("{:?}", files.keys()));
    let html = String::from_utf8(html.clone()).unwrap();
    assert!(html.contains("Chart my upload instead"), "{html}");
    assert!(!html.contains("Describe my upload"), "{html}");
    crate::servers::assert_stands_alone(&html, &branch);
    assert!(
        files.keys().any(|k| k.ends_with("files/chart.png")),
        "{:?}",
        files.keys()
    );
    server.terminate().await;
}
