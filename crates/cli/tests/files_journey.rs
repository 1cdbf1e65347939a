#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The analyst's files end to end, through `ba-agent serve` and a model that decides (the
//! scripted model of `ba-testkit`, answering by rules over what it is sent): uploads read by id
//! as tables, `run_python` reading an upload and writing a chart and a workbook that the final
//! answer's download links fetch; conversations that cannot reach each other's files; two
//! servers sharing one PostgreSQL database; and uploads that stream.

mod support;

use std::path::Path;
use std::sync::Arc;

use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::{Value, json};
use support::files::{complete, config, output_ids, serve};

/// Python with the libraries the journeys' code imports; a skip (a failure under CI) without.
fn python_with_pandas() -> bool {
    if !ba_testkit::require_tool("python3") {
        return false;
    }
    let ok = std::process::Command::new("python3")
        .args(["-c", "import pandas, matplotlib, openpyxl"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        ba_testkit::missing("python3 with pandas, matplotlib and openpyxl (.ci/tools.sh)");
    }
    ok
}

const CHART_CODE: &str = r#"
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

df = pd.read_csv("sales.csv")
totals = df.groupby("region")["target_amount"].sum()
ax = totals.plot(kind="bar", title="Targets by region")
plt.tight_layout()
plt.savefig("outputs/chart.png")
totals.to_frame().to_excel("outputs/targets_by_region.xlsx")
print("regions:", len(totals))
"#;

/// The model of the upload journey: read every upload, chart the CSV, answer with the outputs.
async fn analyst_model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "read each upload by its id",
            |r| r.offers("file_reader") && r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
            },
        )
        .rule(
            "chart the CSV once every upload was read as a table",
            |r| {
                r.tool_results().iter().any(|t| t.name == "file_reader")
                    && !r.tool_results().iter().any(|t| t.name == "run_python")
            },
            |_| Turn::call("run_python", json!({"code": CHART_CODE})),
        )
        .rule(
            "report with the outputs the code wrote",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "run_python" && !t.is_error)
            },
            |r| {
                let ids = output_ids(&r.last_result().unwrap().text);
                let content = match ids.first() {
                    Some(chart) => format!("Targets by region: <file_ref>{chart}</file_ref>"),
                    None => "The code wrote no output.".to_owned(),
                };
                complete(&content, &ids)
            },
        )
        .start()
        .await
}

/// Fails when `text` holds the server's home folder, showing where.
fn assert_no_server_path(home: &Path, what: &str, text: &str) {
    let home = home.to_str().unwrap();
    if let Some(at) = text.find(home) {
        let start = text[..at]
            .char_indices()
            .rev()
            .nth(80)
            .map_or(0, |(i, _)| i);
        let shown: String = text[start..].chars().take(240).collect();
        panic!("{what} holds the server's folder {home}: …{shown}…");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_read_by_id_and_the_outputs_of_run_python_are_downloaded() {
    if !python_with_pandas() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ba_builtins::demo_data::generate(&data).unwrap();
    let home = dir.path().join("home");
    let model = analyst_model().await;
    let config = config(dir.path(), &model, "max_rounds: 8\n");
    let server = serve(&home, &config).await;
    let id = server.create().await;

    let xlsx = std::fs::read(data.join("sales.xlsx")).unwrap();
    let gbk = std::fs::read(data.join("sales_gbk.csv")).unwrap();
    let csv = std::fs::read(data.join("sales.csv")).unwrap();
    let mut ids = Vec::new();
    for (name, media, bytes) in [
        ("sales.xlsx", "application/octet-stream", &xlsx),
        ("targets_gbk.csv", "text/csv", &gbk),
        ("sales.csv", "text/csv", &csv),
    ] {
        let meta = server.upload(&id, name, media, bytes).await;
        assert_eq!(meta["name"], name);
        assert_eq!(meta["size"], bytes.len());
        ids.push(meta["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids, ["upload_001", "upload_002", "upload_003"]);
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let frames = server
        .run(&id, "r1", "Chart the targets by region.", &id_refs)
        .await;

    // The model read the three uploads by id, each as a table with its real type.
    let requests = model.requests();
    let second = requests
        .iter()
        .find(|r| r.tool_results().iter().any(|t| t.name == "file_reader"))
        .expect("the model saw the file_reader results");
    let reads: Vec<_> = second.tool_results().to_vec();
    assert_eq!(reads.len(), 3, "{reads:#?}");
    for read in &reads {
        assert!(!read.is_error, "{read:#?}");
        assert!(
            read.text.contains("target_amount") || read.text.contains("目标金额"),
            "{read:#?}"
        );
    }
    assert!(
        reads[0].text.contains("xlsx") || reads[0].text.contains("workbook"),
        "{:#?}",
        reads[0]
    );
    assert!(
        reads[1].text.contains("目标金额") && reads[1].text.contains("地区"),
        "GBK decoded: {:#?}",
        reads[1]
    );
    assert!(reads[2].text.contains("region"), "{:#?}", reads[2]);
    for read in &reads {
        assert!(
            read.text.contains("csv") || read.text.contains("xlsx"),
            "{read:#?}"
        );
    }

    // run_python read the upload under its name and wrote a chart and a workbook.
    let last = requests.last().unwrap();
    let python = last.last_result().unwrap();
    assert_eq!(python.name, "run_python");
    assert!(!python.is_error, "{python:#?}");
    let outputs = output_ids(&python.text);
    assert_eq!(outputs, ["output_001", "output_002"], "{}", python.text);

    // The final answer's download links fetch both, with their media types.
    let finished = frames.iter().find(|(e, _)| e == "final_answer").unwrap();
    let links = &finished.1["response"]["metadata"]["download_links"];
    assert_eq!(links, &json!(["output_001", "output_002"]), "{finished:#?}");
    let files = server
        .json(&format!("/api/v1/conversations/{id}/files"))
        .await;
    let listed = files["files"].as_array().unwrap();
    let by_id = |wanted: &str| listed.iter().find(|f| f["id"] == wanted).cloned().unwrap();
    assert_eq!(by_id("output_001")["name"], "chart.png");
    assert_eq!(by_id("output_001")["media_type"], "image/png");
    assert_eq!(by_id("output_001")["kind"], "output");
    assert_eq!(by_id("output_002")["name"], "targets_by_region.xlsx");
    assert_eq!(by_id("upload_002")["kind"], "upload");
    for f in listed {
        let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["id", "kind", "media_type", "name", "size"], "{f}");
    }
    let (status, media, png) = server
        .bytes(&format!("/api/v1/conversations/{id}/files/output_001"))
        .await;
    assert_eq!((status, media.as_str()), (200, "image/png"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let (status, media, book) = server
        .bytes(&format!("/api/v1/conversations/{id}/files/output_002"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        media,
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    );
    assert!(book.starts_with(b"PK\x03\x04"), "a zip (xlsx)");
    let (status, _, back) = server
        .bytes(&format!("/api/v1/conversations/{id}/files/upload_002"))
        .await;
    assert_eq!(
        (status, back.as_slice()),
        (200, gbk.as_slice()),
        "the upload comes back byte for byte"
    );

    // No server path reached the model, the events or the API's answers.
    for r in &requests {
        assert_no_server_path(&home, "a model request", &r.body().to_string());
    }
    for (event, data) in &frames {
        assert_no_server_path(&home, event, &data.to_string());
    }
    let messages = server
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    assert_no_server_path(&home, "/messages", &messages.to_string());
    assert_no_server_path(&home, "/files", &files.to_string());
    server.terminate().await;
}

/// What conversation B's model tries against conversation A's files, one call a round; each
/// must fail as a tool error the model reads.
fn probes(a_file: &str, a_folder: &str, conversations: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("file_reader", json!({"path": "upload_001"})),
        ("file_reader", json!({"path": "secret.csv"})),
        ("file_reader", json!({"path": "output_001"})),
        ("file_reader", json!({"path": "a.txt"})),
        ("file_reader", json!({"path": "code_secret"})),
        ("file_reader", json!({"path": a_file})),
        (
            "file_reader",
            json!({"path": "../conversations/A/files/upload_001"}),
        ),
        (
            "run_python",
            json!({"code": format!("print(open({a_file:?}).read())")}),
        ),
        (
            "run_python",
            json!({"code": format!("import os\nprint(os.listdir({a_folder:?}))")}),
        ),
        (
            "run_python",
            json!({"code": format!("import os\nprint(os.listdir({conversations:?}))")}),
        ),
        (
            "run_python",
            json!({"code": "print(open('secret.csv').read())"}),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_cannot_reach_another_conversations_files() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let secret = "SECRET-ROW-4242";
    // A: saves code and writes an output; B: tries every way to A's files.
    let probe_list: Arc<std::sync::Mutex<Vec<(&'static str, Value)>>> = Arc::default();
    let list = Arc::clone(&probe_list);
    let model = ScriptedModel::builder()
        .rule(
            "A: write an output",
            |r| r.last_user_text().contains("conversation A") && r.round() == 0,
            |_| {
                Turn::call(
                    "run_python",
                    json!({"code": "open('outputs/a.txt', 'w').write('SECRET-ROW-4242 output')\n"}),
                )
            },
        )
        .rule(
            "A: answer with code",
            |r| r.last_user_text().contains("conversation A"),
            |_| {
                Turn::text(
                    json!({"task_analysis": "t", "execution_plan": "R1", "current_round": 2,
                        "action": {"type": "complete", "content": "done <code_ref>code_secret</code_ref>",
                            "code_blocks": [{"code_id": "code_secret", "language": "python",
                                "code": "print('SECRET-ROW-4242 code')", "description": "secret"}]}})
                    .to_string(),
                )
            },
        )
        .rule(
            "B: the next probe",
            move |r| r.round() < list.lock().unwrap().len(),
            {
                let list = Arc::clone(&probe_list);
                move |r: &Request| {
                    let (tool, args) = list.lock().unwrap()[r.round()].clone();
                    Turn::call(tool, args)
                }
            },
        )
        .rule("B: done", |_| true, |_| complete("Nothing of A was reachable.", &[]))
        .start()
        .await;
    let config = config(dir.path(), &model, "max_rounds: 20\n");
    let server = serve(&home, &config).await;
    let a = server.create().await;
    let up = server
        .upload(
            &a,
            "secret.csv",
            "text/csv",
            format!("id,value\n1,{secret}\n").as_bytes(),
        )
        .await;
    assert_eq!(up["id"], "upload_001");
    let frames = server
        .run(&a, "a1", "This is conversation A.", &["upload_001"])
        .await;
    assert!(
        frames.iter().any(|(e, _)| e == "final_answer"),
        "{frames:#?}"
    );
    let a_files = server
        .json(&format!("/api/v1/conversations/{a}/files"))
        .await;
    let kinds: Vec<&str> = a_files["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["upload", "code", "output"], "{a_files}");

    let a_folder = home.join("conversations").join(&a).join("files");
    let a_file = a_folder.join("upload_001");
    assert!(a_file.is_file(), "the layout the probes aim at");
    let conversations = home.join("conversations");
    let list = probes(
        a_file.to_str().unwrap(),
        a_folder.to_str().unwrap(),
        conversations.to_str().unwrap(),
    );
    *probe_list.lock().unwrap() = list.clone();
    let b = server.create().await;
    let frames = server.run(&b, "b1", "This is conversation B.", &[]).await;
    let results: Vec<&Value> = frames
        .iter()
        .filter(|(e, _)| e == "tool_result")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(results.len(), list.len(), "{frames:#?}");
    for (result, (tool, args)) in results.iter().zip(&list) {
        let observation = result["observation"].as_str().unwrap_or_default();
        assert_eq!(result["success"], false, "{tool} {args}: {observation}");
        assert!(
            !observation.contains(secret),
            "{tool} {args} leaked: {observation}"
        );
        assert!(
            !observation.trim().is_empty(),
            "{tool} {args}: a clear error"
        );
    }
    // B's own files: none of A's.
    let b_files = server
        .json(&format!("/api/v1/conversations/{b}/files"))
        .await;
    assert_eq!(b_files["files"], json!([]));
    for (what, path) in [
        (
            "an upload",
            format!("/api/v1/conversations/{b}/uploads/upload_001"),
        ),
        (
            "a file",
            format!("/api/v1/conversations/{b}/files/upload_001"),
        ),
        (
            "code",
            format!("/api/v1/conversations/{b}/code/code_secret"),
        ),
        (
            "an output",
            format!("/api/v1/conversations/{b}/files/output_001"),
        ),
    ] {
        let (status, _, body) = server.bytes(&path).await;
        assert_eq!(
            status,
            404,
            "{what} of A through B: {}",
            String::from_utf8_lossy(&body)
        );
    }
    // The probes name A's folders (the model chose to, and errors may quote them back);
    // nothing else in what the model was sent may name the server's home.
    for r in model.requests() {
        let mut text = r.body().to_string();
        for probe in [&a_file, &a_folder, &conversations] {
            text = text.replace(probe.to_str().unwrap(), "");
        }
        assert_no_server_path(&home, "a model request", &text);
    }
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_upload_attaches_files_and_saves_the_outputs_under_their_names() {
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let model = ScriptedModel::builder()
        .rule(
            "read the attached file by its id",
            |r| r.round() == 0 && r.uploads() == ["upload_001"],
            |_| Turn::call("file_reader", json!({"path": "upload_001"})),
        )
        .rule(
            "write a summary next to it",
            |r| r.last_result().is_some_and(|t| t.name == "file_reader" && !t.is_error),
            |r| {
                let rows = if r.last_result().unwrap().text.contains("West") { 2 } else { 0 };
                Turn::call(
                    "run_python",
                    json!({"code": format!(
                        "import csv\nrows = list(csv.reader(open('regions.csv')))\n\
                         open('outputs/summary.txt', 'w').write('rows: %d, seen: {rows}' % (len(rows) - 1))\n"
                    )}),
                )
            },
        )
        .rule(
            "report",
            |r| r.last_result().is_some_and(|t| t.name == "run_python"),
            |r| {
                let ids = output_ids(&r.last_result().unwrap().text);
                complete("Summary written.", &ids)
            },
        )
        .start()
        .await;
    let config = config(dir.path(), &model, "max_rounds: 6\n");
    let upload = dir.path().join("regions.csv");
    std::fs::write(&upload, "region,amount\nWest,10\nEast,7\n").unwrap();
    let outputs = dir.path().join("out");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--home")
        .arg(&home)
        .arg("--upload")
        .arg(&upload)
        .arg("--outputs")
        .arg(&outputs)
        .args(["--task", "Summarise the regions."])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Attached "), "{stdout}");
    assert!(
        stdout.contains("as upload_001 (text/csv, 29 bytes)"),
        "{stdout}"
    );
    let saved = outputs.join("summary.txt");
    assert!(
        stdout.contains(&format!(
            "output_001 summary.txt (16 bytes) saved to {}",
            saved.display()
        )),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), "rows: 2, seen: 2");
    // The message the model read names the upload by id and name, never by a path.
    let first = &model.requests()[0];
    assert!(
        first
            .last_user_text()
            .contains("<file_ref>upload_001</file_ref> regions.csv")
    );
    for r in model.requests() {
        assert_no_server_path(&home, "a model request", &r.body().to_string());
        assert_no_server_path(dir.path(), "a model request", &r.body().to_string());
    }
}

/// The whole day of an analyst through `ba-agent serve` and a model that decides: a file is
/// uploaded, a question asked; the code the model wants to run waits for a person (the
/// configuration asks for `run_python`); approved over the API, it runs and writes a chart the
/// answer links; the chart is downloaded. Then the server stops and a new one starts on the same
/// home ("tomorrow"): the conversation is there, idle, with its title; the chart downloads the
/// same; a follow-up question reaches the model with the first question in its history; the
/// report exports with the chart beside it (from the API as a zip, from `ba-agent report` as a
/// folder).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_ask_approve_download_and_come_back_tomorrow() {
    if !python_with_pandas() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ba_builtins::demo_data::generate(&data).unwrap();
    let home = dir.path().join("home");
    let model = ScriptedModel::builder()
        .rule(
            "answer the follow-up from the history",
            |r| r.last_user_text().contains("Which region"),
            |r| {
                let first = r
                    .messages()
                    .iter()
                    .any(|m| m.text.contains("Chart the targets by region."));
                complete(
                    if first {
                        "West, as the chart showed."
                    } else {
                        "I do not know what you asked before."
                    },
                    &[],
                )
            },
        )
        .rule(
            "read the upload",
            |r| r.offers("file_reader") && r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
            },
        )
        .rule(
            "chart it",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "file_reader" && !t.is_error)
            },
            |_| Turn::call("run_python", json!({"code": CHART_CODE})),
        )
        .rule(
            "report the chart",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "run_python" && !t.is_error)
            },
            |r| {
                let ids = output_ids(&r.last_result().unwrap().text);
                complete(
                    &format!("Targets by region: <file_ref>{}</file_ref>", ids[0]),
                    &ids,
                )
            },
        )
        .start()
        .await;
    let config = config(
        dir.path(),
        &model,
        "max_rounds: 8\napprovals:\n  tools:\n    run_python: ask\n",
    );
    let server = serve(&home, &config).await;
    let id = server.create().await;
    let csv = std::fs::read(data.join("sales.csv")).unwrap();
    let upload = server.upload(&id, "sales.csv", "text/csv", &csv).await;
    let upload = upload["id"].as_str().unwrap().to_owned();

    // Asked: the code waits for a person.
    let frames = server
        .run(&id, "q1", "Chart the targets by region.", &[&upload])
        .await;
    let (_, finished) = frames.last().unwrap();
    assert_eq!(finished["status"], "awaiting_approval", "{finished}");
    let waiting = server
        .json(&format!("/api/v1/conversations/{id}/approvals"))
        .await;
    let call = waiting["pending"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(waiting["pending"][0]["tool"], "run_python");
    assert!(
        !model
            .fired()
            .iter()
            .flatten()
            .any(|r| r == "report the chart"),
        "nothing ran yet"
    );

    // Approved: it runs, and the answer links the chart.
    let decided = server
        .post(
            &format!("/api/v1/conversations/{id}/approvals/{call}"),
            &json!({"decision": "approve"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 202, "{:?}", decided.text().await);
    let idle = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        loop {
            let c = server.json(&format!("/api/v1/conversations/{id}")).await;
            if c["status"] != "running" {
                return c;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(idle["status"], "idle", "{idle}");
    let files = server
        .json(&format!("/api/v1/conversations/{id}/files"))
        .await;
    let chart = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "chart.png")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, media, png) = server
        .bytes(&format!("/api/v1/conversations/{id}/files/{chart}"))
        .await;
    assert_eq!((status, media.as_str()), (200, "image/png"));
    assert!(png.starts_with(b"\x89PNG"), "a PNG");

    // Tomorrow: another server on the same home.
    server.terminate().await;
    let server = serve(&home, &config).await;
    let view = server.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(view["status"], "idle");
    assert_eq!(view["title"], "Chart the targets by region.");
    let (status, _, again) = server
        .bytes(&format!("/api/v1/conversations/{id}/files/{chart}"))
        .await;
    assert_eq!((status, again == png), (200, true), "the same chart");
    let frames = server
        .run(&id, "q2", "Which region has the highest target?", &[])
        .await;
    let answer = frames
        .iter()
        .find(|(e, _)| e == "final_answer")
        .map(|(_, d)| d["text"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert!(answer.contains("West, as the chart showed."), "{frames:?}");
    let (status, _, md) = server
        .bytes(&format!("/api/v1/conversations/{id}/report/last?format=md"))
        .await;
    assert_eq!(status, 200);
    let (_, _, first) = server
        .bytes(&format!(
            "/api/v1/conversations/{id}/report/{}?format=md",
            view["last_seq"]
        ))
        .await;
    // The first answer's export carries the chart beside it, linked relatively: it opens
    // from disk with no server.
    let first = ba_testkit::files::unzip(&first);
    let (report, chart_copy) = (
        first.iter().find(|(k, _)| k.ends_with("/report.md")),
        first.iter().find(|(k, _)| k.ends_with("/files/chart.png")),
    );
    let report = String::from_utf8(report.unwrap().1.clone()).unwrap();
    assert!(report.contains("![chart.png](files/chart.png)"), "{report}");
    assert!(
        !report.contains("/api/v1/") && !report.contains(&id),
        "{report}"
    );
    assert_eq!(chart_copy.map(|(_, v)| v), Some(&png), "{:?}", first.keys());
    let md = ba_testkit::files::unzip(&md)
        .into_iter()
        .find_map(|(k, v)| k.ends_with("/report.md").then_some(v))
        .unwrap();
    assert!(String::from_utf8(md).unwrap().contains("West"));
    server.terminate().await;

    // `ba-agent report` writes the same bundle: the document, the chart in `files/` beside it.
    let out_dir = dir.path().join("export");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .args([
            "report",
            &id,
            "--seq",
            &view["last_seq"].to_string(),
            "--format",
            "md",
        ])
        .arg("--out")
        .arg(out_dir.join("report.md"))
        .arg("--home")
        .arg(&home)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("![chart.png](files/chart.png)"), "{report}");
    assert_eq!(std::fs::read(out_dir.join("files/chart.png")).unwrap(), png);
}
