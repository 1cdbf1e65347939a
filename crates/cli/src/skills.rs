//! `ba-agent skills list|show|validate`: the skills under one or more roots, and those of Claude
//! Code plugin folders (`--plugin DIR…`, named `PLUGIN:SKILL`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_protocol::TokenCounter;
use ba_skills::{Diagnostic, LoadOptions, SkillRoot, SkillSet};
use serde_json::json;

use crate::exit::{CliError, CliResult};
use crate::mcp::ExtOpts;

/// The token counter for level costs: the exact `cl100k_base` encoding.
fn counter() -> Box<dyn TokenCounter> {
    Box::new(ba_context::Encoding::Cl100kBase)
}

/// Arguments of `skills`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Args)]
struct Roots {
    /// A folder holding skills, at any depth; repeat for more roots, the first wins a clash.
    /// (Or `--plugin DIR`: a plugin's skills, named `PLUGIN:SKILL`.)
    #[arg(long = "root", value_name = "DIR", num_args = 1)]
    roots: Vec<PathBuf>,
    /// The plugins' skill folders, filled from `--plugin`.
    #[arg(skip)]
    plugin_roots: Vec<SkillRoot>,
    /// Whether `--plugin` was given (a plugin may have no skills).
    #[arg(skip)]
    plugins_given: bool,
}

impl Roots {
    /// Every root: the plain ones, then the plugins' namespaced ones.
    fn all(&self) -> Vec<SkillRoot> {
        self.roots
            .iter()
            .map(|r| SkillRoot::new(r.clone()))
            .chain(self.plugin_roots.iter().cloned())
            .collect()
    }

    fn load(&self) -> SkillSet {
        SkillSet::load_roots(self.all())
    }

    fn described(&self) -> String {
        self.all()
            .iter()
            .map(|r| r.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The Level 1 catalogue with the token cost of each entry.
    List {
        #[command(flatten)]
        roots: Roots,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One skill at a disclosure level.
    Show {
        /// The skill's name.
        name: String,
        #[command(flatten)]
        roots: Roots,
        /// 1 = frontmatter, 2 = body and resource list, 3 = resources with their token cost.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=3))]
        level: u8,
        /// With `--level 3`: print this file of the skill (path relative to its folder).
        #[arg(long, value_name = "PATH")]
        resource: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every skill against the Agent Skills rules; exit 1 on any error.
    Validate {
        #[command(flatten)]
        roots: Roots,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(args: Args, ext: &ExtOpts) -> CliResult {
    if ext.mcp_config.is_some() {
        return Err(CliError::input(anyhow!(
            "--mcp-config names MCP servers, which hold no skills; use --plugin DIR"
        )));
    }
    let mut plugin_roots = Vec::new();
    for dir in &ext.plugins {
        let plugin = ba_mcp::load_plugin(dir).map_err(|e| CliError::input(anyhow!(e)))?;
        plugin_roots.extend(
            plugin
                .skill_roots
                .iter()
                .map(|root| SkillRoot::namespaced(root, &plugin.name)),
        );
    }
    let with_plugins = |mut roots: Roots| {
        roots.plugin_roots.clone_from(&plugin_roots);
        roots.plugins_given = !ext.plugins.is_empty();
        roots
    };
    match args.command {
        Command::List { roots, json } => list(&with_plugins(roots), json),
        Command::Show {
            name,
            roots,
            level,
            resource,
            json,
        } => show(
            &name,
            &with_plugins(roots),
            level,
            resource.as_deref(),
            json,
        ),
        Command::Validate { roots, json } => validate(&with_plugins(roots), json),
    }
}

fn check_roots(roots: &Roots) -> Result<(), CliError> {
    if roots.roots.is_empty() && !roots.plugins_given {
        return Err(CliError::input(anyhow!(
            "give the skills' folders: --root DIR… or --plugin DIR…"
        )));
    }
    for root in &roots.roots {
        if !root.is_dir() {
            return Err(CliError::input(anyhow!(
                "--root {}: not a readable folder",
                root.display()
            )));
        }
    }
    Ok(())
}

pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing stdout")
        .map_err(CliError::input)
}

pub(crate) fn json_text(value: &serde_json::Value) -> Result<String, CliError> {
    let mut text = serde_json::to_string_pretty(value)
        .context("rendering JSON")
        .map_err(CliError::input)?;
    text.push('\n');
    Ok(text)
}

pub(crate) fn diagnostics_json(diags: &[Diagnostic]) -> serde_json::Value {
    serde_json::Value::Array(
        diags
            .iter()
            .map(|d| {
                json!({
                    "path": d.path.display().to_string(),
                    "severity": d.severity.as_str(),
                    "rule": d.rule.as_str(),
                    "message": d.message,
                })
            })
            .collect(),
    )
}

fn list(roots: &Roots, as_json: bool) -> CliResult {
    check_roots(roots)?;
    let counter = counter();
    let set = roots.load();
    let catalogue = set.catalogue(counter.as_ref());
    let diags = set.diagnostics();
    if as_json {
        let skills: Vec<_> = catalogue
            .iter()
            .map(|e| {
                json!({
                    "name": e.name,
                    "description": e.description,
                    "path": e.path.display().to_string(),
                    "tokens": e.tokens,
                })
            })
            .collect();
        emit(&json_text(&json!({
            "encoding": counter.name(),
            "skills": skills,
            "diagnostics": diagnostics_json(&diags),
        }))?)?;
    } else {
        let width = catalogue
            .iter()
            .map(|e| e.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = format!("{:<width$}  {:>6}  DESCRIPTION\n", "NAME", "TOKENS");
        for e in &catalogue {
            let _ = writeln!(
                out,
                "{:<width$}  {:>6}  {}",
                e.name,
                e.tokens,
                one_line(&e.description, 70)
            );
        }
        let total: usize = catalogue.iter().map(|e| e.tokens).sum();
        let _ = writeln!(
            out,
            "{} skills, {total} catalogue tokens ({})",
            catalogue.len(),
            counter.name()
        );
        emit(&out)?;
        for d in &diags {
            eprintln!("{d}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn show(name: &str, roots: &Roots, level: u8, resource: Option<&str>, as_json: bool) -> CliResult {
    check_roots(roots)?;
    if resource.is_some() && level != 3 {
        return Err(CliError::input(anyhow!("--resource needs --level 3")));
    }
    let counter = counter();
    let set = roots.load();
    let skill = set.get(name).ok_or_else(|| {
        CliError::input(anyhow!(
            "no skill named `{name}` under {} (see `ba-agent skills list`)",
            roots.described()
        ))
    })?;
    let path = skill.dir.display().to_string();
    let fail = |e: ba_skills::SkillsError| CliError::input(anyhow!(e));
    let costs_l1 = set
        .catalogue(counter.as_ref())
        .into_iter()
        .find(|e| e.name == name)
        .map_or(0, |e| e.tokens);
    let out = match (level, resource) {
        (1, _) => {
            if as_json {
                json_text(&json!({
                    "name": skill.name, "path": path, "level": 1,
                    "frontmatter": skill.frontmatter,
                    "tokens": costs_l1, "encoding": counter.name(),
                }))?
            } else {
                let yaml = serde_yaml_ng::to_string(&skill.frontmatter)
                    .context("rendering the frontmatter")
                    .map_err(CliError::input)?;
                format!(
                    "# {path}\n{yaml}# level 1: {costs_l1} tokens ({})\n",
                    counter.name()
                )
            }
        }
        (2, _) => {
            let body = set.body(name).map_err(fail)?;
            let resources = set.resources(name).map_err(fail)?;
            let tokens = counter.count(&body);
            if as_json {
                json_text(&json!({
                    "name": skill.name, "path": path, "level": 2,
                    "body": &*body, "resources": resources,
                    "tokens": tokens, "encoding": counter.name(),
                }))?
            } else {
                let mut out = body.to_string();
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                if !resources.is_empty() {
                    out.push_str("\n# resources\n");
                    for r in &resources {
                        let _ = writeln!(out, "- {} ({} bytes)", r.path, r.bytes);
                    }
                }
                let _ = writeln!(out, "# level 2: {tokens} tokens ({})", counter.name());
                out
            }
        }
        (_, Some(rel)) => {
            let text = set.read_resource(name, rel).map_err(fail)?;
            let tokens = counter.count(&text);
            if as_json {
                json_text(&json!({
                    "name": skill.name, "path": rel, "level": 3,
                    "text": text, "tokens": tokens, "encoding": counter.name(),
                }))?
            } else {
                text
            }
        }
        (_, None) => {
            let costs = set.level_costs(name, counter.as_ref()).map_err(fail)?;
            let resources = set.resources(name).map_err(fail)?;
            let rows: Vec<_> = resources
                .iter()
                .map(|r| {
                    let tokens = costs
                        .level3
                        .iter()
                        .find(|(p, _)| *p == r.path)
                        .map(|(_, t)| *t);
                    (r, tokens)
                })
                .collect();
            if as_json {
                let items: Vec<_> = rows
                    .iter()
                    .map(|(r, t)| json!({"path": r.path, "bytes": r.bytes, "tokens": t}))
                    .collect();
                json_text(&json!({
                    "name": skill.name, "path": path, "level": 3,
                    "level1_tokens": costs.level1, "level2_tokens": costs.level2,
                    "resources": items, "encoding": counter.name(),
                }))?
            } else {
                let mut out = format!(
                    "# {path}\n# level 1: {} tokens, level 2: {} tokens ({})\n",
                    costs.level1,
                    costs.level2,
                    counter.name()
                );
                for (r, t) in rows {
                    let cost = t.map_or_else(|| "not text".to_owned(), |t| format!("{t} tokens"));
                    let _ = writeln!(out, "{}\t{} bytes\t{cost}", r.path, r.bytes);
                }
                out
            }
        }
    };
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a strict check's diagnostics (JSON, or one per line and the counts) and exits 1 when
/// any is an error: `skills validate` and `workflows validate` alike.
pub(crate) fn report_diagnostics(diags: &[ba_skills::Diagnostic], as_json: bool) -> CliResult {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    if as_json {
        emit(&json_text(
            &json!({ "diagnostics": diagnostics_json(diags) }),
        )?)?;
    } else {
        let mut out = String::new();
        for d in diags {
            let _ = writeln!(out, "{d}");
        }
        let noun =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let _ = writeln!(
            out,
            "{}, {}",
            noun(errors, "error", "errors"),
            noun(warnings, "warning", "warnings")
        );
        emit(&out)?;
    }
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn validate(roots: &Roots, as_json: bool) -> CliResult {
    check_roots(roots)?;
    let diags = ba_skills::validate_roots(roots.all(), &LoadOptions::default());
    report_diagnostics(&diags, as_json)
}
