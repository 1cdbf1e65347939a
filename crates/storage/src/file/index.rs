//! The index (`index.json`): a cache of every conversation's metadata and tail, rebuilt from
//! the files when it is missing or unreadable; and the per-conversation `.meta.json` files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;

use serde::{Deserialize, Serialize};

use super::codec::{Tail, scan_tail};
use super::lock::FileLock;
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
    /// The metadata file `meta` was read from: another process that renames (a title) or
    /// switches the mode of the conversation writes a new file, which changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) meta_stamp: Option<MetaStamp>,
}

/// Which version of a metadata file is on disk: every write replaces the file (a rename), so
/// its inode, size or modification time differs from the last one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct MetaStamp {
    ino: u64,
    len: u64,
    modified_ns: u64,
}

/// Where a scan of a log from its start begins: a fork's own lines follow its cut.
pub(super) fn base_tail(meta: &MetaFile) -> Tail {
    Tail {
        last_seq: meta.fork.as_ref().map_or(0, |f| f.at_seq),
        ..Tail::default()
    }
}

/// The `<id>.meta.json` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct MetaFile {
    pub(super) title: Option<String>,
    pub(super) mode: Option<ba_protocol::Mode>,
    pub(super) parent: Option<String>,
    pub(super) created_ms: i64,
    pub(super) updated_ms: i64,
    /// Where a fork leaves its parent (its own lines are numbered after `at_seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) fork: Option<crate::store::ForkPoint>,
    /// Whose conversation it is; files written before owners were kept have none, and belong
    /// to [`crate::DEFAULT_OWNER`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) owner: Option<String>,
}

impl MetaFile {
    /// The owner, [`crate::DEFAULT_OWNER`] when none is recorded.
    pub(super) fn owner(&self) -> &str {
        self.owner.as_deref().unwrap_or(crate::DEFAULT_OWNER)
    }
}

#[derive(Deserialize)]
struct IndexFile {
    version: u32,
    conversations: BTreeMap<String, IndexRow>,
}

#[derive(Serialize)]
struct IndexFileOut<'a> {
    version: u32,
    conversations: &'a BTreeMap<String, IndexRow>,
}

impl FileStore {
    /// Reads the index, or rebuilds it from the files when it is missing or unreadable (with a
    /// warning when it was there but unreadable).
    pub(super) fn load_index(&self) -> Result<()> {
        match self.read_index_file()? {
            Some(rows) => *lock(&self.inner.index) = rows,
            None => self.update_index(|_| Ok(()))?,
        }
        Ok(())
    }

    /// The rows of `index.json`; `None` when it is missing or unreadable.
    fn read_index_file(&self) -> Result<Option<BTreeMap<String, IndexRow>>> {
        let index_path = self.index_path();
        match std::fs::read(&index_path) {
            Ok(bytes) => match serde_json::from_slice::<IndexFile>(&bytes) {
                Ok(file) if file.version == 1 => Ok(Some(file.conversations)),
                Ok(file) => {
                    self.warn(format!(
                        "{}: unknown index version {}; rebuilt from the conversation files",
                        index_path.display(),
                        file.version
                    ));
                    Ok(None)
                }
                Err(e) => {
                    self.warn(format!(
                        "{}: unreadable index ({e}); rebuilt from the conversation files",
                        index_path.display()
                    ));
                    Ok(None)
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StorageError::io("reading", index_path, e)),
        }
    }

    /// Changes the index on disk under the store's index lock: reads what other writers (other
    /// processes too) left in it, or rebuilds it from the files when it is missing or
    /// unreadable, applies `change`, and replaces the file atomically (`fsync` of the file
    /// and the folder). A writer never overwrites another's rows with its own stale copy.
    pub(super) fn update_index(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, IndexRow>) -> Result<()>,
    ) -> Result<()> {
        let mut cache = lock(&self.inner.index);
        let (lock_file, lock_path) = self.lock_file("index.lock")?;
        let _flock = FileLock::exclusive(&lock_file, &lock_path)?;
        let mut rows = match self.read_index_file()? {
            Some(rows) => rows,
            None => self.rows_from_files()?,
        };
        change(&mut rows)?;
        let bytes = serde_json::to_vec(&IndexFileOut {
            version: 1,
            conversations: &rows,
        })
        .map_err(|e| StorageError::Format {
            what: "index".to_owned(),
            message: e.to_string(),
        })?;
        write_atomic(&self.index_path(), &bytes)?;
        *cache = rows;
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
        let rows = self.rows_from_files()?;
        self.update_index(|all| {
            *all = rows;
            Ok(())
        })
    }

    fn rows_from_files(&self) -> Result<BTreeMap<String, IndexRow>> {
        let mut rows = BTreeMap::new();
        for id in self.ids_on_disk()? {
            if let Some(row) = self.scan_row(&id, None)? {
                rows.insert(id, row);
            }
        }
        Ok(rows)
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
        let meta_stamp = self.meta_stamp(id);
        let meta = match cached {
            Some(row) if row.meta_stamp == meta_stamp => row.meta.clone(),
            _ => {
                let mut meta = self.read_meta(id)?;
                if meta.created_ms == 0 && meta.updated_ms == 0 {
                    // No usable metadata file: the log file's own time beats 1970.
                    let ms = file
                        .metadata()
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .and_then(|d| i64::try_from(d.as_millis()).ok())
                        .unwrap_or(0);
                    meta.created_ms = ms;
                    meta.updated_ms = ms;
                }
                meta
            }
        };
        let tail = match cached {
            Some(row) if row.tail.len + row.tail.torn == len => row.tail,
            Some(row) if row.tail.len < len => scan_tail(&file, &path, row.tail)?,
            _ => scan_tail(&file, &path, base_tail(&meta))?,
        };
        Ok(Some(IndexRow {
            meta,
            tail,
            meta_stamp,
        }))
    }

    /// The metadata file; defaults (with a warning) when it is unreadable, so one damaged
    /// file costs its conversation's title, never the store.
    pub(super) fn read_meta(&self, id: &str) -> Result<MetaFile> {
        match self.meta_status(id)? {
            (meta, None) => Ok(meta),
            (meta, Some(problem)) => {
                self.warn(problem);
                Ok(meta)
            }
        }
    }

    /// The metadata file and, when it is unreadable, why (`None` when it is fine or missing).
    pub(super) fn meta_status(&self, id: &str) -> Result<(MetaFile, Option<String>)> {
        let path = self.meta_path(id);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(match serde_json::from_slice(&bytes) {
                Ok(meta) => (meta, None),
                Err(e) => (
                    MetaFile::default(),
                    Some(format!(
                        "{}: unreadable metadata ({e}); the conversation is listed without it",
                        path.display()
                    )),
                ),
            }),
            // The log file is the claim on the id; a crash between it and the metadata file
            // leaves a conversation without a title, which is still a conversation.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok((MetaFile::default(), None)),
            Err(e) => Err(StorageError::io("reading", path, e)),
        }
    }

    /// The stamp of `id`'s metadata file as it is on disk now; `None` when there is none.
    pub(super) fn meta_stamp(&self, id: &str) -> Option<MetaStamp> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::metadata(self.meta_path(id)).ok()?;
        let modified_ns = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
            .unwrap_or(0);
        Some(MetaStamp {
            ino: m.ino(),
            len: m.len(),
            modified_ns,
        })
    }

    pub(super) fn write_meta(&self, id: &str, meta: &MetaFile) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(meta).map_err(|e| StorageError::Format {
            what: format!("metadata of `{id}`"),
            message: e.to_string(),
        })?;
        write_atomic(&self.meta_path(id), &bytes)
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
            title: crate::text::clean_title_opt(row.meta.title.clone()),
            mode: row.meta.mode,
            parent: row.meta.parent.clone(),
            created_ms: row.meta.created_ms,
            updated_ms: row.meta.updated_ms.max(row.tail.last_at),
            last_seq: row.tail.last_seq,
            fork: row.meta.fork.clone(),
            owner: row.meta.owner().to_owned(),
        }
    }
}
