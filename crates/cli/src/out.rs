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

/// `text` as it may reach a terminal: every control or format character (an escape sequence,
/// NUL, a tab, a bidirectional override: [`ba_storage::is_hidden_char`]) written as its
/// `\u{…}` escape, so what a conversation holds (a title, a name, a line of an answer) can
/// neither act on the terminal nor reorder the line it is printed in.
pub(crate) fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(ba_storage::is_hidden_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if ba_storage::is_hidden_char(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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

#[cfg(test)]
mod tests {
    #[test]
    fn hidden_characters_are_shown_escaped() {
        assert_eq!(super::shown("West sales"), "West sales");
        assert_eq!(
            super::shown("a\u{1b}[2J\0b\u{202e}c\td"),
            "a\\u{1b}[2J\\u{0}b\\u{202e}c\\u{9}d"
        );
    }
}
