//! The JSONL event log: what the backend did for a conversation, one event a line with
//! its time — model input and output, backend processing, code saved and retrieved, context
//! cleaned. Files are `conversation_<id>_<timestamp>.jsonl` in the log folder.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::{SharedClock, rfc3339};

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The request sent to the model.
    ModelInput {
        /// Model name.
        model: String,
        /// The request body (or the messages).
        request: Value,
    },
    /// The model's raw output.
    ModelOutput {
        /// Model name.
        model: String,
        /// The raw text.
        output: String,
    },
    /// A step of the backend (parsing, tool dispatch, …).
    BackendProcessing {
        /// The step.
        stage: String,
        /// Details.
        detail: Value,
    },
    /// A code block was saved.
    CodeSaved {
        /// The code id.
        code_id: String,
        /// Its language.
        language: String,
    },
    /// A code block was looked up.
    CodeRetrieved {
        /// The code id.
        code_id: String,
        /// Whether it was found.
        found: bool,
    },
    /// The context was compressed.
    ContextCleaned {
        /// Entries removed from the context.
        removed_entries: usize,
        /// Tokens before.
        tokens_before: usize,
        /// Tokens after.
        tokens_after: usize,
    },
}

#[derive(Serialize, Deserialize)]
struct Line {
    ts: String,
    #[serde(flatten)]
    event: Event,
}

/// What [`EventLog::read`] returns: events with their times, and the unreadable lines.
pub type ReadEvents = (Vec<(String, Event)>, Vec<String>);

/// An open event log of one conversation.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: Mutex<File>,
    clock: SharedClock,
}

impl EventLog {
    /// Starts a new log file for `conversation` in `dir`.
    pub fn create(dir: &Path, conversation: &ConversationId, clock: SharedClock) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::io("creating", dir, e))?;
        let stamp = rfc3339(clock.now_ms())
            .replace([':', '-'], "")
            .replace('.', "_");
        let path = dir.join(format!("conversation_{conversation}_{stamp}.jsonl"));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StorageError::io("opening", &path, e))?;
        Ok(Self {
            path,
            file: Mutex::new(file),
            clock,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event as one line (one `write`, so lines never interleave).
    pub fn record(&self, event: Event) -> Result<()> {
        let line = Line {
            ts: rfc3339(self.clock.now_ms()),
            event,
        };
        let mut bytes = serde_json::to_vec(&line).map_err(|e| StorageError::Format {
            what: "event".to_owned(),
            message: e.to_string(),
        })?;
        bytes.push(b'\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(&bytes)
            .map_err(|e| StorageError::io("appending to", &self.path, e))
    }

    /// Reads a log: events with their times, and the lines that could not be read.
    pub fn read(path: &Path) -> Result<ReadEvents> {
        let bytes = std::fs::read(path).map_err(|e| StorageError::io("reading", path, e))?;
        let mut events = Vec::new();
        let mut bad = Vec::new();
        for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Line>(line) {
                Ok(l) => events.push((l.ts, l.event)),
                Err(e) => bad.push(format!("line {}: {e}", i + 1)),
            }
        }
        Ok((events, bad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ManualClock;
    use std::sync::Arc;

    #[test]
    fn events_round_trip_as_jsonl() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let id = ConversationId::new("c1").unwrap();
        let log = EventLog::create(dir.path(), &id, clock).unwrap();
        let name = log
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(name, "conversation_c1_20231114T221320Z.jsonl");
        let events = vec![
            Event::ModelInput {
                model: "m".into(),
                request: serde_json::json!({"messages": []}),
            },
            Event::ModelOutput {
                model: "m".into(),
                output: "hi".into(),
            },
            Event::BackendProcessing {
                stage: "parse".into(),
                detail: Value::Null,
            },
            Event::CodeSaved {
                code_id: "code_a".into(),
                language: "python".into(),
            },
            Event::CodeRetrieved {
                code_id: "code_a".into(),
                found: true,
            },
            Event::ContextCleaned {
                removed_entries: 3,
                tokens_before: 900,
                tokens_after: 300,
            },
        ];
        for e in &events {
            log.record(e.clone()).unwrap();
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(
            text.lines().nth(3).unwrap().starts_with(
                r#"{"ts":"2023-11-14T22:13:20Z","event":"code_saved","code_id":"code_a""#
            ),
            "{text}"
        );
        let (got, bad) = EventLog::read(log.path()).unwrap();
        assert!(bad.is_empty());
        assert_eq!(got.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), events);
    }
}
