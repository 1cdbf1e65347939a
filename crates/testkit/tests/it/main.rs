//! The test kit's programs, run as their users run them.

mod scripted_model;
