//! Files of a conversation, all in its workspace (the store's: a folder for files, the
//! database for PostgreSQL, so servers that share a store share every file): uploads
//! (multipart, `upload_00N` ids the model cites as `<file_ref>`), saved code (list, view,
//! download with its extension), and every file by id — the outputs a final answer names in
//! `download_links` among them. Bodies stream both ways: an upload is spooled to a temporary
//! file as it arrives and then stored from it, a download is read from the store as it is sent,
//! so no file is ever held whole in memory. No name from a request is ever joined to a path:
//! ids are checked by the workspace, names are looked up among the files it lists.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ba_storage::ConversationId;
use ba_storage::{CodeMeta, get_code, list_code};
use ba_storage::{FileKind, FileMeta, NewFile, Workspace};
use futures::TryStreamExt as _;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::conversations::conversation_id;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::wire::UploadMeta;

/// The workspace of the server's store.
pub(crate) fn workspace(state: &AppState) -> ApiResult<Arc<dyn Workspace>> {
    state.agent().workspace().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "no_files",
            "this server's store keeps no files",
        )
    })
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the upload is over the limit of {limit} bytes"),
    )
}

fn multipart_error(e: &axum::extract::multipart::MultipartError, limit: usize) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large(limit)
    } else {
        ApiError::new(
            e.status(),
            "bad_upload",
            crate::error::excerpt(&e.body_text(), 200),
        )
    }
}

/// Reads the `description` part as it arrives, refusing it (413) as soon as it is past
/// [`ba_storage::MAX_DESCRIPTION`] bytes: no more of it is read, and never more is held.
async fn read_description(
    field: &mut axum::extract::multipart::Field<'_>,
    limit: usize,
) -> ApiResult<String> {
    let max = ba_storage::MAX_DESCRIPTION;
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| multipart_error(&e, limit))?
    {
        if bytes.len().saturating_add(chunk.len()) > max {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("the description is over the limit of {max} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| ApiError::bad_request("the description is not UTF-8 text"))
}

fn spool_error(e: &std::io::Error) -> ApiError {
    tracing::warn!("spooling an upload: {e}");
    ApiError::internal("the upload could not be written to a temporary file")
}

/// A temporary file an upload is spooled to (the system's temporary folder, a random name,
/// readable by this user only), removed when dropped.
struct Spool {
    path: std::path::PathBuf,
}

impl Spool {
    /// Creates the file; the spool and the file open for writing.
    async fn create() -> std::io::Result<(Self, tokio::fs::File)> {
        let path = std::env::temp_dir().join(format!("ba-upload-{}", uuid::Uuid::new_v4()));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await?;
        Ok((Self { path }, file))
    }

    /// The spooled bytes, from the start.
    async fn reopen(&self) -> std::io::Result<tokio::fs::File> {
        tokio::fs::File::open(&self.path).await
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `POST …/uploads`: a `file` part (with its file name) and an optional `description`, in
/// either order. The file is spooled to a temporary file as it arrives (so a description sent
/// after it is still kept), then stored in the conversation's workspace.
pub(crate) async fn upload(
    State(state): State<AppState>,
    Path(id): Path<String>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let files = workspace(&state)?;
    let limit = state.config().upload_limit;
    let mut multipart = multipart.map_err(|e| {
        ApiError::new(
            e.status(),
            "bad_upload",
            crate::error::excerpt(&e.body_text(), 200),
        )
    })?;
    let mut file: Option<(String, Option<String>, Spool)> = None;
    let mut description = String::new();
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|e| multipart_error(&e, limit))?
    {
        match field.name() {
            Some("file") => {
                let name = field
                    .file_name()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::bad_request("the `file` part has no file name"))?;
                let media = field.content_type().map(str::to_owned);
                let (spool, mut out) = Spool::create().await.map_err(|e| spool_error(&e))?;
                let mut written = 0usize;
                while let Some(chunk) = field
                    .chunk()
                    .await
                    .map_err(|e| multipart_error(&e, limit))?
                {
                    written = written.saturating_add(chunk.len());
                    if written > limit {
                        return Err(too_large(limit));
                    }
                    out.write_all(&chunk).await.map_err(|e| spool_error(&e))?;
                }
                out.flush().await.map_err(|e| spool_error(&e))?;
                file = Some((name, media, spool));
            }
            Some("description") => {
                description = read_description(&mut field, limit).await?;
            }
            _ => {}
        }
    }
    let (name, media, spool) =
        file.ok_or_else(|| ApiError::bad_request("no `file` part in the upload"))?;
    // The name is shown, never used as a path: keep its last component only.
    let shown = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    if shown.is_empty() || shown == "." || shown == ".." {
        return Err(ApiError::bad_request("the file name is empty"));
    }
    let mut new = NewFile::upload(shown, description.trim());
    // A client's generic type says nothing; the name's extension says more. The store keeps a
    // declared type only when it is passive or the name agrees (`ba_storage::media_type_of`).
    if let Some(media) = media.filter(|m| m != "application/octet-stream" && !m.is_empty()) {
        new = new.with_media_type(media);
    }
    let mut body = spool.reopen().await.map_err(|e| spool_error(&e))?;
    let meta = files.put(&id, new, &mut body).await?;
    Ok((StatusCode::CREATED, Json(UploadMeta::from_file(&meta))).into_response())
}

/// The files of a conversation that exists.
async fn listed(state: &AppState, id: &ConversationId) -> ApiResult<Vec<FileMeta>> {
    state.store().metadata(id).await?;
    Ok(workspace(state)?.list(id).await?)
}

pub(crate) async fn list_uploads(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<UploadMeta>>> {
    let id = conversation_id(&id)?;
    let files = listed(&state, &id).await?;
    Ok(Json(
        files
            .iter()
            .filter(|f| f.kind == FileKind::Upload)
            .map(UploadMeta::from_file)
            .collect(),
    ))
}

/// One file as `GET …/files` lists it.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    id: &'a str,
    kind: FileKind,
    name: &'a str,
    media_type: &'a str,
    size: u64,
}

/// `GET …/files`: every file of the conversation — uploads, code, outputs, data.
pub(crate) async fn list_files(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let files = listed(&state, &id).await?;
    let shown: Vec<Listed<'_>> = files
        .iter()
        .map(|f| Listed {
            id: &f.id,
            kind: f.kind,
            name: &f.name,
            media_type: &f.media_type,
            size: f.size,
        })
        .collect();
    Ok(Json(json!({ "files": shown })))
}

/// A name that can stand in a quoted header parameter: ASCII letters, digits, `._-`, the rest
/// `_`; never empty.
fn ascii_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.trim_matches(['.', '_']).is_empty() {
        "file".to_owned()
    } else {
        safe
    }
}

/// RFC 5987 encoding of a UTF-8 name for `filename*`.
fn encoded_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"._-~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A download's headers: the media type, an attachment disposition that cannot break the
/// header (an ASCII name and the UTF-8 one encoded), no sniffing, and a sandbox for a browser
/// that opens it anyway (an HTML or SVG output never runs as the page's origin).
pub(crate) fn download_headers(
    response: &mut Response,
    name: &str,
    media: &str,
    size: Option<u64>,
) {
    let disposition = HeaderValue::from_str(&format!(
        "attachment; filename=\"{}\"; filename*=UTF-8''{}",
        ascii_name(name),
        encoded_name(name)
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let media = HeaderValue::from_str(media)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, media);
    h.insert(header::CONTENT_DISPOSITION, disposition);
    if let Some(size) = size {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
}

/// Streams a file of the workspace as a download.
async fn send_file(
    files: &dyn Workspace,
    id: &ConversationId,
    meta: &FileMeta,
) -> ApiResult<Response> {
    let content = files.open(id, &meta.id).await?;
    let stream = tokio_util::io::ReaderStream::new(content.reader).map_err(|e| {
        tracing::warn!("sending a file: {e}");
        e
    });
    let mut response = Body::from_stream(stream).into_response();
    // A type a client declared before declarations were checked on the way in is checked
    // again on the way out.
    let media = ba_storage::media_type_of(&content.meta.name, Some(&content.meta.media_type));
    download_headers(
        &mut response,
        &content.meta.name,
        &media,
        Some(content.meta.size),
    );
    Ok(response)
}

pub(crate) async fn download_upload(
    State(state): State<AppState>,
    Path((id, upload_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let files = workspace(&state)?;
    let meta = files
        .meta(&id, &upload_id)
        .await
        .ok()
        .flatten()
        .filter(|m| m.kind == FileKind::Upload)
        .ok_or_else(|| {
            ApiError::not_found(format!("no upload {upload_id:?} in this conversation"))
        })?;
    send_file(files.as_ref(), &id, &meta).await
}

/// `GET …/files/{id}`: a file of the conversation by id (a name a final answer gave in
/// `download_links` also finds it) — looked up, never joined to a path.
pub(crate) async fn file(
    State(state): State<AppState>,
    Path((id, reference)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let files = workspace(&state)?;
    let mut found = files.find(&id, &reference).await.ok().flatten();
    if found.is_none() {
        // A code block by its file name (`code_q.sql`), as older answers named them.
        found = files
            .list(&id)
            .await?
            .into_iter()
            .find(|f| f.kind == FileKind::Code && f.name == reference);
    }
    let meta = found.ok_or_else(|| {
        ApiError::not_found(format!("no file {reference:?} in this conversation"))
    })?;
    send_file(files.as_ref(), &id, &meta).await
}

async fn code_of(
    state: &AppState,
    id: &ConversationId,
    code_id: &str,
) -> ApiResult<(CodeMeta, String)> {
    state.store().metadata(id).await?;
    let files = workspace(state)?;
    match get_code(files.as_ref(), id, code_id).await {
        Ok(found) => Ok(found),
        Err(_) => Err(ApiError::not_found(format!(
            "no code {code_id:?} in this conversation"
        ))),
    }
}

pub(crate) async fn list_code_blocks(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<CodeMeta>>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let list = match state.agent().workspace() {
        Some(files) => list_code(files.as_ref(), &id).await?,
        None => Vec::new(),
    };
    Ok(Json(list))
}

pub(crate) async fn view_code(
    State(state): State<AppState>,
    Path((id, code_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let (meta, code) = code_of(&state, &id, &code_id).await?;
    Ok(Json(json!({"meta": meta, "code": code})))
}

pub(crate) async fn download_code(
    State(state): State<AppState>,
    Path((id, code_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    let (meta, code) = code_of(&state, &id, &code_id).await?;
    let mut response = code.into_bytes().into_response();
    download_headers(
        &mut response,
        &meta.file_name,
        "text/plain; charset=utf-8",
        None,
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_names_cannot_break_the_header() {
        assert_eq!(ascii_name("sales 2024.csv"), "sales_2024.csv");
        assert_eq!(ascii_name("\"; x=\r\n.csv"), "___x___.csv");
        assert_eq!(ascii_name("销售.xlsx"), "__.xlsx");
        assert_eq!(ascii_name(".."), "file");
        assert_eq!(encoded_name("销售 a.csv"), "%E9%94%80%E5%94%AE%20a.csv");
        let mut response = Response::new(Body::empty());
        download_headers(&mut response, "a\"b\r\n.png", "image/png", Some(3));
        let h = response.headers();
        assert_eq!(h[header::CONTENT_TYPE], "image/png");
        assert_eq!(h[header::CONTENT_LENGTH], "3");
        assert_eq!(
            h[header::CONTENT_DISPOSITION],
            "attachment; filename=\"a_b__.png\"; filename*=UTF-8''a%22b%0D%0A.png"
        );
    }
}
