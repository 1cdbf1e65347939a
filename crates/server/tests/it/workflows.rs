//! Workflow runs over HTTP: `GET /api/v1/workflows`, `POST …/runs` with
//! `{"type": "workflow", "name", "inputs"}` (404 for an unknown name, 400 naming a bad input),
//! the `workflow_started` / `node_started` / `node_completed` / `workflow_completed` frames,
//! and the conversation in run mode.

use serde_json::json;

use crate::harness::{Api, Model, Options, Server, dir};

const TALLY: &str = "---\nname: tally\ndescription: Count a table.\ninputs:\n  table: {type: string, default: sales}\n  limit: {type: integer, default: 10}\nnodes:\n  - id: count\n    title: Count the rows\n    brief: Count the rows of the table.\n    outputs: {rows: value}\n---\n";

fn workflows() -> ba_skills::WorkflowSet {
    let mut set = ba_skills::WorkflowSet::default();
    set.add_text(TALLY, std::path::Path::new("tally/WORKFLOW.md"));
    set
}

#[tokio::test]
async fn a_workflow_runs_over_http_with_its_frames() {
    let turns = [
        json!({"expect": {"role": "user"}, "response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "complete_node",
             "input": {"node": "count", "outputs": {"rows": 42}}}]}, "stop_reason": "tool_use"}}),
        json!({"expect": {"role": "tool", "tool_call_id": "c1"}, "response": {"message":
            {"role": "assistant", "content": "The sales table has 42 rows."}, "stop_reason": "end_turn"}}),
    ];
    let (_d, path) = dir();
    let server = Server::start_with(
        &path,
        Model::new(&turns, 0),
        Options {
            workflows: workflows(),
            ..Options::default()
        },
    );
    let api = Api::new(&server);
    let listed = api.json("/api/v1/workflows").await;
    assert_eq!(listed["workflows"][0]["name"], "tally");
    assert_eq!(
        listed["workflows"][0]["nodes"],
        json!([{"id": "count", "title": "Count the rows"}])
    );
    let id = api.create().await;
    for (input, status, says) in [
        (
            json!({"type": "workflow", "name": "nope"}),
            404,
            "no workflow named \\\"nope\\\" (known: tally)",
        ),
        (
            json!({"type": "workflow", "name": "tally", "inputs": {"limit": "ten"}}),
            400,
            "limit",
        ),
        (
            json!({"type": "workflow", "name": "tally", "inputs": {"limit": [1]}}),
            400,
            "a text, a number or a boolean",
        ),
    ] {
        let r = api.run(&id, "bad", input.clone()).await;
        assert_eq!(r.status(), status, "{input}");
        let body = r.text().await.unwrap();
        assert!(body.contains(says), "{input}: {body}");
    }
    let mut events = api.events(&id, None).await;
    let run = api
        .run(
            &id,
            "r1",
            json!({"type": "workflow", "name": "tally", "inputs": {"limit": 5}}),
        )
        .await;
    assert_eq!(run.status(), 202);
    let frames = events.until("finished").await;
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f.event.as_str())
        .filter(|e| e.starts_with("workflow_") || e.starts_with("node_"))
        .collect();
    assert_eq!(
        names,
        [
            "workflow_started",
            "node_started",
            "node_completed",
            "workflow_completed"
        ]
    );
    let started = frames
        .iter()
        .find(|f| f.event == "workflow_started")
        .unwrap();
    assert_eq!(
        started.data["inputs"],
        json!({"limit": 5, "table": "sales"})
    );
    assert!(
        started.data["workflow_run_id"]
            .as_str()
            .unwrap()
            .starts_with("wfr_")
    );
    let done = frames.iter().find(|f| f.event == "node_completed").unwrap();
    assert_eq!(done.data["outputs"], json!({"rows": 42}));
    let view = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(view["mode"], "run");
    // The start's entry carries the workflow record the page draws its steps from.
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    let start = messages["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["entry"]["workflow"]["event"] == "started")
        .unwrap();
    assert_eq!(start["entry"]["workflow_id"], "tally");
}
