//! Streaming: Server-Sent Events, provider stream events, and accumulators that rebuild the
//! final message from a stream.
//!
//! Parsing is incremental and does no I/O: feed text as it arrives with
//! [`sse::SseParser::push`], hand each event to an accumulator, and ask it for the message at
//! the end — or for what was received so far when the stream was cut.

pub mod anthropic;
pub mod openai;
pub mod partial_json;
pub mod responses;
pub mod sse;

/// The outcome of accumulating a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Accumulated<T> {
    /// The message rebuilt from the events received.
    pub message: T,
    /// Whether the stream ended properly (`message_stop` / `[DONE]` or a finish reason /
    /// `response.completed`).
    pub complete: bool,
    /// What was wrong or missing, in words (a tool input cut mid-JSON, a missing stop event).
    pub problems: Vec<String>,
}
