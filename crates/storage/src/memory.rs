//! Memory across conversations: small text files a person keeps (through the model's `memory`
//! tool, the page or the CLI), behind one [`MemoryStore`] trait with a backend in each store.
//!
//! Files live in a [`MemoryScope`]: a user's own, or the team's that every user reads. Paths
//! are written as the model sees them, `/memories/preferences.md` (the user's) and
//! `/memories/team/fiscal.md` (the team's), and checked by [`MemoryPath::parse`]: no `..`, no
//! absolute path other than under `/memories`, names of a fixed alphabet — so a path is a key,
//! never a place on a disk (no link can be followed). Every change is a new version naming who
//! made it ([`MemoryAuthor`]); a delete is a version without text, so history and restore
//! outlive it. [`MemoryLimits`] bound a file, the number of files and the total of a scope; a
//! change over a bound is refused whole.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::people::check_user_name;

/// The folder every memory path is under.
pub const MEMORY_ROOT: &str = "/memories";

/// The folder of the team's scope, under [`MEMORY_ROOT`].
pub const TEAM_FOLDER: &str = "team";

/// The longest name of one folder or file in a memory path.
pub const MAX_MEMORY_NAME: usize = 64;

/// The most folders and file a memory path holds below `/memories` (the team folder counts).
pub const MAX_MEMORY_DEPTH: usize = 4;

/// Whose memory: one user's, or the team's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "user")]
pub enum MemoryScope {
    /// A user's own files.
    User(String),
    /// The team's files: every user reads them, admins write them.
    Team,
}

impl MemoryScope {
    /// A user's scope; the name is checked.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] for a name that is not a user name.
    pub fn user(name: &str) -> Result<Self> {
        check_user_name(name)?;
        Ok(Self::User(name.to_owned()))
    }

    /// The key a backend files the scope under: `user:NAME` or `team`.
    pub fn key(&self) -> String {
        match self {
            Self::User(name) => format!("user:{name}"),
            Self::Team => TEAM_FOLDER.to_owned(),
        }
    }

    /// The full path of `relative` in this scope, as the model writes it.
    pub fn full_path(&self, relative: &str) -> String {
        match self {
            Self::User(_) => format!("{MEMORY_ROOT}/{relative}"),
            Self::Team => format!("{MEMORY_ROOT}/{TEAM_FOLDER}/{relative}"),
        }
    }
}

impl fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User(name) => write!(f, "the memory of `{name}`"),
            Self::Team => f.write_str("the team's memory"),
        }
    }
}

/// A checked memory path: the scope it is in (for a given user) and the path within it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPath {
    /// The user's own or the team's.
    pub scope: MemoryScope,
    /// The path inside the scope (`preferences.md`, `projects/q3.md`); empty for the scope's
    /// top folder.
    pub relative: String,
}

impl MemoryPath {
    /// Reads `path` as user `user` writes it: `/memories/…` is theirs, `/memories/team/…` the
    /// team's. Also taken without the leading `/memories` (`preferences.md`), as a page or a
    /// command line may give it.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] naming the rule the path breaks.
    pub fn parse(user: &str, path: &str) -> Result<Self> {
        let bad = |why: &str| {
            StorageError::invalid(
                format!(
                    "memory path `{}`",
                    path.chars().take(200).collect::<String>()
                ),
                why.to_owned(),
            )
        };
        let rest = if path == MEMORY_ROOT || path == "/memories/" {
            ""
        } else if let Some(rest) = path.strip_prefix("/memories/") {
            rest
        } else if path.starts_with('/') {
            return Err(bad("a memory path is under /memories"));
        } else {
            path
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let parts: Vec<&str> = if rest.is_empty() {
            Vec::new()
        } else {
            rest.split('/').collect()
        };
        if parts.len() > MAX_MEMORY_DEPTH {
            return Err(bad(&format!(
                "a memory path is at most {MAX_MEMORY_DEPTH} names deep"
            )));
        }
        for part in &parts {
            check_name(part).map_err(|why| bad(&why))?;
        }
        let (scope, parts) = match parts.split_first() {
            Some((&TEAM_FOLDER, rest)) => (MemoryScope::Team, rest),
            _ => (MemoryScope::user(user)?, parts.as_slice()),
        };
        Ok(Self {
            scope,
            relative: parts.join("/"),
        })
    }

    /// The path as the model writes it.
    pub fn full(&self) -> String {
        if self.relative.is_empty() {
            match self.scope {
                MemoryScope::User(_) => MEMORY_ROOT.to_owned(),
                MemoryScope::Team => format!("{MEMORY_ROOT}/{TEAM_FOLDER}"),
            }
        } else {
            self.scope.full_path(&self.relative)
        }
    }

    /// Refuses the top folder of a scope where a file is meant.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] when the path names a scope's folder.
    pub fn file(self) -> Result<Self> {
        if self.relative.is_empty() {
            return Err(StorageError::invalid(
                format!("memory path `{}`", self.full()),
                "this is a folder; name a file in it",
            ));
        }
        Ok(self)
    }
}

/// One name of a path: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with `.` (so no `..`, no
/// hidden file).
fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_MEMORY_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else if name == ".." || name == "." {
        Err("a memory path may not contain `.` or `..`".to_owned())
    } else {
        Err(format!(
            "each name of a memory path is 1 to {MAX_MEMORY_NAME} of the characters A-Z a-z \
             0-9 . _ - and does not start with `.` (`{}` is not)",
            name.chars().take(MAX_MEMORY_NAME).collect::<String>()
        ))
    }
}

/// The bounds of one scope's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryLimits {
    /// Bytes of one file.
    pub max_file_bytes: u64,
    /// Files a scope holds.
    pub max_files: usize,
    /// Bytes of all the files of a scope.
    pub max_total_bytes: u64,
    /// Versions kept of one file (the oldest are dropped past it; numbers keep counting).
    pub max_versions: u32,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 32 * 1024,
            max_files: 100,
            max_total_bytes: 256 * 1024,
            max_versions: 50,
        }
    }
}

impl MemoryLimits {
    /// These limits with `bytes` a file.
    #[must_use]
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// These limits with `files` a scope.
    #[must_use]
    pub fn with_max_files(mut self, files: usize) -> Self {
        self.max_files = files;
        self
    }

    /// These limits with `bytes` a scope.
    #[must_use]
    pub fn with_max_total_bytes(mut self, bytes: u64) -> Self {
        self.max_total_bytes = bytes;
        self
    }

    /// These limits keeping `versions` of a file.
    #[must_use]
    pub fn with_max_versions(mut self, versions: u32) -> Self {
        self.max_versions = versions.max(1);
        self
    }
}

/// Who made a change: the conversation and run of a tool call, or a person from the page or
/// the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryAuthor {
    /// The person (the conversation's owner, or whoever edited by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The conversation whose model made the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// The run that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

impl MemoryAuthor {
    /// A person editing by hand.
    pub fn person(user: &str) -> Self {
        Self {
            user: Some(user.to_owned()),
            ..Self::default()
        }
    }
}

/// One version of a memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryVersion {
    /// The path in its scope.
    pub path: String,
    /// From 1, one more each change of this path.
    pub version: u32,
    /// The text; `None` for a delete.
    pub text: Option<String>,
    /// Who made it.
    pub author: MemoryAuthor,
    /// When (ms since the Unix epoch).
    pub created_ms: i64,
}

/// A live memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFile {
    /// The path in its scope.
    pub path: String,
    /// Bytes of its text.
    pub size: u64,
    /// Its latest version number.
    pub versions: u32,
    /// When it last changed (ms since the Unix epoch).
    pub updated_ms: i64,
}

/// One change of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryChange {
    /// Writes `text` as the file's new version (creating it).
    Write {
        /// The path in the scope.
        path: String,
        /// The whole text.
        text: String,
    },
    /// Deletes the file (a version without text).
    Delete {
        /// The path in the scope.
        path: String,
    },
}

impl MemoryChange {
    fn path(&self) -> &str {
        match self {
            Self::Write { path, .. } | Self::Delete { path } => path,
        }
    }
}

/// The memory files of a store, by scope.
///
/// A commit is atomic and checked against the scope as it stands under the backend's lock
/// ([`check_commit`]): every change or none is kept, and two writers never lose each other's
/// versions. The conformance suite ([`crate::conformance`]) checks this on every backend.
#[async_trait]
pub trait MemoryStore: Send + Sync + fmt::Debug {
    /// The live files of a scope, by path.
    async fn files(&self, scope: &MemoryScope) -> Result<Vec<MemoryFile>>;
    /// The versions of one path kept, oldest first (none for a path never written).
    async fn history(&self, scope: &MemoryScope, path: &str) -> Result<Vec<MemoryVersion>>;
    /// Applies `changes` as new versions, all or none; the versions made, in order.
    ///
    /// # Errors
    /// [`StorageError::TooLarge`] or [`StorageError::Invalid`] for a change over `limits` or
    /// deleting a file that is not there (nothing is kept).
    async fn commit(
        &self,
        scope: &MemoryScope,
        changes: &[MemoryChange],
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<Vec<MemoryVersion>>;

    /// The latest version of a live file; `None` when there is none (or it was deleted).
    async fn read(&self, scope: &MemoryScope, path: &str) -> Result<Option<MemoryVersion>> {
        Ok(self
            .history(scope, path)
            .await?
            .pop()
            .filter(|v| v.text.is_some()))
    }

    /// Makes version `version`'s text the file's newest version (a deleted file comes back).
    ///
    /// # Errors
    /// [`StorageError::Invalid`] when no such version is kept or it is a delete.
    async fn restore(
        &self,
        scope: &MemoryScope,
        path: &str,
        version: u32,
        author: &MemoryAuthor,
        limits: &MemoryLimits,
    ) -> Result<MemoryVersion> {
        let text = self
            .history(scope, path)
            .await?
            .into_iter()
            .find(|v| v.version == version)
            .and_then(|v| v.text)
            .ok_or_else(|| {
                StorageError::invalid(
                    format!("memory file `{}`", scope.full_path(path)),
                    format!("has no version {version} with text to restore"),
                )
            })?;
        let change = MemoryChange::Write {
            path: path.to_owned(),
            text,
        };
        self.commit(scope, &[change], author, limits)
            .await?
            .pop()
            .ok_or_else(|| StorageError::Task("a restore made no version".to_owned()))
    }
}

fn _object_safe(_: &dyn MemoryStore) {}

/// The live size of each file of a scope, by path.
pub(crate) type Sizes = BTreeMap<String, u64>;

/// Checks `changes` against the scope's live files `sizes` and `limits`, and gives the sizes
/// after them. A path that is a folder of another live file (or has one as its folder) is
/// refused, so the listing stays a tree.
pub(crate) fn check_commit(
    scope: &MemoryScope,
    mut sizes: Sizes,
    changes: &[MemoryChange],
    limits: &MemoryLimits,
) -> Result<Sizes> {
    for change in changes {
        let path = change.path();
        match change {
            MemoryChange::Write { text, .. } => {
                let size = text.len() as u64;
                if size > limits.max_file_bytes {
                    return Err(StorageError::TooLarge {
                        what: format!("memory file `{}`", scope.full_path(path)),
                        size,
                        limit: limits.max_file_bytes,
                    });
                }
                let clash = sizes.keys().find(|other| {
                    other.as_str() != path
                        && (other.starts_with(&format!("{path}/"))
                            || path.starts_with(&format!("{other}/")))
                });
                if let Some(other) = clash {
                    return Err(StorageError::invalid(
                        format!("memory file `{}`", scope.full_path(path)),
                        format!(
                            "`{}` is in its way (a name is a file or a folder, not both)",
                            scope.full_path(other)
                        ),
                    ));
                }
                sizes.insert(path.to_owned(), size);
            }
            MemoryChange::Delete { .. } => {
                if sizes.remove(path).is_none() {
                    return Err(StorageError::invalid(
                        format!("memory file `{}`", scope.full_path(path)),
                        "does not exist",
                    ));
                }
            }
        }
    }
    if sizes.len() > limits.max_files {
        return Err(StorageError::invalid(
            scope.to_string(),
            format!(
                "would hold {} files; the limit is {}",
                sizes.len(),
                limits.max_files
            ),
        ));
    }
    let total: u64 = sizes.values().sum();
    if total > limits.max_total_bytes {
        return Err(StorageError::TooLarge {
            what: scope.to_string(),
            size: total,
            limit: limits.max_total_bytes,
        });
    }
    Ok(sizes)
}

/// The text of the whole `relative` path as a change names it, checked again: a store is
/// called by more than the tool.
pub(crate) fn check_relative(path: &str) -> Result<()> {
    let bad = |why: String| {
        StorageError::invalid(
            format!(
                "memory path `{}`",
                path.chars().take(200).collect::<String>()
            ),
            why,
        )
    };
    let parts: Vec<&str> = path.split('/').collect();
    if path.is_empty() || parts.len() > MAX_MEMORY_DEPTH {
        return Err(bad(format!(
            "a memory file's path is 1 to {MAX_MEMORY_DEPTH} names"
        )));
    }
    for part in parts {
        check_name(part).map_err(bad)?;
    }
    Ok(())
}

/// Checks every path of `changes`.
pub(crate) fn check_changes(changes: &[MemoryChange]) -> Result<()> {
    changes.iter().try_for_each(|c| check_relative(c.path()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn paths_are_read_into_scopes() {
        let p = MemoryPath::parse("ann", "/memories/preferences.md").unwrap();
        assert_eq!(p.scope, MemoryScope::User("ann".into()));
        assert_eq!(p.relative, "preferences.md");
        assert_eq!(p.full(), "/memories/preferences.md");
        let t = MemoryPath::parse("ann", "/memories/team/fiscal.md").unwrap();
        assert_eq!(
            (t.scope, t.relative.as_str()),
            (MemoryScope::Team, "fiscal.md")
        );
        let root = MemoryPath::parse("ann", "/memories").unwrap();
        assert_eq!(root.relative, "");
        assert!(root.file().is_err());
        let bare = MemoryPath::parse("ann", "notes/q3.md").unwrap();
        assert_eq!(bare.full(), "/memories/notes/q3.md");
    }

    #[test]
    fn paths_outside_or_odd_are_refused() {
        for bad in [
            "/etc/passwd",
            "/memories/../x.md",
            "/memories/a/../../x.md",
            "/memories/./x.md",
            "/memories/.hidden",
            "/memories//x.md",
            "/memories/a b.md",
            "/memories/é.md",
            "/memories/a/b/c/d/e.md",
            "/memoriesx/a.md",
            "../x.md",
        ] {
            assert!(MemoryPath::parse("ann", bad).is_err(), "{bad}");
        }
        let err = MemoryPath::parse("ann", "/memories/../x").unwrap_err();
        assert!(err.to_string().contains("`..`"), "{err}");
        assert!(check_relative("a/../b").is_err());
        assert!(check_relative("").is_err());
    }

    proptest::proptest! {
        #[test]
        fn a_parsed_path_round_trips(parts in proptest::collection::vec("[a-z0-9_-][a-z0-9._-]{0,10}", 1..4)) {
            let path = format!("/memories/{}", parts.join("/"));
            let parsed = MemoryPath::parse("ann", &path).unwrap();
            proptest::prop_assert_eq!(parsed.full(), path);
            proptest::prop_assert!(check_relative(&parsed.relative).is_ok() || parsed.relative.is_empty());
        }
    }

    #[test]
    fn bounds_refuse_the_whole_commit() {
        let scope = MemoryScope::Team;
        let limits = MemoryLimits::default()
            .with_max_file_bytes(10)
            .with_max_files(2)
            .with_max_total_bytes(15);
        let write = |p: &str, t: &str| MemoryChange::Write {
            path: p.into(),
            text: t.into(),
        };
        let sizes = check_commit(&scope, Sizes::new(), &[write("a", "12345")], &limits).unwrap();
        let err = check_commit(
            &scope,
            sizes.clone(),
            &[write("b", "x".repeat(11).as_str())],
            &limits,
        )
        .unwrap_err();
        assert!(matches!(err, StorageError::TooLarge { .. }), "{err}");
        let err = check_commit(
            &scope,
            sizes.clone(),
            &[write("b", "1234567890"), write("c", "")],
            &limits,
        )
        .unwrap_err();
        assert!(err.to_string().contains("3 files"), "{err}");
        let err = check_commit(
            &scope,
            sizes.clone(),
            &[write("b", "1234567890"), write("a", "123456")],
            &limits,
        )
        .unwrap_err();
        assert!(
            matches!(err, StorageError::TooLarge { limit: 15, .. }),
            "{err}"
        );
        let err = check_commit(&scope, sizes.clone(), &[write("a/b", "x")], &limits).unwrap_err();
        assert!(err.to_string().contains("in its way"), "{err}");
        let err = check_commit(
            &scope,
            sizes,
            &[MemoryChange::Delete { path: "z".into() }],
            &limits,
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
