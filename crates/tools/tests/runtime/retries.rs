//! Timeouts and retries through the runtime: exact durations, backoff, growing timeouts, what
//! a tool declares (deterministic timeouts, its own timeout and retry cap) against the
//! configuration, and errors that are never retried.

use super::*;

#[tokio::test(start_paused = true)]
async fn slow_call_within_its_timeout_succeeds_with_exact_duration() {
    let f = fixture(ToolsConfig::default());
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c1", "slow", json!({"ms": 300})), &ctx(1000))
        .await;
    assert!(r.success, "{}", r.observation);
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(r.duration_ms, 300);
    assert_eq!(r.retry_count, 0);
    assert_eq!(r.observation, "{\n  \"slept_ms\": 300\n}");
}

#[tokio::test(start_paused = true)]
async fn flaky_tool_is_retried_with_backoff_then_succeeds() {
    let f = fixture(ToolsConfig::default());
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c1", "flaky", json!({})), &ctx(1000))
        .await;
    assert!(r.success, "{}", r.observation);
    // Two resource errors: waits of 1 000 ms then 1 500 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(2500));
    assert_eq!(r.retry_count, 2);
    assert_eq!(f.flaky_calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        r.observation,
        "{\n  \"message\": \"loaded 3 rows\",\n  \"success\": true\n}"
    );
}

#[tokio::test(start_paused = true)]
async fn always_timing_out_tool_gives_up_after_three_retries_with_growing_timeouts() {
    let f = fixture(ToolsConfig::default());
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c9", "hang", json!({})), &ctx(1000))
        .await;
    // Timeouts 1 s, 2 s, 4 s, 8 s with waits of 1 s, 1.5 s, 2.25 s between them.
    assert_eq!(start.elapsed(), Duration::from_millis(19_750));
    assert_eq!(r.duration_ms, 19_750);
    assert!(!r.success);
    assert_eq!(r.retry_count, 3);
    let err = r.error.as_ref().unwrap();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(
        err.message.contains("timed out after 8000 ms"),
        "{}",
        err.message
    );
    // The partial output is the last attempt's, not a pile-up of all four.
    assert!(
        err.message.contains("attempt 3 scanned 10 rows"),
        "{}",
        err.message
    );
    assert!(!err.message.contains("attempt 0"), "{}", err.message);
    assert!(err.message.ends_with("(gave up after 3 retries)"));
    assert!(
        r.observation
            .starts_with("Operation failed.\n\nError Type: timeout\n")
    );
    assert!(r.observation.ends_with("Tool Call ID: c9"));
}

#[tokio::test(start_paused = true)]
async fn a_deterministic_timeout_is_not_retried() {
    let f = fixture(ToolsConfig::default());
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c10", "hang_deterministic", json!({})), &ctx(1000))
        .await;
    // One attempt of 1 s: the same code would run out of time again.
    assert_eq!(start.elapsed(), Duration::from_millis(1_000));
    assert_eq!(r.retry_count, 0);
    let err = r.error.as_ref().unwrap();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(
        err.message.contains("attempt 0 ran the loop"),
        "{}",
        err.message
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_caps_and_per_tool_overrides_apply() {
    let config = ToolsConfig::from_json(
        r#"{"tools": {"hang": {"timeout_ms": 500,
             "retry": {"max_retries": 2, "initial_delay_ms": 100, "max_timeout_ms": 800}}}}"#,
    )
    .unwrap();
    let f = fixture(config);
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c1", "hang", json!({})), &ctx(120_000))
        .await;
    // 500 + 100 + 800 (1 000 capped) + 150 + 800.
    assert_eq!(start.elapsed(), Duration::from_millis(2350));
    assert_eq!(r.retry_count, 2);
}

/// A tool that hangs and declares its own timeout and retry cap.
fn hang_declaring(caps: ToolCapabilities) -> impl ba_tools::Tool {
    dynamic_tool(
        "hang_own",
        "Never returns; declares its own bounds.",
        json!({"type": "object"}),
        |_, ctx: ba_tools::CallContext| async move {
            ctx.partial.report("step 1 of 4\n");
            std::future::pending::<()>().await;
            Ok(Value::Null)
        },
    )
    .with_capabilities(caps)
}

#[tokio::test(start_paused = true)]
async fn a_tool_declares_its_own_timeout_and_retry_cap_and_configuration_wins() {
    let f = fixture(ToolsConfig::default());
    let mut reg = ToolRegistry::new();
    reg.register(hang_declaring(
        ToolCapabilities::default()
            .with_timeout_ms(700)
            .with_max_retries(0),
    ))
    .unwrap();
    // The shared state (metrics) goes with the new registry.
    let runtime = f.runtime.with_registry(reg);
    assert_eq!(runtime.registry().names().collect::<Vec<_>>(), ["hang_own"]);
    let start = Instant::now();
    let r = runtime
        .run(&call("c1", "hang_own", json!({})), &ctx(120_000))
        .await;
    // Its own 700 ms, not the invocation's 120 s; no retry although timeouts are retryable.
    assert_eq!(start.elapsed(), Duration::from_millis(700));
    assert_eq!(r.retry_count, 0);
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(err.message.contains("step 1 of 4"), "{}", err.message);
    assert_eq!(f.runtime.metrics().tool("hang_own").unwrap().calls, 1);

    // An operator's per-tool settings win over the tool's own.
    let config = ToolsConfig::from_json(
        r#"{"tools": {"hang_own": {"timeout_ms": 200,
             "retry": {"max_retries": 1, "initial_delay_ms": 100, "max_timeout_ms": 200}}}}"#,
    )
    .unwrap();
    let mut reg = ToolRegistry::new();
    reg.register(hang_declaring(
        ToolCapabilities::default()
            .with_timeout_ms(700)
            .with_max_retries(0),
    ))
    .unwrap();
    let runtime = ToolRuntime::new(reg, config)
        .unwrap()
        .with_jitter(Arc::new(NoJitter));
    let start = Instant::now();
    let r = runtime
        .run(&call("c2", "hang_own", json!({})), &ctx(120_000))
        .await;
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(r.retry_count, 1);
}

#[tokio::test(start_paused = true)]
async fn execution_errors_are_not_retried() {
    let f = fixture(ToolsConfig::default());
    let start = Instant::now();
    let r = f
        .runtime
        .run(&call("c1", "broken", json!({})), &ctx(1000))
        .await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(r.retry_count, 0);
    assert_eq!(
        r.observation,
        "Operation failed.\n\nError Type: execution_error\nError Code: EXECUTION_ERROR\n\
         Error Message: division by zero in column `ratio`\n\nTool Call ID: c1"
    );
}
