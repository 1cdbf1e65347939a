//! The storage crate's conversation workspace as the tools crate's [`ConversationFiles`]: the
//! handle a run gives each of its tool calls, bound to one conversation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ba_storage::{ConversationId, StorageError};
use ba_storage::{FileMeta, NewFile, Workspace};
use ba_tools::{ConversationFiles, FileInfo, ToolsError};

/// One conversation's workspace as a tool sees it. Every method names files of that
/// conversation only, and no error carries a local path: a missing file names the reference, a
/// file over a limit names the file.
#[derive(Debug, Clone)]
pub struct WorkspaceFiles {
    workspace: Arc<dyn Workspace>,
    conversation: ConversationId,
}

impl WorkspaceFiles {
    /// The files of `conversation` in `workspace`.
    pub fn new(workspace: Arc<dyn Workspace>, conversation: ConversationId) -> Self {
        Self {
            workspace,
            conversation,
        }
    }

    /// The conversation whose files these are.
    pub fn conversation(&self) -> &ConversationId {
        &self.conversation
    }

    /// The workspace.
    pub fn workspace(&self) -> &dyn Workspace {
        self.workspace.as_ref()
    }
}

/// The tool's view of a file's metadata.
pub fn file_info(meta: &FileMeta) -> FileInfo {
    FileInfo {
        id: meta.id.clone(),
        kind: meta.kind,
        name: meta.name.clone(),
        media_type: meta.media_type.clone(),
        size: meta.size,
        created_ms: meta.created_ms,
    }
}

/// A storage error as the tools crate's, without the local paths an I/O error may name.
fn tools_error(reference: &str, err: StorageError) -> ToolsError {
    match err {
        StorageError::NoFile { id, .. } => ToolsError::NoSuchFile { reference: id },
        StorageError::TooLarge { what, size, limit } => ToolsError::FileTooLarge {
            name: what,
            size,
            limit,
        },
        StorageError::InvalidId { value, reason, .. } => ToolsError::FileName {
            name: value,
            reason: reason.to_owned(),
        },
        StorageError::Io { .. } => ToolsError::Files {
            message: format!("`{reference}` could not be read or written"),
        },
        other => ToolsError::Files {
            message: format!("`{reference}`: {other}"),
        },
    }
}

#[async_trait]
impl ConversationFiles for WorkspaceFiles {
    async fn list(&self) -> Result<Vec<FileInfo>, ToolsError> {
        let files = self
            .workspace
            .list(&self.conversation)
            .await
            .map_err(|e| tools_error("the file list", e))?;
        Ok(files.iter().map(file_info).collect())
    }

    async fn find(&self, reference: &str) -> Result<Option<FileInfo>, ToolsError> {
        let found = self
            .workspace
            .find(&self.conversation, reference)
            .await
            .map_err(|e| tools_error(reference, e))?;
        Ok(found.as_ref().map(file_info))
    }

    async fn local_path(&self, id: &str) -> Result<PathBuf, ToolsError> {
        self.workspace
            .local_path(&self.conversation, id)
            .await
            .map_err(|e| tools_error(id, e))
    }

    async fn add_output(
        &self,
        name: &str,
        path: &Path,
        description: &str,
    ) -> Result<FileInfo, ToolsError> {
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|_| ToolsError::Files {
                message: format!("the output `{name}` could not be opened"),
            })?;
        let meta = self
            .workspace
            .put(
                &self.conversation,
                NewFile::output(name).with_description(description),
                &mut file,
            )
            .await
            .map_err(|e| tools_error(name, e))?;
        Ok(file_info(&meta))
    }

    async fn add_data(&self, name: &str, bytes: &[u8]) -> Result<FileInfo, ToolsError> {
        let meta = self
            .workspace
            .put_bytes(&self.conversation, NewFile::data(name), bytes)
            .await
            .map_err(|e| tools_error(name, e))?;
        Ok(file_info(&meta))
    }

    fn max_file_bytes(&self) -> u64 {
        self.workspace.limits().max_file_bytes
    }
}

/// The longest description of a file the note quotes, in characters.
const NOTE_DESCRIPTION_CHARS: usize = 300;

/// The note a user message carries for the model about the files attached to it: each file's
/// `<file_ref>` id, name, type, size and description, and how the model reads it; `None`
/// without files. Never a path. The one place this text is written: the run puts it in the
/// message's entry as a block of its own, after what the person wrote.
pub(crate) fn attachment_note(files: &[FileMeta]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut out = String::from(
        "Uploaded files (read one with file_reader {\"file\": \"<id>\"}; run_python finds \
         them in its working folder under their names):",
    );
    for f in files {
        out.push_str(&format!(
            "\n- <file_ref>{}</file_ref> {} ({}, {} bytes)",
            f.id, f.name, f.media_type, f.size
        ));
        let description = f.description.trim();
        if !description.is_empty() {
            let mut shown: String = description.chars().take(NOTE_DESCRIPTION_CHARS).collect();
            if shown.len() < description.len() {
                shown.push('…');
            }
            out.push_str(&format!(" — {shown}"));
        }
    }
    Some(out)
}

/// The record of the files attached to a user message, as a front end shows them.
pub(crate) fn attachment_records(files: &[FileMeta]) -> Vec<ba_protocol::AttachmentRecord> {
    files
        .iter()
        .map(|f| ba_protocol::AttachmentRecord {
            id: f.id.to_string(),
            name: f.name.clone(),
            media_type: f.media_type.clone(),
            size: f.size,
        })
        .collect()
}
