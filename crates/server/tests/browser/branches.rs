//! Editing a question on the page: the edit is a fork at the entry before it plus the new
//! question, run at once; the question then shows its versions (`1 / 2`) and switches between
//! the branches, each with its own answer; the first conversation is unchanged.

use fantoccini::Locator;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_question_is_a_branch_and_both_can_be_read() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let first = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the first answer",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    click(&c, ".turn .user-tools .edit").await;
    let area = c
        .find(Locator::Css(".edit-question textarea"))
        .await
        .unwrap();
    area.clear().await.unwrap();
    area.send_keys(CHART_QUESTION).await.unwrap();
    click(&c, ".edit-question button[type=submit]").await;
    wait_for(
        &c,
        "the edited question's answer in its branch",
        &format!(
            "const u = new URL(location.href).searchParams.get('conversation'); \
            return u && u !== '{first}' && \
            document.querySelector('.turn .user').textContent.includes('Chart the 2024') && \
            document.querySelector('[data-component=final_report]') && \
            document.querySelector('#send').textContent === 'Send' && \
            document.querySelector('.branches .count') && \
            document.querySelector('.branches .count').textContent === '2 / 2'"
        ),
    )
    .await;
    screenshot(&c, "branch-2.png").await;
    click(&c, ".branches .prev").await;
    wait_for(
        &c,
        "the first branch again",
        &format!(
            "return new URL(location.href).searchParams.get('conversation') === '{first}' && \
            document.querySelector('.report') && \
            document.querySelector('.report').textContent.includes('West beat') && \
            document.querySelector('.branches .count') && \
            document.querySelector('.branches .count').textContent === '1 / 2'"
        ),
    )
    .await;
    click(&c, ".branches .next").await;
    wait_for(
        &c,
        "the second branch again",
        "return document.querySelector('.branches .count') && \
        document.querySelector('.branches .count').textContent === '2 / 2' && \
        document.querySelector('.turn .user').textContent.includes('Chart the 2024')",
    )
    .await;
    // The first conversation kept its question and answer.
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(first.clone()).unwrap())
        .await
        .unwrap()
        .into_entries();
    assert!(entries.iter().any(|e| e.text().contains("West region")));
    assert!(!entries.iter().any(|e| e.text().contains("Chart the 2024")));
    c.close().await.unwrap();
}

/// A rewind (through the API) while the page is open: the turns it took back leave the page at
/// once, and stay gone after a reload (they are still in the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewind_takes_its_turns_off_the_page() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options::default()).await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the answer",
        "return document.querySelector('.report') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    let rewound = server
        .api(
            reqwest::Method::POST,
            &format!("/api/v1/conversations/{id}/rewind"),
            Some(serde_json::json!({"to_seq": 0})),
        )
        .await;
    assert!(rewound["taken_back"].as_u64().unwrap() > 2, "{rewound}");
    wait_for(
        &c,
        "the turn to leave the page",
        "return !document.querySelector('.turn') && document.querySelector('.empty')",
    )
    .await;
    c.refresh().await.unwrap();
    loaded(&c).await;
    assert!(
        js(&c, "return document.querySelectorAll('.turn').length === 0")
            .await
            .as_bool()
            .unwrap()
    );
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(id).unwrap())
        .await
        .unwrap()
        .entries;
    assert!(entries.len() > 3, "the log keeps what the rewind took back");
    c.close().await.unwrap();
}
