//! The error of a model call, and the output streamed before it.

use std::fmt;
use std::time::Duration;

use ba_protocol::{LlmError, LlmErrorKind, LogEntry, LogRole, Message};

/// A tool call whose input was still streaming when the answer failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The input JSON received so far, as sent (usually not valid JSON).
    pub partial_json: String,
}

/// What an answer had streamed before it failed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PartialOutput {
    /// The text received (all text blocks, joined by newlines).
    pub text: String,
    /// The message rebuilt from what was received, when the stream got that far: blocks that
    /// never stopped are kept, a tool input cut mid-JSON is repaired as far as it goes.
    pub message: Option<Message>,
    /// Tool calls whose input was cut, with the raw fragment received.
    pub cut_tool_calls: Vec<PartialToolCall>,
}

impl PartialOutput {
    /// True when nothing was received.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
            && self.cut_tool_calls.is_empty()
            && self.message.as_ref().is_none_or(|m| m.content.is_empty())
    }

    /// The partial output as one text for the log: the text, then one line per cut call.
    pub fn render(&self) -> String {
        let mut out = self.text.clone();
        for call in &self.cut_tool_calls {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!(
                "[tool call `{}` ({}) cut after input: {}]",
                call.name, call.id, call.partial_json
            ));
        }
        out
    }
}

/// The most characters of a partial output a log entry keeps.
pub const MAX_LOGGED_PARTIAL: usize = 64 * 1024;

/// `text` cut to its first and last parts when longer than `max` characters.
fn bounded(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text.chars().skip(total - max / 2).collect();
    format!(
        "{head}\n[… {} characters of the partial output left out …]\n{tail}",
        total - 2 * (max / 2)
    )
}

fn overflow_text(
    provider: &str,
    limit: Option<u64>,
    requested: Option<u64>,
    message: &str,
) -> String {
    let size = match (requested, limit) {
        (Some(r), Some(l)) => format!(" ({r} tokens for a window of {l})"),
        (None, Some(l)) => format!(" (a window of {l} tokens)"),
        (Some(r), None) => format!(" ({r} tokens)"),
        (None, None) => String::new(),
    };
    format!("the request did not fit the {provider} model's context window{size}: {message}")
}

/// Which timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// The whole request (or, when streaming, the wait for the response headers).
    Request,
    /// The gap between two pieces of a stream that carry progress (keep-alive pings do not).
    StreamIdle,
    /// The whole call, retries and reading included.
    Total,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Request => "request",
            Self::StreamIdle => "stream idle",
            Self::Total => "call",
        })
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A timeout fired.
    #[error("the {provider} {phase} timeout of {after:?} expired")]
    Timeout {
        /// Provider name.
        provider: String,
        /// Which timeout.
        phase: TimeoutPhase,
        /// Its length.
        after: Duration,
        /// What was streamed before it.
        partial: Option<Box<PartialOutput>>,
    },
    /// The connection failed or broke.
    #[error("the connection to {provider} failed: {message}")]
    Network {
        /// Provider name.
        provider: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The provider refused for rate limits (HTTP 429) and retries ran out.
    #[error(
        "{provider} rate-limited the request (HTTP 429) after {attempts} attempt(s): {message}"
    )]
    RateLimited {
        /// Provider name.
        provider: String,
        /// The provider's message.
        message: String,
        /// The wait the provider asked for, if it said.
        retry_after: Option<Duration>,
        /// Attempts made.
        attempts: u32,
    },
    /// The provider failed (HTTP 5xx, or an overload error in the stream).
    #[error(
        "{provider} answered with a server error (HTTP {status}) after {attempts} attempt(s): {message}"
    )]
    Server {
        /// Provider name.
        provider: String,
        /// HTTP status (529 for an overload reported inside a stream).
        status: u16,
        /// The provider's message.
        message: String,
        /// Attempts made.
        attempts: u32,
        /// What was streamed before it.
        partial: Option<Box<PartialOutput>>,
    },
    /// The provider rejected the request (HTTP 4xx other than 429): retrying will not help.
    #[error("{provider} rejected the request (HTTP {status}, {error_type}): {message}")]
    Rejected {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's error type (`invalid_request_error`, …), or `unknown`.
        error_type: String,
        /// The provider's message.
        message: String,
    },
    /// The request did not fit the model's context window: retrying it as it is will not
    /// help, a shorter one may.
    #[error("{}", overflow_text(provider, *limit, *requested, message))]
    ContextOverflow {
        /// Provider name.
        provider: String,
        /// The window, in the server's tokens, when the server named it.
        limit: Option<u64>,
        /// The tokens of the refused request, when the server named them.
        requested: Option<u64>,
        /// The provider's message.
        message: String,
    },
    /// The stream ended before the answer was complete.
    #[error("the {provider} stream was cut before the answer was complete: {message}")]
    StreamCut {
        /// Provider name.
        provider: String,
        /// What was missing or broken.
        message: String,
        /// What was streamed before the cut.
        partial: Box<PartialOutput>,
    },
    /// The provider's answer could not be read.
    #[error("the {provider} answer could not be read: {message}")]
    InvalidResponse {
        /// Provider name.
        provider: String,
        /// What was wrong.
        message: String,
        /// What was streamed before it.
        partial: Option<Box<PartialOutput>>,
    },
    /// The answer grew past the size the client accepts; it was read no further.
    #[error("the {provider} answer passed the limit of {limit} bytes and was read no further")]
    TooLarge {
        /// Provider name.
        provider: String,
        /// The limit, in bytes.
        limit: u64,
        /// What was received before the limit.
        partial: Box<PartialOutput>,
    },
    /// An embeddings endpoint answered with vectors that do not fit the request.
    #[error("the {provider} answer {problem}")]
    BadEmbeddings {
        /// Provider name.
        provider: String,
        /// What was wrong.
        problem: EmbeddingProblem,
    },
    /// No API key in the configuration or the environment.
    #[error("no API key for {provider}: set {var} or give one in the configuration")]
    MissingApiKey {
        /// Provider name.
        provider: String,
        /// The environment variable that was read.
        var: String,
    },
    /// The client could not be set up (bad base URL, TLS setup).
    #[error("the {provider} client could not be set up: {message}")]
    Config {
        /// Provider name.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// A replayed conversation left its recording.
    #[error(
        "the conversation diverged from the recording at turn {turn}: expected {expected}, found {found}"
    )]
    ReplayDiverged {
        /// 1-based turn of the recording.
        turn: usize,
        /// What the recording expected.
        expected: String,
        /// What the request had.
        found: String,
    },
    /// A replay was asked for more turns than recorded.
    #[error("the recording has only {turns} turn(s) and all were played")]
    ReplayExhausted {
        /// Turns in the recording.
        turns: usize,
    },
    /// A recording could not be read.
    #[error("the recording {path} could not be read: {message}")]
    ReplayFile {
        /// The file (or `<inline>`).
        path: String,
        /// What was wrong, with the JSON position.
        message: String,
    },
    /// A failure replayed from a recording, as it was logged.
    #[error("replayed failure at turn {turn}: {}", error.message)]
    Replayed {
        /// 1-based turn of the recording.
        turn: usize,
        /// The recorded failure.
        error: LlmError,
    },
}

impl ModelError {
    /// The log's name for this kind of failure.
    pub fn kind(&self) -> LlmErrorKind {
        match self {
            Self::Timeout { .. } => LlmErrorKind::Timeout,
            Self::Network { .. } => LlmErrorKind::Network,
            Self::RateLimited { .. } => LlmErrorKind::RateLimited,
            Self::Server { .. } => LlmErrorKind::Server,
            Self::StreamCut { .. } => LlmErrorKind::StreamCut,
            Self::ContextOverflow { .. } => LlmErrorKind::ContextOverflow,
            Self::InvalidResponse { .. } | Self::TooLarge { .. } | Self::BadEmbeddings { .. } => {
                LlmErrorKind::InvalidResponse
            }
            Self::Replayed { error, .. } => error.kind,
            Self::Rejected { .. }
            | Self::MissingApiKey { .. }
            | Self::Config { .. }
            | Self::ReplayDiverged { .. }
            | Self::ReplayExhausted { .. }
            | Self::ReplayFile { .. } => LlmErrorKind::Other,
        }
    }

    /// What was streamed before the failure, when anything was.
    pub fn partial_output(&self) -> Option<&PartialOutput> {
        match self {
            Self::Timeout { partial, .. }
            | Self::Server { partial, .. }
            | Self::InvalidResponse { partial, .. } => partial.as_deref(),
            Self::StreamCut { partial, .. } | Self::TooLarge { partial, .. } => Some(&**partial),
            _ => None,
        }
        .filter(|p| !p.is_empty())
    }

    /// The failure as the log records it on an assistant entry (`llm_error`). A partial output
    /// longer than [`MAX_LOGGED_PARTIAL`] characters keeps its head and tail, with a marker
    /// saying how much was left out: the log, and the request that resumes from it, stay
    /// bounded whatever a server sent.
    pub fn to_llm_error(&self) -> LlmError {
        if let Self::Replayed { error, .. } = self {
            return error.clone();
        }
        LlmError {
            kind: self.kind(),
            message: self.to_string(),
            partial_output: self
                .partial_output()
                .map(|p| bounded(p.render(), MAX_LOGGED_PARTIAL)),
        }
    }

    /// The failure as the assistant entry the orchestrator appends to the log: no content,
    /// the failure and its partial output in `llm_error`. The protocol conversions write the
    /// partial output, then the `LLM_ERROR` block, into the next request, so "continue" resumes.
    pub fn to_log_entry(&self, id: impl Into<String>, created_at: impl Into<String>) -> LogEntry {
        let mut entry = LogEntry::new(id, LogRole::Assistant, created_at);
        entry.llm_error = Some(self.to_llm_error());
        entry
    }

    /// Whether a later identical call may succeed (rate limits, server errors, timeouts,
    /// connection failures).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Timeout { .. }
                | Self::Network { .. }
                | Self::RateLimited { .. }
                | Self::Server { .. }
        )
    }

    /// Attaches what was streamed before the failure, for the variants that carry it.
    #[cfg(feature = "http")]
    pub(crate) fn with_partial(mut self, output: PartialOutput) -> Self {
        match &mut self {
            Self::Timeout { partial, .. }
            | Self::Server { partial, .. }
            | Self::InvalidResponse { partial, .. }
                if partial.is_none() =>
            {
                *partial = Some(Box::new(output));
            }
            Self::StreamCut { partial, .. } if partial.is_empty() => **partial = output,
            _ => {}
        }
        self
    }

    #[cfg(feature = "http")]
    pub(crate) fn set_attempts(&mut self, n: u32) {
        if let Self::RateLimited { attempts, .. } | Self::Server { attempts, .. } = self {
            *attempts = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_stream_keeps_partial_output_in_the_log_record() {
        let err = ModelError::StreamCut {
            provider: "anthropic".into(),
            message: "the stream ended without message_stop".into(),
            partial: Box::new(PartialOutput {
                text: "Let me check".into(),
                message: None,
                cut_tool_calls: vec![PartialToolCall {
                    id: "toolu_1".into(),
                    name: "get_weather".into(),
                    partial_json: "{\"loca".into(),
                }],
            }),
        };
        let logged = err.to_llm_error();
        assert_eq!(logged.kind, LlmErrorKind::StreamCut);
        let partial = logged.partial_output.clone().unwrap();
        assert!(partial.starts_with("Let me check\n"));
        assert!(partial.contains("get_weather"));
        assert!(partial.contains("{\"loca"));
        assert!(logged.render().starts_with("LLM_ERROR"));
    }

    #[test]
    fn kinds_map_onto_the_log_kinds() {
        let rate = ModelError::RateLimited {
            provider: "openai".into(),
            message: "slow down".into(),
            retry_after: None,
            attempts: 3,
        };
        assert_eq!(rate.kind(), LlmErrorKind::RateLimited);
        assert!(rate.is_transient());
        assert!(rate.to_string().contains("after 3 attempt(s)"));
        let rejected = ModelError::Rejected {
            provider: "anthropic".into(),
            status: 400,
            error_type: "invalid_request_error".into(),
            message: "bad".into(),
        };
        assert_eq!(rejected.kind(), LlmErrorKind::Other);
        assert!(!rejected.is_transient());
        assert!(rejected.partial_output().is_none());
        let overflow = ModelError::ContextOverflow {
            provider: "openai".into(),
            limit: Some(4096),
            requested: Some(10862),
            message: "request (10862 tokens) exceeds the available context size".into(),
        };
        assert_eq!(overflow.kind(), LlmErrorKind::ContextOverflow);
        assert!(!overflow.is_transient());
        assert!(
            overflow.to_string().contains(
                "did not fit the openai model's context window (10862 tokens for a window of 4096)"
            ),
            "{overflow}"
        );
    }
}

/// What was wrong with the vectors an embeddings endpoint sent back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmbeddingProblem {
    /// Not one vector per text sent.
    Count {
        /// Texts sent.
        expected: usize,
        /// Vectors received.
        found: usize,
    },
    /// A vector's `index` names no text sent, or a text already answered.
    Index {
        /// The index received.
        index: usize,
        /// Texts sent.
        texts: usize,
    },
    /// A vector's length differs from the first vector's.
    Dimension {
        /// The text's place in the request.
        index: usize,
        /// The first vector's length.
        expected: usize,
        /// This vector's length.
        found: usize,
    },
    /// A vector holds a number that is not finite as a 32-bit float (or no number at all).
    NonFinite {
        /// The text's place in the request.
        index: usize,
        /// The place of the number in the vector.
        position: usize,
    },
    /// A vector has no numbers.
    Empty {
        /// The text's place in the request.
        index: usize,
    },
}

impl fmt::Display for EmbeddingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count { expected, found } => {
                write!(f, "held {found} vector(s) for {expected} text(s)")
            }
            Self::Index { index, texts } => write!(
                f,
                "gave index {index}, which is outside the {texts} text(s) sent or repeats one"
            ),
            Self::Dimension {
                index,
                expected,
                found,
            } => write!(
                f,
                "gave text {index} a vector of {found} dimension(s) where the others have {expected}"
            ),
            Self::NonFinite { index, position } => write!(
                f,
                "gave text {index} a vector whose number at position {position} is not a finite 32-bit float"
            ),
            Self::Empty { index } => write!(f, "gave text {index} an empty vector"),
        }
    }
}
