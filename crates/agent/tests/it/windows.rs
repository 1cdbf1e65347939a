//! The window of a server that counts in its own tokenizer: a request that does not fit is
//! refused with the window named (the agent keeps it, compresses and sends the round again),
//! and the budget calibrated against the prompt tokens the server reports keeps requests
//! inside a window the local count alone would overflow.

use std::sync::{Arc, Mutex};

use ba_agent::{Agent, Input, RunStatus};
use ba_context::{ContextBudget, Encoding};
use ba_model::{DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, StopReason};
use ba_protocol::{ContentBlock, LogEntry, Message, Mode, Role, Usage};
use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation};

/// The server's window, in its tokens.
const WINDOW: u64 = 4096;
/// Its tokenizer gives this many tokens for each cl100k one.
const RATIO: f64 = 1.5;

/// A server whose tokenizer counts `RATIO` times the local one, refusing (as llama.cpp does)
/// any request over `WINDOW`, and reporting its usage or not.
struct Server {
    reports_usage: bool,
    refusals: Mutex<Vec<u64>>,
}

impl Server {
    fn new(reports_usage: bool) -> Arc<Self> {
        Arc::new(Self {
            reports_usage,
            refusals: Mutex::default(),
        })
    }

    fn tokens(request: &ModelRequest) -> u64 {
        let c = Encoding::Cl100kBase;
        let mut local = request.system.as_deref().map_or(0, |s| c.count(s));
        for e in request.context_entries() {
            local += 4 + c.count(&e.text());
            for call in e.calls() {
                local += c.count(&call.function.arguments);
            }
        }
        for t in &request.tools {
            local += c.count(&t.description) + c.count(&t.input_schema.to_string());
        }
        (local as f64 * RATIO).ceil() as u64
    }
}

#[async_trait::async_trait]
impl ModelClient for Server {
    fn provider(&self) -> &str {
        "openai"
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        _: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let prompt = Self::tokens(request);
        if prompt > WINDOW {
            self.refusals.lock().unwrap().push(prompt);
            return Err(ModelError::ContextOverflow {
                provider: "openai".into(),
                limit: Some(WINDOW),
                requested: Some(prompt),
                message: format!(
                    "request ({prompt} tokens) exceeds the available context size ({WINDOW} tokens)"
                ),
            });
        }
        let usage = if self.reports_usage {
            Usage {
                input_tokens: prompt,
                output_tokens: 3,
                ..Usage::default()
            }
        } else {
            // What the OpenAI client reports for a server without usage: its own count.
            Usage {
                input_tokens: prompt * 2 / 3,
                output_tokens: 3,
                estimated: true,
                ..Usage::default()
            }
        };
        Ok(ModelResponse {
            message: Message::new(
                Role::Assistant,
                vec![ContentBlock::text("The West sold most.")],
            ),
            stop_reason: StopReason::EndTurn,
            usage,
            id: "chatcmpl-1".into(),
            model: "smollm2".into(),
            retries: 0,
            problems: Vec::new(),
        })
    }
}

/// About 550 local tokens of sales notes, different for each `n`: one fits the learned
/// window beside the system prompt and the quarter kept for the answer; six do not.
fn notes(n: usize) -> String {
    (0..30)
        .map(|i| {
            format!(
                "Week {i} of batch {n}: the West region sold {} units at {} dollars. ",
                100 + i * 7 + n,
                20 + (i * 3 + n) % 50
            )
        })
        .collect()
}

async fn agent(dir: &std::path::Path, server: Arc<Server>, budget: ContextBudget) -> Agent {
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir).unwrap());
    Agent::builder(server)
        .store(store)
        .sub_agents(false)
        .configure(|s| {
            s.model = "smollm2".into();
            s.budget = budget;
            s.stream = false;
        })
        .build()
        .unwrap()
}

async fn ask(agent: &Agent, id: &ConversationId, text: String) -> RunStatus {
    let summary = agent.send(id, Input::message(text)).finish().await;
    if let Some(error) = &summary.error {
        eprintln!("the run ended with: {error}");
    }
    summary.status
}

async fn conversation(agent: &Agent) -> ConversationId {
    agent
        .new_conversation(NewConversation {
            title: None,
            mode: Some(Mode::Chat),
            ..NewConversation::default()
        })
        .await
        .unwrap()
}

/// The failed calls of the conversation and the windows it learned, for a failure's message.
async fn failures(agent: &Agent, id: &ConversationId) -> Vec<String> {
    log(agent, id)
        .await
        .iter()
        .filter_map(|e| {
            e.llm_error
                .as_ref()
                .map(|err| format!("{:?}: {}", err.kind, err.message))
                .or_else(|| e.records.window.as_ref().map(|w| format!("{w:?}")))
        })
        .collect()
}

async fn log(agent: &Agent, id: &ConversationId) -> Vec<LogEntry> {
    agent.store().load(id).await.unwrap().into_entries()
}

/// An agent that guesses a window far larger than the server's, and a new conversation.
async fn guessing_a_larger_window(
    dir: &std::path::Path,
    server: &Arc<Server>,
) -> (Agent, ConversationId) {
    let agent = agent(dir, Arc::clone(server), ContextBudget::new(100_000, 6_000)).await;
    let id = conversation(&agent).await;
    (agent, id)
}

#[tokio::test]
async fn a_refused_request_teaches_the_window_which_the_conversation_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(true);
    let (agent, id) = guessing_a_larger_window(dir.path(), &server).await;
    assert_eq!(ask(&agent, &id, notes(0)).await, RunStatus::Answered);
    for n in 1..=5 {
        let status = ask(&agent, &id, notes(n)).await;
        assert_eq!(
            status,
            RunStatus::Answered,
            "follow-up {n}: {:#?}",
            failures(&agent, &id).await
        );
    }
    // Refused once, when the conversation outgrew the window; never again after.
    let refusals = server.refusals.lock().unwrap().clone();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let entries = log(&agent, &id).await;
    let windows: Vec<_> = entries
        .iter()
        .filter_map(|e| e.records.window.as_ref())
        .collect();
    assert_eq!(windows.len(), 1, "{windows:?}");
    assert_eq!(windows[0].tokens, WINDOW);
    assert_eq!(windows[0].refused_tokens, Some(refusals[0]));
    assert_eq!(windows[0].previous, Some(100_000));
    // No failure was left in the log, and the report shows the window.
    assert!(entries.iter().all(|e| e.llm_error.is_none()));
    let report = agent.report(&id).await.unwrap();
    assert_eq!(report.window.as_ref().map(|w| w.tokens), Some(WINDOW));
    assert_eq!(report.model_errors, 0);
}

#[tokio::test]
async fn the_calibrated_budget_fits_a_window_the_local_count_overflows() {
    // The right window, but counted in the local tokenizer: a server that reports no usage
    // leaves nothing to calibrate on, and the conversation overflows its window.
    let budget = ContextBudget::new(WINDOW as usize, 256);
    let dir = tempfile::tempdir().unwrap();
    let blind = Server::new(false);
    let agent_blind = agent(dir.path(), Arc::clone(&blind), budget).await;
    let id = conversation(&agent_blind).await;
    for n in 0..6 {
        ask(&agent_blind, &id, notes(n)).await;
    }
    assert!(
        !blind.refusals.lock().unwrap().is_empty(),
        "the uncalibrated budget never overflowed"
    );
    // The same conversation against a server that reports its prompt tokens: the budget is
    // calibrated from the first answer on and no request is refused.
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(true);
    let agent = agent(dir.path(), Arc::clone(&server), budget).await;
    let id = conversation(&agent).await;
    for n in 0..6 {
        assert_eq!(ask(&agent, &id, notes(n)).await, RunStatus::Answered);
    }
    assert_eq!(*server.refusals.lock().unwrap(), Vec::<u64>::new());
    let report = agent.report(&id).await.unwrap();
    let calibration = report.calibration.unwrap();
    // Both counts hold the tool definitions: the calibration is the tokenizers' ratio, give or
    // take what the two count differently (a message's overhead, the definitions' JSON).
    assert!(
        (RATIO * 0.95..RATIO * 1.05).contains(&calibration.ratio),
        "{calibration:?}"
    );
    assert!(report.window.is_none());
}

/// The context preview (the page's context dialog) counts in the budget the next request is
/// built for: the window the server named and the calibration, not the configured guess.
#[tokio::test]
async fn the_context_preview_counts_in_the_window_the_next_request_gets() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(true);
    let (agent, id) = guessing_a_larger_window(dir.path(), &server).await;
    let mut n = 0;
    while server.refusals.lock().unwrap().is_empty() {
        assert!(n < 10, "the server never refused a request");
        assert_eq!(ask(&agent, &id, notes(n)).await, RunStatus::Answered);
        n += 1;
    }
    let preview = agent.context_debug(&id).await.unwrap();
    // In the local count, with the calibration's margin: under the server's window.
    let total = preview.usage.total;
    assert!(
        total <= WINDOW as usize && total as f64 >= WINDOW as f64 / (RATIO * 1.3),
        "the preview counts against {total} tokens"
    );
    assert!(preview.usage.used <= total, "{:?}", preview.usage);
}

/// A tool with a long definition, as MCP servers declare them.
#[derive(Debug)]
struct Wordy(String);

#[async_trait::async_trait]
impl ba_tools::Tool for Wordy {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> &str {
        "Reads the sales ledger of one region for a period and returns its rows with the \
         product, the quantity, the net amount, the discount and the channel of each sale; \
         filters by store, by product family and by customer segment, and sorts by any column."
    }
    fn input_schema(&self) -> serde_json::Value {
        let field = |what: &str| {
            serde_json::json!({"type": "string", "description": format!(
                "The {what} to read, as the ledger names it; several may be given separated \
                 by commas, and an empty value reads them all.")})
        };
        serde_json::json!({"type": "object", "properties": {
            "region": field("region"), "period": field("period"), "store": field("store"),
            "family": field("product family"), "segment": field("customer segment"),
            "sort": field("column to sort by"),
        }})
    }
    async fn call(
        &self,
        _: serde_json::Value,
        _: &ba_tools::CallContext,
    ) -> Result<serde_json::Value, ba_tools::ToolError> {
        Ok(serde_json::json!({"rows": []}))
    }
}

/// The tool definitions travel with every request: the window must make room for them. With
/// three long definitions (about a fifth of the server's window) and the budget calibrated
/// on the server's counts, a conversation that grows past the window is compressed in time,
/// and the server never refuses a request.
#[tokio::test]
async fn tool_definitions_are_counted_against_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(true);
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let tools: Vec<Arc<dyn ba_tools::Tool>> = (0..3)
        .map(|i| Arc::new(Wordy(format!("ledger_{i}"))) as Arc<dyn ba_tools::Tool>)
        .collect();
    let agent = Agent::builder(Arc::clone(&server) as Arc<dyn ba_model::ModelClient>)
        .store(store)
        .sub_agents(false)
        .tools(tools)
        .configure(|s| {
            s.model = "smollm2".into();
            s.budget = ContextBudget::new(WINDOW as usize, 256);
            s.stream = false;
            s.tool_search.defer = ba_agent::DeferMode::Never;
        })
        .build()
        .unwrap();
    let id = conversation(&agent).await;
    for n in 0..6 {
        let status = ask(&agent, &id, notes(n)).await;
        assert_eq!(
            status,
            RunStatus::Answered,
            "follow-up {n}: {:#?}",
            failures(&agent, &id).await
        );
    }
    assert_eq!(*server.refusals.lock().unwrap(), Vec::<u64>::new());
    // Each call's record counts the definitions it sent, inside what it used.
    let entries = log(&agent, &id).await;
    let records: Vec<_> = entries
        .iter()
        .filter_map(|e| e.records.context.as_ref())
        .collect();
    assert_eq!(records.len(), 6);
    assert!(
        records
            .iter()
            .all(|c| c.tool_tokens > 400 && c.used > c.tool_tokens)
    );
}
