//! The loop's own records in log entries' `extra` map: typed, written and read through the same
//! serde types. No provider conversion sends `extra`, so these never reach a model; the metrics
//! report, resume and `inspect` read them back.

use ba_model::Usage;
use ba_protocol::LogEntry;
use ba_protocol::structured::ApiResponse;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Keys of the `extra` map the loop writes.
pub mod keys {
    /// What a user or system entry is ([`super::EntryKind`]).
    pub const KIND: &str = "kind";
    /// Round number of an assistant entry.
    pub const ROUND: &str = "round";
    /// Token figures of the call ([`ba_model::Usage`]).
    pub const USAGE: &str = "usage";
    /// Provider and model that answered ([`super::ModelRecord`]).
    pub const MODEL: &str = "model";
    /// Why the model stopped.
    pub const STOP_REASON: &str = "stop_reason";
    /// Retries of the model call.
    pub const RETRIES: &str = "retries";
    /// What the context builder did for the call ([`super::ContextRecord`]).
    pub const CONTEXT: &str = "context";
    /// The processed final answer (P11).
    pub const API_RESPONSE: &str = "api_response";
    /// Problems of an answer the provider ended properly (a tool input cut at `max_tokens`).
    pub const PROBLEMS: &str = "problems";
    /// Warnings of the final answer's processing.
    pub const WARNINGS: &str = "warnings";
    /// On a tool entry: the skill an `activate_skill` call activated
    /// ([`super::SkillActivationRecord`]).
    pub const SKILL: &str = "skill";
    /// On a tool entry: where spilled data went.
    pub const DATA_REF: &str = "data_ref";
    /// On a tool entry: the tool's retries.
    pub const TOOL_RETRIES: &str = "retry_count";
    /// On a tool entry: the error kind of a failed call.
    pub const ERROR_KIND: &str = "error_kind";
    /// On the user entry a run appended: the caller's request id (a retried request finds
    /// its run by it, across restarts).
    pub const REQUEST_ID: &str = "request_id";
    /// On the user entry a run appended: the caller's id of the run (not `run_id`, the
    /// log's own field for a workflow run).
    pub const RUN_ID: &str = "caller_run_id";
}

/// What a user or system entry the loop wrote is, beyond a message typed by the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// The `continue` sent after a failure.
    Continue,
    /// The correction sent after an answer that was not the structured JSON.
    FormatError,
    /// The summary of a `/compact`; the context starts from the latest one.
    CompactBoundary,
    /// A compaction record of the context crate: later windows start from it.
    Compaction,
    /// A kind written by a later version.
    #[serde(other)]
    Other,
}

/// The skill an `activate_skill` call activated, on its tool entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// Who answered a model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRecord {
    /// The client's provider (`anthropic`, `openai`, `replay`).
    pub provider: String,
    /// The model as the provider named it; absent on a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What the context builder did for one model call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
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
    /// System and message tokens sent.
    pub used: usize,
    /// Strategies applied.
    pub strategies: Vec<String>,
    /// Entries left out of the window.
    pub dropped: usize,
    /// Skills whose instructions were put back into the system prompt.
    pub skills_reinjected: Vec<String>,
}

/// Writes `value` under `key`.
pub(crate) fn put<T: Serialize>(entry: &mut LogEntry, key: &str, value: &T) {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    entry.extra.insert(key.to_owned(), value);
}

/// Reads the record under `key`; `None` when it is absent or not of that type.
pub fn get<T: DeserializeOwned>(entry: &LogEntry, key: &str) -> Option<T> {
    entry.extra.get(key).and_then(|v| T::deserialize(v).ok())
}

/// The entry's kind, when the loop wrote one.
pub fn kind(entry: &LogEntry) -> Option<EntryKind> {
    entry
        .extra
        .contains_key(keys::KIND)
        .then(|| get(entry, keys::KIND).unwrap_or(EntryKind::Other))
}

/// The skill activation recorded on a tool entry.
pub fn skill(entry: &LogEntry) -> Option<SkillActivationRecord> {
    get(entry, keys::SKILL)
}

/// The token figures recorded on an assistant entry.
pub fn usage(entry: &LogEntry) -> Option<Usage> {
    get(entry, keys::USAGE)
}

/// The context figures recorded on an assistant entry.
pub fn context(entry: &LogEntry) -> Option<ContextRecord> {
    get(entry, keys::CONTEXT)
}

/// The processed final answer recorded on an assistant entry.
pub fn api_response(entry: &LogEntry) -> Option<ApiResponse> {
    get(entry, keys::API_RESPONSE)
}

/// The caller's request id and run id recorded on the user entry a run appended.
pub fn run_ids(entry: &LogEntry) -> Option<(String, Option<String>)> {
    let request: String = get(entry, keys::REQUEST_ID)?;
    Some((request, get(entry, keys::RUN_ID)))
}

/// A number recorded under `key` (round, retries), 0 when absent.
pub fn number(entry: &LogEntry, key: &str) -> u64 {
    get(entry, key).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::LogRole;

    #[test]
    fn records_read_back_through_their_types() {
        let mut e = LogEntry::new("t1", LogRole::Tool, "t");
        let skill = SkillActivationRecord {
            name: "sales-report".into(),
            activation_id: "act_1".into(),
            allowed_tools: Some(vec!["file_reader".into()]),
            model: None,
        };
        put(&mut e, keys::SKILL, &skill);
        put(&mut e, keys::KIND, &EntryKind::CompactBoundary);
        assert_eq!(self::skill(&e), Some(skill));
        assert_eq!(kind(&e), Some(EntryKind::CompactBoundary));
        // The JSON shape is the one older logs carry.
        assert_eq!(e.extra[keys::KIND], "compact_boundary");
        assert_eq!(e.extra[keys::SKILL]["allowed_tools"][0], "file_reader");
    }

    #[test]
    fn unknown_kinds_still_mark_the_entry() {
        let mut e = LogEntry::new("u1", LogRole::User, "t");
        assert_eq!(kind(&e), None);
        e.extra.insert(keys::KIND.into(), "a_later_kind".into());
        assert_eq!(kind(&e), Some(EntryKind::Other));
        e.extra.insert(keys::KIND.into(), 7.into());
        assert_eq!(kind(&e), Some(EntryKind::Other));
    }
}
