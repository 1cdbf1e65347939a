//! `ba-agent users`: the people of a store (the one `serve` uses: `database_url` or `home`),
//! their API tokens and their monthly budgets. A new token is printed once, alone on the last
//! line, for scripts to take; only its hash is kept.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::anyhow;
use ba_storage::{Directory, Role, UserBudget};

use crate::config::Config;
use crate::exit::{CliError, CliResult};

/// Where the store is: the configuration's (`database_url` or `home`), or `--home`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreOpts {
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`): its `database_url` or
    /// `home` names the store.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where conversations live (overrides `home`; default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,
}

impl StoreOpts {
    /// The configuration, with `--home` in force.
    pub(crate) fn config(&self) -> anyhow::Result<Config> {
        let mut config = Config::load(self.config.as_deref())?;
        if let Some(home) = &self.home {
            config.home = Some(home.clone());
        }
        Ok(config)
    }
}

/// Subcommands of `users`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Add a person and print their first token (alone on the last line, shown once).
    Add {
        /// The name they sign in as: letters, digits, `.`, `_`, `@`, `-`.
        name: String,
        /// What they may do: `admin` (everything, manages people), `analyst` (their own
        /// work), `viewer` (what is shared with them).
        #[arg(long, default_value = "analyst", value_parser = parse_role)]
        role: Role,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// List the people: name, role, tokens, monthly caps.
    List {
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Give a person another token (printed alone on the last line, shown once).
    Token {
        /// The person.
        name: String,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Revoke one token (by its id, `tok_…`) or every token of a person (by name).
    Revoke {
        /// A token id or a person's name.
        what: String,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Set a person's monthly caps (they replace the configuration's `budgets` for them).
    Budget {
        /// The person.
        name: String,
        /// US dollars a month.
        #[arg(long, value_name = "USD")]
        month_usd: Option<f64>,
        /// Tokens a month.
        #[arg(long, value_name = "N")]
        month_tokens: Option<u64>,
        /// Remove their own caps (the configuration's apply again).
        #[arg(long, conflicts_with_all = ["month_usd", "month_tokens"])]
        clear: bool,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Change a person's role.
    Role {
        /// The person.
        name: String,
        /// The new role.
        #[arg(value_parser = parse_role)]
        role: Role,
        #[command(flatten)]
        store: StoreOpts,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse::<Role>().map_err(|e| e.to_string())
}

impl Command {
    fn store(&self) -> &StoreOpts {
        match self {
            Self::Add { store, .. }
            | Self::List { store }
            | Self::Token { store, .. }
            | Self::Revoke { store, .. }
            | Self::Budget { store, .. }
            | Self::Role { store, .. } => store,
        }
    }
}

/// Runs `users …`.
pub(crate) fn run(command: Command) -> CliResult {
    let rt = crate::exit::runtime()?;
    rt.block_on(execute(command)).map_err(CliError::input)?;
    Ok(ExitCode::SUCCESS)
}

async fn execute(command: Command) -> anyhow::Result<()> {
    {
        let directory = open(command.store()).await?;
        let mut out = std::io::stdout().lock();
        match command {
            Command::Add { name, role, .. } => {
                let user = directory.add_user(&name, role).await?;
                let token = directory.issue_token(&user.name).await?;
                writeln!(out, "added {} ({})", user.name, user.role.as_str())?;
                writeln!(
                    out,
                    "token {} — shown once; send it as `Authorization: Bearer TOKEN`:",
                    token.info.id
                )?;
                writeln!(out, "{}", token.secret)?;
            }
            Command::List { .. } => {
                let users = directory.users().await?;
                if users.is_empty() {
                    writeln!(out, "no users (add one with `ba-agent users add NAME`)")?;
                }
                for user in users {
                    let tokens = directory.tokens(&user.name).await?;
                    writeln!(
                        out,
                        "{:<24} {:<8} {} token{}{}",
                        user.name,
                        user.role.as_str(),
                        tokens.len(),
                        if tokens.len() == 1 { "" } else { "s" },
                        caps(&user.budget)
                    )?;
                }
            }
            Command::Token { name, .. } => {
                let token = directory.issue_token(&name).await?;
                writeln!(out, "token {} for {name} — shown once:", token.info.id)?;
                writeln!(out, "{}", token.secret)?;
            }
            Command::Revoke { what, .. } => {
                if what.starts_with("tok_") {
                    if !directory.revoke_token(&what).await? {
                        return Err(anyhow!("no token {what}"));
                    }
                    writeln!(out, "revoked {what}")?;
                } else {
                    if directory.user(&what).await?.is_none() {
                        return Err(anyhow!("no user {what:?}"));
                    }
                    let n = directory.revoke_user_tokens(&what).await?;
                    writeln!(out, "revoked {n} token{} of {what}", plural(n))?;
                }
            }
            Command::Budget {
                name,
                month_usd,
                month_tokens,
                clear,
                ..
            } => {
                if month_usd.is_some_and(|v| !v.is_finite() || v < 0.0) {
                    return Err(anyhow!("--month-usd must be an amount of zero or more"));
                }
                if !clear && month_usd.is_none() && month_tokens.is_none() {
                    return Err(anyhow!("give --month-usd, --month-tokens or --clear"));
                }
                let mut budget = match directory.user(&name).await? {
                    Some(user) => user.budget,
                    None => return Err(anyhow!("no user {name:?}")),
                };
                if clear {
                    budget = UserBudget::default();
                }
                budget.month_usd = month_usd.or(budget.month_usd);
                budget.month_tokens = month_tokens.or(budget.month_tokens);
                let user = directory.set_budget(&name, budget).await?;
                writeln!(out, "{}{}", user.name, caps(&user.budget))?;
            }
            Command::Role { name, role, .. } => {
                let user = directory.set_role(&name, role).await?;
                writeln!(out, "{} is now {}", user.name, user.role.as_str())?;
            }
        }
        Ok(())
    }
}

/// Fails, as if the conversation did not exist, unless `user` may act on it: it is theirs,
/// they are `owner` (the single user of a store without people, as `serve --auth token`
/// makes them), or the store names them an admin.
pub(crate) async fn check_access(
    store: &dyn ba_storage::ConversationStore,
    id: &ba_storage::ConversationId,
    user: &str,
) -> anyhow::Result<()> {
    let meta = store.metadata(id).await?;
    if meta.owner == user || user == ba_storage::DEFAULT_OWNER {
        return Ok(());
    }
    if let Some(directory) = store.directory()
        && let Some(person) = directory.user(user).await?
        && person.role == Role::Admin
    {
        return Ok(());
    }
    Err(anyhow!(
        "no conversation {id} for user {user:?} (it is another person's)"
    ))
}

/// The directory of the store `opts` names.
async fn open(opts: &StoreOpts) -> anyhow::Result<Arc<dyn Directory>> {
    let config = opts.config()?;
    let store = config.shared_store().await?;
    store.directory().ok_or_else(|| {
        anyhow!(
            "the store at {} keeps no users",
            display_store(&config, &config.home())
        )
    })
}

fn display_store(config: &Config, home: &Path) -> String {
    match &config.database_url {
        Some(_) => "`database_url`".to_owned(),
        None => home.display().to_string(),
    }
}

fn caps(budget: &UserBudget) -> String {
    let mut parts = Vec::new();
    if let Some(usd) = budget.month_usd {
        parts.push(format!("${usd:.2}/month"));
    }
    if let Some(tokens) = budget.month_tokens {
        parts.push(format!("{tokens} tokens/month"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("  cap {}", parts.join(", "))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
