#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The server over real HTTP on 127.0.0.1:0 with the replay model: security (token, Host,
//! Origin, limits, traversal), conversations, runs and their event streams.

mod approvals;
mod budgets;
mod export;
mod forks;
mod harness;
mod hostile;
mod page;
mod people;
mod runs;
mod runtime;
mod safety;
mod scale_out;
mod schedules;
mod signin;
mod workflows;
