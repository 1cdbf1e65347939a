//! Architecture invariant: the storage crate depends on `ba-protocol` only among the
//! workspace crates (the middle crates meet in `ba-agent`, never in each other).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn storage_depends_on_no_sibling_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "ba-storage",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
            "--all-features",
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
    assert!(tree.contains("ba-protocol"), "{tree}");
    for forbidden in ["ba-context", "ba-tools", "ba-skills", "ba-agent"] {
        assert!(
            !tree
                .lines()
                .any(|l| l.starts_with(&format!("{forbidden} "))),
            "ba-storage depends on {forbidden}"
        );
    }
}
