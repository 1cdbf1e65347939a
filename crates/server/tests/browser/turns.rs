//! Turns that outlive their run: a conversation whose log ends mid-turn (what a server killed
//! mid-run leaves) resumed from the page, and the files an answer offers downloaded.

use ba_protocol::LogRole;
use ba_storage::{ConversationId, ConversationStore as _};
use reqwest::Method;
use serde_json::Value;

use crate::flows::{FULL, full_answer};
use crate::harness::*;

fn cid(id: &str) -> ConversationId {
    ConversationId::new(id).unwrap()
}

/// The processed answer of the last entry of a conversation, through the API.
async fn last_answer(server: &Server, id: &str) -> Value {
    let m = server
        .api(
            Method::GET,
            &format!("/api/v1/conversations/{id}/messages"),
            None,
        )
        .await;
    m["entries"].as_array().unwrap().last().unwrap()["api_response"]["response"].clone()
}

/// The report's text once its code block has loaded.
async fn report(c: &fantoccini::Client) -> Value {
    wait_for(
        c,
        "the report with its code",
        "const r = document.querySelector('[data-component=final_report]');         const code = r && r.querySelector('figure.code-block code');         return code && code.textContent.includes('import json') && r.innerText",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_conversation_resumes_from_the_page() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    // The uninterrupted answer.
    let whole = server.conversation().await;
    server.run_to_end(&whole, QUESTION).await;
    let entries = server.agent.entries(&cid(&whole)).await.unwrap();
    goto(&c, &server, &whole).await;
    loaded(&c).await;
    // (Read now: saving the same code id again, the resumed run takes the code over.)
    let uninterrupted = report(&c).await;
    // What a server killed in the middle of a round of two tool calls leaves: the round's
    // model answer and its first result, durable; the second call never ran.
    let round = entries
        .iter()
        .position(|e| e.role == LogRole::Assistant && e.calls().len() >= 2)
        .expect("a round with two tool calls in the recording");
    assert_eq!(entries[round + 1].role, LogRole::Tool);
    let cut = server.conversation().await;
    server
        .agent
        .store()
        .append_batch(&cid(&cut), &entries[..round + 2], Some(0))
        .await
        .unwrap();

    goto(&c, &server, &cut).await;
    loaded(&c).await;
    wait_for(
        &c,
        "the interrupted badge",
        &format!(
            "return document.querySelector('#conv-list li[data-id=\"{cut}\"] .badge.interrupted')"
        ),
    )
    .await;
    wait_for(
        &c,
        "the Resume button",
        "return !document.querySelector('#resume').hidden",
    )
    .await;
    assert!(
        js(&c, "return document.querySelector('#continue').hidden")
            .await
            .as_bool()
            .unwrap()
    );
    let states = js(
        &c,
        "return [...document.querySelectorAll('[data-call]')].map(e => e.dataset.state)",
    )
    .await;
    assert_eq!(
        states.as_array().unwrap().last().unwrap(),
        "pending",
        "{states}"
    );
    screenshot(&c, "interrupted.png").await;
    click(&c, "#resume").await;
    wait_for(
        &c,
        "the resumed final report",
        "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('West beat') \
        && document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    assert_one_turn(&c).await;
    assert_in_order(&js(&c, COMPONENTS).await);
    let states = js(
        &c,
        "return [...document.querySelectorAll('[data-call]')].map(e => e.dataset.state)",
    )
    .await;
    assert!(
        states.as_array().unwrap().iter().all(|s| s == "done"),
        "{states}"
    );
    wait_for(
        &c,
        "Resume and the badge to go",
        &format!(
            "return document.querySelector('#resume').hidden && \
            !document.querySelector('#conv-list li[data-id=\"{cut}\"] .badge')"
        ),
    )
    .await;
    // The same answer as the run nobody interrupted, on the page and in the log.
    assert_eq!(report(&c).await, uninterrupted);
    assert_eq!(
        last_answer(&server, &cut).await,
        last_answer(&server, &whole).await
    );
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_links_fetch_their_file_by_name() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        extra_turns: full_answer(),
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    js(&c, CATCH_DOWNLOADS).await;
    ask(&c, FULL).await;
    wait_for(
        &c,
        "the download link",
        "return document.querySelector('[data-component=download_links] button')",
    )
    .await;
    let code = server
        .api(
            Method::GET,
            &format!("/api/v1/conversations/{id}/code"),
            None,
        )
        .await;
    let file_name = code[0]["file_name"].as_str().unwrap().to_owned();
    assert!(file_name.ends_with(".sql"), "{code}");
    let expected = "SELECT COUNT(*) AS n\nFROM sales; -- all rows";
    let got = download(&c, "[data-component=download_links] button").await;
    assert_eq!(got["name"], file_name.as_str(), "{got}");
    assert_eq!(got["text"].as_str().unwrap().trim_end(), expected);
    // The code block's own Download button gives the same file.
    let got = download(&c, "figure.code-block button[aria-label^=Download]").await;
    assert_eq!(got["name"], file_name.as_str(), "{got}");
    assert_eq!(got["text"].as_str().unwrap().trim_end(), expected);
    assert!(
        js(&c, "return document.querySelector('#notice').hidden")
            .await
            .as_bool()
            .unwrap(),
        "a download failed"
    );
    c.close().await.unwrap();
}
