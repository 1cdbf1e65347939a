//! The scheduler: on every tick it looks at each schedule of the store, claims the occurrence
//! that is due (the store claims it once across every server sharing it) and starts the
//! schedule's workflow in a new conversation of the schedule's owner, titled with the
//! schedule's name and the occurrence's date, within the schedule's budget. A run a server
//! left unfinished (it died mid-run: its lease is gone) is resumed by the next tick of any
//! server, in the same conversation, not started again.
//!
//! The scheduler reads time from a [`Clock`], so tests move time instead of waiting.

use std::sync::Arc;
use std::time::Duration;

use ba_agent::{Input, RunOptions, RunSummary};
use ba_storage::{
    Claim, Clock, ConversationId, Due, NewConversation, Schedule, ScheduledRun, Schedules,
    StorageError,
};

use crate::runs::start_run;
use crate::state::AppState;
use crate::webhook;

/// How long an unfinished run's claim is left to the server that made it before another may
/// resume it (the claimer creates the conversation and takes its lease within moments).
pub const RESUME_AFTER_MS: i64 = 60_000;

/// What a tick did with one occurrence.
#[derive(Debug)]
pub struct Fired {
    /// The schedule.
    pub schedule_id: String,
    /// The occurrence.
    pub occurrence_ms: i64,
    /// The conversation it runs in.
    pub conversation_id: String,
    /// The run as recorded when it ends (`None` from the task: the store could not be
    /// written).
    pub done: tokio::task::JoinHandle<Option<ScheduledRun>>,
}

/// Starts scheduled workflows. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    state: AppState,
    clock: Arc<dyn Clock>,
    webhooks: webhook::Sender,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

/// The request id of an occurrence's run: the same on every server, so a resumed run finds
/// the workflow already started in the log.
fn request_id(schedule_id: &str, occurrence_ms: i64) -> String {
    format!("schedule:{schedule_id}:{occurrence_ms}")
}

/// The conversation an occurrence runs in.
fn conversation_of(schedule_id: &str, occurrence_ms: i64) -> Result<ConversationId, StorageError> {
    ConversationId::new(format!("{schedule_id}-{occurrence_ms}"))
}

impl Scheduler {
    /// A scheduler of `state`'s store, reading time from its configuration's clock and
    /// posting webhooks with its sender.
    pub fn new(state: AppState) -> Self {
        let (clock, webhooks) = (
            Arc::clone(&state.config().clock),
            state.config().webhooks.clone(),
        );
        Self {
            state,
            clock,
            webhooks,
        }
    }

    fn schedules(&self) -> Option<Arc<dyn Schedules>> {
        self.state.store().schedules()
    }

    /// Ticks every `every` until the server shuts down.
    pub fn spawn(self, every: Duration) -> tokio::task::JoinHandle<()> {
        let mut shutdown = self.state.0.shutdown.subscribe();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = interval.tick() => {}
                    _ = shutdown.wait_for(|s| *s) => return,
                }
                if let Err(e) = self.tick().await {
                    tracing::warn!("the scheduler could not read the schedules: {e}");
                }
            }
        })
    }

    /// One look at every schedule: resumes the runs servers left unfinished, then claims and
    /// starts what is due. Gives what it started.
    ///
    /// # Errors
    /// The store's, reading the schedules.
    pub async fn tick(&self) -> Result<Vec<Fired>, StorageError> {
        let Some(schedules) = self.schedules() else {
            return Ok(Vec::new());
        };
        let mut fired = self.resume_left(&schedules).await?;
        let now = self.clock.now_ms();
        for schedule in schedules.schedules().await? {
            let last = schedules.runs(&schedule.id, 1).await?;
            match schedule.due(last.first().map(|r| r.occurrence_ms), now) {
                Due::OnTime(at) | Due::CaughtUp(at) => {
                    if let Some(f) = self.fire(&schedules, &schedule, at).await {
                        fired.push(f);
                    }
                }
                Due::Skipped(_) | Due::Nothing => {}
            }
        }
        Ok(fired)
    }

    /// Runs a schedule now, as an occurrence at the clock's time (paused or not).
    ///
    /// # Errors
    /// [`StorageError::NoSchedule`]; the store's.
    pub async fn run_now(&self, schedule_id: &str) -> Result<Option<Fired>, StorageError> {
        let schedules = self.schedules().ok_or_else(|| StorageError::NoSchedule {
            id: schedule_id.to_owned(),
        })?;
        let schedule =
            schedules
                .schedule(schedule_id)
                .await?
                .ok_or_else(|| StorageError::NoSchedule {
                    id: schedule_id.to_owned(),
                })?;
        Ok(self.fire(&schedules, &schedule, self.clock.now_ms()).await)
    }

    /// Claims occurrence `at` of `schedule` and starts it; `None` when another claimed it.
    async fn fire(
        &self,
        schedules: &Arc<dyn Schedules>,
        schedule: &Schedule,
        at: i64,
    ) -> Option<Fired> {
        let conversation = match conversation_of(&schedule.id, at) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("schedule {}: {e}", schedule.id);
                return None;
            }
        };
        match schedules
            .claim(&schedule.id, at, conversation.as_str())
            .await
        {
            Ok(Claim::Claimed(_)) => {}
            Ok(Claim::Taken(_)) => return None,
            Err(e) => {
                tracing::warn!("schedule {}: claiming {at}: {e}", schedule.id);
                return None;
            }
        }
        tracing::info!(
            "schedule {} ({}) fires for {} in conversation {conversation}",
            schedule.id,
            schedule.spec.name,
            schedule.date_of(at)
        );
        Some(
            self.start(schedules, schedule, at, conversation, false)
                .await,
        )
    }

    /// Unfinished runs whose server is gone (claimed a while ago, nobody holds the
    /// conversation's lease): resumed here.
    async fn resume_left(
        &self,
        schedules: &Arc<dyn Schedules>,
    ) -> Result<Vec<Fired>, StorageError> {
        let now = self.clock.now_ms();
        let mut fired = Vec::new();
        for left in schedules.unfinished_runs().await? {
            if now - left.claimed_ms < RESUME_AFTER_MS {
                continue;
            }
            let Ok(conversation) = ConversationId::new(left.conversation_id.clone()) else {
                continue;
            };
            if self
                .state
                .store()
                .run_holder(&conversation)
                .await?
                .is_some()
            {
                continue;
            }
            let Some(schedule) = schedules.schedule(&left.schedule_id).await? else {
                continue;
            };
            tracing::info!(
                "schedule {}: resuming the run of {} its server left in conversation \
                 {conversation}",
                schedule.id,
                schedule.date_of(left.occurrence_ms)
            );
            fired.push(
                self.start(schedules, &schedule, left.occurrence_ms, conversation, true)
                    .await,
            );
        }
        Ok(fired)
    }

    /// Starts (or resumes) the run of occurrence `at` in `conversation`, and a task that
    /// records how it ended and posts the webhook.
    async fn start(
        &self,
        schedules: &Arc<dyn Schedules>,
        schedule: &Schedule,
        at: i64,
        conversation: ConversationId,
        resume: bool,
    ) -> Fired {
        let started = self.begin(schedule, at, &conversation, resume).await;
        let schedule_id = schedule.id.clone();
        let (schedules, schedule, webhooks) = (
            Arc::clone(schedules),
            schedule.clone(),
            self.webhooks.clone(),
        );
        let conversation_id = conversation.to_string();
        let done = tokio::spawn(async move {
            let summary = match started {
                Ok(Some(handle)) => handle.await.unwrap_or_else(|e| {
                    RunSummary::failed(conversation.as_str(), format!("the run's task: {e}"))
                }),
                // Another server runs it (it holds the lease): that server records it.
                Ok(None) => return None,
                Err(message) => RunSummary::failed(conversation.as_str(), message),
            };
            let recorded = schedules
                .finish_run(
                    &schedule.id,
                    at,
                    summary.status.as_str(),
                    summary.error.as_deref(),
                )
                .await;
            let run = match recorded {
                Ok(run) => run,
                Err(e) => {
                    tracing::warn!("schedule {}: recording a run's end: {e}", schedule.id);
                    None
                }
            };
            if let (Some(hook), Some(run)) = (&schedule.spec.webhook, &run) {
                webhooks.post(hook.clone(), webhook::payload(&schedule, run));
            }
            run
        });
        Fired {
            schedule_id,
            occurrence_ms: at,
            conversation_id,
            done,
        }
    }

    /// The conversation created (when new) and the run started: its summary's handle,
    /// `None` when another server holds it, or why it could not start.
    async fn begin(
        &self,
        schedule: &Schedule,
        at: i64,
        conversation: &ConversationId,
        resume: bool,
    ) -> Result<Option<tokio::task::JoinHandle<RunSummary>>, String> {
        let spec = &schedule.spec;
        let new = NewConversation {
            title: Some(format!("{} — {}", spec.name, schedule.date_of(at))),
            owner: Some(spec.owner.clone()),
            ..NewConversation::default()
        };
        match self.state.store().create(conversation, new).await {
            Ok(_) | Err(StorageError::AlreadyExists { .. }) => {}
            Err(e) => return Err(format!("creating the conversation: {e}")),
        }
        let inputs = schedule.inputs_at(at).map_err(|e| e.to_string())?;
        if let Err(e) = self
            .state
            .agent()
            .workflows()
            .start(&spec.workflow, &inputs)
        {
            return Err(e.to_string());
        }
        let request = request_id(&schedule.id, at);
        let logged = resume
            && self
                .state
                .store()
                .load(conversation)
                .await
                .map_err(|e| e.to_string())?
                .entries
                .iter()
                .any(|s| s.entry.records.request_id.as_deref() == Some(request.as_str()));
        // A resume whose workflow had started goes on from the log, under a new request id
        // (the old one names the run that died).
        let (request, input) = if logged {
            (
                format!("{request}:resume:{}", uuid::Uuid::new_v4().simple()),
                Input::Resume,
            )
        } else {
            (
                request,
                Input::Workflow {
                    name: spec.workflow.clone(),
                    inputs,
                },
            )
        };
        let options = RunOptions::default()
            .with_actor(spec.owner.clone())
            .with_conversation_caps(spec.budget.usd, spec.budget.tokens);
        match start_run(&self.state, conversation, request, input, options).await {
            Ok(started) => Ok(started.done),
            Err(e) if e.code == "busy" => Ok(None),
            Err(e) => Err(e.message),
        }
    }
}
