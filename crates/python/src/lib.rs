//! The native half of the `ba_agent` Python package (`ba_agent._native`), built by maturin as
//! an extension module for the stable ABI of CPython 3.9 and later.
//!
//! It is a front end like the command line: it reads conversations in every wire format the
//! protocol crate converts ([`conversation`]), counts and windows them with the context crate,
//! opens the store ([`store`]), builds an agent from the command line's configuration file
//! format ([`agent`]) and serves the HTTP API ([`serve`]). Values cross into Python as JSON
//! text, which the pure-Python layer (`python/ba_agent/__init__.py`) turns into dicts and lists;
//! Python functions become tools through the same layer, which writes their schemas from type
//! hints.
//!
//! Every call that works in Rust lets go of the interpreter's lock first, so other Python
//! threads (and `asyncio.to_thread` callers) go on meanwhile. Async work runs on one tokio
//! runtime shared by the module ([`runtime`]). Errors become exceptions under one base class,
//! `BaAgentError`, whose message is the Rust error's sentence ([`error`]).
#![deny(missing_docs)]

mod agent;
mod conversation;
mod error;
mod runtime;
mod serve;
mod store;
mod tools;

use pyo3::prelude::*;

/// The module `ba_agent._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    error::register(m)?;
    conversation::register(m)?;
    store::register(m)?;
    agent::register(m)?;
    serve::register(m)?;
    Ok(())
}
