//! A report with its files: a zip (`<folder>/report.html` or `report.md`, and
//! `<folder>/files/…`), or the document written to disk with `files/` beside it. Files are
//! copied as they stream (never held whole), and a bundle past [`MAX_BUNDLE_BYTES`] is refused
//! before anything is written.

use std::io::{Read as _, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ba_storage::ConversationStore;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::names::FOLDER;
use super::{BundledFile, ExportError, ExportedReport, MAX_BUNDLE_BYTES, Source};

/// What a file of the bundle is read from.
#[derive(Debug)]
enum Content {
    /// A path on this machine holding it (the store's own file, or its cached copy), and the
    /// bytes to copy.
    Path(PathBuf, u64),
    Bytes(Arc<[u8]>),
}

fn write_error(what: &str, e: &dyn std::fmt::Display) -> ExportError {
    ExportError::Write {
        what: what.to_owned(),
        message: e.to_string(),
    }
}

fn check_size(report: &ExportedReport) -> Result<(), ExportError> {
    let size = report.files_size();
    if size > MAX_BUNDLE_BYTES {
        return Err(ExportError::TooLarge {
            size,
            limit: MAX_BUNDLE_BYTES,
        });
    }
    Ok(())
}

async fn resolve(
    report: &ExportedReport,
    store: &dyn ConversationStore,
) -> Result<Vec<(String, Content)>, ExportError> {
    let workspace = store.workspace();
    let mut out = Vec::with_capacity(report.files.len());
    for BundledFile {
        path, size, source, ..
    } in &report.files
    {
        let content = match source {
            Source::Made(bytes) => Content::Bytes(Arc::clone(bytes)),
            Source::Stored(id) => {
                let Some(ws) = workspace.as_deref() else {
                    return Err(write_error(path, &"the store keeps no files"));
                };
                Content::Path(ws.local_path(&report.conversation, id).await?, *size)
            }
        };
        out.push((path.clone(), content));
    }
    Ok(out)
}

/// Copies one file of the bundle into `out`; a stored file must still be the size it was.
fn copy(path: &str, content: &Content, out: &mut dyn Write) -> Result<(), ExportError> {
    match content {
        Content::Bytes(bytes) => out.write_all(bytes).map_err(|e| write_error(path, &e)),
        Content::Path(local, size) => {
            let file = std::fs::File::open(local).map_err(|e| write_error(path, &e))?;
            let copied =
                std::io::copy(&mut file.take(*size), out).map_err(|e| write_error(path, &e))?;
            if copied == *size {
                Ok(())
            } else {
                Err(write_error(
                    path,
                    &format!("the stored file holds {copied} bytes, not {size}"),
                ))
            }
        }
    }
}

/// The zip's date for its entries: the answer's time (`2025-11-27T15:41:02Z`), 1980 when it
/// cannot be read.
fn zip_time(answered_at: &str) -> DateTime {
    let n = |range: std::ops::Range<usize>| answered_at.get(range)?.parse::<u16>().ok();
    let parts = (n(0..4), n(5..7), n(8..10), n(11..13), n(14..16), n(17..19));
    if let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) = parts {
        let small = |v: u16| u8::try_from(v).unwrap_or(u8::MAX);
        if let Ok(t) =
            DateTime::from_date_and_time(y, small(mo), small(d), small(h), small(mi), small(s))
        {
            return t;
        }
    }
    DateTime::default()
}

/// Formats already compressed, stored as they are.
fn compressed(path: &str) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(
        ext.as_deref(),
        Some(
            "png"
                | "jpg"
                | "jpeg"
                | "gif"
                | "webp"
                | "zip"
                | "gz"
                | "bz2"
                | "xz"
                | "7z"
                | "xlsx"
                | "docx"
                | "pptx"
                | "parquet"
                | "pdf"
                | "mp4"
        )
    )
}

/// Writes the report and its files as a zip into `out` (everything under
/// [`ExportedReport::folder`]) and gives `out` back at its end.
///
/// # Errors
/// [`ExportError::TooLarge`] when the files come to more than [`MAX_BUNDLE_BYTES`] (nothing is
/// written), [`ExportError::Storage`] when a file cannot be found, [`ExportError::Write`] when
/// writing fails.
pub async fn write_zip<W>(
    report: &ExportedReport,
    store: &dyn ConversationStore,
    out: W,
) -> Result<W, ExportError>
where
    W: Write + Seek + Send + 'static,
{
    check_size(report)?;
    let contents = resolve(report, store).await?;
    let folder = report.folder().to_owned();
    let document = (report.format.document_name(), report.body.clone());
    let time = zip_time(&report.answered_at);
    tokio::task::spawn_blocking(move || {
        const ARCHIVE: &str = "the report's archive";
        let options = |stored: bool| {
            SimpleFileOptions::default()
                .compression_method(if stored {
                    CompressionMethod::Stored
                } else {
                    CompressionMethod::Deflated
                })
                .last_modified_time(time)
                .unix_permissions(0o644)
        };
        let mut zip = ZipWriter::new(out);
        let (name, body) = document;
        zip.start_file(format!("{folder}/{name}"), options(false))
            .map_err(|e| write_error(ARCHIVE, &e))?;
        zip.write_all(body.as_bytes())
            .map_err(|e| write_error(ARCHIVE, &e))?;
        for (path, content) in &contents {
            zip.start_file(format!("{folder}/{path}"), options(compressed(path)))
                .map_err(|e| write_error(ARCHIVE, &e))?;
            copy(path, content, &mut zip)?;
        }
        zip.finish().map_err(|e| write_error(ARCHIVE, &e))
    })
    .await
    .map_err(|e| write_error("the report's archive", &e))?
}

/// A temporary file's path, removed when dropped.
#[derive(Debug)]
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A report's zip built in a temporary file (the system's temporary folder, a random name,
/// readable by this user only), read from its start; the file goes when this is dropped — when
/// the response that streams it is done, or its client gone.
#[derive(Debug)]
pub struct SpooledZip {
    file: tokio::fs::File,
    size: u64,
    _path: Removed,
}

impl SpooledZip {
    /// The zip's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl tokio::io::AsyncRead for SpooledZip {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.file).poll_read(cx, buf)
    }
}

/// [`write_zip`] into a temporary file, for a server to stream: a bundle of large files never
/// sits in memory.
///
/// # Errors
/// As [`write_zip`]; [`ExportError::Write`] when the temporary file cannot be made.
pub async fn spool_zip(
    report: &ExportedReport,
    store: &dyn ConversationStore,
) -> Result<SpooledZip, ExportError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    const SPOOL: &str = "a temporary file for the report's archive";
    let path = std::env::temp_dir().join(format!("ba-report-{}.zip", uuid::Uuid::new_v4()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| write_error(SPOOL, &e))?;
    let removed = Removed(path);
    let mut file = write_zip(report, store, file).await?;
    let size = file
        .seek(SeekFrom::End(0))
        .and_then(|size| file.rewind().map(|()| size))
        .map_err(|e| write_error(SPOOL, &e))?;
    Ok(SpooledZip {
        file: tokio::fs::File::from_std(file),
        size,
        _path: removed,
    })
}

/// Writes the document to `document` and its files into `files/` beside it (replacing files of
/// the same names there); returns the paths written, the document first.
///
/// # Errors
/// As [`write_zip`].
pub async fn write_beside(
    report: &ExportedReport,
    store: &dyn ConversationStore,
    document: &Path,
) -> Result<Vec<PathBuf>, ExportError> {
    check_size(report)?;
    let contents = resolve(report, store).await?;
    let document = document.to_owned();
    let body = report.body.clone();
    tokio::task::spawn_blocking(move || {
        let shown = document.display().to_string();
        std::fs::write(&document, body.as_bytes()).map_err(|e| write_error(&shown, &e))?;
        let mut written = vec![document.clone()];
        if contents.is_empty() {
            return Ok(written);
        }
        let dir = document.parent().unwrap_or(Path::new("")).join(FOLDER);
        std::fs::create_dir_all(&dir).map_err(|e| write_error(&dir.display().to_string(), &e))?;
        for (path, content) in &contents {
            let target = dir.join(path.strip_prefix(&format!("{FOLDER}/")).unwrap_or(path));
            let shown = target.display().to_string();
            let mut file = std::fs::File::create(&target).map_err(|e| write_error(&shown, &e))?;
            copy(&shown, content, &mut file)?;
            written.push(target);
        }
        Ok(written)
    })
    .await
    .map_err(|e| write_error("the report's files", &e))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_dated_by_the_answer() {
        let t = zip_time("2025-11-27T15:41:02.123Z");
        assert_eq!(
            (
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            ),
            (2025, 11, 27, 15, 41, 2)
        );
        assert_eq!(zip_time("yesterday"), DateTime::default());
    }

    #[tokio::test]
    async fn a_bundle_past_the_limit_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = ba_storage::FileStore::open(dir.path()).unwrap();
        let file = |path: &str, size: u64| BundledFile {
            path: path.into(),
            size,
            media_type: "text/csv".into(),
            source: Source::Stored("upload_001".into()),
        };
        let report = ExportedReport {
            format: super::super::ReportFormat::Html,
            body: "<p>report</p>".into(),
            seq: 4,
            files: vec![
                file("files/a.csv", MAX_BUNDLE_BYTES - 10),
                file("files/b.csv", 11),
            ],
            stem: "report-sales-4".into(),
            conversation: ba_storage::ConversationId::new("c1").unwrap(),
            answered_at: String::new(),
        };
        let refused = write_zip(&report, &store, std::io::Cursor::new(Vec::new())).await;
        let Err(e) = refused else {
            panic!("a bundle of {} bytes was written", report.files_size())
        };
        assert_eq!(
            e.to_string(),
            "the report's files come to 536870913 bytes, more than the 536870912 a bundle may \
             hold; export the report alone (format html) and download its files one by one"
        );
        let target = dir.path().join("out").join("report.html");
        assert!(matches!(
            write_beside(&report, &store, &target).await,
            Err(ExportError::TooLarge { .. })
        ));
        assert!(!target.exists(), "nothing is written");
    }

    #[tokio::test]
    async fn a_spooled_zip_holds_the_report_and_its_files_and_goes_when_dropped() {
        use tokio::io::AsyncReadExt as _;
        let dir = tempfile::tempdir().unwrap();
        let store = ba_storage::FileStore::open(dir.path()).unwrap();
        let report = ExportedReport {
            format: super::super::ReportFormat::Markdown,
            body: "# Report\n".into(),
            seq: 4,
            files: vec![BundledFile {
                path: "files/chart-1.svg".into(),
                size: 5,
                media_type: "image/svg+xml".into(),
                source: Source::Made(Arc::from(&b"<svg>"[..])),
            }],
            stem: "report-sales-4".into(),
            conversation: ba_storage::ConversationId::new("c1").unwrap(),
            answered_at: "2025-11-27T15:41:02Z".into(),
        };
        let mut zip = spool_zip(&report, &store).await.unwrap();
        let path = zip._path.0.clone();
        assert!(path.exists());
        let mut bytes = Vec::new();
        zip.read_to_end(&mut bytes).await.unwrap();
        assert_eq!(bytes.len() as u64, zip.size());
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let names: Vec<String> = archive
            .file_names()
            .map(|n| n.unwrap().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "report-sales-4/report.md",
                "report-sales-4/files/chart-1.svg"
            ]
        );
        let mut svg = String::new();
        std::io::Read::read_to_string(&mut archive.by_index(1).unwrap(), &mut svg).unwrap();
        assert_eq!(svg, "<svg>");
        drop(zip);
        assert!(!path.exists(), "the temporary file stays");
    }

    #[test]
    fn compressed_formats_are_stored() {
        assert!(compressed("files/chart.PNG"));
        assert!(compressed("files/book.xlsx"));
        assert!(!compressed("files/sales.csv"));
    }
}
