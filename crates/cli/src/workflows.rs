//! `ba-agent workflows list|show|validate`: the workflow definitions (`*/WORKFLOW.md`) under
//! the roots given, else the configuration's `workflows`, with each plugin's `workflows/`
//! folder and the demo's embedded example. Running a workflow is not a command yet.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_skills::{Next, WorkflowDef, WorkflowSet};
use serde_json::json;

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::mcp::ExtOpts;
use crate::skills::{diagnostics_json, emit, json_text, one_line};

/// Arguments of `workflows`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct Roots {
    /// A folder holding workflows (`NAME/WORKFLOW.md`, at any depth); repeat for more, the
    /// first wins a clash. Without it, the configuration's `workflows` roots.
    #[arg(long = "root", value_name = "DIR", num_args = 1)]
    roots: Vec<PathBuf>,
    /// The configuration file (default: `BA_AGENT_CONFIG`), for its `workflows` and `plugins`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Leave out the demo's example workflow.
    #[arg(long)]
    no_demo: bool,
}

impl Roots {
    /// The folders searched: `--root`, else the configuration's roots; then every plugin's
    /// `workflows/` folder.
    fn folders(&self, plugins: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
        for root in &self.roots {
            if !root.is_dir() {
                return Err(CliError::input(anyhow!(
                    "--root {}: not a readable folder",
                    root.display()
                )));
            }
        }
        let config = Config::load(self.config.as_deref())?;
        let mut folders = if self.roots.is_empty() {
            config.workflows.clone()
        } else {
            self.roots.clone()
        };
        folders.extend(config.plugin_workflow_folders(plugins));
        Ok(folders)
    }

    fn load(&self, plugins: &[PathBuf]) -> Result<WorkflowSet, CliError> {
        let mut set = WorkflowSet::load(&self.folders(plugins)?);
        if !self.no_demo {
            set.add_text(
                ba_cli::demo::WORKFLOW_MD,
                Path::new(ba_cli::demo::WORKFLOW_PATH),
            );
        }
        Ok(set)
    }
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Every workflow: name, description, inputs and nodes.
    List {
        #[command(flatten)]
        roots: Roots,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One workflow in full.
    Show {
        /// The workflow's name.
        name: String,
        #[command(flatten)]
        roots: Roots,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every workflow under a folder (or one `WORKFLOW.md`) strictly; exit 1 on any
    /// error.
    Validate {
        /// A folder of workflows, a workflow folder, or a `WORKFLOW.md`.
        path: PathBuf,
        /// A tool the nodes may name; repeat for more. Without it, tool names are not checked.
        #[arg(long = "tool", value_name = "NAME")]
        tools: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(args: Args, ext: &ExtOpts) -> CliResult {
    if ext.mcp_config.is_some() {
        return Err(CliError::input(anyhow!(
            "--mcp-config names MCP servers, which hold no workflows; use --plugin DIR"
        )));
    }
    for dir in &ext.plugins {
        if !dir.is_dir() {
            return Err(CliError::input(anyhow!(
                "--plugin {}: not a readable folder",
                dir.display()
            )));
        }
    }
    match args.command {
        Command::List { roots, json } => list(&roots.load(&ext.plugins)?, json),
        Command::Show { name, roots, json } => show(&roots.load(&ext.plugins)?, &name, json),
        Command::Validate { path, tools, json } => validate(&path, &tools, json),
    }
}

fn list(set: &WorkflowSet, as_json: bool) -> CliResult {
    if as_json {
        let workflows: Vec<_> = set
            .workflows()
            .map(|w| {
                let nodes: Vec<_> = w
                    .nodes
                    .iter()
                    .map(|n| json!({"id": n.id, "title": n.title}))
                    .collect();
                json!({
                    "name": w.name,
                    "description": w.description,
                    "inputs": w.inputs,
                    "nodes": nodes,
                })
            })
            .collect();
        emit(&json_text(&json!({
            "workflows": workflows,
            "diagnostics": diagnostics_json(set.diagnostics()),
        }))?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = set
        .workflows()
        .map(|w| w.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<width$}  {:>5}  {:<16}  DESCRIPTION\n",
        "NAME", "NODES", "INPUTS"
    );
    let mut count = 0;
    for w in set.workflows() {
        count += 1;
        let inputs: Vec<&str> = w.inputs.iter().map(|i| i.name.as_str()).collect();
        let inputs = if inputs.is_empty() {
            "-".to_owned()
        } else {
            inputs.join(",")
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>5}  {:<16}  {}",
            w.name,
            w.nodes.len(),
            inputs,
            one_line(&w.description, 60)
        );
    }
    let _ = writeln!(out, "{count} workflow{}", if count == 1 { "" } else { "s" });
    emit(&out)?;
    for d in set.diagnostics() {
        eprintln!("{d}");
    }
    Ok(ExitCode::SUCCESS)
}

fn next_text(next: &Next) -> String {
    match next {
        Next::End => "end".to_owned(),
        Next::Node(id) => id.clone(),
        Next::Branch { on, cases, default } => {
            let mut parts: Vec<String> =
                cases.iter().map(|(v, to)| format!("{v} → {to}")).collect();
            if let Some(d) = default {
                parts.push(format!("otherwise → {d}"));
            }
            format!("on {on}: {}", parts.join(", "))
        }
    }
}

fn render(w: &WorkflowDef) -> String {
    let mut out = format!("# {}\n{}: {}\n", w.path.display(), w.name, w.description);
    if !w.inputs.is_empty() {
        out.push_str("\ninputs:\n");
        for i in &w.inputs {
            let mut line = format!("  {} ({}", i.name, i.ty.as_str());
            match &i.default {
                Some(serde_json::Value::String(s)) => {
                    let _ = write!(line, ", default {s}");
                }
                Some(other) => {
                    let _ = write!(line, ", default {other}");
                }
                None if i.required => line.push_str(", required"),
                None => {}
            }
            line.push(')');
            if let Some(d) = &i.description {
                let _ = write!(line, ": {d}");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out.push_str("\nnodes:\n");
    for (k, n) in w.nodes.iter().enumerate() {
        let _ = writeln!(out, "  {}. {} — {}", k + 1, n.id, n.title);
        if let Some(tools) = &n.tools {
            let _ = writeln!(out, "     tools: {}", tools.join(", "));
        }
        if !n.skills.is_empty() {
            let _ = writeln!(out, "     skills: {}", n.skills.join(", "));
        }
        if !n.outputs.is_empty() {
            let outputs: Vec<String> = n
                .outputs
                .iter()
                .map(|o| {
                    if o.options.is_empty() {
                        format!("{} ({})", o.name, o.kind.as_str())
                    } else {
                        format!("{} ({}: {})", o.name, o.kind.as_str(), o.options.join("|"))
                    }
                })
                .collect();
            let _ = writeln!(out, "     outputs: {}", outputs.join(", "));
        }
        let _ = writeln!(out, "     next: {}", next_text(&n.next));
    }
    if !w.body.trim().is_empty() {
        out.push('\n');
        out.push_str(w.body.trim_start_matches('\n'));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

fn show(set: &WorkflowSet, name: &str, as_json: bool) -> CliResult {
    let def = set.get(name).ok_or_else(|| {
        CliError::input(anyhow!(
            "no workflow named `{name}` (see `ba-agent workflows list`)"
        ))
    })?;
    let out = if as_json {
        json_text(
            &serde_json::to_value(def)
                .context("rendering the workflow")
                .map_err(CliError::input)?,
        )?
    } else {
        render(def)
    };
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn validate(path: &Path, tools: &[String], as_json: bool) -> CliResult {
    if !path.exists() {
        return Err(CliError::input(anyhow!(
            "{}: no such file or folder",
            path.display()
        )));
    }
    let known: BTreeSet<String> = tools.iter().cloned().collect();
    let diags = ba_skills::validate_workflow(path, (!known.is_empty()).then_some(&known));
    crate::skills::report_diagnostics(&diags, as_json)
}

/// `--workflow NAME --input K=V …` as the input that starts the run, checked against the
/// configuration's workflows before anything starts (an unknown name or a bad input: exit 2).
pub(crate) fn run_input(
    config: &crate::config::Config,
    name: &str,
    inputs: &[String],
) -> Result<ba_agent::Input, CliError> {
    let mut given = std::collections::BTreeMap::new();
    for pair in inputs {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(CliError::input(anyhow!(
                "--input {pair:?}: expected KEY=VALUE"
            )));
        };
        if given
            .insert(key.trim().to_owned(), value.to_owned())
            .is_some()
        {
            return Err(CliError::input(anyhow!("--input {key}: given twice")));
        }
    }
    if let Err(e) = config.workflow_set().start(name, &given) {
        return Err(CliError::input(anyhow!(
            "{e}; see `ba-agent workflows list`"
        )));
    }
    Ok(ba_agent::Input::Workflow {
        name: name.to_owned(),
        inputs: given,
    })
}
