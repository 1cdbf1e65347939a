//! [`FileWorkspace`]: the files of each conversation in a folder beside its log.
//!
//! ```text
//! conversations/<id>/files/<file_id>          the content
//! conversations/<id>/files/<file_id>.json     its metadata (a FileMeta)
//! conversations/<id>/files/.claims/<file_id>  every assigned id ever given (kept by removes)
//! conversations/<id>/files/.lock              the lock every commit and remove is made under
//! conversations/<id>/files/.tmp-*             content being written
//! ```
//!
//! A put streams the body into a temporary file in the same folder (hashing it and checking the
//! limits as it goes), `fsync`s it, and then, under an exclusive `flock` on `.lock`, checks the
//! conversation limit against the files present, renames the content into place and writes the
//! metadata atomically. A file is listed once its metadata is there, so a reader never sees
//! half a file. Assigned ids are claimed with `create_new` on a claim file, so two processes
//! never share an id and no id is given twice. Errors name paths relative to the store's root.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use super::blocking;
use super::lock::FileLock;
use crate::atomic::{sync_dir, write_atomic};
use crate::error::{Result, StorageError};
use crate::id::{ConversationId, check_name};
use crate::store::SharedClock;
use crate::workspace::{
    FileContent, FileId, FileKind, FileMeta, NewFile, Prepared, SizeCheck, Workspace,
    WorkspaceLimits, check_file_id, hex, sort_files,
};

/// How much of a body a put reads at a time.
const BUFFER: usize = 64 << 10;

/// The workspaces of a [`crate::FileStore`]'s conversations, under its `conversations/`
/// folder. Made by the store; reach it with [`crate::ConversationStore::workspace`].
#[derive(Debug, Clone)]
pub struct FileWorkspace {
    dir: PathBuf,
    clock: SharedClock,
    limits: WorkspaceLimits,
}

/// The folder of one conversation's files, and how errors name what is in it.
#[derive(Debug, Clone)]
struct Folder {
    path: PathBuf,
    conversation: String,
}

impl Folder {
    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// `conversations/<id>/files/<name>`: a path relative to the store, for error messages.
    fn shown(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("conversations/{}/files/{name}", self.conversation))
    }

    fn meta_name(id: &str) -> String {
        format!("{id}.json")
    }

    /// The metadata of `id`; `None` when there is none (or only a claim of it).
    fn read_meta(&self, id: &str) -> Result<Option<FileMeta>> {
        let name = Self::meta_name(id);
        let bytes = match std::fs::read(self.join(&name)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io("reading", self.shown(&name), e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StorageError::Format {
                what: self.shown(&name).display().to_string(),
                message: e.to_string(),
            })
    }

    /// Every file with metadata, by kind then id; a damaged metadata file is skipped with a
    /// warning in the log, so one bad file does not hide the others.
    fn list(&self) -> Result<Vec<FileMeta>> {
        let read = match std::fs::read_dir(&self.path) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StorageError::io("listing", self.shown(""), e)),
        };
        let mut out = Vec::new();
        for item in read {
            let item = item.map_err(|e| StorageError::io("listing", self.shown(""), e))?;
            let name = item.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if check_file_id(id).is_err() {
                continue;
            }
            match self.read_meta(id) {
                Ok(Some(meta)) => out.push(meta),
                Ok(None) => {}
                Err(e) => tracing::warn!("skipping a file of the workspace: {e}"),
            }
        }
        sort_files(&mut out);
        Ok(out)
    }

    /// What the files other than `except` hold together.
    fn total_except(&self, except: Option<&str>) -> Result<u64> {
        Ok(self
            .list()?
            .iter()
            .filter(|f| Some(f.id.as_str()) != except)
            .map(|f| f.size)
            .sum())
    }

    fn claims(&self) -> PathBuf {
        self.path.join(".claims")
    }

    /// Claims the next free id of `kind` with `create_new`, starting after the highest one
    /// claimed so far.
    fn claim(&self, kind: FileKind) -> Result<FileId> {
        let claims = self.claims();
        let read = std::fs::read_dir(&claims)
            .map_err(|e| StorageError::io("listing", self.shown(".claims"), e))?;
        let highest = read
            .flatten()
            .filter_map(|item| kind.number_of(item.file_name().to_str()?))
            .max()
            .unwrap_or(0);
        for n in highest + 1.. {
            let id = kind.id(n);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(claims.join(id.as_str()))
            {
                Ok(_) => {
                    sync_dir(&claims)?;
                    return Ok(id);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(StorageError::io(
                        "claiming",
                        self.shown(&format!(".claims/{id}")),
                        e,
                    ));
                }
            }
        }
        Err(StorageError::invalid(
            format!("{kind} file of `{}`", self.conversation),
            "no free id",
        ))
    }

    /// Records an id given outside [`Folder::claim`] (a migrated file) as claimed.
    fn mark_claimed(&self, id: &str) -> Result<()> {
        let path = self.claims().join(id);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(StorageError::io(
                "claiming",
                self.shown(&format!(".claims/{id}")),
                e,
            )),
        }
    }

    /// Runs `f` under the exclusive lock of the folder.
    fn locked<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let path = self.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StorageError::io("opening", self.shown(".lock"), e))?;
        let _lock = FileLock::exclusive(&file, &self.shown(".lock"))?;
        f()
    }

    fn remove_quietly(&self, name: &str) -> Result<bool> {
        match std::fs::remove_file(self.join(name)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StorageError::io("removing", self.shown(name), e)),
        }
    }

    /// Removes `id` (metadata first, so it is never listed without content); `false` when it
    /// had no metadata.
    fn remove(&self, id: &str) -> Result<bool> {
        let existed = self.remove_quietly(&Self::meta_name(id))?;
        self.remove_quietly(id)?;
        Ok(existed)
    }
}

impl FileWorkspace {
    /// The workspaces under `dir` (a store's `conversations/` folder).
    pub(super) fn new(dir: PathBuf, clock: SharedClock, limits: WorkspaceLimits) -> Self {
        Self { dir, clock, limits }
    }

    fn folder(&self, conversation: &ConversationId) -> Folder {
        Folder {
            path: self.dir.join(conversation.as_str()).join("files"),
            conversation: conversation.to_string(),
        }
    }

    fn conversation_exists(&self, conversation: &str) -> bool {
        self.dir.join(format!("{conversation}.jsonl")).is_file()
    }

    /// Moves the written content into place as `id` and writes its metadata, under the
    /// folder's lock; with `check`, the conversation limit is checked against the files present
    /// first. The temporary file is gone when this returns.
    fn commit(
        &self,
        folder: &Folder,
        prepared: &Prepared,
        id: FileId,
        written: Written,
        check: Option<SizeCheck>,
    ) -> Result<FileMeta> {
        let Written { tmp, size, sha256 } = written;
        let tmp = tmp.as_path();
        let result = folder.locked(|| {
            if let Some(mut check) = check {
                check.others = folder.total_except(Some(&id))?;
                check.check(size)?;
            }
            let meta = prepared.meta(id.clone(), size, sha256, self.clock.now_ms());
            std::fs::rename(tmp, folder.join(&id))
                .map_err(|e| StorageError::io("writing", folder.shown(&id), e))?;
            let json = serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
                what: format!("metadata of `{id}`"),
                message: e.to_string(),
            })?;
            write_atomic(&folder.join(&Folder::meta_name(&id)), &json)
                .map_err(|e| relative(e, folder, &Folder::meta_name(&id)))?;
            Ok(meta)
        });
        let _ = std::fs::remove_file(tmp);
        let meta = result?;
        if !self.conversation_exists(&folder.conversation) {
            // Deleted while the content streamed in: leave nothing of it behind.
            let _ = std::fs::remove_dir_all(self.dir.join(&folder.conversation));
            return Err(StorageError::NotFound {
                id: folder.conversation.clone(),
            });
        }
        Ok(meta)
    }

    /// The metadata of `id` of `conversation`, read in place (blocking).
    pub(super) fn existing(
        &self,
        conversation: &ConversationId,
        id: &str,
    ) -> Result<Option<FileMeta>> {
        check_file_id(id)?;
        self.folder(conversation).read_meta(id)
    }

    /// Takes the file at `source` into the workspace of `conversation` as `id`, keeping the
    /// metadata in `prepared` and `created_ms` (the migration of the previous layout). No
    /// limit applies. An `id` already there is left as it is and returned.
    pub(super) fn adopt(
        &self,
        conversation: &ConversationId,
        prepared: &Prepared,
        id: &str,
        source: &Path,
        created_ms: i64,
    ) -> Result<FileMeta> {
        let checked = check_file_id(id)?;
        let folder = self.folder(conversation);
        std::fs::create_dir_all(folder.claims())
            .map_err(|e| StorageError::io("creating", folder.shown(".claims"), e))?;
        if let Some(meta) = folder.read_meta(id)? {
            return Ok(meta);
        }
        if prepared.kind.assigns_ids() {
            folder.mark_claimed(id)?;
        }
        let tmp = folder.join(&format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let copied = (|| {
            let mut input = File::open(source)?;
            let mut output = HashingWriter {
                file: File::create(&tmp)?,
                hasher: Sha256::new(),
            };
            let size = io::copy(&mut input, &mut output)?;
            output.file.sync_all()?;
            Ok::<_, io::Error>((size, hex(&output.hasher.finalize())))
        })();
        let (size, sha256) = match copied {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(StorageError::io("copying into", folder.shown(id), e));
            }
        };
        let written = Written { tmp, size, sha256 };
        let mut meta = self.commit(&folder, prepared, checked, written, None)?;
        if meta.created_ms != created_ms {
            meta.created_ms = created_ms;
            let json = serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
                what: format!("metadata of `{id}`"),
                message: e.to_string(),
            })?;
            write_atomic(&folder.join(&Folder::meta_name(id)), &json)
                .map_err(|e| relative(e, &folder, &Folder::meta_name(id)))?;
        }
        Ok(meta)
    }

    /// Streams `body` into `tmp`; returns its size and SHA-256.
    async fn stream(
        folder: &Folder,
        tmp: &Path,
        body: &mut (dyn AsyncRead + Send + Unpin),
        check: &SizeCheck,
    ) -> Result<(u64, String)> {
        let write_err = |e| StorageError::io("writing", folder.shown(".tmp"), e);
        let mut file = tokio::fs::File::create(tmp).await.map_err(write_err)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; BUFFER];
        let mut size = 0u64;
        loop {
            let n = body
                .read(&mut buf)
                .await
                .map_err(|e| StorageError::io("reading the content of", check.name.clone(), e))?;
            if n == 0 {
                break;
            }
            size += n as u64;
            check.check(size)?;
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            file.write_all(chunk).await.map_err(write_err)?;
        }
        file.flush().await.map_err(write_err)?;
        file.sync_all().await.map_err(write_err)?;
        Ok((size, hex(&hasher.finalize())))
    }
}

/// An I/O error of `write_atomic` renamed to the path relative to the store.
fn relative(e: StorageError, folder: &Folder, name: &str) -> StorageError {
    match e {
        StorageError::Io { action, source, .. } => StorageError::Io {
            action,
            path: folder.shown(name),
            source,
        },
        other => other,
    }
}

/// Content written to a temporary file of the folder, not yet in place.
struct Written {
    tmp: PathBuf,
    size: u64,
    sha256: String,
}

/// Hashes what it writes.
struct HashingWriter {
    file: File,
    hasher: Sha256,
}

impl io::Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[async_trait]
impl Workspace for FileWorkspace {
    async fn put(
        &self,
        conversation: &ConversationId,
        file: NewFile,
        body: &mut (dyn AsyncRead + Send + Unpin),
    ) -> Result<FileMeta> {
        let prepared = Prepared::new(file)?;
        let folder = self.folder(conversation);
        let (this, f, p) = (self.clone(), folder.clone(), prepared.clone());
        let (id, others) = blocking(move || {
            if !this.conversation_exists(&f.conversation) {
                return Err(StorageError::NotFound {
                    id: f.conversation.clone(),
                });
            }
            std::fs::create_dir_all(f.claims())
                .map_err(|e| StorageError::io("creating", f.shown(".claims"), e))?;
            let id = match p.id {
                Some(id) => id,
                None => f.claim(p.kind)?,
            };
            let others = f.total_except(Some(&id))?;
            Ok((id, others))
        })
        .await?;
        let check = SizeCheck {
            limits: self.limits,
            others,
            name: prepared.name.clone(),
            conversation: conversation.to_string(),
        };
        let tmp = folder.join(&format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        let (size, sha256) = match Self::stream(&folder, &tmp, body, &check).await {
            Ok(done) => done,
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(e);
            }
        };
        let this = self.clone();
        let written = Written { tmp, size, sha256 };
        blocking(move || this.commit(&folder, &prepared, id, written, Some(check))).await
    }

    async fn list(&self, conversation: &ConversationId) -> Result<Vec<FileMeta>> {
        let folder = self.folder(conversation);
        blocking(move || folder.list()).await
    }

    async fn copy_file(
        &self,
        from: &ConversationId,
        to: &ConversationId,
        id: &str,
    ) -> Result<FileMeta> {
        check_file_id(id)?;
        if !self.conversation_exists(to.as_str()) {
            return Err(StorageError::NotFound { id: to.to_string() });
        }
        let (src, dst, id) = (self.folder(from), self.folder(to), id.to_owned());
        let from = from.to_string();
        blocking(move || {
            let meta = src.read_meta(&id)?.ok_or_else(|| StorageError::NoFile {
                conversation: from.clone(),
                id: id.clone(),
            })?;
            std::fs::create_dir_all(dst.claims())
                .map_err(|e| StorageError::io("creating", dst.shown(".claims"), e))?;
            dst.locked(|| {
                if let Some(there) = dst.read_meta(&id)? {
                    return Ok(there);
                }
                if meta.kind.assigns_ids() {
                    dst.mark_claimed(&id)?;
                }
                let tmp = dst.join(&format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
                let linked = std::fs::hard_link(src.join(&id), &tmp)
                    .or_else(|_| std::fs::copy(src.join(&id), &tmp).map(|_| ()));
                if let Err(e) = linked.and_then(|()| std::fs::rename(&tmp, dst.join(&id))) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(StorageError::io("linking into", dst.shown(&id), e));
                }
                let json = serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
                    what: format!("metadata of `{id}`"),
                    message: e.to_string(),
                })?;
                write_atomic(&dst.join(&Folder::meta_name(&id)), &json)
                    .map_err(|e| relative(e, &dst, &Folder::meta_name(&id)))?;
                Ok(meta)
            })
        })
        .await
    }

    async fn meta(&self, conversation: &ConversationId, id: &str) -> Result<Option<FileMeta>> {
        check_file_id(id)?;
        let (folder, id) = (self.folder(conversation), id.to_owned());
        blocking(move || folder.read_meta(&id)).await
    }

    async fn open(&self, conversation: &ConversationId, id: &str) -> Result<FileContent> {
        let no_file = || StorageError::NoFile {
            conversation: conversation.to_string(),
            id: id.to_owned(),
        };
        let meta = self.meta(conversation, id).await?.ok_or_else(no_file)?;
        let folder = self.folder(conversation);
        let file = match tokio::fs::File::open(folder.join(id)).await {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(no_file()),
            Err(e) => return Err(StorageError::io("opening", folder.shown(id), e)),
        };
        Ok(FileContent {
            meta,
            reader: Box::new(file),
        })
    }

    async fn local_path(&self, conversation: &ConversationId, id: &str) -> Result<PathBuf> {
        match self.meta(conversation, id).await? {
            Some(_) => Ok(self.folder(conversation).join(id)),
            None => Err(StorageError::NoFile {
                conversation: conversation.to_string(),
                id: id.to_owned(),
            }),
        }
    }

    async fn remove(&self, conversation: &ConversationId, id: &str) -> Result<bool> {
        check_file_id(id)?;
        let (folder, id) = (self.folder(conversation), id.to_owned());
        blocking(move || {
            if !folder.path.is_dir() {
                return Ok(false);
            }
            let removed = folder.locked(|| folder.remove(&id))?;
            sync_dir(&folder.path).map_err(|e| relative(e, &folder, ""))?;
            Ok(removed)
        })
        .await
    }

    async fn remove_all(&self, conversation: &ConversationId) -> Result<u64> {
        let folder = self.folder(conversation);
        blocking(move || {
            if !folder.path.is_dir() {
                return Ok(0);
            }
            let removed = folder.locked(|| {
                let mut removed = 0;
                for meta in folder.list()? {
                    if folder.remove(&meta.id)? {
                        removed += 1;
                    }
                }
                Ok(removed)
            })?;
            sync_dir(&folder.path).map_err(|e| relative(e, &folder, ""))?;
            Ok(removed)
        })
        .await
    }

    async fn owners(&self) -> Result<Vec<String>> {
        let dir = self.dir.clone();
        blocking(move || {
            let read = std::fs::read_dir(&dir)
                .map_err(|e| StorageError::io("listing", "conversations", e))?;
            let mut out = Vec::new();
            for item in read {
                let item = item.map_err(|e| StorageError::io("listing", "conversations", e))?;
                let Ok(name) = item.file_name().into_string() else {
                    continue;
                };
                if check_name("conversation id", &name).is_ok()
                    && item.file_type().is_ok_and(|t| t.is_dir())
                {
                    out.push(name);
                }
            }
            out.sort();
            Ok(out)
        })
        .await
    }

    fn limits(&self) -> WorkspaceLimits {
        self.limits
    }
}
