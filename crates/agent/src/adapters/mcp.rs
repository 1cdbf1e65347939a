//! MCP servers' tools as `ba_tools::Tool`s (feature `mcp`): each tool of an [`McpManager`] is
//! an [`McpTool`] called by its model name through the runtime like every tool, and an
//! [`McpToolSource`] offers the manager's current tools to the agent at the start of each run.
//!
//! What the runtime does for every tool applies: argument validation against the server's
//! schema, permissions (the server's `permission`) and a skill's `allowed_tools`, output levels
//! (the server's `default_level`) and spill of large results. What is particular to MCP:
//!
//! - Two clocks. The server's `tool_timeout_ms` is an idle timeout kept by `ba-mcp`: reset by
//!   each progress notification, reported with the last progress when it runs out. The
//!   runtime's timeout of the attempt caps the whole call: the tool declares
//!   [`McpToolSource::with_max_call`] (30 minutes by default) unless the configuration names a
//!   timeout for the tool. Either way the call's future is dropped, which sends MCP
//!   cancellation to the server, and progress reported so far is the call's partial output.
//! - No retries (declared in the tool's capabilities): a call may have had effects on the
//!   server, and repeating it is the model's decision, not the runtime's.
//! - Results: the text and `structuredContent`, both kept and bounded by `ba-mcp`; images,
//!   audio and blobs are written through the data sink (the agent's, or a folder sink at the
//!   invocation's storage directory) and described by path, never put into the context as
//!   base64. `isError` is an execution error whose message is the tool's text; a dead server
//!   is a resource error, its stderr tail in the error's detail for the operator.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ba_mcp::{
    BinaryItem, BinaryKind, CallOptions, McpCallResult, McpError, McpManager, McpProgress,
    McpToolInfo,
};
use ba_protocol::OutputLevel;
use ba_tools::{
    CallContext, ConversationFiles, DataSink, FsSink, Tool, ToolCapabilities, ToolError,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::sources::{SourceSnapshot, ToolSource};
use ba_protocol::ServerRecord;

/// The default cap on one MCP call, progress or not: 30 minutes.
pub const DEFAULT_MCP_MAX_CALL: Duration = Duration::from_secs(30 * 60);

/// One tool of an MCP server, called by its model name.
#[derive(Clone)]
pub struct McpTool {
    manager: McpManager,
    info: McpToolInfo,
    schema: Value,
    sink: Option<Arc<dyn DataSink>>,
    max_call: Duration,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("model_name", &self.info.model_name)
            .field("server", &self.info.server)
            .field("raw_name", &self.info.raw_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The tool `info` of `manager`, storing binary results through `sink`.
    pub fn new(
        manager: McpManager,
        info: McpToolInfo,
        sink: Option<Arc<dyn DataSink>>,
        max_call: Duration,
    ) -> Self {
        let schema = Value::Object(info.input_schema.clone());
        Self {
            manager,
            info,
            schema,
            sink,
            max_call,
        }
    }

    /// What the manager says of the tool.
    pub fn info(&self) -> &McpToolInfo {
        &self.info
    }

    /// The result as the tool's data: [`McpCallResult::observation_data`] with the binary items
    /// written to data files and listed under `files` by path.
    async fn data(&self, mut result: McpCallResult, ctx: &CallContext) -> Value {
        let binaries = std::mem::take(&mut result.binaries);
        let data = result.observation_data();
        if binaries.is_empty() {
            return data;
        }
        let folder;
        let sink: Option<&dyn DataSink> = match (&self.sink, &ctx.invocation.storage_dir) {
            (Some(sink), _) => Some(sink.as_ref()),
            (None, Some(dir)) => {
                folder = FsSink::new(dir);
                Some(&folder)
            }
            (None, None) => None,
        };
        let mut files = Vec::with_capacity(binaries.len());
        for item in &binaries {
            let entry = match &ctx.files {
                // The conversation's own data files: the model reads one back by its id.
                Some(conversation) => store_in_conversation(conversation.as_ref(), item).await,
                None => store_binary(sink, &ctx.call_id, item).await,
            };
            files.push(entry);
        }
        attach(data, "files", Value::Array(files))
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.info.model_name
    }

    fn description(&self) -> &str {
        &self.info.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let partial = ctx.partial.clone();
        // rmcp delivers notifications on tasks of their own, so they may arrive out of order;
        // progress only grows, so the furthest one is the latest.
        let seen: Mutex<(u64, Option<McpProgress>)> = Mutex::new((0, None));
        let options = CallOptions::default()
            .with_timeout(Duration::from_millis(self.info.timeout_ms))
            .with_progress(move |p| {
                let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.0 += 1;
                if seen
                    .1
                    .as_ref()
                    .is_none_or(|last| p.progress >= last.progress)
                {
                    seen.1 = Some(p.clone());
                }
                if let (n, Some(furthest)) = (seen.0, &seen.1) {
                    partial.set(format!(
                        "{n} progress notification(s) from the server; the furthest: {furthest}"
                    ));
                }
            });
        match self
            .manager
            .call(&self.info.model_name, input, options)
            .await
        {
            Ok(result) => Ok(self.data(result, ctx).await),
            Err(e) => Err(tool_error(&e)),
        }
    }

    fn default_level(&self) -> Option<OutputLevel> {
        self.info.default_level
    }

    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::default()
            .with_required_permission(self.info.permission.unwrap_or_default())
            .with_approval(self.info.approval.unwrap_or_default())
            .with_writes(self.info.writes())
            .with_max_retries(0)
            .with_timeout_ms(u64::try_from(self.max_call.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The runtime's error for an MCP failure: its kind, its code (`MCP_TOOL_ERROR`, …), the text
/// a model may read, and the stderr tail of a failed server as the operator's detail.
pub(crate) fn tool_error(e: &McpError) -> ToolError {
    let err = ToolError::new(e.kind(), e.model_message()).with_code(e.code());
    match e.detail() {
        Some(detail) => err.with_detail(detail),
        None => err,
    }
}

/// Writes one binary item through `sink` and describes it (by path, or why it was not saved).
/// A binary item kept as a data file of the call's conversation, listed by its id.
async fn store_in_conversation(files: &dyn ConversationFiles, item: &BinaryItem) -> Value {
    let mut entry = json!({"type": item.kind, "mime_type": item.mime_type, "bytes": item.bytes});
    if let Some(uri) = &item.uri {
        entry["uri"] = json!(uri);
    }
    let stem = match item.kind {
        BinaryKind::Image => "image",
        BinaryKind::Audio => "audio",
        _ => "blob",
    };
    let name = format!("{stem}.{}", extension(&item.mime_type));
    match files.add_data(&name, &item.data).await {
        Ok(info) => entry["file_id"] = json!(info.id),
        Err(e) => entry["not_saved"] = json!(format!("it could not be saved: {e}")),
    }
    entry
}

async fn store_binary(sink: Option<&dyn DataSink>, call_id: &str, item: &BinaryItem) -> Value {
    let mut entry = json!({"type": item.kind, "mime_type": item.mime_type, "bytes": item.bytes});
    if let Some(uri) = &item.uri {
        entry["uri"] = json!(uri);
    }
    let Some(sink) = sink else {
        entry["not_saved"] = json!("no data store is configured; the content is not shown");
        return entry;
    };
    let name = format!(
        "tool_data/{}_{}.{}",
        safe_stem(call_id),
        ba_tools::data_hash(&item.data),
        extension(&item.mime_type)
    );
    match sink.put(&name, &item.data).await {
        Ok(path) => entry["path"] = json!(path),
        Err(e) => {
            tracing::warn!(call = %call_id, "an MCP result's binary content was not saved: {e}");
            entry["not_saved"] = json!(format!("it could not be saved: {e}"));
        }
    }
    entry
}

/// `value` with `key: extra` added: into it when it is an object without that key, otherwise
/// around it as `{"result": value, key: extra}`.
fn attach(value: Value, key: &str, extra: Value) -> Value {
    match value {
        Value::Object(mut m) if !m.contains_key(key) => {
            m.insert(key.to_owned(), extra);
            Value::Object(m)
        }
        other => {
            let mut m = Map::new();
            m.insert("result".to_owned(), other);
            m.insert(key.to_owned(), extra);
            Value::Object(m)
        }
    }
}

/// A call id as a file-name stem: `[A-Za-z0-9_-]`, at most 96 characters.
fn safe_stem(call_id: &str) -> String {
    let stem: String = call_id
        .chars()
        .take(96)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "call".to_owned()
    } else {
        stem
    }
}

/// A file extension for a MIME type (`bin` for one not listed).
fn extension(mime: &str) -> &'static str {
    let essence = mime.split(';').next().unwrap_or("").trim();
    match essence.to_ascii_lowercase().as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/zip" => "zip",
        "text/csv" => "csv",
        "text/plain" => "txt",
        _ => "bin",
    }
}

/// The tools of an [`McpManager`]'s servers as a [`ToolSource`]: read at the start of each
/// run, so a server that joins after the first round is in the next run's tool list.
#[derive(Debug, Clone)]
pub struct McpToolSource {
    manager: McpManager,
    sink: Option<Arc<dyn DataSink>>,
    max_call: Duration,
    changes: watch::Receiver<u64>,
}

impl McpToolSource {
    /// The tools of `manager`, with no data sink (binary content then goes to the invocation's
    /// storage directory, if it names one) and the default cap on a call.
    pub fn new(manager: McpManager) -> Self {
        let changes = manager.subscribe();
        Self {
            manager,
            sink: None,
            max_call: DEFAULT_MCP_MAX_CALL,
            changes,
        }
    }

    /// Binary content of results goes to `sink`.
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn DataSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Caps one call, progress or not (the runtime's timeout of the attempt, unless the
    /// configuration names one for the tool).
    #[must_use]
    pub fn with_max_call(mut self, max_call: Duration) -> Self {
        self.max_call = max_call;
        self
    }

    /// The manager.
    pub fn manager(&self) -> &McpManager {
        &self.manager
    }

    /// The tools offered now, as tools.
    pub fn tools(&self) -> Vec<McpTool> {
        self.manager
            .tools()
            .into_iter()
            .map(|info| McpTool::new(self.manager.clone(), info, self.sink.clone(), self.max_call))
            .collect()
    }
}

impl ToolSource for McpToolSource {
    fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    fn snapshot(&self) -> SourceSnapshot {
        let tools = self
            .tools()
            .into_iter()
            .map(|t| Arc::new(t) as Arc<dyn Tool>)
            .collect();
        let servers = self
            .manager
            .servers()
            .into_iter()
            .map(|s| {
                let mut tools: Vec<String> = s.tools.into_iter().map(|t| t.model_name).collect();
                tools.sort();
                ServerRecord {
                    name: s.name,
                    state: s.state.as_str().to_owned(),
                    tools,
                }
            })
            .collect();
        SourceSnapshot::new(tools, servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_attach_files_without_clobbering_a_key() {
        let v = attach(json!({"a": 1}), "files", json!([1]));
        assert_eq!(v, json!({"a": 1, "files": [1]}));
        let v = attach(json!({"files": 0}), "files", json!([1]));
        assert_eq!(v, json!({"result": {"files": 0}, "files": [1]}));
        let v = attach(json!("text"), "files", json!([]));
        assert_eq!(v, json!({"result": "text", "files": []}));
        assert_eq!(extension("image/PNG; charset=x"), "png");
        assert_eq!(extension("application/x-unknown"), "bin");
        assert_eq!(safe_stem("../c 1"), "___c_1");
        assert_eq!(safe_stem(""), "call");
    }
}
