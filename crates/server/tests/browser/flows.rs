//! What a business analyst does all day: ask, read the answer in the order of its seven components, click a
//! recommended question, chart, upload, stop and continue, reload mid-run.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_question_is_answered_with_its_components_in_order() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    open_new(&c, &server).await;
    screenshot(&c, "empty.png").await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the final report",
        "return document.querySelector('.report strong') && \
        document.querySelector('.report').textContent.includes('West beat')",
    )
    .await;
    wait_for(
        &c,
        "the code block's code",
        "const f = document.querySelector('.report figure.code-block code'); \
        return f && f.textContent.includes('import json') && f.querySelector('.tk-kw')",
    )
    .await;
    let found = js(&c, COMPONENTS).await;
    assert_in_order(&found);
    for needed in [
        "task_analysis",
        "execution_plan",
        "tool_call_status",
        "final_report",
        "code_blocks",
        "recommended_questions",
    ] {
        assert!(
            found.as_array().unwrap().iter().any(|v| v == needed),
            "{needed} missing: {found:?}"
        );
    }
    // Every tool call done, with its duration; usage under the answer.
    let states = js(
        &c,
        "return [...document.querySelectorAll('[data-call]')].map(e => e.dataset.state)",
    )
    .await;
    assert!(states.as_array().unwrap().len() >= 5, "{states:?}");
    assert!(
        states.as_array().unwrap().iter().all(|s| s == "done"),
        "{states:?}"
    );
    assert!(
        js(&c, "return document.querySelector('.usage').textContent")
            .await
            .as_str()
            .unwrap()
            .contains("Tokens:")
    );
    // No raw JSON of the structured answer anywhere.
    assert!(
        !js(&c, "return document.querySelector('#transcript').innerText")
            .await
            .as_str()
            .unwrap()
            .contains("\"action\"")
    );
    screenshot(&c, "answer.png").await;
    js(
        &c,
        "document.querySelector('[data-component=final_report]').scrollIntoView(); return 1",
    )
    .await;
    screenshot(&c, "answer-report.png").await;

    // A recommended question fills the input.
    let button = c
        .find(Locator::Css(
            "[data-component=recommended_questions] button",
        ))
        .await
        .unwrap();
    let question = button.text().await.unwrap();
    button.click().await.unwrap();
    let value = js(&c, "return document.querySelector('#input').value").await;
    assert_eq!(value.as_str().unwrap(), question);
    assert_eq!(js(&c, "return document.activeElement.id").await, "input");

    // (The file input is reached through its Upload button, which opens it.)
    // Accessibility: every control is reachable by keyboard and every input has a label.
    let bad = js(
        &c,
        "return [...document.querySelectorAll('button, input, textarea, select, summary, a[href]')]
        .filter(e => e.id !== 'file' && e.offsetParent !== null && e.tabIndex < 0).map(e => e.outerHTML.slice(0, 80))",
    )
    .await;
    assert_eq!(bad, Value::Array(vec![]), "controls out of the tab order");
    let unlabelled = js(&c, "return [...document.querySelectorAll('input, textarea, select')]
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.outerHTML.slice(0, 80))").await;
    assert_eq!(unlabelled, Value::Array(vec![]), "inputs without a label");
    // Tab from the message box reaches the buttons of the composer.
    c.find(Locator::Css("#input"))
        .await
        .unwrap()
        .send_keys("\u{E004}")
        .await
        .unwrap();
    assert_eq!(js(&c, "return document.activeElement.id").await, "upload");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_draws_its_chart_in_the_sandbox() {
    let _one = BROWSER.lock().await;
    if !assets_dir().join(ba_server::ECHARTS_FILE).is_file() {
        ba_testkit::missing(&format!(
            "no {} in {} (run `cargo xtask assets`)",
            ba_server::ECHARTS_FILE,
            assets_dir().display()
        ));
        return;
    }
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    open_new(&c, &server).await;
    ask(&c, CHART_QUESTION).await;
    enter_report_frame(&c).await;
    let painted = wait_for(
        &c,
        "a painted canvas",
        "const c = document.querySelector('canvas'); if (!c) return 0; \
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0; \
        for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++; return n > 2000 ? n : 0",
    )
    .await;
    eprintln!("chart: {painted} painted pixels");
    c.enter_parent_frame().await.unwrap();
    assert_in_order(&js(&c, COMPONENTS).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.execute(
        "document.querySelector('[data-component=final_report]').scrollIntoView()",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&c, "chart.png").await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_becomes_a_file_ref() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        fallback: Some("Your file: <file_ref>upload_001</file_ref>".into()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    js(&c, CATCH_DOWNLOADS).await;
    // Dropped on the composer, as a person drags a file in.
    js(&c, "const dt = new DataTransfer(); dt.items.add(new File(['region,amount\\nWest,1\\n'], 'notes.csv', {type: 'text/csv'})); \
        document.querySelector('#composer').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true})); return 1").await;
    let upload = wait_for(
        &c,
        "the attachment",
        "const a = document.querySelector('[data-upload-id]'); return a && a.dataset.uploadId",
    )
    .await;
    assert_eq!(upload, "upload_001");
    ask(&c, "What is in my file?").await;
    wait_for(
        &c,
        "the file_ref in the question",
        "return document.querySelector('.user .file-ref[data-file-ref=upload_001]')",
    )
    .await;
    wait_for(
        &c,
        "the file_ref in the answer",
        "return document.querySelector('.report .file-ref[data-file-ref=upload_001]')",
    )
    .await;
    assert!(
        js(
            &c,
            "return document.querySelector('.user .file-ref').parentNode.textContent"
        )
        .await
        .as_str()
        .unwrap()
        .contains("notes.csv")
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('[data-upload-id]').length"
        )
        .await,
        0
    );
    // The answer's reference shows the upload's own name (the server resolves it among the
    // conversation's uploads), and a click downloads the file under that name.
    let shown = js(
        &c,
        "return document.querySelector('.report .file-ref').textContent",
    )
    .await;
    assert!(
        shown.as_str().unwrap().contains("notes.csv"),
        "the reference shows {shown}"
    );
    let got = download(&c, ".report .file-ref").await;
    assert_eq!(got["name"], "notes.csv");
    assert_eq!(got["text"], "region,amount\nWest,1\n");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_then_continue() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    // The first model call is held until the Stop is clicked: the run is surely going.
    let latch = Latch::new(0);
    let server = Server::start(Options {
        latch: Some(latch.clone()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(&c, "Send to become Stop", "return document.querySelector('#send').textContent === 'Stop' && document.querySelector('.user')").await;
    latch.arrived(1).await;
    click(&c, "#send").await;
    wait_for(&c, "Continue", "return !document.querySelector('#continue').hidden && document.querySelector('#send').textContent === 'Send'").await;
    screenshot(&c, "stopped.png").await;
    latch.release(LET_THROUGH);
    click(&c, "#continue").await;
    wait_for(&c, "the final report", "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('West beat')").await;
    assert_eq!(
        js(&c, "return document.querySelectorAll('.turn').length").await,
        1
    );
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('[data-component=final_report]').length"
        )
        .await,
        1
    );
    assert!(
        js(&c, "return document.querySelector('#continue').hidden")
            .await
            .as_bool()
            .unwrap()
    );
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_mid_run_resumes_with_no_duplicate() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    // The first model call passes; the second waits until the page is back, so the run is
    // still going when it reloads.
    let latch = Latch::new(1);
    let server = Server::start(Options {
        latch: Some(latch.clone()),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    a_tool_call_done(&c).await;
    latch.arrived(2).await;
    // A draft typed meanwhile survives the reload.
    c.find(Locator::Css("#input"))
        .await
        .unwrap()
        .send_keys("a draft")
        .await
        .unwrap();
    c.refresh().await.unwrap();
    loaded(&c).await;
    assert_eq!(
        js(&c, "return document.querySelector('#input').value").await,
        "a draft"
    );
    assert_eq!(
        js(&c, "return document.querySelector('#send').textContent").await,
        "Stop"
    );
    latch.release(LET_THROUGH);
    wait_for(&c, "the final report", "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('West beat')").await;
    // Every frame of the run is on the page once its end is: a duplicate would show by now.
    wait_for(
        &c,
        "the run's end on the page",
        "return document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    assert_one_turn(&c).await;
    assert_in_order(&js(&c, COMPONENTS).await);
    c.close().await.unwrap();
}

pub const FULL: &str = "Show me every part of an answer.";

/// A question answered in two rounds with every component of an answer: a tool call, then a report
/// with a code block, recommended questions and a download link.
pub fn full_answer() -> Vec<Value> {
    let call = serde_json::json!({"task_analysis": "Count the rows first.", "execution_plan": "R1: count; R2: report",
        "current_round": 1, "action": {"type": "tool_call", "content": [{"tool_name": "query_database",
        "tool_call_id": "call_full", "arguments": {"query": "SELECT COUNT(*) AS n FROM sales"}}]}});
    let done = serde_json::json!({"task_analysis": "The count is in.", "execution_plan": "R1: count; R2: report",
        "current_round": 2, "action": {"type": "complete",
        "content": "The table has **all** its rows.\n\n<code_ref>code_full</code_ref>\n\nDone.",
        "recommended_questions": ["By region?"], "download_links": ["code_full"],
        "code_blocks": [{"code_id": "code_full", "language": "sql", "code": "SELECT COUNT(*) AS n\nFROM sales; -- all rows",
            "description": "Row count"}]}});
    let turn = |expect: Value, body: &Value| {
        serde_json::json!({"expect": expect, "response": {"message": {"role": "assistant",
        "content": [{"type": "text", "text": body.to_string()}]}, "stop_reason": "end_turn"}})
    };
    vec![
        turn(serde_json::json!({"role": "user", "text": FULL}), &call),
        turn(
            serde_json::json!({"role": "tool", "tool_call_id": "call_full"}),
            &done,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_the_sidebar_and_the_meter() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    // The model waits until the sidebar has shown the run going.
    let latch = Latch::new(0);
    let server = Server::start(Options {
        extra_turns: full_answer(),
        latch: Some(latch.clone()),
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    // Raw JSON of a structured answer must never show, not even while it streams.
    js(&c, "window.__raw = false; new MutationObserver(() => { if (/\"(task_analysis|action)\"/.test(document.querySelector('#transcript').innerText)) window.__raw = true; })
        .observe(document.querySelector('#transcript'), {subtree: true, childList: true, characterData: true}); return 1").await;
    ask(&c, FULL).await;
    wait_for(
        &c,
        "the running badge",
        "return document.querySelector('#conv-list .badge.running')",
    )
    .await;
    latch.release(LET_THROUGH);
    wait_for(
        &c,
        "the download link",
        "return document.querySelector('[data-component=download_links] button')",
    )
    .await;
    let found = js(&c, COMPONENTS).await;
    assert_eq!(
        found,
        serde_json::json!(ORDER),
        "the seven components in the order of its seven components, then export and cost"
    );
    assert_eq!(
        js(&c, "return window.__raw").await,
        false,
        "raw JSON was shown"
    );
    wait_for(
        &c,
        "the highlighted SQL",
        "return document.querySelector('.report figure.code-block .tk-com')",
    )
    .await;

    // The context meter: figures from the stream; a click says what the model sees.
    let meter = js(
        &c,
        "return document.querySelector('#meter-text').textContent",
    )
    .await;
    assert!(meter.as_str().unwrap().contains("/ 5,500"), "{meter}");
    click(&c, "#meter").await;
    let said = wait_for(
        &c,
        "the context dialog",
        "const d = document.querySelector('#context-dialog'); \
        return d.open && !d.textContent.includes('Loading') && d.textContent",
    )
    .await;
    let said = said.as_str().unwrap();
    assert!(said.contains("The last model call used"), "{said}");
    // It reads the record of the last call: the system prompt it sent and the tools.
    assert!(
        said.contains("Nothing is left out") || said.contains("no longer sees"),
        "{said}"
    );
    assert!(said.contains("sent with the last call"), "{said}");
    click(&c, "#context-dialog button").await;

    // Mode switch, rename and delete from the sidebar.
    click(&c, "#mode input[value=run]").await;
    wait_for(&c, "the mode in the list", "return [...document.querySelectorAll('#conv-list .meta')].some(e => e.textContent === 'run')").await;
    click(&c, "#conv-list button[aria-label^=Rename]").await;
    let title = c.find(Locator::Css("#conv-list input")).await.unwrap();
    title.send_keys("Row counts\u{E007}").await.unwrap();
    wait_for(
        &c,
        "the new title",
        "return document.querySelector('#conv-title').textContent === 'Row counts' && \
        document.querySelector('#conv-list .open').textContent === 'Row counts'",
    )
    .await;
    let meta: Value = reqwest::Client::new()
        .get(format!("http://{}/api/v1/conversations/{id}", server.addr))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (meta["title"].as_str(), meta["mode"].as_str()),
        (Some("Row counts"), Some("run"))
    );
    let delete = c
        .find(Locator::Css("#conv-list button[aria-label^=Delete]"))
        .await
        .unwrap();
    delete.click().await.unwrap();
    assert_eq!(delete.text().await.unwrap(), "Really delete?");
    delete.click().await.unwrap();
    wait_for(&c, "the list to empty", "return document.querySelectorAll('#conv-list li').length === 0 && !location.search.includes('conversation')").await;
    c.close().await.unwrap();
}

/// A run can end before the request that started it has answered (a loaded machine, a slow
/// proxy): the page hears `finished` on its stream first. Forced here by holding the answer
/// to `POST …/runs` until the page has handled that run's `finished`; the page must not then
/// take the run for one in flight (a Stop button forever, no way to ask again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_before_its_request_answers_leaves_the_page_ready() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    open_new(&c, &server).await;
    js(
        &c,
        "const orig = window.fetch;
        window.fetch = async (url, opts) => {
          const r = await orig(url, opts);
          if (opts && opts.method === 'POST' && String(url).endsWith('/runs') && r.ok) {
            const id = (await r.clone().json()).run_id;
            await new Promise((done) => {
              const t = setInterval(() => {
                if (document.body.dataset.finished === id) { clearInterval(t); done(); }
              }, 10);
            });
            document.body.dataset.heldFor = id;
          }
          return r;
        };
        return true;",
    )
    .await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the held answer to the run's request",
        "return document.body.dataset.heldFor",
    )
    .await;
    wait_for(
        &c,
        "the final report and Send ready",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    c.close().await.unwrap();
}

/// A new conversation is named after its first question (no model call), in the header and
/// the sidebar.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_titled_by_its_first_question() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    let title = "Why did the West region's sales jump in Q3 2024, and did it…";
    wait_for(
        &c,
        "the title from the first question",
        &format!(
            "return document.querySelector('#conv-title').textContent === {title:?} && \
            [...document.querySelectorAll('#conv-list li')].some(li => li.dataset.id === '{id}' \
              && li.textContent.includes({title:?}))"
        ),
    )
    .await;
    c.close().await.unwrap();
}

/// The demo's notices tell what its log records: one per compressed round, named by strategy
/// and tokens and placed just before that round's calls; no "compacted" notice, since the log
/// holds no `/compact`; "Why?" opens the context meter's explanation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_exactly_the_notices_its_log_records() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the final report",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    let messages = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}/messages"),
            None,
        )
        .await;
    // The log: which rounds were compressed, and the first call of each.
    let mut expected: Vec<(u64, Option<String>)> = Vec::new();
    for m in messages["entries"].as_array().unwrap() {
        let e = &m["entry"];
        if e["role"] == "assistant" && e["context"]["compressed"] == true {
            let first_call = e["tool_calls"][0]["id"].as_str().map(str::to_owned);
            expected.push((e["round"].as_u64().unwrap(), first_call));
        }
    }
    assert!(!expected.is_empty(), "the demo compresses its context");
    let shown = js(
        &c,
        "return [...document.querySelectorAll('[data-notice=compression]')].map(n => \
          [Number(n.dataset.round), n.nextElementSibling ? n.nextElementSibling.dataset.call || null : null, n.textContent])",
    )
    .await;
    let shown = shown.as_array().unwrap();
    assert_eq!(shown.len(), expected.len(), "{shown:?} vs {expected:?}");
    for (s, (round, first_call)) in shown.iter().zip(&expected) {
        assert_eq!(s[0].as_u64(), Some(*round), "{s}");
        assert_eq!(
            s[1].as_str().map(str::to_owned),
            *first_call,
            "placed before round {round}'s calls: {s}"
        );
        let text = s[2].as_str().unwrap();
        assert!(
            text.contains("key-messages") && text.contains("tokens"),
            "{text}"
        );
    }
    assert_eq!(
        js(
            &c,
            "return document.querySelectorAll('[data-notice=compaction]').length"
        )
        .await,
        0
    );
    assert!(
        !js(
            &c,
            "return document.body.textContent.includes('Conversation compacted')"
        )
        .await
        .as_bool()
        .unwrap()
    );
    click(&c, "[data-notice=compression] .why").await;
    wait_for(
        &c,
        "the context dialog",
        "return document.querySelector('#context-dialog').open",
    )
    .await;
    c.close().await.unwrap();
}

/// The sidebar's search asks the server: a word of a conversation's second answer finds that
/// conversation and not another that asked only the first question; clearing it lists all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_a_conversation_by_a_word_of_its_second_answer() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let both = server.conversation().await;
    server.run_to_end(&both, QUESTION).await;
    server.run_to_end(&both, CHART_QUESTION).await;
    let one = server.conversation().await;
    server.run_to_end(&one, QUESTION).await;
    goto(&c, &server, &one).await;
    loaded(&c).await;
    wait_for(
        &c,
        "both conversations listed",
        "return document.querySelectorAll('#conv-list li').length === 2",
    )
    .await;
    let search = c.find(Locator::Css("#conv-search")).await.unwrap();
    // "grouped" is in the chart answer only.
    search.send_keys("Grouped").await.unwrap();
    wait_for(
        &c,
        "only the conversation with the chart answer",
        &format!(
            "const li = [...document.querySelectorAll('#conv-list li')]; \
            return li.length === 1 && li[0].dataset.id === '{both}'"
        ),
    )
    .await;
    search.clear().await.unwrap();
    search.send_keys(" ").await.unwrap();
    wait_for(
        &c,
        "every conversation again",
        "return document.querySelectorAll('#conv-list li').length === 2",
    )
    .await;
    c.close().await.unwrap();
}

/// A narrow window (a laptop split in two, 900 px): an answer with its tables, code and
/// notices fits across (nothing runs off the side of the page), and the message box and Send
/// stay on screen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_900_pixel_window_is_usable() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    c.set_window_size(900, 800).await.unwrap();
    open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the answer",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    let width = js(&c, "return window.innerWidth").await.as_f64().unwrap();
    assert!(width <= 900.0, "the window is {width} px wide");
    let fits = js(
        &c,
        "const w = document.documentElement.clientWidth; \
        const over = [...document.querySelectorAll('#main *')].filter(e => { \
          const r = e.getBoundingClientRect(); return r.width > 0 && r.right > w + 1 && \
          !e.closest('pre, .code-block, table, iframe'); }); \
        return [document.documentElement.scrollWidth <= w, over.map(e => e.tagName + '.' + e.className).slice(0, 5)]",
    )
    .await;
    assert_eq!(fits[0], true, "the page scrolls sideways: {fits}");
    assert_eq!(fits[1], serde_json::json!([]), "runs off the side: {fits}");
    let on_screen = js(
        &c,
        "const r = document.querySelector('#send').getBoundingClientRect(); \
        const i = document.querySelector('#input').getBoundingClientRect(); \
        return [r.bottom <= window.innerHeight && r.right <= window.innerWidth && i.width > 300,           r.bottom, r.right, i.width, window.innerHeight, window.innerWidth]",
    )
    .await;
    screenshot(&c, "narrow-900.png").await;
    assert_eq!(on_screen[0], true, "{on_screen}");
    c.close().await.unwrap();
}
