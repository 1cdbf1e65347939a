//! The memory of a [`PostgresStore`](super::PostgresStore): `ba_memory`, a row a version
//! (`text` NULL for a delete). A commit takes a transaction-scoped advisory lock on its scope,
//! so two servers committing to one scope check their bounds one after the other.

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::Row;

use super::db;
use crate::error::{Result, StorageError};
use crate::memory::{
    MemoryAuthor, MemoryChange, MemoryFile, MemoryLimits, MemoryScope, MemoryStore, MemoryVersion,
    Sizes, check_changes, check_commit,
};
use crate::store::SharedClock;

/// The [`MemoryStore`] of a [`PostgresStore`](super::PostgresStore). Cheap to clone.
#[derive(Clone)]
pub(super) struct PgMemory {
    pool: Pool,
    clock: SharedClock,
}

impl std::fmt::Debug for PgMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemory").finish_non_exhaustive()
    }
}

fn version_of(row: &Row) -> Result<MemoryVersion> {
    let path: String = row.get("path");
    let author: String = row.get("author");
    let author = serde_json::from_str(&author).map_err(|e| StorageError::Format {
        what: format!("memory version of `{path}`"),
        message: e.to_string(),
    })?;
    Ok(MemoryVersion {
        version: u32::try_from(row.get::<_, i32>("version")).unwrap_or(0),
        text: row.get("text"),
        author,
        created_ms: row.get("created_ms"),
        path,
    })
}

/// The latest version of each path of a scope, live or deleted.
const LATEST: &str = "SELECT DISTINCT ON (path) path, version, octet_length(text) AS size,
        text IS NULL AS deleted, created_ms
    FROM ba_memory WHERE scope = $1 ORDER BY path, version DESC";

impl PgMemory {
    pub(super) fn new(pool: Pool, clock: SharedClock) -> Self {
        Self { pool, clock }
    }
}

#[async_trait]
impl MemoryStore for PgMemory {
    async fn files(&self, scope: &MemoryScope) -> Result<Vec<MemoryFile>> {
        let client = self.pool.get().await.map_err(db)?;
        let rows = client.query(LATEST, &[&scope.key()]).await.map_err(db)?;
        let mut files: Vec<MemoryFile> = rows
            .iter()
            .filter(|r| !r.get::<_, bool>("deleted"))
            .map(|r| MemoryFile {
                path: r.get("path"),
                size: u64::try_from(r.get::<_, Option<i32>>("size").unwrap_or(0)).unwrap_or(0),
                versions: u32::try_from(r.get::<_, i32>("version")).unwrap_or(0),
                updated_ms: r.get("created_ms"),
            })
            .collect();
        // The same order as the file backend's, whatever the database's collation.
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }

    async fn history(&self, scope: &MemoryScope, path: &str) -> Result<Vec<MemoryVersion>> {
        let client = self.pool.get().await.map_err(db)?;
        client
            .query(
                "SELECT path, version, text, author, created_ms FROM ba_memory
                 WHERE scope = $1 AND path = $2 ORDER BY version",
                &[&scope.key(), &path],
            )
            .await
            .map_err(db)?
            .iter()
            .map(version_of)
            .collect()
    }

    async fn commit(
        &self,
        scope: &MemoryScope,
        changes: &[MemoryChange],
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<Vec<MemoryVersion>> {
        check_changes(changes)?;
        let key = scope.key();
        let author_json = serde_json::to_string(author).map_err(|e| StorageError::Format {
            what: "memory author".to_owned(),
            message: e.to_string(),
        })?;
        let mut client = self.pool.get().await.map_err(db)?;
        let tx = client.transaction().await.map_err(db)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('ba_memory:' || $1))",
            &[&key],
        )
        .await
        .map_err(db)?;
        let latest = tx.query(LATEST, &[&key]).await.map_err(db)?;
        let sizes: Sizes = latest
            .iter()
            .filter(|r| !r.get::<_, bool>("deleted"))
            .map(|r| {
                (
                    r.get::<_, String>("path"),
                    u64::try_from(r.get::<_, Option<i32>>("size").unwrap_or(0)).unwrap_or(0),
                )
            })
            .collect();
        let mut last: std::collections::BTreeMap<String, i32> = latest
            .iter()
            .map(|r| (r.get::<_, String>("path"), r.get::<_, i32>("version")))
            .collect();
        check_commit(scope, sizes, changes, limits)?;
        let now = self.clock.now_ms();
        let keep = i32::try_from(limits.max_versions.max(1)).unwrap_or(i32::MAX);
        let mut made = Vec::with_capacity(changes.len());
        for change in changes {
            let (path, text) = match change {
                MemoryChange::Write { path, text } => (path, Some(text.clone())),
                MemoryChange::Delete { path } => (path, None),
            };
            let version = last.get(path).map_or(1, |v| v.saturating_add(1));
            last.insert(path.clone(), version);
            tx.execute(
                "INSERT INTO ba_memory (scope, path, version, text, author, created_ms)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[&key, path, &version, &text, &author_json, &now],
            )
            .await
            .map_err(db)?;
            tx.execute(
                "DELETE FROM ba_memory WHERE scope = $1 AND path = $2 AND version <= $3",
                &[&key, path, &(version - keep)],
            )
            .await
            .map_err(db)?;
            made.push(MemoryVersion {
                path: path.clone(),
                version: u32::try_from(version).unwrap_or(0),
                text,
                author: author.clone(),
                created_ms: now,
            });
        }
        tx.commit().await.map_err(db)?;
        Ok(made)
    }
}
