//! `GET …/events`: one SSE stream per conversation. With `Last-Event-ID` (or `?last_event_id=`)
//! it resumes exactly: from the hub's ring when it still holds the cursor; otherwise every entry
//! after the cursor from the durable log, a `sync` frame for the round in flight, then live.
//! A stream that falls behind the broadcast catches up from the log the same way, so no client
//! is ever "too far behind" and memory stays bounded.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use ba_storage::{ConversationId, ConversationStore};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

use crate::conversations::conversation_id;
use crate::error::{ApiError, ApiResult};
use crate::hub::{Cursor, Frame, Hub, Start};
use crate::state::AppState;
use crate::wire::ResetFrame;

/// Entries read from the log per catch-up step.
const CATCH_UP_BATCH: u64 = 256;

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    last_event_id: Option<String>,
}

/// A stream's state between frames.
struct Tail {
    pending: VecDeque<Arc<Frame>>,
    rx: broadcast::Receiver<Arc<Frame>>,
    /// The cursor of the last frame sent; later frames at or before it are dropped.
    last: Option<Cursor>,
    /// Read the log after this sequence number before going on live.
    catch_up: Option<u64>,
    hub: Arc<Hub>,
    store: Arc<dyn ConversationStore>,
    id: ConversationId,
    shutdown: watch::Receiver<bool>,
}

pub(crate) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = conversation_id(&id)?;
    let given = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(q.last_event_id);
    let after = match given.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => Some(Cursor::parse(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Last-Event-ID {text:?} is not a cursor of this server"
            ))
        })?),
        None => None,
    };
    let hub = state.hub(&id).await?;
    let (rx, start, now) = hub.subscribe(after);
    follow_log(&state, &id, &hub);
    let mut tail = Tail {
        pending: VecDeque::new(),
        rx,
        last: after,
        catch_up: None,
        hub: Arc::clone(&hub),
        store: Arc::clone(state.store()),
        id,
        shutdown: state.0.shutdown.subscribe(),
    };
    match start {
        Start::Ring(frames) => tail.pending.extend(frames),
        Start::Live => {
            tail.last = Some(now);
            if let Some(sync) = hub.sync_frame() {
                tail.pending.push_back(Arc::new(sync));
            }
        }
        Start::Log { after_seq } => {
            let meta = tail.store.metadata(&tail.id).await?;
            if after_seq > meta.last_seq {
                // A cursor past the end of the log (another store, a wiped log): the client
                // must reload the transcript.
                tail.pending.push_back(Arc::new(Frame {
                    cursor: now,
                    event: "reset".into(),
                    data: serde_json::to_string(&ResetFrame {
                        last_seq: meta.last_seq,
                    })
                    .unwrap_or_default(),
                }));
                tail.last = None;
            } else {
                tail.catch_up = Some(after_seq);
            }
        }
    }
    let stream = futures::stream::unfold(tail, next_frame);
    let sse = Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(state.config().keep_alive)
            .text("ping"),
    );
    let mut response = sse.into_response();
    let h = response.headers_mut();
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    Ok(response)
}

fn to_event(frame: &Frame) -> Event {
    Event::default()
        .id(frame.cursor.id())
        .event(frame.event.as_str())
        .data(frame.data.as_str())
}

/// The next event of a stream; `None` ends it (shutdown, or the hub is gone).
async fn next_frame(tail: Tail) -> Option<(Result<Event, Infallible>, Tail)> {
    let (frame, tail) = next_raw(tail).await?;
    Some((Ok(to_event(&frame)), tail))
}

/// The next frame of a stream, in cursor order, none twice (a `sync` frame aside).
async fn next_raw(mut tail: Tail) -> Option<(Arc<Frame>, Tail)> {
    loop {
        if let Some(frame) = tail.pending.pop_front() {
            if tail
                .last
                .is_some_and(|l| frame.cursor <= l && frame.event != "sync")
            {
                continue;
            }
            if frame.event != "sync" {
                tail.last = Some(frame.cursor);
            }
            return Some((frame, tail));
        }
        if let Some(after) = tail.catch_up.take() {
            if catch_up(&mut tail, after).await.is_err() {
                return None;
            }
            continue;
        }
        if *tail.shutdown.borrow() {
            return None;
        }
        tokio::select! {
            got = tail.rx.recv() => match got {
                Ok(frame) => tail.pending.push_back(frame),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    tail.catch_up = Some(tail.last.map_or(0, |c| c.seq));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            _ = tail.shutdown.changed() => return None,
        }
    }
}

/// Queues the entries after `after` from the log, in batches, then the `sync` frame of the
/// round in flight.
async fn catch_up(tail: &mut Tail, after: u64) -> Result<(), ba_storage::StorageError> {
    let loaded = tail.store.load_from(&tail.id, after + 1).await?;
    let mut last_seq = after;
    for stored in loaded.entries.iter().take(CATCH_UP_BATCH as usize) {
        last_seq = stored.seq;
        tail.pending.push_back(Arc::new(Frame::entry(
            stored.seq,
            stored.appended_ms,
            &stored.entry,
            None,
            tail.hub.prices(),
        )));
    }
    if loaded.entries.len() as u64 > CATCH_UP_BATCH {
        tail.catch_up = Some(last_seq);
    } else if let Some(sync) = tail.hub.sync_frame() {
        // Only when it names a point after what the client has: cursors never go back.
        if tail.last.is_none_or(|l| sync.cursor > l) && sync.cursor.seq >= last_seq {
            tail.pending.push_back(Arc::new(sync));
        }
    }
    Ok(())
}

/// Starts, once per hub, a task that publishes the entries other processes sharing the store
/// append (their runs are seen through the log); it ends when the hub has no stream left or
/// the server shuts down.
fn follow_log(state: &AppState, id: &ConversationId, hub: &Arc<Hub>) {
    {
        let mut hs = hub.lock();
        if hs.tailing {
            return;
        }
        hs.tailing = true;
    }
    let (state, id, hub) = (state.clone(), id.clone(), Arc::clone(hub));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(state.config().log_poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutdown = state.0.shutdown.subscribe();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => break,
            }
            let after = {
                let mut hs = hub.lock();
                if hub.listeners() == 0 || *shutdown.borrow() {
                    hs.tailing = false;
                    return;
                }
                if hs.run.is_some() {
                    continue;
                }
                hs.cursor.seq
            };
            match state.store().metadata(&id).await {
                Ok(meta) if meta.last_seq > after => {
                    if let Ok(loaded) = state.store().load_from(&id, after + 1).await {
                        hub.publish_entries(&loaded.entries);
                    }
                }
                Ok(_) => {}
                // The conversation is gone (deleted): nothing more to follow.
                Err(_) => break,
            }
        }
        hub.lock().tailing = false;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{LogEntry, LogRole};
    use ba_storage::{FileStore, NewConversation};

    fn entry(i: usize) -> LogEntry {
        let role = if i.is_multiple_of(2) {
            LogRole::User
        } else {
            LogRole::Assistant
        };
        LogEntry::new(format!("e{i}"), role, "2026-01-01T00:00:00Z").with_text(format!("line {i}"))
    }

    /// A stream that does not read while far more frames than the broadcast holds are
    /// published falls behind (`Lagged`); it then reads the entries it missed from the log and
    /// goes on live: every entry once, in order, none lost.
    #[tokio::test]
    async fn a_stream_that_falls_behind_catches_up_from_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let id = ConversationId::new("lagging").unwrap();
        store.create(&id, NewConversation::default()).await.unwrap();
        let hub = Arc::new(Hub::new(0, Arc::default()));
        let (rx, start, now) = hub.subscribe(None);
        assert!(matches!(start, Start::Live));
        let (_shutdown_tx, shutdown) = watch::channel(false);
        let mut tail = Tail {
            pending: VecDeque::new(),
            rx,
            last: Some(now),
            catch_up: None,
            hub: Arc::clone(&hub),
            store: Arc::clone(&store),
            id: id.clone(),
            shutdown,
        };
        // Three times the broadcast's room, in batches as runs append them, with deltas
        // between (which a lagging stream may lose: the entries carry the record).
        let total = 3 * 1024 + 17;
        let mut appended = 0;
        while appended < total {
            let n = (total - appended).min(100);
            let batch: Vec<LogEntry> = (appended..appended + n).map(entry).collect();
            store.append_batch(&id, &batch, None).await.unwrap();
            let stored = store.load_from(&id, appended as u64 + 1).await.unwrap();
            hub.publish_entries(&stored.entries);
            for k in 0..n {
                hub.publish_event(
                    "r",
                    &ba_agent::AgentEvent::TextDelta {
                        round: 1,
                        text: k.to_string(),
                    },
                );
            }
            appended += n;
        }
        let mut seqs = Vec::new();
        while seqs.last().copied().unwrap_or(0) < total as u64 {
            let (frame, next) = next_raw(tail).await.expect("the stream ended early");
            tail = next;
            if frame.event == "entry" {
                seqs.push(frame.cursor.seq);
            }
        }
        let expected: Vec<u64> = (1..=total as u64).collect();
        assert_eq!(seqs.len(), expected.len(), "entries missing or twice");
        assert_eq!(seqs, expected);
        // Live again: the next entry comes from the broadcast.
        store.append(&id, &entry(total), None).await.unwrap();
        let stored = store.load_from(&id, total as u64 + 1).await.unwrap();
        hub.publish_entries(&stored.entries);
        loop {
            let (frame, next) = next_raw(tail).await.expect("the stream ended early");
            tail = next;
            if frame.event == "entry" {
                assert_eq!(frame.cursor.seq, total as u64 + 1);
                break;
            }
        }
        assert!(tail.catch_up.is_none() && tail.pending.is_empty());
    }
}
