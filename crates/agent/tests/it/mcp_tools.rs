#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! MCP tools in the agent (feature `mcp`), against the MCP crate's test server run as a child
//! process (built as this package's example `agent_mcp_test_server`): a replay run calling a
//! tool by its model name with the result and the server inventory in the log; a server that
//! joins later appearing in the next run's tool list, never mid-run; and the runtime's rules
//! on MCP calls (errors, binaries to data files, permissions, skills' `allowed_tools`,
//! timeouts with progress, cancellation, no retries, spill).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ba_agent::{Agent, AgentBuilder, Input, McpToolSource, RunStatus};
use ba_mcp::{McpManager, McpOptions, McpServerConfig};
use ba_model::{DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ReplayClient};
use ba_protocol::ContextModifier;
use ba_protocol::EntryKind;
use ba_protocol::{InvocationContext, OutputLevel, PermissionLevel, ToolCall};
use ba_protocol::{LogRole, ToolErrorKind};
use ba_storage::{FileStore, NewConversation};
use ba_tools::{CallOptions, FsSink, ToolRegistry, ToolRuntime, ToolsConfig, dynamic_tool};
use serde_json::{Value, json};

/// The test server, built next to the test binaries by `cargo test -p ba-agent --features mcp`
/// (the MCP crate's own tests find theirs the same way).
fn test_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let path = dir.join("examples").join("agent_mcp_test_server");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test -p ba-agent --features mcp` builds it",
        path.display()
    );
    path
}

fn server() -> McpServerConfig {
    McpServerConfig::stdio(test_server().to_string_lossy(), Vec::<String>::new())
}

fn options() -> McpOptions {
    McpOptions::default().with_shutdown_grace(Duration::from_millis(500))
}

/// Records the tool names of every request, then lets the replay client answer.
#[derive(Debug)]
struct Recording {
    inner: ReplayClient,
    tools: Mutex<Vec<Vec<String>>>,
}

impl Recording {
    fn new(turns: &[Value]) -> Arc<Self> {
        let inner =
            ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test").unwrap();
        Arc::new(Self {
            inner,
            tools: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<Vec<String>> {
        self.tools.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ModelClient for Recording {
    fn provider(&self) -> &str {
        "recording"
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let tools = request.tools.iter().map(|t| t.name.clone()).collect();
        self.tools.lock().unwrap().push(tools);
        self.inner.complete_streaming(request, on_delta).await
    }
}

fn tool_turn(call: &str, tool: &str, input: Value, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": call, "name": tool, "input": input}]},
        "stop_reason": "tool_use"}})
}

fn text_turn(text: &str, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": text},
        "stop_reason": "end_turn"}})
}

fn builder(client: Arc<Recording>, dir: &Path) -> AgentBuilder {
    Agent::builder(client).store(Arc::new(FileStore::open(dir).unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_run_calls_an_mcp_tool_by_its_model_name() {
    let dir = tempfile::tempdir().unwrap();
    let manager = McpManager::start([("calc", server().with_required(true))], options()).await;
    manager.check_required().unwrap();
    let client = Recording::new(&[
        tool_turn(
            "c1",
            "calc__add",
            json!({"a": 2, "b": 3}),
            json!({"role": "user", "text": "Add 2 and 3."}),
        ),
        text_turn("2 + 3 = 5.", json!({"role": "tool", "tool_call_id": "c1"})),
        text_turn("Still 5.", json!({"role": "user", "text": "Again?"})),
    ]);
    let agent = builder(client.clone(), dir.path())
        .mcp(manager.clone())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let summary = agent
        .send(&id, Input::message("Add 2 and 3."))
        .finish()
        .await;
    assert_eq!(summary.status, RunStatus::Answered, "{:?}", summary.error);
    assert_eq!(summary.final_answer.as_deref(), Some("2 + 3 = 5."));

    let log = agent.entries(&id).await.unwrap();
    let result = log
        .iter()
        .find(|e| e.role == LogRole::Tool)
        .expect("the tool result is in the log");
    assert_eq!(result.tool_name.as_deref(), Some("calc__add"));
    assert_eq!(result.is_error, None);
    // The structured content (the text only repeats it in words, so both are kept).
    let data: Value = serde_json::from_str(&result.text()).unwrap();
    assert_eq!(data["structuredContent"]["sum"], 5, "{data}");
    assert_eq!(data["text"], "2 + 3 = 5");

    // The inventory opens the run: hidden from the model, before the user's message.
    assert_eq!(log[0].kind(), Some(EntryKind::ServerInventory));
    assert!(!log[0].include_in_context);
    let inventory = log[0].records.server_inventory.clone().unwrap();
    assert_eq!(inventory.servers.len(), 1);
    assert_eq!(inventory.servers[0].name, "calc");
    assert_eq!(inventory.servers[0].state, "ready");
    assert!(inventory.servers[0].tools.contains(&"calc__add".to_owned()));
    // The model saw the same tools, under their model names.
    let requests = client.requests();
    assert!(requests[0].contains(&"calc__echo".to_owned()));
    assert_eq!(requests[0], requests[1], "one tool list within a run");

    // Nothing changed: the next run writes no second inventory.
    let again = agent.send(&id, Input::message("Again?")).finish().await;
    assert_eq!(again.status, RunStatus::Answered, "{:?}", again.error);
    let log = agent.entries(&id).await.unwrap();
    let inventories = log
        .iter()
        .filter(|e| e.records.server_inventory.is_some())
        .count();
    assert_eq!(inventories, 1);
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.tool_servers.len(), 1);
    assert!(
        report.tool_servers[0]
            .added
            .contains(&"calc__add".to_owned())
    );
    assert_eq!(report.tools["calc__add"].calls, 1);
    manager.shutdown().await;
}

/// A server whose configuration says `approval: ask`: a call of its tool waits for a person,
/// and runs once approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_that_asks_for_approval_pauses_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let config = server()
        .with_required(true)
        .with_approval(ba_protocol::ToolApproval::Ask);
    let manager = McpManager::start([("calc", config)], options()).await;
    manager.check_required().unwrap();
    let client = Recording::new(&[
        tool_turn(
            "c1",
            "calc__add",
            json!({"a": 2, "b": 3}),
            json!({"role": "user", "text": "Add 2 and 3."}),
        ),
        text_turn("2 + 3 = 5.", json!({"role": "tool", "tool_call_id": "c1"})),
    ]);
    let agent = builder(client, dir.path())
        .mcp(manager.clone())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let paused = agent
        .send(&id, Input::message("Add 2 and 3."))
        .finish()
        .await;
    assert_eq!(paused.status, RunStatus::AwaitingApproval, "{paused:?}");
    let pending = agent.pending_approvals(&id).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool, "calc__add");
    assert!(
        !agent
            .entries(&id)
            .await
            .unwrap()
            .iter()
            .any(|e| e.role == LogRole::Tool),
        "ran before approval"
    );
    let done = agent
        .send(
            &id,
            Input::Decide(vec![ba_agent::ApprovalAnswer::approve("c1")]),
        )
        .finish()
        .await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    assert_eq!(done.final_answer.as_deref(), Some("2 + 3 = 5."));
    manager.shutdown().await;
}

/// A stdio server that starts only once `gate` exists: a server slower than the first round,
/// opened by the test at a chosen point instead of after a guessed delay.
fn gated_server(dir: &Path, gate: &Path) -> McpServerConfig {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("gated.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.02; done\nexec '{}'\n",
            gate.display(),
            test_server().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    McpServerConfig::stdio(script.to_string_lossy(), Vec::<String>::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_joins_later_is_in_the_next_run_never_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let manager = McpManager::start(
        [
            ("fast", server().with_required(true)),
            ("late", gated_server(dir.path(), &gate)),
        ],
        options(),
    )
    .await;
    // A tool of the agent's own opens the gate and waits until the late server is ready,
    // in the middle of the first run.
    let opener = {
        let gate = gate.clone();
        let manager = manager.clone();
        dynamic_tool(
            "open_gate",
            "Lets the late server start.",
            json!({"type": "object"}),
            move |_, _| {
                let gate = gate.clone();
                let manager = manager.clone();
                async move {
                    std::fs::write(&gate, b"").unwrap();
                    assert!(manager.wait_settled(Duration::from_secs(30)).await);
                    Ok(json!("open"))
                }
            },
        )
    };
    let client = Recording::new(&[
        tool_turn("c1", "open_gate", json!({}), json!({"role": "user"})),
        text_turn("Opened.", json!({"tool_call_id": "c1"})),
        tool_turn(
            "c2",
            "late__echo",
            json!({"text": "hi"}),
            json!({"role": "user", "text": "Echo."}),
        ),
        text_turn("It said hi.", json!({"tool_call_id": "c2"})),
    ]);
    let agent = builder(client.clone(), dir.path())
        .tool(opener)
        .mcp(manager.clone())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let first = agent.send(&id, Input::message("Open.")).finish().await;
    assert_eq!(first.status, RunStatus::Answered, "{:?}", first.error);
    let second = agent.send(&id, Input::message("Echo.")).finish().await;
    assert_eq!(second.status, RunStatus::Answered, "{:?}", second.error);

    let requests = client.requests();
    assert_eq!(requests.len(), 4);
    let has = |i: usize, name: &str| requests[i].iter().any(|t| t == name);
    // Run 1: the late server became ready during the run, yet both requests of the run
    // offered the same list, without its tools.
    assert_eq!(requests[0], requests[1]);
    assert!(has(0, "fast__echo") && !has(0, "late__echo"));
    // Run 2 offers them and calls one.
    assert!(has(2, "late__echo"));
    assert_eq!(requests[2], requests[3]);

    let log = agent.entries(&id).await.unwrap();
    let inventories: Vec<_> = log
        .iter()
        .filter_map(|e| e.records.server_inventory.clone())
        .collect();
    assert_eq!(
        inventories.len(),
        2,
        "a second inventory for the changed tools"
    );
    assert_eq!(inventories[0].servers[1].state, "starting");
    assert!(inventories[0].servers[1].tools.is_empty());
    assert_eq!(inventories[1].servers[1].state, "ready");
    assert!(
        inventories[1].servers[1]
            .tools
            .contains(&"late__echo".to_owned())
    );
    let echoed = log
        .iter()
        .find(|e| e.tool_call_id.as_deref() == Some("c2"))
        .unwrap();
    assert_eq!(echoed.text(), "hi");
    manager.shutdown().await;
}

/// A runtime holding the manager's tools, as a run of the agent gets them.
fn runtime_of(source: &McpToolSource, config: ToolsConfig) -> ToolRuntime {
    let mut registry = ToolRegistry::new();
    for tool in source.tools() {
        registry.register(tool).unwrap();
    }
    ToolRuntime::new(registry, config).unwrap()
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_follow_the_runtime_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut admin = server();
    admin.permission = Some(PermissionLevel::Admin);
    let mut full = server();
    full.default_level = Some(OutputLevel::Full);
    let manager = McpManager::start(
        [
            ("calc", server().with_required(true)),
            ("admin", admin.with_required(true)),
            ("full", full.with_required(true)),
            ("dies", server().with_required(true)),
            (
                "idle",
                server().with_required(true).with_tool_timeout_ms(1000),
            ),
        ],
        options(),
    )
    .await;
    manager.check_required().unwrap();
    let data = dir.path().join("data");
    let source = McpToolSource::new(manager.clone())
        .with_sink(Arc::new(FsSink::new(&data)))
        .with_max_call(Duration::from_millis(1500));
    let runtime = runtime_of(&source, ToolsConfig::default());
    let ctx = InvocationContext::default();

    // isError: an execution error whose message is the tool's text.
    let r = runtime
        .run(
            &call("c1", "calc__fail", json!({"message": "no such table: q3"})),
            &ctx,
        )
        .await;
    assert!(!r.success);
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::ExecutionError);
    assert_eq!(err.code, "MCP_TOOL_ERROR");
    assert_eq!(err.message, "no such table: q3");

    // Images and blobs go to data files; the observation names them and holds no base64.
    let r = runtime
        .run(&call("c2", "calc__image", json!({})), &ctx)
        .await;
    assert!(r.success, "{}", r.observation);
    assert!(!r.observation.contains("iVBORw0KGgo"), "{}", r.observation);
    let paths: Vec<PathBuf> = std::fs::read_dir(data.join("tool_data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    let png = paths
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"))
        .unwrap();
    assert_eq!(std::fs::read(png).unwrap(), b"\x89PNG\r\n\x1a\n");
    assert!(r.observation.contains(&png.display().to_string()));
    assert!(r.observation.contains("an image and a blob"));

    // The server's permission, and a skill's allowed_tools.
    let r = runtime
        .run(&call("c3", "admin__echo", json!({"text": "x"})), &ctx)
        .await;
    assert_eq!(r.error.unwrap().code, "PERMISSION_LEVEL");
    let skill = ContextModifier {
        allowed_tools: Some(vec!["calc__add".into()]),
        ..ContextModifier::default()
    };
    let opts = CallOptions {
        modifier: Some(&skill),
        ..CallOptions::default()
    };
    let r = runtime
        .run_with(&call("c4", "calc__echo", json!({"text": "x"})), &ctx, opts)
        .await;
    assert_eq!(r.error.unwrap().code, "TOOL_NOT_ALLOWED");
    let r = runtime
        .run_with(
            &call("c5", "calc__add", json!({"a": 1, "b": 1})),
            &ctx,
            opts,
        )
        .await;
    assert!(r.success, "{}", r.observation);

    // The arguments are checked against the server's schema before the call.
    let r = runtime
        .run(&call("c6", "calc__add", json!({"a": "one"})), &ctx)
        .await;
    assert_eq!(r.error.unwrap().kind, ToolErrorKind::InvalidParameters);

    // The server's default level: `full` results are spilled to a data file.
    let spill = dir.path().join("spill");
    let full_ctx = InvocationContext {
        storage_dir: Some(spill.display().to_string()),
        ..InvocationContext::default()
    };
    let r = runtime
        .run(
            &call("c7", "full__echo", json!({"text": "kept whole"})),
            &full_ctx,
        )
        .await;
    assert!(r.success);
    assert_eq!(r.output_level, OutputLevel::Full);
    let spilled = r.data_ref.expect("spilled");
    assert_eq!(std::fs::read_to_string(spilled).unwrap(), "\"kept whole\"");

    // The idle timeout: progress notifications, then silence; the error names the last one,
    // and a timeout is not retried.
    let r = runtime
        .run(
            &call("c8", "idle__progress_then_hang", json!({"steps": 2})),
            &ctx,
        )
        .await;
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(
        err.message.contains("last progress: 2/4 step 2"),
        "{}",
        err.message
    );
    assert_eq!(r.retry_count, 0);

    // The runtime's cap (the source's 1.5 s here): the call is dropped, which cancels it on
    // the server, and the progress so far is the partial output.
    let r = runtime
        .run(
            &call("c9", "calc__progress_then_hang", json!({"steps": 3})),
            &ctx,
        )
        .await;
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(
        err.message.contains("timed out after 1500 ms"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("3 progress notification(s)") && err.message.contains("3/6"),
        "{}",
        err.message
    );
    assert_eq!(r.retry_count, 0);
    let r = runtime
        .run(
            &call("c10", "calc__cancelled_count", json!({"at_least": 1})),
            &ctx,
        )
        .await;
    assert_eq!(r.observation, "1", "the server saw the cancellation");

    // A server that dies mid-call: a resource error, not retried, and the others go on.
    let r = runtime
        .run(&call("c11", "dies__exit", json!({"code": 3})), &ctx)
        .await;
    let err = r.error.unwrap();
    assert_eq!(err.kind, ToolErrorKind::ResourceError);
    assert_eq!(err.code, "MCP_SERVER_UNAVAILABLE");
    assert!(
        err.message.contains("exited with status 3"),
        "{}",
        err.message
    );
    assert_eq!(r.retry_count, 0);
    let r = runtime
        .run(&call("c12", "calc__echo", json!({"text": "ok"})), &ctx)
        .await;
    assert_eq!(r.observation, "ok");
    manager.shutdown().await;
}
