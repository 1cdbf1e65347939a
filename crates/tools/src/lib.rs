//! # ba-tools
//!
//! The tool trait and the tool runtime (SPEC §3): lookup, input size check, schema validation,
//! permissions, idempotency, retry, timeout, output levels and spill, composed as layers.
//!
//! The crate is filled by its own issue; this release only reserves its place in the workspace.
#![deny(missing_docs)]
