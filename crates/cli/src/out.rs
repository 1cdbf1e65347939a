//! Standard output for a Unix pipeline: a reader that goes away (`ba-agent … | head`) ends the
//! command quietly with status 0, the way `cat` or `grep` end, instead of a panic or an error.

use std::io::{self, Write as _};

/// Writes `args` to standard output; a closed pipe ends the process quietly with status 0.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        failed(&e);
    }
}

/// Flushes standard output (after a partial line); a closed pipe ends the process quietly.
pub(crate) fn flush() {
    if let Err(e) = io::stdout().lock().flush() {
        failed(&e);
    }
}

fn failed(e: &io::Error) {
    if e.kind() == io::ErrorKind::BrokenPipe {
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
