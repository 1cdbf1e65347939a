//! `ba-agent schedules`: the scheduled workflows of a store (the one `serve` uses:
//! `database_url` or `home`). `serve` runs them; `run-now` runs one here, on the agent the
//! configuration describes, and waits for its end.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_storage::{
    CatchUp, NewSchedule, Schedule, ScheduleBudget, ScheduleUpdate, Schedules, Webhook,
};

use crate::exit::{CliError, CliResult};
use crate::mcp::ExtOpts;
use crate::users::StoreOpts;

/// Subcommands of `schedules`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// List the schedules: id, name, timing, workflow, owner, next and last run.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Add a schedule and print its id.
    Add(Box<AddArgs>),
    /// Pause a schedule: it starts nothing until resumed.
    Pause {
        /// The schedule's id (`sch_…`).
        id: String,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Resume a schedule (what fell due while it was paused is not caught up).
    Resume {
        /// The schedule's id.
        id: String,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Run a schedule now, here, and print how the run ended.
    RunNow {
        /// The schedule's id.
        id: String,
        #[command(flatten)]
        store: StoreOpts,
    },
    /// Remove a schedule (its runs' conversations stay).
    Rm {
        /// The schedule's id.
        id: String,
        #[command(flatten)]
        store: StoreOpts,
    },
}

/// `schedules add`.
#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// A name for lists and the runs' conversation titles.
    name: String,
    /// A cron expression: minute hour day-of-month month day-of-week (`0 6 1 * *`: 06:00
    /// on the first of every month).
    #[arg(long)]
    cron: String,
    /// The IANA time zone the expression is read in.
    #[arg(long, default_value = "UTC")]
    time_zone: String,
    /// The workflow each run starts.
    #[arg(long)]
    workflow: String,
    /// An input of the workflow, `NAME=VALUE` (repeatable); the value may hold dated
    /// placeholders such as `{{previous_month}}` (see the README).
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_input)]
    inputs: Vec<(String, String)>,
    /// Whose runs they are.
    #[arg(long, default_value = ba_storage::DEFAULT_OWNER)]
    owner: String,
    /// US dollars one run may spend.
    #[arg(long, value_name = "USD")]
    budget_usd: Option<f64>,
    /// Tokens one run may use.
    #[arg(long, value_name = "N")]
    budget_tokens: Option<u64>,
    /// What missed occurrences do: `one` (run the latest once) or `none`.
    #[arg(long, default_value = "one", value_parser = parse_catch_up)]
    catch_up: CatchUp,
    /// Where each run's result is posted (signed with `--webhook-secret`).
    #[arg(long, requires = "webhook_secret")]
    webhook: Option<String>,
    /// The HMAC-SHA256 key of the webhook's `X-BA-Signature`.
    #[arg(long, requires = "webhook")]
    webhook_secret: Option<String>,
    /// Add it paused.
    #[arg(long)]
    paused: bool,
    #[command(flatten)]
    store: StoreOpts,
}

fn parse_input(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("an input is NAME=VALUE, not {text:?}"))
}

fn parse_catch_up(text: &str) -> Result<CatchUp, String> {
    CatchUp::parse(text).map_err(|e| e.to_string())
}

impl Command {
    fn store(&self) -> &StoreOpts {
        match self {
            Self::Add(add) => &add.store,
            Self::List { store, .. }
            | Self::Pause { store, .. }
            | Self::Resume { store, .. }
            | Self::RunNow { store, .. }
            | Self::Rm { store, .. } => store,
        }
    }
}

/// Runs `schedules …`.
pub(crate) fn run(command: Command, ext: &ExtOpts) -> CliResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(execute(command, ext))
        .map_err(CliError::input)?;
    Ok(ExitCode::SUCCESS)
}

async fn execute(command: Command, ext: &ExtOpts) -> anyhow::Result<()> {
    let config = command.store().config()?;
    let store = config.shared_store().await?;
    let schedules = store
        .schedules()
        .ok_or_else(|| anyhow!("the store keeps no schedules"))?;
    let mut out = std::io::stdout().lock();
    match command {
        Command::List { json, .. } => {
            let all = schedules.schedules().await?;
            let mut rows = Vec::new();
            for s in all {
                let last = schedules.runs(&s.id, 1).await?.into_iter().next();
                rows.push((s, last));
            }
            if json {
                let items: Vec<_> = rows
                    .iter()
                    .map(|(s, last)| {
                        let mut v = serde_json::to_value(s).unwrap_or_default();
                        if let Some(hook) = v.get_mut("webhook") {
                            hook["secret"] = serde_json::Value::Null;
                        }
                        v["next_run"] = next_run(s).map(ba_storage::rfc3339).into();
                        v["last_run"] = serde_json::to_value(last).unwrap_or_default();
                        v
                    })
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&items)?)?;
                return Ok(());
            }
            if rows.is_empty() {
                writeln!(out, "no schedules (add one with `ba-agent schedules add`)")?;
            }
            for (s, last) in rows {
                writeln!(out, "{}", line(&s, last.as_ref()))?;
            }
        }
        Command::Add(add) => {
            let AddArgs {
                name,
                cron,
                time_zone,
                workflow,
                inputs,
                owner,
                budget_usd,
                budget_tokens,
                catch_up,
                webhook,
                webhook_secret,
                paused,
                ..
            } = *add;
            let new = NewSchedule {
                name,
                cron,
                time_zone,
                workflow,
                inputs: inputs.into_iter().collect::<BTreeMap<_, _>>(),
                owner,
                budget: ScheduleBudget {
                    usd: budget_usd,
                    tokens: budget_tokens,
                },
                catch_up,
                paused,
                webhook: webhook
                    .zip(webhook_secret)
                    .map(|(url, secret)| Webhook { url, secret }),
            };
            let s = schedules.add_schedule(new).await?;
            writeln!(out, "added {} ({})", s.id, s.spec.name)?;
            if let Some(next) = next_run(&s) {
                writeln!(out, "next run {}", ba_storage::rfc3339(next))?;
            }
        }
        Command::Pause { id, .. } => {
            let s = set_paused(schedules.as_ref(), &id, true).await?;
            writeln!(out, "paused {} ({})", s.id, s.spec.name)?;
        }
        Command::Resume { id, .. } => {
            let s = set_paused(schedules.as_ref(), &id, false).await?;
            writeln!(out, "resumed {} ({})", s.id, s.spec.name)?;
        }
        Command::Rm { id, .. } => {
            if !schedules.remove_schedule(&id).await? {
                return Err(anyhow!("no schedule {id}"));
            }
            writeln!(out, "removed {id}")?;
        }
        Command::RunNow { id, store: opts } => {
            drop(out);
            run_now(&opts, &id, ext).await?;
        }
    }
    Ok(())
}

async fn set_paused(schedules: &dyn Schedules, id: &str, paused: bool) -> anyhow::Result<Schedule> {
    Ok(schedules
        .update_schedule(
            id,
            ScheduleUpdate {
                paused: Some(paused),
                ..ScheduleUpdate::default()
            },
        )
        .await?)
}

fn next_run(s: &Schedule) -> Option<i64> {
    if s.spec.paused {
        return None;
    }
    s.next_after(ba_storage::Clock::now_ms(&ba_storage::SystemClock))
}

fn line(s: &Schedule, last: Option<&ba_storage::ScheduledRun>) -> String {
    let next = next_run(s).map_or_else(|| "paused".to_owned(), ba_storage::rfc3339);
    let last = last.map_or_else(
        || "never run".to_owned(),
        |r| {
            format!(
                "last {} {} in {}",
                ba_storage::rfc3339(r.occurrence_ms),
                r.status.as_deref().unwrap_or("running"),
                r.conversation_id
            )
        },
    );
    format!(
        "{}  {}  `{}` {}  {}  owner {}  next {}  {}",
        s.id, s.spec.name, s.spec.cron, s.spec.time_zone, s.spec.workflow, s.spec.owner, next, last
    )
}

/// Runs schedule `id` in this process on the configuration's agent, and prints how it ended.
async fn run_now(opts: &StoreOpts, id: &str, ext: &ExtOpts) -> anyhow::Result<()> {
    let config = opts.config()?;
    let extensions = crate::mcp::Extensions::gather(&config, ext)?;
    let mcp = crate::agent::start_mcp(&config, &extensions).await?;
    let client = config.client(0)?;
    let agent = config.agent(
        "ba-agent schedules run-now",
        client,
        config.shared_store().await?,
        &extensions.skill_roots,
        mcp.as_ref(),
    )?;
    let state = ba_server::AppState::new(
        agent,
        ba_server::ServerConfig::new().with_webhooks(webhooks()?),
    );
    let fired = ba_server::Scheduler::new(state)
        .run_now(id)
        .await?
        .ok_or_else(|| anyhow!("a run of {id} started at this moment already"))?;
    eprintln!("running {id} in conversation {}", fired.conversation_id);
    let run = fired.done.await.context("waiting for the run")?;
    if let Some(manager) = mcp {
        manager.shutdown().await;
    }
    let run = run.ok_or_else(|| anyhow!("the run's end could not be recorded"))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} {} in {}",
        id,
        run.status.as_deref().unwrap_or("unknown"),
        run.conversation_id
    )?;
    if let Some(e) = run.error {
        writeln!(out, "error: {e}")?;
    }
    Ok(())
}

/// Webhooks over this program's HTTP client: 10 s a post, no redirects followed.
#[derive(Debug)]
struct HttpWebhooks(reqwest::Client);

impl ba_server::WebhookTransport for HttpWebhooks {
    fn post(&self, url: &str, signature: &str, body: Vec<u8>) -> ba_server::Posted {
        let request = self
            .0
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(ba_server::SIGNATURE_HEADER, signature)
            .body(body);
        Box::pin(async move {
            request
                .send()
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        })
    }
}

/// How `serve` and `run-now` post the results of scheduled runs: five tries, 2 s apart at
/// first, twice as long each time.
pub(crate) fn webhooks() -> anyhow::Result<ba_server::WebhookSender> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the webhooks' HTTP client")?;
    Ok(ba_server::WebhookSender::new(
        std::sync::Arc::new(HttpWebhooks(client)),
        5,
        std::time::Duration::from_secs(2),
    ))
}
