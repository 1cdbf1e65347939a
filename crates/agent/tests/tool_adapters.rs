//! The built-in tools served through the tool runtime: schema validation, permissions, error
//! kinds and output levels apply to them like to any other tool.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::sync::Arc;

use ba_builtins::{demo_data, demo_tools};
use ba_protocol::tool::{InvocationContext, OutputLevel, PermissionLevel, ToolCall};
use ba_tools::{ToolRegistry, ToolRuntime, ToolsConfig};
use serde_json::json;

fn runtime(data: &std::path::Path, uploads: &std::path::Path) -> ToolRuntime {
    let mut registry = ToolRegistry::new();
    for tool in demo_tools(data, uploads) {
        registry.register_arc(tool).unwrap();
    }
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

#[tokio::test]
async fn spilled_data_goes_to_the_data_file_store_and_file_reader_can_read_it() {
    use ba_agent::DataFileSink;
    use ba_storage::datafile::DataFileStore;
    let data = tempfile::tempdir().unwrap();
    let uploads = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let mut registry = ToolRegistry::new();
    for tool in demo_tools(data.path(), uploads.path()) {
        registry.register_arc(tool).unwrap();
    }
    let files = DataFileStore::open(data.path().join("spill")).unwrap();
    let config = ToolsConfig {
        spill_threshold_bytes: 1024,
        ..ToolsConfig::default()
    };
    let runtime = ToolRuntime::new(registry, config)
        .unwrap()
        .with_sink(Arc::new(
            DataFileSink::new(files.clone()).for_conversation("conv-1"),
        ));
    let call = ToolCall::new(
        "call_big",
        "query_database",
        json!({"query": "SELECT * FROM sales LIMIT 200"}),
    );
    let result = runtime.run(&call, &InvocationContext::default()).await;
    assert!(result.success, "{}", result.observation);
    let path = result.data_ref.clone().expect("spilled");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, result.data_size_bytes);
    let listed = files.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].call_id.as_deref(), Some("call_big"));
    assert_eq!(listed[0].conversation_id.as_deref(), Some("conv-1"));
    // The reference is a path the file reader accepts (the spill folder is inside a root).
    let read = ToolCall::new(
        "call_read",
        "file_reader",
        json!({"path": path, "format": "json"}),
    );
    let again = runtime.run(&read, &InvocationContext::default()).await;
    assert!(again.success, "{}", again.observation);
}

#[tokio::test]
async fn activate_skill_runs_as_a_tool_and_refusals_are_tool_errors() {
    use ba_agent::SkillTool;
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join("tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy tables before a report.\nallowed-tools: query_database\n---\nSort every table by its first column.\n",
    )
    .unwrap();
    let skills = Arc::new(ba_skills::SkillSet::load([dir.path()]));
    let tool = SkillTool::new(skills);
    assert!(ba_tools::Tool::description(&tool).contains("tidy"));
    let mut registry = ToolRegistry::new();
    registry.register(tool.clone()).unwrap();
    let runtime = ToolRuntime::new(registry, ToolsConfig::default()).unwrap();
    let ctx = InvocationContext {
        conversation_id: Some("c1".into()),
        ..InvocationContext::default()
    };
    let ok = runtime
        .run(
            &ToolCall::new("s1", "activate_skill", json!({"skill": "tidy"})),
            &ctx,
        )
        .await;
    assert!(
        ok.success && ok.observation.contains("Sort every table"),
        "{}",
        ok.observation
    );
    let refused = runtime
        .run(
            &ToolCall::new("s2", "activate_skill", json!({"skill": "nope"})),
            &ctx,
        )
        .await;
    assert!(!refused.success, "{}", refused.observation);
    // The schema lists the skills, so a wrong name is refused before the tool runs.
    assert!(
        refused.observation.contains("skill"),
        "{}",
        refused.observation
    );
    let direct = tool.activate(&json!({"skill": "tidy"}), Some("c1")).await;
    assert_eq!(
        direct.context_modifier.allowed_tools.as_deref(),
        Some(&["query_database".to_owned()][..])
    );
    assert!(!direct.activation_id.is_empty());
}

#[tokio::test]
async fn the_model_summarizer_sends_a_transcript_and_returns_the_text() {
    use ba_agent::{ModelSummarizer, transcript};
    use ba_context::Summarizer;
    use ba_model::ReplayClient;
    use ba_protocol::{LogEntry, LogRole, LogToolCall};
    let recording = r#"[{"expect": {"role": "user"}, "response": {"message": {"role": "assistant",
        "content": "West tripled in Q3 (query on sales)."}, "stop_reason": "end_turn"}}]"#;
    let client = Arc::new(ReplayClient::from_json(recording, "inline").unwrap());
    let summarizer = ModelSummarizer::new(client, "cheap-model");
    let mut call = LogEntry::new("a", LogRole::Assistant, "t");
    call.tool_calls = Some(vec![LogToolCall::new(
        "c1",
        "query_database",
        &json!({"query": "SELECT 1"}),
    )]);
    let entries = vec![
        LogEntry::new("u", LogRole::User, "t").with_text("How did West do?"),
        call,
    ];
    let text = transcript(&entries);
    assert!(
        text.contains("[user] How did West do?") && text.contains("[tool call c1 query_database]")
    );
    let summary = summarizer.summarize(&entries, 200).await.unwrap();
    assert_eq!(summary, "West tripled in Q3 (query on sales).");
}
