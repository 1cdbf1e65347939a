//! People: the users a store knows, their API tokens, the conversations shared with them and
//! what they spent, behind one [`Directory`] trait with a backend in each store.
//!
//! A token's secret is 256 bits from the operating system's generator, shown once as 64 hex
//! characters; a store keeps only its SHA-256, so a copy of the store's files or tables lets
//! nobody in. A token is looked up by that hash and the hashes are compared in constant time.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::error::{Result, StorageError};
use crate::id::ConversationId;

/// The name every conversation without a recorded owner belongs to (and the single user of
/// `serve --auth token`, and the CLI's default `--user`).
pub const DEFAULT_OWNER: &str = "owner";

/// The longest user name, in characters (all ASCII).
pub const MAX_USER_NAME: usize = 64;

/// What a user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything, including managing users.
    Admin,
    /// Their own conversations.
    Analyst,
    /// What is shared with them, read only.
    Viewer,
}

impl Role {
    /// Every role, most powerful first.
    pub const ALL: [Role; 3] = [Role::Admin, Role::Analyst, Role::Viewer];

    /// The role's name: `admin`, `analyst` or `viewer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Analyst => "analyst",
            Self::Viewer => "viewer",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = StorageError;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                StorageError::invalid(
                    format!("role `{}`", s.chars().take(40).collect::<String>()),
                    "a role is admin, analyst or viewer",
                )
            })
    }
}

/// A user's own caps; `None` leaves the configuration's in force.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UserBudget {
    /// Dollars a calendar month (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month_usd: Option<f64>,
    /// Model tokens a calendar month (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month_tokens: Option<u64>,
}

impl UserBudget {
    /// Refuses a cap that is negative or not a number.
    pub(crate) fn check(&self, user: &str) -> Result<()> {
        if let Some(usd) = self.month_usd
            && !(usd.is_finite() && usd >= 0.0)
        {
            return Err(StorageError::invalid(
                format!("budget of `{user}`"),
                "a month's dollars must be a number of at least 0",
            ));
        }
        Ok(())
    }
}

/// A person known to the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The name ([`check_user_name`]), unique.
    pub name: String,
    /// What they may do.
    pub role: Role,
    /// When they were added (ms since the Unix epoch).
    pub created_ms: i64,
    /// Their own caps.
    #[serde(default)]
    pub budget: UserBudget,
}

/// What is known of a token besides its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// `tok_` and 16 hex characters: what a revocation names.
    pub id: String,
    /// Whose token it is.
    pub user: String,
    /// When it was issued (ms since the Unix epoch).
    pub created_ms: i64,
}

/// A token just issued: `secret` is shown once and never stored (only its SHA-256 is).
pub struct IssuedToken {
    /// The token.
    pub info: TokenInfo,
    /// 64 hex characters, 256 random bits.
    pub secret: String,
}

impl fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedToken")
            .field("info", &self.info)
            .field("secret", &"…")
            .finish()
    }
}

/// What a share lets its user do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read the conversation.
    Read,
}

impl Access {
    /// The access's name: `read`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
        }
    }
}

impl FromStr for Access {
    type Err = StorageError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "read" => Ok(Self::Read),
            _ => Err(StorageError::invalid(
                format!("access `{}`", s.chars().take(40).collect::<String>()),
                "the only access is read",
            )),
        }
    }
}

/// A conversation shared with a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// The conversation id.
    pub conversation: String,
    /// The user it is shared with.
    pub user: String,
    /// What they may do with it.
    pub access: Access,
    /// When it was shared (ms since the Unix epoch).
    pub created_ms: i64,
}

/// What a user spent in a month.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Dollars.
    pub usd: f64,
    /// Model tokens.
    pub tokens: u64,
}

impl Spend {
    /// Refuses an amount that is negative or not a number.
    pub(crate) fn check(&self, user: &str) -> Result<()> {
        if !(self.usd.is_finite() && self.usd >= 0.0) {
            return Err(StorageError::invalid(
                format!("spend of `{user}`"),
                "dollars spent must be a number of at least 0",
            ));
        }
        Ok(())
    }
}

/// `"2026-11"` (UTC) for a time in ms since the epoch.
pub fn month_of(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!("{:04}-{:02}", t.year(), u8::from(t.month()))
}

/// Refuses a month that is not `YYYY-MM`.
pub(crate) fn check_month(month: &str) -> Result<()> {
    let b = month.as_bytes();
    let ok = b.len() == 7
        && b[4] == b'-'
        && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit)
        && matches!(month[5..].parse::<u8>(), Ok(1..=12));
    if ok {
        Ok(())
    } else {
        Err(StorageError::invalid(
            format!("month `{}`", month.chars().take(20).collect::<String>()),
            "a month is written YYYY-MM",
        ))
    }
}

/// User names: 1 to 64 characters of `A-Z a-z 0-9 . _ @ -`, not starting with `.`.
///
/// # Errors
/// [`StorageError::Invalid`] naming the rule.
pub fn check_user_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_USER_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StorageError::invalid(
            format!(
                "user name `{}`",
                name.chars().take(MAX_USER_NAME).collect::<String>()
            ),
            format!(
                "a user name is 1 to {MAX_USER_NAME} of the characters A-Z a-z 0-9 . _ @ - and \
                 does not start with `.`"
            ),
        ))
    }
}

/// The people of a store: users, their tokens, shares and spend.
///
/// Every backend refuses a second user of one name ([`StorageError::UserExists`]), names an
/// unknown user ([`StorageError::NoUser`]) in the calls that need one, keeps no token secret,
/// drops a conversation's shares with it, and adds spend atomically across processes. The
/// conformance suite ([`crate::conformance`]) checks this.
#[async_trait]
pub trait Directory: Send + Sync + fmt::Debug {
    /// Adds a user; [`StorageError::UserExists`] when the name is taken.
    async fn add_user(&self, name: &str, role: Role) -> Result<User>;
    /// The user of this name, if any.
    async fn user(&self, name: &str) -> Result<Option<User>>;
    /// Every user, by name.
    async fn users(&self) -> Result<Vec<User>>;
    /// Changes a user's role; [`StorageError::NoUser`] for an unknown user.
    async fn set_role(&self, name: &str, role: Role) -> Result<User>;
    /// Replaces a user's own caps; [`StorageError::NoUser`] for an unknown user.
    async fn set_budget(&self, name: &str, budget: UserBudget) -> Result<User>;
    /// Issues a new token to a user (who may hold several).
    async fn issue_token(&self, user: &str) -> Result<IssuedToken>;
    /// A user's live tokens, oldest first (none for an unknown user).
    async fn tokens(&self, user: &str) -> Result<Vec<TokenInfo>>;
    /// Revokes one token; `false` when there is none of this id.
    async fn revoke_token(&self, token_id: &str) -> Result<bool>;
    /// Revokes every token of a user; how many there were.
    async fn revoke_user_tokens(&self, user: &str) -> Result<usize>;
    /// The user whose live token this is; hashes compared in constant time; `None` for an
    /// unknown or revoked token.
    async fn authenticate(&self, secret: &str) -> Result<Option<User>>;
    /// Shares a conversation with a user, replacing an earlier share with them.
    async fn share(
        &self,
        conversation: &ConversationId,
        user: &str,
        access: Access,
    ) -> Result<Share>;
    /// Takes a share back; `false` when there was none.
    async fn unshare(&self, conversation: &ConversationId, user: &str) -> Result<bool>;
    /// The shares of a conversation, by user.
    async fn shares(&self, conversation: &ConversationId) -> Result<Vec<Share>>;
    /// The shares with a user, by conversation.
    async fn shared_with(&self, user: &str) -> Result<Vec<Share>>;
    /// Adds to a user's spend in `month` atomically (two servers on one PostgreSQL add without
    /// losing either); returns the new total.
    async fn add_spend(&self, user: &str, month: &str, spend: Spend) -> Result<Spend>;
    /// A user's spend in `month`; zero when none.
    async fn spend(&self, user: &str, month: &str) -> Result<Spend>;
}

fn _object_safe(_: &dyn Directory) {}

/// A new token: its info and secret, and the SHA-256 a store keeps.
pub(crate) fn new_token(user: &str, created_ms: i64) -> (IssuedToken, [u8; 32]) {
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let mut id = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut id);
    let secret = crate::workspace::hex(&secret);
    let hash = hash_secret(&secret);
    let info = TokenInfo {
        id: format!("tok_{}", crate::workspace::hex(&id)),
        user: user.to_owned(),
        created_ms,
    };
    (IssuedToken { info, secret }, hash)
}

/// The SHA-256 of a secret as presented; `None` for one that cannot be a token (not 64 hex
/// characters), which is then not looked up at all.
pub(crate) fn presented_hash(secret: &str) -> Option<[u8; 32]> {
    (secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hash_secret(&secret.to_ascii_lowercase()))
}

fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether two hashes are equal, in time that does not depend on where they differ.
pub(crate) fn same_hash(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Refuses a token id that is not `tok_` and 16 hex characters (so it is never looked up).
pub(crate) fn is_token_id(id: &str) -> bool {
    id.len() == 20
        && id.starts_with("tok_")
        && id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn months_are_utc_calendar_months() {
        assert_eq!(month_of(0), "1970-01");
        // 2026-11-30T23:59:59.999Z, then the first instant of December.
        assert_eq!(month_of(1_796_083_199_999), "2026-11");
        assert_eq!(month_of(1_796_083_200_000), "2026-12");
        assert_eq!(month_of(i64::MAX), "1970-01");
        assert!(check_month("2026-11").is_ok());
        for bad in [
            "2026-13",
            "2026-00",
            "2026-1",
            "26-11",
            "2026/11",
            "２０２６-11",
        ] {
            assert!(check_month(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn user_names_follow_the_rule() {
        for good in [
            "owner",
            "a",
            "ann.lee@example.com",
            "x_y-z",
            &"a".repeat(64),
        ] {
            assert!(check_user_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a b", "a/b", "é", &"a".repeat(65), "a\n"] {
            let err = check_user_name(bad).unwrap_err();
            assert!(err.to_string().contains("1 to 64"), "{err}");
        }
    }

    #[test]
    fn roles_parse_and_name_the_three() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(
                serde_json::to_string(&role).unwrap(),
                format!("\"{}\"", role.as_str())
            );
        }
        let err = "root".parse::<Role>().unwrap_err().to_string();
        assert!(err.contains("admin, analyst or viewer"), "{err}");
    }

    #[test]
    fn tokens_are_random_and_only_their_hash_matches() {
        let (a, hash_a) = new_token("ann", 1);
        let (b, hash_b) = new_token("ann", 1);
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.info.id, b.info.id);
        assert_eq!(a.secret.len(), 64);
        assert!(is_token_id(&a.info.id), "{}", a.info.id);
        assert_eq!(presented_hash(&a.secret), Some(hash_a));
        assert_eq!(presented_hash(&a.secret.to_uppercase()), Some(hash_a));
        assert!(!same_hash(&hash_a, &hash_b));
        assert!(same_hash(&hash_a, &hash_a));
        assert_eq!(presented_hash("short"), None);
        assert_eq!(presented_hash(&"g".repeat(64)), None);
        assert!(!format!("{a:?}").contains(&a.secret));
    }
}
