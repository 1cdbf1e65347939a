//! The one tokio runtime of the module: stores, agents and servers made from Python share it,
//! so a server started here keeps serving while Python does other work.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::Error;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// The runtime, started on first use.
pub(crate) fn get() -> Result<&'static tokio::runtime::Runtime, Error> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ba-agent")
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the async runtime", e))?;
    // Two threads may race here; the loser's runtime is dropped unused.
    Ok(RUNTIME.get_or_init(|| rt))
}

/// Runs `future` to its end on the runtime (the caller has let go of the interpreter's lock).
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, Error> {
    Ok(get()?.block_on(future))
}
