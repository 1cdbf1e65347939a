//! Spending caps: a run ends `budget_reached` before the model call after the one that reached
//! a cap (that call finished and is in the log), nothing of the conversation is lost, and it
//! goes on once the cap is raised; a person's month holds across their conversations.

use std::collections::BTreeMap;
use std::sync::Arc;

use ba_agent::{Agent, AgentEvent, Budgets, ErrorKind, Input, ModelPrice, Prices, RunStatus};
use ba_model::ReplayClient;
use ba_protocol::LogRole;
use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation, Role, UserBudget};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Lookup {
    key: String,
}

fn lookup() -> impl ba_tools::Tool {
    typed_tool("lookup", "Looks a key up.", |a: Lookup, _| async move {
        Ok(json!({"key": a.key, "value": a.key.len()}))
    })
}

/// 600,000 input tokens of model `m`: $0.60 at a dollar per million.
fn usage() -> Value {
    json!({"input_tokens": 600_000, "output_tokens": 0, "cache_read_tokens": 0,
           "cache_write_tokens": 0})
}

fn tool_turn(call: &str) -> Value {
    json!({"response": {"message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": call, "name": "lookup", "input": {"key": call}}]},
        "stop_reason": "tool_use", "usage": usage(), "id": call, "model": "m"}})
}

fn answer_turn(text: &str) -> Value {
    json!({"response": {"message": {"role": "assistant", "content": text},
        "stop_reason": "end_turn", "usage": usage(), "id": "a", "model": "m"}})
}

fn prices() -> Prices {
    let mut m = BTreeMap::new();
    m.insert(
        "m".to_owned(),
        ModelPrice {
            input: 1.0,
            output: 1.0,
            cache_read: None,
            cache_write: None,
        },
    );
    Prices::new(m).unwrap()
}

fn agent(store: &Arc<FileStore>, turns: &[Value], budgets: Budgets) -> Agent {
    let client =
        ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test").unwrap();
    let store: Arc<dyn ConversationStore> = store.clone();
    Agent::builder(Arc::new(client))
        .store(store)
        .tool(lookup())
        .configure(|s| {
            s.prices = prices();
            s.budgets = budgets;
        })
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

fn budget_error(events: &[AgentEvent]) -> Option<String> {
    events.iter().find_map(|e| match e {
        AgentEvent::Error {
            kind: ErrorKind::BudgetReached,
            message,
            resumable: true,
            ..
        } => Some(message.clone()),
        _ => None,
    })
}

fn finished(events: &[AgentEvent]) -> ba_agent::RunSummary {
    match events.last() {
        Some(AgentEvent::Finished(s)) => s.clone(),
        other => panic!("the run did not finish: {other:?}"),
    }
}

#[tokio::test]
async fn a_run_stops_at_the_conversation_cap_after_the_call_in_flight_and_goes_on_when_raised() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let turns = [tool_turn("c1"), tool_turn("c2"), answer_turn("Done.")];
    let capped = Budgets {
        conversation_usd: Some(1.0),
        ..Budgets::default()
    };
    let a = agent(&store, &turns, capped);
    let id = conversation(&a, "alice").await;

    let events = a
        .send(&id, Input::message("Look it up."))
        .collect_events()
        .await;
    let summary = finished(&events);
    assert_eq!(summary.status, RunStatus::BudgetReached);
    assert_eq!(
        summary.rounds, 2,
        "the second call, in flight at the cap, finished"
    );
    let said = budget_error(&events).expect("a resumable budget_reached error event");
    assert!(
        said.contains("$1.00") && said.contains("$1.20"),
        "names the cap and the spend: {said}"
    );
    // Nothing lost: both calls and both results are in the log.
    let log = store.load(&id).await.unwrap().into_entries();
    let results = log.iter().filter(|e| e.role == LogRole::Tool).count();
    assert_eq!(results, 2, "the results of the call in flight are kept");
    let report = a.spend(&id).await.unwrap();
    assert!((report.conversation.usd - 1.2).abs() < 1e-9);
    assert_eq!(report.owner, "alice");
    assert!(report.reached.is_some());

    // Still at the cap: a new run ends at once, before calling the model.
    let again = a.send(&id, Input::Continue).collect_events().await;
    assert_eq!(finished(&again).status, RunStatus::BudgetReached);
    assert_eq!(finished(&again).rounds, 0);

    // Raised: the same conversation goes on from where it stopped, on the recorded turns.
    let raised = Budgets {
        conversation_usd: Some(5.0),
        ..Budgets::default()
    };
    let b = agent(&store, &turns[2..], raised);
    let events = b.send(&id, Input::Continue).collect_events().await;
    let summary = finished(&events);
    assert_eq!(summary.status, RunStatus::Answered, "{summary:?}");
    assert_eq!(summary.final_answer.as_deref(), Some("Done."));
}

#[tokio::test]
async fn a_token_cap_counts_models_without_a_price() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let unpriced = |t: Value| {
        let mut t = t;
        t["response"]["model"] = json!("local-model");
        t
    };
    let turns = [unpriced(tool_turn("c1")), unpriced(answer_turn("Done."))];
    let capped = Budgets {
        conversation_tokens: Some(500_000),
        ..Budgets::default()
    };
    let a = agent(&store, &turns, capped);
    let id = conversation(&a, "alice").await;
    let events = a
        .send(&id, Input::message("Look it up."))
        .collect_events()
        .await;
    assert_eq!(finished(&events).status, RunStatus::BudgetReached);
    let said = budget_error(&events).unwrap();
    assert!(said.contains("500000 tokens"), "{said}");
    let report = a.spend(&id).await.unwrap();
    assert_eq!(report.conversation.unpriced_calls, 1);
    assert_eq!(report.conversation.usd, 0.0);
}

#[tokio::test]
async fn a_persons_month_holds_across_their_conversations_and_their_own_cap_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let directory = store.directory().expect("the file store keeps people");
    directory.add_user("alice", Role::Analyst).await.unwrap();
    directory.add_user("bob", Role::Analyst).await.unwrap();
    // The configuration allows $100; alice's own cap is $1.
    directory
        .set_budget(
            "alice",
            UserBudget {
                month_usd: Some(1.0),
                month_tokens: None,
            },
        )
        .await
        .unwrap();
    let config = Budgets {
        user_month_usd: Some(100.0),
        ..Budgets::default()
    };
    let turns = [
        answer_turn("First."),
        answer_turn("Second."),
        answer_turn("Bob's."),
        answer_turn("Third."),
    ];
    let a = agent(&store, &turns, config);
    let first = conversation(&a, "alice").await;
    let second = conversation(&a, "alice").await;
    let third = conversation(&a, "alice").await;
    let bobs = conversation(&a, "bob").await;

    for (id, expected) in [(&first, "First."), (&second, "Second.")] {
        let events = a.send(id, Input::message("Go.")).collect_events().await;
        assert_eq!(finished(&events).final_answer.as_deref(), Some(expected));
    }
    // $1.20 spent over two conversations: the third stops before its first call.
    let events = a.send(&third, Input::message("Go.")).collect_events().await;
    assert_eq!(finished(&events).status, RunStatus::BudgetReached);
    assert_eq!(finished(&events).rounds, 0);
    let said = budget_error(&events).unwrap();
    assert!(said.contains("alice") && said.contains("$1.00"), "{said}");
    // The question is kept for when the run goes on.
    let log = store.load(&third).await.unwrap().into_entries();
    assert!(
        log.iter()
            .any(|e| e.role == LogRole::User && e.text() == "Go.")
    );
    // Bob's month is his own.
    let events = a.send(&bobs, Input::message("Go.")).collect_events().await;
    assert_eq!(finished(&events).final_answer.as_deref(), Some("Bob's."));
    let month = ba_storage::month_of(chrono_now_ms());
    let spent = directory.spend("alice", &month).await.unwrap();
    assert!((spent.usd - 1.2).abs() < 1e-9, "{spent:?}");
    assert_eq!(spent.tokens, 1_200_000);

    // Raised by an admin: the third conversation answers its kept question.
    directory
        .set_budget(
            "alice",
            UserBudget {
                month_usd: Some(10.0),
                month_tokens: None,
            },
        )
        .await
        .unwrap();
    let events = a.send(&third, Input::Resume).collect_events().await;
    let summary = finished(&events);
    assert_eq!(summary.status, RunStatus::Answered, "{summary:?}");
    assert_eq!(summary.final_answer.as_deref(), Some("Third."));
}

fn chrono_now_ms() -> i64 {
    use ba_storage::Clock as _;
    ba_storage::SystemClock.now_ms()
}

#[tokio::test]
async fn runs_and_rewinds_record_who_made_them_and_the_report_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::open(dir.path()).unwrap());
    let turns = [answer_turn("One."), answer_turn("Two.")];
    let a = agent(&store, &turns, Budgets::default());
    let id = conversation(&a, "alice").await;
    for text in ["First.", "Second."] {
        let options = ba_agent::RunOptions::default().with_actor("alice");
        let run = a.start(&id, Input::message(text), options).await.unwrap();
        run.finish().await;
    }
    a.rewind_by(&id, 2, Some("maria")).await.unwrap();
    let log = store.load(&id).await.unwrap().into_entries();
    let asked: Vec<Option<&str>> = log
        .iter()
        .filter(|e| e.role == LogRole::User)
        .map(|e| e.records.actor.as_deref())
        .collect();
    assert_eq!(asked, [Some("alice"), Some("alice")]);
    let report = a.report(&id).await.unwrap();
    assert_eq!(report.actors["alice"].runs, 2);
    assert_eq!(report.actors["maria"].rewinds, 1);
    let text = report.render(false);
    assert!(
        text.contains("people: alice (2 runs) · maria (0 runs, 1 rewind)"),
        "{text}"
    );
    // A fork by another person is theirs; without one it stays the owner's.
    let theirs = a.fork_as(&id, 2, Some("vera")).await.unwrap();
    assert_eq!(store.metadata(&theirs).await.unwrap().owner, "vera");
    let kept = a.fork(&id, 2).await.unwrap();
    assert_eq!(store.metadata(&kept).await.unwrap().owner, "alice");
}
