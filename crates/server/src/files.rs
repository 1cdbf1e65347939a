//! Files of a conversation: uploads (multipart, per conversation, `upload_00N` ids the model
//! cites as `<file_ref>`), saved code (list, view, download with its extension), and the files
//! a final answer names in `download_links`. No name from a request is ever joined to a path:
//! ids are checked by the stores, and names are looked up among the metadata they list.

use std::path::{Path as FsPath, PathBuf};

use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ba_protocol::LogEntry;
use ba_protocol::structured::ApiResponse;
use ba_storage::ConversationId;
use ba_storage::code::CodeMeta;
use ba_storage::upload::{UploadMeta, UploadStore};
use serde_json::{Value, json};

use crate::conversations::conversation_id;
use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, ServerConfig};

/// The upload folder of a conversation (its own folder under the uploads root).
pub(crate) fn uploads_dir(config: &ServerConfig, id: &ConversationId) -> PathBuf {
    config.uploads_dir.join(id.as_str())
}

/// The upload store of a conversation.
pub(crate) fn uploads(state: &AppState, id: &ConversationId) -> ApiResult<UploadStore> {
    Ok(UploadStore::open(uploads_dir(state.config(), id))?)
}

/// The processed answer of an entry, its file references resolved against the conversation's
/// uploads in `dir`: the agent resolves them against the one upload store it was built with,
/// while the server keeps a store per conversation, so the agent leaves them without a name.
pub(crate) fn api_response(entry: &LogEntry, dir: &FsPath) -> Option<ApiResponse> {
    let mut response = ba_agent::records::api_response(entry)?;
    resolve_file_refs(&mut response, dir);
    Some(response)
}

/// Names, types and sizes the file references of `response` from the uploads in `dir`; a
/// reference to no upload there stays as it is.
pub(crate) fn resolve_file_refs(response: &mut ApiResponse, dir: &FsPath) {
    let refs = &mut response.metadata.file_refs;
    // No folder yet means no upload: nothing to read, and nothing is created for it.
    if refs.is_empty() || !dir.is_dir() {
        return;
    }
    let Ok(store) = UploadStore::open(dir) else {
        return;
    };
    for r in refs.iter_mut() {
        if let Ok(meta) = store.meta(&r.file_id) {
            r.filename = meta.name;
            r.file_type = meta.file_type;
            r.size_bytes = meta.size;
        }
    }
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
        ApiError::new(e.status(), "bad_upload", e.body_text())
    }
}

/// `POST …/uploads`: a `file` part (with its file name) and an optional `description`.
pub(crate) async fn upload(
    State(state): State<AppState>,
    Path(id): Path<String>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let limit = state.config().upload_limit;
    let mut multipart =
        multipart.map_err(|e| ApiError::new(e.status(), "bad_upload", e.body_text()))?;
    let mut file: Option<(String, Option<String>, Vec<u8>)> = None;
    let mut description = String::new();
    while let Some(field) = multipart
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
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|e| multipart_error(&e, limit))?;
                if bytes.len() > limit {
                    return Err(too_large(limit));
                }
                file = Some((name, media, bytes.to_vec()));
            }
            Some("description") => {
                description = field.text().await.map_err(|e| multipart_error(&e, limit))?;
            }
            _ => {}
        }
    }
    let (name, media, bytes) =
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
    let store = uploads(&state, &id)?;
    let meta = store.add(&shown, media.as_deref(), &bytes, description.trim())?;
    Ok((StatusCode::CREATED, Json(meta)).into_response())
}

pub(crate) async fn list_uploads(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<UploadMeta>>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    Ok(Json(uploads(&state, &id)?.list()?))
}

/// A file download, with a name that cannot break the header.
fn attachment(name: &str, media: &str, bytes: Vec<u8>) -> Response {
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
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let media = HeaderValue::from_str(media)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, media);
    h.insert(header::CONTENT_DISPOSITION, disposition);
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn upload_response(store: &UploadStore, meta: &UploadMeta) -> ApiResult<Response> {
    let bytes = store.read(&meta.id)?;
    Ok(attachment(&meta.name, "application/octet-stream", bytes))
}

pub(crate) async fn download_upload(
    State(state): State<AppState>,
    Path((id, upload_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let store = uploads(&state, &id)?;
    let meta = store.meta(&upload_id).map_err(|_| {
        ApiError::not_found(format!("no upload {upload_id:?} in this conversation"))
    })?;
    upload_response(&store, &meta)
}

fn code_of(state: &AppState, id: &ConversationId, code_id: &str) -> ApiResult<(CodeMeta, String)> {
    let store = state
        .agent()
        .code_store()
        .ok_or_else(|| ApiError::not_found("this server saves no code"))?;
    match store.get(Some(id.as_str()), code_id) {
        Ok(found) => Ok(found),
        Err(_) => Err(ApiError::not_found(format!(
            "no code {code_id:?} in this conversation"
        ))),
    }
}

pub(crate) async fn list_code(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<CodeMeta>>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let list = match state.agent().code_store() {
        Some(store) => store.list(Some(id.as_str()))?,
        None => Vec::new(),
    };
    Ok(Json(list))
}

pub(crate) async fn view_code(
    State(state): State<AppState>,
    Path((id, code_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let (meta, code) = code_of(&state, &id, &code_id)?;
    Ok(Json(json!({"meta": meta, "code": code})))
}

pub(crate) async fn download_code(
    State(state): State<AppState>,
    Path((id, code_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    let (meta, code) = code_of(&state, &id, &code_id)?;
    Ok(attachment(
        &meta.file_name,
        "text/plain; charset=utf-8",
        code.into_bytes(),
    ))
}

/// `GET …/files/{name}`: a file a final answer offers (`download_links`): saved code by file
/// name or id, or an upload by id or name — looked up, never joined to a path.
pub(crate) async fn file(
    State(state): State<AppState>,
    Path((id, name)): Path<(String, String)>,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    if let Some(store) = state.agent().code_store() {
        for meta in store.list(Some(id.as_str()))? {
            if meta.file_name == name || meta.code_id == name {
                let (meta, code) = store.get(Some(id.as_str()), &meta.code_id)?;
                return Ok(attachment(
                    &meta.file_name,
                    "text/plain; charset=utf-8",
                    code.into_bytes(),
                ));
            }
        }
    }
    let store = uploads(&state, &id)?;
    for meta in store.list()? {
        if meta.id == name || meta.name == name {
            return upload_response(&store, &meta);
        }
    }
    Err(ApiError::not_found(format!(
        "no file {name:?} in this conversation"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::structured::FileRef;

    fn with_refs(ids: &[&str]) -> ApiResponse {
        let mut r: ApiResponse = serde_json::from_value(json!({"response": "", "metadata": {
            "action_type": "complete", "status": "complete", "content_type": "markdown",
            "contains_html": false}}))
        .unwrap_or_else(|e| panic!("{e}"));
        r.metadata.file_refs = ids
            .iter()
            .enumerate()
            .map(|(index, id)| FileRef {
                file_id: (*id).to_owned(),
                filename: String::new(),
                file_type: "unknown".into(),
                size_bytes: 0,
                index,
            })
            .collect();
        r
    }

    #[test]
    fn file_refs_are_named_from_the_conversations_uploads() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let uploads = dir.path().join("conv");
        let mut response = with_refs(&["upload_001"]);
        // No folder: nothing read, nothing created.
        resolve_file_refs(&mut response, &uploads);
        assert!(!uploads.exists());
        assert_eq!(response.metadata.file_refs[0].filename, "");
        let store = UploadStore::open(&uploads).unwrap_or_else(|e| panic!("{e}"));
        store
            .add("q3.csv", Some("text/csv"), b"a,b\n", "")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut response = with_refs(&["upload_001", "upload_404"]);
        resolve_file_refs(&mut response, &uploads);
        let refs = &response.metadata.file_refs;
        assert_eq!(
            (refs[0].filename.as_str(), refs[0].size_bytes),
            ("q3.csv", 4)
        );
        assert_eq!(refs[1].filename, "");
    }
}
