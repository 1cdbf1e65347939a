//! The integration tests of `ba-builtins`, one binary (see `docs/ARCHITECTURE.md`):
//! - `demo`: the tools on the demo data, and the committed fixtures against the generator;
//! - `real_files`: workbooks and CSVs written by real programs (openpyxl, LibreOffice, iconv,
//!   msoffcrypto-tool), bad files, and the same questions answered from a CSV, a workbook and
//!   the SQLite table;
//! - `postgres` (feature `postgres`): the query suite on the server CI starts;
//! - `run_python`: the sandbox seen from inside the code (escapes refused, limits enforced);
//! - `workspace`: the conversation's files — `file_reader` by id and by original name (CSV, GBK
//!   CSV, workbook), `run_python` with the uploads in its working folder and `outputs/` kept,
//!   and no local path in any answer or error;
//! - `scale` (ignored, run with `--ignored`): a million-row sheet and a gigabyte CSV.
//!
//! A test that needs a program skips with a message when it is missing, and fails instead
//! under `CI=true` (`.ci/run` installs them; [`ba_testkit::missing`] decides).

// Test scaffolding: a failure in a helper should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod demo;
#[cfg(feature = "postgres")]
mod postgres;
mod real_files;
mod run_python;
mod scale;
mod workspace;

use std::path::Path;
use std::process::Command;

use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use serde_json::Value;

/// Whether `program args…` runs successfully; when not, a skip message (or, under `CI=true`,
/// a failure naming what to install).
pub(crate) fn require(what: &str, program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        let probe = format!("{program} {}", args.join(" "));
        ba_testkit::missing(&format!(
            "{what} is missing (`{probe}` failed; .ci/run installs it)"
        ));
    }
    ok
}

/// Python 3 with openpyxl.
pub(crate) fn openpyxl() -> bool {
    require(
        "Python's openpyxl (pip install openpyxl)",
        "python3",
        &["-c", "import openpyxl"],
    )
}

/// LibreOffice, headless.
pub(crate) fn libreoffice() -> bool {
    require(
        "LibreOffice Calc (Debian: libreoffice-calc-nogui)",
        "soffice",
        &["--version"],
    )
}

/// Runs a program and fails the test with its output when it fails.
pub(crate) fn run(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a Python script in `dir`.
pub(crate) fn python(script: &str, dir: &Path) {
    run("python3", &["-c", script], dir);
}

/// Converts `file` in `dir` with headless LibreOffice into `to` (`xlsx`, `ods`, `xls`), in
/// `dir/out/`, with a profile of its own so parallel tests do not share one.
pub(crate) fn soffice_convert(dir: &Path, file: &str, to: &str, extra: &[&str]) {
    let profile = format!(
        "-env:UserInstallation=file://{}/lo-profile-{to}",
        dir.display()
    );
    let mut args = vec![profile.as_str(), "--headless", "--norestore"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--convert-to", to, "--outdir", "out", file]);
    run("soffice", &args, dir);
}

/// A `file_reader` over the data folder `dir`.
pub(crate) fn reader(dir: &Path) -> FileReader {
    FileReader::new(FileReaderConfig::new(vec![dir.to_owned()]))
}

/// Reads with `file_reader`, panicking with the error.
pub(crate) async fn read(reader: &FileReader, args: Value) -> Value {
    match reader.call_json(args.clone()).await {
        Ok(v) => v,
        Err(e) => panic!("file_reader {args}: {e}"),
    }
}
