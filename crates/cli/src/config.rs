//! The configuration of the agent commands (`run`, `chat`, `inspect`): a YAML (or JSON) file
//! named by `--config` or `BA_AGENT_CONFIG`, then the environment (`BA_AGENT_PROVIDER`,
//! `BA_AGENT_MODEL`, `BA_AGENT_BASE_URL`, `BA_AGENT_HOME`, `BA_AGENT_COMPAT`; API keys from
//! `ANTHROPIC_API_KEY` or `OPENAI_API_KEY`), then the command line. Keys are never printed.
//!
//! The tools it offers ([`Config::tools`]): `file_reader` always; `query_database` when
//! `database` (a SQLite path or a `postgres://` URL) or `database_env` (the name of an
//! environment variable holding one) is set; `run_python` unless turned off; `web_reader` when
//! turned on; `web_search` when a `web_search` backend is configured.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use ba_agent::{Agent, AgentBuilder, ModelSummarizer, Prompts, ResponseMode};
use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::query_database::{Database, QueryDatabase, QueryDatabaseConfig};
use ba_builtins::run_python::sandbox::{SandboxConfig, SandboxLimits, SandboxMode, SandboxStatus};
use ba_builtins::run_python::{RunPython, RunPythonConfig};
use ba_builtins::web_reader::{WebReader, WebReaderConfig};
use ba_builtins::web_search::{BraveBackend, SearchBackend, SearxngBackend, WebSearch};
use ba_mcp::{McpManager, McpServerConfig};
use ba_model::ModelClient;
use ba_skills::{SkillRoot, SkillSet};
use ba_storage::{
    ConversationStore, FileStore, FileStoreOptions, PostgresOptions, PostgresStore, StorageError,
};
use ba_tools::Tool;
use serde::Deserialize;

/// The configuration file. No `Debug`: it may hold an API key.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// `anthropic`, `openai` (or any compatible server) or `replay`.
    pub provider: Option<String>,
    /// The model name.
    pub model: Option<String>,
    /// The provider's base URL.
    pub base_url: Option<String>,
    /// The API key (the environment variable is preferred).
    pub api_key: Option<String>,
    /// `openai` only: the profile for other compatible servers (vLLM, llama.cpp, Ollama):
    /// no `stream_options`, `prompt_cache_key` or `reasoning_effort`, the key optional.
    pub compat: Option<bool>,
    /// `anthropic` only: server-side clearing of old tool results and thinking.
    pub context_editing: Option<ba_model::ContextEditing>,
    /// The recording the `replay` provider plays.
    pub replay: Option<PathBuf>,
    /// Where conversations, code and data files live (default `.ba-agent`).
    pub home: Option<PathBuf>,
    /// A PostgreSQL URL (`postgres://user@host:port/db`): conversations live there instead of
    /// under `home` (`serve`; several servers can share it).
    pub database_url: Option<String>,
    /// The PostgreSQL schema of the conversations (default `public`).
    pub database_schema: Option<String>,
    /// Skill roots, in priority order.
    #[serde(default)]
    pub skills: Vec<PathBuf>,
    /// Workflow roots (folders holding `*/WORKFLOW.md`), in priority order.
    #[serde(default)]
    pub workflows: Vec<PathBuf>,
    /// Folders `file_reader` may read besides the uploads.
    #[serde(default)]
    pub data: Vec<PathBuf>,
    /// The database `query_database` queries read-only: a SQLite file or a `postgres://` URL.
    pub database: Option<String>,
    /// The name of an environment variable holding the database (a URL with a password stays
    /// out of the file); used when `database` is not set.
    pub database_env: Option<String>,
    /// The encoding `file_reader`'s `auto` tries for files that are not UTF-8 (e.g. `gbk`).
    pub encoding: Option<String>,
    /// The `web_search` backend; without one there is no `web_search` tool.
    pub web_search: Option<WebSearchConfig>,
    /// Offer `run_python` (default true, sandboxed): `true`, `false`, or its options.
    pub run_python: Option<RunPythonSetting>,
    /// Offer `web_reader` (default false).
    pub web_reader: Option<bool>,
    /// `native` or `structured`.
    pub response_mode: Option<ResponseMode>,
    /// The model's context window in tokens; when left out, the window the server says it
    /// serves ([`Config::learn_window`]), or the agent's default.
    pub context_window: Option<usize>,
    /// The window the model's server said it serves, asked when `context_window` is not
    /// given; never read from the file.
    #[serde(skip)]
    pub served_window: Option<usize>,
    /// Tokens kept for the answer.
    pub reserve: Option<usize>,
    /// The compression strategy.
    pub strategy: Option<String>,
    /// `strategy: retrieval`'s settings: `share` (of the window the recalled passages may
    /// take, 0 to 0.5, default 0.1) and `embeddings` (an OpenAI-compatible endpoint: `base_url`,
    /// `model`, `api_key_env`, `batch_size`, `timeout_secs`); BM25 alone without it.
    pub retrieval: Option<RetrievalConfig>,
    /// Rounds a run may make.
    pub max_rounds: Option<u32>,
    /// Output cap of a call.
    pub max_tokens: Option<u32>,
    /// The (cheaper) model that writes summaries; the offline summarizer when unset.
    pub summary_model: Option<String>,
    /// A prompts file replacing the built-in texts section by section.
    pub prompts: Option<PathBuf>,
    /// Stream answers (default true).
    pub stream: Option<bool>,
    /// Offer the `task` sub-agent tool (default true).
    pub sub_agents: Option<bool>,
    /// Seconds a non-streamed answer, or a stream's headers, may take (default 600).
    pub request_timeout_secs: Option<u64>,
    /// Seconds a stream may go without progress; keep-alive pings do not count (default 90).
    pub stream_idle_timeout_secs: Option<u64>,
    /// Seconds a whole model call may take, retries included (default 900).
    pub call_timeout_secs: Option<u64>,
    /// Bytes of an answer read at most (default 32 MiB); past it the call fails with what
    /// was received.
    pub max_response_bytes: Option<u64>,
    /// MCP servers by name: `command`, `args`, `env`, `cwd` (stdio) or `url`, `headers`,
    /// `env_headers` (streamable HTTP), `enabled`, `required`, `startup`, `enabled_tools`,
    /// `disabled_tools`, `startup_timeout_ms`, `tool_timeout_ms`, `default_level`,
    /// `permission`.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// Claude Code plugin folders: their skills (`PLUGIN:SKILL`) and MCP servers
    /// (`PLUGIN__SERVER`).
    #[serde(default)]
    pub plugins: Vec<PathBuf>,
    /// Seconds one MCP call may take in all, progress or not (default 1800); the server's
    /// `tool_timeout_ms` bounds the time without progress.
    pub mcp_call_timeout_secs: Option<u64>,
    /// Which tool calls wait for a person: `mode` (`ask`, the default; `auto`; `read_only`)
    /// and `tools` (a policy, `never` / `ask` / `always`, by the name the model calls; a tool
    /// not named follows its own).
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// Commands run at fixed points of a run, by event (`pre_tool_use`, `post_tool_use`,
    /// `user_prompt_submit`, `pre_compact`, `stop`): each `{command, matcher?, timeout_secs?}`.
    #[serde(default)]
    pub hooks: BTreeMap<ba_protocol::HookEvent, Vec<HookConfig>>,
    /// Prices per model in US dollars per million tokens (`input`, `output`, `cache_read`,
    /// `cache_write`), for the cost under each answer and in the metrics report; a model is
    /// priced by its exact name, else by the longest name that starts it.
    #[serde(default)]
    pub prices: BTreeMap<String, ba_agent::ModelPrice>,
    /// Spending caps: `conversation_usd`, `user_month_usd`, `conversation_tokens`,
    /// `user_month_tokens` (money at `prices`; tokens count models without a price). A
    /// person's own month caps (`ba-agent users budget`) take the place of the `user_month_`
    /// ones. A run at a cap ends `budget_reached` after the call in flight.
    #[serde(default)]
    pub budgets: ba_agent::Budgets,
    /// Which tools a request sends: `defer` (`auto`, the default: past `share` of the window
    /// — 0.1 — or `max_tools` tools — 40 —, the tools of MCP servers and plugins leave the
    /// request and `tool_search` finds them; `always`; `never`), `pin` (names always sent; a
    /// name ending in `*` pins a prefix, `github__*`), `search` (`bm25` or `regex`), `servers`
    /// (`defer` for one MCP server or plugin, by the name its tools start with).
    #[serde(default)]
    pub tools: ba_agent::ToolSearchSettings,
    /// Who may call `serve`: `mode` (`token`, the default; `users`; `oidc`; `proxy`), `oidc`
    /// (issuer, audience, `jwks_url` or `jwks_file`, claims, unknown users) and `proxy`
    /// (`header`, `trusted` addresses).
    pub auth: Option<ba_server::AuthSettings>,
    /// Memory across conversations: `mode` (`auto`, the default: the `memory` tool and the
    /// index in the system prompt; `ask`: its changes wait for approval; `off`: neither).
    #[serde(default)]
    pub memory: MemoryConfig,
    /// Where traces and metrics are exported (OTLP): `endpoint`, `sample_ratio`,
    /// `service_name`, `metrics_interval_secs`; read by [`crate::telemetry`], the environment
    /// winning key by key.
    #[allow(
        dead_code,
        reason = "read from the same file by crate::telemetry before the command starts; here so \
                  the section is checked with the rest"
    )]
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
}

/// One hook command: run through `sh -c` with the event as JSON on stdin (Claude Code's
/// shape); `matcher` names the tools of a tool event (`A|B`, `*` for all).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookConfig {
    pub command: String,
    #[serde(default)]
    pub matcher: Option<String>,
    /// Seconds it may run (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `memory: {mode: auto}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MemoryConfig {
    /// `auto`, `ask` or `off`.
    #[serde(default)]
    pub mode: MemoryModeConfig,
}

/// `memory.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MemoryModeConfig {
    /// The model changes memory as it asks.
    #[default]
    Auto,
    /// Changes wait for a person.
    Ask,
    /// No tool, no index.
    Off,
}

impl MemoryConfig {
    /// The agent's setting.
    pub(crate) fn agent_mode(&self) -> Option<ba_agent::MemoryMode> {
        match self.mode {
            MemoryModeConfig::Auto => Some(ba_agent::MemoryMode::Auto),
            MemoryModeConfig::Ask => Some(ba_agent::MemoryMode::Ask),
            MemoryModeConfig::Off => None,
        }
    }
}

/// `retrieval: {share: 0.1, embeddings: {base_url: http://127.0.0.1:8081/v1, model: m}}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetrievalConfig {
    /// The share of the window the recalled passages may take (0 to 0.5).
    pub share: Option<f64>,
    /// The embeddings endpoint; BM25 alone without one.
    pub embeddings: Option<EmbeddingsConfig>,
}

/// `retrieval.embeddings`: an OpenAI-compatible `/embeddings` endpoint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EmbeddingsConfig {
    /// The part before `/embeddings` (`https://api.openai.com/v1`, `http://127.0.0.1:8081/v1`).
    pub base_url: String,
    /// The embedding model's name.
    pub model: String,
    /// The environment variable holding the API key; none is sent without it.
    pub api_key_env: Option<String>,
    /// Texts a request (default 32).
    pub batch_size: Option<usize>,
    /// Seconds a request may take (default 30).
    pub timeout_secs: Option<u64>,
}

impl EmbeddingsConfig {
    /// The client the section describes.
    pub(crate) fn client(&self) -> anyhow::Result<ba_model::OpenAiEmbeddings> {
        let key = match &self.api_key_env {
            Some(var) => Some(ba_model::ApiKey::new(env(var).ok_or_else(|| {
                anyhow!("retrieval.embeddings: the API key is read from ${var}, which is not set")
            })?)),
            None => None,
        };
        let mut client = ba_model::OpenAiEmbeddings::new(&self.base_url, self.model.clone(), key)
            .map_err(|e| anyhow!("retrieval.embeddings: {e}"))?;
        if let Some(n) = self.batch_size {
            if n == 0 {
                bail!("retrieval.embeddings.batch_size: expected at least 1");
            }
            client = client.with_batch_size(n);
        }
        if let Some(secs) = self.timeout_secs {
            client = client.with_timeout(Duration::from_secs(secs.max(1)));
        }
        Ok(client)
    }
}

impl Config {
    /// The `retrieval` section, checked: its share, and the embeddings client if any. It
    /// applies to `strategy: retrieval` only.
    pub(crate) fn retrieval(
        &self,
    ) -> anyhow::Result<Option<(f64, Option<ba_model::OpenAiEmbeddings>)>> {
        let Some(r) = &self.retrieval else {
            return Ok(None);
        };
        if self.strategy.as_deref() != Some("retrieval") {
            bail!("retrieval: the section applies with `strategy: retrieval` only");
        }
        let share = r.share.unwrap_or(0.10);
        if !(0.0..=0.5).contains(&share) {
            bail!("retrieval.share: expected a share of the window from 0 to 0.5, found {share}");
        }
        let embeddings = r
            .embeddings
            .as_ref()
            .map(EmbeddingsConfig::client)
            .transpose()?;
        Ok(Some((share, embeddings)))
    }
}

/// `approvals: {mode: ask, tools: {query_database: ask}}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalsConfig {
    /// The session's mode.
    #[serde(default)]
    pub mode: ba_protocol::ApprovalMode,
    /// Policies by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ba_protocol::ToolApproval>,
    /// Calls that never ask, by tool name: those whose arguments have these values.
    #[serde(default)]
    pub unless: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
}

/// `web_search: {backend: searxng, url: http://127.0.0.1:8888}` or
/// `web_search: {backend: brave, api_key_env: BRAVE_API_KEY}` (`url` overrides the API
/// endpoint).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WebSearchConfig {
    /// `searxng` or `brave`.
    pub backend: String,
    /// The SearXNG instance (required for searxng), or another Brave endpoint.
    pub url: Option<String>,
    /// The environment variable holding the API key (brave; default `BRAVE_API_KEY`).
    pub api_key_env: Option<String>,
}

impl WebSearchConfig {
    fn backend(&self) -> anyhow::Result<Arc<dyn SearchBackend>> {
        Ok(match self.backend.as_str() {
            "searxng" => {
                let url = self.url.as_deref().ok_or_else(|| {
                    anyhow!("web_search: the searxng backend needs `url` (the instance's address)")
                })?;
                Arc::new(SearxngBackend::new(url)?)
            }
            "brave" => {
                let var = self.api_key_env.as_deref().unwrap_or("BRAVE_API_KEY");
                let key = env(var).ok_or_else(|| {
                    anyhow!("web_search: the brave backend reads its API key from ${var}, which is not set")
                })?;
                Arc::new(BraveBackend::new(key, self.url.as_deref())?)
            }
            other => bail!("web_search: unknown backend `{other}`: expected searxng or brave"),
        })
    }
}

/// The store folder of every command: `--home` when given, else the configuration's `home`
/// (`BA_AGENT_HOME` over the file named by `BA_AGENT_CONFIG`), else `.ba-agent`.
pub(crate) fn resolve_home(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match flag {
        Some(home) => Ok(home),
        None => Ok(Config::load(None)?.home()),
    }
}

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Config {
    /// Reads the file (if any) and applies the environment.
    pub(crate) fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let path = path
            .map(Path::to_owned)
            .or_else(|| env("BA_AGENT_CONFIG").map(PathBuf::from));
        let mut config = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read the configuration {}", p.display()))?;
                serde_yaml_ng::from_str(&text)
                    .map_err(|e| anyhow!("configuration {}: {e}", p.display()))?
            }
            None => Self::default(),
        };
        let overrides = ba_agent::EnvOverrides::read()?;
        config.provider = overrides.provider.or(config.provider);
        config.model = overrides.model.or(config.model);
        config.base_url = overrides.base_url.or(config.base_url);
        config.home = overrides.home.or(config.home);
        config.compat = overrides.compat.or(config.compat);
        Ok(config)
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.home
            .clone()
            .unwrap_or_else(|| PathBuf::from(".ba-agent"))
    }

    /// The conversation store of `serve`: PostgreSQL when `database_url` is set, the files
    /// under `home` otherwise.
    pub(crate) async fn shared_store(&self) -> anyhow::Result<Arc<dyn ConversationStore>> {
        let Some(url) = &self.database_url else {
            return Ok(self.store()?);
        };
        let mut opts = PostgresOptions::default();
        if let Some(schema) = &self.database_schema {
            opts.schema = schema.clone();
        }
        let store = PostgresStore::connect(url, opts)
            .await
            .context("connecting to the database of `database_url`")?;
        Ok(Arc::new(store))
    }

    /// The store under `home` if there is one, creating nothing (for commands that only
    /// read); an error naming the folder and the ways to give another when there is none.
    pub(crate) fn existing_store(&self) -> anyhow::Result<FileStore> {
        let home = self.home();
        match FileStore::open_existing(&home, FileStoreOptions::default()) {
            Ok(store) => {
                for w in store.warnings() {
                    eprintln!("warning: {w}");
                }
                Ok(store)
            }
            Err(StorageError::NoStore { .. }) => Err(anyhow!(
                "no conversation store at {} (give --home DIR or set BA_AGENT_HOME)",
                home.display()
            )),
            Err(e) => Err(anyhow::Error::from(e))
                .with_context(|| format!("opening the store {}", home.display())),
        }
    }

    /// The conversation store under `home`.
    pub(crate) fn store(&self) -> anyhow::Result<Arc<FileStore>> {
        let home = self.home();
        let store = FileStore::open(&home)
            .with_context(|| format!("opening the store {}", home.display()))?;
        for w in store.warnings() {
            eprintln!("warning: {w}");
        }
        Ok(Arc::new(store))
    }

    /// The tools the configuration offers the model (the agent adds its own, such as `task`).
    pub(crate) fn tools(&self) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
        let home = self.home();
        // Only the configured data folders are read by path. A conversation's own files
        // (uploads, outputs, spilled data) reach `file_reader` through the call's conversation
        // files, and `run_python` as copies in its working folder: nothing of the store, so no
        // conversation reads another's.
        let roots = self.data.clone();
        let python_roots = self.data.clone();
        let mut reader_config = FileReaderConfig::new(roots);
        if let Some(label) = &self.encoding {
            reader_config = reader_config.with_fallback_encoding(label).ok_or_else(|| {
                anyhow!("encoding: `{label}` is not an encoding label (gbk, big5, shift_jis, …)")
            })?;
        }
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(FileReader::new(reader_config))];
        let database = match (&self.database, &self.database_env) {
            (Some(location), _) => Some(location.clone()),
            (None, Some(var)) => {
                Some(env(var).ok_or_else(|| anyhow!("database_env: ${var} is not set"))?)
            }
            (None, None) => None,
        };
        if let Some(location) = database {
            tools.push(Arc::new(QueryDatabase::new(
                QueryDatabaseConfig::for_database(Database::from_location(&location)),
            )));
        }
        if let Some(python) = self.run_python_config(python_roots, &home) {
            let tool = RunPython::new(python);
            if let SandboxStatus::Unavailable { reason } = tool.sandbox_status() {
                eprintln!(
                    "warning: run_python will refuse to run code: no sandbox ({reason}); set \
                     `run_python: {{sandbox: off}}` in the configuration to run it unconfined"
                );
            }
            tools.push(Arc::new(tool));
        }
        if self.web_reader.unwrap_or(false) {
            tools.push(Arc::new(WebReader::new(WebReaderConfig::default())));
        }
        if let Some(search) = &self.web_search {
            tools.push(Arc::new(WebSearch::new(search.backend()?)));
        }
        Ok(tools)
    }

    /// `run_python`'s configuration, or `None` when it is turned off: the code may read the
    /// data folders, never `home` (the conversation's uploads are copied into its working
    /// folder).
    fn run_python_config(&self, read_roots: Vec<PathBuf>, home: &Path) -> Option<RunPythonConfig> {
        let options = match &self.run_python {
            Some(RunPythonSetting::Enabled(false)) => return None,
            None | Some(RunPythonSetting::Enabled(true)) => RunPythonOptions::default(),
            Some(RunPythonSetting::Options(options)) => options.clone(),
        };
        let mut limits = SandboxLimits::default();
        if let Some(mb) = options.memory_mb {
            limits = limits.with_memory_bytes(mb.saturating_mul(1 << 20));
        }
        if let Some(mb) = options.max_file_mb {
            limits = limits.with_file_size_bytes(mb.saturating_mul(1 << 20));
        }
        let mode = match options.sandbox {
            Some(false) => SandboxMode::Off,
            None | Some(true) => SandboxMode::Required,
        };
        Some(RunPythonConfig {
            sandbox: SandboxConfig::default()
                .with_mode(mode)
                .with_read_roots(read_roots)
                .with_protected(vec![home.to_owned()])
                .with_limits(limits),
            ..RunPythonConfig::default()
        })
    }

    /// The skill roots: the configuration's `skills`, then the plugins' namespaced ones.
    pub(crate) fn skill_roots(&self, plugin_roots: &[SkillRoot]) -> Vec<SkillRoot> {
        self.skills
            .iter()
            .map(|p| SkillRoot::new(p.clone()))
            .chain(plugin_roots.iter().cloned())
            .collect()
    }

    /// The `workflows/` folder of each plugin (those of the configuration, then
    /// `extra_plugins`) that has one; searched after the workflow roots.
    pub(crate) fn plugin_workflow_folders(&self, extra_plugins: &[PathBuf]) -> Vec<PathBuf> {
        self.plugins
            .iter()
            .chain(extra_plugins)
            .map(|p| p.join("workflows"))
            .filter(|p| p.is_dir())
            .collect()
    }

    /// The agent the configuration describes, over `client` and `store` (from [`Config::store`]),
    /// with the plugins' skills of `plugin_roots` and the tools of `mcp`'s servers; its runs'
    /// leases name `front_end` (`ba-agent serve`) as their holder.
    /// The `approvals` section as the agent's settings.
    pub(crate) fn approval_settings(&self) -> ba_agent::ApprovalSettings {
        ba_agent::ApprovalSettings {
            mode: self.approvals.mode,
            tools: self.approvals.tools.clone(),
            unless: self.approvals.unless.clone(),
        }
    }

    /// The `hooks` section as hooks, in the file's order within each event.
    pub(crate) fn hooks(&self) -> anyhow::Result<Vec<Arc<dyn ba_agent::Hook>>> {
        let mut out: Vec<Arc<dyn ba_agent::Hook>> = Vec::new();
        for (event, hooks) in &self.hooks {
            for h in hooks {
                if h.command.trim().is_empty() {
                    anyhow::bail!("hooks.{}: a hook's `command` is empty", event.as_str());
                }
                let mut hook = ba_agent::CommandHook::new(*event, h.command.clone())
                    .with_timeout(Duration::from_secs(h.timeout_secs.unwrap_or(60).max(1)));
                if let Some(m) = &h.matcher {
                    hook = hook.with_matcher(m.clone());
                }
                out.push(Arc::new(hook));
            }
        }
        Ok(out)
    }

    /// The workflows a run can start: the `workflows` roots, then each plugin's `workflows/`
    /// folder, then the demo's example (a name found earlier wins). What cannot be read is
    /// said on stderr once, and left out.
    pub(crate) fn workflow_set(&self) -> ba_skills::WorkflowSet {
        let mut roots = self.workflows.clone();
        roots.extend(self.plugin_workflow_folders(&[]));
        let mut set = ba_skills::WorkflowSet::load(&roots);
        set.add_text(
            ba_cli::demo::WORKFLOW_MD,
            std::path::Path::new(ba_cli::demo::WORKFLOW_PATH),
        );
        for d in set.diagnostics() {
            if d.severity == ba_skills::Severity::Error {
                eprintln!("warning: {d}");
            }
        }
        set
    }

    /// The `prices` section, checked.
    /// The spending caps, checked.
    pub(crate) fn budgets(&self) -> anyhow::Result<ba_agent::Budgets> {
        self.budgets
            .check()
            .map_err(|e| anyhow!("configuration: {e}"))?;
        Ok(self.budgets)
    }

    pub(crate) fn prices(&self) -> anyhow::Result<ba_agent::Prices> {
        ba_agent::Prices::new(self.prices.clone()).context("the configuration's `prices`")
    }

    pub(crate) fn agent(
        &self,
        front_end: &str,
        client: Arc<dyn ModelClient>,
        store: Arc<dyn ConversationStore>,
        plugin_roots: &[SkillRoot],
        mcp: Option<&McpManager>,
    ) -> anyhow::Result<Agent> {
        let tools = self.tools()?;
        let model = self.default_model();
        let prices = self.prices()?;
        let budgets = self.budgets()?;
        let tool_search = self.tools.clone();
        let retrieval = self.retrieval()?;
        let workflows = Arc::new(self.workflow_set());
        // The store's workspace keeps every file of a conversation: uploads, saved code,
        // spilled data and outputs.
        let mut builder: AgentBuilder = Agent::builder(Arc::clone(&client))
            .store(store)
            .tools(tools)
            .sub_agents(self.sub_agents.unwrap_or(true))
            .workflows(workflows)
            .configure(|s| {
                s.model = model;
                s.holder = front_end.to_owned();
                if let Some(m) = self.response_mode {
                    s.response_mode = m;
                }
                s.budget = self.budget(s.budget);
                if let Some(name) = &self.strategy {
                    s.strategy = name.clone();
                }
                if let Some((share, _)) = &retrieval {
                    s.retrieval_share = *share;
                }
                if let Some(n) = self.max_rounds {
                    s.max_rounds = n;
                }
                match self.max_tokens {
                    Some(n) => s.max_tokens = n,
                    // A server's window holds the prompt and the answer: the answer's cap is
                    // what the budget keeps for it (a server like vLLM refuses a request whose
                    // prompt and cap pass its window).
                    None if self.context_window.is_none() && self.served_window.is_some() => {
                        let reserve = s.budget.reserved_for_response;
                        s.max_tokens = s.max_tokens.min(u32::try_from(reserve).unwrap_or(u32::MAX));
                    }
                    None => {}
                }
                if let Some(stream) = self.stream {
                    s.stream = stream;
                }
                s.approvals = self.approval_settings();
                s.prices = prices;
                s.budgets = budgets;
                s.tool_search = tool_search;
                s.memory = self.memory.agent_mode();
            });
        let roots = self.skill_roots(plugin_roots);
        if !roots.is_empty() {
            builder = builder.skills(Arc::new(SkillSet::load_roots(roots)));
        }
        if let Some(manager) = mcp {
            // Images and blobs of MCP results become data files of the call's conversation.
            let mut source = ba_agent::McpToolSource::new(manager.clone());
            if let Some(secs) = self.mcp_call_timeout_secs {
                source = source.with_max_call(Duration::from_secs(secs));
            }
            builder = builder.tool_source(Arc::new(source));
        }
        if let Some(path) = &self.prompts {
            builder = builder.prompts(Prompts::load(path)?);
        }
        for hook in self.hooks()? {
            builder = builder.hook(hook);
        }
        if let Some((_, Some(embeddings))) = retrieval {
            builder = builder.embeddings(Arc::new(embeddings));
        }
        if let Some(summary_model) = &self.summary_model {
            builder = builder.summarizer(Arc::new(ModelSummarizer::new(client, summary_model)));
        }
        Ok(builder.build()?)
    }
}

/// `run_python:` in the configuration: `true`, `false`, or a map of options (which implies
/// `true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunPythonSetting {
    /// Offered (sandboxed, with the default limits) or not.
    Enabled(bool),
    /// Offered with these options.
    Options(RunPythonOptions),
}

/// The options of `run_python`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunPythonOptions {
    /// `on` (the default: the tool refuses where no sandbox can be set up) or `off`.
    #[serde(default, deserialize_with = "on_off")]
    pub sandbox: Option<bool>,
    /// The code's address space in MiB (default 4096).
    pub memory_mb: Option<u64>,
    /// The largest file the code may write, in MiB (default 1024).
    pub max_file_mb: Option<u64>,
}

impl<'de> Deserialize<'de> for RunPythonSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RunPythonSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false, or options such as {sandbox: off, memory_mb: 2048}")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(RunPythonSetting::Enabled(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RunPythonOptions::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RunPythonSetting::Options)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `on`/`off` (or `true`/`false`) as a bool.
fn on_off<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    struct Visitor;
    impl serde::de::Visitor<'_> for Visitor {
        type Value = Option<bool>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("on or off")
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "on" => Ok(Some(true)),
                "off" => Ok(Some(false)),
                other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
            }
        }
    }
    deserializer.deserialize_any(Visitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_source_can_have_its_own_defer_mode() {
        let c: Config = serde_yaml_ng::from_str(
            "tools:\n  defer: auto\n  servers: {crm: never, warehouse: always}\n",
        )
        .map_err(|e| e.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.tools.servers.get("crm"),
            Some(&ba_agent::DeferMode::Never)
        );
        assert_eq!(
            c.tools.servers.get("warehouse"),
            Some(&ba_agent::DeferMode::Always)
        );
        let bad = serde_yaml_ng::from_str::<Config>("tools:\n  servers: {crm: sometimes}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(bad.contains("unknown variant `sometimes`"), "{bad}");
    }

    #[test]
    fn prices_are_read_and_checked() {
        let c: Config = serde_yaml_ng::from_str(
            "prices:\n  claude-sonnet-4-5: {input: 3, output: 15, cache_read: 0.3}\n",
        )
        .map_err(|e| e.to_string())
        .unwrap_or_else(|e| panic!("{e}"));
        let prices = c.prices().map_err(|e| e.to_string());
        let usage = ba_protocol::Usage {
            input_tokens: 1_000_000,
            ..ba_protocol::Usage::default()
        };
        assert_eq!(
            prices.map(|p| p.cost(Some("claude-sonnet-4-5-20250929"), &usage)),
            Ok(Some(3.0))
        );
        let bad: Config = serde_yaml_ng::from_str("prices:\n  m: {input: -1, output: 1}\n")
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            bad.prices().map_err(|e| format!("{e:#}")).err().as_deref(),
            Some(
                "the configuration's `prices`: the price of model \"m\" must be finite and not negative"
            )
        );
        let typo = serde_yaml_ng::from_str::<Config>("prices:\n  m: {inpt: 1, output: 1}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(typo.contains("unknown field `inpt`"), "{typo}");
    }

    /// The `run_python` setting of `yaml` (a `Config` has no `Debug`: it may hold a key).
    fn parse(yaml: &str) -> Result<Option<RunPythonSetting>, String> {
        serde_yaml_ng::from_str::<Config>(yaml)
            .map(|c| c.run_python)
            .map_err(|e| e.to_string())
    }

    fn config(yaml: &str) -> Config {
        match serde_yaml_ng::from_str(yaml) {
            Ok(config) => config,
            Err(e) => panic!("{yaml}: {e}"),
        }
    }

    /// The `retrieval` section's share and embeddings client, or the error as the user reads
    /// it.
    fn retrieval(yaml: &str) -> Result<Option<(f64, Option<String>)>, String> {
        let c: Config = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
        c.retrieval()
            .map(|r| r.map(|(share, e)| (share, e.map(|e| e.model().to_owned()))))
            .map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn the_retrieval_section_is_read_and_checked() {
        assert_eq!(retrieval("strategy: retrieval"), Ok(None));
        assert_eq!(
            retrieval("strategy: retrieval\nretrieval: {share: 0.2}"),
            Ok(Some((0.2, None)))
        );
        assert_eq!(
            retrieval(
                "strategy: retrieval\nretrieval:\n  embeddings: {base_url: 'http://127.0.0.1:9/v1', model: nomic, batch_size: 8}"
            ),
            Ok(Some((0.1, Some("nomic".to_owned()))))
        );
        let typo = retrieval(
            "strategy: retrieval\nretrieval: {embeddings: {base_url: 'http://x/v1', model: m, key_env: K}}",
        )
        .unwrap_err();
        assert!(typo.contains("unknown field `key_env`"), "{typo}");
        let typo = retrieval("strategy: retrieval\nretrieval: {shar: 0.1}").unwrap_err();
        assert!(typo.contains("unknown field `shar`"), "{typo}");
        assert_eq!(
            retrieval("strategy: retrieval\nretrieval: {share: 0.9}"),
            Err("retrieval.share: expected a share of the window from 0 to 0.5, found 0.9".into())
        );
        assert_eq!(
            retrieval("retrieval: {share: 0.2}"),
            Err("retrieval: the section applies with `strategy: retrieval` only".into())
        );
        assert_eq!(
            retrieval(
                "strategy: retrieval\nretrieval: {embeddings: {base_url: 'http://x/v1', model: m, api_key_env: BA_AGENT_TEST_UNSET_EMBEDDINGS_KEY}}"
            ),
            Err("retrieval.embeddings: the API key is read from $BA_AGENT_TEST_UNSET_EMBEDDINGS_KEY, which is not set".into())
        );
        let bad = retrieval(
            "strategy: retrieval\nretrieval: {embeddings: {base_url: 'ftp://x', model: m}}",
        )
        .unwrap_err();
        assert!(bad.contains("must start with http:// or https://"), "{bad}");
    }

    #[test]
    fn run_python_takes_a_bool_or_options() {
        assert_eq!(parse("{}").unwrap(), None);
        assert_eq!(
            parse("run_python: false").unwrap(),
            Some(RunPythonSetting::Enabled(false))
        );
        assert_eq!(
            parse("run_python: true").unwrap(),
            Some(RunPythonSetting::Enabled(true))
        );
        for (yaml, sandbox) in [
            ("run_python: {sandbox: off}", Some(false)),
            ("run_python: {sandbox: on}", Some(true)),
            ("run_python: {sandbox: false}", Some(false)),
            (
                "run_python:\n  sandbox: off\n  memory_mb: 2048",
                Some(false),
            ),
            ("run_python: {memory_mb: 2048}", None),
        ] {
            let Some(RunPythonSetting::Options(options)) = parse(yaml).unwrap() else {
                panic!("{yaml}")
            };
            assert_eq!(options.sandbox, sandbox, "{yaml}");
        }
        let err = parse("run_python: {sandbox: maybe}").unwrap_err();
        assert!(err.contains("on or off"), "{err}");
        let err = parse("run_python: {sandbox: off, network: on}").unwrap_err();
        assert!(err.contains("unknown field `network`"), "{err}");
        let err = parse("run_python: 3").unwrap_err();
        assert!(err.contains("{sandbox: off"), "{err}");
    }

    #[test]
    fn run_python_reads_the_data_folders_and_protects_the_home() {
        let home = Path::new("/srv/agent");
        let python = config("run_python: {sandbox: off, memory_mb: 512}")
            .run_python_config(vec![home.join("uploads")], home)
            .unwrap();
        assert_eq!(python.sandbox.mode, SandboxMode::Off);
        assert_eq!(python.sandbox.limits.memory_bytes, 512 << 20);
        assert_eq!(python.sandbox.read_roots, [home.join("uploads")]);
        assert_eq!(python.sandbox.protected, [home.to_owned()]);
        let default = config("{}").run_python_config(vec![], home).unwrap();
        assert_eq!(default.sandbox.mode, SandboxMode::Required);
        assert!(
            config("run_python: false")
                .run_python_config(vec![], home)
                .is_none()
        );
    }
}
