//! # ba-storage
//!
//! Durable storage of the BA-Agent pipeline.
//!
//! - [`ConversationStore`]: the conversation log as an async trait, with gap-free
//!   per-conversation sequence numbers, optimistic concurrency, paging, metadata, retention.
//!   [`FileStore`] is the embedded backend (one append-only JSONL file per conversation,
//!   `fsync` per append or group commit, torn-tail detection, inter-process file locks, an
//!   index rebuilt from the files); `PostgresStore` (feature `postgres`) serves shared
//!   deployments. [`conformance`] is the one test suite every backend passes.
//! - Import ([`read_claude_code`], [`read_codex`], [`store_imported`]): Claude Code sessions
//!   (with their subagent files) and Codex rollouts into conversations, listing what the log
//!   cannot express; [`broken_pairs`] and [`duplicate_ids`] find broken tool pairs and repeated
//!   entry ids; [`after_rewinds`] (and [`Loaded::after_rewinds`]) reads a log as its history
//!   stands once the entries a rewind took back are left out.
//! - [`DataFileStore`]: tool data files with hashed names, atomic writes,
//!   metadata, cleanup by age and LRU size cap (in the background or on demand).
//! - The files of each conversation — uploads, code blocks ([`save_code`], [`get_code`]),
//!   spilled tool data, outputs — behind one [`Workspace`] trait with a backend in each store
//!   ([`FileWorkspace`] in `<root>/conversations/<id>/files/`, chunks in PostgreSQL), reached
//!   through [`ConversationStore::workspace`]; size limits, streaming in and out.
//!   Code blocks and uploads are files of the workspace, with ids that are [`FileId`]s and
//!   kinds that are [`FileKind`]s; [`EventLog`] keeps a conversation's events.
//! - People behind one [`Directory`] trait, reached through [`ConversationStore::directory`]:
//!   users with a [`Role`] and their own [`UserBudget`], API tokens kept as SHA-256 hashes
//!   only, conversations shared with a user ([`Share`]), and each user's [`Spend`] a month.
//!   Every conversation has an owner ([`ConversationMeta::owner`], [`DEFAULT_OWNER`] for
//!   conversations stored before owners were kept); [`ConversationStore::list_owned`] and
//!   [`ConversationStore::search_owned`] show one owner's.
//! - Memory across conversations behind one [`MemoryStore`] trait, reached through
//!   [`ConversationStore::memory`]: small text files in a user's [`MemoryScope`] or the team's,
//!   every change a [`MemoryVersion`] naming its [`MemoryAuthor`], bounded by [`MemoryLimits`],
//!   paths checked by [`MemoryPath::parse`].
//! - Schedules behind one [`Schedules`] trait, reached through
//!   [`ConversationStore::schedules`]: a workflow on a cron expression in a time zone, for an
//!   owner, within a budget; each occurrence claimed once ([`Claim`]) across every process
//!   sharing the store.
//!
//! The crate depends on `ba-protocol` only: entries are [`ba_protocol::LogEntry`]. The agent
//! crate plugs these stores into the tool runtime and the orchestrator.
//!
//! ```
//! use ba_protocol::{LogEntry, LogRole};
//! use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation};
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let dir = std::env::temp_dir().join(format!("ba-storage-doc-{}", std::process::id()));
//! let store = FileStore::open(&dir)?;
//! let id = ConversationId::new("demo")?;
//! store.create(&id, NewConversation::default()).await?;
//! let entry = LogEntry::new("m1", LogRole::User, "2026-01-01T00:00:00Z").with_text("Hello");
//! assert_eq!(store.append(&id, &entry, Some(0)).await?, 1);
//! // A writer that did not see entry 1 is refused instead of silently interleaving.
//! assert!(store.append(&id, &entry, Some(0)).await.is_err());
//! let loaded = store.load(&id).await?;
//! assert_eq!(loaded.entries[0].entry, entry);
//! assert!(loaded.diagnostics.is_empty());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod atomic;
pub mod conformance;
mod datafile;
mod error;
mod events;
mod file;
mod id;
mod import;
mod memory;
mod people;
#[cfg(feature = "postgres")]
mod postgres;
mod rewind;
mod schedule;
mod store;
mod text;
mod verify;
mod workspace;

pub use datafile::{CleanupPolicy, CleanupReport, DataFileMeta, DataFileStore, DataOwner};
pub use error::{Result, StorageError};
pub use events::{Event, EventLog, ReadEvents};
#[cfg(feature = "test-util")]
pub use file::WriteFault;
pub use file::{Durability, FileStore, FileStoreOptions, FileWorkspace};
pub use id::ConversationId;
pub use id::MAX_ID_LEN;
pub use import::{
    Imported, ImportedConversation, MAX_LINE_BYTES, read_claude_code, read_codex, read_lines,
    read_utf8, store_imported,
};
pub use memory::{
    MAX_MEMORY_DEPTH, MAX_MEMORY_NAME, MEMORY_ROOT, MemoryAuthor, MemoryChange, MemoryFile,
    MemoryLimits, MemoryPath, MemoryScope, MemoryStore, MemoryVersion, TEAM_FOLDER,
};
pub use people::{
    Access, DEFAULT_OWNER, Directory, IssuedToken, MAX_USER_NAME, Role, Share, Spend, TokenInfo,
    User, UserBudget, check_user_name, month_of,
};
#[cfg(feature = "postgres")]
pub use postgres::{MIGRATIONS, PostgresOptions, PostgresStore, PostgresWorkspace};
pub use rewind::after_rewinds;
pub use schedule::{
    CatchUp, Claim, Due, MAX_SCHEDULE_NAME, NewSchedule, ON_TIME_MS, Schedule, ScheduleBudget,
    ScheduleUpdate, ScheduledRun, Schedules, Webhook, check_schedule, expand_input,
};
pub use store::{
    Appended, Clock, ConversationMeta, ConversationStore, Diagnostic, DiagnosticKind, ForkPoint,
    ListPage, Loaded, MAX_HOLDER_FIELD, ManualClock, MetaUpdate, NewConversation, Page, RunHolder,
    RunLease, RunLock, StoredEntry, SystemClock,
};
pub use store::{fork_with_files, rfc3339};
pub use text::{clean_title, is_hidden_char};
pub use verify::{BrokenPair, DuplicateId, broken_pairs, duplicate_ids, orphan_workspaces};
pub use workspace::code::{CodeMeta, LANGUAGES, Saved, get_code, language, list_code, save_code};
pub use workspace::{
    FileContent, FileId, FileKind, FileMeta, MAX_DESCRIPTION, NewFile, Workspace, WorkspaceLimits,
    is_active_media_type, media_type_of,
};
