//! The caller's side of a run: [`Run`], the stream of its events and the one way to steer it
//! (a [`Signal`] that only rises: go on → stop after the round → cancel), and the agent's table
//! of the runs of this process, by run id, that cancels find them in.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use ba_storage::{ConversationId, ConversationStore, StorageError};
use tokio::sync::{mpsc, watch};

use crate::events::{AgentEvent, RunSummary};

/// How a run is being steered; it only rises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Signal {
    /// Go on.
    Go,
    /// Finish the round under way, start no other.
    StopAfterRound,
    /// Cut the call under way and end.
    Cancel,
}

/// Steers one run; clones steer the same run.
#[derive(Debug, Clone)]
pub(crate) struct Control(Arc<watch::Sender<Signal>>);

impl Control {
    pub(crate) fn new() -> (Self, watch::Receiver<Signal>) {
        let (tx, rx) = watch::channel(Signal::Go);
        (Self(Arc::new(tx)), rx)
    }

    /// Raises the signal to `to` (a lower one changes nothing).
    pub(crate) fn raise(&self, to: Signal) {
        self.0.send_if_modified(|now| {
            let higher = to > *now;
            if higher {
                *now = to;
            }
            higher
        });
    }

    pub(crate) fn signal(&self) -> Signal {
        *self.0.borrow()
    }
}

/// Cancels a run from anywhere (cheap to clone). Cancelling is cooperative and idempotent:
/// the model call in flight is cut and what it streamed is appended as an `llm_error` of kind
/// `cancelled`; tool calls under way are left to a resume; no new round starts.
#[derive(Debug, Clone)]
pub struct RunCanceller {
    control: Control,
}

impl RunCanceller {
    /// Asks the run to stop now.
    pub fn cancel(&self) {
        self.control.raise(Signal::Cancel);
    }

    /// Whether the run was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        self.control.signal() == Signal::Cancel
    }
}

/// What [`crate::Agent::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The run goes on in this process and was told to stop.
    Cancelling,
    /// The run goes on in another process sharing the store, which was asked through the
    /// store to stop it (it looks every [`crate::AgentSettings::cancel_poll`]).
    Requested,
    /// No such run goes on.
    NotRunning,
}

/// The runs of one agent in this process, by conversation and run id (what a cancel finds:
/// a run is found through its own conversation only, so a cancel that names another
/// conversation's run reaches nothing), and a notice each time one ends.
#[derive(Debug, Default)]
pub(crate) struct LiveRuns {
    runs: Mutex<HashMap<(ConversationId, String), Control>>,
    ended: tokio::sync::Notify,
}

impl LiveRuns {
    pub(crate) fn insert(
        self: &Arc<Self>,
        conversation: &ConversationId,
        run_id: &str,
        control: Control,
    ) -> LiveEntry {
        let key = (conversation.clone(), run_id.to_owned());
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), control);
        LiveEntry {
            runs: Arc::clone(self),
            key,
        }
    }

    /// Run `run_id` of `conversation`, when it goes on in this process.
    pub(crate) fn get(&self, conversation: &ConversationId, run_id: &str) -> Option<Control> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(conversation.clone(), run_id.to_owned()))
            .cloned()
    }

    /// Whether a run of `conversation` going on in this process was cancelled (it is
    /// writing its last records and lets the conversation go within moments).
    pub(crate) fn cancelled_in(&self, conversation: &ConversationId) -> bool {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|((c, _), control)| c == conversation && control.signal() == Signal::Cancel)
    }

    /// Resolves when a run of this table ends after the call (register before looking).
    pub(crate) fn ended(&self) -> tokio::sync::futures::Notified<'_> {
        self.ended.notified()
    }
}

/// A run's place in [`LiveRuns`], given up when the run ends.
pub(crate) struct LiveEntry {
    runs: Arc<LiveRuns>,
    key: (ConversationId, String),
}

impl Drop for LiveEntry {
    fn drop(&mut self) {
        self.runs
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        self.runs.ended.notify_waiters();
    }
}

/// The error of a run whose stream ended without [`AgentEvent::Finished`].
pub const NO_SUMMARY: &str = "the run ended without a summary (it was cancelled or panicked)";

/// A run of a conversation: a stream of [`AgentEvent`]s ending with [`AgentEvent::Finished`].
///
/// A run owns, for its whole life, the conversation's run lease in the store (so no other run
/// — in this process, another front end or another server sharing the store — goes on beside
/// it), and it is steered from here: [`Run::stop_after_round`], [`Run::canceller`], a cancel
/// requested through the store by another process ([`crate::Agent::cancel`]) — and dropping
/// it, which cancels it the same way. The last records are in the log and the lease is free
/// before [`AgentEvent::Finished`] is sent, so a run started on it is never refused.
#[derive(Debug)]
pub struct Run {
    run_id: String,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    control: Control,
}

impl Run {
    pub(crate) fn new(
        run_id: String,
        rx: mpsc::UnboundedReceiver<AgentEvent>,
        control: Control,
    ) -> Self {
        Self {
            run_id,
            rx,
            control,
        }
    }

    /// The run's id: the caller's ([`crate::RunOptions::with_ids`]) or a generated `run_…`.
    pub fn id(&self) -> &str {
        &self.run_id
    }

    /// A handle that cancels the run (see [`RunCanceller`]); keep reading the stream to its
    /// end, which comes with [`AgentEvent::Cancelled`] and [`AgentEvent::Finished`].
    pub fn canceller(&self) -> RunCanceller {
        RunCanceller {
            control: self.control.clone(),
        }
    }

    /// Asks the run to stop at the end of its round: the model call and tool calls under way
    /// finish and land in the log, no new round starts, and the run ends with
    /// [`RunStatus::Stopped`](crate::RunStatus::Stopped). Keep reading the stream to its end.
    pub fn stop_after_round(&self) {
        self.control.raise(Signal::StopAfterRound);
    }

    /// Waits for the end of the run, dropping the other events.
    pub async fn finish(mut self) -> RunSummary {
        use futures::StreamExt;
        while let Some(event) = self.next().await {
            if let AgentEvent::Finished(summary) = event {
                return summary;
            }
        }
        RunSummary::failed("", NO_SUMMARY)
    }

    /// Asks the run that holds conversation `id` — in any process sharing `store` — to cancel,
    /// through the store: that run looks for the request every
    /// [`crate::AgentSettings::cancel_poll`] and stops as [`RunCanceller::cancel`] would stop
    /// it. With `run_id`, only that run. This is how a process without the run's [`Run`] (a
    /// second server, `ba-agent cancel`) stops it.
    ///
    /// # Errors
    /// The store's.
    pub async fn request_cancel(
        store: &dyn ConversationStore,
        id: &ConversationId,
        run_id: Option<&str>,
    ) -> Result<CancelOutcome, StorageError> {
        let Some(holder) = store.run_holder(id).await? else {
            return Ok(CancelOutcome::NotRunning);
        };
        if holder.run_id.is_empty() || run_id.is_some_and(|r| r != holder.run_id) {
            return Ok(CancelOutcome::NotRunning);
        }
        Ok(if store.request_cancel(id, &holder.run_id).await? {
            CancelOutcome::Requested
        } else {
            CancelOutcome::NotRunning
        })
    }

    /// Collects every event up to the end.
    pub async fn collect_events(mut self) -> Vec<AgentEvent> {
        use futures::StreamExt;
        let mut out = Vec::new();
        while let Some(event) = self.next().await {
            out.push(event);
        }
        out
    }
}

impl futures::Stream for Run {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.control.raise(Signal::Cancel);
    }
}
