//! The built-in tools working together on the demo data, and the committed demo fixtures
//! checked against the generator.

use std::path::{Path, PathBuf};

use ba_agent::builtin::{BuiltinError, Builtins, demo_data};
use serde_json::json;

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
    let tools = Builtins::demo(data.path(), uploads.path());
    let names: Vec<&str> = tools.specs().iter().map(|s| s.name).collect();
    assert_eq!(names, ["file_reader", "query_database", "run_python"]);

    let targets = tools
        .call("file_reader", json!({"path": "sales.csv"}))
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

    let actual = tools
        .call(
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

    let upload = tools
        .call("file_reader", json!({"path": "upload_7"}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(upload["rows"], json!([["West"]]));

    let refused = tools
        .call("query_database", json!({"query": "DELETE FROM sales"}))
        .await
        .unwrap();
    assert!(matches!(refused, Err(BuiltinError::QueryRefused { .. })));
    assert!(
        tools
            .call("web_search", json!({"query": "x"}))
            .await
            .is_none()
    );
}
