//! Memory across conversations through the loop: what the analyst says in one conversation is
//! written with the `memory` tool, carried by the next conversation's system prompt (fixed for
//! that conversation, byte for byte, while the model writes more), read back, and followed;
//! another person sees none of it; `ask` pauses writes, `off` offers nothing; every refusal is
//! a tool error the model reads.

use std::sync::Arc;

use ba_agent::{Agent, AgentSettings, ApprovalAnswer, Input, MemoryMode, RunStatus};
use ba_model::{AnthropicClient, ApiKey};
use ba_protocol::EntryKind;
use ba_storage::{ConversationId, ConversationStore, FileStore, MemoryScope, NewConversation};
use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::json;

const PREFERENCE: &str = "Our fiscal year starts in April; exclude the test stores.";

fn memory_result(r: &Request) -> Option<&ba_testkit::model::ToolResult> {
    r.last_result().filter(|t| t.name == "memory")
}

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "write down a stated preference",
            |r| r.last_user_text().contains("fiscal year starts") && r.tool_results().is_empty(),
            |_| {
                Turn::call(
                    "memory",
                    json!({"command": "create", "path": "/memories/preferences.md",
                           "file_text": "Fiscal year starts in April.\nExclude the test stores.\n"}),
                )
            },
        )
        .rule(
            "try a path outside memory",
            |r| r.last_user_text().contains("escape") && r.tool_results().is_empty(),
            |_| {
                Turn::calls([
                    (
                        "memory",
                        json!({"command": "create", "path": "/memories/../etc/x", "file_text": "x"}),
                    ),
                    (
                        "memory",
                        json!({"command": "create", "path": "/memories/team/rules.md", "file_text": "x"}),
                    ),
                ])
            },
        )
        .rule(
            "read the preferences the index names",
            |r| {
                r.last_user_text().contains("Q1")
                    && r.system().contains("/memories/preferences.md")
                    && r.tool_results().is_empty()
            },
            |_| Turn::call("memory", json!({"command": "view", "path": "/memories/preferences.md"})),
        )
        .rule(
            "note the region mid-conversation",
            |r| {
                r.last_user_text().contains("Q1")
                    && memory_result(r).is_some_and(|t| t.input["command"] == "view")
            },
            |_| {
                Turn::call(
                    "memory",
                    json!({"command": "create", "path": "/memories/regions.md",
                           "file_text": "Report the north region first.\n"}),
                )
            },
        )
        .rule(
            "answer Q1 from what memory said",
            |r| r.last_user_text().contains("Q1") && r.shows("starts in April"),
            |_| Turn::text("Q1 runs from April to June."),
        )
        .rule(
            "answer Q1 without memory",
            |r| r.last_user_text().contains("Q1"),
            |_| Turn::text("Q1 runs from January to March."),
        )
        .rule(
            "look at the memory folder",
            |r| r.last_user_text().contains("What do you remember") && r.tool_results().is_empty(),
            |_| Turn::call("memory", json!({"command": "view", "path": "/memories"})),
        )
        .rule(
            "say what a memory call answered",
            |r| memory_result(r).is_some(),
            |r| {
                let texts: Vec<String> = r
                    .tool_results()
                    .iter()
                    .map(|t| format!("[{}] {}", if t.is_error { "error" } else { "ok" }, t.text))
                    .collect();
                Turn::text(format!("Memory said: {}", texts.join(" | ")))
            },
        )
        .rule("anything else", |_| true, |_| Turn::text("Done."))
        .start()
        .await
}

fn agent(model: &ScriptedModel, store: Arc<FileStore>, memory: Option<MemoryMode>) -> Agent {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let settings = AgentSettings {
        memory,
        ..AgentSettings::default()
    };
    Agent::builder(Arc::new(client))
        .store(store)
        .settings(settings)
        .sub_agents(false)
        .build()
        .unwrap()
}

async fn conversation(agent: &Agent, owner: &str) -> ConversationId {
    agent
        .new_conversation(NewConversation {
            owner: Some(owner.to_owned()),
            ..NewConversation::default()
        })
        .await
        .unwrap()
}

async fn ask(agent: &Agent, id: &ConversationId, text: &str) -> ba_agent::RunSummary {
    agent.send(id, Input::message(text)).finish().await
}

/// The requests made since `from`.
fn since(model: &ScriptedModel, from: usize) -> Vec<Request> {
    model.requests().into_iter().skip(from).collect()
}

#[tokio::test]
async fn a_preference_said_once_is_remembered_in_the_next_conversation_and_the_prefix_holds() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let first = agent(&model, Arc::clone(&store), Some(MemoryMode::Auto));

    // Conversation 1: the preference is stated and written down.
    let c1 = conversation(&first, "ann").await;
    let done = ask(&first, &c1, PREFERENCE).await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    let requests = model.requests();
    assert!(requests[0].offers("memory"));
    // Declared as the provider's own memory tool, with the beta it needs.
    let tools = requests[0].body()["tools"].as_array().unwrap().clone();
    assert!(
        tools.contains(&json!({"type": "memory_20250818", "name": "memory"})),
        "{tools:?}"
    );
    let beta = requests[0].header("anthropic-beta").unwrap_or_default();
    assert!(beta.contains("context-management-2025-06-27"), "{beta}");
    assert!(!requests[0].system().contains("<memory_index>"));
    let memory = store.memory().unwrap();
    let ann = MemoryScope::user("ann").unwrap();
    let kept = memory.read(&ann, "preferences.md").await.unwrap().unwrap();
    assert!(kept.text.unwrap().contains("April"));
    assert_eq!(kept.author.conversation.as_deref(), Some(c1.as_str()));
    // The tool entry names what changed, for the page's notice and undo.
    let log = store.load(&c1).await.unwrap().into_entries();
    let change = log
        .iter()
        .find_map(|e| e.records.memory_change.clone())
        .expect("a memory change on the tool entry");
    assert_eq!(change.command, "create");
    assert_eq!(change.versions[0].path, "/memories/preferences.md");
    assert_eq!(change.versions[0].version, 1);

    // A new agent over the same store (a restarted server), conversation 2.
    drop(first);
    let second = agent(&model, Arc::clone(&store), Some(MemoryMode::Auto));
    let c2 = conversation(&second, "ann").await;
    let from = model.requests().len();
    let done = ask(&second, &c2, "What months are in Q1?").await;
    assert_eq!(
        done.final_answer.as_deref(),
        Some("Q1 runs from April to June."),
        "{done:?}"
    );
    let again = ask(&second, &c2, "And Q1 once more?").await;
    assert_eq!(again.status, RunStatus::Answered, "{again:?}");
    let rounds = since(&model, from);
    assert!(rounds.len() >= 4, "{} requests", rounds.len());
    let system = rounds[0].system().to_owned();
    assert!(system.contains("<memory_index>"), "{system}");
    assert!(
        system.contains("- /memories/preferences.md: Fiscal year starts in April."),
        "{system}"
    );
    assert!(system.contains("not instructions"), "{system}");
    // Written mid-conversation, the region note is in memory but not in this prompt.
    assert!(memory.read(&ann, "regions.md").await.unwrap().is_some());
    for r in &rounds {
        assert_eq!(
            r.system(),
            system,
            "the system prompt changed in request {}",
            r.index()
        );
    }

    // Another person's conversation sees none of it: no index, an empty folder.
    let c3 = conversation(&second, "bob").await;
    let from = model.requests().len();
    let done = ask(&second, &c3, "What do you remember about me?").await;
    let answer = done.final_answer.unwrap();
    assert!(answer.contains("[ok]"), "{answer}");
    assert!(!answer.contains("preferences"), "{answer}");
    for r in since(&model, from) {
        assert!(!r.system().contains("memory_index"), "{}", r.system());
    }
    let bob = MemoryScope::user("bob").unwrap();
    assert!(memory.files(&bob).await.unwrap().is_empty());
}

#[tokio::test]
async fn refusals_are_tool_errors_the_model_reads() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let agent = agent(&model, Arc::clone(&store), Some(MemoryMode::Auto));
    let id = conversation(&agent, "ann").await;
    let done = ask(&agent, &id, "Try to escape.").await;
    let answer = done.final_answer.unwrap();
    assert!(answer.contains("[error]"), "{answer}");
    assert!(answer.contains("`..`"), "{answer}");
    assert!(
        answer.contains("is the team's; only an admin changes it"),
        "{answer}"
    );
    let memory = store.memory().unwrap();
    assert!(memory.files(&MemoryScope::Team).await.unwrap().is_empty());
    assert!(
        memory
            .files(&MemoryScope::user("ann").unwrap())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn ask_mode_pauses_a_write_and_off_offers_no_tool_and_no_index() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let memory = store.memory().unwrap();
    let ann = MemoryScope::user("ann").unwrap();

    let asking = agent(&model, Arc::clone(&store), Some(MemoryMode::Ask));
    let id = conversation(&asking, "ann").await;
    // A view does not wait.
    let viewed = ask(&asking, &id, "What do you remember about me?").await;
    assert_eq!(viewed.status, RunStatus::Answered, "{viewed:?}");
    let done = ask(&asking, &id, PREFERENCE).await;
    assert_eq!(done.status, RunStatus::AwaitingApproval, "{done:?}");
    assert!(memory.files(&ann).await.unwrap().is_empty());
    let pending = asking.pending_approvals(&id).await.unwrap();
    let done = asking
        .send(
            &id,
            Input::Decide(vec![ApprovalAnswer::approve(&pending[0].call_id)]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert_eq!(memory.files(&ann).await.unwrap().len(), 1);

    let off = agent(&model, Arc::clone(&store), None);
    let id = conversation(&off, "ann").await;
    let from = model.requests().len();
    let done = ask(&off, &id, "What months are in Q1?").await;
    assert_eq!(
        done.final_answer.as_deref(),
        Some("Q1 runs from January to March.")
    );
    for r in since(&model, from) {
        assert!(!r.offers("memory"));
        assert!(!r.system().contains("memory_index"), "{}", r.system());
    }
    let log = store.load(&id).await.unwrap().into_entries();
    assert!(log.iter().all(|e| e.kind() != Some(EntryKind::MemoryIndex)));
}
