//! The offline demo of the `ba-agent` binary, as a library so the binary, its tests and other
//! front ends set it up the same way. Everything else of this package is the binary.
#![deny(missing_docs)]

pub mod demo;
