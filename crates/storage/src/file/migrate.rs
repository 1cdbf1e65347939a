//! The move of the previous layout into the conversations' workspaces, on open.
//!
//! Before workspaces, uploads and code lived in folders of their own beside the logs:
//!
//! ```text
//! uploads/<conversation>/upload_NNN.bin        content
//! uploads/<conversation>/upload_NNN.json       its id, name, media type and description
//! code/<conversation>/<code_id>.<ext>          content
//! code/<conversation>/<code_id>.meta.json      a CodeMeta
//! ```
//!
//! Each file of a conversation that exists is taken into its workspace with its id, name and
//! description, and removed from the old folder once its copy is in place; emptied folders go
//! too. Opening again finds nothing left to move (or a copy already in place, whose old file is
//! then removed), so a move cut short by a crash is finished by the next open. Files of no
//! conversation, or of one that does not exist, and files that cannot be read stay where they
//! are, with a warning in [`FileStore::warnings`].

use std::io;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::FileStore;
use crate::error::Result;
use crate::id::{ConversationId, check_name};
use crate::workspace::code::CodeMeta;
use crate::workspace::{FileKind, NewFile, Prepared, hex};

/// One old file to move: where its metadata and content are, and what it becomes.
struct OldFile<'a> {
    /// `uploads/<c>/upload_001.json` as shown in warnings.
    shown: String,
    meta_path: &'a Path,
    content: std::path::PathBuf,
    id: String,
    prepared: Prepared,
}

impl FileStore {
    /// Moves the files of the previous layout into the workspaces (see the module docs). A
    /// file that cannot be moved is a warning, never a failed open.
    pub(super) fn migrate_previous_layout(&self) -> Result<()> {
        for folder in ["uploads", "code"] {
            let top = self.inner.root.join(folder);
            let Ok(read) = std::fs::read_dir(&top) else {
                continue;
            };
            let mut loose = 0usize;
            for item in read.flatten() {
                let name = item.file_name().to_string_lossy().into_owned();
                if !item.file_type().is_ok_and(|t| t.is_dir()) {
                    loose += 1;
                    continue;
                }
                let conversation = match ConversationId::new(name.clone()) {
                    Ok(id) if self.log_path(&id).is_file() => id,
                    _ => {
                        self.warn(format!(
                            "{folder}/{name}/: conversation `{name}` does not exist; its files \
                             were left in place"
                        ));
                        continue;
                    }
                };
                self.migrate_conversation(folder, &item.path(), &conversation);
                let _ = std::fs::remove_dir(item.path());
            }
            if loose > 0 {
                self.warn(format!(
                    "{folder}/: {loose} file(s) belong to no conversation; left in place"
                ));
            }
            let _ = std::fs::remove_dir(&top);
        }
        Ok(())
    }

    fn migrate_conversation(&self, folder: &str, dir: &Path, conversation: &ConversationId) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut names: Vec<String> = read
            .flatten()
            .map(|item| item.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let meta_path = dir.join(&name);
            let shown = format!("{folder}/{conversation}/{name}");
            let old = if folder == "uploads" {
                let Some(id) = name.strip_suffix(".json") else {
                    continue;
                };
                old_upload(&meta_path, id, dir)
            } else {
                let Some(id) = name.strip_suffix(".meta.json") else {
                    continue;
                };
                old_code(&meta_path, id, dir)
            };
            let result = old.and_then(|(id, content, prepared)| {
                self.move_one(
                    conversation,
                    OldFile {
                        shown: shown.clone(),
                        meta_path: &meta_path,
                        content,
                        id,
                        prepared,
                    },
                )
            });
            if let Err(why) = result {
                self.warn(format!("{shown}: {why}; left in place"));
            }
        }
    }

    fn move_one(
        &self,
        conversation: &ConversationId,
        old: OldFile<'_>,
    ) -> std::result::Result<(), String> {
        let workspace = &self.inner.workspace;
        let created_ms = std::fs::metadata(old.meta_path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or_else(|| self.now());
        let existing = self
            .inner
            .workspace
            .existing(conversation, &old.id)
            .map_err(|e| e.to_string())?;
        if let Some(existing) = existing {
            let sha = sha256_of(&old.content).map_err(|e| format!("reading its content: {e}"))?;
            if sha != existing.sha256 {
                return Err(format!(
                    "the workspace of `{conversation}` already holds another `{}`",
                    old.id
                ));
            }
        } else {
            workspace
                .adopt(
                    conversation,
                    &old.prepared,
                    &old.id,
                    &old.content,
                    created_ms,
                )
                .map_err(|e| e.to_string())?;
        }
        for path in [&old.content, &old.meta_path.to_path_buf()] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("moved, but the old file stays: {e}")),
            }
        }
        tracing::info!(
            "{}: moved into the workspace of `{conversation}`",
            old.shown
        );
        Ok(())
    }
}

type Old = std::result::Result<(String, std::path::PathBuf, Prepared), String>;

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> std::result::Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not valid metadata: {e}"))
}

/// What the previous layout kept beside an upload (other fields it wrote are not needed).
#[derive(serde::Deserialize)]
struct OldUpload {
    id: String,
    name: String,
    media_type: Option<String>,
    #[serde(default)]
    description: String,
}

fn old_upload(meta_path: &Path, id: &str, dir: &Path) -> Old {
    if FileKind::Upload.number_of(id).is_none() {
        return Err(format!("`{id}` is not an upload id"));
    }
    let meta: OldUpload = read_json(meta_path)?;
    if meta.id != id {
        return Err(format!("its metadata names `{}`", meta.id));
    }
    let mut file = NewFile::upload(meta.name, meta.description);
    file.media_type = meta.media_type;
    let prepared = Prepared::new(file).map_err(|e| e.to_string())?;
    Ok((id.to_owned(), dir.join(format!("{id}.bin")), prepared))
}

fn old_code(meta_path: &Path, id: &str, dir: &Path) -> Old {
    let meta: CodeMeta = read_json(meta_path)?;
    if meta.code_id != id {
        return Err(format!("its metadata names `{}`", meta.code_id));
    }
    check_name("file name", &meta.file_name).map_err(|e| e.to_string())?;
    let file = NewFile::code(id, meta.file_name.clone())
        .with_description(meta.description)
        .with_attribute("language", meta.language)
        .with_attribute("line_count", meta.line_count.to_string())
        .with_attribute("char_count", meta.char_count.to_string());
    let prepared = Prepared::new(file).map_err(|e| e.to_string())?;
    Ok((id.to_owned(), dir.join(&meta.file_name), prepared))
}

fn sha256_of(path: &Path) -> io::Result<String> {
    let mut hasher = Sha256::new();
    io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}
