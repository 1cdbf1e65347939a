//! A run that stops at a spending cap: the page says which cap and what was spent, shows the
//! conversation's spend against its cap next to the context meter (again after a reload),
//! offers Continue, keeps the composer working, and the header's month figure follows the run.

use crate::harness::{
    BROWSER, Options, QUESTION, Server, ask, browser, goto, js, loaded, open_new, screenshot,
    wait_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_at_its_cap_shows_the_budget_message_and_the_spend() {
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
    // The first call of the demo's question uses more than one token: the run stops before
    // its second.
    let server = Server::start(Options {
        prices: ba_agent::Prices::new(prices).unwrap(),
        budgets: ba_agent::Budgets {
            conversation_tokens: Some(1),
            ..ba_agent::Budgets::default()
        },
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    let header = js(
        &c,
        "return document.querySelector('#whoami-text').textContent",
    )
    .await;
    assert!(!header.as_str().unwrap().contains("this month"), "{header}");
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the budget message",
        "return document.querySelector('#notice').textContent.includes('budget of 1 tokens is reached')",
    )
    .await;
    wait_for(
        &c,
        "the spend against the cap",
        "const s = document.querySelector('#spend'); return !s.hidden && s.dataset.reached === 'true' \
         && /spent [0-9,]+ of 1 tokens · budget reached/.test(s.textContent)",
    )
    .await;
    wait_for(
        &c,
        "the month's spend in the header",
        "return /\\$[0-9.]+ this month/.test(document.querySelector('#whoami-text').textContent)",
    )
    .await;
    let conv = server
        .api(
            reqwest::Method::GET,
            &format!("/api/v1/conversations/{id}"),
            None,
        )
        .await;
    assert_eq!(conv["status"], "budget_reached", "{conv}");
    screenshot(&c, "budget-reached.png").await;
    // Continue is offered; the composer takes a new message.
    let controls = js(
        &c,
        "return {cont: document.querySelector('#continue').hidden, \
         send: document.querySelector('#send').textContent, \
         disabled: document.querySelector('#send').disabled || document.querySelector('#input').disabled}",
    )
    .await;
    assert_eq!(
        controls,
        serde_json::json!({"cont": false, "send": "Send", "disabled": false})
    );
    // After a reload the page says the same, from the server.
    goto(&c, &server, &id).await;
    loaded(&c).await;
    wait_for(
        &c,
        "the budget message after a reload",
        "return document.querySelector('#notice').textContent.includes('budget of 1 tokens is reached') \
         && document.querySelector('#spend').dataset.reached === 'true' \
         && !document.querySelector('#continue').hidden",
    )
    .await;
    wait_for(
        &c,
        "the list's badge",
        "return [...document.querySelectorAll('#conv-list .badge')].some(b => b.textContent === 'budget reached')",
    )
    .await;
    let typed = js(
        &c,
        "const i = document.querySelector('#input'); i.value = 'another question'; \
         i.dispatchEvent(new Event('input')); return !document.querySelector('#send').disabled",
    )
    .await;
    assert_eq!(typed, true);
}
