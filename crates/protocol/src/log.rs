//! The unified conversation log entry and its schema versions.
//!
//! A log entry is a superset of an OpenAI Chat Completions message: one entry per OpenAI
//! message (`assistant` with `tool_calls`, one `tool` entry per result), plus the UI extras,
//! the context metadata and model failures. What only Anthropic can express
//! (thinking with signatures, block order, `cache_control`, unknown blocks) is kept too, so
//! that Anthropic → log → Anthropic and OpenAI → log → OpenAI are both lossless.

use schemars::JsonSchema;
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::content::{Content, JsonMap};
use crate::error::{ProtocolError, Result};
use crate::fields::Fields;
use crate::records::EntryRecords;

/// The schema version this build writes. Version 0 is the original design's camelCase message without a
/// `schema_version` field; it is migrated on read.
/// Version 1 kept the loop's records untyped in `extra`; version 2 reads them into
/// [`LogEntry::records`] and turns version 1's `/compact` entries into compaction records.
pub const LOG_SCHEMA_VERSION: u32 = 2;

/// Role of a log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum LogRole {
    /// Application instructions. Only summary-class system entries survive compression.
    System,
    /// OpenAI's newer name for system instructions, kept apart so it converts back as written.
    Developer,
    /// The person.
    User,
    /// The model (text, thinking, tool calls, failures).
    Assistant,
    /// One tool result, answering `tool_call_id`.
    Tool,
}

impl LogRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// The mode a conversation was in when an entry was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum Mode {
    /// Plain chat.
    #[default]
    Chat,
    /// Chat with an agent persona.
    Agent,
    /// A workflow run.
    Run,
}

impl Mode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Agent => "agent",
            Self::Run => "run",
        }
    }
}

/// What kind of model failure an `llm_error` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LlmErrorKind {
    /// The request or the stream timed out.
    Timeout,
    /// The connection failed.
    Network,
    /// The provider refused for rate limits (HTTP 429).
    RateLimited,
    /// The provider answered with a server error (HTTP 5xx).
    Server,
    /// The stream ended before the message was complete.
    StreamCut,
    /// The provider's answer could not be read.
    InvalidResponse,
    /// The user stopped the call; the text streamed until then is kept.
    Cancelled,
    /// The request did not fit the model's context window.
    ContextOverflow,
    /// Anything else.
    Other,
}

/// A model failure, stored with whatever was streamed before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LlmError {
    /// What kind of failure.
    pub kind: LlmErrorKind,
    /// What the provider or the client said.
    pub message: String,
    /// Text streamed before the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_output: Option<String>,
}

impl LlmError {
    /// The text block that carries the failure into the next request, so "continue" resumes.
    pub fn render(&self) -> String {
        let kind = serde_json::to_value(self.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!(
            "LLM_ERROR\n- kind: {kind}\n- message: {}\n- note: the previous response was cut off; continue from where it stopped.",
            self.message
        )
    }
}

/// The function of a tool call, as OpenAI writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionCall {
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON string, kept byte for byte.
    pub arguments: String,
}

/// One tool call of an assistant entry.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct LogToolCall {
    /// Call id; the `tool` entry answering it carries it as `tool_call_id`.
    pub id: String,
    /// The function called.
    pub function: FunctionCall,
    /// Index of the call among the assistant's blocks, kept only when a non-call block follows
    /// it in the Anthropic original (so block order survives a round trip).
    pub position: Option<u32>,
    /// Fields of the Anthropic `tool_use` block that OpenAI cannot express (`caller`,
    /// `cache_control`, …).
    #[schemars(skip)]
    pub anthropic: JsonMap,
    /// Other fields of the OpenAI tool call, kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl LogToolCall {
    /// A call with arguments given as JSON.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: &Value) -> Self {
        Self {
            id: id.into(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.to_string(),
            },
            position: None,
            anthropic: JsonMap::new(),
            extra: JsonMap::new(),
        }
    }

    /// The arguments parsed as JSON.
    pub fn arguments_json(&self) -> std::result::Result<Value, serde_json::Error> {
        serde_json::from_str(&self.function.arguments)
    }
}

impl Serialize for LogToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &self.function)?;
        if let Some(position) = self.position {
            map.serialize_entry("position", &position)?;
        }
        if !self.anthropic.is_empty() {
            map.serialize_entry("anthropic", &self.anthropic)?;
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for LogToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut f = Fields::from_value::<D::Error>(Value::deserialize(d)?, "tool call")?;
        let id = f.req_string("id")?;
        match f.opt_string::<D::Error>("type")?.as_deref() {
            None | Some("function") => {}
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "tool call `{id}`: field `type` must be \"function\", found \"{other}\""
                )));
            }
        }
        let function: FunctionCall = f.opt("function")?.ok_or_else(|| f.missing("function"))?;
        let position = match f.opt_u64::<D::Error>("position")? {
            Some(p) => Some(u32::try_from(p).map_err(|_| {
                D::Error::custom(format_args!(
                    "tool call `{id}`: field `position` is too large"
                ))
            })?),
            None => None,
        };
        let anthropic = f.opt("anthropic")?.unwrap_or_default();
        Ok(Self {
            id,
            function,
            position,
            anthropic,
            extra: f.rest(),
        })
    }
}

/// One entry of the conversation log.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct LogEntry {
    /// Schema version the entry was written with; [`LOG_SCHEMA_VERSION`] after reading.
    pub schema_version: u32,
    /// Stable id, unique within the conversation.
    pub id: String,
    /// Who wrote it.
    pub role: LogRole,
    /// When it was written (RFC 3339).
    pub created_at: String,
    /// Text or blocks. For assistant entries, tool calls are in `tool_calls`, not here.
    pub content: Option<Content>,
    /// Tool calls of an assistant entry.
    pub tool_calls: Option<Vec<LogToolCall>>,
    /// The call a `tool` entry answers.
    pub tool_call_id: Option<String>,
    /// OpenAI's participant name.
    pub name: Option<String>,
    /// Whether a tool result is an error; absent when the source left it absent.
    pub is_error: Option<bool>,
    /// UI: the tool's name on a `tool` entry.
    pub tool_name: Option<String>,
    /// UI: how long the tool ran.
    pub duration_ms: Option<u64>,
    /// UI: shown collapsed.
    pub collapsed: Option<bool>,
    /// UI: a widget payload.
    pub widget: Option<Value>,
    /// UI: the part type of the original message model.
    pub part_type: Option<String>,
    /// Context: the mode the entry was written in.
    pub mode: Option<Mode>,
    /// Context: the workflow run that wrote it.
    pub run_id: Option<String>,
    /// Context: the workflow.
    pub workflow_id: Option<String>,
    /// Context: the agent.
    pub agent_id: Option<String>,
    /// Context: false for UI-only entries that never go to the model. Default true.
    pub include_in_context: bool,
    /// A model failure recorded on an assistant entry.
    pub llm_error: Option<LlmError>,
    /// Whether this entry continues the provider message of the previous entry. `None` means
    /// the default rule: a `tool` entry after a `tool` entry shares its message.
    pub merge_with_previous: Option<bool>,
    /// The agent loop's records, written at the top level of the entry's JSON.
    #[serde(flatten)]
    pub records: EntryRecords,
    /// Anthropic-only fields of the source message or block.
    #[schemars(skip)]
    pub anthropic: JsonMap,
    /// OpenAI-only fields of the source message (`refusal`, `audio`, …).
    #[schemars(skip)]
    pub openai: JsonMap,
    /// Fields this build does not know (written by a newer one), kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl LogEntry {
    /// An entry with the given id, role and time and nothing else.
    pub fn new(id: impl Into<String>, role: LogRole, created_at: impl Into<String>) -> Self {
        Self {
            schema_version: LOG_SCHEMA_VERSION,
            id: id.into(),
            role,
            created_at: created_at.into(),
            content: None,
            tool_calls: None,
            tool_call_id: None,
            name: None,
            is_error: None,
            tool_name: None,
            duration_ms: None,
            collapsed: None,
            widget: None,
            part_type: None,
            mode: None,
            run_id: None,
            workflow_id: None,
            agent_id: None,
            include_in_context: true,
            llm_error: None,
            merge_with_previous: None,
            records: EntryRecords::default(),
            anthropic: JsonMap::new(),
            openai: JsonMap::new(),
            extra: JsonMap::new(),
        }
    }

    /// Sets the content to a string.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.content = Some(Content::Text(text.into()));
        self
    }

    /// The tool calls, or an empty slice.
    pub fn calls(&self) -> &[LogToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }

    /// The text of the content.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.content {
            Some(content) => content.to_text(),
            None => std::borrow::Cow::Borrowed(""),
        }
    }

    /// Reads one entry from JSON text, migrating older schema versions.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| ProtocolError::json("log entry", &e))
    }

    /// Reads a JSONL log; the error names the 1-based line. Blank lines are skipped.
    pub fn parse_jsonl(text: &str) -> Result<Vec<Self>> {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            crate::validate::check_size(
                &format!("log line {}", i + 1),
                line,
                crate::validate::MAX_INPUT_BYTES,
            )?;
            out.push(
                serde_json::from_str(line)
                    .map_err(|e| ProtocolError::json(format!("log line {}", i + 1), &e))?,
            );
        }
        Ok(out)
    }

    /// Writes entries as JSONL, one line each, each ending in `\n`.
    pub fn to_jsonl(entries: &[Self]) -> String {
        let mut out = Vec::with_capacity(entries.len() * 256);
        for entry in entries {
            // Serialising a LogEntry into memory cannot fail: every field is plain JSON.
            if serde_json::to_writer(&mut out, entry).is_ok() {
                out.push(b'\n');
            }
        }
        // serde_json writes UTF-8 only.
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The fields a log entry reader recognises, with the version-0 camelCase names as aliases.
enum Key {
    SchemaVersion,
    Id,
    Role,
    CreatedAt,
    Content,
    ToolCalls,
    ToolCallId,
    Name,
    IsError,
    ToolName,
    DurationMs,
    Collapsed,
    Widget,
    PartType,
    Mode,
    RunId,
    WorkflowId,
    AgentId,
    IncludeInContext,
    LlmError,
    MergeWithPrevious,
    Anthropic,
    OpenAi,
    Other(String),
}

impl Key {
    fn from_str(key: &str) -> Self {
        match key {
            "schema_version" => Self::SchemaVersion,
            "id" => Self::Id,
            "role" => Self::Role,
            "created_at" | "createdAt" => Self::CreatedAt,
            "content" => Self::Content,
            "tool_calls" | "toolCalls" => Self::ToolCalls,
            "tool_call_id" | "toolCallId" => Self::ToolCallId,
            "name" => Self::Name,
            "is_error" => Self::IsError,
            "tool_name" | "toolName" => Self::ToolName,
            "duration_ms" | "duration" => Self::DurationMs,
            "collapsed" | "isCollapsed" => Self::Collapsed,
            "widget" => Self::Widget,
            "part_type" | "partType" => Self::PartType,
            "mode" => Self::Mode,
            "run_id" | "runId" => Self::RunId,
            "workflow_id" | "workflowId" => Self::WorkflowId,
            "agent_id" | "agentId" => Self::AgentId,
            "include_in_context" | "includeInContext" => Self::IncludeInContext,
            "llm_error" => Self::LlmError,
            "merge_with_previous" => Self::MergeWithPrevious,
            "anthropic" => Self::Anthropic,
            "openai" => Self::OpenAi,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Key, E> {
                Ok(Key::from_str(v))
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

struct EntryVisitor;

impl<'de> serde::de::Visitor<'de> for EntryVisitor {
    type Value = LogEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a log entry object")
    }

    // One pass over the object: every value goes straight into its typed field, unknown ones
    // into `extra`. Version-0 (camelCase, no `schema_version`) names are read as aliases; the
    // version decides at the end what is accepted.
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<LogEntry, A::Error> {
        fn field<E: serde::de::Error>(key: &str, e: impl std::fmt::Display) -> E {
            E::custom(format_args!("log entry: field `{key}`: {e}"))
        }
        fn must<E: serde::de::Error>(key: &str, expected: &str, found: &Value) -> E {
            E::custom(format_args!(
                "log entry: field `{key}` must be {expected}, found {}",
                crate::content::kind_of(found)
            ))
        }
        let mut version: Option<Value> = None;
        let mut e = LogEntry::new(String::new(), LogRole::User, String::new());
        let (mut id, mut role, mut created_at) = (None, None, None);
        let mut duration: Option<Value> = None;
        let mut include: Option<Value> = None;
        macro_rules! opt {
            ($key:literal, $ty:ty) => {
                map.next_value::<Option<$ty>>()
                    .map_err(|err| field::<A::Error>($key, err))?
            };
        }
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::SchemaVersion => version = Some(map.next_value()?),
                Key::Id => id = opt!("id", String),
                Key::Role => role = opt!("role", LogRole),
                Key::CreatedAt => created_at = opt!("created_at", String),
                Key::Content => {
                    e.content = match map.next_value::<Value>()? {
                        Value::Null => None,
                        v => Some(
                            Content::from_value::<A::Error>(v)
                                .map_err(|err| field::<A::Error>("content", err))?,
                        ),
                    }
                }
                Key::ToolCalls => e.tool_calls = opt!("tool_calls", Vec<LogToolCall>),
                Key::ToolCallId => e.tool_call_id = opt!("tool_call_id", String),
                Key::Name => e.name = opt!("name", String),
                Key::IsError => e.is_error = opt!("is_error", bool),
                Key::ToolName => e.tool_name = opt!("tool_name", String),
                Key::DurationMs => duration = Some(map.next_value()?),
                Key::Collapsed => e.collapsed = opt!("collapsed", bool),
                Key::Widget => {
                    e.widget = map
                        .next_value::<Value>()
                        .map(|v| (!v.is_null()).then_some(v))?
                }
                Key::PartType => e.part_type = opt!("part_type", String),
                Key::Mode => e.mode = opt!("mode", Mode),
                Key::RunId => e.run_id = opt!("run_id", String),
                Key::WorkflowId => e.workflow_id = opt!("workflow_id", String),
                Key::AgentId => e.agent_id = opt!("agent_id", String),
                Key::IncludeInContext => include = Some(map.next_value()?),
                Key::LlmError => e.llm_error = opt!("llm_error", LlmError),
                Key::MergeWithPrevious => e.merge_with_previous = opt!("merge_with_previous", bool),
                Key::Anthropic => e.anthropic = opt!("anthropic", JsonMap).unwrap_or_default(),
                Key::OpenAi => e.openai = opt!("openai", JsonMap).unwrap_or_default(),
                Key::Other(name) => {
                    let value: Value = map.next_value()?;
                    if let Err(value) = e.records.read(&name, value) {
                        e.extra.insert(name, value);
                    }
                }
            }
        }
        let written = match version {
            None => 0,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v <= u64::from(LOG_SCHEMA_VERSION) => v,
                Some(v) => {
                    return Err(A::Error::custom(format_args!(
                        "log entry: schema version {v} is newer than the newest this build reads ({LOG_SCHEMA_VERSION})"
                    )));
                }
                None => {
                    return Err(must(
                        "schema_version",
                        "a non-negative integer",
                        &Value::Number(n),
                    ));
                }
            },
            Some(other) => return Err(must("schema_version", "a non-negative integer", &other)),
        };
        let legacy = written == 0;
        e.duration_ms = match duration {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            // Version 0 wrote durations as fractional milliseconds.
            Some(Value::Number(n))
                if legacy && n.as_f64().is_some_and(|ms| ms.is_finite() && ms >= 0.0) =>
            {
                n.as_f64().map(|ms| ms.round() as u64)
            }
            Some(other) => return Err(must("duration_ms", "a non-negative integer", &other)),
        };
        e.include_in_context = match include {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => b,
            Some(other) => return Err(must("include_in_context", "a boolean", &other)),
        };
        e.id = id.ok_or_else(|| A::Error::custom("log entry: missing field `id`"))?;
        e.role = role.ok_or_else(|| A::Error::custom("log entry: missing field `role`"))?;
        e.created_at =
            created_at.ok_or_else(|| A::Error::custom("log entry: missing field `created_at`"))?;
        if written < 2 {
            crate::records::migrate_v1(&mut e);
        }
        e.schema_version = LOG_SCHEMA_VERSION;
        Ok(e)
    }
}

impl<'de> Deserialize<'de> for LogEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

impl Serialize for LogEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        fn opt<M: SerializeMap, T: Serialize>(
            m: &mut M,
            k: &str,
            v: &Option<T>,
        ) -> std::result::Result<(), M::Error> {
            match v {
                Some(v) => m.serialize_entry(k, v),
                None => Ok(()),
            }
        }
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("schema_version", &self.schema_version)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("role", &self.role)?;
        m.serialize_entry("created_at", &self.created_at)?;
        opt(&mut m, "content", &self.content)?;
        opt(&mut m, "tool_calls", &self.tool_calls)?;
        opt(&mut m, "tool_call_id", &self.tool_call_id)?;
        opt(&mut m, "name", &self.name)?;
        opt(&mut m, "is_error", &self.is_error)?;
        opt(&mut m, "tool_name", &self.tool_name)?;
        opt(&mut m, "duration_ms", &self.duration_ms)?;
        opt(&mut m, "collapsed", &self.collapsed)?;
        opt(&mut m, "widget", &self.widget)?;
        opt(&mut m, "part_type", &self.part_type)?;
        opt(&mut m, "mode", &self.mode)?;
        opt(&mut m, "run_id", &self.run_id)?;
        opt(&mut m, "workflow_id", &self.workflow_id)?;
        opt(&mut m, "agent_id", &self.agent_id)?;
        if !self.include_in_context {
            m.serialize_entry("include_in_context", &false)?;
        }
        opt(&mut m, "llm_error", &self.llm_error)?;
        opt(&mut m, "merge_with_previous", &self.merge_with_previous)?;
        if !self.anthropic.is_empty() {
            m.serialize_entry("anthropic", &self.anthropic)?;
        }
        if !self.openai.is_empty() {
            m.serialize_entry("openai", &self.openai)?;
        }
        self.records.write(&mut m)?;
        for (k, v) in &self.extra {
            // A record set in code wins over an unreadable value of the same name.
            if !crate::records::RECORD_KEYS.contains(&k.as_str()) || !self.records.has(k) {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}
