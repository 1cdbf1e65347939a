//! The manager: every configured server, started in parallel, their tools under model names,
//! calls, and a clean shutdown.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cache::{cache_path, read_cache};
use crate::catalog::{Catalog, ListedTool, ServerTools, read_tools};
use crate::client::{Connection, RequestFailure};
use crate::config::{McpServerConfig, McpTransport, StartupMode};
use crate::error::{CallErrors, McpError};
use crate::framing::{OversizeLog, REPLY_TOO_LARGE_CODE, REPLY_TOO_LARGE_MARK};
use crate::options::{CallOptions, McpOptions};
use crate::process::{ServerProcess, describe_exit};
use crate::result::{McpCallResult, WireOutcome, read_call_result};
use crate::status::{McpInventory, McpToolInfo, ServerState, ServerStatus, SkippedTool};

mod start;

use start::{json_kind, needs_oauth, spawn_start};

/// Most pages of `tools/list` read from one server.
const MAX_LIST_PAGES: usize = 1000;
/// Most tools read from one server's `tools/list`, offered or not.
const MAX_LISTED_TOOLS: usize = 10_000;
/// How long a failure report waits for a dead server's exit status and stderr.
const DEATH_REPORT_WAIT: Duration = Duration::from_millis(1500);

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Starting,
    Ready,
    Lazy,
    Failed(String),
    Disabled,
    Stopped,
}

#[derive(Debug, Default)]
struct ServerData {
    phase: Option<Phase>,
    stderr_tail: Option<String>,
    connection: Option<Arc<Connection>>,
    process: Option<Arc<ServerProcess>>,
    tools: Vec<ListedTool>,
    skipped: Vec<SkippedTool>,
    startup_ms: Option<u64>,
    tasks: Vec<JoinHandle<()>>,
}

#[derive(Debug)]
struct Server {
    index: usize,
    name: String,
    config: McpServerConfig,
    data: Mutex<ServerData>,
    start_lock: tokio::sync::Mutex<()>,
    oversize: Arc<OversizeLog>,
}

impl Server {
    fn data(&self) -> std::sync::MutexGuard<'_, ServerData> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn phase(&self) -> Phase {
        self.data().phase.clone().unwrap_or(Phase::Stopped)
    }

    fn unavailable(&self) -> McpError {
        let data = self.data();
        let reason = match data.phase.as_ref() {
            Some(Phase::Failed(reason)) => reason.clone(),
            Some(Phase::Disabled) => "it is disabled in the configuration".to_owned(),
            Some(Phase::Stopped) | None => "it was shut down".to_owned(),
            Some(Phase::Starting) => "it is still starting".to_owned(),
            Some(Phase::Ready | Phase::Lazy) => "it is not connected".to_owned(),
        };
        McpError::ServerUnavailable {
            server: self.name.clone(),
            reason,
            stderr_tail: data.stderr_tail.clone(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for task in self.data().tasks.drain(..) {
            task.abort();
        }
    }
}

#[derive(Debug)]
struct Inner {
    servers: Vec<Arc<Server>>,
    options: McpOptions,
    catalog: RwLock<Arc<Catalog>>,
    changes: watch::Sender<u64>,
}

impl Inner {
    fn rebuild_catalog(&self) {
        let datas: Vec<_> = self.servers.iter().map(|s| (s, s.data())).collect();
        let parts: Vec<ServerTools<'_>> = datas
            .iter()
            // A lazy server being started keeps offering its cached tools meanwhile.
            .filter(|(_, d)| matches!(d.phase, Some(Phase::Ready | Phase::Lazy | Phase::Starting)))
            .map(|(s, d)| ServerTools {
                index: s.index,
                name: &s.name,
                config: &s.config,
                tools: &d.tools,
            })
            .collect();
        let mut catalog = self.catalog.write().unwrap_or_else(|p| p.into_inner());
        let next = Catalog::build(&parts, &catalog);
        *catalog = Arc::new(next);
        drop(catalog);
        drop(parts);
        drop(datas);
        self.changes.send_modify(|g| *g += 1);
    }

    fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// The MCP servers of a session: started together, their tools offered under model names,
/// called with bounds, shut down without leftovers.
///
/// Cloning is cheap and shares the servers; they are shut down by [`McpManager::shutdown`], and
/// killed (process group, SIGKILL) when the last clone is dropped without one.
#[derive(Debug, Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

impl McpManager {
    /// Starts every enabled server in parallel and returns once the `required` ones are ready or
    /// have failed (each bounded by its start-up timeout); the others join when ready.
    ///
    /// Never fails: a bad configuration, a missing program or a crashing server is a
    /// [`ServerState::Failed`] server with its reason; [`McpManager::check_required`] turns a
    /// failed required server into an error. Must be called within a Tokio runtime.
    pub async fn start<I, S>(servers: I, options: McpOptions) -> McpManager
    where
        I: IntoIterator<Item = (S, McpServerConfig)>,
        S: Into<String>,
    {
        let mut seen = HashSet::new();
        let mut list = Vec::new();
        for (index, (name, config)) in servers.into_iter().enumerate() {
            let name = name.into();
            let mut data = ServerData::default();
            let phase = if let Err(e) = config.validate(&name) {
                Phase::Failed(e.to_string())
            } else if !seen.insert(name.clone()) {
                Phase::Failed("another server has the same name".to_owned())
            } else if !config.enabled {
                Phase::Disabled
            } else {
                Phase::Starting
            };
            data.phase = Some(phase);
            list.push(Arc::new(Server {
                index,
                name,
                config,
                data: Mutex::new(data),
                start_lock: tokio::sync::Mutex::new(()),
                oversize: Arc::new(OversizeLog::default()),
            }));
        }
        let inner = Arc::new(Inner {
            servers: list,
            options,
            catalog: RwLock::new(Arc::new(Catalog::default())),
            changes: watch::channel(0).0,
        });
        let mut required = Vec::new();
        for server in &inner.servers {
            if server.phase() != Phase::Starting {
                continue;
            }
            if server.config.startup == StartupMode::Lazy
                && let Some(dir) = &inner.options.tool_cache_dir
                && let Some(listed) =
                    read_cache(&cache_path(dir, &server.name, &server.config), &server.name)
            {
                let (tools, skipped) =
                    read_tools(&listed, &server.config, inner.options.tool_limits());
                let mut data = server.data();
                data.tools = tools;
                data.skipped = skipped;
                data.phase = Some(Phase::Lazy);
                continue;
            }
            spawn_start(&inner, server);
            if server.config.required {
                required.push(server.clone());
            }
        }
        inner.rebuild_catalog();
        let manager = McpManager { inner };
        for server in required {
            manager.wait_started(&server).await;
        }
        manager
    }

    async fn wait_started(&self, server: &Server) {
        let mut changes = self.inner.changes.subscribe();
        let bound = server.config.startup_timeout() + Duration::from_secs(10);
        let _ = tokio::time::timeout(
            bound,
            changes.wait_for(|_| server.phase() != Phase::Starting),
        )
        .await;
    }

    /// Waits until no server is starting, at most `within`; whether that happened. For
    /// commands that report every server (`mcp list`).
    pub async fn wait_settled(&self, within: Duration) -> bool {
        let mut changes = self.inner.changes.subscribe();
        let settled = |_: &u64| {
            self.inner
                .servers
                .iter()
                .all(|s| s.phase() != Phase::Starting)
        };
        tokio::time::timeout(within, changes.wait_for(settled))
            .await
            .is_ok()
    }

    /// An error for the first `required` server that is not ready (or lazy).
    pub fn check_required(&self) -> Result<(), McpError> {
        for server in &self.inner.servers {
            if !server.config.required {
                continue;
            }
            match server.phase() {
                Phase::Ready | Phase::Lazy | Phase::Disabled => {}
                Phase::Failed(reason) => {
                    return Err(McpError::RequiredServerFailed {
                        server: server.name.clone(),
                        reason,
                        stderr_tail: server.data().stderr_tail.clone(),
                    });
                }
                Phase::Starting | Phase::Stopped => {
                    return Err(McpError::RequiredServerFailed {
                        server: server.name.clone(),
                        reason: "it is not ready".to_owned(),
                        stderr_tail: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// The tools offered now: those of ready servers and of lazy ones' cached lists.
    pub fn tools(&self) -> Vec<McpToolInfo> {
        self.inner.catalog().tools.clone()
    }

    /// The tool the model calls `model_name`.
    pub fn tool(&self, model_name: &str) -> Option<McpToolInfo> {
        let catalog = self.inner.catalog();
        let (index, raw) = catalog.resolve(model_name)?;
        catalog
            .tools
            .iter()
            .find(|t| t.raw_name == *raw && self.inner.servers[*index].name == t.server)
            .cloned()
    }

    /// A receiver that changes whenever a server's state or the tools change (a counter).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Every server's state and tools, in configuration order.
    pub fn servers(&self) -> Vec<ServerStatus> {
        let catalog = self.inner.catalog();
        self.inner
            .servers
            .iter()
            .map(|server| {
                let data = server.data();
                let (state, reason) = match data.phase.clone().unwrap_or(Phase::Stopped) {
                    Phase::Starting => (ServerState::Starting, None),
                    Phase::Ready => (ServerState::Ready, None),
                    Phase::Lazy => (ServerState::Lazy, None),
                    Phase::Failed(r) => (ServerState::Failed, Some(r)),
                    Phase::Disabled => (ServerState::Disabled, None),
                    Phase::Stopped => (ServerState::Stopped, None),
                };
                let tools = catalog
                    .tools
                    .iter()
                    .filter(|t| t.server == server.name)
                    .cloned()
                    .collect();
                ServerStatus {
                    name: server.name.clone(),
                    state,
                    reason,
                    stderr_tail: if state == ServerState::Failed {
                        data.stderr_tail.clone().filter(|t| !t.is_empty())
                    } else {
                        None
                    },
                    transport: match server.config.transport {
                        McpTransport::Stdio(_) => "stdio",
                        McpTransport::Http(_) => "http",
                    },
                    required: server.config.required,
                    pid: data.process.as_ref().map(|p| p.pid()),
                    server_info: data.connection.as_ref().and_then(|c| c.server_info.clone()),
                    protocol_version: data
                        .connection
                        .as_ref()
                        .map(|c| c.protocol_version.clone())
                        .filter(|v| !v.is_empty()),
                    startup_ms: data.startup_ms,
                    tools,
                    skipped: data.skipped.clone(),
                }
            })
            .collect()
    }

    /// [`McpManager::servers`] as `{"servers": [...]}`.
    pub fn inventory(&self) -> McpInventory {
        McpInventory {
            servers: self.servers(),
        }
    }

    /// Calls the tool the model calls `model_name`.
    ///
    /// `arguments` must be a JSON object (or null for none). A lazy server is started first.
    /// See [`McpError`] for the failures; none of them affects the other servers.
    pub async fn call(
        &self,
        model_name: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<McpCallResult, McpError> {
        let catalog = self.inner.catalog();
        let Some((index, raw)) = catalog.resolve(model_name) else {
            // A tool of a server that died or stopped: say why it is gone.
            if let Some(i) = catalog.gone_server(model_name) {
                return Err(self.inner.servers[i].unavailable());
            }
            return Err(McpError::UnknownTool {
                model_name: model_name.to_owned(),
            });
        };
        let server = self.inner.servers[*index].clone();
        let raw = raw.clone();
        drop(catalog);
        self.call_on(&server, &raw, arguments, options, true).await
    }

    /// Calls the tool `tool` (its raw name) of the server `server`, whether or not it is offered
    /// to the model (`mcp call SERVER TOOL JSON`).
    pub async fn call_server_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: CallOptions,
    ) -> Result<McpCallResult, McpError> {
        let Some(found) = self.inner.servers.iter().find(|s| s.name == server) else {
            return Err(McpError::ServerUnavailable {
                server: server.to_owned(),
                reason: "no server has this name".to_owned(),
                stderr_tail: None,
            });
        };
        let found = found.clone();
        self.call_on(&found, tool, arguments, options, false).await
    }

    async fn call_on(
        &self,
        server: &Arc<Server>,
        tool: &str,
        arguments: Value,
        options: CallOptions,
        check_listed: bool,
    ) -> Result<McpCallResult, McpError> {
        let call = McpError::for_call(&server.name, tool);
        let arguments = match arguments {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(call.invalid_arguments(format!(
                    "the arguments must be a JSON object, not {}",
                    json_kind(&other)
                )));
            }
        };
        let connection = self.connection(server).await?;
        // A lazy server's live list may lack a tool of its cached one.
        if check_listed && !server.data().tools.iter().any(|t| t.raw_name == tool) {
            return Err(call.tool_gone());
        }
        let idle = options
            .timeout
            .unwrap_or_else(|| server.config.tool_timeout());
        let oversize_before = server.oversize.count();
        let outcome = connection
            .call_tool(
                tool,
                arguments,
                idle,
                options.max_total,
                options.progress.as_ref(),
            )
            .await;
        match outcome {
            Ok(wire) => match read_call_result(&wire, &self.inner.options.result_limits) {
                WireOutcome::Ok(result) => Ok(result),
                WireOutcome::ToolError(text) => Err(call.tool_failed(text)),
                WireOutcome::Malformed(message) => Err(call.bad_reply(message)),
            },
            // A reply discarded for its size leaves the request to time out.
            Err(RequestFailure::Timeout { .. }) if server.oversize.count() != oversize_before => {
                Err(call.reply_too_large(
                    server.oversize.last_bytes(),
                    self.inner.options.max_message_bytes as u64,
                ))
            }
            Err(RequestFailure::Timeout { after, last, count }) => {
                Err(call.timeout(after, last, count))
            }
            Err(RequestFailure::Rpc {
                code,
                message,
                data,
            }) => Err(rpc_error(call, code, message, data.as_ref())),
            Err(RequestFailure::NeedsAuth) => {
                self.fail(server, needs_oauth(), None);
                Err(server.unavailable())
            }
            Err(RequestFailure::Closed) if server.data().process.is_some() => {
                Err(self.server_died(server, tool).await)
            }
            Err(RequestFailure::Closed) => {
                self.fail(server, "it closed the connection".to_owned(), None);
                Err(server.unavailable())
            }
            Err(RequestFailure::Transport(message)) => {
                // For stdio, a failed send means the process is gone (or going).
                let process = server.data().process.clone();
                if let Some(process) = process
                    && process.wait_exit(DEATH_REPORT_WAIT).await.is_some()
                {
                    return Err(self.server_died(server, tool).await);
                }
                Err(call.unavailable(message))
            }
            Err(RequestFailure::Other(message)) => Err(call.bad_reply(message)),
        }
    }

    /// The connection of a server, starting a lazy one and waiting for a starting one.
    async fn connection(&self, server: &Arc<Server>) -> Result<Arc<Connection>, McpError> {
        let mut changes = self.inner.changes.subscribe();
        let deadline = Instant::now() + server.config.startup_timeout() + Duration::from_secs(10);
        loop {
            match server.phase() {
                Phase::Ready => {
                    if let Some(c) = server.data().connection.clone() {
                        return Ok(c);
                    }
                    return Err(server.unavailable());
                }
                Phase::Lazy => {
                    let _guard = server.start_lock.lock().await;
                    if server.phase() == Phase::Lazy {
                        server.data().phase = Some(Phase::Starting);
                        spawn_start(&self.inner, server);
                    }
                }
                Phase::Starting => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let waited = tokio::time::timeout(
                        left,
                        changes.wait_for(|_| server.phase() != Phase::Starting),
                    )
                    .await;
                    if waited.is_err() {
                        return Err(server.unavailable());
                    }
                }
                Phase::Failed(_) | Phase::Disabled | Phase::Stopped => {
                    return Err(server.unavailable());
                }
            }
        }
    }

    fn fail(&self, server: &Server, reason: String, stderr_tail: Option<String>) {
        {
            let mut data = server.data();
            if matches!(data.phase, Some(Phase::Stopped)) {
                return;
            }
            data.phase = Some(Phase::Failed(reason));
            data.stderr_tail = stderr_tail;
            data.connection = None;
        }
        self.inner.rebuild_catalog();
    }

    /// The error of a call whose connection closed: the exit status and stderr tail of the
    /// server's process, which is marked failed unless it was shut down.
    async fn server_died(&self, server: &Server, tool: &str) -> McpError {
        let Some(process) = server.data().process.clone() else {
            return server.unavailable();
        };
        if server.phase() == Phase::Stopped {
            return server.unavailable();
        }
        let status = process.wait_exit(DEATH_REPORT_WAIT).await;
        process.stderr().wait_closed(DEATH_REPORT_WAIT).await;
        let reason = format!("it {} during a call to `{tool}`", describe_exit(status));
        let stderr_tail = Some(process.stderr().text());
        if server.phase() == Phase::Ready {
            self.fail(server, reason.clone(), stderr_tail.clone());
        }
        McpError::ServerUnavailable {
            server: server.name.clone(),
            reason,
            stderr_tail,
        }
    }

    /// Shuts every server down: closes its stdin, waits, SIGTERM to its process group, waits,
    /// SIGKILL to the group, reaps it. Servers stop in parallel; their tools are withdrawn.
    pub async fn shutdown(&self) {
        let grace = self.inner.options.shutdown_grace;
        let stops = self.inner.servers.iter().map(|server| {
            let tasks = {
                let mut data = server.data();
                data.phase = Some(match data.phase {
                    Some(Phase::Disabled) => Phase::Disabled,
                    _ => Phase::Stopped,
                });
                std::mem::take(&mut data.tasks)
            };
            async move {
                for task in &tasks {
                    task.abort();
                }
                // A start cut short may have spawned its process: take it after the task ends.
                for task in tasks {
                    let _ = task.await;
                }
                let (connection, process) = {
                    let mut data = server.data();
                    (data.connection.take(), data.process.clone())
                };
                if let Some(connection) = connection {
                    connection.close(grace).await;
                }
                if let Some(process) = process {
                    process.terminate(grace).await;
                }
            }
        });
        futures::future::join_all(stops).await;
        self.inner.rebuild_catalog();
    }
}

/// The error of a JSON-RPC error answer to a call: the framing's stand-in for a reply over the
/// size limit (its code and mark), else what [`CallErrors::rpc`] makes of the code.
fn rpc_error(call: CallErrors<'_>, code: i64, message: String, data: Option<&Value>) -> McpError {
    let marked = data.and_then(|d| d.get(REPLY_TOO_LARGE_MARK)).is_some();
    if code == REPLY_TOO_LARGE_CODE && marked {
        let number = |k: &str| {
            data.and_then(|d| d.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        return call.reply_too_large(number("bytes"), number("limit"));
    }
    call.rpc(code, message)
}
