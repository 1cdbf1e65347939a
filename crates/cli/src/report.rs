//! `ba-agent report ID [--seq N] [--format md|html] [--out FILE] [--home DIR]`: a final
//! answer of a stored conversation as a document to send (see [`ba_export`]) — on
//! stdout; in a file with the files it names in `files/` beside it; or, for an `--out` ending
//! in `.zip`, as a zip of the document and its files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use ba_export::{ExportError, Packaging, ReportFormat, export_report, write_beside, write_zip};
use ba_storage::ConversationId;
use clap::Args as ClapArgs;

use crate::config::Config;
use crate::exit::{CliError, CliResult};
use crate::out::out;

/// Arguments of `report`.
#[derive(Debug, ClapArgs)]
pub(crate) struct Args {
    /// The conversation id.
    conv: String,
    /// The final answer's entry number (`seq`); the last answer when left out.
    #[arg(long, value_name = "N")]
    seq: Option<u64>,
    /// `md` (Markdown, code in fenced blocks, files linked relatively) or `html` (one
    /// self-contained file: tables, charts drawn as images, images embedded, code; prints
    /// cleanly).
    #[arg(long, default_value = "html", value_name = "md|html")]
    format: String,
    /// Write the report to this file, with the files it names in `files/` beside it (replacing
    /// files of the same names there); a path ending in `.zip` gets one zip of the report
    /// (`report.md` or `report.html`) and its files instead. Without it the report goes to
    /// stdout, alone.
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Where conversations live (default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
}

fn is_zip(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"))
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
    let rt = crate::exit::runtime()?;
    let failed = |e: ExportError| match e {
        ExportError::Storage(e) => CliError::input(
            anyhow::Error::from(e).context(format!("conversation {id} in {}", home.display())),
        ),
        other => CliError {
            code: 1,
            error: other.into(),
        },
    };
    let packaging = if args.out.is_some() {
        Packaging::WithFiles
    } else {
        Packaging::Alone
    };
    let exported = rt
        .block_on(export_report(&store, &id, args.seq, format, packaging))
        .map_err(failed)?;
    let files = exported.files.len();
    match args.out {
        Some(path) if is_zip(&path) => {
            let file = std::fs::File::create(&path)
                .with_context(|| format!("writing {}", path.display()))
                .map_err(|error| CliError { code: 1, error })?;
            let file = rt
                .block_on(write_zip(&exported, &store, file))
                .map_err(failed)?;
            let size = file.metadata().map(|m| m.len()).unwrap_or_default();
            eprintln!(
                "wrote answer {} of {id} and {files} file(s) to {} ({size} bytes)",
                exported.seq,
                path.display(),
            );
        }
        Some(path) => {
            let written = rt
                .block_on(write_beside(&exported, &store, &path))
                .map_err(failed)?;
            eprintln!(
                "wrote answer {} of {id} to {} ({} bytes)",
                exported.seq,
                path.display(),
                exported.body.len()
            );
            for file in written.iter().skip(1) {
                eprintln!("  and {}", file.display());
            }
        }
        None => {
            out!("{}", exported.body);
            if files > 0 {
                eprintln!(
                    "the report links {files} file(s) under files/, not written: --out FILE \
                     writes them beside it (or --out FILE.zip, one zip)"
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
