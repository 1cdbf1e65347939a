//! A demo server (the recording of `ba-agent serve --demo`, its data, tools and skill) on
//! 127.0.0.1:0, or one whose model decides (`Options::anthropic_base_url`), and a headless
//! chromium driven over WebDriver.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ba_agent::{Agent, ResponseMode};
use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::run_python::sandbox::SandboxConfig;
use ba_builtins::run_python::{RunPython, RunPythonConfig};
use ba_context::{ContextBudget, Encoding};
use ba_model::{
    AnthropicClient, ApiKey, DeltaSink, ExpectedRequest, ModelClient, ModelError, ModelRequest,
    ModelResponse, ReplayClient, ReplayTurn, StreamDelta,
};
use ba_protocol::EntryKind;
use ba_protocol::LogRole;
use ba_server::{AppState, ServerConfig, Token};
use ba_skills::SkillSet;
use ba_storage::FileStore;
use ba_tools::Tool;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::proxy::Proxy;

pub const TOKEN: &str = "browser-test-token";
pub const LIMIT: Duration = Duration::from_secs(60);
pub const RECORDING: &str = include_str!("../../../cli/demo/recording.json");
const SKILL_MD: &str = include_str!("../../../cli/demo/skills/sales-report/SKILL.md");
pub const QUESTION: &str = "Why did the West region's sales jump in Q3 2024, and did it beat its target? \
Give me a short report with the figures and the code behind them.";
pub const CHART_QUESTION: &str = "Chart the 2024 quarterly sales of every region.";

/// One browser at a time: two cores are shared with the rest of the suite.
pub static BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The demo's model: the recorded turn whose expectation the request meets (after any
/// `continue` the loop wrote); with `fallback`, a request no turn answers gets that structured
/// final answer; with `gate`, each character of streamed text waits for a permit the test
/// gives. It answers at once: a test that needs a run to stay open holds it on a [`Latch`].
#[derive(Debug)]
pub struct DemoModel {
    turns: Vec<ReplayTurn>,
    fallback: Option<String>,
    gate: Option<Arc<Semaphore>>,
}

fn asked(request: &ModelRequest) -> ExpectedRequest {
    request
        .entries
        .iter()
        .rev()
        .filter(|e| e.include_in_context)
        .filter(|e| !matches!(e.kind(), Some(EntryKind::Continue | EntryKind::FormatError)))
        .find(|e| matches!(e.role, LogRole::User | LogRole::Tool))
        .map(|e| ExpectedRequest {
            role: Some(e.role),
            text: Some(e.text().into_owned()),
            tool_call_id: e.tool_call_id.clone(),
        })
        .unwrap_or_default()
}

/// A recorded turn answering `text` with a structured final answer of `content`.
pub fn final_turn(question: &str, content: &str) -> Value {
    let body = json!({"task_analysis": "A test answer.", "execution_plan": "R1: answer",
        "current_round": 1, "action": {"type": "complete", "content": content}});
    json!({"expect": {"role": "user", "text": question}, "response": {"message": {"role": "assistant",
        "content": [{"type": "text", "text": body.to_string()}]}, "stop_reason": "end_turn"}})
}

/// A recorded turn answering the result of call `call_id` with a structured final answer.
pub fn final_turn_after(call_id: &str, content: &str) -> Value {
    let mut turn = final_turn("", content);
    turn["expect"] = json!({"role": "tool", "tool_call_id": call_id});
    turn
}

#[async_trait::async_trait]
impl ModelClient for DemoModel {
    fn provider(&self) -> &str {
        "replay"
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let found = asked(request);
        let meets = |e: &ExpectedRequest| {
            (e.role.is_none() || e.role == found.role)
                && (e.text.is_none() || e.text == found.text)
                && (e.tool_call_id.is_none() || e.tool_call_id == found.tool_call_id)
        };
        let turn = match self.turns.iter().find(|t| meets(&t.expect)) {
            Some(t) => t.clone(),
            None => {
                let content = self.fallback.clone().ok_or(ModelError::ReplayDiverged {
                    turn: 0,
                    expected: "a recorded question".into(),
                    found: format!("{:?}", found.text),
                })?;
                let v = final_turn(found.text.as_deref().unwrap_or(""), &content);
                ReplayClient::from_json(&json!([v]).to_string(), "fallback")?.turns()[0].clone()
            }
        };
        // Matched above, past any `continue`: the inner client must not check it again.
        let mut turn = turn;
        turn.expect = ExpectedRequest::default();
        let one = ReplayClient::new(vec![turn]).with_token_counter(Arc::new(Encoding::Cl100kBase));
        let Some(gate) = &self.gate else {
            return one.complete_streaming(request, on_delta).await;
        };
        let mut deltas = Vec::new();
        let response = one
            .complete_streaming(request, &mut |d| deltas.push(d))
            .await?;
        for delta in deltas {
            match delta {
                StreamDelta::Text { index, text } => {
                    for c in text.chars() {
                        gate.acquire().await.unwrap().forget();
                        on_delta(StreamDelta::Text {
                            index,
                            text: c.to_string(),
                        });
                    }
                }
                other => on_delta(other),
            }
        }
        Ok(response)
    }
}

/// More model calls than any test's run makes: released at once, a run goes to its end.
pub const LET_THROUGH: usize = 1_000;

/// Holds model calls until the test lets them go: each call counts itself as arrived, then
/// waits for a permit. A test opens it for the calls it wants answered at once and releases
/// the rest when the window it looks at has been checked, so nothing depends on timing.
#[derive(Debug)]
pub struct Latch {
    permits: Semaphore,
    arrived: std::sync::atomic::AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Latch {
    /// A latch that lets the first `open` calls through.
    pub fn new(open: usize) -> Arc<Self> {
        Arc::new(Self {
            permits: Semaphore::new(open),
            arrived: std::sync::atomic::AtomicUsize::new(0),
            notify: tokio::sync::Notify::new(),
        })
    }

    /// Lets `n` more calls through.
    pub fn release(&self, n: usize) {
        self.permits.add_permits(n);
    }

    /// Waits until `n` calls have arrived (answered or held).
    pub async fn arrived(&self, n: usize) {
        let start = Instant::now();
        loop {
            let notified = self.notify.notified();
            if self.arrived.load(std::sync::atomic::Ordering::SeqCst) >= n {
                return;
            }
            assert!(start.elapsed() < LIMIT, "model call {n} never came");
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }

    async fn pass(&self) {
        self.arrived
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
        self.permits.acquire().await.unwrap().forget();
    }
}

/// A model whose calls pass a [`Latch`] first.
struct Latched {
    inner: Arc<dyn ModelClient>,
    latch: Arc<Latch>,
}

#[async_trait::async_trait]
impl ModelClient for Latched {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.latch.pass().await;
        self.inner.complete_streaming(request, on_delta).await
    }
}

/// A tool for a test's own script: answers `{"checked": <its arguments>}`, after a permit of
/// its latch when it has one (so a test can look at the page while the call runs).
pub struct Probe {
    pub name: &'static str,
    pub latch: Option<Arc<Latch>>,
}

#[async_trait::async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        "Checks what it is given."
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }

    async fn call(
        &self,
        input: Value,
        _ctx: &ba_tools::CallContext,
    ) -> Result<Value, ba_tools::ToolError> {
        if let Some(latch) = &self.latch {
            latch.pass().await;
        }
        Ok(json!({ "checked": input }))
    }
}

/// A recorded turn of the structured answer format: round `round` asks for `calls`
/// (`(tool, call id, arguments)`), answering the request `expect` names.
pub fn call_turn(expect: Value, round: u32, calls: &[(&str, &str, Value)]) -> Value {
    let content: Vec<Value> = calls
        .iter()
        .map(|(tool, id, arguments)| {
            json!({"tool_name": tool, "tool_call_id": id, "arguments": arguments})
        })
        .collect();
    let body = json!({"task_analysis": format!("Round {round}."), "execution_plan": "R1: check; R2: report",
        "current_round": round, "action": {"type": "tool_call", "content": content}});
    json!({"expect": expect, "response": {"message": {"role": "assistant",
        "content": [{"type": "text", "text": body.to_string()}]}, "stop_reason": "end_turn"}})
}

/// How a test server differs from the demo.
#[derive(Default)]
pub struct Options {
    pub extra_turns: Vec<Value>,
    pub fallback: Option<String>,
    /// Streamed text, a character a permit.
    pub gate: Option<Arc<Semaphore>>,
    /// The browser reaches the server through a [`Proxy`] the test can cut.
    pub proxy: bool,
    /// A model that decides instead of the recording: a real Anthropic client sent to this
    /// base URL (a `ba_testkit::model::ScriptedModel`), with the real `file_reader` and
    /// `run_python` instead of the demo's tools.
    pub anthropic_base_url: Option<String>,
    /// Which calls wait for a person.
    pub approvals: ba_agent::ApprovalSettings,
    /// Prices per model, for the cost lines.
    pub prices: ba_agent::Prices,
    /// Spending caps.
    pub budgets: ba_agent::Budgets,
    /// The workflows a run can start.
    pub workflows: ba_skills::WorkflowSet,
    /// Model calls wait on this latch (release [`LET_THROUGH`] to let the rest of a run go).
    pub latch: Option<Arc<Latch>>,
    /// Tools the server has besides the demo's (or the analyst's).
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// Callers sign in with tokens of the store's users (`--auth users`) instead of `TOKEN`.
    pub users: bool,
    /// Memory across conversations (off by default).
    pub memory: Option<ba_agent::MemoryMode>,
    /// Tools a source offers (as MCP servers' are), and which of them a request sends.
    pub tool_source: Option<(Arc<dyn ba_agent::ToolSource>, ba_agent::ToolSearchSettings)>,
}

/// The tools of an analyst's server: `file_reader` over no data folder (a conversation's
/// files reach it through the call) and `run_python`.
fn analyst_tools() -> Vec<Arc<dyn Tool>> {
    let python = RunPythonConfig {
        // Unconfined: this test binary has no `sandbox-exec` helper to run the code through.
        // The sandbox is tested in ba-builtins and in the CLI's journeys; these tests are
        // about the page.
        sandbox: SandboxConfig::off(),
        ..RunPythonConfig::default()
    };
    vec![
        Arc::new(FileReader::new(FileReaderConfig::new(vec![]))),
        Arc::new(RunPython::new(python)),
    ]
}

pub struct Server {
    pub addr: SocketAddr,
    pub proxy: Option<Proxy>,
    _dir: tempfile::TempDir,
    pub agent: Agent,
    _task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where screenshots go (a test artifact, under `target/`).
pub fn artifacts() -> PathBuf {
    let dir = workspace().join("target").join("browser-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn assets_dir() -> PathBuf {
    // Where `cargo xtask assets` writes: the same target folder cargo builds in.
    std::env::var_os("BA_AGENT_ASSETS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("assets")))
        .unwrap_or_else(|| workspace().join("target").join("assets"))
}

impl Server {
    pub async fn start(options: Options) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let data = root.join("data");
        let skill_dir = root.join("skills").join("sales-report");
        for d in [&data, &skill_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        ba_builtins::demo_data::generate(&data).unwrap();
        std::fs::write(skill_dir.join("SKILL.md"), SKILL_MD).unwrap();
        let mut turns: Vec<Value> = serde_json::from_str(RECORDING).unwrap();
        turns.extend(options.extra_turns);
        let (model, tools, name, budget): (Arc<dyn ModelClient>, _, _, _) = match &options
            .anthropic_base_url
        {
            None => {
                let model = DemoModel {
                    turns: ReplayClient::from_json(&Value::Array(turns).to_string(), "test")
                        .unwrap()
                        .turns()
                        .to_vec(),
                    fallback: options.fallback,
                    gate: options.gate,
                };
                // The CLI's demo budget (`ba_cli`'s DEMO_BUDGET: room for the demo's
                // tool definitions beside a window small enough to be compacted), and
                // room for the definitions of a test's own tools, and for a preview of their
                // results, on top.
                let extra: usize = options
                    .extra_tools
                    .iter()
                    .map(|t| {
                        let spec = format!("{}{}{}", t.name(), t.description(), t.input_schema());
                        Encoding::Cl100kBase.count(&spec) + 200
                    })
                    .sum();
                let budget = ContextBudget::new(5_500 + extra, 5_500 / 6);
                let tools = ba_builtins::demo_tools(&data);
                (Arc::new(model), tools, "demo-recording", budget)
            }
            Some(url) => {
                let client = AnthropicClient::new(ApiKey::new("browser-test-key"))
                    .unwrap()
                    .with_base_url(url)
                    .unwrap();
                let budget = ContextBudget::new(100_000, 8_000);
                (Arc::new(client), analyst_tools(), "scripted", budget)
            }
        };
        let model: Arc<dyn ModelClient> = match options.latch {
            Some(latch) => Arc::new(Latched {
                inner: model,
                latch,
            }),
            None => model,
        };
        let mut tools = tools;
        tools.extend(options.extra_tools);
        let mut builder = Agent::builder(model);
        let tool_search = match options.tool_source {
            Some((source, settings)) => {
                builder = builder.tool_source(source);
                Some(settings)
            }
            None => None,
        };
        let agent = builder
            .store(Arc::new(FileStore::open(root).unwrap()))
            .workflows(Arc::new(options.workflows.clone()))
            .skills(Arc::new(SkillSet::load([root.join("skills")])))
            .tools(tools)
            .configure(|s| {
                s.model = name.into();
                s.response_mode = ResponseMode::Structured;
                s.budget = budget;
                s.max_rounds = 8;
                s.approvals = options.approvals.clone();
                s.prices = options.prices.clone();
                s.budgets = options.budgets;
                s.memory = options.memory;
                if let Some(settings) = tool_search {
                    s.tool_search = settings;
                }
            })
            .build()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = ServerConfig::new()
            .with_demo_questions(vec![QUESTION.into(), CHART_QUESTION.into()])
            .with_assets_dir(assets_dir());
        let proxy = if options.proxy {
            let front = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = front.local_addr().unwrap().port();
            config = config.with_allowed_hosts(vec![format!("127.0.0.1:{port}")]);
            Some(Proxy::start(front, addr))
        } else {
            None
        };
        let state = AppState::new(agent.clone(), config);
        let auth = if options.users {
            ba_server::Auth::Users
        } else {
            ba_server::Auth::Token(Token::new(TOKEN).unwrap())
        };
        let task = tokio::spawn(ba_server::serve(
            listener,
            state,
            auth,
            std::future::pending(),
        ));
        Self {
            addr,
            proxy,
            _dir: dir,
            agent,
            _task: task,
        }
    }

    /// Stops the server: its port closes and nothing answers there any more (connections a
    /// page still holds are the page's to close first, by navigating away).
    pub async fn stop(self) {
        let addr = self.addr;
        self._task.abort();
        let _ = self._task.await;
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the server still answers at {addr}"
        );
    }

    /// A new conversation through the API; its id.
    pub async fn conversation(&self) -> String {
        let r = reqwest::Client::new()
            .post(format!("http://{}/api/v1/conversations", self.addr))
            .bearer_auth(TOKEN)
            .json(&json!({"mode": "agent"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The page's contract URL for a conversation (through the proxy when there is one); no
    /// token in it: the page asks for one ([`goto`] signs in).
    pub fn url(&self, conversation: &str) -> String {
        let addr = self.proxy.as_ref().map_or(self.addr, |p| p.addr);
        format!("http://{addr}/?conversation={conversation}")
    }

    /// The address bar showing a conversation.
    pub fn shown_url(&self, conversation: &str) -> String {
        let addr = self.proxy.as_ref().map_or(self.addr, |p| p.addr);
        format!("http://{addr}/?conversation={conversation}")
    }

    /// An API call with the token.
    pub async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut r = reqwest::Client::new()
            .request(method, format!("http://{}{path}", self.addr))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            r = r.json(&body);
        }
        let r = r.send().await.unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Asks `text` in conversation `id` through the API and waits for the run to end.
    pub async fn run_to_end(&self, id: &str, text: &str) {
        // One request per question: a second question is a new request, not a retry.
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(text, &mut h);
        let request_id = format!("req-{id}-{:x}", std::hash::Hasher::finish(&h));
        let body = json!({"request_id": request_id, "input": {"type": "message", "text": text}});
        self.api(
            reqwest::Method::POST,
            &format!("/api/v1/conversations/{id}/runs"),
            Some(body),
        )
        .await;
        let start = Instant::now();
        loop {
            let c = self
                .api(
                    reqwest::Method::GET,
                    &format!("/api/v1/conversations/{id}"),
                    None,
                )
                .await;
            if c["status"] != "running" {
                assert_eq!(c["status"], "idle", "{c}");
                return;
            }
            assert!(start.elapsed() < LIMIT, "the run did not end: {c}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A headless chromium session, or `None` (after a message) when no WebDriver is configured.
pub async fn browser() -> Option<Client> {
    browser_in(None).await
}

/// A headless chromium whose person prefers `language` (`navigator.languages` starts with
/// it), or the machine's default with `None`.
pub async fn browser_in(language: Option<&str>) -> Option<Client> {
    let url = ba_testkit::require_env(
        "BA_AGENT_TEST_WEBDRIVER",
        "start chromedriver with `eval \"$(bash .ci/browser.sh)\"`",
    )?;
    let mut options = json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
        "--disable-dev-shm-usage", "--window-size=1280,1000", "--force-device-scale-factor=1"]});
    let binary =
        std::env::var("BA_AGENT_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if Path::new(&binary).exists() {
        options["binary"] = Value::String(binary);
    }
    if let Some(language) = language {
        options["args"]
            .as_array_mut()
            .unwrap()
            .push(format!("--lang={language}").into());
        options["prefs"] = json!({"intl": {"accept_languages": language}});
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let client = ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&url)
        .await
        .unwrap_or_else(|e| panic!("no WebDriver session at {url}: {e}"));
    Some(client)
}

/// Runs `script` (a function body returning a value) until it returns something truthy.
pub async fn wait_for(c: &Client, what: &str, script: &str) -> Value {
    let start = Instant::now();
    let mut last_error = None;
    loop {
        // A script sent while the page navigates or reloads fails; that is "not yet".
        let v = match c.execute(script, vec![]).await {
            Ok(v) => v,
            Err(e) => {
                last_error = Some(e.to_string());
                Value::Null
            }
        };
        let truthy = match &v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64().unwrap_or(0.0) != 0.0,
            Value::String(s) => !s.is_empty(),
            _ => true,
        };
        if truthy {
            return v;
        }
        if start.elapsed() > LIMIT {
            let body = c
                .execute("return document.body.innerText.slice(0, 3000)", vec![])
                .await
                .unwrap_or_default();
            panic!(
                "timed out waiting for {what} (last script error: {last_error:?}); the page \
                 shows:\n{body}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs a script and returns its value.
pub async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

pub async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(artifacts().join(name), png).unwrap();
}

/// Types `text` into the message box and presses Enter (the keyboard path).
/// A new conversation opened in the page, ready for input; its id.
pub async fn open_new(c: &Client, server: &Server) -> String {
    let id = server.conversation().await;
    goto(c, server, &id).await;
    loaded(c).await;
    id
}

/// Opens conversation `id` in the page, signing in with `TOKEN` when the page asks.
pub async fn goto(c: &Client, server: &Server, id: &str) {
    c.goto(&server.url(id)).await.unwrap();
    sign_in(c, TOKEN).await;
}

/// Pastes `token` into the sign-in form when the page shows it; returns once the page says
/// who is signed in.
pub async fn sign_in(c: &Client, token: &str) {
    wait_for(
        c,
        "the page to sign in or ask for a token",
        "return ['needed', 'done'].includes(document.body.dataset.signin)",
    )
    .await;
    if js(c, "return document.body.dataset.signin").await == "needed" {
        c.find(Locator::Css("#signin-token"))
            .await
            .unwrap()
            .send_keys(token)
            .await
            .unwrap();
        click(c, "#signin-submit").await;
        wait_for(
            c,
            "the page to sign in",
            "return document.body.dataset.signin === 'done'",
        )
        .await;
    }
}

/// Waits for the final report's frame, sandboxed to scripts only, and switches into it
/// (`enter_parent_frame` comes back).
pub async fn enter_report_frame(c: &Client) {
    wait_for(
        c,
        "the report's frame",
        "return document.querySelector('[data-component=final_report] iframe[sandbox=\"allow-scripts\"]')",
    )
    .await;
    c.find(Locator::Css("[data-component=final_report] iframe"))
        .await
        .unwrap()
        .enter_frame()
        .await
        .unwrap();
}

/// Clicks the element `css`. The page may render the element again between finding it and
/// clicking it (an event arrived): a stale element is found again, until [`LIMIT`].
pub async fn click(c: &Client, css: &str) {
    let start = Instant::now();
    loop {
        let clicked = match c.find(Locator::Css(css)).await {
            Ok(element) => element.click().await,
            Err(e) => Err(e),
        };
        match clicked {
            Ok(()) => return,
            Err(e) if e.is_stale_element_reference() && start.elapsed() < LIMIT => continue,
            Err(e) => panic!("clicking {css}: {e}"),
        }
    }
}

/// Waits until a tool call of the turn shows as done.
pub async fn a_tool_call_done(c: &Client) {
    wait_for(
        c,
        "a finished tool call",
        "return document.querySelector('[data-call][data-state=done]')",
    )
    .await;
}

pub async fn ask(c: &Client, text: &str) {
    let input = c.find(Locator::Css("#input")).await.unwrap();
    input.click().await.unwrap();
    input.send_keys(text).await.unwrap();
    input.send_keys("\u{E007}").await.unwrap();
}

/// Waits for the page to have loaded its conversation.
pub async fn loaded(c: &Client) {
    wait_for(
        c,
        "the page to load",
        "return document.body.dataset.stream === 'open'",
    )
    .await;
}

/// The seven components of an answer in their order, then what the page adds after them: the
/// export buttons and the answer's cost line.
pub const ORDER: [&str; 9] = [
    "task_analysis",
    "execution_plan",
    "tool_call_status",
    "final_report",
    "code_blocks",
    "recommended_questions",
    "download_links",
    "export_report",
    "cost",
];

pub const COMPONENTS: &str = "return [...document.querySelectorAll('.answer')].pop() \
    ? [...[...document.querySelectorAll('.answer')].pop().querySelectorAll('[data-component]')].map(e => e.dataset.component) : []";

pub fn assert_in_order(found: &Value) {
    let found: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let ranks: Vec<usize> = found
        .iter()
        .map(|c| {
            ORDER
                .iter()
                .position(|o| o == c)
                .unwrap_or_else(|| panic!("unknown component {c}"))
        })
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] < w[1]),
        "components out of §七 order: {found:?}"
    );
}

/// Asserts the transcript shows one turn with one answer, and every tool call once.
pub async fn assert_one_turn(c: &Client) {
    let counts = js(
        c,
        "return ['.turn', '.user', '[data-component=final_report]'].map(s => document.querySelectorAll(s).length)",
    )
    .await;
    assert_eq!(counts, json!([1, 1, 1]), "turns, questions, reports");
    let calls = js(
        c,
        "return [...document.querySelectorAll('[data-call]')].map(e => e.dataset.call)",
    )
    .await;
    let calls: Vec<&str> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut unique = calls.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        calls.len(),
        unique.len(),
        "a tool call shown twice: {calls:?}"
    );
}

/// Keeps what the page downloads instead of saving it: the page fetches a file with the token
/// in a header, makes a blob URL of it and clicks a link with a `download` name; this records
/// `{name, text}` of each such click in `window.__downloads`.
pub const CATCH_DOWNLOADS: &str = "window.__downloads = []; const blobs = new Map(); \
    const create = URL.createObjectURL; \
    URL.createObjectURL = function (b) { const u = create.call(URL, b); blobs.set(u, b); return u; }; \
    const click = HTMLAnchorElement.prototype.click; \
    HTMLAnchorElement.prototype.click = function () { \
      const b = blobs.get(this.href); \
      if (!b || !this.download) return click.call(this); \
      const name = this.download; b.text().then((text) => window.__downloads.push({name, text})); \
    }; return 1";

/// Clicks the element `css` and returns the `{name, text}` the page downloaded for it.
pub async fn download(c: &Client, css: &str) -> Value {
    let before = js(c, "return window.__downloads.length").await;
    click(c, css).await;
    wait_for(
        c,
        &format!("the download of {css}"),
        &format!("return window.__downloads.length > {before} && window.__downloads[{before}]"),
    )
    .await
}
