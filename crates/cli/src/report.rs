//! `ba-agent report ID [--seq N] [--format md|html] [--out FILE] [--home DIR]`: a final
//! answer of a stored conversation as a document to send (see [`ba_server::export`]) — on
//! stdout, or in a file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ba_server::export::{ExportError, ReportFormat, export_report};
use ba_storage::ConversationId;
use clap::Args as ClapArgs;

use crate::cli::{CliError, CliResult};
use crate::config::Config;
use crate::out::out;

/// Arguments of `report`.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// The conversation id.
    conv: String,
    /// The final answer's entry number (`seq`); the last answer when left out.
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// `md` (Markdown, code in fenced blocks, links to the files) or `html` (one
    /// self-contained file: tables, charts drawn as images, code; prints cleanly).
    #[arg(long, default_value = "html", value_name = "md|html")]
    format: String,
    /// Write the report to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Where conversations live (default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> CliResult {
    let format: ReportFormat = args.format.parse().map_err(CliError::input)?;
    let mut config = Config::load(None)?;
    if let Some(home) = args.home {
        config.home = Some(home);
    }
    let home = config.home();
    let store = config.existing_store().map_err(CliError::input)?;
    let id = ConversationId::new(&args.conv).map_err(CliError::input)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let exported = rt
        .block_on(export_report(&store, &id, args.seq, format))
        .map_err(|e| match e {
            ExportError::Storage(e) => CliError::input(
                anyhow::Error::from(e).context(format!("conversation {id} in {}", home.display())),
            ),
            other => CliError {
                code: 1,
                error: other.into(),
            },
        })?;
    match args.out {
        Some(path) => {
            std::fs::write(&path, exported.body.as_bytes())
                .with_context(|| format!("writing {}", path.display()))
                .map_err(|error| CliError { code: 1, error })?;
            eprintln!(
                "wrote answer {} of {id} to {} ({} bytes)",
                exported.seq,
                path.display(),
                exported.body.len()
            );
        }
        None => out!("{}", exported.body),
    }
    Ok(ExitCode::SUCCESS)
}
