//! The configuration of the agent commands (`run`, `chat`, `inspect`): a YAML (or JSON) file
//! named by `--config` or `BA_AGENT_CONFIG`, then the environment (`BA_AGENT_PROVIDER`,
//! `BA_AGENT_MODEL`, `BA_AGENT_BASE_URL`, `BA_AGENT_HOME`; API keys from `ANTHROPIC_API_KEY` or
//! `OPENAI_API_KEY`), then the command line. Keys are never printed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use ba_agent::{Agent, AgentBuilder, DataFileSink, ModelSummarizer, Prompts, ResponseMode};
use ba_builtins::file_reader::{DirUploads, FileReader, FileReaderConfig};
use ba_builtins::query_database::{QueryDatabase, QueryDatabaseConfig};
use ba_builtins::run_python::RunPython;
use ba_builtins::web_reader::{WebReader, WebReaderConfig};
use ba_context::ContextBudget;
use ba_model::{AnthropicClient, ApiKey, HttpConfig, ModelClient, OpenAiClient, ReplayClient};
use ba_skills::SkillSet;
use ba_storage::code::CodeStore;
use ba_storage::datafile::DataFileStore;
use ba_storage::upload::UploadStore;
use ba_storage::{ConversationStore, FileStore, PostgresOptions, PostgresStore};
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
    /// Folders `file_reader` may read besides the uploads.
    #[serde(default)]
    pub data: Vec<PathBuf>,
    /// The SQLite database `query_database` opens read-only.
    pub database: Option<PathBuf>,
    /// Offer `run_python` (default true).
    pub run_python: Option<bool>,
    /// Offer `web_reader` (default false).
    pub web_reader: Option<bool>,
    /// `native` or `structured`.
    pub response_mode: Option<ResponseMode>,
    /// The model's context window in tokens.
    pub context_window: Option<usize>,
    /// Tokens kept for the answer.
    pub reserve: Option<usize>,
    /// The compression strategy.
    pub strategy: Option<String>,
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
}

fn env(name: &str) -> Option<String> {
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
        if let Some(v) = env("BA_AGENT_PROVIDER") {
            config.provider = Some(v);
        }
        if let Some(v) = env("BA_AGENT_MODEL") {
            config.model = Some(v);
        }
        if let Some(v) = env("BA_AGENT_BASE_URL") {
            config.base_url = Some(v);
        }
        if let Some(v) = env("BA_AGENT_HOME") {
            config.home = Some(PathBuf::from(v));
        }
        Ok(config)
    }

    pub(crate) fn home(&self) -> PathBuf {
        self.home
            .clone()
            .unwrap_or_else(|| PathBuf::from(".ba-agent"))
    }

    /// Timeouts and size bounds of the HTTP providers: the configuration's, or the defaults.
    fn http(&self) -> HttpConfig {
        let mut http = HttpConfig::default();
        if let Some(s) = self.request_timeout_secs {
            http = http.with_request_timeout(Duration::from_secs(s));
        }
        if let Some(s) = self.stream_idle_timeout_secs {
            http = http.with_idle_timeout(Duration::from_secs(s));
        }
        if let Some(s) = self.call_timeout_secs {
            http = http.with_call_timeout(Duration::from_secs(s));
        }
        if let Some(b) = self.max_response_bytes {
            http = http.with_max_response_bytes(b);
        }
        http
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

    /// The model client; a replay client starts after `played` turns.
    pub(crate) fn client(&self, played: usize) -> anyhow::Result<Arc<dyn ModelClient>> {
        let provider = self.provider.as_deref().ok_or_else(|| {
            anyhow!(
                "no model provider: set BA_AGENT_PROVIDER (anthropic, openai or replay) or \
                 `provider` in the configuration, with the provider's API key in its environment \
                 variable; `ba-agent demo` runs without any"
            )
        })?;
        let key = self.api_key.clone().map(ApiKey::new);
        Ok(match provider {
            "anthropic" => {
                let client = match key {
                    Some(k) => AnthropicClient::new(k)?,
                    None => AnthropicClient::from_env()?,
                }
                .with_http(self.http());
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            "openai" => {
                let client = match key {
                    Some(k) => OpenAiClient::new(Some(k))?,
                    None => OpenAiClient::from_env()?,
                }
                .with_http(self.http());
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            "replay" => {
                let path = self.replay.as_ref().ok_or_else(|| {
                    anyhow!("the replay provider needs `replay: FILE` in the configuration")
                })?;
                Arc::new(ReplayClient::from_file(path)?.with_played(played))
            }
            other => bail!("unknown provider `{other}`: expected anthropic, openai or replay"),
        })
    }

    pub(crate) fn default_model(&self) -> String {
        match (&self.model, self.provider.as_deref()) {
            (Some(m), _) => m.clone(),
            (None, Some("openai")) => "gpt-4o".to_owned(),
            (None, _) => "claude-sonnet-4-5".to_owned(),
        }
    }

    /// The conversation store under `home`.
    pub(crate) fn store(&self) -> anyhow::Result<Arc<FileStore>> {
        let home = self.home();
        let store = FileStore::open(&home)
            .with_context(|| format!("opening the store {}", home.display()))?;
        Ok(Arc::new(store))
    }

    /// The agent the configuration describes, over `client` and `store` (from [`Config::store`]).
    pub(crate) fn agent(
        &self,
        client: Arc<dyn ModelClient>,
        store: Arc<dyn ConversationStore>,
    ) -> anyhow::Result<Agent> {
        let home = self.home();
        let uploads_dir = home.join("uploads");
        let spill_dir = home.join("data-files");
        let mut roots = vec![uploads_dir.clone(), spill_dir.clone()];
        roots.extend(self.data.iter().cloned());
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(FileReader::new(
            FileReaderConfig::new(roots),
            Arc::new(DirUploads::new(&uploads_dir)),
        ))];
        if let Some(path) = &self.database {
            tools.push(Arc::new(QueryDatabase::new(QueryDatabaseConfig::new(path))));
        }
        if self.run_python.unwrap_or(true) {
            tools.push(Arc::new(RunPython::default()));
        }
        if self.web_reader.unwrap_or(false) {
            tools.push(Arc::new(WebReader::new(WebReaderConfig::default())));
        }
        let model = self.default_model();
        let mut builder: AgentBuilder = Agent::builder(Arc::clone(&client))
            .store(store)
            .tools(tools)
            .code_store(CodeStore::open(home.join("code"))?)
            .uploads(UploadStore::open(&uploads_dir)?)
            .data_sink(Arc::new(DataFileSink::new(DataFileStore::open(
                &spill_dir,
            )?)))
            .sub_agents(self.sub_agents.unwrap_or(true))
            .configure(|s| {
                s.model = model;
                if let Some(m) = self.response_mode {
                    s.response_mode = m;
                }
                if let Some(total) = self.context_window {
                    s.budget = ContextBudget::new(total, self.reserve.unwrap_or(total / 16));
                }
                if let Some(name) = &self.strategy {
                    s.strategy = name.clone();
                }
                if let Some(n) = self.max_rounds {
                    s.max_rounds = n;
                }
                if let Some(n) = self.max_tokens {
                    s.max_tokens = n;
                }
                if let Some(stream) = self.stream {
                    s.stream = stream;
                }
            });
        if !self.skills.is_empty() {
            builder = builder.skills(Arc::new(SkillSet::load(self.skills.iter().cloned())));
        }
        if let Some(path) = &self.prompts {
            builder = builder.prompts(Prompts::load(path)?);
        }
        if let Some(summary_model) = &self.summary_model {
            builder = builder.summarizer(Arc::new(ModelSummarizer::new(client, summary_model)));
        }
        Ok(builder.build()?)
    }
}
