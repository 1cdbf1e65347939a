//! The index (`index.json`): a cache of every conversation's metadata and tail, rebuilt from
//! the files when it is missing or unreadable; and the per-conversation `.meta.json` files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;

use serde::{Deserialize, Serialize};

use super::codec::{Tail, scan_tail};
use super::{FileStore, blocking, lock};
use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::store::ConversationMeta;

/// A cached line of the index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct IndexRow {
    #[serde(flatten)]
    pub(super) meta: MetaFile,
    pub(super) tail: Tail,
}

/// The `<id>.meta.json` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct MetaFile {
    pub(super) title: Option<String>,
    pub(super) mode: Option<ba_protocol::log::Mode>,
    pub(super) parent: Option<String>,
    pub(super) created_ms: i64,
    pub(super) updated_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    conversations: BTreeMap<String, IndexRow>,
}

impl FileStore {
    /// Reads the index, or rebuilds it from the files when it is missing or unreadable.
    pub(super) fn load_index(&self) -> Result<()> {
        let index_path = self.index_path();
        let rows = match std::fs::read(&index_path) {
            Ok(bytes) => match serde_json::from_slice::<IndexFile>(&bytes) {
                Ok(file) if file.version == 1 => Some(file.conversations),
                _ => {
                    tracing::warn!(path = %index_path.display(), "unreadable index; rebuilding");
                    None
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StorageError::io("reading", index_path, e)),
        };
        match rows {
            Some(rows) => *lock(&self.inner.index) = rows,
            None => self.rebuild_index_blocking()?,
        }
        Ok(())
    }

    /// Rebuilds the index by reading every conversation file.
    pub async fn rebuild_index(&self) -> Result<usize> {
        let this = self.clone();
        blocking(move || {
            this.rebuild_index_blocking()?;
            Ok(lock(&this.inner.index).len())
        })
        .await
    }

    pub(super) fn rebuild_index_blocking(&self) -> Result<()> {
        let mut rows = BTreeMap::new();
        for id in self.ids_on_disk()? {
            if let Some(row) = self.scan_row(&id, None)? {
                rows.insert(id, row);
            }
        }
        *lock(&self.inner.index) = rows;
        self.save_index()
    }

    pub(super) fn ids_on_disk(&self) -> Result<Vec<String>> {
        let dir = &self.inner.dir;
        let mut ids = Vec::new();
        let read = std::fs::read_dir(dir).map_err(|e| StorageError::io("listing", dir, e))?;
        for item in read {
            let item = item.map_err(|e| StorageError::io("listing", dir, e))?;
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(".jsonl")
                && crate::id::check_name("conversation id", id).is_ok()
            {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Reads the metadata file and brings the tail up to date from `cached` (when the file
    /// only grew) or from the start. `None` when the conversation does not exist.
    pub(super) fn scan_row(&self, id: &str, cached: Option<&IndexRow>) -> Result<Option<IndexRow>> {
        let path = self.inner.dir.join(format!("{id}.jsonl"));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("opening", path, e)),
        };
        let len = file
            .metadata()
            .map_err(|e| StorageError::io("reading", &path, e))?
            .len();
        let tail = match cached {
            Some(row) if row.tail.len + row.tail.torn == len => row.tail,
            Some(row) if row.tail.len < len => scan_tail(&file, &path, row.tail)?,
            _ => scan_tail(&file, &path, Tail::default())?,
        };
        let meta = match cached {
            Some(row) => row.meta.clone(),
            None => self.read_meta(id)?,
        };
        Ok(Some(IndexRow { meta, tail }))
    }

    pub(super) fn read_meta(&self, id: &str) -> Result<MetaFile> {
        let path = self.meta_path(id);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
                what: path.display().to_string(),
                message: e.to_string(),
            }),
            // The log file is the claim on the id; a crash between it and the metadata file
            // leaves a conversation without a title, which is still a conversation.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MetaFile::default()),
            Err(e) => Err(StorageError::io("reading", path, e)),
        }
    }

    pub(super) fn write_meta(&self, id: &str, meta: &MetaFile) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(meta).map_err(|e| StorageError::Format {
            what: format!("metadata of `{id}`"),
            message: e.to_string(),
        })?;
        write_atomic(&self.meta_path(id), &bytes)
    }

    pub(super) fn save_index(&self) -> Result<()> {
        let file = IndexFile {
            version: 1,
            conversations: lock(&self.inner.index).clone(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| StorageError::Format {
            what: "index".to_owned(),
            message: e.to_string(),
        })?;
        write_atomic(&self.index_path(), &bytes)
    }

    pub(super) fn row(&self, id: &str) -> Result<IndexRow> {
        let cached = lock(&self.inner.index).get(id).cloned();
        match self.scan_row(id, cached.as_ref())? {
            Some(row) => {
                if cached.as_ref() != Some(&row) {
                    lock(&self.inner.index).insert(id.to_owned(), row.clone());
                }
                Ok(row)
            }
            None => {
                lock(&self.inner.index).remove(id);
                Err(StorageError::NotFound { id: id.to_owned() })
            }
        }
    }

    pub(super) fn meta_of(id: &str, row: &IndexRow) -> ConversationMeta {
        ConversationMeta {
            id: id.to_owned(),
            title: row.meta.title.clone(),
            mode: row.meta.mode,
            parent: row.meta.parent.clone(),
            created_ms: row.meta.created_ms,
            updated_ms: row.meta.updated_ms.max(row.tail.last_at),
            last_seq: row.tail.last_seq,
        }
    }
}
