//! The dependency rules of the workspace (ARCHITECTURE.md), checked with `cargo tree` in one
//! place for every crate.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::process::Command;

    /// The packages in the normal dependency tree of `package`: direct ones only, or all.
    fn deps(package: &str, direct_only: bool) -> BTreeSet<String> {
        let mut args = vec![
            "tree",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ];
        if direct_only {
            args.extend(["--depth", "1"]);
        }
        let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(args)
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
        let deps = deps("ba-protocol", true);
        let extra: Vec<_> = deps.difference(&allowed).collect();
        assert!(extra.is_empty(), "ba-protocol grew dependencies: {extra:?}");
    }

    #[test]
    fn context_needs_no_async_runtime() {
        assert!(
            !deps("ba-context", false).contains("tokio"),
            "ba-context grew a tokio dependency"
        );
    }

    #[test]
    fn middle_crates_never_depend_on_each_other() {
        let middle = [
            "ba-context",
            "ba-tools",
            "ba-skills",
            "ba-storage",
            "ba-mcp",
        ];
        for package in middle {
            let deps = deps(package, true);
            for other in middle.iter().filter(|o| **o != package) {
                assert!(!deps.contains(*other), "{package} depends on {other}");
            }
            assert!(!deps.contains("ba-agent"), "{package} depends on ba-agent");
        }
    }

    #[test]
    fn mcp_uses_protocol_only_among_workspace_crates() {
        let workspace: Vec<String> = deps("ba-mcp", true)
            .into_iter()
            .filter(|d| d.starts_with("ba-"))
            .collect();
        assert_eq!(
            workspace,
            ["ba-protocol"],
            "ba-mcp's workspace dependencies"
        );
    }
}
