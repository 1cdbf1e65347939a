//! The built-in tools working together on the demo data, and the committed demo fixtures
//! checked against the generator.

#[path = "builtin_tools/run_python.rs"]
mod run_python;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ba_builtins::{demo_data, demo_tools};
use ba_protocol::ToolErrorKind;
use ba_tools::{CallContext, Tool, ToolError};
use serde_json::{Value, json};

/// Calls the tool named `name` of `tools`; `None` when there is none.
async fn call(
    tools: &[Arc<dyn Tool>],
    name: &str,
    args: Value,
) -> Option<Result<Value, ToolError>> {
    let tool = tools.iter().find(|t| t.name() == name)?;
    Some(tool.call(args, &CallContext::detached("call_1")).await)
}

fn repo_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo")
}

#[test]
fn committed_demo_fixtures_are_current() {
    let fresh = tempfile::tempdir().unwrap();
    demo_data::generate(fresh.path()).unwrap();
    for file in [demo_data::DB_FILE, demo_data::CSV_FILE] {
        let committed = std::fs::read(repo_fixtures().join(file)).unwrap_or_default();
        let generated = std::fs::read(fresh.path().join(file)).unwrap();
        assert!(
            committed == generated,
            "fixtures/demo/{file} is stale or missing: run `cargo xtask fixtures`"
        );
    }
}

#[tokio::test]
async fn demo_tools_answer_the_sales_question() {
    let data = tempfile::tempdir().unwrap();
    let uploads = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    std::fs::write(uploads.path().join("upload_7.csv"), "region\nWest\n").unwrap();
    let tools = demo_tools(data.path(), uploads.path());
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["file_reader", "query_database", "run_python"]);

    let targets = call(&tools, "file_reader", json!({"path": "sales.csv"}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(targets["row_count"], 20);
    let west_q3 = targets["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "West" && r[1] == "Q3")
        .unwrap();
    let target: f64 = west_q3[2].as_str().unwrap().parse().unwrap();

    let actual = call(
        &tools,
        "query_database",
        json!({
            "query": "SELECT SUM(amount) FROM sales WHERE region = :region \
                      AND date BETWEEN :from AND :to",
            "params": {"region": "West", "from": "2024-07-01", "to": "2024-09-30"}
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let actual = actual["rows"][0][0].as_f64().unwrap();
    assert!(actual > target * 2.0, "West Q3 {actual} vs target {target}");

    let upload = call(&tools, "file_reader", json!({"path": "upload_7"}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(upload["rows"], json!([["West"]]));

    let refused = call(
        &tools,
        "query_database",
        json!({"query": "DELETE FROM sales"}),
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::PermissionDenied);
    assert!(refused.message.starts_with("query refused"), "{refused:?}");
    assert!(
        call(&tools, "web_search", json!({"query": "x"}))
            .await
            .is_none()
    );
}
