//! # ba-builtins
//!
//! The business-analysis tools and the demo data they run on. Each tool is a
//! [`ba_tools::Tool`]: it names itself, publishes the JSON Schema of its typed argument struct
//! (the field names and defaults the tools are specified with), declares its own capabilities
//! (idempotent, the permission level it needs) and returns its raw data as JSON. Formatting by
//! output level, timeouts, retries and permission checks belong to the tool runtime
//! (`ba-tools`); these types only do the work and say precisely why they refused it.
//!
//! - [`file_reader::FileReader`] — CSV (streamed, delimiter sniffed), workbooks (feature
//!   `excel`: xlsx, xlsm, xls, ods), JSON, text, markdown, python and sql files in any encoding
//!   ([`encoding`]), tables with a column profile. It reads the files of the call's own
//!   conversation ([`ba_tools::CallContext::files`]) by id (`upload_001`) or original name,
//!   by their real type, and otherwise files confined to the configured data folders.
//! - [`query_database::QueryDatabase`] (features `sqlite`, `postgres`) — one query on a SQLite
//!   file or a PostgreSQL server, writes refused by the database; `schema: true` describes it.
//! - [`run_python::RunPython`] (feature `python`) — a `python3` subprocess in a scratch
//!   directory, confined on Linux by Landlock, seccomp and rlimits ([`run_python::sandbox`];
//!   refused where no sandbox can be set up unless it is turned off), imports limited to an
//!   allow-list, killed with its whole process group at the timeout. The conversation's uploads
//!   are copied into its working folder; what it writes to `outputs/` becomes outputs of the
//!   conversation (`output_001`).
//! - [`web_reader::WebReader`] (feature `web`) — HTTP GET and the main content as Markdown
//!   ([`html`]), private addresses refused.
//! - [`web_search::WebSearch`] (feature `web`) — a [`web_search::SearchBackend`] chosen by the
//!   caller: [`web_search::SearxngBackend`] or [`web_search::BraveBackend`].
//! - [`demo_data::generate`] (feature `sqlite`) — the deterministic sales database, targets file,
//!   GBK targets and workbook of the demo; [`demo_tools`] — the demo's set of tools over them.
//!
//! Every failure is a [`BuiltinError`], whose [`BuiltinError::kind`] is the
//! [`ToolErrorKind`] the runtime reports and retries on; it converts into a
//! [`ba_tools::ToolError`]. No observation or error holds a local path of a conversation's
//! file or of the working folder: they name what the model named.
//!
//! ```
//! # #[cfg(all(feature = "sqlite", feature = "python"))]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ba_builtins::{demo_data, query_database::QueryDatabase};
//! use ba_builtins::query_database::QueryDatabaseConfig;
//! use ba_tools::{CallContext, Tool};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir()?;
//! demo_data::generate(dir.path())?;
//! let tool = QueryDatabase::new(QueryDatabaseConfig::new(dir.path().join(demo_data::DB_FILE)));
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let args = json!({"query": "SELECT COUNT(*) FROM regions"});
//! let out = rt.block_on(tool.call(args, &CallContext::detached("call_1")))?;
//! assert_eq!(out["rows"][0][0], 5);
//! let write = json!({"query": "DELETE FROM regions"});
//! assert!(rt.block_on(tool.call(write, &CallContext::detached("call_2"))).is_err());
//! # Ok(())
//! # }
//! # #[cfg(not(all(feature = "sqlite", feature = "python")))]
//! # fn main() {}
//! ```
#![deny(missing_docs)]

mod csv_file;
#[cfg(feature = "sqlite")]
pub mod demo_data;
pub mod encoding;
pub mod file_reader;
#[cfg(feature = "web")]
pub mod html;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod query_database;
#[cfg(feature = "python")]
pub mod run_python;
mod table;
#[cfg(feature = "web")]
pub mod web_reader;
#[cfg(feature = "web")]
pub mod web_search;
#[cfg(feature = "excel")]
mod workbook;

use std::path::PathBuf;

use ba_protocol::ToolErrorKind;
use ba_tools::{ToolError, ToolsError};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a built-in tool refused or failed a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuiltinError {
    /// The arguments did not match the tool's parameters.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments {
        /// The tool name.
        tool: &'static str,
        /// What was wrong, naming the field.
        message: String,
    },
    /// A path points outside the roots the tool may read.
    #[error("path `{path}` is outside the allowed directories ({reason})")]
    PathOutsideRoots {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: String,
    },
    /// A file is neither one of the conversation's nor in a data folder.
    #[error("file `{path}` was not found among the conversation's files or in the data folders")]
    NotFound {
        /// The path or name as given.
        path: String,
    },
    /// Reading a file failed.
    #[error("could not read `{path}`: {source}")]
    Io {
        /// The file as the model named it (never the local path of a conversation's file).
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The conversation has no file of that id or name.
    #[error("no file `{reference}` in this conversation")]
    NoSuchFile {
        /// The id or name as given.
        reference: String,
    },
    /// The conversation's files could not be read or written.
    #[error("the conversation's file `{reference}` could not be used: {message}")]
    Files {
        /// The file's id or name.
        reference: String,
        /// What failed (never a local path).
        message: String,
    },
    /// A file is larger than the configured limit.
    #[error("`{path}` is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The file or URL.
        path: String,
        /// Its size (or the bytes read before stopping).
        size: u64,
        /// The configured limit.
        limit: u64,
    },
    /// The text encoding is unknown or the bytes are not valid in it.
    #[error("cannot decode `{path}`: {message}")]
    Encoding {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The file content does not parse in the requested format.
    #[error("could not parse `{path}` as {format}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The format tried.
        format: &'static str,
        /// Where and why parsing stopped.
        message: String,
    },
    /// The SQL is not a single read-only query.
    #[error("query refused: {reason}")]
    QueryRefused {
        /// Why.
        reason: String,
    },
    /// SQLite reported an error.
    #[error("database error on `{}`: {message}", path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// SQLite's message.
        message: String,
    },
    /// The Python code imports a module outside the allow-list.
    #[error("import of module `{module}` is not allowed (line {line}); allowed modules: {allowed}")]
    ImportRefused {
        /// The module imported.
        module: String,
        /// The 1-based line of the import.
        line: usize,
        /// The allow-list, comma separated.
        allowed: String,
    },
    /// The Python interpreter is not installed.
    #[error("the Python interpreter `{program}` was not found; install python3 to use run_python")]
    PythonMissing {
        /// The program looked for.
        program: String,
    },
    /// The Python code exited with an error.
    #[error("the Python code failed with exit status {status}: {stderr}")]
    ScriptFailed {
        /// Exit code, or a description of the signal.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The work ran past its time limit and was stopped.
    #[error("`{tool}` ran past its timeout of {seconds} s and was stopped")]
    Timeout {
        /// The tool name.
        tool: &'static str,
        /// The limit.
        seconds: u64,
    },
    /// A URL was refused before any request was sent.
    #[error("URL `{url}` refused: {reason}")]
    UrlRefused {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The HTTP request failed (connection, DNS, TLS) or returned an error status.
    #[error("fetching `{url}` failed: {message}")]
    Http {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
        /// Whether a retry may succeed (connection errors, 429 and 5xx).
        retryable: bool,
    },
    /// The search backend failed.
    #[error("search backend `{backend}` failed: {message}")]
    Search {
        /// The backend name.
        backend: String,
        /// What happened.
        message: String,
        /// Whether a retry may succeed.
        retryable: bool,
    },
    /// The code must run in a sandbox and none can be set up here (no Landlock, no helper, or
    /// a readable folder that would expose the home or the conversation store); nothing ran.
    #[error(
        "run_python refused: the sandbox is unavailable ({reason}); set `run_python: {{sandbox: \
         off}}` in the configuration to run code without one"
    )]
    SandboxUnavailable {
        /// Why.
        reason: String,
    },
    /// The sandbox helper could not confine itself; nothing ran.
    #[error("run_python refused: the sandbox could not be set up: {message}")]
    SandboxFailed {
        /// The helper's account.
        message: String,
    },
    /// The code was stopped by one of its resource limits.
    #[error("`{tool}` was stopped: it exceeded its {limit}")]
    LimitExceeded {
        /// The tool name.
        tool: &'static str,
        /// The limit, with its value.
        limit: String,
    },
    /// Setting up the run (scratch directory, process spawn, worker thread) failed.
    #[error("`{tool}` could not run: {message}")]
    Environment {
        /// The tool name.
        tool: &'static str,
        /// What failed.
        message: String,
    },
}

impl BuiltinError {
    /// The runtime's error kind, which decides retries and how the model is told.
    pub fn kind(&self) -> ToolErrorKind {
        match self {
            Self::InvalidArguments { .. }
            | Self::NotFound { .. }
            | Self::NoSuchFile { .. }
            | Self::Encoding { .. }
            | Self::Parse { .. }
            | Self::ImportRefused { .. } => ToolErrorKind::InvalidParameters,
            Self::PathOutsideRoots { .. }
            | Self::QueryRefused { .. }
            | Self::UrlRefused { .. }
            | Self::SandboxUnavailable { .. }
            | Self::SandboxFailed { .. } => ToolErrorKind::PermissionDenied,
            Self::Timeout { .. } => ToolErrorKind::Timeout,
            Self::TooLarge { .. }
            | Self::PythonMissing { .. }
            | Self::Environment { .. }
            | Self::Files { .. } => ToolErrorKind::ResourceError,
            Self::Http { retryable, .. } | Self::Search { retryable, .. } => {
                if *retryable {
                    ToolErrorKind::ResourceError
                } else {
                    ToolErrorKind::ExecutionError
                }
            }
            Self::Io { .. }
            | Self::Database { .. }
            | Self::ScriptFailed { .. }
            | Self::LimitExceeded { .. } => ToolErrorKind::ExecutionError,
        }
    }
}

/// Parses a JSON argument object into a tool's argument struct, naming the tool and the field
/// in the error.
pub fn parse_args<T: DeserializeOwned>(tool: &'static str, args: Value) -> Result<T, BuiltinError> {
    serde_json::from_value(args).map_err(|err| BuiltinError::InvalidArguments {
        tool,
        message: err.to_string(),
    })
}

/// The JSON Schema of a tool's argument struct, as the runtime advertises it to the model.
pub fn args_schema<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

impl BuiltinError {
    /// The error of the conversation's files about `reference`.
    pub fn from_files(reference: &str, err: ToolsError) -> Self {
        match err {
            ToolsError::NoSuchFile { reference } => Self::NoSuchFile { reference },
            ToolsError::FileTooLarge { name, size, limit } => Self::TooLarge {
                path: name,
                size,
                limit,
            },
            other => Self::Files {
                reference: reference.to_owned(),
                message: other.to_string(),
            },
        }
    }
}

impl From<BuiltinError> for ToolError {
    fn from(err: BuiltinError) -> Self {
        ToolError::new(err.kind(), err.to_string())
    }
}

/// The offline demo's tools: `file_reader` over the call's conversation files and `data`,
/// `query_database` on `data/sales.db` (see [`demo_data`]) and `run_python` with the default
/// allow-list, sandboxed, reading `data` (and the conversation's uploads, copied into its
/// working folder); no network tools.
#[cfg(all(feature = "sqlite", feature = "python"))]
pub fn demo_tools(data: &std::path::Path) -> Vec<std::sync::Arc<dyn ba_tools::Tool>> {
    use std::sync::Arc;
    let reader_config = file_reader::FileReaderConfig::new(vec![data.to_owned()]);
    vec![
        Arc::new(file_reader::FileReader::new(reader_config)),
        Arc::new(query_database::QueryDatabase::new(
            query_database::QueryDatabaseConfig::new(data.join(demo_data::DB_FILE)),
        )),
        Arc::new(run_python::RunPython::new(run_python::RunPythonConfig {
            sandbox: run_python::sandbox::SandboxConfig::default()
                .with_read_roots(vec![data.to_owned()]),
            ..run_python::RunPythonConfig::default()
        })),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_retry_rules() {
        let timeout = BuiltinError::Timeout {
            tool: "run_python",
            seconds: 1,
        };
        assert!(timeout.kind().is_retryable());
        let refused = BuiltinError::QueryRefused {
            reason: "INSERT".into(),
        };
        assert_eq!(refused.kind(), ToolErrorKind::PermissionDenied);
        let http = BuiltinError::Http {
            url: "https://x".into(),
            message: "503".into(),
            retryable: true,
        };
        assert_eq!(http.kind(), ToolErrorKind::ResourceError);
    }

    #[test]
    fn parse_args_names_the_tool_and_field() {
        let err = parse_args::<file_reader::FileReaderArgs>("file_reader", serde_json::json!({}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("file_reader") && err.contains("`file`"),
            "{err}"
        );
    }
}
