//! `ba-agent mcp serve`: the configured tools served to MCP clients (Claude Code, Codex,
//! Cursor, any program speaking MCP) over stdio, or over streamable HTTP with a bearer token.
//!
//! The tools are the agent's, built as for `run` ([`Config::agent`]): the same runtime
//! (validation, timeouts, retries, output levels, spill), the same `run_python` sandbox and the
//! same approvals. What the server adds:
//! - each MCP session gets a conversation of the store as its workspace, made at its first
//!   call and owned by `--user` (default `owner`); `upload_file {name, content_base64}` puts a
//!   client's file there, where `file_reader` and `run_python` find it by name;
//! - a call whose policy is to ask asks the person through the client (an elicitation) when
//!   the client can, and is refused with a sentence saying how to allow it when it cannot;
//! - the skills are prompts (`prompts/get NAME` answers the SKILL.md body);
//! - the user's conversations are resources (`ba-agent://conversations/ID`, the log as JSON).
//!
//! Contract (scripts depend on it): stdout carries nothing but JSON-RPC over stdio; with
//! `--http ADDR` the endpoint is `http://ADDR/mcp` and the line `ba-agent mcp serving on
//! http://ADDR/mcp` is printed once it listens.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use ba_agent::{Agent, ApprovalCheck, ApprovalSettings, WorkspaceFiles};
use ba_protocol::{InvocationContext, ToolCall, ToolSpec};
use ba_server::Token;
use ba_storage::{ConversationId, NewConversation, NewFile, Page};
use ba_tools::{CallOptions, ConversationFiles, ToolRuntime};
use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ErrorData, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, JsonObject, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt as _};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::mcp::{ExtOpts, Extensions};

/// The tool a client sends a file with.
const UPLOAD_TOOL: &str = "upload_file";
/// The scheme of the conversations served as resources.
const CONVERSATION_URI: &str = "ba-agent://conversations/";
/// Conversations listed as resources at most.
const MAX_LISTED: usize = 200;

/// Arguments of `mcp serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`): its tools, data folders,
    /// approvals, skills and store.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where conversations live (overrides `home`).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Whose conversations the sessions make and the resources list.
    #[arg(long, value_name = "NAME", default_value = ba_storage::DEFAULT_OWNER)]
    user: String,
    /// Serve streamable HTTP at `http://ADDR/mcp` instead of stdio (loopback unless a token
    /// is given).
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// The bearer token HTTP clients send (`Authorization: Bearer T`).
    #[arg(long, conflicts_with = "token_file", requires = "http")]
    token: Option<String>,
    /// A file holding the token (its first line).
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
}

/// What every session shares: the agent and the tools it serves.
struct Shared {
    agent: Agent,
    runtime: Arc<ToolRuntime>,
    /// The configured tools, in the configuration's order (the agent's own, such as `task`,
    /// need a model and stay out).
    tools: Vec<ToolSpec>,
    approvals: ApprovalSettings,
    user: String,
}

/// One MCP session: the shared tools and the session's workspace, made at its first call.
#[derive(Clone)]
struct Session {
    shared: Arc<Shared>,
    conversation: Arc<OnceCell<ConversationId>>,
}

impl Session {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            conversation: Arc::new(OnceCell::new()),
        }
    }

    async fn conversation(&self) -> Result<ConversationId, String> {
        self.conversation
            .get_or_try_init(|| async {
                self.shared
                    .agent
                    .new_conversation(NewConversation {
                        title: Some("MCP session".to_owned()),
                        owner: Some(self.shared.user.clone()),
                        ..NewConversation::default()
                    })
                    .await
                    .map_err(|e| format!("the session's workspace could not be made: {e}"))
            })
            .await
            .cloned()
    }

    fn files(&self, id: &ConversationId) -> Option<Arc<dyn ConversationFiles>> {
        let workspace = self.shared.agent.workspace()?;
        Some(Arc::new(WorkspaceFiles::new(
            Arc::clone(workspace),
            id.clone(),
        )))
    }

    async fn upload(&self, args: &JsonObject) -> CallToolResult {
        let (Some(name), Some(content)) = (
            args.get("name").and_then(Value::as_str),
            args.get("content_base64").and_then(Value::as_str),
        ) else {
            return refused(
                "upload_file needs `name` (the file's name) and `content_base64` (its bytes, \
                 base64)",
            );
        };
        let Some(workspace) = self.shared.agent.workspace() else {
            return refused("this store keeps no files, so nothing can be uploaded");
        };
        let limit = workspace.limits().max_file_bytes;
        // Checked before decoding, so an oversized upload is never held decoded.
        let decoded_len = u64::try_from(content.len() / 4 * 3).unwrap_or(u64::MAX);
        if decoded_len > limit.saturating_add(3) {
            return refused(&format!(
                "`{name}` is larger than the upload limit of {limit} bytes"
            ));
        }
        let bytes = match base64::engine::general_purpose::STANDARD.decode(content.trim()) {
            Ok(bytes) => bytes,
            Err(e) => return refused(&format!("`content_base64` is not base64: {e}")),
        };
        let id = match self.conversation().await {
            Ok(id) => id,
            Err(e) => return refused(&e),
        };
        match workspace
            .put_bytes(
                &id,
                NewFile::upload(name, "sent by an MCP client"),
                bytes.as_slice(),
            )
            .await
        {
            Ok(meta) => CallToolResult::success(vec![ContentBlock::text(format!(
                "stored `{}` as file {} ({} bytes); file_reader and run_python read it by that \
                 name",
                meta.name, meta.id, meta.size
            ))]),
            Err(e) => refused(&format!("`{name}` was not stored: {e}")),
        }
    }

    /// Whether the call may run: the approval settings, then a person through the client.
    async fn approved(
        &self,
        name: &str,
        args: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), String> {
        let caps = self
            .shared
            .runtime
            .registry()
            .get(name)
            .map(|t| t.tool().capabilities());
        match self.shared.approvals.check(name, caps, args) {
            ApprovalCheck::Run => Ok(()),
            ApprovalCheck::Refuse(message) => Err(message),
            ApprovalCheck::Ask => ask(name, args, context).await,
            _ => Err(format!(
                "{name} was not run: its approval could not be decided"
            )),
        }
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        if name == UPLOAD_TOOL {
            return self.upload(&args).await;
        }
        if !self.shared.tools.iter().any(|t| t.name == name) {
            let names: Vec<&str> = self.shared.tools.iter().map(|t| t.name.as_str()).collect();
            return refused(&format!(
                "there is no tool `{name}`; this server offers {} and {UPLOAD_TOOL}",
                names.join(", ")
            ));
        }
        let args = Value::Object(args);
        if let Err(message) = self.approved(name, &args, context).await {
            return refused(&message);
        }
        let id = match self.conversation().await {
            Ok(id) => id,
            Err(e) => return refused(&e),
        };
        let settings = self.shared.agent.settings();
        let ctx = InvocationContext {
            caller_id: "mcp".into(),
            permission_level: settings.permission_level,
            storage_dir: settings
                .storage_dir
                .as_ref()
                .map(|p| p.display().to_string()),
            conversation_id: Some(id.to_string()),
            ..InvocationContext::default()
        };
        let files = self.files(&id);
        let opts = CallOptions {
            files: files.as_ref(),
            ..CallOptions::default()
        };
        let call_id = format!("mcp_{}", context.id);
        let call = ToolCall::new(call_id, name, args);
        let result = self.shared.runtime.run_with(&call, &ctx, opts).await;
        let content = vec![ContentBlock::text(result.observation)];
        if result.success {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        }
    }
}

/// A result the client shows as the tool's error.
fn refused(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_owned())])
}

/// Asks the person behind the client whether to run the call; a client that declared no
/// elicitation cannot ask, and the call is refused with the way to allow it.
async fn ask(name: &str, args: &Value, context: &RequestContext<RoleServer>) -> Result<(), String> {
    let allow = format!(
        "allow it with `approvals: {{tools: {{{name}: never}}}}` (or `approvals: {{mode: auto}}`) \
         in the configuration"
    );
    if context.peer.supported_elicitation_modes().is_empty() {
        return Err(format!(
            "{name} needs a person's approval; this client cannot ask (no elicitation): {allow}"
        ));
    }
    let shown = one_line(&args.to_string(), 400);
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("Run {name} with {shown}?"),
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    };
    match context.peer.create_elicitation(params).await {
        Ok(answer) if answer.action == ElicitationAction::Accept => Ok(()),
        Ok(_) => Err(format!(
            "a person declined this call of {name}; it was not run"
        )),
        Err(e) => Err(format!(
            "{name} needs a person's approval and the client could not ask ({e}): {allow}"
        )),
    }
}

fn one_line(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn upload_spec() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The file's name, e.g. sales.csv."},
            "content_base64": {"type": "string", "description": "The file's bytes, base64."}
        },
        "required": ["name", "content_base64"]
    });
    Tool::new(
        UPLOAD_TOOL,
        "Store a file in this session's workspace, where file_reader and run_python read it by \
         name. Answers the file's id.",
        object(schema),
    )
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("ba-agent", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "BA-Agent's analysis tools. Send a file with upload_file, then read it with \
             file_reader or analyse it with run_python (sandboxed); the skills are prompts.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools: Vec<Tool> = self
            .shared
            .tools
            .iter()
            .map(|t| {
                Tool::new(
                    t.name.clone(),
                    t.description.clone(),
                    object(t.input_schema.clone()),
                )
            })
            .collect();
        if self.shared.agent.workspace().is_some() {
            tools.push(upload_spec());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(request, &context).await.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = self
            .shared
            .agent
            .skills()
            .map(|set| {
                set.skills()
                    .iter()
                    .map(|s| Prompt::new(s.name.clone(), Some(s.description()), None))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request.name.as_str();
        let skill = self
            .shared
            .agent
            .skills()
            .and_then(|set| set.get(name).map(|s| (Arc::clone(set), s)));
        let Some((set, skill)) = skill else {
            return Err(ErrorData::invalid_params(
                format!("there is no skill `{name}`"),
                None,
            ));
        };
        let body = set.body(name).map_err(internal)?;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, body.to_string())])
                .with_description(skill.description())
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let page = self
            .shared
            .agent
            .store()
            .list_owned(&self.shared.user, Page::first(MAX_LISTED))
            .await
            .map_err(internal)?;
        let resources = page
            .items
            .iter()
            .map(|c| {
                let title = c.title.clone().unwrap_or_else(|| c.id.clone());
                Resource::new(format!("{CONVERSATION_URI}{}", c.id), title)
                    .with_description("The conversation's log, as JSON entries.")
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let not_found =
            || ErrorData::resource_not_found(format!("there is no conversation at {uri}"), None);
        let id = uri
            .strip_prefix(CONVERSATION_URI)
            .and_then(|id| ConversationId::new(id).ok())
            .ok_or_else(not_found)?;
        let store = self.shared.agent.store();
        // Another person's conversation reads as missing, not as forbidden.
        match store.metadata(&id).await {
            Ok(meta) if meta.owner == self.shared.user => {}
            _ => return Err(not_found()),
        }
        let entries = self.shared.agent.entries(&id).await.map_err(internal)?;
        let text = serde_json::to_string(&json!({"id": id.as_str(), "entries": entries}))
            .map_err(internal)?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ])
        .into())
    }
}

fn token(args: &ServeArgs, addr: SocketAddr) -> anyhow::Result<Option<Token>> {
    match crate::serve::given_token(args.token.as_deref(), args.token_file.as_deref())? {
        Some(t) => Ok(Some(t)),
        None if !addr.ip().is_loopback() => bail!(
            "serving MCP on {addr} (not loopback) needs a token: pass --token or --token-file"
        ),
        None => Ok(None),
    }
}

/// Serves until the client closes stdin (stdio) or until Ctrl-C or SIGTERM (HTTP).
pub(crate) fn run(args: ServeArgs, ext: &ExtOpts) -> CliResult {
    ba_storage::check_user_name(&args.user).map_err(|e| CliError::input(anyhow!("--user: {e}")))?;
    let token = match args.http {
        Some(addr) => token(&args, addr).map_err(CliError::input)?,
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let mut config = Config::load(args.config.as_deref()).map_err(CliError::input)?;
        if let Some(home) = &args.home {
            config.home = Some(home.clone());
        }
        let extensions = Extensions::gather(&config, ext).map_err(CliError::input)?;
        let shared = shared(&config, &extensions, args.user.clone())
            .await
            .map_err(CliError::input)?;
        match args.http {
            None => serve_stdio(shared).await,
            Some(addr) => serve_http(shared, addr, token).await,
        }
        .map_err(CliError::from)?;
        Ok(ExitCode::SUCCESS)
    })
}

async fn shared(config: &Config, ext: &Extensions, user: String) -> anyhow::Result<Arc<Shared>> {
    // No model is called: the agent is built for its tool runtime, store and skills, so
    // the tools run with exactly the limits, sandbox and approvals of `run`.
    let client: Arc<dyn ba_model::ModelClient> = Arc::new(ba_model::ReplayClient::new(vec![]));
    let agent = config.agent(
        "ba-agent mcp serve",
        client,
        config.shared_store().await?,
        &ext.skill_roots,
        None,
    )?;
    let runtime = agent.current_tools();
    let specs = runtime.registry().specs();
    let tools: Vec<ToolSpec> = config
        .tools()?
        .iter()
        .filter_map(|t| specs.iter().find(|s| s.name == t.name()).cloned())
        .collect();
    let approvals = config.approval_settings();
    Ok(Arc::new(Shared {
        agent,
        runtime,
        tools,
        approvals,
        user,
    }))
}

async fn serve_stdio(shared: Arc<Shared>) -> anyhow::Result<()> {
    let running = Session::new(shared)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    running.waiting().await.context("serving MCP on stdio")?;
    Ok(())
}

async fn serve_http(
    shared: Arc<Shared>,
    addr: SocketAddr,
    token: Option<Token>,
) -> anyhow::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    let mut http = StreamableHttpServerConfig::default();
    if !local.ip().is_loopback() {
        // rmcp answers loopback names only by default; the token guards a wider bind.
        http.allowed_hosts = Vec::new();
    }
    // Open event streams would hold a graceful shutdown forever: the sessions end first.
    let sessions = http.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(Session::new(Arc::clone(&shared))),
        Arc::new(LocalSessionManager::default()),
        http,
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |request, next| {
            bearer(token.clone(), request, next)
        }));
    println!("ba-agent mcp serving on http://{local}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            crate::serve::stop_signal().await;
            sessions.cancel();
        })
        .await
        .context("serving MCP over HTTP")?;
    Ok(())
}

/// Every request carries `Authorization: Bearer TOKEN` when a token is set.
async fn bearer(
    token: Option<Token>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    if let Some(token) = &token {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| token.matches(g)) {
            return (
                axum::http::StatusCode::UNAUTHORIZED,
                [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                "this MCP server needs `Authorization: Bearer TOKEN` (the --token it was started with)\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}
