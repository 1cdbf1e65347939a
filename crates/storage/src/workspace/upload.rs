//! [`UploadMeta`]: how an upload is described to clients (the server's `/uploads` answers).

use serde::{Deserialize, Serialize};

use super::FileMeta;

/// Metadata of an upload, in the shape the upload routes answer with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadMeta {
    /// `upload_001`, `upload_002`, …
    pub id: String,
    /// The file name as uploaded (shown, never used as a path).
    pub name: String,
    /// The type: the lowercased extension (`csv`, `xlsx`) or `markdown` for `.md`.
    pub file_type: String,
    /// The media type the client sent, if any.
    pub media_type: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// What the user said it is.
    pub description: String,
}

impl UploadMeta {
    /// The upload view of a workspace file.
    pub fn from_file(file: &FileMeta) -> Self {
        Self {
            id: file.id.clone(),
            name: file.name.clone(),
            file_type: file_type(&file.name),
            media_type: Some(file.media_type.clone()),
            size: file.size,
            description: file.description.clone(),
        }
    }
}

/// The lowercased extension of `name` (`markdown` for `.md`), or `file`.
pub(crate) fn file_type(name: &str) -> String {
    match name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()) {
        Some(e) if e == "md" => "markdown".to_owned(),
        Some(e) if !e.is_empty() && e.len() <= 10 => e,
        _ => "file".to_owned(),
    }
}
