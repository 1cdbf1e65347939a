//! Reading a provider's "the request is too long" refusal, which every provider words its own
//! way, into one typed error with the window the server named.
//!
//! The shapes read (each from its provider's own error bodies):
//! - Anthropic: `invalid_request_error`, "prompt is too long: 210000 tokens > 200000 maximum";
//! - OpenAI (Chat Completions and Responses): code `context_length_exceeded`, "This model's
//!   maximum context length is 128000 tokens. However, your messages resulted in 130000
//!   tokens…", or "Your input exceeds the context window of this model…";
//! - llama.cpp's server: type `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`,
//!   "request (10862 tokens) exceeds the available context size (4096 tokens)…";
//! - vLLM: "This model's maximum context length is 4096 tokens. However, you requested 5000
//!   tokens (…)", or "… is longer than the maximum model length of 4096";
//! - Ollama: "input length exceeds the context length" (or "maximum context length").

use serde_json::Value;

/// What an overflow refusal said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Overflow {
    /// The window, when the server named it.
    pub(crate) limit: Option<u64>,
    /// The tokens of the refused request, when the server named them.
    pub(crate) requested: Option<u64>,
}

/// Phrases that only an overflow refusal uses (compared in lower case).
const PHRASES: [&str; 10] = [
    "prompt is too long",
    "context_length_exceeded",
    "exceed_context_size",
    "exceeds the available context size",
    "maximum context length",
    "exceeds the context window",
    "maximum model length",
    "exceeds the context length",
    "context length exceeded",
    "context window exceeded",
];

/// The overflow a refusal describes, or `None` for any other refusal. `status` is the HTTP
/// status (a server may say it with 400, 413, 422 or even 500), `body` the raw error body.
pub(crate) fn read(status: u16, body: &str) -> Option<Overflow> {
    if !matches!(status, 400 | 413 | 422 | 500) {
        return None;
    }
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let message = error
        .and_then(|e| e.get("message").or(Some(e)))
        .and_then(Value::as_str)
        .unwrap_or(body);
    let said = format!("{} {} {message}", field("type"), field("code")).to_ascii_lowercase();
    if !PHRASES.iter().any(|p| said.contains(p)) {
        return None;
    }
    let number = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_u64);
    let (worded_limit, worded_requested) = worded(&message.to_ascii_lowercase());
    Some(Overflow {
        limit: number("n_ctx").or(worded_limit),
        requested: number("n_prompt_tokens").or(worded_requested),
    })
}

/// The window and the request's size in a refusal's words.
fn worded(message: &str) -> (Option<u64>, Option<u64>) {
    // "prompt is too long: 210000 tokens > 200000 maximum"
    if let Some(rest) = after(message, "prompt is too long") {
        let numbers = numbers(rest);
        return (numbers.get(1).copied(), numbers.first().copied());
    }
    // "request (10862 tokens) exceeds the available context size (4096 tokens)"
    if let Some(rest) = after(message, "request (") {
        let numbers = numbers(rest);
        return (numbers.get(1).copied(), numbers.first().copied());
    }
    // "the decoder prompt (length 5000) is longer than the maximum model length of 4096"
    if let Some(rest) = after(message, "prompt (length") {
        let numbers = numbers(rest);
        return (numbers.get(1).copied(), numbers.first().copied());
    }
    // "maximum context length is 4096 tokens. however, you requested 5000 tokens"
    // "maximum context length is 4096 tokens and your request has 20 input tokens"
    let limit = after(message, "maximum context length is")
        .or_else(|| after(message, "context window of"))
        .and_then(|rest| numbers(rest).first().copied());
    let requested = after(message, "resulted in")
        .or_else(|| after(message, "you requested"))
        .and_then(|rest| numbers(rest).first().copied());
    (limit, requested)
}

fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.find(marker).map(|at| &text[at + marker.len()..])
}

/// The whole numbers of `text`, in order (the first few; thousands separators read through).
fn numbers(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut current: Option<u64> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(d) = c.to_digit(10) {
            current = Some(
                current
                    .unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
        } else if c == ',' && current.is_some() && chars.peek().is_some_and(char::is_ascii_digit) {
            continue;
        } else if let Some(n) = current.take() {
            out.push(n);
            if out.len() == 4 {
                return out;
            }
        }
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(status: u16, body: &str) -> Option<(Option<u64>, Option<u64>)> {
        read(status, body).map(|o| (o.limit, o.requested))
    }

    #[test]
    fn each_providers_refusal_is_read_with_the_window_it_names() {
        assert_eq!(
            of(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#
            ),
            Some((Some(200_000), Some(210_000)))
        );
        assert_eq!(
            of(
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130,512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#
            ),
            Some((Some(128_000), Some(130_512)))
        );
        assert_eq!(
            of(
                400,
                r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#
            ),
            Some((None, None))
        );
        assert_eq!(
            of(
                400,
                r#"{"error":{"code":400,"message":"request (10862 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10862,"n_ctx":4096}}"#
            ),
            Some((Some(4096), Some(10_862)))
        );
        // Without the numeric fields, the words say the same.
        assert_eq!(
            of(
                400,
                r#"{"error":{"code":400,"message":"request (10862 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error"}}"#
            ),
            Some((Some(4096), Some(10_862)))
        );
        assert_eq!(
            of(
                400,
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#
            ),
            Some((Some(4096), Some(5000)))
        );
        assert_eq!(
            of(
                400,
                r#"{"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","code":400}}"#
            ),
            Some((Some(4096), Some(5000)))
        );
        assert_eq!(
            of(
                400,
                r#"{"error":{"message":"input length exceeds the context length","type":"api_error"}}"#
            ),
            Some((None, None))
        );
        // A plain-text body is read too.
        assert_eq!(
            of(500, "the request exceeds the available context size"),
            Some((None, None))
        );
    }

    #[test]
    fn other_refusals_are_not_overflows() {
        assert_eq!(
            of(
                400,
                r#"{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}"#
            ),
            None
        );
        assert_eq!(
            of(
                401,
                r#"{"error":{"message":"maximum context length is 4"}}"#
            ),
            None
        );
        assert_eq!(of(400, "<html>bad request</html>"), None);
    }
}
