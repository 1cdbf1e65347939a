//! Conversations in any wire format: read into log entries, counted, windowed at a budget and
//! written out in another format. Python hands each conversation over as JSON text: a request
//! body (`{"system":…, "messages":[…]}`, `{"messages":[…]}`, `{"instructions":…,
//! "input":[…]}`), a bare list of messages or items, or the log (a list of entries, or JSONL).

use std::sync::Arc;

use ba_context::{
    BuildRequest, BuilderSettings, ContextBudget, ContextBuilder, Encoding, ExtractiveSummarizer,
    MessageCounter, ModelTokenizer, Pipeline, PromptParts,
};
use ba_protocol::TokenCounter as _;
use ba_protocol::anthropic::AnthropicRequest;
use ba_protocol::convert::{
    Converted, Loss, SequentialStamp, anthropic_to_log, log_to_anthropic, log_to_openai,
    log_to_responses, openai_to_log, responses_to_log,
};
use ba_protocol::openai::ChatRequest;
use ba_protocol::responses::ResponsesRequest;
use ba_protocol::{LogEntry, LogRole};
use pyo3::prelude::*;
use serde_json::{Value, json};

use crate::error::{Error, to_json};

/// The formats a conversation is read from and written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions.
    Chat,
    /// The OpenAI Responses API.
    Responses,
    /// The log's entries.
    Log,
}

impl Format {
    const NAMES: &'static str = "anthropic, chat, responses or log";

    /// The format named `name` (`openai` is Chat Completions); `auto` is `None`.
    pub(crate) fn parse(name: &str) -> Result<Option<Self>, Error> {
        Ok(Some(match name {
            "anthropic" => Self::Anthropic,
            "chat" | "openai" => Self::Chat,
            "responses" => Self::Responses,
            "log" => Self::Log,
            "auto" => return Ok(None),
            other => {
                return Err(Error::Argument(format!(
                    "unknown conversation format `{other}`: expected {} (or auto)",
                    Self::NAMES
                )));
            }
        }))
    }

    /// The format named `name`, where `auto` is not allowed (an output format).
    pub(crate) fn parse_output(name: &str) -> Result<Self, Error> {
        Self::parse(name)?.ok_or_else(|| {
            Error::Argument(format!(
                "the output format must be one of {}, not auto",
                Self::NAMES
            ))
        })
    }
}

/// A conversation read from Python: its log entries, what reading it lost, and its format.
#[derive(Debug)]
pub(crate) struct Read {
    pub(crate) entries: Vec<LogEntry>,
    pub(crate) losses: Vec<Loss>,
    pub(crate) format: Format,
}

/// Reads `text` in `format` (decided from the content when `None`).
pub(crate) fn read(text: &str, format: Option<Format>) -> Result<Read, Error> {
    let value = parse(text)?;
    let format = match format {
        Some(f) => f,
        None => detect(&value)?,
    };
    let mut stamp = SequentialStamp::default();
    let Converted {
        value: entries,
        losses,
    } = match (format, value) {
        (Format::Log, Value::Array(items)) => Converted {
            value: items
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    serde_json::from_value::<LogEntry>(v)
                        .map_err(|e| Error::json(format!("log entry {i}"), e))
                })
                .collect::<Result<_, _>>()?,
            losses: Vec::new(),
        },
        (Format::Log, _) => {
            return Err(Error::Argument(
                "a log is a list of entries (or JSONL, one entry a line)".into(),
            ));
        }
        (Format::Anthropic, v) => anthropic_to_log(
            &AnthropicRequest::from_json_value(body(v, "messages"))?,
            &mut stamp,
        )?,
        (Format::Chat, v) => openai_to_log(
            &ChatRequest::from_json_value(body(v, "messages"))?,
            &mut stamp,
        ),
        (Format::Responses, v) => responses_to_log(
            &ResponsesRequest::from_json_value(body(v, "input"))?,
            &mut stamp,
        )?,
    };
    ba_protocol::validate_log(&entries)?;
    Ok(Read {
        entries,
        losses,
        format,
    })
}

/// JSON text, or JSONL (the log, one entry a line) as an array.
fn parse(text: &str) -> Result<Value, Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let lines: Result<Vec<Value>, _> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(serde_json::from_str::<Value>)
                .collect();
            match lines {
                Ok(items) if items.len() > 1 => Ok(Value::Array(items)),
                _ => Err(Error::json("the conversation", first)),
            }
        }
    }
}

/// A bare list of messages (or items) as the body that holds it under `key`.
fn body(value: Value, key: &str) -> Value {
    match value {
        Value::Array(items) => json!({ key: items }),
        other => other,
    }
}

/// The format of a parsed conversation.
fn detect(value: &Value) -> Result<Format, Error> {
    let messages = match value {
        Value::Array(items) => {
            let is_entry = |v: &Value| v.get("id").is_some() && v.get("role").is_some();
            if !items.is_empty() && items.iter().all(is_entry) {
                return Ok(Format::Log);
            }
            items
        }
        Value::Object(map) => {
            if map.get("messages").is_none() && map.get("input").is_some() {
                return Ok(Format::Responses);
            }
            if map.get("system").is_some() {
                return Ok(Format::Anthropic);
            }
            match map.get("messages").and_then(Value::as_array) {
                Some(m) => m,
                None => {
                    return Err(Error::Argument(
                        "a conversation is a list of messages, or an object with `messages` \
                         (or, for the Responses API, `input`)"
                            .into(),
                    ));
                }
            }
        }
        _ => {
            return Err(Error::Argument(
                "a conversation is a list of messages or a request body".into(),
            ));
        }
    };
    let responses_only = messages.iter().any(|m| {
        m.get("role").is_none()
            || matches!(
                m.get("type").and_then(Value::as_str),
                Some("function_call" | "function_call_output" | "reasoning")
            )
    });
    if responses_only {
        return Ok(Format::Responses);
    }
    let chat_only = messages.iter().any(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("tool" | "system" | "developer")
        ) || m.get("tool_calls").is_some()
            || m.get("content").is_some_and(Value::is_null)
    });
    Ok(if chat_only {
        Format::Chat
    } else {
        Format::Anthropic
    })
}

/// `entries` in `format`, with what the format could not express.
pub(crate) fn write(entries: &[LogEntry], format: Format) -> Result<(Value, Vec<Loss>), Error> {
    Ok(match format {
        Format::Log => (
            serde_json::to_value(entries).map_err(|e| Error::json("the log", e))?,
            Vec::new(),
        ),
        Format::Anthropic => {
            let c = log_to_anthropic(entries);
            (c.value.conversation_json(), c.losses)
        }
        Format::Chat => {
            let c = log_to_openai(entries);
            (c.value.conversation_json(), c.losses)
        }
        Format::Responses => {
            let c = log_to_responses(entries);
            (c.value.conversation_json(), c.losses)
        }
    })
}

fn losses_json(losses: &[Loss]) -> Vec<Value> {
    losses
        .iter()
        .map(|l| json!({"path": l.path, "what": l.what}))
        .collect()
}

fn tokenizer(encoding: &str) -> Result<ModelTokenizer, Error> {
    let encoding = encoding.parse::<Encoding>()?;
    Ok(ModelTokenizer::exact(encoding))
}

/// The tokens of `text` in `encoding`.
#[pyfunction]
#[pyo3(signature = (text, encoding = "o200k_base"))]
fn count_tokens(py: Python<'_>, text: &str, encoding: &str) -> PyResult<usize> {
    let tok = tokenizer(encoding)?;
    Ok(py.detach(|| tok.count(text)))
}

/// The tokens a conversation takes in a request, the per-message overhead included (what
/// `ba-agent tokens --conversation` prints).
#[pyfunction]
#[pyo3(signature = (conversation, format = "auto", encoding = "o200k_base"))]
fn count_conversation(
    py: Python<'_>,
    conversation: &str,
    format: &str,
    encoding: &str,
) -> PyResult<usize> {
    let tok = tokenizer(encoding)?;
    let format = Format::parse(format)?;
    let read = py.detach(|| read(conversation, format))?;
    Ok(py.detach(|| MessageCounter::new(tok).entries(&read.entries)))
}

/// A conversation converted: `{"value": …, "losses": [{"path", "what"}]}` as JSON.
#[pyfunction]
#[pyo3(signature = (conversation, from_, to))]
fn convert(py: Python<'_>, conversation: &str, from_: &str, to: &str) -> PyResult<String> {
    let from = Format::parse(from_)?;
    let to = Format::parse_output(to)?;
    Ok(py.detach(|| -> Result<String, Error> {
        let read = read(conversation, from)?;
        let (value, losses) = write(&read.entries, to)?;
        let mut all = losses_json(&read.losses);
        all.extend(losses_json(&losses));
        to_json("the conversion", &json!({"value": value, "losses": all}))
    })?)
}

/// The request window of a conversation at `budget` tokens (`reserve` of them kept for the
/// answer) with `strategy`, as JSON: the window's system text and messages (in `to`, the
/// input's format by default), the budget's use, and for every entry of the conversation
/// whether it was kept and why (or why not).
#[pyfunction]
#[pyo3(signature = (conversation, budget, strategy = "key-messages", reserve = 0, format = "auto", encoding = "o200k_base", to = None))]
#[allow(clippy::too_many_arguments)]
fn build_window(
    py: Python<'_>,
    conversation: &str,
    budget: usize,
    strategy: &str,
    reserve: usize,
    format: &str,
    encoding: &str,
    to: Option<&str>,
) -> PyResult<String> {
    let tok = tokenizer(encoding)?;
    let format = Format::parse(format)?;
    let to = to.map(Format::parse_output).transpose()?;
    Ok(py.detach(|| window(conversation, format, budget, reserve, strategy, tok, to))?)
}

fn window(
    conversation: &str,
    format: Option<Format>,
    budget: usize,
    reserve: usize,
    strategy: &str,
    tok: ModelTokenizer,
    to: Option<Format>,
) -> Result<String, Error> {
    if reserve >= budget {
        return Err(Error::Argument(format!(
            "the reserve ({reserve} tokens) must be smaller than the budget ({budget} tokens)"
        )));
    }
    let read = read(conversation, format)?;
    // Leading system entries are the request's system prompt, not history (as `context build`).
    let lead = read
        .entries
        .iter()
        .take_while(|e| matches!(e.role, LogRole::System | LogRole::Developer))
        .count();
    let system: Vec<String> = read.entries[..lead]
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    let system = system.join("\n\n");
    let history = &read.entries[lead..];
    let pipeline = Pipeline::named(strategy, Some(Arc::new(ExtractiveSummarizer)))?;
    let builder = ContextBuilder::new(
        PromptParts {
            base_rules: system.clone(),
            ..PromptParts::default()
        },
        BuilderSettings::default(),
        ContextBudget::new(budget, reserve),
        pipeline,
        MessageCounter::new(tok),
    );
    let request = BuildRequest {
        entries: history,
        ..BuildRequest::default()
    };
    let built = ba_context::block_on(builder.build_with_system(&request, system.clone()))?;
    let to = to.unwrap_or(match read.format {
        Format::Log => Format::Anthropic,
        other => other,
    });
    let mut window = Vec::with_capacity(built.entries.len() + 1);
    if !system.is_empty() {
        window.push(LogEntry::new("system", LogRole::System, "").with_text(system.clone()));
    }
    window.extend(built.entries);
    let (messages, losses) = write(&window, to)?;
    let debug = built.debug;
    let items: Vec<Value> = history
        .iter()
        .map(|e| {
            let dropped = debug.dropped.iter().find(|d| d.id == e.id);
            let changes: Vec<ba_protocol::ChangeKind> = debug
                .changed
                .iter()
                .filter(|c| c.id == e.id)
                .map(|c| c.kind)
                .collect();
            match dropped {
                Some(d) => json!({
                    "id": e.id, "role": e.role.as_str(), "kept": false,
                    "reason": d.reason.as_str(), "changes": changes,
                }),
                None => json!({
                    "id": e.id, "role": e.role.as_str(), "kept": true,
                    "reason": if changes.is_empty() { "fits" } else { "changed" },
                    "changes": changes,
                }),
            }
        })
        .collect();
    to_json(
        "the window",
        &json!({
            "format": format_name(to),
            "window": messages,
            "usage": {
                "used": debug.usage.used,
                "budget": budget,
                "percent": (debug.usage.percent * 100.0).round() / 100.0,
            },
            "strategy": strategy,
            "strategies": debug.strategies,
            "items": items,
            "added": debug.changed.iter()
                .filter(|c| !history.iter().any(|e| e.id == c.id))
                .map(|c| json!({"id": c.id, "change": c.kind}))
                .collect::<Vec<_>>(),
            "losses": losses_json(&losses),
        }),
    )
}

fn format_name(format: Format) -> &'static str {
    match format {
        Format::Anthropic => "anthropic",
        Format::Chat => "chat",
        Format::Responses => "responses",
        Format::Log => "log",
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_conversation, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(build_window, m)?)?;
    Ok(())
}
