//! Conversations: list, create, read (with the status the page shows), rename, switch mode,
//! delete, and the transcript (`messages?from_seq=`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use ba_agent::RunStatus;
use ba_protocol::{EntryKind, LlmErrorKind, LogEntry, LogRole, Mode};
use ba_storage::{ConversationId, ConversationMeta, MetaUpdate, NewConversation, Page, Role};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub(crate) use crate::access::conversation_id;
use crate::access::{Access, access_of};
use crate::caller::Caller;
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;
use crate::state::AppState;

/// Where a conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    /// Nothing to do: empty, or the last turn has its answer.
    Idle,
    /// A run is in flight.
    Running,
    /// The log ends mid-turn (a run was cut by a restart or cancelled): Resume or Continue
    /// goes on.
    Interrupted,
    /// The last run failed (a model failure in the log: Continue goes on).
    Failed,
    /// The last run stopped at a spending cap (the conversation's or its owner's month): once
    /// the cap is raised or the month turns, Continue goes on.
    BudgetReached,
    /// Tool calls wait for a person's decision (`GET …/approvals`).
    AwaitingApproval,
    /// Its history cannot be read (a fork whose parent is gone): `problem` says why; it can
    /// only be deleted.
    Broken,
}

/// A conversation as the API shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ConversationView {
    /// The id.
    pub id: String,
    /// Title, if set.
    pub title: Option<String>,
    /// The user it belongs to.
    pub owner: String,
    /// What the caller may do with it: `owner`, `admin` (everything) or `read` (shared with
    /// them to read).
    pub access: Access,
    /// Active mode.
    pub mode: Mode,
    /// Creation time (ms since the epoch).
    pub created_ms: i64,
    /// Last change (ms since the epoch).
    pub updated_ms: i64,
    /// Sequence number of the last entry (0 when empty).
    pub last_seq: u64,
    /// Idle, running, interrupted, failed, budget reached, awaiting approval or broken.
    pub status: ConversationStatus,
    /// The run in flight: this server's, or the one that holds the store's run lease (a CLI
    /// run, another server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<String>,
    /// Why the conversation cannot be read, when its status is `broken`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Where this conversation was forked from, when it is a fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkView>,
}

/// A fork's parent and cut.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForkView {
    /// The conversation forked.
    pub parent: String,
    /// Its last entry the fork shares.
    pub at_seq: u64,
}

/// `POST …/{id}/fork`: the new conversation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Forked {
    /// The fork's id.
    pub id: String,
    /// The conversation forked.
    pub parent: String,
    /// Its last entry the fork shares.
    pub at_seq: u64,
}

/// Reads a JSON body; an empty body is the type's default. A body that does not fit is named
/// by where it went wrong, never echoed: what the parser quotes of it is cut to a short,
/// cleaned excerpt.
pub(crate) fn json_body<T: DeserializeOwned + Default>(body: &Bytes) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        let text = e.to_string();
        // serde_json ends its message with the place; the rest may quote the body.
        let place = format!(" at line {} column {}", e.line(), e.column());
        let what = text.strip_suffix(&place).unwrap_or(&text);
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            format!(
                "the body is not the expected JSON: {}{place}",
                crate::error::excerpt(what, 200)
            ),
        )
    })
}

/// The status of a conversation from its hub and the last entry of its log.
pub(crate) fn status_of(
    hub: Option<&Hub>,
    last: Option<&LogEntry>,
) -> (ConversationStatus, Option<String>) {
    if let Some(hub) = hub {
        let state = hub.lock();
        if let Some(run) = &state.run {
            return (ConversationStatus::Running, Some(run.run_id.clone()));
        }
        if let Some(l) = &state.last_run
            && matches!(l.status, RunStatus::Failed)
        {
            return (ConversationStatus::Failed, None);
        }
    }
    let Some(last) = last else {
        return (ConversationStatus::Idle, None);
    };
    let status = match (&last.role, &last.llm_error) {
        (LogRole::Assistant, Some(e)) if e.kind == LlmErrorKind::Cancelled => {
            ConversationStatus::Interrupted
        }
        (LogRole::Assistant, Some(_)) => ConversationStatus::Failed,
        (LogRole::Assistant, None) if last.calls().is_empty() => ConversationStatus::Idle,
        // A pause ends with the request naming every call that waits.
        (LogRole::System, _) if last.records.kind == Some(EntryKind::ApprovalRequest) => {
            ConversationStatus::AwaitingApproval
        }
        (LogRole::System, _) => ConversationStatus::Idle,
        _ => ConversationStatus::Interrupted,
    };
    (status, None)
}

/// The last entry of a conversation's history (`None` when it has none).
async fn last_entry(
    state: &AppState,
    id: &ConversationId,
    meta: &ConversationMeta,
) -> ApiResult<Option<LogEntry>> {
    if meta.last_seq == 0 {
        return Ok(None);
    }
    Ok(state
        .store()
        .load_from(id, meta.last_seq)
        .await?
        .entries
        .pop()
        .map(|s| s.entry))
}

/// A conversation as the API shows it. One whose history cannot be read is still shown,
/// `broken` with why, so that one bad conversation never takes a list down and can be found
/// and deleted. A run is seen wherever it runs: this server's hub knows its own, the store's
/// lease any other (a CLI run, another server's).
async fn view(state: &AppState, meta: ConversationMeta, access: Access) -> ConversationView {
    let checked = conversation_id(&meta.id);
    let last = match &checked {
        Ok(id) => last_entry(state, id, &meta).await,
        Err(e) => Err(e.clone()),
    };
    let (status, active_run_id, problem) = match (checked, last) {
        (Ok(id), Ok(last)) => {
            let hub = state.existing_hub(&id);
            let (status, run) = status_of(hub.as_deref(), last.as_ref());
            if status == ConversationStatus::Running {
                (status, run, None)
            } else {
                match state.agent().run_holder(&id).await {
                    Ok(Some(holder)) => (
                        ConversationStatus::Running,
                        Some(holder.run_id).filter(|r| !r.is_empty()),
                        None,
                    ),
                    Ok(None) => (budget_or(state, &id, status).await, run, None),
                    Err(e) => {
                        tracing::warn!("the run lease of `{id}` cannot be read: {e}");
                        (status, run, None)
                    }
                }
            }
        }
        (_, Err(e)) | (Err(e), _) => {
            tracing::warn!("conversation `{}` cannot be read: {}", meta.id, e.message);
            (ConversationStatus::Broken, None, Some(e.message))
        }
    };
    ConversationView {
        id: meta.id,
        title: meta.title,
        owner: meta.owner,
        access,
        mode: meta.mode.unwrap_or_default(),
        created_ms: meta.created_ms,
        updated_ms: meta.updated_ms,
        last_seq: meta.last_seq,
        status,
        active_run_id,
        problem,
        fork: meta.fork.map(|f| ForkView {
            parent: f.parent,
            at_seq: f.at_seq,
        }),
    }
}

/// `budget_reached` for a conversation whose log ends mid-turn while a cap is reached: a run
/// that stopped at its cap writes nothing of its end, so it is told from an interruption by
/// the spend, the same on every server and after a restart (and no longer once the cap is
/// raised). Only an interrupted conversation is asked, so a list reads the whole log of few.
async fn budget_or(
    state: &AppState,
    id: &ConversationId,
    status: ConversationStatus,
) -> ConversationStatus {
    if status != ConversationStatus::Interrupted {
        return status;
    }
    match state.agent().spend(id).await {
        Ok(report) if report.reached.is_some() => ConversationStatus::BudgetReached,
        Ok(_) => status,
        Err(e) => {
            tracing::warn!("the spend of `{id}` cannot be read: {e}");
            status
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    at_seq: Option<u64>,
}

/// A new conversation whose history is this one's up to `at_seq` (the parent is not copied
/// and not changed; it cannot be deleted while the fork lives).
pub(crate) async fn fork(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let parent = conversation_id(&id)?;
    let body: ForkBody = json_body(&body)?;
    tracing::info!("{} forks conversation {parent}", caller.name);
    let at_seq = body
        .at_seq
        .ok_or_else(|| ApiError::bad_request("`at_seq` is required: the last entry to keep"))?;
    // The fork is the caller's own, whoever owns the parent (a reader forks a shared one).
    let child = state
        .agent()
        .fork_as(&parent, at_seq, Some(&caller.name))
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Forked {
            id: child.to_string(),
            parent: parent.to_string(),
            at_seq,
        }),
    ))
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    after: Option<String>,
    limit: Option<usize>,
    /// Only conversations whose title or questions and answers contain this (any case).
    q: Option<String>,
    /// Everyone's conversations under `items` (admins only).
    #[serde(default)]
    all: bool,
}

/// Conversations shared with a caller, read at most (the rest are left out of the list).
const MAX_SHARED: usize = 500;

/// `GET /api/v1/conversations`: the caller's own under `items` (paged; an admin's `?all=true`
/// pages through everyone's), and on the first page, under `shared`, those shared with them to
/// read. With `q`, both only the ones that match.
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    if q.all && caller.role != Role::Admin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only an admin lists everyone's conversations (`all=true`)",
        ));
    }
    let first_page = q.after.is_none();
    let page = Page {
        after: q.after,
        limit: q.limit.unwrap_or(100).clamp(1, 500),
    };
    let text = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty());
    if text.is_some_and(|t| t.len() > 200) {
        return Err(ApiError::bad_request("`q` is longer than 200 bytes"));
    }
    let store = state.store();
    let page = match (text, q.all) {
        (Some(text), true) => store.search(text, page).await?,
        (None, true) => store.list(page).await?,
        (Some(text), false) => store.search_owned(&caller.name, text, page).await?,
        (None, false) => store.list_owned(&caller.name, page).await?,
    };
    let mut items = Vec::with_capacity(page.items.len());
    for meta in page.items {
        let access = if meta.owner == caller.name {
            Access::Owner
        } else {
            Access::Admin
        };
        items.push(view(&state, meta, access).await);
    }
    let mut shared = Vec::new();
    if first_page {
        for meta in shared_with(&state, &caller, text).await? {
            shared.push(view(&state, meta, Access::Read).await);
        }
    }
    Ok(Json(
        json!({"items": items, "next": page.next, "shared": shared}),
    ))
}

/// The conversations shared with the caller (those matching `text`, when given), newest
/// first.
async fn shared_with(
    state: &AppState,
    caller: &Caller,
    text: Option<&str>,
) -> ApiResult<Vec<ConversationMeta>> {
    let Some(directory) = state.store().directory() else {
        return Ok(Vec::new());
    };
    let shares = directory.shared_with(&caller.name).await?;
    let mut metas = Vec::new();
    for share in shares.iter().take(MAX_SHARED) {
        let Ok(id) = ConversationId::new(&share.conversation) else {
            continue;
        };
        match state.store().metadata(&id).await {
            Ok(meta) => metas.push(meta),
            // Deleted since: its shares go with it.
            Err(ba_storage::StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(text) = text {
        // The owners' own search decides what matches, as it does for the caller's.
        let mut owners: Vec<String> = metas.iter().map(|m| m.owner.clone()).collect();
        owners.sort();
        owners.dedup();
        let mut matching = std::collections::HashSet::new();
        for owner in owners {
            let found = state
                .store()
                .search_owned(
                    &owner,
                    text,
                    Page {
                        after: None,
                        limit: MAX_SHARED,
                    },
                )
                .await?;
            matching.extend(found.items.into_iter().map(|m| m.id));
        }
        metas.retain(|m| matching.contains(&m.id));
    }
    metas.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(a.id.cmp(&b.id)));
    Ok(metas)
}

/// The longest title taken, in characters. The store cleans a title of control and format
/// characters (`ba_storage::clean_title`); the answer shows it as kept.
const MAX_TITLE: usize = 500;

fn check_title(title: Option<&str>) -> ApiResult<()> {
    if title.is_some_and(|t| t.chars().count() > MAX_TITLE) {
        return Err(ApiError::bad_request(format!(
            "the title is longer than {MAX_TITLE} characters"
        )));
    }
    Ok(())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    title: Option<String>,
    mode: Option<Mode>,
}

/// `POST /api/v1/conversations`: a new conversation of the caller's (403 for a viewer).
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    if !caller.may_work() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a viewer reads what is shared with them and cannot start conversations",
        ));
    }
    let body: CreateBody = json_body(&body)?;
    check_title(body.title.as_deref())?;
    let id = state
        .agent()
        .new_conversation(NewConversation {
            title: body.title,
            mode: body.mode,
            owner: Some(caller.name.clone()),
            ..NewConversation::default()
        })
        .await?;
    let meta = state.store().metadata(&id).await?;
    Ok((
        StatusCode::CREATED,
        Json(view(&state, meta, Access::Owner).await),
    ))
}

pub(crate) async fn read(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
) -> ApiResult<Json<ConversationView>> {
    let id = conversation_id(&id)?;
    let meta = state.store().metadata(&id).await?;
    Ok(Json(view(&state, meta, access).await))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBody {
    title: Option<String>,
    mode: Option<Mode>,
}

/// Renames a conversation or switches its mode (only later requests' system prompt changes).
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(access): Extension<Access>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<ConversationView>> {
    let id = conversation_id(&id)?;
    let body: UpdateBody = json_body(&body)?;
    check_title(body.title.as_deref())?;
    let meta = state
        .store()
        .update_metadata(
            &id,
            MetaUpdate {
                title: body.title,
                mode: body.mode,
            },
        )
        .await?;
    Ok(Json(view(&state, meta, access).await))
}

/// Deletes a conversation; one with a run in flight is refused (cancel the run first).
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = conversation_id(&id)?;
    if let Some(holder) = state.agent().run_holder(&id).await? {
        return Err(ApiError::from(ba_agent::AgentError::Busy {
            conversation: id.to_string(),
            holder: Some(holder),
        }));
    }
    if !state.store().delete(&id).await? {
        return Err(ApiError::not_found(format!("no conversation {id}")));
    }
    state.drop_hub(&id);
    tracing::info!("conversation {id} deleted by {}", caller.name);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
pub(crate) struct MessagesQuery {
    from_seq: Option<u64>,
}

/// One entry of the transcript.
#[derive(Debug, Serialize)]
struct Message {
    seq: u64,
    appended_ms: i64,
    entry: LogEntry,
    /// The processed API response of a final answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    api_response: Option<ba_protocol::ApiResponse>,
    /// The report of a Markdown final answer as sanitised HTML.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_html: Option<String>,
    /// Token figures of a model call.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Value>,
    /// What the call cost in US dollars, when its model has a configured price.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_usd: Option<f64>,
    /// Whether the next model call sees the entry (`None` when the window could not be
    /// built).
    #[serde(skip_serializing_if = "Option::is_none")]
    in_window: Option<bool>,
    /// Why it does not (`low_score`, `summarized`, `over_budget`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped_reason: Option<Value>,
    /// How what the model sees differs from the log (`tool_result_preview`, `trace`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<Value>,
    /// A later rewind took the entry back: it is in the log, not in the history.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    rewound: bool,
}

/// The log entries from `from_seq` (default 1), with the processed final answers and usage.
pub(crate) async fn messages(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<MessagesQuery>,
) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let loaded = state
        .store()
        .load_from(&id, q.from_seq.unwrap_or(1).max(1))
        .await?;
    let last_seq = loaded.entries.last().map(|s| s.seq);
    // What each rewind took back: the entries between its point and itself.
    let mut rewound = std::collections::HashSet::new();
    for r in &loaded.entries {
        if let Some(back) = r.entry.records.rewind {
            rewound.extend(
                loaded
                    .entries
                    .iter()
                    .filter(|s| s.seq > back.to_seq && s.seq < r.seq)
                    .map(|s| s.seq),
            );
        }
    }
    // The window the next call would get, so each entry says whether the model sees it.
    let (debug, context_error) = match state.agent().context_debug(&id).await {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let prices = &state.agent().settings().prices;
    let items: Vec<Message> = loaded
        .entries
        .into_iter()
        .map(|s| {
            let (in_window, dropped_reason, changed) = match &debug {
                Some(d) => {
                    let dropped = d.dropped.iter().find(|x| x.id == s.entry.id);
                    let changed = d.changed.iter().find(|x| x.id == s.entry.id);
                    (
                        Some(d.kept.contains(&s.entry.id)),
                        dropped.and_then(|x| serde_json::to_value(x.reason).ok()),
                        changed.and_then(|x| serde_json::to_value(x.kind).ok()),
                    )
                }
                None => (None, None, None),
            };
            let api_response = s.entry.records.api_response.as_deref().cloned();
            let response_html = api_response
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok())
                .and_then(|a| crate::render::response_html(&a));
            let cost_usd = prices.of_entry(&s.entry);
            Message {
                api_response,
                response_html,
                cost_usd,
                usage: s
                    .entry
                    .records
                    .usage
                    .and_then(|u| serde_json::to_value(u).ok()),
                in_window,
                dropped_reason,
                changed,
                rewound: rewound.contains(&s.seq),
                seq: s.seq,
                appended_ms: s.appended_ms,
                entry: s.entry,
            }
        })
        .collect();
    let diagnostics: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    Ok(Json(json!({
        "entries": items,
        "last_seq": last_seq,
        "diagnostics": diagnostics,
        "context_error": context_error,
    })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RewindBody {
    to_seq: Option<u64>,
}

/// `POST …/{id}/rewind`: what left the history.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Rewound {
    /// The last entry that stays.
    pub to_seq: u64,
    /// How many entries left the history the model sees (they stay in the log).
    pub taken_back: usize,
}

/// The entries after `to_seq` leave the history the model sees (a rewind entry is appended;
/// nothing is deleted). 409 while a run holds the conversation.
pub(crate) async fn rewind(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Rewound>> {
    let id = conversation_id(&id)?;
    let body: RewindBody = json_body(&body)?;
    let to_seq = body
        .to_seq
        .ok_or_else(|| ApiError::bad_request("`to_seq` is required: the last entry to keep"))?;
    let taken_back = state
        .agent()
        .rewind_by(&id, to_seq, Some(&caller.name))
        .await?;
    if let Some(hub) = state.existing_hub(&id) {
        // Streams hear of the rewind entry like of any other.
        let loaded = state.store().load_from(&id, to_seq + 1).await?;
        hub.publish_entries(&loaded.entries);
    }
    Ok(Json(Rewound { to_seq, taken_back }))
}

/// A conversation's branches: where it was forked from, and its forks.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Branches {
    /// The conversation.
    pub id: String,
    /// Its parent and the cut, when it is a fork.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkView>,
    /// Its forks, oldest first: each with its cut.
    pub forks: Vec<Branch>,
}

/// One fork of a conversation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Branch {
    /// The fork's id.
    pub id: String,
    /// Its title.
    pub title: Option<String>,
    /// The parent's last entry it shares.
    pub at_seq: u64,
    /// When it was made (ms since the epoch).
    pub created_ms: i64,
}

/// `GET …/{id}/branches`: the forks listed are those the caller may see (a reader's fork of a
/// shared conversation is theirs; another reader's is not shown to them).
pub(crate) async fn branches(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<Branches>> {
    let id = conversation_id(&id)?;
    let meta = state.store().metadata(&id).await?;
    let mut forks: Vec<Branch> = Vec::new();
    for m in state.store().list_all().await? {
        let Some(f) = m.fork.as_ref().filter(|f| f.parent == id.as_str()) else {
            continue;
        };
        if access_of(&state, &caller, &m).await?.is_none() {
            continue;
        }
        forks.push(Branch {
            at_seq: f.at_seq,
            id: m.id,
            title: m.title,
            created_ms: m.created_ms,
        });
    }
    forks.sort_by_key(|b| (b.created_ms, b.id.clone()));
    Ok(Json(Branches {
        id: id.to_string(),
        fork: meta.fork.map(|f| ForkView {
            parent: f.parent,
            at_seq: f.at_seq,
        }),
        forks,
    }))
}
