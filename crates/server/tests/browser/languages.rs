//! The page in English and in Simplified Chinese: a browser whose person prefers `zh-CN` gets
//! the page in Chinese (no English word of the page's own left, errors said by their code),
//! one that prefers English gets English; the switch on the page changes the language in place
//! and the page remembers it. On every state (empty, the dialogs, an approval card, the demo's
//! report, its code) axe-core finds no serious or critical violation, in both languages.
//!
//! axe-core comes from `cargo xtask assets` (`target/assets/axe.min.js`); without it the
//! accessibility half is skipped with a message, and fails under CI=true. With
//! `BA_AGENT_SCREENSHOTS=docs` the report's screenshots are written to `docs/page-<lang>.png`.

use std::collections::BTreeMap;

use ba_agent::ApprovalSettings;
use ba_protocol::ToolApproval;
use fantoccini::Client;
use serde_json::{Value, json};

use crate::harness::*;

const EN: &str = include_str!("../../page/i18n/en.json");
const ZH: &str = include_str!("../../page/i18n/zh-CN.json");

fn catalogue(text: &str) -> BTreeMap<String, String> {
    serde_json::from_str(text).unwrap()
}

/// axe-core's source, or `None` after a message (a failure under CI).
fn axe_source() -> Option<String> {
    let path = assets_dir().join("axe.min.js");
    match std::fs::read_to_string(&path) {
        Ok(source) => Some(source),
        Err(e) => {
            ba_testkit::missing(&format!(
                "no axe-core at {} ({e}): run `cargo xtask assets`",
                path.display()
            ));
            None
        }
    }
}

/// The violations axe-core finds on the page as it is now: rule, impact, how many elements,
/// and the first few of them.
async fn axe(c: &Client, source: &str) -> Vec<Value> {
    c.execute(&format!("if (!window.axe) {{ {source} }} return 1"), vec![])
        .await
        .unwrap();
    // The report's frame is sandboxed to an opaque origin: axe cannot enter it (nor can the
    // page); what the model wrote inside it is not the page's to fix.
    let found = c
        .execute_async(
            "const done = arguments[arguments.length - 1]; \
            axe.run(document, { iframes: false, resultTypes: ['violations'] }).then((r) => done(r.violations.map((v) => \
              ({ id: v.id, impact: v.impact, nodes: v.nodes.length, targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }))), \
              (e) => done([{ id: 'axe-failed', impact: 'critical', nodes: 0, targets: [String(e)] }]))",
            vec![],
        )
        .await
        .unwrap();
    found.as_array().unwrap().clone()
}

/// The page's words that are English in `zh-CN`: each English phrase of the catalogue (its
/// parts between placeholders) that shows on the page, what the model or the person wrote
/// left out.
async fn english_left(c: &Client) -> Value {
    let (en, zh) = (catalogue(EN), catalogue(ZH));
    let mut phrases: Vec<String> = Vec::new();
    for (key, value) in &en {
        if zh[key] == *value {
            continue;
        }
        for part in value.split(['{', '}']).step_by(2) {
            let part = part.trim_matches(|c: char| !c.is_alphanumeric());
            if part.chars().filter(char::is_ascii_alphabetic).count() >= 4
                && !phrases.iter().any(|p| p == part)
            {
                phrases.push(part.to_owned());
            }
        }
    }
    c.execute(
        "const phrases = arguments[0]; const root = document.body.cloneNode(true); \
        root.querySelectorAll('dialog:not([open]), [hidden], script, pre, code, .user, .report, [data-component=task_analysis] p, \
          [data-component=execution_plan] li, [data-component=recommended_questions], .chips.questions, .code-list .chip, \
          .code-block .desc, .arg-list, .wf-out, #conv-list .name, #whoami-text, #spend, .approval strong, [data-component=download_links]') \
          .forEach((n) => n.remove()); \
        const words = [root.textContent]; \
        root.querySelectorAll('[aria-label], [title], [placeholder]').forEach((n) => \
          ['aria-label', 'title', 'placeholder'].forEach((a) => n.hasAttribute(a) && words.push(n.getAttribute(a)))); \
        words.push(document.title); \
        const text = words.join(' | '); \
        const escape = (s) => s.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&'); \
        return phrases.filter((p) => new RegExp('(^|[^A-Za-z])' + escape(p) + '($|[^A-Za-z])').test(text));",
        vec![json!(phrases)],
    )
    .await
    .unwrap()
}

/// One state of the page: the English left in it (for `zh-CN`) and axe-core's violations.
async fn check(
    c: &Client,
    lang: &str,
    state: &str,
    axe_js: Option<&str>,
    found: &mut BTreeMap<String, Vec<Value>>,
) {
    if lang == "zh-CN" {
        assert_eq!(
            english_left(c).await,
            json!([]),
            "English words on the page in zh-CN ({state})"
        );
    }
    if let Some(source) = axe_js {
        found.insert(format!("{lang} {state}"), axe(c, source).await);
    }
}

/// The demo's question answered on a page in `lang`: every state checked, the words of each
/// asserted; the violations found, by state.
async fn walk(lang: &str, axe_js: Option<&str>) -> BTreeMap<String, Vec<Value>> {
    let Some(c) = browser_in(Some(lang)).await else {
        return BTreeMap::new();
    };
    let words = catalogue(if lang == "zh-CN" { ZH } else { EN });
    let w = |key: &str| words[key].clone();
    let server = Server::start(Options {
        approvals: ApprovalSettings {
            tools: BTreeMap::from([("query_database".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    })
    .await;
    let mut found = BTreeMap::new();
    open_new(&c, &server).await;
    wait_for(
        &c,
        "the demo questions",
        "return document.querySelector('.empty .chips.questions button')",
    )
    .await;
    let shown = js(
        &c,
        "return {lang: document.documentElement.lang, preferred: navigator.languages[0], \
          send: document.querySelector('#send').textContent, empty: document.querySelector('.empty p').textContent, \
          placeholder: document.querySelector('#input').placeholder, title: document.title, \
          chosen: document.querySelector('#lang').value}",
    )
    .await;
    assert_eq!(
        shown,
        json!({"lang": lang, "preferred": lang, "send": w("send.send"), "empty": w("empty.ask"),
            "placeholder": w("composer.placeholder"), "title": "BA-Agent", "chosen": lang}),
        "the page in the browser's language"
    );
    check(&c, lang, "empty", axe_js, &mut found).await;

    // The dialogs: the context window's, then memory, where a refused name shows an error.
    click(&c, "#meter").await;
    wait_for(
        &c,
        "the context dialog",
        "return document.querySelector('#context-dialog').open",
    )
    .await;
    let text = js(
        &c,
        "return document.querySelector('#context-dialog').textContent",
    )
    .await;
    assert!(text.as_str().unwrap().contains(&w("ctx.title")), "{text}");
    check(&c, lang, "context dialog", axe_js, &mut found).await;
    js(
        &c,
        "document.querySelector('#context-dialog').close(); return 1",
    )
    .await;
    click(&c, "#memory-open").await;
    wait_for(
        &c,
        "the memory dialog",
        "return document.querySelector('#memory-dialog').open",
    )
    .await;
    check(&c, lang, "memory dialog", axe_js, &mut found).await;
    // A path the server refuses (too deep): its error, said by its code.
    js(
        &c,
        "document.querySelector('#memory-new-name').value = 'a/'.repeat(40) + 'deep.md'; return 1",
    )
    .await;
    click(&c, "#memory-body .actions button").await;
    let notice = wait_for(
        &c,
        "the refusal",
        "const n = document.querySelector('#notice'); return !n.hidden && n.textContent",
    )
    .await;
    js(
        &c,
        "document.querySelector('#memory-dialog').close(); return 1",
    )
    .await;
    let sentences: Vec<String> = words
        .iter()
        .filter(|(k, _)| k.starts_with("error."))
        .map(|(_, v)| v.clone())
        .collect();
    if lang == "zh-CN" {
        assert!(
            sentences.contains(&notice.as_str().unwrap().to_owned()),
            "an error said by its code: {notice}"
        );
    } else {
        assert!(!notice.as_str().unwrap().is_empty());
    }
    check(&c, lang, "an error notice", axe_js, &mut found).await;

    // The question: its first query waits for approval.
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the approval card",
        "const a = document.querySelector('#approvals [data-component=approval_request]'); \
        return a && !document.querySelector('#approvals').hidden && a.querySelector('.arg-code')",
    )
    .await;
    let card = js(
        &c,
        "return [...document.querySelectorAll('#approvals button')].map((b) => b.textContent)",
    )
    .await;
    assert_eq!(
        card,
        json!([
            w("appr.approve"),
            w("appr.approve_conv"),
            w("appr.reject"),
            w("appr.edit")
        ])
    );
    check(&c, lang, "approval card", axe_js, &mut found).await;
    click(&c, "#approvals [data-act=approve_for_conversation]").await;
    wait_for(
        &c,
        "the report",
        "return document.querySelector('[data-component=export_report] button') && \
          !document.querySelector('.report.streaming') && document.querySelector('figure.code-block .tk-kw')",
    )
    .await;
    let report = js(
        &c,
        "return {analysis: document.querySelector('[data-component=task_analysis] summary').textContent, \
          plan: document.querySelector('[data-component=execution_plan] .title').textContent, \
          export: [...document.querySelectorAll('[data-component=export_report] button')].map((b) => b.textContent), \
          cost: document.querySelector('#conv-cost').hidden}",
    )
    .await;
    assert_eq!(report["analysis"], json!(w("ans.analysis")));
    assert_eq!(report["plan"], json!(w("ans.plan")));
    assert_eq!(
        report["export"],
        json!([
            w("export.html"),
            w("export.md"),
            w("export.zip"),
            w("export.print")
        ])
    );
    check(&c, lang, "report", axe_js, &mut found).await;
    let png = c.screenshot().await.unwrap();
    let to = if std::env::var("BA_AGENT_SCREENSHOTS").as_deref() == Ok("docs") {
        workspace().join("docs")
    } else {
        artifacts()
    };
    std::fs::write(to.join(format!("page-{lang}.png")), png).unwrap();

    click(&c, "figure.code-block button").await;
    wait_for(
        &c,
        "the code dialog",
        "const d = document.querySelector('#code-dialog'); return d.open && d.querySelector('.tk-kw')",
    )
    .await;
    check(&c, lang, "code dialog", axe_js, &mut found).await;
    js(
        &c,
        "document.querySelector('#code-dialog').close(); return 1",
    )
    .await;
    click(&c, "#schedules-open").await;
    wait_for(
        &c,
        "the schedules, or their error",
        "return document.querySelector('#schedules-dialog').open || !document.querySelector('#notice').hidden",
    )
    .await;
    check(&c, lang, "schedules", axe_js, &mut found).await;
    c.close().await.unwrap();
    server.stop().await;
    found
}

/// The rules broken, by impact, for the report: `rule (impact): elements in states`.
fn tally(found: &BTreeMap<String, Vec<Value>>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for violations in found.values() {
        for v in violations {
            let key = format!(
                "{} ({})",
                v["id"].as_str().unwrap(),
                v["impact"].as_str().unwrap_or("?")
            );
            *out.entry(key).or_default() += v["nodes"].as_u64().unwrap_or(0) as usize;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_in_both_languages_passes_axe_core() {
    let _one = BROWSER.lock().await;
    let axe_js = axe_source();
    let mut found = walk("zh-CN", axe_js.as_deref()).await;
    found.extend(walk("en", axe_js.as_deref()).await);
    if axe_js.is_none() {
        return;
    }
    eprintln!(
        "axe-core, elements by rule over every state: {:#?}",
        tally(&found)
    );
    std::fs::write(
        artifacts().join("axe.json"),
        serde_json::to_string_pretty(&found).unwrap(),
    )
    .unwrap();
    let bad: Vec<(&String, &Value)> = found
        .iter()
        .flat_map(|(state, vs)| vs.iter().map(move |v| (state, v)))
        .filter(|(_, v)| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .collect();
    assert!(bad.is_empty(), "serious or critical violations: {bad:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_switch_changes_the_language_in_place_and_is_remembered() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser_in(Some("en-US")).await else {
        return;
    };
    let (en, zh) = (catalogue(EN), catalogue(ZH));
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    server.run_to_end(&id, QUESTION).await;
    goto(&c, &server, &id).await;
    wait_for(
        &c,
        "the report in English",
        &format!(
            "return document.documentElement.lang === 'en' && document.querySelector('[data-component=export_report] button') \
              && document.querySelector('#send').textContent === {}",
            json!(en["send.send"])
        ),
    )
    .await;
    js(
        &c,
        "const s = document.querySelector('#lang'); s.value = 'zh-CN'; s.dispatchEvent(new Event('change')); return 1",
    )
    .await;
    let chinese = format!(
        "return document.documentElement.lang === 'zh-CN' && document.querySelector('#send').textContent === {} && \
          document.querySelector('#new-conv').textContent === {} && \
          document.querySelector('[data-component=export_report] button') && \
          document.querySelector('[data-component=export_report] button').textContent === {} && \
          /令牌/.test(document.querySelector('#conv-cost').textContent)",
        json!(zh["send.send"]),
        json!(zh["side.new"]),
        json!(zh["export.html"])
    );
    wait_for(&c, "the page in Chinese, in place", &chinese).await;
    assert_eq!(english_left(&c).await, json!([]));
    // A reload (or another tab) keeps the choice over the browser's English.
    c.refresh().await.unwrap();
    sign_in(&c, TOKEN).await;
    wait_for(&c, "the page in Chinese after a reload", &chinese).await;
    assert_eq!(
        js(&c, "return localStorage.getItem('ba-lang')").await,
        json!("zh-CN")
    );
    c.close().await.unwrap();
    server.stop().await;
}
