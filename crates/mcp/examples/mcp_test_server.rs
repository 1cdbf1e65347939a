//! An MCP server for ba-mcp's tests and benches, built on rmcp's server side.
//!
//! `mcp_test_server` serves stdio; `mcp_test_server --http 127.0.0.1:0` serves streamable HTTP
//! at `/mcp` and prints `LISTENING http://ADDR/mcp` on stdout; `--http-401 127.0.0.1:0` answers
//! every request with 401 and a `WWW-Authenticate` challenge, as an OAuth-protected server does.
//!
//! Environment: `MCP_TEST_PAGE_SIZE` (tools a `tools/list` page, default 2), `MCP_TEST_FILLER`
//! (extra `filler_N` tools, default 3), `MCP_TEST_BAD_TOOLS=1` (adds tools the client must skip:
//! an empty name, a string schema, a top-level `anyOf`), `MCP_TEST_LONG_NAMES=1` (adds a tool
//! with a 90-character name and one named `a.b` next to `a_b`), `MCP_TEST_STDERR` (written to
//! stderr at start), `MCP_TEST_DECLARE=FILE` with `MCP_TEST_DECLARE_SERVER=NAME` (declares,
//! instead of the tools below, the tools of FILE — a JSON array of `{"server", "name",
//! "description", "inputSchema"}`, as `fixtures/tool-search/tools.json` — whose `server` is
//! NAME; a call answers `NAME ran`).
//!
//! Tools: `echo {text}`, `add {a, b}` (structured), `fail {message}` (`isError`), `image`
//! (an image and a blob), `progress {steps, delay_ms}`, `progress_then_hang {steps}`, `hang`,
//! `cancelled_count {at_least, within_ms}`, `add_tool {name}` (changes the list and notifies),
//! `big_text {bytes}`, `env {name}`, `exit {code}` (dies mid-call, after a line on stderr).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ResourceContents,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug)]
struct State {
    tools: std::sync::Mutex<Vec<Tool>>,
    page_size: usize,
    cancelled: AtomicU64,
    changed: Notify,
}

#[derive(Debug, Clone)]
struct TestServer {
    state: Arc<State>,
}

fn schema(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

fn object(properties: Value, required: &[&str]) -> JsonObject {
    schema(json!({"type": "object", "properties": properties, "required": required}))
}

fn env_number(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The tools `MCP_TEST_DECLARE` and `MCP_TEST_DECLARE_SERVER` ask for, if they are set. A file
/// that cannot be read or holds no such server ends the process with a message: a test
/// expecting those tools must not get others.
fn declared_tools() -> Option<Vec<Tool>> {
    let file = std::env::var("MCP_TEST_DECLARE").ok()?;
    let server = std::env::var("MCP_TEST_DECLARE_SERVER").unwrap_or_default();
    let fail = |why: String| -> ! {
        eprintln!("test server: MCP_TEST_DECLARE={file}: {why}");
        std::process::exit(2)
    };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| fail(e.to_string()));
    let all: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| fail(e.to_string()));
    let tools: Vec<Tool> = all
        .iter()
        .filter(|t| t["server"].as_str() == Some(server.as_str()))
        .map(|t| {
            Tool::new(
                t["name"].as_str().unwrap_or_default().to_owned(),
                t["description"].as_str().unwrap_or_default().to_owned(),
                schema(t["inputSchema"].clone()),
            )
        })
        .collect();
    if tools.is_empty() {
        fail(format!("no tool of server {server:?}"));
    }
    Some(tools)
}

impl TestServer {
    fn new() -> Self {
        let int = json!({"type": "integer"});
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echoes its text.",
                object(json!({"text": {"type": "string"}}), &["text"]),
            ),
            Tool::new(
                "add",
                "Adds two numbers.",
                object(json!({"a": int, "b": int}), &["a", "b"]),
            ),
            Tool::new(
                "fail",
                "Fails with a message.",
                object(json!({"message": {"type": "string"}}), &[]),
            ),
            Tool::new(
                "image",
                "Returns a tiny image and a blob.",
                object(json!({}), &[]),
            ),
            Tool::new(
                "progress",
                "Reports progress.",
                object(json!({"steps": int, "delay_ms": int}), &[]),
            ),
            Tool::new(
                "progress_then_hang",
                "Reports progress, then waits.",
                object(json!({"steps": int}), &[]),
            ),
            Tool::new("hang", "Waits until cancelled.", object(json!({}), &[])),
            Tool::new(
                "cancelled_count",
                "Cancelled calls so far.",
                object(json!({"at_least": int, "within_ms": int}), &[]),
            ),
            Tool::new(
                "add_tool",
                "Adds a tool.",
                object(json!({"name": {"type": "string"}}), &["name"]),
            ),
            Tool::new(
                "big_text",
                "Returns that many bytes of text.",
                object(json!({"bytes": int}), &["bytes"]),
            ),
            Tool::new(
                "env",
                "An environment variable.",
                object(json!({"name": {"type": "string"}}), &["name"]),
            ),
            Tool::new(
                "exit",
                "Exits the process.",
                object(json!({"code": int}), &[]),
            ),
        ];
        if let Some(declared) = declared_tools() {
            tools = declared;
        }
        for i in 1..=env_number("MCP_TEST_FILLER", 3) {
            tools.push(Tool::new(
                format!("filler_{i}"),
                "Does nothing.",
                object(json!({}), &[]),
            ));
        }
        if std::env::var("MCP_TEST_BAD_TOOLS").is_ok() {
            tools.push(Tool::new("", "No name.", object(json!({}), &[])));
            tools.push(Tool::new(
                "stringly",
                "A string schema.",
                schema(json!({"type": "string"})),
            ));
            tools.push(Tool::new(
                "either",
                "A top-level anyOf.",
                schema(json!({"anyOf": [{"type": "object"}, {"type": "null"}]})),
            ));
        }
        if std::env::var("MCP_TEST_LONG_NAMES").is_ok() {
            tools.push(Tool::new("x".repeat(90), "Long.", object(json!({}), &[])));
            tools.push(Tool::new("a.b", "Dotted.", object(json!({}), &[])));
            tools.push(Tool::new("a_b", "Underscored.", object(json!({}), &[])));
        }
        Self {
            state: Arc::new(State {
                tools: std::sync::Mutex::new(tools),
                page_size: env_number("MCP_TEST_PAGE_SIZE", 2).max(1),
                cancelled: AtomicU64::new(0),
                changed: Notify::new(),
            }),
        }
    }

    async fn wait_cancelled(&self, context: &RequestContext<RoleServer>) {
        context.ct.cancelled().await;
        self.state.cancelled.fetch_add(1, Ordering::AcqRel);
        self.state.changed.notify_waiters();
    }

    async fn run(
        &self,
        name: &str,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let int = |k: &str, d: u64| args.get(k).and_then(Value::as_u64).unwrap_or(d);
        let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let token = context.meta.get_progress_token();
        let progress = |i: u64, total: u64| {
            let peer = context.peer.clone();
            let token = token.clone();
            async move {
                if let Some(token) = token {
                    let _ = peer
                        .notify_progress(
                            ProgressNotificationParam::new(token, i as f64)
                                .with_total(total as f64)
                                .with_message(format!("step {i}")),
                        )
                        .await;
                }
            }
        };
        Ok(match name {
            "echo" => CallToolResult::success(vec![ContentBlock::text(text("text"))]),
            "add" => {
                let a = args.get("a").and_then(Value::as_i64).unwrap_or(0);
                let b = args.get("b").and_then(Value::as_i64).unwrap_or(0);
                let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                    "{a} + {b} = {}",
                    a + b
                ))]);
                r.structured_content = Some(json!({"sum": a + b}));
                r
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text(text("message"))]),
            "image" => CallToolResult::success(vec![
                // The eight bytes of a PNG signature, base64.
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
                ContentBlock::resource(
                    ResourceContents::blob("AAECAw==", "test://blob")
                        .with_mime_type("application/x-test"),
                ),
                ContentBlock::text("an image and a blob"),
            ]),
            "progress" => {
                let steps = int("steps", 3);
                for i in 1..=steps {
                    tokio::time::sleep(Duration::from_millis(int("delay_ms", 10))).await;
                    progress(i, steps).await;
                }
                CallToolResult::success(vec![ContentBlock::text(format!(
                    "done after {steps} steps"
                ))])
            }
            "progress_then_hang" => {
                let steps = int("steps", 2);
                for i in 1..=steps {
                    progress(i, steps * 2).await;
                }
                self.wait_cancelled(context).await;
                CallToolResult::success(vec![ContentBlock::text("cancelled")])
            }
            "hang" => {
                self.wait_cancelled(context).await;
                CallToolResult::success(vec![ContentBlock::text("cancelled")])
            }
            "cancelled_count" => {
                let at_least = int("at_least", 0);
                let within = Duration::from_millis(int("within_ms", 5000));
                let _ = tokio::time::timeout(within, async {
                    loop {
                        let notified = self.state.changed.notified();
                        if self.state.cancelled.load(Ordering::Acquire) >= at_least {
                            return;
                        }
                        notified.await;
                    }
                })
                .await;
                let n = self.state.cancelled.load(Ordering::Acquire);
                CallToolResult::success(vec![ContentBlock::text(n.to_string())])
            }
            "add_tool" => {
                let name = text("name");
                if let Ok(mut tools) = self.state.tools.lock() {
                    tools.push(Tool::new(
                        name.clone(),
                        "Added at run time.",
                        object(json!({}), &[]),
                    ));
                }
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![ContentBlock::text(format!("added {name}"))])
            }
            "big_text" => CallToolResult::success(vec![ContentBlock::text(
                "y".repeat(int("bytes", 0) as usize),
            )]),
            "env" => CallToolResult::success(vec![ContentBlock::text(
                std::env::var(text("name")).unwrap_or_else(|_| "<unset>".to_owned()),
            )]),
            "exit" => {
                eprintln!("test server: exiting on request");
                std::process::exit(int("code", 3) as i32);
            }
            other if other.starts_with("filler_") || self.listed(other) => {
                CallToolResult::success(vec![ContentBlock::text(format!("{other} ran"))])
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        })
    }

    fn listed(&self, name: &str) -> bool {
        self.state
            .tools
            .lock()
            .map(|t| t.iter().any(|t| t.name == name))
            .unwrap_or(false)
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let tools = self
            .state
            .tools
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        let end = (start + self.state.page_size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start.min(end)..end].to_vec());
        if end < tools.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.run(&request.name, &args, &context)
            .await
            .map(Into::into)
    }
}

async fn serve_http(addr: &str) -> Result<(), Error> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let server = TestServer::new();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("LISTENING http://{}/mcp", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn serve_401(addr: &str) -> Result<(), Error> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("LISTENING http://{}/mcp", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let service = hyper::service::service_fn(|_request| async {
                hyper::Response::builder()
                    .status(401)
                    .header("WWW-Authenticate", "Bearer resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource\"")
                    .body(String::new())
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    if let Ok(message) = std::env::var("MCP_TEST_STDERR") {
        eprintln!("{message}");
    }
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--http") => serve_http(args.get(2).map_or("127.0.0.1:0", String::as_str)).await,
        Some("--http-401") => serve_401(args.get(2).map_or("127.0.0.1:0", String::as_str)).await,
        _ => {
            let running = TestServer::new().serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
            Ok(())
        }
    }
}
