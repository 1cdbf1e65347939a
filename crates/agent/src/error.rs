//! What went wrong: [`AgentError`], the crate's error, and [`ErrorKind`], the short kind an
//! [`crate::AgentEvent::Error`] names (its wire string is part of the events' contract, read by
//! the page and the front ends).

use ba_context::ContextError;
use ba_protocol::LlmErrorKind;
use ba_storage::{RunHolder, StorageError};
use ba_tools::ToolsError;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why an agent could not be built or a conversation could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A setting or a file of the configuration is wrong.
    #[error("configuration: {message}")]
    Config {
        /// What is wrong, naming the setting.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StorageError),
    /// The context could not be built.
    #[error(transparent)]
    Context(#[from] ContextError),
    /// A tool could not be registered.
    #[error(transparent)]
    Tools(#[from] ToolsError),
    /// Another run holds the conversation (in this process or another one sharing the store).
    #[error("conversation {conversation} already has a run going: {}", match holder {
        Some(h) => h.to_string(),
        None => "a run of another process".to_owned(),
    })]
    Busy {
        /// The conversation.
        conversation: String,
        /// Who runs it, when the store could say.
        holder: Option<RunHolder>,
    },
    /// `/compact` found nothing to summarise: the conversation is empty, or holds only the
    /// turn in progress (which a compaction keeps whole).
    #[error("conversation {conversation} has nothing to compact{}", if *in_progress {
        " before the turn in progress, which stays whole"
    } else {
        ""
    })]
    NothingToCompact {
        /// The conversation.
        conversation: String,
        /// Whether a turn in progress is all there is.
        in_progress: bool,
    },
}

impl AgentError {
    /// The kind an error event names for this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Store(_) => ErrorKind::Store,
            Self::Context(_) | Self::NothingToCompact { .. } => ErrorKind::Context,
            Self::Config { .. } | Self::Tools(_) => ErrorKind::Config,
            Self::Busy { .. } => ErrorKind::Busy,
        }
    }
}

/// The kind of a failure an error event reports: the run's own, or the kind of a model call's
/// failure (as its `llm_error` records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Another run holds the conversation.
    Busy,
    /// The store failed.
    Store,
    /// The run's lease was lost (its database session was cut) and it stopped writing.
    LeaseLost,
    /// The context could not be built, or there was nothing to compact.
    Context,
    /// A setting, a tool's registration or a tool's schema is wrong.
    Config,
    /// The input cannot start a run (an empty message, nothing to resume, an unknown
    /// workflow, a decision about no waiting call).
    Input,
    /// The model's answer could not be read into log entries.
    Model,
    /// A hook stopped the run.
    Hook,
    /// The run made its last round before a final answer.
    RoundLimit,
    /// A spending cap (the conversation's or its owner's month) was reached.
    BudgetReached,
    /// A structured answer was not the JSON format; the model is asked again.
    Format,
    /// The run or the model call was cancelled.
    Cancelled,
    /// The model call timed out.
    Timeout,
    /// The connection to the provider failed.
    Network,
    /// The provider refused for rate limits.
    RateLimited,
    /// The provider answered with a server error.
    Server,
    /// The stream ended before the message was complete.
    StreamCut,
    /// The provider's answer could not be read.
    InvalidResponse,
    /// The request did not fit the model's context window.
    ContextOverflow,
    /// Any other failure of a model call.
    Other,
}

impl ErrorKind {
    /// Every kind, in the order declared.
    pub const ALL: [Self; 20] = [
        Self::Busy,
        Self::Store,
        Self::LeaseLost,
        Self::Context,
        Self::Config,
        Self::Input,
        Self::Model,
        Self::Hook,
        Self::RoundLimit,
        Self::BudgetReached,
        Self::Format,
        Self::Cancelled,
        Self::Timeout,
        Self::Network,
        Self::RateLimited,
        Self::Server,
        Self::StreamCut,
        Self::InvalidResponse,
        Self::ContextOverflow,
        Self::Other,
    ];

    /// The kind as the events' JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Store => "store",
            Self::LeaseLost => "lease_lost",
            Self::Context => "context",
            Self::Config => "config",
            Self::Input => "input",
            Self::Model => "model",
            Self::Hook => "hook",
            Self::RoundLimit => "round_limit",
            Self::BudgetReached => "budget_reached",
            Self::Format => "format",
            Self::Cancelled => "cancelled",
            Self::Timeout => "timeout",
            Self::Network => "network",
            Self::RateLimited => "rate_limited",
            Self::Server => "server",
            Self::StreamCut => "stream_cut",
            Self::InvalidResponse => "invalid_response",
            Self::ContextOverflow => "context_overflow",
            Self::Other => "other",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<LlmErrorKind> for ErrorKind {
    fn from(kind: LlmErrorKind) -> Self {
        match kind {
            LlmErrorKind::Timeout => Self::Timeout,
            LlmErrorKind::Network => Self::Network,
            LlmErrorKind::RateLimited => Self::RateLimited,
            LlmErrorKind::Server => Self::Server,
            LlmErrorKind::StreamCut => Self::StreamCut,
            LlmErrorKind::InvalidResponse => Self::InvalidResponse,
            LlmErrorKind::Cancelled => Self::Cancelled,
            LlmErrorKind::ContextOverflow => Self::ContextOverflow,
            _ => Self::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    #[test]
    fn every_kind_keeps_its_wire_name_both_ways() {
        let mut seen = std::collections::HashSet::new();
        for kind in ErrorKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, serde_json::json!(kind.as_str()), "{kind:?}");
            assert_eq!(kind.to_string(), kind.as_str());
            let back: ErrorKind = serde_json::from_value(json).unwrap();
            assert_eq!(back, kind);
            assert!(seen.insert(kind.as_str()), "{kind:?} repeats a name");
        }
        // The schema lists every variant: `ALL` misses none.
        let schema = serde_json::to_string(&schemars::schema_for!(ErrorKind)).unwrap();
        let named = schema.matches("\"const\"").count() + schema.matches("\"enum\"").count();
        assert_eq!(named, ErrorKind::ALL.len(), "{schema}");
        let listed: std::collections::HashSet<&str> = ErrorKind::ALL
            .iter()
            .map(|k| k.as_str())
            .filter(|name| schema.contains(&format!("\"{name}\"")))
            .collect();
        assert_eq!(listed.len(), ErrorKind::ALL.len(), "{schema}");
    }

    #[test]
    fn a_model_failure_keeps_the_kind_its_log_entry_records() {
        use ba_protocol::LlmErrorKind;
        for llm in [
            LlmErrorKind::Timeout,
            LlmErrorKind::Network,
            LlmErrorKind::RateLimited,
            LlmErrorKind::Server,
            LlmErrorKind::StreamCut,
            LlmErrorKind::InvalidResponse,
            LlmErrorKind::Cancelled,
            LlmErrorKind::ContextOverflow,
            LlmErrorKind::Other,
        ] {
            assert_eq!(
                serde_json::to_value(ErrorKind::from(llm)).unwrap(),
                serde_json::to_value(llm).unwrap()
            );
        }
    }
}
