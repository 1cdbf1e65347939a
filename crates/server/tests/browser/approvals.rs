//! A person in the loop on the page: the demo's first `query_database` call waits; the page
//! shows it with its arguments and the decisions, the sidebar says the conversation awaits
//! approval, and "Approve for this conversation", pressed from the keyboard, lets the run go
//! on to its report without asking again.

use std::collections::BTreeMap;

use ba_agent::ApprovalSettings;
use ba_protocol::{EntryKind, ToolApproval};
use fantoccini::Locator;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_is_approved_from_the_page_with_the_keyboard() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        approvals: ApprovalSettings {
            tools: BTreeMap::from([("query_database".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the waiting call",
        "const a = document.querySelector('#approvals [data-component=approval_request]'); \
        return a && !document.querySelector('#approvals').hidden && \
        a.textContent.includes('query_database') && a.querySelector('pre.args').textContent.includes('SELECT') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    wait_for(
        &c,
        "the sidebar's badge",
        &format!(
            "const b = document.querySelector('#conv-list li[data-id=\"{id}\"] .badge'); \
            return b && b.textContent === 'awaiting approval'"
        ),
    )
    .await;
    // Every decision is a labelled button, the reason a labelled field.
    let labels = js(
        &c,
        "return [...document.querySelectorAll('#approvals button')].map(b => b.textContent)",
    )
    .await;
    assert_eq!(
        labels,
        serde_json::json!([
            "Approve",
            "Approve for this conversation",
            "Reject",
            "Edit…"
        ])
    );
    assert!(
        js(
            &c,
            "const r = document.querySelector('#approvals .reason'); \
            return Boolean(r.labels.length || r.getAttribute('aria-label'))"
        )
        .await
        .as_bool()
        .unwrap()
    );
    screenshot(&c, "approval.png").await;
    let button = c
        .find(Locator::Css(
            "#approvals [data-act=approve_for_conversation]",
        ))
        .await
        .unwrap();
    // Reached from the keyboard: focus, then Enter.
    js(
        &c,
        "document.querySelector('#approvals [data-act=approve_for_conversation]').focus(); return true",
    )
    .await;
    assert_eq!(
        js(&c, "return document.activeElement.dataset.act").await,
        "approve_for_conversation"
    );
    button.send_keys("\u{E007}").await.unwrap();
    wait_for(
        &c,
        "the final report after the approval",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send' && \
        document.querySelector('#approvals').hidden",
    )
    .await;
    // One pause, one decision: the later calls of the tool were not asked again.
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(id.clone()).unwrap())
        .await
        .unwrap()
        .into_entries();
    let kinds: Vec<EntryKind> = entries
        .iter()
        .filter_map(|e| e.kind())
        .filter(|k| matches!(k, EntryKind::ApprovalRequest | EntryKind::ApprovalDecision))
        .collect();
    assert_eq!(
        kinds,
        [EntryKind::ApprovalRequest, EntryKind::ApprovalDecision]
    );
    let queries = entries
        .iter()
        .filter(|e| e.tool_name.as_deref() == Some("query_database"))
        .count();
    assert!(queries >= 2, "the demo's queries all ran: {queries}");
    c.close().await.unwrap();
}
