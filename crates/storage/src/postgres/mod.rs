//! [`PostgresStore`]: the conversation log on PostgreSQL for shared deployments (feature
//! `postgres`).
//!
//! Two tables: `ba_conversations` (metadata and the last sequence number) and `ba_entries`
//! (one row an entry, primary key `(conversation_id, seq)`, so the database itself refuses a
//! duplicate sequence number). An append locks the conversation row (`SELECT … FOR UPDATE`),
//! checks the expected sequence number, inserts the batch and moves `last_seq` in one
//! transaction. Entries are stored as their JSON text, byte for byte what `FileStore` writes.
//! Migrations are numbered, kept in this file, and applied once under an advisory lock.
//!
//! People live in the database too (`people`): users, tokens (hashes only), shares (removed
//! with their conversation by a foreign key) and spend.
//!
//! The conversations' files live in the database too ([`PostgresWorkspace`], in `workspace`):
//! any number of servers sharing one database share every file with no shared disk.

mod history;
mod memory;
mod people;
mod schedule;
mod workspace;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::{LogEntry, Mode};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

pub use self::workspace::PostgresWorkspace;
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::people::Directory;
use crate::schedule::Schedules;
use crate::store::{
    Appended, ConversationMeta, ConversationStore, ListPage, Loaded, MetaUpdate, NewConversation,
    Page, RunHolder, RunLease, RunLock, SharedClock, SystemClock,
};
use crate::workspace::{Workspace, WorkspaceLimits};

/// The key of a conversation's run lock (an advisory lock on its hash). Advisory locks are
/// the database's, not the schema's: the key names the schema, so that two stores in two
/// schemas of one database never hold each other's conversations.
fn run_lock_key(schema: &str, id: &ConversationId) -> String {
    format!("ba-run:{schema}:{id}")
}

/// The holder `ba_run_holders` names for a conversation.
async fn read_holder(
    client: &deadpool_postgres::Object,
    id: &ConversationId,
) -> Result<Option<RunHolder>> {
    let row = client
        .query_opt(
            "SELECT run_id, holder, since_ms FROM ba_run_holders WHERE conversation_id = $1",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?;
    Ok(row.map(|r| RunHolder {
        run_id: r.get(0),
        holder: r.get(1),
        since_ms: r.get(2),
    }))
}

/// The schema migrations, in order; version `i + 1` is `MIGRATIONS[i]`.
pub const MIGRATIONS: &[&str] = &[
    "CREATE TABLE ba_conversations (
        id TEXT PRIMARY KEY,
        title TEXT,
        mode TEXT,
        parent TEXT,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        last_seq BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
    );
    CREATE INDEX ba_conversations_updated ON ba_conversations (updated_ms);
    CREATE TABLE ba_entries (
        conversation_id TEXT NOT NULL REFERENCES ba_conversations (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL CHECK (seq > 0),
        appended_ms BIGINT NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    );",
    "CREATE TABLE ba_cancel_requests (
        conversation_id TEXT PRIMARY KEY REFERENCES ba_conversations (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        requested_ms BIGINT NOT NULL
    );",
    // The conversations' workspaces: a row a file, its content in chunks of at most
    // `workspace::CHUNK` bytes (stored uncompressed: most uploads are compressed already), and
    // the last id given per kind, so an id is never given twice.
    "CREATE TABLE ba_files (
        conversation_id TEXT NOT NULL REFERENCES ba_conversations (id) ON DELETE CASCADE,
        file_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('upload', 'code', 'output', 'data')),
        name TEXT NOT NULL,
        media_type TEXT NOT NULL,
        size BIGINT NOT NULL CHECK (size >= 0),
        description TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        sha256 TEXT NOT NULL,
        attributes JSONB NOT NULL DEFAULT '{}',
        PRIMARY KEY (conversation_id, file_id)
    );
    CREATE TABLE ba_file_chunks (
        conversation_id TEXT NOT NULL,
        file_id TEXT NOT NULL,
        n INT NOT NULL CHECK (n >= 0),
        data BYTEA NOT NULL,
        PRIMARY KEY (conversation_id, file_id, n),
        FOREIGN KEY (conversation_id, file_id)
            REFERENCES ba_files (conversation_id, file_id) ON DELETE CASCADE
    );
    ALTER TABLE ba_file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
    CREATE TABLE ba_file_counters (
        conversation_id TEXT NOT NULL REFERENCES ba_conversations (id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        last BIGINT NOT NULL CHECK (last > 0),
        PRIMARY KEY (conversation_id, kind)
    );",
    // Who holds a conversation's run lease (the advisory lock): written when it is taken,
    // read by whoever is refused. A row outlives its lease; only a held lock makes it true.
    "CREATE TABLE ba_run_holders (
        conversation_id TEXT PRIMARY KEY REFERENCES ba_conversations (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        holder TEXT NOT NULL,
        since_ms BIGINT NOT NULL
    );",
    // Forks: a fork's rows hold only its own entries (numbered after `fork_at`); its history
    // up to the cut is read from `fork_parent`, which cannot be deleted while the fork lives.
    "ALTER TABLE ba_conversations
        ADD COLUMN fork_parent TEXT REFERENCES ba_conversations (id),
        ADD COLUMN fork_at BIGINT CHECK (fork_at >= 0);
    CREATE INDEX ba_conversations_fork_parent ON ba_conversations (fork_parent);",
    // People: every conversation has an owner (those stored before belong to `owner`); users,
    // their tokens (the SHA-256 of the secret only), the conversations shared with them, and
    // each user's spend a month, added to by `INSERT … ON CONFLICT` so that servers sharing
    // the database never lose each other's. Spend names no user row: the single user of a
    // server without accounts has none.
    "ALTER TABLE ba_conversations ADD COLUMN owner TEXT NOT NULL DEFAULT 'owner';
    CREATE INDEX ba_conversations_owner ON ba_conversations (owner, id);
    CREATE TABLE ba_users (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL CHECK (role IN ('admin', 'analyst', 'viewer')),
        created_ms BIGINT NOT NULL,
        month_usd DOUBLE PRECISION CHECK (month_usd >= 0),
        month_tokens BIGINT CHECK (month_tokens >= 0)
    );
    CREATE TABLE ba_tokens (
        id TEXT PRIMARY KEY,
        user_name TEXT NOT NULL REFERENCES ba_users (name) ON DELETE CASCADE,
        sha256 BYTEA NOT NULL UNIQUE,
        created_ms BIGINT NOT NULL
    );
    CREATE INDEX ba_tokens_user ON ba_tokens (user_name);
    CREATE TABLE ba_shares (
        conversation_id TEXT NOT NULL REFERENCES ba_conversations (id) ON DELETE CASCADE,
        user_name TEXT NOT NULL REFERENCES ba_users (name) ON DELETE CASCADE,
        access TEXT NOT NULL CHECK (access IN ('read')),
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (conversation_id, user_name)
    );
    CREATE INDEX ba_shares_user ON ba_shares (user_name, conversation_id);
    CREATE TABLE ba_spend (
        user_name TEXT NOT NULL,
        month TEXT NOT NULL,
        usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (user_name, month)
    );",
    // Memory across conversations: a row a version of a path of a scope (`user:NAME` or
    // `team`), `text` NULL for a delete.
    "CREATE TABLE ba_memory (
        scope TEXT NOT NULL,
        path TEXT NOT NULL,
        version INT NOT NULL CHECK (version > 0),
        text TEXT,
        author TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        PRIMARY KEY (scope, path, version)
    );",
    // Schedules and their runs: a run is claimed by inserting its row unless one exists
    // (the primary key makes the claim once across every server), and goes with its
    // schedule. The inputs are JSON text, read back through one serde type.
    "CREATE TABLE ba_schedules (
        id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        created_ms BIGINT NOT NULL,
        since_ms BIGINT NOT NULL
    );
    CREATE TABLE ba_schedule_runs (
        schedule_id TEXT NOT NULL REFERENCES ba_schedules (id) ON DELETE CASCADE,
        occurrence_ms BIGINT NOT NULL,
        conversation_id TEXT NOT NULL,
        claimed_ms BIGINT NOT NULL,
        finished_ms BIGINT,
        status TEXT,
        error TEXT,
        PRIMARY KEY (schedule_id, occurrence_ms)
    );
    CREATE INDEX ba_schedule_runs_unfinished ON ba_schedule_runs (claimed_ms)
        WHERE finished_ms IS NULL;",
];

/// Options of a [`PostgresStore`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// The schema the tables live in (created if missing): lowercase letters, digits, `_`.
    pub schema: String,
    /// Connections in the pool.
    pub pool_size: usize,
    /// The clock for `created`, `updated` and append times.
    pub clock: SharedClock,
    /// The size limits of the conversations' workspaces.
    pub workspace_limits: WorkspaceLimits,
    /// Where [`Workspace::local_path`] keeps copies of files on this machine (a folder per
    /// conversation; created private). Default: `ba-agent-files-<uid>` in the temporary folder.
    pub cache_dir: PathBuf,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: "public".to_owned(),
            pool_size: 16,
            clock: Arc::new(SystemClock),
            workspace_limits: WorkspaceLimits::default(),
            cache_dir: workspace::default_cache_dir(),
        }
    }
}

/// The PostgreSQL conversation store. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    clock: SharedClock,
    workspace: Arc<PostgresWorkspace>,
    directory: Arc<people::PgDirectory>,
    memory: Arc<memory::PgMemory>,
    schedules: Arc<schedule::PgSchedules>,
    schema: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

fn db(e: impl std::fmt::Display) -> StorageError {
    StorageError::Database(e.to_string())
}

fn to_i64(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| StorageError::invalid("sequence number", "too large"))
}

fn mode_text(mode: Option<Mode>) -> Option<&'static str> {
    mode.map(Mode::as_str)
}

fn mode_of(text: Option<String>) -> Option<Mode> {
    text.and_then(|t| serde_json::from_value(serde_json::Value::String(t)).ok())
}

fn meta_of(row: &tokio_postgres::Row) -> ConversationMeta {
    ConversationMeta {
        id: row.get("id"),
        title: crate::text::clean_title_opt(row.get("title")),
        mode: mode_of(row.get("mode")),
        parent: row.get("parent"),
        created_ms: row.get("created_ms"),
        updated_ms: row.get("updated_ms"),
        last_seq: u64::try_from(row.get::<_, i64>("last_seq")).unwrap_or(0),
        fork: row
            .get::<_, Option<String>>("fork_parent")
            .map(|parent| crate::store::ForkPoint {
                parent,
                at_seq: row
                    .get::<_, Option<i64>>("fork_at")
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
            }),
        owner: row.get("owner"),
    }
}

/// A page of at most `limit` conversations from `rows`, which hold one more when there is a
/// next page.
fn page_of(rows: &[tokio_postgres::Row], limit: usize) -> ListPage {
    let mut items: Vec<ConversationMeta> = rows.iter().map(meta_of).collect();
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(|m| m.id.clone())
    } else {
        None
    };
    ListPage { items, next }
}

const META_COLUMNS: &str =
    "id, title, mode, parent, created_ms, updated_ms, last_seq, fork_parent, fork_at, owner";

impl PostgresStore {
    /// Connects to `url` (`postgres://user@host:port/db`), creates the schema and applies the
    /// migrations it has not seen.
    pub async fn connect(url: &str, opts: PostgresOptions) -> Result<Self> {
        let schema = &opts.schema;
        if schema.is_empty()
            || schema.len() > 63
            || !schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return Err(StorageError::InvalidId {
                what: "schema name",
                value: schema.clone(),
                reason: "only lowercase ASCII letters, digits and `_` (at most 63) are allowed",
            });
        }
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StorageError::invalid("database URL", format!("{e}")))?;
        config.options(format!("-c search_path={schema}"));
        if config.get_application_name().is_none() {
            // What `pg_stat_activity` shows an operator for this store's sessions.
            config.application_name(format!("ba-agent:{schema}"));
        }
        // A connection is checked (an empty query) each time it leaves the pool: one cut
        // while idle (a restarted database, `pg_terminate_backend`) is replaced, not handed
        // to the next operation to fail it.
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(opts.pool_size.max(1))
            .build()
            .map_err(db)?;
        let workspace = Arc::new(PostgresWorkspace::new(
            pool.clone(),
            opts.clock.clone(),
            opts.workspace_limits,
            opts.cache_dir,
        ));
        let directory = Arc::new(people::PgDirectory::new(pool.clone(), opts.clock.clone()));
        let memory = Arc::new(memory::PgMemory::new(pool.clone(), opts.clock.clone()));
        let schedules = Arc::new(schedule::PgSchedules::new(pool.clone(), opts.clock.clone()));
        let store = Self {
            directory,
            memory,
            schedules,
            pool,
            clock: opts.clock,
            workspace,
            schema: schema.clone(),
        };
        store.migrate(schema).await?;
        Ok(store)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(db)
    }

    /// For tests of failure: ends every database session of this store's schema (named
    /// `ba-agent:SCHEMA`) but the one asking — the pool's, the run leases' — as a restarted
    /// database would; how many it ended.
    #[cfg(feature = "test-util")]
    pub async fn cut_all_sessions(&self) -> Result<i64> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
                &[&format!("ba-agent:{}", self.schema)],
            )
            .await
            .map_err(db)?;
        Ok(row.get(0))
    }

    /// For tests of failure: ends the database session that holds conversation `id`'s run
    /// lock, from another session, as an administrator's `pg_terminate_backend` or a failover
    /// would; how many sessions it ended (0 when nobody holds the lock).
    #[cfg(feature = "test-util")]
    pub async fn cut_run_lock_session(&self, id: &ConversationId) -> Result<i64> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks
                 WHERE locktype = 'advisory' AND granted
                   AND database = (SELECT oid FROM pg_database
                                   WHERE datname = current_database())
                   AND objsubid = 1
                   AND classid = ((hashtext($1)::bigint >> 32) & 4294967295)::oid
                   AND objid = (hashtext($1)::bigint & 4294967295)::oid",
                &[&run_lock_key(&self.schema, id)],
            )
            .await
            .map_err(db)?;
        Ok(row.get(0))
    }

    /// Applies missing migrations; returns how many ran.
    async fn migrate(&self, schema: &str) -> Result<usize> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        // One migrator at a time per schema, across processes.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&schema])
            .await
            .map_err(db)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS ba_schema_migrations (
                 version INT PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             );"
        ))
        .await
        .map_err(db)?;
        let row = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM ba_schema_migrations",
                &[],
            )
            .await
            .map_err(db)?;
        let done = usize::try_from(row.get::<_, i32>(0)).unwrap_or(0);
        let mut ran = 0;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(done) {
            tx.batch_execute(sql).await.map_err(db)?;
            let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
            tx.execute(
                "INSERT INTO ba_schema_migrations (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(db)?;
            ran += 1;
        }
        tx.commit().await.map_err(db)?;
        Ok(ran)
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<usize> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM ba_schema_migrations",
                &[],
            )
            .await
            .map_err(db)?;
        Ok(usize::try_from(row.get::<_, i32>(0)).unwrap_or(0))
    }
}

#[async_trait]
impl ConversationStore for PostgresStore {
    fn workspace(&self) -> Option<Arc<dyn Workspace>> {
        Some(self.workspace.clone())
    }

    fn directory(&self) -> Option<Arc<dyn Directory>> {
        Some(self.directory.clone())
    }

    fn memory(&self) -> Option<Arc<dyn crate::memory::MemoryStore>> {
        Some(self.memory.clone())
    }

    fn schedules(&self) -> Option<Arc<dyn Schedules>> {
        Some(self.schedules.clone())
    }

    async fn create(&self, id: &ConversationId, new: NewConversation) -> Result<ConversationMeta> {
        let owner = new.owner_name()?;
        let client = self.client().await?;
        let now = self.clock.now_ms();
        let rows = client
            .query(
                &format!(
                    "INSERT INTO ba_conversations
                        (id, title, mode, parent, created_ms, updated_ms, owner)
                     VALUES ($1, $2, $3, $4, $5, $5, $6) ON CONFLICT (id) DO NOTHING
                     RETURNING {META_COLUMNS}"
                ),
                &[
                    &id.as_str(),
                    &crate::text::clean_title_opt(new.title),
                    &mode_text(new.mode),
                    &new.parent,
                    &now,
                    &owner,
                ],
            )
            .await
            .map_err(db)?;
        match rows.first() {
            Some(row) => Ok(meta_of(row)),
            None => Err(StorageError::AlreadyExists { id: id.to_string() }),
        }
    }

    async fn append_batch(
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
        let mut texts = Vec::with_capacity(entries.len());
        for entry in entries {
            texts.push(
                serde_json::to_string(entry).map_err(|e| StorageError::Format {
                    what: format!("entry `{}` of `{id}`", entry.id),
                    message: e.to_string(),
                })?,
            );
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let row = tx
            .query_opt(
                // NO KEY UPDATE: a file being stored holds a key-share lock on the row (its
                // foreign key) for as long as its content streams in, and must not hold up
                // the log.
                "SELECT last_seq FROM ba_conversations WHERE id = $1 FOR NO KEY UPDATE",
                &[&id.as_str()],
            )
            .await
            .map_err(db)?
            .ok_or_else(|| StorageError::NotFound { id: id.to_string() })?;
        let last = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        if let Some(expected) = expect_last
            && expected != last
        {
            return Err(StorageError::SequenceConflict {
                id: id.to_string(),
                expected,
                actual: last,
            });
        }
        let now = self.clock.now_ms();
        let insert = tx
            .prepare(
                "INSERT INTO ba_entries (conversation_id, seq, appended_ms, entry)
                 VALUES ($1, $2, $3, $4)",
            )
            .await
            .map_err(db)?;
        for (i, text) in texts.iter().enumerate() {
            let seq = to_i64(last + 1 + i as u64)?;
            if let Err(e) = tx.execute(&insert, &[&id.as_str(), &seq, &now, text]).await {
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                    return Err(StorageError::SequenceConflict {
                        id: id.to_string(),
                        expected: last,
                        actual: last + 1,
                    });
                }
                return Err(db(e));
            }
        }
        let new_last = last + entries.len() as u64;
        tx.execute(
            "UPDATE ba_conversations SET last_seq = $2, updated_ms = GREATEST(updated_ms, $3)
             WHERE id = $1",
            &[&id.as_str(), &to_i64(new_last)?, &now],
        )
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Appended {
            first_seq: last + 1,
            last_seq: new_last,
        })
    }

    /// A fork's entries are its parent's up to the cut (recursively), then its own (see
    /// `history`).
    async fn load_from(&self, id: &ConversationId, from_seq: u64) -> Result<Loaded> {
        self.load_through_forks(id, from_seq).await
    }

    async fn fork(
        &self,
        parent: &ConversationId,
        at_seq: u64,
        child: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        self.fork_by_link(parent, at_seq, child, new).await
    }

    /// In the database (see `history`).
    async fn search(&self, query: &str, page: Page) -> Result<ListPage> {
        self.search_in_db(None, query, page).await
    }

    /// In the database, among the owner's conversations (see `history`).
    async fn search_owned(&self, owner: &str, query: &str, page: Page) -> Result<ListPage> {
        self.search_in_db(Some(owner), query, page).await
    }

    async fn list(&self, page: Page) -> Result<ListPage> {
        let client = self.client().await?;
        let limit = page.limit.max(1);
        let rows = client
            .query(
                &format!(
                    "SELECT {META_COLUMNS} FROM ba_conversations
                     WHERE $1::TEXT IS NULL OR id > $1 ORDER BY id LIMIT $2"
                ),
                &[&page.after, &i64::try_from(limit + 1).unwrap_or(i64::MAX)],
            )
            .await
            .map_err(db)?;
        Ok(page_of(&rows, limit))
    }

    /// By the index on `(owner, id)`.
    async fn list_owned(&self, owner: &str, page: Page) -> Result<ListPage> {
        let client = self.client().await?;
        let limit = page.limit.max(1);
        let rows = client
            .query(
                &format!(
                    "SELECT {META_COLUMNS} FROM ba_conversations
                     WHERE owner = $1 AND ($2::TEXT IS NULL OR id > $2) ORDER BY id LIMIT $3"
                ),
                &[
                    &owner,
                    &page.after,
                    &i64::try_from(limit + 1).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(db)?;
        Ok(page_of(&rows, limit))
    }

    async fn metadata(&self, id: &ConversationId) -> Result<ConversationMeta> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {META_COLUMNS} FROM ba_conversations WHERE id = $1"),
                &[&id.as_str()],
            )
            .await
            .map_err(db)?
            .ok_or_else(|| StorageError::NotFound { id: id.to_string() })?;
        Ok(meta_of(&row))
    }

    async fn update_metadata(
        &self,
        id: &ConversationId,
        update: MetaUpdate,
    ) -> Result<ConversationMeta> {
        let client = self.client().await?;
        let now = self.clock.now_ms();
        let row = client
            .query_opt(
                &format!(
                    "UPDATE ba_conversations
                     SET title = COALESCE($2, title), mode = COALESCE($3, mode),
                         updated_ms = GREATEST(updated_ms, $4)
                     WHERE id = $1 RETURNING {META_COLUMNS}"
                ),
                &[
                    &id.as_str(),
                    &crate::text::clean_title_opt(update.title),
                    &mode_text(update.mode),
                    &now,
                ],
            )
            .await
            .map_err(db)?
            .ok_or_else(|| StorageError::NotFound { id: id.to_string() })?;
        Ok(meta_of(&row))
    }

    /// A session advisory lock on a connection taken out of the pool: dropping the lease
    /// closes the connection, and the server releases the lock with it — at once when this
    /// process dies, and within a minute when its host vanishes (the session's TCP keepalives:
    /// 30 s idle, then 3 probes 10 s apart). The holder goes in `ba_run_holders`. The lock
    /// is lost when that connection alone is cut (a restarted database, an administrator's
    /// `pg_terminate_backend`): the lease then says it is no longer held.
    async fn lock_run(&self, id: &ConversationId, holder: &RunHolder) -> Result<RunLock> {
        holder.validate(id)?;
        let client = self.client().await?;
        let key = run_lock_key(&self.schema, id);
        let row = client
            .query_one("SELECT pg_try_advisory_lock(hashtext($1))", &[&key])
            .await
            .map_err(db)?;
        let locked: bool = row.get(0);
        if !locked {
            return Ok(RunLock::Held(read_holder(&client, id).await?));
        }
        let written = async {
            client
                .batch_execute(
                    "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10;
                     SET tcp_keepalives_count = 3",
                )
                .await?;
            client
                .execute(
                    "INSERT INTO ba_run_holders (conversation_id, run_id, holder, since_ms)
                     SELECT id, $2, $3, $4 FROM ba_conversations WHERE id = $1
                     ON CONFLICT (conversation_id) DO UPDATE SET run_id = EXCLUDED.run_id,
                        holder = EXCLUDED.holder, since_ms = EXCLUDED.since_ms",
                    &[
                        &id.as_str(),
                        &holder.run_id,
                        &holder.holder,
                        &holder.since_ms,
                    ],
                )
                .await
        }
        .await;
        match written {
            Ok(1) => Ok(RunLock::Taken(RunLease::holding_while(
                deadpool_postgres::Object::take(client),
                |c| !c.is_closed(),
            ))),
            Ok(_) => {
                // Released with the connection, which is not given back to the pool.
                drop(deadpool_postgres::Object::take(client));
                Err(StorageError::NotFound { id: id.to_string() })
            }
            Err(e) => {
                drop(deadpool_postgres::Object::take(client));
                Err(db(e))
            }
        }
    }

    async fn run_holder(&self, id: &ConversationId) -> Result<Option<RunHolder>> {
        let client = self.client().await?;
        // Held by some session: the lock table says so without taking the lock.
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
                   AND granted AND database = (SELECT oid FROM pg_database
                                               WHERE datname = current_database())
                   AND objsubid = 1
                   AND classid = ((hashtext($1)::bigint >> 32) & 4294967295)::oid
                   AND objid = (hashtext($1)::bigint & 4294967295)::oid)",
                &[&run_lock_key(&self.schema, id)],
            )
            .await
            .map_err(db)?;
        if !row.get::<_, bool>(0) {
            return Ok(None);
        }
        Ok(Some(read_holder(&client, id).await?.unwrap_or_else(|| {
            RunHolder {
                run_id: String::new(),
                holder: "a run that has not written its name yet".to_owned(),
                since_ms: 0,
            }
        })))
    }

    /// A row of `ba_cancel_requests`, read by the server running the run.
    async fn request_cancel(&self, id: &ConversationId, run_id: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO ba_cancel_requests (conversation_id, run_id, requested_ms)
                 SELECT id, $2, $3 FROM ba_conversations WHERE id = $1
                 ON CONFLICT (conversation_id)
                 DO UPDATE SET run_id = EXCLUDED.run_id, requested_ms = EXCLUDED.requested_ms",
                &[&id.as_str(), &run_id, &self.clock.now_ms()],
            )
            .await
            .map_err(db)?;
        if n == 0 {
            return Err(StorageError::NotFound { id: id.to_string() });
        }
        Ok(true)
    }

    async fn cancel_requested(&self, id: &ConversationId) -> Result<Option<String>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT run_id FROM ba_cancel_requests WHERE conversation_id = $1",
                &[&id.as_str()],
            )
            .await
            .map_err(db)?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn clear_cancel(&self, id: &ConversationId) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM ba_cancel_requests WHERE conversation_id = $1",
                &[&id.as_str()],
            )
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn delete(&self, id: &ConversationId) -> Result<bool> {
        let client = self.client().await?;
        let forks_of = async |client: &deadpool_postgres::Object| -> Result<Vec<String>> {
            Ok(client
                .query(
                    "SELECT id FROM ba_conversations WHERE fork_parent = $1 ORDER BY id",
                    &[&id.as_str()],
                )
                .await
                .map_err(db)?
                .iter()
                .map(|r| r.get(0))
                .collect())
        };
        let has_forks = |forks| StorageError::HasForks {
            id: id.to_string(),
            forks,
        };
        let forks = forks_of(&client).await?;
        if !forks.is_empty() {
            return Err(has_forks(forks));
        }
        // A fork made meanwhile holds the parent by its foreign key: the delete fails then,
        // and is refused like one that saw the fork.
        let n = match client
            .execute(
                "DELETE FROM ba_conversations WHERE id = $1",
                &[&id.as_str()],
            )
            .await
        {
            Ok(n) => n,
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                return Err(has_forks(forks_of(&client).await?));
            }
            Err(e) => return Err(db(e)),
        };
        // Its files went with it (the foreign keys cascade); so go the copies made here.
        self.workspace.forget_cached(id.as_str());
        Ok(n > 0)
    }

    async fn delete_older_than(&self, cutoff_ms: i64) -> Result<Vec<String>> {
        let client = self.client().await?;
        let rows = client
            .query(
                // A conversation with forks stays until its forks are gone.
                "DELETE FROM ba_conversations c WHERE updated_ms < $1
                 AND NOT EXISTS (SELECT 1 FROM ba_conversations f WHERE f.fork_parent = c.id)
                 RETURNING id",
                &[&cutoff_ms],
            )
            .await
            .map_err(db)?;
        let mut ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        ids.sort();
        for id in &ids {
            self.workspace.forget_cached(id);
        }
        Ok(ids)
    }
}
