//! # ba-agent
//!
//! The BA-Agent orchestrator crate. It composes the lower crates (`ba-protocol` for the wire
//! and log types; context, tools, skills and storage as they land) and owns what sits on top:
//! the model clients, the ReAct loop, the built-in tools and the `ba-agent` CLI binary.
//!
//! - [`model`] — the [`model::ModelClient`] trait and its implementations: Anthropic Messages,
//!   OpenAI-compatible Chat Completions (both over HTTP, streaming or not, with retries and
//!   timeouts) and a replay client that plays a recorded session offline. Requests carry the
//!   conversation as [`ba_protocol::LogEntry`] values and are converted with
//!   `ba_protocol::convert`; streams are rebuilt with `ba_protocol::stream`.
//! - [`agent`] — the ReAct orchestrator: [`agent::Agent`] and its builder, runs as async
//!   streams of [`agent::AgentEvent`]s, response processing, the metrics report, the `task`
//!   sub-agent tool and the prompt texts.
//! - [`adapters`] — the built-in tools and `activate_skill` as `ba_tools::Tool`s, data files as
//!   the runtime's data sink, a model as the context crate's summarizer.
//! - [`builtin`] — the built-in business-analysis tools of seed 003 (`file_reader`,
//!   `query_database`, `run_python`, `web_reader`, `web_search`) and the demo data generator.
//!
//! ```
//! use ba_agent::model::{ModelClient, ModelRequest, ReplayClient, StopReason};
//! use ba_protocol::{LogEntry, LogRole};
//!
//! let recording = r#"[{"expect": {"role": "user", "text": "Hello"},
//!                      "response": {"message": {"role": "assistant", "content": "Hi there."},
//!                                   "stop_reason": "end_turn"}}]"#;
//! let client = ReplayClient::from_json(recording, "inline")?;
//! let request = ModelRequest::new(
//!     "any-model",
//!     vec![LogEntry::new("m1", LogRole::User, "2025-01-01T00:00:00Z").with_text("Hello")],
//! );
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let answer = runtime.block_on(client.complete(&request))?;
//! assert_eq!(answer.message.text(), "Hi there.");
//! assert_eq!(answer.stop_reason, StopReason::EndTurn);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod adapters;
pub mod agent;
pub mod builtin;
pub mod demo;
pub mod model;
