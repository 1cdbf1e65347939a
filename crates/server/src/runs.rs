//! Runs: `POST …/runs` starts one (idempotent on the client's `request_id`, one at a time per
//! conversation), `POST …/runs/{run}/cancel` stops one. A run belongs to the server, not to a
//! connection: it goes on when every client has gone.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use ba_agent::{AgentEvent, CancelOutcome, Input, Run, RunOptions, RunSummary};
use ba_storage::ConversationId;
use ba_storage::FileKind;
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::json;

use crate::caller::Caller;
use crate::conversations::{conversation_id, json_body};
use crate::error::{ApiError, ApiResult};
use crate::hub::Hub;
use crate::state::AppState;
use crate::wire::RunAccepted;

/// Longest request id accepted.
const MAX_REQUEST_ID: usize = 200;

/// What a run starts from.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum RunInput {
    /// A new user message.
    Message {
        text: String,
        #[serde(default)]
        upload_ids: Vec<String>,
    },
    /// `continue` after a failure or a cancel.
    Continue,
    /// Go on from the log alone.
    Resume,
    /// Start a run of a workflow with its inputs (text, numbers or booleans; the others take
    /// their defaults).
    Workflow {
        name: String,
        #[serde(default)]
        inputs: std::collections::BTreeMap<String, serde_json::Value>,
    },
}

/// A workflow run's input, checked against the server's workflows: 404 for an unknown name,
/// 400 naming each bad input.
fn workflow_input(
    state: &AppState,
    name: String,
    inputs: std::collections::BTreeMap<String, serde_json::Value>,
) -> ApiResult<Input> {
    let mut given = std::collections::BTreeMap::new();
    for (key, value) in inputs {
        let text = match value {
            serde_json::Value::String(s) => s,
            v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_)) => v.to_string(),
            other => {
                return Err(ApiError::bad_request(format!(
                    "input `{key}`: a text, a number or a boolean, not {other}"
                )));
            }
        };
        given.insert(key, text);
    }
    match state.agent().workflows().start(&name, &given) {
        Err(e @ ba_skills::StartError::Unknown { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e) => Err(ApiError::bad_request(e.to_string())),
        Ok(_) => Ok(Input::Workflow {
            name,
            inputs: given,
        }),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunBody {
    request_id: Option<String>,
    input: Option<RunInput>,
}

fn accepted(id: &ConversationId, run_id: &str, existing: bool) -> impl IntoResponse + use<> {
    (
        StatusCode::ACCEPTED,
        Json(RunAccepted {
            run_id: run_id.to_owned(),
            conversation_id: id.to_string(),
            existing,
            events: format!("/api/v1/conversations/{id}/events"),
        }),
    )
}

/// The run a request id started earlier, from the log (after a restart of the server).
async fn logged_run(
    state: &AppState,
    id: &ConversationId,
    request_id: &str,
) -> ApiResult<Option<String>> {
    let loaded = state.store().load(id).await?;
    Ok(loaded.entries.iter().rev().find_map(|s| {
        let records = &s.entry.records;
        (records.request_id.as_deref() == Some(request_id)).then(|| {
            records
                .caller_run_id
                .clone()
                .unwrap_or_else(|| request_id.to_owned())
        })
    }))
}

pub(crate) async fn start(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<axum::response::Response> {
    let id = conversation_id(&id)?;
    let body: RunBody = json_body(&body)?;
    let request_id = body
        .request_id
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                "`request_id` is required (a fresh id per request, the same on a retry)",
            )
        })?;
    if request_id.len() > MAX_REQUEST_ID {
        return Err(ApiError::bad_request(
            "`request_id` is longer than 200 bytes",
        ));
    }
    let input = match body.input {
        Some(RunInput::Message { text, upload_ids }) => {
            if text.trim().is_empty() {
                return Err(ApiError::bad_request("the message is empty"));
            }
            Input::message_with(text, uploads(&state, &id, &upload_ids).await?)
        }
        Some(RunInput::Continue) => Input::Continue,
        Some(RunInput::Resume) => Input::Resume,
        Some(RunInput::Workflow { name, inputs }) => workflow_input(&state, name, inputs)?,
        None => return Err(ApiError::bad_request("`input` is required")),
    };
    launch(&state, &caller, &id, request_id, input).await
}

/// Starts a run of `input` for request `request_id` (or answers with the run the request
/// started already): 202 with the run's id.
pub(crate) async fn launch(
    state: &AppState,
    caller: &Caller,
    id: &ConversationId,
    request_id: String,
    input: Input,
) -> ApiResult<axum::response::Response> {
    let options = RunOptions::default().with_actor(caller.name.clone());
    let started = start_run(state, id, request_id, input, options).await?;
    if started.done.is_some() {
        tracing::info!(
            "run {} of conversation {id} started by {}",
            started.run_id,
            caller.name
        );
    }
    Ok(accepted(id, &started.run_id, started.done.is_none()).into_response())
}

/// A run [`start_run`] started, or found started by its request already.
pub(crate) struct Started {
    /// The run's id.
    pub(crate) run_id: String,
    /// Its summary when it ends; `None` when the request had started it before.
    pub(crate) done: Option<tokio::task::JoinHandle<RunSummary>>,
}

/// Starts a run of `input` for request `request_id` with `options` (its ids are set here), or
/// finds the run the request started already.
pub(crate) async fn start_run(
    state: &AppState,
    id: &ConversationId,
    request_id: String,
    input: Input,
    options: RunOptions,
) -> ApiResult<Started> {
    let hub = state.hub(id).await?;
    let found = |run_id: String| Started { run_id, done: None };
    if let Some(run_id) = Hub::run_of_request(&hub.lock(), &request_id) {
        return Ok(found(run_id));
    }
    if let Some(run_id) = logged_run(state, id, &request_id).await? {
        return Ok(found(run_id));
    }
    if *state.0.shutdown.borrow() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down",
        ));
    }
    let run_id = format!("run_{}", uuid::Uuid::new_v4().simple());
    {
        let mut hs = hub.lock();
        if let Some(existing) = Hub::run_of_request(&hs, &request_id) {
            return Ok(found(existing));
        }
        // Remembered before the lease is awaited, so a concurrent retry in this process finds
        // this run.
        Hub::remember(&mut hs, &request_id, &run_id);
    }
    // The run's lease refuses it while another run holds the conversation, here or on another
    // server sharing the store.
    let options = options
        .with_ids(request_id, run_id.clone())
        .with_durable_events();
    let run = match state.agent().start(id, input, options).await {
        Ok(run) => run,
        Err(e) => {
            hub.forget(&run_id);
            return Err(e.into());
        }
    };
    let done = spawn_run(state, hub, id.clone(), run);
    Ok(Started {
        run_id,
        done: Some(done),
    })
}

/// The uploads a message attaches, each an upload of this conversation (400 naming one that
/// is not); the run tells the model how to read them.
async fn uploads(
    state: &AppState,
    id: &ConversationId,
    upload_ids: &[String],
) -> ApiResult<Vec<ba_storage::FileMeta>> {
    if upload_ids.is_empty() {
        return Ok(Vec::new());
    }
    let files = crate::files::workspace(state)?;
    let mut named = Vec::with_capacity(upload_ids.len());
    for u in upload_ids {
        let meta = files
            .meta(id, u)
            .await
            .ok()
            .flatten()
            .filter(|m| m.kind == FileKind::Upload)
            .ok_or_else(|| {
                ApiError::bad_request(format!("no upload {u:?} in this conversation"))
            })?;
        named.push(meta);
    }
    Ok(named)
}

/// Ends the run's bookkeeping however its task ends.
struct RunGuard {
    state: AppState,
    hub: Arc<Hub>,
    run_id: String,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.hub.end(&self.run_id);
        self.state
            .0
            .running
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Carries a run's events to the conversation's hub (the open event streams), on a task of
/// the server's: a run belongs to the server, not to a connection.
fn spawn_run(
    state: &AppState,
    hub: Arc<Hub>,
    id: ConversationId,
    mut run: Run,
) -> tokio::task::JoinHandle<RunSummary> {
    state.0.running.send_modify(|n| *n += 1);
    let run_id = run.id().to_owned();
    hub.begin(&run_id);
    let guard = RunGuard {
        state: state.clone(),
        hub: Arc::clone(&hub),
        run_id: run_id.clone(),
    };
    tokio::spawn(async move {
        let _guard = guard;
        let mut summary = None;
        while let Some(event) = run.next().await {
            if let AgentEvent::Finished(s) = &event {
                summary = Some(s.clone());
            }
            hub.publish_event(&run_id, &event);
        }
        // A run whose task died without its summary still ends on every stream.
        summary.unwrap_or_else(|| {
            let summary = RunSummary::failed(id.as_str(), ba_agent::NO_SUMMARY);
            hub.publish_event(&run_id, &AgentEvent::Finished(summary.clone()));
            summary
        })
    })
}

/// Cancels a run of this conversation: cooperative (the partial answer is kept) and
/// idempotent; on a run of another server sharing the store, through a request that server
/// finds within its poll interval. A run that is not one of this conversation's (another
/// conversation's, or none) is 404 and nothing is cancelled.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, run_id)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let id = conversation_id(&id)?;
    state.hub(&id).await?;
    let outcome = state.agent().cancel(&id, Some(&run_id)).await?;
    let cancelling = !matches!(outcome, CancelOutcome::NotRunning);
    if cancelling {
        tracing::info!(
            "run {run_id} of conversation {id} cancelled by {}",
            caller.name
        );
    }
    if !cancelling && !ran_here(&state, &id, &run_id).await? {
        // The id comes from the URL: named, but not at any length.
        let named: String = run_id.chars().take(MAX_REQUEST_ID).collect();
        return Err(ApiError::not_found(format!(
            "no run `{named}` in conversation `{id}`"
        )));
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "run_id": run_id,
            "state": if cancelling { "cancelling" } else { "not_running" },
        })),
    ))
}

/// Whether run `run_id` is one of conversation `id`'s that has ended: the user entry it
/// appended names it.
async fn ran_here(state: &AppState, id: &ConversationId, run_id: &str) -> ApiResult<bool> {
    let loaded = state.store().load(id).await?;
    Ok(loaded
        .entries
        .iter()
        .any(|s| s.entry.records.caller_run_id.as_deref() == Some(run_id)))
}
