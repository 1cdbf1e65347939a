//! The run's side of an analyst's day, through the API with a model that decides (the scripted
//! model of `ba-testkit`) and the real `file_reader` and `run_python`: a message keeps what the
//! person wrote apart from the note the model reads about its files; a GBK CSV with a Chinese
//! header, uploaded from the page, is read without an encoding by `file_reader` and by pandas;
//! a plain answer offers the files the turn's tools wrote for download.

use std::sync::Arc;

use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::run_python::sandbox::SandboxConfig;
use ba_builtins::run_python::{RunPython, RunPythonConfig};
use ba_model::{AnthropicClient, ApiKey, ModelClient};
use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::harness::{Api, Model, Options, Server, dir};

const QUESTION: &str = "Which region is furthest from its 2024 target?";

/// The demo's targets as a Chinese Excel exports them: GBK, with the header 地区, 季度,
/// 目标金额, 备注.
fn gbk_targets() -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    ba_builtins::demo_data::generate(d.path()).unwrap();
    std::fs::read(d.path().join(ba_builtins::demo_data::GBK_CSV_FILE)).unwrap()
}

/// `name` of an upload the last user message lists (`<file_ref>id</file_ref> NAME (…)`).
fn upload_name(r: &Request, id: &str) -> String {
    let text = r.last_user_text();
    let marker = format!("<file_ref>{id}</file_ref> ");
    let at = text.find(&marker).unwrap() + marker.len();
    let rest = &text[at..];
    rest[..rest.find(" (").unwrap()].to_owned()
}

/// Reads every upload the message names with `file_reader` (no encoding), then — when it
/// may — sums the targets by region with pandas, keeping the sums as a file; then answers in
/// plain text.
async fn analyst() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "read the uploads",
            |r| r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .into_iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
            },
        )
        .rule(
            "say what failed",
            |r| r.last_result().is_some_and(|t| t.is_error),
            |r| Turn::text(format!("Failed: {}", r.last_result().unwrap().text)),
        )
        .rule(
            "sum by region with pandas",
            |r| r.offers("run_python") && r.last_result().is_some_and(|t| t.name == "file_reader"),
            |r| {
                let name = upload_name(r, "upload_001");
                let code = format!(
                    "import pandas as pd\ndf = pd.read_csv({name:?})\n\
                     sums = df.groupby('地区')['目标金额'].sum()\n\
                     sums.to_csv('outputs/targets_by_region.csv')\n\
                     print(list(df.columns))\nprint(sums.to_string())\n"
                );
                Turn::call("run_python", json!({"code": code}))
            },
        )
        .rule(
            "answer",
            |r| r.last_result().is_some(),
            |r| Turn::text(format!("Read: {}", r.last_result().unwrap().text)),
        )
        .start()
        .await
}

fn server(path: &std::path::Path, model: &ScriptedModel, python: bool) -> Server {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let mut tools: Vec<Arc<dyn ba_tools::Tool>> =
        vec![Arc::new(FileReader::new(FileReaderConfig::new(vec![])))];
    if python {
        // Unconfined: this test binary has no `sandbox-exec` helper; the sandbox is tested in
        // ba-builtins.
        tools.push(Arc::new(RunPython::new(RunPythonConfig {
            sandbox: SandboxConfig::off(),
            ..RunPythonConfig::default()
        })));
    }
    let options = Options {
        client: Some(Arc::new(client) as Arc<dyn ModelClient>),
        tools,
        ..Options::default()
    };
    Server::start_with(path, Model::new(&[], 0), options)
}

/// Uploads `bytes` as `name` through the API, as the page does; the upload's JSON.
async fn upload(api: &Api<'_>, conv: &str, name: &str, bytes: &[u8]) -> Value {
    let r = api.upload(conv, name, bytes).await;
    assert_eq!(r.status(), 201);
    r.json().await.unwrap()
}

/// Asks `QUESTION` with `upload_001` attached; the log's entries once the run is over.
async fn ask(api: &Api<'_>, conv: &str) -> Vec<Value> {
    let mut s = api.events(conv, None).await;
    let input = json!({"type": "message", "text": QUESTION, "upload_ids": ["upload_001"]});
    assert_eq!(api.run(conv, "r1", input).await.status(), 202);
    let frames = s.until("finished").await;
    assert_eq!(
        frames.last().unwrap().data["status"],
        "answered",
        "{frames:#?}"
    );
    let messages = api
        .json(&format!("/api/v1/conversations/{conv}/messages"))
        .await;
    messages["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entry"].clone())
        .collect()
}

#[tokio::test]
async fn a_message_keeps_the_words_apart_and_a_gbk_upload_reads_without_an_encoding() {
    let (_d, path) = dir();
    let model = analyst().await;
    let server = server(&path, &model, false);
    let api = Api::new(&server);
    let id = api.create().await;
    let gbk = gbk_targets();
    let up = upload(&api, &id, "targets_2024_gbk.csv", &gbk).await;
    assert_eq!(up["id"], "upload_001", "{up}");
    let entries = ask(&api, &id).await;

    // What the person wrote is the message's first text block; the files are a record.
    let question = &entries[0];
    assert_eq!(question["role"], "user");
    assert_eq!(question["content"][0]["text"], QUESTION, "{question:#}");
    assert_eq!(
        question["attachments"],
        json!([{"id": "upload_001", "name": "targets_2024_gbk.csv", "media_type": "text/csv",
                "size": gbk.len()}]),
        "{question:#}"
    );
    let note = question["content"][1]["text"].as_str().unwrap();
    assert!(
        note.starts_with("Uploaded files (read one with file_reader")
            && note.contains("<file_ref>upload_001</file_ref> targets_2024_gbk.csv (text/csv, "),
        "{note}"
    );
    assert!(!note.contains(QUESTION));
    // The model still read both: the question and the note that names the file.
    let first = &model.requests()[0];
    assert!(first.last_user_text().contains(QUESTION));
    assert_eq!(first.uploads(), ["upload_001"]);

    // `file_reader` read the GBK file without an encoding.
    let read = entries
        .iter()
        .find(|e| e["tool_name"] == "file_reader")
        .unwrap();
    assert_ne!(read["is_error"], true, "{read:#}");
    let observation = read["content"].to_string();
    assert!(
        observation.contains("gbk") && observation.contains("目标金额"),
        "{observation}"
    );
    let answer = entries.last().unwrap();
    assert!(
        answer["content"].to_string().contains("Read: "),
        "{answer:#}"
    );
}

#[tokio::test]
async fn pandas_reads_a_gbk_upload_and_a_plain_answer_offers_the_files_written() {
    if !ba_testkit::require_tool("python3") || !ba_testkit::require_python_modules(&["pandas"]) {
        return;
    }
    let (_d, path) = dir();
    let model = analyst().await;
    let server = server(&path, &model, true);
    let api = Api::new(&server);
    let id = api.create().await;
    upload(&api, &id, "targets_2024_gbk.csv", &gbk_targets()).await;
    let entries = ask(&api, &id).await;

    // pandas read the upload as the code named it, without an encoding.
    let ran = entries
        .iter()
        .find(|e| e["tool_name"] == "run_python")
        .unwrap();
    assert_ne!(ran["is_error"], true, "{ran:#}");
    let observation = ran["content"].as_str().unwrap();
    assert!(
        observation.contains("['地区', '季度', '目标金额', '备注']")
            && observation.contains("converted_to_utf8"),
        "{observation}"
    );
    let files = api.json(&format!("/api/v1/conversations/{id}/files")).await;
    let written: Vec<Value> = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "output")
        .cloned()
        .collect();
    assert_eq!(written.len(), 1, "{files}");
    assert_eq!(written[0]["name"], "targets_by_region.csv", "{files}");

    // The default (native) answer names the file the turn wrote, for the page to offer.
    let answer = entries.last().unwrap();
    assert_eq!(answer["role"], "assistant");
    assert_eq!(
        answer["api_response"]["metadata"]["download_links"],
        json!([written[0]["id"]]),
        "{answer:#}"
    );
}
