//! The loop over OpenAI's Responses API, with a model that decides (the scripted model's
//! Responses wire): a tool call goes round by its `call_id`, the reasoning item of the first
//! answer (its encrypted content) is sent back with the next request, the conversation's key
//! goes as `prompt_cache_key` with `store: false`, and the cached input tokens the provider
//! reports reach the conversation's metrics report.

use std::sync::Arc;

use ba_agent::{Agent, Input, RunStatus};
use ba_model::ResponsesClient;
use ba_storage::{ConversationStore as _, FileStore, NewConversation};
use ba_testkit::model::{ScriptedModel, Turn, Wire};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Revenue {
    region: String,
}

fn revenue() -> impl ba_tools::Tool {
    typed_tool(
        "revenue",
        "Q3 revenue of a region, in euros.",
        |a: Revenue, _| async move {
            let amount = match a.region.as_str() {
                "EMEA" => 1_284_000,
                _ => 973_250,
            };
            Ok(json!({"region": a.region, "q3": amount}))
        },
    )
}

#[tokio::test]
async fn a_tool_round_trip_sends_the_reasoning_back_and_counts_cached_tokens() {
    let model = ScriptedModel::builder()
        .rule(
            "look both regions up",
            |r| r.wire() == Wire::Responses && r.round() == 0,
            |_| {
                Turn::calls([
                    ("revenue", json!({"region": "EMEA"})),
                    ("revenue", json!({"region": "APAC"})),
                ])
                .with_thinking("Two regions: query both at once.")
                .with_usage(900, 60)
            },
        )
        .rule(
            "answer from both results",
            |r| r.tool_results().len() == 2,
            |r| {
                let total: i64 = r
                    .tool_results()
                    .iter()
                    .map(|t| {
                        serde_json::from_str::<Value>(&t.text).unwrap()["q3"]
                            .as_i64()
                            .unwrap()
                    })
                    .sum();
                Turn::text(format!("Together: €{total}."))
                    .with_usage(1200, 20)
                    .with_cached_tokens(896)
            },
        )
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let client = ResponsesClient::new(None)
        .unwrap()
        .with_base_url(model.responses_base_url())
        .unwrap();
    let agent = Agent::builder(Arc::new(client))
        .model("gpt-5")
        .store(Arc::new(FileStore::open(dir.path().join("home")).unwrap()))
        .tool(revenue())
        .sub_agents(false)
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let done = agent
        .send(&id, Input::message("Q3 revenue of EMEA and APAC together?"))
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert_eq!(done.final_answer.as_deref(), Some("Together: €2257250."));
    assert_eq!(
        model.fired(),
        [
            Some("look both regions up".to_owned()),
            Some("answer from both results".to_owned())
        ]
    );

    let requests = model.requests();
    let (first, second) = (&requests[0], &requests[1]);
    assert_eq!(first.path(), "/v1/responses");
    for r in [first, second] {
        assert_eq!(r.body()["store"], false);
        assert_eq!(r.body()["prompt_cache_key"], id.as_str());
        assert_eq!(r.body()["tools"][0]["name"], "revenue");
    }
    // The second request carries the first answer whole: its reasoning item with the
    // encrypted content the server gave, the two calls by call id, their outputs.
    let answer = &first.body()["input"];
    assert!(answer.is_array());
    let sent_back = second.reasoning_sent_back();
    assert_eq!(sent_back.len(), 1, "{}", second.body());
    assert!(!sent_back[0].is_empty());
    assert_eq!(
        second.body()["include"],
        json!(["reasoning.encrypted_content"])
    );
    let input = second.body()["input"].as_array().unwrap();
    let calls: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    let outputs: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls, outputs, "each output answers its call, in order");
    let reasoning_at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
    let first_call_at = input
        .iter()
        .position(|i| i["type"] == "function_call")
        .unwrap();
    assert!(
        reasoning_at < first_call_at,
        "the reasoning goes before its calls"
    );

    // The log keeps the reasoning item; the metrics report has the cached tokens.
    let entries = agent.store().load(&id).await.unwrap().into_entries();
    assert!(
        LogEntryText::of(&entries).contains("encrypted_content"),
        "the reasoning item is in the log"
    );
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.cache_read_tokens, 896);
    // The scripted model counts a turn's input without the cached part, as Anthropic does; the
    // Responses wire adds the cached tokens into `input_tokens`, and the client takes them out.
    assert_eq!(report.input_tokens, 900 + 1200);
}

/// The log as its JSON lines.
struct LogEntryText;

impl LogEntryText {
    fn of(entries: &[ba_protocol::LogEntry]) -> String {
        ba_protocol::LogEntry::to_jsonl(entries)
    }
}
