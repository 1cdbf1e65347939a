//! An answer leaves the page: "Export HTML" downloads one file that, opened on its own (from
//! disk, no server), shows its table and its chart (drawn as an image, no script) and asks
//! nothing of anyone; "Export Markdown" gives the same answer as Markdown. The cost lines
//! (under each answer, and the conversation's in the sidebar) say what the metrics report says.

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

/// `$0.0123` below ten cents, `$1.23` above: the page's rule.
fn money(usd: f64) -> String {
    if usd >= 0.1 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_lines_match_the_metrics_report() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let mut prices = std::collections::BTreeMap::new();
    prices.insert(
        "demo".to_string(),
        ba_agent::ModelPrice {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: None,
        },
    );
    let server = Server::start(Options {
        prices: ba_agent::Prices::new(prices).unwrap(),
        ..Options::default()
    })
    .await;
    // An earlier conversation, so the sidebar lists two titles.
    let earlier = server.conversation().await;
    server.run_to_end(&earlier, CHART_QUESTION).await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the first answer",
        "return document.querySelectorAll('[data-component=export_report]').length === 1",
    )
    .await;
    ask(&c, CHART_QUESTION).await;
    wait_for(
        &c,
        "the second answer",
        "return document.querySelectorAll('[data-component=export_report]').length === 2",
    )
    .await;
    let report = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}/report"),
            None,
        )
        .await;
    let cost = report["cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{report}");
    assert!(report.get("unpriced_calls").is_none(), "{report}");
    let fmt = |n: &serde_json::Value| {
        let n = n.as_u64().unwrap();
        let s = n.to_string();
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    let expected = format!(
        "This conversation — Tokens: {} in · {} out · {} cached · {} model calls · {}",
        fmt(&report["input_tokens"]),
        fmt(&report["output_tokens"]),
        fmt(&report["cache_read_tokens"]),
        report["model_calls"],
        money(cost)
    );
    let side = wait_for(
        &c,
        "the sidebar's cost line",
        &format!(
            "const p = document.querySelector('#conv-cost'); return p && !p.hidden && p.textContent === {} && p.textContent",
            serde_json::Value::String(expected.clone())
        ),
    )
    .await;
    assert_eq!(side, expected.as_str());
    // Each answer's line covers its own calls; together they are the conversation's.
    let lines = js(
        &c,
        "return [...document.querySelectorAll('[data-component=cost]')].map((d) => ({text: d.textContent, cost: Number(d.dataset.cost)}))",
    )
    .await;
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let sum: f64 = lines.iter().map(|l| l["cost"].as_f64().unwrap()).sum();
    assert!(
        (sum - cost).abs() < 1e-9,
        "answers {sum} against the report's {cost}"
    );
    for l in lines {
        let text = l["text"].as_str().unwrap();
        assert!(
            text.ends_with(&money(l["cost"].as_f64().unwrap())),
            "{text}"
        );
    }
    // The sidebar's titles, the cost line and the first answer's compression notice.
    wait_for(
        &c,
        "both titles in the sidebar",
        "return document.querySelectorAll('#conv-list li').length === 2",
    )
    .await;
    c.execute(
        "document.querySelector('[data-notice=compression]').scrollIntoView({block: 'center'})",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&c, "cost.png").await;
    c.close().await.unwrap();
}

/// The provider's cache figures reach the page: a model that reports tokens read from and
/// written to its prompt cache (Anthropic's `cache_read_input_tokens` and
/// `cache_creation_input_tokens`) has both under its answer and in the sidebar's line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_figures_of_a_call_reach_the_page() {
    use ba_testkit::model::{ScriptedModel, Turn};
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let model = ScriptedModel::builder()
        .rule(
            "answer from the cache",
            |_| true,
            |_| {
                let answer = serde_json::json!({
                    "task_analysis": "A greeting.",
                    "execution_plan": "R1: answer",
                    "current_round": 1,
                    "action": {"type": "complete", "content": "Hello again.", "download_links": []}
                });
                Turn::text(answer.to_string())
                    .with_usage(1_000, 50)
                    .with_cached_tokens(4_000)
                    .with_cache_write_tokens(1_200)
            },
        )
        .start()
        .await;
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, "Hello?").await;
    let expected =
        "Tokens: 1,000 in · 50 out · 4,000 cached · 1,200 written to cache · 1 model call";
    let line = wait_for(
        &c,
        "the answer's cost line",
        "const d = document.querySelector('[data-component=cost]'); return d && d.textContent",
    )
    .await;
    assert_eq!(line, expected);
    let side = wait_for(
        &c,
        "the sidebar's cost line",
        "const p = document.querySelector('#conv-cost'); return p && !p.hidden && p.textContent",
    )
    .await;
    assert_eq!(
        side.as_str().unwrap(),
        format!("This conversation — {expected}")
    );
    c.close().await.unwrap();
}
