//! MCP overhead: a call through the manager against a direct rmcp call on the same local stdio
//! server, and ten servers started in parallel against one.
//!
//! The server is this very binary run with `BA_MCP_BENCH_SERVER=1` (an rmcp server with one
//! `echo` tool), so the bench needs nothing built beforehand.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ba_mcp::{CallOptions, McpManager, McpOptions, McpServerConfig};
use criterion::Criterion;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::json;

const SERVER_VAR: &str = "BA_MCP_BENCH_SERVER";

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

fn server_config() -> McpServerConfig {
    McpServerConfig::stdio(me().to_string_lossy(), Vec::<String>::new())
        .with_env(SERVER_VAR, "1")
        .with_required(true)
}

fn options() -> McpOptions {
    McpOptions::default().with_shutdown_grace(Duration::from_millis(500))
}

fn bench_call(c: &mut Criterion) {
    let rt = runtime();
    let args = json!({"text": "hello"});
    let mut group = c.benchmark_group("mcp_call_echo");

    // Direct: rmcp's client on a child process of the same server.
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

    let manager = rt.block_on(McpManager::start([("bench", server_config())], options()));
    if let Err(e) = manager.check_required() {
        fail(e);
    }
    group.bench_function("manager", |b| {
        b.to_async(&rt).iter(|| async {
            let r = manager
                .call("bench__echo", args.clone(), CallOptions::default())
                .await
                .unwrap_or_else(|e| fail(e));
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

/// Time from `start` to every server ready; the shutdown is not counted.
fn time_start(rt: &tokio::runtime::Runtime, servers: usize, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let configs = (0..servers).map(|i| (format!("s{i}"), server_config()));
        let started = Instant::now();
        let manager = rt.block_on(McpManager::start(configs, options()));
        total += started.elapsed();
        if let Err(e) = manager.check_required() {
            fail(e);
        }
        rt.block_on(manager.shutdown());
    }
    total
}

fn bench_start(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("mcp_start");
    group.sample_size(20);
    group.bench_function("baseline_one_server", |b| {
        b.iter_custom(|iters| time_start(&rt, 1, iters));
    });
    group.bench_function("ten_servers_in_parallel", |b| {
        b.iter_custom(|iters| time_start(&rt, 10, iters));
    });
    group.finish();
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
    bench_start(&mut c);
    c.final_summary();
}
