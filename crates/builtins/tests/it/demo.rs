//! The built-in tools working together on the demo data, and the committed demo fixtures
//! checked against the generator.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ba_builtins::{demo_data, demo_tools};
use ba_protocol::ToolErrorKind;
use ba_tools::{CallContext, ConversationFiles, DirFiles, Tool, ToolError};
use serde_json::{Value, json};

/// Calls the tool named `name` of `tools`; `None` when there is none.
async fn call(
    tools: &[Arc<dyn Tool>],
    name: &str,
    args: Value,
) -> Option<Result<Value, ToolError>> {
    call_in(tools, name, args, None).await
}

/// Calls the tool named `name` of `tools` with the conversation's `files`.
async fn call_in(
    tools: &[Arc<dyn Tool>],
    name: &str,
    args: Value,
    files: Option<Arc<dyn ConversationFiles>>,
) -> Option<Result<Value, ToolError>> {
    let tool = tools.iter().find(|t| t.name() == name)?;
    let mut ctx = CallContext::detached("call_1");
    ctx.files = files;
    Some(tool.call(args, &ctx).await)
}

fn repo_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo")
}

#[test]
fn committed_demo_fixtures_are_current() {
    let fresh = tempfile::tempdir().unwrap();
    demo_data::generate(fresh.path()).unwrap();
    for file in [
        demo_data::DB_FILE,
        demo_data::CSV_FILE,
        demo_data::GBK_CSV_FILE,
        demo_data::XLSX_FILE,
    ] {
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
    let files = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let files = DirFiles::new(files.path());
    files
        .add_upload("regions.csv", b"region\nWest\n")
        .await
        .unwrap();
    let tools = demo_tools(data.path());
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

    let files: Arc<dyn ConversationFiles> = Arc::new(files);
    let upload = call_in(
        &tools,
        "file_reader",
        json!({"path": "upload_001"}),
        Some(files.clone()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(upload["rows"], json!([["West"]]));
    let missing = call(&tools, "file_reader", json!({"path": "upload_001"}))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(missing.message, "no file `upload_001` in this conversation");

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
