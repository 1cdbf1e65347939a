//! Project automation, reached as `cargo xtask <task>`:
//!
//! - `codegen [--check]` — JSON Schemas of the public protocol types into `docs/schema/`.
//! - `fixtures` — the demo's sales database and targets file into `fixtures/demo/`.
//! - `bench` — runs the criterion benches and tables them in `docs/BENCHMARKS.md`.
//! - `load [--quick] [--write]` — the HTTP server under load on loopback (`load.rs`); `--write`
//!   puts the figures in `docs/BENCHMARKS.md`.
//! - `ci` — the checks CI runs: format, lints, tests, the short load test.
//! - `assets` — the page's ECharts from the npm registry (pinned, integrity checked) into
//!   `target/assets/`.

mod assets;
mod bench;
mod codegen;
mod corpus;
mod deps;
mod load;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context as _, bail};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("codegen") => {
            let check = args.iter().any(|a| a == "--check");
            codegen::generate(if check {
                codegen::Mode::Check
            } else {
                codegen::Mode::Write
            })
        }
        Some("fixtures") => fixtures(),
        Some("bench") => bench::run(&args[1..]),
        Some("load") => load::run(&args[1..]),
        Some("ci") => ci(),
        Some("assets") => assets::run(),
        _ => {
            bail!(
                "usage: cargo xtask codegen [--check] | fixtures | bench [FILTER] | load [--quick] [--write] | ci | assets"
            )
        }
    }
}

/// The workspace root (xtask lives one level below it).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes the demo data (see `ba_builtins::demo_data`) into `fixtures/demo/`.
fn fixtures() -> anyhow::Result<()> {
    let dir = root().join("fixtures").join("demo");
    let data = ba_builtins::demo_data::generate(&dir)
        .with_context(|| format!("generating the demo data in {}", dir.display()))?;
    println!(
        "wrote {} ({} sales rows, total {:.2}) and {}",
        data.db_path.display(),
        data.sales_rows,
        data.total_amount,
        data.csv_path.display()
    );
    corpus::write(&root().join("fixtures/corpus")).context("writing the corpus")?;
    Ok(())
}

pub(crate) fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(root())
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    codegen::generate(codegen::Mode::Check)?;
    cargo(&[
        "clippy",
        "--workspace",
        "--lib",
        "--bins",
        "--",
        "-D",
        "warnings",
    ])?;
    cargo(&["test", "--workspace"])?;
    load::run(&["--quick".to_owned()])
}
