//! Files of a conversation: uploads (multipart, per conversation, `upload_00N` ids the model
//! cites as `<file_ref>`), saved code (list, view, download with its extension), and the files
//! a final answer names in `download_links`. No name from a request is ever joined to a path:
//! ids are checked by the stores, and names are looked up among the metadata they list.

use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ba_storage::ConversationId;
use ba_storage::code::CodeMeta;
use ba_storage::upload::{UploadMeta, UploadStore};
use serde_json::{Value, json};

use crate::conversations::conversation_id;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The upload store of a conversation (its own folder under the uploads root).
pub(crate) fn uploads(state: &AppState, id: &ConversationId) -> ApiResult<UploadStore> {
    Ok(UploadStore::open(
        state.config().uploads_dir.join(id.as_str()),
    )?)
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
