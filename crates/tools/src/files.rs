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
use ba_protocol::{FileId, FileKind, NamedFile};
use serde::{Deserialize, Serialize};

use crate::error::ToolsError;

/// One file of the conversation, as a tool sees it (no path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The id the model names it by: `upload_001`, `output_001`, `data_001`, `code_…`.
    pub id: FileId,
    /// What the file is.
    pub kind: FileKind,
    /// The original or display name (`sales.csv`, `chart.png`); never a path.
    pub name: String,
    /// The media type (`text/csv`, `image/png`, …).
    pub media_type: String,
    /// The size in bytes.
    pub size: u64,
    /// When it was stored, in ms since the Unix epoch (0 when not known).
    #[serde(default)]
    pub created_ms: i64,
}

impl NamedFile for FileInfo {
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

/// The files of the conversation a call belongs to. The orchestrator gives each call the handle
/// of its own conversation only; a tool cannot name another.
///
/// Errors never hold a local path: a missing file is [`ToolsError::NoSuchFile`] naming the
/// reference, a file over the limit [`ToolsError::FileTooLarge`] naming the file.
#[async_trait]
pub trait ConversationFiles: Send + Sync + fmt::Debug {
    /// Every file of the conversation, by kind then id.
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError>;

    /// The file `reference` names: by id, else by original name (the newest upload of that
    /// name, else the newest file of any kind), `None` when nothing matches. By default
    /// [`find_in`] over [`list`](ConversationFiles::list).
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

/// The file of `files` that `reference` names, by the one rule every store holds
/// ([`ba_protocol::find_file`]): the one with that id, else among those with that original
/// name the newest upload, else the newest file of any kind.
pub fn find_in(files: &[FileInfo], reference: &str) -> Option<FileInfo> {
    ba_protocol::find_file(files, reference).cloned()
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
        self.store(FileKind::Upload, None, name, "", Source::Bytes(bytes))
            .await
    }

    /// Stores `code` as the code file `id` named `name`, replacing any file of that id.
    ///
    /// # Errors
    /// [`ToolsError::FileName`] when `id` is not a valid id or `name` has no file name, else as
    /// [`add_upload`](Self::add_upload).
    pub async fn add_code(&self, id: &str, name: &str, code: &str) -> Result<FileInfo, ToolsError> {
        let id = FileId::parse(id).map_err(|e| ToolsError::FileName {
            name: e.value,
            reason: e.reason.to_owned(),
        })?;
        self.check_size(name, code.len() as u64)?;
        self.store(
            FileKind::Code,
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
            if FileId::parse(id).is_err() {
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
        if FileId::parse(id).is_err() {
            return Ok(None);
        }
        match tokio::fs::read(self.dir.join(format!("{id}.json"))).await {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(&format!("cannot read `{id}`"), &e)),
        }
    }

    /// Claims the next free id of `kind` by creating its metadata file exclusively.
    async fn claim(&self, kind: FileKind) -> Result<FileId, ToolsError> {
        let mut next = self
            .read_all()
            .await?
            .iter()
            .filter_map(|m| kind.number_of(&m.info.id))
            .max()
            .unwrap_or(0)
            + 1;
        loop {
            let id = kind.id(next);
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
        kind: FileKind,
        id: Option<FileId>,
        name: &str,
        description: &str,
        source: Source<'_>,
    ) -> Result<FileInfo, ToolsError> {
        let name = display_name(name)?;
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|e| self.io_error("cannot make the files folder", &e))?;
        let id = match id {
            Some(id) => id,
            None => self.claim(kind).await?,
        };
        let written = self.write_content(&id, &name, source).await;
        let size = match written {
            Ok(size) => size,
            Err(e) => {
                if kind.assigns_ids() {
                    // The claim holds no metadata; leave nothing behind.
                    let _ = tokio::fs::remove_file(self.dir.join(format!("{id}.json"))).await;
                }
                return Err(e);
            }
        };
        let info = FileInfo {
            id: id.clone(),
            kind,
            media_type: media_type_for(&name).to_owned(),
            name,
            size,
            created_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0),
        };
        let meta = StoredMeta {
            info: info.clone(),
            description: description.to_owned(),
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
        all.sort_by(|a, b| (a.kind, &a.id).cmp(&(b.kind, &b.id)));
        Ok(all)
    }

    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError> {
        match self.meta(id).await? {
            Some(meta) => Ok(self.dir.join(meta.info.id.as_str())),
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
        self.store(
            FileKind::Output,
            None,
            name,
            description,
            Source::File(path),
        )
        .await
    }

    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        self.check_size(name, bytes.len() as u64)?;
        self.store(FileKind::Data, None, name, "", Source::Bytes(bytes))
            .await
    }

    fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
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
        assert_eq!(d.kind, FileKind::Data);
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
        assert_eq!(c.kind, FileKind::Code);
        let ids: Vec<String> = files
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.id.to_string())
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

    #[test]
    fn a_name_finds_the_newest_file_not_the_last_listed() {
        let file = |id: &str, kind, name: &str, created_ms| FileInfo {
            id: FileId::parse(id).unwrap(),
            kind,
            name: name.to_owned(),
            media_type: media_type_for(name).to_owned(),
            size: 1,
            created_ms,
        };
        // Listed by kind then id, as `list` gives them: the output comes before the data.
        let files = [
            file("upload_001", FileKind::Upload, "sales.csv", 10),
            file("code_b", FileKind::Code, "plot.py", 30),
            file("code_a", FileKind::Code, "plot.py", 20),
            file("output_001", FileKind::Output, "chart.png", 50),
            file("data_001", FileKind::Data, "chart.png", 40),
        ];
        let found = |r: &str| find_in(&files, r).map(|f| f.id.to_string());
        assert_eq!(found("chart.png").as_deref(), Some("output_001"));
        assert_eq!(found("plot.py").as_deref(), Some("code_b"));
        assert_eq!(found("sales.csv").as_deref(), Some("upload_001"));
        assert_eq!(found("code_a").as_deref(), Some("code_a"));
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
    fn media_types() {
        assert_eq!(media_type_for("a.CSV"), "text/csv");
        assert_eq!(media_type_for("noext"), "application/octet-stream");
    }
}
