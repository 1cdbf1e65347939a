//! Conversation-level checks: the rules a single message cannot check on its own.

use std::collections::{HashMap, HashSet};

use crate::error::{ProtocolError, Result};
use crate::log::{LogEntry, LogRole};

/// The largest request body or log line read by default: 32 MiB, the Messages API's own limit.
pub const MAX_INPUT_BYTES: usize = 32 * 1024 * 1024;

/// Refuses `text` when it is over `limit` bytes.
pub fn check_size(context: &str, text: &str, limit: usize) -> Result<()> {
    if text.len() > limit {
        return Err(ProtocolError::TooLarge {
            context: context.to_owned(),
            size: text.len(),
            limit,
        });
    }
    Ok(())
}

/// A rule a conversation breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// There is no entry at all.
    Empty,
    /// Two entries share an id.
    DuplicateId {
        /// Index of the second entry.
        index: usize,
        /// The id.
        id: String,
    },
    /// A tool result answers no earlier tool call.
    OrphanResult {
        /// Index of the tool entry.
        index: usize,
        /// The id it answers.
        tool_call_id: String,
    },
    /// A tool call has no result before the next assistant or user turn (or the end).
    MissingResult {
        /// Index of the assistant entry.
        index: usize,
        /// The call id.
        tool_call_id: String,
    },
}

impl Problem {
    /// Whether the conversation cannot be sent as it is. A missing result is not fatal: the
    /// context builder repairs it with a synthetic "aborted" result.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Self::MissingResult { .. })
    }

    /// The problem as a [`ProtocolError`] naming where it is.
    pub fn to_error(&self) -> ProtocolError {
        match self {
            Self::Empty => ProtocolError::invalid("messages", "the conversation has no messages"),
            Self::DuplicateId { index, id } => ProtocolError::invalid(
                format!("log[{index}].id"),
                format!("id `{id}` is used twice"),
            ),
            Self::OrphanResult {
                index,
                tool_call_id,
            } => ProtocolError::invalid(
                format!("log[{index}].tool_call_id"),
                format!("tool result for `{tool_call_id}` answers no earlier tool call"),
            ),
            Self::MissingResult {
                index,
                tool_call_id,
            } => ProtocolError::invalid(
                format!("log[{index}].tool_calls"),
                format!("tool call `{tool_call_id}` has no result"),
            ),
        }
    }
}

/// Every rule `entries` breaks, in order.
pub fn check_log(entries: &[LogEntry]) -> Vec<Problem> {
    let mut problems = Vec::new();
    if entries.is_empty() {
        problems.push(Problem::Empty);
        return problems;
    }
    let mut ids = HashSet::with_capacity(entries.len());
    // Calls waiting for their result: id → index of the assistant entry.
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let close_open =
        |open: &mut HashMap<&str, usize>, problems: &mut Vec<Problem>| {
            let mut pending: Vec<(usize, String)> =
                open.drain().map(|(id, i)| (i, id.to_owned())).collect();
            pending.sort();
            problems.extend(pending.into_iter().map(|(index, tool_call_id)| {
                Problem::MissingResult {
                    index,
                    tool_call_id,
                }
            }));
        };
    for (index, e) in entries.iter().enumerate() {
        if !ids.insert(e.id.as_str()) {
            problems.push(Problem::DuplicateId {
                index,
                id: e.id.clone(),
            });
        }
        match e.role {
            LogRole::Assistant => {
                if e.merge_with_previous != Some(true) {
                    close_open(&mut open, &mut problems);
                }
                for call in e.calls() {
                    open.insert(call.id.as_str(), index);
                }
            }
            LogRole::Tool => {
                let id = e.tool_call_id.as_deref().unwrap_or("");
                if open.remove(id).is_some() {
                    answered.insert(id);
                } else {
                    problems.push(Problem::OrphanResult {
                        index,
                        tool_call_id: id.to_owned(),
                    });
                }
            }
            LogRole::User => {
                if e.merge_with_previous != Some(true) && e.include_in_context {
                    close_open(&mut open, &mut problems);
                }
            }
            LogRole::System | LogRole::Developer => {}
        }
    }
    close_open(&mut open, &mut problems);
    problems
}

/// Fails with the first fatal problem of `entries`.
pub fn validate_log(entries: &[LogEntry]) -> Result<()> {
    match check_log(entries).into_iter().find(Problem::is_fatal) {
        Some(problem) => Err(problem.to_error()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogToolCall;

    fn e(id: &str, role: LogRole) -> LogEntry {
        LogEntry::new(id, role, "t")
    }

    #[test]
    fn pairs_and_orphans() {
        let mut a = e("a", LogRole::Assistant);
        a.tool_calls = Some(vec![
            LogToolCall::new("c1", "t", &serde_json::json!({})),
            LogToolCall::new("c2", "t", &serde_json::json!({})),
        ]);
        let mut r1 = e("r1", LogRole::Tool);
        r1.tool_call_id = Some("c1".into());
        let mut orphan = e("r9", LogRole::Tool);
        orphan.tool_call_id = Some("c9".into());
        let log = vec![e("u", LogRole::User), a, r1, orphan, e("u2", LogRole::User)];
        let problems = check_log(&log);
        assert_eq!(
            problems,
            vec![
                Problem::OrphanResult {
                    index: 3,
                    tool_call_id: "c9".into()
                },
                Problem::MissingResult {
                    index: 1,
                    tool_call_id: "c2".into()
                },
            ]
        );
        assert_eq!(
            validate_log(&log).unwrap_err().to_string(),
            "log[3].tool_call_id: tool result for `c9` answers no earlier tool call"
        );
        assert_eq!(check_log(&[]), vec![Problem::Empty]);
    }
}
