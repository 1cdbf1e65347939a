//! OpenAI Responses API stream events, and the accumulator that rebuilds the response.
//!
//! A Responses stream is a sequence of typed events (`response.created`,
//! `response.output_item.added`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.reasoning_summary_text.delta`,
//! `response.output_item.done`, …, `response.completed`), with no `[DONE]` line. The
//! accumulator builds every output item from the events alone, so a stream whose last event
//! never came still yields what was received; the final `response.completed` (or `incomplete`,
//! `failed`) gives status and usage, and its own copy of the output is checked against the
//! items built.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::Accumulated;
use super::sse::{self, SseEvent};
use crate::content::JsonMap;
use crate::error::{ProtocolError, Result};
use crate::responses::{ResponseItem, ResponsesResponse, read_items};

/// One event of a Responses stream; the fields every kind may carry, the rest in `extra`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ResponsesStreamEvent {
    /// The event's type (`response.output_text.delta`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its place in the stream.
    #[serde(default)]
    pub sequence_number: Option<u64>,
    /// The output item it is about.
    #[serde(default)]
    pub output_index: Option<usize>,
    /// The content part of a message it is about.
    #[serde(default)]
    pub content_index: Option<usize>,
    /// The summary part of a reasoning item it is about.
    #[serde(default)]
    pub summary_index: Option<usize>,
    /// The id of the item it is about.
    #[serde(default)]
    pub item_id: Option<String>,
    /// More text or arguments.
    #[serde(default)]
    pub delta: Option<String>,
    /// An item (`output_item.added` / `done`), as written.
    #[serde(default)]
    pub item: Option<JsonMap>,
    /// A content or summary part, as written.
    #[serde(default)]
    pub part: Option<JsonMap>,
    /// The response (`response.created`, `response.completed`, …), as written.
    #[serde(default)]
    pub response: Option<JsonMap>,
    /// Other fields (`text`, `arguments`, `refusal`, `code`, `message`, …).
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl ResponsesStreamEvent {
    /// Reads one event's JSON.
    pub fn from_json(data: &str) -> Result<Self> {
        serde_json::from_str(data).map_err(|e| ProtocolError::json("Responses stream event", &e))
    }
}

/// Rebuilds the final response from stream events.
#[derive(Debug, Default)]
pub struct ResponsesAccumulator {
    response: JsonMap,
    items: BTreeMap<usize, JsonMap>,
    terminal: Option<String>,
    error: Option<String>,
    events: usize,
    ignored: usize,
}

fn text_slot<'a>(map: &'a mut JsonMap, key: &str) -> &'a mut String {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::String(String::new()));
    if !slot.is_string() {
        *slot = Value::String(String::new());
    }
    match slot {
        Value::String(s) => s,
        _ => unreachable!("set to a string above"),
    }
}

/// The most content or summary parts an item may have; an event past it is ignored (a hostile
/// stream could otherwise make the accumulator fill an array up to any index).
pub const MAX_PARTS: usize = 4096;

/// The `index`-th object of the array at `key`, created (with `fill`) as needed; `index` is
/// below [`MAX_PARTS`].
fn nth<'a>(map: &'a mut JsonMap, key: &str, index: usize, fill: &JsonMap) -> &'a mut JsonMap {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    let Value::Array(array) = slot else {
        unreachable!("set to an array above")
    };
    while array.len() <= index {
        array.push(Value::Object(fill.clone()));
    }
    if !array[index].is_object() {
        array[index] = Value::Object(fill.clone());
    }
    match &mut array[index] {
        Value::Object(map) => map,
        _ => unreachable!("set to an object above"),
    }
}

fn part(kind: &str, text_key: &str) -> JsonMap {
    let mut map = JsonMap::new();
    map.insert("type".to_owned(), Value::from(kind));
    map.insert(text_key.to_owned(), Value::from(""));
    if kind == "output_text" {
        map.insert("annotations".to_owned(), Value::Array(Vec::new()));
    }
    map
}

impl ResponsesAccumulator {
    /// A new accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    fn item(&mut self, event: &ResponsesStreamEvent) -> Option<&mut JsonMap> {
        let index = event.output_index?;
        Some(self.items.entry(index).or_default())
    }

    /// Applies one event. Kinds this crate does not know are counted and otherwise ignored.
    pub fn push(&mut self, event: &ResponsesStreamEvent) {
        self.events += 1;
        let text = |key: &str| {
            event
                .extra
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let content = event.content_index.unwrap_or(0);
        let summary = event.summary_index.unwrap_or(0);
        if content >= MAX_PARTS || summary >= MAX_PARTS {
            self.ignored += 1;
            return;
        }
        match event.kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(r) = &event.response {
                    self.response = r.clone();
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                if let Some(r) = &event.response {
                    self.response = r.clone();
                }
                self.terminal = Some(event.kind.clone());
            }
            "error" => {
                let message = text("message").unwrap_or_else(|| "an error event".to_owned());
                let code = text("code").map(|c| format!("{c}: ")).unwrap_or_default();
                self.error = Some(format!("{code}{message}"));
                self.terminal = Some(event.kind.clone());
            }
            "response.output_item.added" | "response.output_item.done" => {
                if let (Some(index), Some(item)) = (event.output_index, &event.item) {
                    self.items.insert(index, item.clone());
                }
            }
            "response.content_part.added" | "response.content_part.done" => {
                if let (Some(p), Some(item)) = (event.part.clone(), self.item(event)) {
                    let slot = nth(item, "content", content, &p);
                    *slot = p;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let (kind, key) = if event.kind == "response.refusal.delta" {
                    ("refusal", "refusal")
                } else {
                    ("output_text", "text")
                };
                let delta = event.delta.clone().unwrap_or_default();
                if let Some(item) = self.item(event) {
                    text_slot(nth(item, "content", content, &part(kind, key)), key)
                        .push_str(&delta);
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                let (kind, key) = if event.kind == "response.refusal.done" {
                    ("refusal", "refusal")
                } else {
                    ("output_text", "text")
                };
                if let (Some(full), Some(item)) = (text(key), self.item(event)) {
                    *text_slot(nth(item, "content", content, &part(kind, key)), key) = full;
                }
            }
            "response.output_text.annotation.added" => {
                let annotation = event.extra.get("annotation").cloned();
                if let (Some(a), Some(item)) = (annotation, self.item(event)) {
                    let p = nth(item, "content", content, &part("output_text", "text"));
                    match p.get_mut("annotations") {
                        Some(Value::Array(list)) => list.push(a),
                        _ => {
                            p.insert("annotations".to_owned(), Value::Array(vec![a]));
                        }
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = event.delta.clone().unwrap_or_default();
                if let Some(item) = self.item(event) {
                    text_slot(item, "arguments").push_str(&delta);
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(full), Some(item)) = (text("arguments"), self.item(event)) {
                    *text_slot(item, "arguments") = full;
                }
            }
            "response.reasoning_summary_part.added" | "response.reasoning_summary_part.done" => {
                if let (Some(p), Some(item)) = (event.part.clone(), self.item(event)) {
                    let slot = nth(item, "summary", summary, &p);
                    *slot = p;
                }
            }
            "response.reasoning_summary_text.delta" => {
                let delta = event.delta.clone().unwrap_or_default();
                if let Some(item) = self.item(event) {
                    let p = nth(item, "summary", summary, &part("summary_text", "text"));
                    text_slot(p, "text").push_str(&delta);
                }
            }
            "response.reasoning_summary_text.done" => {
                if let (Some(full), Some(item)) = (text("text"), self.item(event)) {
                    let p = nth(item, "summary", summary, &part("summary_text", "text"));
                    *text_slot(p, "text") = full;
                }
            }
            "response.reasoning_text.delta" => {
                let delta = event.delta.clone().unwrap_or_default();
                if let Some(item) = self.item(event) {
                    let p = nth(item, "content", content, &part("reasoning_text", "text"));
                    text_slot(p, "text").push_str(&delta);
                }
            }
            _ => {}
        }
    }

    /// Feeds one SSE event.
    pub fn push_sse(&mut self, event: &SseEvent) -> Result<()> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        self.push(&ResponsesStreamEvent::from_json(data)?);
        Ok(())
    }

    /// The text of the assistant messages streamed so far, for recording a cut stream.
    pub fn partial_text(&self) -> String {
        let mut out = String::new();
        for item in self.items.values() {
            for p in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(text) = p
                    .get("text")
                    .or_else(|| p.get("refusal"))
                    .and_then(Value::as_str)
                    && item.get("type").and_then(Value::as_str) == Some("message")
                {
                    out.push_str(text);
                }
            }
        }
        out
    }

    /// Whether a final event (`response.completed`, `incomplete`, `failed` or `error`) came.
    pub fn ended(&self) -> bool {
        self.terminal.is_some()
    }

    /// The `error` event's code and message, or a failed response's error, if any.
    pub fn error(&self) -> Option<String> {
        self.error.clone().or_else(|| {
            let error = self.response.get("error")?;
            let message = error.get("message").and_then(Value::as_str)?;
            let code = error
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or("failed");
            Some(format!("{code}: {message}"))
        })
    }

    /// The response from what was received: the items built from the events, the final
    /// response's status, usage and other fields. Problems name an item that could not be read,
    /// arguments that are not complete JSON, a missing final event, and a final response whose
    /// own output differs from the items streamed.
    pub fn finish(self) -> Result<Accumulated<ResponsesResponse>> {
        if self.events == 0 {
            return Err(ProtocolError::Stream("the stream has no event".to_owned()));
        }
        let mut problems = Vec::new();
        if self.terminal.is_none() {
            problems.push("the stream ended before `response.completed`".to_owned());
        }
        if let Some(error) = &self.error {
            problems.push(format!("the stream reported an error: {error}"));
        }
        if self.ignored > 0 {
            problems.push(format!(
                "{} event(s) named a part past {MAX_PARTS} and were ignored",
                self.ignored
            ));
        }
        let mut output = Vec::with_capacity(self.items.len());
        for (index, item) in self.items {
            if item.get("type").and_then(Value::as_str) == Some("function_call")
                && let Some(arguments) = item.get("arguments").and_then(Value::as_str)
                && serde_json::from_str::<Value>(arguments).is_err()
            {
                problems.push(format!(
                    "output[{index}]: the arguments of the function call are not complete JSON"
                ));
            }
            match ResponseItem::from_value(Value::Object(item)) {
                Ok(item) => output.push(item),
                Err(e) => problems.push(format!("output[{index}]: {e}")),
            }
        }
        let mut response = self.response;
        if let Some(Value::Array(final_items)) = response.remove("output")
            && !final_items.is_empty()
        {
            match read_items(final_items, "output") {
                Ok(final_items) if final_items == output => {}
                Ok(_) => problems.push(
                    "the final response's output differs from the items streamed; the streamed ones are kept"
                        .to_owned(),
                ),
                Err(e) => problems.push(format!("the final response: {e}")),
            }
        }
        response.insert(
            "output".to_owned(),
            serde_json::to_value(&output).map_err(|e| ProtocolError::json("output", &e))?,
        );
        let message: ResponsesResponse = serde_json::from_value(Value::Object(response))
            .map_err(|e| ProtocolError::json("the streamed response", &e))?;
        let complete = problems.is_empty();
        Ok(Accumulated {
            message,
            complete,
            problems,
        })
    }
}

/// Accumulates a whole SSE text (as recorded) into its final response.
pub fn accumulate_sse(text: &str) -> Result<Accumulated<ResponsesResponse>> {
    let mut acc = ResponsesAccumulator::new();
    for event in sse::parse(text) {
        acc.push_sse(&event)?;
    }
    acc.finish()
}
