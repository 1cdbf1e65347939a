#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    async_fn_in_trait,
    reason = "test code"
)]
//! The journey matrix: where two features meet in an analyst's day. Each test is named by its
//! pair, walks it through `ba-agent serve` processes (a restart is a new process on the same
//! home, a second server another one beside the first) with a model that decides, and asserts
//! what the person sees through the API.
//!
//! The features: upload, approval, edit (a fork at the entry before a question), rewind,
//! compaction, workflow, restart, second server on one store, export, cancel, hooks. The pairs
//! left out, and why, are listed in `MATRIX.md` beside this file; a new feature adds its row
//! there and its tests here.

#[path = "../support/mod.rs"]
mod support;

mod day;

mod approval;
mod compaction;
mod edit;
mod hooks;
mod memory;
mod rewind;
mod servers;
mod upload;
mod workflow;
