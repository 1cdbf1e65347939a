//! People over HTTP: `GET /api/v1/me`; sharing a conversation (`…/{id}/shares`); and the
//! admin API for users, their tokens and budgets. The admin routes answer 403 to anyone but an
//! admin — that they exist is no secret, unlike a conversation.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use ba_storage::{Access as ShareAccess, Directory, Role, UserBudget};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

use crate::caller::Caller;
use crate::conversations::{conversation_id, json_body};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The store's directory; a store without one (an in-memory one) keeps no users.
pub(crate) fn directory(state: &AppState) -> ApiResult<Arc<dyn Directory>> {
    state.store().directory().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "no_directory",
            "this server's store keeps no users (a file or PostgreSQL store does)",
        )
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `GET /api/v1/me`: who the caller is, their budget and what they spent this month.
pub(crate) async fn me(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Value>> {
    let mut body = json!({"name": caller.name, "role": caller.role});
    if let Some(directory) = state.store().directory() {
        let month = ba_storage::month_of(now_ms());
        let budget = directory
            .user(&caller.name)
            .await?
            .map(|u| u.budget)
            .unwrap_or_default();
        let spend = directory.spend(&caller.name, &month).await?;
        body["budget"] = json!(budget);
        body["spend"] = json!({"month": month, "usd": spend.usd, "tokens": spend.tokens});
    }
    Ok(Json(body))
}

fn admin_only(caller: &Caller) -> ApiResult<()> {
    if caller.role == Role::Admin {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        "only an admin manages users and tokens",
    ))
}

/// `GET /api/v1/users` (admin): every user, by name.
pub(crate) async fn users(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Value>> {
    admin_only(&caller)?;
    let users = directory(&state)?.users().await?;
    Ok(Json(json!({ "users": users })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewUserBody {
    name: Option<String>,
    role: Option<Role>,
}

/// `POST /api/v1/users` (admin) `{"name", "role"}`: 201 with the user; 409 when the name is
/// taken.
pub(crate) async fn add_user(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    admin_only(&caller)?;
    let body: NewUserBody = json_body(&body)?;
    let name = body
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("`name` is required"))?;
    let role = body.role.unwrap_or(Role::Analyst);
    let directory = directory(&state)?;
    ba_storage::check_user_name(&name)?;
    if directory.user(&name).await?.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_exists",
            format!("there is a user {name:?} already"),
        ));
    }
    let user = directory.add_user(&name, role).await?;
    tracing::info!(
        "user {name:?} added as {} by {}",
        role.as_str(),
        caller.name
    );
    Ok((StatusCode::CREATED, Json(user)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateUserBody {
    role: Option<Role>,
    budget: Option<UserBudget>,
}

/// The directory's user `name` (404 naming it).
async fn known(directory: &dyn Directory, name: &str) -> ApiResult<()> {
    match directory.user(name).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("there is no user {name:?}"))),
    }
}

/// `PATCH /api/v1/users/{name}` (admin) `{"role"?, "budget"?: {"month_usd", "month_tokens"}}`.
pub(crate) async fn update_user(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    admin_only(&caller)?;
    let body: UpdateUserBody = json_body(&body)?;
    let directory = directory(&state)?;
    known(directory.as_ref(), &name).await?;
    if let Some(budget) = &body.budget
        && (budget
            .month_usd
            .is_some_and(|usd| !usd.is_finite() || usd < 0.0))
    {
        return Err(ApiError::bad_request(
            "`budget.month_usd` must be a number of dollars, 0 or more",
        ));
    }
    if let Some(role) = body.role {
        directory.set_role(&name, role).await?;
        tracing::info!(
            "user {name:?} is now {} (by {})",
            role.as_str(),
            caller.name
        );
    }
    if let Some(budget) = body.budget {
        directory.set_budget(&name, budget).await?;
        tracing::info!("user {name:?}'s budget changed by {}", caller.name);
    }
    let user = directory.user(&name).await?;
    Ok(Json(json!(user)))
}

/// `POST /api/v1/users/{name}/tokens` (admin): a new token; its secret is in this answer only.
pub(crate) async fn issue_token(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<impl IntoResponse> {
    admin_only(&caller)?;
    let directory = directory(&state)?;
    known(directory.as_ref(), &name).await?;
    let issued = directory.issue_token(&name).await?;
    tracing::info!(
        "token {} issued to {name:?} by {}",
        issued.info.id,
        caller.name
    );
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": issued.info.id,
            "user": issued.info.user,
            "created_ms": issued.info.created_ms,
            "secret": issued.secret,
        })),
    ))
}

/// `GET /api/v1/users/{name}/tokens` (admin): the user's live tokens (never their secrets).
pub(crate) async fn tokens(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    admin_only(&caller)?;
    let directory = directory(&state)?;
    known(directory.as_ref(), &name).await?;
    Ok(Json(json!({ "tokens": directory.tokens(&name).await? })))
}

/// `DELETE /api/v1/tokens/{id}` (admin): 204, or 404 for a token that is not live.
pub(crate) async fn revoke_token(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(token): Path<String>,
) -> ApiResult<StatusCode> {
    admin_only(&caller)?;
    if !directory(&state)?.revoke_token(&token).await? {
        return Err(ApiError::not_found(format!(
            "there is no live token {:?}",
            token.chars().take(100).collect::<String>()
        )));
    }
    tracing::info!("token {token} revoked by {}", caller.name);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShareBody {
    user: Option<String>,
    access: Option<ShareAccess>,
}

/// `GET …/{id}/shares` (owner or admin).
pub(crate) async fn shares(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let shares = directory(&state)?.shares(&id).await?;
    Ok(Json(json!({ "shares": shares })))
}

/// `POST …/{id}/shares {"user", "access": "read"}` (owner or admin): the user may read the
/// conversation, its files and reports. 400 for a user the directory does not know.
pub(crate) async fn share(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let id = conversation_id(&id)?;
    let body: ShareBody = json_body(&body)?;
    let user = body
        .user
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("`user` is required: whom to share with"))?;
    let access = body.access.unwrap_or(ShareAccess::Read);
    let directory = directory(&state)?;
    if directory.user(&user).await?.is_none() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown_user",
            format!(
                "there is no user {:?} to share with",
                user.chars().take(100).collect::<String>()
            ),
        ));
    }
    let owner = state.store().metadata(&id).await?.owner;
    if owner == user {
        return Err(ApiError::bad_request(format!(
            "{user:?} owns conversation `{id}` already"
        )));
    }
    let share = directory.share(&id, &user, access).await?;
    tracing::info!("conversation {id} shared with {user:?} by {}", caller.name);
    Ok((StatusCode::CREATED, Json(share)))
}

/// `DELETE …/{id}/shares/{user}` (owner or admin): 204, or 404 when it was not shared with
/// them.
pub(crate) async fn unshare(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, user)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let id = conversation_id(&id)?;
    if !directory(&state)?.unshare(&id, &user).await? {
        return Err(ApiError::not_found(format!(
            "conversation `{id}` is not shared with {:?}",
            user.chars().take(100).collect::<String>()
        )));
    }
    tracing::info!(
        "conversation {id} no longer shared with {user:?} (by {})",
        caller.name
    );
    Ok(StatusCode::NO_CONTENT)
}
