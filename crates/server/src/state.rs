//! What every handler shares: the agent, the hubs of the conversations, the settings, and the
//! count of runs in flight (for a bounded drain at shutdown).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ba_agent::Agent;
use ba_storage::{ConversationId, ConversationStore};
use tokio::sync::watch;

use crate::error::ApiResult;
use crate::hub::Hub;

/// Hubs kept at most; idle ones (no run, no stream) go first.
const MAX_HUBS: usize = 1024;

/// The settings of a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Bytes of a JSON body at most (1 MiB).
    pub json_limit: usize,
    /// Bytes of an upload request at most (50 MiB).
    pub upload_limit: usize,
    /// The recorded questions of the offline demo (`GET /api/v1/demo/questions`), when the
    /// server runs it.
    pub demo_questions: Option<Vec<String>>,
    /// More `host:port` values the `Host` check accepts (for a proxy or a non-loopback name).
    pub allowed_hosts: Vec<String>,
    /// How long shutdown waits for runs in flight before it cancels them.
    pub drain: Duration,
    /// Time between keep-alive comments on event streams (15 s).
    pub keep_alive: Duration,
    /// Where `cargo xtask assets` put the page's third-party assets (`echarts.min.js`).
    pub assets_dir: Option<PathBuf>,
    /// How often a conversation with open streams and no run here looks at the log for
    /// entries another server appended, and a run here looks for a cancel request another
    /// server recorded in the store (250 ms).
    pub log_poll: Duration,
    /// The scheduler's clock (the system's; tests move a manual one).
    pub clock: Arc<dyn ba_storage::Clock>,
    /// How the results of scheduled runs are posted.
    pub webhooks: crate::webhook::Sender,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerConfig {
    /// Defaults: 1 MiB of JSON, 50 MiB an upload, a 5 s drain, a ping every 15 s. The
    /// conversations' files are the store's ([`ba_storage::ConversationStore::workspace`]).
    pub fn new() -> Self {
        Self {
            json_limit: 1024 * 1024,
            upload_limit: 50 * 1024 * 1024,
            demo_questions: None,
            allowed_hosts: Vec::new(),
            drain: Duration::from_secs(5),
            keep_alive: Duration::from_secs(15),
            assets_dir: None,
            log_poll: Duration::from_millis(250),
            clock: Arc::new(ba_storage::SystemClock),
            webhooks: crate::webhook::Sender::default(),
        }
    }

    /// The scheduler reads time from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn ba_storage::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Scheduled runs' results are posted by `webhooks`.
    pub fn with_webhooks(mut self, webhooks: crate::webhook::Sender) -> Self {
        self.webhooks = webhooks;
        self
    }

    /// Serves these demo questions.
    pub fn with_demo_questions(mut self, questions: Vec<String>) -> Self {
        self.demo_questions = Some(questions);
        self
    }

    /// Sets the upload limit in bytes.
    pub fn with_upload_limit(mut self, bytes: usize) -> Self {
        self.upload_limit = bytes;
        self
    }

    /// Sets the JSON body limit in bytes.
    pub fn with_json_limit(mut self, bytes: usize) -> Self {
        self.json_limit = bytes;
        self
    }

    /// Accepts more `Host` values.
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// Sets the time between keep-alive comments on event streams.
    pub fn with_keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every;
        self
    }

    /// Sets how often the log is read for other servers' appends.
    pub fn with_log_poll(mut self, every: Duration) -> Self {
        self.log_poll = every;
        self
    }

    /// Serves the page's assets (`echarts.min.js`) from `dir`.
    pub fn with_assets_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.assets_dir = Some(dir.into());
        self
    }

    /// Sets how long shutdown waits for runs.
    pub fn with_drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }
}

pub(crate) struct Shared {
    pub(crate) agent: Agent,
    pub(crate) config: ServerConfig,
    hubs: Mutex<HashMap<String, Arc<Hub>>>,
    /// Runs in flight.
    pub(crate) running: watch::Sender<usize>,
    /// Flips to `true` when the server shuts down: event streams end.
    pub(crate) shutdown: watch::Sender<bool>,
}

/// The state handlers share (cheap to clone).
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Shared>);

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("config", &self.0.config)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state of a server over `agent`.
    pub fn new(agent: Agent, config: ServerConfig) -> Self {
        Self(Arc::new(Shared {
            agent,
            config,
            hubs: Mutex::new(HashMap::new()),
            running: watch::channel(0).0,
            shutdown: watch::channel(false).0,
        }))
    }

    pub(crate) fn store(&self) -> &Arc<dyn ConversationStore> {
        self.0.agent.store()
    }

    pub(crate) fn agent(&self) -> &Agent {
        &self.0.agent
    }

    pub(crate) fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    fn hubs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Hub>>> {
        self.0
            .hubs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The hub of a conversation, if this process has one.
    pub(crate) fn existing_hub(&self, id: &ConversationId) -> Option<Arc<Hub>> {
        self.hubs().get(id.as_str()).cloned()
    }

    /// The hub of an existing conversation (404 when the store has none).
    pub(crate) async fn hub(&self, id: &ConversationId) -> ApiResult<Arc<Hub>> {
        if let Some(hub) = self.existing_hub(id) {
            return Ok(hub);
        }
        let meta = self.store().metadata(id).await?;
        let mut hubs = self.hubs();
        if hubs.len() >= MAX_HUBS {
            hubs.retain(|_, h| h.lock().run.is_some() || h.listeners() > 0);
        }
        Ok(Arc::clone(
            hubs.entry(id.as_str().to_owned()).or_insert_with(|| {
                Arc::new(Hub::new(
                    meta.last_seq,
                    Arc::new(self.agent().settings().prices.clone()),
                ))
            }),
        ))
    }

    /// Forgets a deleted conversation's hub.
    pub(crate) fn drop_hub(&self, id: &ConversationId) {
        self.hubs().remove(id.as_str());
    }

    /// Every hub with a run in flight.
    pub(crate) fn busy_hubs(&self) -> Vec<(String, Arc<Hub>)> {
        self.hubs()
            .iter()
            .filter(|(_, h)| h.lock().run.is_some())
            .map(|(id, h)| (id.clone(), Arc::clone(h)))
            .collect()
    }

    /// Ends the event streams and refuses new runs.
    pub fn begin_shutdown(&self) {
        self.0.shutdown.send_replace(true);
    }

    /// Ends the event streams, waits up to the drain bound for runs in flight, then cancels
    /// the rest (their partial answers land in the log) and waits a moment for them.
    pub async fn shutdown(&self) {
        self.0.shutdown.send_replace(true);
        let mut running = self.0.running.subscribe();
        let drained = tokio::time::timeout(self.config().drain, running.wait_for(|n| *n == 0))
            .await
            .is_ok();
        if drained {
            return;
        }
        for (id, hub) in self.busy_hubs() {
            let run_id = hub.lock().run.as_ref().map(|r| r.run_id.clone());
            if let (Some(run_id), Ok(id)) = (run_id, ConversationId::new(id)) {
                let _ = self.agent().cancel(&id, Some(&run_id)).await;
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), running.wait_for(|n| *n == 0)).await;
    }
}
