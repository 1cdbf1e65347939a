//! test server
fn main() {}
