//! # ba-storage
//!
//! Durable storage (SPEC §6): the conversation log (embedded JSONL files, PostgreSQL behind a
//! feature), tool-data files, code and upload stores, and the JSONL event log.
//!
//! The crate is filled by its own issue; this release only reserves its place in the workspace.
#![deny(missing_docs)]
