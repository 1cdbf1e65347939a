//! `Agent`: the agent built from the command line's configuration file format (a subset of
//! its keys: the model provider, the store, the built-in tools, the context and the
//! approvals), with Python functions as further tools; and `Run`, a run's events as a Python
//! iterator.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ba_agent::{AgentEvent, ApprovalAnswer, ApprovalSettings, Input, ResponseMode, RunOptions};
use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::run_python::sandbox::{SandboxConfig, SandboxLimits, SandboxMode};
use ba_builtins::run_python::{RunPython, RunPythonConfig};
use ba_context::ContextBudget;
use ba_model::{AnthropicClient, ApiKey, ModelClient, OpenAiClient, ReplayClient, ResponsesClient};
use ba_storage::{ConversationId, NewConversation, NewFile};
use ba_tools::Tool;
use futures::StreamExt as _;
use pyo3::prelude::*;
use serde::Deserialize;

use crate::error::{Error, to_json};
use crate::runtime;
use crate::store::Store;
use crate::tools::python_tool;

/// The keys of the configuration file the package reads; the others of the command line's
/// (MCP servers, hooks, plugins, web tools, prices…) are refused by name, so a file written
/// for the command line never half-works here. No `Debug`: it may hold an API key.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    compat: Option<bool>,
    replay: Option<PathBuf>,
    home: Option<PathBuf>,
    database_url: Option<String>,
    #[serde(default)]
    data: Vec<PathBuf>,
    #[serde(default)]
    skills: Vec<PathBuf>,
    #[serde(default)]
    workflows: Vec<PathBuf>,
    run_python: Option<RunPythonSetting>,
    response_mode: Option<ResponseMode>,
    context_window: Option<usize>,
    reserve: Option<usize>,
    strategy: Option<String>,
    max_rounds: Option<u32>,
    max_tokens: Option<u32>,
    stream: Option<bool>,
    sub_agents: Option<bool>,
    #[serde(default)]
    approvals: Approvals,
}

/// `approvals: {mode: ask, tools: {name: ask}}`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Approvals {
    #[serde(default)]
    mode: ba_protocol::ApprovalMode,
    #[serde(default)]
    tools: BTreeMap<String, ba_protocol::ToolApproval>,
}

/// `run_python: true`, `false`, or `{sandbox: on|off, memory_mb: N, max_file_mb: N}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RunPythonSetting {
    Enabled(bool),
    Options(RunPythonOptions),
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunPythonOptions {
    sandbox: Option<OnOff>,
    memory_mb: Option<u64>,
    max_file_mb: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OnOff {
    Bool(bool),
    Word(String),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Config {
    /// `text` (YAML or JSON), then the environment the command line reads too.
    fn parse(text: &str, origin: &str) -> Result<Self, Error> {
        let mut config: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_yaml_ng::from_str(text)
                .map_err(|e| Error::Config(format!("configuration {origin}: {e}")))?
        };
        let overrides = ba_agent::EnvOverrides::read().map_err(|e| Error::Config(e.to_string()))?;
        config.provider = overrides.provider.or(config.provider);
        config.model = overrides.model.or(config.model);
        config.base_url = overrides.base_url.or(config.base_url);
        config.home = overrides.home.or(config.home);
        config.compat = overrides.compat.or(config.compat);
        Ok(config)
    }

    fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading the configuration {}", path.display()), e))?;
        Self::parse(&text, &path.display().to_string())
    }

    fn model(&self) -> String {
        match (&self.model, self.provider.as_deref()) {
            (Some(m), _) => m.clone(),
            (None, Some("openai")) => "gpt-4o".to_owned(),
            (None, Some("openai-responses")) => "gpt-5".to_owned(),
            (None, _) => "claude-sonnet-4-5".to_owned(),
        }
    }

    fn client(&self) -> Result<Arc<dyn ModelClient>, Error> {
        let key = self.api_key.clone().map(ApiKey::new);
        let compat = self.compat == Some(true);
        let provider = self.provider.as_deref().ok_or_else(|| {
            Error::Config(
                "no model provider: set `provider` (anthropic, openai, openai-responses or \
                 replay) in the configuration or BA_AGENT_PROVIDER"
                    .into(),
            )
        })?;
        if compat && provider != "openai" {
            return Err(Error::Config(format!(
                "compat: only the openai provider has a compat profile, not `{provider}`"
            )));
        }
        Ok(match provider {
            "anthropic" => {
                let client = match key {
                    Some(k) => AnthropicClient::new(k)?,
                    None => AnthropicClient::from_env()?,
                };
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            "openai" => {
                let client = match key {
                    Some(k) => OpenAiClient::new(Some(k))?,
                    // A local server wants no key.
                    None if compat && env(OpenAiClient::KEY_VAR).is_none() => {
                        OpenAiClient::new(None)?
                    }
                    None => OpenAiClient::from_env()?,
                }
                .with_compat(
                    compat
                        .then(ba_model::OpenAiCompat::server)
                        .unwrap_or_default(),
                )
                .with_token_counter(Arc::new(
                    ba_context::ModelTokenizer::for_model(&self.model()).unwrap_or_else(|| {
                        ba_context::ModelTokenizer::exact(ba_context::Encoding::Cl100kBase)
                    }),
                ));
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            "openai-responses" => {
                let client = match key {
                    Some(k) => ResponsesClient::new(Some(k))?,
                    None => ResponsesClient::from_env()?,
                };
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            "replay" => {
                let path = self.replay.as_ref().ok_or_else(|| {
                    Error::Config("the replay provider needs `replay: FILE`".into())
                })?;
                Arc::new(ReplayClient::from_file(path)?)
            }
            other => {
                return Err(Error::Config(format!(
                    "unknown provider `{other}`: expected anthropic, openai, openai-responses \
                     or replay"
                )));
            }
        })
    }

    fn home(&self) -> PathBuf {
        self.home
            .clone()
            .unwrap_or_else(|| PathBuf::from(".ba-agent"))
    }

    /// `file_reader` always, `run_python` unless turned off.
    fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, Error> {
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(FileReader::new(FileReaderConfig::new(
            self.data.clone(),
        )))];
        let default = RunPythonOptions::default();
        let options = match &self.run_python {
            Some(RunPythonSetting::Enabled(false)) => return Ok(tools),
            None | Some(RunPythonSetting::Enabled(true)) => &default,
            Some(RunPythonSetting::Options(o)) => o,
        };
        let mode = match &options.sandbox {
            None | Some(OnOff::Bool(true)) => SandboxMode::Required,
            Some(OnOff::Bool(false)) => SandboxMode::Off,
            Some(OnOff::Word(w)) => match w.as_str() {
                "on" => SandboxMode::Required,
                "off" => SandboxMode::Off,
                other => {
                    return Err(Error::Config(format!(
                        "run_python.sandbox: expected on or off, found `{other}`"
                    )));
                }
            },
        };
        let mut limits = SandboxLimits::default();
        if let Some(mb) = options.memory_mb {
            limits = limits.with_memory_bytes(mb.saturating_mul(1 << 20));
        }
        if let Some(mb) = options.max_file_mb {
            limits = limits.with_file_size_bytes(mb.saturating_mul(1 << 20));
        }
        tools.push(Arc::new(RunPython::new(RunPythonConfig {
            sandbox: SandboxConfig::default()
                .with_mode(mode)
                .with_read_roots(self.data.clone())
                .with_protected(vec![self.home()])
                .with_limits(limits),
            ..RunPythonConfig::default()
        })));
        Ok(tools)
    }
}

/// A tool handed over from Python: name, description, JSON Schema (as text), the callable,
/// and whether each call waits for approval.
type ToolSpec = (String, String, String, Py<PyAny>, bool);

/// The agent.
#[pyclass(module = "ba_agent._native", frozen)]
pub(crate) struct Agent {
    pub(crate) inner: ba_agent::Agent,
}

#[pymethods]
impl Agent {
    /// The agent of the configuration `config` (YAML or JSON text; `path` names a file to read
    /// instead), with `tools` besides the configured ones.
    #[new]
    #[pyo3(signature = (config = None, path = None, tools = Vec::new()))]
    fn new(
        py: Python<'_>,
        config: Option<String>,
        path: Option<PathBuf>,
        tools: Vec<ToolSpec>,
    ) -> PyResult<Self> {
        let config = match (&path, &config) {
            (Some(p), _) => Config::load(p)?,
            (None, Some(text)) => Config::parse(text, "given")?,
            (None, None) => Config::parse("", "")?,
        };
        let mut extra: Vec<Arc<dyn Tool>> = Vec::with_capacity(tools.len());
        for (name, description, schema, call, ask) in tools {
            let schema = serde_json::from_str(&schema)
                .map_err(|e| Error::json(format!("the schema of tool `{name}`"), e))?;
            extra.push(python_tool(name, description, schema, call, ask));
        }
        let inner = py.detach(move || build(&config, extra))?;
        Ok(Self { inner })
    }

    /// The agent's store.
    fn store(&self) -> Store {
        Store {
            inner: Arc::clone(self.inner.store()),
        }
    }

    /// The names of the tools the model is offered.
    fn tool_names(&self) -> Vec<String> {
        self.inner
            .tools()
            .registry()
            .names()
            .map(str::to_owned)
            .collect()
    }

    /// A new conversation; its id.
    #[pyo3(signature = (title = None))]
    fn new_conversation(&self, py: Python<'_>, title: Option<String>) -> PyResult<String> {
        let agent = self.inner.clone();
        Ok(py.detach(move || -> Result<String, Error> {
            let id = runtime::block_on(async move {
                agent
                    .new_conversation(NewConversation {
                        title,
                        ..NewConversation::default()
                    })
                    .await
            })??;
            Ok(id.to_string())
        })?)
    }

    /// Starts a run on `text`, with the files at `uploads` attached; its events.
    #[pyo3(signature = (conversation, text, uploads = Vec::new()))]
    fn start(
        &self,
        py: Python<'_>,
        conversation: &str,
        text: String,
        uploads: Vec<PathBuf>,
    ) -> PyResult<Run> {
        let agent = self.inner.clone();
        let id = ConversationId::new(conversation).map_err(Error::from)?;
        Ok(py.detach(move || -> Result<Run, Error> {
            runtime::block_on(async move {
                let files = attach(&agent, &id, &uploads).await?;
                start(&agent, &id, Input::message_with(text, files)).await
            })?
        })?)
    }

    /// Starts a run of the workflow `name` with `inputs`; its events.
    fn start_workflow(
        &self,
        py: Python<'_>,
        conversation: &str,
        name: String,
        inputs: BTreeMap<String, String>,
    ) -> PyResult<Run> {
        let agent = self.inner.clone();
        let id = ConversationId::new(conversation).map_err(Error::from)?;
        Ok(py.detach(move || {
            runtime::block_on(
                async move { start(&agent, &id, Input::Workflow { name, inputs }).await },
            )?
        })?)
    }

    /// The calls waiting for a decision, as JSON.
    fn pending(&self, py: Python<'_>, conversation: &str) -> PyResult<String> {
        let agent = self.inner.clone();
        let id = ConversationId::new(conversation).map_err(Error::from)?;
        Ok(py.detach(move || -> Result<String, Error> {
            let pending = runtime::block_on(async move { agent.pending_approvals(&id).await })??;
            to_json("the waiting calls", &pending)
        })?)
    }

    /// Goes on after a pause with a decision for each waiting call: `(call_id, approved,
    /// reason)`; its events.
    fn decide(
        &self,
        py: Python<'_>,
        conversation: &str,
        answers: Vec<(String, bool, Option<String>)>,
    ) -> PyResult<Run> {
        let agent = self.inner.clone();
        let id = ConversationId::new(conversation).map_err(Error::from)?;
        let answers = answers
            .into_iter()
            .map(|(call, approved, reason)| {
                if approved {
                    ApprovalAnswer::approve(call)
                } else {
                    ApprovalAnswer::reject(call, reason.unwrap_or_else(|| "refused".to_owned()))
                }
            })
            .collect();
        Ok(py.detach(move || {
            runtime::block_on(async move { start(&agent, &id, Input::Decide(answers)).await })?
        })?)
    }
}

fn build(config: &Config, extra: Vec<Arc<dyn Tool>>) -> Result<ba_agent::Agent, Error> {
    let client = config.client()?;
    let location = match &config.database_url {
        Some(url) => url.clone(),
        None => config.home().display().to_string(),
    };
    let store = crate::store::open(&location, None)?;
    let mut tools = config.tools()?;
    tools.extend(extra);
    let model = config.model();
    let approvals = ApprovalSettings {
        mode: config.approvals.mode,
        tools: config.approvals.tools.clone(),
        ..ApprovalSettings::default()
    };
    let mut builder = ba_agent::Agent::builder(client)
        .store(store)
        .tools(tools)
        .sub_agents(config.sub_agents.unwrap_or(true))
        .workflows(Arc::new(ba_skills::WorkflowSet::load(&config.workflows)))
        .configure(|s| {
            s.model = model;
            s.holder = "ba_agent (Python)".to_owned();
            if let Some(m) = config.response_mode {
                s.response_mode = m;
            }
            if let Some(total) = config.context_window {
                s.budget = ContextBudget::new(total, config.reserve.unwrap_or(total / 16));
            }
            if let Some(name) = &config.strategy {
                s.strategy = name.clone();
            }
            if let Some(n) = config.max_rounds {
                s.max_rounds = n;
            }
            if let Some(n) = config.max_tokens {
                s.max_tokens = n;
            }
            if let Some(stream) = config.stream {
                s.stream = stream;
            }
            s.approvals = approvals;
        });
    if !config.skills.is_empty() {
        builder = builder.skills(Arc::new(ba_skills::SkillSet::load_roots(
            config.skills.iter().cloned().map(ba_skills::SkillRoot::new),
        )));
    }
    Ok(builder.build()?)
}

/// Puts each file of `paths` into the conversation's files as an upload.
async fn attach(
    agent: &ba_agent::Agent,
    id: &ConversationId,
    paths: &[PathBuf],
) -> Result<Vec<ba_storage::FileMeta>, Error> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let files = agent.workspace().ok_or_else(|| {
        Error::Argument("this store keeps no files, so no upload can be attached".into())
    })?;
    let mut attached = Vec::with_capacity(paths.len());
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                Error::Argument(format!("upload {}: not a file name", path.display()))
            })?;
        let mut body = tokio::fs::File::open(path)
            .await
            .map_err(|e| Error::io(format!("opening the upload {}", path.display()), e))?;
        attached.push(files.put(id, NewFile::upload(name, ""), &mut body).await?);
    }
    Ok(attached)
}

async fn start(agent: &ba_agent::Agent, id: &ConversationId, input: Input) -> Result<Run, Error> {
    let run = agent.start(id, input, RunOptions::default()).await?;
    Ok(Run {
        run: Mutex::new(Some(run)),
    })
}

/// A run's events, in order, as JSON text; the last is `finished`. Closing it (or dropping
/// it) before the end cancels the run: what was appended stays in the log.
#[pyclass(module = "ba_agent._native", frozen)]
pub(crate) struct Run {
    run: Mutex<Option<ba_agent::Run>>,
}

#[pymethods]
impl Run {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(py.detach(|| -> Result<Option<String>, Error> {
            let mut guard = self
                .run
                .lock()
                .map_err(|_| Error::Argument("the run was broken by an earlier failure".into()))?;
            let Some(run) = guard.as_mut() else {
                return Ok(None);
            };
            let event: Option<AgentEvent> = runtime::block_on(run.next())?;
            match event {
                Some(e) => Ok(Some(to_json("an event", &e)?)),
                None => {
                    *guard = None;
                    Ok(None)
                }
            }
        })?)
    }

    /// Stops the run (cancelling it when it has not finished).
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            // Dropping a run cancels it through the runtime.
            let _entered = runtime::get().map(tokio::runtime::Runtime::enter);
            if let Ok(mut guard) = self.run.lock() {
                guard.take();
            }
        });
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Agent>()?;
    m.add_class::<Run>()
}
