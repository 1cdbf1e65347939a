//! The conformance suite on a real PostgreSQL server. The server comes from
//! `BA_AGENT_TEST_DATABASE_URL` (`.ci/postgres.sh` starts one and prints it); without it the
//! tests say they are skipped, and fail under `CI=true`.
#![cfg(feature = "postgres")]
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use ba_protocol::LogRole;
use ba_storage::conformance::{self, text_entry};
use ba_storage::{
    ConversationId, ConversationStore, DEFAULT_OWNER, NewConversation, NewFile, Page,
    PostgresOptions, PostgresStore, Role, Spend,
};

fn url() -> Option<String> {
    ba_testkit::require_env(
        "BA_AGENT_TEST_DATABASE_URL",
        "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
    )
}

fn schema() -> String {
    format!("ba_test_{}", uuid::Uuid::new_v4().simple())
}

/// A store on `schema` with the default options.
async fn store_in(url: &str, schema: &str) -> PostgresStore {
    let opts = PostgresOptions {
        schema: schema.to_owned(),
        ..PostgresOptions::default()
    };
    PostgresStore::connect(url, opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_postgres() {
    let Some(url) = url() else { return };
    conformance::run_all(|clock| {
        let url = url.clone();
        async move {
            let opts = PostgresOptions {
                schema: schema(),
                clock,
                ..PostgresOptions::default()
            };
            PostgresStore::connect(&url, opts).await.unwrap()
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_once_and_two_stores_share_one_log() {
    let Some(url) = url() else { return };
    let schema = schema();
    let opts = PostgresOptions {
        schema: schema.clone(),
        ..PostgresOptions::default()
    };
    let a = PostgresStore::connect(&url, opts.clone()).await.unwrap();
    let b = PostgresStore::connect(&url, opts).await.unwrap();
    assert_eq!(
        b.schema_version().await.unwrap(),
        ba_storage::MIGRATIONS.len()
    );
    let id = ConversationId::new("shared").unwrap();
    a.create(&id, NewConversation::default()).await.unwrap();
    let e = text_entry("x", LogRole::User, "hello");
    assert_eq!(a.append(&id, &e, Some(0)).await.unwrap(), 1);
    assert_eq!(b.append(&id, &e, None).await.unwrap(), 2);
    assert!(b.append(&id, &e, Some(1)).await.is_err());
    assert_eq!(a.load(&id).await.unwrap().entries.len(), 2);
    let bad = PostgresOptions {
        schema: "Robert'); DROP".to_owned(),
        ..PostgresOptions::default()
    };
    let err = PostgresStore::connect(&url, bad).await.unwrap_err();
    assert!(err.to_string().starts_with("invalid schema name"), "{err}");
    let _ = Arc::new(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workspace_conformance_on_postgres() {
    let Some(url) = url() else { return };
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("cache");
    conformance::workspace(|clock, limits| {
        let (url, cache_dir) = (url.clone(), cache_dir.clone());
        async move {
            let opts = PostgresOptions {
                schema: schema(),
                clock,
                workspace_limits: limits,
                cache_dir,
                ..PostgresOptions::default()
            };
            PostgresStore::connect(&url, opts).await.unwrap()
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_share_every_file() {
    let Some(url) = url() else { return };
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let opts = |cache: &std::path::Path| PostgresOptions {
        schema: format!("ba_test_shared_{}", std::process::id()),
        cache_dir: cache.join("files"),
        ..PostgresOptions::default()
    };
    let a = PostgresStore::connect(&url, opts(cache_a.path()))
        .await
        .unwrap();
    let b = PostgresStore::connect(&url, opts(cache_b.path()))
        .await
        .unwrap();
    let id = ConversationId::random();
    a.create(&id, NewConversation::default()).await.unwrap();
    let (wa, wb) = (a.workspace().unwrap(), b.workspace().unwrap());
    let body: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let meta = wa
        .put_bytes(&id, NewFile::upload("sales.csv", "shared"), &body)
        .await
        .unwrap();
    assert_eq!(meta.id, "upload_001");
    assert_eq!(wb.find(&id, "sales.csv").await.unwrap(), Some(meta.clone()));
    let (_, read) = wb.read_bytes(&id, "upload_001", 1 << 20).await.unwrap();
    assert_eq!(read, body);
    let path = wb.local_path(&id, "upload_001").await.unwrap();
    assert!(path.starts_with(cache_b.path()));
    assert_eq!(std::fs::read(&path).unwrap(), body);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(cache_b.path().join("files"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    // A put on one store and one on the other never share an id.
    let next = wb
        .put_bytes(&id, NewFile::upload("b.csv", ""), b"x")
        .await
        .unwrap();
    assert_eq!(next.id, "upload_002");
    // Deleting the conversation deletes its files and this machine's copies.
    assert!(b.delete(&id).await.unwrap());
    assert!(wa.list(&id).await.unwrap().is_empty());
    assert!(!path.exists());
    assert!(wa.owners().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_streaming_in_does_not_hold_up_the_log() {
    use tokio::io::AsyncWriteExt as _;
    let Some(url) = url() else { return };
    let store = store_in(&url, &schema()).await;
    let id = ConversationId::new("busy").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    let ws = store.workspace().unwrap();
    let (mut writer, mut reader) = tokio::io::duplex(64 << 10);
    let put = {
        let (ws, id) = (ws.clone(), id.clone());
        tokio::spawn(async move {
            ws.put(&id, NewFile::upload("slow.csv", ""), &mut reader)
                .await
        })
    };
    // More than a chunk, so the put's transaction is open and holding its locks.
    let first = vec![b'x'; 300 << 10];
    writer.write_all(&first).await.unwrap();
    let entry = text_entry("m1", LogRole::User, "while uploading");
    let appended = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        store.append(&id, &entry, Some(0)),
    )
    .await
    .expect("an append waited for the upload")
    .unwrap();
    assert_eq!(appended, 1);
    assert!(
        ws.list(&id).await.unwrap().is_empty(),
        "a file half stored is listed"
    );
    writer.write_all(b"end").await.unwrap();
    drop(writer);
    let meta = put.await.unwrap().unwrap();
    assert_eq!(meta.size, (300 << 10) + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_migrating_one_empty_schema_at_once_all_start() {
    let Some(url) = url() else { return };
    let schema = schema();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let opts = PostgresOptions {
                schema: schema.clone(),
                ..PostgresOptions::default()
            };
            let url = url.clone();
            tokio::spawn(async move { PostgresStore::connect(&url, opts).await })
        })
        .collect();
    let mut stores: Vec<PostgresStore> = Vec::new();
    for start in starts {
        stores.push(start.await.unwrap().unwrap());
    }
    for s in &stores {
        assert_eq!(
            s.schema_version().await.unwrap(),
            ba_storage::MIGRATIONS.len()
        );
    }
    // One log, as any of them sees it.
    let id = ConversationId::new("raced").unwrap();
    stores[0]
        .create(&id, NewConversation::default())
        .await
        .unwrap();
    let e = text_entry("x", LogRole::User, "hello");
    assert_eq!(stores[3].append(&id, &e, Some(0)).await.unwrap(), 1);
    assert_eq!(stores[1].load(&id).await.unwrap().entries.len(), 1);
}

const HOLDER_CHILD: &str = "BA_AGENT_PG_HOLDER_CHILD";

/// Run as a child of `a_killed_holder_releases_the_run_lock`: takes the lease of the
/// conversation its environment names, says so, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_child() {
    let Ok(spec) = std::env::var(HOLDER_CHILD) else {
        return;
    };
    let (url, schema) = spec.split_once(' ').unwrap();
    let store = store_in(url, schema).await;
    let id = ConversationId::new("held").unwrap();
    let _lease = store
        .lock_run(&id, &ba_storage::RunHolder::new("r-child", "the child"))
        .await
        .unwrap()
        .lease()
        .expect("the lease is free");
    println!("LOCKED");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_releases_the_run_lock() {
    use std::io::BufRead as _;
    let Some(url) = url() else { return };
    let schema = schema();
    let store = store_in(&url, &schema).await;
    let id = ConversationId::new("held").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    /// The child, killed whatever happens to the test.
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Child(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "holder_child", "--nocapture", "--test-threads=1"])
            .env(HOLDER_CHILD, format!("{url} {schema}"))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let locked = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("LOCKED"));
    assert!(locked, "the child did not take the lease");
    let me = ba_storage::RunHolder::new("r-parent", "the parent");
    match store.lock_run(&id, &me).await.unwrap() {
        ba_storage::RunLock::Held(Some(h)) => assert_eq!(h.holder, "the child"),
        other => panic!("the child's lease is not seen: {other:?}"),
    }
    // SIGKILL: no destructor runs; the server sees the connection close and drops the lock.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let start = std::time::Instant::now();
    let lease = loop {
        match store.lock_run(&id, &me).await.unwrap() {
            ba_storage::RunLock::Taken(lease) => break lease,
            held => {
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(60),
                    "the dead child's lease was never released: {held:?}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    drop(lease);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_in_two_schemas_are_apart() {
    let Some(url) = url() else { return };
    let (a, b) = (
        store_in(&url, &schema()).await,
        store_in(&url, &schema()).await,
    );
    let id = ConversationId::new("same-name").unwrap();
    a.create(&id, NewConversation::default()).await.unwrap();
    b.create(&id, NewConversation::default()).await.unwrap();
    let holder = ba_storage::RunHolder::new("r1", "a test");
    let _in_a = a.lock_run(&id, &holder).await.unwrap().lease().unwrap();
    // The same conversation id in another schema is another conversation: its lease is free.
    let in_b = b.lock_run(&id, &holder).await.unwrap();
    assert!(in_b.lease().is_some(), "schema b waits on schema a's lease");
}

/// The lease's lock lives in one database session: when that session alone is cut, the lock
/// is gone, the lease says so (a run holding it stops writing), and another holder takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_connection_is_cut_says_it_is_lost() {
    let Some(url) = url() else { return };
    let schema = schema();
    let store = store_in(&url, &schema).await;
    let id = ConversationId::new("cut").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    let lease = store
        .lock_run(&id, &ba_storage::RunHolder::new("r1", "first"))
        .await
        .unwrap()
        .lease()
        .unwrap();
    assert!(lease.is_held());
    assert_eq!(store.cut_run_lock_session(&id).await.unwrap(), 1);
    let start = std::time::Instant::now();
    while lease.is_held() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the lease still says it is held after its connection was cut"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The store itself goes on (the pool's other connections), and the conversation is free.
    let second = store
        .lock_run(&id, &ba_storage::RunHolder::new("r2", "second"))
        .await
        .unwrap()
        .lease()
        .expect("the lock of a cut connection is free");
    assert!(second.is_held());
    drop(lease);
    // Dropping the lost lease does not release the new holder's lock.
    match store
        .lock_run(&id, &ba_storage::RunHolder::new("r3", "third"))
        .await
        .unwrap()
    {
        ba_storage::RunLock::Held(Some(h)) => assert_eq!(h.holder, "second"),
        other => panic!("the second lease is not seen: {other:?}"),
    }
}

/// A plain connection to the test database with `schema` first on the search path.
async fn raw_client(url: &str, schema: &str) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_secrets_are_in_no_table() {
    let Some(url) = url() else { return };
    let schema = schema();
    let store = store_in(&url, &schema).await;
    let people = store.directory().unwrap();
    people.add_user("ann", Role::Analyst).await.unwrap();
    let issued = [
        people.issue_token("ann").await.unwrap(),
        people.issue_token("ann").await.unwrap(),
    ];
    let client = raw_client(&url, &schema).await;
    let rows: Vec<String> = client
        .query("SELECT row_to_json(t)::TEXT FROM ba_tokens t", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(rows.len(), 2);
    for t in &issued {
        assert!(rows.iter().any(|r| r.contains(&t.info.id)), "{rows:?}");
        assert!(
            rows.iter()
                .all(|r| !r.to_lowercase().contains(&t.secret.to_lowercase())),
            "a token's secret is in ba_tokens: {rows:?}"
        );
        assert_eq!(
            people.authenticate(&t.secret).await.unwrap().unwrap().name,
            "ann"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_database_add_spend_without_loss() {
    let Some(url) = url() else { return };
    let schema = schema();
    let a = store_in(&url, &schema).await;
    let b = store_in(&url, &schema).await;
    let (pa, pb) = (a.directory().unwrap(), b.directory().unwrap());
    let mut tasks = Vec::new();
    for i in 0..50 {
        let people = if i % 2 == 0 { pa.clone() } else { pb.clone() };
        tasks.push(tokio::spawn(async move {
            people
                .add_spend(
                    "ann",
                    "2026-11",
                    Spend {
                        usd: 0.25,
                        tokens: 1000,
                    },
                )
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let expected = Spend {
        usd: 12.5,
        tokens: 50_000,
    };
    assert_eq!(pa.spend("ann", "2026-11").await.unwrap(), expected);
    assert_eq!(pb.spend("ann", "2026-11").await.unwrap(), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_owners_gives_its_conversations_to_the_default_owner() {
    let Some(url) = url() else { return };
    let schema = schema();
    let client = raw_client(&url, &schema).await;
    // The schema as it stood before the migration that added owners.
    let before = ba_storage::MIGRATIONS.len() - 1;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {schema};
             CREATE TABLE ba_schema_migrations (
                 version INT PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             );"
        ))
        .await
        .unwrap();
    for (i, sql) in ba_storage::MIGRATIONS[..before].iter().enumerate() {
        client.batch_execute(sql).await.unwrap();
        client
            .execute(
                "INSERT INTO ba_schema_migrations (version) VALUES ($1)",
                &[&i32::try_from(i + 1).unwrap()],
            )
            .await
            .unwrap();
    }
    client
        .execute(
            "INSERT INTO ba_conversations (id, title, created_ms, updated_ms)
             VALUES ('old', 'Q3', 1, 1)",
            &[],
        )
        .await
        .unwrap();
    let store = store_in(&url, &schema).await;
    assert_eq!(
        store.schema_version().await.unwrap(),
        ba_storage::MIGRATIONS.len()
    );
    let old = ConversationId::new("old").unwrap();
    let meta = store.metadata(&old).await.unwrap();
    assert_eq!(meta.owner, DEFAULT_OWNER);
    let mine = store
        .list_owned(DEFAULT_OWNER, Page::first(10))
        .await
        .unwrap();
    assert_eq!(mine.items, vec![meta]);
    // The listing of one owner can be answered from the owner index (a table this small is
    // read whole unless sequential scans are ruled out).
    client
        .batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    let plan: Vec<String> = client
        .query(
            "EXPLAIN SELECT id FROM ba_conversations WHERE owner = 'ann' ORDER BY id LIMIT 5",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("ba_conversations_owner"), "{plan}");
}
