//! Parse + serialise a 10,000-message conversation: the typed path against serde_json's plain
//! `Value` round trip of the same bytes (the baseline, measured in the same run).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::hint::black_box;

use ba_protocol::LogEntry;
use ba_protocol::Role;
use ba_protocol::anthropic::{AnthropicMessage, AnthropicRequest};
use ba_protocol::convert::{SequentialStamp, anthropic_to_log};
use ba_protocol::{Content, ContentBlock};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

/// A deterministic conversation of `n` messages: questions, assistant turns with thinking, text
/// and tool calls, and tool results of varying size.
fn conversation(n: usize) -> AnthropicRequest {
    let mut messages = Vec::with_capacity(n);
    let mut i = 0;
    while messages.len() < n {
        messages.push(AnthropicMessage::new(
            Role::User,
            Content::Text(format!(
                "Question {i}: how did region {} sell in Q{}?",
                i % 7,
                i % 4 + 1
            )),
        ));
        let id = format!("toolu_{i:06}");
        messages.push(AnthropicMessage::new(
            Role::Assistant,
            Content::Blocks(vec![
                ContentBlock::thinking(format!("The user asks about region {}; query the sales table.", i % 7), Some("c2lnbmF0dXJl".repeat(4))),
                ContentBlock::text("Let me look that up."),
                ContentBlock::tool_use(&id, "query_database", json!({"query": format!("SELECT month, SUM(amount) FROM sales WHERE region = {} GROUP BY month", i % 7), "max_rows": 100})),
            ]),
        ));
        let rows: Vec<String> = (0..(i % 5 + 1) * 4)
            .map(|r| format!("{{\"month\": {r}, \"amount\": {}}}", r * 1013 + i))
            .collect();
        messages.push(AnthropicMessage::new(
            Role::User,
            Content::Blocks(vec![ContentBlock::tool_result(
                &id,
                format!("Found {} rows:\n{}", rows.len(), rows.join("\n")),
                false,
            )]),
        ));
        messages.push(AnthropicMessage::new(
            Role::Assistant,
            Content::Text(format!(
                "Region {} sold {} in total; the best month was {}.",
                i % 7,
                i * 31,
                i % 12
            )),
        ));
        i += 1;
    }
    messages.truncate(n);
    AnthropicRequest {
        system: Some(Content::Text("You are a business analyst.".into())),
        messages,
        extra: Default::default(),
    }
}

fn bench(c: &mut Criterion) {
    let req = conversation(10_000);
    let anthropic_json = serde_json::to_string(&req).expect("serialises");
    let log = anthropic_to_log(&req, &mut SequentialStamp::new("e", "2026-11-22T00:00:00Z"))
        .expect("converts")
        .value;
    let jsonl = LogEntry::to_jsonl(&log);

    let mut group = c.benchmark_group("protocol_roundtrip_anthropic_10k");
    group.throughput(Throughput::Bytes(anthropic_json.len() as u64));
    group.bench_function("baseline_value", |b| {
        b.iter(|| {
            let v: Value = serde_json::from_str(black_box(&anthropic_json)).expect("parses");
            black_box(serde_json::to_string(&v).expect("serialises"))
        })
    });
    group.bench_function("typed", |b| {
        b.iter(|| {
            let r = AnthropicRequest::from_json(black_box(&anthropic_json)).expect("parses");
            black_box(serde_json::to_string(&r).expect("serialises"))
        })
    });
    group.finish();

    let mut group = c.benchmark_group("protocol_roundtrip_log_jsonl_10k");
    group.throughput(Throughput::Bytes(jsonl.len() as u64));
    group.bench_function("baseline_value", |b| {
        b.iter(|| {
            let mut out = String::with_capacity(jsonl.len());
            for line in black_box(&jsonl).lines() {
                let v: Value = serde_json::from_str(line).expect("parses");
                out.push_str(&serde_json::to_string(&v).expect("serialises"));
                out.push('\n');
            }
            black_box(out)
        })
    });
    group.bench_function("typed", |b| {
        b.iter(|| {
            let entries = LogEntry::parse_jsonl(black_box(&jsonl)).expect("parses");
            black_box(LogEntry::to_jsonl(&entries))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
