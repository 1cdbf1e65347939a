//! Model output is hostile: an HTML report that tries to reach the page or the API is stopped
//! by the sandbox and the policies. And the page stays quick: 200 turns render within a bound
//! (the time itself is written to the test artifacts).

use ba_protocol::{LogEntry, LogRole};
use ba_storage::ConversationId;
use serde_json::json;

use crate::harness::*;

const PROBE: &str = "Probe the page.";
const HOSTILE: &str = r#"<div id="out">pending</div><script>
var r = [];
try { r.push('parent:' + parent.document.title); } catch (e) { r.push('parent:blocked'); }
try { r.push('hash:' + top.location.hash); } catch (e) { r.push('hash:blocked'); }
try { localStorage.setItem('x', '1'); r.push('storage:open'); } catch (e) { r.push('storage:blocked'); }
try { r.push('token:' + sessionStorage.getItem('ba-token')); } catch (e) { r.push('token:blocked'); }
try { top.location = 'https://example.invalid/'; r.push('navigate:tried'); } catch (e) { r.push('navigate:blocked'); }
function done(x) { r.push(x); document.getElementById('out').textContent = r.join(' '); }
try {
  fetch('/api/v1/conversations', {headers: {Authorization: 'Bearer guess'}})
    .then(function (res) { done('api:' + res.status); }, function () { done('api:blocked'); });
} catch (e) { done('api:blocked'); }
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_html_cannot_reach_the_page_or_the_api() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        extra_turns: vec![final_turn(PROBE, HOSTILE)],
        ..Options::default()
    })
    .await;
    let url = server.shown_url(&open_new(&c, &server).await);
    ask(&c, PROBE).await;
    enter_report_frame(&c).await;
    let out = wait_for(&c, "the probe's result", "const o = document.getElementById('out'); return o && o.textContent.includes('api:') && o.textContent").await;
    let out = out.as_str().unwrap().to_owned();
    eprintln!("probe: {out}");
    c.enter_parent_frame().await.unwrap();
    for blocked in [
        "parent:blocked",
        "hash:blocked",
        "storage:blocked",
        "token:blocked",
        "navigate:blocked",
        "api:blocked",
    ] {
        assert!(out.contains(blocked), "{blocked} expected in {out:?}");
    }
    // The navigation was refused when it was tried (`navigate:blocked`: the browser threw), so
    // there is none to wait for.
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        url,
        "the report navigated the page"
    );
    c.close().await.unwrap();
}

const CLICK: &str = "Make me a report with a button.";
/// Inline handlers, as models write them: they run (with the sandbox's rights, not the
/// page's), `this` and `event` as in a browser, `return false` cancelling the default.
const HANDLERS: &str = r##"<body onload="document.getElementById('out').dataset.loaded = 'yes'">
<div id="out">none</div>
<button id="b" onclick="var r = [this.id, event.type], out = document.getElementById('out');
try { r.push('parent:' + parent.document.title); } catch (e) { r.push('parent:blocked'); }
try { r.push('token:' + sessionStorage.getItem('ba-token')); } catch (e) { r.push('token:blocked'); }
function done(x) { r.push(x); out.textContent = r.join(' '); }
try { fetch('/api/v1/conversations').then(function () { done('api:open'); }, function () { done('api:blocked'); }); }
catch (e) { done('api:blocked'); }">Go</button>
<a id="a" href="#moved" onclick="document.getElementById('out').textContent += ' link'; return false">Link</a>
<button id="bad" onclick="this.textContent = 'x' })(); (function () {">Broken</button>
<script>document.getElementById('out').dataset.script = 'ran';</script></body>"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_handlers_in_model_html_run_inside_the_sandbox_only() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        extra_turns: vec![final_turn(CLICK, HANDLERS)],
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    ask(&c, CLICK).await;
    enter_report_frame(&c).await;
    wait_for(
        &c,
        "the report's script and its body's onload",
        "const o = document.getElementById('out'); return o && o.dataset.script === 'ran' && o.dataset.loaded === 'yes'",
    )
    .await;
    click(&c, "#b").await;
    let out = wait_for(
        &c,
        "the click handler's result",
        "const t = document.getElementById('out').textContent; return t.includes('api:') && t",
    )
    .await;
    assert_eq!(
        out, "b click parent:blocked token:blocked api:blocked",
        "the handler ran with other rights"
    );
    click(&c, "#a").await;
    wait_for(
        &c,
        "the link's handler",
        "return document.getElementById('out').textContent.endsWith(' link')",
    )
    .await;
    assert_eq!(
        js(&c, "return location.hash").await,
        "",
        "return false did not cancel"
    );
    // A handler that breaks out of its wrapper only breaks itself.
    click(&c, "#bad").await;
    assert_eq!(
        js(&c, "return document.getElementById('bad').textContent").await,
        "Broken"
    );
    c.enter_parent_frame().await.unwrap();
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        server.shown_url(&id),
        "the report navigated the page"
    );
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_turns_render_within_a_bound_a_slow_machine_meets() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = server.conversation().await;
    let conv = ConversationId::new(&id).unwrap();
    let mut entries = Vec::new();
    for i in 0..200 {
        entries.push(
            LogEntry::new(format!("u{i}"), LogRole::User, "2026-01-01T00:00:00Z")
                .with_text(format!("Question {i}: how did region {} do?", i % 5)),
        );
        let api = json!({"response": format!("**Answer {i}.** Sales were *{}* in the quarter.\n\n| a | b |\n|---|---|\n| 1 | 2 |", i * 1000),
            "metadata": {"action_type": "complete", "status": "complete", "content_type": "markdown", "contains_html": false,
                "task_analysis": format!("Turn {i}: read the figures."), "execution_plan": "R1: query; R2: report", "current_round": 2,
                "recommended_questions": ["And the next quarter?", "By product?"]}});
        let mut a = LogEntry::new(format!("a{i}"), LogRole::Assistant, "2026-01-01T00:00:01Z")
            .with_text(format!("Answer {i}."));
        a.extra.insert("api_response".into(), api);
        a.extra.insert("usage".into(), json!({"input_tokens": 900, "output_tokens": 120, "cache_read_tokens": 0, "cache_write_tokens": 0}));
        entries.push(a);
    }
    server
        .agent
        .store()
        .append_batch(&conv, &entries, None)
        .await
        .unwrap();
    goto(&c, &server, &id).await;
    let ms = wait_for(
        &c,
        "the transcript",
        "return document.body.dataset.renderMs",
    )
    .await;
    let ms: f64 = ms.as_str().unwrap().parse().unwrap();
    let turns = js(&c, "return document.querySelectorAll('.turn').length").await;
    assert_eq!(turns, 200);
    let components = js(
        &c,
        "return document.querySelectorAll('[data-component]').length",
    )
    .await;
    eprintln!("200 turns ({components} components) fetched and rendered in {ms} ms");
    std::fs::write(artifacts().join("render-200.txt"), format!("{ms}\n")).unwrap();
    // The time is the benchmark's (written above for the record); the test holds a bound ten
    // times the one the page is built for, which a loaded machine still meets.
    assert!(ms < 10_000.0, "200 turns took {ms} ms");
    c.close().await.unwrap();
}
