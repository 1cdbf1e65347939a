//! The people of a [`FileStore`](super::FileStore): four JSON files under `<root>/people/`
//! (`users.json`, `tokens.json` with SHA-256 hashes only, `shares.json`, `spend.json`), each
//! replaced atomically. Every change reads, changes and writes its file under an exclusive
//! `flock` on `people/people.lock`, so a command adding a user while a server runs beside it
//! (or two servers on one folder adding spend) loses nothing; reads take no lock, since a
//! reader sees the old file or the new one.

use std::fs::File;
use std::io::{self, Read as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::blocking;
use super::lock::FileLock;
use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::people::{
    Access, Directory, IssuedToken, Role, Share, Spend, TokenInfo, User, UserBudget, check_month,
    check_user_name, is_token_id, new_token, presented_hash, same_hash,
};
use crate::store::SharedClock;

/// The largest people file read (a file past it is refused as damaged, not read whole).
const MAX_FILE_BYTES: u64 = 64 << 20;

const USERS: &str = "users.json";
const TOKENS: &str = "tokens.json";
const SHARES: &str = "shares.json";
const SPEND: &str = "spend.json";

/// A token as `tokens.json` keeps it: no secret, its SHA-256 in hex.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredToken {
    id: String,
    user: String,
    created_ms: i64,
    sha256: String,
}

/// One line of `spend.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SpendRow {
    user: String,
    month: String,
    usd: f64,
    tokens: u64,
}

/// The value of a JSON file; the type's default (no rows) when it does not exist. A file past
/// [`MAX_FILE_BYTES`] is refused as damaged, not read whole.
pub(super) fn read_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(T::default()),
        Err(e) => return Err(StorageError::io("opening", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| StorageError::io("reading", path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(StorageError::Format {
            what: path.display().to_string(),
            message: format!("larger than {MAX_FILE_BYTES} bytes"),
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
        what: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The rows of a JSON file ([`read_json`]).
pub(super) fn read_rows<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    read_json(path)
}

/// Replaces a JSON file with `rows`, atomically.
pub(super) fn write_rows<T: Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    write_json(path, rows)
}

/// Replaces a JSON file with `value`, atomically.
pub(super) fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| StorageError::Format {
        what: path.display().to_string(),
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

/// Runs `change` under an exclusive `flock` on `dir/lock_name` (creating `dir`, private to
/// the store's user), so processes sharing the folder change its files one at a time.
pub(super) fn locked_in<R>(
    dir: &Path,
    lock_name: &str,
    change: impl FnOnce() -> Result<R>,
) -> Result<R> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| StorageError::io("creating", dir, e))?;
    let path = dir.join(lock_name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StorageError::io("opening", &path, e))?;
    let _flock = FileLock::exclusive(&file, &path)?;
    change()
}

/// The [`Directory`] of a [`FileStore`](super::FileStore). Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct FileDirectory {
    /// `<root>/people`, created on the first change.
    dir: PathBuf,
    /// `<root>/conversations`: a share names a conversation that has a log there.
    conversations: PathBuf,
    /// `<root>/forks.lock`: a delete holds it while it removes a conversation and its shares,
    /// so a share made meanwhile either comes first (and is removed) or finds no conversation.
    forks_lock: PathBuf,
    clock: SharedClock,
}

impl FileDirectory {
    pub(super) fn new(root: &Path, clock: SharedClock) -> Self {
        Self {
            dir: root.join("people"),
            conversations: root.join("conversations"),
            forks_lock: root.join("forks.lock"),
            clock,
        }
    }

    fn read<T: DeserializeOwned>(&self, name: &str) -> Result<Vec<T>> {
        read_rows(&self.dir.join(name))
    }

    fn write<T: Serialize>(&self, name: &str, rows: &[T]) -> Result<()> {
        write_rows(&self.dir.join(name), rows)
    }

    /// Runs `change` under the exclusive lock of the people files (creating their folder,
    /// private to the store's user).
    fn locked<R>(&self, change: impl FnOnce(&Self) -> Result<R>) -> Result<R> {
        locked_in(&self.dir, "people.lock", || change(self))
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let this = self.clone();
        blocking(move || f(&this)).await
    }

    fn find_user(&self, name: &str) -> Result<Option<User>> {
        Ok(self
            .read::<User>(USERS)?
            .into_iter()
            .find(|u| u.name == name))
    }

    /// Changes user `name` with `change`; `NoUser` when there is none.
    fn change_user(&self, name: &str, change: impl FnOnce(&mut User)) -> Result<User> {
        self.locked(|d| {
            let mut users: Vec<User> = d.read(USERS)?;
            let user =
                users
                    .iter_mut()
                    .find(|u| u.name == name)
                    .ok_or_else(|| StorageError::NoUser {
                        name: name.to_owned(),
                    })?;
            change(user);
            let user = user.clone();
            d.write(USERS, &users)?;
            Ok(user)
        })
    }

    /// Removes the shares of a deleted conversation (its delete holds `forks.lock`).
    pub(super) fn forget_conversation(&self, id: &str) -> Result<()> {
        if !self.dir.join(SHARES).exists() {
            return Ok(());
        }
        self.locked(|d| {
            let mut shares: Vec<Share> = d.read(SHARES)?;
            let before = shares.len();
            shares.retain(|s| s.conversation != id);
            if shares.len() != before {
                d.write(SHARES, &shares)?;
            }
            Ok(())
        })
    }

    fn share_blocking(
        &self,
        conversation: &ConversationId,
        user: &str,
        access: Access,
    ) -> Result<Share> {
        if self.find_user(user)?.is_none() {
            return Err(StorageError::NoUser {
                name: user.to_owned(),
            });
        }
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.forks_lock)
            .map_err(|e| StorageError::io("opening", &self.forks_lock, e))?;
        let _forks = FileLock::shared(&lock_file, &self.forks_lock)?;
        if !self
            .conversations
            .join(format!("{conversation}.jsonl"))
            .exists()
        {
            return Err(StorageError::NotFound {
                id: conversation.to_string(),
            });
        }
        let share = Share {
            conversation: conversation.to_string(),
            user: user.to_owned(),
            access,
            created_ms: self.clock.now_ms(),
        };
        self.locked(|d| {
            let mut shares: Vec<Share> = d.read(SHARES)?;
            shares.retain(|s| !(s.conversation == share.conversation && s.user == share.user));
            shares.push(share.clone());
            shares.sort_by(|a, b| (&a.conversation, &a.user).cmp(&(&b.conversation, &b.user)));
            d.write(SHARES, &shares)
        })?;
        Ok(share)
    }
}

#[async_trait]
impl Directory for FileDirectory {
    async fn add_user(&self, name: &str, role: Role) -> Result<User> {
        check_user_name(name)?;
        let user = User {
            name: name.to_owned(),
            role,
            created_ms: self.clock.now_ms(),
            budget: UserBudget::default(),
        };
        self.run(move |d| {
            d.locked(|d| {
                let mut users: Vec<User> = d.read(USERS)?;
                if users.iter().any(|u| u.name == user.name) {
                    return Err(StorageError::UserExists { name: user.name });
                }
                users.push(user.clone());
                users.sort_by(|a, b| a.name.cmp(&b.name));
                d.write(USERS, &users)?;
                Ok(user)
            })
        })
        .await
    }

    async fn user(&self, name: &str) -> Result<Option<User>> {
        let name = name.to_owned();
        self.run(move |d| d.find_user(&name)).await
    }

    async fn users(&self) -> Result<Vec<User>> {
        self.run(|d| {
            let mut users: Vec<User> = d.read(USERS)?;
            users.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(users)
        })
        .await
    }

    async fn set_role(&self, name: &str, role: Role) -> Result<User> {
        let name = name.to_owned();
        self.run(move |d| d.change_user(&name, |u| u.role = role))
            .await
    }

    async fn set_budget(&self, name: &str, budget: UserBudget) -> Result<User> {
        budget.check(name)?;
        let name = name.to_owned();
        self.run(move |d| d.change_user(&name, |u| u.budget = budget))
            .await
    }

    async fn issue_token(&self, user: &str) -> Result<IssuedToken> {
        let user = user.to_owned();
        let created_ms = self.clock.now_ms();
        self.run(move |d| {
            d.locked(|d| {
                if d.find_user(&user)?.is_none() {
                    return Err(StorageError::NoUser { name: user });
                }
                let (issued, hash) = new_token(&user, created_ms);
                let mut tokens: Vec<StoredToken> = d.read(TOKENS)?;
                tokens.push(StoredToken {
                    id: issued.info.id.clone(),
                    user: user.clone(),
                    created_ms,
                    sha256: crate::workspace::hex(&hash),
                });
                d.write(TOKENS, &tokens)?;
                Ok(issued)
            })
        })
        .await
    }

    async fn tokens(&self, user: &str) -> Result<Vec<TokenInfo>> {
        let user = user.to_owned();
        self.run(move |d| {
            let mut mine: Vec<TokenInfo> = d
                .read::<StoredToken>(TOKENS)?
                .into_iter()
                .filter(|t| t.user == user)
                .map(|t| TokenInfo {
                    id: t.id,
                    user: t.user,
                    created_ms: t.created_ms,
                })
                .collect();
            mine.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            Ok(mine)
        })
        .await
    }

    async fn revoke_token(&self, token_id: &str) -> Result<bool> {
        if !is_token_id(token_id) {
            return Ok(false);
        }
        let token_id = token_id.to_owned();
        self.run(move |d| {
            d.locked(|d| {
                let mut tokens: Vec<StoredToken> = d.read(TOKENS)?;
                let before = tokens.len();
                tokens.retain(|t| t.id != token_id);
                if tokens.len() == before {
                    return Ok(false);
                }
                d.write(TOKENS, &tokens)?;
                Ok(true)
            })
        })
        .await
    }

    async fn revoke_user_tokens(&self, user: &str) -> Result<usize> {
        let user = user.to_owned();
        self.run(move |d| {
            d.locked(|d| {
                let mut tokens: Vec<StoredToken> = d.read(TOKENS)?;
                let before = tokens.len();
                tokens.retain(|t| t.user != user);
                let gone = before - tokens.len();
                if gone > 0 {
                    d.write(TOKENS, &tokens)?;
                }
                Ok(gone)
            })
        })
        .await
    }

    async fn authenticate(&self, secret: &str) -> Result<Option<User>> {
        let Some(hash) = presented_hash(secret) else {
            return Ok(None);
        };
        let hash = crate::workspace::hex(&hash);
        self.run(move |d| {
            // Every token is compared, a match or not, each in constant time.
            let mut owner = None;
            for token in d.read::<StoredToken>(TOKENS)? {
                if same_hash(token.sha256.as_bytes(), hash.as_bytes()) {
                    owner = Some(token.user);
                }
            }
            match owner {
                Some(name) => d.find_user(&name),
                None => Ok(None),
            }
        })
        .await
    }

    async fn share(
        &self,
        conversation: &ConversationId,
        user: &str,
        access: Access,
    ) -> Result<Share> {
        check_user_name(user)?;
        let (conversation, user) = (conversation.clone(), user.to_owned());
        self.run(move |d| d.share_blocking(&conversation, &user, access))
            .await
    }

    async fn unshare(&self, conversation: &ConversationId, user: &str) -> Result<bool> {
        let (conversation, user) = (conversation.to_string(), user.to_owned());
        self.run(move |d| {
            d.locked(|d| {
                let mut shares: Vec<Share> = d.read(SHARES)?;
                let before = shares.len();
                shares.retain(|s| !(s.conversation == conversation && s.user == user));
                if shares.len() == before {
                    return Ok(false);
                }
                d.write(SHARES, &shares)?;
                Ok(true)
            })
        })
        .await
    }

    async fn shares(&self, conversation: &ConversationId) -> Result<Vec<Share>> {
        let conversation = conversation.to_string();
        self.run(move |d| {
            let mut found: Vec<Share> = d
                .read::<Share>(SHARES)?
                .into_iter()
                .filter(|s| s.conversation == conversation)
                .collect();
            found.sort_by(|a, b| a.user.cmp(&b.user));
            Ok(found)
        })
        .await
    }

    async fn shared_with(&self, user: &str) -> Result<Vec<Share>> {
        let user = user.to_owned();
        self.run(move |d| {
            let mut found: Vec<Share> = d
                .read::<Share>(SHARES)?
                .into_iter()
                .filter(|s| s.user == user)
                .collect();
            found.sort_by(|a, b| a.conversation.cmp(&b.conversation));
            Ok(found)
        })
        .await
    }

    async fn add_spend(&self, user: &str, month: &str, spend: Spend) -> Result<Spend> {
        check_user_name(user)?;
        check_month(month)?;
        spend.check(user)?;
        let (user, month) = (user.to_owned(), month.to_owned());
        self.run(move |d| {
            d.locked(|d| {
                let mut rows: Vec<SpendRow> = d.read(SPEND)?;
                let total = match rows.iter_mut().find(|r| r.user == user && r.month == month) {
                    Some(row) => {
                        row.usd += spend.usd;
                        row.tokens = row.tokens.saturating_add(spend.tokens);
                        Spend {
                            usd: row.usd,
                            tokens: row.tokens,
                        }
                    }
                    None => {
                        rows.push(SpendRow {
                            user,
                            month,
                            usd: spend.usd,
                            tokens: spend.tokens,
                        });
                        spend
                    }
                };
                d.write(SPEND, &rows)?;
                Ok(total)
            })
        })
        .await
    }

    async fn spend(&self, user: &str, month: &str) -> Result<Spend> {
        let (user, month) = (user.to_owned(), month.to_owned());
        self.run(move |d| {
            Ok(d.read::<SpendRow>(SPEND)?
                .into_iter()
                .find(|r| r.user == user && r.month == month)
                .map(|r| Spend {
                    usd: r.usd,
                    tokens: r.tokens,
                })
                .unwrap_or_default())
        })
        .await
    }
}
