//! The conformance checks of what a conversation store does across conversations: forks (a
//! history shared up to a cut) and search.

use ba_protocol::{LogEntry, LogRole, Mode};

use super::{CheckResult, cid, err, text_entry};
use crate::error::StorageError;
use crate::id::ConversationId;
use crate::store::{Clock as _, ConversationStore, ManualClock, NewConversation, Page};

/// The texts of a conversation's entries, and their sequence numbers.
async fn texts_and_seqs<S: ConversationStore>(
    store: &S,
    id: &ConversationId,
    from: u64,
) -> std::result::Result<(Vec<String>, Vec<u64>), String> {
    let loaded = store.load_from(id, from).await.map_err(err)?;
    Ok((
        loaded
            .entries
            .iter()
            .map(|s| s.entry.text().into_owned())
            .collect(),
        loaded.entries.iter().map(|s| s.seq).collect(),
    ))
}

/// A fork reads like its parent up to the cut, then its own entries (numbered on); appends
/// to either leave the other as it was; a fork of a fork reads through both; `load_from`
/// inside the shared part; the metadata names the fork point; a cut past the end is refused;
/// the parent cannot be deleted while a fork lives (the fork keeps reading it), and can be
/// once its forks are gone; retention keeps a parent whose forks remain.
pub(super) async fn forks<S: ConversationStore>(store: &S, clock: &ManualClock) -> CheckResult {
    let (p, f, g) = (
        cid("fork-parent")?,
        cid("fork-child")?,
        cid("fork-grandchild")?,
    );
    store
        .create(
            &p,
            NewConversation {
                title: Some("Q3 review".into()),
                mode: Some(Mode::Agent),
                parent: None,
                owner: None,
            },
        )
        .await
        .map_err(err)?;
    let parent: Vec<LogEntry> = ["q1", "a1", "q2", "a2"]
        .iter()
        .map(|t| text_entry(t, LogRole::User, t))
        .collect();
    store.append_batch(&p, &parent, None).await.map_err(err)?;
    let past = store.fork(&p, 5, &f, NewConversation::default()).await;
    ensure!(
        matches!(past, Err(StorageError::Invalid { .. })),
        "a cut past the parent's end was taken: {past:?}"
    );
    let meta = store
        .fork(&p, 2, &f, NewConversation::default())
        .await
        .map_err(err)?;
    ensure!(
        meta.last_seq == 2
            && meta
                .fork
                .as_ref()
                .is_some_and(|k| k.parent == "fork-parent" && k.at_seq == 2),
        "the fork's metadata: {meta:?}"
    );
    ensure!(
        meta.title.as_deref() == Some("Q3 review") && meta.mode == Some(Mode::Agent),
        "a fork takes its parent's title and mode unless given: {meta:?}"
    );
    let again = store.fork(&p, 1, &f, NewConversation::default()).await;
    ensure!(
        matches!(again, Err(StorageError::AlreadyExists { .. })),
        "a fork onto a taken id: {again:?}"
    );
    let (texts, seqs) = texts_and_seqs(store, &f, 1).await?;
    ensure!(
        texts == ["q1", "a1"] && seqs == [1, 2],
        "the fork before its own entries: {texts:?} {seqs:?}"
    );
    // The fork's own entries follow the cut; the parent goes on on its own.
    let done = store
        .append(&f, &text_entry("q2b", LogRole::User, "q2b"), Some(2))
        .await
        .map_err(err)?;
    ensure!(done == 3, "the fork's first own entry is {done}, not 3");
    store
        .append(&p, &text_entry("q3", LogRole::User, "q3"), Some(4))
        .await
        .map_err(err)?;
    let (texts, seqs) = texts_and_seqs(store, &f, 1).await?;
    ensure!(
        texts == ["q1", "a1", "q2b"] && seqs == [1, 2, 3],
        "the fork after appends to both: {texts:?} {seqs:?}"
    );
    let (texts, _) = texts_and_seqs(store, &p, 1).await?;
    ensure!(
        texts == ["q1", "a1", "q2", "a2", "q3"],
        "the parent after appends to both: {texts:?}"
    );
    let (texts, seqs) = texts_and_seqs(store, &f, 2).await?;
    ensure!(
        texts == ["a1", "q2b"] && seqs == [2, 3],
        "the fork from entry 2: {texts:?} {seqs:?}"
    );
    let (texts, _) = texts_and_seqs(store, &f, 3).await?;
    ensure!(texts == ["q2b"], "the fork from its own part: {texts:?}");
    let conflict = store
        .append(&f, &text_entry("x", LogRole::User, "x"), Some(2))
        .await;
    ensure!(
        matches!(
            conflict,
            Err(StorageError::SequenceConflict { actual: 3, .. })
        ),
        "an append naming the cut as the fork's last: {conflict:?}"
    );
    // A fork of the fork, cut inside the part the fork shares with its parent.
    store
        .fork(&f, 3, &g, NewConversation::default())
        .await
        .map_err(err)?;
    store
        .append(&g, &text_entry("a2b", LogRole::Assistant, "a2b"), Some(3))
        .await
        .map_err(err)?;
    let (texts, seqs) = texts_and_seqs(store, &g, 1).await?;
    ensure!(
        texts == ["q1", "a1", "q2b", "a2b"] && seqs == [1, 2, 3, 4],
        "a fork of a fork: {texts:?} {seqs:?}"
    );
    let empty = cid("fork-empty")?;
    let meta = store
        .fork(&p, 0, &empty, NewConversation::default())
        .await
        .map_err(err)?;
    let (texts, _) = texts_and_seqs(store, &empty, 1).await?;
    ensure!(
        meta.last_seq == 0 && texts.is_empty(),
        "a fork at 0 is empty: {meta:?} {texts:?}"
    );
    store.delete(&empty).await.map_err(err)?;
    // The parent stays while a fork reads from it.
    let refused = store.delete(&p).await;
    ensure!(
        matches!(&refused, Err(StorageError::HasForks { forks, .. }) if forks == &["fork-child"]),
        "deleting a parent with a fork: {refused:?}"
    );
    let refused = store.delete(&f).await;
    ensure!(
        matches!(refused, Err(StorageError::HasForks { .. })),
        "deleting a fork with a fork: {refused:?}"
    );
    clock.advance(10_000);
    let gone = store.delete_older_than(clock.now_ms()).await.map_err(err)?;
    ensure!(
        gone == ["fork-grandchild"],
        "retention deletes only what no fork reads from, leaves first: {gone:?}"
    );
    let (texts, _) = texts_and_seqs(store, &f, 1).await?;
    ensure!(texts.len() == 3, "the fork after retention: {texts:?}");
    ensure!(
        store.delete(&f).await.map_err(err)? && store.delete(&p).await.map_err(err)?,
        "the fork, then its parent, could not be deleted"
    );
    Ok(())
}

/// Search finds a conversation by its title or a word of its questions and answers, in any
/// case, not by a tool's output; pages go on where the last stopped; an empty query lists all.
pub(super) async fn search<S: ConversationStore>(store: &S) -> CheckResult {
    let ids = |page: &crate::store::ListPage| -> Vec<String> {
        page.items.iter().map(|m| m.id.clone()).collect()
    };
    let a = cid("search-a")?;
    store
        .create(
            &a,
            NewConversation {
                title: Some("Quarterly review".into()),
                ..NewConversation::default()
            },
        )
        .await
        .map_err(err)?;
    let b = cid("search-b")?;
    store
        .create(&b, NewConversation::default())
        .await
        .map_err(err)?;
    let mut tool = text_entry("t1", LogRole::Tool, "secretword in a tool's output");
    tool.tool_call_id = Some("c1".into());
    store
        .append_batch(
            &b,
            &[
                text_entry("u1", LogRole::User, "Sales by region?"),
                text_entry(
                    "a1",
                    LogRole::Assistant,
                    "The West grew 12 % over the quarter.",
                ),
                tool,
            ],
            None,
        )
        .await
        .map_err(err)?;
    let c = cid("search-c")?;
    store
        .create(&c, NewConversation::default())
        .await
        .map_err(err)?;
    store
        .append(&c, &text_entry("u1", LogRole::User, "Something else"), None)
        .await
        .map_err(err)?;
    let found = store
        .search("quarterly", Page::first(10))
        .await
        .map_err(err)?;
    ensure!(ids(&found) == ["search-a"], "by title: {:?}", ids(&found));
    let found = store
        .search("WEST grew", Page::first(10))
        .await
        .map_err(err)?;
    ensure!(
        ids(&found) == ["search-b"],
        "by an answer's words: {:?}",
        ids(&found)
    );
    let found = store
        .search("secretword", Page::first(10))
        .await
        .map_err(err)?;
    ensure!(
        found.items.is_empty(),
        "by a tool's output: {:?}",
        ids(&found)
    );
    let first = store.search("quarter", Page::first(1)).await.map_err(err)?;
    ensure!(
        ids(&first) == ["search-a"] && first.next.is_some(),
        "the first page of two: {:?} {:?}",
        ids(&first),
        first.next
    );
    let second = store
        .search(
            "quarter",
            Page {
                after: first.next.clone(),
                limit: 1,
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        ids(&second) == ["search-b"] && second.next.is_none(),
        "the second page: {:?} {:?}",
        ids(&second),
        second.next
    );
    let all = store.search("", Page::first(10)).await.map_err(err)?;
    ensure!(all.items.len() == 3, "an empty query: {:?}", ids(&all));
    Ok(())
}

/// A fork and a delete of its parent at the same time never both succeed: either the fork
/// is refused (its parent is gone) or the delete is (`HasForks`); after either, every
/// conversation listed can be read.
pub(super) async fn fork_delete_race<S: ConversationStore>(store: &S) -> CheckResult {
    for round in 0..50 {
        let (p, f) = (
            cid(&format!("race-p{round}"))?,
            cid(&format!("race-f{round}"))?,
        );
        store
            .create(&p, NewConversation::default())
            .await
            .map_err(err)?;
        store
            .append(&p, &text_entry("q", LogRole::User, "q"), None)
            .await
            .map_err(err)?;
        let (forked, deleted) = super::both(
            store.fork(&p, 1, &f, NewConversation::default()),
            store.delete(&p),
        )
        .await;
        match (&forked, &deleted) {
            (Ok(_), Err(StorageError::HasForks { forks, .. })) => {
                ensure!(
                    forks == &[f.to_string()],
                    "round {round}: the refusal names {forks:?}"
                );
                let (texts, _) = texts_and_seqs(store, &f, 1).await?;
                ensure!(texts == ["q"], "round {round}: the fork reads {texts:?}");
                store.delete(&f).await.map_err(err)?;
                store.delete(&p).await.map_err(err)?;
            }
            (Err(StorageError::NotFound { .. }), Ok(true)) => {}
            _ => {
                return Err(format!(
                    "round {round}: a fork ({forked:?}) and a delete of its parent \
                     ({deleted:?}) at once"
                ));
            }
        }
        for meta in store.list_all().await.map_err(err)? {
            let id = cid(&meta.id)?;
            store
                .load(&id)
                .await
                .map_err(|e| format!("round {round}: `{id}` is listed but cannot be read: {e}"))?;
        }
    }
    Ok(())
}

/// Titles keep no control or format character, whether given at creation, to a fork or in
/// an update.
pub(super) async fn clean_titles<S: ConversationStore>(store: &S) -> CheckResult {
    let (a, f) = (cid("title-a")?, cid("title-f")?);
    let raw = "Q3\u{1b}[2J\u{0}review\u{202e}fdp.exe";
    let made = store
        .create(
            &a,
            NewConversation {
                title: Some(raw.into()),
                ..NewConversation::default()
            },
        )
        .await
        .map_err(err)?;
    let clean = "Q3 [2J review fdp.exe";
    ensure!(
        made.title.as_deref() == Some(clean),
        "a title at creation: {:?}",
        made.title
    );
    let read = store.metadata(&a).await.map_err(err)?;
    ensure!(
        read.title.as_deref() == Some(clean),
        "a title read back: {:?}",
        read.title
    );
    let forked = store
        .fork(
            &a,
            0,
            &f,
            NewConversation {
                title: Some("edit\u{9b}31m".into()),
                ..NewConversation::default()
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        forked.title.as_deref() == Some("edit 31m"),
        "a fork's title: {:?}",
        forked.title
    );
    let updated = store
        .update_metadata(
            &a,
            crate::store::MetaUpdate {
                title: Some("\u{2066}new\u{7}".into()),
                mode: None,
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        updated.title.as_deref() == Some("new"),
        "an updated title: {:?}",
        updated.title
    );
    let listed = store.list_all().await.map_err(err)?;
    ensure!(
        listed
            .iter()
            .filter_map(|m| m.title.as_deref())
            .all(|t| !t.chars().any(crate::is_hidden_char)),
        "the list: {listed:?}"
    );
    Ok(())
}
