//! `FileStore`: the conformance suite under each durability policy, and the file-level
//! failure cases (torn tails, garbage lines, non-UTF-8 bytes, bad ids, a full disk, a lost
//! index, two store instances sharing one folder).
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::sync::Arc;

use ba_protocol::{LogEntry, LogRole};
use ba_storage::conformance::{self, text_entry};
use ba_storage::{
    ConversationId, ConversationStore, DEFAULT_OWNER, DiagnosticKind, Durability, FileStore,
    FileStoreOptions, NewConversation, Role, Spend, StorageError, WriteFault,
};

fn entry(i: u64) -> LogEntry {
    text_entry(
        &format!("m{i}"),
        LogRole::User,
        &format!("entry number {i}"),
    )
}

async fn run_conformance(durability: Durability) {
    let dirs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = dirs.clone();
    conformance::run_all(move |clock| {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileStoreOptions::default()
            .with_durability(durability)
            .with_clock(clock);
        let store = FileStore::open_with(dir.path(), opts).unwrap();
        keep.lock().unwrap().push(dir);
        async move { store }
    })
    .await
    .unwrap();
    drop(dirs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_group_commit() {
    run_conformance(Durability::GroupCommit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_every_append() {
    run_conformance(Durability::EveryAppend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_os_buffered() {
    run_conformance(Durability::OsBuffered).await;
}

async fn store_with(n: u64) -> (tempfile::TempDir, FileStore, ConversationId) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let id = ConversationId::new("c1").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    for i in 1..=n {
        store.append(&id, &entry(i), None).await.unwrap();
    }
    (dir, store, id)
}

fn append_raw(store: &FileStore, id: &ConversationId, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(store.log_path(id))
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torn_tail_is_reported_skipped_and_moved_aside_by_the_next_append() {
    let (_dir, store, id) = store_with(3).await;
    append_raw(
        &store,
        &id,
        br#"{"seq":4,"at":1,"entry":{"schema_version":1,"id":"m4","ro"#,
    );
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(loaded.entries.len(), 3);
    assert_eq!(loaded.diagnostics.len(), 1);
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::TornTail);
    assert_eq!(loaded.diagnostics[0].line, 4);
    // A reopened store (a new process) appends after the last whole line.
    let reopened = FileStore::open(store.root()).unwrap();
    assert_eq!(reopened.append(&id, &entry(4), None).await.unwrap(), 4);
    let loaded = reopened.load(&id).await.unwrap();
    let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(loaded.entries[3].entry, entry(4));
    assert_eq!(loaded.diagnostics.len(), 1, "{:?}", loaded.diagnostics);
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::Quarantined);
    let torn = std::fs::read_to_string(store.root().join("conversations/c1.torn")).unwrap();
    assert!(torn.starts_with(r#"{"seq":4,"at":1"#), "{torn}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_non_utf8_lines_in_the_middle_are_reported_and_skipped() {
    let (_dir, store, id) = store_with(2).await;
    append_raw(&store, &id, b"this is not json\n");
    append_raw(&store, &id, b"\xff\xfe binary \xc3\x28\n");
    assert_eq!(store.append(&id, &entry(3), None).await.unwrap(), 3);
    let loaded = store.load(&id).await.unwrap();
    let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    let kinds: Vec<_> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.kind, d.line))
        .collect();
    assert_eq!(
        kinds,
        [(DiagnosticKind::Corrupt, 3), (DiagnosticKind::NotUtf8, 4)]
    );
    assert!(
        loaded.diagnostics[0]
            .to_string()
            .starts_with("line 3 (byte "),
        "{}",
        loaded.diagnostics[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_entry_with_a_readable_head_keeps_its_sequence_number() {
    let (_dir, store, id) = store_with(1).await;
    append_raw(&store, &id, br#"{"seq":2,"at":5,"entry":{"id":"x"}}"#);
    append_raw(&store, &id, b"\n");
    assert_eq!(store.append(&id, &entry(3), None).await.unwrap(), 3);
    let loaded = store.load(&id).await.unwrap();
    let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 3]);
    assert_eq!(loaded.diagnostics.len(), 1);
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::Corrupt);
}

#[test]
fn ids_that_escape_are_refused() {
    let err = ConversationId::new("../etc/passwd").unwrap_err();
    assert!(matches!(err, StorageError::InvalidId { .. }));
    assert_eq!(
        err.to_string(),
        "invalid conversation id `../etc/passwd`: it contains `..`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_append_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let fault = WriteFault::fail_after(u64::MAX);
    let store = FileStore::open_with(
        dir.path(),
        FileStoreOptions::default().with_fault(fault.clone()),
    )
    .unwrap();
    let id = ConversationId::new("full").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    for i in 1..=3 {
        store.append(&id, &entry(i), None).await.unwrap();
    }
    fault.set_remaining(20);
    let batch = [entry(4), entry(5)];
    let err = store.append_batch(&id, &batch, None).await.unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("appending to "), "{text}");
    let path = store.log_path(&id).display().to_string();
    assert!(
        text.contains(&path) && text.contains("no space left on device"),
        "the error names the file and the cause: {text}"
    );
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(loaded.entries.len(), 3);
    assert!(
        loaded.diagnostics.is_empty(),
        "the partial write was taken back: {:?}",
        loaded.diagnostics
    );
    fault.set_remaining(u64::MAX);
    let done = store.append_batch(&id, &batch, Some(3)).await.unwrap();
    assert_eq!((done.first_seq, done.last_seq), (4, 5));
    assert_eq!(store.load(&id).await.unwrap().entries.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_is_rebuilt_from_the_files() {
    let (dir, store, id) = store_with(4).await;
    store
        .create(
            &ConversationId::new("c2").unwrap(),
            NewConversation {
                title: Some("second".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let before = store.list_all().await.unwrap();
    drop(store);
    std::fs::write(dir.path().join("index.json"), b"{broken").unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.list_all().await.unwrap(), before);
    std::fs::remove_file(dir.path().join("index.json")).unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    assert_eq!(store.rebuild_index().await.unwrap(), 2);
    let after = store.list_all().await.unwrap();
    assert_eq!(after, before);
    assert_eq!(after[0].last_seq, 4);
    assert_eq!(store.metadata(&id).await.unwrap().last_seq, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_store_instances_on_one_folder_never_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let a = FileStore::open(dir.path()).unwrap();
    let b = FileStore::open(dir.path()).unwrap();
    let id = ConversationId::new("shared").unwrap();
    a.create(&id, NewConversation::default()).await.unwrap();
    let mut tasks = Vec::new();
    for (n, store) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let e = text_entry(&format!("w{n}-{i}"), LogRole::User, "x");
                store.append(&id, &e, None).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let loaded = b.load(&id).await.unwrap();
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
    assert_eq!(a.metadata(&id).await.unwrap().last_seq, 100);
    // A conversation deleted by one instance is gone for the other, even with a file open.
    assert!(a.delete(&id).await.unwrap());
    assert!(matches!(
        b.append(&id, &entry(1), None).await,
        Err(StorageError::NotFound { .. })
    ));
}

/// Another instance on the folder (another server, the CLI) sees a title and a mode set
/// through the first, though it read the conversation before: a workflow started by one
/// server puts the conversation in run mode for the server that continues it.
#[tokio::test]
async fn metadata_set_by_one_instance_is_read_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let a = FileStore::open(dir.path()).unwrap();
    let b = FileStore::open(dir.path()).unwrap();
    let id = ConversationId::new("shared").unwrap();
    a.create(&id, NewConversation::default()).await.unwrap();
    assert_eq!(b.metadata(&id).await.unwrap().mode, None);
    assert_eq!(b.list_all().await.unwrap()[0].title, None);
    for (n, mode) in [ba_protocol::Mode::Run, ba_protocol::Mode::Chat]
        .into_iter()
        .enumerate()
    {
        let title = format!("Monthly review {n}");
        let update = ba_storage::MetaUpdate {
            title: Some(title.clone()),
            mode: Some(mode),
        };
        a.update_metadata(&id, update).await.unwrap();
        let seen = b.metadata(&id).await.unwrap();
        assert_eq!(
            (seen.title.as_deref(), seen.mode),
            (Some(title.as_str()), Some(mode))
        );
        assert_eq!(
            b.list_all().await.unwrap()[0].title.as_deref(),
            Some(title.as_str())
        );
    }
}

/// A store on a fresh folder with `durability`, its appends and syncs counted by `fault`,
/// and one conversation.
async fn counted(
    durability: Durability,
    fault: &WriteFault,
) -> (tempfile::TempDir, FileStore, ConversationId) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open_with(
        dir.path(),
        FileStoreOptions::default()
            .with_durability(durability)
            .with_fault(fault.clone()),
    )
    .unwrap();
    let id = ConversationId::new("durable").unwrap();
    store.create(&id, NewConversation::default()).await.unwrap();
    (dir, store, id)
}

/// `writers` tasks append `each` entries apiece to one conversation at once. Each append is
/// the `seq`-th write to the file (one writer at a time holds it), so right after its
/// acknowledgement a finished `fsync` must have started once `seq` writes were done.
async fn append_concurrently(
    store: &FileStore,
    id: &ConversationId,
    fault: &WriteFault,
    writers: u64,
    each: u64,
) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (store, id, fault) = (store.clone(), id.clone(), fault.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..each {
                let e = text_entry(&format!("w{w}-{i}"), LogRole::User, "x");
                let seq = store.append(&id, &e, None).await.unwrap();
                let synced = fault.synced_writes();
                assert!(
                    synced >= seq,
                    "append {seq} was acknowledged before an fsync covered it (synced up to {synced})"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_append_is_synced_by_its_own_fsync_before_it_is_acknowledged() {
    let fault = WriteFault::counting();
    let (_dir, store, id) = counted(Durability::EveryAppend, &fault).await;
    append_concurrently(&store, &id, &fault, 4, 10).await;
    assert_eq!(fault.writes(), 40);
    assert_eq!(fault.syncs(), 40, "one fsync per acknowledged append");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_covers_every_acknowledged_append_with_fewer_fsyncs() {
    // The first fsync waits until all eight appends have reached the store, so the seven it
    // does not cover are all waiting for the next one.
    let fault = WriteFault::counting().hold_syncs_until(8);
    let (_dir, store, id) = counted(Durability::GroupCommit, &fault).await;
    append_concurrently(&store, &id, &fault, 8, 1).await;
    assert_eq!(fault.writes(), 8);
    let syncs = fault.syncs();
    assert!(
        (1..8).contains(&syncs),
        "eight contended appends took {syncs} fsyncs: group commit shares one among several"
    );
    // Uncontrived contention: still every acknowledged append synced, never more fsyncs
    // than appends.
    append_concurrently(&store, &id, &fault, 8, 10).await;
    assert_eq!(fault.writes(), 88);
    assert!(fault.syncs() <= 88, "{} fsyncs", fault.syncs());
    assert_eq!(store.load(&id).await.unwrap().entries.len(), 88);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_commit_append_given_up_by_its_caller_is_still_written_and_the_store_goes_on() {
    // The first fsync is held until a second append arrives, so the first append is surely
    // still waiting when its caller gives it up.
    let fault = WriteFault::counting().hold_syncs_until(2);
    let (_dir, store, id) = counted(Durability::GroupCommit, &fault).await;
    let one = entry(1);
    let mut first = store.append(&id, &one, None);
    tokio::select! {
        biased;
        done = &mut first => panic!("the held append finished: {done:?}"),
        () = std::future::ready(()) => {}
    }
    drop(first);
    assert_eq!(fault.arrived(), 1);
    assert_eq!(store.append(&id, &entry(2), None).await.unwrap(), 2);
    assert_eq!(store.append(&id, &entry(3), None).await.unwrap(), 3);
    let loaded = store.load(&id).await.unwrap();
    let ids: Vec<_> = loaded.entries.iter().map(|e| e.entry.id.as_str()).collect();
    assert_eq!(ids, ["m1", "m2", "m3"]);
    assert!(fault.synced_writes() >= 3, "every write was flushed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_in_a_group_fails_alone_and_leaves_whole_lines() {
    // The length of one line, from a store of its own (every line here has as many digits).
    let sizing = WriteFault::counting();
    let (_sized, store, id) = counted(Durability::OsBuffered, &sizing).await;
    store.append(&id, &entry(1), None).await.unwrap();
    let line = std::fs::metadata(store.log_path(&id)).unwrap().len();
    // Seven appends; the first fsync waits for all of them, so the last six meet at the
    // second. The disk has room for three and a half lines: the group's first writes are
    // kept and acknowledged, the one cut short is taken back, the rest refused.
    let fault = WriteFault::counting().hold_syncs_until(7);
    let (_dir, store, id) = counted(Durability::GroupCommit, &fault).await;
    fault.set_remaining(line * 3 + line / 2);
    let mut tasks = Vec::new();
    for i in 1..=7 {
        let (store, id) = (store.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            store.append(&id, &entry(i), None).await
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(seq) => acked.push(seq),
            Err(StorageError::Io { action, .. }) => assert_eq!(action, "appending to"),
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    acked.sort_unstable();
    assert_eq!(
        acked,
        [1, 2, 3],
        "the three batches that fit were acknowledged"
    );
    assert!(fault.syncs() < 7, "{} fsyncs for a group", fault.syncs());
    let loaded = store.load(&id).await.unwrap();
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let seqs: Vec<_> = loaded.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(
        std::fs::metadata(store.log_path(&id)).unwrap().len(),
        line * 3
    );
}

#[tokio::test]
async fn os_buffered_appends_are_never_synced() {
    let fault = WriteFault::counting();
    let (_dir, store, id) = counted(Durability::OsBuffered, &fault).await;
    for i in 1..=3 {
        store.append(&id, &entry(i), None).await.unwrap();
    }
    assert_eq!((fault.writes(), fault.syncs()), (3, 0));
}

/// Every file under `root`, read whole.
fn every_file(root: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for item in std::fs::read_dir(&dir).unwrap() {
            let path = item.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_secrets_are_in_no_file_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    let people = store.directory().unwrap();
    people.add_user("ann", Role::Analyst).await.unwrap();
    let issued = [
        people.issue_token("ann").await.unwrap(),
        people.issue_token("ann").await.unwrap(),
    ];
    let files = every_file(dir.path());
    let tokens = files
        .iter()
        .find(|(p, _)| p.ends_with("people/tokens.json"))
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .unwrap();
    for t in &issued {
        assert!(tokens.contains(&t.info.id), "{tokens}");
        for (path, bytes) in &files {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(&t.secret) && !text.contains(&t.secret.to_uppercase()),
                "{} holds a token's secret",
                path.display()
            );
        }
        assert_eq!(
            people.authenticate(&t.secret).await.unwrap().unwrap().name,
            "ann"
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir.path().join("people"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "people/ is open to others: {mode:o}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_before_owners_reads_its_conversations_as_the_default_owner() {
    let dir = tempfile::tempdir().unwrap();
    let conversations = dir.path().join("conversations");
    std::fs::create_dir_all(&conversations).unwrap();
    let line = serde_json::json!({"seq": 1, "at": 1_700_000_000_000_i64,
        "entry": serde_json::to_value(entry(1)).unwrap()});
    std::fs::write(conversations.join("old.jsonl"), format!("{line}\n")).unwrap();
    // The metadata file as stores wrote it before owners were kept.
    std::fs::write(
        conversations.join("old.meta.json"),
        r#"{"title":"Q3","mode":null,"parent":null,"created_ms":1700000000000,"updated_ms":1700000000000}"#,
    )
    .unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    let old = ConversationId::new("old").unwrap();
    let meta = store.metadata(&old).await.unwrap();
    assert_eq!((meta.owner.as_str(), meta.last_seq), (DEFAULT_OWNER, 1));
    let mine = store
        .list_owned(DEFAULT_OWNER, ba_storage::Page::first(10))
        .await
        .unwrap();
    assert_eq!(mine.items, vec![meta.clone()]);
    assert!(
        store
            .list_owned("ann", ba_storage::Page::first(10))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // A second opening reads the index the first wrote, which names no owner either.
    drop(store);
    let again = FileStore::open(dir.path()).unwrap();
    assert_eq!(again.metadata(&old).await.unwrap().owner, DEFAULT_OWNER);
    // Metadata as a list of the wire shape written before, too.
    let wire: ba_storage::ConversationMeta = serde_json::from_str(
        r#"{"id":"old","title":null,"mode":null,"parent":null,"created_ms":1,"updated_ms":1,"last_seq":0}"#,
    )
    .unwrap();
    assert_eq!(wire.owner, DEFAULT_OWNER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_store_instances_on_one_folder_lose_no_user_and_no_spend() {
    let dir = tempfile::tempdir().unwrap();
    let a = FileStore::open(dir.path()).unwrap();
    let b = FileStore::open(dir.path()).unwrap();
    let (pa, pb) = (a.directory().unwrap(), b.directory().unwrap());
    let mut tasks = Vec::new();
    for i in 0..40 {
        let people = if i % 2 == 0 { pa.clone() } else { pb.clone() };
        tasks.push(tokio::spawn(async move {
            people.add_user(&format!("u{i:02}"), Role::Viewer).await?;
            people
                .add_spend(
                    DEFAULT_OWNER,
                    "2026-11",
                    Spend {
                        usd: 0.5,
                        tokens: 10,
                    },
                )
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(pa.users().await.unwrap().len(), 40);
    assert_eq!(
        pb.spend(DEFAULT_OWNER, "2026-11").await.unwrap(),
        Spend {
            usd: 20.0,
            tokens: 400
        }
    );
}
