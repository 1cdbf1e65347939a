//! The upload store (ST4): files a user uploads, with an id (`upload_001`, …), name, type,
//! size and description, so the model can cite them as `<file_ref>`. Superseded by the
//! conversation workspace ([`crate::workspace`]), where [`UploadMeta`] now lives.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::id::check_name;
pub use crate::workspace::UploadMeta;
use crate::workspace::upload::file_type;

/// Uploads on disk: `<root>/<id>.bin` and `<root>/<id>.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadStore {
    root: PathBuf,
}

impl UploadStore {
    /// A store under `root`, created if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| StorageError::io("creating", &root, e))?;
        Ok(Self { root })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores an upload under the next free id.
    pub fn add(
        &self,
        name: &str,
        media_type: Option<&str>,
        bytes: &[u8],
        description: &str,
    ) -> Result<UploadMeta> {
        if name.trim().is_empty() {
            return Err(StorageError::invalid("upload name", "it is empty"));
        }
        // The metadata file is claimed with create_new, so two writers never share an id.
        for n in 1u32.. {
            let id = format!("upload_{n:03}");
            let meta_path = self.root.join(format!("{id}.json"));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&meta_path)
            {
                Ok(_) => {
                    let meta = UploadMeta {
                        id: id.clone(),
                        name: name.to_owned(),
                        file_type: file_type(name),
                        media_type: media_type.map(str::to_owned),
                        size: bytes.len() as u64,
                        description: description.to_owned(),
                    };
                    write_atomic(&self.root.join(format!("{id}.bin")), bytes)?;
                    let json =
                        serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
                            what: format!("metadata of {id}"),
                            message: e.to_string(),
                        })?;
                    write_atomic(&meta_path, &json)?;
                    return Ok(meta);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StorageError::io("creating", meta_path, e)),
            }
        }
        Err(StorageError::invalid("upload", "no free id"))
    }

    /// The metadata of an upload.
    pub fn meta(&self, id: &str) -> Result<UploadMeta> {
        check_name("upload id", id)?;
        let path = self.root.join(format!("{id}.json"));
        let bytes = std::fs::read(&path).map_err(|e| StorageError::io("reading", &path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
            what: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// The content of an upload.
    pub fn read(&self, id: &str) -> Result<Vec<u8>> {
        check_name("upload id", id)?;
        let path = self.root.join(format!("{id}.bin"));
        std::fs::read(&path).map_err(|e| StorageError::io("reading", &path, e))
    }

    /// Every upload, by id.
    pub fn list(&self) -> Result<Vec<UploadMeta>> {
        let read = std::fs::read_dir(&self.root)
            .map_err(|e| StorageError::io("listing", &self.root, e))?;
        let mut out = Vec::new();
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".json") {
                // A claimed id whose metadata is not written yet is skipped.
                if let Ok(meta) = self.meta(id) {
                    out.push(meta);
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_get_sequential_ids_and_typed_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let store = UploadStore::open(dir.path()).unwrap();
        let a = store
            .add(
                "sales_data.csv",
                Some("text/csv"),
                b"region,q1\n",
                "2024 sales",
            )
            .unwrap();
        let b = store.add("../report.MD", None, b"# T", "template").unwrap();
        assert_eq!(
            (a.id.as_str(), a.file_type.as_str(), a.size),
            ("upload_001", "csv", 10)
        );
        assert_eq!(
            (b.id.as_str(), b.file_type.as_str()),
            ("upload_002", "markdown")
        );
        assert_eq!(store.read("upload_002").unwrap(), b"# T");
        assert_eq!(store.list().unwrap(), [a, b]);
        assert!(store.read("../upload_001").is_err());
        assert!(store.add(" ", None, b"", "").is_err());
    }
}
