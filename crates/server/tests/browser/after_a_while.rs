//! The page after a while of use: what it says while a run works and while a call waits, the
//! Edit buttons after a follow-up, the sidebar of many conversations and branches, a server
//! that stops, the cost of what a rewind took back, a reload, the meter before the first
//! question, and the token in the address bar.

use std::collections::BTreeMap;
use std::sync::Arc;

use ba_agent::ApprovalSettings;
use ba_protocol::ToolApproval;
use fantoccini::actions::{InputSource as _, WheelAction, WheelActions};
use serde_json::{Value, json};

use crate::harness::*;

const CHECK: &str = "Check the figures three times.";

/// Three rounds of calls, the third of which (`approve_me`) waits for approval, then a report.
fn three_checks() -> Vec<Value> {
    let tool = |id: &str| json!({"role": "tool", "tool_call_id": id});
    vec![
        call_turn(
            json!({"role": "user", "text": CHECK}),
            1,
            &[("check", "call_c1", json!({"n": 1}))],
        ),
        call_turn(tool("call_c1"), 2, &[("check", "call_c2", json!({"n": 2}))]),
        call_turn(
            tool("call_c2"),
            3,
            &[("approve_me", "call_c3", json!({"n": 3}))],
        ),
        final_turn_after("call_c3", "Checked three times."),
    ]
}

/// A server with [`three_checks`]; the approved call waits on `held` when there is one.
async fn checking_server(held: Option<Arc<Latch>>) -> Server {
    Server::start(Options {
        extra_turns: three_checks(),
        extra_tools: vec![
            Arc::new(Probe {
                name: "check",
                latch: None,
            }),
            Arc::new(Probe {
                name: "approve_me",
                latch: held,
            }),
        ],
        approvals: ApprovalSettings {
            tools: BTreeMap::from([("approve_me".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    })
    .await
}

const WAITING: &str = "return document.querySelector('#approvals [data-act=approve]')";

/// While the approved call of the third round runs (held on its latch), the page says round
/// 3 — the round that call belongs to — not round 1 of the run the decision started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_line_counts_the_rounds_of_the_question() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let held = Latch::new(0);
    let server = checking_server(Some(held.clone())).await;
    open_new(&c, &server).await;
    ask(&c, CHECK).await;
    wait_for(&c, "the waiting call", WAITING).await;
    click(&c, "#approvals [data-act=approve]").await;
    held.arrived(1).await;
    let shown = wait_for(
        &c,
        "the working line while the approved call runs",
        "const r = document.querySelector('[data-component=final_report].streaming'); \
        return r && document.querySelector('[data-call=call_c3][data-state=running]') && r.textContent",
    )
    .await;
    held.release(1);
    assert_eq!(shown, json!("Working… (round 3)"));
    wait_for(
        &c,
        "the report",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('Checked three times')",
    )
    .await;
    c.close().await.unwrap();
}

/// A call that waits for approval says so; the transcript never points at a Resume button the
/// page does not show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_says_it_waits_for_approval() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = checking_server(None).await;
    open_new(&c, &server).await;
    ask(&c, CHECK).await;
    wait_for(&c, "the waiting call", WAITING).await;
    let line = wait_for(
        &c,
        "the waiting call's line in the transcript",
        "const l = document.querySelector('[data-call=call_c3]'); return l && l.textContent",
    )
    .await;
    assert_eq!(line, "‖ approve_me waits for your approval (below)");
    let resume = js(
        &c,
        "return [document.body.innerText.includes('Resume'), !document.querySelector('#resume').hidden]",
    )
    .await;
    assert_eq!(
        resume[0], resume[1],
        "the page names Resume exactly when it shows the button: {resume}"
    );
    c.close().await.unwrap();
}

/// After a follow-up question is answered, the first question still has its Edit button — no
/// reload needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_question_keeps_its_edit_button_after_a_follow_up() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        fallback: Some("Noted.".into()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    for (n, q) in ["Which region grew fastest?", "And which fell?"]
        .iter()
        .enumerate()
    {
        ask(&c, q).await;
        wait_for(
            &c,
            "the answer",
            &format!(
                "return document.querySelectorAll('[data-component=final_report]').length === {} && \
                !document.querySelector('.report.streaming') && document.querySelector('#send').textContent === 'Send'",
                n + 1
            ),
        )
        .await;
    }
    let shown = wait_for(
        &c,
        "an Edit button on both questions",
        "const b = [...document.querySelectorAll('.turn .user-tools .edit')].filter((e) => e.offsetParent); \
        return b.length === 2 && b.length",
    )
    .await;
    assert_eq!(shown, 2);
    c.close().await.unwrap();
}

/// The sidebar lists the most recently changed conversation first, and branches of one
/// question (same title: the parent's) read apart by their own edited question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidebar_is_in_recency_order_and_tells_branches_apart() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        fallback: Some("Noted.".into()),
        ..Options::default()
    })
    .await;
    let root = server.conversation().await;
    server
        .run_to_end(&root, "Which region grew fastest this year?")
        .await;
    let mut forks = Vec::new();
    for q in [
        "Which region grew fastest in Q3?",
        "Which region grew fastest by units?",
        "Which region grew fastest against target?",
    ] {
        let f = server
            .api(
                reqwest::Method::POST,
                &format!("/api/v1/conversations/{root}/fork"),
                Some(json!({"at_seq": 0})),
            )
            .await;
        let id = f["id"].as_str().unwrap().to_owned();
        server.run_to_end(&id, q).await;
        forks.push(id);
    }
    let other = server.conversation().await;
    server.run_to_end(&other, "How many rows?").await;
    // The first conversation changes last: it comes first.
    server.run_to_end(&root, "And the slowest?").await;
    let mut expected = vec![root.clone(), other.clone()];
    expected.extend(forks.iter().rev().cloned());
    goto(&c, &server, &root).await;
    loaded(&c).await;
    let order = wait_for(
        &c,
        "five conversations, each labelled",
        "const li = [...document.querySelectorAll('#conv-list li')]; \
        return li.length === 5 && li.every((l) => !l.querySelector('.edited') || l.querySelector('.edited').textContent.includes('?')) && \
        li.map((l) => l.dataset.id)",
    )
    .await;
    assert_eq!(order, json!(expected));
    let labels = js(
        &c,
        "return [...document.querySelectorAll('#conv-list li .open')].map((b) => b.textContent)",
    )
    .await;
    let labels: Vec<&str> = labels
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 5, "labels read alike: {labels:?}");
    assert!(
        labels[2].contains("against target"),
        "the newest branch shows its own question: {labels:?}"
    );
    screenshot(&c, "sidebar-branches.png").await;
    c.close().await.unwrap();
}

/// A server that stops answering (every connection refused) is shown at once, and the page
/// says so no more when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_shown_until_it_is_back() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        proxy: true,
        ..Options::default()
    })
    .await;
    let id = server.conversation().await;
    goto(&c, &server, &id).await;
    loaded(&c).await;
    assert!(
        js(&c, "return document.querySelector('#offline').hidden")
            .await
            .as_bool()
            .unwrap()
    );
    let proxy = server.proxy.as_ref().unwrap();
    proxy.refuse(true);
    proxy.cut();
    let said = wait_for(
        &c,
        "the page to say the server does not answer",
        "const o = document.querySelector('#offline'); \
        return o && !o.hidden && o.getAttribute('role') === 'alert' && o.offsetHeight > 0 && o.textContent",
    )
    .await;
    assert!(said.as_str().unwrap().contains("does not answer"), "{said}");
    screenshot(&c, "server-stopped.png").await;
    proxy.refuse(false);
    wait_for(
        &c,
        "the notice to go when the server is back",
        "return document.querySelector('#offline').hidden && document.body.dataset.stream === 'open'",
    )
    .await;
    c.close().await.unwrap();
}

/// The sidebar's cost line counts the calls of the history; what a rewind took back is named
/// apart, at once and after a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_line_leaves_out_what_a_rewind_took_back() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = server.conversation().await;
    let calls = || async {
        server
            .api(
                reqwest::Method::GET,
                &format!("/api/v1/conversations/{id}/report"),
                None,
            )
            .await["model_calls"]
            .as_u64()
            .unwrap()
    };
    server.run_to_end(&id, QUESTION).await;
    let kept = calls().await;
    let first = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}"),
            None,
        )
        .await["last_seq"]
        .as_u64()
        .unwrap();
    server.run_to_end(&id, CHART_QUESTION).await;
    let all = calls().await;
    goto(&c, &server, &id).await;
    loaded(&c).await;
    let line =
        "const p = document.querySelector('#conv-cost'); return p && !p.hidden && p.textContent";
    let before = wait_for(&c, "the cost line", line).await;
    assert!(
        before
            .as_str()
            .unwrap()
            .contains(&format!("· {all} model calls")),
        "{before}"
    );
    server
        .api(
            reqwest::Method::POST,
            &format!("/api/v1/conversations/{id}/rewind"),
            Some(json!({ "to_seq": first })),
        )
        .await;
    let expected = format!(
        "· {kept} model calls; a rewind took back {} more model calls",
        all - kept
    );
    let after = wait_for(
        &c,
        "the cost line after the rewind",
        &format!(
            "{line}.includes({}) && p.textContent",
            Value::String(expected.clone())
        ),
    )
    .await;
    c.refresh().await.unwrap();
    loaded(&c).await;
    let reloaded = wait_for(&c, "the cost line after a reload", line).await;
    assert_eq!(after, reloaded);
    c.close().await.unwrap();
}

/// Scrolls the transcript with the mouse wheel, as a person does, and waits for the scroll to
/// end (`scrollend`). The wheel turns over the transcript's own margin: over a report's frame
/// the scroll would first go to the frame's document.
async fn wheel(c: &fantoccini::Client, dy: i64) {
    let origin = js(
        c,
        "const t = document.querySelector('#transcript'); window.__scrolled = false; \
        t.addEventListener('scrollend', () => { window.__scrolled = true; }, {once: true}); \
        const r = t.getBoundingClientRect(); \
        return [Math.round(r.left + 4), Math.round(r.top + r.height / 2)]",
    )
    .await;
    let (x, y) = (origin[0].as_i64().unwrap(), origin[1].as_i64().unwrap());
    let actions = WheelActions::new("wheel".into()).then(WheelAction::Scroll {
        duration: None,
        x,
        y,
        delta_x: 0,
        delta_y: dy,
    });
    c.perform_actions(actions).await.unwrap();
    wait_for(c, "the end of the scroll", "return window.__scrolled").await;
}

/// Everything of the page's two answers has come: code blocks filled, the HTML report's frame
/// sized. Returns the transcript's `[scrollTop, distance from the bottom]`.
const SETTLED: &str = "const t = document.querySelector('#transcript'); \
    const code = [...document.querySelectorAll('figure.code-block code')]; \
    const frame = document.querySelector('.report iframe'); \
    return code.length > 0 && code.every((c) => !c.textContent.includes('Loading')) && frame && frame.style.height && \
    [t.scrollTop, Math.round(t.scrollHeight - t.scrollTop - t.clientHeight)]";

/// A reload lands where the person was reading: at the end when they were at the end, and at
/// the same place in the first answer when they had scrolled up to it — not wherever the
/// report happened to be when the code and the charts came in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_lands_where_the_person_was() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = server.conversation().await;
    server.run_to_end(&id, QUESTION).await;
    server.run_to_end(&id, CHART_QUESTION).await;
    goto(&c, &server, &id).await;
    loaded(&c).await;
    wait_for(&c, "the answers, complete", SETTLED).await;
    c.refresh().await.unwrap();
    loaded(&c).await;
    let end = wait_for(&c, "the answers, complete", SETTLED).await;
    assert_eq!(end[1], 0, "a reload at the end lands at the end: {end}");

    // Up to the first answer's code, with the wheel; then a reload.
    js(
        &c,
        "window.__target = document.querySelector('figure.code-block'); return 1",
    )
    .await;
    for _ in 0..60 {
        let off = js(
            &c,
            "return Math.round(window.__target.getBoundingClientRect().top - document.querySelector('#transcript').getBoundingClientRect().top)",
        )
        .await
        .as_i64()
        .unwrap();
        if off >= 0 {
            break;
        }
        wheel(&c, (off - 40).max(-400)).await;
    }
    let spot = "const t = document.querySelector('#transcript').getBoundingClientRect().top; \
        const a = [...document.querySelectorAll('article.turn')].find((x) => x.getBoundingClientRect().bottom > t + 1); \
        return a && [a.dataset.seq, Math.round(t - a.getBoundingClientRect().top)]";
    let was = js(&c, spot).await;
    assert_ne!(js(&c, SETTLED).await[1], 0, "scrolled up: {was}");
    c.refresh().await.unwrap();
    loaded(&c).await;
    wait_for(&c, "the answers, complete", SETTLED).await;
    let back = wait_for(
        &c,
        "the same place after the reload",
        &format!("const s = (() => {{ {spot} }})(); return s && s[0] === {} && Math.abs(s[1] - {}) <= 2 && s", was[0], was[1]),
    )
    .await;
    assert_eq!(back[0], was[0]);
    c.close().await.unwrap();
}

/// Before the first question the meter says nothing was sent, not "context 0 / 0".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_meter_says_nothing_was_sent_before_the_first_question() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    goto(&c, &server, "").await;
    let shown = wait_for(
        &c,
        "the page",
        "return document.body.dataset.echarts && [document.querySelector('#meter-text').textContent, \
        document.querySelector('#meter').getAttribute('aria-label')]",
    )
    .await;
    assert_eq!(shown[0], "context: nothing sent yet");
    assert!(!shown[1].as_str().unwrap().contains("0 of 0"), "{shown}");
    c.close().await.unwrap();
}

/// A token in an old link's address is taken out of the address bar at once and not used
/// (the page asks for it); the token pasted into the sign-in form is kept by the tab, so a
/// reload and a switch of conversation still work, and no request URL carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_leaves_the_address_bar() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let other = server.conversation().await;
    let id = server.conversation().await;
    c.goto(&format!("{}#token={TOKEN}", server.url(&id)))
        .await
        .unwrap();
    wait_for(
        &c,
        "the sign-in form",
        "return document.body.dataset.signin === 'needed'",
    )
    .await;
    let url = js(&c, "return location.href").await;
    assert!(!url.as_str().unwrap().contains(TOKEN), "{url}");
    assert_eq!(
        js(&c, "return sessionStorage.getItem('ba-token')").await,
        Value::Null
    );
    sign_in(&c, TOKEN).await;
    loaded(&c).await;
    let url = js(&c, "return location.href").await;
    assert!(!url.as_str().unwrap().contains(TOKEN), "{url}");
    assert!(url.as_str().unwrap().contains(&id), "{url}");
    assert_eq!(
        js(&c, "return sessionStorage.getItem('ba-token')").await,
        TOKEN
    );
    c.refresh().await.unwrap();
    loaded(&c).await;
    click(&c, &format!("#conv-list li[data-id=\"{other}\"] .open")).await;
    wait_for(
        &c,
        "the other conversation",
        &format!("return new URL(location.href).searchParams.get('conversation') === '{other}' && document.body.dataset.stream === 'open'"),
    )
    .await;
    let leaks = js(
        &c,
        &format!(
            "return [location.href, ...performance.getEntriesByType('resource').map((r) => r.name), \
            ...performance.getEntriesByType('navigation').map((r) => r.name)].filter((u) => u.includes('{TOKEN}'))"
        ),
    )
    .await;
    assert_eq!(leaks, json!([]), "the token in a URL");
    c.close().await.unwrap();
}
