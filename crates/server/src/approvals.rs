//! A person in the loop over HTTP: `GET …/approvals` lists the calls that wait for a
//! decision (read from the log, so any server sharing the store answers the same), and
//! `POST …/approvals/{call_id}` records a decision and goes on — a run of the decision, 202
//! with its id, whose events come on the conversation's stream like any run's.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use ba_agent::{ApprovalAnswer, Input};
use ba_protocol::{Decision, PendingApproval};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::caller::Caller;
use crate::conversations::{conversation_id, json_body};
use crate::error::{ApiError, ApiResult};
use crate::runs::launch;
use crate::state::AppState;

/// Longest reason kept.
const MAX_REASON: usize = 4_000;

/// The calls that wait.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PendingApprovals {
    /// In call order.
    pub pending: Vec<PendingApproval>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    decision: Option<Decision>,
    reason: Option<String>,
    arguments: Option<Value>,
    /// A fresh id per decision, the same on a retry (optional: one is made up).
    request_id: Option<String>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<PendingApprovals>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let pending = state.agent().pending_approvals(&id).await?;
    Ok(Json(PendingApprovals { pending }))
}

pub(crate) async fn decide(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, call_id)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<axum::response::Response> {
    let id = conversation_id(&id)?;
    let body: DecisionBody = json_body(&body)?;
    let decision = body.decision.ok_or_else(|| {
        ApiError::bad_request(
            "`decision` is required: approve, approve_for_conversation, reject or edit",
        )
    })?;
    let reason = body.reason.filter(|r| !r.trim().is_empty());
    if reason.as_ref().is_some_and(|r| r.len() > MAX_REASON) {
        return Err(ApiError::bad_request(format!(
            "`reason` is longer than {MAX_REASON} bytes"
        )));
    }
    let arguments = match (decision, body.arguments) {
        (Decision::Edit, Some(v @ Value::Object(_))) => Some(v),
        (Decision::Edit, _) => {
            return Err(ApiError::bad_request(
                "an `edit` needs `arguments`: the call's arguments as a JSON object",
            ));
        }
        (_, Some(_)) => {
            return Err(ApiError::bad_request(
                "`arguments` go with an `edit` decision only",
            ));
        }
        (_, None) => None,
    };
    let pending = state.agent().pending_approvals(&id).await?;
    if !pending.iter().any(|p| p.call_id == call_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_waiting",
            format!("call {call_id:?} is not waiting for approval in this conversation"),
        ));
    }
    let answer = ApprovalAnswer {
        call_id,
        decision,
        reason,
        arguments,
    };
    let request_id = body
        .request_id
        .filter(|r| !r.trim().is_empty() && r.len() <= 200)
        .unwrap_or_else(|| format!("approval_{}", uuid::Uuid::new_v4().simple()));
    tracing::info!(
        "{} decided {decision:?} on call {} of conversation {id}",
        caller.name,
        answer.call_id
    );
    launch(
        &state,
        &caller,
        &id,
        request_id,
        Input::Decide(vec![answer]),
    )
    .await
}
