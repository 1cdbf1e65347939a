//! Every strategy on random conversations (proptest) and on the long Claude Code sessions of
//! the shared fixtures (snapshots of the debug summary).

// Helpers outside #[test] fns fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use ba_context::{
    ContextBudget, ContextError, Encoding, MessageCounter, Pipeline, STRATEGY_NAMES, block_on,
};
use ba_protocol::{Content, ContentBlock, LlmError, LlmErrorKind, LogEntry, LogRole, LogToolCall};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Assistant(usize, bool),
    Tools(Vec<(usize, bool, bool)>),
    System(bool),
    Orphan,
    Hidden,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1usize..60).prop_map(Step::User),
        2 => ((1usize..80), any::<bool>()).prop_map(|(n, e)| Step::Assistant(n, e)),
        3 => prop::collection::vec(((1usize..200), any::<bool>(), prop::bool::weighted(0.15)), 1..4)
            .prop_map(Step::Tools),
        1 => any::<bool>().prop_map(Step::System),
        1 => Just(Step::Orphan),
        1 => Just(Step::Hidden),
    ]
}

fn words(n: usize, seed: usize) -> String {
    const W: &[&str] = &[
        "revenue",
        "must",
        "src/lib.rs",
        "42",
        "需要",
        "the",
        "table",
        "```",
        "ok",
    ];
    (0..n)
        .map(|i| W[(i * 7 + seed) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn build(steps: &[Step]) -> Vec<LogEntry> {
    let mut log = Vec::new();
    for (k, s) in steps.iter().enumerate() {
        let id = format!("e{k}");
        match s {
            Step::User(n) => {
                log.push(LogEntry::new(id, LogRole::User, "t").with_text(words(*n, k)))
            }
            Step::Assistant(n, err) => {
                let mut a = LogEntry::new(id, LogRole::Assistant, "t");
                a.content = Some(Content::Blocks(vec![
                    ContentBlock::thinking(words(*n / 2 + 1, k + 1), Some("sig".into())),
                    ContentBlock::text(words(*n, k)),
                ]));
                if *err {
                    a.llm_error = Some(LlmError {
                        kind: LlmErrorKind::StreamCut,
                        message: "cut".into(),
                        partial_output: None,
                    });
                }
                log.push(a);
            }
            Step::Tools(calls) => {
                let mut a = LogEntry::new(id.clone(), LogRole::Assistant, "t");
                a.tool_calls = Some(
                    calls
                        .iter()
                        .enumerate()
                        .map(|(j, _)| {
                            LogToolCall::new(
                                format!("{id}c{j}"),
                                "query",
                                &serde_json::json!({"q": j}),
                            )
                        })
                        .collect(),
                );
                log.push(a);
                for (j, (n, is_err, missing)) in calls.iter().enumerate() {
                    if *missing {
                        continue;
                    }
                    let mut r = LogEntry::new(format!("{id}r{j}"), LogRole::Tool, "t")
                        .with_text(words(*n, j));
                    r.tool_call_id = Some(format!("{id}c{j}"));
                    r.is_error = Some(*is_err);
                    log.push(r);
                }
            }
            Step::System(summary) => {
                let text = if *summary {
                    "CONVERSATION_SUMMARY\nearlier"
                } else {
                    "Be brief."
                };
                log.push(LogEntry::new(id, LogRole::System, "t").with_text(text));
            }
            Step::Orphan => {
                let mut r = LogEntry::new(id, LogRole::Tool, "t").with_text("stray");
                r.tool_call_id = Some("nowhere".into());
                log.push(r);
            }
            Step::Hidden => {
                let mut e = LogEntry::new(id, LogRole::Assistant, "t").with_text("ui");
                e.include_in_context = false;
                log.push(e);
            }
        }
    }
    log
}

/// Whether a strategy (not the repair on read) dropped something.
fn compressed(w: &ba_context::Window) -> bool {
    use ba_protocol::DropReason::*;
    w.dropped.iter().any(|d| {
        !matches!(
            d.reason,
            Excluded | HistoricalSystem | OrphanResult | DuplicateResult
        )
    })
}

fn assert_valid(window: &[LogEntry], latest_user: &str, compressed: bool) {
    if compressed {
        let first = window.iter().find(|e| e.role != LogRole::System);
        assert_eq!(
            first.map(|e| e.role),
            Some(LogRole::User),
            "opens with a user message"
        );
    }
    let mut calls = HashSet::new();
    let mut results = HashSet::new();
    for e in window {
        calls.extend(e.calls().iter().map(|c| c.id.clone()));
        if e.role == LogRole::Tool {
            assert!(
                results.insert(e.tool_call_id.clone().unwrap()),
                "duplicate result"
            );
        }
        assert!(e.include_in_context);
        if e.role == LogRole::System {
            assert!(e.text().starts_with("CONVERSATION_SUMMARY"));
        }
    }
    let results: HashSet<String> = results.into_iter().collect();
    assert_eq!(
        calls, results,
        "every call has its result and every result its call"
    );
    // And in order: the results of an assistant entry's calls follow it at once, before any
    // other message (providers refuse a result anywhere else).
    let mut open: Vec<String> = Vec::new();
    for e in window {
        if e.role == LogRole::Tool {
            let id = e.tool_call_id.clone().unwrap();
            let at = open.iter().position(|c| *c == id);
            assert!(at.is_some(), "result {id} does not follow its call at once");
            open.remove(at.unwrap());
        } else {
            assert!(open.is_empty(), "calls {open:?} unanswered before {}", e.id);
            open = e.calls().iter().map(|c| c.id.clone()).collect();
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
    assert!(
        window.iter().any(|e| e.id == latest_user),
        "latest user kept"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn every_strategy_keeps_the_invariants(
        steps in prop::collection::vec(step(), 1..40),
        total in 0usize..3_000,
        reserve in 0usize..400,
        system_len in 0usize..40,
    ) {
        let log = build(&steps);
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let system = words(system_len, 3);
        let budget = ContextBudget::new(total, reserve);
        let latest = log.iter().rev().find(|e| e.role == LogRole::User).map(|e| e.id.clone());
        for name in STRATEGY_NAMES {
            let pipeline = Pipeline::named(name, None).unwrap();
            match block_on(pipeline.run(&log, &system, &budget, &counter)) {
                Ok(out) => {
                    let latest = latest.as_deref().unwrap();
                    assert_valid(&out.window.entries(), latest, compressed(&out.window));
                    prop_assert!(out.used <= total - reserve, "{name}: {} > {}", out.used, total - reserve);
                    prop_assert_eq!(out.used, counter.system(&system) + counter.entries(&out.window.entries()));
                }
                Err(ContextError::EmptyBudget { .. }) => prop_assert!(total <= reserve),
                Err(ContextError::SystemTooLarge { system: s, available }) => {
                    prop_assert!(s >= available)
                }
                Err(ContextError::NoUserMessage) => prop_assert!(latest.is_none()),
                Err(ContextError::LatestUserTooLarge { id, needed, available }) => {
                    prop_assert_eq!(Some(id), latest.clone());
                    prop_assert!(needed > available);
                    let user = log.iter().find(|e| Some(&e.id) == latest.as_ref()).unwrap();
                    prop_assert!(counter.entry(user) + counter.reply_priming() > available);
                }
                Err(ContextError::PendingTooLarge { needed, budget: b, .. }) => {
                    prop_assert_eq!(b, total);
                    prop_assert!(needed > total, "{name}: needs {needed} of {total}");
                }
                Err(other) => prop_assert!(false, "{name}: unexpected error {other}"),
            }
        }
    }
}

#[test]
fn bad_inputs_get_clear_errors() {
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    let p = Pipeline::named("key-messages", None).unwrap();
    let user = LogEntry::new("u", LogRole::User, "t").with_text("hello there");
    let run = |log: &[LogEntry], system: &str, budget: ContextBudget| {
        block_on(p.run(log, system, &budget, &counter))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        run(&[], "", ContextBudget::new(100, 0)),
        "the conversation has no user message to answer"
    );
    assert!(
        run(std::slice::from_ref(&user), "", ContextBudget::new(0, 0)).contains("leaves no room")
    );
    assert!(
        run(
            std::slice::from_ref(&user),
            &"rules ".repeat(50),
            ContextBudget::new(40, 0)
        )
        .starts_with("the system prompt takes")
    );
    let big = LogEntry::new("big", LogRole::User, "t").with_text("word ".repeat(500));
    let msg = run(&[big], "", ContextBudget::new(100, 0));
    assert!(msg.contains("latest user message `big`"), "{msg}");
    let mut orphan = LogEntry::new("r", LogRole::Tool, "t").with_text("x");
    orphan.tool_call_id = Some("c".into());
    let out = block_on(p.run(&[orphan, user], "", &ContextBudget::new(100, 0), &counter)).unwrap();
    assert_eq!(out.window.kept_ids(), ["u"]);
    assert_eq!(out.window.dropped[0].reason.as_str(), "orphan_result");
    assert!(
        Pipeline::named("magic", None)
            .unwrap_err()
            .to_string()
            .contains("unknown strategy `magic`")
    );
}

#[test]
fn long_sessions_fit_32k_and_8k_with_every_strategy() {
    let Some(dir) = ba_testkit::fixture("transcripts/spotter") else {
        return;
    };
    let read = std::fs::read_dir(&dir).unwrap();
    let mut files: Vec<_> = read
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 1_000_000))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "five long sessions");
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let log = ba_protocol::claude_code::session_to_log(&text).value;
        let latest = log
            .iter()
            .rev()
            .find(|e| e.role == LogRole::User && e.include_in_context)
            .unwrap();
        let ids: HashSet<&str> = log.iter().map(|e| e.id.as_str()).collect();
        let mut report = String::new();
        for total in [32_000usize, 8_000] {
            let budget = ContextBudget::new(total, total / 8);
            for name in STRATEGY_NAMES {
                let pipeline = Pipeline::named(name, None).unwrap();
                let out = block_on(pipeline.run(&log, "", &budget, &counter))
                    .unwrap_or_else(|e| panic!("{} {name} {total}: {e}", path.display()));
                let entries = out.window.entries();
                assert_valid(&entries, &latest.id, compressed(&out.window));
                assert!(out.used <= total - total / 8);
                for e in &entries {
                    assert!(
                        ids.contains(e.id.as_str())
                            || e.id.ends_with("#aborted")
                            || e.id.starts_with("summary-")
                            || e.id.starts_with("resume-")
                            || e.id.ends_with("#recalled"),
                        "unknown id {}",
                        e.id
                    );
                }
                let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
                for d in &out.window.dropped {
                    *reasons.entry(d.reason.as_str()).or_default() += 1;
                }
                let mut changes = std::collections::BTreeMap::<String, usize>::new();
                for c in &out.window.changed {
                    *changes.entry(format!("{:?}", c.kind)).or_default() += 1;
                }
                report.push_str(&format!(
                    "{name} @ {total}: before={} used={} kept={} dropped={reasons:?} changed={changes:?}\n",
                    out.window.tokens_before,
                    out.used,
                    entries.len(),
                ));
            }
        }
        let stem = path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .chars()
            .take(8)
            .collect::<String>();
        insta::assert_snapshot!(format!("session_{stem}"), report);
    }
}
