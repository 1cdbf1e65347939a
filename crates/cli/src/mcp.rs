//! MCP servers and Claude Code plugins: where a command's servers and plugin skills come from
//! (the configuration's `mcp_servers` and `plugins`, `--mcp-config FILE`, `--plugin DIR…`),
//! and `ba-agent mcp list|call`, the commands a user runs when a server misbehaves; `mcp serve`
//! ([`serve`]) is the other direction, this project's tools served to MCP clients.
//!
//! Contract (scripts depend on it): `mcp list --json` prints `{"servers": [{"name", "state",
//! "tools": [{"name": RAW, "model_name", "input_schema", …}], "skipped": [{"name", "reason"}],
//! …}]}`; `mcp call SERVER TOOL JSON` prints the tool's text and structured content and exits
//! 0, prints the text of an `isError` result and exits 1, and exits 2 with the stderr tail of a
//! server that failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use ba_mcp::{McpCallResult, McpError, McpManager, McpOptions, McpServerConfig, Plugin};
use ba_skills::SkillRoot;

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::out::{out, outln};

mod serve;

/// The flags every command that takes servers or plugins accepts (global: before or after the
/// subcommand).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ExtOpts {
    /// MCP servers from a Claude Code `.mcp.json` (`mcpServers`, `${VAR}` and `${VAR:-default}`
    /// expanded), besides the configuration's `mcp_servers`.
    #[arg(long = "mcp-config", value_name = "FILE", global = true)]
    pub(crate) mcp_config: Option<PathBuf>,
    /// A Claude Code plugin folder: its skills (named `PLUGIN:SKILL`) and its MCP servers
    /// (`PLUGIN__SERVER`); repeat for more, besides the configuration's `plugins`.
    #[arg(long = "plugin", value_name = "DIR", global = true)]
    pub(crate) plugins: Vec<PathBuf>,
}

impl ExtOpts {
    pub(crate) fn is_empty(&self) -> bool {
        self.mcp_config.is_none() && self.plugins.is_empty()
    }
}

/// What a command's servers and plugins are.
#[derive(Debug, Default)]
pub(crate) struct Extensions {
    /// Every server, in order: the configuration's, the `.mcp.json`'s, each plugin's.
    pub(crate) servers: Vec<(String, McpServerConfig)>,
    /// The plugins' skill folders, each under its plugin's namespace.
    pub(crate) skill_roots: Vec<SkillRoot>,
    /// The plugins read.
    pub(crate) plugins: Vec<Plugin>,
}

impl Extensions {
    /// Reads the servers and plugins of `config`, `--mcp-config` and `--plugin`. Problems
    /// with single entries are printed as warnings on stderr; an unreadable file or folder, or
    /// two servers of one name, is an error.
    pub(crate) fn gather(config: &Config, opts: &ExtOpts) -> anyhow::Result<Self> {
        let mut ext = Self::default();
        let mut origin: BTreeMap<String, String> = BTreeMap::new();
        let mut add = |ext: &mut Self, name: String, server: McpServerConfig, from: &str| {
            if let Some(first) = origin.get(&name) {
                bail!("two MCP servers are named `{name}`: in {first} and in {from}");
            }
            origin.insert(name.clone(), from.to_owned());
            ext.servers.push((name, server));
            Ok(())
        };
        for (name, server) in &config.mcp_servers {
            add(&mut ext, name.clone(), server.clone(), "the configuration")?;
        }
        if let Some(path) = &opts.mcp_config {
            let file = ba_mcp::read_mcp_json(path).map_err(|e| anyhow!(e))?;
            for d in &file.diagnostics {
                eprintln!("warning: {}: {}", path.display(), describe(d));
            }
            let from = path.display().to_string();
            for (name, server) in file.servers {
                add(&mut ext, name, server, &from)?;
            }
        }
        for dir in config.plugins.iter().chain(&opts.plugins) {
            let plugin = ba_mcp::load_plugin(dir).map_err(|e| anyhow!(e))?;
            if ext.plugins.iter().any(|p| p.name == plugin.name) {
                bail!(
                    "two plugins are named `{}` ({}); their skills and servers would clash",
                    plugin.name,
                    dir.display()
                );
            }
            for d in &plugin.diagnostics {
                eprintln!("warning: plugin {}: {}", plugin.name, describe(d));
            }
            let from = format!("plugin {}", dir.display());
            for (name, server) in &plugin.servers {
                add(&mut ext, name.clone(), server.clone(), &from)?;
            }
            ext.skill_roots.extend(
                plugin
                    .skill_roots
                    .iter()
                    .map(|root| SkillRoot::namespaced(root, &plugin.name)),
            );
            ext.plugins.push(plugin);
        }
        Ok(ext)
    }

    /// Starts every server (see [`McpManager::start`]): none when there is no server.
    pub(crate) async fn start(&self, options: McpOptions) -> Option<McpManager> {
        if self.servers.is_empty() {
            return None;
        }
        Some(McpManager::start(self.servers.clone(), options).await)
    }
}

fn describe(d: &ba_mcp::ConfigDiagnostic) -> String {
    match &d.server {
        Some(server) => format!("server `{server}`: {}", d.message),
        None => d.message.clone(),
    }
}

/// An MCP error as the command line shows it: the sentence, then the server's stderr tail.
pub(crate) fn with_detail(e: &McpError) -> anyhow::Error {
    match e.detail() {
        Some(detail) => anyhow!("{e}\n{}", detail.trim_end()),
        None => anyhow!("{e}"),
    }
}

/// Arguments of `mcp`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Start the servers and list each one's state, tools (model names and schemas) and the
    /// tools it skipped.
    List {
        /// A YAML or JSON configuration file whose `mcp_servers` and `plugins` to use (also
        /// `BA_AGENT_CONFIG`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print JSON (`{"servers": [...]}`).
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of one server with JSON arguments and print its result (exit 1 when the
    /// tool reports an error, 2 when the server failed).
    Call {
        /// The server's name (`PLUGIN__SERVER` for a plugin's).
        server: String,
        /// The tool's name on the server (not its model name).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// A YAML or JSON configuration file whose `mcp_servers` and `plugins` to use (also
        /// `BA_AGENT_CONFIG`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the whole result as JSON (`text`, `structuredContent`, binaries described).
        #[arg(long)]
        json: bool,
    },
    /// Serve this configuration's tools (file_reader, run_python, …) to MCP clients over
    /// stdio, or streamable HTTP with `--http ADDR --token T`.
    Serve(serve::ServeArgs),
}

fn load(config: Option<&Path>, opts: &ExtOpts) -> Result<Extensions, CliError> {
    let config = Config::load(config).map_err(CliError::input)?;
    Extensions::gather(&config, opts).map_err(CliError::input)
}

pub(crate) fn run(args: Args, opts: &ExtOpts) -> CliResult {
    match args.command {
        Command::List { config, json } => list(config.as_deref(), opts, json),
        Command::Call {
            server,
            tool,
            arguments,
            config,
            json,
        } => call(config.as_deref(), opts, &server, &tool, &arguments, json),
        Command::Serve(args) => serve::run(args, opts),
    }
}

/// Options of the commands: no tool-list cache (every server starts and shows its live list),
/// a short shutdown.
fn command_options() -> McpOptions {
    McpOptions::default().with_shutdown_grace(Duration::from_millis(500))
}

fn list(config: Option<&Path>, opts: &ExtOpts, json: bool) -> CliResult {
    let ext = load(config, opts)?;
    let rt = crate::exit::runtime().map_err(CliError::input)?;
    let inventory = rt.block_on(async {
        let manager = ext.start(command_options()).await?;
        let longest = ext
            .servers
            .iter()
            .map(|(_, s)| s.startup_timeout_ms)
            .max()
            .unwrap_or(0);
        manager
            .wait_settled(Duration::from_millis(longest) + Duration::from_secs(5))
            .await;
        let inventory = manager.inventory();
        manager.shutdown().await;
        Some(inventory)
    });
    if json {
        let value = match &inventory {
            Some(inventory) => serde_json::to_value(inventory),
            None => Ok(serde_json::json!({"servers": []})),
        };
        let text = value
            .and_then(|v| serde_json::to_string_pretty(&v))
            .context("rendering JSON")
            .map_err(CliError::input)?;
        outln!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let Some(inventory) = inventory else {
        outln!(
            "No MCP servers: give `mcp_servers` in the configuration, --mcp-config FILE or \
             --plugin DIR."
        );
        return Ok(ExitCode::SUCCESS);
    };
    for server in &inventory.servers {
        let mut head = format!(
            "{} · {} · {}",
            server.name,
            server.state.as_str(),
            server.transport
        );
        if let Some(info) = &server.server_info {
            head.push_str(&format!(" · {info}"));
        }
        if let Some(ms) = server.startup_ms {
            head.push_str(&format!(" · started in {ms} ms"));
        }
        outln!("{head}");
        if let Some(reason) = &server.reason {
            outln!("  reason: {reason}");
        }
        if let Some(tail) = &server.stderr_tail {
            outln!("  stderr (last lines):");
            for line in tail.lines() {
                outln!("    {line}");
            }
        }
        for tool in &server.tools {
            let description = tool.description.split_whitespace().collect::<Vec<_>>();
            outln!(
                "  {}  {}",
                tool.model_name,
                one_line(&description.join(" "), 80)
            );
        }
        for skipped in &server.skipped {
            outln!("  skipped {}: {}", skipped.name, skipped.reason);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn one_line(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn call(
    config: Option<&Path>,
    opts: &ExtOpts,
    server: &str,
    tool: &str,
    arguments: &str,
    json: bool,
) -> CliResult {
    let arguments: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| CliError::input(anyhow!("the arguments are not JSON: {e}")))?;
    if !arguments.is_object() {
        return Err(CliError::input(anyhow!(
            "the arguments must be a JSON object, like '{{\"text\": \"hi\"}}'"
        )));
    }
    let ext = load(config, opts)?;
    // Only the server asked for is started.
    let Some(found) = ext.servers.iter().find(|(name, _)| name == server).cloned() else {
        let known: Vec<&str> = ext.servers.iter().map(|(n, _)| n.as_str()).collect();
        return Err(CliError::input(anyhow!(
            "no MCP server is named `{server}` (servers: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    };
    let rt = crate::exit::runtime().map_err(CliError::input)?;
    let outcome = rt.block_on(async {
        let manager = McpManager::start([found], command_options()).await;
        let outcome = manager
            .call_server_tool(server, tool, arguments, ba_mcp::CallOptions::default())
            .await;
        manager.shutdown().await;
        outcome
    });
    match outcome {
        Ok(result) => {
            print_result(&result, json).map_err(CliError::input)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(McpError::ToolFailed { text, .. }) => {
            if json {
                let value = serde_json::json!({"isError": true, "text": text});
                outln!("{value}");
            } else {
                out!("{text}");
                if !text.ends_with('\n') {
                    outln!();
                }
            }
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(CliError::input(with_detail(&e))),
    }
}

fn print_result(result: &McpCallResult, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(result)?);
        return Ok(());
    }
    if !result.text.is_empty() {
        out!("{}", result.text);
        if !result.text.ends_with('\n') {
            outln!();
        }
    }
    if let Some(structured) = &result.structured_content {
        outln!("{}", serde_json::to_string_pretty(structured)?);
    }
    for item in &result.binaries {
        let what = serde_json::to_value(item.kind)?;
        outln!(
            "[{} {}, {} bytes, not shown]",
            what.as_str().unwrap_or("binary"),
            item.mime_type,
            item.bytes
        );
    }
    for link in &result.resource_links {
        outln!("[resource {}]", link.uri);
    }
    for cut in &result.cuts {
        eprintln!("note: the result was cut: {cut}");
    }
    Ok(())
}
