//! Starting a server (connect, list its tools, or read them from the cache for a lazy one),
//! following its tool-list changes, and noticing its death: the manager's background tasks.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    DEATH_REPORT_WAIT, Inner, MAX_LIST_PAGES, MAX_LISTED_TOOLS, McpManager, Phase, Server,
};
use crate::cache::{cache_path, write_cache};
use crate::catalog::read_tools;
use crate::client::{ConnectFailure, Connection, RequestFailure};
use crate::config::McpTransport;
use crate::options::McpOptions;
use crate::process::{ServerProcess, describe_exit};

pub(super) fn needs_oauth() -> String {
    "it answered 401 Unauthorized: it needs OAuth, which is not supported; give a token in \
     `headers` if the server accepts one"
        .to_owned()
}

pub(super) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn spawn_start(inner: &Arc<Inner>, server: &Arc<Server>) {
    let weak = Arc::downgrade(inner);
    let task_server = server.clone();
    let handle = tokio::spawn(async move {
        start_server(weak, task_server).await;
    });
    server.data().tasks.push(handle);
}

/// Starts one server: spawn or connect, handshake, list; bounded by its start-up timeout.
async fn start_server(inner: Weak<Inner>, server: Arc<Server>) {
    let Some(options) = inner.upgrade().map(|i| i.options.clone()) else {
        return;
    };
    let started = Instant::now();
    let timeout = server.config.startup_timeout();
    let outcome = tokio::time::timeout(timeout, connect_and_list(&server, &options)).await;
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let process = server.data().process.clone();
    let tail = |p: &Option<Arc<ServerProcess>>| p.as_ref().map(|p| p.stderr().text());
    match outcome {
        Ok(Ok((connection, listed))) => {
            if let Some(dir) = &options.tool_cache_dir {
                write_cache(
                    &cache_path(dir, &server.name, &server.config),
                    &server.name,
                    &listed,
                );
            }
            let (tools, skipped) = read_tools(&listed, &server.config, options.tool_limits());
            let changed = connection.tools_changed();
            {
                let mut data = server.data();
                if data.phase != Some(Phase::Starting) {
                    // Shut down while starting: the shutdown waits for this task, then stops
                    // the process; the connection closes when dropped.
                    return;
                }
                data.connection = Some(connection);
                data.tools = tools;
                data.skipped = skipped;
                data.startup_ms =
                    Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                data.phase = Some(Phase::Ready);
                data.tasks.push(tokio::spawn(refresh_on_change(
                    Arc::downgrade(&inner),
                    server.index,
                    changed,
                )));
                if let Some(p) = &process {
                    data.tasks.push(tokio::spawn(watch_exit(
                        Arc::downgrade(&inner),
                        server.index,
                        p.clone(),
                    )));
                }
            }
            inner.rebuild_catalog();
        }
        Ok(Err(StartFailure { reason, died })) => {
            let (reason, stderr) = match &process {
                Some(p) => {
                    let status = if died {
                        p.wait_exit(DEATH_REPORT_WAIT).await
                    } else {
                        p.exit_status()
                    };
                    if status.is_some() {
                        p.stderr().wait_closed(DEATH_REPORT_WAIT).await;
                    }
                    let reason = match status {
                        Some(status) => {
                            format!("it {} before it was ready", describe_exit(Some(status)))
                        }
                        None => reason,
                    };
                    (reason, tail(&process))
                }
                None => (reason, None),
            };
            if let Some(p) = &process {
                p.terminate(Duration::ZERO).await;
            }
            record_failure(&inner, &server, reason, stderr);
        }
        Err(_) => {
            if let Some(p) = &process {
                p.terminate(Duration::ZERO).await;
            }
            let reason = format!(
                "it did not finish starting (spawn, MCP handshake, tools/list) within {} ms; \
                 raise `startup_timeout_ms` if it is slow to start",
                timeout.as_millis()
            );
            record_failure(&inner, &server, reason, tail(&process));
        }
    }
}

fn record_failure(inner: &Inner, server: &Server, reason: String, stderr: Option<String>) {
    {
        let mut data = server.data();
        if data.phase != Some(Phase::Starting) {
            return;
        }
        tracing::warn!(server = %server.name, "MCP server failed to start: {reason}");
        data.phase = Some(Phase::Failed(reason));
        data.stderr_tail = stderr;
        data.connection = None;
    }
    inner.rebuild_catalog();
}

struct StartFailure {
    reason: String,
    /// The connection closed: for stdio, the process probably exited.
    died: bool,
}

async fn connect_and_list(
    server: &Server,
    options: &McpOptions,
) -> Result<(Arc<Connection>, Vec<Value>), StartFailure> {
    let fail = |reason: String| StartFailure {
        reason,
        died: false,
    };
    let connection = match &server.config.transport {
        McpTransport::Stdio(stdio) => {
            let (process, stdin, stdout) =
                ServerProcess::spawn(&server.name, stdio, options.watchdog).map_err(fail)?;
            server.data().process = Some(Arc::new(process));
            Connection::stdio(
                stdout,
                stdin,
                options.max_message_bytes,
                server.oversize.clone(),
            )
            .await
        }
        McpTransport::Http(http) => {
            let mut headers: Vec<(String, String)> = http
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (header, var) in &http.env_headers {
                match std::env::var(var) {
                    Ok(value) => headers.push((header.clone(), value)),
                    Err(_) => {
                        return Err(fail(format!(
                            "the header `{header}` comes from the environment variable `{var}`, \
                             which is not set"
                        )));
                    }
                }
            }
            Connection::http(&http.url, &headers, options.max_message_bytes).await
        }
    };
    let connection = connection.map_err(|e| match e {
        ConnectFailure::Closed(reason) => StartFailure { reason, died: true },
        ConnectFailure::NeedsAuth => fail(needs_oauth()),
        ConnectFailure::Other(reason) => fail(reason),
    })?;
    let connection = Arc::new(connection);
    let listed = list_all(&connection)
        .await
        .map_err(|(reason, died)| StartFailure { reason, died })?;
    Ok((connection, listed))
}

/// Every page of `tools/list`; a repeated cursor ends the listing with an error.
async fn list_all(connection: &Connection) -> Result<Vec<Value>, (String, bool)> {
    let mut all = Vec::new();
    let mut cursor = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_LIST_PAGES {
        let (tools, next) = connection
            .list_tools_page(cursor)
            .await
            .map_err(|e| match e {
                RequestFailure::Closed => (
                    "it closed the connection while listing its tools".to_owned(),
                    true,
                ),
                RequestFailure::NeedsAuth => (needs_oauth(), false),
                RequestFailure::Rpc { message, code, .. } => (
                    format!("it refused tools/list: {message} (code {code})"),
                    false,
                ),
                RequestFailure::Timeout { .. } => ("tools/list timed out".to_owned(), false),
                RequestFailure::Transport(m) => (format!("tools/list failed: {m}"), true),
                RequestFailure::Other(m) => (format!("tools/list failed: {m}"), false),
            })?;
        all.extend(tools);
        if all.len() > MAX_LISTED_TOOLS {
            return Err((
                format!("its tools/list has over {MAX_LISTED_TOOLS} tools"),
                false,
            ));
        }
        match next {
            None => return Ok(all),
            Some(next) if !seen.insert(next.clone()) => {
                return Err((
                    format!(
                        "its tools/list repeated the cursor `{}`",
                        crate::result::bounded(&next, 64)
                    ),
                    false,
                ));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err((
        format!("its tools/list has over {MAX_LIST_PAGES} pages"),
        false,
    ))
}

/// Lists the tools again each time the server says they changed.
async fn refresh_on_change(inner: Weak<Inner>, index: usize, changed: Arc<tokio::sync::Notify>) {
    loop {
        changed.notified().await;
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let server = strong.servers[index].clone();
        let limits = strong.options.tool_limits();
        let cache = strong.options.tool_cache_dir.clone();
        drop(strong);
        let Some(connection) = server.data().connection.clone() else {
            return;
        };
        let listed =
            tokio::time::timeout(server.config.startup_timeout(), list_all(&connection)).await;
        let Some(strong) = inner.upgrade() else {
            return;
        };
        match listed {
            Ok(Ok(listed)) => {
                if let Some(dir) = &cache {
                    write_cache(
                        &cache_path(dir, &server.name, &server.config),
                        &server.name,
                        &listed,
                    );
                }
                let (tools, skipped) = read_tools(&listed, &server.config, limits);
                {
                    let mut data = server.data();
                    if data.phase != Some(Phase::Ready) {
                        return;
                    }
                    data.tools = tools;
                    data.skipped = skipped;
                }
                strong.rebuild_catalog();
            }
            Ok(Err((reason, _))) => {
                tracing::warn!(server = %server.name, "keeping the old tool list: {reason}");
            }
            Err(_) => {
                tracing::warn!(server = %server.name, "keeping the old tool list: tools/list timed out")
            }
        }
    }
}

/// Marks a stdio server failed when its process exits on its own.
async fn watch_exit(inner: Weak<Inner>, index: usize, process: Arc<ServerProcess>) {
    let status = process.wait_exit_forever().await;
    process.stderr().wait_closed(DEATH_REPORT_WAIT).await;
    let Some(strong) = inner.upgrade() else {
        return;
    };
    let server = strong.servers[index].clone();
    let manager = McpManager { inner: strong };
    if server.phase() == Phase::Ready {
        let reason = format!("it {}", describe_exit(status));
        manager.fail(&server, reason, Some(process.stderr().text()));
    }
}
