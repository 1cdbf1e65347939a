//! Orchestration overhead of the [`Agent`] loop for a 20-round replayed session.
//!
//! Both functions of the group `orchestration_20_rounds` play the same recording: rounds 1 to
//! 19 answer with a short text and one `lookup` tool call, round 20 with a final text. The
//! recording carries token figures, so the replay client never counts tokens itself.
//!
//! - `baseline_model_and_tools_direct` makes the 20 model calls on the replay client
//!   directly, with a request whose entries grow by the answer and the tool result of every
//!   round, and calls the tool 19 times directly (no runtime): the irreducible work.
//! - `agent_loop` sends one message to an agent over the same recording, a file store
//!   without fsync and the same tool, and waits for the final answer: context building with
//!   exact token counts, store appends, events, and the tool runtime's layers on top of the
//!   same model and tool work.
//!
//! Building the client, the store, the agent and the conversation is setup and not timed.
//! From the two medians, the orchestration overhead per round is
//! `(agent_loop − baseline) / 20` and its share of a round's total is
//! `(agent_loop − baseline) / agent_loop`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "bench code"
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use ba_agent::{Agent, Input, RunStatus};
use ba_model::{
    ExpectedRequest, ModelClient, ModelRequest, RecordedResponse, ReplayClient, ReplayOutcome,
    ReplayTurn, StopReason,
};
use ba_protocol::convert::SequentialStamp;
use ba_protocol::{Content, ContentBlock, LogEntry, LogRole, Message, Role};
use ba_protocol::{ToolSpec, Usage};
use ba_storage::{Durability, FileStore, FileStoreOptions, NewConversation};
use ba_tools::{CallContext, Tool, typed_tool};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Model calls of the session.
const ROUNDS: u32 = 20;
/// Model name used by both functions.
const MODEL: &str = "claude-sonnet-4-5";
/// The user's message.
const QUESTION: &str = "go";

#[derive(Deserialize, JsonSchema)]
struct LookupArgs {
    /// Which lookup this is.
    n: u32,
}

/// A tool that answers at once with a few rows.
fn lookup_tool() -> impl Tool + 'static {
    typed_tool(
        "lookup",
        "Looks up a few rows.",
        |a: LookupArgs, _| async move {
            Ok(json!({
                "n": a.n,
                "rows": [
                    {"region": "north", "sales": 120 + a.n},
                    {"region": "south", "sales": 95 + a.n},
                    {"region": "west", "sales": 143 + a.n},
                ],
            }))
        },
    )
}

fn call_id(round: u32) -> String {
    format!("toolu_{round:02}")
}

/// The recording: 19 rounds of text and one call, then a final answer.
fn recording() -> Vec<ReplayTurn> {
    let usage = Usage {
        input_tokens: 1000,
        output_tokens: 50,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        estimated: false,
    };
    (1..=ROUNDS)
        .map(|round| {
            let expect = if round == 1 {
                ExpectedRequest {
                    role: Some(LogRole::User),
                    text: Some(QUESTION.to_owned()),
                    tool_call_id: None,
                }
            } else {
                ExpectedRequest {
                    role: Some(LogRole::Tool),
                    text: None,
                    tool_call_id: Some(call_id(round - 1)),
                }
            };
            let (content, stop_reason) = if round < ROUNDS {
                (
                    vec![
                        ContentBlock::text(format!("Looking up part {round}.")),
                        ContentBlock::tool_use(call_id(round), "lookup", json!({"n": round})),
                    ],
                    StopReason::ToolUse,
                )
            } else {
                (
                    vec![ContentBlock::text(
                        "Sales grew in every region; the west leads.",
                    )],
                    StopReason::EndTurn,
                )
            };
            ReplayTurn {
                expect,
                outcome: ReplayOutcome::Response(RecordedResponse {
                    message: Message::new(Role::Assistant, content),
                    stop_reason,
                    usage,
                    id: format!("msg_{round:02}"),
                    model: MODEL.to_owned(),
                }),
            }
        })
        .collect()
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The 20 model calls and 19 tool calls without the agent.
async fn direct(client: &ReplayClient, tool: &(impl Tool + ?Sized), spec: &ToolSpec) -> usize {
    let mut stamp = SequentialStamp::default();
    let mut request = ModelRequest::new(
        MODEL,
        vec![LogEntry::new("u0", LogRole::User, "1970-01-01T00:00:00Z").with_text(QUESTION)],
    )
    .with_tools(vec![spec.clone()])
    .with_stream(true);
    for _ in 0..ROUNDS {
        let response = client.complete(&request).await.expect("replayed answer");
        let calls: Vec<(String, Value)> = response
            .message
            .tool_uses()
            .map(|u| (u.id.clone(), u.input.clone()))
            .collect();
        let answer = response
            .to_log_entries(&mut stamp)
            .expect("answer as log entries");
        request.entries.extend(answer);
        for (id, args) in calls {
            let out = tool
                .call(args, &CallContext::detached(&id))
                .await
                .expect("lookup result");
            let mut entry = LogEntry::new(format!("r_{id}"), LogRole::Tool, "1970-01-01T00:00:00Z");
            entry.content = Some(Content::Text(out.to_string()));
            entry.tool_call_id = Some(id);
            entry.tool_name = Some("lookup".to_owned());
            request.entries.push(entry);
        }
    }
    request.entries.len()
}

fn orchestration(c: &mut Criterion) {
    let rt = tokio_rt();
    let turns = recording();
    let tool = lookup_tool();
    let spec = ToolSpec::new(tool.name(), tool.description(), tool.input_schema());

    let mut group = c.benchmark_group("orchestration_20_rounds");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(8));

    group.bench_function("baseline_model_and_tools_direct", |b| {
        b.iter_batched(
            || ReplayClient::new(turns.clone()),
            |client| {
                let entries = rt.block_on(direct(&client, &tool, &spec));
                black_box(entries);
                client
            },
            BatchSize::SmallInput,
        );
    });

    group.bench_function("agent_loop", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().expect("temp dir");
                let store = FileStore::open_with(
                    dir.path(),
                    FileStoreOptions::default().with_durability(Durability::OsBuffered),
                )
                .expect("file store");
                let agent = Agent::builder(Arc::new(ReplayClient::new(turns.clone())))
                    .store(Arc::new(store))
                    .tool(lookup_tool())
                    .configure(|s| {
                        s.model = MODEL.to_owned();
                        s.stream = true;
                        s.max_rounds = 25;
                    })
                    .build()
                    .expect("agent");
                let id = rt
                    .block_on(agent.new_conversation(NewConversation::default()))
                    .expect("conversation");
                (agent, id, dir)
            },
            |(agent, id, dir)| {
                let summary =
                    rt.block_on(async { agent.send(&id, Input::message(QUESTION)).finish().await });
                assert!(
                    summary.status == RunStatus::Answered && summary.rounds == ROUNDS,
                    "the run ended {:?} after {} rounds: {:?}",
                    summary.status,
                    summary.rounds,
                    summary.error
                );
                // Returned so that dropping the agent and the directory is not timed.
                (summary, agent, dir)
            },
            BatchSize::SmallInput,
        );
    });

    group.finish();
}

criterion_group!(benches, orchestration);
criterion_main!(benches);
