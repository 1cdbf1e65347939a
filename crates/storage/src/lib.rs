//! # ba-storage
//!
//! Durable storage of the BA-Agent pipeline (SPEC §6).
//!
//! - [`ConversationStore`] (ST1): the conversation log as an async trait, with gap-free
//!   per-conversation sequence numbers, optimistic concurrency, paging, metadata, retention.
//!   [`FileStore`] is the embedded backend (one append-only JSONL file per conversation,
//!   `fsync` per append or group commit, torn-tail detection, inter-process file locks, an
//!   index rebuilt from the files); `PostgresStore` (feature `postgres`) serves shared
//!   deployments. [`conformance`] is the one test suite every backend passes.
//! - [`import`]: Claude Code sessions (with their subagent files) and Codex rollouts into
//!   conversations, listing what the log cannot express; [`verify`] finds broken tool pairs and
//!   repeated entry ids.
//! - [`datafile::DataFileStore`] (ST2): tool data files with hashed names, atomic writes,
//!   metadata, cleanup by age and LRU size cap (in the background or on demand).
//! - [`workspace`]: the files of each conversation — uploads, code blocks ([`workspace::code`]),
//!   spilled tool data, outputs — behind one [`Workspace`] trait with a backend in each store
//!   ([`FileWorkspace`] in `<root>/conversations/<id>/files/`, chunks in PostgreSQL), reached
//!   through [`ConversationStore::workspace`]; size limits, streaming in and out.
//!   Code blocks (ST3) and uploads (ST4) are files of the workspace; [`events::EventLog`] (ST5).
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
pub mod datafile;
pub mod error;
pub mod events;
pub mod file;
pub mod id;
pub mod import;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod store;
pub mod verify;
pub mod workspace;

pub use error::{Result, StorageError};
#[cfg(feature = "test-util")]
pub use file::WriteFault;
pub use file::{Durability, FileStore, FileStoreOptions, FileWorkspace};
pub use id::ConversationId;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore, PostgresWorkspace};
pub use store::{
    Appended, Clock, ConversationMeta, ConversationStore, Diagnostic, DiagnosticKind, ListPage,
    Loaded, MAX_HOLDER_FIELD, ManualClock, MetaUpdate, NewConversation, Page, RunHolder, RunLease,
    RunLock, StoredEntry, SystemClock,
};
pub use workspace::{
    FileContent, FileKind, FileMeta, NewFile, Workspace, WorkspaceLimits, media_type_for,
};
