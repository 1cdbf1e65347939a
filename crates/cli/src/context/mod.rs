//! `ba-agent context`: a conversation built into a request window within a token budget
//! (`build`), and a recorded conversation played request by request as the agent would have
//! sent it, with its compactions and the share of each request a prompt cache could serve
//! (`replay`). Both build windows with the context crate's `ContextBuilder`, as the agent does,
//! so the same log gives the same window.

mod build;
mod replay;

use std::future::Future;
use std::sync::Arc;

use anyhow::Context as _;
use ba_agent::ModelEmbedder;
use ba_context::{BuilderSettings, ContextBuilder, Embedder, PromptParts, RetrievalStrategy};
use ba_context::{ContextBudget, ExtractiveSummarizer, MessageCounter, ModelTokenizer, Pipeline};
use ba_protocol::{LogEntry, LogRole};

use crate::exit::{CliError, CliResult};
use crate::input::{self, InputFormat};

/// Subcommands of `context`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Compress a conversation to a token budget and print the request window as JSON.
    Build(build::BuildArgs),
    /// Play a recorded conversation request by request as the agent would have sent it: input
    /// tokens, compactions and the leading tokens each request repeats from the previous one.
    Replay(replay::ReplayArgs),
}

pub(crate) fn run(command: Command) -> CliResult {
    match command {
        Command::Build(args) => build::run(args),
        Command::Replay(args) => replay::run(args),
    }
}

/// Strategies the commands offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Strategy {
    Truncate,
    KeyMessages,
    Importance,
    Summary,
    Hybrid,
    /// Key-messages, and what left the window most related to the latest user message
    /// recalled by BM25 (and by embeddings with `--embeddings`), within a tenth of the window.
    Retrieval,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Self::Truncate => "truncate",
            Self::KeyMessages => "key-messages",
            Self::Importance => "importance",
            Self::Summary => "summary",
            Self::Hybrid => "hybrid",
            Self::Retrieval => "retrieval",
        }
    }
}

/// The embeddings endpoint of `--strategy retrieval`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct EmbeddingsArgs {
    /// With `--strategy retrieval`: rank the passages by the vectors of this OpenAI-compatible
    /// embeddings endpoint too (its base URL, the part before `/embeddings`).
    #[arg(long, value_name = "URL")]
    embeddings: Option<String>,
    /// The embedding model asked for (default `text-embedding-3-small`).
    #[arg(long, value_name = "MODEL", requires = "embeddings")]
    embeddings_model: Option<String>,
    /// The environment variable holding the endpoint's API key (none is sent without it).
    #[arg(long, value_name = "VAR", requires = "embeddings")]
    embeddings_key_env: Option<String>,
}

/// How the commands run the builder: on the context crate's own executor, or, when an
/// embeddings endpoint is called, on a runtime that has a reactor for its connections.
struct Runner {
    runtime: Option<tokio::runtime::Runtime>,
    embedder: Option<ModelEmbedder>,
}

impl Runner {
    fn new(strategy: Strategy, args: &EmbeddingsArgs) -> Result<Self, CliError> {
        let Some(url) = &args.embeddings else {
            return Ok(Self {
                runtime: None,
                embedder: None,
            });
        };
        if strategy != Strategy::Retrieval {
            return Err(CliError::input(anyhow::anyhow!(
                "--embeddings applies to --strategy retrieval only"
            )));
        }
        let key = match &args.embeddings_key_env {
            Some(var) => Some(ba_model::ApiKey::new(crate::config::env(var).ok_or_else(
                || CliError::input(anyhow::anyhow!("--embeddings-key-env: ${var} is not set")),
            )?)),
            None => None,
        };
        let model = args
            .embeddings_model
            .clone()
            .unwrap_or_else(|| "text-embedding-3-small".to_owned());
        let client = ba_model::OpenAiEmbeddings::new(url, model, key)
            .map_err(|e| CliError::input(anyhow::anyhow!("--embeddings: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the runtime of the embeddings client")?;
        Ok(Self {
            runtime: Some(runtime),
            embedder: Some(ModelEmbedder::new(Arc::new(client))),
        })
    }

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        match &self.runtime {
            Some(rt) => rt.block_on(f),
            None => ba_context::block_on(f),
        }
    }

    fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder
            .clone()
            .map(|e| Arc::new(e) as Arc<dyn Embedder>)
    }

    /// A warning on stderr for each failure of the endpoint since the last call: retrieval
    /// ranked by BM25 alone there.
    fn warn(&self) {
        if let Some(e) = &self.embedder {
            for failure in e.take_failures() {
                eprintln!(
                    "warning: the embeddings endpoint failed; retrieval ranked by BM25 alone: {failure}"
                );
            }
        }
    }
}

/// Wire formats of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Wire {
    Anthropic,
    Openai,
    /// OpenAI's Responses API: the system text as `instructions`, the window as `input` items.
    Responses,
}

/// A conversation read for the context commands.
struct Conversation {
    /// The input's system text (its leading system entries), joined.
    system: String,
    /// The rest.
    entries: Vec<LogEntry>,
    /// The format it was read as.
    format: InputFormat,
}

/// Reads `file` (any format the CLI reads); leading system entries are the request's system
/// prompt, not history.
fn read_conversation(file: &str) -> anyhow::Result<Conversation> {
    let name = if file == "-" { "stdin" } else { file };
    let text = input::read_text(file)?;
    let loaded =
        input::load(&text, InputFormat::Auto).with_context(|| format!("reading {name}"))?;
    let lead = loaded
        .entries
        .iter()
        .take_while(|e| matches!(e.role, LogRole::System | LogRole::Developer))
        .count();
    let system: Vec<String> = loaded.entries[..lead]
        .iter()
        .map(|e| e.text().into_owned())
        .collect();
    Ok(Conversation {
        system: system.join("\n\n"),
        entries: loaded.entries[lead..].to_vec(),
        format: loaded.format,
    })
}

/// The builder the commands use: the input's system text as base rules, the default settings,
/// the strategy's pipeline with the offline summarizer (and `embedder` for retrieval).
fn builder(
    system: &str,
    budget: ContextBudget,
    strategy: Strategy,
    tokenizer: ModelTokenizer,
    embedder: Option<Arc<dyn Embedder>>,
) -> Result<ContextBuilder, CliError> {
    let pipeline = match embedder {
        Some(e) => Pipeline::new(vec![Box::new(
            RetrievalStrategy::default().with_embedder(e),
        )]),
        None => Pipeline::named(strategy.name(), Some(Arc::new(ExtractiveSummarizer)))
            .map_err(CliError::input)?,
    };
    Ok(ContextBuilder::new(
        PromptParts {
            base_rules: system.to_owned(),
            ..PromptParts::default()
        },
        BuilderSettings::default(),
        budget,
        pipeline,
        MessageCounter::new(tokenizer),
    ))
}
