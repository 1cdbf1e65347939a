//! The one error type of the API: an HTTP status, a short machine-readable code and a sentence,
//! always sent as JSON (`{"error": {"code", "message"}, …}`), whatever failed.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ba_agent::AgentError;
use ba_storage::StorageError;

use crate::wire::{ErrorBody, ErrorDetail};

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status}: {code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A short snake_case code (`not_found`, `busy`, `too_large`, …).
    pub code: &'static str,
    /// What went wrong, as a sentence.
    pub message: String,
    /// The run in flight, on a 409 `busy`.
    pub active_run_id: Option<String>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            active_run_id: None,
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409 with the run that holds the conversation.
    pub fn busy(conversation: &str, active_run_id: &str) -> Self {
        let mut e = Self::new(
            StatusCode::CONFLICT,
            "busy",
            format!("conversation {conversation} already has run {active_run_id} going"),
        );
        e.active_run_id = Some(active_run_id.to_owned());
        e
    }

    /// 500 (the message goes to the log as well).
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        tracing::error!("{message}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// An error for a status the router or a layer produced without a body we wrote.
    pub fn from_status(status: StatusCode) -> Self {
        let (code, message) = match status {
            StatusCode::NOT_FOUND => ("not_found", "no such route"),
            StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "method not allowed here"),
            StatusCode::PAYLOAD_TOO_LARGE => ("too_large", "the request body is over the limit"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => (
                "unsupported_media_type",
                "the body must be JSON (Content-Type: application/json)",
            ),
            StatusCode::UNAUTHORIZED => ("unauthorized", "a bearer token is required"),
            StatusCode::FORBIDDEN => ("forbidden", "refused"),
            s if s.is_server_error() => ("internal", "the server failed"),
            _ => ("bad_request", "the request could not be read"),
        };
        Self::new(status, code, message)
    }
}

/// Every code an error answer can carry. They are part of the API: the page says each in its
/// own language (its catalogues have an `error.<code>` sentence for every one), and scripts
/// match on them; a test finds each code the handlers use and fails when one is missing here.
pub const ERROR_CODES: &[&str] = &[
    "already_exists",
    "bad_request",
    "busy",
    "context",
    "forbidden",
    "has_forks",
    "internal",
    "invalid",
    "invalid_id",
    "invalid_json",
    "invalid_request",
    "io",
    "method_not_allowed",
    "no_directory",
    "no_echarts",
    "no_files",
    "no_memory",
    "no_schedules",
    "not_found",
    "not_waiting",
    "nothing_to_compact",
    "sequence_conflict",
    "shutting_down",
    "too_large",
    "unauthorized",
    "unknown_user",
    "unsupported_media_type",
];

/// The longest message an error answer carries, in characters: whatever a message quotes of
/// a request (a name, a header, a value a parser did not expect) is cut to fit.
const MAX_MESSAGE: usize = 1000;

/// At most `max` characters of `text`, for a message that quotes what a client sent: control
/// and format characters (but line breaks and tabs) each shown as `�`, and what is cut said
/// with its size.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut chars = text.chars();
    for c in chars.by_ref().take(max) {
        out.push(
            if ba_storage::is_hidden_char(c) && !matches!(c, '\n' | '\t') {
                '\u{FFFD}'
            } else {
                c
            },
        );
    }
    let rest = chars.as_str().len();
    if rest > 0 {
        out.push_str(&format!("… ({rest} more bytes)"));
    }
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: excerpt(&self.message, MAX_MESSAGE),
            },
            active_run_id: self.active_run_id,
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        match &e {
            StorageError::NotFound { .. } => Self::not_found(e.to_string()),
            StorageError::InvalidId { .. } | StorageError::Invalid { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "invalid", e.to_string())
            }
            StorageError::AlreadyExists { .. } => {
                Self::new(StatusCode::CONFLICT, "already_exists", e.to_string())
            }
            StorageError::SequenceConflict { .. } => {
                Self::new(StatusCode::CONFLICT, "sequence_conflict", e.to_string())
            }
            StorageError::HasForks { .. } => {
                Self::new(StatusCode::CONFLICT, "has_forks", e.to_string())
            }
            StorageError::NoFile { .. } | StorageError::NoSchedule { .. } => {
                Self::not_found(e.to_string())
            }
            StorageError::TooLarge { .. } => {
                Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.to_string())
            }
            // An I/O error names a path of the server's disk: it goes to the operator's log,
            // and the client learns only what failed.
            StorageError::Io { source, .. } => {
                tracing::warn!("storage: {e}");
                if source.kind() == std::io::ErrorKind::NotFound {
                    Self::not_found("no such file in the store")
                } else {
                    Self::internal("the store could not read or write a file")
                }
            }
            _ => Self::internal(e.to_string()),
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(e: AgentError) -> Self {
        match e {
            AgentError::Store(s) => s.into(),
            AgentError::Busy {
                ref conversation,
                ref holder,
            } => {
                let mut busy = Self::busy(
                    conversation,
                    holder.as_ref().map_or("", |h| h.run_id.as_str()),
                );
                busy.message = e.to_string();
                busy.active_run_id = holder.as_ref().map(|h| h.run_id.clone());
                busy
            }
            AgentError::Context(c) => {
                Self::new(StatusCode::UNPROCESSABLE_ENTITY, "context", c.to_string())
            }
            AgentError::NothingToCompact { .. } => {
                Self::new(StatusCode::CONFLICT, "nothing_to_compact", e.to_string())
            }
            other => Self::internal(other.to_string()),
        }
    }
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The string literals of `source` that follow `before` (and then `after_ws`, once blanks
    /// are skipped): `StatusCode::X, "code"` in a handler, `("code", "…")` in `from_status`.
    fn literals_after(source: &str, before: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (at, _) in source.match_indices(before) {
            let rest = &source[at + before.len()..];
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_uppercase() || c == '_');
            let Some(rest) = rest.strip_prefix(',') else {
                continue;
            };
            let Some(rest) = rest.trim_start().strip_prefix('"') else {
                continue;
            };
            if let Some((code, _)) = rest.split_once('"') {
                out.push(code.to_owned());
            }
        }
        out
    }

    #[test]
    fn every_code_the_handlers_use_is_listed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = std::collections::BTreeSet::new();
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                // The code, not its tests (this one quotes the shape it looks for).
                let code = source.split("#[cfg(test)]\nmod tests").next().unwrap();
                found.extend(literals_after(code, "StatusCode::"));
            }
        }
        let own = include_str!("error.rs");
        let statuses = own
            .split("fn from_status")
            .nth(1)
            .unwrap()
            .split("\n}")
            .next()
            .unwrap();
        for (at, _) in statuses.match_indices('(') {
            let rest = statuses[at + 1..].trim_start();
            if let Some((code, _)) = rest.strip_prefix('"').and_then(|r| r.split_once('"')) {
                found.insert(code.to_owned());
            }
        }
        assert!(found.len() >= 20, "codes found: {found:?}");
        for code in &found {
            assert!(
                ERROR_CODES.contains(&code.as_str()),
                "the API answers with code `{code}`, which ERROR_CODES does not list"
            );
        }
        for code in ERROR_CODES {
            assert!(
                found.contains(*code),
                "ERROR_CODES lists `{code}`, which no handler uses"
            );
            assert!(
                code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "`{code}` is not snake_case"
            );
        }
    }
}
