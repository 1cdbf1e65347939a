//! # ba-context
//!
//! Token counting, context budgets, compression strategies and the context builder (SPEC §5).
//! It implements [`ba_protocol::TokenCounter`] with exact tiktoken encodings and turns the
//! conversation log into a request window that fits a budget without splitting tool pairs.
//!
//! The crate is filled by its own issue; this release only reserves its place in the workspace.
#![deny(missing_docs)]
