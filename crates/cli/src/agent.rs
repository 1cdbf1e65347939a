//! The agent commands: `demo`, `run`, `chat` and `inspect`.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_agent::{Agent, AgentEvent, Input, RunStatus, RunSummary};
use ba_cli::demo;
use ba_protocol::{LogRole, Mode};
use ba_storage::{ConversationId, ConversationStore, NewConversation};
use futures::StreamExt;

use crate::cli::{CliError, CliResult};
use crate::config::Config;
use crate::mcp::{ExtOpts, Extensions};
use crate::out::{out, outln};
use crate::print::Printer;

/// `ba-agent demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Folder for the demo's data, store and code (default: `ba-agent-demo` in the system's
    /// temporary folder); its earlier conversation is replaced.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The context window in tokens (small on purpose, so the session is compressed).
    #[arg(long)]
    budget: Option<usize>,
    /// One JSON object per event instead of text.
    #[arg(long)]
    json: bool,
}

/// Options shared by `run` and `chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentOpts {
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where conversations live (overrides `home` and `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
    /// The mode of a new conversation, or the mode to switch an existing one to.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// One JSON object per event instead of text.
    #[arg(long)]
    json: bool,
}

impl RunArgs {
    /// `--config`.
    pub(crate) fn config_file(&self) -> Option<&Path> {
        self.opts.config.as_deref()
    }
}

impl ChatArgs {
    /// `--config`.
    pub(crate) fn config_file(&self) -> Option<&Path> {
        self.opts.config.as_deref()
    }
}

/// Modes (O3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ModeArg {
    /// Plain chat.
    Chat,
    /// Chat with the analyst persona.
    Agent,
    /// A workflow run.
    Run,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Chat => Self::Chat,
            ModeArg::Agent => Self::Agent,
            ModeArg::Run => Self::Run,
        }
    }
}

/// `ba-agent run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The task, as a user message.
    #[arg(long, conflicts_with_all = ["resume", "continue_"])]
    task: Option<String>,
    /// The conversation to add the task to (a new one when left out).
    #[arg(long)]
    conversation: Option<String>,
    /// Resume conversation ID from its log: run calls without results, then go on.
    #[arg(long, value_name = "ID", conflicts_with = "continue_")]
    resume: Option<String>,
    /// Send `continue` to conversation ID after a failure.
    #[arg(long = "continue", value_name = "ID")]
    continue_: Option<String>,
    #[command(flatten)]
    opts: AgentOpts,
}

/// `ba-agent chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// The conversation to go on with (a new one when left out).
    #[arg(long)]
    conversation: Option<String>,
    #[command(flatten)]
    opts: AgentOpts,
}

/// `ba-agent inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// The conversation id.
    conv: String,
    /// Where conversations live (default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn exit_code(summary: &RunSummary) -> ExitCode {
    match summary.status {
        RunStatus::Answered => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

/// Runs one turn, printing its events; returns the summary.
async fn drive(
    agent: &Agent,
    id: &ConversationId,
    input: Input,
    printer: &mut Printer,
) -> RunSummary {
    let _printing = crate::out::run_guard();
    let mut run = agent.send(id, input);
    let mut summary = None;
    while let Some(event) = run.next().await {
        // Nobody reads any more (`… | head`): let the round under way land in the log, then
        // stop before the next model call; the process ends quietly when the run has.
        if crate::out::is_closed() {
            run.stop_after_round();
        }
        printer.event(&event);
        if let AgentEvent::Finished(s) = event {
            summary = Some(s);
        }
    }
    summary.unwrap_or_else(|| RunSummary::failed(id.as_str(), ba_agent::NO_SUMMARY))
}

pub(crate) fn demo(args: DemoArgs) -> CliResult {
    let dir = args
        .dir
        .unwrap_or_else(|| std::env::temp_dir().join("ba-agent-demo"));
    let rt = runtime()?;
    rt.block_on(async {
        let d = demo::setup(&dir, args.budget)
            .await
            .with_context(|| format!("setting the demo up in {}", dir.display()))?;
        let mut printer = Printer::new(args.json, false);
        if !args.json {
            outln!("BA-Agent demo: a recorded analysis session (no network, no API key) run");
            outln!("against the real tools, a file store and the sales-report skill.");
            outln!("Folder: {}", dir.display());
            outln!();
            outln!("Question: {}", demo::QUESTION);
            outln!();
        }
        let summary = drive(
            &d.agent,
            &d.conversation,
            Input::message(demo::QUESTION),
            &mut printer,
        )
        .await;
        printer.final_report(&summary, d.agent.code_store());
        let report = d.agent.report(&d.conversation).await?;
        if args.json {
            outln!("{}", serde_json::to_string(&report)?);
        } else {
            outln!();
            out!("{}", report.render(true));
            outln!();
            outln!(
                "Inspect it again with: ba-agent inspect {} --home {}",
                d.conversation,
                dir.display()
            );
        }
        Ok::<_, anyhow::Error>(exit_code(&summary))
    })
    .map_err(CliError::from)
}

fn config_of(opts: &AgentOpts) -> anyhow::Result<Config> {
    let mut config = Config::load(opts.config.as_deref())?;
    if let Some(home) = &opts.home {
        config.home = Some(home.clone());
    }
    Ok(config)
}

/// Model turns already in a log: where a replayed conversation goes on from.
fn played_turns(entries: &[ba_protocol::LogEntry]) -> usize {
    entries
        .iter()
        .filter(|e| e.role == LogRole::Assistant)
        .count()
}

/// An agent with its MCP servers (shut down when the command ends).
struct Session {
    agent: Agent,
    id: ConversationId,
    mcp: Option<ba_mcp::McpManager>,
}

impl Session {
    async fn close(self) {
        if let Some(manager) = self.mcp {
            manager.shutdown().await;
        }
    }
}

/// Starts the MCP servers of the configuration and the flags: every one in parallel, waiting
/// for the `required` ones (each bounded by its start-up timeout); a required one that did not
/// start is an error with its stderr tail.
pub(crate) async fn start_mcp(
    config: &Config,
    ext: &Extensions,
) -> anyhow::Result<Option<ba_mcp::McpManager>> {
    let options = ba_mcp::McpOptions::default().with_tool_cache(config.home().join("mcp-tools"));
    let Some(manager) = ext.start(options).await else {
        return Ok(None);
    };
    if let Err(e) = manager.check_required() {
        manager.shutdown().await;
        return Err(crate::mcp::with_detail(&e));
    }
    Ok(Some(manager))
}

async fn open_conversation(
    config: &Config,
    ext: &ExtOpts,
    given: Option<&str>,
    mode: Option<Mode>,
    title: Option<String>,
) -> anyhow::Result<Session> {
    let home = config.home();
    let extensions = Extensions::gather(config, ext)?;
    let store = config.store()?;
    let (id, played) = match given {
        Some(id) => {
            let id = ConversationId::new(id)?;
            let entries = store
                .load(&id)
                .await
                .with_context(|| format!("conversation {id} in {}", home.display()))?
                .into_entries();
            (Some(id), played_turns(&entries))
        }
        None => (None, 0),
    };
    let client = config.client(played)?;
    let mcp = start_mcp(config, &extensions).await?;
    let agent = config.agent(client, store, &extensions.skill_roots, mcp.as_ref())?;
    let id = match id {
        Some(id) => {
            if let Some(mode) = mode {
                agent.set_mode(&id, mode).await?;
            }
            id
        }
        None => {
            agent
                .new_conversation(NewConversation {
                    title,
                    mode: Some(mode.unwrap_or(Mode::Agent)),
                    parent: None,
                })
                .await?
        }
    };
    Ok(Session { agent, id, mcp })
}

pub(crate) fn run(args: RunArgs, ext: &ExtOpts) -> CliResult {
    let config = config_of(&args.opts)?;
    let mode = args.opts.mode.map(Mode::from);
    let (given, input) = match (&args.task, &args.resume, &args.continue_) {
        (Some(task), None, None) => (args.conversation.clone(), Input::message(task.clone())),
        (None, Some(id), None) => (Some(id.clone()), Input::Resume),
        (None, None, Some(id)) => (Some(id.clone()), Input::Continue),
        _ => {
            return Err(CliError::input(anyhow!(
                "give one of --task TEXT, --resume ID or --continue ID"
            )));
        }
    };
    let rt = runtime()?;
    rt.block_on(async {
        let title = args.task.as_ref().map(|t| t.chars().take(80).collect());
        let session = open_conversation(&config, ext, given.as_deref(), mode, title).await?;
        let (agent, id) = (&session.agent, &session.id);
        let streaming = agent.settings().response_mode == ba_agent::ResponseMode::Native;
        let mut printer = Printer::new(args.opts.json, streaming);
        if !args.opts.json {
            outln!("Conversation {id}");
        }
        let summary = drive(agent, id, input, &mut printer).await;
        printer.final_report(&summary, agent.code_store());
        let report = agent.report(id).await?;
        session.close().await;
        if args.opts.json {
            outln!("{}", serde_json::to_string(&report)?);
        } else {
            outln!();
            out!("{}", report.render(true));
        }
        Ok::<_, anyhow::Error>(exit_code(&summary))
    })
    .map_err(CliError::from)
}

const CHAT_HELP: &str = "Commands: /compact (summarise the conversation so far), /skills (list \
the skills), /mode chat|agent|run (switch mode), /continue (resume after a failure), /exit.";

pub(crate) fn chat(args: ChatArgs, ext: &ExtOpts) -> CliResult {
    let config = config_of(&args.opts)?;
    let mode = args.opts.mode.map(Mode::from);
    let rt = runtime()?;
    let session = rt.block_on(open_conversation(
        &config,
        ext,
        args.conversation.as_deref(),
        mode,
        Some("chat".into()),
    ))?;
    let (agent, id) = (session.agent.clone(), session.id.clone());
    // Skills and plugins reload when their folders change; each run starts with the
    // catalogue as it is then.
    let _watcher = match agent.skills() {
        Some(skills) => Some(crate::watch::SkillWatcher::start(
            std::sync::Arc::clone(skills),
            crate::watch::print_reload,
        )?),
        None => None,
    };
    let streaming = agent.settings().response_mode == ba_agent::ResponseMode::Native;
    let mut printer = Printer::new(args.opts.json, streaming);
    outln!("Conversation {id}. {CHAT_HELP}");
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        eprint!("> ");
        let Some(line) = lines.next() else { break };
        let line = line.context("reading standard input")?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let input = match text
            .split_once(' ')
            .map_or((text, ""), |(a, b)| (a, b.trim()))
        {
            ("/exit" | "/quit", _) => break,
            ("/help", _) => {
                outln!("{CHAT_HELP}");
                continue;
            }
            ("/skills", _) => {
                match agent.skills() {
                    Some(skills) if !skills.is_empty() => out!("{}", skills.render_catalogue()),
                    _ => outln!("No skills are configured (`skills:` in the configuration)."),
                }
                continue;
            }
            ("/mode", m) => {
                let mode = match m {
                    "chat" => Mode::Chat,
                    "agent" => Mode::Agent,
                    "run" => Mode::Run,
                    other => {
                        outln!("unknown mode `{other}`: use chat, agent or run");
                        continue;
                    }
                };
                rt.block_on(agent.set_mode(&id, mode))
                    .map_err(anyhow::Error::from)?;
                outln!("mode: {}", mode.as_str());
                continue;
            }
            ("/compact", _) => {
                match rt.block_on(agent.compact(&id)) {
                    Ok(c) => outln!(
                        "compacted {} entries: {} → {} tokens",
                        c.entries,
                        c.tokens_before,
                        c.tokens_after
                    ),
                    Err(e) => outln!("cannot compact: {e}"),
                }
                continue;
            }
            ("/continue", _) => Input::Continue,
            (cmd, _) if cmd.starts_with('/') => {
                outln!("unknown command {cmd}. {CHAT_HELP}");
                continue;
            }
            _ => Input::message(text),
        };
        let summary = rt.block_on(drive(&agent, &id, input, &mut printer));
        printer.final_report(&summary, agent.code_store());
    }
    rt.block_on(session.close());
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn inspect(args: InspectArgs) -> CliResult {
    let mut config = Config::load(None)?;
    if let Some(home) = args.home {
        config.home = Some(home);
    }
    let home = config.home();
    let rt = runtime()?;
    rt.block_on(async {
        let store = config.existing_store().map_err(CliError::input)?;
        let id = ConversationId::new(&args.conv).map_err(CliError::input)?;
        let meta = store
            .metadata(&id)
            .await
            .with_context(|| format!("conversation {id} in {}", home.display()))
            .map_err(CliError::input)?;
        let entries = store
            .load(&id)
            .await
            .map_err(anyhow::Error::from)?
            .into_entries();
        let report = ba_agent::ConversationReport::from_log(id.as_str(), &entries);
        if args.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?
            );
        } else {
            outln!(
                "{} · mode {} · {} entries{}",
                meta.title.as_deref().unwrap_or("(untitled)"),
                meta.mode.unwrap_or_default().as_str(),
                meta.last_seq,
                meta.parent
                    .as_deref()
                    .map(|p| format!(" · sub-agent of {p}"))
                    .unwrap_or_default()
            );
            out!("{}", report.render(true));
        }
        Ok(ExitCode::SUCCESS)
    })
}
