//! The people of a [`PostgresStore`](super::PostgresStore): `ba_users`, `ba_tokens` (the
//! SHA-256 of each secret, unique, so a presented token is found by its hash), `ba_shares`
//! (gone with their conversation by its foreign key) and `ba_spend`, to which every server
//! adds in one statement.

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

use super::db;
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::people::{
    Access, Directory, IssuedToken, Role, Share, Spend, TokenInfo, User, UserBudget, check_month,
    check_user_name, is_token_id, new_token, presented_hash, same_hash,
};
use crate::store::SharedClock;

const USER_COLUMNS: &str = "name, role, created_ms, month_usd, month_tokens";
const SHARE_COLUMNS: &str = "conversation_id, user_name, access, created_ms";

/// The [`Directory`] of a [`PostgresStore`](super::PostgresStore). Cheap to clone.
#[derive(Clone)]
pub(super) struct PgDirectory {
    pool: Pool,
    clock: SharedClock,
}

impl std::fmt::Debug for PgDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDirectory").finish_non_exhaustive()
    }
}

fn user_of(row: &Row) -> Result<User> {
    let name: String = row.get("name");
    let role = row
        .get::<_, String>("role")
        .parse::<Role>()
        .map_err(|e| StorageError::Format {
            what: format!("user `{name}`"),
            message: e.to_string(),
        })?;
    Ok(User {
        role,
        created_ms: row.get("created_ms"),
        budget: UserBudget {
            month_usd: row.get("month_usd"),
            month_tokens: row
                .get::<_, Option<i64>>("month_tokens")
                .map(|n| u64::try_from(n).unwrap_or(0)),
        },
        name,
    })
}

fn share_of(row: &Row) -> Result<Share> {
    let conversation: String = row.get("conversation_id");
    let access = row
        .get::<_, String>("access")
        .parse::<Access>()
        .map_err(|e| StorageError::Format {
            what: format!("share of `{conversation}`"),
            message: e.to_string(),
        })?;
    Ok(Share {
        conversation,
        user: row.get("user_name"),
        access,
        created_ms: row.get("created_ms"),
    })
}

fn spend_of(row: &Row) -> Spend {
    Spend {
        usd: row.get("usd"),
        tokens: u64::try_from(row.get::<_, i64>("tokens")).unwrap_or(0),
    }
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl PgDirectory {
    pub(super) fn new(pool: Pool, clock: SharedClock) -> Self {
        Self { pool, clock }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(db)
    }

    async fn user_exists(&self, client: &deadpool_postgres::Object, name: &str) -> Result<bool> {
        Ok(client
            .query_opt("SELECT 1 FROM ba_users WHERE name = $1", &[&name])
            .await
            .map_err(db)?
            .is_some())
    }

    /// The user an `UPDATE … RETURNING` changed, or `NoUser`.
    fn changed_user(rows: &[Row], name: &str) -> Result<User> {
        match rows.first() {
            Some(row) => user_of(row),
            None => Err(StorageError::NoUser {
                name: name.to_owned(),
            }),
        }
    }

    fn shares_of(rows: &[Row]) -> Result<Vec<Share>> {
        rows.iter().map(share_of).collect()
    }
}

#[async_trait]
impl Directory for PgDirectory {
    async fn add_user(&self, name: &str, role: Role) -> Result<User> {
        check_user_name(name)?;
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "INSERT INTO ba_users (name, role, created_ms) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO NOTHING RETURNING {USER_COLUMNS}"
                ),
                &[&name, &role.as_str(), &self.clock.now_ms()],
            )
            .await
            .map_err(db)?;
        match rows.first() {
            Some(row) => user_of(row),
            None => Err(StorageError::UserExists {
                name: name.to_owned(),
            }),
        }
    }

    async fn user(&self, name: &str) -> Result<Option<User>> {
        let client = self.client().await?;
        client
            .query_opt(
                &format!("SELECT {USER_COLUMNS} FROM ba_users WHERE name = $1"),
                &[&name],
            )
            .await
            .map_err(db)?
            .as_ref()
            .map(user_of)
            .transpose()
    }

    async fn users(&self) -> Result<Vec<User>> {
        let client = self.client().await?;
        client
            .query(
                &format!("SELECT {USER_COLUMNS} FROM ba_users ORDER BY name COLLATE \"C\""),
                &[],
            )
            .await
            .map_err(db)?
            .iter()
            .map(user_of)
            .collect()
    }

    async fn set_role(&self, name: &str, role: Role) -> Result<User> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("UPDATE ba_users SET role = $2 WHERE name = $1 RETURNING {USER_COLUMNS}"),
                &[&name, &role.as_str()],
            )
            .await
            .map_err(db)?;
        Self::changed_user(&rows, name)
    }

    async fn set_budget(&self, name: &str, budget: UserBudget) -> Result<User> {
        budget.check(name)?;
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "UPDATE ba_users SET month_usd = $2, month_tokens = $3 WHERE name = $1
                     RETURNING {USER_COLUMNS}"
                ),
                &[
                    &name,
                    &budget.month_usd,
                    &budget.month_tokens.map(saturating_i64),
                ],
            )
            .await
            .map_err(db)?;
        Self::changed_user(&rows, name)
    }

    async fn issue_token(&self, user: &str) -> Result<IssuedToken> {
        let (issued, hash) = new_token(user, self.clock.now_ms());
        let client = self.client().await?;
        let n = client
            .execute(
                "INSERT INTO ba_tokens (id, user_name, sha256, created_ms)
                 SELECT $1, name, $3, $4 FROM ba_users WHERE name = $2",
                &[
                    &issued.info.id,
                    &user,
                    &hash.as_slice(),
                    &issued.info.created_ms,
                ],
            )
            .await
            .map_err(db)?;
        if n == 0 {
            return Err(StorageError::NoUser {
                name: user.to_owned(),
            });
        }
        Ok(issued)
    }

    async fn tokens(&self, user: &str) -> Result<Vec<TokenInfo>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, user_name, created_ms FROM ba_tokens WHERE user_name = $1
                 ORDER BY created_ms, id COLLATE \"C\"",
                &[&user],
            )
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| TokenInfo {
                id: r.get(0),
                user: r.get(1),
                created_ms: r.get(2),
            })
            .collect())
    }

    async fn revoke_token(&self, token_id: &str) -> Result<bool> {
        if !is_token_id(token_id) {
            return Ok(false);
        }
        let client = self.client().await?;
        let n = client
            .execute("DELETE FROM ba_tokens WHERE id = $1", &[&token_id])
            .await
            .map_err(db)?;
        Ok(n > 0)
    }

    async fn revoke_user_tokens(&self, user: &str) -> Result<usize> {
        let client = self.client().await?;
        let n = client
            .execute("DELETE FROM ba_tokens WHERE user_name = $1", &[&user])
            .await
            .map_err(db)?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Found by its hash (an index lookup reveals nothing of a secret, only of its hash), then
    /// compared again in constant time.
    async fn authenticate(&self, secret: &str) -> Result<Option<User>> {
        let Some(hash) = presented_hash(secret) else {
            return Ok(None);
        };
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT t.sha256, u.name, u.role, u.created_ms, u.month_usd, u.month_tokens
                 FROM ba_tokens t JOIN ba_users u ON u.name = t.user_name
                 WHERE t.sha256 = $1",
                &[&hash.as_slice()],
            )
            .await
            .map_err(db)?;
        match row {
            Some(row) if same_hash(row.get::<_, &[u8]>("sha256"), &hash) => {
                Ok(Some(user_of(&row)?))
            }
            _ => Ok(None),
        }
    }

    async fn share(
        &self,
        conversation: &ConversationId,
        user: &str,
        access: Access,
    ) -> Result<Share> {
        check_user_name(user)?;
        let client = self.client().await?;
        let inserted = client
            .query(
                &format!(
                    "INSERT INTO ba_shares (conversation_id, user_name, access, created_ms)
                     SELECT c.id, u.name, $3, $4 FROM ba_conversations c, ba_users u
                     WHERE c.id = $1 AND u.name = $2
                     ON CONFLICT (conversation_id, user_name)
                     DO UPDATE SET access = EXCLUDED.access, created_ms = EXCLUDED.created_ms
                     RETURNING {SHARE_COLUMNS}"
                ),
                &[
                    &conversation.as_str(),
                    &user,
                    &access.as_str(),
                    &self.clock.now_ms(),
                ],
            )
            .await;
        let rows = match inserted {
            Ok(rows) => rows,
            // The conversation was deleted between the select and the insert.
            Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => Vec::new(),
            Err(e) => return Err(db(e)),
        };
        if let Some(row) = rows.first() {
            return share_of(row);
        }
        if !self.user_exists(&client, user).await? {
            return Err(StorageError::NoUser {
                name: user.to_owned(),
            });
        }
        Err(StorageError::NotFound {
            id: conversation.to_string(),
        })
    }

    async fn unshare(&self, conversation: &ConversationId, user: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM ba_shares WHERE conversation_id = $1 AND user_name = $2",
                &[&conversation.as_str(), &user],
            )
            .await
            .map_err(db)?;
        Ok(n > 0)
    }

    async fn shares(&self, conversation: &ConversationId) -> Result<Vec<Share>> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SHARE_COLUMNS} FROM ba_shares WHERE conversation_id = $1
                     ORDER BY user_name COLLATE \"C\""
                ),
                &[&conversation.as_str()],
            )
            .await
            .map_err(db)?;
        Self::shares_of(&rows)
    }

    async fn shared_with(&self, user: &str) -> Result<Vec<Share>> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {SHARE_COLUMNS} FROM ba_shares WHERE user_name = $1
                     ORDER BY conversation_id COLLATE \"C\""
                ),
                &[&user],
            )
            .await
            .map_err(db)?;
        Self::shares_of(&rows)
    }

    /// One statement: the row is locked by the conflict, so concurrent adds queue on it.
    async fn add_spend(&self, user: &str, month: &str, spend: Spend) -> Result<Spend> {
        check_user_name(user)?;
        check_month(month)?;
        spend.check(user)?;
        let client = self.client().await?;
        let row = client
            .query_one(
                "INSERT INTO ba_spend (user_name, month, usd, tokens) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (user_name, month) DO UPDATE
                 SET usd = ba_spend.usd + EXCLUDED.usd,
                     tokens = LEAST(ba_spend.tokens::NUMERIC + EXCLUDED.tokens,
                                    9223372036854775807)::BIGINT
                 RETURNING usd, tokens",
                &[&user, &month, &spend.usd, &saturating_i64(spend.tokens)],
            )
            .await
            .map_err(db)?;
        Ok(spend_of(&row))
    }

    async fn spend(&self, user: &str, month: &str) -> Result<Spend> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT usd, tokens FROM ba_spend WHERE user_name = $1 AND month = $2",
                &[&user, &month],
            )
            .await
            .map_err(db)?;
        Ok(row.as_ref().map(spend_of).unwrap_or_default())
    }
}
