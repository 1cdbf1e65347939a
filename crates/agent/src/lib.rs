//! agent
pub mod builtin;
