//! Uploads where they meet the other features: the files a person attached stay theirs through
//! approvals, edits, rewinds, compactions, workflows, restarts, a second server, a cancel and
//! the hooks.

use serde_json::json;

use crate::day::{Day, Person, analyst, answer, finished, seq_of, workflow};

const SALES: &[u8] = b"region,amount\nWest,120\nEast,80\n";

/// Whether `text` is `run_python`'s listing of a working folder holding exactly `names`.
fn lists(text: &str, names: &[&str]) -> bool {
    let shown: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    text.contains(&format!("FILES: [{}]", shown.join(", ")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_approval() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "approvals:\n  tools:\n    run_python: ask\n");
    let server = day.serve().await;
    let id = server.create().await;
    let up = server.upload(&id, "sales.csv", "text/csv", SALES).await;
    assert_eq!(up["id"], "upload_001");

    let frames = server
        .question(&id, "[files] What did I attach?", &["upload_001"])
        .await;
    assert_eq!(finished(&frames), "awaiting_approval", "{frames:#?}");
    let pending = server.pending(&id).await;
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["tool"], "run_python");
    let call = pending[0]["call_id"].as_str().unwrap().to_owned();

    server
        .decide(&id, &call, json!({"decision": "approve"}))
        .await;
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "idle", "{view}");
    let entries = server.entries(&id).await;
    let last = crate::day::entry_text(entries.last().unwrap());
    assert!(
        lists(&last, &["sales.csv"]),
        "the approved code saw the upload: {last}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_edit() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let frames = server
        .question(&id, "[files] First look", &["upload_001"])
        .await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");
    // A second file comes before the second question.
    server
        .upload(&id, "targets.csv", "text/csv", b"region,target\nWest,100\n")
        .await;
    let frames = server
        .question(&id, "[files] Second look", &["upload_002"])
        .await;
    assert!(
        lists(&answer(&frames), &["sales.csv", "targets.csv"]),
        "{frames:#?}"
    );
    let entries = server.entries(&id).await;

    // Edit the first question: the branch has the file attached to it, and its code finds it.
    let first = seq_of(&entries, "user", "[files] First look");
    let branch = server.fork(&id, first - 1).await;
    let names: Vec<String> = server
        .files(&branch)
        .await
        .into_iter()
        .map(|f| f.1)
        .collect();
    assert_eq!(
        names,
        ["sales.csv"],
        "the first question's files come with its edit"
    );
    let frames = server
        .question(&branch, "[files] First look, edited", &["upload_001"])
        .await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");

    // Edit the second question: both files, not the outputs of the answer that follows it.
    let second = seq_of(&entries, "user", "[files] Second look");
    let branch = server.fork(&id, second - 1).await;
    let names: Vec<String> = server
        .files(&branch)
        .await
        .into_iter()
        .map(|f| f.1)
        .collect();
    assert_eq!(names, ["sales.csv", "targets.csv"]);
    let frames = server
        .question(&branch, "[files] Second look, edited", &["upload_002"])
        .await;
    assert!(
        lists(&answer(&frames), &["sales.csv", "targets.csv"]),
        "{frames:#?}"
    );
    // The conversation edited keeps its own files and history.
    assert_eq!(server.files(&id).await.len(), 2);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_rewind() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    server.question(&id, "[files] Look", &["upload_001"]).await;
    // Taking the question back leaves the file the person uploaded.
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/rewind"),
            json!({"to_seq": 0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let names: Vec<String> = server.files(&id).await.into_iter().map(|f| f.1).collect();
    assert_eq!(names, ["sales.csv"]);
    let frames = server
        .question(&id, "[files] Look again", &["upload_001"])
        .await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");
    let frames = server.question(&id, "[seen] What did I ask?", &[]).await;
    assert_eq!(
        answer(&frames),
        "SEEN [files] Look again | [seen] What did I ask?"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_compaction() {
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let frames = server
        .question(&id, "[read] Read it", &["upload_001"])
        .await;
    assert!(answer(&frames).contains("West"), "{frames:#?}");
    let (status, body) = server
        .send(&format!("/api/v1/conversations/{id}/compact"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    // After the compaction the file is still the conversation's, by its id.
    let frames = server
        .question(&id, "[read] Read upload_001 again", &[])
        .await;
    let text = answer(&frames);
    assert!(
        text.contains("file_reader:") && text.contains("West"),
        "{text}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_workflow() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let root = day.folder("workflows");
    workflow(&root, "review", &["a", "b"], true);
    std::fs::write(
        &day.config,
        format!(
            "{}workflows: [{}]\n",
            std::fs::read_to_string(&day.config).unwrap(),
            root.display()
        ),
    )
    .unwrap();
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let events = server
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    server
        .start(
            &id,
            json!({"request_id": "wf", "input": {"type": "workflow", "name": "review", "inputs": {}}}),
        )
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
    // The node's code found the conversation's upload in its working folder.
    let python = frames
        .iter()
        .find(|(e, d)| e == "tool_result" && d["name"] == "run_python")
        .map(|(_, d)| d["observation"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(lists(&python, &["sales.csv"]), "{frames:#?}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_restart() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    server.terminate().await;

    let server = day.serve().await;
    let (status, body) = server
        .fetch(&format!("/api/v1/conversations/{id}/files/upload_001"))
        .await;
    assert_eq!((status, body.as_slice()), (200, SALES));
    let frames = server
        .question(&id, "[files] Tomorrow", &["upload_001"])
        .await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_second_server() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let a = day.serve().await;
    let b = day.serve().await;
    let id = a.create().await;
    a.upload(&id, "sales.csv", "text/csv", SALES).await;
    // Asked through the other server, the run finds the file uploaded through the first.
    let frames = b.question(&id, "[files] Through B", &["upload_001"]).await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");
    let names: Vec<String> = b.files(&id).await.into_iter().map(|f| f.1).collect();
    assert_eq!(names[0], "sales.csv");
    a.terminate().await;
    b.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_cancel() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let run = server
        .start(
            &id,
            json!({"request_id": "held", "input": {"type": "message", "text": "[hold] Take your time", "upload_ids": ["upload_001"]}}),
        )
        .await;
    server.running(&id).await;
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let view = server.settled(&id).await;
    assert_eq!(view["status"], "interrupted", "{view}");
    // The file outlives the cancelled run.
    let frames = server
        .question(&id, "[files] After the stop", &["upload_001"])
        .await;
    assert!(lists(&answer(&frames), &["sales.csv"]), "{frames:#?}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_hooks() {
    let model = analyst().await;
    let probe = tempfile::tempdir().unwrap();
    let seen = probe.path().join("seen.json");
    let day = Day::new(
        &model,
        &format!(
            "hooks:\n  pre_tool_use:\n    - matcher: file_reader\n      command: cat > {}\n",
            seen.display()
        ),
    );
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let frames = server
        .question(&id, "[read] Read it", &["upload_001"])
        .await;
    assert!(answer(&frames).contains("West"), "{frames:#?}");
    // The operator's hook saw the call by the file's id, never by where the server keeps it.
    let event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(event["hook_event_name"], "PreToolUse");
    assert_eq!(event["tool_input"], json!({"path": "upload_001"}));
    let text = event.to_string();
    assert!(
        !text.contains(day.home.to_str().unwrap()),
        "the hook saw the server's folder: {text}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_x_export() {
    if !ba_testkit::require_python_modules(&["matplotlib"]) {
        return;
    }
    let model = analyst().await;
    let day = Day::new(&model, "");
    let server = day.serve().await;
    let id = server.create().await;
    server.upload(&id, "sales.csv", "text/csv", SALES).await;
    let frames = server
        .question(&id, "[chart] Chart my upload", &["upload_001"])
        .await;
    assert!(answer(&frames).contains("chart.png"), "{frames:#?}");
    // The HTML stands alone: the chart inside it, the question in the person's words.
    let (status, html) = server
        .fetch(&format!(
            "/api/v1/conversations/{id}/report/last?format=html"
        ))
        .await;
    assert_eq!(status, 200);
    let html = String::from_utf8(html).unwrap();
    assert!(
        html.contains("data:image/png;base64,"),
        "the chart is embedded"
    );
    assert!(html.contains("[chart] Chart my upload"), "{html}");
    crate::servers::assert_stands_alone(&html, &id);
    // The Markdown comes with its files beside it, linked relatively.
    let (status, zip) = server
        .fetch(&format!("/api/v1/conversations/{id}/report/last?format=md"))
        .await;
    assert_eq!(status, 200);
    let files = ba_testkit::files::unzip(&zip);
    let md = crate::servers::markdown_of(&zip);
    assert!(md.contains("files/chart.png"), "{md}");
    assert!(
        files.keys().any(|k| k.ends_with("files/chart.png")),
        "{:?}",
        files.keys()
    );
    assert!(md.contains("sales.csv"), "the attached file is named: {md}");
    crate::servers::assert_stands_alone(&md, &id);
    server.terminate().await;
}
