//! `file_reader`: reads a file of the conversation (an upload, an output, spilled data, saved
//! code) or a file in the configured data folders.
//!
//! A reference is looked up in the call's conversation files first
//! ([`CallContext::files`]): by id (`upload_001`, `output_001`, `data_001`, `code_…`) or by
//! original name (`sales.csv`), and read by its real type, which comes from the file's name (then
//! its media type), never from the local path that holds it. Otherwise it is a path inside the
//! configured data folders, which nothing may leave (no `..`, no link out, no absolute path
//! elsewhere). No observation or error holds a local path: they name the reference.

use ba_protocol::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use ba_tools::{ConversationFiles, FileInfo};
use std::path::{Component, Path, PathBuf};

use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::BuiltinError;
use crate::csv_file::{self, CsvOptions};
use crate::encoding::{self, EncodingRequest, OnError};

/// The tool name.
pub const NAME: &str = "file_reader";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Read a file of the conversation by its id (upload_001, \
    output_001, data_001, code_…) or its original name (sales.csv), or a data file: csv/tsv, \
    Excel or OpenDocument workbooks (xlsx, xlsm, xls, ods: pick a sheet and a range like \
    \"A1:D20\"), json, text, markdown, python or sql. Tables come with column types and \
    statistics. Use nrows to read only the first rows or lines; encoding \"auto\" reads UTF-8 \
    and UTF-16 with a BOM, otherwise name it (gbk, big5, shift_jis, windows-1252, …).";

/// A file format `file_reader` knows: the business-analysis formats, plus markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// Chosen from the file extension.
    #[default]
    Auto,
    /// Delimited values (comma, semicolon, tab or pipe, sniffed).
    Csv,
    /// Workbooks: .xlsx, .xlsm, .xls, .ods.
    Excel,
    /// JSON.
    Json,
    /// Plain text.
    Text,
    /// Markdown, returned as text.
    Markdown,
    /// Python source, returned as text.
    Python,
    /// SQL source, returned as text.
    Sql,
}

impl FileFormat {
    /// The format of a file of the conversation: from its name's extension, then its media
    /// type; `None` for a file that is neither text nor a table (an image, a PDF, an archive).
    fn of_file(file: &FileInfo) -> Option<Self> {
        let by_name = Self::from_extension(Path::new(&file.name));
        let known_extension = Path::new(&file.name)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("txt") || by_name != Self::Text);
        if known_extension {
            return Some(by_name);
        }
        let media = file.media_type.to_ascii_lowercase();
        let media = media.split(';').next().unwrap_or_default().trim();
        Some(match media {
            "text/csv" | "text/tab-separated-values" => Self::Csv,
            "application/json" => Self::Json,
            "text/markdown" => Self::Markdown,
            "text/x-python" => Self::Python,
            "application/sql" => Self::Sql,
            "application/vnd.ms-excel" | "application/vnd.oasis.opendocument.spreadsheet" => {
                Self::Excel
            }
            m if m.starts_with("application/vnd.openxmlformats-officedocument.spreadsheetml")
                || m.starts_with("application/vnd.ms-excel.") =>
            {
                Self::Excel
            }
            m if m.starts_with("text/") => Self::Text,
            m if m.starts_with("image/")
                || m.starts_with("audio/")
                || m.starts_with("video/")
                || matches!(m, "application/pdf" | "application/zip") =>
            {
                return None;
            }
            _ => by_name,
        })
    }

    fn from_extension(path: &Path) -> Self {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        match ext.as_str() {
            "csv" | "tsv" | "psv" => Self::Csv,
            "json" => Self::Json,
            "md" | "markdown" => Self::Markdown,
            "py" => Self::Python,
            "sql" => Self::Sql,
            "xlsx" | "xls" | "xlsm" | "ods" => Self::Excel,
            _ => Self::Text,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Csv => "csv",
            Self::Excel => "excel",
            Self::Json => "json",
            Self::Text => "text",
            Self::Markdown => "markdown",
            Self::Python => "python",
            Self::Sql => "sql",
        }
    }
}

fn default_encoding() -> String {
    "auto".to_owned()
}

/// What to do with bytes that are not valid in the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecodeErrors {
    /// Stop and report the byte offset (default).
    #[default]
    Strict,
    /// Replace them with U+FFFD and say how many.
    Replace,
}

/// Arguments of `file_reader`: the file, its format and encoding, how much to read, and the
/// workbook and CSV options.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileReaderArgs {
    /// A file of the conversation, by id (`upload_001`, `output_001`, `data_001`, `code_…`)
    /// or original name (`sales.csv`), or a path relative to a data directory. Sessions
    /// recorded before it had this name, and models that learnt the old one, send it as
    /// `path`, which is still taken.
    #[serde(alias = "path")]
    pub file: String,
    /// File format; `auto` picks it from the extension.
    #[serde(default)]
    pub format: FileFormat,
    /// Text encoding: `auto` (default: a BOM, else UTF-8) or a label such as utf-8, gbk,
    /// gb18030, big5, shift_jis, euc-kr, windows-1252, latin-1.
    #[serde(default = "default_encoding")]
    pub encoding: String,
    /// Undecodable bytes: `strict` (default) reports their offset, `replace` substitutes U+FFFD.
    #[serde(default)]
    pub errors: DecodeErrors,
    /// The most data rows (csv, workbook), items (json array) or lines (text) to return.
    #[serde(default)]
    pub nrows: Option<usize>,
    /// Workbooks: the sheet, by name or 1-based number (default: the first).
    #[serde(default)]
    pub sheet: Option<String>,
    /// Workbooks: a cell range such as `A1:D20`, or a start cell such as `B3`.
    #[serde(default)]
    pub range: Option<String>,
    /// Tables: whether the first row is a header (default: detected).
    #[serde(default)]
    pub header: Option<bool>,
    /// CSV: the delimiter, one character (default: sniffed among `,` `;` tab `|`).
    #[serde(default)]
    pub delimiter: Option<String>,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// Where `file_reader` may read and how much.
#[derive(Debug, Clone)]
pub struct FileReaderConfig {
    /// The data directories files may be read from besides the conversation's own files.
    /// Paths that leave all of them, directly or through a symlink, are refused. Never the
    /// folder of uploads or of any conversation's files: those are reached through the call's
    /// [`CallContext::files`] only.
    pub roots: Vec<PathBuf>,
    /// The largest file read whole (text, JSON), in bytes.
    pub max_bytes: u64,
    /// The largest workbook opened, in bytes.
    pub max_workbook_bytes: u64,
    /// CSV: bytes scanned at most to count and profile (CSV files are streamed, so a larger
    /// file is still read, its counts then partial).
    pub max_scan_bytes: u64,
    /// Workbooks: cells read at most.
    pub max_cells: u64,
    /// Rows returned when `nrows` is not given.
    pub max_rows: usize,
    /// The encoding `auto` tries when a file without a BOM is not UTF-8 (the deployment's
    /// hint, e.g. GBK where exports come from Chinese Excel).
    pub fallback_encoding: Option<&'static encoding_rs::Encoding>,
}

impl FileReaderConfig {
    /// Reads confined to `roots`: text up to 50 MB, workbooks up to 200 MB and 50 million
    /// cells, CSV scans up to 256 MB, 10 000 rows returned without `nrows`, no fallback.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        Self {
            roots,
            max_bytes: 50 * 1024 * 1024,
            max_workbook_bytes: 200 * 1024 * 1024,
            max_scan_bytes: 256 * 1024 * 1024,
            max_cells: 50_000_000,
            max_rows: 10_000,
            fallback_encoding: None,
        }
    }

    /// Sets the encoding `auto` falls back to; `None` when the label is unknown.
    pub fn with_fallback_encoding(mut self, label: &str) -> Option<Self> {
        match EncodingRequest::from_label(label)? {
            EncodingRequest::Exact(e) => self.fallback_encoding = Some(e),
            EncodingRequest::Auto => self.fallback_encoding = None,
        }
        Some(self)
    }
}

/// The `file_reader` tool.
#[derive(Debug, Clone)]
pub struct FileReader {
    config: FileReaderConfig,
}

/// The file a reference names, found.
struct Target {
    /// Where its content is on this machine (never shown).
    local: PathBuf,
    /// The conversation's file, when it is one.
    file: Option<FileInfo>,
}

impl FileReader {
    /// A reader of the call's conversation files and of the data folders `config.roots`.
    pub fn new(config: FileReaderConfig) -> Self {
        Self { config }
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<FileReaderArgs>()
    }

    /// Parses `args` and reads, without conversation files (data folders only).
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Reads the file, without conversation files (data folders only).
    pub async fn run(&self, args: FileReaderArgs) -> Result<Value, BuiltinError> {
        self.read(args, None).await
    }

    /// Reads the file `args.file` names: a file of `files` (by id, else by original name),
    /// else a file in the data folders. Tables (CSV, workbooks) give `columns`, `rows`, a
    /// column `profile`, counts of what is shown and left, and a `message` saying so; JSON
    /// gives the parsed `content`; other formats give `content` text and `line_count`. Every
    /// answer has `path` (the reference as given), `format` and `size_bytes`; a file of the
    /// conversation also `file`: its `id`, `kind`, `name` and `media_type`.
    ///
    /// An id of the conversation's kinds (`upload_…`, `output_…`, `data_…`) that `files` does
    /// not hold is [`BuiltinError::NoSuchFile`].
    pub async fn read(
        &self,
        args: FileReaderArgs,
        files: Option<&dyn ConversationFiles>,
    ) -> Result<Value, BuiltinError> {
        let request =
            EncodingRequest::from_label(&args.encoding).ok_or_else(|| BuiltinError::Encoding {
                path: args.file.clone(),
                message: format!(
                    "encoding \"{}\" is not supported; use {}",
                    args.encoding,
                    encoding::SUPPORTED
                ),
            })?;
        let Target { local: path, file } = self.resolve(&args.file, files).await?;
        let format = match (args.format, &file) {
            (FileFormat::Auto, Some(file)) => {
                FileFormat::of_file(file).ok_or_else(|| BuiltinError::InvalidArguments {
                    tool: NAME,
                    message: format!(
                        "`{}` ({}, {}) is not a table or text file; file_reader reads csv, \
                         workbooks, json and text",
                        args.file, file.name, file.media_type
                    ),
                })?
            }
            (FileFormat::Auto, None) => FileFormat::from_extension(&path),
            (other, _) => other,
        };
        // The name whose extension tells workbook kinds apart: the file's own, not the path's.
        let name = match &file {
            Some(file) => PathBuf::from(&file.name),
            None => path.clone(),
        };
        let meta = self.regular_file(&path, &args.file).await?;
        let size = meta.len();
        let on_error = match args.errors {
            DecodeErrors::Strict => OnError::Strict,
            DecodeErrors::Replace => OnError::Replace,
        };
        let mut out = match format {
            FileFormat::Excel => {
                self.check_size(&args.file, size, self.config.max_workbook_bytes)?;
                self.read_workbook(path, name, &args).await?
            }
            FileFormat::Csv => {
                let delimiter = match args.delimiter.as_deref() {
                    None => None,
                    Some(d) => Some(parse_delimiter(d)?),
                };
                let opts = CsvOptions {
                    nrows: args.nrows,
                    max_rows: self.config.max_rows,
                    max_scan_bytes: self.config.max_scan_bytes,
                    header: args.header,
                    delimiter,
                    encoding: request,
                    fallback: self.config.fallback_encoding,
                    on_error,
                };
                let reference = args.file.clone();
                blocking(move || csv_file::read(&path, &reference, size, &opts)).await?
            }
            _ => {
                self.check_size(&args.file, size, self.config.max_bytes)?;
                let bytes = tokio::fs::read(&path)
                    .await
                    .map_err(|source| BuiltinError::Io {
                        path: args.file.clone(),
                        source,
                    })?;
                let detected = encoding::detect(&bytes, request, self.config.fallback_encoding);
                let (text, replaced) =
                    encoding::decode_all(&bytes, detected, on_error).map_err(|m| {
                        BuiltinError::Encoding {
                            path: args.file.clone(),
                            message: m.to_string(),
                        }
                    })?;
                let mut out = match format {
                    FileFormat::Json => read_json(&args.file, &text, args.nrows)?,
                    _ => read_lines(&text, args.nrows),
                };
                out["encoding"] = json!(detected.label());
                if replaced > 0 {
                    out["replaced_sequences"] = json!(replaced);
                }
                out
            }
        };
        if let Value::Object(map) = &mut out {
            map.insert("path".into(), json!(args.file));
            map.insert("format".into(), json!(format.as_str()));
            map.insert("size_bytes".into(), json!(size));
            if let Some(file) = &file {
                map.insert(
                    "file".into(),
                    json!({"id": file.id, "kind": file.kind, "name": file.name,
                           "media_type": file.media_type}),
                );
            }
        }
        Ok(out)
    }

    /// The file `reference` names: the conversation's (by id, else by original name), else one
    /// in the data folders.
    async fn resolve(
        &self,
        reference: &str,
        files: Option<&dyn ConversationFiles>,
    ) -> Result<Target, BuiltinError> {
        if let Some(files) = files {
            let found = files
                .find(reference)
                .await
                .map_err(|e| BuiltinError::from_files(reference, e))?;
            if let Some(file) = found {
                let local = files
                    .local_path(&file.id)
                    .await
                    .map_err(|e| BuiltinError::from_files(reference, e))?;
                return Ok(Target {
                    local,
                    file: Some(file),
                });
            }
        }
        if is_conversation_id(reference) {
            return Err(BuiltinError::NoSuchFile {
                reference: reference.to_owned(),
            });
        }
        Ok(Target {
            local: self.locate(reference).await?,
            file: None,
        })
    }

    #[cfg(feature = "excel")]
    async fn read_workbook(
        &self,
        path: PathBuf,
        name: PathBuf,
        args: &FileReaderArgs,
    ) -> Result<Value, BuiltinError> {
        let opts = crate::workbook::WorkbookOptions {
            sheet: args.sheet.clone(),
            range: args.range.clone(),
            nrows: args.nrows,
            max_rows: self.config.max_rows,
            header: args.header,
            max_cells: self.config.max_cells,
        };
        let reference = args.file.clone();
        blocking(move || crate::workbook::read(&path, &name, &reference, &opts)).await
    }

    #[cfg(not(feature = "excel"))]
    async fn read_workbook(
        &self,
        _path: PathBuf,
        _name: PathBuf,
        args: &FileReaderArgs,
    ) -> Result<Value, BuiltinError> {
        Err(BuiltinError::InvalidArguments {
            tool: NAME,
            message: format!(
                "`{}`: this build reads no workbooks (feature `excel` is off); use run_python \
                 with pandas.read_excel",
                args.file
            ),
        })
    }

    async fn regular_file(
        &self,
        path: &Path,
        reference: &str,
    ) -> Result<std::fs::Metadata, BuiltinError> {
        let meta = tokio::fs::metadata(path)
            .await
            .map_err(|source| BuiltinError::Io {
                path: reference.to_owned(),
                source,
            })?;
        if !meta.is_file() {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: format!("`{reference}` is not a regular file"),
            });
        }
        Ok(meta)
    }

    fn check_size(&self, reference: &str, size: u64, limit: u64) -> Result<(), BuiltinError> {
        if size > limit {
            return Err(BuiltinError::TooLarge {
                path: reference.to_owned(),
                size,
                limit,
            });
        }
        Ok(())
    }

    /// The canonical file behind `reference`, checked to lie inside a root.
    async fn locate(&self, reference: &str) -> Result<PathBuf, BuiltinError> {
        let roots = self.canonical_roots().await;
        let given = Path::new(reference);
        if given
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Err(BuiltinError::PathOutsideRoots {
                path: reference.to_owned(),
                reason: "`..` is not allowed in paths".into(),
            });
        }
        if given.is_absolute() {
            return confine(reference, given, &roots).await;
        }
        for root in &roots {
            let candidate = root.join(given);
            if tokio::fs::symlink_metadata(&candidate).await.is_ok() {
                return confine(reference, &candidate, &roots).await;
            }
        }
        Err(BuiltinError::NotFound {
            path: reference.to_owned(),
        })
    }

    async fn canonical_roots(&self) -> Vec<PathBuf> {
        let mut roots = Vec::with_capacity(self.config.roots.len());
        for root in &self.config.roots {
            // A root that does not exist yet (no uploads so far) simply holds nothing.
            if let Ok(canonical) = tokio::fs::canonicalize(root).await {
                roots.push(canonical);
            }
        }
        roots
    }
}

/// Runs blocking file work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, BuiltinError> + Send + 'static,
) -> Result<T, BuiltinError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| BuiltinError::Environment {
            tool: NAME,
            message: format!("the reading worker stopped: {err}"),
        })?
}

fn parse_delimiter(d: &str) -> Result<u8, BuiltinError> {
    match d {
        "\\t" | "\t" | "tab" => Ok(b'\t'),
        "comma" => Ok(b','),
        "semicolon" => Ok(b';'),
        "pipe" => Ok(b'|'),
        _ if d.len() == 1 && d.is_ascii() => Ok(d.as_bytes()[0]),
        _ => Err(BuiltinError::InvalidArguments {
            tool: NAME,
            message: format!("delimiter `{d}` must be one ASCII character (or \"tab\")"),
        }),
    }
}

/// Whether `reference` is a file id with a kind's prefix (`upload_…`, `output_…`, `data_…`,
/// `code_…`): such ids name the conversation's files only and are never looked for in the
/// data folders.
fn is_conversation_id(reference: &str) -> bool {
    ba_protocol::FileId::parse(reference).is_ok_and(|id| id.prefixed_kind().is_some())
}

/// Canonicalises `path` (following every symlink) and accepts it only inside a root.
async fn confine(reference: &str, path: &Path, roots: &[PathBuf]) -> Result<PathBuf, BuiltinError> {
    let canonical = match tokio::fs::canonicalize(path).await {
        Ok(canonical) => canonical,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            // Say "outside" rather than "not found" for absolute paths elsewhere, so probing
            // for the existence of files outside the roots tells nothing.
            if path.is_absolute() && !roots.iter().any(|r| path.starts_with(r)) {
                return Err(outside(
                    reference,
                    "absolute paths must lie inside a data directory",
                ));
            }
            return Err(BuiltinError::NotFound {
                path: reference.to_owned(),
            });
        }
        Err(source) => {
            return Err(BuiltinError::Io {
                path: reference.to_owned(),
                source,
            });
        }
    };
    if roots.iter().any(|root| canonical.starts_with(root)) {
        Ok(canonical)
    } else if Path::new(reference).is_absolute() {
        Err(outside(
            reference,
            "absolute paths must lie inside a data directory",
        ))
    } else {
        Err(outside(
            reference,
            "it resolves through a link to a place outside them",
        ))
    }
}

fn outside(reference: &str, reason: &str) -> BuiltinError {
    BuiltinError::PathOutsideRoots {
        path: reference.to_owned(),
        reason: reason.to_owned(),
    }
}

fn read_json(reference: &str, text: &str, nrows: Option<usize>) -> Result<Value, BuiltinError> {
    let value: Value = serde_json::from_str(text).map_err(|err| BuiltinError::Parse {
        path: reference.to_owned(),
        format: "json",
        message: err.to_string(),
    })?;
    Ok(match value {
        Value::Array(items) => {
            let total = items.len();
            let take = nrows.unwrap_or(total).min(total);
            let items: Vec<Value> = items.into_iter().take(take).collect();
            json!({"content": items, "item_count": total, "items_returned": take,
                   "truncated": take < total})
        }
        other => json!({"content": other}),
    })
}

fn read_lines(text: &str, nrows: Option<usize>) -> Value {
    let line_count = text.lines().count();
    match nrows {
        Some(n) if n < line_count => {
            let content: Vec<&str> = text.lines().take(n).collect();
            json!({"content": content.join("\n"), "line_count": line_count,
                   "lines_returned": n, "truncated": true})
        }
        _ => json!({"content": text, "line_count": line_count,
                    "lines_returned": line_count, "truncated": false}),
    }
}

#[async_trait::async_trait]
impl Tool for FileReader {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let args = super::parse_args(NAME, input)?;
        Ok(self.read(args, ctx.files.as_deref()).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Reading a file gives the same answer for the same arguments and changes nothing, so it is
        // idempotent and safe at the restricted level.
        ToolCapabilities::default()
            .with_idempotent(true)
            .with_required_permission(PermissionLevel::Restricted)
    }

    fn upgrade_arguments(&self, mut arguments: Value) -> Value {
        // `file` was called `path`; recorded sessions and models send the old name.
        if let Value::Object(map) = &mut arguments
            && !map.contains_key("file")
            && let Some(reference) = map.remove("path")
        {
            map.insert("file".to_owned(), reference);
        }
        arguments
    }
}

#[cfg(test)]
mod tests;
