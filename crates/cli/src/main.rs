//! `ba-agent`: the command-line interface of the BA-Agent pipeline. Each subcommand lives in
//! its own module; `cli` parses the arguments and dispatches. The crates below it
//! (`ba-agent`, `ba-model`, `ba-builtins`, …) are what other projects use; this package's small
//! library only sets the offline demo up, for the binary and its tests.

mod agent;
mod cli;
mod config;
mod context;
mod convert;
mod exit;
mod input;
mod log;
mod mcp;
mod memory;
mod out;
mod print;
mod provider;
mod report;
mod schedules;
mod serve;
mod skills;
mod telemetry;
mod tokens;
mod tools;
mod users;
mod watch;
mod workflows;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
