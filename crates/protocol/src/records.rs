//! The agent loop's records on log entries (log schema version 2).
//!
//! Beside the message an entry carries, the loop records what it knows about it: the round, the
//! token figures and the model of a call, what the context builder did, the processed final
//! answer, the skill a call activated, where spilled data went, the run that appended a user
//! message, and the compactions of the window. Each is a typed field of [`EntryRecords`], written
//! at the top level of the entry's JSON under a fixed name, so the JSON shape is the one version 1
//! wrote in its untyped `extra` map. No provider conversion sends them: they never reach a model.
//!
//! Reading is forgiving: a record whose value does not have its type (written by a later version,
//! or damaged) stays in [`LogEntry::extra`](crate::LogEntry::extra) as it was written, and the
//! entry still loads.

use schemars::JsonSchema;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::log::{LogEntry, LogRole};
use crate::structured::ApiResponse;

/// The version of a [`CompactionRecord`] written today.
pub const COMPACTION_VERSION: u32 = 1;

/// What a user or system entry the loop wrote is, beyond a message typed by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// The `continue` sent after a failure.
    Continue,
    /// The correction sent after an answer that was not the structured JSON.
    FormatError,
    /// Version 1's summary of a `/compact`. Read as a [`CompactionRecord`] whose window is
    /// the summary alone (the entry is migrated on read); never written by version 2.
    CompactBoundary,
    /// An entry holding a [`CompactionRecord`]: later windows start from it.
    Compaction,
    /// The server inventory at the start of a run, written when it changed
    /// ([`ServerInventoryRecord`]); never sent to a model.
    ServerInventory,
    /// Tool calls of the last round wait for a person's decision (hidden; the calls are in
    /// `approval_request`).
    ApprovalRequest,
    /// A person's decision about a waiting call (hidden; in `approval_decision`).
    ApprovalDecision,
    /// A hook ran (hidden; in `hook`).
    Hook,
    /// The entries after a point leave the history the model sees (hidden; in `rewind`). They
    /// stay in the log: a fork at the entry before the rewind brings them back.
    Rewind,
    /// The context window the conversation's requests are sized to changed (hidden; in
    /// `window`): a server refused a request as too long and said its size.
    Window,
    /// The memory index the conversation's system prompt carries from here on (hidden; its
    /// text): written when the conversation starts and after a compaction, so the prompt
    /// stays the same between.
    MemoryIndex,
    /// A kind this build does not know (the value itself stays in `extra`).
    Other,
}

/// Token figures of one model call, as the provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Usage {
    /// Input (prompt) tokens billed, cache reads and writes excluded for Anthropic.
    pub input_tokens: u64,
    /// Output (completion) tokens, thinking included.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// The figures are the client's own count, not the provider's: the provider reported
    /// none (a local server asked for no usage, say).
    #[serde(skip_serializing_if = "is_false")]
    pub estimated: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Usage {
    /// Every prompt token of the call: billed, read from and written to the cache.
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// Who answered a model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ModelRecord {
    /// The client's provider (`anthropic`, `openai`, `replay`).
    pub provider: String,
    /// The model as the provider named it; absent on a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What the context builder did for one model call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ContextRecord {
    /// Whether the window went over the trigger and was compressed.
    pub compressed: bool,
    /// Message tokens before compression.
    pub tokens_before: usize,
    /// Message tokens after.
    pub tokens_after: usize,
    /// Tokens of the system prompt.
    pub system_tokens: usize,
    /// System, tool-definition and message tokens sent (logs written before the tool
    /// definitions were counted leave them out: their `tool_tokens` is 0).
    pub used: usize,
    /// Tokens of the tool definitions sent, counted in `used`. The window makes room for
    /// them unless the server was found to leave them out of its prompt.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub tool_tokens: usize,
    /// Strategies applied.
    pub strategies: Vec<String>,
    /// Entries left out of the window.
    pub dropped: usize,
    /// Skills whose instructions were put back into the system prompt.
    pub skills_reinjected: Vec<String>,
    /// Tools whose definitions the request sent (0 in logs written before it was counted).
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub tools_sent: usize,
    /// Tools left out of the request for the tool search to find.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub tools_deferred: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// The skill an `activate_skill` call activated, on its tool entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillActivationRecord {
    /// The skill.
    pub name: String,
    /// The activation id.
    #[serde(default)]
    pub activation_id: String,
    /// Tools the skill allows (`None`: all).
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    /// The model the skill asks for.
    #[serde(default)]
    pub model: Option<String>,
}

/// The servers whose tools a run offered (MCP servers) and those tools, written at the start
/// of a run on a hidden system entry when it differs from the last one in the log, so resume
/// and `inspect` can tell when the tools changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ServerInventoryRecord {
    /// The servers, in configuration order.
    #[serde(default)]
    pub servers: Vec<ServerRecord>,
}

/// One server of a [`ServerInventoryRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ServerRecord {
    /// The server's name.
    pub name: String,
    /// Its state when the run started (`ready`, `starting`, `lazy`, `failed`, `disabled`, …).
    pub state: String,
    /// The model names of the tools it offered, sorted.
    #[serde(default)]
    pub tools: Vec<String>,
}

impl ServerInventoryRecord {
    /// Every tool name, across servers.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.servers
            .iter()
            .flat_map(|s| s.tools.iter().map(String::as_str))
    }

    /// One line for a person: `files (ready: 2 tools), crm (failed)`.
    pub fn summary(&self) -> String {
        if self.servers.is_empty() {
            return "no servers".to_owned();
        }
        self.servers
            .iter()
            .map(|s| match s.tools.len() {
                0 => format!("{} ({})", s.name, s.state),
                1 => format!("{} ({}: 1 tool)", s.name, s.state),
                n => format!("{} ({}: {n} tools)", s.name, s.state),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Why an entry left a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum DropReason {
    /// `include_in_context` is false (UI-only entry).
    Excluded,
    /// A historical system entry that is not summary-class.
    HistoricalSystem,
    /// A tool result whose call is not in the log.
    OrphanResult,
    /// A second result for a call already answered.
    DuplicateResult,
    /// Older than the rounds a strategy keeps.
    OutsideRecentRounds,
    /// Scored below what the budget could hold (key-messages).
    LowScore,
    /// Below the importance the budget could hold (importance).
    LowImportance,
    /// Replaced by a summary.
    Summarized,
    /// A trace or an answer of an older round, dropped (user messages stay) because even the
    /// shortened window was over the budget.
    OlderRound,
    /// Dropped, oldest first, to fit the budget.
    OverBudget,
    /// Beyond the builder's message or character cap.
    MessageLimit,
    /// A tool result whose group was folded into one note (see [`ChangeKind::Folded`]): its
    /// trace is in the note, the full output one `recall` away.
    Folded,
}

impl DropReason {
    /// The snake-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Excluded => "excluded",
            Self::HistoricalSystem => "historical_system",
            Self::OrphanResult => "orphan_result",
            Self::DuplicateResult => "duplicate_result",
            Self::OutsideRecentRounds => "outside_recent_rounds",
            Self::LowScore => "low_score",
            Self::LowImportance => "low_importance",
            Self::Summarized => "summarized",
            Self::OlderRound => "older_round",
            Self::OverBudget => "over_budget",
            Self::MessageLimit => "message_limit",
            Self::Folded => "folded",
        }
    }
}

/// An entry that left a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Dropped {
    /// The log entry id.
    pub id: String,
    /// Why.
    pub reason: DropReason,
}

/// How an entry kept in a window was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A synthetic result for a call that never got one.
    AbortedResult,
    /// A tool result cut to a preview (first and last lines and its salient lines).
    ToolResultPreview,
    /// A tool group out of the window, left as a trace: its calls (long arguments cut), a
    /// preview of each result and the path of the full output.
    Trace,
    /// A long assistant text cut to its key sentences.
    TextCut,
    /// A user message cut to its key sentences (requirements, numbers, codes, names, paths)
    /// because the user messages alone were over the budget.
    KeySentences,
    /// An old entry replaced by a one-line preview.
    Compressed,
    /// The summary entry a summarizer wrote.
    SummaryInserted,
    /// A user entry opening a window whose older turns were cut away.
    ResumeInserted,
    /// A tool group of an older round folded into one assistant note, its calls and results
    /// gone from the window: each result's trace (its key line, or its header alone) and the
    /// way back to the full output. Cheaper than a trace that keeps the calls paired.
    Folded,
    /// Passages of what left the window, brought back because they bear on the current task
    /// (retrieval): one assistant entry before the latest user message, marked as recalled,
    /// each passage with where it came from.
    Recalled,
}

/// An entry that was added to or changed in a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Changed {
    /// The log entry id.
    pub id: String,
    /// How.
    pub kind: ChangeKind,
}

/// One piece of a recorded window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WindowItem {
    /// Log entries `first`..=`last` (consecutive in the log), as they are in the log.
    Keep {
        /// Id of the first entry of the run.
        first: String,
        /// Id of the last entry of the run.
        last: String,
    },
    /// An entry changed or added by the compaction, in full.
    Entry {
        /// The entry as it was sent.
        entry: Box<LogEntry>,
    },
}

/// A compaction of the window, as the log records it: the window as it was sent, as runs of
/// log entries kept as they are (by id) and the entries a strategy changed or added (traces, cut
/// texts, summaries) in full. Later windows start from the last record and append what was
/// logged after it. The automatic compaction of the context builder and `/compact` (whose window
/// is one summary) write the same record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompactionRecord {
    /// [`COMPACTION_VERSION`] when written.
    pub version: u32,
    /// The strategies applied (`compact` for a `/compact`).
    pub strategies: Vec<String>,
    /// The window, in order.
    pub items: Vec<WindowItem>,
    /// Message tokens before the compaction.
    pub tokens_before: usize,
    /// Message tokens after.
    pub tokens_after: usize,
    /// The tokens the compaction aimed at.
    pub target: usize,
    /// Entries that left the window, with why.
    #[serde(default)]
    pub dropped: Vec<Dropped>,
    /// Entries changed or added, with how.
    #[serde(default)]
    pub changed: Vec<Changed>,
}

impl CompactionRecord {
    /// The `part_type` of the entry that holds a record.
    pub const PART_TYPE: &'static str = "compaction";

    /// Whether the window reads nothing of the log before the record (a `/compact`, or a
    /// window a summary replaced whole): the history the loop sees starts at the record.
    pub fn starts_afresh(&self) -> bool {
        !self
            .items
            .iter()
            .any(|item| matches!(item, WindowItem::Keep { .. }))
    }

    /// The log entry that keeps the record: a system entry that is never sent, of kind
    /// [`EntryKind::Compaction`], whose text says what happened for a person reading the log.
    pub fn into_entry(self, id: impl Into<String>, created_at: impl Into<String>) -> LogEntry {
        let mut e = LogEntry::new(id, LogRole::System, created_at).with_text(format!(
            "[compaction: {} → {} tokens by {}; {} piece(s) kept, {} entries left out, {} changed]",
            self.tokens_before,
            self.tokens_after,
            self.strategies.join(", "),
            self.items.len(),
            self.dropped.len(),
            self.changed.len()
        ));
        e.include_in_context = false;
        e.part_type = Some(Self::PART_TYPE.to_owned());
        e.records.kind = Some(EntryKind::Compaction);
        e.records.compaction = Some(Box::new(self));
        e
    }
}

/// The loop's records on one log entry; every field is optional and absent from the JSON when
/// `None`. The wire name of each field is its Rust name, except [`caller_run_id`]
/// (`caller_run_id`, not the entry's own `run_id`) and [`tool_retries`] (`retry_count`).
///
/// [`caller_run_id`]: EntryRecords::caller_run_id
/// [`tool_retries`]: EntryRecords::tool_retries
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct EntryRecords {
    /// What a user or system entry is, when the loop wrote it for a reason of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<EntryKind>,
    /// The round of an assistant entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// The token figures of the call that wrote an assistant entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Who answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRecord>,
    /// Why the model stopped (`end_turn`, `tool_use`, `max_tokens`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Retries of the model call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// What the context builder did for the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextRecord>,
    /// The processed final answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_response: Option<Box<ApiResponse>>,
    /// What was wrong with an answer the provider ended properly (a tool input cut at
    /// `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problems: Option<Vec<String>>,
    /// Warnings of the final answer's processing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// On a tool entry: the skill an `activate_skill` call activated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<SkillActivationRecord>,
    /// On a tool entry: the file of the conversation where the full output went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_ref: Option<String>,
    /// On a tool entry: the tool's retries.
    #[serde(rename = "retry_count", skip_serializing_if = "Option::is_none")]
    pub tool_retries: Option<u32>,
    /// On a tool entry: the error kind of a failed call (a [`crate::ToolErrorKind`] name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// On a hidden system entry: the servers behind the run's changing tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_inventory: Option<ServerInventoryRecord>,
    /// On the user entry a run appended: the caller's request id (a retried request finds its
    /// run by it, across restarts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// On the user entry a run appended: the caller's id of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller_run_id: Option<String>,
    /// On an entry of kind [`EntryKind::Compaction`]: the window from which later ones start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Box<CompactionRecord>>,
    /// On an entry of kind [`EntryKind::ApprovalRequest`]: the calls that wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_request: Option<Vec<crate::PendingApproval>>,
    /// On an entry of kind [`EntryKind::ApprovalDecision`]: what was decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_decision: Option<crate::ApprovalDecision>,
    /// On an entry of kind [`EntryKind::Hook`]: what the hook did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<crate::HookRecord>,
    /// On an entry of kind [`EntryKind::Rewind`]: where the history goes back to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewind: Option<RewindRecord>,
    /// On an entry of a workflow run: the run started, or a node completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<Box<crate::WorkflowRecord>>,
    /// On an entry of kind [`EntryKind::Window`]: the window later requests are sized to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowRecord>,
    /// On a user message: the files the person attached to it, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<AttachmentRecord>>,
    /// The person who made the entry happen: on the user entry a run appended (who started
    /// the run), on an approval decision (who decided), on a rewind (who took the history
    /// back). Absent in logs written before people were told apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// On a tool entry: the deferred tools a tool search found, offered to the model from the
    /// next request on for the rest of the conversation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_found: Option<Vec<String>>,
    /// On a tool entry: the memory files the call changed (the page shows them, with undo).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_change: Option<MemoryChangeRecord>,
}

/// What a call of the memory tool changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryChangeRecord {
    /// The command (`create`, `str_replace`, `insert`, `delete`, `rename`).
    pub command: String,
    /// The versions it made, in order.
    pub versions: Vec<MemoryVersionRef>,
}

/// One version of a memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryVersionRef {
    /// The full path (`/memories/preferences.md`).
    pub path: String,
    /// The version made.
    pub version: u32,
}

/// The context window of a conversation, learned from the server: later requests of the
/// conversation are sized to it, whatever the configuration said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WindowRecord {
    /// The window, in the server's tokens.
    pub tokens: u64,
    /// The model it is the window of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The tokens of the request the server refused, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_tokens: Option<u64>,
    /// The window the request was sized to before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<u64>,
}

/// A file attached to a user message, as the person attached it: the message's text block is
/// what they wrote, and this record (not the machine note that tells the model how to read
/// the file) is what a front end shows as the attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AttachmentRecord {
    /// The file's id in the conversation (`upload_001`).
    pub id: String,
    /// The name it was uploaded under (`sales.csv`).
    pub name: String,
    /// Its media type (`text/csv`).
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A rewind: the entries appended before it with a sequence number past `to_seq` leave the
/// history the model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RewindRecord {
    /// The last entry that stays.
    pub to_seq: u64,
}

/// The wire names of the records, in the order they are written.
pub(crate) const RECORD_KEYS: [&str; 28] = [
    "kind",
    "round",
    "usage",
    "model",
    "stop_reason",
    "retries",
    "context",
    "api_response",
    "problems",
    "warnings",
    "skill",
    "data_ref",
    "retry_count",
    "error_kind",
    "server_inventory",
    "request_id",
    "caller_run_id",
    "compaction",
    "approval_request",
    "approval_decision",
    "hook",
    "rewind",
    "workflow",
    "window",
    "attachments",
    "actor",
    "tools_found",
    "memory_change",
];

impl EntryRecords {
    /// Whether no record is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Reads the record named `key` from `value`. Gives the value back when `key` names no
    /// record or the value does not have the record's type (the reader then keeps it as an
    /// unknown field).
    pub(crate) fn read(&mut self, key: &str, value: Value) -> Result<(), Value> {
        fn put<T: serde::de::DeserializeOwned>(
            slot: &mut Option<T>,
            value: Value,
        ) -> Result<(), Value> {
            match T::deserialize(&value) {
                Ok(v) => {
                    *slot = Some(v);
                    Ok(())
                }
                Err(_) => Err(value),
            }
        }
        // A record that is a struct is an object on the wire; serde would also take an array.
        fn object<T: serde::de::DeserializeOwned>(
            slot: &mut Option<T>,
            value: Value,
        ) -> Result<(), Value> {
            if value.is_object() {
                put(slot, value)
            } else {
                Err(value)
            }
        }
        match key {
            "kind" => put(&mut self.kind, value),
            "round" => put(&mut self.round, value),
            "usage" => object(&mut self.usage, value),
            "model" => object(&mut self.model, value),
            "stop_reason" => put(&mut self.stop_reason, value),
            "retries" => put(&mut self.retries, value),
            "context" => object(&mut self.context, value),
            "api_response" => object(&mut self.api_response, value),
            "problems" => put(&mut self.problems, value),
            "warnings" => put(&mut self.warnings, value),
            "skill" => object(&mut self.skill, value),
            "data_ref" => put(&mut self.data_ref, value),
            "retry_count" => put(&mut self.tool_retries, value),
            "error_kind" => put(&mut self.error_kind, value),
            "server_inventory" => object(&mut self.server_inventory, value),
            "request_id" => put(&mut self.request_id, value),
            "caller_run_id" => put(&mut self.caller_run_id, value),
            "compaction" => object(&mut self.compaction, value),
            "approval_request" => put(&mut self.approval_request, value),
            "approval_decision" => object(&mut self.approval_decision, value),
            "hook" => object(&mut self.hook, value),
            "rewind" => object(&mut self.rewind, value),
            "workflow" => object(&mut self.workflow, value),
            "window" => object(&mut self.window, value),
            "attachments" => put(&mut self.attachments, value),
            "actor" => put(&mut self.actor, value),
            "tools_found" => put(&mut self.tools_found, value),
            "memory_change" => object(&mut self.memory_change, value),
            _ => Err(value),
        }
    }

    /// Whether the record named `key` (a wire name) is set.
    pub(crate) fn has(&self, key: &str) -> bool {
        match key {
            "kind" => self.kind.is_some(),
            "round" => self.round.is_some(),
            "usage" => self.usage.is_some(),
            "model" => self.model.is_some(),
            "stop_reason" => self.stop_reason.is_some(),
            "retries" => self.retries.is_some(),
            "context" => self.context.is_some(),
            "api_response" => self.api_response.is_some(),
            "problems" => self.problems.is_some(),
            "warnings" => self.warnings.is_some(),
            "skill" => self.skill.is_some(),
            "data_ref" => self.data_ref.is_some(),
            "retry_count" => self.tool_retries.is_some(),
            "error_kind" => self.error_kind.is_some(),
            "server_inventory" => self.server_inventory.is_some(),
            "request_id" => self.request_id.is_some(),
            "caller_run_id" => self.caller_run_id.is_some(),
            "compaction" => self.compaction.is_some(),
            "approval_request" => self.approval_request.is_some(),
            "approval_decision" => self.approval_decision.is_some(),
            "hook" => self.hook.is_some(),
            "rewind" => self.rewind.is_some(),
            "workflow" => self.workflow.is_some(),
            "window" => self.window.is_some(),
            "attachments" => self.attachments.is_some(),
            "actor" => self.actor.is_some(),
            "tools_found" => self.tools_found.is_some(),
            "memory_change" => self.memory_change.is_some(),
            _ => false,
        }
    }

    /// Writes the records that are set into an entry's JSON object.
    pub(crate) fn write<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        fn opt<M: SerializeMap, T: Serialize>(
            m: &mut M,
            k: &str,
            v: &Option<T>,
        ) -> Result<(), M::Error> {
            match v {
                Some(v) => m.serialize_entry(k, v),
                None => Ok(()),
            }
        }
        opt(m, "kind", &self.kind)?;
        opt(m, "round", &self.round)?;
        opt(m, "usage", &self.usage)?;
        opt(m, "model", &self.model)?;
        opt(m, "stop_reason", &self.stop_reason)?;
        opt(m, "retries", &self.retries)?;
        opt(m, "context", &self.context)?;
        opt(m, "api_response", &self.api_response)?;
        opt(m, "problems", &self.problems)?;
        opt(m, "warnings", &self.warnings)?;
        opt(m, "skill", &self.skill)?;
        opt(m, "data_ref", &self.data_ref)?;
        opt(m, "retry_count", &self.tool_retries)?;
        opt(m, "error_kind", &self.error_kind)?;
        opt(m, "server_inventory", &self.server_inventory)?;
        opt(m, "request_id", &self.request_id)?;
        opt(m, "caller_run_id", &self.caller_run_id)?;
        opt(m, "compaction", &self.compaction)?;
        opt(m, "approval_request", &self.approval_request)?;
        opt(m, "approval_decision", &self.approval_decision)?;
        opt(m, "hook", &self.hook)?;
        opt(m, "rewind", &self.rewind)?;
        opt(m, "workflow", &self.workflow)?;
        opt(m, "window", &self.window)?;
        opt(m, "attachments", &self.attachments)?;
        opt(m, "actor", &self.actor)?;
        opt(m, "tools_found", &self.tools_found)?;
        opt(m, "memory_change", &self.memory_change)
    }
}

impl LogEntry {
    /// The entry's kind: the loop's record, or [`EntryKind::Other`] for a kind this build does
    /// not know; `None` for an entry without one (a message typed by the user, an answer).
    pub fn kind(&self) -> Option<EntryKind> {
        self.records
            .kind
            .or_else(|| self.extra.contains_key("kind").then_some(EntryKind::Other))
    }

    /// Whether the entry holds a compaction record (readable or not).
    pub fn is_compaction(&self) -> bool {
        self.records.compaction.is_some()
            || self.extra.contains_key("compaction")
            || self.records.kind == Some(EntryKind::Compaction)
    }
}

/// Version 1 → 2: a `/compact` summary entry (kind `compact_boundary`) becomes a compaction
/// record whose window is the summary alone, so one record type says where windows start.
pub(crate) fn migrate_v1(e: &mut LogEntry) {
    if e.records.kind != Some(EntryKind::CompactBoundary) || e.records.compaction.is_some() {
        return;
    }
    let mut summary = LogEntry::new(e.id.clone(), LogRole::System, e.created_at.clone());
    summary.content = e.content.clone();
    summary.mode = e.mode;
    let record = CompactionRecord {
        version: COMPACTION_VERSION,
        strategies: vec!["compact".to_owned()],
        items: vec![WindowItem::Entry {
            entry: Box::new(summary),
        }],
        tokens_before: 0,
        tokens_after: 0,
        target: 0,
        dropped: Vec::new(),
        changed: Vec::new(),
    };
    e.records.kind = Some(EntryKind::Compaction);
    e.records.compaction = Some(Box::new(record));
    e.include_in_context = false;
    e.part_type = Some(CompactionRecord::PART_TYPE.to_owned());
}
