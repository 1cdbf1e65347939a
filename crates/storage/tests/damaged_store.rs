//! `FileStore` against damage and contention: a corrupt line in the middle of a log, sequence
//! numbers after damaged lines, a garbage index beside a garbage metadata file, writers of the
//! index that never lose each other's rows, and imports that are all or nothing.
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use ba_protocol::{LogEntry, LogRole};
use ba_storage::conformance::text_entry;
use ba_storage::{
    ConversationId, ConversationStore, DiagnosticKind, FileStore, FileStoreOptions,
    NewConversation, StorageError, WriteFault,
};
use ba_storage::{Imported, ImportedConversation, store_imported};

fn entry(i: u64) -> LogEntry {
    text_entry(&format!("m{i}"), LogRole::User, &format!("entry {i}"))
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

/// Replaces line `n` (1-based) of the file with `line`.
fn replace_line(path: &Path, n: usize, line: &[u8]) {
    let bytes = std::fs::read(path).unwrap();
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    lines[n - 1] = line;
    std::fs::write(path, lines.join(&b'\n')).unwrap();
}

fn seqs(loaded: &ba_storage::Loaded) -> Vec<u64> {
    loaded.entries.iter().map(|e| e.seq).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_middle_line_costs_only_itself_and_its_number_is_never_reused() {
    let (_dir, store, id) = store_with(6).await;
    let path = store.log_path(&id);
    replace_line(&path, 3, b"garbage without any head");
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(seqs(&loaded), [1, 2, 4, 5, 6], "{:?}", loaded.diagnostics);
    assert_eq!(loaded.last_seq, 6);
    let kinds: Vec<_> = loaded
        .diagnostics
        .iter()
        .map(|d| (d.kind, d.line))
        .collect();
    assert_eq!(kinds, [(DiagnosticKind::Corrupt, 3)]);

    // The same store (its cached tail) and a fresh one (a new process) both go on after 6.
    assert_eq!(store.append(&id, &entry(7), Some(6)).await.unwrap(), 7);
    let reopened = FileStore::open(store.root()).unwrap();
    assert_eq!(reopened.append(&id, &entry(8), Some(7)).await.unwrap(), 8);
    let loaded = reopened.load(&id).await.unwrap();
    assert_eq!(seqs(&loaded), [1, 2, 4, 5, 6, 7, 8]);
    assert_eq!(reopened.metadata(&id).await.unwrap().last_seq, 8);
    // Quarantined in place: the damaged bytes are kept, never deleted.
    let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
    assert!(text.contains("garbage without any head"));
    // Loading from a number past the damage still works.
    let tail = reopened.load_from(&id, 5).await.unwrap();
    assert_eq!(seqs(&tail), [5, 6, 7, 8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_or_backward_number_is_skipped_and_appends_go_past_the_highest() {
    let (_dir, store, id) = store_with(4).await;
    let path = store.log_path(&id);
    let bytes = std::fs::read(&path).unwrap();
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // Line 2 (seq 2) written again after line 4: a repeat, not a new entry.
    let mut changed = bytes.clone();
    changed.extend_from_slice(lines[1]);
    changed.push(b'\n');
    std::fs::write(&path, &changed).unwrap();
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(seqs(&loaded), [1, 2, 3, 4]);
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::OutOfOrder);
    assert_eq!(store.append(&id, &entry(5), None).await.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_last_line_keeps_its_number_and_loaded_last_seq_says_so() {
    let (_dir, store, id) = store_with(3).await;
    let path = store.log_path(&id);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"seq\":4,\"at\":1,\"entry\":{\"broken\n");
    std::fs::write(&path, &bytes).unwrap();
    let loaded = store.load(&id).await.unwrap();
    assert_eq!(seqs(&loaded), [1, 2, 3]);
    assert_eq!(loaded.last_seq, 4);
    // A writer that expects what the load reported is not refused.
    assert_eq!(
        store
            .append(&id, &entry(5), Some(loaded.last_seq))
            .await
            .unwrap(),
        5
    );
}

async fn three_conversations() -> (tempfile::TempDir, FileStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open(dir.path()).unwrap();
    for name in ["a", "b", "c"] {
        let id = ConversationId::new(name).unwrap();
        let new = NewConversation {
            title: Some(format!("title {name}")),
            ..NewConversation::default()
        };
        store.create(&id, new).await.unwrap();
        store.append(&id, &entry(1), None).await.unwrap();
    }
    (dir, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_index_and_a_garbage_metadata_file_do_not_take_the_store_down() {
    for index in [&b""[..], b"garbage", b"{\"version\":1,\"conversations\":7}"] {
        let (dir, _store) = three_conversations().await;
        std::fs::write(dir.path().join("index.json"), index).unwrap();
        std::fs::write(dir.path().join("conversations/b.meta.json"), b"{not json").unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let metas = store.list_all().await.unwrap();
        let ids: Vec<&str> = metas.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(metas[0].title.as_deref(), Some("title a"));
        assert_eq!(metas[1].title, None);
        // Not 1970: the log file's own time stands in for the lost metadata.
        assert!(metas[1].created_ms > 1_600_000_000_000, "{:?}", metas[1]);
        let b = ConversationId::new("b").unwrap();
        assert_eq!(store.load(&b).await.unwrap().entries.len(), 1);
        store.metadata(&b).await.unwrap();
        let warnings = store.warnings().join("\n");
        assert!(warnings.contains("index.json"), "{warnings}");
        assert!(warnings.contains("b.meta.json"), "{warnings}");
        assert!(
            store.metadata_problem(&b).await.unwrap().is_some(),
            "a damaged metadata file is a problem verify reports"
        );
        // The index was rebuilt and written back whole.
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
        assert_eq!(index["conversations"].as_object().unwrap().len(), 3);
        // Changing the damaged conversation's metadata repairs its file.
        store
            .update_metadata(
                &b,
                ba_storage::MetaUpdate {
                    title: Some("fixed".into()),
                    mode: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(store.metadata_problem(&b).await.unwrap(), None);
    }
}

fn index_ids(root: &Path) -> Vec<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("index.json")).unwrap()).unwrap();
    index["conversations"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_store_instances_never_drop_each_others_rows_from_the_index() {
    // Two processes, in effect: each opened the store before the other wrote.
    let dir = tempfile::tempdir().unwrap();
    let one = FileStore::open(dir.path()).unwrap();
    let two = FileStore::open(dir.path()).unwrap();
    for i in 0..5 {
        let a = ConversationId::new(format!("one-{i}")).unwrap();
        one.create(&a, NewConversation::default()).await.unwrap();
        let b = ConversationId::new(format!("two-{i}")).unwrap();
        two.create(&b, NewConversation::default()).await.unwrap();
    }
    assert_eq!(
        index_ids(dir.path()).len(),
        10,
        "{:?}",
        index_ids(dir.path())
    );
    one.delete(&ConversationId::new("two-0").unwrap())
        .await
        .unwrap();
    two.create(
        &ConversationId::new("two-9").unwrap(),
        NewConversation::default(),
    )
    .await
    .unwrap();
    let ids = index_ids(dir.path());
    assert_eq!(ids.len(), 10, "{ids:?}");
    assert!(!ids.contains(&"two-0".to_owned()));
}

#[test]
fn concurrent_writers_on_threads_keep_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let store = FileStore::open(&root).unwrap();
                rt.block_on(async {
                    for i in 0..10 {
                        let id = ConversationId::new(format!("t{t}-{i}")).unwrap();
                        store
                            .create_with_entries(&id, NewConversation::default(), &[entry(1)])
                            .await
                            .unwrap();
                    }
                });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(index_ids(&root).len(), 40);
}

fn imported(entries: usize, subagents: usize) -> Imported {
    let conv = |name: &str, n: usize| ImportedConversation {
        source: format!("{name}.jsonl").into(),
        name: name.to_owned(),
        entries: (1..=n as u64).map(entry).collect(),
        losses: Vec::new(),
    };
    Imported {
        main: conv("main", entries),
        subagents: (0..subagents)
            .map(|i| conv(&format!("agent-{i}"), entries))
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_import_leaves_no_conversation_behind() {
    // The size of one conversation's file, measured in a scratch store.
    let scratch = tempfile::tempdir().unwrap();
    let one = FileStore::open(scratch.path()).unwrap();
    let ids = store_imported(&one, &imported(200, 0), None).await.unwrap();
    let size = std::fs::metadata(one.log_path(&ids[0])).unwrap().len();

    let dir = tempfile::tempdir().unwrap();
    // The disk fills up part way through the second conversation.
    let opts = FileStoreOptions::default().with_fault(WriteFault::fail_after(size + size / 2));
    let store = FileStore::open_with(dir.path(), opts).unwrap();
    let err = store_imported(&store, &imported(200, 2), None)
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert!(store.list_all().await.unwrap().is_empty());
    let names: Vec<_> = std::fs::read_dir(dir.path().join("conversations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".incoming")
        .collect();
    assert!(names.is_empty(), "{names:?}");
    assert!(index_ids(dir.path()).is_empty());

    // Without a fault the same import lands whole: main first, then the subagents.
    let store = FileStore::open(dir.path()).unwrap();
    let ids = store_imported(&store, &imported(200, 2), None)
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(!ids[0].as_str().contains("--"));
    for id in &ids {
        let loaded = store.load(id).await.unwrap();
        assert_eq!(loaded.entries.len(), 200);
        assert!(loaded.diagnostics.is_empty());
        assert_eq!(store.metadata_problem(id).await.unwrap(), None);
    }
    // A later append goes on after the imported entries.
    assert_eq!(
        store.append(&ids[0], &entry(201), Some(200)).await.unwrap(),
        201
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_import_is_invisible_and_an_id_is_never_taken_twice() {
    let (dir, store, id) = store_with(1).await;
    // What a killed import leaves: a file under `.incoming/`, never a conversation.
    let incoming = dir.path().join("conversations/.incoming");
    std::fs::create_dir_all(&incoming).unwrap();
    std::fs::write(incoming.join("dead.jsonl"), b"{\"seq\":1").unwrap();
    let reopened = FileStore::open(dir.path()).unwrap();
    let ids: Vec<String> = reopened
        .list_all()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, ["c1"]);
    let err = store
        .create_with_entries(&id, NewConversation::default(), &[entry(9)])
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists { .. }), "{err}");
    assert_eq!(store.load(&id).await.unwrap().entries.len(), 1);
    // A conversation without a metadata file (a create cut short) is reported unfinished.
    std::fs::remove_file(dir.path().join("conversations/c1.meta.json")).unwrap();
    let problem = store.metadata_problem(&id).await.unwrap().unwrap();
    assert!(problem.contains("did not finish"), "{problem}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let err = FileStore::open_existing(&root, FileStoreOptions::default()).unwrap_err();
    assert!(matches!(err, StorageError::NoStore { .. }), "{err}");
    assert!(!root.exists());
    FileStore::open(&root).unwrap();
    FileStore::open_existing(&root, FileStoreOptions::default()).unwrap();
}
