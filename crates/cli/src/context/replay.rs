//! `ba-agent context replay`: a recorded conversation played as the agent would have sent it,
//! one request per assistant turn, with the agent's persisted compaction: each compaction is
//! recorded in the (simulated) log and later requests start from it. For every request: its
//! input tokens, whether it compacted, and how many of its leading tokens repeat the previous
//! request — what a provider's prompt cache could serve.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ba_context::BuildRequest;
use ba_context::{ContextBudget, MessageCounter, block_on};
use ba_model::{AnthropicClient, CacheHint, ModelRequest, OpenAiClient};
use ba_protocol::{LogEntry, LogRole};

use super::{Strategy, Wire, builder, read_conversation};
use crate::cli::{CliError, CliResult};
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
    /// System, messages and reply priming, counted.
    input_tokens: usize,
    /// Whether this request's window was compacted.
    compacted: bool,
    /// Leading tokens equal to the previous request's.
    repeated_prefix_tokens: usize,
}

/// The totals of a replay.
#[derive(Debug, serde::Serialize)]
struct Totals {
    requests: usize,
    compactions: usize,
    input_tokens: usize,
    repeated_prefix_tokens: usize,
    /// `repeated_prefix_tokens / input_tokens`: the share of input a prompt cache could serve.
    cacheable_share: f64,
    /// The limit no compression reaches: every request the whole conversation so far (which
    /// may be over the budget), each one the previous request plus what came after it.
    limit_input_tokens: usize,
    /// Leading tokens of the limit's requests equal to the previous one's.
    limit_repeated_prefix_tokens: usize,
    /// `limit_repeated_prefix_tokens / limit_input_tokens`.
    limit_cacheable_share: f64,
    /// Uncached input tokens (input − repeated) of the replay ÷ those of the limit: how many
    /// times the tokens a cache cannot serve the limit pays.
    uncached_vs_limit: f64,
    budget: usize,
    strategy: &'static str,
    stateless: bool,
}

#[derive(Debug, serde::Serialize)]
struct Output {
    requests: Vec<Request>,
    totals: Totals,
}

/// The pieces of a request in order, each with its tokens: the system prompt, then each entry.
/// A request repeats the previous one's front as far as these pieces are equal.
fn pieces(system: &str, entries: &[LogEntry], counter: &MessageCounter) -> Vec<(String, usize)> {
    let mut out = vec![(format!("system:{system}"), counter.system(system))];
    for e in entries {
        let key = serde_json::to_string(e).unwrap_or_default();
        out.push((key, counter.entry(e)));
    }
    out
}

fn common_prefix(a: &[(String, usize)], b: &[(String, usize)]) -> usize {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x.0 == y.0)
        .map(|(x, _)| x.1)
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
    let builder = builder(&conv.system, budget, args.strategy, tok)?;
    let counter = MessageCounter::new(tok);
    if let Some(dir) = &args.emit {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the folder {}", dir.display()))?;
    }
    let mut log: Vec<LogEntry> = Vec::new();
    let mut requests = Vec::new();
    let mut previous: Vec<(String, usize)> = Vec::new();
    let mut compactions = 0;
    let mut seen_user = false;
    // The limit: the system prompt and every entry the model would read, never compressed.
    let mut limit_tokens = counter.system(&conv.system);
    let (mut limit_input, mut limit_repeated, mut limit_previous) = (0usize, 0usize, 0usize);
    for entry in &conv.entries {
        let opens_turn = entry.role == LogRole::Assistant
            && seen_user
            && log
                .iter()
                .rev()
                .find(|e| e.include_in_context && !matches!(e.role, LogRole::System))
                .is_some_and(|e| matches!(e.role, LogRole::User | LogRole::Tool));
        if opens_turn {
            let task = log
                .iter()
                .rev()
                .find(|e| e.role == LogRole::User && e.include_in_context)
                .map(|e| e.text().into_owned());
            let request = BuildRequest {
                entries: &log,
                task,
                ..BuildRequest::default()
            };
            let built = block_on(builder.build_with_system(&request, conv.system.clone()))
                .with_context(|| {
                    format!(
                        "{name}: the request before entry {} does not fit {} tokens",
                        entry.id, args.budget
                    )
                })?;
            let compacted = built.compaction.is_some();
            let this = pieces(&built.system, &built.entries, &counter);
            let repeated = common_prefix(&previous, &this);
            let n = requests.len() + 1;
            if let Some(dir) = &args.emit {
                let model_request = ModelRequest::new("replay", built.entries.clone())
                    .with_system(built.system.clone())
                    .with_cache(CacheHint {
                        stable_entries: built.stable,
                        key: Some("replay".to_owned()),
                    });
                let body = match args.to {
                    Wire::Anthropic => AnthropicClient::request_body(&model_request),
                    Wire::Openai => OpenAiClient::new(None)
                        .map_err(anyhow::Error::from)?
                        .request_body(&model_request),
                    Wire::Responses => ba_model::ResponsesClient::new(None)
                        .map_err(anyhow::Error::from)?
                        .request_body(&model_request),
                };
                let path = dir.join(format!("{n:04}.json"));
                std::fs::write(
                    &path,
                    serde_json::to_vec_pretty(&body).context("writing JSON")?,
                )
                .with_context(|| format!("writing {}", path.display()))?;
            }
            limit_input += limit_tokens + counter.reply_priming();
            limit_repeated += limit_previous;
            limit_previous = limit_tokens;
            requests.push(Request {
                request: n,
                before_entry: entry.id.clone(),
                input_tokens: built.debug.usage.used,
                compacted,
                repeated_prefix_tokens: repeated,
            });
            if let Some(record) = built.compaction.filter(|_| !args.stateless) {
                compactions += 1;
                log.push(record.into_entry(format!("compaction-{n}"), entry.created_at.clone()));
            } else if compacted {
                compactions += 1;
            }
            previous = this;
        }
        if entry.role == LogRole::User && entry.include_in_context {
            seen_user = true;
        }
        if entry.include_in_context && !entry.is_compaction() {
            limit_tokens += counter.entry(entry);
        }
        log.push(entry.clone());
    }
    let input: usize = requests.iter().map(|r| r.input_tokens).sum();
    let repeated: usize = requests.iter().map(|r| r.repeated_prefix_tokens).sum();
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        }
    };
    let totals = Totals {
        requests: requests.len(),
        compactions,
        input_tokens: input,
        repeated_prefix_tokens: repeated,
        cacheable_share: share(repeated, input),
        limit_input_tokens: limit_input,
        limit_repeated_prefix_tokens: limit_repeated,
        limit_cacheable_share: share(limit_repeated, limit_input),
        uncached_vs_limit: share(input - repeated, limit_input - limit_repeated),
        budget: args.budget,
        strategy: args.strategy.name(),
        stateless: args.stateless,
    };
    if args.json {
        let out = Output { requests, totals };
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).context("writing JSON")?
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("request  before entry                            input  compacted  repeated prefix");
    for r in &requests {
        let share = if r.input_tokens == 0 {
            0.0
        } else {
            r.repeated_prefix_tokens as f64 * 100.0 / r.input_tokens as f64
        };
        outln!(
            "{:>7}  {:<36} {:>8}  {:<9}  {:>8} ({share:.1} %)",
            r.request,
            r.before_entry,
            r.input_tokens,
            if r.compacted { "yes" } else { "no" },
            r.repeated_prefix_tokens
        );
    }
    outln!(
        "{} requests · {} compactions · {} input tokens · {} repeated ({:.1} % cacheable) · budget {} · {}{}",
        totals.requests,
        totals.compactions,
        totals.input_tokens,
        totals.repeated_prefix_tokens,
        totals.cacheable_share * 100.0,
        totals.budget,
        totals.strategy,
        if totals.stateless {
            " · stateless"
        } else {
            ""
        }
    );
    outln!(
        "no compression (the limit): {} input tokens · {:.1} % cacheable · uncached tokens {:.2}× the limit's",
        totals.limit_input_tokens,
        totals.limit_cacheable_share * 100.0,
        totals.uncached_vs_limit
    );
    Ok(ExitCode::SUCCESS)
}
