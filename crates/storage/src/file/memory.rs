//! The memory of a [`FileStore`](super::FileStore): one JSON file a scope under
//! `<root>/memory/` (`team.json`, `user.NAME.json`) holding every kept version of every path,
//! replaced atomically. A commit reads, checks and writes it under an exclusive `flock` on
//! `memory/memory.lock`, so a command editing memory while a server runs beside it loses
//! nothing; reads take no lock. A path is a key in that file, never a file of its own, so no
//! path can reach outside the folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::blocking;
use super::people::{locked_in, read_json, write_json};
use crate::error::Result;
use crate::memory::{
    MemoryAuthor, MemoryChange, MemoryFile, MemoryLimits, MemoryScope, MemoryStore, MemoryVersion,
    Sizes, check_changes, check_commit,
};
use crate::people::check_user_name;
use crate::store::SharedClock;

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
        read_json(&self.dir.join(file_name(scope)))
    }

    fn commit_blocking(
        &self,
        scope: &MemoryScope,
        changes: &[MemoryChange],
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<Vec<MemoryVersion>> {
        locked_in(&self.dir, "memory.lock", || {
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
            write_json(&self.dir.join(file_name(scope)), &versions)?;
            Ok(made)
        })
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
