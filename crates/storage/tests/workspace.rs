//! `FileWorkspace`: the workspace conformance suite on files, the layout on disk, two stores
//! sharing one folder, the orphan check, and the move of the previous upload and code folders.
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use ba_storage::conformance;
use ba_storage::get_code;
use ba_storage::orphan_workspaces;
use ba_storage::{
    ConversationId, ConversationStore, FileKind, FileStore, FileStoreOptions, NewConversation,
    NewFile, StorageError, Workspace,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_on_files() {
    let dirs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = dirs.clone();
    conformance::workspace(move |clock, limits| {
        let dir = tempfile::tempdir().unwrap();
        let opts = FileStoreOptions::default()
            .with_clock(clock)
            .with_workspace_limits(limits);
        let store = FileStore::open_with(dir.path(), opts).unwrap();
        keep.lock().unwrap().push(dir);
        async move { store }
    })
    .await
    .unwrap();
    drop(dirs);
}

async fn store_with(dir: &Path, ids: &[&str]) -> (FileStore, Arc<dyn Workspace>) {
    let store = FileStore::open(dir).unwrap();
    for id in ids {
        store
            .create(
                &ConversationId::new(*id).unwrap(),
                NewConversation::default(),
            )
            .await
            .unwrap();
    }
    let ws = store.workspace().unwrap();
    (store, ws)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_live_beside_the_log_and_a_refused_put_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ws) = store_with(dir.path(), &["c1"]).await;
    let c1 = ConversationId::new("c1").unwrap();
    let meta = ws
        .put_bytes(&c1, NewFile::upload("sales.csv", "s"), b"a,b\n")
        .await
        .unwrap();
    let files = dir.path().join("conversations/c1/files");
    assert_eq!(
        names_in(&files),
        [".claims", ".lock", "upload_001", "upload_001.json"]
    );
    assert_eq!(std::fs::read(files.join("upload_001")).unwrap(), b"a,b\n");
    let on_disk: ba_storage::FileMeta =
        serde_json::from_slice(&std::fs::read(files.join("upload_001.json")).unwrap()).unwrap();
    assert_eq!(on_disk, meta);
    assert_eq!(
        ws.local_path(&c1, "upload_001").await.unwrap(),
        files.join("upload_001")
    );

    let big = vec![7u8; (ws.limits().max_file_bytes + 1) as usize];
    let err = ws
        .put_bytes(&c1, NewFile::upload("big.csv", ""), &big)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "`big.csv` is over the limit of 200 MiB");
    assert_eq!(
        names_in(&files),
        [".claims", ".lock", "upload_001", "upload_001.json"]
    );
    // No error of the workspace names a path of the server's disk.
    let root = dir.path().display().to_string();
    for err in [
        ws.open(&c1, "upload_009").await.unwrap_err(),
        ws.meta(&c1, "../x").await.unwrap_err(),
        err,
    ] {
        assert!(!err.to_string().contains(&root), "{err}");
    }

    // Deleting the conversation removes its folder with everything in it.
    assert!(store.delete(&c1).await.unwrap());
    assert!(!dir.path().join("conversations/c1").exists());
    assert!(ws.list(&c1).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_folder_never_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, wa) = store_with(dir.path(), &["c1"]).await;
    let (_b, wb) = store_with(dir.path(), &[]).await;
    let c1 = ConversationId::new("c1").unwrap();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let ws = if i % 2 == 0 { wa.clone() } else { wb.clone() };
        let c1 = c1.clone();
        tasks.push(tokio::spawn(async move {
            ws.put_bytes(
                &c1,
                NewFile::output(format!("o{i}.txt")),
                format!("{i}").as_bytes(),
            )
            .await
            .unwrap()
            .id
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    ids.sort();
    let want: Vec<String> = (1..=12)
        .map(|n| FileKind::Output.id(n).to_string())
        .collect();
    assert_eq!(ids, want);
    assert_eq!(wb.list(&c1).await.unwrap().len(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_workspaces_without_a_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (store, ws) = store_with(dir.path(), &["c1"]).await;
    let c1 = ConversationId::new("c1").unwrap();
    ws.put_bytes(&c1, NewFile::upload("a", ""), b"x")
        .await
        .unwrap();
    assert!(orphan_workspaces(&store).await.unwrap().is_empty());
    // A workspace left behind, as a delete cut short by a crash would leave it.
    std::fs::create_dir_all(dir.path().join("conversations/ghost/files")).unwrap();
    assert_eq!(orphan_workspaces(&store).await.unwrap(), ["ghost"]);
    assert_eq!(ws.owners().await.unwrap(), ["c1", "ghost"]);
    // Deleting the id (no log) still clears its folder.
    let ghost = ConversationId::new("ghost").unwrap();
    assert!(!store.delete(&ghost).await.unwrap());
    assert!(orphan_workspaces(&store).await.unwrap().is_empty());
}

/// Writes `path` with `bytes`, creating its folder.
fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The previous layout, as the old `UploadStore` and `CodeStore` wrote it: metadata as pretty
/// JSON, uploads as `.bin`, code under its extension.
fn write_previous_layout(root: &Path) {
    let uploads = root.join("uploads");
    write(&uploads.join("c1/upload_001.bin"), b"region,q1\nnorth,10\n");
    write(
        &uploads.join("c1/upload_001.json"),
        br#"{
  "id": "upload_001",
  "name": "sales_data.csv",
  "file_type": "csv",
  "media_type": "text/csv",
  "size": 19,
  "description": "2024 sales"
}"#,
    );
    write(&uploads.join("c1/upload_002.bin"), b"# T");
    write(
        &uploads.join("c1/upload_002.json"),
        br#"{
  "id": "upload_002",
  "name": "report.MD",
  "file_type": "markdown",
  "media_type": null,
  "size": 3,
  "description": "template"
}"#,
    );
    // Of a conversation that does not exist, and of none at all (the CLI's flat folder).
    write(&uploads.join("ghost/upload_001.bin"), b"boo");
    write(
        &uploads.join("ghost/upload_001.json"),
        br#"{"id":"upload_001","name":"g.csv","file_type":"csv","media_type":null,"size":3,"description":""}"#,
    );
    write(&uploads.join("upload_001.bin"), b"flat");
    let code = root.join("code");
    write(&code.join("c1/code_q.sql"), b"SELECT 1\nFROM t");
    write(
        &code.join("c1/code_q.meta.json"),
        br#"{
  "code_id": "code_q",
  "language": "sql",
  "file_name": "code_q.sql",
  "description": "first query",
  "line_count": 2,
  "char_count": 15,
  "conversation_id": "c1"
}"#,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_layout_moves_into_the_workspaces_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    {
        let (_store, _) = store_with(root, &["c1", "c2"]).await;
    }
    write_previous_layout(root);

    let store = FileStore::open(root).unwrap();
    let ws = store.workspace().unwrap();
    let c1 = ConversationId::new("c1").unwrap();
    let files = ws.list(&c1).await.unwrap();
    let summary: Vec<(&str, FileKind, &str, &str, &str)> = files
        .iter()
        .map(|f| {
            (
                f.id.as_str(),
                f.kind,
                f.name.as_str(),
                f.media_type.as_str(),
                f.description.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "upload_001",
                FileKind::Upload,
                "sales_data.csv",
                "text/csv",
                "2024 sales"
            ),
            (
                "upload_002",
                FileKind::Upload,
                "report.MD",
                "text/markdown",
                "template"
            ),
            (
                "code_q",
                FileKind::Code,
                "code_q.sql",
                "application/sql",
                "first query"
            ),
        ]
    );
    let (_, bytes) = ws.read_bytes(&c1, "upload_001", 100).await.unwrap();
    assert_eq!(bytes, b"region,q1\nnorth,10\n");
    let (code, text) = get_code(&*ws, &c1, "code_q").await.unwrap();
    assert_eq!(
        (
            code.language.as_str(),
            code.line_count,
            code.char_count,
            text.as_str()
        ),
        ("sql", 2, 15, "SELECT 1\nFROM t")
    );
    // The moved files are gone from the old folders; what could not move stays, with a warning.
    assert!(!root.join("uploads/c1").exists());
    assert!(!root.join("code").exists());
    assert!(root.join("uploads/ghost/upload_001.bin").exists());
    assert!(root.join("uploads/upload_001.bin").exists());
    let warnings = store.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("uploads/ghost/")
                && w.contains("conversation `ghost` does not exist")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("uploads/: 1 file(s) belong to no conversation")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .all(|w| !w.contains(&root.display().to_string())),
        "{warnings:?}"
    );
    // Ids go on after the moved ones.
    let next = ws
        .put_bytes(&c1, NewFile::upload("x.csv", ""), b"x")
        .await
        .unwrap();
    assert_eq!(next.id, "upload_003");
    drop((store, ws));

    // Opening again moves nothing twice.
    let store = FileStore::open(root).unwrap();
    let ws = store.workspace().unwrap();
    assert_eq!(ws.list(&c1).await.unwrap().len(), 4);

    // A move cut short after the copy (the old files still there) is finished by an open; an
    // old file whose id holds other content in the workspace stays, with a warning.
    write(
        &root.join("uploads/c1/upload_001.bin"),
        b"region,q1\nnorth,10\n",
    );
    write(
        &root.join("uploads/c1/upload_001.json"),
        br#"{"id":"upload_001","name":"sales_data.csv","file_type":"csv","media_type":"text/csv","size":19,"description":"2024 sales"}"#,
    );
    write(&root.join("uploads/c1/upload_002.bin"), b"other");
    write(
        &root.join("uploads/c1/upload_002.json"),
        br#"{"id":"upload_002","name":"x.md","file_type":"markdown","media_type":null,"size":5,"description":""}"#,
    );
    drop((store, ws));
    let store = FileStore::open(root).unwrap();
    let ws = store.workspace().unwrap();
    assert_eq!(ws.list(&c1).await.unwrap().len(), 4);
    assert!(!root.join("uploads/c1/upload_001.bin").exists());
    assert!(root.join("uploads/c1/upload_002.bin").exists());
    assert!(
        store
            .warnings()
            .iter()
            .any(|w| w.contains("uploads/c1/upload_002.json") && w.contains("another `upload_002`")),
        "{:?}",
        store.warnings()
    );
    let (_, bytes) = ws.read_bytes(&c1, "upload_002", 100).await.unwrap();
    assert_eq!(bytes, b"# T");
    // The store's other conversations are untouched.
    let c2 = ConversationId::new("c2").unwrap();
    assert!(ws.list(&c2).await.unwrap().is_empty());
    assert!(matches!(
        ws.open(&c2, "upload_001").await,
        Err(StorageError::NoFile { .. })
    ));
}
