//! The test kit's programs, run as their users run them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod scripted_model;
