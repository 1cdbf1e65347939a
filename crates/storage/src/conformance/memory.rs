//! The conformance checks of memory across conversations ([`crate::MemoryStore`]): versions
//! and restore, scopes apart, bounds and path checks, and concurrent commits.

use std::sync::Arc;

use super::{CheckResult, both, err};
use crate::error::StorageError;
use crate::memory::{
    MemoryAuthor, MemoryChange, MemoryLimits, MemoryScope, MemoryStore, MemoryVersion,
};
use crate::store::{ConversationStore, ManualClock};

fn memory<S: ConversationStore>(store: &S) -> std::result::Result<Arc<dyn MemoryStore>, String> {
    store
        .memory()
        .ok_or_else(|| "the store keeps no memory".to_owned())
}

fn write(path: &str, text: &str) -> MemoryChange {
    MemoryChange::Write {
        path: path.to_owned(),
        text: text.to_owned(),
    }
}

fn by_tool() -> MemoryAuthor {
    MemoryAuthor {
        user: Some("ann".into()),
        conversation: Some("c1".into()),
        run: Some("r1".into()),
    }
}

/// Every change is a version naming its author; a delete keeps the history; a restore brings
/// an old text back as a new version.
pub(super) async fn memory_versions<S: ConversationStore>(
    store: &S,
    clock: &ManualClock,
) -> CheckResult {
    let mem = memory(store)?;
    let ann = MemoryScope::user("ann").map_err(err)?;
    let limits = MemoryLimits::default();
    mem.commit(
        &ann,
        &[write("preferences.md", "FY starts in April\n")],
        &by_tool(),
        &limits,
    )
    .await
    .map_err(err)?;
    clock.advance(1_000);
    let second = mem
        .commit(
            &ann,
            &[write(
                "preferences.md",
                "FY starts in April\nExclude test stores\n",
            )],
            &MemoryAuthor::person("ann"),
            &limits,
        )
        .await
        .map_err(err)?;
    ensure!(
        second.len() == 1 && second[0].version == 2,
        "a second write made {second:?}"
    );
    let files = mem.files(&ann).await.map_err(err)?;
    ensure!(
        files.len() == 1
            && files[0].path == "preferences.md"
            && files[0].versions == 2
            && files[0].size == 39
            && files[0].updated_ms == 1_700_000_001_000,
        "the listing after two writes: {files:?}"
    );
    let history = mem.history(&ann, "preferences.md").await.map_err(err)?;
    ensure!(
        history.iter().map(|v| v.version).collect::<Vec<_>>() == [1, 2],
        "history: {history:?}"
    );
    ensure!(
        history[0].author == by_tool() && history[1].author == MemoryAuthor::person("ann"),
        "the authors: {:?}",
        history.iter().map(|v| &v.author).collect::<Vec<_>>()
    );
    mem.commit(
        &ann,
        &[MemoryChange::Delete {
            path: "preferences.md".into(),
        }],
        &by_tool(),
        &limits,
    )
    .await
    .map_err(err)?;
    ensure!(
        mem.files(&ann).await.map_err(err)?.is_empty(),
        "a deleted file is still listed"
    );
    ensure!(
        mem.read(&ann, "preferences.md")
            .await
            .map_err(err)?
            .is_none(),
        "a deleted file still reads"
    );
    let restored = mem
        .restore(
            &ann,
            "preferences.md",
            1,
            &MemoryAuthor::person("ann"),
            &limits,
        )
        .await
        .map_err(err)?;
    ensure!(
        restored.version == 4 && restored.text.as_deref() == Some("FY starts in April\n"),
        "the restore made {restored:?}"
    );
    let read: Option<MemoryVersion> = mem.read(&ann, "preferences.md").await.map_err(err)?;
    ensure!(
        read.and_then(|v| v.text).as_deref() == Some("FY starts in April\n"),
        "the restored text does not read back"
    );
    let refused = mem
        .restore(
            &ann,
            "preferences.md",
            3,
            &MemoryAuthor::person("ann"),
            &limits,
        )
        .await;
    ensure!(
        matches!(refused, Err(StorageError::Invalid { .. })),
        "restoring a delete: {refused:?}"
    );
    // A rename is one commit: the new path written, the old one deleted.
    mem.commit(
        &ann,
        &[
            write("fiscal.md", "FY starts in April\n"),
            MemoryChange::Delete {
                path: "preferences.md".into(),
            },
        ],
        &by_tool(),
        &limits,
    )
    .await
    .map_err(err)?;
    let paths: Vec<String> = mem
        .files(&ann)
        .await
        .map_err(err)?
        .into_iter()
        .map(|f| f.path)
        .collect();
    ensure!(paths == ["fiscal.md"], "after a rename: {paths:?}");
    // Only the newest versions are kept past the limit, numbers going on.
    let few = MemoryLimits::default().with_max_versions(2);
    for text in ["a", "b", "c"] {
        mem.commit(&ann, &[write("log.md", text)], &by_tool(), &few)
            .await
            .map_err(err)?;
    }
    let kept: Vec<u32> = mem
        .history(&ann, "log.md")
        .await
        .map_err(err)?
        .iter()
        .map(|v| v.version)
        .collect();
    ensure!(kept == [2, 3], "versions kept past the limit: {kept:?}");
    Ok(())
}

/// A user's files are theirs alone; the team's are apart from every user's.
pub(super) async fn memory_scopes<S: ConversationStore>(store: &S) -> CheckResult {
    let mem = memory(store)?;
    let limits = MemoryLimits::default();
    let ann = MemoryScope::user("ann").map_err(err)?;
    let bob = MemoryScope::user("bob").map_err(err)?;
    mem.commit(&ann, &[write("a.md", "ann's")], &by_tool(), &limits)
        .await
        .map_err(err)?;
    mem.commit(
        &MemoryScope::Team,
        &[write("a.md", "the team's")],
        &by_tool(),
        &limits,
    )
    .await
    .map_err(err)?;
    ensure!(
        mem.files(&bob).await.map_err(err)?.is_empty(),
        "bob sees files of another scope"
    );
    ensure!(
        mem.read(&bob, "a.md").await.map_err(err)?.is_none(),
        "bob reads ann's file"
    );
    let team = mem.read(&MemoryScope::Team, "a.md").await.map_err(err)?;
    ensure!(
        team.and_then(|v| v.text).as_deref() == Some("the team's"),
        "the team's file was mixed with ann's"
    );
    let bad = MemoryScope::User("../x".into());
    ensure!(
        mem.files(&bad).await.is_err() || mem.files(&bad).await.is_ok_and(|f| f.is_empty()),
        "a scope of a bad user name lists files"
    );
    Ok(())
}

/// Each bound and each path check refuses the whole commit and keeps nothing.
pub(super) async fn memory_bounds<S: ConversationStore>(store: &S) -> CheckResult {
    let mem = memory(store)?;
    let ann = MemoryScope::user("ann").map_err(err)?;
    let limits = MemoryLimits::default()
        .with_max_file_bytes(100)
        .with_max_files(3)
        .with_max_total_bytes(250);
    let big = "x".repeat(101);
    let refusals: [(&str, Vec<MemoryChange>); 7] = [
        ("a file over its size", vec![write("big.md", &big)]),
        (
            "a fourth file",
            vec![
                write("1", "a"),
                write("2", "b"),
                write("3", "c"),
                write("4", "d"),
            ],
        ),
        (
            "the scope over its total",
            vec![
                write("1", &"a".repeat(100)),
                write("2", &"b".repeat(100)),
                write("3", &"c".repeat(51)),
            ],
        ),
        ("a path with `..`", vec![write("../escape.md", "x")]),
        ("a hidden name", vec![write(".profile", "x")]),
        ("an absolute path", vec![write("/etc/passwd", "x")]),
        (
            "a delete of nothing, after a good write",
            vec![
                write("ok.md", "x"),
                MemoryChange::Delete {
                    path: "none.md".into(),
                },
            ],
        ),
    ];
    for (what, changes) in refusals {
        let result = mem.commit(&ann, &changes, &by_tool(), &limits).await;
        ensure!(result.is_err(), "{what} was kept: {result:?}");
        let files = mem.files(&ann).await.map_err(err)?;
        ensure!(files.is_empty(), "{what} was refused but left {files:?}");
    }
    let at_limit = [
        write("1", &"a".repeat(100)),
        write("2", &"b".repeat(100)),
        write("3", &"c".repeat(50)),
    ];
    mem.commit(&ann, &at_limit, &by_tool(), &limits)
        .await
        .map_err(err)?;
    ensure!(
        mem.files(&ann).await.map_err(err)?.len() == 3,
        "three files at the limits were not all kept"
    );
    Ok(())
}

/// Commits from many tasks at once lose no version and never pass the file bound together.
pub(super) async fn memory_concurrent<S: ConversationStore>(store: &S) -> CheckResult {
    let mem = memory(store)?;
    let ann = MemoryScope::user("ann").map_err(err)?;
    let limits = MemoryLimits::default().with_max_files(1);
    let (a, b) = both(
        mem.commit(&ann, &[write("a.md", "a")], &by_tool(), &limits),
        mem.commit(&ann, &[write("b.md", "b")], &by_tool(), &limits),
    )
    .await;
    ensure!(
        a.is_ok() != b.is_ok(),
        "two files went past a bound of one together: {a:?} {b:?}"
    );
    let limits = MemoryLimits::default();
    let (x, y) = both(
        mem.commit(&ann, &[write("n.md", "x")], &by_tool(), &limits),
        mem.commit(&ann, &[write("n.md", "y")], &by_tool(), &limits),
    )
    .await;
    x.map_err(err)?;
    y.map_err(err)?;
    let versions: Vec<u32> = mem
        .history(&ann, "n.md")
        .await
        .map_err(err)?
        .iter()
        .map(|v| v.version)
        .collect();
    ensure!(versions == [1, 2], "two writers left versions {versions:?}");
    Ok(())
}
