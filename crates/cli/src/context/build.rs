//! `ba-agent context build`: a conversation compressed to a budget, as a request would carry it.

use std::process::ExitCode;

use anyhow::Context as _;
use ba_context::BuildRequest;
use ba_context::ContextBudget;
use ba_protocol::convert::{log_to_anthropic, log_to_openai};
use ba_protocol::{LogEntry, LogRole, Mode};
use serde_json::Value;

use super::{EmbeddingsArgs, Runner, Strategy, Wire, builder, read_conversation};
use crate::exit::CliResult;
use crate::input::InputFormat;
use crate::out::outln;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ModeArg {
    Chat,
    Agent,
    Run,
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
    #[command(flatten)]
    embeddings: EmbeddingsArgs,
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

/// The printed result; fields in the documented order.
#[derive(serde::Serialize)]
struct Output {
    system: Value,
    messages: Value,
    usage: Usage,
    kept: Vec<String>,
    dropped: Vec<Dropped>,
    strategy: &'static str,
    changed: Vec<Changed>,
    compaction: Compaction,
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

#[derive(serde::Serialize)]
struct Changed {
    id: String,
    kind: ba_protocol::ChangeKind,
}

/// What the build did about compaction: the record it started from (the log's last), and
/// whether the window was compacted now.
#[derive(serde::Serialize)]
struct Compaction {
    from_record: Option<String>,
    compacted: bool,
    problem: Option<String>,
}

pub(super) fn run(args: BuildArgs) -> CliResult {
    let tok = crate::tokens::tokenizer(args.encoding.as_deref(), args.model.as_deref())?;
    let name = if args.file == "-" {
        "stdin"
    } else {
        &args.file
    };
    let conv = read_conversation(&args.file)?;
    let wire = args.to.unwrap_or(match conv.format {
        InputFormat::Openai | InputFormat::OpenaiSse => Wire::Openai,
        InputFormat::Responses | InputFormat::ResponsesSse => Wire::Responses,
        _ => Wire::Anthropic,
    });
    let budget = ContextBudget::new(args.budget, args.reserve);
    let runner = Runner::new(args.strategy, &args.embeddings)?;
    let builder = builder(&conv.system, budget, args.strategy, tok, runner.embedder())?;
    let mut request = BuildRequest {
        entries: &conv.entries,
        ..BuildRequest::default()
    };
    let system = match args.mode {
        None => conv.system.clone(),
        Some(mode) => {
            request.mode = match mode {
                ModeArg::Chat => Mode::Chat,
                ModeArg::Agent => Mode::Agent,
                ModeArg::Run => Mode::Run,
            };
            builder.system_prompt(&request)
        }
    };
    let built = runner
        .block_on(builder.build_with_system(&request, system.clone()))
        .with_context(|| format!("{name}: cannot build a context of {} tokens", args.budget))?;
    runner.warn();
    let window = built.entries;
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
        Wire::Responses => {
            let v = ba_protocol::convert::log_to_responses(&window)
                .value
                .conversation_json();
            let system = if system.is_empty() {
                Value::Null
            } else {
                Value::String(system)
            };
            (
                system,
                v.get("input").cloned().unwrap_or(Value::Array(Vec::new())),
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
    let debug = built.debug;
    let result = Output {
        system: system_json,
        messages,
        usage: Usage {
            used: debug.usage.used,
            budget: args.budget,
            percent: (debug.usage.percent * 100.0).round() / 100.0,
        },
        kept: debug.kept,
        dropped: debug
            .dropped
            .iter()
            .map(|d| Dropped {
                id: d.id.clone(),
                reason: d.reason.as_str(),
            })
            .collect(),
        strategy: args.strategy.name(),
        changed: debug
            .changed
            .iter()
            .map(|c| Changed {
                id: c.id.clone(),
                kind: c.kind,
            })
            .collect(),
        compaction: Compaction {
            from_record: debug.compaction_base,
            compacted: built.compaction.is_some(),
            problem: debug.compaction_problem,
        },
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&result).context("writing JSON")?
    );
    Ok(ExitCode::SUCCESS)
}
