//! The conformance checks of owners and of the people of a store ([`crate::Directory`]):
//! users, tokens, shares and spend.

use std::sync::Arc;

use ba_protocol::LogRole;

use super::{CheckResult, cid, err, text_entry};
use crate::error::StorageError;
use crate::people::{Access, DEFAULT_OWNER, Directory, Role, Spend, UserBudget};
use crate::store::{ConversationStore, ListPage, NewConversation, Page};

fn directory<S: ConversationStore>(store: &S) -> std::result::Result<Arc<dyn Directory>, String> {
    store
        .directory()
        .ok_or_else(|| "the store has no directory of people".to_owned())
}

fn owned_by(owner: &str) -> NewConversation {
    NewConversation {
        owner: Some(owner.to_owned()),
        ..NewConversation::default()
    }
}

fn ids(page: &ListPage) -> Vec<String> {
    page.items.iter().map(|m| m.id.clone()).collect()
}

/// Every page of `list`, following `next`, at `limit` a page; fails on a page over the limit
/// or a `next` that does not move on.
async fn all_pages<F, Fut>(limit: usize, mut list: F) -> std::result::Result<Vec<String>, String>
where
    F: FnMut(Page) -> Fut,
    Fut: Future<Output = crate::error::Result<ListPage>>,
{
    let mut page = Page::first(limit);
    let mut out = Vec::new();
    for _ in 0..100 {
        let got = list(page.clone()).await.map_err(err)?;
        ensure!(
            got.items.len() <= limit,
            "a page of {limit} held {}",
            got.items.len()
        );
        out.extend(ids(&got));
        match got.next {
            Some(next) => {
                ensure!(
                    page.after.as_ref() != Some(&next),
                    "a page's next repeats its start `{next}`"
                );
                page.after = Some(next);
            }
            None => return Ok(out),
        }
    }
    Err("paging did not end after 100 pages".into())
}

/// A conversation's owner is the one it was created with, `owner` when none was given, a
/// fork's its own (not its parent's); a bad owner name is refused; `list_owned` and
/// `search_owned` page through one owner's conversations and never show another's.
pub(super) async fn owners<S: ConversationStore>(store: &S) -> CheckResult {
    let plain = cid("own-plain")?;
    let meta = store
        .create(&plain, NewConversation::default())
        .await
        .map_err(err)?;
    ensure!(
        meta.owner == DEFAULT_OWNER,
        "a conversation created without an owner belongs to `{}`",
        meta.owner
    );
    let bad = store.create(&cid("own-bad")?, owned_by("no one")).await;
    ensure!(
        matches!(bad, Err(StorageError::Invalid { .. })),
        "an owner named `no one` was taken: {bad:?}"
    );
    let mut ann = Vec::new();
    let mut bob = Vec::new();
    for i in 0..7 {
        let id = cid(&format!("own-{i:02}-ann"))?;
        let meta = store.create(&id, owned_by("ann")).await.map_err(err)?;
        ensure!(meta.owner == "ann", "created for ann: {meta:?}");
        let text = if i % 2 == 0 { "revenue by region" } else { "headcount" };
        store
            .append(&id, &text_entry("u", LogRole::User, text), None)
            .await
            .map_err(err)?;
        ann.push(id.to_string());
        if i < 5 {
            let id = cid(&format!("own-{i:02}-bob"))?;
            store.create(&id, owned_by("bob")).await.map_err(err)?;
            store
                .append(
                    &id,
                    &text_entry("u", LogRole::User, "revenue by region"),
                    None,
                )
                .await
                .map_err(err)?;
            bob.push(id.to_string());
        }
    }
    let read = store.metadata(&cid("own-03-ann")?).await.map_err(err)?;
    ensure!(read.owner == "ann", "the owner read back: {}", read.owner);
    let fork = cid("own-fork")?;
    let forked = store
        .fork(&cid("own-00-ann")?, 1, &fork, owned_by("bob"))
        .await
        .map_err(err)?;
    ensure!(
        forked.owner == "bob",
        "a fork made for bob of ann's conversation belongs to `{}`",
        forked.owner
    );
    bob.push(fork.to_string());
    bob.sort();
    for limit in [1, 3, 7, 50] {
        let got = all_pages(limit, |p| store.list_owned("ann", p)).await?;
        ensure!(got == ann, "ann's conversations {limit} a page: {got:?}");
        let got = all_pages(limit, |p| store.list_owned("bob", p)).await?;
        ensure!(got == bob, "bob's conversations {limit} a page: {got:?}");
    }
    let got = all_pages(2, |p| store.list_owned(DEFAULT_OWNER, p)).await?;
    ensure!(
        got == ["own-plain"],
        "the default owner's conversations: {got:?}"
    );
    let none = store
        .list_owned("carol", Page::first(10))
        .await
        .map_err(err)?;
    ensure!(
        none.items.is_empty() && none.next.is_none(),
        "carol owns nothing, yet: {:?}",
        ids(&none)
    );
    let wanted: Vec<String> = ann.iter().step_by(2).cloned().collect();
    for limit in [1, 2, 10] {
        let got = all_pages(limit, |p| store.search_owned("ann", "REVENUE", p)).await?;
        ensure!(
            got == wanted,
            "ann's conversations about revenue, {limit} a page: {got:?}"
        );
    }
    let got = all_pages(10, |p| store.search_owned("bob", "headcount", p)).await?;
    ensure!(got.is_empty(), "bob's conversations about headcount: {got:?}");
    let everyone = store
        .search("revenue", Page::first(50))
        .await
        .map_err(err)?;
    ensure!(
        everyone.items.len() == wanted.len() + 5,
        "a search of every owner found {:?}",
        ids(&everyone)
    );
    Ok(())
}

/// Users are added once each, read back, listed by name, changed; bad names and unknown
/// users are refused with errors that say so.
pub(super) async fn users<S: ConversationStore>(store: &S) -> CheckResult {
    let dir = directory(store)?;
    ensure!(
        dir.users().await.map_err(err)?.is_empty(),
        "a new store has users"
    );
    let zoe = dir.add_user("zoe", Role::Viewer).await.map_err(err)?;
    ensure!(
        zoe.name == "zoe" && zoe.role == Role::Viewer && zoe.budget == UserBudget::default(),
        "added zoe: {zoe:?}"
    );
    dir.add_user("ann.lee@example.com", Role::Admin)
        .await
        .map_err(err)?;
    dir.add_user("bob", Role::Analyst).await.map_err(err)?;
    match dir.add_user("bob", Role::Admin).await {
        Err(StorageError::UserExists { name }) if name == "bob" => {}
        other => return Err(format!("a second bob gave {other:?}")),
    }
    for bad in ["", ".bob", "bob smith", "bob/../x", &"b".repeat(65)] {
        let got = dir.add_user(bad, Role::Viewer).await;
        ensure!(
            matches!(got, Err(StorageError::Invalid { .. })),
            "the user name {bad:?} was taken: {got:?}"
        );
    }
    let names: Vec<String> = dir
        .users()
        .await
        .map_err(err)?
        .into_iter()
        .map(|u| u.name)
        .collect();
    ensure!(
        names == ["ann.lee@example.com", "bob", "zoe"],
        "users by name: {names:?}"
    );
    let bob = dir.user("bob").await.map_err(err)?;
    ensure!(
        bob.as_ref().is_some_and(|u| u.role == Role::Analyst),
        "bob read back: {bob:?}"
    );
    ensure!(
        dir.user("carol").await.map_err(err)?.is_none(),
        "an unknown user was found"
    );
    let bob = dir.set_role("bob", Role::Admin).await.map_err(err)?;
    ensure!(bob.role == Role::Admin, "bob's new role: {bob:?}");
    let budget = UserBudget {
        month_usd: Some(12.5),
        month_tokens: Some(2_000_000),
    };
    dir.set_budget("bob", budget.clone()).await.map_err(err)?;
    let bob = dir.user("bob").await.map_err(err)?;
    ensure!(
        bob.as_ref()
            .is_some_and(|u| u.budget == budget && u.role == Role::Admin),
        "bob's budget read back: {bob:?}"
    );
    let negative = UserBudget {
        month_usd: Some(-1.0),
        month_tokens: None,
    };
    ensure!(
        matches!(
            dir.set_budget("bob", negative).await,
            Err(StorageError::Invalid { .. })
        ),
        "a negative budget was taken"
    );
    for got in [
        dir.set_role("carol", Role::Admin).await,
        dir.set_budget("carol", UserBudget::default()).await,
    ] {
        match got {
            Err(StorageError::NoUser { name }) if name == "carol" => {}
            other => return Err(format!("changing an unknown user gave {other:?}")),
        }
    }
    Ok(())
}

/// Tokens are unique 256-bit secrets, several per user; each lets its user in until revoked,
/// one at a time or all of a user's at once; anything else lets nobody in.
pub(super) async fn tokens<S: ConversationStore>(store: &S) -> CheckResult {
    let dir = directory(store)?;
    dir.add_user("ann", Role::Analyst).await.map_err(err)?;
    dir.add_user("bob", Role::Viewer).await.map_err(err)?;
    let mut issued = Vec::new();
    for _ in 0..3 {
        issued.push(dir.issue_token("ann").await.map_err(err)?);
    }
    let bobs = dir.issue_token("bob").await.map_err(err)?;
    let mut secrets: Vec<&str> = issued.iter().map(|t| t.secret.as_str()).collect();
    secrets.push(&bobs.secret);
    let mut ids: Vec<&str> = issued.iter().map(|t| t.info.id.as_str()).collect();
    ids.push(&bobs.info.id);
    for secret in &secrets {
        ensure!(
            secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()),
            "a secret is not 64 hex characters: {} characters",
            secret.len()
        );
    }
    for id in &ids {
        ensure!(
            id.len() == 20 && id.starts_with("tok_"),
            "a token id is not tok_ and 16 hex characters: {id}"
        );
    }
    secrets.sort_unstable();
    secrets.dedup();
    ids.sort_unstable();
    ids.dedup();
    ensure!(
        secrets.len() == 4 && ids.len() == 4,
        "four tokens issued, {} distinct secrets and {} distinct ids",
        secrets.len(),
        ids.len()
    );
    ensure!(
        issued.iter().all(|t| t.info.user == "ann") && bobs.info.user == "bob",
        "tokens name the wrong users"
    );
    for t in &issued {
        let who = dir.authenticate(&t.secret).await.map_err(err)?;
        ensure!(
            who.as_ref().is_some_and(|u| u.name == "ann"),
            "ann's token let in {who:?}"
        );
    }
    let who = dir.authenticate(&bobs.secret).await.map_err(err)?;
    ensure!(
        who.as_ref().is_some_and(|u| u.name == "bob"),
        "bob's token let in {who:?}"
    );
    let listed: Vec<String> = dir
        .tokens("ann")
        .await
        .map_err(err)?
        .into_iter()
        .map(|t| t.id)
        .collect();
    let mut expected: Vec<String> = issued.iter().map(|t| t.info.id.clone()).collect();
    expected.sort();
    ensure!(listed == expected, "ann's tokens: {listed:?}");
    let near = {
        let mut s = issued[0].secret.clone().into_bytes();
        s[63] = if s[63] == b'0' { b'1' } else { b'0' };
        String::from_utf8(s).map_err(|e| e.to_string())?
    };
    for wrong in ["", "not a token", &near, &"0".repeat(64), &issued[0].info.id] {
        ensure!(
            dir.authenticate(wrong).await.map_err(err)?.is_none(),
            "the secret {wrong:?} let someone in"
        );
    }
    ensure!(
        dir.revoke_token(&issued[1].info.id).await.map_err(err)?,
        "revoking a live token said there was none"
    );
    ensure!(
        !dir.revoke_token(&issued[1].info.id).await.map_err(err)?,
        "revoking a token twice found it the second time"
    );
    ensure!(
        !dir.revoke_token("tok_0000000000000000").await.map_err(err)?
            && !dir.revoke_token("garbage").await.map_err(err)?,
        "revoking an unknown token found one"
    );
    ensure!(
        dir.authenticate(&issued[1].secret)
            .await
            .map_err(err)?
            .is_none(),
        "a revoked token still lets its user in"
    );
    for t in [&issued[0], &issued[2]] {
        ensure!(
            dir.authenticate(&t.secret).await.map_err(err)?.is_some(),
            "revoking one token of ann's revoked another"
        );
    }
    ensure!(
        dir.tokens("ann").await.map_err(err)?.len() == 2,
        "ann should have two tokens left"
    );
    let gone = dir.revoke_user_tokens("ann").await.map_err(err)?;
    ensure!(gone == 2, "revoking all of ann's tokens revoked {gone}");
    for t in &issued {
        ensure!(
            dir.authenticate(&t.secret).await.map_err(err)?.is_none(),
            "a token of ann's works after all were revoked"
        );
    }
    ensure!(
        dir.authenticate(&bobs.secret).await.map_err(err)?.is_some(),
        "revoking ann's tokens revoked bob's"
    );
    ensure!(
        dir.tokens("ann").await.map_err(err)?.is_empty()
            && dir.tokens("carol").await.map_err(err)?.is_empty(),
        "tokens listed for a user who has none"
    );
    match dir.issue_token("carol").await {
        Err(StorageError::NoUser { name }) if name == "carol" => {}
        other => return Err(format!("a token for an unknown user gave {other:?}")),
    }
    Ok(())
}

/// A share names one conversation and one user; sharing again replaces it; shares are listed
/// by conversation and by user, taken back, and go with their conversation.
pub(super) async fn shares<S: ConversationStore>(store: &S) -> CheckResult {
    let dir = directory(store)?;
    for name in ["ann", "bob", "cy"] {
        dir.add_user(name, Role::Viewer).await.map_err(err)?;
    }
    let (a, b) = (cid("share-a")?, cid("share-b")?);
    for id in [&a, &b] {
        store.create(id, owned_by("ann")).await.map_err(err)?;
    }
    let first = dir.share(&a, "bob", Access::Read).await.map_err(err)?;
    ensure!(
        first.conversation == "share-a" && first.user == "bob" && first.access == Access::Read,
        "the share made: {first:?}"
    );
    dir.share(&a, "bob", Access::Read).await.map_err(err)?;
    dir.share(&a, "cy", Access::Read).await.map_err(err)?;
    dir.share(&b, "bob", Access::Read).await.map_err(err)?;
    let on_a: Vec<String> = dir
        .shares(&a)
        .await
        .map_err(err)?
        .into_iter()
        .map(|s| s.user)
        .collect();
    ensure!(
        on_a == ["bob", "cy"],
        "a share made twice is one share; share-a's: {on_a:?}"
    );
    let bobs: Vec<String> = dir
        .shared_with("bob")
        .await
        .map_err(err)?
        .into_iter()
        .map(|s| s.conversation)
        .collect();
    ensure!(bobs == ["share-a", "share-b"], "shared with bob: {bobs:?}");
    ensure!(
        dir.shared_with("ann").await.map_err(err)?.is_empty(),
        "nothing was shared with ann"
    );
    match dir.share(&a, "dan", Access::Read).await {
        Err(StorageError::NoUser { name }) if name == "dan" => {}
        other => return Err(format!("sharing with an unknown user gave {other:?}")),
    }
    match dir.share(&cid("share-missing")?, "bob", Access::Read).await {
        Err(StorageError::NotFound { id }) if id == "share-missing" => {}
        other => return Err(format!("sharing a missing conversation gave {other:?}")),
    }
    ensure!(
        dir.unshare(&a, "cy").await.map_err(err)?,
        "taking back cy's share said there was none"
    );
    ensure!(
        !dir.unshare(&a, "cy").await.map_err(err)?,
        "taking back a share twice found it the second time"
    );
    let on_a = dir.shares(&a).await.map_err(err)?;
    ensure!(
        on_a.len() == 1 && on_a[0].user == "bob",
        "share-a's after cy's was taken back: {on_a:?}"
    );
    store.delete(&a).await.map_err(err)?;
    let bobs: Vec<String> = dir
        .shared_with("bob")
        .await
        .map_err(err)?
        .into_iter()
        .map(|s| s.conversation)
        .collect();
    ensure!(
        bobs == ["share-b"],
        "a deleted conversation's share is still there: {bobs:?}"
    );
    ensure!(
        dir.shares(&a).await.map_err(err)?.is_empty(),
        "a deleted conversation still has shares"
    );
    // The same id made again is a new conversation, shared with nobody.
    store.create(&a, owned_by("bob")).await.map_err(err)?;
    ensure!(
        dir.shares(&a).await.map_err(err)?.is_empty(),
        "a conversation made again under a deleted one's id inherited its shares"
    );
    Ok(())
}

/// Spend adds up per user and month, from many tasks at once without losing one; it is zero
/// where nothing was spent; a negative amount or a malformed month is refused.
pub(super) async fn spend<S: ConversationStore>(store: &S) -> CheckResult {
    const ADDS: u64 = 50;
    let dir = directory(store)?;
    let zero = dir.spend("ann", "2026-11").await.map_err(err)?;
    ensure!(zero == Spend::default(), "spend before any: {zero:?}");
    let mut tasks = Vec::new();
    for i in 0..ADDS {
        let dir = dir.clone();
        // Half for a user with no account: the single user of a server without accounts.
        let user = if i % 2 == 0 { "ann" } else { DEFAULT_OWNER };
        tasks.push(tokio::spawn(async move {
            dir.add_spend(
                user,
                "2026-11",
                Spend {
                    usd: 0.25,
                    tokens: 1000,
                },
            )
            .await
        }));
    }
    let mut totals = Vec::new();
    for task in tasks {
        totals.push(task.await.map_err(|e| e.to_string())?.map_err(err)?);
    }
    let half = ADDS / 2;
    let ann = dir.spend("ann", "2026-11").await.map_err(err)?;
    let expected = Spend {
        usd: 0.25 * half as f64,
        tokens: 1000 * half,
    };
    ensure!(
        ann == expected,
        "{half} concurrent adds of $0.25 and 1000 tokens gave {ann:?}"
    );
    let owner = dir.spend(DEFAULT_OWNER, "2026-11").await.map_err(err)?;
    ensure!(owner == expected, "the default owner's spend: {owner:?}");
    let mut seen: Vec<u64> = totals.iter().map(|t| t.tokens).collect();
    seen.sort_unstable();
    seen.dedup();
    ensure!(
        seen.len() as u64 == half,
        "each add returns the total after it: {} distinct totals from {ADDS} adds",
        seen.len()
    );
    let december = dir
        .add_spend(
            "ann",
            "2026-12",
            Spend {
                usd: 1.5,
                tokens: 7,
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        december
            == Spend {
                usd: 1.5,
                tokens: 7
            },
        "a new month starts from zero: {december:?}"
    );
    ensure!(
        dir.spend("ann", "2026-11").await.map_err(err)? == expected,
        "adding to December changed November"
    );
    let negative = Spend {
        usd: -0.5,
        tokens: 0,
    };
    ensure!(
        matches!(
            dir.add_spend("ann", "2026-11", negative).await,
            Err(StorageError::Invalid { .. })
        ),
        "a negative amount was added"
    );
    ensure!(
        matches!(
            dir.add_spend("ann", "November", Spend::default()).await,
            Err(StorageError::Invalid { .. })
        ),
        "a malformed month was taken"
    );
    Ok(())
}
