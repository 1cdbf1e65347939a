//! Many tools: 200 tools of 18 servers (written apart from the search code, with 100 tasks
//! phrased apart from the tools' descriptions: `fixtures/tool-search/`) offered through a tool
//! source. With deferral the requests carry the pinned tools and the search; a scripted model
//! that must search sends each task as its query and calls the first tool found. Measured: the
//! tokens of the tool definitions per request before and after, the share of each request a
//! provider's prefix cache could serve over a 30-request conversation, and how often the right
//! tool is found (first, and among those the search names).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use ba_agent::{
    Agent, DeferMode, Input, SourceSnapshot, TOOL_SEARCH_TOOL, ToolSearchSettings, ToolSource,
};
use ba_model::{AnthropicClient, ApiKey};
use ba_protocol::{LogRole, ToolSpec};
use ba_storage::{ConversationStore, FileStore, NewConversation};
use ba_testkit::model::{ScriptedModel, Turn};
use ba_tools::{CallContext, Tool, ToolError};
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tool-search")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A tool of the fixture: it answers that it ran.
#[derive(Debug)]
struct Declared(ToolSpec);

#[async_trait]
impl Tool for Declared {
    fn name(&self) -> &str {
        &self.0.name
    }
    fn description(&self) -> &str {
        &self.0.description
    }
    fn input_schema(&self) -> Value {
        self.0.input_schema.clone()
    }
    async fn call(&self, _input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(json!({"ran": self.0.name}))
    }
}

/// The fixture's tools as a source offers them (`server__tool`, as MCP tools are named).
struct Servers(Vec<Arc<dyn Tool>>);

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Servers({} tools)", self.0.len())
    }
}

impl ToolSource for Servers {
    fn generation(&self) -> u64 {
        1
    }
    fn snapshot(&self) -> SourceSnapshot {
        SourceSnapshot::new(self.0.clone(), Vec::new())
    }
}

fn full_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
}

fn servers() -> Arc<Servers> {
    let tools = fixture("tools.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let spec = ToolSpec::new(
                full_name(t["server"].as_str().unwrap(), t["name"].as_str().unwrap()),
                t["description"].as_str().unwrap(),
                t["inputSchema"].clone(),
            );
            Arc::new(Declared(spec)) as Arc<dyn Tool>
        })
        .collect();
    Arc::new(Servers(tools))
}

/// Arguments `schema` accepts: each required property given a value of its type (an enum's
/// first value). A model fills them from the task; a call the runtime refuses would end the
/// task in an error instead of the call the measure counts.
fn arguments_for(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let property = &schema["properties"][name];
        let value = match property["enum"].as_array().and_then(|e| e.first()) {
            Some(first) => first.clone(),
            None => match property["type"].as_str() {
                Some("integer" | "number") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("x"),
            },
        };
        args.insert(name.to_owned(), value);
    }
    Value::Object(args)
}

/// The schema the request gives the tool `name`.
fn offered_schema(body: &Value, name: &str) -> Value {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["name"] == json!(name))
        .map_or(Value::Null, |t| t["input_schema"].clone())
}

/// A model that knows which tool each task needs (the tasks' own answers) and calls it from the
/// full list: the requests of the conversation without deferral, a call and an answer a task.
async fn knowing_model(tasks: &[Value]) -> ScriptedModel {
    let answers: Vec<(String, String)> = tasks
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_owned(),
                full_name(t["server"].as_str().unwrap(), t["tool"].as_str().unwrap()),
            )
        })
        .collect();
    ScriptedModel::builder()
        .rule(
            "answer once the tool ran",
            |r| !r.tool_results().is_empty(),
            |_| Turn::text("Done."),
        )
        .rule(
            "call the task's tool",
            |_| true,
            move |r| {
                let tool = answers
                    .iter()
                    .find(|(task, _)| task == r.last_user_text())
                    .map(|(_, tool)| tool.clone())
                    .unwrap_or_default();
                Turn::call(&tool, arguments_for(&offered_schema(r.body(), &tool)))
            },
        )
        .start()
        .await
}

/// A model that must search: it sends the person's words as the query, then calls the first
/// tool the search named — if the next request offers it — then answers.
async fn searching_model() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "answer once a found tool ran",
            |r| r.tool_results().iter().any(|t| t.name != TOOL_SEARCH_TOOL),
            |_| Turn::text("Done."),
        )
        .rule(
            "call the first tool found",
            |r| r.last_result().is_some_and(|t| t.name == TOOL_SEARCH_TOOL),
            |r| {
                let found: Value =
                    serde_json::from_str(&r.last_result().unwrap().text).unwrap_or_default();
                match found["found"][0]["name"].as_str() {
                    Some(name) if r.offers(name) => {
                        Turn::call(name, arguments_for(&offered_schema(r.body(), name)))
                    }
                    Some(name) => Turn::text(format!("found {name} but it is not offered")),
                    None => Turn::text("nothing found"),
                }
            },
        )
        .rule(
            "search with the person's words",
            |r| r.offers(TOOL_SEARCH_TOOL) && r.tool_results().is_empty(),
            |r| Turn::call(TOOL_SEARCH_TOOL, json!({"query": r.last_user_text()})),
        )
        .rule(
            "every tool offered: nothing to search",
            |r| r.tool_results().is_empty(),
            |_| Turn::text("All tools are here."),
        )
        .start()
        .await
}

/// Where the 200 tools come from.
#[derive(Clone)]
enum Tools {
    /// A tool source in this process.
    InProcess,
    /// MCP server processes, through the agent's MCP source.
    #[cfg(feature = "mcp")]
    Mcp(ba_mcp::McpManager),
}

fn agent(model: &ScriptedModel, dir: &std::path::Path, defer: DeferMode, tools: &Tools) -> Agent {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir).unwrap());
    let builder = Agent::builder(Arc::new(client)).store(store);
    let builder = match tools {
        Tools::InProcess => builder.tool_source(servers()),
        #[cfg(feature = "mcp")]
        Tools::Mcp(manager) => builder.mcp(manager.clone()),
    };
    builder
        .configure(|s| {
            s.tool_search = ToolSearchSettings {
                defer,
                // The scripted model stands for a model searching with our tool.
                native: false,
                ..ToolSearchSettings::default()
            };
            // No task reminder every fifth question: it rides in the last user message, where
            // the scripted models would read it as the person's next question (and a real
            // model as a reminder); it follows the window, so it never touches the prefix.
            s.builder.refocus_every = 0;
        })
        .build()
        .unwrap()
}

/// The o200k tokens of a request's tool definitions, as the wire sends them.
fn tool_tokens(body: &Value) -> usize {
    let tools = serde_json::to_string(&body["tools"]).unwrap();
    ba_context::Encoding::O200kBase.count(&tools)
}

/// The o200k tokens of what a request sends before its messages' end, in the order a
/// provider's prefix cache reads it: tools, system, messages.
fn prefix_text(body: &Value) -> String {
    format!(
        "{}{}{}",
        serde_json::to_string(&body["tools"]).unwrap(),
        serde_json::to_string(&body["system"]).unwrap(),
        serde_json::to_string(&body["messages"]).unwrap()
    )
}

/// What a provider's prefix cache could serve over a conversation's requests: each
/// request's longest prefix shared with the request before it is cached, the rest (all of the
/// first request) is not.
#[derive(Debug, Clone, Copy, Default)]
struct Cache {
    /// Tokens sent, all requests.
    total: usize,
    /// Of those, cached.
    cached: usize,
}

impl Cache {
    fn of(bodies: &[Value]) -> Self {
        let tokenizer = ba_context::Encoding::O200kBase;
        let mut cache = Self::default();
        let mut before = String::new();
        for body in bodies {
            let now = prefix_text(body);
            let common = before
                .char_indices()
                .zip(now.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((i, c), _)| i + c.len_utf8());
            cache.cached += tokenizer.count(&now[..common]);
            cache.total += tokenizer.count(&now);
            before = now;
        }
        cache
    }

    fn share(self) -> f64 {
        self.cached as f64 / self.total.max(1) as f64
    }

    fn uncached(self) -> usize {
        self.total - self.cached
    }

    /// The input's cost in uncached tokens: cached ones at a tenth.
    fn cost(self) -> f64 {
        self.uncached() as f64 + self.cached as f64 / 10.0
    }
}

struct Measured {
    requests: usize,
    tool_tokens_per_request: f64,
    cache: Cache,
    first: usize,
    named: usize,
    tasks: usize,
    misses: Vec<String>,
}

/// Runs `tasks` in one conversation (a search and a call each), as a person would ask them
/// one after another.
async fn measure(
    defer: DeferMode,
    tasks: &[Value],
    one_conversation: bool,
    tools: &Tools,
) -> Measured {
    let model = searching_model().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&model, dir.path(), defer, tools);
    let mut first = 0;
    let mut named = 0;
    let mut misses = Vec::new();
    let mut id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    for task in tasks {
        if !one_conversation {
            id = agent
                .new_conversation(NewConversation::default())
                .await
                .unwrap();
        }
        let expected = full_name(
            task["server"].as_str().unwrap(),
            task["tool"].as_str().unwrap(),
        );
        let text = task["task"].as_str().unwrap();
        let seen = agent.entries(&id).await.unwrap().len();
        agent.send(&id, Input::message(text)).finish().await;
        let log = agent.entries(&id).await.unwrap();
        let new = &log[seen..];
        let called: Vec<&str> = new
            .iter()
            .flat_map(|e| e.calls())
            .map(|c| c.function.name.as_str())
            .filter(|n| *n != TOOL_SEARCH_TOOL)
            .collect();
        let found: HashSet<&str> = new
            .iter()
            .filter(|e| e.role == LogRole::Tool)
            .filter_map(|e| e.records.tools_found.as_ref())
            .flatten()
            .map(String::as_str)
            .collect();
        if called.first() == Some(&expected.as_str()) {
            first += 1;
        } else {
            misses.push(format!("{expected} <- {text:?} (called {called:?})"));
        }
        if found.contains(expected.as_str()) {
            named += 1;
        }
    }
    let bodies: Vec<Value> = model.requests().iter().map(|r| r.body().clone()).collect();
    let tokens: usize = bodies.iter().map(tool_tokens).sum();
    Measured {
        requests: bodies.len(),
        tool_tokens_per_request: tokens as f64 / bodies.len().max(1) as f64,
        cache: Cache::of(&bodies),
        first,
        named,
        tasks: tasks.len(),
        misses,
    }
}

#[tokio::test]
async fn two_hundred_tools_leave_the_request_and_the_search_finds_them() {
    let all = two_hundred_tools(&Tools::InProcess).await;
    assert!(all.first > 0, "the search found nothing at all");
}

/// The 200 tools declared by 18 MCP server processes — the MCP crate's test server, one
/// process per server of the fixture, listing its tools in pages as servers do — reached
/// through the agent's MCP source, as a configuration's `mcp_servers` reaches them.
#[cfg(feature = "mcp")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_tools_of_eighteen_mcp_server_processes_leave_and_are_found() {
    let manager = mcp_servers().await;
    let via_mcp = two_hundred_tools(&Tools::Mcp(manager.clone())).await;
    let in_process = measure(
        DeferMode::Auto,
        fixture("tasks.json").as_array().unwrap(),
        false,
        &Tools::InProcess,
    )
    .await;
    // The same tools, so the same searches find the same ones.
    assert_eq!(
        (via_mcp.first, via_mcp.named),
        (in_process.first, in_process.named)
    );
    manager.shutdown().await;
}

/// One process of the test server per server of the fixture, each declaring that server's
/// tools (`MCP_TEST_DECLARE`), every one required to be ready.
#[cfg(feature = "mcp")]
async fn mcp_servers() -> ba_mcp::McpManager {
    let exe = std::env::current_exe().unwrap();
    let program = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("examples")
        .join("agent_mcp_test_server");
    assert!(
        program.is_file(),
        "{} is missing: `cargo test -p ba-agent --features mcp` builds it",
        program.display()
    );
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tool-search/tools.json");
    let mut names: Vec<String> = fixture("tools.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["server"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names.dedup();
    let configs: Vec<(String, ba_mcp::McpServerConfig)> = names
        .iter()
        .map(|name| {
            let config =
                ba_mcp::McpServerConfig::stdio(program.to_string_lossy(), Vec::<String>::new())
                    .with_env("MCP_TEST_DECLARE", file.to_string_lossy())
                    .with_env("MCP_TEST_DECLARE_SERVER", name.as_str())
                    .with_env("MCP_TEST_FILLER", "0")
                    .with_env("MCP_TEST_PAGE_SIZE", "5")
                    .with_required(true);
            (name.clone(), config)
        })
        .collect();
    assert_eq!(configs.len(), 18, "the fixture's servers, each listed once");
    let manager = ba_mcp::McpManager::start(
        configs,
        ba_mcp::McpOptions::default().with_shutdown_grace(std::time::Duration::from_millis(500)),
    )
    .await;
    manager.check_required().unwrap();
    manager
}

/// Before and after deferral over `tools`: the definitions' tokens per request, the
/// cacheable share of a 30-request conversation, and every task in a conversation of its own.
async fn two_hundred_tools(tools: &Tools) -> Measured {
    let tasks: Vec<Value> = fixture("tasks.json").as_array().unwrap().clone();
    assert_eq!(tasks.len(), 100);

    // Before: every definition in every request; the model calls each task's tool from the
    // full list (a call and an answer a task).
    let model = knowing_model(&tasks[..10]).await;
    let dir = tempfile::tempdir().unwrap();
    let before_agent = agent(&model, dir.path(), DeferMode::Never, tools);
    let id = before_agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    for task in tasks.iter().take(10) {
        before_agent
            .send(&id, Input::message(task["task"].as_str().unwrap()))
            .finish()
            .await;
    }
    let before_bodies: Vec<Value> = model.requests().iter().map(|r| r.body().clone()).collect();
    let before_tokens =
        before_bodies.iter().map(tool_tokens).sum::<usize>() as f64 / before_bodies.len() as f64;
    assert!(
        before_bodies
            .iter()
            .all(|b| b["tools"].as_array().is_some_and(|t| t.len() > 200)),
        "without deferral every request carries every tool"
    );

    // After: ten tasks in one conversation give 30 requests (a search, a call, an answer).
    let after = measure(DeferMode::Auto, &tasks[..10], true, tools).await;
    let before_cache = Cache::of(&before_bodies);
    let cut = 1.0 - after.tool_tokens_per_request / before_tokens;
    println!(
        "tool definitions per request: {before_tokens:.0} → {:.0} tokens ({:+.1} %)",
        after.tool_tokens_per_request,
        -cut * 100.0,
    );
    // The same ten questions: per question, what was sent, what a cache could not serve, and
    // the cost with cached tokens at a tenth.
    let per = |c: Cache, n: usize| {
        format!(
            "{n} requests, cached {:.1} %, per question {} tokens sent, {} uncached, cost {:.0}",
            c.share() * 100.0,
            c.total / 10,
            c.uncached() / 10,
            c.cost() / 10.0
        )
    };
    println!(
        "ten questions in one conversation: before {}; after {}",
        per(before_cache, before_bodies.len()),
        per(after.cache, after.requests)
    );
    assert!(
        after.cache.cost() < before_cache.cost(),
        "deferral made the input cost more"
    );

    // Every task, each in a conversation of its own.
    let all = measure(DeferMode::Auto, &tasks, false, tools).await;
    let first = all.first as f64 / all.tasks as f64;
    let named = all.named as f64 / all.tasks as f64;
    println!(
        "right tool called first: {}/{} ({:.0} %); named by the search: {}/{} ({:.0} %)",
        all.first,
        all.tasks,
        first * 100.0,
        all.named,
        all.tasks,
        named * 100.0
    );
    for miss in &all.misses {
        println!("  missed: {miss}");
    }
    assert!(
        cut >= 0.8,
        "the definitions fell by {:.1} % only",
        cut * 100.0
    );
    assert!(all.named >= all.first);
    all
}

#[tokio::test]
async fn pinned_tools_and_servers_set_to_never_are_never_deferred_and_found_ones_stay() {
    let model = searching_model().await;
    let dir = tempfile::tempdir().unwrap();
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let agent = Agent::builder(Arc::new(client))
        .store(store)
        .tool_source(servers())
        .configure(|s| {
            s.tool_search = ToolSearchSettings {
                pin: vec!["calendar__*".into(), "chat__post_message".into()],
                servers: std::collections::BTreeMap::from([(
                    "translate".to_owned(),
                    DeferMode::Never,
                )]),
                native: false,
                ..ToolSearchSettings::default()
            };
        })
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    agent
        .send(&id, Input::message("file a bug about the login page crash"))
        .finish()
        .await;
    agent
        .send(
            &id,
            Input::message("how many people visited the pricing page"),
        )
        .finish()
        .await;
    let requests = model.requests();
    let offered = |i: usize| -> Vec<String> { requests[i].tools().to_vec() };
    for i in 0..requests.len() {
        let tools = offered(i);
        assert!(
            tools.iter().any(|t| t == "chat__post_message"),
            "pinned by name"
        );
        assert!(
            tools.iter().any(|t| t.starts_with("calendar__")),
            "pinned by prefix"
        );
        assert_eq!(
            tools
                .iter()
                .filter(|t| t.starts_with("translate__"))
                .count(),
            7,
            "a server set to `never` sends all its tools"
        );
        assert!(tools.iter().any(|t| t == TOOL_SEARCH_TOOL));
        assert!(tools.len() < 60, "request {i} sent {} tools", tools.len());
    }
    // What the first search found is offered in every later request, at the end of the list.
    let log = agent.entries(&id).await.unwrap();
    let first_found: Vec<String> = log
        .iter()
        .find_map(|e| e.records.tools_found.clone())
        .expect("a search found tools");
    let last = offered(requests.len() - 1);
    for name in &first_found {
        assert!(last.contains(name), "{name} is no longer offered: {last:?}");
    }
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.tool_searches, 2);
    assert!(report.tools_offered.is_some_and(|o| o.deferred > 100));
    assert!(report.render(false).contains("left for the tool search"));
}

#[tokio::test]
async fn anthropic_holds_the_tools_back_itself_and_the_prefix_never_changes() {
    let model = ScriptedModel::builder()
        .rule("answer", |_| true, |_| Turn::text("Done."))
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let agent = Agent::builder(Arc::new(client))
        .store(store)
        .tool_source(servers())
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    for text in ["first question", "second question", "third question"] {
        agent.send(&id, Input::message(text)).finish().await;
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(
            r.header("anthropic-beta"),
            Some("advanced-tool-use-2025-11-20")
        );
        let tools = r.body()["tools"].as_array().unwrap();
        let held = tools
            .iter()
            .filter(|t| t["defer_loading"] == json!(true))
            .count();
        assert_eq!(held, 200, "every server tool held back by the provider");
        assert_eq!(
            tools.last().unwrap()["type"],
            json!("tool_search_tool_bm25_20251119")
        );
        assert!(
            !tools.iter().any(|t| t["name"] == json!(TOOL_SEARCH_TOOL)),
            "no search tool of ours beside the provider's"
        );
    }
    // The tool list, and so the cached prefix, is the same in every request.
    assert_eq!(requests[0].body()["tools"], requests[2].body()["tools"]);
}

/// The rank of `want` (1 is first) when `scores` orders the tools, best first.
fn rank_of(scores: &[(String, f64)], want: &str) -> usize {
    let mut order: Vec<&(String, f64)> = scores.iter().collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    order
        .iter()
        .position(|(name, _)| name == want)
        .map_or(usize::MAX, |i| i + 1)
}

/// A ranker by meaning, measured beside the search's BM25 on the same 100 tasks: with an
/// OpenAI-compatible endpoint (`BA_AGENT_TOOL_SEARCH_EMBEDDINGS=URL`, ending in `/v1`; a
/// sentence model such as the one `.ci/minilm.sh` serves), each task's vector against each
/// tool's (its name in words, its description, its parameters' names) by cosine, alone and
/// fused with BM25 by reciprocal rank (k = 60). A measure for choosing a ranker: the search
/// itself ranks by BM25. Without the variable it says it is skipped.
#[tokio::test]
async fn a_ranker_by_meaning_measured_beside_bm25() {
    let Ok(url) = std::env::var("BA_AGENT_TOOL_SEARCH_EMBEDDINGS") else {
        println!("skipped: set BA_AGENT_TOOL_SEARCH_EMBEDDINGS=URL (…/v1) to measure");
        return;
    };
    use ba_model::Embeddings as _;
    let specs: Vec<ToolSpec> = servers()
        .0
        .iter()
        .map(|t| ToolSpec::new(t.name(), t.description(), t.input_schema()))
        .collect();
    let tasks: Vec<Value> = fixture("tasks.json").as_array().unwrap().clone();
    let index = ba_tools::ToolIndex::new(&specs);
    let client = ba_model::OpenAiEmbeddings::new(&url, "all-MiniLM-L6-v2", None).unwrap();
    let tool_texts: Vec<String> = specs
        .iter()
        .map(|s| {
            let params: Vec<&str> = s.input_schema["properties"]
                .as_object()
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            format!(
                "{}: {} ({})",
                s.name.replace('_', " "),
                s.description,
                params.join(", ").replace('_', " ")
            )
        })
        .collect();
    let task_texts: Vec<String> = tasks
        .iter()
        .map(|t| t["task"].as_str().unwrap().to_owned())
        .collect();
    let tool_vectors = client.embed(&tool_texts).await.unwrap();
    let task_vectors = client.embed(&task_texts).await.unwrap();
    let cosine = |a: &[f32], b: &[f32]| -> f64 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        f64::from(dot / (norm(a) * norm(b)).max(f32::EPSILON))
    };
    // (first, in the top five) per ranker.
    let mut tally = [(0, 0); 3];
    for (task, vector) in tasks.iter().zip(&task_vectors) {
        let want = full_name(
            task["server"].as_str().unwrap(),
            task["tool"].as_str().unwrap(),
        );
        let bm25: Vec<(String, f64)> = {
            let hits = index.bm25(task["task"].as_str().unwrap(), specs.len());
            specs
                .iter()
                .map(|s| {
                    let score = hits
                        .iter()
                        .find(|h| h.name == s.name)
                        .map_or(0.0, |h| h.score);
                    (s.name.clone(), score)
                })
                .collect()
        };
        let meaning: Vec<(String, f64)> = specs
            .iter()
            .zip(&tool_vectors)
            .map(|(s, v)| (s.name.clone(), cosine(vector, v)))
            .collect();
        let fused: Vec<(String, f64)> = specs
            .iter()
            .map(|s| {
                let r = |scores: &[(String, f64)]| 1.0 / (60.0 + rank_of(scores, &s.name) as f64);
                (s.name.clone(), r(&bm25) + r(&meaning))
            })
            .collect();
        for (i, scores) in [&bm25, &meaning, &fused].into_iter().enumerate() {
            let rank = rank_of(scores, &want);
            tally[i].0 += usize::from(rank == 1);
            tally[i].1 += usize::from(rank <= 5);
        }
    }
    for (name, (first, five)) in ["BM25", "by meaning", "fused"].iter().zip(tally) {
        println!("{name}: first {first}/100, in the top five {five}/100");
    }
    assert!(tally.iter().all(|(first, five)| five >= first));
}

/// The tools the searches of `entries` found, in order, each once.
fn found_in(entries: &[ba_protocol::LogEntry]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for name in entries
        .iter()
        .filter_map(|e| e.records.tools_found.as_ref())
        .flatten()
    {
        if !found.contains(name) {
            found.push(name.clone());
        }
    }
    found
}

/// What a search found stays offered when another agent opens the conversation the next day
/// (the found tools come from the log, not from the process), and leaves with the question a
/// rewind takes back.
#[tokio::test]
async fn found_tools_come_back_after_a_restart_and_leave_with_a_rewind() {
    let model = searching_model().await;
    let dir = tempfile::tempdir().unwrap();
    let today = agent(&model, dir.path(), DeferMode::Auto, &Tools::InProcess);
    let id = today
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    today
        .send(&id, Input::message("file a bug about the login page crash"))
        .finish()
        .await;
    let first = found_in(&today.entries(&id).await.unwrap());
    assert!(!first.is_empty(), "the first search found tools");
    let kept = today.store().metadata(&id).await.unwrap().last_seq;
    drop(today);

    // The next day, another agent over the same store: the first question's tools are offered
    // from its first request on, before any search of its own.
    let tomorrow = agent(&model, dir.path(), DeferMode::Auto, &Tools::InProcess);
    let asked = model.requests().len();
    tomorrow
        .send(&id, Input::message("how many vacation days do I have left"))
        .finish()
        .await;
    let offered = model.requests()[asked].tools().to_vec();
    for name in &first {
        assert!(
            offered.contains(name),
            "{name} is not offered after the restart"
        );
    }
    let entries = tomorrow.entries(&id).await.unwrap();
    let second: Vec<String> = found_in(&entries)
        .into_iter()
        .filter(|n| !first.contains(n))
        .collect();
    assert!(!second.is_empty(), "the second search found other tools");

    // The second question is taken back: what its search found is no longer offered.
    tomorrow.rewind(&id, kept).await.unwrap();
    let asked = model.requests().len();
    tomorrow
        .send(&id, Input::message("what is on my calendar on Thursday"))
        .finish()
        .await;
    let offered = model.requests()[asked].tools().to_vec();
    for name in &first {
        assert!(offered.contains(name), "{name} left with the rewind");
    }
    for name in &second {
        assert!(
            !offered.contains(name),
            "{name} is still offered after its question was taken back"
        );
    }
}
