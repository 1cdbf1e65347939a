//! Validated names: conversation ids and file names that can never leave their folder.

use std::fmt;

use crate::error::{Result, StorageError};

/// Longest id accepted; keeps file names well under every file system's limit.
pub const MAX_ID_LEN: usize = 128;

/// A conversation id: 1–128 characters of `A–Z a–z 0–9 _ - .`, not starting with `.`, without
/// `..`. It is used as a file name, so anything that could name another folder is refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConversationId(String);

impl ConversationId {
    /// Validates `id`.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        check_name("conversation id", &id)?;
        Ok(Self(id))
    }

    /// A fresh random id (UUID v4).
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConversationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ConversationId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for ConversationId {
    type Err = StorageError;
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

/// Checks a single path component: the same rules as [`ConversationId`].
pub(crate) fn check_name(what: &'static str, value: &str) -> Result<()> {
    let fail = |reason| {
        Err(StorageError::InvalidId {
            what,
            value: value.to_owned(),
            reason,
        })
    };
    if value.is_empty() {
        return fail("it is empty");
    }
    if value.len() > MAX_ID_LEN {
        return fail("it is longer than 128 bytes");
    }
    if value.contains("..") {
        return fail("it contains `..`");
    }
    if value.starts_with('.') {
        return fail("it starts with `.`");
    }
    if value.contains('/') || value.contains('\\') {
        return fail("it contains a path separator");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return fail("only ASCII letters, digits, `_`, `-` and `.` are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_escapes() {
        for bad in [
            "", "../x", "a/b", "a\\b", "..", ".hidden", "a..b", "é", "a b", "x\0",
        ] {
            let err = ConversationId::new(bad).expect_err(bad);
            assert!(
                err.to_string().starts_with("invalid conversation id"),
                "{err}"
            );
        }
        let long = "a".repeat(129);
        assert!(ConversationId::new(long).is_err());
    }

    #[test]
    fn accepts_plain_ids() {
        for ok in ["a", "6c2214d7-b87e-4432", "conv_1.sub-2", &"a".repeat(128)] {
            assert_eq!(
                ConversationId::new(ok)
                    .map(|i| i.to_string())
                    .ok()
                    .as_deref(),
                Some(ok)
            );
        }
        assert!(ConversationId::new(ConversationId::random().to_string()).is_ok());
    }
}
