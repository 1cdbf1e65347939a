#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! The way back to what a compressed window left out: a figure of an early tool result that
//! the window shows only as a trace is read again through the `recall` reference the trace
//! names, and lands in the final answer. The model is the scripted one of `ba-testkit`: it
//! answers from what the request shows, and follows a trace's reference when the figure asked
//! for is not there.

use std::sync::Arc;

use ba_agent::{Agent, AgentSettings, Input, RunStatus};
use ba_context::ContextBudget;
use ba_model::{AnthropicClient, ApiKey};
use ba_storage::{FileStore, NewConversation};
use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::support::items;

/// The entry id a trace in the request's messages names after `full output: recall `.
fn recall_reference(r: &Request) -> Option<String> {
    let body = r.body().get("messages")?.to_string();
    let at = body.find("full output: recall ")? + "full output: recall ".len();
    let id: String = body[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    (!id.is_empty()).then_some(id)
}

/// The next page a recall result offers (`[more: recall {"entry": …, "page": N}]`).
fn next_page(text: &str) -> Option<Value> {
    let at = text.find("[more: recall ")? + "[more: recall ".len();
    let end = text[at..].find('}')? + at + 1;
    serde_json::from_str(&text[at..end]).ok()
}

/// The model's server reports no prompt count, so the budget stays the configured one in the
/// local count (the calibration to a server's count is tested in `windows.rs`): the window
/// of the question is the one this test sizes.
async fn model() -> ScriptedModel {
    items::rules(ScriptedModel::builder())
        .rule(
            "follow the trace's reference",
            |r| r.last_user_text().contains("item 35") && recall_reference(r).is_some(),
            |r| {
                let page = r
                    .last_result()
                    .filter(|t| t.name == "recall")
                    .and_then(|t| next_page(&t.text));
                Turn::call(
                    "recall",
                    page.unwrap_or_else(|| json!({"entry": recall_reference(r).unwrap()})),
                )
                .with_usage(0, 1)
            },
        )
        .start()
        .await
}

#[tokio::test]
async fn a_figure_dropped_from_the_window_is_recalled_through_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    // Small enough that the table leaves the window beside the tool definitions it carries.
    let settings = AgentSettings {
        budget: ContextBudget::new(1_800, 200),
        ..AgentSettings::default()
    };
    let agent = Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .settings(settings)
        .tool(items::tool())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let first = agent
        .send(&id, Input::message("Read the items table."))
        .finish()
        .await;
    assert_eq!(first.status, RunStatus::Answered, "{first:?}");
    let second = agent
        .send(&id, Input::message("What is the value of item 35?"))
        .finish()
        .await;
    assert_eq!(second.status, RunStatus::Answered, "{second:?}");
    let answer = second.final_answer.clone().unwrap_or_default();
    assert!(answer.contains("777123.45"), "{answer}");
    // The window of the question did not show the figure: it came back through `recall`.
    let requests = model.requests();
    let asked = requests
        .iter()
        .find(|r| r.last_user_text().contains("item 35"))
        .unwrap();
    assert!(!asked.shows("777123.45"));
    assert!(recall_reference(asked).is_some());
    let fired = model.fired();
    assert!(
        fired
            .iter()
            .flatten()
            .any(|f| f == "follow the trace's reference"),
        "{fired:?}"
    );
}
