//! Memory on the page: the notice a change of memory leaves in the transcript, whose Undo
//! takes the change back, and the Memory panel's edit and restore.

use ba_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::harness::*;

/// Writes the stated preference with the memory tool, then answers in the structured form.
async fn analyst() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "write the preference down",
            |r| r.offers("memory") && r.round() == 0,
            |_| {
                Turn::call(
                    "memory",
                    json!({"command": "create", "path": "/memories/preferences.md",
                           "file_text": "Fiscal year starts in April.\n"}),
                )
            },
        )
        .rule(
            "say it is noted",
            |_| true,
            |_| {
                Turn::text(
                    json!({
                        "task_analysis": "The analyst stated a lasting preference.",
                        "execution_plan": "R1: remember it; R2: confirm",
                        "current_round": 2,
                        "action": {"type": "complete", "content": "Noted: your fiscal year starts in April."}
                    })
                    .to_string(),
                )
            },
        )
        .start()
        .await
}

async fn text_of(server: &Server, path: &str) -> Value {
    server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/memory/{path}"),
            None,
        )
        .await["text"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notice_undoes_a_change_and_the_panel_edits_and_restores() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let model = analyst().await;
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        memory: Some(ba_agent::MemoryMode::Auto),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, "Remember: our fiscal year starts in April.").await;
    let said = wait_for(
        &c,
        "the memory notice",
        "const n = document.querySelector('[data-notice=memory]'); return n && n.textContent",
    )
    .await;
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("Remembered in preferences.md"),
        "{said}"
    );
    assert_eq!(
        text_of(&server, "preferences.md").await,
        "Fiscal year starts in April.\n"
    );
    click(&c, "[data-notice=memory] [data-action=memory-undo]").await;
    wait_for(
        &c,
        "the notice to say it was undone",
        "return document.querySelector('[data-notice=memory][data-state=undone]')",
    )
    .await;
    let listed = server
        .api(reqwest::Method::GET, "/api/v1/memory", None)
        .await;
    assert_eq!(listed["files"], json!([]), "{listed}");

    // The panel: a file with two versions, edited, then restored to its first.
    for text in ["First.\n", "Second.\n"] {
        server
            .api(
                reqwest::Method::PUT,
                "/api/v1/memory/notes.md",
                Some(json!({ "text": text })),
            )
            .await;
    }
    click(&c, "#memory-open").await;
    wait_for(
        &c,
        "the panel's list of files",
        "return document.querySelector(\"#memory-files [data-path='/memories/notes.md'] button\")",
    )
    .await;
    click(&c, "#memory-files [data-path='/memories/notes.md'] button").await;
    wait_for(
        &c,
        "the file's text in the panel",
        "const t = document.querySelector('#memory-text'); return t && t.value === 'Second.\\n'",
    )
    .await;
    js(
        &c,
        "document.querySelector('#memory-text').value = 'Edited on the page.\\n'; return true",
    )
    .await;
    click(&c, "#memory-save").await;
    wait_for(
        &c,
        "the panel shows the saved file again",
        "const t = document.querySelector('#memory-text'); return t && t.value === 'Edited on the page.\\n'",
    )
    .await;
    assert_eq!(text_of(&server, "notes.md").await, "Edited on the page.\n");
    click(&c, "#memory-history").await;
    wait_for(
        &c,
        "the file's versions",
        "return document.querySelector(\".mem-history [data-version='1'] [data-action=memory-restore]\")",
    )
    .await;
    click(
        &c,
        ".mem-history [data-version='1'] [data-action=memory-restore]",
    )
    .await;
    wait_for(
        &c,
        "the restored text in the panel",
        "const t = document.querySelector('#memory-text'); return t && t.value === 'First.\\n'",
    )
    .await;
    assert_eq!(text_of(&server, "notes.md").await, "First.\n");
    let versions = server
        .api(
            reqwest::Method::GET,
            "/api/v1/memory/notes.md/versions",
            None,
        )
        .await;
    assert_eq!(versions["versions"][0]["version"], 4, "{versions}");
}
