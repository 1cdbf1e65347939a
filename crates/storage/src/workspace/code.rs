//! Code blocks in a workspace: code the model writes, kept as [`FileKind::Code`] files
//! named `<code_id>.<ext>`, with the language checked against the supported list (an unknown one
//! falls back to Python with a warning) and line and character counts as attributes, so
//! reports can cite them as `<code_ref>`.

use serde::{Deserialize, Serialize};

use super::{FileKind, FileMeta, NewFile, Workspace};
use crate::error::{Result, StorageError};
use crate::id::ConversationId;

/// Supported languages: canonical name, file extension, accepted aliases.
pub const LANGUAGES: &[(&str, &str, &[&str])] = &[
    ("python", "py", &["py", "python3"]),
    ("javascript", "js", &["js", "node"]),
    ("html", "html", &["htm"]),
    ("css", "css", &[]),
    ("sql", "sql", &[]),
    ("markdown", "md", &["md"]),
    ("typescript", "ts", &["ts"]),
    ("json", "json", &[]),
    ("yaml", "yaml", &["yml"]),
    ("xml", "xml", &[]),
    ("shell", "sh", &["sh", "bash", "zsh"]),
    ("r", "r", &[]),
    ("java", "java", &[]),
    ("c", "c", &[]),
    ("cpp", "cpp", &["c++", "cc", "cxx"]),
    ("go", "go", &["golang"]),
    ("rust", "rs", &["rs"]),
    ("php", "php", &[]),
    ("ruby", "rb", &["rb"]),
];

/// The canonical language and its extension, or `None` when unsupported.
pub fn language(name: &str) -> Option<(&'static str, &'static str)> {
    let wanted = name.trim().to_ascii_lowercase();
    LANGUAGES
        .iter()
        .find(|(lang, _, aliases)| *lang == wanted || aliases.contains(&wanted.as_str()))
        .map(|(lang, ext, _)| (*lang, *ext))
}

/// Metadata of a saved code block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeMeta {
    /// The id (`code_sales_analysis`).
    pub code_id: String,
    /// Canonical language after validation.
    pub language: String,
    /// File name inside the store (`<code_id>.<ext>`).
    pub file_name: String,
    /// What the code does.
    pub description: String,
    /// Number of lines.
    pub line_count: usize,
    /// Number of characters (Unicode scalar values).
    pub char_count: usize,
    /// The conversation it belongs to.
    pub conversation_id: Option<String>,
}

/// The result of a save: the metadata and, when the language was replaced, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// Metadata.
    pub meta: CodeMeta,
    /// Set when an unsupported language fell back to Python.
    pub warning: Option<String>,
}

impl CodeMeta {
    /// The code view of a workspace file of `conversation`.
    pub fn from_file(conversation: &ConversationId, file: &FileMeta) -> Self {
        let attribute = |key: &str| file.attributes.get(key).map(String::as_str);
        let count = |key: &str| attribute(key).and_then(|v| v.parse().ok()).unwrap_or(0);
        let language = attribute("language")
            .map(str::to_owned)
            .or_else(|| {
                let ext = file.name.rsplit_once('.')?.1;
                language(ext).map(|(lang, _)| lang.to_owned())
            })
            .unwrap_or_else(|| "python".to_owned());
        Self {
            code_id: file.id.to_string(),
            language,
            file_name: file.name.clone(),
            description: file.description.clone(),
            line_count: count("line_count"),
            char_count: count("char_count"),
            conversation_id: Some(conversation.to_string()),
        }
    }
}

fn no_block(code_id: &str) -> StorageError {
    StorageError::invalid(
        format!("code `{code_id}`"),
        "no code block with this id was saved",
    )
}

/// Saves (or replaces) the code block `code_id` of `conversation`.
pub async fn save_code(
    workspace: &dyn Workspace,
    conversation: &ConversationId,
    code_id: &str,
    code: &str,
    language_name: &str,
    description: &str,
) -> Result<Saved> {
    let (lang, ext, warning) = match language(language_name) {
        Some((lang, ext)) => (lang, ext, None),
        None => {
            let warning = format!(
                "code `{code_id}`: language `{language_name}` is not supported; saved as python"
            );
            tracing::warn!("{warning}");
            ("python", "py", Some(warning))
        }
    };
    let file = NewFile::code(code_id, format!("{code_id}.{ext}"))
        .with_description(description)
        .with_attribute("language", lang)
        .with_attribute("line_count", code.lines().count().to_string())
        .with_attribute("char_count", code.chars().count().to_string());
    let meta = workspace
        .put_bytes(conversation, file, code.as_bytes())
        .await?;
    Ok(Saved {
        meta: CodeMeta::from_file(conversation, &meta),
        warning,
    })
}

/// The code block `code_id` of `conversation` and its metadata.
pub async fn get_code(
    workspace: &dyn Workspace,
    conversation: &ConversationId,
    code_id: &str,
) -> Result<(CodeMeta, String)> {
    match workspace.meta(conversation, code_id).await? {
        Some(meta) if meta.kind == FileKind::Code => {}
        _ => return Err(no_block(code_id)),
    }
    let max = workspace.limits().max_file_bytes;
    let (meta, bytes) = match workspace.read_bytes(conversation, code_id, max).await {
        Err(StorageError::NoFile { .. }) => return Err(no_block(code_id)),
        other => other?,
    };
    let code = String::from_utf8(bytes).map_err(|e| StorageError::Format {
        what: format!("code `{code_id}`"),
        message: e.to_string(),
    })?;
    Ok((CodeMeta::from_file(conversation, &meta), code))
}

/// The code blocks of `conversation`, by id.
pub async fn list_code(
    workspace: &dyn Workspace,
    conversation: &ConversationId,
) -> Result<Vec<CodeMeta>> {
    Ok(workspace
        .list(conversation)
        .await?
        .iter()
        .filter(|f| f.kind == FileKind::Code)
        .map(|f| CodeMeta::from_file(conversation, f))
        .collect())
}
