//! The agent's integration tests, linked as one binary: each module was once a binary of its
//! own, and every link of the whole dependency tree cost the build folder about 100 MB.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on a broken invariant"
)]

mod support;

mod agent_live;
mod agent_loop;
mod approvals;
mod budgets;
mod forks;
#[cfg(feature = "command-hooks")]
mod hooks;
#[cfg(feature = "mcp")]
mod mcp_tools;
mod memory;
mod recall;
mod responses_loop;
mod retrieval;
mod skill_activation;
mod spans;
mod titles;
mod tool_adapters;
mod tool_search;
mod windows;
mod workflows;
