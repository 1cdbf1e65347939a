//! `ba-agent serve`: the HTTP API (`ba-server`) on the agent the configuration describes, or on
//! the offline demo with `--demo`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use ba_cli::demo;
use ba_server::{AppState, ServerConfig, Token};

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::mcp::{ExtOpts, Extensions};

/// `ba-agent serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; an address other than loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:8765")]
    bind: SocketAddr,
    /// The bearer token clients send (a random one is made and printed when none is given).
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// A file holding the token (its first line).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A YAML or JSON configuration file (also `BA_AGENT_CONFIG`). With `--demo`, only its
    /// `approvals` and `hooks` are used.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where conversations live (overrides `home`; with `--demo`, the demo's folder).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Serve the offline demo: the recorded model, the demo data and skill (no key, no
    /// network).
    #[arg(long)]
    demo: bool,
    /// Where `cargo xtask assets` put the page's ECharts (default: `BA_AGENT_ASSETS`, else
    /// `target/assets` in the current folder).
    #[arg(long, value_name = "DIR")]
    assets: Option<PathBuf>,
    /// More `host:port` names the server answers to (behind a proxy, say).
    #[arg(long = "allow-host", value_name = "HOST:PORT")]
    allow_hosts: Vec<String>,
    /// Who may call: `token` (one token, its holder the admin `owner`; the default), `users`
    /// (the store's people, by their tokens: `ba-agent users add`), `oidc` or `proxy` (their
    /// settings in the configuration's `auth:` section). Overrides `auth.mode`.
    #[arg(long, value_enum, value_name = "MODE")]
    auth: Option<AuthArg>,
    /// Start no scheduled workflows here (another server sharing the store does).
    #[arg(long)]
    no_scheduler: bool,
    /// How often the scheduler looks for occurrences due, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    schedule_every: u64,
}

/// `--auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuthArg {
    /// One bearer token.
    Token,
    /// The store's people and their tokens.
    Users,
    /// An identity provider's JWTs (`auth.oidc` in the configuration).
    Oidc,
    /// A trusted proxy's user header (`auth.proxy` in the configuration).
    Proxy,
}

impl From<AuthArg> for ba_server::AuthMode {
    fn from(arg: AuthArg) -> Self {
        match arg {
            AuthArg::Token => Self::Token,
            AuthArg::Users => Self::Users,
            AuthArg::Oidc => Self::Oidc,
            AuthArg::Proxy => Self::Proxy,
        }
    }
}

/// Reads an identity provider's keys (`auth.oidc.jwks_url`) with a bounded, timed request.
#[derive(Debug)]
struct HttpKeys(reqwest::Client);

impl ba_server::KeyFetcher for HttpKeys {
    fn fetch<'a>(
        &'a self,
        url: &'a str,
        limit: usize,
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let mut response = self
                .0
                .get(url)
                .send()
                .await
                .map_err(|e| format!("fetching {url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("{url} answered {}", response.status()));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| format!("reading {url}: {e}"))?
            {
                if body.len() + chunk.len() > limit {
                    return Err(format!("{url} sent more than {limit} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        })
    }
}

/// The sign-in the configuration and `--auth` ask for, built and checked.
fn auth(args: &ServeArgs, config: &Config, token: Token) -> anyhow::Result<ba_server::Auth> {
    let mut settings = config.auth.clone().unwrap_or_default();
    if let Some(mode) = args.auth {
        settings.mode = mode.into();
    }
    let keys: Option<Arc<dyn ba_server::KeyFetcher>> = match reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
    {
        Ok(client) => Some(Arc::new(HttpKeys(client))),
        Err(_) => None,
    };
    settings
        .build(token, keys)
        .map_err(|e| anyhow!("configuration: {e}"))
}

impl ServeArgs {
    /// `--config`.
    pub(crate) fn config_file(&self) -> Option<&Path> {
        self.config.as_deref()
    }
}

/// The token `--token` or `--token-file` (its first line) gives, checked; `None` when neither
/// is given. `mcp serve` takes its token the same way.
pub(crate) fn given_token(
    token: Option<&str>,
    file: Option<&Path>,
) -> anyhow::Result<Option<Token>> {
    let given = match (token, file) {
        (Some(t), _) => t.to_owned(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("reading the token file {}", f.display()))?
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        (None, None) => return Ok(None),
    };
    Token::new(&given)
        .map(Some)
        .ok_or_else(|| anyhow!("the token is empty or has spaces or control characters"))
}

fn token(args: &ServeArgs, single: bool) -> anyhow::Result<(Token, bool)> {
    match given_token(args.token.as_deref(), args.token_file.as_deref())? {
        Some(t) => Ok((t, false)),
        None if single && !args.bind.ip().is_loopback() => bail!(
            "listening on {} (not loopback) needs a token: pass --token or --token-file",
            args.bind
        ),
        None => Ok((Token::random(), true)),
    }
}

/// Serves until Ctrl-C or SIGTERM; MCP servers and plugins (`--mcp-config`, `--plugin`, the
/// configuration's `mcp_servers` and `plugins`) are the agent's as for `run`.
pub(crate) fn run(args: ServeArgs, ext: &ExtOpts) -> CliResult {
    let config_for_auth = match args.config.as_deref() {
        Some(path) => Config::load(Some(path)),
        None => Config::load(None),
    }
    .map_err(CliError::input)?;
    let mode = args
        .auth
        .map(ba_server::AuthMode::from)
        .or_else(|| config_for_auth.auth.as_ref().map(|a| a.mode))
        .unwrap_or_default();
    let single = mode == ba_server::AuthMode::Token;
    let (token, generated) = token(&args, single).map_err(CliError::input)?;
    let auth = auth(&args, &config_for_auth, token.clone()).map_err(CliError::input)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let mut mcp = None;
        let (agent, home, questions) = if args.demo {
            let dir = args
                .home
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("ba-agent-serve-demo"));
            // A configuration file given with --demo lends its approvals, hooks and prices (the
            // model, tools and store stay the demo's).
            let config = match args.config.as_deref() {
                Some(path) => Config::load(Some(path))?,
                None => Config::default(),
            };
            let (approvals, hooks) = (config.approval_settings(), config.hooks()?);
            let prices = config.prices()?;
            let budgets = config.budgets()?;
            let agent = demo::server_agent_with(&dir, None, move |mut b| {
                b = b.configure(|s| {
                    s.approvals = approvals;
                    s.prices = prices;
                    s.budgets = budgets;
                });
                for h in hooks {
                    b = b.hook(h);
                }
                b
            })
            .with_context(|| format!("setting the demo up in {}", dir.display()))?;
            let questions = demo::QUESTIONS.iter().map(|q| (*q).to_owned()).collect();
            (agent, dir, Some(questions))
        } else {
            let mut config = Config::load(args.config.as_deref())?;
            if let Some(home) = &args.home {
                config.home = Some(home.clone());
            }
            let extensions = Extensions::gather(&config, ext)?;
            mcp = crate::agent::start_mcp(&config, &extensions).await?;
            let client = config.client(0)?;
            config.learn_window(&*client).await;
            let agent = config.agent(
                "ba-agent serve",
                client,
                config.shared_store().await?,
                &extensions.skill_roots,
                mcp.as_ref(),
            )?;
            (agent, config.home(), None)
        };
        let assets = args
            .assets
            .clone()
            .or_else(|| std::env::var_os("BA_AGENT_ASSETS").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("target").join("assets"));
        let echarts = assets.join(ba_server::ECHARTS_FILE).is_file();
        let mut server = ServerConfig::new()
            .with_webhooks(crate::schedules::webhooks()?)
            .with_allowed_hosts(args.allow_hosts)
            .with_assets_dir(&assets);
        if let Some(q) = questions {
            server = server.with_demo_questions(q);
        }
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("listening on {}", args.bind))?;
        let addr = listener.local_addr()?;
        // Where to connect goes to standard output; a reader that has gone away (`serve | head
        // -1`) does not stop the server, it is only told on standard error.
        let shown = (generated && single).then_some(&token);
        if let Err(e) = print_banner(addr, shown, mode, &home, &assets, echarts) {
            eprintln!("ba-agent: could not print the address to standard output ({e}); serving on {addr} anyway");
        }
        let state = AppState::new(agent, server);
        if !args.no_scheduler {
            ba_server::Scheduler::new(state.clone())
                .spawn(std::time::Duration::from_secs(args.schedule_every));
        }
        let served = ba_server::serve(listener, state, auth, stop_signal()).await;
        if let Some(manager) = mcp {
            manager.shutdown().await;
        }
        served?;
        Ok::<_, anyhow::Error>(ExitCode::SUCCESS)
    })
    .map_err(CliError::from)
}

/// The lines `serve` starts with: the URL, the token when it was made here (on a line of its
/// own, never in the URL: the page asks for it once), how people sign in otherwise, the data
/// folder, and how to get ECharts when it is missing.
fn print_banner(
    addr: SocketAddr,
    generated: Option<&Token>,
    mode: ba_server::AuthMode,
    home: &Path,
    assets: &Path,
    echarts: bool,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ba-agent serving on http://{addr}/")?;
    if let Some(token) = generated {
        writeln!(
            out,
            "token: {} (paste it into the page once; API clients send `Authorization: Bearer TOKEN`)",
            token.expose()
        )?;
    }
    match mode {
        ba_server::AuthMode::Users => writeln!(
            out,
            "sign-in: the store's people, by their tokens (`ba-agent users add NAME`)"
        )?,
        ba_server::AuthMode::Oidc => writeln!(out, "sign-in: the identity provider's tokens")?,
        ba_server::AuthMode::Proxy => writeln!(out, "sign-in: the trusted proxy's user header")?,
        _ => {}
    }
    writeln!(out, "data: {}", home.display())?;
    if !echarts {
        writeln!(
            out,
            "charts: no {} in {} (run `cargo xtask assets` for ECharts)",
            ba_server::ECHARTS_FILE,
            assets.display()
        )?;
    }
    out.flush()
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                () = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    ctrl_c.await;
}
