//! The runtime end to end, with fake tools on tokio's paused clock: exact retry, backoff and
//! timeout timings, spill, bad input, concurrency, idempotency, metrics.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ba_protocol::ContextModifier;
use ba_protocol::ToolErrorKind;
use ba_protocol::{InvocationContext, OutputLevel, PermissionLevel, ToolCall};
use ba_tools::{
    CallOptions, DataSink, NoJitter, ToolCapabilities, ToolError, ToolRegistry, ToolRuntime,
    ToolsConfig, ToolsError, dynamic_tool, typed_tool,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

#[path = "runtime/files.rs"]
mod files;
#[path = "runtime/retries.rs"]
mod retries;

#[derive(Debug, Default)]
struct MemorySink {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
}

#[async_trait]
impl DataSink for MemorySink {
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError> {
        self.files
            .lock()
            .unwrap()
            .insert(name.to_owned(), bytes.to_vec());
        Ok(format!("/data/{name}"))
    }
}

#[derive(Deserialize, JsonSchema)]
struct SleepArgs {
    ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    n: usize,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Filter {
    field: String,
    op: Op,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Op {
    Eq,
    Lt,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct QueryArgs {
    table: String,
    filters: Vec<Filter>,
}

struct Fixture {
    runtime: ToolRuntime,
    flaky_calls: Arc<AtomicU32>,
    counted_calls: Arc<AtomicU32>,
    sink: Arc<MemorySink>,
}

fn fixture(config: ToolsConfig) -> Fixture {
    let flaky_calls = Arc::new(AtomicU32::new(0));
    let counted_calls = Arc::new(AtomicU32::new(0));
    let mut reg = ToolRegistry::new();
    reg.register(typed_tool(
        "slow",
        "Sleeps.",
        |a: SleepArgs, ctx| async move {
            ctx.partial.report("started\n");
            sleep(Duration::from_millis(a.ms)).await;
            Ok(json!({"slept_ms": a.ms}))
        },
    ))
    .unwrap();
    let flaky = flaky_calls.clone();
    reg.register(typed_tool("flaky", "Fails twice.", move |_: Value, _| {
        let flaky = flaky.clone();
        async move {
            if flaky.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(ToolError::resource("the database is busy"))
            } else {
                Ok(json!({"success": true, "message": "loaded 3 rows"}))
            }
        }
    }))
    .unwrap();
    reg.register(typed_tool(
        "hang",
        "Never returns.",
        |_: Value, ctx| async move {
            ctx.partial
                .report(&format!("attempt {} scanned 10 rows\n", ctx.attempt));
            std::future::pending::<()>().await;
            Ok(Value::Null)
        },
    ))
    .unwrap();
    reg.register(
        typed_tool(
            "hang_deterministic",
            "Runs user code that never ends.",
            |_: Value, ctx| async move {
                ctx.partial
                    .report(&format!("attempt {} ran the loop\n", ctx.attempt));
                std::future::pending::<()>().await;
                Ok(Value::Null)
            },
        )
        .with_capabilities(ToolCapabilities::default().with_deterministic_timeouts(true)),
    )
    .unwrap();
    reg.register(typed_tool(
        "broken",
        "Fails for good.",
        |_: Value, _| async move {
            Err::<Value, _>(ToolError::execution("division by zero in column `ratio`"))
        },
    ))
    .unwrap();
    reg.register(typed_tool(
        "items",
        "Lists n items.",
        |a: CountArgs, _| async move {
            Ok((0..a.n)
                .map(|i| json!({"id": i, "name": format!("item {i}"), "padding": "x".repeat(40)}))
                .collect::<Vec<_>>())
        },
    ))
    .unwrap();
    reg.register(typed_tool("panics", "Panics.", |_: Value, _| async move {
        let v: Vec<u32> = Vec::new();
        #[allow(clippy::indexing_slicing)]
        Ok(v[3])
    }))
    .unwrap();
    reg.register(typed_tool(
        "query",
        "Query.",
        |_: QueryArgs, _| async move { Ok(1) },
    ))
    .unwrap();
    let counted = counted_calls.clone();
    reg.register(
        typed_tool("lookup_rate", "Idempotent.", move |a: CountArgs, _| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"rate": a.n * 2}))
            }
        })
        .with_capabilities(ToolCapabilities::default().with_idempotent(true)),
    )
    .unwrap();
    reg.register(
        dynamic_tool(
            "drop_table",
            "Admin only.",
            json!({"type": "object"}),
            |_, _| async { Ok(json!("dropped")) },
        )
        .with_capabilities(
            ToolCapabilities::default().with_required_permission(PermissionLevel::Admin),
        ),
    )
    .unwrap();
    let sink = Arc::new(MemorySink::default());
    let runtime = ToolRuntime::new(reg, config)
        .unwrap()
        .with_jitter(Arc::new(NoJitter))
        .with_sink(sink.clone());
    Fixture {
        runtime,
        flaky_calls,
        counted_calls,
        sink,
    }
}

fn ctx(timeout_ms: u64) -> InvocationContext {
    InvocationContext {
        timeout_ms,
        conversation_id: Some("conv-1".into()),
        ..InvocationContext::default()
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

#[tokio::test(start_paused = true)]
async fn a_panicking_tool_is_an_execution_error_and_the_runtime_keeps_serving() {
    let f = fixture(ToolsConfig::default());
    let r = f
        .runtime
        .run(&call("c1", "panics", json!({})), &ctx(1000))
        .await;
    assert!(!r.success);
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::ExecutionError);
    assert_eq!(err.code, "TOOL_PANICKED");
    assert!(
        err.message.contains("index out of bounds"),
        "{}",
        err.message
    );
    let ok = f
        .runtime
        .run(&call("c2", "slow", json!({"ms": 1})), &ctx(1000))
        .await;
    assert!(ok.success);
}

#[tokio::test(start_paused = true)]
async fn bad_input_gets_clear_error_results() {
    let config = ToolsConfig {
        max_input_bytes: 1000,
        ..ToolsConfig::default()
    };
    let f = fixture(config);
    let c = ctx(1000);
    let unknown = f.runtime.run(&call("c1", "slo", json!({})), &c).await;
    let e = unknown.error.unwrap();
    assert_eq!(
        (e.kind, e.code.as_str()),
        (ToolErrorKind::InvalidParameters, "UNKNOWN_TOOL")
    );
    assert!(
        e.message
            .contains("available tools: broken, drop_table, flaky"),
        "{}",
        e.message
    );

    let bad_json = f
        .runtime
        .run(&call("c2", "slow", json!("{\"ms\": 3")), &c)
        .await;
    let e = bad_json.error.unwrap();
    assert_eq!(e.code, "INVALID_JSON");
    assert!(e.message.contains("line 1 column"), "{}", e.message);
    // OpenAI-style string arguments that are valid JSON are accepted.
    let as_string = f
        .runtime
        .run(&call("c3", "slow", json!("{\"ms\": 3}")), &c)
        .await;
    assert!(as_string.success, "{}", as_string.observation);

    let big = f
        .runtime
        .run(
            &call("c4", "slow", json!({"ms": 1, "blob": "x".repeat(2000)})),
            &c,
        )
        .await;
    assert_eq!(big.error.unwrap().code, "INPUT_TOO_LARGE");

    let schema = f
        .runtime
        .run(
            &call(
                "c5",
                "query",
                json!({"table": "t", "filters": [{"field": "a", "op": "like"}]}),
            ),
            &c,
        )
        .await;
    let e = schema.error.unwrap();
    assert_eq!(e.code, "SCHEMA_VIOLATION");
    assert!(e.message.contains("/filters/0/op"), "{}", e.message);

    let skill = ContextModifier {
        allowed_tools: Some(vec!["slow".into()]),
        ..ContextModifier::default()
    };
    let opts = CallOptions {
        modifier: Some(&skill),
        ..CallOptions::default()
    };
    let denied = f
        .runtime
        .run_with(&call("c6", "items", json!({"n": 1})), &c, opts)
        .await;
    let e = denied.error.unwrap();
    assert_eq!(e.kind, ToolErrorKind::PermissionDenied);
    assert!(e.message.contains("allowed: slow"));
    let allowed = f
        .runtime
        .run_with(&call("c7", "slow", json!({"ms": 1})), &c, opts)
        .await;
    assert!(allowed.success);

    let admin = f
        .runtime
        .run(&call("c8", "drop_table", json!({})), &c)
        .await;
    assert_eq!(admin.error.unwrap().code, "PERMISSION_LEVEL");
    let as_admin = InvocationContext {
        permission_level: PermissionLevel::Admin,
        ..c.clone()
    };
    assert!(
        f.runtime
            .run(&call("c9", "drop_table", json!({})), &as_admin)
            .await
            .success
    );
}

#[tokio::test(start_paused = true)]
async fn five_megabytes_spill_and_the_file_holds_the_exact_data() {
    let f = fixture(ToolsConfig::default());
    let r = f
        .runtime
        .run(&call("call/5mb", "items", json!({"n": 70_000})), &ctx(1000))
        .await;
    assert!(r.success, "{}", r.observation);
    assert!(r.data_size_bytes > 5_000_000, "{}", r.data_size_bytes);
    let hash = r.data_hash.clone().unwrap();
    let name = format!("tool_data/call_5mb_{hash}.json");
    assert_eq!(
        r.data_ref.as_deref(),
        Some(format!("/data/{name}").as_str())
    );
    let files = f.sink.files.lock().unwrap();
    let stored: Value = serde_json::from_slice(&files[&name]).unwrap();
    assert_eq!(stored.as_array().unwrap().len(), 70_000);
    assert_eq!(stored[69_999]["name"], "item 69999");
    assert_eq!(files[&name].len() as u64, r.data_size_bytes);
    assert_eq!(r.output_level, OutputLevel::Standard);
    assert!(
        r.observation
            .starts_with(&format!("Data stored in file: /data/{name}\n"))
    );
    assert!(r.observation.contains("Summary: List with 70000 items."));
    assert!(r.observation.len() < 2000, "{}", r.observation.len());
}

#[tokio::test]
async fn five_megabytes_spill_to_a_real_file_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(typed_tool("rows", "Rows.", |a: CountArgs, _| async move {
        Ok((0..a.n)
            .map(|i| json!({"row": i, "text": "é ✓ x".repeat(8)}))
            .collect::<Vec<_>>())
    }))
    .unwrap();
    let runtime = ToolRuntime::new(reg, ToolsConfig::default())
        .unwrap()
        .with_sink(Arc::new(ba_tools::FsSink::new(dir.path())));
    let r = runtime
        .run(&call("c1", "rows", json!({"n": 60_000})), &ctx(1000))
        .await;
    assert!(r.success, "{}", r.observation);
    let path = r.data_ref.clone().unwrap();
    assert!(path.starts_with(&dir.path().display().to_string()));
    let expected: Vec<Value> = (0..60_000)
        .map(|i| json!({"row": i, "text": "é ✓ x".repeat(8)}))
        .collect();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 5_000_000, "{}", bytes.len());
    assert_eq!(bytes, serde_json::to_vec(&expected).unwrap());
    assert_eq!(bytes.len() as u64, r.data_size_bytes);
    assert!(
        r.observation
            .contains(&format!("Data stored in file: {path}"))
    );
}

#[tokio::test(start_paused = true)]
async fn an_unwritable_spill_directory_is_a_resource_error_that_says_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not_a_dir");
    std::fs::write(&blocker, b"").unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(typed_tool(
        "items",
        "Lists.",
        |a: CountArgs, _| async move { Ok((0..a.n).collect::<Vec<_>>()) },
    ))
    .unwrap();
    let runtime = ToolRuntime::new(reg, ToolsConfig::default()).unwrap();
    let c = InvocationContext {
        storage_dir: Some(blocker.join("store").display().to_string()),
        ..InvocationContext::default()
    };
    let mut full = call("c1", "items", json!({"n": 30}));
    full.output_level = Some(OutputLevel::Full);
    let r = runtime.run(&full, &c).await;
    assert!(!r.success);
    let e = r.error.as_ref().unwrap();
    assert_eq!(
        (e.kind, e.code.as_str()),
        (ToolErrorKind::ResourceError, "SPILL_FAILED")
    );
    assert!(
        e.message.contains("could not be saved as `tool_data/c1_"),
        "{}",
        e.message
    );
    assert!(e.message.contains("List with 30 items"), "{}", e.message);
    assert!(
        e.message.contains("Found 30 items:\n  - 0\n"),
        "{}",
        e.message
    );
    assert_eq!(r.data_size_bytes, 81);
    assert!(r.data_hash.is_some());
    assert_eq!(
        r.data_summary.as_deref(),
        Some("List with 30 items. First item: number")
    );
    // The same call with a writable storage directory spills to a real file.
    let ok_dir = InvocationContext {
        storage_dir: Some(dir.path().join("store").display().to_string()),
        ..InvocationContext::default()
    };
    let r = runtime.run(&full, &ok_dir).await;
    assert!(r.success, "{}", r.observation);
    let text = std::fs::read_to_string(r.data_ref.unwrap()).unwrap();
    assert_eq!(
        text,
        serde_json::to_string(&(0..30).collect::<Vec<_>>()).unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_items_at_standard_stay_bounded() {
    let f = fixture(ToolsConfig::default());
    let r = f
        .runtime
        .run(&call("c1", "items", json!({"n": 10_000})), &ctx(1000))
        .await;
    assert!(r.success);
    assert!(r.data_ref.is_none(), "under 1 MiB stays inline");
    assert!(r.observation.len() <= ToolsConfig::default().format.standard_max_bytes);
    assert!(r.observation.starts_with("Found 10000 items:"));
}

#[tokio::test(start_paused = true)]
async fn level_decision_through_the_runtime() {
    let f = fixture(ToolsConfig::default());
    let c = ctx(1000);
    let full_context = CallOptions {
        context_usage: 0.93,
        ..CallOptions::default()
    };
    let r = f
        .runtime
        .run_with(&call("c1", "items", json!({"n": 4})), &c, full_context)
        .await;
    assert_eq!(r.output_level, OutputLevel::Brief);
    assert_eq!(r.observation, "Found 4 items");
    let mut explicit = call("c2", "items", json!({"n": 4}));
    explicit.output_level = Some(OutputLevel::Standard);
    let r = f.runtime.run_with(&explicit, &c, full_context).await;
    assert_eq!(r.output_level, OutputLevel::Standard);

    // A configured tool default wins over the context usage and the global default.
    let config =
        ToolsConfig::from_json(r#"{"tools": {"items": {"default_level": "full"}}}"#).unwrap();
    let f = fixture(config);
    let r = f
        .runtime
        .run_with(&call("c3", "items", json!({"n": 2})), &c, full_context)
        .await;
    assert_eq!(r.output_level, OutputLevel::Full);
    assert!(r.data_ref.is_some(), "full spills to the sink");

    // A brief call whose data is over the spill threshold spills with a brief preview.
    let mut brief = call("c5", "items", json!({"n": 20_000}));
    brief.output_level = Some(OutputLevel::Brief);
    let r = f.runtime.run(&brief, &c).await;
    assert_eq!(r.output_level, OutputLevel::Brief);
    assert!(r.data_size_bytes > 1024 * 1024);
    assert!(
        r.observation.contains("Preview:\nFound 20000 items\n"),
        "{}",
        r.observation
    );
}

#[tokio::test(start_paused = true)]
async fn run_all_runs_six_at_once_in_call_order_and_failures_stay_local() {
    let f = fixture(ToolsConfig::default());
    let mut calls: Vec<ToolCall> = (0..6)
        .map(|i| call(&format!("c{i}"), "slow", json!({"ms": 50 + i})))
        .collect();
    calls[2] = call("c2", "broken", json!({}));
    let start = Instant::now();
    let results = f
        .runtime
        .run_all(&calls, &ctx(1000), CallOptions::default())
        .await;
    assert_eq!(start.elapsed(), Duration::from_millis(55));
    let ids: Vec<&str> = results.iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(results.iter().filter(|r| r.success).count(), 5);
    assert!(!results[2].success);

    // A seventh call waits for a free slot.
    let seven: Vec<ToolCall> = (0..7)
        .map(|i| call(&format!("d{i}"), "slow", json!({"ms": 50})))
        .collect();
    let start = Instant::now();
    let results = f
        .runtime
        .run_all(&seven, &ctx(1000), CallOptions::default())
        .await;
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert!(results.iter().all(|r| r.success));
}

#[tokio::test(start_paused = true)]
async fn idempotent_calls_are_answered_from_the_cache() {
    let f = fixture(ToolsConfig::default());
    let c = ctx(1000);
    let a = f
        .runtime
        .run(&call("c1", "lookup_rate", json!({"n": 4})), &c)
        .await;
    let b = f
        .runtime
        .run(&call("c2", "lookup_rate", json!({"n": 4})), &c)
        .await;
    assert_eq!(f.counted_calls.load(Ordering::SeqCst), 1);
    assert_eq!(a.observation, b.observation);
    assert_eq!(b.tool_call_id, "c2");
    let _ = f
        .runtime
        .run(&call("c3", "lookup_rate", json!({"n": 5})), &c)
        .await;
    assert_eq!(f.counted_calls.load(Ordering::SeqCst), 2);
    assert_eq!(f.runtime.metrics().tool("lookup_rate").unwrap().cached, 1);

    // An explicit key caches a tool that is not idempotent by itself.
    let keyed = CallOptions {
        idempotency_key: Some("load-2024"),
        ..CallOptions::default()
    };
    let first = f
        .runtime
        .run_with(&call("k1", "flaky", json!({})), &c, keyed)
        .await;
    let again = f
        .runtime
        .run_with(&call("k2", "flaky", json!({})), &c, keyed)
        .await;
    assert!(first.success && again.success);
    assert_eq!(f.flaky_calls.load(Ordering::SeqCst), 3);
    assert_eq!(again.retry_count, 0);
}

/// Counts whitespace-separated words: enough to see tokens flow into the metrics.
#[derive(Debug)]
struct Words;

impl ba_protocol::TokenCounter for Words {
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

#[tokio::test(start_paused = true)]
async fn metrics_report_snapshot() {
    let mut f = fixture(ToolsConfig::default());
    f.runtime = f.runtime.with_token_counter(Arc::new(Words));
    let c = ctx(1000);
    let _ = f
        .runtime
        .run(&call("a", "slow", json!({"ms": 120})), &c)
        .await;
    let _ = f
        .runtime
        .run(&call("b", "slow", json!({"ms": 80})), &c)
        .await;
    let _ = f.runtime.run(&call("c", "flaky", json!({})), &c).await;
    let _ = f.runtime.run(&call("d", "broken", json!({})), &c).await;
    let _ = f.runtime.run(&call("e", "nope", json!({})), &c).await;
    let other = InvocationContext {
        conversation_id: Some("conv-2".into()),
        ..c.clone()
    };
    let mut full = call("f", "items", json!({"n": 3}));
    full.output_level = Some(OutputLevel::Full);
    let _ = f.runtime.run(&full, &other).await;
    let global = f.runtime.metrics().global();
    assert_eq!((global.calls, global.failures, global.retries), (6, 2, 2));
    assert_eq!(f.runtime.metrics().conversation("conv-2").unwrap().calls, 1);
    assert_eq!(
        global.tokens_out,
        f.runtime
            .metrics()
            .tools()
            .values()
            .map(|a| a.tokens_out)
            .sum::<u64>()
    );
    insta::assert_snapshot!(f.runtime.metrics().report());
}
