//! The vocabulary of a conversation's files, shared by every crate that stores, lists or reads
//! them: [`FileId`] (a checked id that can never name a path), [`FileKind`] (what a file is),
//! and [`find_file`], the one rule that turns what a model or a person wrote (an id or a name)
//! into a file.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest file id, in bytes; keeps file names well under every file system's limit.
pub const MAX_FILE_ID_LEN: usize = 128;

/// What a file of a conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A file a person uploaded (`upload_001`, …).
    Upload,
    /// A code block the model saved (`code_<x>`, chosen by the caller).
    Code,
    /// A file the analysis wrote (`output_001`, …).
    Output,
    /// Tool data spilled out of an observation (`data_001`, …).
    Data,
}

impl FileKind {
    /// Every kind, in list order.
    pub const ALL: [FileKind; 4] = [Self::Upload, Self::Code, Self::Output, Self::Data];

    /// `upload`, `code`, `output` or `data`: the wire name, and the prefix of the kind's ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Upload => "upload",
            Self::Code => "code",
            Self::Output => "output",
            Self::Data => "data",
        }
    }

    /// The kind named `text` (as [`FileKind::as_str`] writes it).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Whether the workspace assigns the ids of this kind (all but code).
    pub fn assigns_ids(self) -> bool {
        self != Self::Code
    }

    /// The `n`th id of an assigned kind: `upload_001`, `output_012`, `data_1000`.
    pub fn id(self, n: u64) -> FileId {
        FileId(format!("{}_{n:03}", self.as_str()))
    }

    /// The number of an assigned id of this kind (`upload_007` → 7); `None` for code and for
    /// ids of another shape.
    pub fn number_of(self, id: &str) -> Option<u64> {
        if !self.assigns_ids() {
            return None;
        }
        let digits = id.strip_prefix(self.as_str())?.strip_prefix('_')?;
        if digits.len() < 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a text is not a [`FileId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a file id: {reason}")]
pub struct FileIdError {
    /// The text refused (cut to 200 bytes, so a hostile value cannot flood a message).
    pub value: String,
    /// Which rule it breaks.
    pub reason: &'static str,
}

/// The id of a file of a conversation: `upload_001`, `output_002`, `data_003`, `code_<x>`.
///
/// It is used as a file name and in queries, so anything that could name another folder is
/// refused: 1 to 128 bytes of ASCII letters, digits, `_`, `-` and `.`, not starting with `.`,
/// without `..`, and not ending in `.json` (the name of a file's metadata beside it). This is
/// the one check of a file id; storage, tools and readers all call [`FileId::parse`]. On the
/// wire it is the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FileId(String);

impl FileId {
    /// `text` as a file id, checked.
    ///
    /// # Errors
    /// [`FileIdError`] naming the rule `text` breaks.
    pub fn parse(text: &str) -> Result<Self, FileIdError> {
        check(text)?;
        Ok(Self(text.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The kind whose prefix the id carries (`upload_…`, `output_…`, `data_…`, `code_…`,
    /// something after the `_`), if any. Ids of those shapes name a conversation's files and
    /// nothing else, so a reader never looks for them among other folders.
    pub fn prefixed_kind(&self) -> Option<FileKind> {
        FileKind::ALL.into_iter().find(|k| {
            self.0
                .strip_prefix(k.as_str())
                .and_then(|rest| rest.strip_prefix('_'))
                .is_some_and(|rest| !rest.is_empty())
        })
    }
}

fn check(value: &str) -> Result<(), FileIdError> {
    let fail = |reason| {
        let mut shown = value.to_owned();
        if shown.len() > 200 {
            let mut cut = 200;
            while !shown.is_char_boundary(cut) {
                cut -= 1;
            }
            shown.truncate(cut);
        }
        Err(FileIdError {
            value: shown,
            reason,
        })
    };
    if value.is_empty() {
        return fail("it is empty");
    }
    if value.len() > MAX_FILE_ID_LEN {
        return fail("it is longer than 128 bytes");
    }
    if value.contains('/') || value.contains('\\') {
        return fail("it contains a path separator");
    }
    if value.contains("..") {
        return fail("it contains `..`");
    }
    if value.starts_with('.') {
        return fail("it starts with `.`");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return fail("only ASCII letters, digits, `_`, `-` and `.` are allowed");
    }
    if value.ends_with(".json") {
        return fail("it ends with `.json`");
    }
    Ok(())
}

impl TryFrom<&str> for FileId {
    type Error = FileIdError;
    fn try_from(text: &str) -> Result<Self, FileIdError> {
        Self::parse(text)
    }
}

impl TryFrom<String> for FileId {
    type Error = FileIdError;
    fn try_from(text: String) -> Result<Self, FileIdError> {
        check(&text)?;
        Ok(Self(text))
    }
}

impl std::str::FromStr for FileId {
    type Err = FileIdError;
    fn from_str(text: &str) -> Result<Self, FileIdError> {
        Self::parse(text)
    }
}

impl From<FileId> for String {
    fn from(id: FileId) -> Self {
        id.0
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Read-only access to the text, so an id goes wherever a `&str` is taken; the check cannot be
/// undone through it.
impl std::ops::Deref for FileId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for FileId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for FileId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for FileId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for FileId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for FileId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<FileId> for str {
    fn eq(&self, other: &FileId) -> bool {
        self == other.0
    }
}

impl PartialEq<FileId> for &str {
    fn eq(&self, other: &FileId) -> bool {
        *self == other.0
    }
}

impl PartialEq<FileId> for String {
    fn eq(&self, other: &FileId) -> bool {
        *self == other.0
    }
}

/// What [`find_file`] needs to know of a listed file.
pub trait NamedFile {
    /// Its id.
    fn file_id(&self) -> &FileId;
    /// Its kind.
    fn file_kind(&self) -> FileKind;
    /// The name it was given (`sales.csv`).
    fn file_name(&self) -> &str;
    /// When it was stored, in ms since the Unix epoch.
    fn created_ms(&self) -> i64;
}

/// The file of `files` that `reference` names: the one with that id; else, among the files
/// given exactly that name, the newest upload (what a person calls a file by its name is what
/// they uploaded), else the newest of any kind. Newest is the latest stored, ties broken by the
/// larger assigned number (`upload_002` after `upload_001`). `None` when nothing matches.
pub fn find_file<'a, T: NamedFile>(files: &'a [T], reference: &str) -> Option<&'a T> {
    if let Some(file) = files.iter().find(|f| f.file_id() == reference) {
        return Some(file);
    }
    let newest = |upload_only: bool| {
        files
            .iter()
            .filter(|f| f.file_name() == reference)
            .filter(|f| !upload_only || f.file_kind() == FileKind::Upload)
            .max_by_key(|f| {
                let number = f.file_kind().number_of(f.file_id().as_str()).unwrap_or(0);
                (f.created_ms(), number)
            })
    };
    newest(true).or_else(|| newest(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_wire_name() {
        for kind in FileKind::ALL {
            let wire = serde_json::to_value(kind).unwrap();
            assert_eq!(wire, serde_json::json!(kind.as_str()));
            assert_eq!(serde_json::from_value::<FileKind>(wire).unwrap(), kind);
            assert_eq!(FileKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.to_string(), kind.as_str());
        }
        let names: Vec<&str> = FileKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["upload", "code", "output", "data"]);
        assert!(serde_json::from_value::<FileKind>(serde_json::json!("other")).is_err());
    }

    #[test]
    fn assigned_ids_round_trip_their_numbers() {
        assert_eq!(FileKind::Upload.id(7).as_str(), "upload_007");
        assert_eq!(FileKind::Data.id(1000).as_str(), "data_1000");
        assert_eq!(FileKind::Output.number_of("output_012"), Some(12));
        assert_eq!(FileKind::Output.number_of("output_12"), None);
        assert_eq!(FileKind::Code.number_of("code_001"), None);
    }

    #[test]
    fn ids_that_could_name_a_path_are_refused() {
        for bad in [
            "",
            "../x",
            "a/b",
            "a\\b",
            "..",
            ".hidden",
            "a..b",
            "é",
            "a b",
            "x\0",
            "upload_001.json",
        ] {
            let err = FileId::parse(bad).expect_err(bad);
            assert!(err.to_string().contains("is not a file id"), "{err}");
        }
        assert!(FileId::parse(&"a".repeat(129)).is_err());
        let long = FileId::parse(&"/".repeat(5000)).unwrap_err();
        assert!(long.value.len() <= 200);
        for ok in ["upload_001", "code_a-b", "code_v1.2", &"a".repeat(128)] {
            assert_eq!(FileId::parse(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn the_wire_form_is_the_plain_string() {
        let id = FileId::parse("output_003").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"output_003\"");
        let back: FileId = serde_json::from_str("\"output_003\"").unwrap();
        assert_eq!(back, id);
        assert!(serde_json::from_str::<FileId>("\"../etc/passwd\"").is_err());
    }

    #[test]
    fn prefixed_kinds_include_code() {
        let kind = |s: &str| FileId::parse(s).unwrap().prefixed_kind();
        assert_eq!(kind("upload_001"), Some(FileKind::Upload));
        assert_eq!(kind("code_ab12"), Some(FileKind::Code));
        assert_eq!(kind("data_x"), Some(FileKind::Data));
        assert_eq!(kind("output_"), None);
        assert_eq!(kind("sales.csv"), None);
        assert_eq!(kind("uploads_001"), None);
    }

    struct F(FileId, FileKind, &'static str, i64);

    impl NamedFile for F {
        fn file_id(&self) -> &FileId {
            &self.0
        }
        fn file_kind(&self) -> FileKind {
            self.1
        }
        fn file_name(&self) -> &str {
            self.2
        }
        fn created_ms(&self) -> i64 {
            self.3
        }
    }

    fn f(id: &str, name: &'static str, ms: i64) -> F {
        let id = FileId::parse(id).unwrap();
        let kind = id.prefixed_kind().unwrap();
        F(id, kind, name, ms)
    }

    #[test]
    fn a_name_finds_the_newest_upload_then_the_newest_of_any_kind() {
        let files = [
            f("upload_001", "sales.csv", 10),
            f("upload_002", "sales.csv", 20),
            f("output_001", "sales.csv", 30),
            f("output_002", "chart.png", 50),
            f("data_001", "chart.png", 40),
            f("code_b", "same.py", 5),
            f("code_a", "same.py", 6),
        ];
        let found = |r: &str| find_file(&files, r).map(|f| f.0.as_str());
        assert_eq!(found("sales.csv"), Some("upload_002"));
        assert_eq!(
            found("chart.png"),
            Some("output_002"),
            "newest, not list order"
        );
        assert_eq!(found("same.py"), Some("code_a"));
        assert_eq!(found("data_001"), Some("data_001"));
        assert_eq!(found("nothing.csv"), None);
        let tied = [f("upload_002", "t.csv", 1), f("upload_010", "t.csv", 1)];
        assert_eq!(
            find_file(&tied, "t.csv").map(|f| f.0.as_str()),
            Some("upload_010")
        );
    }
}
