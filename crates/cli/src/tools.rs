//! `ba-agent tools list|call`: the tools a configuration offers the model, and one call run
//! through the tool runtime (validation, permissions, levels, spill) with its observation
//! printed — what the model would see.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use ba_agent::DataFileSink;
use ba_protocol::{InvocationContext, OutputLevel, ToolCall};
use ba_storage::DataFileStore;
use ba_tools::{ToolRegistry, ToolRuntime, ToolsConfig};
use serde_json::{Value, json};

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::out::outln;

/// `tools` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// The tools the configuration offers, with their descriptions and parameters.
    List {
        /// The configuration file (default: $BA_AGENT_CONFIG, else none).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the tool specifications (name, description, input schema) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool call and print the observation the model would read.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments: a JSON object, `@FILE` to read it from a file, or `-` for stdin.
        json: String,
        /// The output level: brief, standard (default) or full.
        #[arg(long, value_name = "LEVEL")]
        level: Option<String>,
        /// The configuration file (default: $BA_AGENT_CONFIG, else none).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

pub(crate) fn run(command: Command) -> CliResult {
    match command {
        Command::List { config, json } => list(config, json),
        Command::Call {
            name,
            json,
            level,
            config,
        } => call(config, &name, &json, level.as_deref()),
    }
}

fn registry(config: &Config) -> Result<ToolRegistry, CliError> {
    let mut registry = ToolRegistry::new();
    for tool in config.tools()? {
        registry
            .register_arc(tool)
            .map_err(|e| CliError::input(anyhow!("{e}")))?;
    }
    Ok(registry)
}

fn list(config: Option<PathBuf>, as_json: bool) -> CliResult {
    let config = Config::load(config.as_deref())?;
    let registry = registry(&config)?;
    let specs = registry.specs();
    if as_json {
        let text = serde_json::to_string_pretty(&specs).context("rendering JSON")?;
        outln!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    for spec in specs {
        let params: Vec<String> = spec
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        outln!("{}", spec.name);
        outln!("  {}", spec.description);
        outln!("  parameters: {}", params.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

fn arguments(raw: &str) -> Result<Value, CliError> {
    let text = if raw == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the arguments from stdin")?
    } else if let Some(file) = raw.strip_prefix('@') {
        std::fs::read_to_string(file)
            .with_context(|| format!("reading the arguments from {file}"))?
    } else {
        raw.to_owned()
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::input(anyhow!("JSON: the arguments are not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CliError::input(anyhow!(
            "JSON: the arguments must be a JSON object, like '{{\"path\": \"sales.csv\"}}'"
        )));
    }
    Ok(value)
}

fn level(raw: Option<&str>) -> Result<Option<OutputLevel>, CliError> {
    raw.map(|l| {
        serde_json::from_value::<OutputLevel>(json!(l)).map_err(|_| {
            CliError::input(anyhow!(
                "--level: `{l}` is not a level; use brief, standard or full"
            ))
        })
    })
    .transpose()
}

fn call(config: Option<PathBuf>, name: &str, raw: &str, level_arg: Option<&str>) -> CliResult {
    let config = Config::load(config.as_deref())?;
    let args = arguments(raw)?;
    let level = level(level_arg)?;
    let registry = registry(&config)?;
    if registry.get(name).is_none() {
        let names: Vec<&str> = registry.names().collect();
        return Err(CliError::input(anyhow!(
            "unknown tool `{name}`; this configuration offers: {}",
            names.join(", ")
        )));
    }
    let spill_dir = config.home().join("data-files");
    let sink = DataFileSink::new(
        DataFileStore::open(&spill_dir)
            .with_context(|| format!("opening the data files in {}", spill_dir.display()))?,
    );
    let runtime = ToolRuntime::new(registry, ToolsConfig::default())
        .map_err(|e| CliError::input(anyhow!("{e}")))?
        .with_sink(Arc::new(sink));
    let mut tool_call = ToolCall::new("call_cli", name, args);
    tool_call.output_level = level;
    let ctx = InvocationContext {
        caller_id: "ba-agent tools call".into(),
        ..InvocationContext::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = rt.block_on(runtime.run(&tool_call, &ctx));
    if !result.success {
        return Err(CliError::input(anyhow!("{}", result.observation)));
    }
    outln!("{}", result.observation);
    Ok(ExitCode::SUCCESS)
}
