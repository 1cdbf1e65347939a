//! Architecture invariant: the middle crates never depend on each other; `ba-tools` depends on
//! `ba-protocol` only among the workspace crates.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[test]
fn depends_on_no_other_middle_crate() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut section = String::new();
    let mut workspace_deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        let is_normal = section == "[dependencies]" || section.starts_with("[target.");
        if is_normal
            && let Some(name) = line.split(['=', '.']).next().map(str::trim)
            && name.starts_with("ba-")
        {
            workspace_deps.push(name.to_owned());
        }
    }
    assert_eq!(
        workspace_deps,
        ["ba-protocol"],
        "ba-tools must depend on ba-protocol only"
    );
}
