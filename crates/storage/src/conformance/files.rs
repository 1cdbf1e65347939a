//! The conformance suite of the conversations' workspaces.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt as _, ReadBuf};

use super::{CheckResult, Failure, cid, err};
use crate::error::StorageError;
use crate::id::ConversationId;
use crate::store::{ConversationStore, ManualClock, NewConversation};
use crate::workspace::code::{get_code, list_code, save_code};
use crate::workspace::{FileKind, NewFile, Workspace, WorkspaceLimits, hex};

/// The limits the stores of [`workspace()`] are made with: small, so the limit checks are quick.
pub const WORKSPACE_LIMITS: WorkspaceLimits = WorkspaceLimits {
    max_file_bytes: 1 << 20,
    max_conversation_bytes: 3 << 20,
};

/// The checks of [`workspace()`], by name.
pub const WORKSPACE_CHECKS: &[&str] = &[
    "file_ids_and_kinds",
    "streaming",
    "list_order",
    "find",
    "limits",
    "remove",
    "remove_all",
    "delete_removes_files",
    "isolation",
    "code_replace",
    "code_blocks",
    "concurrent_puts",
    "copy_file",
    "fork_files",
];

/// Runs every workspace check, each on a fresh store from `make` (given a clock and
/// [`WORKSPACE_LIMITS`]); the store must have a workspace.
pub async fn workspace<S, F, Fut>(make: F) -> std::result::Result<(), Failure>
where
    S: ConversationStore + 'static,
    F: Fn(Arc<ManualClock>, WorkspaceLimits) -> Fut,
    Fut: Future<Output = S>,
{
    for &check in WORKSPACE_CHECKS {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let store = make(clock.clone(), WORKSPACE_LIMITS).await;
        let result = match store.workspace() {
            None => Err("the store has no workspace".to_owned()),
            Some(ws) => match check {
                "file_ids_and_kinds" => file_ids_and_kinds(&store, &*ws).await,
                "streaming" => streaming(&store, &*ws).await,
                "list_order" => list_order(&store, &*ws).await,
                "find" => find(&store, &*ws, &clock).await,
                "limits" => limits(&store, &*ws).await,
                "remove" => remove(&store, &*ws).await,
                "remove_all" => remove_all(&store, &*ws).await,
                "delete_removes_files" => delete_removes_files(&store, &*ws).await,
                "isolation" => isolation(&store, &*ws).await,
                "code_replace" => code_replace(&store, &*ws).await,
                "code_blocks" => code_blocks(&store, &*ws).await,
                "copy_file" => copy_file(&store, &*ws).await,
                "fork_files" => fork_files(&store, &*ws, &clock).await,
                _ => concurrent_puts(&store, ws).await,
            },
        };
        result.map_err(|message| Failure { check, message })?;
    }
    Ok(())
}

async fn conversation<S: ConversationStore>(
    store: &S,
    id: &str,
) -> std::result::Result<ConversationId, String> {
    let id = cid(id)?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    Ok(id)
}

/// `len` bytes that are not all alike.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add((i >> 8) as u8 ^ seed)
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A body that arrives in small pieces of odd sizes, as a network body does.
struct Pieces {
    data: Vec<u8>,
    pos: usize,
    piece: usize,
}

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let end = (this.pos + this.piece)
            .min(this.data.len())
            .min(this.pos + buf.remaining());
        buf.put_slice(this.data.get(this.pos..end).unwrap_or_default());
        this.pos = end;
        Poll::Ready(Ok(()))
    }
}

/// Ids are assigned per kind from 001; code keeps its id; the metadata says what was stored;
/// bad input is refused.
async fn file_ids_and_kinds<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-ids").await?;
    let a = ws
        .put_bytes(
            &c,
            NewFile::upload("in/sales.csv", "2024 sales"),
            b"a,b\n1,2\n",
        )
        .await
        .map_err(err)?;
    ensure!(a.id == "upload_001", "first upload got `{}`", a.id);
    ensure!(a.kind == FileKind::Upload, "kind {:?}", a.kind);
    ensure!(a.name == "sales.csv", "the name kept a path: `{}`", a.name);
    ensure!(a.media_type == "text/csv", "media type `{}`", a.media_type);
    ensure!(a.size == 8, "size {}", a.size);
    ensure!(
        a.description == "2024 sales",
        "description `{}`",
        a.description
    );
    ensure!(
        a.sha256 == sha256(b"a,b\n1,2\n"),
        "sha256 `{}` is not the content's",
        a.sha256
    );
    ensure!(
        a.created_ms == 1_700_000_000_000,
        "created {}",
        a.created_ms
    );
    let b = ws
        .put_bytes(&c, NewFile::upload("b.xlsx", ""), b"PK")
        .await
        .map_err(err)?;
    ensure!(b.id == "upload_002", "second upload got `{}`", b.id);
    let o = ws
        .put_bytes(
            &c,
            NewFile::output("chart.png").with_description("a chart"),
            b"\x89PNG",
        )
        .await
        .map_err(err)?;
    ensure!(
        (o.id.as_str(), o.media_type.as_str()) == ("output_001", "image/png"),
        "output got {o:?}"
    );
    let d = ws
        .put_bytes(
            &c,
            NewFile::data("rows.json")
                .with_media_type("application/json")
                .with_attribute("call_id", "call_1"),
            b"[]",
        )
        .await
        .map_err(err)?;
    ensure!(d.id == "data_001", "data got `{}`", d.id);
    ensure!(
        d.attributes.get("call_id").map(String::as_str) == Some("call_1"),
        "attributes {:?}",
        d.attributes
    );
    let code = ws
        .put_bytes(&c, NewFile::code("code_q", "code_q.sql"), b"SELECT 1")
        .await
        .map_err(err)?;
    ensure!(code.id == "code_q", "code got `{}`", code.id);
    let read = ws.meta(&c, "data_001").await.map_err(err)?;
    ensure!(
        read.as_ref() == Some(&d),
        "meta read back {read:?}, stored {d:?}"
    );
    let empty = ws
        .put_bytes(&c, NewFile::output("empty.txt"), b"")
        .await
        .map_err(err)?;
    ensure!(
        empty.size == 0 && empty.sha256 == sha256(b""),
        "an empty file: {empty:?}"
    );
    let (_, bytes) = ws.read_bytes(&c, "output_002", 10).await.map_err(err)?;
    ensure!(bytes.is_empty(), "an empty file read {} bytes", bytes.len());
    let refused = [
        ws.put_bytes(&c, NewFile::upload("", ""), b"x").await,
        ws.put_bytes(&c, NewFile::code("../x", "x.py"), b"x").await,
        ws.put_bytes(&c, NewFile::code("upload_009", "x.py"), b"x")
            .await,
    ];
    for (i, r) in refused.into_iter().enumerate() {
        ensure!(r.is_err(), "bad input {i} was stored: {r:?}");
    }
    let missing = cid("ws-no-such")?;
    match ws.put_bytes(&missing, NewFile::upload("a", ""), b"x").await {
        Err(StorageError::NotFound { .. }) => {}
        other => return Err(format!("a put to a missing conversation gave {other:?}")),
    }
    match ws.meta(&c, "../upload_001").await {
        Err(StorageError::InvalidId { .. }) => {}
        other => return Err(format!("a bad id gave {other:?}")),
    }
    Ok(())
}

/// A file of several chunks, given in small pieces, comes back whole, in pieces, through
/// `open`, `read_bytes` and `local_path`.
async fn streaming<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-stream").await?;
    let data = pattern(700_001, 7);
    let mut body = Pieces {
        data: data.clone(),
        pos: 0,
        piece: 7_777,
    };
    let meta = ws
        .put(&c, NewFile::upload("big.bin", "big"), &mut body)
        .await
        .map_err(err)?;
    ensure!(meta.size == data.len() as u64, "size {}", meta.size);
    ensure!(
        meta.sha256 == sha256(&data),
        "the sha256 is not the content's"
    );
    let mut content = ws.open(&c, &meta.id).await.map_err(err)?;
    ensure!(content.meta == meta, "open gave {:?}", content.meta);
    let mut back = Vec::new();
    let mut piece = vec![0u8; 10_000];
    loop {
        let n = content
            .reader
            .read(&mut piece)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        back.extend_from_slice(piece.get(..n).unwrap_or_default());
    }
    ensure!(
        back == data,
        "read back {} bytes, not the stored ones",
        back.len()
    );
    let (_, all) = ws
        .read_bytes(&c, &meta.id, data.len() as u64)
        .await
        .map_err(err)?;
    ensure!(all == data, "read_bytes gave other bytes");
    match ws.read_bytes(&c, &meta.id, 1000).await {
        Err(StorageError::TooLarge { limit: 1000, .. }) => {}
        other => return Err(format!("read_bytes past its max gave {other:?}")),
    }
    let path = ws.local_path(&c, &meta.id).await.map_err(err)?;
    let local = std::fs::read(&path).map_err(|e| e.to_string())?;
    ensure!(local == data, "the local copy differs");
    let again = ws.local_path(&c, &meta.id).await.map_err(err)?;
    ensure!(
        again == path,
        "a second local_path moved: {path:?} then {again:?}"
    );
    match ws.open(&c, "upload_009").await {
        Err(StorageError::NoFile { id, .. }) if id == "upload_009" => {}
        other => return Err(format!("opening a missing file gave {other:?}")),
    }
    match ws.local_path(&c, "upload_009").await {
        Err(StorageError::NoFile { .. }) => {}
        other => return Err(format!("local_path of a missing file gave {other:?}")),
    }
    // A reader dropped half way leaves the store usable.
    let mut half = ws.open(&c, &meta.id).await.map_err(err)?;
    let _ = half.reader.read(&mut piece).await;
    drop(half);
    ensure!(
        ws.list(&c).await.map_err(err)?.len() == 1,
        "the file is gone after a dropped reader"
    );
    Ok(())
}

/// Files are listed by kind, then id; `meta` of a missing file is `None`.
async fn list_order<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-list").await?;
    ensure!(
        ws.list(&c).await.map_err(err)?.is_empty(),
        "a new conversation has files"
    );
    for file in [
        NewFile::data("d"),
        NewFile::output("o"),
        NewFile::code("code_b", "code_b.py"),
        NewFile::upload("u", ""),
        NewFile::code("code_a", "code_a.py"),
        NewFile::upload("u", ""),
    ] {
        ws.put_bytes(&c, file, b"x").await.map_err(err)?;
    }
    let ids = file_ids(ws, &c).await?;
    ensure!(
        ids == [
            "upload_001",
            "upload_002",
            "code_a",
            "code_b",
            "output_001",
            "data_001"
        ],
        "listed {ids:?}"
    );
    ensure!(
        ws.meta(&c, "output_002").await.map_err(err)?.is_none(),
        "a missing file has metadata"
    );
    Ok(())
}

/// `find` takes an id, else a name: the newest upload of it, else the newest of any kind.
async fn find<S: ConversationStore>(
    store: &S,
    ws: &dyn Workspace,
    clock: &ManualClock,
) -> CheckResult {
    let c = &conversation(store, "ws-find").await?;
    let put = |file| async move { ws.put_bytes(c, file, b"x").await.map_err(err) };
    put(NewFile::upload("sales.csv", "old")).await?;
    clock.advance(10);
    put(NewFile::upload("sales.csv", "new")).await?;
    clock.advance(10);
    put(NewFile::output("sales.csv")).await?;
    clock.advance(10);
    put(NewFile::output("chart.png")).await?;
    clock.advance(10);
    put(NewFile::output("chart.png")).await?;
    let found = |reference: &'static str| async move {
        ws.find(c, reference)
            .await
            .map_err(err)
            .map(|f| f.map(|f| f.id))
    };
    let by_id = found("output_001").await?;
    ensure!(by_id.as_deref() == Some("output_001"), "by id: {by_id:?}");
    let upload = found("sales.csv").await?;
    ensure!(
        upload.as_deref() == Some("upload_002"),
        "by a name with uploads: {upload:?}"
    );
    let output = found("chart.png").await?;
    ensure!(
        output.as_deref() == Some("output_003"),
        "by a name of outputs only: {output:?}"
    );
    for missing in ["nothing.csv", "upload_009", "../sales.csv", "Sales.csv"] {
        let got = found(missing).await?;
        ensure!(got.is_none(), "`{missing}` found {got:?}");
    }
    Ok(())
}

/// A file over the file limit, or one that brings the conversation over its limit, is refused
/// with `TooLarge` and leaves nothing.
async fn limits<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-limits").await?;
    let limits = ws.limits();
    ensure!(limits == WORKSPACE_LIMITS, "limits in force: {limits:?}");
    let at_limit = usize::try_from(limits.max_file_bytes).map_err(|e| e.to_string())?;
    let mut over = Pieces {
        data: pattern(at_limit + 1, 1),
        pos: 0,
        piece: 50_000,
    };
    match ws.put(&c, NewFile::upload("big.csv", ""), &mut over).await {
        Err(StorageError::TooLarge { what, limit, .. }) => {
            ensure!(limit == limits.max_file_bytes, "limit {limit}");
            ensure!(what.contains("big.csv"), "the error names {what}");
        }
        other => return Err(format!("a file over the limit gave {other:?}")),
    }
    ensure!(
        ws.list(&c).await.map_err(err)?.is_empty(),
        "a refused file was kept"
    );
    let full = pattern(at_limit, 2);
    for _ in 0..3 {
        ws.put_bytes(&c, NewFile::output("part.bin"), &full)
            .await
            .map_err(err)?;
    }
    match ws.put_bytes(&c, NewFile::output("one.bin"), b"x").await {
        Err(StorageError::TooLarge { limit, .. }) if limit == limits.max_conversation_bytes => {}
        other => return Err(format!("a file past the conversation limit gave {other:?}")),
    }
    ensure!(
        ws.list(&c).await.map_err(err)?.len() == 3,
        "a file past the conversation limit was kept"
    );
    // Replacing a code file counts its new size, not both.
    ws.remove(&c, "output_003").await.map_err(err)?;
    ws.put_bytes(&c, NewFile::code("code_big", "code_big.py"), &full)
        .await
        .map_err(err)?;
    ws.put_bytes(&c, NewFile::code("code_big", "code_big.py"), &full)
        .await
        .map_err(err)?;
    Ok(())
}

/// A removed file is gone; its id is not given again.
async fn remove<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-remove").await?;
    for _ in 0..2 {
        ws.put_bytes(&c, NewFile::upload("a.csv", ""), b"x")
            .await
            .map_err(err)?;
    }
    ensure!(
        ws.remove(&c, "upload_002").await.map_err(err)?,
        "remove of a file said there was none"
    );
    ensure!(
        !ws.remove(&c, "upload_002").await.map_err(err)?,
        "a second remove found the file"
    );
    ensure!(
        ws.meta(&c, "upload_002").await.map_err(err)?.is_none(),
        "a removed file has metadata"
    );
    ensure!(
        ws.open(&c, "upload_002").await.is_err(),
        "a removed file opens"
    );
    let next = ws
        .put_bytes(&c, NewFile::upload("a.csv", ""), b"y")
        .await
        .map_err(err)?;
    ensure!(
        next.id == "upload_003",
        "the id after a removed upload_002 is `{}`",
        next.id
    );
    Ok(())
}

/// `remove_all` removes every file and says how many; numbering goes on after it.
async fn remove_all<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-remove-all").await?;
    let other = conversation(store, "ws-remove-all-other").await?;
    for file in [
        NewFile::upload("a", ""),
        NewFile::output("b"),
        NewFile::code("code_c", "code_c.py"),
    ] {
        ws.put_bytes(&c, file, b"x").await.map_err(err)?;
    }
    ws.put_bytes(&other, NewFile::upload("a", ""), b"x")
        .await
        .map_err(err)?;
    let n = ws.remove_all(&c).await.map_err(err)?;
    ensure!(n == 3, "remove_all removed {n}");
    ensure!(
        ws.list(&c).await.map_err(err)?.is_empty(),
        "files left after remove_all"
    );
    ensure!(
        ws.list(&other).await.map_err(err)?.len() == 1,
        "remove_all reached another conversation"
    );
    ensure!(
        ws.remove_all(&c).await.map_err(err)? == 0,
        "a second remove_all found files"
    );
    let next = ws
        .put_bytes(&c, NewFile::upload("a", ""), b"x")
        .await
        .map_err(err)?;
    ensure!(
        next.id == "upload_002",
        "the id after remove_all is `{}`",
        next.id
    );
    Ok(())
}

/// Deleting a conversation deletes its files, also by retention; a conversation made again
/// with the same id starts empty; no owner is left without a conversation.
async fn delete_removes_files<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-delete").await?;
    let kept = conversation(store, "ws-delete-kept").await?;
    ws.put_bytes(&c, NewFile::upload("a", ""), b"x")
        .await
        .map_err(err)?;
    ws.put_bytes(&kept, NewFile::upload("a", ""), b"x")
        .await
        .map_err(err)?;
    let owners = ws.owners().await.map_err(err)?;
    ensure!(
        owners.iter().any(|o| o == "ws-delete"),
        "owners {owners:?} miss ws-delete"
    );
    ensure!(store.delete(&c).await.map_err(err)?, "delete found nothing");
    ensure!(
        ws.list(&c).await.map_err(err)?.is_empty(),
        "files of a deleted conversation are listed"
    );
    let owners = ws.owners().await.map_err(err)?;
    ensure!(
        !owners.iter().any(|o| o == "ws-delete"),
        "a deleted conversation still owns files: {owners:?}"
    );
    let orphans = crate::verify::orphan_workspaces(store).await.map_err(err)?;
    ensure!(orphans.is_empty(), "orphans after a delete: {orphans:?}");
    let again = conversation(store, "ws-delete").await?;
    ensure!(
        ws.list(&again).await.map_err(err)?.is_empty(),
        "a conversation made again has the old files"
    );
    store.delete(&again).await.map_err(err)?;
    let gone = store.delete_older_than(i64::MAX).await.map_err(err)?;
    ensure!(
        gone.iter().any(|g| g == "ws-delete-kept"),
        "retention deleted {gone:?}"
    );
    ensure!(
        ws.owners().await.map_err(err)?.is_empty(),
        "files left after retention"
    );
    Ok(())
}

/// The ids of a conversation's files, in list order.
async fn file_ids(
    ws: &dyn Workspace,
    c: &ConversationId,
) -> std::result::Result<Vec<String>, String> {
    Ok(ws
        .list(c)
        .await
        .map_err(err)?
        .into_iter()
        .map(|f| f.id.to_string())
        .collect())
}

/// A fork at entry N has the files its parent had before entry N + 1 was written: at 0 the
/// uploads made before the first question, at a later cut also those made after the answer
/// and before the next question (which an edit of that question asks again), at the last
/// entry every file.
async fn fork_files<S: ConversationStore>(
    store: &S,
    ws: &dyn Workspace,
    clock: &ManualClock,
) -> CheckResult {
    use ba_protocol::LogRole;
    let p = conversation(store, "ws-fork-p").await?;
    let upload = async |name: &str| {
        clock.advance(10);
        ws.put_bytes(&p, NewFile::upload(name, ""), b"a,b\n1,2\n")
            .await
            .map_err(err)
    };
    let ask = async |text: &str, role: LogRole| {
        clock.advance(10);
        store
            .append(&p, &super::text_entry(text, role, text), None)
            .await
            .map_err(err)
    };
    upload("sales_2024.csv").await?;
    ask("q1", LogRole::User).await?;
    ask("a1", LogRole::Assistant).await?;
    upload("targets.csv").await?;
    ask("q2", LogRole::User).await?;
    ask("a2", LogRole::Assistant).await?;
    upload("late.csv").await?;
    for (at, want) in [
        (0, vec!["upload_001"]),
        (1, vec!["upload_001"]),
        (2, vec!["upload_001", "upload_002"]),
        (4, vec!["upload_001", "upload_002", "upload_003"]),
    ] {
        let child = cid(&format!("ws-fork-at{at}"))?;
        crate::store::fork_with_files(store, &p, at, &child, NewConversation::default())
            .await
            .map_err(err)?;
        let got = file_ids(ws, &child).await?;
        ensure!(
            got == want,
            "a fork at entry {at} has {got:?}, not {want:?}"
        );
    }
    Ok(())
}

/// Two conversations with files of the same ids and names see only their own.
/// A file given to another conversation keeps its id, metadata and bytes there; the
/// receiver's next upload follows it; the copy outlives a remove from the giver; asking
/// again leaves it as it is; a file the giver does not have is `NoFile`.
async fn copy_file<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let a = conversation(store, "ws-copy-a").await?;
    let b = conversation(store, "ws-copy-b").await?;
    let body = pattern(70_000, 3);
    ws.put_bytes(&a, NewFile::upload("first.csv", ""), b"one")
        .await
        .map_err(err)?;
    let second = ws
        .put_bytes(&a, NewFile::upload("sales.csv", "the year"), &body)
        .await
        .map_err(err)?;
    let copied = ws.copy_file(&a, &b, "upload_002").await.map_err(err)?;
    ensure!(
        copied.id == "upload_002"
            && copied.name == "sales.csv"
            && copied.sha256 == second.sha256
            && copied.created_ms == second.created_ms,
        "the copy's metadata: {copied:?}"
    );
    let (_, bytes) = ws
        .read_bytes(&b, "upload_002", 1 << 20)
        .await
        .map_err(err)?;
    ensure!(bytes == body, "the copy's bytes differ");
    let next = ws
        .put_bytes(&b, NewFile::upload("own.csv", ""), b"own")
        .await
        .map_err(err)?;
    ensure!(next.id == "upload_003", "b's next upload got `{}`", next.id);
    ws.remove(&a, "upload_002").await.map_err(err)?;
    let (_, bytes) = ws
        .read_bytes(&b, "upload_002", 1 << 20)
        .await
        .map_err(err)?;
    ensure!(bytes == body, "the copy went with the giver's file");
    let again = ws.copy_file(&a, &b, "upload_001").await.map_err(err)?;
    ensure!(
        again.id == "upload_001",
        "a copy under a lower id: {again:?}"
    );
    let missing = ws.copy_file(&a, &b, "upload_009").await;
    ensure!(
        matches!(missing, Err(StorageError::NoFile { .. })),
        "a file the giver does not have: {missing:?}"
    );
    Ok(())
}

async fn isolation<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let a = conversation(store, "ws-iso-a").await?;
    let b = conversation(store, "ws-iso-b").await?;
    ws.put_bytes(&a, NewFile::upload("secret.csv", ""), b"a-secret")
        .await
        .map_err(err)?;
    ws.put_bytes(&a, NewFile::code("code_x", "code_x.py"), b"a-code")
        .await
        .map_err(err)?;
    ensure!(
        ws.meta(&b, "upload_001").await.map_err(err)?.is_none(),
        "b sees a's upload"
    );
    ensure!(
        ws.find(&b, "secret.csv").await.map_err(err)?.is_none(),
        "b finds a's upload by name"
    );
    ensure!(ws.open(&b, "code_x").await.is_err(), "b opens a's code");
    ensure!(
        ws.local_path(&b, "upload_001").await.is_err(),
        "b gets a path of a's upload"
    );
    let own = ws
        .put_bytes(&b, NewFile::upload("secret.csv", ""), b"b-own")
        .await
        .map_err(err)?;
    ensure!(own.id == "upload_001", "b's first upload got `{}`", own.id);
    let (_, bytes) = ws.read_bytes(&b, "upload_001", 100).await.map_err(err)?;
    ensure!(bytes == b"b-own", "b read {bytes:?}");
    let (_, bytes) = ws.read_bytes(&a, "upload_001", 100).await.map_err(err)?;
    ensure!(bytes == b"a-secret", "a read {bytes:?}");
    ensure!(
        !ws.remove(&b, "code_x").await.map_err(err)?,
        "b removed a's code"
    );
    ensure!(
        ws.meta(&a, "code_x").await.map_err(err)?.is_some(),
        "a's code is gone"
    );
    Ok(())
}

/// A code file replaces the one of its id, name and content.
async fn code_replace<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-code").await?;
    ws.put_bytes(&c, NewFile::code("code_q", "code_q.sql"), b"SELECT 1")
        .await
        .map_err(err)?;
    let big = pattern(300_000, 3);
    ws.put_bytes(&c, NewFile::code("code_q", "code_q.sql"), &big)
        .await
        .map_err(err)?;
    let new = ws
        .put_bytes(
            &c,
            NewFile::code("code_q", "code_q.py").with_description("again"),
            b"print(2)",
        )
        .await
        .map_err(err)?;
    let files = ws.list(&c).await.map_err(err)?;
    ensure!(
        files.len() == 1,
        "{} files after replacing one",
        files.len()
    );
    ensure!(files.first() == Some(&new), "listed {files:?}");
    let (meta, bytes) = ws.read_bytes(&c, "code_q", 1000).await.map_err(err)?;
    ensure!(
        (meta.name.as_str(), bytes.as_slice()) == ("code_q.py", b"print(2)".as_slice()),
        "read {} {bytes:?}",
        meta.name
    );
    let path = ws.local_path(&c, "code_q").await.map_err(err)?;
    let local = std::fs::read(&path).map_err(|e| e.to_string())?;
    ensure!(local == b"print(2)", "the local copy is of the old content");
    Ok(())
}

/// `save_code`, `get_code` and `list_code` keep code blocks with their language and counts.
async fn code_blocks<S: ConversationStore>(store: &S, ws: &dyn Workspace) -> CheckResult {
    let c = conversation(store, "ws-code-blocks").await?;
    let saved = save_code(
        ws,
        &c,
        "code_chart",
        "const a = 1;\nconsole.log(a);\n",
        "JS",
        "chart",
    )
    .await
    .map_err(err)?;
    ensure!(saved.warning.is_none(), "warning {:?}", saved.warning);
    let m = &saved.meta;
    ensure!(
        (
            m.language.as_str(),
            m.file_name.as_str(),
            m.line_count,
            m.char_count
        ) == ("javascript", "code_chart.js", 2, 29),
        "saved {m:?}"
    );
    ensure!(
        m.conversation_id.as_deref() == Some("ws-code-blocks"),
        "conversation {:?}",
        m.conversation_id
    );
    let fallback = save_code(ws, &c, "code_x", "print('é')", "cobol", "x")
        .await
        .map_err(err)?;
    ensure!(
        fallback.warning.as_deref()
            == Some("code `code_x`: language `cobol` is not supported; saved as python"),
        "warning {:?}",
        fallback.warning
    );
    let (meta, code) = get_code(ws, &c, "code_chart").await.map_err(err)?;
    ensure!(meta == saved.meta, "get gave {meta:?}");
    ensure!(code.starts_with("const"), "code {code:?}");
    let listed = list_code(ws, &c).await.map_err(err)?;
    ensure!(
        listed
            .iter()
            .map(|m| m.code_id.as_str())
            .collect::<Vec<_>>()
            == ["code_chart", "code_x"],
        "listed {listed:?}"
    );
    ws.put_bytes(&c, NewFile::upload("u.csv", ""), b"x")
        .await
        .map_err(err)?;
    match get_code(ws, &c, "upload_001").await {
        Err(e) if e.to_string().contains("no code block") => {}
        other => return Err(format!("get_code of an upload gave {other:?}")),
    }
    match get_code(ws, &c, "code_missing").await {
        Err(e) if e.to_string().contains("no code block") => {}
        other => return Err(format!("get_code of a missing block gave {other:?}")),
    }
    ensure!(
        save_code(ws, &c, "../evil", "x", "python", "")
            .await
            .is_err(),
        "a bad code id was saved"
    );
    Ok(())
}

/// Puts at the same time get distinct ids, and each keeps its own content.
async fn concurrent_puts<S: ConversationStore>(store: &S, ws: Arc<dyn Workspace>) -> CheckResult {
    let c = conversation(store, "ws-concurrent").await?;
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let (ws, c) = (ws.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            let body = pattern(40_000 + usize::from(i), i);
            let meta = ws
                .put_bytes(&c, NewFile::upload(format!("f{i}.bin"), ""), &body)
                .await?;
            Ok::<_, StorageError>((meta, body))
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        let (meta, body) = task.await.map_err(|e| e.to_string())?.map_err(err)?;
        let (_, back) = ws.read_bytes(&c, &meta.id, 1 << 20).await.map_err(err)?;
        ensure!(back == body, "`{}` holds another put's content", meta.id);
        ids.push(meta.id);
    }
    ids.sort();
    let want: Vec<String> = (1..=8)
        .map(|n| FileKind::Upload.id(n).to_string())
        .collect();
    ensure!(ids == want, "concurrent puts got {ids:?}");
    Ok(())
}
