//! Reading conversations in any supported format from a file or stdin.

use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use ba_protocol::LogEntry;
use ba_protocol::anthropic::AnthropicRequest;
use ba_protocol::convert::{
    Converted, Loss, SequentialStamp, anthropic_to_log, message_to_log, openai_to_log,
    response_to_log, responses_to_log,
};
use ba_protocol::openai::ChatRequest;
use ba_protocol::responses::{ResponsesRequest, ResponsesResponse};
use ba_protocol::stream::{
    anthropic as anthropic_stream, openai as openai_stream, responses as responses_stream,
};

/// Input formats `convert` (and every command that reads a conversation) accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InputFormat {
    /// Anthropic Messages request body (`{"system":…, "messages":[…]}`).
    Anthropic,
    /// OpenAI Chat Completions request body (`{"messages":[…]}`).
    Openai,
    /// The log as JSONL, one entry a line.
    Log,
    /// A raw Anthropic SSE stream.
    AnthropicSse,
    /// A raw OpenAI SSE stream.
    OpenaiSse,
    /// An OpenAI Responses API request body (`{"instructions":…, "input":[…]}`) or response
    /// (`{"object":"response", "output":[…]}`).
    Responses,
    /// A raw Responses API SSE stream (`response.created`, …, `response.completed`).
    ResponsesSse,
    /// A Claude Code session transcript (JSONL).
    ClaudeCode,
    /// Decide from the content.
    Auto,
}

/// Reads `path` (`-` for stdin) as UTF-8 text, a line at a time: a line longer than
/// [`ba_storage::MAX_LINE_BYTES`] (32 MiB, what a request body may hold) is refused, naming
/// it, as soon as it is past the bound — never read whole.
pub(crate) fn read_text(path: &str) -> anyhow::Result<String> {
    let max_line = ba_storage::MAX_LINE_BYTES;
    if path == "-" {
        return Ok(ba_storage::read_lines(
            std::io::stdin().lock(),
            "stdin",
            max_line,
        )?);
    }
    let file = std::fs::File::open(Path::new(path)).with_context(|| format!("reading {path}"))?;
    Ok(ba_storage::read_lines(file, path, max_line)?)
}

/// Decides the format of `text`.
pub(crate) fn detect(text: &str) -> anyhow::Result<InputFormat> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        bail!("the input is empty");
    }
    if trimmed.starts_with("event:") || trimmed.starts_with("data:") || trimmed.starts_with(':') {
        return Ok(if text.contains("message_start") {
            InputFormat::AnthropicSse
        } else if text.contains("\"response.") {
            InputFormat::ResponsesSse
        } else {
            InputFormat::OpenaiSse
        });
    }
    // One JSON document: a request body, or a log of one line.
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        if is_log_line(&value) {
            return Ok(InputFormat::Log);
        }
        if value.get("messages").is_none()
            && (value.get("input").is_some() || value.get("output").is_some_and(|o| o.is_array()))
        {
            return Ok(InputFormat::Responses);
        }
        let Some(messages) = value.get("messages").and_then(|m| m.as_array()) else {
            bail!(
                "a JSON object with a `messages` array (or, for the Responses API, an `input` or \
                 `output`) was expected"
            );
        };
        if value.get("system").is_some() {
            return Ok(InputFormat::Anthropic);
        }
        let openai_only = messages.iter().any(|m| {
            matches!(
                m.get("role").and_then(|r| r.as_str()),
                Some("tool" | "system" | "developer")
            ) || m.get("tool_calls").is_some()
                || m.get("content").is_some_and(serde_json::Value::is_null)
        });
        return Ok(if openai_only {
            InputFormat::Openai
        } else {
            InputFormat::Anthropic
        });
    }
    let first_line = trimmed.lines().next().unwrap_or("");
    if serde_json::from_str::<serde_json::Value>(first_line).is_err() {
        // Not JSONL either: a request body cut short or broken; its parser names the spot.
        return Ok(InputFormat::Anthropic);
    }
    if ba_protocol::claude_code::looks_like_session(text) {
        return Ok(InputFormat::ClaudeCode);
    }
    Ok(InputFormat::Log)
}

/// A line of the log: an entry (`role` and `id`, no `messages`), or a record of a store's
/// conversation file (`{"seq":N,"at":MS,"entry":{…}}`).
fn is_log_line(value: &serde_json::Value) -> bool {
    let entry = |v: &serde_json::Value| {
        v.get("messages").is_none() && v.get("role").is_some() && v.get("id").is_some()
    };
    entry(value) || (value.get("seq").is_some() && value.get("entry").is_some_and(entry))
}

/// Log JSONL: entries one a line, or the records of a store's conversation file (the
/// `entry` of each `{"seq":…,"at":…,"entry":{…}}` line).
fn parse_log_jsonl(text: &str) -> anyhow::Result<Vec<LogEntry>> {
    let records = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .is_some_and(|v| v.get("seq").is_some() && v.get("entry").is_some());
    if !records {
        return Ok(LogEntry::parse_jsonl(text)?);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        #[derive(serde::Deserialize)]
        struct Record {
            entry: LogEntry,
        }
        let record: Record = serde_json::from_str(line)
            .map_err(|e| anyhow!("log line {}: not a stored record: {e}", i + 1))?;
        out.push(record.entry);
    }
    Ok(out)
}

/// A conversation read from input: the log entries, what the reading left out, and the
/// format it was read as.
pub(crate) struct Loaded {
    pub(crate) entries: Vec<LogEntry>,
    pub(crate) losses: Vec<Loss>,
    pub(crate) format: InputFormat,
}

/// Reads `text` in `format` into log entries.
pub(crate) fn load(text: &str, format: InputFormat) -> anyhow::Result<Loaded> {
    let format = if format == InputFormat::Auto {
        detect(text)?
    } else {
        format
    };
    let mut stamp = SequentialStamp::default();
    let Converted {
        value: entries,
        losses,
    } = match format {
        InputFormat::Anthropic => {
            anthropic_to_log(&AnthropicRequest::from_json(text)?, &mut stamp)?
        }
        InputFormat::Openai => {
            let request = ChatRequest::from_json(text)?;
            if request.extra.contains_key("system") {
                // An OpenAI body carries its system text as a message; this one would be lost.
                bail!(
                    "a top-level `system` field is Anthropic's, not OpenAI's: read it with \
                     --from anthropic (or put the system text in a `system` message)"
                );
            }
            openai_to_log(&request, &mut stamp)
        }
        InputFormat::Log => Converted {
            value: parse_log_jsonl(text)?,
            losses: Vec::new(),
        },
        InputFormat::ClaudeCode => ba_protocol::claude_code::session_to_log(text),
        InputFormat::AnthropicSse => {
            let acc = anthropic_stream::accumulate_sse(text)?;
            let mut losses: Vec<Loss> = acc
                .problems
                .into_iter()
                .map(|what| Loss {
                    path: "stream".into(),
                    what,
                })
                .collect();
            if acc.message.stop_reason.as_deref() == Some("refusal") {
                // No request body nor the log has a place for why an answer stopped.
                losses.push(Loss {
                    path: "stream.stop_reason".into(),
                    what: "`refusal`: the model declined to go on; the output cannot say so".into(),
                });
            }
            Converted {
                value: message_to_log(&acc.message.to_request_message(), &mut stamp)?,
                losses,
            }
        }
        InputFormat::OpenaiSse => {
            let acc = openai_stream::accumulate_sse(text)?;
            let messages = acc
                .message
                .choices
                .into_iter()
                .take(1)
                .map(|c| c.message)
                .collect();
            let req = ChatRequest {
                messages,
                extra: Default::default(),
            };
            let mut converted = openai_to_log(&req, &mut stamp);
            converted
                .losses
                .extend(acc.problems.into_iter().map(|what| Loss {
                    path: "stream".into(),
                    what,
                }));
            converted
        }
        InputFormat::Responses => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| ba_protocol::ProtocolError::json("Responses body", &e))?;
            if value.get("input").is_none() && value.get("output").is_some() {
                response_to_log(&ResponsesResponse::from_json(text)?, &mut stamp)?
            } else {
                responses_to_log(&ResponsesRequest::from_json(text)?, &mut stamp)?
            }
        }
        InputFormat::ResponsesSse => {
            let acc = responses_stream::accumulate_sse(text)?;
            let mut converted = response_to_log(&acc.message, &mut stamp)?;
            converted
                .losses
                .extend(acc.problems.into_iter().map(|what| Loss {
                    path: "stream".into(),
                    what,
                }));
            converted
        }
        InputFormat::Auto => unreachable_auto()?,
    };
    ba_protocol::validate_log(&entries)?;
    Ok(Loaded {
        entries,
        losses,
        format,
    })
}

fn unreachable_auto() -> anyhow::Result<Converted<Vec<LogEntry>>> {
    bail!("the input format could not be decided")
}
