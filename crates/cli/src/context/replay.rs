//! `ba-agent context replay`: a recorded conversation played as the agent would have sent it,
//! one request per assistant turn, with the agent's persisted compaction: each compaction is
//! recorded in the (simulated) log and later requests start from it. For every request: its
//! input tokens, whether it compacted, and how many of its tokens a provider's prompt cache
//! serves — its leading items (tools, system, then messages, as the Anthropic body holds them)
//! equal to the previous request's; the rest are uncached. Beside it, the same replay with no
//! compression (every request the whole conversation so far), and what each costs with cached
//! tokens at a tenth of the price of uncached ones.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ba_context::BuildRequest;
use ba_context::ContextBudget;
use ba_model::{AnthropicClient, CacheHint, ModelRequest, OpenAiClient};
use ba_protocol::{LogEntry, LogRole};

use super::{EmbeddingsArgs, Runner, Strategy, Wire, builder, read_conversation};
use crate::exit::{CliError, CliResult};
use crate::out::outln;

/// Arguments of `context replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The model's context window, in tokens.
    #[arg(long)]
    budget: usize,
    /// Compression strategy.
    #[arg(long, value_enum, default_value = "key-messages")]
    strategy: Strategy,
    #[command(flatten)]
    embeddings: EmbeddingsArgs,
    /// Tokens kept free for the response (default: an eighth of the budget).
    #[arg(long)]
    reserve: Option<usize>,
    /// Count with this model's encoding.
    #[arg(long, conflicts_with = "encoding")]
    model: Option<String>,
    /// Count with this encoding (default cl100k_base).
    #[arg(long)]
    encoding: Option<String>,
    /// Write each request body, as the provider would receive it, into DIR (0001.json, …).
    #[arg(long, value_name = "DIR")]
    emit: Option<PathBuf>,
    /// The provider of the emitted bodies.
    #[arg(long, value_enum, default_value = "anthropic")]
    to: Wire,
    /// Rebuild every request from the whole log, without recording compactions (how requests
    /// were built before compactions were persisted), for comparison.
    #[arg(long)]
    stateless: bool,
    /// Print JSON: `{"requests": […], "totals": {…}}`.
    #[arg(long)]
    json: bool,
    /// Conversation file (Anthropic/OpenAI request JSON, log JSONL, Claude Code session), or `-`.
    file: String,
}

/// One replayed request.
#[derive(Debug, serde::Serialize)]
struct Request {
    /// 1-based.
    request: usize,
    /// The id of the assistant entry the request was answered by.
    before_entry: String,
    /// System, messages and reply priming, as the budget counts them.
    input_tokens: usize,
    /// Whether this request's window was compacted.
    compacted: bool,
    /// The request's tokens, item by item (tools, system, each message).
    request_tokens: usize,
    /// Tokens of its leading items equal to the previous request's.
    cached_tokens: usize,
    /// The same request with no compression: its tokens and cached tokens.
    no_compression: (usize, usize),
}

/// What a series of requests cost a prompt cache.
#[derive(Debug, Default, serde::Serialize)]
struct Cost {
    /// Tokens of every request, item by item.
    request_tokens: usize,
    /// Tokens of the leading items equal to the previous request's.
    cached_tokens: usize,
    /// The rest.
    uncached_tokens: usize,
    /// `cached_tokens / request_tokens`.
    cacheable_share: f64,
    /// Uncached tokens at 1, cached at 0.1: the input price in uncached tokens.
    cost: f64,
}

impl Cost {
    fn add(&mut self, request: usize, cached: usize) {
        self.request_tokens += request;
        self.cached_tokens += cached;
        self.uncached_tokens += request - cached;
    }

    fn finish(mut self) -> Self {
        self.cacheable_share = share(self.cached_tokens, self.request_tokens);
        self.cost = self.uncached_tokens as f64 + 0.1 * self.cached_tokens as f64;
        self
    }
}

/// The totals of a replay.
#[derive(Debug, serde::Serialize)]
struct Totals {
    requests: usize,
    compactions: usize,
    /// Input tokens as the budget counts them.
    input_tokens: usize,
    /// The replay's requests, item by item.
    #[serde(flatten)]
    cost: Cost,
    /// The same replay with no compression: every request the whole conversation so far
    /// (which may be over the budget).
    no_compression: Cost,
    /// Uncached tokens of the replay ÷ those of the replay with no compression.
    uncached_vs_no_compression: f64,
    /// Cost of the replay ÷ that of the replay with no compression.
    cost_vs_no_compression: f64,
    budget: usize,
    strategy: &'static str,
    stateless: bool,
}

#[derive(Debug, serde::Serialize)]
struct Output {
    requests: Vec<Request>,
    totals: Totals,
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// `value` without its cache markers, and with text given as a string written as the one text
/// block it stands for: where a breakpoint sits, and which of the two equal forms carries a
/// text, are not part of what is cached.
fn without_cache_marks(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(text) => {
            serde_json::json!([{"type": "text", "text": text}])
        }
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(k, _)| k.as_str() != "cache_control")
            .map(|(k, v)| {
                let v = match (k.as_str(), v) {
                    ("content", serde_json::Value::String(_)) => without_cache_marks(v),
                    (_, serde_json::Value::String(_)) => v.clone(),
                    _ => without_cache_marks(v),
                };
                (k.clone(), v)
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(without_cache_marks).collect(),
        other => other.clone(),
    }
}

/// The items of an Anthropic request body in the order a prompt cache reads them — each tool,
/// the system prompt, each message — with their tokens (counted once per distinct item).
struct Items {
    keys: Vec<u64>,
    tokens: Vec<usize>,
}

/// Counts items, remembering the count of each item seen.
struct ItemCounter {
    tokenizer: ba_context::ModelTokenizer,
    seen: std::collections::HashMap<u64, usize>,
}

impl ItemCounter {
    fn items(&mut self, body: &serde_json::Value) -> Items {
        use ba_protocol::TokenCounter as _;
        use std::hash::{Hash, Hasher};
        let mut parts: Vec<serde_json::Value> = Vec::new();
        if let Some(tools) = body.get("tools").and_then(serde_json::Value::as_array) {
            parts.extend(tools.iter().cloned());
        }
        if let Some(system) = body.get("system") {
            parts.push(system.clone());
        }
        if let Some(messages) = body.get("messages").and_then(serde_json::Value::as_array) {
            parts.extend(messages.iter().cloned());
        }
        let mut items = Items {
            keys: Vec::new(),
            tokens: Vec::new(),
        };
        for part in parts {
            let text = without_cache_marks(&part).to_string();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            text.hash(&mut h);
            let key = h.finish();
            let tokenizer = &self.tokenizer;
            let n = *self
                .seen
                .entry(key)
                .or_insert_with(|| tokenizer.count(&text));
            items.keys.push(key);
            items.tokens.push(n);
        }
        items
    }
}

/// Tokens of `this` request's leading items equal to `previous`'s.
fn cached(previous: &Items, this: &Items) -> usize {
    previous
        .keys
        .iter()
        .zip(&this.keys)
        .zip(&this.tokens)
        .take_while(|((a, b), _)| a == b)
        .map(|(_, n)| *n)
        .sum()
}

pub(super) fn run(args: ReplayArgs) -> CliResult {
    let tok = crate::tokens::tokenizer(args.encoding.as_deref(), args.model.as_deref())?;
    let name = if args.file == "-" {
        "stdin"
    } else {
        &args.file
    };
    let conv = read_conversation(&args.file)?;
    let reserve = args.reserve.unwrap_or(args.budget / 8);
    if reserve >= args.budget {
        return Err(CliError::input(anyhow::anyhow!(
            "--reserve {reserve} leaves nothing of --budget {}",
            args.budget
        )));
    }
    let budget = ContextBudget::new(args.budget, reserve);
    if let Some(dir) = &args.emit {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the folder {}", dir.display()))?;
    }
    let runner = Runner::new(args.strategy, &args.embeddings)?;
    let mut replay = Replay {
        builder: builder(&conv.system, budget, args.strategy, tok, runner.embedder())?,
        runner,
        system: conv.system.clone(),
        args: &args,
        log: Vec::new(),
        requests: Vec::new(),
        compactions: 0,
        items: ItemCounter {
            tokenizer: tok,
            seen: Default::default(),
        },
        ours: Cost::default(),
        whole: Cost::default(),
        previous: None,
        previous_whole: None,
    };
    let mut seen_user = false;
    for entry in &conv.entries {
        if entry.role == LogRole::Assistant && seen_user && awaits_answer(&replay.log) {
            replay.request_before(entry, name)?;
        }
        if entry.role == LogRole::User && entry.include_in_context {
            seen_user = true;
        }
        replay.log.push(entry.clone());
    }
    let (requests, totals) = replay.finish();
    if args.json {
        let out = Output { requests, totals };
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).context("writing JSON")?
        );
    } else {
        print_table(&requests, &totals);
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the last entry the model reads is a question or a tool's result: the model's next
/// turn is then a request of its own.
fn awaits_answer(log: &[LogEntry]) -> bool {
    log.iter()
        .rev()
        .find(|e| e.include_in_context && !matches!(e.role, LogRole::System))
        .is_some_and(|e| matches!(e.role, LogRole::User | LogRole::Tool))
}

/// A conversation replayed request by request: the log as the loop would have kept it (with
/// the compactions it would have recorded), and the costs of our requests beside those of the
/// same requests with no compression.
struct Replay<'a> {
    builder: ba_context::ContextBuilder,
    runner: Runner,
    system: String,
    args: &'a ReplayArgs,
    log: Vec<LogEntry>,
    requests: Vec<Request>,
    compactions: usize,
    items: ItemCounter,
    ours: Cost,
    whole: Cost,
    previous: Option<Items>,
    previous_whole: Option<Items>,
}

impl Replay<'_> {
    /// Builds the request the model would have been sent before `entry` of the conversation
    /// read from `name`, writes it out when asked, and adds it to the figures.
    fn request_before(&mut self, entry: &LogEntry, name: &str) -> anyhow::Result<()> {
        let task = self
            .log
            .iter()
            .rev()
            .find(|e| e.role == LogRole::User && e.include_in_context)
            .map(|e| e.text().into_owned());
        let request = BuildRequest {
            entries: &self.log,
            task,
            ..BuildRequest::default()
        };
        let built = self
            .runner
            .block_on(
                self.builder
                    .build_with_system(&request, self.system.clone()),
            )
            .with_context(|| {
                format!(
                    "{name}: the request before entry {} does not fit {} tokens",
                    entry.id, self.args.budget
                )
            })?;
        self.runner.warn();
        let compacted = built.compaction.is_some();
        let n = self.requests.len() + 1;
        let model_request = ModelRequest::new("replay", built.entries.clone())
            .with_system(built.system.clone())
            .with_cache(CacheHint {
                stable_entries: built.stable,
                key: Some("replay".to_owned()),
            });
        let anthropic = AnthropicClient::request_body(&model_request);
        if let Some(dir) = &self.args.emit {
            emit(dir, n, self.args.to, &model_request, &anthropic)?;
        }
        let this = self.items.items(&anthropic);
        let hit = self.previous.as_ref().map_or(0, |p| cached(p, &this));
        let request_tokens: usize = this.tokens.iter().sum();
        self.ours.add(request_tokens, hit);
        // The same request with no compression: the whole conversation so far.
        let plain: Vec<LogEntry> = self
            .log
            .iter()
            .filter(|e| !e.is_compaction())
            .cloned()
            .collect();
        let full = ModelRequest::new("replay", plain).with_system(self.system.clone());
        let full = self.items.items(&AnthropicClient::request_body(&full));
        let full_hit = self.previous_whole.as_ref().map_or(0, |p| cached(p, &full));
        let full_tokens: usize = full.tokens.iter().sum();
        self.whole.add(full_tokens, full_hit);
        self.previous_whole = Some(full);
        self.requests.push(Request {
            request: n,
            before_entry: entry.id.clone(),
            input_tokens: built.debug.usage.used,
            compacted,
            request_tokens,
            cached_tokens: hit,
            no_compression: (full_tokens, full_hit),
        });
        if let Some(record) = built.compaction.filter(|_| !self.args.stateless) {
            self.compactions += 1;
            self.log
                .push(record.into_entry(format!("compaction-{n}"), entry.created_at.clone()));
        } else if compacted {
            self.compactions += 1;
        }
        self.previous = Some(this);
        Ok(())
    }

    /// The requests and their totals.
    fn finish(self) -> (Vec<Request>, Totals) {
        let input: usize = self.requests.iter().map(|r| r.input_tokens).sum();
        let (ours, whole) = (self.ours.finish(), self.whole.finish());
        let totals = Totals {
            requests: self.requests.len(),
            compactions: self.compactions,
            input_tokens: input,
            uncached_vs_no_compression: share(ours.uncached_tokens, whole.uncached_tokens),
            cost_vs_no_compression: if whole.cost > 0.0 {
                ours.cost / whole.cost
            } else {
                0.0
            },
            cost: ours,
            no_compression: whole,
            budget: self.args.budget,
            strategy: self.args.strategy.name(),
            stateless: self.args.stateless,
        };
        (self.requests, totals)
    }
}

/// Writes request `n` as provider `to` would receive it into `dir` (`0001.json`, …).
fn emit(
    dir: &std::path::Path,
    n: usize,
    to: Wire,
    request: &ModelRequest,
    anthropic: &serde_json::Value,
) -> anyhow::Result<()> {
    let body = match to {
        Wire::Anthropic => anthropic.clone(),
        Wire::Openai => OpenAiClient::new(None)?.request_body(request),
        Wire::Responses => ba_model::ResponsesClient::new(None)?.request_body(request),
    };
    let path = dir.join(format!("{n:04}.json"));
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&body).context("writing JSON")?,
    )
    .with_context(|| format!("writing {}", path.display()))
}

/// The requests one a line, then the totals beside those with no compression.
fn print_table(requests: &[Request], totals: &Totals) {
    outln!("request  before entry                            input  compacted    cached");
    for r in requests {
        let share = share(r.cached_tokens, r.request_tokens) * 100.0;
        outln!(
            "{:>7}  {:<36} {:>8}  {:<9}  {:>8} ({share:.1} %)",
            r.request,
            r.before_entry,
            r.input_tokens,
            if r.compacted { "yes" } else { "no" },
            r.cached_tokens
        );
    }
    let c = &totals.cost;
    outln!(
        "{} requests · {} compactions · {} request tokens · {} cached ({:.1} %) · cost {:.0} · budget {} · {}{}",
        totals.requests,
        totals.compactions,
        c.request_tokens,
        c.cached_tokens,
        c.cacheable_share * 100.0,
        c.cost,
        totals.budget,
        totals.strategy,
        if totals.stateless {
            " · stateless"
        } else {
            ""
        }
    );
    let w = &totals.no_compression;
    outln!(
        "no compression: {} request tokens · {:.1} % cached · cost {:.0} · ours: uncached {:.2}×, cost {:.2}×",
        w.request_tokens,
        w.cacheable_share * 100.0,
        w.cost,
        totals.uncached_vs_no_compression,
        totals.cost_vs_no_compression
    );
}
