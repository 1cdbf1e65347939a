//! How a command ends: an error that carries its exit code (1 for a failed check, 2 for bad
//! input or usage) and the one line that reports it on stderr. Every command module returns
//! [`CliResult`]; only `cli` turns it into the process's exit.

use std::process::ExitCode;

/// An error that carries its exit code.
#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl CliError {
    /// Bad input or usage: exit 2.
    pub(crate) fn input(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        Self::input(error)
    }
}

pub(crate) type CliResult = Result<ExitCode, CliError>;

/// The runtime a command's async work runs on: one thread (a command does one thing at a
/// time; `serve` and `schedules` build their own).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The error and its causes on one line, each said once: a cause whose text a message above
/// it already holds (an I/O error quoted by the store's error and then chained as its source)
/// is left out.
pub(crate) fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}
