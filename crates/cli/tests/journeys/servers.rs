//! Restarts and a second server on one store where they meet exports and a cancel, and an
//! export of a stopped answer.

use serde_json::json;

use crate::day::{Day, Person, analyst, answer, finished};

/// The `report.md` of a Markdown export (a zip of the report and its files).
pub fn markdown_of(body: &[u8]) -> String {
    let files = ba_testkit::files::unzip(body);
    let (_, md) = files
        .iter()
        .find(|(name, _)| name.ends_with("/report.md") || *name == "report.md")
        .unwrap_or_else(|| panic!("no report.md in {:?}", files.keys().collect::<Vec<_>>()));
    String::from_utf8(md.clone()).unwrap()
}

/// What no exported report may hold: a server path, an internal id, an entry number, a tag.
pub fn assert_stands_alone(text: &str, conversation: &str) {
    for bad in [
        "/api/v1/",
        conversation,
        "<file_ref>",
        "upload_001",
        "Uploaded files (",
        "answer 1",
    ] {
        assert!(!text.contains(bad), "the export holds {bad:?}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_x_export() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    let (status, before) = server
        .fetch(&format!(
            "/api/v1/conversations/{id}/report/last?format=html"
        ))
        .await;
    assert_eq!(status, 200);
    server.terminate().await;
    // Tomorrow the same answer exports the same document.
    let server = day.serve().await;
    let (status, after) = server
        .fetch(&format!(
            "/api/v1/conversations/{id}/report/last?format=html"
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8(after).unwrap(),
        String::from_utf8(before).unwrap()
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_x_cancel() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.question(&id, "[q1] West?", &[]).await;
    server
        .start(
            &id,
            json!({"request_id": "held", "input": {"type": "message", "text": "[hold] Think long"}}),
        )
        .await;
    server.running(&id).await;
    // The server is stopped mid-answer: after its drain time the run is cancelled, what came
    // is kept, and the next server shows the turn as interrupted.
    server.terminate().await;
    let server = day.serve().await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "interrupted", "{view}");
    let entries = server.entries(&id).await;
    let last = entries.last().unwrap();
    assert_eq!(last["entry"]["llm_error"]["kind"], "cancelled", "{last}");
    // A new question goes on from there.
    let frames = server.question(&id, "[seen] Tomorrow", &[]).await;
    assert!(
        answer(&frames).starts_with("SEEN [q1] West? | [hold] Think long"),
        "{frames:#?}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_server_x_export() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    a.question(&id, "[q1] West?", &[]).await;
    let path = format!("/api/v1/conversations/{id}/report/last?format=md");
    let (status, from_a) = a.fetch(&path).await;
    assert_eq!(status, 200);
    let (status, from_b) = b.fetch(&path).await;
    assert_eq!(status, 200);
    assert_eq!(markdown_of(&from_a), markdown_of(&from_b));
    assert!(markdown_of(&from_b).contains("ANSWER to [q1] West?"));
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_server_x_cancel() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    let events = a
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    let run = a
        .start(
            &id,
            json!({"request_id": "held", "input": {"type": "message", "text": "[hold] Think long"}}),
        )
        .await;
    // B sees A's run and stops it.
    let view = b.running(&id).await;
    assert_eq!(view["active_run_id"], run.as_str(), "{view}");
    let (status, body) = b
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
    assert_eq!(b.settled(&id).await["status"], "interrupted");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_x_cancel() {
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
    server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    server.settled(&id).await;
    // A stopped answer is no report: the last report is still the last answer given.
    let (status, md) = server
        .fetch(&format!("/api/v1/conversations/{id}/report/last?format=md"))
        .await;
    assert_eq!(status, 200);
    let md = markdown_of(&md);
    assert!(md.contains("ANSWER to [q1] West?"), "{md}");
    assert!(!md.contains("Think long"), "{md}");
    server.terminate().await;
}
