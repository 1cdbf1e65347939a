//! `ba-agent context build`: a conversation compressed to a budget, as a request would carry it.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use ba_context::builder::{BuildRequest, BuilderSettings, ContextBuilder, PromptParts};
use ba_context::{ContextBudget, ExtractiveSummarizer, MessageCounter, Pipeline, block_on};
use ba_protocol::convert::{log_to_anthropic, log_to_openai};
use ba_protocol::{LogEntry, LogRole, Mode};
use serde_json::Value;

use crate::cli::{CliError, CliResult};
use crate::input::{self, InputFormat};
use crate::out::outln;

/// Subcommands of `context`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Compress a conversation to a token budget and print the request window as JSON.
    Build(BuildArgs),
}

/// Strategies `context build` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Strategy {
    Truncate,
    KeyMessages,
    Importance,
    Summary,
    Hybrid,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Self::Truncate => "truncate",
            Self::KeyMessages => "key-messages",
            Self::Importance => "importance",
            Self::Summary => "summary",
            Self::Hybrid => "hybrid",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModeArg {
    Chat,
    Agent,
    Run,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Wire {
    Anthropic,
    Openai,
}

/// Arguments of `context build`.
#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// The model's context window, in tokens.
    #[arg(long)]
    budget: usize,
    /// Tokens kept free for the response.
    #[arg(long, default_value_t = 0)]
    reserve: usize,
    /// Compression strategy.
    #[arg(long, value_enum, default_value = "key-messages")]
    strategy: Strategy,
    /// Compose the system prompt for this mode (the input's system text as the base rules).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Count with this model's encoding.
    #[arg(long, conflicts_with = "encoding")]
    model: Option<String>,
    /// Count with this encoding (default cl100k_base).
    #[arg(long)]
    encoding: Option<String>,
    /// Wire format of `messages` (default: the input's; Anthropic for log and Claude Code).
    #[arg(long, value_enum)]
    to: Option<Wire>,
    /// Conversation file (Anthropic/OpenAI request JSON, log JSONL, Claude Code session), or `-`.
    file: String,
}

pub(crate) fn run(command: Command) -> CliResult {
    match command {
        Command::Build(args) => build(args),
    }
}

/// The printed result; fields in the documented order.
#[derive(serde::Serialize)]
struct Output {
    system: Value,
    messages: Value,
    usage: Usage,
    kept: Vec<String>,
    dropped: Vec<Dropped>,
    strategy: &'static str,
}

#[derive(serde::Serialize)]
struct Usage {
    used: usize,
    budget: usize,
    percent: f64,
}

#[derive(serde::Serialize)]
struct Dropped {
    id: String,
    reason: &'static str,
}

fn build(args: BuildArgs) -> CliResult {
    let tok = crate::tokens::tokenizer(args.encoding.as_deref(), args.model.as_deref())?;
    let name = if args.file == "-" {
        "stdin"
    } else {
        &args.file
    };
    let text = input::read_text(&args.file)?;
    let loaded =
        input::load(&text, InputFormat::Auto).with_context(|| format!("reading {name}"))?;
    let wire = args.to.unwrap_or(match loaded.format {
        InputFormat::Openai | InputFormat::OpenaiSse => Wire::Openai,
        _ => Wire::Anthropic,
    });
    // Leading system entries are the request's system prompt, not history.
    let lead = loaded
        .entries
        .iter()
        .take_while(|e| matches!(e.role, LogRole::System | LogRole::Developer))
        .count();
    let input_system: Vec<String> = loaded.entries[..lead]
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    let entries = &loaded.entries[lead..];
    let mode = args.mode.map(|m| match m {
        ModeArg::Chat => Mode::Chat,
        ModeArg::Agent => Mode::Agent,
        ModeArg::Run => Mode::Run,
    });
    let counter = MessageCounter::new(tok);
    let budget = ContextBudget::new(args.budget, args.reserve);
    let pipeline = Pipeline::named(args.strategy.name(), Some(Arc::new(ExtractiveSummarizer)))
        .map_err(CliError::input)?;
    let system = match mode {
        None => input_system.join("\n\n"),
        Some(mode) => {
            let prompts = PromptParts {
                base_rules: input_system.join("\n\n"),
                ..PromptParts::default()
            };
            let builder = ContextBuilder::new(
                prompts,
                BuilderSettings::default(),
                budget,
                Pipeline::default(),
                MessageCounter::new(tok),
            );
            builder.system_prompt(&BuildRequest {
                entries,
                mode,
                ..BuildRequest::default()
            })
        }
    };
    let out = block_on(pipeline.run(entries, &system, &budget, &counter))
        .with_context(|| format!("{name}: cannot build a context of {} tokens", args.budget))?;
    let window = out.window.entries();
    let (system_json, messages) = match wire {
        Wire::Anthropic => {
            let mut all: Vec<LogEntry> = Vec::with_capacity(window.len() + 1);
            if !system.is_empty() {
                all.push(LogEntry::new("system", LogRole::System, "").with_text(system.clone()));
            }
            all.extend(window);
            let v = log_to_anthropic(&all).value.conversation_json();
            (
                v.get("system").cloned().unwrap_or(Value::Null),
                v.get("messages")
                    .cloned()
                    .unwrap_or(Value::Array(Vec::new())),
            )
        }
        Wire::Openai => {
            let v = log_to_openai(&window).value.conversation_json();
            let system = if system.is_empty() {
                Value::Null
            } else {
                Value::String(system)
            };
            (
                system,
                v.get("messages")
                    .cloned()
                    .unwrap_or(Value::Array(Vec::new())),
            )
        }
    };
    let result = Output {
        system: system_json,
        messages,
        usage: Usage {
            used: out.used,
            budget: args.budget,
            percent: (out.usage.percent * 100.0).round() / 100.0,
        },
        kept: out.window.kept_ids(),
        dropped: out
            .window
            .dropped
            .iter()
            .map(|d| Dropped {
                id: d.id.clone(),
                reason: d.reason.as_str(),
            })
            .collect(),
        strategy: args.strategy.name(),
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&result).context("writing JSON")?
    );
    Ok(ExitCode::SUCCESS)
}
