//! Property tests: Anthropic → log → Anthropic and OpenAI → log → OpenAI are identities, and
//! log entries survive their own JSON round trip.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::Problem;
use ba_protocol::Role;
use ba_protocol::anthropic::{AnthropicMessage, AnthropicRequest};
use ba_protocol::convert::{
    SequentialStamp, anthropic_to_log, log_to_anthropic, log_to_openai, openai_to_log,
};
use ba_protocol::openai::{ChatMessage, ChatRequest, ChatToolCall};
use ba_protocol::{
    CacheControl, Content, ContentBlock, ImageBlock, ImageSource, JsonMap, TextBlock,
    ThinkingBlock, ToolResultBlock, ToolResultContent, ToolUseBlock,
};
use ba_protocol::{FunctionCall, LogEntry, LogRole};
use proptest::prelude::*;
use serde_json::{Value, json};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,!?]{0,40}",
        "[\\p{Han}a-z ]{0,20}",
        Just("line one\nline two\n\ttabbed \"quoted\" \\ back".to_owned()),
        Just("emoji 👍🏽 and flags 🇫🇷".to_owned()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1.0e9f64..1.0e9).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Extra fields with names no known field uses.
fn extra() -> impl Strategy<Value = JsonMap> {
    prop::collection::btree_map("x_[a-z]{1,6}", json_value(), 0..2)
        .prop_map(|m| m.into_iter().collect())
}

fn cache_control() -> impl Strategy<Value = Option<CacheControl>> {
    prop_oneof![3 => Just(None), 1 => Just(Some(CacheControl::ephemeral()))]
}

fn text_block() -> impl Strategy<Value = ContentBlock> {
    (text(), cache_control(), extra()).prop_map(|(text, cache_control, extra)| {
        ContentBlock::Text(TextBlock {
            text,
            cache_control,
            extra,
        })
    })
}

fn unknown_block() -> impl Strategy<Value = ContentBlock> {
    // Block types Anthropic may add; OpenAI part names (`image_url`, …) are not Anthropic blocks.
    (
        prop::sample::select(vec![
            "document",
            "fallback",
            "compaction",
            "server_tool_use",
            "web_search_tool_result",
        ]),
        extra(),
    )
        .prop_map(|(kind, mut extra)| {
            extra.insert("type".to_owned(), Value::from(kind));
            ContentBlock::Unknown(extra)
        })
}

fn image_block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        "[A-Za-z0-9+/]{4,16}".prop_map(|data| ImageSource::Base64 {
            media_type: "image/png".into(),
            data
        }),
        "https://example\\.com/[a-z]{1,8}\\.png".prop_map(|url| ImageSource::Url { url }),
    ]
    .prop_map(|source| {
        ContentBlock::Image(ImageBlock {
            source,
            cache_control: None,
            extra: JsonMap::new(),
        })
    })
}

fn assistant_other_block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        4 => text_block(),
        2 => (text(), prop::option::of("[A-Za-z0-9]{8,16}"), extra())
            .prop_map(|(thinking, signature, extra)| ContentBlock::Thinking(ThinkingBlock { thinking, signature, extra })),
        1 => unknown_block(),
    ]
}

/// One assistant turn: its blocks (tool calls interleaved anywhere) and the call ids.
fn assistant_turn(turn: usize) -> impl Strategy<Value = (AnthropicMessage, Vec<String>)> {
    let calls = prop::collection::vec(("[a-z_]{1,10}", object(), cache_control(), extra()), 0..4);
    let others = prop::collection::vec(assistant_other_block(), 0..3);
    (calls, others, any::<u64>(), any::<bool>(), text()).prop_map(
        move |(calls, others, seed, as_text, plain)| {
            if calls.is_empty() && others.is_empty() && as_text {
                return (
                    AnthropicMessage::new(Role::Assistant, Content::Text(plain)),
                    Vec::new(),
                );
            }
            let mut blocks = others;
            let mut ids = Vec::new();
            let mut s = seed;
            for (k, (name, input, cache_control, extra)) in calls.into_iter().enumerate() {
                let id = format!("toolu_{turn}_{k}");
                ids.push(id.clone());
                let at = (s as usize) % (blocks.len() + 1);
                s = s.rotate_left(7) ^ 0x9e37_79b9;
                blocks.insert(
                    at,
                    ContentBlock::ToolUse(ToolUseBlock {
                        id,
                        name,
                        input,
                        cache_control,
                        extra,
                    }),
                );
            }
            // Keep calls in id order so results can answer them in order, as providers do.
            let mut next = 0;
            for block in &mut blocks {
                if let ContentBlock::ToolUse(u) = block {
                    u.id = ids[next].clone();
                    next += 1;
                }
            }
            (
                AnthropicMessage::new(Role::Assistant, Content::Blocks(blocks)),
                ids,
            )
        },
    )
}

fn result_block(id: String) -> impl Strategy<Value = ContentBlock> {
    let content = prop_oneof![
        Just(None),
        text().prop_map(|t| Some(ToolResultContent::Text(t))),
        prop::collection::vec(prop_oneof![text_block(), image_block()], 0..3)
            .prop_map(|b| Some(ToolResultContent::Blocks(b))),
    ];
    (
        content,
        prop::option::of(any::<bool>()),
        cache_control(),
        extra(),
    )
        .prop_map(move |(content, is_error, cache_control, extra)| {
            ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: id.clone(),
                content,
                is_error,
                cache_control,
                extra,
            })
        })
}

/// The user message after an assistant turn: its results (all of them) and maybe more blocks.
fn user_after(ids: Vec<String>) -> BoxedStrategy<AnthropicMessage> {
    if ids.is_empty() {
        return prop_oneof![
            text().prop_map(|t| AnthropicMessage::new(Role::User, Content::Text(t))),
            prop::collection::vec(
                prop_oneof![text_block(), image_block(), unknown_block()],
                0..3
            )
            .prop_map(|b| AnthropicMessage::new(Role::User, Content::Blocks(b))),
        ]
        .boxed();
    }
    let results: Vec<BoxedStrategy<ContentBlock>> =
        ids.into_iter().map(|id| result_block(id).boxed()).collect();
    (results, prop::collection::vec(text_block(), 0..2))
        .prop_map(|(mut blocks, after)| {
            blocks.extend(after);
            AnthropicMessage::new(Role::User, Content::Blocks(blocks))
        })
        .boxed()
}

fn anthropic_conversation() -> impl Strategy<Value = AnthropicRequest> {
    let system = prop_oneof![
        Just(None),
        text().prop_map(|t| Some(Content::Text(t))),
        prop::collection::vec(text_block(), 1..3).prop_map(|b| Some(Content::Blocks(b))),
    ];
    let first = user_after(Vec::new());
    let turns = prop::collection::vec(0usize..1, 0..4).prop_flat_map(|slots| {
        let turns: Vec<BoxedStrategy<Vec<AnthropicMessage>>> = slots
            .iter()
            .enumerate()
            .map(|(turn, _)| {
                assistant_turn(turn)
                    .prop_flat_map(|(assistant, ids)| {
                        user_after(ids).prop_map(move |user| vec![assistant.clone(), user])
                    })
                    .boxed()
            })
            .collect();
        turns
    });
    (system, first, turns).prop_map(|(system, first, turns)| {
        let mut messages = vec![first];
        messages.extend(turns.into_iter().flatten());
        AnthropicRequest {
            system,
            messages,
            extra: JsonMap::new(),
        }
    })
}

/// What a generated OpenAI conversation must read as: the calls left without a result, the
/// results that come after a user message closed their turn (orphans), and for each assistant
/// message with calls, the ids its results answer in the order they come.
#[derive(Debug, Clone, Default)]
struct Expected {
    missing: Vec<String>,
    orphans: Vec<String>,
    answered: Vec<(Vec<String>, Vec<String>)>,
}

/// `n` indices in an order drawn from `seed`.
fn shuffled(n: usize, mut seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    order
}

/// OpenAI conversations whose tool results come in order, reordered, with some missing, or
/// with a user message interleaved among them (the results after it no longer answer
/// anything).
fn openai_conversation() -> impl Strategy<Value = (ChatRequest, Expected)> {
    let args = prop_oneof![
        object().prop_map(|v| v.to_string()),
        object().prop_map(|v| serde_json::to_string_pretty(&v).unwrap_or_default()),
        Just("{\n\"location\": \"Boston, MA\"\n}".to_owned()),
        Just("{\"broken\": ".to_owned()),
    ];
    let call = ("[a-z_]{1,10}", args).prop_map(|(name, arguments)| (name, arguments));
    // How the results come back: the order's seed (0 keeps the calls' order), which are
    // missing, and where a user message cuts in.
    let layout = (
        prop_oneof![1 => Just(0u64), 2 => 1u64..],
        prop::collection::vec(prop::bool::weighted(0.2), 4),
        prop_oneof![3 => Just(None), 1 => (0usize..4).prop_map(Some)],
    );
    let turn = (
        prop::option::of(text()),
        prop::collection::vec(call, 0..4),
        prop::collection::vec(text(), 0..4),
        prop::option::of("[a-z]{1,6}"),
        any::<bool>(),
        layout,
    );
    let user = prop_oneof![
        text().prop_map(|t| ChatMessage::new(LogRole::User, t)),
        (text(), "https://example\\.com/[a-z]{1,6}\\.png").prop_map(|(t, url)| {
            let parts = vec![
                ContentBlock::text(t),
                ContentBlock::Unknown(
                    json!({"type": "image_url", "image_url": {"url": url, "detail": "low"}})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
            ];
            ChatMessage {
                content: Some(Content::Blocks(parts)),
                ..ChatMessage::new(LogRole::User, "")
            }
        }),
    ];
    let system = prop_oneof![
        Just(Vec::new()),
        text().prop_map(|t| vec![ChatMessage::new(LogRole::System, t)]),
        text().prop_map(|t| vec![ChatMessage::new(LogRole::Developer, t)]),
    ];
    (system, user, prop::collection::vec(turn, 0..4)).prop_map(|(system, user, turns)| {
        let mut messages = system;
        let mut expected = Expected::default();
        messages.push(user);
        for (t, (content, calls, results, name, refusal_null, (seed, drop, cut))) in
            turns.into_iter().enumerate()
        {
            let tool_calls: Vec<ChatToolCall> = calls
                .iter()
                .enumerate()
                .map(|(k, (name, arguments))| ChatToolCall {
                    id: format!("call_{t}_{k}"),
                    function: FunctionCall {
                        name: name.clone(),
                        arguments: arguments.clone(),
                    },
                    extra: JsonMap::new(),
                })
                .collect();
            let mut extra = JsonMap::new();
            if refusal_null {
                extra.insert("refusal".to_owned(), Value::Null);
            }
            messages.push(ChatMessage {
                role: LogRole::Assistant,
                content: content.map(Content::Text),
                name,
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls.clone()),
                tool_call_id: None,
                extra,
            });
            let order = if seed == 0 {
                (0..tool_calls.len()).collect()
            } else {
                shuffled(tool_calls.len(), seed)
            };
            let present: Vec<usize> = order.into_iter().filter(|&k| !drop[k]).collect();
            let cut = cut.map(|at| at.min(present.len()));
            let mut answered = Vec::new();
            for (i, &k) in present.iter().enumerate() {
                if cut == Some(i) {
                    messages.push(ChatMessage::new(LogRole::User, format!("meanwhile {t}")));
                }
                let id = tool_calls[k].id.clone();
                if cut.is_some_and(|c| i >= c) {
                    expected.orphans.push(id.clone());
                } else {
                    answered.push(id.clone());
                }
                messages.push(ChatMessage {
                    tool_call_id: Some(id),
                    ..ChatMessage::new(LogRole::Tool, results.get(k).cloned().unwrap_or_default())
                });
            }
            if cut == Some(present.len()) {
                messages.push(ChatMessage::new(LogRole::User, format!("meanwhile {t}")));
            }
            for call in &tool_calls {
                if !answered.contains(&call.id) {
                    expected.missing.push(call.id.clone());
                }
            }
            if !tool_calls.is_empty() {
                let ids = tool_calls.iter().map(|c| c.id.clone()).collect();
                expected.answered.push((ids, answered));
            }
            messages.push(ChatMessage::new(LogRole::User, format!("next {t}")));
        }
        (
            ChatRequest {
                messages,
                extra: JsonMap::new(),
            },
            expected,
        )
    })
}

/// The ids `check_log` reports as missing results and as orphan results.
fn pairing_problems(log: &[LogEntry]) -> (Vec<String>, Vec<String>) {
    let (mut missing, mut orphans) = (Vec::new(), Vec::new());
    for problem in ba_protocol::check_log(log) {
        match problem {
            Problem::MissingResult { tool_call_id, .. } => missing.push(tool_call_id),
            Problem::OrphanResult { tool_call_id, .. } => orphans.push(tool_call_id),
            other => panic!("unexpected problem: {other:?}"),
        }
    }
    missing.sort();
    orphans.sort();
    (missing, orphans)
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn via_json(entries: &[LogEntry]) -> Vec<LogEntry> {
    LogEntry::parse_jsonl(&LogEntry::to_jsonl(entries)).expect("log JSONL reads back")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn anthropic_log_anthropic_is_identity(req in anthropic_conversation()) {
        let log = anthropic_to_log(&req, &mut SequentialStamp::default()).expect("converts").value;
        prop_assert!(ba_protocol::check_log(&log).is_empty(), "pairs broken: {:?}", ba_protocol::check_log(&log));
        // Through the log's own JSON too, as a store would keep it.
        let back = log_to_anthropic(&via_json(&log));
        prop_assert!(back.losses.is_empty(), "losses: {:?}", back.losses);
        prop_assert_eq!(back.value, req);
    }

    #[test]
    fn openai_log_openai_is_identity((req, expected) in openai_conversation()) {
        let log = openai_to_log(&req, &mut SequentialStamp::default()).value;
        // The log keeps the results where they came: the checker sees exactly the calls left
        // without a result and the results that answer nothing.
        let (missing, orphans) = pairing_problems(&log);
        prop_assert_eq!(missing, sorted(expected.missing));
        prop_assert_eq!(orphans, sorted(expected.orphans));
        let back = log_to_openai(&via_json(&log));
        prop_assert!(back.losses.is_empty(), "losses: {:?}", back.losses);
        prop_assert_eq!(back.value, req);
    }

    #[test]
    fn anthropic_wire_json_round_trip(req in anthropic_conversation()) {
        let text = serde_json::to_string(&req).expect("serialises");
        prop_assert_eq!(AnthropicRequest::from_json(&text).expect("reads back"), req);
    }

    #[test]
    fn openai_to_anthropic_keeps_pairs_and_order((req, expected) in openai_conversation()) {
        let anthropic = ba_protocol::convert::openai_to_anthropic(&req).value;
        let log = anthropic_to_log(&anthropic, &mut SequentialStamp::default()).expect("converts").value;
        let (missing, orphans) = pairing_problems(&log);
        prop_assert_eq!(missing, sorted(expected.missing));
        prop_assert_eq!(orphans, sorted(expected.orphans));
        // Each call message is followed by one message of its results, in the order they
        // came (none when all are missing or a user message came first).
        let mut turns = expected.answered.into_iter();
        for (i, m) in anthropic.messages.iter().enumerate() {
            let calls: Vec<String> = m.to_message().tool_uses().map(|u| u.id.clone()).collect();
            if calls.is_empty() { continue; }
            let (ids, answered) = turns.next().expect("a generated call turn");
            prop_assert_eq!(&calls, &ids);
            let next = anthropic.messages.get(i + 1).expect("a message follows calls").to_message();
            let got: Vec<String> = next.tool_results().map(|r| r.tool_use_id.clone()).collect();
            prop_assert_eq!(got, answered);
        }
        prop_assert!(turns.next().is_none(), "a call turn was lost");
    }
}
