//! `GET …/{id}/report/{seq}?format=html|zip|md`: a final answer as a file to send — the right
//! answer, its question as the person asked it, the files it names beside it, the headers of a
//! download; the model's HTML and Markdown made harmless; clear refusals for what is not an
//! answer.

use serde_json::json;

use ba_testkit::files::unzip;

use crate::harness::{Api, Model, Server, dir, two_rounds};

const Q: &str = "How many rows has the sales table?";

#[tokio::test]
async fn an_answer_exports_as_markdown_and_html_and_the_rest_is_refused() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut events = api.events(&id, None).await;
    let run = api
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await;
    assert_eq!(run.status(), 202);
    events.until("finished").await;
    let base = format!("/api/v1/conversations/{id}/report");

    let md = api
        .get(&format!("{base}/last?format=md"))
        .send()
        .await
        .unwrap();
    assert_eq!(md.status(), 200);
    let header = |r: &reqwest::Response, h: &str| {
        r.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header(&md, "content-type"), "application/zip");
    let disposition = header(&md, "content-disposition");
    assert!(
        disposition.starts_with(
            "attachment; filename=\"report-how-many-rows-has-the-sales-table-4-md.zip\""
        ),
        "{disposition}"
    );
    let entries = unzip(&md.bytes().await.unwrap());
    let names: Vec<&String> = entries.keys().collect();
    assert_eq!(
        names,
        ["report-how-many-rows-has-the-sales-table-4/report.md"],
        "an answer with no file has none beside it"
    );
    let text = String::from_utf8(entries.into_values().next().unwrap()).unwrap();
    assert!(
        text.starts_with("# How many rows has the sales table?\n"),
        "{text}"
    );
    assert!(text.contains(&format!("> {Q}")), "{text}");
    assert!(text.contains("There are 42 rows."), "{text}");

    let html = api
        .get(&format!("{base}/4?format=html"))
        .send()
        .await
        .unwrap();
    assert_eq!(html.status(), 200);
    assert_eq!(header(&html, "content-type"), "text/html; charset=utf-8");
    let text = html.text().await.unwrap();
    assert!(text.starts_with("<!doctype html>"), "{text}");
    assert!(
        text.contains("content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\"")
    );
    assert!(text.contains("<p>There are 42 rows.</p>"), "{text}");
    assert!(text.contains("@media print"), "no print stylesheet");

    for (path, status, says) in [
        (format!("{base}/1"), 404, "entry 1 of conversation"),
        (format!("{base}/1"), 404, "(its answers are at 4)"),
        (format!("{base}/three"), 400, "is not an entry number"),
        (format!("{base}/4?format=pdf"), 400, "unknown report format"),
        (
            "/api/v1/conversations/00000000-0000-0000-0000-000000000000/report/last".into(),
            404,
            "",
        ),
    ] {
        let r = api.get(&path).send().await.unwrap();
        assert_eq!(r.status(), status, "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains(says), "{path}: {body}");
    }
}

#[tokio::test]
async fn a_conversation_without_an_answer_says_so() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let r = api
        .get(&format!("/api/v1/conversations/{id}/report/last"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body = r.text().await.unwrap();
    assert!(body.contains("has no final answer to export"), "{body}");
}

/// An 8×8 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4oaGBFTEMLQkAgl1GAWqNFmsAAAAASUVORK5CYII=";
const CSV: &str = "region,target\nWest,400000\nEast,210000\n";
const CODE: &str = "import pandas as pd\nprint(pd.read_csv('targets.csv').sum())\n";

fn png() -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap()
}

/// Uploads `bytes` as `name` to conversation `id`; the upload's id.
async fn upload(api: &Api<'_>, id: &str, name: &str, bytes: &[u8]) -> String {
    let r = api.upload(id, name, bytes).await;
    assert_eq!(r.status(), 201);
    r.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The `report.md` of a Markdown export's entries.
fn report_md(entries: &std::collections::BTreeMap<String, Vec<u8>>) -> String {
    entries
        .iter()
        .find_map(|(k, v)| {
            k.ends_with("/report.md")
                .then(|| String::from_utf8(v.clone()).unwrap())
        })
        .unwrap_or_else(|| panic!("no report.md in {:?}", entries.keys()))
}

/// A conversation whose question came with two uploads (a CSV and a PNG), answered by
/// `answer`, with a saved code block `code_totals`; the server, its folder and the id.
async fn answered(answer: &str) -> (tempfile::TempDir, Server, String) {
    let (d, path) = dir();
    let store = std::sync::Arc::new(ba_storage::FileStore::open(&path).unwrap());
    let (server, id) = answered_in(answer, &path, store).await;
    (d, server, id)
}

/// [`answered`] on `store`.
async fn answered_in(
    answer: &str,
    path: &std::path::Path,
    store: std::sync::Arc<dyn ba_storage::ConversationStore>,
) -> (Server, String) {
    let turns = vec![crate::harness::text_turn(answer, json!({"role": "user"}))];
    let options = crate::harness::Options {
        store: Some(std::sync::Arc::clone(&store)),
        ..crate::harness::Options::default()
    };
    let server = Server::start_with(path, Model::new(&turns, 0), options);
    let api = Api::new(&server);
    let id = api.create().await;
    let ws = store.workspace().unwrap();
    let conv = ba_storage::ConversationId::new(&id).unwrap();
    ba_storage::save_code(
        ws.as_ref(),
        &conv,
        "code_totals",
        CODE,
        "python",
        "Sums the targets",
    )
    .await
    .unwrap();
    assert_eq!(
        upload(&api, &id, "targets.csv", CSV.as_bytes()).await,
        "upload_001"
    );
    assert_eq!(upload(&api, &id, "pixel.png", &png()).await, "upload_002");
    let mut events = api.events(&id, None).await;
    let input = json!({"type": "message",
        "text": "Check <file_ref>upload_001</file_ref> against the goals.",
        "upload_ids": ["upload_001", "upload_002"]});
    assert_eq!(api.run(&id, "r1", input).await.status(), 202);
    events.until("finished").await;
    (server, id)
}

async fn fetch(api: &Api<'_>, path: &str) -> (String, String, Vec<u8>) {
    let r = api.get(path).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let h = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (kind, disposition) = (h("content-type"), h("content-disposition"));
    (kind, disposition, r.bytes().await.unwrap().to_vec())
}

/// What no export may show: the conversation's id, a server path, an entry number, a tag or
/// the note the model is handed with the uploads.
fn assert_no_internals(doc: &str, id: &str) {
    for inside in [
        id,
        "/api/v1",
        "file_ref",
        "code_ref",
        "Uploaded files (",
        "upload_001",
        "upload_002",
        "code_totals",
        "· answer ",
        "Conversation ",
    ] {
        assert!(!doc.contains(inside), "the export shows {inside:?}:\n{doc}");
    }
}

#[tokio::test]
async fn an_export_carries_its_files_beside_it_and_shows_no_internals() {
    let answer = "Targets by region are in <file_ref>upload_001</file_ref>.\n\n\
                  <file_ref>upload_002</file_ref>\n\nThe sums:\n\n<code_ref>code_totals</code_ref>\n";
    let (_d, server, id) = answered(answer).await;
    let api = Api::new(&server);
    let base = format!("/api/v1/conversations/{id}/report/last");

    // One HTML file: the image inside it, the CSV linked beside it, the question as asked.
    let (kind, disposition, body) = fetch(&api, &format!("{base}?format=html")).await;
    assert_eq!(kind, "text/html; charset=utf-8");
    assert!(disposition.contains("filename=\"report-"), "{disposition}");
    let html = String::from_utf8(body).unwrap();
    assert_no_internals(&html, &id);
    assert!(
        html.contains(&format!("src=\"data:image/png;base64,{PNG}\"")),
        "the image is not embedded:\n{html}"
    );
    assert!(
        html.contains("<a href=\"files/targets.csv\">targets.csv</a>"),
        "{html}"
    );
    assert!(
        html.contains("Check targets.csv against the goals."),
        "{html}"
    );
    assert!(html.contains("Attached: targets.csv, pixel.png"), "{html}");
    assert!(
        html.contains("print(pd.read_csv(&#39;targets.csv&#39;).sum())"),
        "{html}"
    );

    // The zip: that report and a copy of every file it names, under one folder.
    let (kind, disposition, body) = fetch(&api, &format!("{base}?format=zip")).await;
    assert_eq!(kind, "application/zip");
    assert!(
        disposition.starts_with("attachment; filename=\"report-check-")
            && disposition.contains(".zip\""),
        "{disposition}"
    );
    let entries = unzip(&body);
    let folder = entries
        .keys()
        .find_map(|k| k.strip_suffix("/report.html"))
        .unwrap_or_else(|| panic!("no report.html in {:?}", entries.keys()))
        .to_owned();
    let names: Vec<&String> = entries.keys().collect();
    assert_eq!(
        names,
        [
            &format!("{folder}/files/pixel.png"),
            &format!("{folder}/files/targets.csv"),
            &format!("{folder}/report.html"),
        ],
        "{names:?}"
    );
    assert_eq!(
        entries[&format!("{folder}/files/targets.csv")],
        CSV.as_bytes()
    );
    assert_eq!(entries[&format!("{folder}/files/pixel.png")], png());
    let zipped = String::from_utf8(entries[&format!("{folder}/report.html")].clone()).unwrap();
    assert_no_internals(&zipped, &id);
    assert!(zipped.contains("href=\"files/targets.csv\""), "{zipped}");

    // Markdown: a zip too, its image and file beside it, linked relatively.
    let (kind, disposition, body) = fetch(&api, &format!("{base}?format=md")).await;
    assert_eq!(kind, "application/zip");
    assert!(disposition.contains("-md.zip\""), "{disposition}");
    let entries = unzip(&body);
    let md = report_md(&entries);
    assert_no_internals(&md, &id);
    assert!(md.contains("[targets.csv](files/targets.csv)"), "{md}");
    assert!(md.contains("![pixel.png](files/pixel.png)"), "{md}");
    assert!(md.contains("```python\nimport pandas as pd\n"), "{md}");
    assert!(
        md.contains("> Check targets.csv against the goals."),
        "{md}"
    );
    for (file, bytes) in [
        ("targets.csv", CSV.as_bytes().to_vec()),
        ("pixel.png", png()),
    ] {
        let found = entries
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/files/{file}")));
        assert_eq!(found.map(|(_, v)| v), Some(&bytes), "{file}");
    }
}

/// The tags and attributes in `html` a browser would run, submit or follow out of the report
/// (what is text — escaped — is not looked at: every raw `<` followed by a letter opens a tag).
fn dangerous(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices('<') {
        let tag = &lower[at + 1..];
        if !tag.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        let name = tag
            .split(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or_default();
        let bad_tag = [
            "script", "iframe", "meta", "form", "input", "style", "object", "embed", "base",
        ]
        .contains(&name);
        let bad_attribute = [
            "onerror",
            "onload",
            "onclick",
            "javascript:",
            "data:text",
            "http-equiv",
        ]
        .iter()
        .any(|a| tag.contains(a));
        if bad_tag || bad_attribute {
            found.push(format!("<{tag}>"));
        }
    }
    found
}

fn viewer(md: &str) -> String {
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, pulldown_cmark::Parser::new(md));
    html
}

#[tokio::test]
async fn hostile_markdown_is_sanitised_in_both_exports() {
    let answer = "Summary of <file_ref>upload_001</file_ref>.\n\n\
        <img src=x onerror=alert(1)>\n\n\
        [click](javascript:alert(1)) and <a href=\"javascript:alert(2)\">two</a>\n\n\
        <meta http-equiv=\"refresh\" content=\"0;url=https://evil.example\">\n\n\
        <form action=\"https://evil.example\"><input name=\"q\"></form>\n\n\
        <iframe src=\"https://evil.example\"></iframe>\n\n\
        Hover <span title=\"<code_ref>code_totals</code_ref>\">here</span> and \
        <a href=\"<file_ref>upload_001</file_ref>\">there</a>.\n";
    let (_d, server, id) = answered(answer).await;
    let api = Api::new(&server);
    let base = format!("/api/v1/conversations/{id}/report/last");

    let (_, _, body) = fetch(&api, &format!("{base}?format=html")).await;
    let html = String::from_utf8(body).unwrap();
    let (_, body) = html.split_once("<article>").unwrap();
    assert_eq!(dangerous(body), Vec::<String>::new(), "{body}");
    // A reference inside an attribute stays inside it, harmless: no markup breaks out.
    assert!(
        !body.contains("=\"<"),
        "markup inside an attribute:\n{body}"
    );
    assert!(body.contains("<span title=\""), "{body}");

    let (_, _, body) = fetch(&api, &format!("{base}?format=md")).await;
    let md = report_md(&unzip(&body));
    assert_eq!(dangerous(&viewer(&md)), Vec::<String>::new(), "{md}");
    assert!(md.contains("[targets.csv](files/targets.csv)"), "{md}");
}

/// Files kept in PostgreSQL (in chunks, no shared disk) travel in the zip the same.
#[tokio::test]
async fn an_export_bundles_files_kept_in_postgres() {
    let Some(pg) = crate::scale_out::Pg::new() else {
        return;
    };
    let (_d, path) = dir();
    let store = std::sync::Arc::new(pg.store().await);
    let answer =
        "The targets: <file_ref>upload_001</file_ref>\n\n<file_ref>upload_002</file_ref>\n";
    let (server, id) = answered_in(answer, &path, store).await;
    let api = Api::new(&server);
    let (kind, _, body) = fetch(
        &api,
        &format!("/api/v1/conversations/{id}/report/last?format=zip"),
    )
    .await;
    assert_eq!(kind, "application/zip");
    let entries = unzip(&body);
    let beside = |file: &str| {
        entries
            .iter()
            .find(|(k, _)| k.ends_with(&format!("/files/{file}")))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(beside("targets.csv"), Some(CSV.as_bytes().to_vec()));
    assert_eq!(beside("pixel.png"), Some(png()));
}

#[tokio::test]
async fn an_export_speaks_the_language_the_page_asks_for() {
    let answer = "Targets by region are in <file_ref>upload_001</file_ref>.";
    let (_d, server, id) = answered(answer).await;
    let api = Api::new(&server);
    let base = format!("/api/v1/conversations/{id}/report/last");
    let (_, english_name, english) = fetch(&api, &format!("{base}?format=html")).await;
    let english = String::from_utf8(english).unwrap();
    let (_, name, chinese) = fetch(&api, &format!("{base}?format=html&lang=zh-CN")).await;
    let chinese = String::from_utf8(chinese).unwrap();
    assert_eq!(
        name, english_name,
        "the file's name is the same in every language"
    );
    assert!(english.contains("<html lang=\"en\">"), "{english}");
    for words in [
        "Answered ",
        "<strong>Question:</strong> ",
        "<h2>Files</h2>",
        "Exported from BA-Agent.",
    ] {
        assert!(english.contains(words), "{words:?} not in {english}");
    }
    assert!(chinese.contains("<html lang=\"zh-CN\">"), "{chinese}");
    for words in [
        "回答于 ",
        "<strong>问题：</strong>Check",
        "附件：",
        "<h2>文件</h2>",
        "由 BA-Agent 导出。",
        "字节",
    ] {
        assert!(chinese.contains(words), "{words:?} not in {chinese}");
    }
    for words in [
        "Answered", "Question", "Attached", "Files", "Exported", "bytes",
    ] {
        assert!(
            !chinese.contains(words),
            "{words:?} left in English in {chinese}"
        );
    }
    // Markdown too; an unknown language is English.
    let (_, _, zip) = fetch(&api, &format!("{base}?format=md&lang=zh-CN")).await;
    let md = report_md(&unzip(&zip));
    assert!(md.contains("> **问题**") && md.contains("## 文件"), "{md}");
    let (_, _, plain) = fetch(&api, &format!("{base}?format=html&lang=xx")).await;
    assert_eq!(String::from_utf8(plain).unwrap(), english);
}
