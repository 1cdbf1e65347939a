//! A server on 127.0.0.1:0 in its own runtime (so a test can kill it mid-run by dropping the
//! runtime), a replay model the test can hold at a gate or hang mid-answer, a tool that counts
//! its calls, and a small SSE reader.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ba_agent::Agent;
use ba_model::{
    DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ReplayClient, StreamDelta,
};
use ba_server::{AppState, Auth, ServerConfig, Token};
use ba_storage::FileStore;
use ba_testkit::sse::SseParser;
use ba_tools::typed_tool;
use futures::StreamExt as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

pub const TOKEN: &str = "test-token-123";
/// Every wait of a test is bounded by this, so a broken server fails the test instead of
/// hanging it.
pub const LIMIT: Duration = Duration::from_secs(60);

pub fn tool_turn(call: &str, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "Counting the rows."},
        {"type": "tool_use", "id": call, "name": "count_rows", "input": {"table": "sales"}}]},
        "stop_reason": "tool_use"}})
}

pub fn text_turn(text: &str, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": text},
        "stop_reason": "end_turn"}})
}

/// Question → tool call → final answer.
pub fn two_rounds(question: &str) -> Vec<Value> {
    vec![
        tool_turn("call_1", json!({"role": "user", "text": question})),
        text_turn(
            "There are 42 rows.",
            json!({"role": "tool", "tool_call_id": "call_1"}),
        ),
    ]
}

/// The model: a replay client behind a gate (a call waits for a permit) that can hang chosen
/// calls after one streamed delta until the run cancels them.
#[derive(Debug)]
pub struct Model {
    replay: ReplayClient,
    pub gate: Arc<Semaphore>,
    hang: HashSet<usize>,
    calls: AtomicUsize,
    pub started: watch::Sender<usize>,
}

impl Model {
    pub fn new(turns: &[Value], played: usize) -> Self {
        Self {
            replay: ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test")
                .unwrap()
                .with_played(played),
            gate: Arc::new(Semaphore::new(Semaphore::MAX_PERMITS)),
            hang: HashSet::new(),
            calls: AtomicUsize::new(0),
            started: watch::channel(0).0,
        }
    }

    /// Calls wait for [`Model::release`].
    pub fn gated(mut self) -> Self {
        self.gate = Arc::new(Semaphore::new(0));
        self
    }

    /// Call `n` (from 0) streams "partial " and then never answers.
    pub fn hanging(mut self, n: usize) -> Self {
        self.hang.insert(n);
        self
    }

    /// The calls made so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn release(&self, calls: usize) {
        self.gate.add_permits(calls);
    }
}

#[async_trait::async_trait]
impl ModelClient for Model {
    fn provider(&self) -> &str {
        "replay"
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        self.started.send_replace(n + 1);
        if let Ok(permit) = self.gate.acquire().await {
            permit.forget();
        }
        if self.hang.contains(&n) {
            on_delta(StreamDelta::Text {
                index: 0,
                text: "partial ".into(),
            });
            std::future::pending::<()>().await;
        }
        self.replay.complete_streaming(request, on_delta).await
    }
}

#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    #[allow(dead_code, reason = "read by the schema only")]
    table: String,
}

/// A server running in its own runtime on its own thread.
pub struct Server {
    pub base: String,
    pub addr: SocketAddr,
    pub tool_calls: Arc<AtomicUsize>,
    /// Tool calls wait for a permit here (plenty unless `Options::tool_gated`).
    pub tool_gate: Arc<Semaphore>,
    pub model: Arc<Model>,
    /// The server's state (for a scheduler of its own).
    pub state: AppState,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<std::sync::mpsc::Receiver<()>>,
}

pub struct Options {
    /// Tool calls wait for [`Server::tool_gate`] permits.
    pub tool_gated: bool,
    /// The store (a `FileStore` in the folder when `None`).
    pub store: Option<Arc<dyn ba_storage::ConversationStore>>,
    pub log_poll: Duration,
    pub upload_limit: usize,
    pub json_limit: usize,
    pub drain: Duration,
    pub keep_alive: Duration,
    pub demo_questions: Option<Vec<String>>,
    /// Which calls wait for a person.
    pub approvals: ba_agent::ApprovalSettings,
    /// The workflows a run can start.
    pub workflows: ba_skills::WorkflowSet,
    /// A model client that replaces the replay model (a real client sent to a
    /// `ba_testkit::model::ScriptedModel`); the `Server::model` gate then holds nothing.
    pub client: Option<Arc<dyn ModelClient>>,
    /// Tools added to `count_rows` (`file_reader`, `run_python`, …).
    pub tools: Vec<Arc<dyn ba_tools::Tool>>,
    /// The sign-in (`TOKEN` for `owner` when `None`).
    pub auth: Option<Auth>,
    /// Where the server's threads send their log (to read what it wrote).
    pub log: Option<tracing::Dispatch>,
    /// The agent's prices and spending caps.
    pub prices: ba_agent::Prices,
    pub budgets: ba_agent::Budgets,
    /// The scheduler's clock (the system's when `None`).
    pub clock: Option<Arc<dyn ba_storage::Clock>>,
    /// How scheduled runs' webhooks are posted.
    pub webhooks: Option<ba_server::WebhookSender>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tool_gated: false,
            store: None,
            log_poll: Duration::from_millis(20),
            upload_limit: 1024 * 1024,
            json_limit: 1024 * 1024,
            drain: Duration::from_secs(5),
            keep_alive: Duration::from_secs(15),
            demo_questions: None,
            approvals: ba_agent::ApprovalSettings::default(),
            workflows: ba_skills::WorkflowSet::default(),
            client: None,
            tools: Vec::new(),
            auth: None,
            log: None,
            prices: ba_agent::Prices::default(),
            budgets: ba_agent::Budgets::default(),
            clock: None,
            webhooks: None,
        }
    }
}

impl Server {
    pub fn start(dir: &Path, model: Model) -> Self {
        Self::start_with(dir, model, Options::default())
    }

    pub fn start_with(dir: &Path, model: Model, options: Options) -> Self {
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        if let Some(log) = options.log.clone() {
            // Each worker keeps the dispatch for its life (the runtime's, the test's).
            runtime.on_thread_start(move || {
                std::mem::forget(tracing::dispatcher::set_default(&log));
            });
        }
        let runtime = runtime.worker_threads(2).enable_all().build().unwrap();
        let auth = options
            .auth
            .clone()
            .unwrap_or_else(|| Auth::Token(Token::new(TOKEN).unwrap()));
        let model = Arc::new(model);
        let tool_calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&tool_calls);
        let tool_gate = Arc::new(Semaphore::new(if options.tool_gated {
            0
        } else {
            Semaphore::MAX_PERMITS
        }));
        let gate = Arc::clone(&tool_gate);
        let store: Arc<dyn ba_storage::ConversationStore> = match options.store {
            Some(s) => s,
            None => Arc::new(FileStore::open(dir).unwrap()),
        };
        let client = options
            .client
            .unwrap_or_else(|| Arc::clone(&model) as Arc<dyn ModelClient>);
        let mut builder = Agent::builder(client);
        for tool in options.tools {
            builder = builder.tool_arc(tool);
        }
        let agent = builder
            .store(store)
            .workflows(Arc::new(options.workflows))
            .tool(typed_tool(
                "count_rows",
                "Counts the rows of a table.",
                move |_a: CountArgs, _| {
                    let counter = Arc::clone(&counter);
                    let gate = Arc::clone(&gate);
                    async move {
                        if let Ok(permit) = gate.acquire().await {
                            permit.forget();
                        }
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok(json!({"rows": 42}))
                    }
                },
            ))
            .configure(|s| {
                s.model = "test-model".into();
                s.approvals = options.approvals.clone();
                s.prices = options.prices.clone();
                s.budgets = options.budgets;
            })
            .build()
            .unwrap();
        let mut config = ServerConfig::new()
            .with_upload_limit(options.upload_limit)
            .with_json_limit(options.json_limit)
            .with_drain(options.drain)
            .with_log_poll(options.log_poll)
            .with_keep_alive(options.keep_alive);
        if let Some(q) = options.demo_questions {
            config = config.with_demo_questions(q);
        }
        if let Some(clock) = options.clock {
            config = config.with_clock(clock);
        }
        if let Some(webhooks) = options.webhooks {
            config = config.with_webhooks(webhooks);
        }
        let state = AppState::new(agent, config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let serving = state.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = ba_server::serve(listener, serving, auth, async {
                let _ = stopped.await;
            })
            .await;
            let _ = done_tx.send(());
        });
        Self {
            base: format!("http://{addr}"),
            addr,
            tool_calls,
            tool_gate,
            model,
            state,
            runtime: Some(runtime),
            stop: Some(stop),
            done: Some(done),
        }
    }

    /// One tick of a scheduler of this server, on the server's runtime (so its runs die with
    /// a kill).
    pub async fn tick(&self) -> Vec<ba_server::Fired> {
        let scheduler = ba_server::Scheduler::new(self.state.clone());
        let rt = self.runtime.as_ref().expect("a running server");
        rt.spawn(async move { scheduler.tick().await })
            .await
            .unwrap()
            .unwrap()
    }

    /// Kills the server: every task (runs included) is dropped where it stands.
    pub fn kill(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    /// Graceful shutdown; returns once `serve` has returned.
    pub fn shutdown(mut self) -> bool {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let ok = self
            .done
            .take()
            .is_some_and(|d| d.recv_timeout(LIMIT).is_ok());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
        ok
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

pub fn dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().to_owned();
    (d, p)
}

/// A thin API client with the token.
pub struct Api<'a> {
    pub server: &'a Server,
    pub http: reqwest::Client,
}

impl<'a> Api<'a> {
    pub fn new(server: &'a Server) -> Self {
        Self {
            server,
            http: client(),
        }
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.server.url(path)).bearer_auth(TOKEN)
    }

    pub fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(self.server.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
    }

    pub async fn create(&self) -> String {
        let r = self
            .post("/api/v1/conversations", json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        v["id"].as_str().unwrap().to_owned()
    }

    pub async fn run(&self, conv: &str, request_id: &str, input: Value) -> reqwest::Response {
        self.post(
            &format!("/api/v1/conversations/{conv}/runs"),
            json!({"request_id": request_id, "input": input}),
        )
        .send()
        .await
        .unwrap()
    }

    /// Uploads `bytes` as the file `name` of `conv`, a multipart form as the page sends it.
    pub async fn upload(&self, conv: &str, name: &str, bytes: &[u8]) -> reqwest::Response {
        let (kind, body) = ba_testkit::files::multipart_file(name, bytes);
        self.http
            .post(
                self.server
                    .url(&format!("/api/v1/conversations/{conv}/uploads")),
            )
            .bearer_auth(TOKEN)
            .header("Content-Type", kind)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn json(&self, path: &str) -> Value {
        let r = self.get(path).send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    }

    pub async fn raw_events(&self, conv: &str) -> reqwest::Response {
        self.get(&format!("/api/v1/conversations/{conv}/events"))
            .send()
            .await
            .unwrap()
    }

    pub async fn events(&self, conv: &str, last_event_id: Option<&str>) -> Sse {
        let mut req = self.get(&format!("/api/v1/conversations/{conv}/events"));
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        assert_eq!(r.headers()["x-accel-buffering"], "no");
        Sse::new(r)
    }
}

/// One SSE frame as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: String,
    pub event: String,
    pub data: Value,
}

pub struct Sse {
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    frames: SseParser,
}

impl Sse {
    pub fn new(r: reqwest::Response) -> Self {
        Self {
            body: r.bytes_stream().boxed(),
            frames: SseParser::default(),
        }
    }

    /// The next frame with data (keep-alive comments skipped); `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.frames.next_frame() {
                return Some(Frame {
                    id: f.id.expect("every frame has an id"),
                    event: f.event.expect("every frame has an event name"),
                    data: serde_json::from_str(&f.data).expect("data is JSON"),
                });
            }
            let chunk = tokio::time::timeout(LIMIT, self.body.next())
                .await
                .expect("the stream stalled")?;
            self.frames.push(&chunk.ok()?);
        }
    }

    /// Frames up to and including the first `event`, within [`LIMIT`] in all (keep-alive
    /// comments keep a stream alive, so a frame that never comes must still end the test).
    pub async fn until(&mut self, event: &str) -> Vec<Frame> {
        let mut out = Vec::new();
        let found = tokio::time::timeout(LIMIT, async {
            while let Some(f) = self.next().await {
                let done = f.event == event;
                out.push(f);
                if done {
                    return true;
                }
            }
            false
        })
        .await;
        match found {
            Ok(true) => out,
            Ok(false) => panic!("the stream ended before `{event}`: {out:#?}"),
            Err(_) => panic!("no `{event}` within {LIMIT:?}: {out:#?}"),
        }
    }
}
