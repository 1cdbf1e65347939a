//! The memory of a [`FileStore`](super::FileStore): one JSON file a scope under
//! `<root>/memory/` (`team.json`, `user.NAME.json`) holding every kept version of every path,
//! replaced atomically. A commit reads, checks and writes it under an exclusive `flock` on
//! `memory/memory.lock`, so a command editing memory while a server runs beside it loses
//! nothing; reads take no lock. A path is a key in that file, never a file of its own, so no
//! path can reach outside the folder.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::blocking;
use super::lock::FileLock;
use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::memory::{
    MemoryAuthor, MemoryChange, MemoryFile, MemoryLimits, MemoryScope, MemoryStore, MemoryVersion,
    Sizes, check_changes, check_commit,
};
use crate::people::check_user_name;
use crate::store::SharedClock;

/// The largest scope file read (well above any bounded scope's versions).
const MAX_FILE_BYTES: u64 = 64 << 20;

type Versions = BTreeMap<String, Vec<MemoryVersion>>;

/// The [`MemoryStore`] of a [`FileStore`](super::FileStore). Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct FileMemory {
    dir: PathBuf,
    clock: SharedClock,
}

fn file_name(scope: &MemoryScope) -> String {
    match scope {
        MemoryScope::User(name) => format!("user.{name}.json"),
        MemoryScope::Team => "team.json".to_owned(),
    }
}

fn live(versions: &Versions) -> Sizes {
    versions
        .iter()
        .filter_map(|(path, vs)| {
            let text = vs.last()?.text.as_ref()?;
            Some((path.clone(), text.len() as u64))
        })
        .collect()
}

impl FileMemory {
    pub(super) fn new(root: &Path, clock: SharedClock) -> Self {
        Self {
            dir: root.join("memory"),
            clock,
        }
    }

    fn read(&self, scope: &MemoryScope) -> Result<Versions> {
        // The name becomes part of a file name: only a user name's alphabet may.
        if let MemoryScope::User(name) = scope {
            check_user_name(name)?;
        }
        let path = self.dir.join(file_name(scope));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Versions::new()),
            Err(e) => return Err(StorageError::io("opening", path, e)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| StorageError::io("reading", &path, e))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(StorageError::Format {
                what: path.display().to_string(),
                message: format!("larger than {MAX_FILE_BYTES} bytes"),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
            what: path.display().to_string(),
            message: e.to_string(),
        })
    }

    fn commit_blocking(
        &self,
        scope: &MemoryScope,
        changes: &[MemoryChange],
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<Vec<MemoryVersion>> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| StorageError::io("creating", &self.dir, e))?;
        let lock_path = self.dir.join("memory.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StorageError::io("opening", &lock_path, e))?;
        let _flock = FileLock::exclusive(&lock, &lock_path)?;
        let mut versions = self.read(scope)?;
        check_commit(scope, live(&versions), changes, limits)?;
        let now = self.clock.now_ms();
        let mut made = Vec::with_capacity(changes.len());
        for change in changes {
            let (path, text) = match change {
                MemoryChange::Write { path, text } => (path, Some(text.clone())),
                MemoryChange::Delete { path } => (path, None),
            };
            let kept = versions.entry(path.clone()).or_default();
            let version = MemoryVersion {
                path: path.clone(),
                version: kept.last().map_or(1, |v| v.version.saturating_add(1)),
                text,
                author: author.clone(),
                created_ms: now,
            };
            kept.push(version.clone());
            let keep = limits.max_versions.max(1) as usize;
            if kept.len() > keep {
                kept.drain(..kept.len() - keep);
            }
            made.push(version);
        }
        let path = self.dir.join(file_name(scope));
        let bytes = serde_json::to_vec(&versions).map_err(|e| StorageError::Format {
            what: path.display().to_string(),
            message: e.to_string(),
        })?;
        write_atomic(&path, &bytes)?;
        Ok(made)
    }
}

#[async_trait]
impl MemoryStore for FileMemory {
    async fn files(&self, scope: &MemoryScope) -> Result<Vec<MemoryFile>> {
        let (this, scope) = (self.clone(), scope.clone());
        blocking(move || {
            Ok(this
                .read(&scope)?
                .into_iter()
                .filter_map(|(path, vs)| {
                    let last = vs.last()?;
                    let text = last.text.as_ref()?;
                    Some(MemoryFile {
                        size: text.len() as u64,
                        versions: last.version,
                        updated_ms: last.created_ms,
                        path,
                    })
                })
                .collect())
        })
        .await
    }

    async fn history(&self, scope: &MemoryScope, path: &str) -> Result<Vec<MemoryVersion>> {
        let (this, scope, path) = (self.clone(), scope.clone(), path.to_owned());
        blocking(move || Ok(this.read(&scope)?.remove(&path).unwrap_or_default())).await
    }

    async fn commit(
        &self,
        scope: &MemoryScope,
        changes: &[MemoryChange],
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<Vec<MemoryVersion>> {
        check_changes(changes)?;
        let (this, scope, changes, author, limits) = (
            self.clone(),
            scope.clone(),
            changes.to_vec(),
            author.clone(),
            *limits,
        );
        blocking(move || this.commit_blocking(&scope, &changes, &author, &limits)).await
    }
}
