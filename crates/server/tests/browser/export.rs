//! An answer leaves the page: "Export HTML" downloads one file that, opened on its own (from
//! disk, no server), shows its table and its chart (drawn as an image, no script) and asks
//! nothing of anyone; "Export Markdown" gives the same answer as Markdown.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_report_reads_on_its_own_with_its_table_and_chart() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    js(&c, CATCH_DOWNLOADS).await;
    ask(&c, CHART_QUESTION).await;
    wait_for(
        &c,
        "the export buttons",
        "return document.querySelector('[data-component=export_report] button')",
    )
    .await;
    let html = download(&c, "[data-component=export_report] button:nth-child(1)").await;
    let name = html["name"].as_str().unwrap().to_string();
    assert!(
        name.starts_with("report-") && name.ends_with(".html"),
        "{name}"
    );
    let text = html["text"].as_str().unwrap().to_string();
    assert!(!text.contains("<script"), "the export holds a script");
    assert!(
        !text.contains(&server.addr.to_string()),
        "the export names the server"
    );
    let md = download(&c, "[data-component=export_report] button:nth-child(2)").await;
    let md = md["text"].as_str().unwrap();
    assert!(md.starts_with("# "), "{md}");
    assert!(
        md.contains("| West |") || md.contains("<td>West</td>"),
        "{md}"
    );

    // Opened from disk, in a browser with no server to ask.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(&name);
    std::fs::write(&file, &text).unwrap();
    drop(server);
    c.goto(&format!("file://{}", file.display())).await.unwrap();
    let shown = wait_for(
        &c,
        "the exported chart decoded",
        "const img = document.querySelector('figure.chart img'); \
         return img && img.complete && img.naturalWidth > 0 && \
           {width: img.naturalWidth, rows: document.querySelectorAll('table tbody tr').length, \
            cells: [...document.querySelectorAll('table td')].map((t) => t.textContent), \
            title: document.title, question: document.querySelector('.question').textContent, \
            requests: performance.getEntriesByType('resource').map((r) => r.name), \
            scripts: document.scripts.length}",
    )
    .await;
    eprintln!("exported {id}: {shown}");
    assert_eq!(shown["rows"], 5, "{shown}");
    assert!(
        shown["cells"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "444,645"),
        "{shown}"
    );
    assert!(
        shown["question"].as_str().unwrap().contains(CHART_QUESTION),
        "{shown}"
    );
    assert_eq!(shown["scripts"], 0, "{shown}");
    assert_eq!(shown["requests"], serde_json::json!([]), "{shown}");
    // The chart is the report's: its bars drawn, its series named.
    let svg = js(
        &c,
        "const src = document.querySelector('figure.chart img').src; \
         return atob(src.slice(src.indexOf(',') + 1))",
    )
    .await;
    let svg = svg.as_str().unwrap();
    assert_eq!(svg.matches("class=\"bar\"").count(), 20, "{svg}");
    for region in ["Central", "East", "North", "South", "West"] {
        assert!(svg.contains(region), "{region} missing from the chart");
    }
    screenshot(&c, "exported-report.png").await;
    c.close().await.unwrap();
}
