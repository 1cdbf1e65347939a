//! Integration tests of ba-mcp against real servers run as child processes.

// Test helpers fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http;
mod interop;
mod misbehaving;
mod plugins;
mod servers;
mod support;
mod watchdog;
