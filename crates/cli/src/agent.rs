//! The agent commands: `demo`, `run`, `chat` and `inspect`.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_agent::{Agent, AgentEvent, Input, RunStatus, RunSummary};
use ba_cli::demo;
use ba_protocol::{LogRole, Mode};
use ba_storage::{ConversationId, ConversationStore, NewConversation};
use ba_storage::{FileMeta, NewFile};
use futures::StreamExt;

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::mcp::{ExtOpts, Extensions};
use crate::out::{out, outln};
use crate::print::Printer;

mod approve;
mod outputs;

use self::approve::{AWAITING_APPROVAL, ask_decisions, decisions, print_pending, waiting_list};
use self::outputs::{output_ids, outputs_folder, rendered, save_outputs};

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
    /// Run the example workflow (`monthly-sales-review` for 2024-09) instead of the question.
    #[arg(long)]
    workflow: bool,
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
    /// A file to attach to the message (repeatable): it is stored in the conversation's
    /// workspace as `upload_001`, … and named in the message, so the model can read it.
    #[arg(long, value_name = "FILE")]
    upload: Vec<PathBuf>,
    /// Where the files the run writes (charts, workbooks) are saved under their names
    /// (default: `outputs/<conversation>` in the home folder).
    #[arg(long, value_name = "DIR")]
    outputs: Option<PathBuf>,
    #[command(flatten)]
    user: UserArg,
}

/// The person a command acts as (`--user`, also `BA_AGENT_USER`): new conversations are
/// theirs, runs and decisions are recorded as theirs, and another person's conversation is
/// not found for them unless they are an admin of the store.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct UserArg {
    /// Act as this person (default `owner`, the single user of a store without people).
    #[arg(long = "user", value_name = "NAME", env = "BA_AGENT_USER",
          default_value = ba_storage::DEFAULT_OWNER)]
    pub(crate) name: String,
}

impl UserArg {
    /// Fails, as if the conversation did not exist, unless this person may act on it: it is
    /// theirs, they are `owner` (the store's single user), or the store names them an admin.
    pub(crate) async fn check(
        &self,
        store: &dyn ConversationStore,
        id: &ConversationId,
    ) -> anyhow::Result<()> {
        crate::users::check_access(store, id, &self.name).await
    }
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

/// Modes.
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
    /// Approve a call that waits in the `--conversation` (repeatable); the run goes on.
    #[arg(long, value_name = "CALL_ID", requires = "conversation",
          conflicts_with_all = ["task", "resume", "continue_"])]
    approve: Vec<String>,
    /// Approve every call that waits in the `--conversation`.
    #[arg(long, requires = "conversation", conflicts_with_all = ["task", "resume", "continue_"])]
    approve_all: bool,
    /// Reject a call that waits in the `--conversation` (repeatable); the model reads
    /// `--reason`.
    #[arg(long, value_name = "CALL_ID", requires = "conversation",
          conflicts_with_all = ["task", "resume", "continue_"])]
    reject: Vec<String>,
    /// Why the calls given with `--reject` were rejected.
    #[arg(long, value_name = "TEXT", requires = "reject")]
    reason: Option<String>,
    /// Start a run of this workflow (`ba-agent workflows list`), in `--conversation` or a new
    /// conversation.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["task", "resume", "continue_"])]
    workflow: Option<String>,
    /// An input of the workflow (repeatable); the others take their defaults.
    #[arg(long = "input", value_name = "KEY=VALUE", requires = "workflow")]
    inputs: Vec<String>,
    /// A folder of workflows, searched before the configuration's `workflows` (repeatable).
    #[arg(long = "root", value_name = "DIR", requires = "workflow")]
    roots: Vec<PathBuf>,
    #[command(flatten)]
    opts: AgentOpts,
}

/// `ba-agent chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// The conversation to go on with (a new one when left out).
    #[arg(long, conflicts_with = "fork")]
    conversation: Option<String>,
    /// Go on in a fork of conversation ID instead (the original is not changed): its whole
    /// history, or up to `--at SEQ`.
    #[arg(long, value_name = "ID")]
    fork: Option<String>,
    /// With `--fork`: the last entry the fork keeps.
    #[arg(long, value_name = "SEQ", requires = "fork")]
    at: Option<u64>,
    #[command(flatten)]
    opts: AgentOpts,
}

/// `ba-agent cancel`.
#[derive(Debug, clap::Args)]
pub(crate) struct CancelArgs {
    /// The conversation whose run to cancel.
    conv: String,
    /// Cancel only this run (as `ba-agent serve` or a refusal names it).
    #[arg(long, value_name = "RUN_ID")]
    run: Option<String>,
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`): its `database_url` names
    /// the shared store.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where conversations live (default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
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
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`): its `prices` and
    /// `budgets` price the calls and give the caps.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    user: UserArg,
}

/// `owner alice · spend $0.42 of $5.00 · alice in 2026-11: $3.10 of $20.00`, and the cap
/// reached, when one is.
fn spend_line(spend: &ba_agent::SpendReport) -> String {
    // Money only where some call was priced or a cap is in dollars: a conversation of models
    // without a price is counted in tokens, never shown as $0.
    let money = |usd: f64, cap: Option<f64>| {
        (usd > 0.0 || cap.is_some()).then(|| {
            let of = cap.map(|c| format!(" of {}", ba_agent::money(c)));
            format!("{}{} · ", ba_agent::money(usd), of.unwrap_or_default())
        })
    };
    let of_tokens = |cap: Option<u64>| cap.map(|c| format!(" of {c}")).unwrap_or_default();
    let c = &spend.conversation;
    let mut line = format!(
        "  owner {} · spend {}{} tokens{}",
        spend.owner,
        money(c.usd, spend.conversation_usd_cap).unwrap_or_default(),
        c.tokens,
        of_tokens(spend.conversation_tokens_cap)
    );
    if let Some(month) = spend.owner_month {
        line.push_str(&format!(
            " · {} in {}: {}{} tokens{}",
            spend.owner,
            spend.month,
            money(month.usd, spend.month_usd_cap).unwrap_or_default(),
            month.tokens,
            of_tokens(spend.month_tokens_cap)
        ));
    }
    if let Some(reached) = &spend.reached {
        line.push_str(&format!("\n  budget reached: {reached}"));
    }
    line
}

/// The exit code of a run refused because another run holds the conversation.
const BUSY: u8 = 3;
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
    actor: &str,
) -> RunSummary {
    let _printing = crate::out::run_guard();
    let mut run = match agent
        .start(id, input, ba_agent::RunOptions::default().with_actor(actor))
        .await
    {
        Ok(run) => run,
        Err(e) => {
            // Refused before anything ran: another run holds the conversation (named), or
            // the store failed.
            let summary = RunSummary::failed(id.as_str(), e.to_string());
            printer.event(&AgentEvent::Error {
                round: 0,
                kind: e.kind(),
                message: e.to_string(),
                resumable: false,
            });
            printer.event(&AgentEvent::Finished(summary.clone()));
            return summary;
        }
    };
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
    let rt = crate::exit::runtime()?;
    rt.block_on(async {
        let d = if args.workflow {
            demo::setup_workflow(&dir, args.budget).await
        } else {
            demo::setup(&dir, args.budget).await
        }
        .with_context(|| format!("setting the demo up in {}", dir.display()))?;
        let mut printer = Printer::new(args.json, false);
        if !args.json {
            outln!("BA-Agent demo: a recorded analysis session (no network, no API key) run");
            outln!("against the real tools, a file store and the sales-report skill.");
            outln!("Folder: {}", dir.display());
            outln!();
            if args.workflow {
                outln!("Workflow: {} (month=2024-09)", demo::WORKFLOW);
            } else {
                outln!("Question: {}", demo::QUESTION);
            }
            outln!();
        }
        let input = if args.workflow {
            Input::Workflow {
                name: demo::WORKFLOW.to_owned(),
                inputs: [("month".to_owned(), "2024-09".to_owned())].into(),
            }
        } else {
            Input::message(demo::QUESTION)
        };
        let summary = drive(
            &d.agent,
            &d.conversation,
            input,
            &mut printer,
            ba_storage::DEFAULT_OWNER,
        )
        .await;
        printer.final_report(&summary, rendered(&d.agent, &summary).await.as_deref());
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
    front_end: &str,
    config: &Config,
    ext: &ExtOpts,
    given: Option<&str>,
    mode: Option<Mode>,
    title: Option<String>,
    user: &UserArg,
) -> anyhow::Result<Session> {
    let home = config.home();
    let extensions = Extensions::gather(config, ext)?;
    // The store the configuration names: with `database_url`, the PostgreSQL one that `serve`
    // shares, so a run here and a run there hold the same lease.
    let store = config.shared_store().await?;
    let (id, played) = match given {
        Some(id) => {
            let id = ConversationId::new(id)?;
            user.check(store.as_ref(), &id)
                .await
                .with_context(|| format!("conversation {id} in {}", home.display()))?;
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
    let mut config = config.clone();
    config.learn_window(&*client).await;
    let config = &config;
    let mcp = start_mcp(config, &extensions).await?;
    let agent = config.agent(
        front_end,
        client,
        store,
        &extensions.skill_roots,
        mcp.as_ref(),
    )?;
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
                    owner: Some(user.name.clone()),
                    ..NewConversation::default()
                })
                .await?
        }
    };
    Ok(Session { agent, id, mcp })
}

pub(crate) fn run(args: RunArgs, ext: &ExtOpts) -> CliResult {
    let mut config = config_of(&args.opts)?;
    for root in args.roots.iter().rev() {
        if !root.is_dir() {
            return Err(CliError::input(anyhow!(
                "--root {}: not a readable folder",
                root.display()
            )));
        }
        config.workflows.insert(0, root.clone());
    }
    let mode = args.opts.mode.map(Mode::from);
    if !args.opts.upload.is_empty() && args.task.is_none() {
        return Err(CliError::input(anyhow!(
            "--upload attaches files to a message: give --task TEXT too"
        )));
    }
    let deciding = !args.approve.is_empty() || args.approve_all || !args.reject.is_empty();
    let (given, input) = match (&args.task, &args.resume, &args.continue_) {
        (None, None, None) if deciding => (
            args.conversation.clone(),
            decisions(&args.approve, &args.reject, args.reason.as_deref()),
        ),
        (None, None, None) if args.workflow.is_some() => (
            args.conversation.clone(),
            crate::workflows::run_input(
                &config,
                args.workflow.as_deref().unwrap_or_default(),
                &args.inputs,
            )?,
        ),
        (Some(task), None, None) => (args.conversation.clone(), Input::message(task.clone())),
        (None, Some(id), None) => (Some(id.clone()), Input::Resume),
        (None, None, Some(id)) => (Some(id.clone()), Input::Continue),
        _ => {
            return Err(CliError::input(anyhow!(
                "give one of --task TEXT, --workflow NAME, --resume ID, --continue ID or a \
             decision (--approve, --approve-all, --reject) with --conversation ID"
            )));
        }
    };
    let rt = crate::exit::runtime()?;
    rt.block_on(async {
        let title = args.task.as_ref().map(|t| t.chars().take(80).collect());
        let session = open_conversation(
            "ba-agent run",
            &config,
            ext,
            given.as_deref(),
            mode,
            title,
            &args.opts.user,
        )
        .await?;
        let (agent, id) = (&session.agent, &session.id);
        let streaming = agent.settings().response_mode == ba_agent::ResponseMode::Native;
        let mut printer = Printer::new(args.opts.json, streaming);
        if !args.opts.json {
            outln!("Conversation {id}");
        }
        if let Some(holder) = agent.run_holder(id).await? {
            // Refused before anything is attached or appended: exit 3.
            let busy = ba_agent::AgentError::Busy {
                conversation: id.to_string(),
                holder: Some(holder),
            };
            eprintln!("error: {busy}");
            session.close().await;
            return Ok(ExitCode::from(BUSY));
        }
        let input = match input {
            Input::Message { text, .. } => {
                let attached = attach(agent, id, &args.opts.upload, !args.opts.json).await?;
                Input::message_with(text, attached)
            }
            Input::Decide(mut answers) => {
                // Checked before anything runs: a call that does not wait is bad input.
                let pending = agent.pending_approvals(id).await?;
                if let Some(a) = answers
                    .iter()
                    .find(|a| !pending.iter().any(|p| p.call_id == a.call_id))
                {
                    let message = format!(
                        "call {:?} is not waiting for approval in conversation {id}{}",
                        a.call_id,
                        waiting_list(&pending)
                    );
                    session.close().await;
                    return Err(anyhow!(message));
                }
                if args.approve_all {
                    if pending.is_empty() {
                        let message = format!("no call waits for approval in conversation {id}");
                        session.close().await;
                        return Err(anyhow!(message));
                    }
                    for p in pending {
                        if !answers.iter().any(|a| a.call_id == p.call_id) {
                            answers.push(ba_agent::ApprovalAnswer::approve(p.call_id));
                        }
                    }
                }
                Input::Decide(answers)
            }
            other => other,
        };
        let before = output_ids(agent, id).await;
        let summary = drive(agent, id, input, &mut printer, &args.opts.user.name).await;
        printer.final_report(&summary, rendered(agent, &summary).await.as_deref());
        let outputs_dir = outputs_folder(&config, args.opts.outputs.as_deref(), id);
        save_outputs(agent, id, &before, &outputs_dir, !args.opts.json).await?;
        let report = agent.report(id).await?;
        let pending = if summary.status == RunStatus::AwaitingApproval {
            agent.pending_approvals(id).await?
        } else {
            Vec::new()
        };
        let conversation = id.clone();
        session.close().await;
        if args.opts.json {
            outln!("{}", serde_json::to_string(&report)?);
        } else {
            outln!();
            out!("{}", report.render(true));
        }
        if summary.status == RunStatus::AwaitingApproval {
            print_pending(&conversation, &pending, args.opts.json)?;
            return Ok(ExitCode::from(AWAITING_APPROVAL));
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
    let rt = crate::exit::runtime()?;
    let mut session = rt.block_on(open_conversation(
        "ba-agent chat",
        &config,
        ext,
        args.conversation.as_deref().or(args.fork.as_deref()),
        mode,
        // Named after its first question.
        None,
        &args.opts.user,
    ))?;
    if args.fork.is_some() {
        let parent = session.id.clone();
        let forked = rt.block_on(async {
            let at = match args.at {
                Some(at) => at,
                None => session.agent.store().metadata(&parent).await?.last_seq,
            };
            let child = session
                .agent
                .fork_as(&parent, at, Some(&args.opts.user.name))
                .await?;
            Ok::<_, anyhow::Error>((child, at))
        });
        let (child, at) = forked.map_err(CliError::input)?;
        outln!("Forked {parent} at entry {at}.");
        session.id = child;
    }
    let (agent, id) = (session.agent.clone(), session.id.clone());
    // Files given with --upload go with the first message.
    let mut attached = rt.block_on(attach(&agent, &id, &args.opts.upload, true))?;
    let outputs_dir = outputs_folder(&config, args.opts.outputs.as_deref(), &id);
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
            _ => Input::message_with(text, std::mem::take(&mut attached)),
        };
        let mut input = Some(input);
        while let Some(next) = input.take() {
            let summary = rt.block_on(async {
                let before = output_ids(&agent, &id).await;
                let summary = drive(&agent, &id, next, &mut printer, &args.opts.user.name).await;
                printer.final_report(&summary, rendered(&agent, &summary).await.as_deref());
                save_outputs(&agent, &id, &before, &outputs_dir, true).await?;
                Ok::<_, anyhow::Error>(summary)
            })?;
            if summary.status == RunStatus::AwaitingApproval {
                let pending = rt
                    .block_on(agent.pending_approvals(&id))
                    .map_err(anyhow::Error::from)?;
                input = ask_decisions(&pending, &mut lines)?.map(Input::Decide);
            }
        }
    }
    rt.block_on(session.close());
    Ok(ExitCode::SUCCESS)
}

/// Stores `paths` in the conversation's workspace as uploads, saying so unless `quiet`.
async fn attach(
    agent: &Agent,
    id: &ConversationId,
    paths: &[PathBuf],
    say: bool,
) -> anyhow::Result<Vec<FileMeta>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let files = agent
        .workspace()
        .ok_or_else(|| anyhow!("this store keeps no files, so --upload cannot attach any"))?;
    let mut attached = Vec::with_capacity(paths.len());
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| anyhow!("--upload {}: not a file name", path.display()))?;
        let mut body = tokio::fs::File::open(path)
            .await
            .with_context(|| format!("--upload {}", path.display()))?;
        let meta = files
            .put(id, NewFile::upload(name, ""), &mut body)
            .await
            .with_context(|| format!("--upload {}", path.display()))?;
        if say {
            outln!(
                "Attached {} as {} ({}, {} bytes)",
                path.display(),
                meta.id,
                meta.media_type,
                meta.size
            );
        }
        attached.push(meta);
    }
    Ok(attached)
}

/// `ba-agent cancel`: asks the run going on a conversation — in any process sharing the store
/// (`run`, `chat`, `serve`) — to stop, through the store. Exit 0 when a run was asked, 1 when
/// none goes on.
pub(crate) fn cancel(args: CancelArgs) -> CliResult {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(home) = args.home {
        config.home = Some(home);
    }
    let rt = crate::exit::runtime()?;
    rt.block_on(async {
        let store = config.shared_store().await.map_err(CliError::input)?;
        let id = ConversationId::new(&args.conv).map_err(CliError::input)?;
        store
            .metadata(&id)
            .await
            .with_context(|| format!("conversation {id} in {}", config.home().display()))
            .map_err(CliError::input)?;
        let holder = store.run_holder(&id).await.map_err(anyhow::Error::from)?;
        let outcome = ba_agent::Run::request_cancel(store.as_ref(), &id, args.run.as_deref())
            .await
            .map_err(anyhow::Error::from)?;
        match (outcome, holder) {
            (ba_agent::CancelOutcome::NotRunning, _) | (_, None) => {
                outln!("No run goes on in conversation {id}.");
                Ok(ExitCode::from(1))
            }
            (_, Some(holder)) => {
                outln!("Asked {holder} to cancel.");
                Ok(ExitCode::SUCCESS)
            }
        }
    })
}

pub(crate) fn inspect(args: InspectArgs) -> CliResult {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(home) = args.home {
        config.home = Some(home);
    }
    let home = config.home();
    let rt = crate::exit::runtime()?;
    rt.block_on(async {
        let store: std::sync::Arc<dyn ConversationStore> =
            std::sync::Arc::new(config.existing_store().map_err(CliError::input)?);
        let id = ConversationId::new(&args.conv).map_err(CliError::input)?;
        args.user
            .check(store.as_ref(), &id)
            .await
            .with_context(|| format!("conversation {id} in {}", home.display()))
            .map_err(CliError::input)?;
        let meta = store
            .metadata(&id)
            .await
            .with_context(|| format!("conversation {id} in {}", home.display()))
            .map_err(CliError::input)?;
        let loaded = store.load(&id).await.map_err(anyhow::Error::from)?;
        let prices = config.prices().map_err(CliError::input)?;
        let report =
            ba_agent::ConversationReport::from_stored(id.as_str(), &loaded.entries, &prices);
        let budgets = config.budgets().map_err(CliError::input)?;
        let spend = ba_agent::spend_report(&store, &id, budgets, &prices)
            .await
            .map_err(anyhow::Error::from)?;
        if args.json {
            let mut json = serde_json::to_value(&report).map_err(anyhow::Error::from)?;
            if let Some(object) = json.as_object_mut() {
                object.insert("owner".into(), meta.owner.clone().into());
                object.insert(
                    "spend".into(),
                    serde_json::to_value(&spend).map_err(anyhow::Error::from)?,
                );
            }
            outln!(
                "{}",
                serde_json::to_string_pretty(&json).map_err(anyhow::Error::from)?
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
            outln!("{}", spend_line(&spend));
        }
        Ok(ExitCode::SUCCESS)
    })
}
