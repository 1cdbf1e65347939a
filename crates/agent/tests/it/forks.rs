#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on a broken invariant"
)]

//! Forks and rewinds in the loop, with a model that decides (the scripted model of
//! `ba-testkit`): a fork at the second answer takes another third question with the first two
//! in its window and none of the parent's third; a rewind of the round that activated a skill
//! leaves the skill inactive; the request after a rewind starts with the same bytes as the
//! request that first held what stayed (the provider's cache prefix).

use std::sync::Arc;

use ba_agent::{Agent, Input, RunStatus};
use ba_model::{AnthropicClient, ApiKey};
use ba_storage::{ConversationId, ConversationStore as _, FileStore, NewConversation};
use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::{Value, json};

async fn model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "activate the skill when asked to tidy",
            |r| r.last_user_text().contains("tidy") && r.round() == 0,
            |_| Turn::call("activate_skill", json!({"skill": "tidy"})),
        )
        .rule(
            "say the skill is on",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "activate_skill" && !t.is_error)
            },
            |_| Turn::text("The tidy skill is on."),
        )
        .rule(
            "answer what was said",
            |r| r.tool_results().is_empty(),
            |r| Turn::text(format!("Answer to: {}", r.last_user_text())),
        )
        .start()
        .await
}

fn agent(model: &ScriptedModel, dir: &std::path::Path) -> Agent {
    agent_with_clock(model, dir, Arc::new(ba_storage::SystemClock))
}

/// The agent, its store on `clock` (appends and files are stamped by it).
fn agent_with_clock(
    model: &ScriptedModel,
    dir: &std::path::Path,
    clock: Arc<dyn ba_storage::Clock>,
) -> Agent {
    let skill = dir.join("skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy the tables.\n---\nSORT-EVERY-TABLE by its first column.\n",
    )
    .unwrap();
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    Agent::builder(Arc::new(client))
        .store(Arc::new(
            FileStore::open_with(
                dir.join("home"),
                ba_storage::FileStoreOptions::default().with_clock(clock),
            )
            .unwrap(),
        ))
        .skills(Arc::new(ba_skills::SkillSet::load([dir.join("skills")])))
        .sub_agents(false)
        .build()
        .unwrap()
}

async fn ask(agent: &Agent, id: &ConversationId, text: &str) -> String {
    let done = agent.send(id, Input::message(text)).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    done.final_answer.unwrap()
}

/// The user texts a request shows, in order.
fn user_texts(r: &Request) -> Vec<String> {
    r.messages()
        .iter()
        .filter(|m| m.role == ba_testkit::model::Role::User && m.call_id.is_none())
        .map(|m| m.text.clone())
        .filter(|t| !t.is_empty())
        .collect()
}

#[tokio::test]
async fn a_fork_at_the_second_answer_takes_another_third_question() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    ask(&agent, &id, "First: sales by region?").await;
    ask(&agent, &id, "Second: only the West?").await;
    let second_answer = agent.store().metadata(&id).await.unwrap().last_seq;
    ask(&agent, &id, "Third: and the East?").await;
    let fork = agent.fork(&id, second_answer).await.unwrap();
    let answer = ask(&agent, &fork, "Third, instead: and the North?").await;
    assert_eq!(answer, "Answer to: Third, instead: and the North?");
    let last = model.requests().pop().unwrap();
    assert_eq!(
        user_texts(&last),
        [
            "First: sales by region?",
            "Second: only the West?",
            "Third, instead: and the North?"
        ]
    );
    assert!(
        !last.shows("and the East?"),
        "the parent's third question leaked"
    );
    // The parent is as it was.
    let parent = agent.store().load(&id).await.unwrap().into_entries();
    assert!(parent.iter().any(|e| e.text().contains("and the East?")));
    assert!(!parent.iter().any(|e| e.text().contains("the North?")));
}

#[tokio::test]
async fn a_rewind_of_the_round_that_activated_a_skill_leaves_it_inactive() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    ask(&agent, &id, "What tables are there?").await;
    let before = agent.store().metadata(&id).await.unwrap().last_seq;
    assert_eq!(
        ask(&agent, &id, "Please tidy them.").await,
        "The tidy skill is on."
    );
    ask(&agent, &id, "Anything else?").await;
    assert!(
        model.requests().last().unwrap().shows("SORT-EVERY-TABLE"),
        "the skill's instructions are in force before the rewind"
    );
    // Cutting inside the round of tool calls is refused.
    let entries = agent.store().load(&id).await.unwrap().entries;
    let call = entries
        .iter()
        .find(|s| !s.entry.calls().is_empty())
        .unwrap()
        .seq;
    assert!(agent.rewind(&id, call).await.is_err());
    let taken = agent.rewind(&id, before).await.unwrap();
    assert!(taken >= 5, "taken back: {taken}");
    let answer = ask(&agent, &id, "What now?").await;
    assert_eq!(answer, "Answer to: What now?");
    let last = model.requests().pop().unwrap();
    assert!(!last.shows("SORT-EVERY-TABLE"), "the skill is still active");
    assert_eq!(user_texts(&last), ["What tables are there?", "What now?"]);
    // The old branch is still in the log, and a fork at the entry before the rewind brings it
    // back as a conversation of its own, skill and all.
    let all = agent.store().load(&id).await.unwrap().entries;
    assert!(
        all.iter()
            .any(|s| s.entry.text().contains("Please tidy them."))
    );
    let rewind_seq = all
        .iter()
        .find(|s| s.entry.kind() == Some(ba_protocol::EntryKind::Rewind))
        .unwrap()
        .seq;
    let restored = agent.fork(&id, rewind_seq - 1).await.unwrap();
    ask(&agent, &restored, "And now?").await;
    let last = model.requests().pop().unwrap();
    assert!(
        last.shows("SORT-EVERY-TABLE"),
        "the old branch's skill is back"
    );
    assert_eq!(
        user_texts(&last),
        [
            "What tables are there?",
            "Please tidy them.",
            "Anything else?",
            "And now?"
        ]
    );
}

/// Asks two questions, rewinds the second and asks another in its place: the conversation, and
/// the requests that held the second question and the one in its place.
async fn rewound(agent: &Agent, model: &ScriptedModel) -> (ConversationId, Request, Request) {
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    ask(agent, &id, "One: the totals?").await;
    let kept = agent.store().metadata(&id).await.unwrap().last_seq;
    ask(agent, &id, "Two: by month?").await;
    let with_two = model.requests().pop().unwrap();
    agent.rewind(&id, kept).await.unwrap();
    ask(agent, &id, "Two, instead: by product?").await;
    let after = model.requests().pop().unwrap();
    (id, with_two, after)
}

#[tokio::test]
async fn the_request_after_a_rewind_keeps_the_cache_prefix_of_what_stayed() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let (_, with_two, after) = rewound(&agent, &model).await;
    let (a, b) = (with_two.body(), after.body());
    assert_eq!(a["system"], b["system"], "the system prompt changed");
    assert_eq!(a["tools"], b["tools"], "the tool list changed");
    let messages = |v: &Value| v["messages"].as_array().unwrap().clone();
    let (ma, mb) = (messages(a), messages(b));
    assert_eq!(ma.len(), mb.len());
    // Everything before the new question is byte for byte what it was.
    let strip = |m: &Value| {
        let mut m = m.clone();
        if let Some(blocks) = m["content"].as_array_mut() {
            for b in blocks {
                if let Some(o) = b.as_object_mut() {
                    o.remove("cache_control");
                }
            }
        }
        m
    };
    for i in 0..ma.len() - 1 {
        assert_eq!(
            strip(&ma[i]),
            strip(&mb[i]),
            "message {i} of the prefix changed"
        );
    }
    assert!(after.last_user_text().contains("by product"));
}

/// A fork has the files its parent had at the cut, under the same ids (so the history it
/// shares names files it can read); the parent's later files stay the parent's.
#[tokio::test]
async fn a_fork_shares_the_files_its_parent_had_at_the_cut() {
    use ba_storage::NewFile;
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    // The store's clock stamps both the entries and the files: moved on by hand below.
    let clock = Arc::new(ba_storage::ManualClock::new(1_700_000_000_000));
    let agent = agent_with_clock(&model, dir.path(), clock.clone());
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let files = agent.workspace().unwrap().clone();
    files
        .put_bytes(
            &id,
            NewFile::upload("sales.csv", ""),
            b"region,amount\nWest,7\n",
        )
        .await
        .unwrap();
    ask(&agent, &id, "Read upload_001, please.").await;
    let cut = agent.store().metadata(&id).await.unwrap().last_seq;
    // A file sent with the next question would be the fork's (it is that question's, which the
    // fork asks again); one made after the next question is the parent's alone.
    clock.advance(1_000);
    ask(&agent, &id, "And the totals?").await;
    clock.advance(1_000);
    files
        .put_bytes(&id, NewFile::upload("later.csv", ""), b"later")
        .await
        .unwrap();
    let fork = agent.fork(&id, cut).await.unwrap();
    let ids: Vec<String> = files
        .list(&fork)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.id.to_string())
        .collect();
    assert_eq!(ids, ["upload_001"]);
    let (_, bytes) = files
        .read_bytes(&fork, "upload_001", 1 << 10)
        .await
        .unwrap();
    assert_eq!(bytes, b"region,amount\nWest,7\n");
    let own = files
        .put_bytes(&fork, NewFile::upload("mine.csv", ""), b"mine")
        .await
        .unwrap();
    assert_eq!(
        own.id, "upload_002",
        "the fork's next id follows what it shares"
    );
}

/// The metrics report counts the spend of every call made, a rewind's taken-back calls
/// included, and says apart what the history holds after the rewind.
#[tokio::test]
async fn the_report_counts_every_call_made_and_what_the_history_holds() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let (id, _, _) = rewound(&agent, &model).await;
    let report = agent.report(&id).await.unwrap();
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["model_calls"], 3, "every call made: {v:#}");
    assert_eq!(v["user_messages"], 3, "{v:#}");
    let h = &v["history"];
    assert_eq!(h["rewinds"], 1, "{v:#}");
    assert_eq!(h["taken_back_calls"], 1, "{v:#}");
    assert_eq!(
        h["taken_back_entries"], 2,
        "the question and its answer: {v:#}"
    );
    assert_eq!(h["model_calls"], 2, "{v:#}");
    assert_eq!(h["user_messages"], 2, "{v:#}");
    assert_eq!(h["final_answers"], 2, "{v:#}");
    assert!(
        h["input_tokens"].as_u64().unwrap() < v["input_tokens"].as_u64().unwrap(),
        "{v:#}"
    );
    let text = report.render(false);
    assert!(
        text.contains("  rewinds: 1 took back 2 entries (1 model calls), counted above as spent\n"),
        "{text}"
    );
    assert!(
        text.contains("  history now: 4 entries · user messages 2 · 2 model calls"),
        "{text}"
    );
}

/// The context preview (the page's context dialog, `GET …/context`) reads the history a rewind
/// left: the entries it took back are neither kept nor counted.
#[tokio::test]
async fn the_context_preview_leaves_out_what_a_rewind_took_back() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    ask(&agent, &id, "One: the totals?").await;
    let kept = agent.store().metadata(&id).await.unwrap().last_seq;
    let before = agent.context_debug(&id).await.unwrap();
    ask(&agent, &id, "Two: by month?").await;
    let taken: Vec<String> = agent.entries(&id).await.unwrap()[kept as usize..]
        .iter()
        .map(|e| e.id.clone())
        .collect();
    assert!(!taken.is_empty());
    agent.rewind(&id, kept).await.unwrap();
    let after = agent.context_debug(&id).await.unwrap();
    for taken in &taken {
        assert!(
            !after.kept.contains(taken),
            "{taken} is kept after the rewind"
        );
    }
    assert_eq!(after.kept, before.kept);
    assert_eq!(after.tokens_before, before.tokens_before);
}

/// A rewind is refused, saying why, to a point past the end of the log, to one with nothing of
/// the history after it (also once a rewind took everything after it back), and to one inside
/// a round of tool calls (a call kept, its result taken back).
#[tokio::test]
async fn a_rewind_is_refused_where_it_would_take_nothing_back_or_split_a_round_of_calls() {
    let dir = tempfile::tempdir().unwrap();
    let model = model().await;
    let agent = agent(&model, dir.path());
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    ask(&agent, &id, "First: the totals?").await;
    let question = agent.store().metadata(&id).await.unwrap().last_seq;
    ask(&agent, &id, "Please tidy the tables").await;
    let log = agent.store().load(&id).await.unwrap();
    let call = log
        .entries
        .iter()
        .find(|s| !s.entry.calls().is_empty())
        .expect("the skill's activation is a call")
        .seq;
    let refusal = |r: Result<usize, ba_agent::AgentError>| r.unwrap_err().to_string();
    let past = refusal(agent.rewind(&id, log.last_seq + 1).await);
    assert!(
        past.contains(&format!("the log ends at entry {}", log.last_seq)),
        "{past}"
    );
    let at_end = refusal(agent.rewind(&id, log.last_seq).await);
    assert!(
        at_end.contains("no entry of the history comes after it"),
        "{at_end}"
    );
    let inside = refusal(agent.rewind(&id, call).await);
    assert!(inside.contains("inside a round of tool calls"), "{inside}");
    // Nothing was appended by a refusal.
    assert_eq!(
        agent.store().metadata(&id).await.unwrap().last_seq,
        log.last_seq
    );
    let taken = agent.rewind(&id, question).await.unwrap();
    assert_eq!(taken as u64, log.last_seq - question);
    let again = refusal(agent.rewind(&id, question).await);
    assert!(
        again.contains("no entry of the history comes after it"),
        "{again}"
    );
}
