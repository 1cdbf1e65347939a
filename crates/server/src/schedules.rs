//! Schedules over HTTP: `GET|POST /api/v1/schedules`, `PATCH|DELETE …/{id}`, `POST …/{id}/run`
//! (now). A schedule belongs to its owner: anyone else but an admin gets 404, as for a
//! conversation. A webhook's secret is taken, never shown.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use ba_storage::{
    CatchUp, NewSchedule, Role, Schedule, ScheduleBudget, ScheduleUpdate, Schedules, Webhook,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::conversations::json_body;
use crate::error::{ApiError, ApiResult};
use crate::scheduler::Scheduler;
use crate::state::AppState;
use crate::webhook::report_path;

fn store(state: &AppState) -> ApiResult<Arc<dyn Schedules>> {
    state.store().schedules().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "no_schedules",
            "this server's store keeps no schedules (a file or PostgreSQL store does)",
        )
    })
}

/// A schedule as the API shows it: its webhook's address only, its next occurrence and its
/// last run with the link to its report.
#[derive(Debug, Serialize)]
pub(crate) struct ScheduleView {
    id: String,
    name: String,
    cron: String,
    time_zone: String,
    workflow: String,
    inputs: BTreeMap<String, String>,
    owner: String,
    budget: ScheduleBudget,
    catch_up: CatchUp,
    paused: bool,
    webhook: Option<String>,
    created: String,
    next_run: Option<String>,
    last_run: Option<Value>,
}

async fn view(state: &AppState, s: &dyn Schedules, schedule: Schedule) -> ApiResult<ScheduleView> {
    let now = state.config().clock.now_ms();
    let last = s.runs(&schedule.id, 1).await?.into_iter().next();
    let next_run = (!schedule.spec.paused)
        .then(|| schedule.next_after(now))
        .flatten()
        .map(ba_storage::rfc3339);
    let last_run = last.map(|r| {
        json!({
            "occurrence": ba_storage::rfc3339(r.occurrence_ms),
            "conversation_id": r.conversation_id,
            "status": r.status.as_deref().unwrap_or("running"),
            "error": r.error,
            "finished": r.finished_ms.map(ba_storage::rfc3339),
            "report": report_path(&r.conversation_id),
        })
    });
    let spec = schedule.spec;
    Ok(ScheduleView {
        id: schedule.id,
        name: spec.name,
        cron: spec.cron,
        time_zone: spec.time_zone,
        workflow: spec.workflow,
        inputs: spec.inputs,
        owner: spec.owner,
        budget: spec.budget,
        catch_up: spec.catch_up,
        paused: spec.paused,
        webhook: spec.webhook.map(|w| w.url),
        created: ba_storage::rfc3339(schedule.created_ms),
        next_run,
        last_run,
    })
}

/// The schedule `id` if the caller may see it (its owner, or an admin); 404 otherwise.
async fn visible(s: &dyn Schedules, caller: &Caller, id: &str) -> ApiResult<Schedule> {
    s.schedule(id)
        .await?
        .filter(|x| caller.role == Role::Admin || x.spec.owner == caller.name)
        .ok_or_else(|| {
            let named: String = id.chars().take(40).collect();
            ApiError::not_found(format!("no schedule `{named}`"))
        })
}

fn may_work(caller: &Caller) -> ApiResult<()> {
    if caller.may_work() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        "a viewer keeps no schedules",
    ))
}

/// Input values as the API takes them: text, numbers or booleans.
fn input_texts(inputs: BTreeMap<String, Value>) -> ApiResult<BTreeMap<String, String>> {
    inputs
        .into_iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s,
                v @ (Value::Number(_) | Value::Bool(_)) => v.to_string(),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "input `{key}`: a text, a number or a boolean, not {other}"
                    )));
                }
            };
            Ok((key, text))
        })
        .collect()
}

/// Checks the workflow exists and takes these inputs (placeholders filled for now).
fn check_workflow(state: &AppState, schedule: &Schedule) -> ApiResult<()> {
    let inputs = schedule
        .inputs_at(state.config().clock.now_ms())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    match state
        .agent()
        .workflows()
        .start(&schedule.spec.workflow, &inputs)
    {
        Err(e @ ba_skills::StartError::Unknown { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e) => Err(ApiError::bad_request(e.to_string())),
        Ok(_) => Ok(()),
    }
}

/// `GET /api/v1/schedules`: the caller's schedules (an admin's: everyone's), by id.
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Value>> {
    let s = store(&state)?;
    let mut out = Vec::new();
    for schedule in s.schedules().await? {
        if caller.role == Role::Admin || schedule.spec.owner == caller.name {
            out.push(view(&state, s.as_ref(), schedule).await?);
        }
    }
    Ok(Json(json!({ "schedules": out })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewBody {
    name: String,
    cron: String,
    #[serde(default = "utc")]
    time_zone: String,
    workflow: String,
    #[serde(default)]
    inputs: BTreeMap<String, Value>,
    owner: Option<String>,
    #[serde(default)]
    budget: ScheduleBudget,
    #[serde(default)]
    catch_up: CatchUp,
    #[serde(default)]
    paused: bool,
    webhook: Option<Webhook>,
}

fn utc() -> String {
    "UTC".to_owned()
}

/// `POST /api/v1/schedules`: adds a schedule owned by the caller (an admin may name another
/// owner); 201 with it.
pub(crate) async fn add(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    may_work(&caller)?;
    let s = store(&state)?;
    let body: NewBody = json_body(&body)?;
    let owner = match body.owner {
        Some(o) if o != caller.name && caller.role != Role::Admin => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "only an admin schedules for someone else",
            ));
        }
        Some(o) => o,
        None => caller.name.clone(),
    };
    let spec = NewSchedule {
        name: body.name,
        cron: body.cron,
        time_zone: body.time_zone,
        workflow: body.workflow,
        inputs: input_texts(body.inputs)?,
        owner,
        budget: body.budget,
        catch_up: body.catch_up,
        paused: body.paused,
        webhook: body.webhook,
    };
    ba_storage::check_schedule(&spec).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let probe = Schedule {
        id: String::new(),
        spec: spec.clone(),
        created_ms: 0,
        since_ms: 0,
    };
    check_workflow(&state, &probe)?;
    let schedule = s.add_schedule(spec).await?;
    tracing::info!("schedule {} added by {}", schedule.id, caller.name);
    Ok((
        StatusCode::CREATED,
        Json(view(&state, s.as_ref(), schedule).await?),
    ))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBody {
    name: Option<String>,
    cron: Option<String>,
    time_zone: Option<String>,
    inputs: Option<BTreeMap<String, Value>>,
    budget: Option<ScheduleBudget>,
    catch_up: Option<CatchUp>,
    paused: Option<bool>,
    #[serde(default, deserialize_with = "some")]
    webhook: Option<Option<Webhook>>,
}

/// A field present (even `null`) is `Some`.
fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<Webhook>>, D::Error> {
    Option::<Webhook>::deserialize(d).map(Some)
}

/// `PATCH /api/v1/schedules/{id}`: changes the fields given (`paused` pauses or resumes;
/// `webhook: null` removes it).
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<ScheduleView>> {
    may_work(&caller)?;
    let s = store(&state)?;
    visible(s.as_ref(), &caller, &id).await?;
    let body: UpdateBody = json_body(&body)?;
    let update = ScheduleUpdate {
        name: body.name,
        cron: body.cron,
        time_zone: body.time_zone,
        inputs: body.inputs.map(input_texts).transpose()?,
        budget: body.budget,
        catch_up: body.catch_up,
        paused: body.paused,
        webhook: body.webhook,
    };
    let changed = s.update_schedule(&id, update).await?;
    check_workflow(&state, &changed)?;
    Ok(Json(view(&state, s.as_ref(), changed).await?))
}

/// `DELETE /api/v1/schedules/{id}`: removes it and its runs' records (the conversations
/// stay); 204.
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    may_work(&caller)?;
    let s = store(&state)?;
    visible(s.as_ref(), &caller, &id).await?;
    s.remove_schedule(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/schedules/{id}/run`: starts a run now (paused or not); 202 with its
/// conversation.
pub(crate) async fn run_now(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    may_work(&caller)?;
    let s = store(&state)?;
    let schedule = visible(s.as_ref(), &caller, &id).await?;
    let fired = Scheduler::new(state.clone())
        .run_now(&schedule.id)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "busy",
                "a run of this schedule started at this moment already",
            )
        })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({
            "schedule_id": fired.schedule_id,
            "occurrence": ba_storage::rfc3339(fired.occurrence_ms),
            "conversation_id": fired.conversation_id,
            "report": report_path(&fired.conversation_id),
        })),
    ))
}
