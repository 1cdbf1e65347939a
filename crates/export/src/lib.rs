//! # ba-export
//!
//! A final answer as a document that leaves the program and stands on its own: one HTML file
//! (its tables, its charts drawn as SVG images, the images it shows embedded, its code, a print
//! stylesheet; no script and nothing fetched when it is opened — its Content-Security-Policy
//! allows only inline styles and `data:` images), or a bundle: the document (`report.html` or
//! `report.md`) with a copy of every file it names in `files/` beside it, linked relatively —
//! as a zip ([`write_zip`], [`spool_zip`]) or written to a folder ([`write_beside`]).
//!
//! [`export_report`] reads the answer, its question and its files from a
//! [`ba_storage::ConversationStore`] and gives an [`ExportedReport`]; [`ReportFormat`] and
//! [`ExportFormat`] name what is asked for, [`ExportError`] why it could not be made. The two
//! front ends call it: `ba-server` (`GET …/{id}/report/{seq}?format=html|zip|md`, the page's
//! Export buttons) and `ba-cli` (`ba-agent report`). It knows nothing of HTTP or of the loop.
//!
//! The report is the model's, so it is hostile: its HTML is cleaned (its scripts go; the
//! ECharts charts they drew are read from their options and drawn here), its Markdown is
//! rewritten until a viewer would find nothing to run or follow, references are filled in
//! only where text stands, and every text this crate adds is escaped. The quoted question is
//! what the person wrote: no tag, no note handed to the model, no id.
//!
//! ```
//! use ba_export::{ExportFormat, Packaging, ReportFormat, export_report};
//! use ba_storage::{ConversationId, FileStore};
//!
//! # fn main() -> Result<(), ba_export::ExportError> {
//! let format: ExportFormat = "md".parse()?;
//! assert_eq!(format.report_format(), ReportFormat::Markdown);
//! assert_eq!(format.packaging(), Packaging::WithFiles);
//!
//! async fn last_answer(home: &str, id: &str) -> Result<String, ba_export::ExportError> {
//!     let store = FileStore::open(home)?;
//!     let id = ConversationId::new(id)?;
//!     let report = export_report(&store, &id, None, ReportFormat::Html, Packaging::Alone).await?;
//!     Ok(report.body)
//! }
//! # let _ = last_answer;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod bundle;
mod chart;
mod html;
mod markdown;
mod names;
mod sanitise;

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;

use ba_protocol::{ApiResponse, ContentType, LogRole};
use ba_storage::{
    ConversationId, ConversationStore, FileKind, FileMeta, StorageError, StoredEntry, Workspace,
};
use tokio::io::AsyncReadExt as _;

pub use bundle::{SpooledZip, spool_zip, write_beside, write_zip};

use names::{Names, Place, clean_text};

/// The largest image a report embeds (bigger ones are linked).
pub const MAX_EMBEDDED_IMAGE: u64 = 8 * 1024 * 1024;
/// The most image bytes one HTML report embeds in all; past it, images are linked.
pub const MAX_EMBEDDED_TOTAL: u64 = 24 * 1024 * 1024;
/// The largest code block a report includes in full (longer ones are cut, and say so).
pub const MAX_CODE_CHARS: usize = 200_000;
/// The most a report's files may come to in a bundle; past it the bundle is refused (the
/// single HTML file, which links them, still exports).
pub const MAX_BUNDLE_BYTES: u64 = 512 * 1024 * 1024;

/// What the document is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// Markdown, with fenced code blocks and relative links to the files beside it.
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

    /// The document's name inside a bundle (`report.md`, `report.html`).
    pub fn document_name(self) -> &'static str {
        match self {
            Self::Markdown => "report.md",
            Self::Html => "report.html",
        }
    }
}

impl FromStr for ReportFormat {
    type Err = ExportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "md" | "markdown" => Ok(Self::Markdown),
            "html" | "htm" => Ok(Self::Html),
            _ => Err(ExportError::Format {
                given: s.to_owned(),
                choices: "md or html",
            }),
        }
    }
}

/// What an export is delivered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One HTML file: what it shows embedded, its other files linked to `files/` beside it.
    Html,
    /// A zip: `report.html` and `files/`.
    HtmlZip,
    /// A zip: `report.md` and `files/` (its images among them).
    MarkdownZip,
}

impl ExportFormat {
    /// The document's format.
    pub fn report_format(self) -> ReportFormat {
        match self {
            Self::Html | Self::HtmlZip => ReportFormat::Html,
            Self::MarkdownZip => ReportFormat::Markdown,
        }
    }

    /// Whether the files travel with the document.
    pub fn packaging(self) -> Packaging {
        match self {
            Self::Html => Packaging::Alone,
            Self::HtmlZip | Self::MarkdownZip => Packaging::WithFiles,
        }
    }

    /// Whether the export is a zip.
    pub fn is_zip(self) -> bool {
        self.packaging() == Packaging::WithFiles
    }
}

impl FromStr for ExportFormat {
    type Err = ExportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "html" | "htm" => Ok(Self::Html),
            "zip" | "html-zip" => Ok(Self::HtmlZip),
            "md" | "markdown" | "md-zip" => Ok(Self::MarkdownZip),
            _ => Err(ExportError::Format {
                given: s.to_owned(),
                choices: "html, zip (html with its files) or md (markdown with its files, a zip)",
            }),
        }
    }
}

/// Whether a document goes alone or with copies of its files beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packaging {
    /// The document alone: the files it links are not with it (it says so).
    Alone,
    /// The document and its files (a zip, or a folder).
    WithFiles,
}

/// Why a report could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The format is not one this export knows.
    #[error("unknown report format {given:?}: use {choices}")]
    Format {
        /// What was asked for.
        given: String,
        /// The formats there are, in words.
        choices: &'static str,
    },
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
    /// The files the report names are too large to bundle.
    #[error(
        "the report's files come to {size} bytes, more than the {limit} a bundle may hold; \
         export the report alone (format html) and download its files one by one"
    )]
    TooLarge {
        /// Their size in bytes.
        size: u64,
        /// The limit ([`MAX_BUNDLE_BYTES`]).
        limit: u64,
    },
    /// Writing the bundle failed.
    #[error("could not write {what}: {message}")]
    Write {
        /// What was being written (a path, or the archive).
        what: String,
        /// Why.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A file that travels with a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledFile {
    /// Its path beside the document: `files/<name>`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its media type.
    pub media_type: String,
    source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// A file of the conversation's workspace, by id.
    Stored(String),
    /// A file the export made (a chart drawn as an image).
    Made(Arc<[u8]>),
}

/// The language of a report's own words: its headings, labels, notes and sizes. The answer
/// stays as the model wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Language {
    /// English (`en`).
    #[default]
    English,
    /// Simplified Chinese (`zh-CN`).
    SimplifiedChinese,
}

impl Language {
    /// The language of a BCP 47 tag: `zh`, `zh-CN`, `zh-Hans…` are Simplified Chinese;
    /// anything else (or nothing) English.
    pub fn from_tag(tag: &str) -> Self {
        let tag = tag.trim().to_ascii_lowercase();
        if tag == "zh" || tag.starts_with("zh-") || tag.starts_with("zh_") {
            Self::SimplifiedChinese
        } else {
            Self::English
        }
    }

    /// Its BCP 47 tag, for `<html lang>`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::English => "en",
            Self::SimplifiedChinese => "zh-CN",
        }
    }

    pub(crate) fn words(self) -> &'static Words {
        match self {
            Self::English => &ENGLISH,
            Self::SimplifiedChinese => &CHINESE,
        }
    }
}

/// A report's fixed words in one language.
#[derive(Debug)]
pub(crate) struct Words {
    pub(crate) report: &'static str,
    pub(crate) answered: &'static str,
    pub(crate) question: &'static str,
    pub(crate) attached: &'static str,
    pub(crate) files: &'static str,
    pub(crate) files_apart: &'static str,
    pub(crate) exported: &'static str,
    pub(crate) chart: &'static str,
    pub(crate) bytes: &'static str,
    pub(crate) gone: &'static str,
    /// What follows a label (`Question: …`).
    pub(crate) colon: &'static str,
}

const ENGLISH: Words = Words {
    report: "Report",
    answered: "Answered",
    question: "Question",
    attached: "Attached",
    files: "Files",
    files_apart: "The files are not inside this page: the report's zip export keeps them in the \
                  folder <code>files</code> beside it, where these links lead.",
    exported: "Exported from BA-Agent.",
    chart: "Chart",
    bytes: "bytes",
    gone: "(a file that is no longer there)",
    colon: ": ",
};

const CHINESE: Words = Words {
    report: "报告",
    answered: "回答于",
    question: "问题",
    attached: "附件",
    files: "文件",
    files_apart: "文件不在本页面中：报告的 zip 导出把它们放在旁边的 <code>files</code> 文件夹里，\
                  以下链接指向那里。",
    exported: "由 BA-Agent 导出。",
    chart: "图表",
    bytes: "字节",
    gone: "（文件已不存在）",
    colon: "：",
};

/// An exported report: the document and the files that go beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedReport {
    /// Its format.
    pub format: ReportFormat,
    /// The document.
    pub body: String,
    /// The entry of the answer.
    pub seq: u64,
    /// The files beside it (empty when it names none).
    pub files: Vec<BundledFile>,
    stem: String,
    conversation: ConversationId,
    answered_at: String,
}

impl ExportedReport {
    /// A file name for the document alone (`report-<title>-<seq>.html`).
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.stem, self.format.extension())
    }

    /// A file name for the zip (`report-<title>-<seq>.zip`, `…-md.zip` for Markdown).
    pub fn zip_name(&self) -> String {
        match self.format {
            ReportFormat::Html => format!("{}.zip", self.stem),
            ReportFormat::Markdown => format!("{}-md.zip", self.stem),
        }
    }

    /// The folder a zip holds everything under (`report-<title>-<seq>`).
    pub fn folder(&self) -> &str {
        &self.stem
    }

    /// What the files beside it come to, in bytes.
    pub fn files_size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The final answer at `seq` (default: the last one of the history, rewinds applied) of
/// conversation `id` as a document in `format`, with the list of files that go beside it;
/// `packaging` says whether they will (the document alone says where they are).
///
/// # Errors
/// [`ExportError::NoAnswer`] or [`ExportError::NotAnAnswer`] when there is nothing to export
/// there; [`ExportError::Storage`] when the store fails (an unknown conversation among them).
pub async fn export_report(
    store: &dyn ConversationStore,
    id: &ConversationId,
    seq: Option<u64>,
    format: ReportFormat,
    packaging: Packaging,
) -> Result<ExportedReport, ExportError> {
    export_report_in(store, id, seq, format, packaging, Language::English).await
}

/// [`export_report`] with the report's own words (headings, labels, notes) in `language`.
///
/// # Errors
/// As [`export_report`].
pub async fn export_report_in(
    store: &dyn ConversationStore,
    id: &ConversationId,
    seq: Option<u64>,
    format: ReportFormat,
    packaging: Packaging,
    language: Language,
) -> Result<ExportedReport, ExportError> {
    let mut parts = read_parts(store, id, seq).await?;
    // The file's name keeps the English word: a name is for the disk, and stays the same
    // whatever the page's language.
    let stem = format!("report-{}-{}", slug(&parts.title), parts.seq);
    if parts.untitled {
        parts.title = language.words().report.into();
    }
    parts.language = language;
    let body = match format {
        ReportFormat::Markdown => markdown::document(&parts),
        ReportFormat::Html => html::document(&parts, packaging),
    };
    let mut files: Vec<BundledFile> = parts
        .linked
        .iter()
        .map(|l| BundledFile {
            path: l.place.path.clone(),
            size: l.size,
            media_type: l.media_type.clone(),
            source: Source::Stored(l.id.clone()),
        })
        .collect();
    if format == ReportFormat::Markdown {
        files.extend(parts.charts.iter().map(|c| BundledFile {
            path: c.place.path.clone(),
            size: c.svg.len() as u64,
            media_type: "image/svg+xml".into(),
            source: Source::Made(Arc::from(c.svg.as_bytes())),
        }));
    }
    Ok(ExportedReport {
        format,
        body,
        seq: parts.seq,
        files,
        stem,
        conversation: id.clone(),
        answered_at: parts.answered_at,
    })
}

/// What a report is made of, read from the store.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) title: String,
    /// The conversation has no title (`title` is a word for "report").
    pub(crate) untitled: bool,
    /// The language of the report's own words.
    pub(crate) language: Language,
    pub(crate) question: Question,
    pub(crate) answered_at: String,
    pub(crate) seq: u64,
    pub(crate) answer: ApiResponse,
    pub(crate) codes: Vec<CodePart>,
    /// The file references, by their index.
    pub(crate) files: Vec<FilePart>,
    /// Every file of the conversation the answer names, once each, in order.
    pub(crate) linked: Vec<Linked>,
    /// The charts of an HTML report, drawn.
    pub(crate) charts: Vec<ChartPart>,
}

/// The question as the person asked it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// Their words, a file they named by its name.
    pub(crate) words: String,
    /// The names of the files that came with it.
    pub(crate) attached: Vec<String>,
}

/// A code reference, resolved.
#[derive(Debug)]
pub(crate) struct CodePart {
    pub(crate) index: usize,
    pub(crate) language: String,
    pub(crate) description: String,
    pub(crate) code: String,
}

/// A file reference, resolved.
#[derive(Debug)]
pub(crate) struct FilePart {
    pub(crate) index: usize,
    /// The name shown.
    pub(crate) name: String,
    /// Where its copy is, `None` when it names no file of the conversation.
    pub(crate) place: Option<Place>,
    pub(crate) media_type: String,
    /// Its bytes, when it is an image small enough to embed.
    pub(crate) image: Option<Arc<[u8]>>,
}

/// A file of the conversation the answer names.
#[derive(Debug)]
pub(crate) struct Linked {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) place: Place,
    pub(crate) size: u64,
    pub(crate) media_type: String,
}

/// A chart of an HTML report, drawn as SVG.
#[derive(Debug)]
pub(crate) struct ChartPart {
    pub(crate) element_id: String,
    pub(crate) svg: String,
    pub(crate) title: Option<String>,
    /// Where the Markdown export keeps it.
    pub(crate) place: Place,
}

impl Parts {
    /// Whether the report is HTML (rather than Markdown).
    pub(crate) fn is_html(&self) -> bool {
        self.answer.metadata.content_type == ContentType::Html
    }

    /// The links the report may hold to its own files.
    pub(crate) fn allowed(&self) -> sanitise::Allowed {
        sanitise::Allowed::new(
            self.linked
                .iter()
                .map(|l| l.place.href.clone())
                .chain(self.charts.iter().map(|c| c.place.href.clone())),
        )
    }

    pub(crate) fn code(&self, index: usize) -> Option<&CodePart> {
        self.codes.iter().find(|c| c.index == index)
    }

    pub(crate) fn file(&self, index: usize) -> Option<&FilePart> {
        self.files.iter().find(|f| f.index == index)
    }

    /// The date of the answer as a reader wants it (`2025-11-27 15:41 UTC`).
    pub(crate) fn answered(&self) -> String {
        let t = &self.answered_at;
        match (t.get(..10), t.get(11..16)) {
            (Some(day), Some(time)) if t.get(10..11) == Some("T") => {
                let zone = if t.ends_with('Z') { " UTC" } else { "" };
                format!("{day} {time}{zone}")
            }
            _ => clean_text(t),
        }
    }
}

fn is_answer(s: &StoredEntry) -> bool {
    s.entry.role == LogRole::Assistant
        && s.entry
            .records
            .api_response
            .as_ref()
            .is_some_and(|a| !a.response.trim().is_empty())
}

async fn read_parts(
    store: &dyn ConversationStore,
    id: &ConversationId,
    seq: Option<u64>,
) -> Result<Parts, ExportError> {
    let meta = store.metadata(id).await?;
    let history = store.load(id).await?.after_rewinds();
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
    let asked = history
        .get(..at)
        .unwrap_or_default()
        .iter()
        .rev()
        .find(|s| s.entry.role == LogRole::User && s.entry.include_in_context);
    let workspace = store.workspace();
    let ws = workspace.as_deref();
    let (words, attached) = asked.map(|s| person_words(&s.entry)).unwrap_or_default();
    let question = Question {
        words: name_files(ws, id, &words).await,
        attached: file_names(ws, id, &attached).await,
    };
    let title = meta.title.as_deref().unwrap_or_default();
    let title = clean_text(&name_files(ws, id, &cut_note(title)).await);
    let mut names = Names::default();
    let (mut files, mut linked, mut codes, mut charts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if let Some(ws) = ws {
        let mut images = ImageBudget::default();
        for f in &answer.metadata.file_refs {
            let part = match ws.find(id, &f.file_id).await.ok().flatten() {
                Some(m) => {
                    let place = names.stored(&m.id, &m.name);
                    link(&mut linked, &m, &place);
                    FilePart {
                        index: f.index,
                        name: clean_text(&m.name),
                        place: Some(place),
                        image: images.read(ws, id, &m).await,
                        media_type: m.media_type,
                    }
                }
                None => FilePart {
                    index: f.index,
                    name: String::new(),
                    place: None,
                    media_type: String::new(),
                    image: None,
                },
            };
            files.push(part);
        }
        for l in &answer.metadata.download_links {
            // A link that names no file of the conversation leads nowhere: it is left out.
            if let Some(m) = ws.find(id, l).await.ok().flatten() {
                let place = names.stored(&m.id, &m.name);
                link(&mut linked, &m, &place);
            }
        }
        for c in &answer.metadata.code_refs {
            codes.push(CodePart {
                index: c.index,
                language: c.language.clone(),
                description: clean_text(&c.description),
                code: read_code(ws, id, &c.code_id).await,
            });
        }
    }
    if answer.metadata.content_type == ContentType::Html {
        for (k, chart) in chart::static_charts(&answer.response)
            .into_iter()
            .enumerate()
        {
            charts.push(ChartPart {
                place: names.fresh(&format!("chart-{}.svg", k + 1)),
                element_id: chart.element_id,
                svg: chart.svg,
                title: chart.title,
            });
        }
    }
    Ok(Parts {
        untitled: title.is_empty(),
        language: Language::English,
        title: if title.is_empty() {
            "Report".into()
        } else {
            title
        },
        question,
        answered_at: stored.entry.created_at.clone(),
        seq: stored.seq,
        answer,
        codes,
        files,
        linked,
        charts,
    })
}

fn link(linked: &mut Vec<Linked>, meta: &FileMeta, place: &Place) {
    if !linked.iter().any(|l| l.id == meta.id) {
        linked.push(Linked {
            id: meta.id.to_string(),
            name: clean_text(&meta.name),
            place: place.clone(),
            size: meta.size,
            media_type: meta.media_type.clone(),
        });
    }
}

/// The images a report embeds, read once each, within [`MAX_EMBEDDED_TOTAL`].
#[derive(Debug, Default)]
struct ImageBudget {
    read: Vec<(String, Arc<[u8]>)>,
    total: u64,
}

impl ImageBudget {
    async fn read(
        &mut self,
        ws: &dyn Workspace,
        id: &ConversationId,
        meta: &FileMeta,
    ) -> Option<Arc<[u8]>> {
        let embeddable = matches!(
            meta.media_type.as_str(),
            "image/png" | "image/jpeg" | "image/gif" | "image/webp"
        );
        if !embeddable || meta.size > MAX_EMBEDDED_IMAGE {
            return None;
        }
        if let Some((_, bytes)) = self.read.iter().find(|(i, _)| *i == meta.id) {
            return Some(Arc::clone(bytes));
        }
        if self.total + meta.size > MAX_EMBEDDED_TOTAL {
            return None;
        }
        let (_, bytes) = ws.read_bytes(id, &meta.id, MAX_EMBEDDED_IMAGE).await.ok()?;
        self.total += bytes.len() as u64;
        let bytes: Arc<[u8]> = Arc::from(bytes);
        self.read.push((meta.id.to_string(), Arc::clone(&bytes)));
        Some(bytes)
    }
}

/// A saved code block's text, at most [`MAX_CODE_CHARS`] characters read (a longer one is cut
/// and says so).
async fn read_code(ws: &dyn Workspace, id: &ConversationId, code_id: &str) -> String {
    const UNREADABLE: &str = "(this code could not be read)";
    match ws.meta(id, code_id).await {
        Ok(Some(m)) if m.kind == FileKind::Code => {}
        _ => return UNREADABLE.into(),
    }
    let Ok(content) = ws.open(id, code_id).await else {
        return UNREADABLE.into();
    };
    // A character is at most four bytes: this many hold every character kept, and one more.
    let limit = (MAX_CODE_CHARS as u64 + 1) * 4;
    let mut bytes = Vec::new();
    if content
        .reader
        .take(limit)
        .read_to_end(&mut bytes)
        .await
        .is_err()
    {
        return UNREADABLE.into();
    }
    cut(String::from_utf8_lossy(&bytes).into_owned())
}

fn cut(mut code: String) -> String {
    if let Some((end, _)) = code.char_indices().nth(MAX_CODE_CHARS) {
        code.truncate(end);
        let _ = write!(code, "\n… (cut at {MAX_CODE_CHARS} characters)");
    }
    code
}

/// Where the note the model is handed with a question's uploads begins.
const UPLOAD_NOTE: &str = "\n\nUploaded files (";

/// `text` up to the note the model is handed with the uploads.
fn cut_note(text: &str) -> String {
    text.split(UPLOAD_NOTE)
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// What the person wrote in a question (its first text block, up to the uploads' note) and the
/// ids of the files that came with it (the `<file_ref>`s of the note, in whichever block).
fn person_words(entry: &ba_protocol::LogEntry) -> (String, Vec<String>) {
    let all = entry.text();
    let first = match &entry.content {
        Some(ba_protocol::Content::Blocks(blocks)) => blocks
            .iter()
            .find_map(ba_protocol::ContentBlock::as_text)
            .unwrap_or_default()
            .to_owned(),
        _ => all.clone().into_owned(),
    };
    let note = all
        .find("Uploaded files (")
        .and_then(|at| all.get(at..))
        .unwrap_or_default();
    let attached = tags(note).into_iter().map(|(_, id)| id).collect();
    (cut_note(&first), attached)
}

/// Each `<file_ref>id</file_ref>` of `text`: its byte range and the id.
fn tags(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    const OPEN: &str = "<file_ref>";
    const CLOSE: &str = "</file_ref>";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = text
        .get(from..)
        .and_then(|t| t.find(OPEN))
        .map(|k| from + k)
    {
        let inner = start + OPEN.len();
        let Some(end) = text
            .get(inner..)
            .and_then(|t| t.find(CLOSE))
            .map(|k| inner + k)
        else {
            break;
        };
        let id = text.get(inner..end).unwrap_or_default().trim().to_owned();
        out.push((start..end + CLOSE.len(), id));
        from = end + CLOSE.len();
    }
    out
}

/// `text` with each `<file_ref>` tag replaced by the name of the file it names.
async fn name_files(ws: Option<&dyn Workspace>, id: &ConversationId, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, file) in tags(text) {
        out.push_str(text.get(at..range.start).unwrap_or_default());
        out.push_str(&file_name(ws, id, &file).await);
        at = range.end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

async fn file_name(ws: Option<&dyn Workspace>, id: &ConversationId, file: &str) -> String {
    let found = match ws {
        Some(ws) => ws.find(id, file).await.ok().flatten(),
        None => None,
    };
    found.map_or_else(|| "a file".to_owned(), |m| clean_text(&m.name))
}

async fn file_names(
    ws: Option<&dyn Workspace>,
    id: &ConversationId,
    ids: &[String],
) -> Vec<String> {
    let mut out = Vec::with_capacity(ids.len());
    for file in ids {
        out.push(file_name(ws, id, file).await);
    }
    out
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

#[cfg(test)]
mod tests;
