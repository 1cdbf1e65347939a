//! The [`ConversationStore`] trait and the types its methods exchange.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use ba_protocol::{LogEntry, LogRole, Mode};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::people::{DEFAULT_OWNER, Directory};
use crate::schedule::Schedules;
use crate::workspace::Workspace;

/// A log entry with the sequence number the store gave it (1 for the first entry).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEntry {
    /// Position in the conversation, counting from 1, without gaps.
    pub seq: u64,
    /// When the store accepted it (milliseconds since the Unix epoch).
    pub appended_ms: i64,
    /// The entry.
    pub entry: LogEntry,
}

/// What a new conversation starts with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewConversation {
    /// A title for lists.
    pub title: Option<String>,
    /// The active mode (chat, agent, run).
    pub mode: Option<Mode>,
    /// The conversation this one was spawned from (a subagent's parent session).
    pub parent: Option<String>,
    /// Whose conversation it is (a user name); `None` gives it to [`DEFAULT_OWNER`]. A fork's
    /// owner is this too, never taken from its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl NewConversation {
    /// The owner the conversation gets, checked.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] for a name that breaks [`crate::check_user_name`].
    pub(crate) fn owner_name(&self) -> Result<String> {
        match &self.owner {
            Some(name) => {
                crate::people::check_user_name(name)?;
                Ok(name.clone())
            }
            None => Ok(DEFAULT_OWNER.to_owned()),
        }
    }
}

fn default_owner() -> String {
    DEFAULT_OWNER.to_owned()
}

/// Changes to a conversation's metadata; `None` fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaUpdate {
    /// New title.
    pub title: Option<String>,
    /// New active mode.
    pub mode: Option<Mode>,
}

/// Where a fork leaves its parent: the fork's history is the parent's entries up to `at_seq`,
/// then its own (numbered from `at_seq + 1`). The parent's entries are not copied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPoint {
    /// The conversation forked.
    pub parent: String,
    /// Its last entry the fork shares.
    pub at_seq: u64,
}

/// What a store knows about a conversation besides its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationMeta {
    /// The id.
    pub id: String,
    /// Title, if one was set.
    pub title: Option<String>,
    /// Active mode, if one was set.
    pub mode: Option<Mode>,
    /// Parent conversation, for subagents.
    pub parent: Option<String>,
    /// Creation time (ms since the Unix epoch).
    pub created_ms: i64,
    /// Time of the last append or metadata change (ms since the Unix epoch).
    pub updated_ms: i64,
    /// Sequence number of the last entry; 0 when empty. Also the number of entries (a fork's
    /// count its parent's up to the cut).
    pub last_seq: u64,
    /// Where this conversation was forked from, when it is a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkPoint>,
    /// Whose conversation it is; [`DEFAULT_OWNER`] for one stored before owners were kept.
    #[serde(default = "default_owner")]
    pub owner: String,
}

/// One page request of [`ConversationStore::list`]: conversations in id order, after `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Start after this id (the `next` of the previous page); `None` for the first page.
    pub after: Option<String>,
    /// At most this many items (at least 1 is used).
    pub limit: usize,
}

impl Page {
    /// The first page of `limit` items.
    pub fn first(limit: usize) -> Self {
        Self { after: None, limit }
    }
}

/// One page of conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The conversations, by id.
    pub items: Vec<ConversationMeta>,
    /// Where the next page starts, or `None` when this was the last.
    pub next: Option<String>,
}

/// What kind of problem a load met in a stored file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// The last line has no newline: a write cut short by a crash. It was never acknowledged.
    TornTail,
    /// A torn tail that an append moved aside into the `.torn` file next to the log.
    Quarantined,
    /// A complete line that is not a valid record.
    Corrupt,
    /// A line that is not UTF-8.
    NotUtf8,
    /// A record whose sequence number does not follow the previous one.
    OutOfOrder,
}

/// A problem found while loading; the line was skipped and nothing else was lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// What kind.
    pub kind: DiagnosticKind,
    /// 1-based line number in the file (0 when not about one line).
    pub line: u64,
    /// Byte offset of the line.
    pub offset: u64,
    /// What was wrong, as a sentence.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "line {} (byte {}): {}",
                self.line, self.offset, self.message
            )
        } else {
            f.write_str(&self.message)
        }
    }
}

/// The entries of a conversation and what was skipped while reading them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// Entries in sequence order.
    pub entries: Vec<StoredEntry>,
    /// Skipped lines (always empty for the database backend).
    pub diagnostics: Vec<Diagnostic>,
    /// The sequence number the next append follows: the last entry's, or higher when lines
    /// past it were skipped (a damaged line keeps the number it held). Pass it as
    /// `expect_last`.
    pub last_seq: u64,
}

impl Loaded {
    /// The log entries without their sequence numbers.
    pub fn into_entries(self) -> Vec<LogEntry> {
        self.entries.into_iter().map(|s| s.entry).collect()
    }
}

/// Sequence numbers given to an appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Sequence number of the first entry of the batch.
    pub first_seq: u64,
    /// Sequence number of the last entry of the batch.
    pub last_seq: u64,
}

/// The right to run a conversation, held until dropped: while one is held, every other
/// [`ConversationStore::lock_run`] on the conversation — in this process or another one
/// sharing the store — is refused with the holder's [`RunHolder`].
///
/// A lease can be lost while held when the backend's lock lives in something that can break
/// on its own (a database session whose connection is cut): [`RunLease::is_held`] says so,
/// and a run that finds its lease lost must stop writing, since another may have taken it.
pub struct RunLease(Option<Box<dyn LeaseHold>>);

/// What keeps a lease's lock: dropped to release it; asked whether the lock still holds.
trait LeaseHold: Send + Sync {
    fn is_held(&self) -> bool;
}

/// A holder whose lock cannot be lost while it lives (a file's `flock`).
struct Opaque<H>(#[allow(dead_code, reason = "held for its Drop")] H);

impl<H: Send + Sync> LeaseHold for Opaque<H> {
    fn is_held(&self) -> bool {
        true
    }
}

/// A holder with a check of its lock.
struct Checked<H, F>(H, F);

impl<H: Send + Sync, F: Fn(&H) -> bool + Send + Sync> LeaseHold for Checked<H, F> {
    fn is_held(&self) -> bool {
        (self.1)(&self.0)
    }
}

impl RunLease {
    /// A lease that locks nothing by itself (its holder keeps the lock some other way).
    pub fn local() -> Self {
        Self(None)
    }

    /// A lease that releases its lock when `holder` is dropped, and cannot lose it before.
    pub fn holding(holder: impl Send + Sync + 'static) -> Self {
        Self(Some(Box::new(Opaque(holder))))
    }

    /// A lease that releases its lock when `holder` is dropped, and whose lock holds while
    /// `held(&holder)` says so (a database connection that is still open).
    pub fn holding_while<H, F>(holder: H, held: F) -> Self
    where
        H: Send + Sync + 'static,
        F: Fn(&H) -> bool + Send + Sync + 'static,
    {
        Self(Some(Box::new(Checked(holder, held))))
    }

    /// Whether the lock still holds. `false` once it was lost (its connection closed): the
    /// conversation may already be another run's.
    pub fn is_held(&self) -> bool {
        self.0.as_ref().is_none_or(|h| h.is_held())
    }
}

impl fmt::Debug for RunLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "RunLease(held)"
        } else {
            "RunLease(local)"
        })
    }
}

/// Who runs a conversation: written by the process that takes the run lease, read by anyone
/// refused it, so a refusal names the holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunHolder {
    /// The id of the run (what a cancel request names).
    pub run_id: String,
    /// Who runs it, for people: the front end and its process (`ba-agent run, pid 4242 on
    /// host`).
    pub holder: String,
    /// When the lease was taken, in milliseconds since the Unix epoch.
    pub since_ms: i64,
}

/// Longest run id and holder description a store keeps, in bytes.
pub const MAX_HOLDER_FIELD: usize = 200;

impl RunHolder {
    /// A holder of run `run_id` described as `holder`, from now.
    pub fn new(run_id: impl Into<String>, holder: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            holder: holder.into(),
            since_ms: SystemClock.now_ms(),
        }
    }

    /// Checks the fields a store keeps: each 1 to [`MAX_HOLDER_FIELD`] bytes on one line.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] naming the field.
    pub fn validate(&self, id: &ConversationId) -> Result<()> {
        for (field, value) in [("run id", &self.run_id), ("holder", &self.holder)] {
            if value.is_empty()
                || value.len() > MAX_HOLDER_FIELD
                || value.contains(['\n', '\r', '\0'])
            {
                return Err(StorageError::invalid(
                    format!("run lease of `{id}`"),
                    format!("the {field} must be 1 to {MAX_HOLDER_FIELD} bytes on one line"),
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for RunHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run {} of {} (since {})",
            self.run_id,
            self.holder,
            rfc3339(self.since_ms)
        )
    }
}

/// What [`ConversationStore::lock_run`] got.
#[derive(Debug)]
pub enum RunLock {
    /// The lease: the conversation is the caller's to run until it is dropped.
    Taken(RunLease),
    /// Another run holds the conversation: its holder, when the store could read it (it may
    /// be between taking the lock and writing its name).
    Held(Option<RunHolder>),
}

impl RunLock {
    /// The lease, if it was taken.
    pub fn lease(self) -> Option<RunLease> {
        match self {
            Self::Taken(lease) => Some(lease),
            Self::Held(_) => None,
        }
    }
}

/// The run leases of stores that keep none themselves: one table per process, by conversation
/// id (ids are random, so two stores of one process sharing an id is not a concern).
pub(crate) mod local_leases {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock, PoisonError};

    use super::{RunHolder, RunLease, RunLock};

    type Table = Arc<Mutex<HashMap<String, RunHolder>>>;

    fn table() -> &'static Table {
        static TABLE: OnceLock<Table> = OnceLock::new();
        TABLE.get_or_init(Table::default)
    }

    struct Release {
        id: String,
        run_id: String,
    }

    impl Drop for Release {
        fn drop(&mut self) {
            let mut t = table().lock().unwrap_or_else(PoisonError::into_inner);
            if t.get(&self.id).is_some_and(|h| h.run_id == self.run_id) {
                t.remove(&self.id);
            }
        }
    }

    pub(crate) fn lock(id: &str, holder: &RunHolder) -> RunLock {
        let mut t = table().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = t.get(id) {
            return RunLock::Held(Some(held.clone()));
        }
        t.insert(id.to_owned(), holder.clone());
        RunLock::Taken(RunLease::holding(Release {
            id: id.to_owned(),
            run_id: holder.run_id.clone(),
        }))
    }

    pub(crate) fn holder(id: &str) -> Option<RunHolder> {
        let t = table().lock().unwrap_or_else(PoisonError::into_inner);
        t.get(id).cloned()
    }
}

/// A source of the current time, so retention can be tested without waiting.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock showing `ms`.
    pub fn new(ms: i64) -> Self {
        Self(AtomicI64::new(ms))
    }
    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC).
pub fn rfc3339(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// Whether a conversation's title or own messages contain `needle` (already lower case).
async fn matches_query<S: ConversationStore + ?Sized>(
    store: &S,
    meta: &ConversationMeta,
    needle: &str,
) -> Result<bool> {
    if needle.is_empty()
        || meta
            .title
            .as_deref()
            .is_some_and(|t| t.to_lowercase().contains(needle))
    {
        return Ok(true);
    }
    let id = ConversationId::new(meta.id.clone())?;
    let from = meta.fork.as_ref().map_or(1, |f| f.at_seq + 1);
    let loaded = match store.load_from(&id, from).await {
        Ok(l) => l,
        // Gone between the list and the load.
        Err(StorageError::NotFound { .. }) => return Ok(false),
        // One conversation that cannot be read never takes the search down.
        Err(e) => {
            tracing::warn!("search: conversation `{id}` is left out: {e}");
            return Ok(false);
        }
    };
    Ok(loaded.entries.iter().any(|s| {
        matches!(s.entry.role, LogRole::User | LogRole::Assistant)
            && s.entry.include_in_context
            && s.entry.text().to_lowercase().contains(needle)
    }))
}

/// One page of the conversations of `owner` (all when `None`) that match `query` (all when
/// `None`), read page by page from [`ConversationStore::list`] — or from
/// [`ConversationStore::list_owned`] when both are given, so a backend that lists one owner's
/// conversations quickly is not asked for everyone's messages.
async fn filtered_page<S: ConversationStore + ?Sized>(
    store: &S,
    owner: Option<&str>,
    query: Option<&str>,
    page: Page,
) -> Result<ListPage> {
    let needle = query.map(|q| q.trim().to_lowercase());
    let limit = page.limit.max(1);
    let mut items = Vec::new();
    let mut after = page.after.clone();
    loop {
        let chunk = Page {
            after: after.clone(),
            limit: 200,
        };
        let got = match (owner, &needle) {
            (Some(owner), Some(_)) => store.list_owned(owner, chunk).await?,
            _ => store.list(chunk).await?,
        };
        for meta in got.items {
            after = Some(meta.id.clone());
            if owner.is_some_and(|o| meta.owner != o) {
                continue;
            }
            if let Some(needle) = &needle
                && !matches_query(store, &meta, needle).await?
            {
                continue;
            }
            if items.len() == limit {
                // One more match: there is a next page.
                let next = items.last().map(|m: &ConversationMeta| m.id.clone());
                return Ok(ListPage { items, next });
            }
            items.push(meta);
        }
        if got.next.is_none() {
            return Ok(ListPage { items, next: None });
        }
    }
}

/// Refuses a cut past the end of the parent.
pub(crate) fn check_fork_point(parent: &ConversationId, at_seq: u64, last_seq: u64) -> Result<()> {
    if at_seq > last_seq {
        return Err(StorageError::invalid(
            format!("fork of `{parent}`"),
            format!("entry {at_seq} is past its last entry, {last_seq}"),
        ));
    }
    Ok(())
}

/// A fork ([`ConversationStore::fork`]) that also shares its parent's workspace files: every
/// file the parent had before entry `at_seq + 1` was written keeps its id in the fork
/// ([`crate::Workspace::copy_file`]: linked on the files backend) — every file when `at_seq`
/// is the parent's last entry, the files made before the first entry when it is 0. So the
/// history the fork shares names files it has, and a question asked again in the fork (the
/// entry after the cut, edited) finds the uploads the original found. Files the parent gets
/// later are its own. A fork whose files cannot be shared is deleted again.
pub async fn fork_with_files<S: ConversationStore + ?Sized>(
    store: &S,
    parent: &ConversationId,
    at_seq: u64,
    child: &ConversationId,
    new: NewConversation,
) -> Result<ConversationMeta> {
    // The entry after the cut: files made up to its time existed before it (times are in
    // milliseconds, and an upload sent just before its question may share the question's).
    let next_ms = store
        .load_from(parent, at_seq + 1)
        .await?
        .entries
        .first()
        .filter(|s| s.seq == at_seq + 1)
        .map(|s| s.appended_ms);
    let meta = store.fork(parent, at_seq, child, new).await?;
    let Some(workspace) = store.workspace() else {
        return Ok(meta);
    };
    let shared = async {
        for file in workspace.list(parent).await? {
            if next_ms.is_none_or(|ms| file.created_ms <= ms) {
                workspace.copy_file(parent, child, &file.id).await?;
            }
        }
        Ok::<_, StorageError>(())
    };
    if let Err(e) = shared.await {
        if let Err(undo) = store.delete(child).await {
            tracing::warn!("fork `{child}` kept without all its files: {undo}");
        }
        return Err(e);
    }
    Ok(meta)
}

/// How deep forks of forks may go.
pub(crate) const MAX_FORK_DEPTH: usize = 256;

/// A durable conversation log.
///
/// Every backend gives the entries of a conversation gap-free sequence numbers from 1, makes an
/// append durable before it returns, and refuses an append whose `expect_last` is not the
/// current last sequence number. The conformance suite in [`crate::conformance`] checks this.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Creates an empty conversation; fails with `AlreadyExists` when the id is taken.
    async fn create(&self, id: &ConversationId, new: NewConversation) -> Result<ConversationMeta>;

    /// Appends `entries` in order as one unit. With `expect_last`, fails with
    /// `SequenceConflict` unless the conversation's last sequence number is that value.
    async fn append_batch(
        &self,
        id: &ConversationId,
        entries: &[LogEntry],
        expect_last: Option<u64>,
    ) -> Result<Appended>;

    /// Entries with a sequence number of at least `from_seq`.
    async fn load_from(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded>;

    /// One page of conversations in id order.
    async fn list(&self, page: Page) -> Result<ListPage>;

    /// The metadata of one conversation.
    async fn metadata(&self, id: &ConversationId) -> Result<ConversationMeta>;

    /// Changes the title or the active mode.
    async fn update_metadata(
        &self,
        id: &ConversationId,
        update: MetaUpdate,
    ) -> Result<ConversationMeta>;

    /// Deletes a conversation; `false` when there was none. A conversation with forks is not
    /// deleted ([`StorageError::HasForks`]): its forks read their history from it.
    async fn delete(&self, id: &ConversationId) -> Result<bool>;

    /// One page of the conversations (in id order, after `page.after`) whose title or whose
    /// messages' text (questions and answers: user and assistant entries) contain `query`,
    /// ignoring case. A fork is found by its own entries and its title. This default reads
    /// every conversation; `PostgresStore` asks the database.
    async fn search(&self, query: &str, page: Page) -> Result<ListPage> {
        filtered_page(self, None, Some(query), page).await
    }

    /// Creates conversation `child` whose history is `parent`'s up to entry `at_seq` (0 to
    /// its last), then its own. `FileStore` and `PostgresStore` keep only a link (the parent
    /// is never changed, and cannot be deleted while the fork lives); this default copies
    /// the entries.
    async fn fork(
        &self,
        parent: &ConversationId,
        at_seq: u64,
        child: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let loaded = self.load(parent).await?;
        check_fork_point(parent, at_seq, loaded.last_seq)?;
        let entries: Vec<LogEntry> = loaded
            .entries
            .into_iter()
            .filter(|s| s.seq <= at_seq)
            .map(|s| s.entry)
            .collect();
        self.create_with_entries(child, new, &entries).await
    }

    /// Deletes every conversation last updated before `cutoff_ms`; returns their ids.
    async fn delete_older_than(&self, cutoff_ms: i64) -> Result<Vec<String>>;

    /// Creates a conversation holding `entries` (sequence numbers from 1) as one unit, for
    /// imports: a failure leaves no conversation behind. `FileStore` writes it under a
    /// temporary name and renames it, so not even a killed process leaves a part; this
    /// default creates, appends and deletes the conversation again when an append fails.
    async fn create_with_entries(
        &self,
        id: &ConversationId,
        new: NewConversation,
        entries: &[LogEntry],
    ) -> Result<ConversationMeta> {
        self.create(id, new).await?;
        let mut last = 0;
        for chunk in entries.chunks(256) {
            match self.append_batch(id, chunk, Some(last)).await {
                Ok(done) => last = done.last_seq,
                Err(e) => {
                    let _ = self.delete(id).await;
                    return Err(e);
                }
            }
        }
        self.metadata(id).await
    }

    /// Takes the run lease of a conversation for `holder`: across processes where the
    /// backend can (an `flock` for files, an advisory lock for PostgreSQL, each released by
    /// the system when its process dies), or [`RunLock::Held`] with whoever holds it. The
    /// default locks within this process only.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] for a holder whose fields are empty or too long; the
    /// backend's.
    async fn lock_run(&self, id: &ConversationId, holder: &RunHolder) -> Result<RunLock> {
        holder.validate(id)?;
        Ok(local_leases::lock(id.as_str(), holder))
    }

    /// Who runs the conversation now; `None` when nobody does.
    async fn run_holder(&self, id: &ConversationId) -> Result<Option<RunHolder>> {
        Ok(local_leases::holder(id.as_str()))
    }

    /// Asks whoever runs `run_id` on the conversation — this process or another one sharing
    /// the store — to cancel it; replaces an earlier request. `false` when the backend cannot
    /// carry a request across processes (the default).
    async fn request_cancel(&self, id: &ConversationId, run_id: &str) -> Result<bool> {
        let _ = (id, run_id);
        Ok(false)
    }

    /// The run whose cancel was requested on the conversation, if any (polled by the process
    /// that runs it).
    async fn cancel_requested(&self, id: &ConversationId) -> Result<Option<String>> {
        let _ = id;
        Ok(None)
    }

    /// Forgets the conversation's cancel request (when a run ends or starts).
    async fn clear_cancel(&self, id: &ConversationId) -> Result<()> {
        let _ = id;
        Ok(())
    }

    /// The workspace holding the files of this store's conversations (uploads, code, data,
    /// outputs); `None` when the backend keeps none (the default).
    fn workspace(&self) -> Option<Arc<dyn Workspace>> {
        None
    }

    /// The people of this store (users, tokens, shares, spend); `None` when the backend keeps
    /// none (the default).
    fn directory(&self) -> Option<Arc<dyn Directory>> {
        None
    }

    /// The memory files people keep across conversations; `None` when the backend keeps none
    /// (the default).
    fn memory(&self) -> Option<Arc<dyn crate::memory::MemoryStore>> {
        None
    }

    /// The schedules of this store and their runs; `None` when the backend keeps none (the
    /// default).
    fn schedules(&self) -> Option<Arc<dyn Schedules>> {
        None
    }

    /// One page of `owner`'s conversations in id order, after `page.after`. This default
    /// filters [`ConversationStore::list`]; `PostgresStore` asks the database.
    async fn list_owned(&self, owner: &str, page: Page) -> Result<ListPage> {
        filtered_page(self, Some(owner), None, page).await
    }

    /// [`ConversationStore::search`] among `owner`'s conversations only. This default reads
    /// the conversations [`ConversationStore::list_owned`] gives; `PostgresStore` asks the
    /// database.
    async fn search_owned(&self, owner: &str, query: &str, page: Page) -> Result<ListPage> {
        filtered_page(self, Some(owner), Some(query), page).await
    }

    /// Appends one entry; returns its sequence number.
    async fn append(
        &self,
        id: &ConversationId,
        entry: &LogEntry,
        expect_last: Option<u64>,
    ) -> Result<u64> {
        let done = self
            .append_batch(id, std::slice::from_ref(entry), expect_last)
            .await?;
        Ok(done.last_seq)
    }

    /// Every entry.
    async fn load(&self, id: &ConversationId) -> Result<Loaded> {
        self.load_from(id, 1).await
    }

    /// Every conversation, page after page.
    async fn list_all(&self) -> Result<Vec<ConversationMeta>> {
        let mut out = Vec::new();
        let mut page = Page::first(500);
        loop {
            let got = self.list(page.clone()).await?;
            out.extend(got.items);
            match got.next {
                Some(next) => page.after = Some(next),
                None => return Ok(out),
            }
        }
    }
}

macro_rules! forward {
    ($ty:ty) => {
        #[async_trait]
        impl<T: ConversationStore + ?Sized> ConversationStore for $ty {
            async fn create(
                &self,
                id: &ConversationId,
                new: NewConversation,
            ) -> Result<ConversationMeta> {
                (**self).create(id, new).await
            }
            async fn append_batch(
                &self,
                id: &ConversationId,
                entries: &[LogEntry],
                expect_last: Option<u64>,
            ) -> Result<Appended> {
                (**self).append_batch(id, entries, expect_last).await
            }
            async fn load_from(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
                (**self).load_from(id, from_seq).await
            }
            async fn create_with_entries(
                &self,
                id: &ConversationId,
                new: NewConversation,
                entries: &[LogEntry],
            ) -> Result<ConversationMeta> {
                (**self).create_with_entries(id, new, entries).await
            }
            async fn list(&self, page: Page) -> Result<ListPage> {
                (**self).list(page).await
            }
            async fn metadata(&self, id: &ConversationId) -> Result<ConversationMeta> {
                (**self).metadata(id).await
            }
            async fn update_metadata(
                &self,
                id: &ConversationId,
                update: MetaUpdate,
            ) -> Result<ConversationMeta> {
                (**self).update_metadata(id, update).await
            }
            async fn delete(&self, id: &ConversationId) -> Result<bool> {
                (**self).delete(id).await
            }
            async fn fork(
                &self,
                parent: &ConversationId,
                at_seq: u64,
                child: &ConversationId,
                new: NewConversation,
            ) -> Result<ConversationMeta> {
                (**self).fork(parent, at_seq, child, new).await
            }
            async fn search(&self, query: &str, page: Page) -> Result<ListPage> {
                (**self).search(query, page).await
            }
            async fn delete_older_than(&self, cutoff_ms: i64) -> Result<Vec<String>> {
                (**self).delete_older_than(cutoff_ms).await
            }
            async fn lock_run(&self, id: &ConversationId, holder: &RunHolder) -> Result<RunLock> {
                (**self).lock_run(id, holder).await
            }
            async fn run_holder(&self, id: &ConversationId) -> Result<Option<RunHolder>> {
                (**self).run_holder(id).await
            }
            async fn request_cancel(&self, id: &ConversationId, run_id: &str) -> Result<bool> {
                (**self).request_cancel(id, run_id).await
            }
            async fn cancel_requested(&self, id: &ConversationId) -> Result<Option<String>> {
                (**self).cancel_requested(id).await
            }
            async fn clear_cancel(&self, id: &ConversationId) -> Result<()> {
                (**self).clear_cancel(id).await
            }
            fn workspace(&self) -> Option<Arc<dyn Workspace>> {
                (**self).workspace()
            }
            fn directory(&self) -> Option<Arc<dyn Directory>> {
                (**self).directory()
            }
            fn memory(&self) -> Option<Arc<dyn crate::memory::MemoryStore>> {
                (**self).memory()
            }
            fn schedules(&self) -> Option<Arc<dyn Schedules>> {
                (**self).schedules()
            }
            async fn list_owned(&self, owner: &str, page: Page) -> Result<ListPage> {
                (**self).list_owned(owner, page).await
            }
            async fn search_owned(&self, owner: &str, query: &str, page: Page) -> Result<ListPage> {
                (**self).search_owned(owner, query, page).await
            }
        }
    };
}

forward!(Arc<T>);
forward!(Box<T>);

fn _object_safe(_: &dyn ConversationStore) {}

/// Shared by the clocks of the backends.
pub(crate) type SharedClock = Arc<dyn Clock>;
