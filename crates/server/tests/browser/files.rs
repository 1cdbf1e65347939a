//! The analyst's files on the page, with a model that decides (the scripted model of
//! `ba-testkit`): a CSV uploaded through the page's upload control is read by `run_python`
//! under its own name, the chart the code writes to `outputs/` is named in the final answer's
//! download links, and the page shows it inline in the report with a download button.

use ba_testkit::model::{Request, ScriptedModel, Turn};
use fantoccini::Locator;
use serde_json::{Value, json};

use crate::harness::*;

const SALES_CSV: &str = "region,quarter,amount\n\
    West,Q1,120\nWest,Q2,135\nWest,Q3,210\nWest,Q4,160\n\
    East,Q1,150\nEast,Q2,140\nEast,Q3,145\nEast,Q4,155\n\
    North,Q1,90\nNorth,Q2,95\nNorth,Q3,100\nNorth,Q4,110\n\
    South,Q1,70\nSouth,Q2,80\nSouth,Q3,85\nSouth,Q4,75\n";

/// Python with the libraries the chart's code imports; a skip (a failure under CI) without.
fn python_with_pandas() -> bool {
    if !ba_testkit::require_tool("python3") {
        return false;
    }
    let ok = std::process::Command::new("python3")
        .args(["-c", "import pandas, matplotlib"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        ba_testkit::missing("python3 with pandas and matplotlib (.ci/tools.sh)");
    }
    ok
}

/// The name of the first upload the user message lists (`<file_ref>id</file_ref> NAME (…)`).
fn upload_name(r: &Request) -> String {
    let id = r.uploads().into_iter().next().unwrap();
    let text = r.last_user_text();
    let marker = format!("<file_ref>{id}</file_ref> ");
    let at = text.find(&marker).unwrap() + marker.len();
    let rest = &text[at..];
    rest[..rest.find(" (").unwrap()].to_owned()
}

/// The code the model runs: the upload read by its name, a bar chart saved under `outputs/`.
fn chart_code(name: &str) -> String {
    format!(
        r##"import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

df = pd.read_csv({name:?})
totals = df.groupby("region")["amount"].sum().sort_values(ascending=False)
ax = totals.plot(kind="bar", title="2024 sales by region", color="#3b6ea5", figsize=(6, 3.5))
ax.set_ylabel("amount")
plt.tight_layout()
plt.savefig("outputs/chart.png", dpi=80)
print(totals.to_string())
"##
    )
}

/// Every `output_NNN` a text names, in order, once each.
fn output_ids(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("output_") {
        rest = &rest[at + "output_".len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let id = format!("output_{digits}");
        if digits.len() >= 3 && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// Charts the upload with `run_python`, then answers in the structured form with the
/// outputs the observation named as download links.
async fn analyst() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "chart the upload",
            |r| r.offers("run_python") && r.round() == 0 && !r.uploads().is_empty(),
            |r| Turn::call("run_python", json!({"code": chart_code(&upload_name(r))})),
        )
        .rule(
            "report with the chart",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "run_python" && !t.is_error)
            },
            |r| {
                let links = output_ids(&r.last_result().unwrap().text);
                let answer = json!({
                    "task_analysis": "The analyst wants the uploaded sales charted by region.",
                    "execution_plan": "R1: chart the upload with run_python; R2: report",
                    "current_round": 2,
                    "action": {"type": "complete",
                        "content": "## Sales by region\n\nWest sold the most in 2024 (**625**), \
                            ahead of East (590), North (395) and South (310).",
                        "download_links": links}
                });
                Turn::text(answer.to_string())
            },
        )
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_chart_inline() {
    let _one = BROWSER.lock().await;
    if !python_with_pandas() {
        return;
    }
    let Some(c) = browser().await else { return };
    let model = analyst().await;
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    js(&c, CATCH_DOWNLOADS).await;

    // Uploaded through the page's file control, as a person picks a file.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("sales.csv");
    std::fs::write(&csv, SALES_CSV).unwrap();
    c.find(Locator::Css("#file"))
        .await
        .unwrap()
        .send_keys(csv.to_str().unwrap())
        .await
        .unwrap();
    let upload = wait_for(
        &c,
        "the attachment",
        "const a = document.querySelector('[data-upload-id]'); return a && a.dataset.uploadId",
    )
    .await;
    assert_eq!(upload, "upload_001");
    ask(&c, "Chart my sales by region.").await;

    // The chart, decoded, in the report.
    let width = wait_for(
        &c,
        "the chart drawn in the report",
        "const i = document.querySelector('[data-component=final_report] figure.output-image img'); \
        return i && i.complete && i.naturalWidth > 0 && i.naturalWidth",
    )
    .await;
    eprintln!("chart: {width} px wide");
    let figure = js(
        &c,
        "const f = [...document.querySelectorAll('[data-component=final_report] figure.output-image')]; \
        return f.map(x => [x.dataset.fileId, x.querySelector('figcaption').textContent, \
            x.querySelector('img').naturalHeight > 0])",
    )
    .await;
    assert_eq!(figure, json!([["output_001", "chart.png", true]]));

    // Its download button, named after the file, downloads it under that name.
    let button = wait_for(
        &c,
        "the download button named after the chart",
        "const b = document.querySelector('[data-component=download_links] button[data-file-id=output_001]'); \
        return b && b.textContent.includes('chart.png') && b.textContent",
    )
    .await;
    assert_eq!(button, "⬇ chart.png");
    let got = download(
        &c,
        "[data-component=download_links] button[data-file-id=output_001]",
    )
    .await;
    assert_eq!(got["name"], "chart.png");
    assert!(
        got["text"].as_str().unwrap().starts_with("\u{FFFD}PNG"),
        "{got}"
    );

    // The model decided as scripted: it saw the upload, ran the code, and named the output.
    assert_eq!(
        model.fired(),
        [
            Some("chart the upload".into()),
            Some("report with the chart".into())
        ]
    );
    let last = model.requests().pop().unwrap();
    let python = last.last_result().unwrap();
    assert!(python.text.contains("output_001"), "{}", python.text);
    assert!(
        python.text.contains("West"),
        "the code read the upload: {}",
        python.text
    );
    let files = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}/files"),
            None,
        )
        .await;
    let chart = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "output_001")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(chart["name"], "chart.png", "{files}");
    assert_eq!(chart["media_type"], "image/png", "{files}");
    assert_in_order(&js(&c, COMPONENTS).await);

    js(
        &c,
        "document.querySelector('[data-component=final_report]').scrollIntoView(); return 1",
    )
    .await;
    screenshot(&c, "files-chart.png").await;
    c.close().await.unwrap();
}
