//! `GET …/{id}/report/{seq}?format=md|html`: a final answer as a file to send — the right
//! answer, its question, the headers of a download; clear refusals for what is not an answer.

use serde_json::json;

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
    assert_eq!(header(&md, "content-type"), "text/markdown; charset=utf-8");
    let disposition = header(&md, "content-disposition");
    assert!(
        disposition
            .starts_with("attachment; filename=\"report-how-many-rows-has-the-sales-table-4.md\""),
        "{disposition}"
    );
    let text = md.text().await.unwrap();
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
