//! The built-in tools served through the tool runtime: schema validation, permissions, error
//! kinds and output levels apply to them like to any other tool.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::sync::Arc;

use ba_agent::adapters::register_builtins;
use ba_agent::builtin::{Builtins, demo_data};
use ba_protocol::tool::{InvocationContext, OutputLevel, PermissionLevel, ToolCall};
use ba_tools::{ToolRegistry, ToolRuntime, ToolsConfig};
use serde_json::json;

fn runtime(data: &std::path::Path, uploads: &std::path::Path) -> ToolRuntime {
    let mut registry = ToolRegistry::new();
    register_builtins(&mut registry, Arc::new(Builtins::demo(data, uploads))).unwrap();
    ToolRuntime::new(registry, ToolsConfig::default()).unwrap()
}

#[tokio::test]
async fn demo_tools_run_through_every_layer() {
    let data = tempfile::tempdir().unwrap();
    let uploads = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let runtime = runtime(data.path(), uploads.path());
    let ctx = InvocationContext::default();

    let mut call = ToolCall::new(
        "call_1",
        "query_database",
        json!({"query": "SELECT region, SUM(amount) AS revenue FROM sales GROUP BY region ORDER BY region"}),
    );
    call.output_level = Some(OutputLevel::Standard);
    let result = runtime.run(&call, &ctx).await;
    assert!(result.success, "{}", result.observation);
    assert!(
        result.observation.contains("West"),
        "{}",
        result.observation
    );

    // A write is refused by the tool itself and reaches the model as the standard error text.
    let write = ToolCall::new(
        "call_2",
        "query_database",
        json!({"query": "DELETE FROM sales"}),
    );
    let result = runtime.run(&write, &ctx).await;
    assert!(!result.success);
    assert!(
        result.observation.starts_with("Operation failed."),
        "{}",
        result.observation
    );
    assert!(
        result.observation.contains("Error Type: permission_denied"),
        "{}",
        result.observation
    );

    // Arguments that break the tool's schema never reach it.
    let bad = ToolCall::new("call_3", "query_database", json!({"query": 42}));
    let result = runtime.run(&bad, &ctx).await;
    assert!(
        result
            .observation
            .contains("Error Type: invalid_parameters"),
        "{}",
        result.observation
    );
    assert!(
        result.observation.contains("/query"),
        "{}",
        result.observation
    );

    // A path outside the roots is refused.
    let escape = ToolCall::new("call_4", "file_reader", json!({"path": "../../etc/passwd"}));
    let result = runtime.run(&escape, &ctx).await;
    assert!(!result.success);
    assert!(
        result
            .observation
            .contains("outside the allowed directories"),
        "{}",
        result.observation
    );
}

#[tokio::test]
async fn read_only_tools_run_at_the_restricted_level_and_code_does_not() {
    let data = tempfile::tempdir().unwrap();
    let uploads = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let runtime = runtime(data.path(), uploads.path());
    let ctx = InvocationContext {
        permission_level: PermissionLevel::Restricted,
        ..InvocationContext::default()
    };

    let read = ToolCall::new(
        "call_1",
        "file_reader",
        json!({"path": demo_data::CSV_FILE}),
    );
    let result = runtime.run(&read, &ctx).await;
    assert!(result.success, "{}", result.observation);

    let code = ToolCall::new("call_2", "run_python", json!({"code": "print(1)"}));
    let result = runtime.run(&code, &ctx).await;
    assert!(!result.success);
    assert!(
        result.observation.contains("Error Type: permission_denied"),
        "{}",
        result.observation
    );
}
