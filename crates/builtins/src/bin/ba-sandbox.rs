//! `ba-sandbox sandbox-exec POLICY -- PROGRAM [ARGS…]`: the helper that confines itself by the
//! policy and execs the program (see `ba_builtins::run_python::sandbox`). For programs that
//! embed `ba-builtins` and do not host the helper themselves, as `ba-agent` does.

use std::process::ExitCode;

use ba_builtins::run_python::sandbox::{HELPER_SUBCOMMAND, exec_main};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(HELPER_SUBCOMMAND)) {
        eprintln!(
            "ba-sandbox: run by run_python as `ba-sandbox {HELPER_SUBCOMMAND} POLICY -- PROGRAM \
             [ARGS...]`"
        );
        return ExitCode::from(2);
    }
    exec_main(args)
}
