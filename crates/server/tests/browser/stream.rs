//! The event stream as a network treats it: a connection cut mid-run is picked up again by
//! the page with its last event id and no turn shown twice; the wait between attempts is
//! capped; and a structured answer fills the plan boxes while it streams, never as raw JSON.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::harness::*;

/// Waits (bounded) until the page has made more than `before` requests for the event stream;
/// returns them all.
async fn event_requests_after(server: &Server, id: &str, before: usize) -> Vec<Option<String>> {
    let proxy = server.proxy.as_ref().unwrap();
    let start = std::time::Instant::now();
    loop {
        let found = proxy.event_requests(id);
        if found.len() > before {
            return found;
        }
        assert!(
            start.elapsed() < LIMIT,
            "no new request for the event stream: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Cuts every connection; waits for the page to reconnect; returns the `Last-Event-ID` the
/// new request carried.
async fn cut_and_reconnect(c: &fantoccini::Client, server: &Server, id: &str) -> String {
    let proxy = server.proxy.as_ref().unwrap();
    let before = proxy.event_requests(id).len();
    js(c, "window.__streams = []; return 1").await;
    assert!(proxy.cut() >= 1, "the event stream was not open");
    wait_for(
        c,
        "the page to reconnect",
        "return window.__streams.includes('reconnecting') && document.body.dataset.stream === 'open'",
    )
    .await;
    let found = event_requests_after(server, id, before).await;
    found[before]
        .clone()
        .unwrap_or_else(|| panic!("the reconnect carried no Last-Event-ID: {found:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_reconnects_with_its_last_event_id() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    // Each cut happens while a model call is held, so the run is surely still going.
    let latch = Latch::new(1);
    let server = Server::start(Options {
        latch: Some(latch.clone()),
        proxy: true,
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    js(&c, "window.__streams = []; new MutationObserver(() => window.__streams.push(document.body.dataset.stream))
        .observe(document.body, {attributes: true, attributeFilter: ['data-stream']}); return 1").await;
    ask(&c, QUESTION).await;
    a_tool_call_done(&c).await;
    latch.arrived(2).await;
    let first = cut_and_reconnect(&c, &server, &id).await;
    latch.release(1);
    // A cursor past the question: the entries the page has are not sent again.
    let seq: u64 = first.split('.').next().unwrap().parse().unwrap();
    assert!(seq >= 2, "Last-Event-ID {first:?}");
    // Again, later in the same run, while the page still shows it running.
    wait_for(
        &c,
        "three finished tool calls",
        "return document.querySelectorAll('[data-call][data-state=done]').length >= 3",
    )
    .await;
    latch.arrived(3).await;
    let second = cut_and_reconnect(&c, &server, &id).await;
    latch.release(LET_THROUGH);
    let seq2: u64 = second.split('.').next().unwrap().parse().unwrap();
    assert!(seq2 > seq, "{first:?} then {second:?}");
    eprintln!("reconnected with Last-Event-ID {first} then {second}");
    wait_for(
        &c,
        "the final report",
        "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('West beat') \
        && document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    assert_one_turn(&c).await;
    assert_in_order(&js(&c, COMPONENTS).await);
    // Every tool result of the log, each shown once and done.
    let entries = server
        .agent
        .entries(&ba_storage::ConversationId::new(&id).unwrap())
        .await
        .unwrap();
    let tools = entries
        .iter()
        .filter(|e| e.role == ba_protocol::LogRole::Tool)
        .count();
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('[data-call][data-state=done]').length"
        )
        .await,
        json!(tools)
    );
    assert!(
        !js(&c, "return document.querySelector('#notice').hidden ? '' : document.querySelector('#notice').textContent")
            .await
            .as_str()
            .unwrap()
            .contains("refused"),
    );
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_retried_with_growing_waits_and_caught_up_once() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    // The run waits on its second model call until the page has been cut off.
    let latch = Latch::new(1);
    let server = Server::start(Options {
        latch: Some(latch.clone()),
        proxy: true,
        ..Options::default()
    })
    .await;
    let proxy = server.proxy.as_ref().unwrap();
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    a_tool_call_done(&c).await;
    latch.arrived(2).await;
    proxy.refuse(true);
    assert!(proxy.cut() >= 1, "the event stream was not open");
    // The page keeps trying, waiting longer each time.
    let start = std::time::Instant::now();
    let attempts = loop {
        let attempts = proxy.refused_event_requests(&id);
        if attempts.len() >= 3 {
            break attempts;
        }
        assert!(start.elapsed() < LIMIT, "the page stopped retrying");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let gaps: Vec<f64> = attempts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    eprintln!("refused attempts {:.2?} s apart", gaps);
    // The page waits 0.5 s · 2^n before attempt n (the first refused one is attempt 1): a timer
    // never fires early, so each gap is at least its wait, whatever the machine's load; a slow
    // machine only makes gaps longer, so the upper bound is loose.
    let waits = [1.0, 2.0];
    assert!(
        gaps.iter().zip(waits).all(|(&g, w)| g >= w * 0.95),
        "the wait does not grow as 1 s, 2 s: {gaps:?}"
    );
    assert!(gaps.iter().all(|&g| g <= 30.0), "{gaps:?}");
    latch.release(LET_THROUGH);
    // Meanwhile the run goes on without the page, to its end; the page catches up once.
    let status = loop {
        let conv = server
            .api(
                reqwest::Method::GET,
                &format!("/api/v1/conversations/{id}"),
                None,
            )
            .await;
        if conv["status"] != "running" {
            break conv["status"].clone();
        }
        assert!(start.elapsed() < LIMIT, "the run did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, "idle");
    proxy.refuse(false);
    wait_for(
        &c,
        "the final report",
        "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('West beat') \
        && document.querySelector('#send').textContent === 'Send' && document.body.dataset.stream === 'open'",
    )
    .await;
    assert_one_turn(&c).await;
    assert_in_order(&js(&c, COMPONENTS).await);
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconnect_backoff_grows_and_stops_at_ten_seconds() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    open_new(&c, &server).await;
    let delays = js(
        &c,
        "return [...Array(40).keys(), 1000, 1e6].map(window.baAgentPage.backoff)",
    )
    .await;
    let delays: Vec<f64> = delays
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(delays[0], 500.0);
    assert!(
        delays.windows(2).all(|w| w[0] <= w[1]),
        "the wait shrinks: {delays:?}"
    );
    assert!(
        delays.windows(2).take(5).all(|w| w[0] < w[1]),
        "the wait does not grow: {delays:?}"
    );
    assert!(
        delays.iter().all(|&d| d > 0.0 && d <= 10_000.0),
        "{delays:?}"
    );
    assert_eq!(delays.last(), Some(&10_000.0));
    c.close().await.unwrap();
}

const STREAMED: &str = "Plan it out loud.";
/// A structured answer with its analysis first, as models write it, with an escaped quote and
/// an escaped accent for the page's repair of partial JSON.
const ANSWER: &str = r#"{"task_analysis": "Reading the \"quarterly\" figures r\u00e9gion by region first.", "execution_plan": "R1: read the figures; R2: compare them; R3: report", "current_round": 1, "action": {"type": "complete", "content": "All **done**."}}"#;

fn streamed_turn() -> Value {
    json!({"expect": {"role": "user", "text": STREAMED}, "response": {"message": {"role": "assistant",
        "content": [{"type": "text", "text": ANSWER}]}, "stop_reason": "end_turn"}})
}

/// Characters of [`ANSWER`] up to the end of `marker`.
fn upto(marker: &str) -> usize {
    let at = ANSWER.find(marker).unwrap() + marker.len();
    ANSWER[..at].chars().count()
}

/// The texts of the plan boxes and whether raw JSON shows anywhere in the transcript.
const BOXES: &str = "const t = (s) => { const e = document.querySelector(s); return e ? e.innerText.trim() : null; }; \
    return {analysis: t('[data-component=task_analysis] p:last-of-type'), \
    plan: [...document.querySelectorAll('[data-component=execution_plan] li')].map(e => e.textContent), \
    report: t('[data-component=final_report]'), \
    raw: /\\{\\s*\"|\"(task_analysis|execution_plan|action)\"|\\\\u00/.test(document.querySelector('#transcript').innerText)}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_boxes_fill_from_the_partial_json() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let gate = Arc::new(Semaphore::new(0));
    let server = Server::start(Options {
        extra_turns: vec![streamed_turn()],
        gate: Some(Arc::clone(&gate)),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    js(&c, "window.__raw = ''; new MutationObserver(() => { const t = document.querySelector('#transcript').innerText; \
        if (/\\{\\s*\"|\"(task_analysis|execution_plan|action)\"/.test(t)) window.__raw = t; })
        .observe(document.querySelector('#transcript'), {subtree: true, childList: true, characterData: true}); return 1").await;
    ask(&c, STREAMED).await;
    // (expected analysis, expected plan steps) after the answer streamed up to a marker.
    let stages: [(&str, &str, Value); 4] = [
        (r#"\"quar"#, "Reading the \"quar", json!([])),
        // Cut inside `\u00e9`: the incomplete escape is left out, never shown.
        (
            r#"figures r\u00"#,
            "Reading the \"quarterly\" figures r",
            json!([]),
        ),
        (
            "R2: comp",
            "Reading the \"quarterly\" figures région by region first.",
            json!(["R1: read the figures", "R2: comp"]),
        ),
        (
            "R3: report\"",
            "Reading the \"quarterly\" figures région by region first.",
            json!(["R1: read the figures", "R2: compare them", "R3: report"]),
        ),
    ];
    let mut given = 0;
    for (marker, analysis, plan) in stages {
        let upto = upto(marker);
        gate.add_permits(upto - given);
        given = upto;
        let boxes = wait_for(
            &c,
            &format!("the boxes after {marker:?}"),
            &format!(
                "const b = (() => {{ {BOXES} }})(); \
                return b.analysis === {} && JSON.stringify(b.plan) === {} && b",
                json!(analysis),
                json!(plan.to_string())
            ),
        )
        .await;
        assert_eq!(boxes["raw"], false, "raw JSON after {marker:?}: {boxes}");
        assert!(
            boxes["report"].as_str().unwrap().starts_with("Working"),
            "{boxes}"
        );
        assert_eq!(
            js(&c, "return document.querySelector('#send').textContent").await,
            "Stop"
        );
    }
    screenshot(&c, "streaming-plan.png").await;
    gate.add_permits(ANSWER.chars().count());
    let boxes = wait_for(
        &c,
        "the final answer",
        &format!(
            "const b = (() => {{ {BOXES} }})(); return b.report === 'All done.' && \
            document.querySelector('#send').textContent === 'Send' && b"
        ),
    )
    .await;
    assert_eq!(
        boxes["analysis"],
        "Reading the \"quarterly\" figures région by region first."
    );
    assert_eq!(
        boxes["plan"],
        json!(["R1: read the figures", "R2: compare them", "R3: report"])
    );
    assert_eq!(boxes["raw"], false, "{boxes}");
    assert_eq!(
        js(&c, "return window.__raw").await,
        "",
        "raw JSON was shown"
    );
    assert_one_turn(&c).await;
    c.close().await.unwrap();
}
