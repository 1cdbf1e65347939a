//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A conversation id or a file name that could escape its folder or is not allowed.
    #[error("invalid {what} `{value}`: {reason}")]
    InvalidId {
        /// What the value names (`conversation id`, `file name`, …).
        what: &'static str,
        /// The value as given.
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The conversation does not exist.
    #[error("conversation `{id}` does not exist")]
    NotFound {
        /// The conversation id.
        id: String,
    },
    /// The conversation already exists.
    #[error("conversation `{id}` already exists")]
    AlreadyExists {
        /// The conversation id.
        id: String,
    },
    /// An append expected another last sequence number (optimistic concurrency).
    #[error(
        "conversation `{id}`: append expected the last sequence number to be {expected}, but it is {actual}"
    )]
    SequenceConflict {
        /// The conversation id.
        id: String,
        /// What the caller expected.
        expected: u64,
        /// What the store holds.
        actual: u64,
    },
    /// A folder holds no conversation store (a command that only reads creates none).
    #[error("no conversation store at {}", path.display())]
    NoStore {
        /// The folder.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What the store was doing (`appending to`, `reading`, …).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored record could not be read or written as JSON.
    #[error("{what}: {message}")]
    Format {
        /// Where (`conversation x line 4`, `index`, …).
        what: String,
        /// What was wrong.
        message: String,
    },
    /// Bad input given to an import or a store method.
    #[error("{what}: {message}")]
    Invalid {
        /// What was wrong (`line 3`, `field language`, …).
        what: String,
        /// Why.
        message: String,
    },
    /// A file, or the files of a conversation, would be over a size limit. Nothing was kept.
    #[error("{what} is over the limit of {}", human_size(*limit))]
    TooLarge {
        /// What is too large, as the subject of a sentence (`` `big.csv` ``,
        /// `` conversation `c1` with `big.csv` ``).
        what: String,
        /// The size seen, in bytes (reading stops at the first byte past the limit).
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A conversation has no file of this id.
    #[error("conversation `{conversation}` has no file `{id}`")]
    NoFile {
        /// The conversation id.
        conversation: String,
        /// The file id asked for.
        id: String,
    },
    /// A conversation with forks cannot be deleted: they read their history from it.
    #[error("conversation `{id}` has forks ({}); delete them first", forks.join(", "))]
    HasForks {
        /// The conversation.
        id: String,
        /// Its forks.
        forks: Vec<String>,
    },
    /// A user of this name already exists.
    #[error("user `{name}` already exists")]
    UserExists {
        /// The name.
        name: String,
    },
    /// No user has this name.
    #[error("user `{name}` does not exist")]
    NoUser {
        /// The name.
        name: String,
    },
    /// No schedule has this id.
    #[error("schedule `{id}` does not exist")]
    NoSchedule {
        /// The id.
        id: String,
    },
    /// A database operation failed.
    #[error("database: {0}")]
    Database(String),
    /// A blocking task could not finish (the runtime shut down).
    #[error("background task failed: {0}")]
    Task(String),
}

impl StorageError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// A copy of this error for each of several callers that one failure ends (the appends
    /// of one group commit). An I/O cause keeps its OS error code or kind and its message.
    pub(crate) fn copy_for_another(&self) -> Self {
        match self {
            Self::InvalidId {
                what,
                value,
                reason,
            } => Self::InvalidId {
                what,
                value: value.clone(),
                reason,
            },
            Self::NotFound { id } => Self::NotFound { id: id.clone() },
            Self::AlreadyExists { id } => Self::AlreadyExists { id: id.clone() },
            Self::SequenceConflict {
                id,
                expected,
                actual,
            } => Self::SequenceConflict {
                id: id.clone(),
                expected: *expected,
                actual: *actual,
            },
            Self::NoStore { path } => Self::NoStore { path: path.clone() },
            Self::Io {
                action,
                path,
                source,
            } => Self::Io {
                action,
                path: path.clone(),
                source: source.raw_os_error().map_or_else(
                    || std::io::Error::new(source.kind(), source.to_string()),
                    std::io::Error::from_raw_os_error,
                ),
            },
            Self::Format { what, message } => Self::Format {
                what: what.clone(),
                message: message.clone(),
            },
            Self::Invalid { what, message } => Self::Invalid {
                what: what.clone(),
                message: message.clone(),
            },
            Self::TooLarge { what, size, limit } => Self::TooLarge {
                what: what.clone(),
                size: *size,
                limit: *limit,
            },
            Self::HasForks { id, forks } => Self::HasForks {
                id: id.clone(),
                forks: forks.clone(),
            },
            Self::NoFile { conversation, id } => Self::NoFile {
                conversation: conversation.clone(),
                id: id.clone(),
            },
            Self::UserExists { name } => Self::UserExists { name: name.clone() },
            Self::NoUser { name } => Self::NoUser { name: name.clone() },
            Self::NoSchedule { id } => Self::NoSchedule { id: id.clone() },
            Self::Database(message) => Self::Database(message.clone()),
            Self::Task(message) => Self::Task(message.clone()),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }
}

/// A size as people write it: `200 MiB`, `2 GiB`, `1.5 KiB`, `100 bytes`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{} {name}", bytes / unit)
            } else {
                let value = bytes as f64 / unit as f64;
                format!("{value:.1} {name}")
            };
        }
    }
    format!("{bytes} bytes")
}

/// Result with [`StorageError`].
pub type Result<T> = std::result::Result<T, StorageError>;
