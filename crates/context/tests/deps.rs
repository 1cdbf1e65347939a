//! The middle crates never depend on each other, and the library needs no runtime.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn context_depends_on_protocol_only() {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            "ba-context",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!(
            "skipping: cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let tree = String::from_utf8(out.stdout).unwrap();
    for forbidden in [
        "ba-tools ",
        "ba-skills ",
        "ba-storage ",
        "ba-agent ",
        "tokio ",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(forbidden)),
            "ba-context depends on {forbidden}"
        );
    }
    assert!(tree.lines().any(|l| l.starts_with("ba-protocol ")));
}
