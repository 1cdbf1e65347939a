//! The storage crate's data files as the tool runtime's data sink.

use async_trait::async_trait;
use ba_storage::{DataFileStore, DataOwner};
use ba_tools::{DataSink, ToolsError};

/// The storage crate's [`DataFileStore`] as the tool runtime's [`DataSink`]: spilled tool
/// output is written once per content hash, owned by the call that produced it, and the
/// reference handed back is the file's path, which `file_reader` accepts when the data root is
/// one of its roots.
#[derive(Debug, Clone)]
pub struct DataFileSink {
    store: DataFileStore,
    conversation_id: Option<String>,
}

impl DataFileSink {
    /// A sink writing into `store`.
    pub fn new(store: DataFileStore) -> Self {
        Self {
            store,
            conversation_id: None,
        }
    }

    /// Records `id` as the owner conversation of every file written.
    pub fn for_conversation(mut self, id: impl Into<String>) -> Self {
        self.conversation_id = Some(id.into());
        self
    }
}

#[async_trait]
impl DataSink for DataFileSink {
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError> {
        // `tool_data/{call}_{hash16}.json`: the file name is the hint, the call id its owner.
        let hint = name.rsplit('/').next().unwrap_or(name);
        let call_id = hint
            .rsplit_once('_')
            .map(|(call, _)| call.to_owned())
            .filter(|c| !c.is_empty());
        let owner = DataOwner {
            call_id,
            conversation_id: self.conversation_id.clone(),
        };
        let store = self.store.clone();
        let hint = hint.to_owned();
        let bytes = bytes.to_vec();
        let meta = tokio::task::spawn_blocking(move || store.put(&hint, &bytes, owner))
            .await
            .map_err(|e| ToolsError::SinkWrite {
                path: name.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?
            .map_err(|e| ToolsError::SinkWrite {
                path: name.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let path = self
            .store
            .resolve(&meta.name)
            .map_err(|e| ToolsError::SinkName {
                name: meta.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(path.display().to_string())
    }
}
