#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! Skill activation goes through the tool runtime like every tool, with one activation stack
//! per run: a skill activated again rounds later in the same run closes a cycle and is refused
//! (the model reads why), while the next run starts a stack of its own. The model is the
//! scripted one of `ba-testkit`, deciding from what each request shows.

use std::sync::Arc;

use ba_agent::{Agent, AgentEvent, Input, RunStatus};
use ba_model::{AnthropicClient, ApiKey};
use ba_storage::{FileStore, NewConversation};
use ba_testkit::model::{ScriptedModel, Turn};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    key: String,
}

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "activate the skill first",
            |r| r.round() == 0,
            |_| Turn::call("activate_skill", json!({"skill": "tidy"})),
        )
        .rule(
            "look something up under it",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "activate_skill" && !t.is_error)
            },
            |_| Turn::call("lookup", json!({"key": "west"})),
        )
        .rule(
            "activate it again two rounds after the first time",
            |r| r.last_result().is_some_and(|t| t.name == "lookup"),
            |_| Turn::call("activate_skill", json!({"skill": "tidy"})),
        )
        .rule(
            "say what the refusal said",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "activate_skill" && t.is_error)
            },
            |r| Turn::text(format!("Refused: {}", r.last_result().unwrap().text)),
        )
        .start()
        .await
}

#[tokio::test]
async fn a_skill_activated_again_rounds_later_in_one_run_is_refused_as_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy the tables.\n---\nSort every table by its first column.\n",
    )
    .unwrap();
    let model = model().await;
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let lookup = typed_tool("lookup", "Looks a key up.", |a: Lookup, _| async move {
        Ok(json!({"key": a.key, "value": 7}))
    });
    let agent = Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir.path().join("home")).unwrap()))
        .tool(lookup)
        .skills(Arc::new(ba_skills::SkillSet::load([dir
            .path()
            .join("skills")])))
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let events = agent
        .send(&id, Input::message("Tidy the sales tables."))
        .collect_events()
        .await;
    let results: Vec<(u32, String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult {
                round,
                name,
                success,
                ..
            } => Some((*round, name.clone(), *success)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (1, "activate_skill".to_owned(), true),
            (2, "lookup".to_owned(), true),
            (3, "activate_skill".to_owned(), false),
        ]
    );
    let summary = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Finished(summary) => Some(summary),
            _ => None,
        })
        .expect("the run ends with a summary");
    assert_eq!(summary.status, RunStatus::Answered, "{summary:#?}");
    let answer = summary.final_answer.as_deref().unwrap();
    assert!(
        answer.contains("cycle refused: tidy → tidy"),
        "the model read why: {answer}"
    );
    // Both activations went through the runtime: they are in its metrics like any call.
    let metrics = agent.tools().metrics().tools();
    let activations = &metrics["activate_skill"];
    assert_eq!((activations.successes, activations.failures), (1, 1));

    // The next run has a stack of its own: the same skill activates again.
    let again = agent
        .send(&id, Input::message("Tidy them once more."))
        .collect_events()
        .await;
    let first = again.iter().find_map(|e| match e {
        AgentEvent::ToolResult { name, success, .. } if name == "activate_skill" => Some(*success),
        _ => None,
    });
    assert_eq!(first, Some(true), "{again:#?}");
}
