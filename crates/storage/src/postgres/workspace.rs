//! [`PostgresWorkspace`]: the conversations' files in the database (`ba_files`,
//! `ba_file_chunks`, `ba_file_counters`; see the migrations).
//!
//! A put claims an assigned id first (one statement on the kind's counter, committed at once,
//! so an id is never given twice), then, in one transaction, writes the file's row, streams the
//! body into chunks of [`CHUNK`] bytes (memory bounded by one chunk), and finally — under a
//! transaction-scoped advisory lock of the conversation — checks the conversation limit
//! against the committed files and sets the size and SHA-256. Readers see the file only once
//! the transaction commits; a replaced code file stays whole until then.
//!
//! An open streams the chunks from a read-only snapshot by a cursor, a few chunks at a time,
//! through a task that owns the connection. `local_path` copies a file into a private cache
//! folder on this machine, named by its SHA-256 so a replaced file is fetched again.

use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use deadpool_postgres::Pool;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, ReadBuf};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::error::SqlState;

use super::db;
use crate::error::{Result, StorageError};
use crate::id::{ConversationId, check_name};
use crate::store::SharedClock;
use crate::workspace::{
    FileContent, FileId, FileKind, FileMeta, NewFile, Prepared, SizeCheck, Workspace,
    WorkspaceLimits, check_file_id, hex,
};

/// The size of a stored chunk: 256 KiB.
pub const CHUNK: usize = 256 << 10;

/// Chunks fetched by one round trip of an open.
const CHUNKS_A_FETCH: i32 = 2;

const FILE_COLUMNS: &str = "file_id, kind, name, media_type, size, description, created_ms, \
                            sha256, attributes::TEXT";

/// `ba-agent-files-<uid>` in the temporary folder.
pub(super) fn default_cache_dir() -> PathBuf {
    let owner = current_uid().map_or_else(
        || std::env::var("USER").unwrap_or_else(|_| "user".to_owned()),
        |uid| uid.to_string(),
    );
    std::env::temp_dir().join(format!("ba-agent-files-{owner}"))
}

/// The user this process runs as (the owner of its `/proc` entry), where the system says.
fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// The workspaces of a [`super::PostgresStore`]'s conversations. Made by the store; reach it
/// with [`crate::ConversationStore::workspace`].
#[derive(Clone)]
pub struct PostgresWorkspace {
    pool: Pool,
    clock: SharedClock,
    limits: WorkspaceLimits,
    cache_dir: PathBuf,
}

impl std::fmt::Debug for PostgresWorkspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresWorkspace")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn file_of(row: &tokio_postgres::Row) -> Result<FileMeta> {
    let id: String = row.get(0);
    let kind: String = row.get(1);
    let attributes: String = row.get(8);
    Ok(FileMeta {
        kind: FileKind::parse(&kind).ok_or_else(|| StorageError::Format {
            what: format!("file `{id}`"),
            message: format!("unknown kind `{kind}`"),
        })?,
        name: row.get(2),
        media_type: row.get(3),
        size: u64::try_from(row.get::<_, i64>(4)).unwrap_or(0),
        description: row.get(5),
        created_ms: row.get(6),
        sha256: row.get(7),
        attributes: serde_json::from_str(&attributes).map_err(|e| StorageError::Format {
            what: format!("attributes of file `{id}`"),
            message: e.to_string(),
        })?,
        id: FileId::parse(&id).map_err(|e| StorageError::Format {
            what: "a file of the workspace".to_owned(),
            message: e.to_string(),
        })?,
    })
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl PostgresWorkspace {
    pub(super) fn new(
        pool: Pool,
        clock: SharedClock,
        limits: WorkspaceLimits,
        cache_dir: PathBuf,
    ) -> Self {
        Self {
            pool,
            clock,
            limits,
            cache_dir,
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(db)
    }

    /// Removes the copies `local_path` made of a conversation's files (best effort: they are
    /// only a cache).
    pub(super) fn forget_cached(&self, conversation: &str) {
        if check_name("conversation id", conversation).is_ok() {
            let _ = std::fs::remove_dir_all(self.cache_dir.join(conversation));
        }
    }

    /// Claims the next id of `kind` in `conversation`.
    async fn claim(&self, conversation: &ConversationId, kind: FileKind) -> Result<FileId> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "INSERT INTO ba_file_counters (conversation_id, kind, last) VALUES ($1, $2, 1)
                 ON CONFLICT (conversation_id, kind)
                 DO UPDATE SET last = ba_file_counters.last + 1
                 RETURNING last",
                &[&conversation.as_str(), &kind.as_str()],
            )
            .await
            .map_err(|e| not_found_or(e, conversation))?;
        let n = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        Ok(kind.id(n))
    }

    /// The private cache folder of `conversation`, created when missing; refused when the
    /// cache root is a link, or is owned or writable by another user.
    fn cache_folder(&self, conversation: &ConversationId) -> Result<PathBuf> {
        let root = &self.cache_dir;
        let shown = "the workspace cache";
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(|e| StorageError::io("creating", shown, e))?;
        let meta =
            std::fs::symlink_metadata(root).map_err(|e| StorageError::io("checking", shown, e))?;
        let foreign = current_uid().is_some_and(|uid| uid != meta.uid());
        if !meta.is_dir() || foreign || meta.permissions().mode() & 0o022 != 0 {
            return Err(StorageError::invalid(
                "the workspace cache folder",
                "it is not a private folder of this user",
            ));
        }
        let folder = root.join(conversation.as_str());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .map_err(|e| StorageError::io("creating", shown, e))?;
        Ok(folder)
    }

    async fn store(
        &self,
        conversation: &ConversationId,
        prepared: &Prepared,
        file_id: &FileId,
        body: &mut (dyn AsyncRead + Send + Unpin),
    ) -> Result<FileMeta> {
        let id = file_id.as_str();
        let conv = conversation.as_str();
        let mut client = self.client().await?;
        let others = |row: tokio_postgres::Row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        const OTHERS: &str = "SELECT COALESCE(SUM(size), 0)::BIGINT FROM ba_files
                              WHERE conversation_id = $1 AND file_id <> $2";
        let mut check = SizeCheck {
            limits: self.limits,
            others: others(client.query_one(OTHERS, &[&conv, &id]).await.map_err(db)?),
            name: prepared.name.clone(),
            conversation: conv.to_owned(),
        };
        check.check(0)?;
        let attributes =
            serde_json::to_string(&prepared.attributes).map_err(|e| StorageError::Format {
                what: format!("attributes of `{id}`"),
                message: e.to_string(),
            })?;
        let now = self.clock.now_ms();
        let tx = client.transaction().await.map_err(db)?;
        tx.execute(
            "INSERT INTO ba_files (conversation_id, file_id, kind, name, media_type, size,
                                   description, created_ms, sha256, attributes)
             VALUES ($1, $2, $3, $4, $5, 0, $6, $7, '', $8::TEXT::JSONB)
             ON CONFLICT (conversation_id, file_id) DO UPDATE SET
                 kind = EXCLUDED.kind, name = EXCLUDED.name, media_type = EXCLUDED.media_type,
                 size = 0, description = EXCLUDED.description,
                 created_ms = EXCLUDED.created_ms, sha256 = '',
                 attributes = EXCLUDED.attributes",
            &[
                &conv,
                &id,
                &prepared.kind.as_str(),
                &prepared.name,
                &prepared.media_type,
                &prepared.description,
                &now,
                &attributes,
            ],
        )
        .await
        .map_err(|e| not_found_or(e, conversation))?;
        tx.execute(
            "DELETE FROM ba_file_chunks WHERE conversation_id = $1 AND file_id = $2",
            &[&conv, &id],
        )
        .await
        .map_err(db)?;
        let insert = tx
            .prepare(
                "INSERT INTO ba_file_chunks (conversation_id, file_id, n, data)
                 VALUES ($1, $2, $3, $4)",
            )
            .await
            .map_err(db)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; CHUNK];
        let (mut size, mut n) = (0u64, 0i32);
        loop {
            let filled = fill(body, &mut buf, &check.name).await?;
            if filled == 0 {
                break;
            }
            size += filled as u64;
            check.check(size)?;
            let chunk = buf.get(..filled).unwrap_or_default();
            hasher.update(chunk);
            tx.execute(&insert, &[&conv, &id, &n, &chunk])
                .await
                .map_err(db)?;
            n += 1;
            if filled < CHUNK {
                break;
            }
        }
        let sha256 = hex(&hasher.finalize());
        // One final check at a time per conversation, against what the others committed.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('ba-files:' || $1))",
            &[&conv],
        )
        .await
        .map_err(db)?;
        check.others = others(tx.query_one(OTHERS, &[&conv, &id]).await.map_err(db)?);
        check.check(size)?;
        tx.execute(
            "UPDATE ba_files SET size = $3, sha256 = $4
             WHERE conversation_id = $1 AND file_id = $2",
            &[&conv, &id, &to_i64(size), &sha256],
        )
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(prepared.meta(file_id.clone(), size, sha256, now))
    }

    /// Copies `id` into the cache folder as `<id>-<sha256>` unless it is there already; removes
    /// older copies of the file.
    async fn cache(&self, conversation: &ConversationId, id: &str) -> Result<PathBuf> {
        let no_file = || StorageError::NoFile {
            conversation: conversation.to_string(),
            id: id.to_owned(),
        };
        let meta = self.meta(conversation, id).await?.ok_or_else(no_file)?;
        let (this, c) = (self.clone(), conversation.clone());
        let folder = crate::file::blocking(move || this.cache_folder(&c)).await?;
        let path = folder.join(format!("{id}-{}", meta.sha256));
        if tokio::fs::metadata(&path)
            .await
            .is_ok_and(|m| m.is_file() && m.len() == meta.size)
        {
            return Ok(path);
        }
        let content = self.open(conversation, id).await?;
        let path = folder.join(format!("{id}-{}", content.meta.sha256));
        let tmp = folder.join(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let copied = copy_checked(content, &tmp).await;
        let result = match copied {
            Ok(()) => tokio::fs::rename(&tmp, &path)
                .await
                .map_err(|e| StorageError::io("writing", "the workspace cache", e)),
            Err(e) => Err(e),
        };
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result?;
        let keep = path.clone();
        let prefix = format!("{id}-");
        let _ = crate::file::blocking(move || {
            for item in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
                let name = item.file_name().to_string_lossy().into_owned();
                if name
                    .strip_prefix(&prefix)
                    .is_some_and(|sha| sha.len() == 64)
                    && item.path() != keep
                {
                    let _ = std::fs::remove_file(item.path());
                }
            }
            Ok(())
        })
        .await;
        Ok(path)
    }
}

/// `NotFound` for a foreign-key violation (the conversation is gone), else a database error.
fn not_found_or(e: tokio_postgres::Error, conversation: &ConversationId) -> StorageError {
    if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) {
        StorageError::NotFound {
            id: conversation.to_string(),
        }
    } else {
        db(e)
    }
}

/// Reads from `body` until `buf` is full or the body ends; returns how much was read.
async fn fill(
    body: &mut (dyn AsyncRead + Send + Unpin),
    buf: &mut [u8],
    name: &str,
) -> Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|r| !r.is_empty()) {
        let n = body
            .read(rest)
            .await
            .map_err(|e| StorageError::io("reading the content of", name, e))?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// Writes `content` to `tmp`, durably, and checks it against its SHA-256.
async fn copy_checked(mut content: FileContent, tmp: &Path) -> Result<()> {
    let shown = "the workspace cache";
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .await
        .map_err(|e| StorageError::io("writing", shown, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = content
            .reader
            .read(&mut buf)
            .await
            .map_err(|e| StorageError::io("reading", content.meta.name.clone(), e))?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        file.write_all(chunk)
            .await
            .map_err(|e| StorageError::io("writing", shown, e))?;
    }
    file.flush()
        .await
        .map_err(|e| StorageError::io("writing", shown, e))?;
    file.sync_all()
        .await
        .map_err(|e| StorageError::io("writing", shown, e))?;
    if hex(&hasher.finalize()) != content.meta.sha256 {
        return Err(StorageError::Format {
            what: format!("file `{}`", content.meta.id),
            message: "its content does not match its SHA-256".to_owned(),
        });
    }
    Ok(())
}

/// Reads the chunks a streaming task sends; a stream that ends short of the file's size is an
/// error, never a quietly shorter file.
struct ChunkReader {
    chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
    current: Vec<u8>,
    pos: usize,
    remaining: u64,
}

impl AsyncRead for ChunkReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let this = &mut *self;
            if let Some(rest) = this.current.get(this.pos..).filter(|r| !r.is_empty()) {
                let n = rest.len().min(buf.remaining());
                buf.put_slice(rest.get(..n).unwrap_or_default());
                this.pos += n;
                this.remaining = this.remaining.saturating_sub(n as u64);
                return Poll::Ready(Ok(()));
            }
            match this.chunks.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(chunk))) => {
                    this.current = chunk;
                    this.pos = 0;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) if this.remaining > 0 => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended before its size",
                    )));
                }
                Poll::Ready(None) => return Poll::Ready(Ok(())),
            }
        }
    }
}

/// Sends the metadata of `id`, then its chunks, from one read-only snapshot.
async fn stream_file(
    pool: Pool,
    conversation: String,
    id: String,
    meta_to: oneshot::Sender<Result<Option<FileMeta>>>,
    chunks: mpsc::Sender<io::Result<Vec<u8>>>,
) {
    let mut meta_to = Some(meta_to);
    let result: Result<()> = async {
        let mut client = pool.get().await.map_err(db)?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db)?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM ba_files
                     WHERE conversation_id = $1 AND file_id = $2"
                ),
                &[&conversation, &id],
            )
            .await
            .map_err(db)?;
        let meta = row.as_ref().map(file_of).transpose()?;
        let found = meta.is_some();
        if let Some(to) = meta_to.take() {
            let _ = to.send(Ok(meta));
        }
        if !found {
            return Ok(());
        }
        let select = tx
            .prepare(
                "SELECT data FROM ba_file_chunks
                 WHERE conversation_id = $1 AND file_id = $2 ORDER BY n",
            )
            .await
            .map_err(db)?;
        let portal = tx.bind(&select, &[&conversation, &id]).await.map_err(db)?;
        loop {
            let rows = tx.query_portal(&portal, CHUNKS_A_FETCH).await.map_err(db)?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                if chunks.send(Ok(row.get::<_, Vec<u8>>(0))).await.is_err() {
                    // The reader was dropped: nobody wants the rest.
                    return Ok(());
                }
            }
        }
        tx.commit().await.map_err(db)
    }
    .await;
    if let Err(e) = result {
        match meta_to.take() {
            Some(to) => {
                let _ = to.send(Err(e));
            }
            None => {
                let _ = chunks.send(Err(io::Error::other(e.to_string()))).await;
            }
        }
    }
}

#[async_trait]
impl Workspace for PostgresWorkspace {
    async fn put(
        &self,
        conversation: &ConversationId,
        file: NewFile,
        body: &mut (dyn AsyncRead + Send + Unpin),
    ) -> Result<FileMeta> {
        let prepared = Prepared::new(file)?;
        {
            let client = self.client().await?;
            let exists = client
                .query_opt(
                    "SELECT 1 FROM ba_conversations WHERE id = $1",
                    &[&conversation.as_str()],
                )
                .await
                .map_err(db)?;
            if exists.is_none() {
                return Err(StorageError::NotFound {
                    id: conversation.to_string(),
                });
            }
        }
        let id = match &prepared.id {
            Some(id) => id.clone(),
            None => self.claim(conversation, prepared.kind).await?,
        };
        self.store(conversation, &prepared, &id, body).await
    }

    async fn list(&self, conversation: &ConversationId) -> Result<Vec<FileMeta>> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("SELECT {FILE_COLUMNS} FROM ba_files WHERE conversation_id = $1"),
                &[&conversation.as_str()],
            )
            .await
            .map_err(db)?;
        let mut files = rows.iter().map(file_of).collect::<Result<Vec<_>>>()?;
        crate::workspace::sort_files(&mut files);
        Ok(files)
    }

    /// The rows and chunks are copied in one transaction; the kind's counter of `to` is
    /// moved past the id.
    async fn copy_file(
        &self,
        from: &ConversationId,
        to: &ConversationId,
        id: &str,
    ) -> Result<FileMeta> {
        check_file_id(id)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        if let Some(there) = tx
            .query_opt(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM ba_files
                     WHERE conversation_id = $1 AND file_id = $2"
                ),
                &[&to.as_str(), &id],
            )
            .await
            .map_err(db)?
        {
            return file_of(&there);
        }
        let row = tx
            .query_opt(
                &format!(
                    "INSERT INTO ba_files (conversation_id, file_id, kind, name, media_type, size,
                        description, created_ms, sha256, attributes)
                     SELECT $2, file_id, kind, name, media_type, size, description, created_ms,
                        sha256, attributes
                     FROM ba_files WHERE conversation_id = $1 AND file_id = $3
                     RETURNING {FILE_COLUMNS}"
                ),
                &[&from.as_str(), &to.as_str(), &id],
            )
            .await
            .map_err(|e| not_found_or(e, to))?
            .ok_or_else(|| StorageError::NoFile {
                conversation: from.to_string(),
                id: id.to_owned(),
            })?;
        let meta = file_of(&row)?;
        tx.execute(
            "INSERT INTO ba_file_chunks (conversation_id, file_id, n, data)
             SELECT $2, file_id, n, data FROM ba_file_chunks
             WHERE conversation_id = $1 AND file_id = $3",
            &[&from.as_str(), &to.as_str(), &id],
        )
        .await
        .map_err(db)?;
        if let Some(n) = meta.kind.number_of(id) {
            tx.execute(
                "INSERT INTO ba_file_counters (conversation_id, kind, last) VALUES ($1, $2, $3)
                 ON CONFLICT (conversation_id, kind)
                 DO UPDATE SET last = GREATEST(ba_file_counters.last, EXCLUDED.last)",
                &[
                    &to.as_str(),
                    &meta.kind.as_str(),
                    &i64::try_from(n).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(meta)
    }

    async fn meta(&self, conversation: &ConversationId, id: &str) -> Result<Option<FileMeta>> {
        check_file_id(id)?;
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "SELECT {FILE_COLUMNS} FROM ba_files
                     WHERE conversation_id = $1 AND file_id = $2"
                ),
                &[&conversation.as_str(), &id],
            )
            .await
            .map_err(db)?;
        row.as_ref().map(file_of).transpose()
    }

    async fn open(&self, conversation: &ConversationId, id: &str) -> Result<FileContent> {
        check_file_id(id)?;
        let (meta_to, meta_from) = oneshot::channel();
        let (chunks_to, chunks) = mpsc::channel(1);
        tokio::spawn(stream_file(
            self.pool.clone(),
            conversation.to_string(),
            id.to_owned(),
            meta_to,
            chunks_to,
        ));
        let meta = meta_from
            .await
            .map_err(|e| StorageError::Task(e.to_string()))??
            .ok_or_else(|| StorageError::NoFile {
                conversation: conversation.to_string(),
                id: id.to_owned(),
            })?;
        let reader = ChunkReader {
            chunks,
            current: Vec::new(),
            pos: 0,
            remaining: meta.size,
        };
        Ok(FileContent {
            meta,
            reader: Box::new(reader),
        })
    }

    async fn local_path(&self, conversation: &ConversationId, id: &str) -> Result<PathBuf> {
        check_file_id(id)?;
        self.cache(conversation, id).await
    }

    async fn remove(&self, conversation: &ConversationId, id: &str) -> Result<bool> {
        check_file_id(id)?;
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM ba_files WHERE conversation_id = $1 AND file_id = $2",
                &[&conversation.as_str(), &id],
            )
            .await
            .map_err(db)?;
        Ok(n > 0)
    }

    async fn remove_all(&self, conversation: &ConversationId) -> Result<u64> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM ba_files WHERE conversation_id = $1",
                &[&conversation.as_str()],
            )
            .await
            .map_err(db)?;
        self.forget_cached(conversation.as_str());
        Ok(n)
    }

    async fn owners(&self) -> Result<Vec<String>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT conversation_id FROM ba_files
                 UNION SELECT conversation_id FROM ba_file_counters ORDER BY 1",
                &[],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn limits(&self) -> WorkspaceLimits {
        self.limits
    }
}
