//! Memory over HTTP: the caller's own memory files and the team's (`/memories/team/…`, read
//! by everyone, changed by admins). `GET /api/v1/memory` lists them; `GET|PUT|DELETE
//! /api/v1/memory/{path}` reads, writes (`{"text"}`) and deletes one; `GET …/{path}/versions`
//! lists its versions and `POST …/{path}/restore {"version"}` brings one back. A path is
//! written as the model writes it without the leading `/memories/` (`preferences.md`,
//! `team/fiscal.md`); a path whose last name is `versions` or `restore` is read as those
//! routes. Every change is a version naming the caller.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use ba_storage::{
    MemoryAuthor, MemoryChange, MemoryLimits, MemoryPath, MemoryScope, MemoryStore, Role, rfc3339,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::conversations::json_body;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

fn memory(state: &AppState) -> ApiResult<Arc<dyn MemoryStore>> {
    state.store().memory().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "no_memory",
            "this server's store keeps no memory (a file or PostgreSQL store does)",
        )
    })
}

fn parse(caller: &Caller, path: &str) -> ApiResult<MemoryPath> {
    Ok(MemoryPath::parse(&caller.name, path)?.file()?)
}

fn may_change(caller: &Caller, path: &MemoryPath) -> ApiResult<()> {
    if path.scope == MemoryScope::Team && caller.role != Role::Admin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("{} is the team's; only an admin changes it", path.full()),
        ));
    }
    Ok(())
}

fn version_json(scope: &MemoryScope, v: &ba_storage::MemoryVersion) -> Value {
    json!({
        "path": scope.full_path(&v.path),
        "version": v.version,
        "deleted": v.text.is_none(),
        "size": v.text.as_ref().map(String::len),
        "text": v.text,
        "author": v.author,
        "created": rfc3339(v.created_ms),
    })
}

/// `GET /api/v1/memory`: the caller's files and the team's, and whether the caller changes
/// the team's.
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Value>> {
    let memory = memory(&state)?;
    let mut files = Vec::new();
    for scope in [MemoryScope::user(&caller.name)?, MemoryScope::Team] {
        for f in memory.files(&scope).await? {
            files.push(json!({
                "path": scope.full_path(&f.path),
                "size": f.size,
                "versions": f.versions,
                "updated": rfc3339(f.updated_ms),
                "team": scope == MemoryScope::Team,
            }));
        }
    }
    Ok(Json(
        json!({"files": files, "team_writable": caller.role == Role::Admin}),
    ))
}

/// `GET /api/v1/memory/{path}` (or `…/{path}/versions`).
pub(crate) async fn read(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(path): Path<String>,
) -> ApiResult<Json<Value>> {
    let memory = memory(&state)?;
    if let Some(file) = path.strip_suffix("/versions") {
        let path = parse(&caller, file)?;
        let versions = memory.history(&path.scope, &path.relative).await?;
        if versions.is_empty() {
            return Err(ApiError::not_found(format!(
                "no memory file {} was ever written",
                path.full()
            )));
        }
        let versions: Vec<Value> = versions
            .iter()
            .rev()
            .map(|v| version_json(&path.scope, v))
            .collect();
        return Ok(Json(json!({"path": path.full(), "versions": versions})));
    }
    let path = parse(&caller, &path)?;
    let version = memory
        .read(&path.scope, &path.relative)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no memory file {}", path.full())))?;
    Ok(Json(version_json(&path.scope, &version)))
}

/// `PUT /api/v1/memory/{path}`'s body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteBody {
    text: Option<String>,
}

/// `PUT /api/v1/memory/{path}` `{"text"}`: the file's new version.
pub(crate) async fn write(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(path): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let memory = memory(&state)?;
    let path = parse(&caller, &path)?;
    may_change(&caller, &path)?;
    let body: WriteBody = json_body(&body)?;
    let text = body.text.ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "give the file's whole text as {\"text\": …}",
        )
    })?;
    let change = MemoryChange::Write {
        path: path.relative.clone(),
        text,
    };
    let made = memory
        .commit(
            &path.scope,
            &[change],
            &MemoryAuthor::person(&caller.name),
            &MemoryLimits::default(),
        )
        .await?;
    let versions: Vec<Value> = made.iter().map(|v| version_json(&path.scope, v)).collect();
    Ok(Json(json!({"versions": versions})))
}

/// `DELETE /api/v1/memory/{path}`: a version without text (history and restore remain).
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(path): Path<String>,
) -> ApiResult<Json<Value>> {
    let memory = memory(&state)?;
    let path = parse(&caller, &path)?;
    may_change(&caller, &path)?;
    if memory.read(&path.scope, &path.relative).await?.is_none() {
        return Err(ApiError::not_found(format!(
            "no memory file {}",
            path.full()
        )));
    }
    let change = MemoryChange::Delete {
        path: path.relative.clone(),
    };
    let made = memory
        .commit(
            &path.scope,
            &[change],
            &MemoryAuthor::person(&caller.name),
            &MemoryLimits::default(),
        )
        .await?;
    let versions: Vec<Value> = made.iter().map(|v| version_json(&path.scope, v)).collect();
    Ok(Json(json!({"versions": versions})))
}

/// `POST /api/v1/memory/{path}/restore`'s body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RestoreBody {
    version: Option<u32>,
}

/// `POST /api/v1/memory/{path}/restore` `{"version"}`: that version's text as the newest.
pub(crate) async fn restore(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(path): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let memory = memory(&state)?;
    let Some(file) = path.strip_suffix("/restore") else {
        return Err(ApiError::not_found(
            "POST goes to /api/v1/memory/{path}/restore",
        ));
    };
    let path = parse(&caller, file)?;
    may_change(&caller, &path)?;
    let body: RestoreBody = json_body(&body)?;
    let version = body.version.ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "name the version to restore as {\"version\": N}",
        )
    })?;
    let made = memory
        .restore(
            &path.scope,
            &path.relative,
            version,
            &MemoryAuthor::person(&caller.name),
            &MemoryLimits::default(),
        )
        .await?;
    Ok(Json(version_json(&path.scope, &made)))
}
