//! `ba-agent context`: a conversation built into a request window within a token budget
//! (`build`), and a recorded conversation played request by request as the agent would have
//! sent it, with its compactions and the share of each request a prompt cache could serve
//! (`replay`). Both build windows with the context crate's `ContextBuilder`, as the agent does,
//! so the same log gives the same window.

mod build;
mod replay;

use std::sync::Arc;

use anyhow::Context as _;
use ba_context::{BuilderSettings, ContextBuilder, PromptParts};
use ba_context::{ContextBudget, ExtractiveSummarizer, MessageCounter, ModelTokenizer, Pipeline};
use ba_protocol::{LogEntry, LogRole};

use crate::exit::{CliError, CliResult};
use crate::input::{self, InputFormat};

/// Subcommands of `context`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Compress a conversation to a token budget and print the request window as JSON.
    Build(build::BuildArgs),
    /// Play a recorded conversation request by request as the agent would have sent it: input
    /// tokens, compactions and the leading tokens each request repeats from the previous one.
    Replay(replay::ReplayArgs),
}

pub(crate) fn run(command: Command) -> CliResult {
    match command {
        Command::Build(args) => build::run(args),
        Command::Replay(args) => replay::run(args),
    }
}

/// Strategies the commands offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Strategy {
    Truncate,
    KeyMessages,
    Importance,
    Summary,
    Hybrid,
    /// Key-messages, and what left the window most related to the latest user message
    /// recalled by BM25.
    Retrieval,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Self::Truncate => "truncate",
            Self::KeyMessages => "key-messages",
            Self::Importance => "importance",
            Self::Summary => "summary",
            Self::Hybrid => "hybrid",
            Self::Retrieval => "retrieval",
        }
    }
}

/// Wire formats of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Wire {
    Anthropic,
    Openai,
    /// OpenAI's Responses API: the system text as `instructions`, the window as `input` items.
    Responses,
}

/// A conversation read for the context commands.
struct Conversation {
    /// The input's system text (its leading system entries), joined.
    system: String,
    /// The rest.
    entries: Vec<LogEntry>,
    /// The format it was read as.
    format: InputFormat,
}

/// Reads `file` (any format the CLI reads); leading system entries are the request's system
/// prompt, not history.
fn read_conversation(file: &str) -> anyhow::Result<Conversation> {
    let name = if file == "-" { "stdin" } else { file };
    let text = input::read_text(file)?;
    let loaded =
        input::load(&text, InputFormat::Auto).with_context(|| format!("reading {name}"))?;
    let lead = loaded
        .entries
        .iter()
        .take_while(|e| matches!(e.role, LogRole::System | LogRole::Developer))
        .count();
    let system: Vec<String> = loaded.entries[..lead]
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    Ok(Conversation {
        system: system.join("\n\n"),
        entries: loaded.entries[lead..].to_vec(),
        format: loaded.format,
    })
}

/// The builder the commands use: the input's system text as base rules, the default settings,
/// the strategy's pipeline with the offline summarizer.
fn builder(
    system: &str,
    budget: ContextBudget,
    strategy: Strategy,
    tokenizer: ModelTokenizer,
) -> Result<ContextBuilder, CliError> {
    let pipeline = Pipeline::named(strategy.name(), Some(Arc::new(ExtractiveSummarizer)))
        .map_err(CliError::input)?;
    Ok(ContextBuilder::new(
        PromptParts {
            base_rules: system.to_owned(),
            ..PromptParts::default()
        },
        BuilderSettings::default(),
        budget,
        pipeline,
        MessageCounter::new(tokenizer),
    ))
}
