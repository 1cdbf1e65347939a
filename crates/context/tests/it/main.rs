//! The integration tests of `ba-context`, one binary: compression on random and real
//! conversations, persisted compaction, token counts, and the planted-facts benchmarks.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on a broken invariant"
)]

mod compaction_props;
mod compression;
mod fidelity;
mod fidelity_bank;
mod fidelity_shapes;
mod planted;
mod retrieval;
mod structure;
mod tokens;

// The corpus generator of `cargo xtask fixtures`; `write` is only called there.
#[allow(dead_code)]
#[path = "../../../../xtask/src/corpus/mod.rs"]
mod corpus;
