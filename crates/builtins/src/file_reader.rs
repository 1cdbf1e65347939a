//! `file_reader`: reads an uploaded or data file (seed 003), confined to configured roots.

use ba_protocol::tool::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::BuiltinError;
use super::text::{Encoding, parse_csv};

/// The tool name.
pub const NAME: &str = "file_reader";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Read an uploaded file (upload_xxx) or a data file: csv, json, \
    text, markdown, python or sql. Use nrows to read only the first rows or lines.";

/// A file format `file_reader` knows (seed 003's list plus markdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// Chosen from the file extension.
    #[default]
    Auto,
    /// Comma-separated values.
    Csv,
    /// Excel workbooks: listed by seed 003 but not read here (see [`FileReader::run`]).
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
    fn from_extension(path: &Path) -> Self {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        match ext.as_str() {
            "csv" => Self::Csv,
            "json" => Self::Json,
            "md" | "markdown" => Self::Markdown,
            "py" => Self::Python,
            "sql" => Self::Sql,
            "xlsx" | "xls" | "xlsm" => Self::Excel,
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
    "utf-8".to_owned()
}

/// Arguments of `file_reader` (seed 003).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileReaderArgs {
    /// A file reference: an upload id (`upload_xxx`) or a path relative to a data directory.
    pub path: String,
    /// File format; `auto` picks it from the extension.
    #[serde(default)]
    pub format: FileFormat,
    /// Text encoding: utf-8 (default), latin-1 or windows-1252.
    #[serde(default = "default_encoding")]
    pub encoding: String,
    /// The most data rows (csv), items (json array) or lines (text) to return.
    #[serde(default)]
    pub nrows: Option<usize>,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// Finds the file behind an upload id. The storage crate provides the real one; the directory
/// based [`DirUploads`] serves tests and the demo.
#[async_trait]
pub trait UploadResolver: Send + Sync + fmt::Debug {
    /// The file of upload `id`, or `None` when there is no such upload.
    async fn resolve(&self, id: &str) -> std::io::Result<Option<PathBuf>>;
}

#[async_trait]
impl<T: UploadResolver + ?Sized> UploadResolver for Arc<T> {
    async fn resolve(&self, id: &str) -> std::io::Result<Option<PathBuf>> {
        (**self).resolve(id).await
    }
}

#[async_trait]
impl<T: UploadResolver + ?Sized> UploadResolver for Box<T> {
    async fn resolve(&self, id: &str) -> std::io::Result<Option<PathBuf>> {
        (**self).resolve(id).await
    }
}

fn _object_safe(_: &dyn UploadResolver) {}

/// Uploads stored as files in one directory, named by their id with any extension
/// (`upload_001.csv` is upload `upload_001`).
#[derive(Debug, Clone)]
pub struct DirUploads {
    dir: PathBuf,
}

impl DirUploads {
    /// Uploads in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

#[async_trait]
impl UploadResolver for DirUploads {
    async fn resolve(&self, id: &str) -> std::io::Result<Option<PathBuf>> {
        let mut entries = match tokio::fs::read_dir(&self.dir).await {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let mut found: Option<PathBuf> = None;
        while let Some(entry) = entries.next_entry().await? {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let stem = path.file_stem().map(|s| s.to_string_lossy());
            if name == id || stem.as_deref() == Some(id) {
                // Sorted choice so two files with the same stem resolve the same way every time.
                if found.as_ref().is_none_or(|f| path < *f) {
                    found = Some(path);
                }
            }
        }
        Ok(found)
    }
}

/// Where `file_reader` may read and how much.
#[derive(Debug, Clone)]
pub struct FileReaderConfig {
    /// Directories files may be read from (the upload root and the data root). Paths that
    /// leave all of them, directly or through a symlink, are refused.
    pub roots: Vec<PathBuf>,
    /// The largest file read, in bytes.
    pub max_bytes: u64,
}

impl FileReaderConfig {
    /// Reads confined to `roots`, files up to 50 MB.
    pub fn new(roots: Vec<PathBuf>) -> Self {
        Self {
            roots,
            max_bytes: 50 * 1024 * 1024,
        }
    }
}

/// The `file_reader` tool.
#[derive(Debug, Clone)]
pub struct FileReader {
    config: FileReaderConfig,
    uploads: Arc<dyn UploadResolver>,
}

impl FileReader {
    /// A reader over `config.roots`, resolving upload ids with `uploads`.
    pub fn new(config: FileReaderConfig, uploads: Arc<dyn UploadResolver>) -> Self {
        Self { config, uploads }
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<FileReaderArgs>()
    }

    /// Parses `args` and runs.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Reads the file. CSV gives `columns`, `rows` (arrays of strings) and `row_count`; JSON
    /// gives the parsed `content`; other formats give `content` text and `line_count`.
    /// Excel is refused with a pointer to `run_python`, which has openpyxl.
    pub async fn run(&self, args: FileReaderArgs) -> Result<Value, BuiltinError> {
        let encoding =
            Encoding::from_label(&args.encoding).ok_or_else(|| BuiltinError::Encoding {
                path: args.path.clone(),
                message: format!(
                    "encoding \"{}\" is not supported; use utf-8, latin-1 or windows-1252",
                    args.encoding
                ),
            })?;
        let path = self.locate(&args.path).await?;
        let format = match args.format {
            FileFormat::Auto => FileFormat::from_extension(&path),
            other => other,
        };
        if format == FileFormat::Excel {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: format!(
                    "`{}`: file_reader does not read Excel workbooks; use run_python with \
                     openpyxl or pandas.read_excel",
                    args.path
                ),
            });
        }
        let bytes = self.read_bounded(&path, &args.path).await?;
        let text = encoding
            .decode(&bytes)
            .map_err(|message| BuiltinError::Encoding {
                path: args.path.clone(),
                message,
            })?;
        let mut out = match format {
            FileFormat::Csv => read_csv(&args.path, &text, args.nrows)?,
            FileFormat::Json => read_json(&args.path, &text, args.nrows)?,
            _ => read_lines(&text, args.nrows),
        };
        if let Value::Object(map) = &mut out {
            map.insert("path".into(), json!(args.path));
            map.insert("format".into(), json!(format.as_str()));
            map.insert("encoding".into(), json!(encoding.label()));
            map.insert("size_bytes".into(), json!(bytes.len()));
        }
        Ok(out)
    }

    /// The canonical file behind `reference`, checked to lie inside a root.
    async fn locate(&self, reference: &str) -> Result<PathBuf, BuiltinError> {
        let roots = self.canonical_roots().await;
        if is_upload_id(reference) {
            let found = self
                .uploads
                .resolve(reference)
                .await
                .map_err(|source| BuiltinError::Io {
                    path: PathBuf::from(reference),
                    source,
                })?
                .ok_or_else(|| BuiltinError::NotFound {
                    path: reference.to_owned(),
                })?;
            return confine(reference, &found, &roots).await;
        }
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

    async fn read_bounded(&self, path: &Path, reference: &str) -> Result<Vec<u8>, BuiltinError> {
        let io = |source| BuiltinError::Io {
            path: path.to_owned(),
            source,
        };
        let meta = tokio::fs::metadata(path).await.map_err(io)?;
        if !meta.is_file() {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: format!("`{reference}` is not a regular file"),
            });
        }
        if meta.len() > self.config.max_bytes {
            return Err(BuiltinError::TooLarge {
                path: reference.to_owned(),
                size: meta.len(),
                limit: self.config.max_bytes,
            });
        }
        tokio::fs::read(path).await.map_err(io)
    }
}

fn is_upload_id(reference: &str) -> bool {
    reference.strip_prefix("upload_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    })
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
                path: path.to_owned(),
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

fn read_csv(reference: &str, text: &str, nrows: Option<usize>) -> Result<Value, BuiltinError> {
    let mut records = parse_csv(text)
        .map_err(|err| BuiltinError::Parse {
            path: reference.to_owned(),
            format: "csv",
            message: format!("line {}: {}", err.line, err.message),
        })?
        .into_iter();
    let columns = records.next().unwrap_or_default();
    let rows: Vec<Vec<String>> = records.collect();
    let row_count = rows.len();
    let take = nrows.unwrap_or(row_count).min(row_count);
    let returned: Vec<Vec<String>> = rows.into_iter().take(take).collect();
    Ok(json!({
        "columns": columns,
        "rows": returned,
        "row_count": row_count,
        "rows_returned": take,
        "truncated": take < row_count,
    }))
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

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(self.call_json(input).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Reading a file gives the same answer for the same arguments and changes nothing, so it is
        // idempotent and safe at the restricted level.
        ToolCapabilities::default()
            .with_idempotent(true)
            .with_required_permission(PermissionLevel::Restricted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Setup {
        _tmp: tempfile::TempDir,
        outside: PathBuf,
        data: PathBuf,
        reader: FileReader,
    }

    fn setup() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let uploads = tmp.path().join("uploads");
        let outside = tmp.path().join("outside");
        for dir in [&data, &uploads, &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            data.join("sales.csv"),
            "region,note\nWest,\"grew, fast\"\nEast,\"two\nlines\"\nNorth,flat\n",
        )
        .unwrap();
        std::fs::write(data.join("q.sql"), "SELECT 1;\n-- two\n-- three\n").unwrap();
        std::fs::write(data.join("list.json"), "[1, 2, 3]").unwrap();
        std::fs::write(data.join("latin.txt"), b"caf\xe9\n").unwrap();
        std::fs::write(uploads.join("upload_001.csv"), "a,b\n1,2\n").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        let config = FileReaderConfig::new(vec![uploads.clone(), data.clone()]);
        let reader = FileReader::new(config, Arc::new(DirUploads::new(uploads)));
        Setup {
            outside,
            data,
            reader,
            _tmp: tmp,
        }
    }

    async fn read(reader: &FileReader, args: Value) -> Result<Value, BuiltinError> {
        reader.call_json(args).await
    }

    #[tokio::test]
    async fn reads_csv_with_quoted_fields_and_nrows() {
        let s = setup();
        let out = read(&s.reader, json!({"path": "sales.csv", "nrows": 2}))
            .await
            .unwrap();
        assert_eq!(out["columns"], json!(["region", "note"]));
        assert_eq!(
            out["rows"],
            json!([["West", "grew, fast"], ["East", "two\nlines"]])
        );
        assert_eq!(out["row_count"], 3);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["format"], "csv");
    }

    #[tokio::test]
    async fn reads_uploads_json_sql_and_latin1() {
        let s = setup();
        let out = read(&s.reader, json!({"path": "upload_001"}))
            .await
            .unwrap();
        assert_eq!(out["rows"], json!([["1", "2"]]));
        let out = read(&s.reader, json!({"path": "list.json", "nrows": 2}))
            .await
            .unwrap();
        assert_eq!(out["content"], json!([1, 2]));
        assert_eq!(out["item_count"], 3);
        let out = read(&s.reader, json!({"path": "q.sql", "nrows": 1}))
            .await
            .unwrap();
        assert_eq!(out["content"], "SELECT 1;");
        assert_eq!(out["format"], "sql");
        assert_eq!(out["line_count"], 3);
        let out = read(
            &s.reader,
            json!({"path": "latin.txt", "encoding": "latin-1"}),
        )
        .await
        .unwrap();
        assert_eq!(out["content"], "café\n");
        let err = read(&s.reader, json!({"path": "latin.txt"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("latin-1"), "{err}");
        let err = read(&s.reader, json!({"path": "latin.txt", "encoding": "gbk"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
    }

    #[tokio::test]
    async fn refuses_parent_directories() {
        let s = setup();
        for path in [
            "../outside/secret.txt",
            "sub/../../outside/secret.txt",
            "..",
        ] {
            let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::PathOutsideRoots { .. }),
                "{path}: {err}"
            );
            assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
        }
    }

    #[tokio::test]
    async fn refuses_absolute_paths_outside_the_roots() {
        let s = setup();
        let secret = s.outside.join("secret.txt");
        for path in [secret.to_string_lossy().into_owned(), "/etc/passwd".into()] {
            let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::PathOutsideRoots { .. }),
                "{path}: {err}"
            );
        }
        let missing = read(&s.reader, json!({"path": "/no/such/file"}))
            .await
            .unwrap_err();
        assert!(matches!(missing, BuiltinError::PathOutsideRoots { .. }));
        let inside = s.data.join("sales.csv");
        let ok = read(&s.reader, json!({"path": inside})).await.unwrap();
        assert_eq!(ok["row_count"], 3);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn refuses_symlinks_that_escape() {
        let s = setup();
        std::os::unix::fs::symlink(s.outside.join("secret.txt"), s.data.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(&s.outside, s.data.join("dirlink")).unwrap();
        for path in ["link.txt", "dirlink/secret.txt"] {
            let err = read(&s.reader, json!({"path": path})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::PathOutsideRoots { .. }),
                "{path}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn bad_arguments_and_missing_files_are_clear() {
        let s = setup();
        let err = read(&s.reader, json!({"path": "nope.csv"}))
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::NotFound { .. }), "{err}");
        let err = read(&s.reader, json!({"path": "upload_999"}))
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::NotFound { .. }), "{err}");
        let err = read(&s.reader, json!({"path": "a.csv", "format": "pdf"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `pdf`"), "{err}");
        std::fs::write(s.data.join("bad.csv"), "a\n\"open\n").unwrap();
        let err = read(&s.reader, json!({"path": "bad.csv"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        std::fs::write(s.data.join("book.xlsx"), "x").unwrap();
        let err = read(&s.reader, json!({"path": "book.xlsx"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("run_python"), "{err}");
    }

    #[test]
    fn schema_lists_seed_fields() {
        let schema = FileReader::schema().to_string();
        for field in ["path", "format", "encoding", "nrows", "response_format"] {
            assert!(schema.contains(field), "{field} missing from {schema}");
        }
    }
}
