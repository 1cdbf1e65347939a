//! `ba-agent convert`: conversations between Anthropic, OpenAI (Chat Completions and
//! Responses) and log formats.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use ba_protocol::LogEntry;
use ba_protocol::convert::{log_to_anthropic, log_to_openai, log_to_responses};

use crate::exit::CliResult;
use crate::input::{self, InputFormat};

/// Output formats of `convert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// `{"system":…, "messages":[…]}` (no `system` key when there is none).
    Anthropic,
    /// `{"messages":[…]}`.
    Openai,
    /// JSONL, one log entry a line.
    Log,
    /// `{"instructions":…, "input":[…]}` (OpenAI Responses API).
    Responses,
}

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    from: InputFormat,
    /// Output format.
    #[arg(long, value_enum)]
    to: OutputFormat,
    /// Do not print what the input or the target format lost (`lost: …` lines on stderr,
    /// printed by default: skipped lines, a cut stream, fields the target cannot express).
    #[arg(long)]
    quiet_losses: bool,
    /// The default now; kept so older scripts still run.
    #[arg(long, hide = true)]
    report_losses: bool,
    /// Input file, or `-` for stdin.
    #[arg(default_value = "-")]
    file: String,
}

pub(crate) fn run(args: Args) -> CliResult {
    let text = input::read_text(&args.file)?;
    let loaded = input::load(&text, args.from)
        .with_context(|| format!("reading {}", display(&args.file)))?;
    let (out, mut losses) = render(&loaded.entries, args.to)?;
    losses.splice(0..0, loaded.losses);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes()).context("writing stdout")?;
    if args.report_losses || !args.quiet_losses {
        for loss in losses {
            eprintln!(
                "lost: {}: {}",
                crate::out::shown(&loss.path),
                crate::out::shown(&loss.what)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Renders log entries in `format`; JSON outputs end with a newline.
pub(crate) fn render(
    entries: &[LogEntry],
    format: OutputFormat,
) -> anyhow::Result<(String, Vec<ba_protocol::convert::Loss>)> {
    Ok(match format {
        OutputFormat::Log => (LogEntry::to_jsonl(entries), Vec::new()),
        OutputFormat::Anthropic => {
            let converted = log_to_anthropic(entries);
            let mut text = serde_json::to_string_pretty(&converted.value.conversation())?;
            text.push('\n');
            (text, converted.losses)
        }
        OutputFormat::Openai => {
            let converted = log_to_openai(entries);
            let mut text = serde_json::to_string_pretty(&converted.value.conversation())?;
            text.push('\n');
            (text, converted.losses)
        }
        OutputFormat::Responses => {
            let converted = log_to_responses(entries);
            let mut text = serde_json::to_string_pretty(&converted.value.conversation_json())?;
            text.push('\n');
            (text, converted.losses)
        }
    })
}

fn display(file: &str) -> &str {
    if file == "-" { "stdin" } else { file }
}
