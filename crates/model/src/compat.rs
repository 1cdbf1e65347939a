//! What the OpenAI client writes for servers that differ from OpenAI's own API, and the
//! lenient reading of their answers.
//!
//! The reading is always on: each rule below only applies to a shape OpenAI never sends, so a
//! conforming answer reads exactly as before.
//! - `arguments` given as a JSON object (or any non-string value) is read as its JSON text;
//! - a call without an `id` gets `call_N` (N its place among the answer's calls, followed by
//!   the answer's id when there is one, so two answers do not share ids);
//! - a streamed call delta without `index` grows the call being streamed, or opens the next
//!   one when a new id appears, or a name while the current call's arguments are complete;
//! - an `id` or `name` repeated in every delta of a call is taken once;
//! - `null` fields are dropped (a `reasoning_content: null` beside the content would otherwise
//!   replace the reasoning streamed so far), as is a `usage` that is not an object;
//! - an answer that made calls but says `stop` (or nothing) stops for [`StopReason::ToolUse`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::StopReason;

/// Which request fields an [`OpenAiClient`](crate::OpenAiClient) sends, for servers that
/// differ from OpenAI's own API: [`OpenAiCompat::openai`] for OpenAI (the default),
/// [`OpenAiCompat::server`] for vLLM, llama.cpp's server, Ollama's `/v1`, LM Studio and
/// DeepSeek-style APIs. Answers are read leniently under both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenAiCompat {
    /// Ask streams for a final usage chunk (`stream_options: {include_usage: true}`). A server
    /// that refuses the field is asked again without it, and never again by the same client.
    pub stream_usage: bool,
    /// Send a thinking budget as `reasoning_effort`.
    pub reasoning_effort: bool,
    /// Send a request's cache key as `prompt_cache_key`; `None` sends it to
    /// `https://api.openai.com` only.
    pub prompt_cache_key: Option<bool>,
    /// Send the output cap as `max_completion_tokens` (OpenAI's reasoning models require it)
    /// instead of `max_tokens` (which every compatible server reads).
    pub max_completion_tokens: bool,
}

impl OpenAiCompat {
    /// OpenAI's own API: usage asked for in streams, `reasoning_effort` sent, the cache key
    /// sent to `api.openai.com` only, the cap as `max_tokens`.
    pub const fn openai() -> Self {
        Self {
            stream_usage: true,
            reasoning_effort: true,
            prompt_cache_key: None,
            max_completion_tokens: false,
        }
    }

    /// The `compat` profile for other servers: no `prompt_cache_key`, no `reasoning_effort`;
    /// the cap as `max_tokens`; usage asked for in streams (llama.cpp's server, vLLM and
    /// Ollama send it, with the cached prompt tokens) until the server refuses the field. An
    /// answer without usage reports llama.cpp's `timings`, or else the client's own count
    /// marked estimated: never zero.
    pub const fn server() -> Self {
        Self {
            stream_usage: true,
            reasoning_effort: false,
            prompt_cache_key: Some(false),
            max_completion_tokens: false,
        }
    }
}

impl Default for OpenAiCompat {
    fn default() -> Self {
        Self::openai()
    }
}

/// The id given to the `n`-th call of an answer that came without one: stable, and tied to
/// the answer's id (only the characters every provider accepts in a call id are kept).
pub(crate) fn generated_id(response_id: &str, n: usize) -> String {
    let tail: String = response_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if tail.is_empty() {
        format!("call_{n}")
    } else {
        format!("call_{n}_{tail}")
    }
}

/// Why an answer stopped: a call made under `stop` or without a reason is a tool use.
pub(crate) fn stop_reason(finish_reason: Option<&str>, made_calls: bool) -> StopReason {
    match finish_reason {
        Some("stop") | None if made_calls => StopReason::ToolUse,
        Some(reason) => StopReason::from_provider(reason),
        None => StopReason::Other("none".to_owned()),
    }
}

fn drop_nulls(map: &mut Map<String, Value>) {
    map.retain(|_, v| !v.is_null());
}

/// Arguments as the JSON text the protocol types hold.
fn arguments_as_text(function: &mut Map<String, Value>) {
    if let Some(args) = function.get_mut("arguments")
        && !args.is_string()
    {
        *args = Value::String(args.to_string());
    }
}

fn is_complete_json(text: &str) -> bool {
    !text.trim().is_empty() && serde_json::from_str::<Value>(text).is_ok()
}

fn lenient_usage(object: &mut Map<String, Value>) {
    match object.get_mut("usage") {
        Some(Value::Object(usage)) => drop_nulls(usage),
        Some(_) => {
            object.remove("usage");
        }
        None => {}
    }
}

/// Rewrites a non-streamed chat completion so the protocol types read it.
pub(crate) fn lenient_response(value: &mut Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    lenient_usage(object);
    let response_id = object
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(Value::Array(choices)) = object.get_mut("choices") else {
        return;
    };
    for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
        if choice.get("finish_reason") == Some(&Value::String(String::new())) {
            choice.remove("finish_reason");
        }
        let Some(Value::Object(message)) = choice.get_mut("message") else {
            continue;
        };
        drop_nulls(message);
        let Some(Value::Array(calls)) = message.get_mut("tool_calls") else {
            continue;
        };
        for (n, call) in calls.iter_mut().enumerate() {
            let Some(call) = call.as_object_mut() else {
                continue;
            };
            drop_nulls(call);
            let has_id = call
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| !id.is_empty());
            if !has_id {
                call.insert("id".to_owned(), generated_id(&response_id, n).into());
            }
            if let Some(Value::Object(function)) = call.get_mut("function") {
                drop_nulls(function);
                arguments_as_text(function);
                function
                    .entry("arguments")
                    .or_insert_with(|| Value::String(String::new()));
            }
        }
    }
}

/// A call of a stream as read so far.
#[derive(Debug, Default)]
struct SeenCall {
    id: String,
    name: String,
    arguments: String,
}

/// The calls of one choice of a stream.
#[derive(Debug, Default)]
struct ChoiceCalls {
    calls: BTreeMap<usize, SeenCall>,
    current: Option<usize>,
}

impl ChoiceCalls {
    /// The call a delta without `index` grows.
    fn infer_index(&self, id: Option<&str>, name: Option<&str>) -> usize {
        let next = self.calls.keys().next_back().map_or(0, |last| last + 1);
        let Some((index, current)) = self
            .current
            .and_then(|i| self.calls.get(&i).map(|call| (i, call)))
        else {
            return next;
        };
        match (id, name) {
            (Some(id), _) if current.id == id => index,
            (Some(id), _) => self
                .calls
                .iter()
                .find(|(_, call)| call.id == id)
                .map_or(next, |(i, _)| *i),
            (None, Some(name)) => {
                let same = current.name.is_empty()
                    || (current.name == name && !is_complete_json(&current.arguments));
                if same { index } else { next }
            }
            (None, None) => index,
        }
    }

    /// Gives a call delta its index, an id when it opens a call without one, and drops an id
    /// or name said again.
    fn place(&mut self, call: &mut Map<String, Value>, response_id: &str) {
        drop_nulls(call);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned);
        if let Some(Value::Object(function)) = call.get_mut("function") {
            drop_nulls(function);
            arguments_as_text(function);
        }
        let function = call.get("function").and_then(Value::as_object);
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned);
        let arguments = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let index = match call.get("index").and_then(Value::as_u64) {
            Some(i) => usize::try_from(i).unwrap_or(usize::MAX),
            None => self.infer_index(id.as_deref(), name.as_deref()),
        };
        self.current = Some(index);
        let seen = self.calls.entry(index).or_default();
        match (id, seen.id.is_empty()) {
            (Some(id), true) => seen.id = id,
            (Some(_), false) => {
                call.remove("id");
            }
            (None, true) => {
                seen.id = generated_id(response_id, index);
                call.insert("id".to_owned(), Value::String(seen.id.clone()));
            }
            (None, false) => {}
        }
        if let Some(name) = name {
            if seen.name == name {
                if let Some(Value::Object(function)) = call.get_mut("function") {
                    function.remove("name");
                }
            } else {
                seen.name.push_str(&name);
            }
        }
        seen.arguments.push_str(&arguments);
        call.insert("index".to_owned(), Value::from(index));
    }
}

/// Rewrites stream chunks one by one so the protocol's chunk type and accumulator read them.
#[derive(Debug, Default)]
pub(crate) struct LenientChunks {
    response_id: Option<String>,
    choices: BTreeMap<u64, ChoiceCalls>,
}

impl LenientChunks {
    /// Rewrites one chunk in place.
    pub(crate) fn chunk(&mut self, value: &mut Value) {
        let Some(object) = value.as_object_mut() else {
            return;
        };
        drop_nulls(object);
        lenient_usage(object);
        let response_id = self
            .response_id
            .get_or_insert_with(|| {
                object
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            })
            .clone();
        let Some(Value::Array(choices)) = object.get_mut("choices") else {
            return;
        };
        for choice in choices.iter_mut().filter_map(Value::as_object_mut) {
            drop_nulls(choice);
            if choice.get("finish_reason") == Some(&Value::String(String::new())) {
                choice.remove("finish_reason");
            }
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let Some(Value::Object(delta)) = choice.get_mut("delta") else {
                continue;
            };
            drop_nulls(delta);
            let Some(Value::Array(calls)) = delta.get_mut("tool_calls") else {
                continue;
            };
            let state = self.choices.entry(index).or_default();
            for call in calls.iter_mut().filter_map(Value::as_object_mut) {
                state.place(call, &response_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls_of(chunks: &mut [Value]) -> Vec<Value> {
        let mut lenient = LenientChunks::default();
        let mut out = Vec::new();
        for chunk in chunks.iter_mut() {
            lenient.chunk(chunk);
            out.push(chunk["choices"][0]["delta"]["tool_calls"].clone());
        }
        out
    }

    #[test]
    fn a_conforming_stream_is_left_as_it_is() {
        let mut chunks = [
            json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_a", "type": "function",
                 "function": {"name": "calc", "arguments": ""}}]}}]}),
            json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": "{\"a\":1}"}}]}}]}),
        ];
        let before = chunks.clone();
        calls_of(&mut chunks);
        assert_eq!(chunks, before);
    }

    #[test]
    fn repeated_ids_and_names_are_taken_once_and_missing_indexes_inferred() {
        let mut chunks = [
            json!({"id": "c1", "choices": [{"delta": {"tool_calls": [
                {"id": "x", "function": {"name": "calc", "arguments": "{\"a\""}}]}}]}),
            json!({"id": "c1", "choices": [{"delta": {"tool_calls": [
                {"id": "x", "function": {"name": "calc", "arguments": ":1}"}}]}}]}),
            json!({"id": "c1", "choices": [{"delta": {"tool_calls": [
                {"function": {"name": "calc", "arguments": {"a": 2}}}]}}]}),
        ];
        let calls = calls_of(&mut chunks);
        assert_eq!(
            calls,
            [
                json!([{"index": 0, "id": "x", "function": {"name": "calc", "arguments": "{\"a\""}}]),
                json!([{"index": 0, "function": {"arguments": ":1}"}}]),
                json!([{"index": 1, "id": "call_1_c1",
                        "function": {"name": "calc", "arguments": "{\"a\":2}"}}]),
            ]
        );
    }

    #[test]
    fn calls_under_stop_or_no_reason_are_tool_uses() {
        assert_eq!(stop_reason(Some("stop"), true), StopReason::ToolUse);
        assert_eq!(stop_reason(None, true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("length"), true), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("stop"), false), StopReason::EndTurn);
        assert_eq!(
            stop_reason(None, false),
            StopReason::Other("none".to_owned())
        );
        assert_eq!(generated_id("chat.cmpl/7", 2), "call_2_chatcmpl7");
        assert_eq!(generated_id("", 0), "call_0");
    }
}
