//! The workspace of a conversation: every file it owns — uploads, saved code, spilled tool
//! data, and outputs the analysis writes — behind one trait, [`Workspace`], with one backend a
//! conversation store ([`crate::FileWorkspace`] beside the logs of [`crate::FileStore`];
//! `PostgresWorkspace` in the database of `PostgresStore`). A store hands its workspace out
//! with [`crate::ConversationStore::workspace`].
//!
//! A file has an id (`upload_001`, `output_001`, `data_001` assigned per kind and never given
//! twice within a conversation; `code_<x>` chosen by the caller), a [`FileKind`], the name it
//! was given (never a path), a media type, a size, a description, its creation time and its
//! SHA-256. Content is streamed in and out ([`tokio::io::AsyncRead`]), never held whole in
//! memory, and limited by [`WorkspaceLimits`]. Every id a caller names is checked as a
//! [`FileId`] before it comes near a path or a query.
//!
//! [`code`] keeps code blocks in a workspace.

pub mod code;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use async_trait::async_trait;
use ba_protocol::NamedFile;
pub use ba_protocol::{FileId, FileKind};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::error::{Result, StorageError};
use crate::id::ConversationId;

/// The metadata of one file of a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// `upload_001`, `output_001`, `data_001` (assigned) or `code_<x>` (given).
    pub id: FileId,
    /// What the file is.
    pub kind: FileKind,
    /// The name it was given (`sales.csv`, `chart.png`, `code_x.py`); never a path.
    pub name: String,
    /// `text/csv`, `image/png`, … (given, else from the name's extension).
    pub media_type: String,
    /// Size in bytes.
    pub size: u64,
    /// What it is, in words.
    pub description: String,
    /// When it was stored (ms since the Unix epoch).
    pub created_ms: i64,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
    /// More facts: for code `language`, `line_count`, `char_count`; for data `call_id`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// A file to store with [`Workspace::put`].
#[derive(Debug, Clone)]
pub struct NewFile {
    /// What the file is.
    pub kind: FileKind,
    /// The id: required for code (a file of that id is replaced), `None` for every other kind.
    pub id: Option<String>,
    /// The name; only its last path component is kept, and an empty one is refused.
    pub name: String,
    /// The media type; `None` takes it from the name's extension ([`ba_protocol::media_type_for`]).
    pub media_type: Option<String>,
    /// What it is, in words.
    pub description: String,
    /// More facts kept with the metadata.
    pub attributes: BTreeMap<String, String>,
}

impl NewFile {
    fn new(kind: FileKind, id: Option<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            id,
            name: name.into(),
            media_type: None,
            description: String::new(),
            attributes: BTreeMap::new(),
        }
    }

    /// An upload named `name`.
    pub fn upload(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(FileKind::Upload, None, name).with_description(description)
    }

    /// An output of the analysis named `name`.
    pub fn output(name: impl Into<String>) -> Self {
        Self::new(FileKind::Output, None, name)
    }

    /// Spilled tool data named `name`.
    pub fn data(name: impl Into<String>) -> Self {
        Self::new(FileKind::Data, None, name)
    }

    /// The code block `id`, named `name` (`code_x.py`).
    pub fn code(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self::new(FileKind::Code, Some(id.into()), name)
    }

    /// Sets the media type.
    pub fn with_media_type(mut self, media_type: impl Into<String>) -> Self {
        self.media_type = Some(media_type.into());
        self
    }

    /// Sets the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds an attribute.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }
}

/// Size limits of a workspace; a put past one fails with [`StorageError::TooLarge`] and keeps
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// The largest file (default 200 MiB).
    pub max_file_bytes: u64,
    /// The most all the files of one conversation may hold together (default 2 GiB).
    pub max_conversation_bytes: u64,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 200 << 20,
            max_conversation_bytes: 2 << 30,
        }
    }
}

/// An open file: its metadata and a reader of its content.
pub struct FileContent {
    /// The metadata.
    pub meta: FileMeta,
    /// The content, read as it streams from the store.
    pub reader: Box<dyn AsyncRead + Send + Unpin>,
}

impl fmt::Debug for FileContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileContent")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// The files of conversations (one workspace a conversation), in a conversation store.
///
/// Every method takes the conversation; nothing of another conversation can be named through
/// one. Backends pass [`crate::conformance::workspace`].
#[async_trait]
pub trait Workspace: Send + Sync + fmt::Debug {
    /// Stores `body` (read to its end, never held whole in memory) as a new file of
    /// `conversation`. Upload, output and data ids are assigned `<kind>_001`, `<kind>_002`, …
    /// per kind and never given again within the conversation (not after a remove, nor after
    /// a failed put); a code file replaces the file of the same id. The conversation must
    /// exist (`StorageError::NotFound` otherwise). Written atomically: a reader never sees half
    /// a file, and a failed or too-large put keeps nothing.
    async fn put(
        &self,
        conversation: &ConversationId,
        file: NewFile,
        body: &mut (dyn AsyncRead + Send + Unpin),
    ) -> Result<FileMeta>;

    /// Every file of the conversation, by kind then id (empty when it has none).
    async fn list(&self, conversation: &ConversationId) -> Result<Vec<FileMeta>>;

    /// One file's metadata, `None` when there is no such file.
    async fn meta(&self, conversation: &ConversationId, id: &str) -> Result<Option<FileMeta>>;

    /// Opens a file for streaming; [`StorageError::NoFile`] when there is none.
    async fn open(&self, conversation: &ConversationId, id: &str) -> Result<FileContent>;

    /// A path on this machine holding the file's content, for readers that need a file: the
    /// file itself for the files backend, a cached copy for PostgreSQL. Callers only read it,
    /// and never show it. [`StorageError::NoFile`] when there is no such file.
    async fn local_path(&self, conversation: &ConversationId, id: &str) -> Result<PathBuf>;

    /// Removes one file; `false` when there was none.
    async fn remove(&self, conversation: &ConversationId, id: &str) -> Result<bool>;

    /// Removes every file of the conversation; returns how many there were.
    async fn remove_all(&self, conversation: &ConversationId) -> Result<u64>;

    /// Ids of the conversations that have a workspace (any file, or a folder), for the orphan
    /// check of [`crate::verify::orphan_workspaces`].
    async fn owners(&self) -> Result<Vec<String>>;

    /// The limits in force.
    fn limits(&self) -> WorkspaceLimits;

    /// Gives conversation `to` file `id` of conversation `from`, under the same id and
    /// metadata (a fork's share of its parent's files): the files backend links the content
    /// (no copy; files never change once stored, and the link outlives a remove from `from`),
    /// PostgreSQL copies it. `to`'s next assigned id of the kind follows it. A file `to`
    /// already has under that id is left as it is. [`StorageError::NoFile`] when `from` has
    /// no such file.
    async fn copy_file(
        &self,
        from: &ConversationId,
        to: &ConversationId,
        id: &str,
    ) -> Result<FileMeta>;

    /// [`Workspace::put`] from a byte slice.
    async fn put_bytes(
        &self,
        conversation: &ConversationId,
        file: NewFile,
        bytes: &[u8],
    ) -> Result<FileMeta> {
        let mut body = bytes;
        self.put(conversation, file, &mut body).await
    }

    /// The whole content of a file, refused ([`StorageError::TooLarge`]) past `max` bytes.
    async fn read_bytes(
        &self,
        conversation: &ConversationId,
        id: &str,
        max: u64,
    ) -> Result<(FileMeta, Vec<u8>)> {
        let content = self.open(conversation, id).await?;
        let meta = content.meta;
        let too_large = |size| StorageError::TooLarge {
            what: format!("`{}` ({})", meta.id, meta.name),
            size,
            limit: max,
        };
        if meta.size > max {
            return Err(too_large(meta.size));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.size).unwrap_or(0));
        content
            .reader
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| StorageError::io("reading", meta.name.clone(), e))?;
        if bytes.len() as u64 > max {
            return Err(too_large(bytes.len() as u64));
        }
        Ok((meta, bytes))
    }

    /// A file by id, else by the name it was given, by the one rule of
    /// [`ba_protocol::find_file`] (among several of that name the newest upload, then the
    /// newest of any kind); `None` when nothing matches.
    async fn find(
        &self,
        conversation: &ConversationId,
        reference: &str,
    ) -> Result<Option<FileMeta>> {
        if FileId::parse(reference).is_ok()
            && let Some(meta) = self.meta(conversation, reference).await?
        {
            return Ok(Some(meta));
        }
        let listed = self.list(conversation).await?;
        Ok(ba_protocol::find_file(&listed, reference).cloned())
    }
}

fn _object_safe(_: &dyn Workspace) {}

/// Checks an id a caller names with the one rule of [`FileId::parse`].
pub(crate) fn check_file_id(id: &str) -> Result<FileId> {
    FileId::parse(id).map_err(|e| StorageError::InvalidId {
        what: "file id",
        value: e.value,
        reason: e.reason,
    })
}

impl NamedFile for FileMeta {
    fn file_id(&self) -> &FileId {
        &self.id
    }
    fn file_kind(&self) -> FileKind {
        self.kind
    }
    fn file_name(&self) -> &str {
        &self.name
    }
    fn created_ms(&self) -> i64 {
        self.created_ms
    }
}

/// The longest file name kept, in bytes.
const MAX_NAME: usize = 255;

/// The longest media type kept, in bytes.
const MAX_MEDIA_TYPE: usize = 127;

/// The longest description of a file kept, in bytes.
pub const MAX_DESCRIPTION: usize = 4096;

/// `type/subtype` of a media type, lower case, without parameters.
fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The media type a file named `name` is kept and served with when `given` was declared for
/// it (by whoever sent it): the declared type when it is well formed and passive, else the
/// type of the name's extension. A declared type a browser would run (HTML, SVG, XML, script:
/// [`is_active_media_type`]) is kept only when the name says the same, so a `.png` declared
/// `text/html` is an `image/png`.
pub fn media_type_of(name: &str, given: Option<&str>) -> String {
    let by_name = ba_protocol::media_type_for(name);
    given
        .map(str::trim)
        .filter(|m| is_media_type(m))
        .filter(|m| !is_active_media_type(m) || essence(m) == essence(by_name))
        .map_or_else(|| by_name.to_owned(), str::to_owned)
}

/// Whether a browser given `media_type` would run something in it rather than show it: HTML,
/// XHTML, SVG and every XML type (which can carry XSLT and scripts), JavaScript, and the
/// multipart and plug-in types.
pub fn is_active_media_type(media_type: &str) -> bool {
    let essence = essence(media_type);
    let (kind, sub) = essence.split_once('/').unwrap_or((essence.as_str(), ""));
    matches!(sub, "html" | "xml" | "xsl" | "xslt")
        || sub.ends_with("+xml")
        || sub.contains("javascript")
        || sub.contains("ecmascript")
        || sub.contains("shockwave")
        || kind == "multipart"
}

/// A [`NewFile`] checked and cleaned, ready for a backend.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub(crate) kind: FileKind,
    /// The given id (code), else `None` (the backend assigns one).
    pub(crate) id: Option<FileId>,
    pub(crate) name: String,
    pub(crate) media_type: String,
    pub(crate) description: String,
    pub(crate) attributes: BTreeMap<String, String>,
}

impl Prepared {
    /// Checks `file`: a code file has a valid id that is not shaped like another kind's, other
    /// kinds have none; the name keeps its last path component, without control characters.
    pub(crate) fn new(file: NewFile) -> Result<Self> {
        let id = match (file.kind, file.id) {
            (FileKind::Code, Some(id)) => {
                let checked = check_file_id(&id)?;
                if FileKind::ALL.iter().any(|k| k.number_of(&id).is_some()) {
                    return Err(StorageError::InvalidId {
                        what: "code id",
                        value: id,
                        reason: "it has the shape of an id the workspace assigns",
                    });
                }
                Some(checked)
            }
            (FileKind::Code, None) => {
                return Err(StorageError::invalid(
                    format!("code file `{}`", file.name),
                    "a code file needs an id",
                ));
            }
            (kind, Some(id)) => {
                return Err(StorageError::invalid(
                    format!("{kind} file `{}`", file.name),
                    format!("the workspace assigns the ids of {kind} files; `{id}` was given"),
                ));
            }
            (_, None) => None,
        };
        let name = clean_name(&file.name)?;
        if file.description.len() > MAX_DESCRIPTION {
            return Err(StorageError::TooLarge {
                what: format!("the description of `{name}`"),
                size: file.description.len() as u64,
                limit: MAX_DESCRIPTION as u64,
            });
        }
        let media_type = media_type_of(&name, file.media_type.as_deref());
        Ok(Self {
            kind: file.kind,
            id,
            name,
            media_type,
            description: file.description,
            attributes: file.attributes,
        })
    }

    /// The metadata of the file once stored.
    pub(crate) fn meta(&self, id: FileId, size: u64, sha256: String, created_ms: i64) -> FileMeta {
        FileMeta {
            id,
            kind: self.kind,
            name: self.name.clone(),
            media_type: self.media_type.clone(),
            size,
            description: self.description.clone(),
            created_ms,
            sha256,
            attributes: self.attributes.clone(),
        }
    }
}

/// The last path component of `name`, each run of control and format characters replaced by
/// `_` ([`crate::is_hidden_char`]), trimmed.
fn clean_name(name: &str) -> Result<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned = crate::text::replace_hidden(last, '_');
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned == "." || cleaned == ".." {
        return Err(StorageError::invalid(
            format!("file name `{name}`"),
            "it names no file",
        ));
    }
    if cleaned.len() > MAX_NAME {
        return Err(StorageError::invalid(
            format!("file name `{cleaned}`"),
            format!("it is longer than {MAX_NAME} bytes"),
        ));
    }
    Ok(cleaned.to_owned())
}

/// `type/subtype` with optional parameters, printable ASCII only (it ends up in a header).
fn is_media_type(text: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    let essence = text.split(';').next().unwrap_or("");
    text.len() <= MAX_MEDIA_TYPE
        && text.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'"')
        && essence
            .trim()
            .split_once('/')
            .is_some_and(|(t, s)| token(t) && token(s))
}

/// Sorts files by kind, then id (assigned ids by their number, so `upload_1000` follows
/// `upload_999`).
pub(crate) fn sort_files(files: &mut [FileMeta]) {
    files.sort_by(|a, b| {
        (a.kind, a.kind.number_of(&a.id), &a.id).cmp(&(b.kind, b.kind.number_of(&b.id), &b.id))
    });
}

/// Lowercase hex of a digest.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The size checks of a put, run as the content streams in.
#[derive(Debug, Clone)]
pub(crate) struct SizeCheck {
    pub(crate) limits: WorkspaceLimits,
    /// What the other files of the conversation hold.
    pub(crate) others: u64,
    pub(crate) name: String,
    pub(crate) conversation: String,
}

impl SizeCheck {
    /// Fails when a file of `size` bytes is over a limit.
    pub(crate) fn check(&self, size: u64) -> Result<()> {
        if size > self.limits.max_file_bytes {
            return Err(StorageError::TooLarge {
                what: format!("`{}`", self.name),
                size,
                limit: self.limits.max_file_bytes,
            });
        }
        if self.others.saturating_add(size) > self.limits.max_conversation_bytes {
            return Err(StorageError::TooLarge {
                what: format!("conversation `{}` with `{}`", self.conversation, self.name),
                size: self.others.saturating_add(size),
                limit: self.limits.max_conversation_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_assigned_kinds_round_trip() {
        assert_eq!(FileKind::Upload.id(1), "upload_001");
        assert_eq!(FileKind::Data.id(1000), "data_1000");
        assert_eq!(FileKind::Upload.number_of("upload_012"), Some(12));
        assert_eq!(FileKind::Upload.number_of("upload_12"), None);
        assert_eq!(FileKind::Upload.number_of("output_012"), None);
        assert_eq!(FileKind::Code.number_of("code_001"), None);
        for kind in FileKind::ALL {
            assert_eq!(FileKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
        }
    }

    #[test]
    fn new_files_are_checked_and_cleaned() {
        let p = Prepared::new(NewFile::upload("../../etc/sales.CSV", "d")).unwrap();
        assert_eq!(
            (p.name.as_str(), p.media_type.as_str()),
            ("sales.CSV", "text/csv")
        );
        let p = Prepared::new(NewFile::upload("C:\\x\\a\nb.bin", "")).unwrap();
        assert_eq!(p.name, "a_b.bin");
        let p = Prepared::new(NewFile::output("c.png").with_media_type("bad\"type")).unwrap();
        assert_eq!(p.media_type, "image/png");
        let p = Prepared::new(NewFile::output("c").with_media_type("text/plain; charset=utf-8"))
            .unwrap();
        assert_eq!(p.media_type, "text/plain; charset=utf-8");
        for bad in ["", "  ", "a/", "..", "x/."] {
            assert!(Prepared::new(NewFile::upload(bad, "")).is_err(), "{bad:?}");
        }
        assert!(Prepared::new(NewFile::upload("x".repeat(256), "")).is_err());
        let mut with_id = NewFile::upload("a.csv", "");
        with_id.id = Some("upload_009".into());
        assert!(Prepared::new(with_id).is_err());
        let mut code = NewFile::code("x", "x.py");
        code.id = None;
        assert!(Prepared::new(code).is_err());
        for bad in ["../x", "upload_001", "data_123", "x.json", ".x"] {
            assert!(Prepared::new(NewFile::code(bad, "x.py")).is_err(), "{bad}");
        }
        assert!(Prepared::new(NewFile::code("code_upload_001", "x.py")).is_ok());
    }

    #[test]
    fn a_given_type_never_makes_a_file_active() {
        let typed = |name: &str, given: &str| {
            Prepared::new(NewFile::upload(name, "").with_media_type(given))
                .unwrap()
                .media_type
        };
        assert_eq!(typed("chart.png", "text/html"), "image/png");
        assert_eq!(typed("chart.png", "image/svg+xml"), "image/png");
        assert_eq!(
            typed("notes", "application/xhtml+xml"),
            "application/octet-stream"
        );
        assert_eq!(typed("a.csv", "text/javascript"), "text/csv");
        assert_eq!(
            typed("page.html", "text/html; charset=utf-8"),
            "text/html; charset=utf-8"
        );
        assert_eq!(typed("data", "text/csv"), "text/csv");
        for active in [
            "text/html",
            "image/svg+xml",
            "text/xml",
            "application/x-javascript",
        ] {
            assert!(is_active_media_type(active), "{active}");
        }
        for passive in ["text/csv", "image/png", "application/json", "text/plain"] {
            assert!(!is_active_media_type(passive), "{passive}");
        }
    }

    #[test]
    fn names_lose_format_characters_and_descriptions_are_bounded() {
        let p = Prepared::new(NewFile::upload("report\u{202e}xsl.exe", "")).unwrap();
        assert_eq!(p.name, "report_xsl.exe");
        let p = Prepared::new(NewFile::upload("a\u{1b}[2Jb\u{0}.csv", "")).unwrap();
        assert_eq!(p.name, "a_[2Jb_.csv");
        let long = "d".repeat(MAX_DESCRIPTION + 1);
        assert!(matches!(
            Prepared::new(NewFile::upload("a.csv", long)),
            Err(StorageError::TooLarge { .. })
        ));
        assert!(Prepared::new(NewFile::upload("a.csv", "d".repeat(MAX_DESCRIPTION))).is_ok());
    }

    #[test]
    fn media_types_come_from_extensions() {
        for (name, want) in [
            ("a.csv", "text/csv"),
            (
                "A.XLSX",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
            ("b.xls", "application/vnd.ms-excel"),
            ("c.jpeg", "image/jpeg"),
            ("d.py", "text/x-python"),
            ("e.sql", "application/sql"),
            ("noext", "application/octet-stream"),
            ("f.weird", "application/octet-stream"),
        ] {
            assert_eq!(ba_protocol::media_type_for(name), want, "{name}");
        }
    }

    #[test]
    fn limits_name_the_file_and_the_limit() {
        let check = SizeCheck {
            limits: WorkspaceLimits::default(),
            others: (2 << 30) - 10,
            name: "big.csv".into(),
            conversation: "c1".into(),
        };
        assert_eq!(
            check.check((200 << 20) + 1).unwrap_err().to_string(),
            "`big.csv` is over the limit of 200 MiB"
        );
        assert_eq!(
            check.check(11).unwrap_err().to_string(),
            "conversation `c1` with `big.csv` is over the limit of 2 GiB"
        );
        assert!(check.check(10).is_ok());
        assert_eq!(crate::error::human_size(1536), "1.5 KiB");
        assert_eq!(crate::error::human_size(100), "100 bytes");
    }

    #[test]
    fn files_sort_by_kind_then_number() {
        let p = Prepared::new(NewFile::upload("a", "")).unwrap();
        let mut files: Vec<FileMeta> = ["upload_1000", "data_001", "upload_999", "upload_002"]
            .into_iter()
            .map(|id| {
                let mut m = p.meta(FileId::parse(id).unwrap(), 0, String::new(), 0);
                m.kind = if id.starts_with("data") {
                    FileKind::Data
                } else {
                    FileKind::Upload
                };
                m
            })
            .collect();
        sort_files(&mut files);
        let ids: Vec<&str> = files.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["upload_002", "upload_999", "upload_1000", "data_001"]);
    }
}
