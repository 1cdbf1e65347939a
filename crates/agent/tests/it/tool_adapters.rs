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
use ba_protocol::{InvocationContext, OutputLevel, PermissionLevel, ToolCall};
use ba_tools::{ToolRegistry, ToolRuntime, ToolsConfig};
use serde_json::json;

fn runtime(data: &std::path::Path) -> ToolRuntime {
    let mut registry = ToolRegistry::new();
    for tool in demo_tools(data) {
        registry.register_arc(tool).unwrap();
    }
    ToolRuntime::new(registry, ToolsConfig::default()).unwrap()
}

#[tokio::test]
async fn demo_tools_run_through_every_layer() {
    let data = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let runtime = runtime(data.path());
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
    demo_data::generate(data.path()).unwrap();
    let runtime = runtime(data.path());
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
    use ba_storage::DataFileStore;
    let data = tempfile::tempdir().unwrap();
    demo_data::generate(data.path()).unwrap();
    let mut registry = ToolRegistry::new();
    for tool in demo_tools(data.path()) {
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
    // The schema lists the skills, so a wrong name is refused by the validation layer, before
    // the tool runs, naming the field, the value and the skills there are.
    for part in [
        "Error Type: invalid_parameters",
        "Error Code: SCHEMA_VIOLATION",
        "/skill: \"nope\" is not one of \"tidy\"",
        "Tool Call ID: s2",
    ] {
        assert!(
            refused.observation.contains(part),
            "{part} missing from: {}",
            refused.observation
        );
    }
    let scope = ba_tools::RunScope::new();
    let direct = tool.activate(&json!({"skill": "tidy"}), Some(&scope));
    assert_eq!(
        direct.context_modifier.allowed_tools.as_deref(),
        Some(&["query_database".to_owned()][..])
    );
    assert!(!direct.activation_id.is_empty());
    // Within one run the skill stays active: activated again, it closes a cycle.
    let again = tool.activate(&json!({"skill": "tidy"}), Some(&scope));
    assert!(!again.success);
    assert!(
        again
            .error
            .as_deref()
            .is_some_and(|e| e.contains("cycle refused: tidy → tidy")),
        "{again:?}"
    );
    // Outside a run each activation stands alone.
    assert!(tool.activate(&json!({"skill": "tidy"}), None).success);
}

/// Keeps every request, then lets the replay client answer.
#[derive(Debug)]
struct Recording {
    inner: ba_model::ReplayClient,
    requests: std::sync::Mutex<Vec<ba_model::ModelRequest>>,
}

#[async_trait::async_trait]
impl ba_model::ModelClient for Recording {
    fn provider(&self) -> &str {
        "recording"
    }
    async fn complete_streaming(
        &self,
        request: &ba_model::ModelRequest,
        on_delta: &mut ba_model::DeltaSink<'_>,
    ) -> Result<ba_model::ModelResponse, ba_model::ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete_streaming(request, on_delta).await
    }
}

#[tokio::test]
async fn the_model_summarizer_sends_a_transcript_and_returns_the_text() {
    use ba_agent::{ModelSummarizer, SUMMARY_INSTRUCTION, transcript};
    use ba_context::Summarizer;
    use ba_model::ReplayClient;
    use ba_protocol::{LogEntry, LogRole, LogToolCall};
    let recording = r#"[{"expect": {"role": "user"}, "response": {"message": {"role": "assistant",
        "content": "West tripled in Q3 (query on sales)."}, "stop_reason": "end_turn"}}]"#;
    let client = Arc::new(Recording {
        inner: ReplayClient::from_json(recording, "inline").unwrap(),
        requests: Default::default(),
    });
    let summarizer = ModelSummarizer::new(client.clone(), "cheap-model");
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
    assert_eq!(
        text,
        "[user] How did West do?\n[tool call c1 query_database] {\"query\":\"SELECT 1\"}\n"
    );
    let summary = summarizer.summarize(&entries, 200).await.unwrap();
    assert_eq!(summary, "West tripled in Q3 (query on sales).");
    // The one request: the chosen model, the summary instruction as its system prompt, and
    // one user message carrying the whole transcript and the token cap.
    let requests = client.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.model, "cheap-model");
    assert_eq!(request.system.as_deref(), Some(SUMMARY_INSTRUCTION));
    assert_eq!(request.max_tokens, 200);
    assert!(request.tools.is_empty());
    assert_eq!(request.entries.len(), 1);
    assert_eq!(request.entries[0].role, LogRole::User);
    let sent = request.entries[0].text();
    assert!(
        sent.ends_with(&text),
        "the transcript is sent whole: {sent}"
    );
    assert!(sent.contains("at most 200 tokens"), "{sent}");
}

#[tokio::test]
async fn the_model_summarizer_writes_a_title_from_the_question() {
    use ba_agent::{ModelSummarizer, TITLE_INSTRUCTION};
    use ba_context::Summarizer;
    use ba_model::ReplayClient;
    let recording = r#"[{"expect": {"role": "user", "text": "How did West do in Q3?"},
        "response": {"message": {"role": "assistant", "content": "West Q3 sales"},
        "stop_reason": "end_turn"}}]"#;
    let client = Arc::new(Recording {
        inner: ReplayClient::from_json(recording, "inline").unwrap(),
        requests: Default::default(),
    });
    let summarizer = ModelSummarizer::new(client.clone(), "cheap-model");
    let title = summarizer.title("How did West do in Q3?").await.unwrap();
    assert_eq!(title.as_deref(), Some("West Q3 sales"));
    let requests = client.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].model, "cheap-model");
    assert_eq!(requests[0].system.as_deref(), Some(TITLE_INSTRUCTION));
    assert_eq!(requests[0].max_tokens, 32);
}
