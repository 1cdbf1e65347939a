//! Standard output for a Unix pipeline: a reader that goes away (`ba-agent … | head`) ends the
//! command quietly with status 0, the way `cat` or `grep` end, instead of a panic or an error.

use std::io::{self, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while an agent run is printing: a closed pipe then lets the run finish its round (so
/// its entries land in the log) instead of ending the process mid-round.
static RUN_ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set once standard output is gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Marks an agent run as printing until the guard is dropped.
pub(crate) fn run_guard() -> RunGuard {
    RUN_ACTIVE.store(true, Ordering::SeqCst);
    RunGuard
}

/// See [`run_guard`].
#[derive(Debug)]
pub(crate) struct RunGuard;

impl Drop for RunGuard {
    fn drop(&mut self) {
        RUN_ACTIVE.store(false, Ordering::SeqCst);
    }
}

/// Whether standard output's reader is gone.
pub(crate) fn is_closed() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// Writes `args` to standard output; a closed pipe ends the process quietly with status 0.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    if is_closed() {
        return;
    }
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        failed(&e);
    }
}

/// Flushes standard output (after a partial line); a closed pipe ends the process quietly.
pub(crate) fn flush() {
    if is_closed() {
        return;
    }
    if let Err(e) = io::stdout().lock().flush() {
        failed(&e);
    }
}

fn failed(e: &io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CLOSED.store(true, Ordering::SeqCst);
        if RUN_ACTIVE.load(Ordering::SeqCst) {
            // The run's driver stops it at the end of the round.
            return;
        }
        closed();
    }
    // Any other failure to write the results (a full disk behind a redirection) is an error
    // the user must see.
    eprintln!("error: cannot write to standard output: {e}");
    std::process::exit(1);
}

/// The reader of standard output is gone: nothing more can be shown, so stop with success.
pub(crate) fn closed() -> ! {
    std::process::exit(0)
}

/// Whether `error` (or anything in its chain) is a write to a closed pipe.
pub(crate) fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// `print!` that ends the process quietly on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `println!` that ends the process quietly on a closed pipe.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};
