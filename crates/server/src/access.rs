//! Who sees a conversation: its owner and admins fully, a user it is shared with to read, and
//! nobody else — to them it answers 404 exactly as a conversation that does not exist, so
//! existence does not leak. One middleware on every conversation route decides, from the
//! route, what the request needs, so no handler can forget to ask.

use axum::extract::{Extension, RawPathParams, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ba_storage::{ConversationId, ConversationMeta, Role, StorageError};
use serde::Serialize;

use crate::caller::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Parses a path id; a name that could leave the store's folder is refused.
pub(crate) fn conversation_id(raw: &str) -> ApiResult<ConversationId> {
    ConversationId::new(raw)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_id", e.to_string()))
}

/// What a caller may do with a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// The caller owns it.
    Owner,
    /// The caller is an admin and may do anything with it.
    Admin,
    /// It is shared with the caller to read.
    Read,
}

impl Access {
    fn full(self) -> bool {
        matches!(self, Self::Owner | Self::Admin)
    }
}

/// What a route needs of its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// To see it: the owner, an admin or a reader.
    Read,
    /// To make a fork of one's own from it: a reader who may work.
    Fork,
    /// To see who it is shared with: the owner or an admin.
    Manage,
    /// To change it or run it: the owner or an admin who may work.
    Full,
}

/// What `method` on the conversation route `path` needs.
fn need(method: &Method, path: &str) -> Need {
    // The part after `/conversations/{id}`.
    let tail = path
        .split_once("/conversations/")
        .map_or("", |(_, rest)| rest.find('/').map_or("", |at| &rest[at..]));
    match (method, tail) {
        (&Method::GET, "/shares") => Need::Manage,
        (&Method::GET | &Method::HEAD, _) => Need::Read,
        (&Method::POST, "/fork") => Need::Fork,
        _ => Need::Full,
    }
}

/// The answer for a conversation the caller may not see: the same as for one that does not
/// exist.
pub(crate) fn hidden(id: &ConversationId) -> ApiError {
    ApiError::from(StorageError::NotFound { id: id.to_string() })
}

/// The caller's access to the conversation `meta` describes, `None` when it is not theirs,
/// not shared with them, and they are no admin.
pub(crate) async fn access_of(
    state: &AppState,
    caller: &Caller,
    meta: &ConversationMeta,
) -> ApiResult<Option<Access>> {
    if meta.owner == caller.name {
        return Ok(Some(Access::Owner));
    }
    if caller.role == Role::Admin {
        return Ok(Some(Access::Admin));
    }
    let Some(directory) = state.store().directory() else {
        return Ok(None);
    };
    let id = conversation_id(&meta.id)?;
    let shared = directory
        .shares(&id)
        .await?
        .iter()
        .any(|s| s.user == caller.name);
    Ok(shared.then_some(Access::Read))
}

/// The conversation and the caller's access to it; 404 when they have none.
pub(crate) async fn visible(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
) -> ApiResult<(ConversationMeta, Access)> {
    let meta = state.store().metadata(id).await?;
    match access_of(state, caller, &meta).await? {
        Some(access) => Ok((meta, access)),
        None => Err(hidden(id)),
    }
}

/// Every `/conversations/{id}/…` route: 404 to a caller who may not see the conversation,
/// 403 to one who may see it and not do what they asked.
pub(crate) async fn guard(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    params: RawPathParams,
    mut request: Request,
    next: Next,
) -> Response {
    let Some((_, raw)) = params.iter().find(|(name, _)| *name == "id") else {
        return next.run(request).await;
    };
    let id = match conversation_id(raw) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    let (_, access) = match visible(&state, &caller, &id).await {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    let refused = match need(request.method(), request.uri().path()) {
        Need::Read => None,
        Need::Manage if access.full() => None,
        Need::Fork | Need::Full if !caller.may_work() => Some(
            "a viewer reads what is shared with them and cannot start or change work".to_owned(),
        ),
        Need::Fork => None,
        Need::Full if access.full() => None,
        Need::Manage | Need::Full => Some(format!(
            "conversation `{id}` is shared with you to read: only its owner or an admin may do this"
        )),
    };
    if let Some(message) = refused {
        return ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response();
    }
    request.extensions_mut().insert(access);
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_route_needs() {
        let conv = "/api/v1/conversations/c_1";
        let cases = [
            (Method::GET, "", Need::Read),
            (Method::GET, "/messages", Need::Read),
            (Method::GET, "/report/7", Need::Read),
            (Method::GET, "/spend", Need::Read),
            (Method::GET, "/shares", Need::Manage),
            (Method::POST, "/fork", Need::Fork),
            (Method::POST, "/runs", Need::Full),
            (Method::POST, "/shares", Need::Full),
            (Method::DELETE, "/shares/bob", Need::Full),
            (Method::DELETE, "", Need::Full),
            (Method::PATCH, "", Need::Full),
            (Method::POST, "/approvals/call_1", Need::Full),
            (Method::GET, "/shares/", Need::Read),
        ];
        for (method, tail, expected) in cases {
            assert_eq!(
                need(&method, &format!("{conv}{tail}")),
                expected,
                "{method} {tail}"
            );
        }
    }
}
