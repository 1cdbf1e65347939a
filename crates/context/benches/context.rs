//! Counting throughput, a new turn on a long conversation, and key-message compression.
//!
//! Every group has its comparison point under an id starting with `baseline`.

use std::hint::black_box;
use std::time::Duration;

use ba_context::builder::BuildRequest;
use ba_context::{
    BuilderSettings, ContextBudget, ContextBuilder, Encoding, MessageCounter, Pipeline,
    PromptParts, block_on,
};
use ba_protocol::{LogEntry, LogRole, LogToolCall};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const WORDS: &[&str] = &[
    "revenue",
    "forecast",
    "the",
    "quarter",
    "增长",
    "区域",
    "销售额",
    "客户",
    "fn",
    "let",
    "=",
    "{",
    "}",
    "SELECT",
    "region,",
    "SUM(amount)",
    "FROM",
    "orders",
    "42.7%",
    "2026-03-31",
    "\"key\":",
    "[1, 2, 3]",
    "src/report.rs",
    "analysis",
    "需要",
    "必须",
    "margin",
    "表格",
    "→",
    "📈",
];

/// Deterministic text of about `n` words from a mixed English/Chinese/code/JSON vocabulary.
fn text(n: usize, seed: usize) -> String {
    let mut s = String::new();
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(WORDS[x % WORDS.len()]);
        s.push(if i % 17 == 16 { '\n' } else { ' ' });
    }
    s
}

/// Fixture prose (skill documents) when present (their absence is a skip with a message, and a
/// failure under `CI=true`), then generated code, JSON and Chinese.
fn corpus() -> String {
    let mut out = String::new();
    if let Some(skills) = ba_testkit::fixture("skills/anthropics")
        && let Ok(dirs) = std::fs::read_dir(skills)
    {
        let mut paths: Vec<_> = dirs.flatten().map(|d| d.path().join("SKILL.md")).collect();
        paths.sort();
        for p in paths {
            if let Ok(t) = std::fs::read_to_string(p) {
                out.push_str(&t);
            }
        }
    }
    for i in 0..200 {
        out.push_str(&format!(
            "fn total_{i}(rows: &[Row]) -> f64 {{\n    rows.iter().filter(|r| r.region == \"north\").map(|r| r.amount * {i}.5).sum()\n}}\n"
        ));
        out.push_str(&format!(
            "{{\"id\": {i}, \"region\": \"华东\", \"amount\": {}.25, \"tags\": [\"q1\", \"增长\"], \"ok\": true}}\n",
            i * 37
        ));
        out.push_str("第一季度华东区域销售额同比增长百分之十二，主要来自新客户的订单。\n");
    }
    out.push_str(&text(20_000, 7));
    out
}

fn counting(c: &mut Criterion) {
    let corpus = corpus();
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        assert_eq!(
            enc.count(&corpus),
            enc.encode(&corpus).len(),
            "exact on the corpus"
        );
        let mut g = c.benchmark_group(format!("count_mixed_{enc}"));
        g.throughput(Throughput::Bytes(corpus.len() as u64));
        g.bench_function("baseline_tiktoken_rs", |b| {
            b.iter(|| black_box(enc.encode(black_box(&corpus)).len()))
        });
        g.bench_function("bpe_openai", |b| {
            b.iter(|| black_box(enc.count(black_box(&corpus))))
        });
        g.finish();
    }
}

/// A conversation of `n` entries, about 300 tokens each: user requests, tool calls with
/// results, answers.
fn conversation(n: usize) -> Vec<LogEntry> {
    let mut log = Vec::with_capacity(n);
    let mut i = 0;
    while log.len() < n {
        log.push(LogEntry::new(format!("u{i}"), LogRole::User, "t").with_text(text(40, i)));
        let mut a = LogEntry::new(format!("a{i}"), LogRole::Assistant, "t");
        a.tool_calls = Some(vec![LogToolCall::new(
            format!("c{i}"),
            "query",
            &serde_json::json!({"sql": text(12, i + 1)}),
        )]);
        log.push(a);
        let mut r = LogEntry::new(format!("r{i}"), LogRole::Tool, "t").with_text(text(330, i + 2));
        r.tool_call_id = Some(format!("c{i}"));
        log.push(r);
        log.push(
            LogEntry::new(format!("f{i}"), LogRole::Assistant, "t").with_text(text(160, i + 3)),
        );
        i += 1;
    }
    log.truncate(n);
    log
}

/// A new turn on a 10,000-entry conversation (about 3M tokens), every count cache warm as the
/// agent keeps it between turns. The baseline is what the agent would otherwise do each turn:
/// total the whole log with its warm counter. The candidates are the agent's real per-turn
/// work, `ContextBuilder::build` (system prompt, entry preparation, the pipeline's counting,
/// no compression since the window stays under the trigger): with the agent's default settings
/// (its 80-message and 120,000-character caps, a 200k budget), and with the caps lifted and a
/// budget above the log, so the whole log is prepared and counted.
fn new_turn(c: &mut Criterion) {
    let mut log = conversation(10_000);
    log.push(LogEntry::new("u-new", LogRole::User, "t").with_text(text(40, 99_999)));
    let warm = MessageCounter::exact(Encoding::Cl100kBase);
    let total = warm.entries(&log);
    eprintln!("new_turn: {} entries, {total} tokens", log.len());
    let request = BuildRequest {
        entries: &log,
        task: Some(log[log.len() - 1].text().into_owned()),
        ..BuildRequest::default()
    };
    let agent_defaults = builder(
        BuilderSettings::default(),
        ContextBudget::new(200_000, 8_192),
    );
    let whole_log = builder(
        BuilderSettings {
            max_messages: usize::MAX,
            max_chars: usize::MAX,
            ..BuilderSettings::default()
        },
        ContextBudget::new(total * 2, 0),
    );
    let mut sent = Vec::new();
    for (name, b) in [
        ("agent defaults", &agent_defaults),
        ("whole log", &whole_log),
    ] {
        // Warms the builder's counter; a compression would make this another benchmark.
        match block_on(b.build(&request)) {
            Ok(built) if !built.debug.compressed => {
                let n = built
                    .entries
                    .iter()
                    .filter(|e| e.include_in_context)
                    .count();
                eprintln!(
                    "new_turn: {name}: {n} entries sent, {} tokens",
                    built.debug.tokens_after
                );
                sent.push(n);
            }
            Ok(_) => {
                eprintln!(
                    "error: new_turn: the {name} build compressed; it must stay under the trigger"
                );
                std::process::exit(2);
            }
            Err(e) => {
                eprintln!("error: new_turn: the {name} build failed: {e}");
                std::process::exit(2);
            }
        }
    }
    let mut g = c.benchmark_group("new_turn_10k");
    g.bench_function("baseline_warm_counter_whole_log", |b| {
        b.iter(|| black_box(warm.entries(black_box(&log))))
    });
    g.bench_function("context_build_agent_defaults", |b| {
        b.iter(|| black_box(block_on(agent_defaults.build(black_box(&request))).is_ok()))
    });
    g.bench_function("context_build_whole_log", |b| {
        b.iter(|| black_box(block_on(whole_log.build(black_box(&request))).is_ok()))
    });
    g.finish();
    ba_testkit::bench_note(
        env!("CARGO_TARGET_TMPDIR"),
        "new_turn_10k",
        &format!(
            "a turn on {} entries ({total} tokens), counters warm as the agent keeps them; \
             baseline: the warm counter totals the whole log (what the agent would otherwise do \
             each turn); candidates: the agent's per-turn `ContextBuilder::build`, under the \
             compression trigger, with its default caps ({} entries sent) or with the whole log \
             in the window ({} sent)",
            log.len(),
            sent[0],
            sent[1]
        ),
    );
}

/// A builder over the agent's default strategy, with a warm-able exact counter.
fn builder(settings: BuilderSettings, budget: ContextBudget) -> ContextBuilder {
    ContextBuilder::new(
        PromptParts {
            base_rules: "Answer with evidence.".into(),
            tool_policy: "Use at most six tools a round.".into(),
            ..PromptParts::default()
        },
        settings,
        budget,
        Pipeline::named("key-messages", None).unwrap_or_default(),
        MessageCounter::exact(Encoding::Cl100kBase),
    )
}

fn key_messages(c: &mut Criterion) {
    let log = conversation(10_000);
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    let budget = ContextBudget::new(100_000, 0);
    let pipeline = Pipeline::named("key-messages", None).unwrap_or_default();
    let truncate = Pipeline::named("truncate", None).unwrap_or_default();
    // Warm the count cache, as the orchestrator's counter is between turns.
    let _ = counter.entries(&log);
    let mut g = c.benchmark_group("compress_10k_to_100k");
    g.bench_function("baseline_truncate", |b| {
        b.iter(|| {
            black_box(
                block_on(truncate.run(&log, "", &budget, &counter))
                    .map(|o| o.used)
                    .ok(),
            )
        })
    });
    g.bench_function("key_messages", |b| {
        b.iter(|| {
            black_box(
                block_on(pipeline.run(&log, "", &budget, &counter))
                    .map(|o| o.used)
                    .ok(),
            )
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = counting, new_turn, key_messages }
criterion_main!(benches);
