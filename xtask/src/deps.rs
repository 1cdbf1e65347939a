//! The dependency rules of the workspace, checked with `cargo tree`.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::process::Command;

    /// The direct normal dependencies of `package`.
    fn direct_deps(package: &str) -> BTreeSet<String> {
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "tree",
                "-p",
                package,
                "-e",
                "normal",
                "--depth",
                "1",
                "--prefix",
                "none",
                "--offline",
            ])
            .current_dir(crate::root())
            .output()
            .expect("cargo tree runs");
        assert!(
            out.status.success(),
            "cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
            .collect()
    }

    #[test]
    fn protocol_depends_on_serde_json_thiserror_schemars_only() {
        let allowed: BTreeSet<String> = ["serde", "serde_json", "thiserror", "schemars"]
            .into_iter()
            .map(String::from)
            .collect();
        let deps = direct_deps("ba-protocol");
        let extra: Vec<_> = deps.difference(&allowed).collect();
        assert!(extra.is_empty(), "ba-protocol grew dependencies: {extra:?}");
    }

    #[test]
    fn middle_crates_never_depend_on_each_other() {
        let middle = ["ba-context", "ba-tools", "ba-skills", "ba-storage"];
        for package in middle {
            let deps = direct_deps(package);
            for other in middle.iter().filter(|o| **o != package) {
                assert!(!deps.contains(*other), "{package} depends on {other}");
            }
            assert!(!deps.contains("ba-agent"), "{package} depends on ba-agent");
        }
    }
}
