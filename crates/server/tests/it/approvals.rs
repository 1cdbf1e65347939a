//! Approvals over HTTP: a run pauses on a call that asks (status `awaiting_approval`, the
//! call in `GET …/approvals`, an `approval_requested` event), the server is killed, and
//! another server on the same folder takes the decision and finishes the run — the call run
//! once, by the second server.

use std::collections::BTreeMap;

use ba_agent::ApprovalSettings;
use ba_protocol::ToolApproval;
use serde_json::{Value, json};

use crate::harness::{Api, Model, Options, Server, dir, two_rounds};

const Q: &str = "How many rows has the sales table?";

fn asking() -> Options {
    Options {
        approvals: ApprovalSettings {
            tools: BTreeMap::from([("count_rows".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    }
}

#[tokio::test]
async fn a_paused_run_is_decided_on_another_server_after_a_kill() {
    let (_d, path) = dir();
    let a = Server::start_with(&path, Model::new(&two_rounds(Q), 0), asking());
    let api = Api::new(&a);
    let id = api.create().await;
    let mut events = api.events(&id, None).await;
    let run = api
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await;
    assert_eq!(run.status(), 202);
    let frames = events.until("finished").await;
    let requested = frames
        .iter()
        .find(|f| f.event == "approval_requested")
        .expect("no approval_requested event");
    assert_eq!(requested.data["calls"][0]["call_id"], "call_1");
    assert_eq!(requested.data["calls"][0]["tool"], "count_rows");
    assert_eq!(frames.last().unwrap().data["status"], "awaiting_approval");
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "awaiting_approval");
    let pending = api
        .json(&format!("/api/v1/conversations/{id}/approvals"))
        .await;
    assert_eq!(pending["pending"][0]["call_id"], "call_1");
    assert_eq!(
        pending["pending"][0]["arguments"],
        json!({"table": "sales"})
    );
    assert_eq!(
        a.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing ran before a decision"
    );
    a.kill();

    let b = Server::start_with(&path, Model::new(&two_rounds(Q), 1), asking());
    let api = Api::new(&b);
    let url = format!("/api/v1/conversations/{id}/approvals/call_1");
    for (body, why) in [
        (json!({}), "no decision"),
        (json!({"decision": "maybe"}), "an unknown decision"),
        (json!({"decision": "edit"}), "an edit without arguments"),
        (
            json!({"decision": "edit", "arguments": [1]}),
            "arguments that are not an object",
        ),
        (
            json!({"decision": "approve", "arguments": {}}),
            "arguments without an edit",
        ),
    ] {
        let r = api.post(&url, body).send().await.unwrap();
        assert_eq!(r.status(), 400, "{why}");
    }
    let other = api
        .post(
            &format!("/api/v1/conversations/{id}/approvals/call_9"),
            json!({"decision": "approve"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 409, "a call that does not wait");
    let mut events = api.events(&id, None).await;
    let r = api
        .post(&url, json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let frames = events.until("finished").await;
    let decided = frames
        .iter()
        .find(|f| f.event == "approval_decided")
        .expect("no approval_decided event");
    assert_eq!(decided.data["decision"]["decision"], "approve");
    let finished: &Value = &frames.last().unwrap().data;
    assert_eq!(finished["status"], "answered", "{finished}");
    assert_eq!(
        b.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the call ran once, on the second server"
    );
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "idle");
    let pending = api
        .json(&format!("/api/v1/conversations/{id}/approvals"))
        .await;
    assert_eq!(pending["pending"], json!([]));
    let again = api
        .post(&url, json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409, "decided already");
}
