//! The JSON shapes of the API that are not the loop's own types: what `POST …/runs` answers,
//! how an upload is described (`POST`/`GET …/uploads`),
//! the error body, and the data of the frames the server adds to the run's events (`entry`,
//! `sync`, `reset`). `cargo xtask codegen` publishes their JSON Schemas beside the
//! protocol's, with [`ba_agent::AgentEvent`] (the data of every other frame, whose `event` tag
//! is the frame's `event:` name).

use ba_protocol::LogEntry;
use ba_storage::FileMeta;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// The answer of `POST /api/v1/conversations/{id}/runs` (202).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunAccepted {
    /// The run: a new one, or the one the same `request_id` started before.
    pub run_id: String,
    /// The conversation.
    pub conversation_id: String,
    /// Whether the request id had started this run before (a retry).
    pub existing: bool,
    /// Where the run's events stream.
    pub events: String,
}

/// An upload as the upload routes describe it (`POST …/uploads` answers one, `GET` a list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct UploadMeta {
    /// `upload_001`, `upload_002`, …
    pub id: String,
    /// The file name as uploaded (shown, never used as a path).
    pub name: String,
    /// The type: the lowercased extension (`csv`, `xlsx`) or `markdown` for `.md`.
    pub file_type: String,
    /// The media type it is served with.
    pub media_type: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// What the person said it is.
    pub description: String,
}

impl UploadMeta {
    /// The upload view of a workspace file.
    pub fn from_file(file: &FileMeta) -> Self {
        Self {
            id: file.id.to_string(),
            name: file.name.clone(),
            file_type: file_type(&file.name),
            media_type: Some(file.media_type.clone()),
            size: file.size,
            description: file.description.clone(),
        }
    }
}

/// The lowercased extension of `name` (`markdown` for `.md`), or `file`.
fn file_type(name: &str) -> String {
    match name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
        Some(e) if e == "md" => "markdown".to_owned(),
        Some(e) if !e.is_empty() && e.len() <= 10 => e,
        _ => "file".to_owned(),
    }
}

/// What went wrong, in every error answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// A short snake_case code (`unauthorized`, `forbidden`, `not_found`, `busy`, `too_large`,
    /// `invalid_id`, `invalid_json`, …).
    pub code: String,
    /// A sentence.
    pub message: String,
}

/// The body of every error answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
    /// On a 409 `busy`: the run in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<String>,
}

/// The data of an `entry` frame: one entry appended to the log (its frame id is `seq`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EntryFrame {
    /// The entry's sequence number in the conversation.
    pub seq: u64,
    /// When the store acknowledged it (ms since the Unix epoch).
    pub appended_ms: i64,
    /// The entry as stored.
    pub entry: LogEntry,
    /// The run that appended it (absent when replayed from the log or appended by `/compact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The processed final answer, when the entry is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_response: Option<ba_protocol::ApiResponse>,
    /// That answer's report rendered from Markdown and sanitised (absent for an HTML report,
    /// which the page shows in a sandboxed frame).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_html: Option<String>,
    /// Token figures of a model call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// What the call cost in US dollars, when its model has a configured price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A tool call started and not finished yet.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OpenCall {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
}

/// The data of a `sync` frame: on a reconnect during a run, the round in flight so far (its
/// deltas are not in the log).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct SyncFrame {
    /// The run in flight.
    pub run_id: String,
    /// Its round.
    pub round: u32,
    /// The text the round streamed so far.
    pub text_so_far: String,
    /// The thinking the round streamed so far.
    pub thinking_so_far: String,
    /// Tool calls started and not finished.
    pub open_tool_calls: Vec<OpenCall>,
}

/// The data of a `reset` frame: the client's cursor is past the end of the log (another
/// store, a wiped log); reload `/messages` and reconnect without a cursor.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResetFrame {
    /// The log's last sequence number.
    pub last_seq: u64,
}
