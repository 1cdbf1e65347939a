//! [`FileStore`]: the embedded backend. One append-only JSONL file per conversation, a metadata
//! file beside it, and an index that is only a cache of what the files say.
//!
//! Layout under the root:
//!
//! ```text
//! conversations/<id>.jsonl      {"seq":1,"at":<ms>,"entry":{…}} one record a line
//! conversations/<id>.meta.json  title, mode, parent, created (written atomically)
//! conversations/<id>.torn       torn tails moved aside by a later append
//! conversations/<id>.run        the run lock (an `flock` held by the running process)
//! conversations/<id>.cancel     a cancel request: the id of the run to cancel
//! conversations/.incoming/      imports being written whole, linked into place when done
//! conversations/<id>/files/     the conversation's workspace (see [`FileWorkspace`])
//! index.json                    cached last_seq / size / updated of every conversation
//! index.lock                    the lock every change of index.json is made under
//! forks.lock                    the lock a fork and a delete take (one waits for the other)
//! ```
//!
//! A damaged line in the middle of a log is quarantined in place: kept, reported by each load,
//! and skipped alone; appends continue after the highest sequence number any line holds.
//!
//! An append takes the in-process lock of the conversation, then an exclusive `flock` on its
//! file (so two processes never interleave lines), writes all its lines with one `write`, and
//! makes them durable before returning: with [`Durability::EveryAppend`] by its own `fsync`.
//! With [`Durability::GroupCommit`] appends queue, and one leader writes every queued batch
//! in a pass under the same locks and makes them durable with one `fsync` (see `group`).

mod append;
mod codec;
#[cfg(feature = "test-util")]
mod fault;
mod group;
mod incoming;
mod index;
mod lock;
mod memory;
mod migrate;
mod people;
mod schedule;
mod workspace;

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _};
use std::os::unix::fs::FileExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ba_protocol::LogEntry;

use self::codec::Tail;
#[cfg(feature = "test-util")]
pub use self::fault::WriteFault;
use self::group::GroupCommit;
use self::index::{IndexRow, MetaFile};
use self::lock::FileLock;
pub use self::workspace::FileWorkspace;
use crate::atomic::sync_dir;
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::people::Directory;
use crate::schedule::Schedules;
use crate::store::{
    Appended, ConversationMeta, ConversationStore, Diagnostic, DiagnosticKind, ListPage, Loaded,
    MetaUpdate, NewConversation, Page, RunHolder, RunLease, RunLock, SharedClock, SystemClock,
};
use crate::workspace::{Workspace, WorkspaceLimits};

/// The longest run id a cancel request carries.
const MAX_RUN_ID: usize = 200;

/// When an append reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Every append calls `fsync` before it returns.
    EveryAppend,
    /// Concurrent appends share one `fsync`: each append still returns only once its lines
    /// are on disk, but the appends waiting at the same time are written together and
    /// covered by one flush.
    #[default]
    GroupCommit,
    /// No `fsync` (tests and throwaway stores): a crash of the machine may lose appends.
    OsBuffered,
}

/// Options of a [`FileStore`].
#[derive(Debug, Clone)]
pub struct FileStoreOptions {
    /// When appends reach the disk.
    pub durability: Durability,
    /// Simulated write failures.
    #[cfg(feature = "test-util")]
    pub fault: Option<WriteFault>,
    /// The clock for `created`, `updated` and append times.
    pub clock: SharedClock,
    /// The size limits of the conversations' workspaces.
    pub workspace_limits: WorkspaceLimits,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            #[cfg(feature = "test-util")]
            fault: None,
            clock: Arc::new(SystemClock),
            workspace_limits: WorkspaceLimits::default(),
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
    #[cfg(feature = "test-util")]
    pub fn with_fault(mut self, fault: WriteFault) -> Self {
        self.fault = Some(fault);
        self
    }
    /// Sets the clock.
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }
    /// Sets the size limits of the workspaces.
    pub fn with_workspace_limits(mut self, limits: WorkspaceLimits) -> Self {
        self.workspace_limits = limits;
        self
    }
}

/// The embedded conversation store. Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct FileStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    root: PathBuf,
    dir: PathBuf,
    opts: FileStoreOptions,
    handles: Mutex<HashMap<String, Arc<Handle>>>,
    index: Mutex<BTreeMap<String, IndexRow>>,
    /// What the store found damaged and worked around (an unreadable index or metadata file).
    warnings: Mutex<Vec<String>>,
    /// The files of the conversations.
    workspace: Arc<FileWorkspace>,
    /// Users, tokens, shares and spend, under `people/`.
    directory: Arc<people::FileDirectory>,
    /// The memory files, under `memory/`.
    memory: Arc<memory::FileMemory>,
    /// Schedules and their runs, under `schedules/`.
    schedules: Arc<schedule::FileSchedules>,
}

/// In-process state of one conversation file.
#[derive(Debug, Default)]
struct Handle {
    state: Mutex<FileState>,
    /// Appends sharing `fsync`s ([`Durability::GroupCommit`]).
    commit: Arc<GroupCommit>,
}

#[derive(Debug, Default)]
struct FileState {
    file: Option<Arc<File>>,
    identity: (u64, u64),
    /// What the file looked like at the last scan: `None` when it must be rescanned.
    known: Option<Tail>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
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
        let workspace = Arc::new(FileWorkspace::new(
            dir.clone(),
            opts.clock.clone(),
            opts.workspace_limits,
        ));
        let directory = Arc::new(people::FileDirectory::new(&root, opts.clock.clone()));
        let memory = Arc::new(memory::FileMemory::new(&root, opts.clock.clone()));
        let schedules = Arc::new(schedule::FileSchedules::new(&root, opts.clock.clone()));
        let store = Self {
            inner: Arc::new(Inner {
                directory,
                memory,
                schedules,
                root,
                dir,
                opts,
                workspace,
                handles: Mutex::new(HashMap::new()),
                index: Mutex::new(BTreeMap::new()),
                warnings: Mutex::new(Vec::new()),
            }),
        };
        store.clean_incoming();
        store.load_index()?;
        store.migrate_previous_layout()?;
        Ok(store)
    }

    /// Opens the store under `root` only if there is one: creates no folder, so commands
    /// that only read leave no empty store behind. `NoStore` when `root` holds none.
    pub fn open_existing(root: impl Into<PathBuf>, opts: FileStoreOptions) -> Result<Self> {
        let root = root.into();
        if !root.join("conversations").is_dir() {
            return Err(StorageError::NoStore { path: root });
        }
        Self::open_with(root, opts)
    }

    /// What the store found damaged since it was opened and worked around: an unreadable
    /// `index.json` (rebuilt from the files), unreadable metadata files (their conversations
    /// listed without title), files of the previous layout it could not move into a
    /// workspace. Each once, oldest first.
    pub fn warnings(&self) -> Vec<String> {
        lock(&self.inner.warnings).clone()
    }

    pub(super) fn warn(&self, message: String) {
        let mut all = lock(&self.inner.warnings);
        if !all.contains(&message) {
            tracing::warn!("{message}");
            all.push(message);
        }
    }

    /// Why a conversation looks unfinished: its metadata file is missing (a create or an
    /// import cut short before it was written) or unreadable. `None` when it is fine.
    pub async fn metadata_problem(&self, id: &ConversationId) -> Result<Option<String>> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || {
            if !this.log_path(&id).exists() {
                return Err(StorageError::NotFound { id: id.to_string() });
            }
            let path = this.meta_path(id.as_str());
            if !path.exists() {
                return Ok(Some(format!(
                    "no metadata file {}: a create or import that did not finish",
                    path.display()
                )));
            }
            Ok(this.meta_status(id.as_str())?.1)
        })
        .await
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

    fn cancel_path(&self, id: &ConversationId) -> PathBuf {
        self.inner.dir.join(format!("{id}.cancel"))
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

    fn handle(&self, id: &str) -> Arc<Handle> {
        let mut handles = lock(&self.inner.handles);
        // Every append looks its conversation up: no key is allocated when it is there.
        if let Some(handle) = handles.get(id) {
            return handle.clone();
        }
        handles.entry(id.to_owned()).or_default().clone()
    }

    /// Creates the empty log file of `id`: the claim on the id (`AlreadyExists` when taken).
    fn claim_log(&self, id: &ConversationId) -> Result<()> {
        let path = self.log_path(id);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file
                .sync_all()
                .map_err(|e| StorageError::io("creating", &path, e)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(StorageError::AlreadyExists { id: id.to_string() })
            }
            Err(e) => Err(StorageError::io("creating", path, e)),
        }
    }

    fn create_blocking(
        &self,
        id: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let owner = new.owner_name()?;
        self.claim_log(id)?;
        let now = self.now();
        let meta = MetaFile {
            title: crate::text::clean_title_opt(new.title),
            mode: new.mode,
            parent: new.parent,
            created_ms: now,
            updated_ms: now,
            fork: None,
            owner: Some(owner),
        };
        self.write_meta(id.as_str(), &meta)?;
        sync_dir(&self.inner.dir)?;
        let row = IndexRow {
            meta,
            tail: Tail::default(),
            meta_stamp: self.meta_stamp(id.as_str()),
        };
        self.update_index(|rows| {
            rows.insert(id.to_string(), row.clone());
            Ok(())
        })?;
        Ok(Self::meta_of(id.as_str(), &row))
    }

    /// Where a scan of `id`'s log from its start begins (after a fork's cut).
    fn base_tail(&self, id: &str) -> Result<Tail> {
        let cached = lock(&self.inner.index)
            .get(id)
            .map(|row| index::base_tail(&row.meta));
        match cached {
            Some(tail) => Ok(tail),
            None => Ok(index::base_tail(&self.read_meta(id)?)),
        }
    }

    fn load_blocking(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
        self.load_chain(id, from_seq, 0)
    }

    /// A conversation's entries from `from_seq`: for a fork, its parent's up to the cut (read
    /// from the parent, recursively), then its own.
    fn load_chain(&self, id: &ConversationId, from_seq: u64, depth: usize) -> Result<Loaded> {
        let mut own = self.load_own(id, from_seq)?;
        let Some(fork) = self.read_meta(id.as_str())?.fork else {
            return Ok(own);
        };
        own.last_seq = own.last_seq.max(fork.at_seq);
        if from_seq > fork.at_seq {
            return Ok(own);
        }
        if depth >= crate::store::MAX_FORK_DEPTH {
            return Err(StorageError::invalid(
                format!("conversation `{id}`"),
                format!("forks go deeper than {}", crate::store::MAX_FORK_DEPTH),
            ));
        }
        let parent = ConversationId::new(fork.parent.clone())?;
        let mut shared = self.load_chain(&parent, from_seq, depth + 1)?;
        shared.entries.retain(|s| s.seq <= fork.at_seq);
        shared.entries.append(&mut own.entries);
        shared.diagnostics.append(&mut own.diagnostics);
        shared.last_seq = own.last_seq;
        Ok(shared)
    }

    fn load_own(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
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
        let mut loaded = codec::parse_log(&bytes, from_seq);
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

    /// Opens (creating it) the lock file `name` under the root: `index.lock`, or `forks.lock`,
    /// which a fork holds from the check of its parent until its metadata file names that
    /// parent, and a delete from its check for forks until the log is gone — so a fork and a
    /// delete of its parent, in this process or another, never both succeed.
    pub(super) fn lock_file(&self, name: &str) -> Result<(File, PathBuf)> {
        let path = self.inner.root.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StorageError::io("opening", &path, e))?;
        Ok((file, path))
    }

    /// The conversations forked from `id`.
    fn forks_of(&self, id: &str) -> Result<Vec<String>> {
        let mut forks = Vec::new();
        // The metadata files, not the index: a fork made by another process counts too.
        for other in self.ids_on_disk()? {
            if other != id
                && self
                    .meta_status(&other)
                    .is_ok_and(|(meta, _)| meta.fork.is_some_and(|f| f.parent == id))
            {
                forks.push(other);
            }
        }
        Ok(forks)
    }

    fn fork_blocking(
        &self,
        parent: &ConversationId,
        at_seq: u64,
        child: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let owner = new.owner_name()?;
        let (lock_file, lock_path) = self.lock_file("forks.lock")?;
        let _forks = FileLock::exclusive(&lock_file, &lock_path)?;
        let row = self.row(parent.as_str())?;
        crate::store::check_fork_point(
            parent,
            at_seq,
            row.tail.last_seq.max(index::base_tail(&row.meta).last_seq),
        )?;
        self.claim_log(child)?;
        let now = self.now();
        let meta = MetaFile {
            title: crate::text::clean_title_opt(new.title.or_else(|| row.meta.title.clone())),
            mode: new.mode.or(row.meta.mode),
            parent: new.parent,
            created_ms: now,
            updated_ms: now,
            fork: Some(crate::store::ForkPoint {
                parent: parent.to_string(),
                at_seq,
            }),
            owner: Some(owner),
        };
        self.write_meta(child.as_str(), &meta)?;
        sync_dir(&self.inner.dir)?;
        let row = IndexRow {
            tail: index::base_tail(&meta),
            meta,
            meta_stamp: self.meta_stamp(child.as_str()),
        };
        self.update_index(|rows| {
            rows.insert(child.to_string(), row.clone());
            Ok(())
        })?;
        Ok(Self::meta_of(child.as_str(), &row))
    }

    fn delete_blocking(&self, id: &str) -> Result<bool> {
        let (lock_file, lock_path) = self.lock_file("forks.lock")?;
        let _forks = FileLock::exclusive(&lock_file, &lock_path)?;
        let forks = self.forks_of(id)?;
        if !forks.is_empty() {
            return Err(StorageError::HasForks {
                id: id.to_owned(),
                forks,
            });
        }
        let path = self.inner.dir.join(format!("{id}.jsonl"));
        let handle = self.handle(id);
        let mut state = lock(&handle.state);
        let existed = match std::fs::remove_file(&path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(StorageError::io("deleting", path, e)),
        };
        for extra in [
            self.meta_path(id),
            self.torn_path(id),
            self.inner.dir.join(format!("{id}.run")),
            self.inner.dir.join(format!("{id}.cancel")),
        ] {
            match std::fs::remove_file(&extra) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("deleting", extra, e)),
            }
        }
        // The conversation's folder holds its workspace: it goes with the log.
        let folder = self.inner.dir.join(id);
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io("deleting", folder, e)),
        }
        *state = FileState::default();
        drop(state);
        sync_dir(&self.inner.dir)?;
        self.inner.directory.forget_conversation(id)?;
        self.update_index(|rows| {
            rows.remove(id);
            Ok(())
        })?;
        Ok(existed)
    }

    /// One page of the conversations, of `owner`'s only when given: a conversation whose
    /// cached row names another owner (and whose metadata file is the one that row was read
    /// from) is passed over without opening its log.
    fn list_blocking(&self, page: &Page, owner: Option<&str>) -> Result<ListPage> {
        let limit = page.limit.max(1);
        let ids = self.ids_on_disk()?;
        let mut items = Vec::new();
        let mut next = None;
        for id in ids
            .iter()
            .filter(|id| page.after.as_ref().is_none_or(|after| *id > after))
        {
            if let Some(owner) = owner {
                let cached = lock(&self.inner.index)
                    .get(id.as_str())
                    .map(|row| (row.meta.owner() != owner, row.meta_stamp));
                if let Some((true, stamp)) = cached
                    && stamp == self.meta_stamp(id)
                {
                    continue;
                }
            }
            if items.len() == limit {
                next = items.last().map(|m: &ConversationMeta| m.id.clone());
                break;
            }
            match self.row(id) {
                Ok(row) if owner.is_some_and(|o| row.meta.owner() != o) => {}
                Ok(row) => items.push(Self::meta_of(id, &row)),
                Err(StorageError::NotFound { .. }) => {}
                // One conversation that cannot be read never takes the list down: it is left
                // out, and the store says why.
                Err(e) => self.warn(format!("conversation `{id}` is left out of the list: {e}")),
            }
        }
        Ok(ListPage { items, next })
    }
}

/// The open, locked `.run` file of a lease: emptied, so the name of a run that ended is not
/// read as a holder, and unlocked explicitly — closing alone would leave the lock held while a
/// child process forked meanwhile still has the descriptor (until its `exec`).
struct LeaseFile(File);

impl Drop for LeaseFile {
    fn drop(&mut self) {
        let _ = self.0.set_len(0);
        let _ = self.0.unlock();
    }
}

/// The holder a `.run` file names; `None` when it is empty (between the lock and the write)
/// or unreadable.
fn read_holder(file: &mut File) -> Option<RunHolder> {
    let mut text = String::new();
    let _ = file.seek(io::SeekFrom::Start(0));
    file.take(4096).read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
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
    fn workspace(&self) -> Option<Arc<dyn Workspace>> {
        Some(self.inner.workspace.clone())
    }

    fn directory(&self) -> Option<Arc<dyn Directory>> {
        Some(self.inner.directory.clone())
    }

    fn memory(&self) -> Option<Arc<dyn crate::memory::MemoryStore>> {
        Some(self.inner.memory.clone())
    }

    fn schedules(&self) -> Option<Arc<dyn Schedules>> {
        Some(self.inner.schedules.clone())
    }

    /// An exclusive `flock` on `conversations/<id>.run`, held by the lease's open file (the
    /// kernel releases it when the process dies); the file holds the holder as JSON.
    async fn lock_run(&self, id: &ConversationId, holder: &RunHolder) -> Result<RunLock> {
        holder.validate(id)?;
        let path = self.inner.dir.join(format!("{id}.run"));
        let holder = holder.clone();
        blocking(move || {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| StorageError::io("opening", &path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Ok(RunLock::Held(read_holder(&mut file)));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(StorageError::io("locking", &path, e));
                }
            }
            let json = serde_json::to_vec(&holder)
                .map_err(|e| StorageError::invalid("run holder", e.to_string()))?;
            file.set_len(0)
                .and_then(|()| file.write_all_at(&json, 0))
                .map_err(|e| StorageError::io("writing", &path, e))?;
            Ok(RunLock::Taken(RunLease::holding(LeaseFile(file))))
        })
        .await
    }

    async fn run_holder(&self, id: &ConversationId) -> Result<Option<RunHolder>> {
        let path = self.inner.dir.join(format!("{id}.run"));
        blocking(move || {
            let mut file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(StorageError::io("opening", &path, e)),
            };
            // A lease empties the file when it ends; a name left in it is a run going on or
            // one whose process died, which the lock tells apart. (The probe's shared lock
            // could refuse a run starting in the same instant, only after such a death.)
            let Some(holder) = read_holder(&mut file) else {
                return Ok(None);
            };
            match file.try_lock_shared() {
                Ok(()) => {
                    // Explicitly, as a lease does (see `LeaseFile`).
                    let _ = file.unlock();
                    Ok(None)
                }
                Err(std::fs::TryLockError::WouldBlock) => Ok(Some(holder)),
                Err(std::fs::TryLockError::Error(e)) => Err(StorageError::io("locking", &path, e)),
            }
        })
        .await
    }

    /// `conversations/<id>.cancel` holds the run id, written atomically.
    async fn request_cancel(&self, id: &ConversationId, run_id: &str) -> Result<bool> {
        if run_id.is_empty() || run_id.len() > MAX_RUN_ID || run_id.contains(['\n', '\0']) {
            return Err(StorageError::invalid(
                format!("cancel request on `{id}`"),
                format!("a run id is 1 to {MAX_RUN_ID} bytes on one line"),
            ));
        }
        let (this, id, run_id) = (self.clone(), id.clone(), run_id.to_owned());
        blocking(move || {
            if !this.log_path(&id).exists() {
                return Err(StorageError::NotFound { id: id.to_string() });
            }
            crate::atomic::write_atomic(&this.cancel_path(&id), run_id.as_bytes())?;
            Ok(true)
        })
        .await
    }

    async fn cancel_requested(&self, id: &ConversationId) -> Result<Option<String>> {
        let path = self.cancel_path(id);
        blocking(move || {
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(StorageError::io("opening", path, e)),
            };
            let mut run_id = String::new();
            file.take(MAX_RUN_ID as u64)
                .read_to_string(&mut run_id)
                .map_err(|e| StorageError::io("reading", &path, e))?;
            Ok(Some(run_id).filter(|r| !r.is_empty()))
        })
        .await
    }

    async fn clear_cancel(&self, id: &ConversationId) -> Result<()> {
        let path = self.cancel_path(id);
        blocking(move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StorageError::io("deleting", path, e)),
        })
        .await
    }

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
        #[cfg(feature = "test-util")]
        if let Some(fault) = &self.inner.opts.fault {
            fault.arrive();
        }
        if self.inner.opts.durability == Durability::GroupCommit {
            let commit = self.handle(id.as_str()).commit.clone();
            return commit.append(self, id, entries.to_vec(), expect_last).await;
        }
        let (this, id, entries) = (self.clone(), id.clone(), entries.to_vec());
        blocking(move || this.append_blocking(&id, &entries, expect_last)).await
    }

    async fn load_from(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || this.load_blocking(&id, from_seq)).await
    }

    async fn create_with_entries(
        &self,
        id: &ConversationId,
        new: NewConversation,
        entries: &[LogEntry],
    ) -> Result<ConversationMeta> {
        let (this, id, entries) = (self.clone(), id.clone(), entries.to_vec());
        blocking(move || this.create_whole_blocking(&id, new, &entries)).await
    }

    async fn list(&self, page: Page) -> Result<ListPage> {
        let this = self.clone();
        blocking(move || this.list_blocking(&page, None)).await
    }

    /// The index keeps each conversation's owner, so other owners' logs are not opened.
    async fn list_owned(&self, owner: &str, page: Page) -> Result<ListPage> {
        let (this, owner) = (self.clone(), owner.to_owned());
        blocking(move || this.list_blocking(&page, Some(&owner))).await
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
                meta.title = Some(crate::text::clean_title(&title));
            }
            if let Some(mode) = update.mode {
                meta.mode = Some(mode);
            }
            meta.updated_ms = this.now();
            this.write_meta(id.as_str(), &meta)?;
            row.meta = meta;
            row.meta_stamp = this.meta_stamp(id.as_str());
            this.update_index(|rows| {
                rows.insert(id.to_string(), row.clone());
                Ok(())
            })?;
            Ok(Self::meta_of(id.as_str(), &row))
        })
        .await
    }

    async fn delete(&self, id: &ConversationId) -> Result<bool> {
        let (this, id) = (self.clone(), id.clone());
        blocking(move || this.delete_blocking(id.as_str())).await
    }

    /// A fork is a log of its own lines (numbered after the cut) and a metadata file naming
    /// the parent and the cut; loads read the parent's part from the parent.
    async fn fork(
        &self,
        parent: &ConversationId,
        at_seq: u64,
        child: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let (this, parent, child) = (self.clone(), parent.clone(), child.clone());
        blocking(move || this.fork_blocking(&parent, at_seq, &child, new)).await
    }

    async fn delete_older_than(&self, cutoff_ms: i64) -> Result<Vec<String>> {
        let mut gone = Vec::new();
        for meta in self.list_all().await? {
            if meta.updated_ms < cutoff_ms {
                let id = ConversationId::new(meta.id.clone())?;
                match self.delete(&id).await {
                    Ok(true) => gone.push(meta.id),
                    Ok(false) => {}
                    // A conversation with forks stays until its forks are gone.
                    Err(StorageError::HasForks { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(gone)
    }
}
