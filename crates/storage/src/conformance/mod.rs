//! The conformance suite every [`ConversationStore`] backend passes.
//!
//! [`run_all`] takes a factory that makes a fresh, empty store around a [`ManualClock`] and
//! runs every check on its own store: ordering, sequence conflicts, concurrent appenders,
//! paging, delete, retention, unicode and 10 MB entries, the round trip of every entry kind,
//! owners, the people of the store (users, tokens, shares, spend added from many tasks at
//! once), memory (versions, restore, scopes, bounds, path checks, concurrent commits), and
//! schedules (each occurrence claimed once by many tasks at once, catch-up). A failed check
//! is returned as an error naming the check.
//!
//! [`workspace()`] is the suite of the conversations' workspaces ([`crate::Workspace`]), run the
//! same way on every backend that has one.

use std::future::Future;
use std::sync::Arc;

use ba_protocol::{LogEntry, LogRole, Mode};

use crate::error::StorageError;
use crate::id::ConversationId;
use crate::store::{
    ConversationStore, ManualClock, MetaUpdate, NewConversation, Page, RunHolder, RunLock,
};

pub use self::files::{WORKSPACE_CHECKS, WORKSPACE_LIMITS, workspace};

/// A failed conformance check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance check `{check}` failed: {message}")]
pub struct Failure {
    /// The check.
    pub check: &'static str,
    /// What went wrong.
    pub message: String,
}

type CheckResult = std::result::Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn err(e: StorageError) -> String {
    e.to_string()
}

fn cid(id: &str) -> std::result::Result<ConversationId, String> {
    ConversationId::new(id).map_err(err)
}

/// Runs `a` and `b` at once (each going on while the other waits) and gives both results.
async fn both<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    use std::task::Poll;
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none()
            && let Poll::Ready(v) = a.as_mut().poll(cx)
        {
            ra = Some(v);
        }
        if rb.is_none()
            && let Poll::Ready(v) = b.as_mut().poll(cx)
        {
            rb = Some(v);
        }
        match (ra.take(), rb.take()) {
            (Some(x), Some(y)) => Poll::Ready((x, y)),
            (x, y) => {
                (ra, rb) = (x, y);
                Poll::Pending
            }
        }
    })
    .await
}

// After `ensure!`, which the workspace checks use too.
mod files;
mod forks;
mod memory;
mod people;
mod schedules;

/// An entry with text `text`.
pub fn text_entry(id: &str, role: LogRole, text: &str) -> LogEntry {
    LogEntry::new(id, role, "2026-01-01T00:00:00Z").with_text(text)
}

/// The checks, by name.
pub const CHECKS: &[&str] = &[
    "ordering",
    "sequence_conflicts",
    "concurrent_appenders",
    "paging",
    "delete",
    "retention",
    "metadata",
    "unicode_and_large",
    "run_lock",
    "cancel_requests",
    "entry_kinds_round_trip",
    "forks",
    "search",
    "fork_delete_race",
    "clean_titles",
    "owners",
    "users",
    "tokens",
    "shares",
    "spend",
    "memory_versions",
    "memory_scopes",
    "memory_bounds",
    "memory_concurrent",
    "schedules",
    "schedule_claims",
    "catch_up",
];

/// Runs every check, each on a fresh store from `make`.
pub async fn run_all<S, F, Fut>(make: F) -> std::result::Result<(), Failure>
where
    S: ConversationStore + 'static,
    F: Fn(Arc<ManualClock>) -> Fut,
    Fut: Future<Output = S>,
{
    for &check in CHECKS {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let store = Arc::new(make(clock.clone()).await);
        let result = match check {
            "ordering" => ordering(&store).await,
            "sequence_conflicts" => sequence_conflicts(&store).await,
            "concurrent_appenders" => concurrent_appenders(&store).await,
            "paging" => paging(&store).await,
            "delete" => delete(&store).await,
            "retention" => retention(&store, &clock).await,
            "metadata" => metadata(&store, &clock).await,
            "unicode_and_large" => unicode_and_large(&store).await,
            "run_lock" => run_lock(&store).await,
            "cancel_requests" => cancel_requests(&store).await,
            "forks" => forks::forks(&store, &clock).await,
            "search" => forks::search(&store).await,
            "fork_delete_race" => forks::fork_delete_race(&store).await,
            "clean_titles" => forks::clean_titles(&store).await,
            "owners" => people::owners(&store).await,
            "users" => people::users(&store).await,
            "tokens" => people::tokens(&store).await,
            "shares" => people::shares(&store).await,
            "spend" => people::spend(&store).await,
            "memory_versions" => memory::memory_versions(&store, &clock).await,
            "memory_scopes" => memory::memory_scopes(&store).await,
            "memory_bounds" => memory::memory_bounds(&store).await,
            "memory_concurrent" => memory::memory_concurrent(&store).await,
            "schedules" => schedules::schedules_kept(&store, &clock).await,
            "schedule_claims" => schedules::schedule_claims(&store).await,
            "catch_up" => schedules::catch_up(&store, &clock).await,
            _ => entry_kinds_round_trip(&store).await,
        };
        result.map_err(|message| Failure { check, message })?;
    }
    Ok(())
}

/// One run lease per conversation at a time; another conversation is not held up; a dropped
/// lease frees the conversation.
async fn run_lock<S: ConversationStore>(store: &S) -> CheckResult {
    let (a, b) = (cid("lock-a")?, cid("lock-b")?);
    for id in [&a, &b] {
        store
            .create(id, NewConversation::default())
            .await
            .map_err(err)?;
    }
    let first = RunHolder::new("run_a1", "conformance, first");
    let held = store.lock_run(&a, &first).await.map_err(err)?.lease();
    ensure!(
        held.is_some(),
        "the first lease of a conversation was refused"
    );
    let who = store.run_holder(&a).await.map_err(err)?;
    ensure!(
        who.as_ref() == Some(&first),
        "the holder of a held conversation reads {who:?}"
    );
    match store
        .lock_run(&a, &RunHolder::new("run_a2", "conformance, second"))
        .await
        .map_err(err)?
    {
        RunLock::Held(Some(h)) if h == first => {}
        RunLock::Held(other) => {
            return Err(format!("a refused lease names {other:?}, not the holder"));
        }
        RunLock::Taken(_) => return Err("a second lease of a held conversation was granted".into()),
    }
    let other = store
        .lock_run(&b, &RunHolder::new("run_b1", "conformance"))
        .await
        .map_err(err)?
        .lease();
    ensure!(
        other.is_some(),
        "a lease on one conversation held up another"
    );
    drop(held);
    ensure!(
        store.run_holder(&a).await.map_err(err)?.is_none(),
        "a conversation whose lease was dropped still has a holder"
    );
    let again = store
        .lock_run(&a, &RunHolder::new("run_a3", "conformance, third"))
        .await
        .map_err(err)?
        .lease();
    ensure!(
        again.is_some(),
        "a dropped lease did not free the conversation"
    );
    let bad = RunHolder::new("run\nx", "conformance");
    ensure!(
        matches!(
            store.lock_run(&b, &bad).await,
            Err(StorageError::Invalid { .. })
        ),
        "a holder with a line break was taken"
    );
    Ok(())
}

/// A cancel request names one run of one conversation, replaces the one before, is cleared,
/// and goes with its conversation; none on a missing conversation. A backend that cannot carry
/// requests says so and reports none.
async fn cancel_requests<S: ConversationStore>(store: &S) -> CheckResult {
    let (a, b) = (cid("cancel-a")?, cid("cancel-b")?);
    for id in [&a, &b] {
        store
            .create(id, NewConversation::default())
            .await
            .map_err(err)?;
    }
    ensure!(
        store.cancel_requested(&a).await.map_err(err)?.is_none(),
        "a new conversation has a cancel request"
    );
    if !store.request_cancel(&a, "run_1").await.map_err(err)? {
        ensure!(
            store.cancel_requested(&a).await.map_err(err)?.is_none(),
            "a backend without cancel requests reported one"
        );
        return Ok(());
    }
    let requested = store.cancel_requested(&a).await.map_err(err)?;
    ensure!(
        requested.as_deref() == Some("run_1"),
        "requested run_1, read {requested:?}"
    );
    ensure!(
        store.cancel_requested(&b).await.map_err(err)?.is_none(),
        "a request on one conversation showed on another"
    );
    store.request_cancel(&a, "run_2").await.map_err(err)?;
    let requested = store.cancel_requested(&a).await.map_err(err)?;
    ensure!(
        requested.as_deref() == Some("run_2"),
        "a second request did not replace the first: {requested:?}"
    );
    store.clear_cancel(&a).await.map_err(err)?;
    store.clear_cancel(&a).await.map_err(err)?;
    ensure!(
        store.cancel_requested(&a).await.map_err(err)?.is_none(),
        "a cleared request is still there"
    );
    store.request_cancel(&b, "run_3").await.map_err(err)?;
    store.delete(&b).await.map_err(err)?;
    ensure!(
        store.cancel_requested(&b).await.map_err(err)?.is_none(),
        "a deleted conversation kept its cancel request"
    );
    let missing = cid("cancel-missing")?;
    ensure!(
        matches!(
            store.request_cancel(&missing, "run_4").await,
            Err(StorageError::NotFound { .. })
        ),
        "a cancel request on a missing conversation was not NotFound"
    );
    Ok(())
}

async fn ordering<S: ConversationStore>(store: &S) -> CheckResult {
    let id = cid("ordering")?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    let mut expected = Vec::new();
    for i in 0..20 {
        let e = text_entry(&format!("m{i}"), LogRole::User, &format!("entry {i}"));
        let seq = store.append(&id, &e, None).await.map_err(err)?;
        ensure!(
            seq == i + 1,
            "append {i} got sequence number {seq}, expected {}",
            i + 1
        );
        expected.push(e);
    }
    let batch: Vec<LogEntry> = (20..30)
        .map(|i| text_entry(&format!("m{i}"), LogRole::Assistant, &format!("entry {i}")))
        .collect();
    let done = store
        .append_batch(&id, &batch, Some(20))
        .await
        .map_err(err)?;
    ensure!(
        (done.first_seq, done.last_seq) == (21, 30),
        "batch got {}..={}, expected 21..=30",
        done.first_seq,
        done.last_seq
    );
    expected.extend(batch);
    let loaded = store.load(&id).await.map_err(err)?;
    ensure!(
        loaded.diagnostics.is_empty(),
        "diagnostics on a clean log: {:?}",
        loaded.diagnostics
    );
    let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
    ensure!(
        seqs == (1..=30).collect::<Vec<_>>(),
        "sequence numbers {seqs:?}"
    );
    ensure!(
        loaded.into_entries() == expected,
        "loaded entries differ from the appended ones"
    );
    let from = store.load_from(&id, 25).await.map_err(err)?;
    ensure!(
        from.entries.first().map(|e| e.seq) == Some(25) && from.entries.len() == 6,
        "load_from(25) gave {} entries starting at {:?}",
        from.entries.len(),
        from.entries.first().map(|e| e.seq)
    );
    let past = store.load_from(&id, 31).await.map_err(err)?;
    ensure!(
        past.entries.is_empty(),
        "load_from past the end gave entries"
    );
    Ok(())
}

async fn sequence_conflicts<S: ConversationStore>(store: &S) -> CheckResult {
    let id = cid("conflicts")?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    match store.create(&id, NewConversation::default()).await {
        Err(StorageError::AlreadyExists { id: got }) if got == "conflicts" => {}
        other => return Err(format!("second create gave {other:?}")),
    }
    let e = text_entry("a", LogRole::User, "x");
    ensure!(
        store.append(&id, &e, Some(0)).await.map_err(err)? == 1,
        "first append not 1"
    );
    match store.append(&id, &e, Some(0)).await {
        Err(StorageError::SequenceConflict {
            expected: 0,
            actual: 1,
            ..
        }) => {}
        other => return Err(format!("stale expect_last gave {other:?}")),
    }
    match store.append(&id, &e, Some(5)).await {
        Err(StorageError::SequenceConflict {
            expected: 5,
            actual: 1,
            ..
        }) => {}
        other => return Err(format!("future expect_last gave {other:?}")),
    }
    ensure!(
        store.append(&id, &e, Some(1)).await.map_err(err)? == 2,
        "append after 1 not 2"
    );
    let missing = cid("missing")?;
    match store.append(&missing, &e, None).await {
        Err(StorageError::NotFound { id }) if id == "missing" => {}
        other => return Err(format!("append to a missing conversation gave {other:?}")),
    }
    match store.load(&missing).await {
        Err(StorageError::NotFound { .. }) => {}
        other => return Err(format!("load of a missing conversation gave {other:?}")),
    }
    // Racing writers that all saw the same state: exactly one wins.
    let race = cid("race")?;
    store
        .create(&race, NewConversation::default())
        .await
        .map_err(err)?;
    let race = &race;
    let attempts = (0..8).map(|i| {
        let e = text_entry(&format!("r{i}"), LogRole::User, "race");
        async move { store.append(race, &e, Some(0)).await }
    });
    let results = futures_join_all(attempts).await;
    let wins = results.iter().filter(|r| r.is_ok()).count();
    ensure!(
        wins == 1,
        "{wins} of 8 racing appends with expect_last 0 succeeded"
    );
    ensure!(
        results
            .iter()
            .all(|r| matches!(r, Ok(1) | Err(StorageError::SequenceConflict { .. }))),
        "racing appends gave {results:?}"
    );
    Ok(())
}

async fn futures_join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    // Polled together through a local set of tasks would need 'static; a simple join loop
    // still interleaves them at every await point of the store.
    let mut pending: Vec<_> = futures.into_iter().map(Some).collect();
    let results = std::sync::Mutex::new(Vec::new());
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(fut) = slot {
                match fut.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        if let Ok(mut r) = results.lock() {
                            r.push((i, v));
                        }
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    let mut results = results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    results.sort_by_key(|(i, _)| *i);
    out.extend(results.into_iter().map(|(_, v)| v));
    out
}

async fn concurrent_appenders<S: ConversationStore + 'static>(store: &Arc<S>) -> CheckResult {
    const CONVS: usize = 6;
    const TASKS: usize = 8;
    const EACH: usize = 12;
    for c in 0..CONVS {
        store
            .create(&cid(&format!("conc{c}"))?, NewConversation::default())
            .await
            .map_err(err)?;
    }
    let mut handles = Vec::new();
    for c in 0..CONVS {
        for t in 0..TASKS {
            let store = store.clone();
            let id = cid(&format!("conc{c}"))?;
            handles.push(tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..EACH {
                    let e = text_entry(&format!("t{t}-{i}"), LogRole::User, &format!("{t}:{i}"));
                    seqs.push((e.id.clone(), store.append(&id, &e, None).await?));
                }
                Ok::<_, StorageError>(seqs)
            }));
        }
    }
    let mut acked = std::collections::HashMap::new();
    for (n, handle) in handles.into_iter().enumerate() {
        let seqs = handle.await.map_err(|e| e.to_string())?.map_err(err)?;
        for (entry_id, seq) in seqs {
            acked.insert((n / TASKS, entry_id), seq);
        }
    }
    for c in 0..CONVS {
        let loaded = store.load(&cid(&format!("conc{c}"))?).await.map_err(err)?;
        ensure!(
            loaded.entries.len() == TASKS * EACH,
            "conc{c} holds {} entries, expected {}",
            loaded.entries.len(),
            TASKS * EACH
        );
        let mut last_per_task = [None::<usize>; TASKS];
        for (pos, stored) in loaded.entries.iter().enumerate() {
            ensure!(
                stored.seq == pos as u64 + 1,
                "conc{c}: gap at position {pos}"
            );
            let Some(&seq) = acked.get(&(c, stored.entry.id.clone())) else {
                return Err(format!(
                    "conc{c}: entry {} was not appended here",
                    stored.entry.id
                ));
            };
            ensure!(
                seq == stored.seq,
                "conc{c}: {} acknowledged as {seq}, stored as {}",
                stored.entry.id,
                stored.seq
            );
            let mut parts = stored.entry.id[1..].split('-');
            let t: usize = parts
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(usize::MAX);
            let i: usize = parts
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(usize::MAX);
            let slot = last_per_task.get_mut(t).ok_or("bad task id")?;
            ensure!(
                slot.is_none_or(|prev| prev < i),
                "conc{c}: task {t} entries out of order"
            );
            *slot = Some(i);
        }
    }
    Ok(())
}

async fn paging<S: ConversationStore>(store: &S) -> CheckResult {
    let mut ids: Vec<String> = (0..23).map(|i| format!("page-{i:03}")).collect();
    for id in ids.iter().rev() {
        store
            .create(&cid(id)?, NewConversation::default())
            .await
            .map_err(err)?;
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut page = Page::first(7);
    let mut pages = 0;
    loop {
        let got = store.list(page.clone()).await.map_err(err)?;
        pages += 1;
        ensure!(
            got.items.len() <= 7,
            "page of {} items with limit 7",
            got.items.len()
        );
        seen.extend(got.items.into_iter().map(|m| m.id));
        match got.next {
            Some(next) => page.after = Some(next),
            None => break,
        }
        ensure!(pages < 10, "paging does not end");
    }
    ensure!(seen == ids, "pages gave {seen:?}");
    ensure!(pages == 4, "23 items in pages of 7 took {pages} pages");
    let all = store.list_all().await.map_err(err)?;
    ensure!(all.len() == 23, "list_all gave {}", all.len());
    Ok(())
}

async fn delete<S: ConversationStore>(store: &S) -> CheckResult {
    let id = cid("doomed")?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    store
        .append(&id, &text_entry("a", LogRole::User, "x"), None)
        .await
        .map_err(err)?;
    ensure!(
        store.delete(&id).await.map_err(err)?,
        "delete of an existing conversation said false"
    );
    ensure!(
        !store.delete(&id).await.map_err(err)?,
        "second delete said true"
    );
    ensure!(
        matches!(store.load(&id).await, Err(StorageError::NotFound { .. })),
        "load after delete did not say not found"
    );
    ensure!(
        matches!(
            store.metadata(&id).await,
            Err(StorageError::NotFound { .. })
        ),
        "metadata after delete did not say not found"
    );
    ensure!(
        store.list_all().await.map_err(err)?.is_empty(),
        "deleted conversation still listed"
    );
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    let seq = store
        .append(&id, &text_entry("b", LogRole::User, "y"), None)
        .await
        .map_err(err)?;
    ensure!(seq == 1, "a recreated conversation starts at {seq}");
    Ok(())
}

async fn retention<S: ConversationStore>(store: &S, clock: &ManualClock) -> CheckResult {
    let (old, fresh, touched) = (cid("old")?, cid("fresh")?, cid("touched")?);
    store
        .create(&old, NewConversation::default())
        .await
        .map_err(err)?;
    store
        .create(&touched, NewConversation::default())
        .await
        .map_err(err)?;
    clock.advance(10_000);
    store
        .create(&fresh, NewConversation::default())
        .await
        .map_err(err)?;
    store
        .append(&touched, &text_entry("t", LogRole::User, "x"), None)
        .await
        .map_err(err)?;
    let cutoff = clock_now(clock) - 5_000;
    let gone = store.delete_older_than(cutoff).await.map_err(err)?;
    ensure!(
        gone == vec!["old".to_owned()],
        "retention deleted {gone:?}, expected [old]"
    );
    let left: Vec<String> = store
        .list_all()
        .await
        .map_err(err)?
        .into_iter()
        .map(|m| m.id)
        .collect();
    ensure!(
        left == ["fresh", "touched"],
        "left after retention: {left:?}"
    );
    Ok(())
}

fn clock_now(clock: &ManualClock) -> i64 {
    crate::store::Clock::now_ms(clock)
}

async fn metadata<S: ConversationStore>(store: &S, clock: &ManualClock) -> CheckResult {
    let id = cid("meta")?;
    let created = store
        .create(
            &id,
            NewConversation {
                title: Some("Quarterly sales".to_owned()),
                mode: Some(Mode::Agent),
                parent: Some("root".to_owned()),
                owner: None,
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        created.created_ms == clock_now(clock),
        "created_ms {} not the clock",
        created.created_ms
    );
    ensure!(
        created.last_seq == 0,
        "new conversation has last_seq {}",
        created.last_seq
    );
    clock.advance(1_000);
    store
        .append(&id, &text_entry("a", LogRole::User, "x"), None)
        .await
        .map_err(err)?;
    clock.advance(1_000);
    let updated = store
        .update_metadata(
            &id,
            MetaUpdate {
                title: Some("Q3 sales".to_owned()),
                mode: Some(Mode::Run),
            },
        )
        .await
        .map_err(err)?;
    let meta = store.metadata(&id).await.map_err(err)?;
    ensure!(
        meta == updated,
        "metadata {meta:?} differs from the update's answer {updated:?}"
    );
    ensure!(
        meta.title.as_deref() == Some("Q3 sales"),
        "title {:?}",
        meta.title
    );
    ensure!(meta.mode == Some(Mode::Run), "mode {:?}", meta.mode);
    ensure!(
        meta.parent.as_deref() == Some("root"),
        "parent {:?}",
        meta.parent
    );
    ensure!(meta.last_seq == 1, "last_seq {}", meta.last_seq);
    ensure!(meta.created_ms == created.created_ms, "created_ms changed");
    ensure!(
        meta.updated_ms == clock_now(clock),
        "updated_ms {} not the clock",
        meta.updated_ms
    );
    clock.advance(1_000);
    store
        .append(&id, &text_entry("b", LogRole::User, "y"), None)
        .await
        .map_err(err)?;
    let meta = store.metadata(&id).await.map_err(err)?;
    ensure!(
        meta.updated_ms == clock_now(clock),
        "append did not move updated_ms"
    );
    ensure!(
        meta.last_seq == 2,
        "last_seq {} after two appends",
        meta.last_seq
    );
    Ok(())
}

async fn unicode_and_large<S: ConversationStore>(store: &S) -> CheckResult {
    let id = cid("unicode")?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    let texts = [
        "季度销售额增长了 12%。".to_owned(),
        "Привет, мир — مرحبا بالعالم — 안녕하세요".to_owned(),
        "emoji 👩‍👩‍👧‍👦 🇫🇷 and controls \u{0} \u{1b}[0m \u{2028}\u{2029} \r\n\t\"quoted\" \\".to_owned(),
        "x".repeat(10 * 1024 * 1024) + "\n末尾",
    ];
    let entries: Vec<LogEntry> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| text_entry(&format!("u{i}"), LogRole::User, t))
        .collect();
    for e in &entries {
        store.append(&id, e, None).await.map_err(err)?;
    }
    let loaded = store.load(&id).await.map_err(err)?;
    ensure!(
        loaded.diagnostics.is_empty(),
        "diagnostics {:?}",
        loaded.diagnostics
    );
    let got = loaded.into_entries();
    ensure!(got.len() == entries.len(), "{} entries back", got.len());
    for (a, b) in got.iter().zip(&entries) {
        ensure!(
            a == b,
            "entry {} changed on the way (len {} vs {})",
            b.id,
            a.text().len(),
            b.text().len()
        );
    }
    Ok(())
}

/// One entry of every kind the log can hold, as JSON lines.
pub const ENTRY_KINDS: &[&str] = &[
    r#"{"schema_version":1,"id":"s1","role":"system","created_at":"2026-01-01T00:00:00Z","content":"You are a business analyst."}"#,
    r#"{"schema_version":1,"id":"d1","role":"developer","created_at":"2026-01-01T00:00:00Z","content":"Answer in English."}"#,
    r#"{"schema_version":1,"id":"u1","role":"user","created_at":"2026-01-01T00:00:01Z","content":[{"type":"text","text":"Chart this","cache_control":{"type":"ephemeral"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}],"mode":"agent","run_id":"run-1","workflow_id":"wf-1","agent_id":"ag-1"}"#,
    r#"{"schema_version":1,"id":"a1","role":"assistant","created_at":"2026-01-01T00:00:02Z","content":[{"type":"thinking","thinking":"Need data.","signature":"c2ln"},{"type":"redacted_thinking","data":"cmVk"},{"type":"text","text":"Querying."},{"type":"future_block","payload":{"x":[1,2]}}],"tool_calls":[{"id":"call_1","type":"function","function":{"name":"query","arguments":"{\"sql\":\"select 1\"}"}},{"id":"call_2","type":"function","function":{"name":"chart","arguments":"{}"},"position":5,"anthropic":{"cache_control":{"type":"ephemeral"}}}]}"#,
    r#"{"schema_version":1,"id":"t1","role":"tool","created_at":"2026-01-01T00:00:03Z","content":"1 row","tool_call_id":"call_1","tool_name":"query","duration_ms":42,"collapsed":true}"#,
    r#"{"schema_version":1,"id":"t2","role":"tool","created_at":"2026-01-01T00:00:03Z","content":[{"type":"text","text":"boom"}],"tool_call_id":"call_2","is_error":true,"merge_with_previous":true}"#,
    r#"{"schema_version":1,"id":"w1","role":"assistant","created_at":"2026-01-01T00:00:04Z","content":"chart ready","widget":{"kind":"chart","spec":{"bars":[1,2,3]}},"part_type":"widget","include_in_context":false}"#,
    r#"{"schema_version":1,"id":"e1","role":"assistant","created_at":"2026-01-01T00:00:05Z","content":"partial","llm_error":{"kind":"stream_cut","message":"connection reset","partial_output":"partial"}}"#,
    r#"{"schema_version":1,"id":"o1","role":"assistant","created_at":"2026-01-01T00:00:06Z","content":null,"name":"bot","openai":{"refusal":"no"},"anthropic":{"stop_reason":"end_turn"},"future_field":{"kept":true}}"#,
    r#"{"id":"v0","role":"user","createdAt":"2026-01-01T00:00:07Z","content":"from the seed","isCollapsed":false,"duration":12.6}"#,
];

async fn entry_kinds_round_trip<S: ConversationStore>(store: &S) -> CheckResult {
    let id = cid("kinds")?;
    store
        .create(&id, NewConversation::default())
        .await
        .map_err(err)?;
    let mut entries = Vec::new();
    for line in ENTRY_KINDS {
        entries.push(LogEntry::from_json(line).map_err(|e| format!("fixture entry: {e}"))?);
    }
    store
        .append_batch(&id, &entries[..3], None)
        .await
        .map_err(err)?;
    for e in &entries[3..] {
        store.append(&id, e, None).await.map_err(err)?;
    }
    let got = store.load(&id).await.map_err(err)?.into_entries();
    ensure!(
        got.len() == entries.len(),
        "{} of {} entries back",
        got.len(),
        entries.len()
    );
    for (a, b) in got.iter().zip(&entries) {
        ensure!(a == b, "entry {} changed: {a:?} vs {b:?}", b.id);
    }
    Ok(())
}
