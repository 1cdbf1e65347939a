//! `Store`: a conversation store opened from Python (a folder, or a PostgreSQL URL), to list,
//! read, import, export and fork conversations.

use std::path::PathBuf;
use std::sync::Arc;

use ba_storage::{
    ConversationId, ConversationStore, FileStore, NewConversation, PostgresOptions, PostgresStore,
    read_claude_code, read_codex, store_imported,
};
use pyo3::prelude::*;
use serde_json::json;

use crate::conversation::{self, Format};
use crate::error::{Error, to_json};
use crate::runtime;

/// Opens the store at `location`: a `postgres://` (or `postgresql://`) URL, its tables in
/// `schema` (`public` by default), else a folder (created when missing).
pub(crate) fn open(
    location: &str,
    schema: Option<String>,
) -> Result<Arc<dyn ConversationStore>, Error> {
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        let mut options = PostgresOptions::default();
        if let Some(schema) = schema {
            options.schema = schema;
        }
        let store = runtime::block_on(PostgresStore::connect(location, options))??;
        return Ok(Arc::new(store));
    }
    Ok(Arc::new(FileStore::open(PathBuf::from(location))?))
}

fn id(conversation: &str) -> Result<ConversationId, Error> {
    Ok(ConversationId::new(conversation)?)
}

/// A conversation store.
#[pyclass(module = "ba_agent._native", frozen)]
pub(crate) struct Store {
    pub(crate) inner: Arc<dyn ConversationStore>,
}

#[pymethods]
impl Store {
    /// Opens a folder (created when missing) or a PostgreSQL database by URL (its tables in
    /// `schema`).
    #[staticmethod]
    #[pyo3(signature = (location, schema = None))]
    fn open(py: Python<'_>, location: &str, schema: Option<String>) -> PyResult<Self> {
        let location = location.to_owned();
        let inner = py.detach(move || open(&location, schema))?;
        Ok(Self { inner })
    }

    /// Every conversation's metadata, as JSON.
    fn list(&self, py: Python<'_>) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        Ok(py.detach(move || -> Result<String, Error> {
            let metas = runtime::block_on(async move { store.list_all().await })??;
            to_json("the conversations", &metas)
        })?)
    }

    /// One conversation's metadata, as JSON.
    fn meta(&self, py: Python<'_>, conversation: &str) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        let id = id(conversation)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let meta = runtime::block_on(async move { store.metadata(&id).await })??;
            to_json("the metadata", &meta)
        })?)
    }

    /// A conversation's log entries (its rewinds applied), as JSON.
    fn read(&self, py: Python<'_>, conversation: &str) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        let id = id(conversation)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let loaded = runtime::block_on(async move { store.load(&id).await })??;
            to_json("the log", &loaded.into_entries())
        })?)
    }

    /// Imports a Claude Code session or a Codex rollout (`format` `claude-code` or `codex`)
    /// from `path`; the main conversation's id first, then its subagents'.
    fn import_session(&self, py: Python<'_>, path: PathBuf, format: &str) -> PyResult<Vec<String>> {
        let store = Arc::clone(&self.inner);
        let format = format.to_owned();
        Ok(py.detach(move || -> Result<Vec<String>, Error> {
            let imported = match format.as_str() {
                "claude-code" => read_claude_code(&path)?,
                "codex" => read_codex(&path)?,
                other => {
                    return Err(Error::Argument(format!(
                        "unknown session format `{other}`: expected claude-code or codex"
                    )));
                }
            };
            if imported.main.entries.is_empty() {
                return Err(Error::Argument(format!(
                    "{}: no conversation records found (is it a {format} session?)",
                    path.display()
                )));
            }
            let ids =
                runtime::block_on(async move { store_imported(&*store, &imported, None).await })??;
            Ok(ids.iter().map(ToString::to_string).collect())
        })?)
    }

    /// Imports a conversation in any wire format (JSON text) as a new conversation; its id.
    #[pyo3(signature = (conversation, format = "auto", title = None))]
    fn import_conversation(
        &self,
        py: Python<'_>,
        conversation: &str,
        format: &str,
        title: Option<String>,
    ) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        let format = Format::parse(format)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let read = conversation::read(conversation, format)?;
            let id = ConversationId::random();
            let new = NewConversation {
                title,
                ..NewConversation::default()
            };
            let meta = runtime::block_on(async move {
                store.create_with_entries(&id, new, &read.entries).await
            })??;
            Ok(meta.id)
        })?)
    }

    /// A conversation in `to` (anthropic, chat, responses or log), with what the format could
    /// not express: `{"value": …, "losses": […]}` as JSON.
    fn export(&self, py: Python<'_>, conversation: &str, to: &str) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        let id = id(conversation)?;
        let to = Format::parse_output(to)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let loaded = runtime::block_on(async move { store.load(&id).await })??;
            let (value, losses) = conversation::write(&loaded.into_entries(), to)?;
            let losses: Vec<_> = losses
                .iter()
                .map(|l| json!({"path": l.path, "what": l.what}))
                .collect();
            to_json("the export", &json!({"value": value, "losses": losses}))
        })?)
    }

    /// A new conversation sharing `conversation`'s history up to entry `at` (its last entry
    /// when `None`), its files up to then included; the new conversation's metadata as JSON.
    #[pyo3(signature = (conversation, at = None))]
    fn fork(&self, py: Python<'_>, conversation: &str, at: Option<u64>) -> PyResult<String> {
        let store = Arc::clone(&self.inner);
        let parent = id(conversation)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let meta = runtime::block_on(async move {
                let parent_meta = store.metadata(&parent).await?;
                let at = at.unwrap_or(parent_meta.last_seq);
                ba_storage::fork_with_files(
                    &*store,
                    &parent,
                    at,
                    &ConversationId::random(),
                    NewConversation {
                        owner: Some(parent_meta.owner),
                        ..NewConversation::default()
                    },
                )
                .await
            })??;
            to_json("the fork", &meta)
        })?)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()
}
