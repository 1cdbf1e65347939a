//! What the tool runtime adds to an MCP call (feature `mcp`): the same `echo` call on a local
//! stdio server, made directly with rmcp's client (`baseline_direct_rmcp`) and as the agent
//! makes it (`runtime`: an [`McpTool`] of an [`McpToolSource`] run by a [`ToolRuntime`], with
//! argument validation, permissions, the timeout, output levels and metrics on top of the
//! manager). The difference of the medians is the runtime's and the manager's overhead per call.
//!
//! The server is this very binary run with `BA_AGENT_MCP_BENCH_SERVER=1` (an rmcp server with
//! one `echo` tool), so the bench needs nothing built beforehand.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ba_agent::McpToolSource;
use ba_mcp::{McpManager, McpOptions, McpServerConfig};
use ba_protocol::{InvocationContext, ToolCall};
use ba_tools::{ToolRegistry, ToolRuntime, ToolsConfig};
use criterion::Criterion;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::json;

const SERVER_VAR: &str = "BA_AGENT_MCP_BENCH_SERVER";

#[derive(Debug, Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let schema = schema.as_object().cloned().unwrap_or_default();
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Echoes its text.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or("")
            .to_owned();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(e))
}

fn me() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|e| fail(e))
}

fn bench_call(c: &mut Criterion) {
    let rt = runtime();
    let args = json!({"text": "hello"});
    let mut group = c.benchmark_group("mcp_runtime_call_echo");

    let direct = rt.block_on(async {
        let mut child = tokio::process::Command::new(me())
            .env(SERVER_VAR, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| fail(e));
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            fail("no pipes")
        };
        let client = ().serve((stdout, stdin)).await.unwrap_or_else(|e| fail(e));
        (child, client)
    });
    let arguments = args.as_object().cloned();
    group.bench_function("baseline_direct_rmcp", |b| {
        b.to_async(&rt).iter(|| async {
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = arguments.clone();
            let r = direct.1.call_tool(params).await.unwrap_or_else(|e| fail(e));
            black_box(r)
        });
    });

    let server = McpServerConfig::stdio(me().to_string_lossy(), Vec::<String>::new())
        .with_env(SERVER_VAR, "1")
        .with_required(true);
    let options = McpOptions::default().with_shutdown_grace(Duration::from_millis(500));
    let manager = rt.block_on(McpManager::start([("bench", server)], options));
    if let Err(e) = manager.check_required() {
        fail(e);
    }
    let mut registry = ToolRegistry::new();
    for tool in McpToolSource::new(manager.clone()).tools() {
        registry.register(tool).unwrap_or_else(|e| fail(e));
    }
    let tools = ToolRuntime::new(registry, ToolsConfig::default()).unwrap_or_else(|e| fail(e));
    let call = ToolCall::new("c1", "bench__echo", args.clone());
    let ctx = InvocationContext::default();
    group.bench_function("runtime", |b| {
        b.to_async(&rt).iter(|| async {
            let r = tools.run(&call, &ctx).await;
            if !r.success {
                fail(r.observation);
            }
            black_box(r)
        });
    });
    group.finish();
    rt.block_on(async {
        manager.shutdown().await;
        let (mut child, client) = direct;
        drop(client);
        let _ = child.kill().await;
    });
}

fn main() {
    if std::env::var_os(SERVER_VAR).is_some() {
        let rt = runtime();
        rt.block_on(async {
            match Echo.serve(rmcp::transport::stdio()).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => fail(e),
            }
        });
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench_call(&mut c);
    c.final_summary();
}
