//! Persisted compaction, played the way the agent plays it: a conversation grows turn by turn,
//! each build's compaction record is appended to the log, and the next build starts from it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::HashSet;

use ba_context::{BuildRequest, BuilderSettings, ContextBuilder, PromptParts};
use ba_context::{ContextBudget, Encoding, MessageCounter, Pipeline, block_on};
use ba_protocol::{LogEntry, LogRole, LogToolCall};
use proptest::prelude::*;

/// One turn of a generated conversation.
#[derive(Debug, Clone)]
enum Turn {
    /// A user message of this many sentences.
    User(usize),
    /// An answer of this many sentences.
    Answer(usize),
    /// A tool group: results of these many lines each.
    Tools(Vec<usize>),
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        2 => (1usize..6).prop_map(Turn::User),
        2 => (1usize..30).prop_map(Turn::Answer),
        4 => proptest::collection::vec(1usize..300, 1..4).prop_map(Turn::Tools),
    ]
}

fn entries(turns: &[Turn]) -> Vec<Vec<LogEntry>> {
    let mut out = Vec::new();
    let mut n = 0;
    let mut id = |prefix: &str| {
        n += 1;
        format!("{prefix}{n}")
    };
    for t in turns {
        match t {
            Turn::User(k) => {
                let text: Vec<String> = (0..*k)
                    .map(|i| format!("Please keep requirement {i} with code RQ-{i:04}."))
                    .collect();
                out.push(vec![
                    LogEntry::new(id("u"), LogRole::User, "t").with_text(text.join(" ")),
                ]);
            }
            Turn::Answer(k) => {
                out.push(vec![
                    LogEntry::new(id("a"), LogRole::Assistant, "t")
                        .with_text("The figures look consistent across the regions. ".repeat(*k)),
                ]);
            }
            Turn::Tools(sizes) => {
                let mut call = LogEntry::new(id("c"), LogRole::Assistant, "t");
                let calls: Vec<LogToolCall> = sizes
                    .iter()
                    .map(|_| {
                        LogToolCall::new(
                            id("call"),
                            "query_database",
                            &serde_json::json!({"query": "SELECT 1"}),
                        )
                    })
                    .collect();
                let mut group = Vec::new();
                for (c, lines) in calls.iter().zip(sizes) {
                    let mut text = String::from("region,amount\n");
                    for l in 0..*lines {
                        text.push_str(&format!("R{l},{}\n", l * 13));
                    }
                    text.push_str(&format!("TOTAL,{}\n", lines * 1_000 + 7));
                    let mut r = LogEntry::new(id("r"), LogRole::Tool, "t").with_text(text);
                    r.tool_call_id = Some(c.id.clone());
                    r.tool_name = Some("query_database".into());
                    group.push(r);
                }
                call.tool_calls = Some(calls);
                group.insert(0, call);
                out.push(group);
            }
        }
    }
    out
}

fn builder(total: usize, strategy: &str) -> ContextBuilder {
    ContextBuilder::new(
        PromptParts {
            base_rules: "You are a business analyst.".into(),
            ..PromptParts::default()
        },
        BuilderSettings::default(),
        ContextBudget::new(total, total / 10),
        Pipeline::named(strategy, None).unwrap(),
        MessageCounter::exact(Encoding::Cl100kBase),
    )
}

/// Every call's result follows its call at once, before any other message, and every result
/// answers a call.
fn pairs_intact(entries: &[LogEntry]) -> bool {
    let mut open: Vec<&str> = Vec::new();
    for e in entries {
        if e.role == LogRole::Tool {
            let Some(at) = open
                .iter()
                .position(|c| Some(*c) == e.tool_call_id.as_deref())
            else {
                return false;
            };
            open.remove(at);
        } else {
            if !open.is_empty() {
                return false;
            }
            open = e.calls().iter().map(|c| c.id.as_str()).collect();
        }
    }
    open.is_empty()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_users_pairs_and_a_stable_front(
        turns in proptest::collection::vec(turn(), 4..60),
        total in 3_000usize..20_000,
        strategy in prop::sample::select(ba_context::STRATEGY_NAMES),
    ) {
        let b = builder(total, strategy);
        let available = total - total / 10;
        let mut log: Vec<LogEntry> = Vec::new();
        let mut previous: Option<Vec<LogEntry>> = None;
        let mut records = 0;
        let mut users: Vec<String> = Vec::new();
        for group in entries(&turns) {
            let is_user = group[0].role == LogRole::User;
            if is_user {
                users.push(group[0].id.clone());
            }
            log.extend(group);
            if users.is_empty() {
                continue;
            }
            // User messages are a few sentences and budgets 3k and more: a build succeeds, or
            // the results the model is about to read are over the whole budget even as
            // previews — a typed refusal naming the budget it needs, after which the
            // conversation goes on (the case is not discarded).
            let built = match block_on(b.build(&BuildRequest { entries: &log, ..BuildRequest::default() })) {
                Ok(built) => built,
                Err(ba_context::ContextError::PendingTooLarge { needed, budget, .. }) => {
                    prop_assert!(needed > budget && budget == total, "{needed} vs {budget}");
                    continue;
                }
                Err(e) => panic!("{strategy} at {total}: {e}"),
            };
            let window = &built.entries[..built.stable];
            prop_assert!(pairs_intact(window), "pairs broken");
            prop_assert!(built.debug.usage.used <= available, "{} over {available}", built.debug.usage.used);
            match &built.compaction {
                None => {
                    // Under the trigger: the previous window is the front of this one.
                    if let Some(prev) = &previous {
                        prop_assert!(window.len() >= prev.len());
                        prop_assert_eq!(&window[..prev.len()], &prev[..]);
                    }
                }
                Some(record) => {
                    records += 1;
                    // Every user message is there, whole or as its key sentences.
                    let ids: HashSet<&str> = window.iter().map(|e| e.id.as_str()).collect();
                    let users_fit = {
                        let c = MessageCounter::exact(Encoding::Cl100kBase);
                        let all: Vec<LogEntry> = log.iter().filter(|e| e.role == LogRole::User).cloned().collect();
                        c.entries(&all) * 2 < available
                    };
                    // Key-messages keeps them (the others may drop old rounds whole).
                    if users_fit && strategy == "key-messages" {
                        for u in &users {
                            prop_assert!(ids.contains(u.as_str()), "user message {u} lost");
                        }
                    }
                    log.push(record.clone().into_entry(format!("rec{records}"), "t"));
                    // The record gives back the window that was sent.
                    let again = block_on(b.build(&BuildRequest { entries: &log, ..BuildRequest::default() })).unwrap();
                    prop_assert!(again.compaction.is_none());
                    prop_assert_eq!(&again.entries[..again.stable], window);
                }
            }
            previous = Some(window.to_vec());
        }
    }
}
