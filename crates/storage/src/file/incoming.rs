//! Conversations created whole (an import): the lines and the metadata are written under
//! `conversations/.incoming/` first, made durable, and only then given the conversation's
//! name, so a failed or killed import leaves no conversation at all, never a partial one.
//! An unfinished file left by a killed writer is removed by the next open of the store (its
//! writer's lock tells a live import from a dead one).

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use ba_protocol::LogEntry;

use super::FileStore;
use super::codec::{Tail, encode_lines};
use super::index::{IndexRow, MetaFile};
use super::lock::FileLock;
use crate::atomic::sync_dir;
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::{ConversationMeta, NewConversation};

/// How old an unlocked file under `.incoming/` must be before it counts as left behind.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

impl FileStore {
    fn incoming_dir(&self) -> PathBuf {
        self.inner.dir.join(".incoming")
    }

    /// The whole of `create_with_entries`.
    pub(super) fn create_whole_blocking(
        &self,
        id: &ConversationId,
        new: NewConversation,
        entries: &[LogEntry],
    ) -> Result<ConversationMeta> {
        let incoming = self.incoming_dir();
        std::fs::create_dir_all(&incoming)
            .map_err(|e| StorageError::io("creating", &incoming, e))?;
        let stem = uuid::Uuid::new_v4().simple().to_string();
        let tmp_log = incoming.join(format!("{stem}.jsonl"));
        let tmp_meta = incoming.join(format!("{stem}.meta.json"));
        let result = self.place_whole(id, new, entries, &tmp_log, &tmp_meta);
        for tmp in [&tmp_log, &tmp_meta] {
            let _ = std::fs::remove_file(tmp);
        }
        result
    }

    fn place_whole(
        &self,
        id: &ConversationId,
        new: NewConversation,
        entries: &[LogEntry],
        tmp_log: &Path,
        tmp_meta: &Path,
    ) -> Result<ConversationMeta> {
        let owner = new.owner_name()?;
        let now = self.now();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp_log)
            .map_err(|e| StorageError::io("creating", tmp_log, e))?;
        // Held until the file is named: the mark of a live writer for `clean_incoming`.
        let _flock = FileLock::exclusive(&file, tmp_log)?;
        let buf = encode_lines(id, entries, 1, now)?;
        self.write_lines(&file, &buf)
            .and_then(|()| file.sync_all())
            .map_err(|e| StorageError::io("writing", tmp_log, e))?;
        let meta = MetaFile {
            title: crate::text::clean_title_opt(new.title),
            mode: new.mode,
            parent: new.parent,
            created_ms: now,
            updated_ms: now,
            fork: None,
            owner: Some(owner),
        };
        let meta_bytes = serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
            what: format!("metadata of `{id}`"),
            message: e.to_string(),
        })?;
        File::create(tmp_meta)
            .and_then(|mut f| f.write_all(&meta_bytes).and_then(|()| f.sync_all()))
            .map_err(|e| StorageError::io("writing", tmp_meta, e))?;
        // The link claims the id atomically and fails when it is taken.
        let path = self.log_path(id);
        match std::fs::hard_link(tmp_log, &path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StorageError::AlreadyExists { id: id.to_string() });
            }
            Err(e) => return Err(StorageError::io("creating", path, e)),
        }
        let meta_path = self.meta_path(id.as_str());
        std::fs::rename(tmp_meta, &meta_path)
            .map_err(|e| StorageError::io("writing", &meta_path, e))?;
        sync_dir(&self.inner.dir)?;
        let row = IndexRow {
            meta,
            tail: Tail {
                len: buf.len() as u64,
                last_seq: entries.len() as u64,
                last_at: if entries.is_empty() { 0 } else { now },
                torn: 0,
            },
            meta_stamp: self.meta_stamp(id.as_str()),
        };
        self.update_index(|rows| {
            rows.insert(id.to_string(), row.clone());
            Ok(())
        })?;
        Ok(Self::meta_of(id.as_str(), &row))
    }

    /// Removes what killed imports left under `.incoming/`; a file whose writer still holds
    /// its lock is left alone. Best effort: a failure here only leaves litter.
    pub(super) fn clean_incoming(&self) {
        let incoming = self.incoming_dir();
        let Ok(read) = std::fs::read_dir(&incoming) else {
            return;
        };
        let mut stems: Vec<String> = read
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter_map(|name| name.split('.').next().map(str::to_owned))
            .collect();
        stems.sort();
        stems.dedup();
        for stem in stems {
            let log = incoming.join(format!("{stem}.jsonl"));
            let meta = incoming.join(format!("{stem}.meta.json"));
            // Young files may belong to a writer that has not taken its lock yet.
            let old = |p: &Path| {
                std::fs::metadata(p)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_AFTER)
            };
            let dead = match File::open(&log) {
                Ok(f) => old(&log) && f.try_lock().is_ok(),
                // The log goes first when a writer finishes, so a lone metadata file is left.
                Err(e) => e.kind() == io::ErrorKind::NotFound && old(&meta),
            };
            if dead {
                for name in [format!("{stem}.jsonl"), format!("{stem}.meta.json")] {
                    let _ = std::fs::remove_file(incoming.join(name));
                }
            }
        }
    }
}
