//! The command line of `ba-agent`: the subcommands (each in its own module) and the dispatch.
//!
//! Contract: results go to stdout, errors to stderr as one `error: …` line naming the file,
//! line or field, with exit code 1 for a failed check and 2 for bad input or usage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{agent, context, convert, log, serve, skills, tokens};

/// BA-Agent: a business-analysis agent pipeline.
#[derive(Debug, Parser)]
#[command(name = "ba-agent", version, about)]
struct Cli {
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
    /// Serve the HTTP API (conversations, runs, event streams, uploads) on loopback.
    Serve(serve::ServeArgs),
    /// Convert a conversation between Anthropic, OpenAI and log formats.
    Convert(convert::Args),
    /// List, show and validate Agent Skills.
    Skills(skills::Args),
    /// Import, export, list, show and verify stored conversations.
    #[command(subcommand)]
    Log(log::Command),
    /// Count the tokens of a text or a conversation.
    Tokens(tokens::Args),
    /// Build a request context within a token budget.
    #[command(subcommand)]
    Context(context::Command),
}

/// An error that carries its exit code.
#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl CliError {
    /// Bad input or usage: exit 2.
    pub(crate) fn input(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        Self::input(error)
    }
}

pub(crate) type CliResult = Result<ExitCode, CliError>;

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => agent::demo(args),
        Command::Run(args) => agent::run(args),
        Command::Chat(args) => agent::chat(args),
        Command::Inspect(args) => agent::inspect(args),
        Command::Serve(args) => serve::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Skills(args) => skills::run(args),
        Command::Log(cmd) => log::run(cmd),
        Command::Tokens(args) => tokens::run(args),
        Command::Context(command) => context::run(command),
    };
    if crate::out::is_closed() {
        // The reader went away mid-command (an agent run then stopped between rounds).
        return ExitCode::SUCCESS;
    }
    match result {
        Ok(code) => code,
        // The reader of the results went away (`… | head`): not an error.
        Err(err) if crate::out::is_broken_pipe(&err.error) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {:#}", err.error);
            ExitCode::from(err.code)
        }
    }
}
