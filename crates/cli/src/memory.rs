//! `ba-agent memory`: a person's memory files in the store `serve` uses (`database_url` or
//! `home`) — list, show, edit, remove, history and restore, each change a version naming the
//! person. `--user` names whose memory (default `owner`, the single user of a server without
//! accounts); `/memories/team/…` is the team's, which only an admin (or that single user)
//! changes.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use ba_storage::{
    ConversationStore, DEFAULT_OWNER, MemoryAuthor, MemoryChange, MemoryLimits, MemoryPath,
    MemoryScope, MemoryStore, rfc3339,
};

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::users::StoreOpts;

/// The most bytes `edit` reads from stdin or a file (past the bound of a memory file, which
/// the store then refuses by name).
const MAX_INPUT: u64 = 1 << 20;

/// Whose memory and where the store is.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Who {
    /// Whose memory (default `owner`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_OWNER)]
    user: String,
    #[command(flatten)]
    store: StoreOpts,
}

/// Subcommands of `memory`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the files: the person's, then the team's.
    List {
        /// Print `{"files": [{"path", "size", "versions", "updated"}]}`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        who: Who,
    },
    /// Print a file (`/memories/preferences.md`, or `preferences.md`).
    Show {
        /// The file.
        path: String,
        /// Print this version instead of the latest.
        #[arg(long, value_name = "N")]
        version: Option<u32>,
        #[command(flatten)]
        who: Who,
    },
    /// Write a file's whole text, read from `--file` or standard input.
    Edit {
        /// The file.
        path: String,
        /// Read the text from this file instead of standard input.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        #[command(flatten)]
        who: Who,
    },
    /// Delete a file (its history stays; `restore` brings it back).
    Rm {
        /// The file.
        path: String,
        #[command(flatten)]
        who: Who,
    },
    /// List a file's versions: number, time, who made it.
    History {
        /// The file.
        path: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        who: Who,
    },
    /// Make an earlier version the file's newest.
    Restore {
        /// The file.
        path: String,
        /// The version to bring back.
        version: u32,
        #[command(flatten)]
        who: Who,
    },
}

impl Command {
    fn who(&self) -> &Who {
        match self {
            Self::List { who, .. }
            | Self::Show { who, .. }
            | Self::Edit { who, .. }
            | Self::Rm { who, .. }
            | Self::History { who, .. }
            | Self::Restore { who, .. } => who,
        }
    }
}

/// Runs `memory …`.
pub(crate) fn run(command: Command) -> CliResult {
    let rt = crate::exit::runtime()?;
    rt.block_on(execute(command)).map_err(CliError::input)?;
    Ok(ExitCode::SUCCESS)
}

async fn open(opts: &StoreOpts) -> anyhow::Result<Arc<dyn ConversationStore>> {
    let mut config = Config::load(opts.config.as_deref())?;
    if let Some(home) = &opts.home {
        config.home = Some(home.clone());
    }
    config.shared_store().await
}

/// Refuses a change of the team's files by someone who may not make it.
async fn may_change(
    store: &dyn ConversationStore,
    path: &MemoryPath,
    user: &str,
) -> anyhow::Result<()> {
    if path.scope == MemoryScope::Team && !ba_agent::writes_team(store, user).await? {
        return Err(anyhow!(
            "{} is the team's; only an admin changes it",
            path.full()
        ));
    }
    Ok(())
}

async fn execute(command: Command) -> anyhow::Result<()> {
    let who = command.who().clone();
    let store = open(&who.store).await?;
    let memory: Arc<dyn MemoryStore> = store
        .memory()
        .ok_or_else(|| anyhow!("the store keeps no memory"))?;
    let user = who.user.as_str();
    let limits = MemoryLimits::default();
    let author = MemoryAuthor::person(user);
    let parse = |p: &str| -> anyhow::Result<MemoryPath> { Ok(MemoryPath::parse(user, p)?) };
    let mut out = std::io::stdout().lock();
    match command {
        Command::List { json, .. } => {
            let mine = MemoryScope::user(user)?;
            let mut rows = Vec::new();
            for scope in [mine, MemoryScope::Team] {
                for f in memory.files(&scope).await? {
                    rows.push((scope.full_path(&f.path), f));
                }
            }
            if json {
                let files: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(path, f)| {
                        serde_json::json!({
                            "path": path,
                            "size": f.size,
                            "versions": f.versions,
                            "updated": rfc3339(f.updated_ms),
                        })
                    })
                    .collect();
                writeln!(out, "{}", serde_json::json!({ "files": files }))?;
            } else if rows.is_empty() {
                writeln!(out, "no memory files for {user}")?;
            } else {
                for (path, f) in rows {
                    writeln!(
                        out,
                        "{path:<48} {:>7} B  v{:<4} {}",
                        f.size,
                        f.versions,
                        rfc3339(f.updated_ms)
                    )?;
                }
            }
        }
        Command::Show { path, version, .. } => {
            let path = parse(&path)?.file()?;
            let text = match version {
                None => memory
                    .read(&path.scope, &path.relative)
                    .await?
                    .and_then(|v| v.text),
                Some(n) => memory
                    .history(&path.scope, &path.relative)
                    .await?
                    .into_iter()
                    .find(|v| v.version == n)
                    .and_then(|v| v.text),
            };
            let text = text.ok_or_else(|| match version {
                Some(n) => anyhow!("{} has no version {n} with text", path.full()),
                None => anyhow!("no memory file {}", path.full()),
            })?;
            out.write_all(text.as_bytes())?;
        }
        Command::Edit { path, file, .. } => {
            let path = parse(&path)?.file()?;
            may_change(store.as_ref(), &path, user).await?;
            let mut bytes = Vec::new();
            match &file {
                Some(f) => std::fs::File::open(f)
                    .with_context(|| format!("opening {}", f.display()))?
                    .take(MAX_INPUT)
                    .read_to_end(&mut bytes)?,
                None => std::io::stdin().take(MAX_INPUT).read_to_end(&mut bytes)?,
            };
            let text = String::from_utf8(bytes).map_err(|_| anyhow!("the text is not UTF-8"))?;
            let change = MemoryChange::Write {
                path: path.relative.clone(),
                text,
            };
            let made = memory
                .commit(&path.scope, &[change], &author, &limits)
                .await?;
            for v in made {
                writeln!(out, "wrote {} (version {})", path.full(), v.version)?;
            }
        }
        Command::Rm { path, .. } => {
            let path = parse(&path)?.file()?;
            may_change(store.as_ref(), &path, user).await?;
            let change = MemoryChange::Delete {
                path: path.relative.clone(),
            };
            let made = memory
                .commit(&path.scope, &[change], &author, &limits)
                .await?;
            for v in made {
                writeln!(out, "deleted {} (version {})", path.full(), v.version)?;
            }
        }
        Command::History { path, json, .. } => {
            let path = parse(&path)?.file()?;
            let versions = memory.history(&path.scope, &path.relative).await?;
            if versions.is_empty() {
                return Err(anyhow!("no memory file {} was ever written", path.full()));
            }
            if json {
                writeln!(out, "{}", serde_json::json!({ "versions": versions }))?;
            }
            for v in versions.iter().filter(|_| !json) {
                let by = match (&v.author.conversation, &v.author.user) {
                    (Some(c), _) => format!("conversation {c}"),
                    (None, Some(u)) => u.clone(),
                    (None, None) => "unknown".to_owned(),
                };
                let what = match &v.text {
                    Some(t) => format!("{} B", t.len()),
                    None => "deleted".to_owned(),
                };
                writeln!(
                    out,
                    "v{:<4} {}  {what:<10} by {by}",
                    v.version,
                    rfc3339(v.created_ms)
                )?;
            }
        }
        Command::Restore { path, version, .. } => {
            let path = parse(&path)?.file()?;
            may_change(store.as_ref(), &path, user).await?;
            let made = memory
                .restore(&path.scope, &path.relative, version, &author, &limits)
                .await?;
            writeln!(
                out,
                "restored {} to version {version} (now version {})",
                path.full(),
                made.version
            )?;
        }
    }
    Ok(())
}
