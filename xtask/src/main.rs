//! Project automation, reached as `cargo xtask <task>`:
//!
//! - `codegen [--check]` — JSON Schemas of the public protocol types into `docs/schema/`.
//! - `fixtures` — the demo's sales database, targets file, GBK targets and workbook into
//!   `fixtures/demo/`.
//! - `bench` — runs the criterion benches and tables them in `docs/BENCHMARKS.md`.
//! - `fuzz [--cases N]` — the parser fuzz tests (`crates/*/tests/fuzz.rs`) in release, N cases
//!   each (default 20 000; the normal test run does a short pass of 256).
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
mod dist;
mod load;
mod modules;
mod publish;
mod tidy;

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
        Some("fuzz") => fuzz(&args[1..]),
        Some("load") => load::run(&args[1..]),
        Some("ci") => ci(),
        Some("assets") => assets::run(),
        Some("dist") => dist::run(&args[1..]),
        _ => bail!(
            "usage: cargo xtask codegen [--check] | fixtures | bench [FILTER] | fuzz [--cases N] | load [--quick] [--write] | assets | dist [--no-build] | ci"
        ),
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
        "wrote {} ({} sales rows, total {:.2}), {}, {} and {}",
        data.db_path.display(),
        data.sales_rows,
        data.total_amount,
        data.csv_path.display(),
        dir.join(ba_builtins::demo_data::GBK_CSV_FILE).display(),
        dir.join(ba_builtins::demo_data::XLSX_FILE).display()
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

/// Runs every crate's `tests/fuzz.rs` in release with `BA_AGENT_FUZZ_CASES` cases per test.
fn fuzz(args: &[String]) -> anyhow::Result<()> {
    let cases: u32 = match args {
        [] => 20_000,
        [flag, n] if flag == "--cases" => n
            .parse()
            .with_context(|| format!("--cases takes a positive number, not {n:?}"))?,
        _ => bail!("usage: cargo xtask fuzz [--cases N]"),
    };
    if cases == 0 {
        bail!("--cases takes a positive number, not 0");
    }
    let mut packages = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).context("listing crates/")? {
        let dir = entry.context("listing crates/")?.path();
        if dir.join("tests/fuzz.rs").is_file() {
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
                .with_context(|| format!("reading {}", dir.join("Cargo.toml").display()))?;
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
                .with_context(|| format!("no package name in {}", dir.display()))?;
            packages.push(name.to_owned());
        }
    }
    packages.sort();
    if packages.is_empty() {
        bail!("no crates/*/tests/fuzz.rs found");
    }
    println!(
        "fuzzing {} with {cases} cases per test",
        packages.join(", ")
    );
    let mut command = vec!["test", "--release", "--all-features"];
    for p in &packages {
        command.extend(["-p", p.as_str()]);
    }
    command.extend(["--test", "fuzz"]);
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(&command)
        .env("BA_AGENT_FUZZ_CASES", cases.to_string())
        .current_dir(root())
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("a fuzz test failed ({status}); proptest printed the minimal input above");
    }
    Ok(())
}

/// What `.ci/run` checks, with the same flags (the README's test command among them), minus
/// the servers it installs and starts: tests that need one skip with a message unless
/// `CI=true`.
fn ci() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    codegen::generate(codegen::Mode::Check)?;
    cargo(&CI_CLIPPY)?;
    cargo(&CI_TEST)?;
    load::run(&["--quick".to_owned()])
}

/// The lint pass of `.ci/run`.
const CI_CLIPPY: [&str; 8] = [
    "clippy",
    "--workspace",
    "--all-features",
    "--lib",
    "--bins",
    "--",
    "-D",
    "warnings",
];

/// The README's test command, as `.ci/run` runs it.
const CI_TEST: [&str; 4] = ["test", "--workspace", "--all-features", "--locked"];

#[cfg(test)]
mod tests {
    use super::{CI_CLIPPY, CI_TEST, root};

    /// `cargo xtask ci` runs what CI runs: the README's test command and `.ci/run`'s lint line,
    /// word for word.
    #[test]
    fn ci_runs_the_readme_and_ci_commands() {
        let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
        let script = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
        let test = format!("cargo {}", CI_TEST.join(" "));
        let clippy = format!("cargo {}", CI_CLIPPY.join(" "));
        assert!(
            readme.lines().any(|l| l.trim() == test),
            "the README's test command is not `{test}`"
        );
        assert!(
            script.lines().any(|l| l.trim() == test),
            ".ci/run does not run `{test}`"
        );
        assert!(
            script.lines().any(|l| l.trim() == clippy),
            ".ci/run does not run `{clippy}`"
        );
    }
}
