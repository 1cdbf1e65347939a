//! The event hub of one conversation: the run in flight (if any), the frames it produced lately
//! (a bounded ring, for exact reconnects from memory) and a broadcast channel to the open event
//! streams.
//!
//! Every frame has a cursor `(seq, k)`: `seq` is the sequence number of the last log entry
//! appended before it; an entry's own frame has `k = 0`, and every other frame gets the next
//! value of a counter that starts, for each hub, at the microseconds of the clock — so cursors
//! from before a restart never name a frame of this process, and cursors only grow. On the wire
//! an `entry` frame's id is `seq`, any other frame's `seq.k`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use ba_agent::{AgentEvent, RunStatus};
use serde_json::{Map, Value};

use crate::wire::{EntryFrame, OpenCall, SyncFrame};
use tokio::sync::broadcast;

/// Frames the ring keeps at most.
pub(crate) const RING_FRAMES: usize = 4096;
/// Bytes of frame data the ring keeps at most.
pub(crate) const RING_BYTES: usize = 2 * 1024 * 1024;
/// Frames kept once a run is over (its end, for late reconnects); the deltas before them go,
/// so idle conversations hold little memory.
const IDLE_FRAMES: usize = 64;
/// Frames a slow stream may fall behind before it catches up from the log.
const CHANNEL: usize = 1024;
/// Request ids remembered per conversation (older ones are found in the log).
const REQUESTS: usize = 256;

/// Where a frame sits in a conversation's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Cursor {
    pub(crate) seq: u64,
    pub(crate) k: u64,
}

impl Cursor {
    /// Reads `seq` or `seq.k`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (seq, k) = match text.split_once('.') {
            Some((s, k)) => (s.parse().ok()?, k.parse().ok()?),
            None => (text.parse().ok()?, 0),
        };
        Some(Self { seq, k })
    }

    pub(crate) fn id(self) -> String {
        if self.k == 0 {
            self.seq.to_string()
        } else {
            format!("{}.{}", self.seq, self.k)
        }
    }
}

/// One SSE frame.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) cursor: Cursor,
    pub(crate) event: String,
    pub(crate) data: String,
}

impl Frame {
    /// The `entry` frame of a stored entry.
    pub(crate) fn entry(
        seq: u64,
        appended_ms: i64,
        entry: &ba_protocol::LogEntry,
        run_id: Option<&str>,
        prices: &ba_agent::Prices,
    ) -> Self {
        // What the page renders besides the entry: the processed answer, its sanitised HTML,
        // the usage.
        let api_response = entry.records.api_response.as_deref().cloned();
        let response_html = api_response
            .as_ref()
            .and_then(|a| serde_json::to_value(a).ok())
            .and_then(|a| crate::render::response_html(&a));
        let data = EntryFrame {
            seq,
            appended_ms,
            entry: entry.clone(),
            run_id: run_id.map(str::to_owned),
            api_response,
            response_html,
            usage: entry
                .records
                .usage
                .and_then(|u| serde_json::to_value(u).ok()),
            cost_usd: prices.of_entry(entry),
        };
        Self {
            cursor: Cursor { seq, k: 0 },
            event: "entry".into(),
            data: serde_json::to_string(&data).unwrap_or_default(),
        }
    }
}

/// The run of this process in flight (the lease in the store is what keeps others out; this
/// is what the streams show).
#[derive(Debug)]
pub(crate) struct ActiveRun {
    pub(crate) run_id: String,
    /// The round in flight and what it streamed, for the `sync` frame of a reconnect.
    sync: SyncFrame,
}

/// How the last run of this process ended.
#[derive(Debug, Clone)]
pub(crate) struct LastRun {
    pub(crate) status: RunStatus,
}

#[derive(Debug)]
pub(crate) struct HubState {
    /// The cursor of the last frame published.
    pub(crate) cursor: Cursor,
    next_k: u64,
    ring: VecDeque<Arc<Frame>>,
    ring_bytes: usize,
    pub(crate) run: Option<ActiveRun>,
    pub(crate) last_run: Option<LastRun>,
    /// `(request_id, run_id)`, newest last.
    requests: VecDeque<(String, String)>,
    /// Whether a task follows the log for appends made by other processes.
    pub(crate) tailing: bool,
}

/// What a new event stream starts from.
pub(crate) enum Start {
    /// The frames after the client's cursor, all still in memory.
    Ring(Vec<Arc<Frame>>),
    /// The ring no longer (or never) held the cursor: read the log after `seq`.
    Log { after_seq: u64 },
    /// Nothing to replay (no cursor given).
    Live,
}

/// The hub of one conversation.
#[derive(Debug)]
pub(crate) struct Hub {
    state: Mutex<HubState>,
    tx: broadcast::Sender<Arc<Frame>>,
    /// The server's prices, for the cost of each entry frame.
    prices: Arc<ba_agent::Prices>,
}

fn clock_micros() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_micros()).unwrap_or(u64::MAX / 2)
}

impl Hub {
    /// A hub for a conversation whose log ends at `last_seq`.
    pub(crate) fn new(last_seq: u64, prices: Arc<ba_agent::Prices>) -> Self {
        let (tx, _) = broadcast::channel(CHANNEL);
        Self {
            prices,
            state: Mutex::new(HubState {
                cursor: Cursor {
                    seq: last_seq,
                    k: 0,
                },
                next_k: clock_micros().max(1),
                ring: VecDeque::new(),
                ring_bytes: 0,
                run: None,
                last_run: None,
                requests: VecDeque::new(),
                tailing: false,
            }),
            tx,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Open event streams.
    pub(crate) fn listeners(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Subscribes and decides where a stream after `after` starts, atomically with respect
    /// to publishing: every frame published later arrives on the receiver.
    pub(crate) fn subscribe(
        &self,
        after: Option<Cursor>,
    ) -> (broadcast::Receiver<Arc<Frame>>, Start, Cursor) {
        let state = self.lock();
        let rx = self.tx.subscribe();
        let start = match after {
            None => Start::Live,
            Some(c) if c == state.cursor => Start::Ring(Vec::new()),
            Some(c) => match state.ring.iter().position(|f| f.cursor == c) {
                Some(i) => Start::Ring(state.ring.iter().skip(i + 1).cloned().collect()),
                None => Start::Log { after_seq: c.seq },
            },
        };
        (rx, start, state.cursor)
    }

    /// The `sync` frame of a reconnect while a run is in flight: the round so far.
    pub(crate) fn sync_frame(&self) -> Option<Frame> {
        let state = self.lock();
        let run = state.run.as_ref()?;
        Some(Frame {
            cursor: state.cursor,
            event: "sync".into(),
            data: serde_json::to_string(&run.sync).unwrap_or_default(),
        })
    }

    /// The run a request id started, if this process remembers it.
    pub(crate) fn run_of_request(state: &HubState, request_id: &str) -> Option<String> {
        state
            .requests
            .iter()
            .find(|(r, _)| r == request_id)
            .map(|(_, run)| run.clone())
    }

    /// Remembers which run a request id started (the caller holds the lock and found none).
    pub(crate) fn remember(state: &mut HubState, request_id: &str, run_id: &str) {
        state
            .requests
            .push_back((request_id.to_owned(), run_id.to_owned()));
        while state.requests.len() > REQUESTS {
            state.requests.pop_front();
        }
    }

    /// Forgets a run that could not start (and the request id that asked for it).
    pub(crate) fn forget(&self, run_id: &str) {
        self.lock().requests.retain(|(_, run)| run != run_id);
    }

    /// Marks run `run_id` (which holds the conversation's lease) as the one in flight.
    pub(crate) fn begin(&self, run_id: &str) {
        self.lock().run = Some(ActiveRun {
            run_id: run_id.to_owned(),
            sync: SyncFrame {
                run_id: run_id.to_owned(),
                ..SyncFrame::default()
            },
        });
    }

    /// Publishes one event of run `run_id`.
    pub(crate) fn publish_event(&self, run_id: &str, event: &AgentEvent) {
        let mut state = self.lock();
        if let Some(run) = state.run.as_mut() {
            track(run, event);
        }
        let frame = match event {
            AgentEvent::Entry {
                seq,
                appended_ms,
                entry,
            } => {
                if *seq <= state.cursor.seq {
                    return;
                }
                Frame::entry(*seq, *appended_ms, entry, Some(run_id), &self.prices)
            }
            other => {
                let (name, data) = split_event(other, run_id);
                let cursor = Cursor {
                    seq: state.cursor.seq,
                    k: state.next_k,
                };
                state.next_k += 1;
                Frame {
                    cursor,
                    event: name,
                    data,
                }
            }
        };
        if let AgentEvent::Finished(summary) = event {
            state.last_run = Some(LastRun {
                status: summary.status,
            });
            // Free before anyone hears the run is over, so a run started on `finished` is
            // never refused as busy.
            if state.run.as_ref().is_some_and(|r| r.run_id == run_id) {
                state.run = None;
            }
        }
        let finished = matches!(event, AgentEvent::Finished(_));
        push(&mut state, &self.tx, frame);
        if finished {
            while state.ring.len() > IDLE_FRAMES {
                if let Some(old) = state.ring.pop_front() {
                    state.ring_bytes -= old.data.len();
                }
            }
        }
    }

    /// Publishes entries appended outside a run (a `/compact`), skipping any already sent.
    pub(crate) fn publish_entries(&self, entries: &[ba_storage::StoredEntry]) {
        let mut state = self.lock();
        for e in entries {
            if e.seq > state.cursor.seq {
                push(
                    &mut state,
                    &self.tx,
                    Frame::entry(e.seq, e.appended_ms, &e.entry, None, &self.prices),
                );
            }
        }
    }

    /// The server's prices.
    pub(crate) fn prices(&self) -> &ba_agent::Prices {
        &self.prices
    }

    /// The run is over (its task ended, however).
    pub(crate) fn end(&self, run_id: &str) {
        let mut state = self.lock();
        if state.run.as_ref().is_some_and(|r| r.run_id == run_id) {
            state.run = None;
        }
    }
}

fn push(state: &mut HubState, tx: &broadcast::Sender<Arc<Frame>>, frame: Frame) {
    let frame = Arc::new(frame);
    state.cursor = frame.cursor;
    state.ring_bytes += frame.data.len();
    state.ring.push_back(Arc::clone(&frame));
    while state.ring.len() > RING_FRAMES || state.ring_bytes > RING_BYTES {
        match state.ring.pop_front() {
            Some(old) => state.ring_bytes -= old.data.len(),
            None => break,
        }
    }
    // No receiver is not an error: nobody is watching this conversation right now.
    let _ = tx.send(frame);
}

/// Keeps what a reconnecting client needs to redraw the round in flight.
fn track(run: &mut ActiveRun, event: &AgentEvent) {
    let sync = &mut run.sync;
    match event {
        AgentEvent::RoundStarted { round, .. } => {
            sync.round = *round;
            sync.text_so_far.clear();
            sync.thinking_so_far.clear();
            sync.open_tool_calls.clear();
        }
        AgentEvent::TextDelta { text, .. } => sync.text_so_far.push_str(text),
        AgentEvent::ThinkingDelta { text, .. } => sync.thinking_so_far.push_str(text),
        AgentEvent::ToolCallStarted {
            call_id,
            name,
            arguments,
            ..
        } => sync.open_tool_calls.push(OpenCall {
            call_id: call_id.clone(),
            name: name.clone(),
            arguments: arguments.clone(),
        }),
        AgentEvent::ToolResult { call_id, .. } => {
            sync.open_tool_calls.retain(|c| c.call_id != *call_id);
        }
        _ => {}
    }
}

/// The snake_case name of an event and its data (the event's fields and the run id).
pub(crate) fn split_event(event: &AgentEvent, run_id: &str) -> (String, String) {
    let mut map = match serde_json::to_value(event) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let name = match map.remove("event") {
        Some(Value::String(s)) => s,
        _ => "unknown".to_owned(),
    };
    map.insert("run_id".into(), Value::String(run_id.to_owned()));
    if name == "final_answer" {
        crate::render::decorate(&mut map, "response");
    }
    (name, Value::Object(map).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_and_order() {
        let a = Cursor { seq: 3, k: 0 };
        let b = Cursor { seq: 3, k: 17 };
        assert_eq!(Cursor::parse(&a.id()), Some(a));
        assert_eq!(Cursor::parse(&b.id()), Some(b));
        assert!(a < b && b < Cursor { seq: 4, k: 0 });
        assert_eq!(Cursor::parse("x"), None);
        assert_eq!(Cursor::parse("1.2.3"), None);
    }

    #[test]
    fn the_ring_is_bounded() {
        let hub = Hub::new(0, Arc::default());
        for i in 0..(RING_FRAMES + 10) {
            hub.publish_event(
                "r",
                &AgentEvent::TextDelta {
                    round: 1,
                    text: i.to_string(),
                },
            );
        }
        assert_eq!(hub.lock().ring.len(), RING_FRAMES);
    }
}
