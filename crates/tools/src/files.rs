//! The files of the conversation a call belongs to, as a tool sees them: the
//! [`ConversationFiles`] trait (uploads, saved code, spilled data and outputs, each with an id
//! such as `upload_001`, an original name and a media type, never a path), and [`DirFiles`], a
//! folder-backed implementation for tests and simple embedders.
//!
//! The orchestrator hands each call the handle of its own conversation only
//! ([`CallContext::files`](crate::CallContext::files), from
//! [`CallOptions::files`](crate::CallOptions::files)), so a tool cannot name a file of another
//! conversation. The real implementation adapts the storage crate's workspace; this crate does
//! not know it.
//!
//! Local paths ([`ConversationFiles::local_path`]) are for reading only, by readers that need a
//! file (a CSV or workbook reader, a copy into a scratch folder), and are never shown to the
//! model: implementations keep them out of their errors too.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::ToolsError;

/// The kind of a file the user uploaded.
pub const KIND_UPLOAD: &str = "upload";
/// The kind of a saved code block.
pub const KIND_CODE: &str = "code";
/// The kind of a file an analysis wrote (a chart, a workbook).
pub const KIND_OUTPUT: &str = "output";
/// The kind of spilled tool data.
pub const KIND_DATA: &str = "data";

/// One file of the conversation, as a tool sees it (no path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The id the model names it by: `upload_001`, `output_001`, `data_001`, `code_…`.
    pub id: String,
    /// `upload`, `code`, `output` or `data` (see [`KIND_UPLOAD`] and its siblings).
    pub kind: String,
    /// The original or display name (`sales.csv`, `chart.png`); never a path.
    pub name: String,
    /// The media type (`text/csv`, `image/png`, …).
    pub media_type: String,
    /// The size in bytes.
    pub size: u64,
}

/// The files of the conversation a call belongs to. The orchestrator gives each call the handle
/// of its own conversation only; a tool cannot name another.
///
/// Errors never hold a local path: a missing file is [`ToolsError::NoSuchFile`] naming the
/// reference, a file over the limit [`ToolsError::FileTooLarge`] naming the file.
#[async_trait]
pub trait ConversationFiles: Send + Sync + fmt::Debug {
    /// Every file of the conversation, by kind then id.
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError>;

    /// The file `reference` names: by id, else by original name (uploads first), `None` when
    /// nothing matches. By default [`find_in`] over [`list`](ConversationFiles::list).
    async fn find(&self, reference: &str) -> Result<Option<FileInfo>, ToolsError> {
        Ok(find_in(&self.list().await?, reference))
    }

    /// A local file with the content of `id`, to read only; never shown to the model.
    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError>;

    /// Keeps the file at `path` as an output of the conversation (`output_00N`) named `name`.
    async fn add_output(
        &self,
        name: &str,
        path: &Path,
        description: &str,
    ) -> Result<FileInfo, ToolsError>;

    /// Keeps spilled data as a data file of the conversation (`data_00N`) named `name`.
    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError>;

    /// The largest file the workspace takes, in bytes.
    fn max_file_bytes(&self) -> u64;
}

#[async_trait]
impl<T: ConversationFiles + ?Sized> ConversationFiles for std::sync::Arc<T> {
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError> {
        (**self).list().await
    }
    async fn find(&self, reference: &str) -> Result<Option<FileInfo>, ToolsError> {
        (**self).find(reference).await
    }
    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError> {
        (**self).local_path(id).await
    }
    async fn add_output(
        &self,
        name: &str,
        path: &Path,
        description: &str,
    ) -> Result<FileInfo, ToolsError> {
        (**self).add_output(name, path, description).await
    }
    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        (**self).add_data(name, bytes).await
    }
    fn max_file_bytes(&self) -> u64 {
        (**self).max_file_bytes()
    }
}

#[async_trait]
impl<T: ConversationFiles + ?Sized> ConversationFiles for Box<T> {
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError> {
        (**self).list().await
    }
    async fn find(&self, reference: &str) -> Result<Option<FileInfo>, ToolsError> {
        (**self).find(reference).await
    }
    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError> {
        (**self).local_path(id).await
    }
    async fn add_output(
        &self,
        name: &str,
        path: &Path,
        description: &str,
    ) -> Result<FileInfo, ToolsError> {
        (**self).add_output(name, path, description).await
    }
    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        (**self).add_data(name, bytes).await
    }
    fn max_file_bytes(&self) -> u64 {
        (**self).max_file_bytes()
    }
}

fn _object_safe(_: &dyn ConversationFiles) {}

/// The file of `files` (listed by kind then id) that `reference` names: the one with that id,
/// else among those with that original name the last upload, else the last file of any kind.
pub fn find_in(files: &[FileInfo], reference: &str) -> Option<FileInfo> {
    if let Some(file) = files.iter().find(|f| f.id == reference) {
        return Some(file.clone());
    }
    files
        .iter()
        .rfind(|f| f.name == reference && f.kind == KIND_UPLOAD)
        .or_else(|| files.iter().rfind(|f| f.name == reference))
        .cloned()
}

/// Whether `id` can name a file: 1 to 128 ASCII letters, digits, `_` and `-` (so it is never a
/// path).
pub fn is_file_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub use ba_protocol::media_type_for;

/// The last path component of `name`, refused when there is none (empty, `.`, `..`).
fn display_name(name: &str) -> Result<String, ToolsError> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default().trim();
    if last.is_empty() || last == "." || last == ".." {
        return Err(ToolsError::FileName {
            name: name.to_owned(),
            reason: "it must end in a file name".to_owned(),
        });
    }
    Ok(last.to_owned())
}

/// What [`DirFiles`] keeps beside each file, as `<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredMeta {
    #[serde(flatten)]
    info: FileInfo,
    #[serde(default)]
    description: String,
    #[serde(default)]
    created_ms: u128,
}

/// A conversation's files in one folder: each file as `<id>` with its metadata beside it as
/// `<id>.json`, both written whole (a temporary file renamed into place). Upload, output and
/// data ids are assigned per kind, `upload_001`, `upload_002`, …, claimed with an exclusive
/// create so two writers never share one; a code file keeps the id it is given and replaces
/// the file of that id. For tests and simple embedders; the agent uses the conversation store's
/// workspace.
///
/// Its errors never hold the folder's path.
#[derive(Debug, Clone)]
pub struct DirFiles {
    dir: PathBuf,
    max_file_bytes: u64,
}

impl DirFiles {
    /// The files in `dir` (created at the first write), at most 200 MiB a file.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_file_bytes: 200 * 1024 * 1024,
        }
    }

    /// Sets the largest file taken, in bytes.
    #[must_use]
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `bytes` as an upload named `name` (its last path component): `upload_00N`.
    ///
    /// # Errors
    /// [`ToolsError::FileName`], [`ToolsError::FileTooLarge`], or [`ToolsError::Files`] when
    /// the folder cannot be written.
    pub async fn add_upload(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        self.check_size(name, bytes.len() as u64)?;
        self.store(KIND_UPLOAD, None, name, "", Source::Bytes(bytes))
            .await
    }

    /// Stores `code` as the code file `id` named `name`, replacing any file of that id.
    ///
    /// # Errors
    /// [`ToolsError::FileName`] when `id` is not a valid id or `name` has no file name, else as
    /// [`add_upload`](Self::add_upload).
    pub async fn add_code(&self, id: &str, name: &str, code: &str) -> Result<FileInfo, ToolsError> {
        if !is_file_id(id) {
            return Err(ToolsError::FileName {
                name: id.to_owned(),
                reason: "an id is 1 to 128 letters, digits, `_` or `-`".to_owned(),
            });
        }
        self.check_size(name, code.len() as u64)?;
        self.store(
            KIND_CODE,
            Some(id),
            name,
            "",
            Source::Bytes(code.as_bytes()),
        )
        .await
    }

    fn check_size(&self, name: &str, size: u64) -> Result<(), ToolsError> {
        if size > self.max_file_bytes {
            return Err(ToolsError::FileTooLarge {
                name: name.to_owned(),
                size,
                limit: self.max_file_bytes,
            });
        }
        Ok(())
    }

    fn io_error(&self, what: &str, err: &std::io::Error) -> ToolsError {
        // `io::Error`'s own text carries no path; the folder's is left out on purpose.
        ToolsError::Files {
            message: format!("{what}: {err}"),
        }
    }

    /// Every stored file, unsorted; claims without metadata yet are skipped.
    async fn read_all(&self) -> Result<Vec<StoredMeta>, ToolsError> {
        let mut entries = match tokio::fs::read_dir(&self.dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io_error("cannot list the files", &e)),
        };
        let mut found = Vec::new();
        loop {
            let entry = match entries.next_entry().await {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) => return Err(self.io_error("cannot list the files", &e)),
            };
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !is_file_id(id) {
                continue;
            }
            let Ok(bytes) = tokio::fs::read(entry.path()).await else {
                continue;
            };
            if let Ok(meta) = serde_json::from_slice::<StoredMeta>(&bytes) {
                found.push(meta);
            }
        }
        Ok(found)
    }

    async fn meta(&self, id: &str) -> Result<Option<StoredMeta>, ToolsError> {
        if !is_file_id(id) {
            return Ok(None);
        }
        match tokio::fs::read(self.dir.join(format!("{id}.json"))).await {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(&format!("cannot read `{id}`"), &e)),
        }
    }

    /// Claims the next free id of `kind` by creating its metadata file exclusively.
    async fn claim(&self, kind: &str) -> Result<String, ToolsError> {
        let prefix = format!("{kind}_");
        let mut next = self
            .read_all()
            .await?
            .iter()
            .filter_map(|m| m.info.id.strip_prefix(&prefix)?.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1;
        loop {
            let id = format!("{kind}_{next:03}");
            let claim = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.dir.join(format!("{id}.json")))
                .await;
            match claim {
                Ok(_) => return Ok(id),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => next += 1,
                Err(e) => return Err(self.io_error("cannot assign an id", &e)),
            }
        }
    }

    async fn store(
        &self,
        kind: &str,
        id: Option<&str>,
        name: &str,
        description: &str,
        source: Source<'_>,
    ) -> Result<FileInfo, ToolsError> {
        let name = display_name(name)?;
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|e| self.io_error("cannot make the files folder", &e))?;
        let id = match id {
            Some(id) => id.to_owned(),
            None => self.claim(kind).await?,
        };
        let written = self.write_content(&id, &name, source).await;
        let size = match written {
            Ok(size) => size,
            Err(e) => {
                if kind != KIND_CODE {
                    // The claim holds no metadata; leave nothing behind.
                    let _ = tokio::fs::remove_file(self.dir.join(format!("{id}.json"))).await;
                }
                return Err(e);
            }
        };
        let info = FileInfo {
            id: id.clone(),
            kind: kind.to_owned(),
            media_type: media_type_for(&name).to_owned(),
            name,
            size,
        };
        let meta = StoredMeta {
            info: info.clone(),
            description: description.to_owned(),
            created_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0),
        };
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| ToolsError::Files {
            message: format!("cannot describe `{}`: {e}", info.name),
        })?;
        let partial = self.dir.join(format!(".{id}.json.partial"));
        let write = async {
            tokio::fs::write(&partial, &json).await?;
            tokio::fs::rename(&partial, self.dir.join(format!("{id}.json"))).await
        };
        if let Err(e) = write.await {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(self.io_error(&format!("cannot store `{}`", info.name), &e));
        }
        Ok(info)
    }

    /// Writes the content of `id` whole (a temporary file renamed into place); its size.
    async fn write_content(
        &self,
        id: &str,
        name: &str,
        source: Source<'_>,
    ) -> Result<u64, ToolsError> {
        let partial = self.dir.join(format!(".{id}.partial"));
        let write = async {
            let size = match source {
                Source::Bytes(bytes) => {
                    tokio::fs::write(&partial, bytes).await?;
                    bytes.len() as u64
                }
                Source::File(path) => tokio::fs::copy(path, &partial).await?,
            };
            tokio::fs::rename(&partial, self.dir.join(id)).await?;
            Ok::<u64, std::io::Error>(size)
        };
        write.await.map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            self.io_error(&format!("cannot store `{name}`"), &e)
        })
    }
}

/// Where the content of a new file comes from.
enum Source<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

#[async_trait]
impl ConversationFiles for DirFiles {
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError> {
        let mut all: Vec<FileInfo> = self.read_all().await?.into_iter().map(|m| m.info).collect();
        all.sort_by(|a, b| (kind_rank(&a.kind), &a.id).cmp(&(kind_rank(&b.kind), &b.id)));
        Ok(all)
    }

    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError> {
        match self.meta(id).await? {
            Some(meta) => Ok(self.dir.join(&meta.info.id)),
            None => Err(ToolsError::NoSuchFile {
                reference: id.to_owned(),
            }),
        }
    }

    async fn add_output(
        &self,
        name: &str,
        path: &Path,
        description: &str,
    ) -> Result<FileInfo, ToolsError> {
        let size = tokio::fs::metadata(path)
            .await
            .map_err(|e| self.io_error(&format!("cannot read `{name}`"), &e))?
            .len();
        self.check_size(name, size)?;
        self.store(KIND_OUTPUT, None, name, description, Source::File(path))
            .await
    }

    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        self.check_size(name, bytes.len() as u64)?;
        self.store(KIND_DATA, None, name, "", Source::Bytes(bytes))
            .await
    }

    fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }
}

/// The listing order of kinds: uploads, code, outputs, data, then any other.
fn kind_rank(kind: &str) -> u8 {
    match kind {
        KIND_UPLOAD => 0,
        KIND_CODE => 1,
        KIND_OUTPUT => 2,
        KIND_DATA => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ids_are_assigned_per_kind_and_names_kept() {
        let dir = tempfile::tempdir().unwrap();
        let files = DirFiles::new(dir.path().join("files"));
        assert!(files.list().await.unwrap().is_empty());
        let a = files.add_upload("sales.csv", b"a,b\n1,2\n").await.unwrap();
        let b = files
            .add_upload("C:\\exports\\q3.xlsx", b"PK")
            .await
            .unwrap();
        let d = files.add_data("call_1_ab.json", b"[1]").await.unwrap();
        assert_eq!(
            (a.id.as_str(), b.id.as_str(), d.id.as_str()),
            ("upload_001", "upload_002", "data_001")
        );
        assert_eq!(a.name, "sales.csv");
        assert_eq!(a.media_type, "text/csv");
        assert_eq!(a.size, 8);
        assert_eq!(b.name, "q3.xlsx");
        assert_eq!(d.kind, KIND_DATA);
        let src = dir.path().join("chart.png");
        std::fs::write(&src, b"\x89PNG").unwrap();
        let o = files
            .add_output("chart.png", &src, "a chart")
            .await
            .unwrap();
        assert_eq!(
            (o.id.as_str(), o.media_type.as_str()),
            ("output_001", "image/png")
        );
        let c = files
            .add_code("code_x1", "code_x1.py", "print(1)")
            .await
            .unwrap();
        assert_eq!(c.kind, KIND_CODE);
        let ids: Vec<String> = files
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(
            ids,
            [
                "upload_001",
                "upload_002",
                "code_x1",
                "output_001",
                "data_001"
            ]
        );
        let path = files.local_path("upload_001").await.unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"a,b\n1,2\n");
        assert_eq!(files.max_file_bytes(), 200 * 1024 * 1024);
    }

    #[tokio::test]
    async fn find_by_id_then_name_with_uploads_first() {
        let dir = tempfile::tempdir().unwrap();
        let files = DirFiles::new(dir.path());
        files.add_data("sales.csv", b"x").await.unwrap();
        files.add_upload("sales.csv", b"old").await.unwrap();
        files.add_upload("sales.csv", b"new").await.unwrap();
        files.add_data("only.json", b"[]").await.unwrap();
        let found = files.find("sales.csv").await.unwrap().unwrap();
        assert_eq!(found.id, "upload_002", "the newest upload of that name");
        assert_eq!(
            files.find("only.json").await.unwrap().unwrap().id,
            "data_002"
        );
        assert_eq!(
            files.find("data_001").await.unwrap().unwrap().name,
            "sales.csv"
        );
        assert!(files.find("nothing.csv").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn errors_name_the_reference_never_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let files = DirFiles::new(dir.path()).with_max_file_bytes(4);
        let shown = dir.path().display().to_string();
        for id in ["upload_009", "../secret", "/etc/passwd", ""] {
            let err = files.local_path(id).await.unwrap_err();
            assert!(matches!(err, ToolsError::NoSuchFile { .. }), "{id}: {err}");
            assert!(!err.to_string().contains(&shown), "{err}");
        }
        assert_eq!(
            files
                .local_path("upload_009")
                .await
                .unwrap_err()
                .to_string(),
            "no file `upload_009` in this conversation"
        );
        let err = files.add_upload("big.csv", b"12345").await.unwrap_err();
        assert!(
            matches!(
                err,
                ToolsError::FileTooLarge {
                    size: 5,
                    limit: 4,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("`big.csv`"), "{err}");
        let err = files.add_upload("..", b"1").await.unwrap_err();
        assert!(matches!(err, ToolsError::FileName { .. }), "{err}");
        let err = files
            .add_output("gone.png", &dir.path().join("missing.png"), "")
            .await
            .unwrap_err();
        assert!(matches!(err, ToolsError::Files { .. }), "{err}");
        assert!(!err.to_string().contains(&shown), "{err}");
        assert!(
            files.list().await.unwrap().is_empty(),
            "nothing left behind"
        );
        let err = files.add_code("../x", "x.py", "").await.unwrap_err();
        assert!(matches!(err, ToolsError::FileName { .. }), "{err}");
    }

    #[tokio::test]
    async fn concurrent_adds_get_distinct_ids() {
        let dir = tempfile::tempdir().unwrap();
        let files = DirFiles::new(dir.path());
        let adds: Vec<_> = (0..8)
            .map(|i| {
                let files = files.clone();
                tokio::spawn(async move { files.add_data(&format!("d{i}.json"), b"{}").await })
            })
            .collect();
        let mut ids = Vec::new();
        for add in adds {
            ids.push(add.await.unwrap().unwrap().id);
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 8, "{ids:?}");
    }

    #[test]
    fn media_types_and_ids() {
        assert_eq!(media_type_for("a.CSV"), "text/csv");
        assert_eq!(media_type_for("noext"), "application/octet-stream");
        assert!(is_file_id("upload_001") && is_file_id("code_a-b"));
        assert!(!is_file_id("a/b") && !is_file_id("..") && !is_file_id(""));
    }
}
