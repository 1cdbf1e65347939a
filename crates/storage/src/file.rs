//! [`FileStore`]: the embedded backend. One append-only JSONL file per conversation, a metadata
//! file beside it, and an index that is only a cache of what the files say.
//!
//! Layout under the root:
//!
//! ```text
//! conversations/<id>.jsonl      {"seq":1,"at":<ms>,"entry":{…}} one record a line
//! conversations/<id>.meta.json  title, mode, parent, created (written atomically)
//! conversations/<id>.torn       torn tails moved aside by a later append
//! index.json                    cached last_seq / size / updated of every conversation
//! ```
//!
//! An append takes the in-process lock of the conversation, then an exclusive `flock` on its
//! file (so two processes never interleave lines), writes all its lines with one `write`, and
//! makes them durable before returning: with [`Durability::EveryAppend`] by its own `fsync`,
//! with [`Durability::GroupCommit`] by one `fsync` shared with every append written before it.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ba_protocol::log::LogEntry;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::{
    Appended, ConversationMeta, ConversationStore, Diagnostic, DiagnosticKind, ListPage, Loaded,
    MetaUpdate, NewConversation, Page, SharedClock, StoredEntry, SystemClock,
};

/// When an append reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Every append calls `fsync` before it returns.
    EveryAppend,
    /// Concurrent appends share one `fsync`: each append still returns only once its lines
    /// are on disk, but one flush covers everything written before it started.
    #[default]
    GroupCommit,
    /// No `fsync` (tests and throwaway stores): a crash of the machine may lose appends.
    OsBuffered,
}

/// Makes writes fail after a number of bytes, the way a full disk does (tests of the
/// no-space path without filling a disk), or cuts them into small `write` calls so that a
/// killed process leaves a torn line behind (crash tests). Clones share the budget.
#[derive(Debug, Clone)]
pub struct WriteFault {
    remaining: Arc<AtomicU64>,
    chunk: Option<usize>,
}

impl WriteFault {
    /// Writes fail once `bytes` more bytes have been written.
    pub fn fail_after(bytes: u64) -> Self {
        Self {
            remaining: Arc::new(AtomicU64::new(bytes)),
            chunk: None,
        }
    }

    /// Writes go out in `write` calls of at most `bytes` bytes (and never fail).
    pub fn chunked(bytes: usize) -> Self {
        Self {
            remaining: Arc::new(AtomicU64::new(u64::MAX)),
            chunk: Some(bytes.max(1)),
        }
    }

    /// Gives the disk `bytes` of room again.
    pub fn set_remaining(&self, bytes: u64) {
        self.remaining.store(bytes, Ordering::SeqCst);
    }

    fn write(&self, file: &mut impl io::Write, buf: &[u8]) -> io::Result<()> {
        let room = self.remaining.load(Ordering::SeqCst);
        let len = buf.len() as u64;
        if len <= room {
            self.remaining.fetch_sub(len, Ordering::SeqCst);
            if let Some(chunk) = self.chunk {
                for part in buf.chunks(chunk) {
                    file.write_all(part)?;
                }
                return Ok(());
            }
            return file.write_all(buf);
        }
        self.remaining.store(0, Ordering::SeqCst);
        // A real full disk often accepts part of a write before refusing the rest.
        let part = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        file.write_all(&buf[..part])?;
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "no space left on device (simulated)",
        ))
    }
}

/// Options of a [`FileStore`].
#[derive(Debug, Clone)]
pub struct FileStoreOptions {
    /// When appends reach the disk.
    pub durability: Durability,
    /// Simulated write failures.
    pub fault: Option<WriteFault>,
    /// The clock for `created`, `updated` and append times.
    pub clock: SharedClock,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            fault: None,
            clock: Arc::new(SystemClock),
        }
    }
}

impl FileStoreOptions {
    /// Sets the durability policy.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
    /// Sets a simulated write failure.
    pub fn with_fault(mut self, fault: WriteFault) -> Self {
        self.fault = Some(fault);
        self
    }
    /// Sets the clock.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }
}

/// The embedded conversation store. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct FileStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    dir: PathBuf,
    opts: FileStoreOptions,
    handles: Mutex<HashMap<String, Arc<Handle>>>,
    index: Mutex<BTreeMap<String, IndexRow>>,
}

/// In-process state of one conversation file.
#[derive(Debug, Default)]
struct Handle {
    state: Mutex<FileState>,
    /// Serialises `fsync` calls; holds the generation known to be on disk.
    synced: Mutex<u64>,
    written: AtomicU64,
}

#[derive(Debug, Default)]
struct FileState {
    file: Option<Arc<File>>,
    identity: (u64, u64),
    /// What the file looked like at the last scan: `None` when it must be rescanned.
    known: Option<Tail>,
}

/// What a scan of a log file learned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Tail {
    /// Length of the file covered (up to and including the last newline).
    len: u64,
    last_seq: u64,
    last_at: i64,
    /// Bytes after the last newline (a torn tail).
    torn: u64,
}

/// A cached line of the index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct IndexRow {
    #[serde(flatten)]
    meta: MetaFile,
    tail: Tail,
}

/// The `<id>.meta.json` file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct MetaFile {
    title: Option<String>,
    mode: Option<ba_protocol::log::Mode>,
    parent: Option<String>,
    created_ms: i64,
    updated_ms: i64,
}

#[derive(Serialize)]
struct LineOut<'a> {
    seq: u64,
    at: i64,
    entry: &'a LogEntry,
}

#[derive(Deserialize)]
struct LineIn {
    seq: u64,
    at: i64,
    entry: LogEntry,
}

#[derive(Deserialize)]
struct LineHead {
    seq: u64,
    at: i64,
    #[allow(dead_code)]
    entry: serde::de::IgnoredAny,
}

#[derive(Serialize, Deserialize)]
struct IndexFile {
    version: u32,
    conversations: BTreeMap<String, IndexRow>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Holds an exclusive `flock` until dropped.
struct FileLock<'a>(&'a File);

impl<'a> FileLock<'a> {
    fn exclusive(file: &'a File, path: &Path) -> Result<Self> {
        fs4::fs_std::FileExt::lock_exclusive(file)
            .map_err(|e| StorageError::io("locking", path, e))?;
        Ok(Self(file))
    }
    fn shared(file: &'a File, path: &Path) -> Result<Self> {
        fs4::fs_std::FileExt::lock_shared(file)
            .map_err(|e| StorageError::io("locking", path, e))?;
        Ok(Self(file))
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        let _ = fs4::fs_std::FileExt::unlock(self.0);
    }
}

impl FileStore {
    /// Opens (creating if needed) a store under `root` with default options.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with(root, FileStoreOptions::default())
    }

    /// Opens a store with `opts`. A missing or unreadable index is rebuilt from the files.
    pub fn open_with(root: impl Into<PathBuf>, opts: FileStoreOptions) -> Result<Self> {
        let root = root.into();
        let dir = root.join("conversations");
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::io("creating", &dir, e))?;
        let store = Self {
            inner: Arc::new(Inner {
                root,
                dir,
                opts,
                handles: Mutex::new(HashMap::new()),
                index: Mutex::new(BTreeMap::new()),
            }),
        };
        let index_path = store.index_path();
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
            Some(rows) => *lock(&store.inner.index) = rows,
            None => store.rebuild_index_blocking()?,
        }
        Ok(store)
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The JSONL file of a conversation.
    pub fn log_path(&self, id: &ConversationId) -> PathBuf {
        self.inner.dir.join(format!("{id}.jsonl"))
    }

    fn meta_path(&self, id: &str) -> PathBuf {
        self.inner.dir.join(format!("{id}.meta.json"))
    }

    fn torn_path(&self, id: &str) -> PathBuf {
        self.inner.dir.join(format!("{id}.torn"))
    }

    fn index_path(&self) -> PathBuf {
        self.inner.root.join("index.json")
    }

    fn now(&self) -> i64 {
        self.inner.opts.clock.now_ms()
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

    fn rebuild_index_blocking(&self) -> Result<()> {
        let mut rows = BTreeMap::new();
        for id in self.ids_on_disk()? {
            if let Some(row) = self.scan_row(&id, None)? {
                rows.insert(id, row);
            }
        }
        *lock(&self.inner.index) = rows;
        self.save_index()
    }

    fn ids_on_disk(&self) -> Result<Vec<String>> {
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
    fn scan_row(&self, id: &str, cached: Option<&IndexRow>) -> Result<Option<IndexRow>> {
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

    fn read_meta(&self, id: &str) -> Result<MetaFile> {
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

    fn write_meta(&self, id: &str, meta: &MetaFile) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(meta).map_err(|e| StorageError::Format {
            what: format!("metadata of `{id}`"),
            message: e.to_string(),
        })?;
        write_atomic(&self.meta_path(id), &bytes, true)
    }

    fn save_index(&self) -> Result<()> {
        let file = IndexFile {
            version: 1,
            conversations: lock(&self.inner.index).clone(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| StorageError::Format {
            what: "index".to_owned(),
            message: e.to_string(),
        })?;
        // The index is a cache rebuilt from the files, so it is not worth an fsync.
        write_atomic(&self.index_path(), &bytes, false)
    }

    fn handle(&self, id: &str) -> Arc<Handle> {
        lock(&self.inner.handles)
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    fn row(&self, id: &str) -> Result<IndexRow> {
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

    fn meta_of(id: &str, row: &IndexRow) -> ConversationMeta {
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

    fn create_blocking(
        &self,
        id: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let path = self.log_path(id);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file
                .sync_all()
                .map_err(|e| StorageError::io("creating", &path, e))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StorageError::AlreadyExists { id: id.to_string() });
            }
            Err(e) => return Err(StorageError::io("creating", path, e)),
        }
        let now = self.now();
        let meta = MetaFile {
            title: new.title,
            mode: new.mode,
            parent: new.parent,
            created_ms: now,
            updated_ms: now,
        };
        self.write_meta(id.as_str(), &meta)?;
        sync_dir(&self.inner.dir)?;
        let row = IndexRow {
            meta,
            tail: Tail::default(),
        };
        lock(&self.inner.index).insert(id.to_string(), row.clone());
        self.save_index()?;
        Ok(Self::meta_of(id.as_str(), &row))
    }

    fn append_blocking(
        &self,
        id: &ConversationId,
        entries: &[LogEntry],
        expect_last: Option<u64>,
    ) -> Result<Appended> {
        if entries.is_empty() {
            return Err(StorageError::invalid(
                format!("append to `{id}`"),
                "the batch holds no entries",
            ));
        }
        let path = self.log_path(id);
        let handle = self.handle(id.as_str());
        let mut state = lock(&handle.state);
        let file = open_current(&mut state, &path, id)?;
        let _flock = FileLock::exclusive(&file, &path)?;
        let len = file
            .metadata()
            .map_err(|e| StorageError::io("reading", &path, e))?
            .len();
        let mut tail = match state.known {
            Some(t) if t.len + t.torn == len => t,
            Some(t) if t.len < len => scan_tail(&file, &path, t)?,
            _ => scan_tail(&file, &path, Tail::default())?,
        };
        if tail.torn > 0 {
            self.quarantine(&file, &path, id.as_str(), &mut tail)?;
        }
        state.known = Some(tail);
        if let Some(expected) = expect_last
            && expected != tail.last_seq
        {
            return Err(StorageError::SequenceConflict {
                id: id.to_string(),
                expected,
                actual: tail.last_seq,
            });
        }
        let at = self.now();
        let mut buf = Vec::with_capacity(256 * entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let line = LineOut {
                seq: tail.last_seq + 1 + i as u64,
                at,
                entry,
            };
            serde_json::to_writer(&mut buf, &line).map_err(|e| StorageError::Format {
                what: format!("entry `{}` of `{id}`", entry.id),
                message: e.to_string(),
            })?;
            buf.push(b'\n');
        }
        let mut writer = &*file;
        let written = match &self.inner.opts.fault {
            Some(fault) => fault.write(&mut writer, &buf),
            None => writer.write_all(&buf),
        };
        if let Err(e) = written {
            // Take back whatever part of the batch reached the file, so the log stays whole
            // lines and the failed batch is not half-applied.
            if file.set_len(tail.len).is_err() {
                state.known = None;
            }
            return Err(StorageError::io("appending to", path, e));
        }
        let appended = Appended {
            first_seq: tail.last_seq + 1,
            last_seq: tail.last_seq + entries.len() as u64,
        };
        state.known = Some(Tail {
            len: tail.len + buf.len() as u64,
            last_seq: appended.last_seq,
            last_at: at,
            torn: 0,
        });
        let generation = handle.written.fetch_add(1, Ordering::SeqCst) + 1;
        match self.inner.opts.durability {
            Durability::EveryAppend => {
                file.sync_data()
                    .map_err(|e| StorageError::io("syncing", &path, e))?;
            }
            Durability::GroupCommit => {
                drop(_flock);
                drop(state);
                let mut synced = lock(&handle.synced);
                if *synced < generation {
                    // Everything written so far rides on this one flush.
                    let target = handle.written.load(Ordering::SeqCst);
                    file.sync_data()
                        .map_err(|e| StorageError::io("syncing", &path, e))?;
                    *synced = target;
                }
            }
            Durability::OsBuffered => {}
        }
        Ok(appended)
    }

    /// Moves a torn tail into the `.torn` file and cuts it from the log, so the next line
    /// starts on a line of its own and the torn bytes are kept for inspection.
    fn quarantine(&self, file: &File, path: &Path, id: &str, tail: &mut Tail) -> Result<()> {
        let mut torn = vec![0u8; usize::try_from(tail.torn).unwrap_or(0)];
        let mut reader = file;
        reader
            .seek(SeekFrom::Start(tail.len))
            .and_then(|_| reader.read_exact(&mut torn))
            .map_err(|e| StorageError::io("reading", path, e))?;
        let torn_path = self.torn_path(id);
        let mut side = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&torn_path)
            .map_err(|e| StorageError::io("opening", &torn_path, e))?;
        torn.push(b'\n');
        side.write_all(&torn)
            .and_then(|()| side.sync_all())
            .map_err(|e| StorageError::io("writing", &torn_path, e))?;
        file.set_len(tail.len)
            .and_then(|()| file.sync_all())
            .map_err(|e| StorageError::io("truncating", path, e))?;
        tracing::warn!(
            conversation = id,
            bytes = tail.torn,
            "torn tail moved to {}",
            torn_path.display()
        );
        tail.torn = 0;
        Ok(())
    }

    fn load_blocking(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
        let path = self.log_path(id);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StorageError::NotFound { id: id.to_string() });
            }
            Err(e) => return Err(StorageError::io("opening", path, e)),
        };
        let bytes = {
            // A shared lock waits out an append in progress, so it is not taken for a torn tail.
            let _flock = FileLock::shared(&file, &path)?;
            let mut bytes = Vec::new();
            (&file)
                .read_to_end(&mut bytes)
                .map_err(|e| StorageError::io("reading", &path, e))?;
            bytes
        };
        let mut loaded = parse_log(&bytes, from_seq);
        let torn_path = self.torn_path(id.as_str());
        if let Ok(meta) = std::fs::metadata(&torn_path) {
            loaded.diagnostics.push(Diagnostic {
                kind: DiagnosticKind::Quarantined,
                line: 0,
                offset: 0,
                message: format!(
                    "{} byte(s) of torn tail(s) were moved aside into {}",
                    meta.len(),
                    torn_path.display()
                ),
            });
        }
        Ok(loaded)
    }

    fn delete_blocking(&self, id: &str) -> Result<bool> {
        let path = self.inner.dir.join(format!("{id}.jsonl"));
        let handle = self.handle(id);
        let mut state = lock(&handle.state);
        let existed = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(StorageError::io("deleting", path, e)),
        };
        for extra in [self.meta_path(id), self.torn_path(id)] {
            match std::fs::remove_file(&extra) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("deleting", extra, e)),
            }
        }
        *state = FileState::default();
        drop(state);
        sync_dir(&self.inner.dir)?;
        lock(&self.inner.index).remove(id);
        self.save_index()?;
        Ok(existed)
    }

    fn list_blocking(&self, page: &Page) -> Result<ListPage> {
        let limit = page.limit.max(1);
        let ids = self.ids_on_disk()?;
        let mut items = Vec::new();
        let mut next = None;
        for id in ids
            .iter()
            .filter(|id| page.after.as_ref().is_none_or(|after| *id > after))
        {
            if items.len() == limit {
                next = items.last().map(|m: &ConversationMeta| m.id.clone());
                break;
            }
            match self.row(id) {
                Ok(row) => items.push(Self::meta_of(id, &row)),
                Err(StorageError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ListPage { items, next })
    }
}

/// Opens (or reopens, when the path now names another file) the conversation's log.
fn open_current(state: &mut FileState, path: &Path, id: &ConversationId) -> Result<Arc<File>> {
    let on_disk = match std::fs::metadata(path) {
        Ok(m) => identity(&m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            *state = FileState::default();
            return Err(StorageError::NotFound { id: id.to_string() });
        }
        Err(e) => return Err(StorageError::io("reading", path, e)),
    };
    if let Some(file) = &state.file
        && state.identity == on_disk
    {
        return Ok(file.clone());
    }
    let file = OpenOptions::new()
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| StorageError::io("opening", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| StorageError::io("reading", path, e))?;
    let file = Arc::new(file);
    *state = FileState {
        file: Some(file.clone()),
        identity: identity(&meta),
        known: None,
    };
    Ok(file)
}

/// Reads the file from `from.len` on, following sequence numbers and times, and measures the
/// torn tail. Only the record heads are parsed.
fn scan_tail(file: &File, path: &Path, from: Tail) -> Result<Tail> {
    let mut bytes = Vec::new();
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(from.len))
        .and_then(|_| reader.read_to_end(&mut bytes))
        .map_err(|e| StorageError::io("reading", path, e))?;
    let mut tail = Tail { torn: 0, ..from };
    let mut offset = 0usize;
    while let Some(nl) = bytes[offset..].iter().position(|&b| b == b'\n') {
        let line = &bytes[offset..offset + nl];
        offset += nl + 1;
        tail.len += nl as u64 + 1;
        if let Some((seq, at)) = record_head(line)
            && seq == tail.last_seq + 1
        {
            tail.last_seq = seq;
            tail.last_at = at;
        }
    }
    tail.torn = (bytes.len() - offset) as u64;
    Ok(tail)
}

/// Sequence number and time of a record, reading as little of the line as possible.
fn record_head(line: &[u8]) -> Option<(u64, i64)> {
    if let Some(head) = quick_head(line) {
        return Some(head);
    }
    serde_json::from_slice::<LineHead>(line)
        .ok()
        .map(|h| (h.seq, h.at))
}

/// What one line of a log file holds, before sequence numbers are checked.
enum Parsed {
    Blank,
    NotUtf8(usize),
    /// A record before `from_seq`: only its head was read.
    Skipped(u64),
    Record(Box<LineIn>),
    /// Not a record; the head, when readable, still used its sequence number.
    Corrupt(Option<u64>, String),
}

fn parse_line(line: &[u8], from_seq: u64) -> Parsed {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    if let Err(e) = std::str::from_utf8(line) {
        return Parsed::NotUtf8(e.valid_up_to() + 1);
    }
    if let Some((seq, _)) = quick_head(line)
        && seq < from_seq
    {
        return Parsed::Skipped(seq);
    }
    match serde_json::from_slice::<LineIn>(line) {
        Ok(rec) => Parsed::Record(Box::new(rec)),
        Err(e) => Parsed::Corrupt(record_head(line).map(|(seq, _)| seq), e.to_string()),
    }
}

/// Parses whole lines (`bytes` ends with a newline or is empty) into (line start, result).
fn parse_lines(bytes: &[u8], base: usize, from_seq: u64) -> Vec<(usize, Parsed)> {
    let mut out = Vec::with_capacity(bytes.len() / 128 + 1);
    let mut offset = 0;
    while let Some(nl) = bytes[offset..].iter().position(|&b| b == b'\n') {
        out.push((
            base + offset,
            parse_line(&bytes[offset..offset + nl], from_seq),
        ));
        offset += nl + 1;
    }
    out
}

/// Big files are parsed on this many threads at most.
const MAX_PARSE_THREADS: usize = 4;
/// Below this size one thread is quicker than starting more.
const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// Splits a log file into records, skipping (and reporting) what cannot be read.
///
/// Lines are parsed in parallel chunks (JSON parsing is the cost of a load); sequence numbers
/// are then checked in file order.
pub(crate) fn parse_log(bytes: &[u8], from_seq: u64) -> Loaded {
    parse_log_with(bytes, from_seq, PARALLEL_MIN_BYTES)
}

fn parse_log_with(bytes: &[u8], from_seq: u64, parallel_min: usize) -> Loaded {
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |last| last + 1);
    let (body, torn) = bytes.split_at(whole);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_PARSE_THREADS);
    let parsed: Vec<(usize, Parsed)> = if threads > 1 && body.len() >= parallel_min {
        let mut bounds = vec![0];
        for k in 1..threads {
            let guess = body.len() * k / threads;
            let cut = body[guess..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(body.len(), |p| guess + p + 1);
            if cut > *bounds.last().unwrap_or(&0) {
                bounds.push(cut);
            }
        }
        bounds.push(body.len());
        bounds.dedup();
        std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (a, b) = (w[0], w[1]);
                    scope.spawn(move || parse_lines(&body[a..b], a, from_seq))
                })
                .collect();
            let mut all = Vec::new();
            for h in handles {
                match h.join() {
                    Ok(part) => all.extend(part),
                    // A parser thread cannot panic on data; if it does, parse here instead.
                    Err(_) => return parse_lines(body, 0, from_seq),
                }
            }
            all
        })
    } else {
        parse_lines(body, 0, from_seq)
    };
    let mut loaded = Loaded::default();
    let mut last_seq = 0u64;
    let mut line_no = 0u64;
    for (at, p) in parsed {
        line_no += 1;
        let at = at as u64;
        let mut diag = |kind, message| {
            loaded.diagnostics.push(Diagnostic {
                kind,
                line: line_no,
                offset: at,
                message,
            });
        };
        match p {
            Parsed::Blank => {}
            Parsed::NotUtf8(col) => diag(
                DiagnosticKind::NotUtf8,
                format!("not UTF-8 (invalid byte at column {col}); skipped"),
            ),
            Parsed::Skipped(seq) if seq == last_seq + 1 => last_seq = seq,
            Parsed::Skipped(seq) => diag(
                DiagnosticKind::OutOfOrder,
                format!("sequence number {seq} does not follow {last_seq}; skipped"),
            ),
            Parsed::Record(rec) => {
                if rec.seq != last_seq + 1 {
                    diag(
                        DiagnosticKind::OutOfOrder,
                        format!(
                            "sequence number {} does not follow {last_seq}; skipped",
                            rec.seq
                        ),
                    );
                    continue;
                }
                last_seq = rec.seq;
                let LineIn { seq, at, entry } = *rec;
                loaded.entries.push(StoredEntry {
                    seq,
                    appended_ms: at,
                    entry,
                });
            }
            Parsed::Corrupt(head, e) => {
                if head == Some(last_seq + 1) {
                    last_seq += 1;
                }
                diag(
                    DiagnosticKind::Corrupt,
                    format!("not a log record ({e}); skipped"),
                );
            }
        }
    }
    if !torn.is_empty() {
        loaded.diagnostics.push(Diagnostic {
            kind: DiagnosticKind::TornTail,
            line: line_no + 1,
            offset: whole as u64,
            message: format!(
                "the last {} byte(s) have no newline: a write cut short, never acknowledged; skipped",
                torn.len()
            ),
        });
    }
    loaded
}

/// The head of a line this store wrote (`{"seq":N,"at":M,…`), without parsing the rest.
fn quick_head(line: &[u8]) -> Option<(u64, i64)> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    let seq = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let rest = rest[end..].strip_prefix(b",\"at\":")?;
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'-'))?;
    let at = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    rest[end..].starts_with(b",\"entry\":").then_some((seq, at))
}

fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(StorageError::io("writing", path, e));
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("syncing", dir, e))
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StorageError::Task(e.to_string()))?
}

#[async_trait]
impl ConversationStore for FileStore {
    async fn create(&self, id: &ConversationId, new: NewConversation) -> Result<ConversationMeta> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || this.create_blocking(&id, new)).await
    }

    async fn append_batch(
        &self,
        id: &ConversationId,
        entries: &[LogEntry],
        expect_last: Option<u64>,
    ) -> Result<Appended> {
        let (this, id, entries) = (self.clone(), id.clone(), entries.to_vec());
        blocking(move || this.append_blocking(&id, &entries, expect_last)).await
    }

    async fn load_from(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || this.load_blocking(&id, from_seq)).await
    }

    async fn list(&self, page: Page) -> Result<ListPage> {
        let this = self.clone();
        blocking(move || this.list_blocking(&page)).await
    }

    async fn metadata(&self, id: &ConversationId) -> Result<ConversationMeta> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || {
            let row = this.row(id.as_str())?;
            Ok(Self::meta_of(id.as_str(), &row))
        })
        .await
    }

    async fn update_metadata(
        &self,
        id: &ConversationId,
        update: MetaUpdate,
    ) -> Result<ConversationMeta> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || {
            let handle = this.handle(id.as_str());
            let _state = lock(&handle.state);
            let mut row = this.row(id.as_str())?;
            let mut meta = this.read_meta(id.as_str())?;
            if let Some(title) = update.title {
                meta.title = Some(title);
            }
            if let Some(mode) = update.mode {
                meta.mode = Some(mode);
            }
            meta.updated_ms = this.now();
            this.write_meta(id.as_str(), &meta)?;
            row.meta = meta;
            lock(&this.inner.index).insert(id.to_string(), row.clone());
            this.save_index()?;
            Ok(Self::meta_of(id.as_str(), &row))
        })
        .await
    }

    async fn delete(&self, id: &ConversationId) -> Result<bool> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || this.delete_blocking(id.as_str())).await
    }

    async fn delete_older_than(&self, cutoff_ms: i64) -> Result<Vec<String>> {
        let mut gone = Vec::new();
        for meta in self.list_all().await? {
            if meta.updated_ms < cutoff_ms {
                let id = ConversationId::new(meta.id.clone())?;
                if self.delete(&id).await? {
                    gone.push(meta.id);
                }
            }
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(seq: u64) -> Vec<u8> {
        let entry = LogEntry::new(format!("m{seq}"), ba_protocol::log::LogRole::User, "t")
            .with_text(format!("text {seq} é"));
        let mut line = serde_json::to_vec(&LineOut {
            seq,
            at: 7,
            entry: &entry,
        })
        .unwrap();
        line.push(b'\n');
        line
    }

    proptest! {
        /// Garbage lines between records and a torn tail never cost a whole record, and the
        /// parallel parse agrees with the single-threaded one.
        #[test]
        fn garbage_never_costs_a_good_record(
            n in 1u64..40,
            garbage in proptest::collection::vec((0usize..40, proptest::collection::vec(any::<u8>(), 0..30)), 0..6),
            torn in proptest::collection::vec(any::<u8>(), 0..20),
            from in 1u64..45,
        ) {
            let mut bytes = Vec::new();
            for seq in 1..=n {
                for (at, junk) in &garbage {
                    if *at as u64 == seq {
                        // Junk never holds a newline or a record head, so it is one bad line.
                        let mut junk: Vec<u8> = junk.iter().map(|&b| if b == b'\n' { b'x' } else { b }).collect();
                        junk.insert(0, b'#');
                        junk.push(b'\n');
                        bytes.extend(junk);
                    }
                }
                bytes.extend(record(seq));
            }
            let torn: Vec<u8> = torn.into_iter().filter(|&b| b != b'\n').collect();
            bytes.extend(&torn);
            let seq_load = parse_log_with(&bytes, from, usize::MAX);
            let par_load = parse_log_with(&bytes, from, 0);
            prop_assert_eq!(&seq_load, &par_load);
            let seqs: Vec<u64> = seq_load.entries.iter().map(|e| e.seq).collect();
            prop_assert_eq!(seqs, (from.min(n + 1)..=n).collect::<Vec<_>>());
            let torn_reported = seq_load.diagnostics.iter().any(|d| d.kind == DiagnosticKind::TornTail);
            prop_assert_eq!(torn_reported, !torn.is_empty());
        }
    }
}
