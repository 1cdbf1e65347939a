//! The router: `/health` open, everything under `/api/v1` behind the sign-in, every
//! conversation route behind the owner check, every route behind the `Host`/`Origin` check and
//! a body limit, and every error answered as JSON.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{Request, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use serde_json::{Value, json};
use tower_http::limit::RequestBodyLimitLayer;

use crate::auth::{Auth, Guard, HostCheck, authenticate, check_host};
use crate::conversations::{self, conversation_id};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::{access, approvals, events, files, memory, page, people, runs, schedules};

/// The whole application for a server listening on `addr`, its callers signed in by `auth`.
pub fn router(state: AppState, auth: Auth, addr: SocketAddr) -> Router {
    let guard = Arc::new(Guard {
        auth,
        hosts: HostCheck::for_addr(addr, &state.config().allowed_hosts),
        state: state.clone(),
    });
    let json_limit = state.config().json_limit;
    let upload_limit = state.config().upload_limit;
    let conv = "/api/v1/conversations/{id}";
    let conversation_routes = Router::new()
        .route(
            conv,
            get(conversations::read)
                .patch(conversations::update)
                .delete(conversations::delete),
        )
        .route(&format!("{conv}/messages"), get(conversations::messages))
        .route(&format!("{conv}/fork"), post(conversations::fork))
        .route(&format!("{conv}/rewind"), post(conversations::rewind))
        .route(&format!("{conv}/branches"), get(conversations::branches))
        .route(&format!("{conv}/runs"), post(runs::start))
        .route(&format!("{conv}/runs/{{run}}/cancel"), post(runs::cancel))
        .route(&format!("{conv}/approvals"), get(approvals::list))
        .route(
            &format!("{conv}/approvals/{{call}}"),
            post(approvals::decide),
        )
        .route(&format!("{conv}/events"), get(events::events))
        .route(&format!("{conv}/compact"), post(compact))
        .route(&format!("{conv}/context"), get(context))
        .route(&format!("{conv}/spend"), get(spend))
        .route(&format!("{conv}/report"), get(report))
        .route(&format!("{conv}/report/{{seq}}"), get(export_report))
        .route(&format!("{conv}/uploads"), get(files::list_uploads))
        .route(
            &format!("{conv}/uploads/{{upload}}"),
            get(files::download_upload),
        )
        .route(&format!("{conv}/code"), get(files::list_code_blocks))
        .route(&format!("{conv}/code/{{code}}"), get(files::view_code))
        .route(
            &format!("{conv}/code/{{code}}/download"),
            get(files::download_code),
        )
        .route(&format!("{conv}/files"), get(files::list_files))
        .route(&format!("{conv}/files/{{file}}"), get(files::file))
        .route(
            &format!("{conv}/shares"),
            get(people::shares).post(people::share),
        )
        .route(&format!("{conv}/shares/{{user}}"), delete(people::unshare))
        .route_layer(middleware::from_fn_with_state(state.clone(), access::guard));
    let json_routes = Router::new()
        .route(
            "/api/v1/conversations",
            get(conversations::list).post(conversations::create),
        )
        .merge(conversation_routes)
        .route("/api/v1/me", get(people::me))
        .route("/api/v1/users", get(people::users).post(people::add_user))
        .route("/api/v1/users/{name}", patch(people::update_user))
        .route(
            "/api/v1/users/{name}/tokens",
            get(people::tokens).post(people::issue_token),
        )
        .route("/api/v1/tokens/{token}", delete(people::revoke_token))
        .route("/api/v1/memory", get(memory::list))
        .route(
            "/api/v1/memory/{*path}",
            get(memory::read)
                .put(memory::write)
                .delete(memory::remove)
                .post(memory::restore),
        )
        .route("/api/v1/skills", get(skills))
        .route("/api/v1/workflows", get(workflows))
        .route(
            "/api/v1/schedules",
            get(schedules::list).post(schedules::add),
        )
        .route(
            "/api/v1/schedules/{id}",
            patch(schedules::update).delete(schedules::remove),
        )
        .route("/api/v1/schedules/{id}/run", post(schedules::run_now))
        .route("/api/v1/demo/questions", get(demo_questions))
        .layer(DefaultBodyLimit::max(json_limit))
        .layer(RequestBodyLimitLayer::new(json_limit));
    let upload_routes = Router::new()
        .route(&format!("{conv}/uploads"), post(files::upload))
        .route_layer(middleware::from_fn_with_state(state.clone(), access::guard))
        // The limit is the file's (the handler counts its bytes); the request may be larger by
        // the multipart envelope and a description.
        .layer(DefaultBodyLimit::max(
            upload_limit.saturating_add(64 * 1024),
        ))
        .layer(RequestBodyLimitLayer::new(
            upload_limit.saturating_add(64 * 1024),
        ));
    let api = json_routes
        .merge(upload_routes)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&guard),
            authenticate,
        ));
    Router::new()
        .route("/health", get(health))
        .route("/", get(page::index))
        .route("/page/app.js", get(page::app_js))
        .route("/page/style.css", get(page::style_css))
        .route("/page/i18n.js", get(page::i18n_js))
        .route("/page/status", get(page::status))
        .route(page::ECHARTS_PATH, get(page::echarts))
        .layer(RequestBodyLimitLayer::new(json_limit))
        .merge(api)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(guard, check_host))
        .layer(middleware::from_fn(json_errors))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// Errors that a layer or the router answered without a JSON body get one.
async fn json_errors(request: Request<Body>, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if (status.is_client_error() || status.is_server_error()) && !is_json {
        return ApiError::from_status(status).into_response();
    }
    response
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

async fn demo_questions(State(state): State<AppState>) -> ApiResult<Json<Vec<String>>> {
    state
        .config()
        .demo_questions
        .clone()
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found("the server does not run the demo (start it with --demo)")
        })
}

async fn skills(State(state): State<AppState>) -> Json<Value> {
    let Some(set) = state.agent().skills() else {
        return Json(json!({"skills": [], "diagnostics": []}));
    };
    let skills: Vec<Value> = set
        .skills()
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "description": s.description(),
                "allowed_tools": s.frontmatter.allowed_tools,
                "model": s.frontmatter.model,
            })
        })
        .collect();
    let diagnostics: Vec<Value> = set
        .diagnostics()
        .iter()
        .map(|d| json!({"skill": d.path.file_name().map(|n| n.to_string_lossy().into_owned()), "message": d.message}))
        .collect();
    Json(json!({"skills": skills, "diagnostics": diagnostics}))
}

async fn report(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    state.store().metadata(&id).await?;
    let report = state.agent().report(&id).await?;
    Ok(Json(serde_json::to_value(report).unwrap_or(Value::Null)))
}

/// `GET /api/v1/workflows`: the workflows a run can start, as `ba-agent workflows list
/// --json` prints them (`name`, `description`, `inputs`, `nodes: [{id, title}]`).
async fn workflows(State(state): State<AppState>) -> Json<Value> {
    let list: Vec<Value> = state
        .agent()
        .workflows()
        .workflows()
        .map(|w| {
            json!({
                "name": w.name,
                "description": w.description,
                "inputs": w.inputs,
                "nodes": w.nodes.iter().map(|n| json!({"id": n.id, "title": n.title})).collect::<Vec<_>>(),
            })
        })
        .collect();
    Json(json!({ "workflows": list }))
}

#[derive(Debug, serde::Deserialize)]
struct ExportQuery {
    format: Option<String>,
    /// The language of the report's own words (`en`, `zh-CN`); English by default.
    lang: Option<String>,
}

/// `GET …/{id}/report/{seq}?format=html|zip|md&lang=en|zh-CN` (html and English by default;
/// `seq` may be `last`): the final answer at `seq` as a file to keep or send — one HTML file,
/// or a zip of the document and its files (see [`ba_export`]), its headings and labels in the
/// page's language.
async fn export_report(
    State(state): State<AppState>,
    Path((id, seq)): Path<(String, String)>,
    axum::extract::Query(q): axum::extract::Query<ExportQuery>,
) -> ApiResult<Response> {
    use ba_export::{ExportError, ExportFormat};
    let id = conversation_id(&id)?;
    let seq = match seq.as_str() {
        "last" | "latest" => None,
        n => Some(n.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "{n:?} is not an entry number (a final answer's `seq`, or `last`)"
            ))
        })?),
    };
    let format: ExportFormat = q
        .format
        .as_deref()
        .unwrap_or("html")
        .parse()
        .map_err(|e: ExportError| ApiError::bad_request(e.to_string()))?;
    let refused = |e: ExportError| match e {
        ExportError::Storage(e) => ApiError::from(e),
        ExportError::NoAnswer(_) | ExportError::NotAnAnswer { .. } => {
            ApiError::not_found(e.to_string())
        }
        ExportError::TooLarge { .. } => ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "too_large",
            e.to_string(),
        ),
        ExportError::Write { .. } => {
            tracing::warn!("exporting a report: {e}");
            ApiError::internal("the report's archive could not be written")
        }
        _ => ApiError::bad_request(e.to_string()),
    };
    let store = state.store();
    let language = ba_export::Language::from_tag(q.lang.as_deref().unwrap_or("en"));
    let exported = ba_export::export_report_in(
        store.as_ref(),
        &id,
        seq,
        format.report_format(),
        format.packaging(),
        language,
    )
    .await
    .map_err(refused)?;
    if !format.is_zip() {
        let size = exported.body.len() as u64;
        let name = exported.file_name();
        let media = exported.format.media_type();
        let mut response = exported.body.into_response();
        crate::files::download_headers(&mut response, &name, media, Some(size));
        return Ok(response);
    }
    let zip = ba_export::spool_zip(&exported, store.as_ref())
        .await
        .map_err(refused)?;
    let size = zip.size();
    let stream = tokio_util::io::ReaderStream::new(zip);
    let mut response = Body::from_stream(stream).into_response();
    crate::files::download_headers(
        &mut response,
        &exported.zip_name(),
        "application/zip",
        Some(size),
    );
    Ok(response)
}

/// The context the next model call would get: usage against the budget, the entries kept,
/// dropped (and why) and changed, the strategies; and the record of the last call made.
async fn context(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let entries = state.store().load(&id).await?.entries;
    let debug = state.agent().context_debug(&id).await?;
    let budget = state.agent().settings().budget;
    let last = entries.iter().rev().find_map(|s| {
        s.entry
            .records
            .context
            .as_ref()
            .map(|r| json!({"seq": s.seq, "record": r}))
    });
    Ok(Json(json!({
        "usage": debug.usage,
        "budget": {"total": budget.total, "reserved_for_response": budget.reserved_for_response},
        "next_call": debug,
        "last_call": last,
    })))
}

/// `GET …/spend`: what the conversation and its owner's month spent against their caps, and
/// the cap reached, if any (a run started now would end `budget_reached` before calling the
/// model).
async fn spend(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<ba_agent::SpendReport>> {
    let id = conversation_id(&id)?;
    Ok(Json(state.agent().spend(&id).await?))
}

/// `/compact`: the conversation so far summarised into one entry (refused during a run).
async fn compact(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let id = conversation_id(&id)?;
    let hub = state.hub(&id).await?;
    // Refused (409) while a run holds the conversation, here or on another server.
    let done = state.agent().compact(&id).await?;
    let after = hub.lock().cursor.seq;
    let appended = state.store().load_from(&id, after + 1).await?;
    hub.publish_entries(&appended.entries);
    let mut body = serde_json::to_value(done).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut body {
        map.insert("status".into(), Value::String("compacted".into()));
    }
    Ok(Json(body))
}
