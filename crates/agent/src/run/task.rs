//! A run's task, from its lease to its `Finished`: the lease taken (or the refusal reported),
//! the run entered in the agent's table of live runs, its runner built, the store watched for
//! a cancel request while the state machine goes, and the end in its fixed order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ba_storage::{ConversationId, ConversationStore, RunLease};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tracing::Instrument as _;
use tracing::field::Empty;

use super::state::{LeaseWatch, Naming, RunKit};
use super::{Control, LiveEntry, Run, Runner, Signal};
use crate::adapters::WorkspaceFiles;
use crate::agent::{Agent, Input, RunOptions};
use crate::error::{AgentError, ErrorKind};
use crate::events::{AgentEvent, RunStatus, RunSummary};
use crate::history::History;
use crate::parts::Inner;

/// How long the end of a run waits for the summary model's title of a new conversation.
const TITLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The conversation whose files a run of `id` uses: `id` itself, or for a sub-agent's
/// conversation the top of its `parent` chain (the user's conversation, whose uploads the
/// sub-task reads and whose outputs it adds to). A parent that cannot be read ends the walk.
async fn files_owner(store: &dyn ConversationStore, id: &ConversationId) -> ConversationId {
    let mut owner = id.clone();
    for _ in 0..8 {
        let parent = match store.metadata(&owner).await {
            Ok(meta) => meta.parent,
            Err(_) => None,
        };
        match parent.map(ConversationId::new) {
            Some(Ok(parent)) if parent != owner => owner = parent,
            _ => break,
        }
    }
    owner
}

impl Agent {
    /// Starts a run on a tokio task and returns its events as a stream. The run takes the
    /// conversation's lease first; when another run holds it, the stream says so (an
    /// [`AgentEvent::Error`] of kind `busy` naming the holder, then a failed
    /// [`AgentEvent::Finished`]). Dropping the stream cancels the run; what was appended stays,
    /// and [`Input::Resume`] goes on from it. Must be called within a tokio runtime.
    pub fn send(&self, id: &ConversationId, input: Input) -> Run {
        self.send_with(id, input, RunOptions::default())
    }

    /// [`Agent::send`] with options: the caller's ids and more events.
    pub fn send_with(&self, id: &ConversationId, input: Input, options: RunOptions) -> Run {
        let run_id = run_id_of(&options);
        self.spawn(id, input, options, run_id, None)
    }

    /// Takes the conversation's lease, then starts the run as [`Agent::send_with`] does: a
    /// refusal comes back here, before anything runs.
    ///
    /// # Errors
    /// [`AgentError::Busy`] naming the run that holds the conversation; the store's.
    pub async fn start(
        &self,
        id: &ConversationId,
        input: Input,
        options: RunOptions,
    ) -> Result<Run, AgentError> {
        let run_id = run_id_of(&options);
        let lease = self.inner.leases.take(id, &run_id).await?;
        Ok(self.spawn(id, input, options, run_id, Some(lease)))
    }

    fn spawn(
        &self,
        id: &ConversationId,
        input: Input,
        options: RunOptions,
        run_id: String,
        lease: Option<RunLease>,
    ) -> Run {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (control, signal) = Control::new();
        let live = self
            .inner
            .leases
            .live()
            .insert(id, &run_id, control.clone());
        let launch = Launch {
            inner: Arc::clone(&self.inner),
            id: id.clone(),
            input,
            options,
            run_id: run_id.clone(),
            lease,
            tx,
            control: control.clone(),
            signal,
            live,
        };
        // The caller's span (a `task` tool call, for a sub-agent) becomes the run's parent, so
        // a child agent's run nests in the call that started it; a front end has none.
        tokio::spawn(run(launch).instrument(tracing::Span::current()));
        Run::new(run_id, rx, control)
    }
}

/// The run id of `options`, or a new one.
fn run_id_of(options: &RunOptions) -> String {
    options
        .run_id
        .clone()
        .unwrap_or_else(|| format!("run_{}", uuid::Uuid::new_v4().simple()))
}

/// A run about to start: what [`crate::Agent`] hands the task it spawns.
struct Launch {
    inner: Arc<Inner>,
    id: ConversationId,
    input: Input,
    options: RunOptions,
    run_id: String,
    /// The lease, when the caller took it before spawning ([`crate::Agent::start`]).
    lease: Option<RunLease>,
    tx: UnboundedSender<AgentEvent>,
    control: Control,
    signal: watch::Receiver<Signal>,
    /// The run's place in the agent's table of live runs, taken before the task starts so a
    /// cancel by run id finds the run from the moment its id is known.
    live: LiveEntry,
}

/// Looks, every `cancel_poll`, in the store for a cancel request naming this run (made by
/// another process through [`crate::Agent::cancel`]) and at the run's lease: a request raises
/// the cancel signal; a lease found lost (its database session cut) marks the run's lease as
/// lost and cancels it, so that it writes nothing more beside a run that may have taken the
/// conversation. Never resolves.
async fn watch_store_for_cancel(
    inner: Arc<Inner>,
    id: ConversationId,
    run_id: String,
    control: Control,
    lease: &RunLease,
    lost: Arc<AtomicBool>,
) {
    let mut look = tokio::time::interval(inner.settings.cancel_poll);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    look.tick().await;
    while control.signal() != Signal::Cancel {
        look.tick().await;
        if !lease.is_held() {
            tracing::error!(conversation = %id, run = %run_id, "the run's lease was lost");
            lost.store(true, Ordering::SeqCst);
            control.raise(Signal::Cancel);
            break;
        }
        match inner.store.cancel_requested(&id).await {
            Ok(Some(requested)) if requested == run_id => control.raise(Signal::Cancel),
            Ok(_) => {}
            Err(e) => tracing::warn!(conversation = %id, "reading cancel requests: {e}"),
        }
    }
    std::future::pending::<()>().await;
}

/// What a run that lost its lease says.
pub(crate) const LEASE_LOST: &str = "the conversation's run lease was lost (its database \
    session was cut); the run stopped writing so that no other run writes beside it — send \
    `continue` to go on";

/// A run from its lease to its `Finished`, on the task [`crate::Agent`] spawned.
async fn run(launch: Launch) {
    let Launch {
        inner,
        id,
        input,
        options,
        run_id,
        lease,
        tx,
        control,
        signal,
        live,
    } = launch;
    let lease = match lease {
        Some(lease) => lease,
        None => match inner.leases.take(&id, &run_id).await {
            Ok(lease) => lease,
            Err(e) => return refused(&tx, &id, &e),
        },
    };
    let mut runner = Runner::new(Arc::clone(&inner), id.clone(), tx, signal, options).await;
    let span = tracing::info_span!(
        "run",
        conversation_id = %id,
        run_id = %run_id,
        input = input.kind().as_str(),
        mode = Empty,
        rounds = Empty,
        status = Empty,
    );
    let lease = Arc::new(lease);
    let lost = runner.lease.watch(&lease);
    let watch = watch_store_for_cancel(
        Arc::clone(&inner),
        id.clone(),
        run_id.clone(),
        control,
        &lease,
        Arc::clone(&lost),
    );
    let outcome = tokio::select! {
        outcome = runner.go(input).instrument(span.clone()) => outcome,
        () = watch => unreachable!("the store watch never resolves"),
    };
    // Cut by the loss of its lease, whatever the cut made of it.
    let outcome = match outcome {
        Ok(summary) if lost.load(Ordering::SeqCst) && summary.status != RunStatus::Answered => {
            Err(super::Stop {
                kind: ErrorKind::LeaseLost,
                message: LEASE_LOST.into(),
            })
        }
        other => other,
    };
    let summary = match outcome {
        Ok(summary) => summary,
        Err(stop) if stop.kind == ErrorKind::Cancelled => runner.cancelled(false),
        Err(stop) => {
            runner.emit(AgentEvent::Error {
                round: runner.round,
                kind: stop.kind,
                message: stop.message.clone(),
                // A run that lost its lease left the log as a cancel does.
                resumable: stop.kind == ErrorKind::LeaseLost,
            });
            runner.summary(RunStatus::Failed, None, Some(stop.message))
        }
    };
    // The summary model's title, if it is still being written: a bounded wait, so the
    // conversation is named when the run is over (a slow title costs only the title).
    if let Some(task) = runner.naming.task.take()
        && tokio::time::timeout(TITLE_WAIT, task).await.is_err()
    {
        tracing::warn!(conversation = %id, "the summary model's title took too long");
    }
    span.record("rounds", summary.rounds);
    span.record("status", summary.status.as_str());
    drop(span);
    // The last records, in order: a cancel request naming this run is answered; the run
    // leaves the store's lease and then this process's table (whose notice wakes a run
    // waiting for this one), so a run started on `Finished` (or on the end of the stream) is
    // never refused as busy; then `Finished`.
    clear_cancel_request(inner.store.as_ref(), &id, &run_id).await;
    drop(lease);
    drop(live);
    runner.emit(AgentEvent::Finished(summary));
}

/// A run that could not take the lease ends at once, saying why.
fn refused(tx: &UnboundedSender<AgentEvent>, id: &ConversationId, e: &AgentError) {
    let message = e.to_string();
    let _ = tx.send(AgentEvent::Error {
        round: 0,
        kind: e.kind(),
        message: message.clone(),
        resumable: false,
    });
    let _ = tx.send(AgentEvent::Finished(RunSummary::failed(
        id.as_str(),
        message,
    )));
}

/// Clears the conversation's cancel request when it names `run_id` (it has been answered).
async fn clear_cancel_request(store: &dyn ConversationStore, id: &ConversationId, run_id: &str) {
    if let Ok(Some(requested)) = store.cancel_requested(id).await
        && requested == run_id
        && let Err(e) = store.clear_cancel(id).await
    {
        tracing::warn!(conversation = %id, "clearing the cancel request: {e}");
    }
}

impl Runner {
    /// The runner of a run of `id`: its tools, tool list and skills catalogue as they are now
    /// (kept to its end), and its conversation's files.
    async fn new(
        inner: Arc<Inner>,
        id: ConversationId,
        tx: UnboundedSender<AgentEvent>,
        signal: watch::Receiver<Signal>,
        options: RunOptions,
    ) -> Self {
        let files = match &inner.workspace {
            Some(workspace) => Some(Arc::new(WorkspaceFiles::new(
                Arc::clone(workspace),
                files_owner(inner.store.as_ref(), &id).await,
            ))),
            None => None,
        };
        let kit = RunKit::new(
            inner.tools.for_run(),
            inner.tools.catalogue(),
            files,
            &inner.builders,
        );
        Self {
            history: History::new(Arc::clone(&inner.store), id.clone()),
            inner,
            id,
            tx,
            signal,
            options,
            mode: ba_protocol::Mode::default(),
            round: 0,
            rounds_run: 0,
            format_retries: 0,
            usage: 0.0,
            kit,
            lease: LeaseWatch::default(),
            stop_continues: 0,
            overflow_retry: false,
            meter: None,
            naming: Naming::default(),
            workflow: None,
        }
    }
}
