//! The command line of `ba-agent`: the subcommands (each in its own module) and the dispatch.
//!
//! Contract: results go to stdout, errors to stderr as one `error: …` line naming the file,
//! line or field, with exit code 1 for a failed check and 2 for bad input or usage.

use std::process::ExitCode;

use ba_builtins::run_python::sandbox;
use clap::{Parser, Subcommand};

use crate::exit::{CliError, message};
use crate::mcp::ExtOpts;
use crate::{
    agent, context, convert, log, mcp, memory, report, schedules, serve, skills, telemetry, tokens,
    tools, users, workflows,
};

/// BA-Agent: a business-analysis agent pipeline.
#[derive(Debug, Parser)]
#[command(name = "ba-agent", version, about)]
struct Cli {
    #[command(flatten)]
    ext: ExtOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the offline demo: a recorded sales analysis against the real tools.
    Demo(agent::DemoArgs),
    /// Run one task (or resume or continue a conversation) and print the final report.
    Run(agent::RunArgs),
    /// Chat interactively with streaming output.
    Chat(agent::ChatArgs),
    /// Print the metrics report of a stored conversation.
    Inspect(agent::InspectArgs),
    /// Export a final answer of a stored conversation as self-contained HTML or Markdown, its
    /// files beside it or in one zip.
    Report(report::Args),
    /// Cancel the run going on a conversation, in any process sharing the store.
    Cancel(agent::CancelArgs),
    /// Serve the HTTP API (conversations, runs, event streams, uploads) on loopback.
    Serve(serve::ServeArgs),
    /// Convert a conversation between Anthropic, OpenAI and log formats.
    Convert(convert::Args),
    /// List, show and validate Agent Skills.
    Skills(skills::Args),
    /// List, show and validate workflow definitions (`WORKFLOW.md`).
    Workflows(workflows::Args),
    /// List MCP servers and their tools, or call one tool (for a server that misbehaves).
    Mcp(mcp::Args),
    /// Import, export, list, show and verify stored conversations.
    #[command(subcommand)]
    Log(log::Command),
    /// Count the tokens of a text or a conversation.
    Tokens(tokens::Args),
    /// Build a request context within a token budget.
    #[command(subcommand)]
    Context(context::Command),
    /// List the configured tools, or call one and print the observation the model would see.
    #[command(subcommand)]
    Tools(tools::Command),
    /// Add and list the people of a shared server, their tokens and monthly budgets.
    #[command(subcommand)]
    Users(users::Command),
    /// List, show, edit, remove and restore a person's memory files (kept across
    /// conversations, every change a version).
    #[command(subcommand)]
    Memory(memory::Command),
    /// Scheduled workflows: list, add, pause, resume, run now, remove (`serve` runs them).
    #[command(subcommand)]
    Schedules(schedules::Command),
}

impl Command {
    /// The configuration file the command names (`--config`), else none.
    fn config_file(&self) -> Option<&std::path::Path> {
        match self {
            Self::Run(args) => args.config_file(),
            Self::Chat(args) => args.config_file(),
            Self::Serve(args) => args.config_file(),
            Self::Tools(tools::Command::Call { config, .. }) => config.as_deref(),
            _ => None,
        }
    }

    /// The telemetry export of the commands that run the agent or a tool (see
    /// [`crate::telemetry`]); nothing for the others, or when no endpoint is configured.
    fn telemetry(&self) -> Result<telemetry::Guard, telemetry::TelemetryError> {
        match self {
            Self::Demo(_)
            | Self::Run(_)
            | Self::Chat(_)
            | Self::Serve(_)
            | Self::Tools(tools::Command::Call { .. }) => {
                telemetry::Guard::start(self.config_file())
            }
            _ => Ok(telemetry::Guard::none()),
        }
    }
}

pub(crate) fn main() -> ExitCode {
    // `ba-agent sandbox-exec …` is run_python's sandbox helper (a private protocol with
    // ba_builtins::run_python::sandbox): it confines itself and execs the interpreter. It is
    // dispatched before the parser, so it stays out of the help and starts nothing else.
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() == Some(std::ffi::OsStr::new(sandbox::HELPER_SUBCOMMAND)) {
        return sandbox::exec_main(args);
    }
    let cli = Cli::parse();
    let telemetry = match cli.command.telemetry() {
        Ok(t) => t,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let ext = cli.ext;
    let result = match cli.command {
        Command::Run(args) => agent::run(args, &ext),
        Command::Chat(args) => agent::chat(args, &ext),
        Command::Skills(args) => skills::run(args, &ext),
        Command::Workflows(args) => workflows::run(args, &ext),
        Command::Mcp(args) => mcp::run(args, &ext),
        _ if !ext.is_empty() => Err(CliError::input(anyhow::anyhow!(
            "--mcp-config and --plugin apply to run, chat, mcp, skills and workflows only"
        ))),
        Command::Demo(args) => agent::demo(args),
        Command::Inspect(args) => agent::inspect(args),
        Command::Cancel(args) => agent::cancel(args),
        Command::Report(args) => report::run(args),
        Command::Serve(args) => serve::run(args, &ext),
        Command::Convert(args) => convert::run(args),
        Command::Log(cmd) => log::run(cmd),
        Command::Tokens(args) => tokens::run(args),
        Command::Context(command) => context::run(command),
        Command::Tools(command) => tools::run(command),
        Command::Users(command) => users::run(command),
        Command::Memory(command) => memory::run(command),
        Command::Schedules(command) => schedules::run(command, &ext),
    };
    telemetry.shutdown();
    if crate::out::is_closed() {
        // The reader went away mid-command (an agent run then stopped between rounds).
        return ExitCode::SUCCESS;
    }
    match result {
        Ok(code) => code,
        // The reader of the results went away (`… | head`): not an error.
        Err(err) if crate::out::is_broken_pipe(&err.error) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", message(&err.error));
            ExitCode::from(err.code)
        }
    }
}
