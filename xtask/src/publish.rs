//! What publishing the lower crates needs, checked over `cargo metadata`: the crates other
//! projects take one by one carry what crates.io shows and a reader needs (a description, a
//! README, the licence and its texts, keywords), every crate of the workspace has the same
//! version, and a published crate depends on no crate that is not published. `cargo publish
//! --dry-run` in `.ci/run` then packages and builds each one as crates.io would.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value;

    /// The published crates (docs/ARCHITECTURE.md, "Crates").
    const PUBLISHED: [&str; 7] = [
        "ba-protocol",
        "ba-context",
        "ba-tools",
        "ba-skills",
        "ba-storage",
        "ba-model",
        "ba-mcp",
    ];

    fn metadata() -> Value {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(&root)
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
    }

    fn packages(meta: &Value) -> Vec<&Value> {
        meta["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .collect()
    }

    fn name(package: &Value) -> &str {
        package["name"].as_str().unwrap_or_default()
    }

    /// `publish: []` in the metadata is `publish = false`; `null` is any registry.
    fn is_published(package: &Value) -> bool {
        package["publish"]
            .as_array()
            .is_none_or(|registries| !registries.is_empty())
    }

    #[test]
    fn exactly_the_lower_crates_are_published() {
        let meta = metadata();
        let mut published: Vec<&str> = packages(&meta)
            .into_iter()
            .filter(|p| is_published(p))
            .map(name)
            .collect();
        published.sort_unstable();
        let mut expected = PUBLISHED.to_vec();
        expected.sort_unstable();
        assert_eq!(published, expected);
    }

    #[test]
    fn published_crates_carry_what_crates_io_shows() {
        let meta = metadata();
        let mut problems = Vec::new();
        for package in packages(&meta).into_iter().filter(|p| is_published(p)) {
            let name = name(package);
            let dir = Path::new(package["manifest_path"].as_str().unwrap_or_default())
                .parent()
                .expect("a manifest has a folder")
                .to_path_buf();
            for field in ["description", "license", "readme", "rust_version"] {
                if package[field].as_str().is_none_or(str::is_empty) {
                    problems.push(format!("{name}: no `{field}`"));
                }
            }
            if package["license"].as_str() != Some("MIT OR Apache-2.0") {
                problems.push(format!("{name}: the licence is not `MIT OR Apache-2.0`"));
            }
            for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
                if !dir.join(file).is_file() {
                    problems.push(format!("{name}: no {file} in {}", dir.display()));
                }
            }
            let keywords = package["keywords"].as_array().map_or(0, Vec::len);
            if !(1..=5).contains(&keywords) {
                problems.push(format!(
                    "{name}: {keywords} keywords (crates.io takes 1 to 5)"
                ));
            }
            let categories = package["categories"].as_array().map_or(0, Vec::len);
            if !(1..=5).contains(&categories) {
                problems.push(format!("{name}: {categories} categories (1 to 5)"));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Versions move together: a release bumps the workspace's version once.
    #[test]
    fn every_crate_has_the_workspace_version() {
        let meta = metadata();
        let packages = packages(&meta);
        let protocol = packages
            .iter()
            .find(|p| name(p) == "ba-protocol")
            .expect("ba-protocol is a member");
        let version = protocol["version"].as_str().expect("a version");
        let mut problems = Vec::new();
        for package in &packages {
            if package["version"].as_str() != Some(version) {
                problems.push(format!("{} is at {}", name(package), package["version"]));
            }
            for dep in package["dependencies"].as_array().into_iter().flatten() {
                let dep_name = dep["name"].as_str().unwrap_or_default();
                let req = dep["req"].as_str().unwrap_or_default();
                let in_workspace = packages.iter().any(|p| name(p) == dep_name);
                let dev = dep["kind"].as_str() == Some("dev");
                if in_workspace && !dev && req != format!("^{version}") {
                    problems.push(format!(
                        "{} asks for {dep_name} {req}, not ^{version}",
                        name(package)
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// A published crate's dependencies are on crates.io or published from here; a dev
    /// dependency on a crate that is never published carries no version, so packaging leaves
    /// it out.
    #[test]
    fn published_crates_depend_only_on_published_crates() {
        let meta = metadata();
        let packages = packages(&meta);
        let unpublished: Vec<&str> = packages
            .iter()
            .filter(|p| !is_published(p))
            .map(|p| name(p))
            .collect();
        let mut problems = Vec::new();
        for package in packages.iter().filter(|p| is_published(p)) {
            for dep in package["dependencies"].as_array().into_iter().flatten() {
                let dep_name = dep["name"].as_str().unwrap_or_default();
                if !unpublished.contains(&dep_name) {
                    continue;
                }
                let dev = dep["kind"].as_str() == Some("dev");
                let versioned = dep["req"].as_str() != Some("*");
                if !dev || versioned {
                    problems.push(format!(
                        "{} depends on {dep_name}, which is not published{}",
                        name(package),
                        if dev {
                            " (a dev dependency with a version)"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
