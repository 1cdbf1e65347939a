//! A final answer as a document that leaves the page: Markdown (its code in fenced blocks,
//! links to its files) or one self-contained HTML file (its tables, its charts drawn as SVG
//! images, its code, a print stylesheet; no script and nothing fetched when it is opened — its
//! Content-Security-Policy allows only inline styles and `data:` images). The API
//! (`GET …/{id}/report/{seq}?format=md|html`), the page's Export buttons and `ba-agent report`
//! all call [`export_report`].
//!
//! The report is the model's, so it is hostile: Markdown is rendered and sanitised as the page
//! does, an HTML report is sanitised (its scripts go; the ECharts charts they drew are read from
//! their options and drawn here), and every text this module adds is escaped.

mod chart;
mod html;

use std::fmt::Write as _;
use std::str::FromStr;

use ba_protocol::{ApiResponse, ContentType, LogRole};
use ba_storage::{ConversationId, ConversationStore, StorageError, Workspace, get_code};

/// The largest image a report embeds (bigger ones are linked).
pub const MAX_EMBEDDED_IMAGE: u64 = 8 * 1024 * 1024;
/// The largest code block a report includes in full (longer ones are cut, and say so).
pub const MAX_CODE_CHARS: usize = 200_000;

/// The two shapes of an exported report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// Markdown, with fenced code blocks and links to the conversation's files.
    Markdown,
    /// One self-contained HTML document.
    Html,
}

impl ReportFormat {
    /// The file extension (`md`, `html`).
    pub fn extension(self) -> &'static str {
        match self {
            Self::Markdown => "md",
            Self::Html => "html",
        }
    }

    /// The media type, with its charset.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Markdown => "text/markdown; charset=utf-8",
            Self::Html => "text/html; charset=utf-8",
        }
    }
}

impl FromStr for ReportFormat {
    type Err = ExportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "md" | "markdown" => Ok(Self::Markdown),
            "html" | "htm" => Ok(Self::Html),
            _ => Err(ExportError::Format(s.to_string())),
        }
    }
}

/// Why a report could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The format is neither `md` nor `html`.
    #[error("unknown report format {0:?}: use md or html")]
    Format(String),
    /// The conversation has no final answer (yet, or after its rewinds).
    #[error("conversation {0} has no final answer to export")]
    NoAnswer(String),
    /// The entry named is not a final answer of the conversation's history.
    #[error(
        "entry {seq} of conversation {conversation} is not a final answer \
         (its answers are at {answers})"
    )]
    NotAnAnswer {
        /// The conversation.
        conversation: String,
        /// The entry asked for.
        seq: u64,
        /// Where the answers are, for the message.
        answers: String,
    },
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// An exported report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedReport {
    /// A file name for it (`report-<title>-<seq>.html`).
    pub file_name: String,
    /// Its format.
    pub format: ReportFormat,
    /// The document.
    pub body: String,
    /// The entry of the answer.
    pub seq: u64,
}

/// What a report is made of, read from the store.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) conversation: String,
    pub(crate) title: String,
    pub(crate) question: String,
    pub(crate) answered_at: String,
    pub(crate) seq: u64,
    pub(crate) answer: ApiResponse,
    /// `(index, language, description, code)` of each code reference.
    pub(crate) codes: Vec<(usize, String, String, String)>,
    /// Each file reference, with its bytes when it is an image small enough to embed.
    pub(crate) files: Vec<FilePart>,
}

/// A file a report names.
#[derive(Debug)]
pub(crate) struct FilePart {
    pub(crate) index: usize,
    pub(crate) file_id: String,
    pub(crate) name: String,
    pub(crate) media_type: String,
    pub(crate) image: Option<Vec<u8>>,
}

/// The final answer at `seq` (default: the last one of the history, rewinds applied) of
/// conversation `id` as a document in `format`.
///
/// # Errors
/// [`ExportError::NoAnswer`] or [`ExportError::NotAnAnswer`] when there is nothing to export
/// there; [`ExportError::Storage`] when the store fails (an unknown conversation among them).
pub async fn export_report(
    store: &dyn ConversationStore,
    id: &ConversationId,
    seq: Option<u64>,
    format: ReportFormat,
) -> Result<ExportedReport, ExportError> {
    let parts = read_parts(store, id, seq).await?;
    let body = match format {
        ReportFormat::Markdown => html::markdown(&parts),
        ReportFormat::Html => html::document(&parts),
    };
    Ok(ExportedReport {
        file_name: format!(
            "report-{}-{}.{}",
            slug(&parts.title),
            parts.seq,
            format.extension()
        ),
        format,
        body,
        seq: parts.seq,
    })
}

async fn read_parts(
    store: &dyn ConversationStore,
    id: &ConversationId,
    seq: Option<u64>,
) -> Result<Parts, ExportError> {
    let meta = store.metadata(id).await?;
    let history = ba_storage::after_rewinds(store.load(id).await?.entries);
    let is_answer = |s: &ba_storage::StoredEntry| {
        s.entry.role == LogRole::Assistant
            && s.entry
                .records
                .api_response
                .as_ref()
                .is_some_and(|a| !a.response.trim().is_empty())
    };
    let at = match seq {
        None => history
            .iter()
            .rposition(is_answer)
            .ok_or_else(|| ExportError::NoAnswer(id.to_string()))?,
        Some(n) => history
            .iter()
            .position(|s| s.seq == n && is_answer(s))
            .ok_or_else(|| {
                let answers: Vec<String> = history
                    .iter()
                    .filter(|s| is_answer(s))
                    .map(|s| s.seq.to_string())
                    .collect();
                ExportError::NotAnAnswer {
                    conversation: id.to_string(),
                    seq: n,
                    answers: if answers.is_empty() {
                        "none".into()
                    } else {
                        answers.join(", ")
                    },
                }
            })?,
    };
    let Some(stored) = history.get(at) else {
        return Err(ExportError::NoAnswer(id.to_string()));
    };
    let Some(answer) = stored.entry.records.api_response.as_deref().cloned() else {
        return Err(ExportError::NoAnswer(id.to_string()));
    };
    let question = history
        .get(..at)
        .unwrap_or_default()
        .iter()
        .rev()
        .find(|s| s.entry.role == LogRole::User && s.entry.include_in_context)
        .map(|s| s.entry.text().trim().to_string())
        .unwrap_or_default();
    let workspace = store.workspace();
    let mut codes = Vec::new();
    let mut files = Vec::new();
    if let Some(ws) = workspace.as_deref() {
        for c in &answer.metadata.code_refs {
            let code = match get_code(ws, id, &c.code_id).await {
                Ok((_, code)) => cut(code),
                Err(e) => format!("(the code {} could not be read: {e})", c.code_id),
            };
            codes.push((c.index, c.language.clone(), c.description.clone(), code));
        }
        for f in &answer.metadata.file_refs {
            files.push(file_part(ws, id, f).await);
        }
    }
    Ok(Parts {
        conversation: id.to_string(),
        title: meta
            .title
            .clone()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| format!("Conversation {id}")),
        question,
        answered_at: stored.entry.created_at.clone(),
        seq: stored.seq,
        answer,
        codes,
        files,
    })
}

async fn file_part(ws: &dyn Workspace, id: &ConversationId, f: &ba_protocol::FileRef) -> FilePart {
    let meta = ws.find(id, &f.file_id).await.ok().flatten();
    let media_type = meta
        .as_ref()
        .map_or_else(String::new, |m| m.media_type.clone());
    let embeddable = matches!(
        media_type.as_str(),
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    );
    let image = match &meta {
        Some(m) if embeddable && m.size <= MAX_EMBEDDED_IMAGE => ws
            .read_bytes(id, &m.id, MAX_EMBEDDED_IMAGE)
            .await
            .ok()
            .map(|(_, bytes)| bytes),
        _ => None,
    };
    FilePart {
        index: f.index,
        file_id: meta
            .as_ref()
            .map_or_else(|| f.file_id.clone(), |m| m.id.clone()),
        name: if f.filename.is_empty() {
            f.file_id.clone()
        } else {
            f.filename.clone()
        },
        media_type,
        image,
    }
}

fn cut(mut code: String) -> String {
    if code.chars().count() > MAX_CODE_CHARS {
        let end = code
            .char_indices()
            .nth(MAX_CODE_CHARS)
            .map_or(code.len(), |(i, _)| i);
        code.truncate(end);
        let _ = write!(code, "\n… (cut at {MAX_CODE_CHARS} characters)");
    }
    code
}

/// A file-name-safe form of a title: lowercase ASCII letters and digits joined by hyphens.
fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "answer".into() } else { out }
}

impl Parts {
    /// Whether the report is HTML (rather than Markdown).
    pub(crate) fn is_html(&self) -> bool {
        self.answer.metadata.content_type == ContentType::Html
    }

    /// The link to a file of the conversation on the server.
    pub(crate) fn file_link(&self, file_id: &str) -> String {
        format!(
            "/api/v1/conversations/{}/files/{}",
            self.conversation,
            html::url_component(file_id)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_slugs() {
        assert_eq!(
            "md".parse::<ReportFormat>().ok(),
            Some(ReportFormat::Markdown)
        );
        assert_eq!(
            "HTML".parse::<ReportFormat>().ok(),
            Some(ReportFormat::Html)
        );
        let err = "pdf".parse::<ReportFormat>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("unknown report format \"pdf\": use md or html")
        );
        assert_eq!(slug("West's Q3 — by product?"), "west-s-q3-by-product");
        assert_eq!(slug("…"), "answer");
    }

    #[test]
    fn long_code_is_cut_and_says_so() {
        let code = cut("x".repeat(MAX_CODE_CHARS + 10));
        assert!(
            code.ends_with("(cut at 200000 characters)"),
            "{}",
            &code[code.len() - 40..]
        );
    }
}
