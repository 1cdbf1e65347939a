//! Architecture invariant: the middle crates never depend on each other; `ba-skills` builds on
//! `ba-protocol` alone.

#[test]
fn no_dependency_on_another_middle_crate() {
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or_default();
    assert!(
        deps.contains("ba-protocol"),
        "ba-protocol must be a dependency"
    );
    for forbidden in ["ba-context", "ba-tools", "ba-storage", "ba-agent"] {
        assert!(
            !deps.contains(forbidden),
            "ba-skills must not depend on {forbidden}"
        );
    }
}
