//! The dependency rules of the workspace (docs/ARCHITECTURE.md), checked with `cargo tree` in one
//! place for every crate. Each rule names what it forbids; a violation names the edge and the
//! path that brings it in.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::process::Command;

    /// The workspace's packages.
    const WORKSPACE: [&str; 15] = [
        "ba-protocol",
        "ba-context",
        "ba-tools",
        "ba-skills",
        "ba-storage",
        "ba-model",
        "ba-builtins",
        "ba-mcp",
        "ba-agent",
        "ba-export",
        "ba-server",
        "ba-cli",
        "ba-testkit",
        "ba-agent-python",
        "xtask",
    ];

    /// The middle crates: they meet only in `ba-agent`, never depend on each other.
    const MIDDLE: [&str; 6] = [
        "ba-context",
        "ba-tools",
        "ba-skills",
        "ba-storage",
        "ba-model",
        "ba-mcp",
    ];

    /// Only the binary (and xtask, and tests) may use these: libraries return typed errors and
    /// leave arguments and configuration formats to the front end.
    const FRONT_END_ONLY: [&str; 3] = ["clap", "anyhow", "serde_yaml_ng"];

    fn cargo() -> Command {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(crate::root());
        cmd
    }

    /// The packages in the normal dependency tree of `package` (itself excluded): direct ones
    /// only, or all; `features` are passed as given (e.g. `--no-default-features`).
    fn deps(package: &str, direct_only: bool, features: &[&str]) -> BTreeSet<String> {
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
        args.extend(features);
        let out = cargo().args(&args).output().expect("cargo tree runs");
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

    /// How `dependency` gets into `package`'s normal tree, for the failure message.
    fn path(package: &str, dependency: &str) -> String {
        let out = cargo()
            .args([
                "tree",
                "-p",
                package,
                "-e",
                "normal",
                "-i",
                dependency,
                "--offline",
            ])
            .output()
            .expect("cargo tree runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .take(6)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Fails naming every `package → dependency` edge found in `found` ∩ `forbidden`.
    fn forbid(package: &str, found: &BTreeSet<String>, forbidden: &[&str], why: &str) {
        let edges: Vec<String> = forbidden
            .iter()
            .filter(|f| found.contains(**f))
            .map(|f| format!("{package} → {f} ({why}):\n{}", path(package, f)))
            .collect();
        assert!(
            edges.is_empty(),
            "forbidden dependencies:\n{}",
            edges.join("\n\n")
        );
    }

    /// Fails naming every workspace package `package` depends on directly outside `allowed`.
    fn workspace_deps_only(package: &str, allowed: &[&str]) {
        let direct = deps(package, true, &[]);
        let extra: Vec<&str> = WORKSPACE
            .iter()
            .copied()
            .filter(|w| direct.contains(*w) && !allowed.contains(w))
            .collect();
        assert!(
            extra.is_empty(),
            "{package} may depend on {allowed:?} of the workspace only; it depends on {extra:?}"
        );
    }

    #[test]
    fn protocol_depends_on_serde_json_thiserror_schemars_only() {
        let allowed: BTreeSet<String> = ["serde", "serde_json", "thiserror", "schemars"]
            .into_iter()
            .map(String::from)
            .collect();
        let deps = deps("ba-protocol", true, &[]);
        let extra: Vec<_> = deps.difference(&allowed).collect();
        assert!(extra.is_empty(), "ba-protocol grew dependencies: {extra:?}");
    }

    #[test]
    fn context_needs_no_async_runtime() {
        forbid(
            "ba-context",
            &deps("ba-context", false, &[]),
            &["tokio"],
            "the context crate is synchronous; callers bring their runtime",
        );
    }

    #[test]
    fn middle_crates_use_protocol_only_of_the_workspace() {
        for package in MIDDLE {
            workspace_deps_only(package, &["ba-protocol"]);
        }
    }

    #[test]
    fn builtins_use_protocol_and_tools_only() {
        workspace_deps_only("ba-builtins", &["ba-protocol", "ba-tools"]);
    }

    #[test]
    fn agent_is_the_loop_and_its_adapters_only() {
        workspace_deps_only(
            "ba-agent",
            &[
                "ba-protocol",
                "ba-context",
                "ba-tools",
                "ba-skills",
                "ba-storage",
                "ba-model",
            ],
        );
        forbid(
            "ba-agent",
            &deps("ba-agent", false, &[]),
            &[
                "clap",
                "anyhow",
                "serde_yaml_ng",
                "rusqlite",
                "libsqlite3-sys",
                "rustix",
                "landlock",
                "seccompiler",
                "reqwest",
            ],
            "the loop carries no CLI, no configuration format, no SQLite, no process control, \
             no sandbox and no HTTP client; those come with the crates a program picks",
        );
    }

    #[test]
    fn agent_takes_mcp_behind_its_feature_only() {
        // Without the feature, `agent_is_the_loop_and_its_adapters_only` holds (no ba-mcp, no
        // HTTP client, no process control); with it, ba-mcp is the one extra workspace crate.
        let with = deps("ba-agent", true, &["--features", "mcp"]);
        assert!(
            with.contains("ba-mcp"),
            "ba-agent --features mcp should depend on ba-mcp: {with:?}"
        );
        let extra: Vec<&str> = WORKSPACE
            .iter()
            .copied()
            .filter(|w| with.contains(*w))
            .filter(|w| {
                !matches!(
                    *w,
                    "ba-protocol"
                        | "ba-context"
                        | "ba-tools"
                        | "ba-skills"
                        | "ba-storage"
                        | "ba-model"
                        | "ba-mcp"
                )
            })
            .collect();
        assert!(
            extra.is_empty(),
            "ba-agent --features mcp depends on {extra:?}"
        );
    }

    #[test]
    fn agent_takes_process_control_behind_command_hooks_only() {
        // Without the feature the loop has no process control (above); `command-hooks` brings
        // rustix for the hook commands' process groups, and no workspace crate.
        let with = deps("ba-agent", false, &["--features", "command-hooks"]);
        assert!(
            with.contains("rustix"),
            "ba-agent --features command-hooks should depend on rustix: {with:?}"
        );
        let direct = deps("ba-agent", true, &["--features", "command-hooks"]);
        let without = deps("ba-agent", true, &[]);
        let added: Vec<&String> = direct.difference(&without).collect();
        assert_eq!(
            added,
            [&"rustix".to_owned()],
            "ba-agent --features command-hooks adds more than rustix"
        );
    }

    #[test]
    fn server_is_a_front_end_of_the_loop() {
        workspace_deps_only(
            "ba-server",
            &[
                "ba-protocol",
                "ba-context",
                "ba-skills",
                "ba-storage",
                "ba-agent",
                "ba-export",
            ],
        );
        forbid(
            "ba-server",
            &deps("ba-server", false, &[]),
            &[
                "clap",
                "anyhow",
                "serde_yaml_ng",
                "rusqlite",
                "libsqlite3-sys",
                "rustix",
                "reqwest",
                "rmcp",
            ],
            "the server takes an agent built by the program; it chooses no model provider, \
             no tools, no configuration format and no argument parser",
        );
        let agent = deps("ba-agent", false, &[]);
        forbid(
            "ba-agent",
            &agent,
            &["ba-server", "axum", "hyper", "tower-http"],
            "the loop knows nothing of HTTP serving; the server depends on it, never the reverse",
        );
    }

    #[test]
    fn the_report_is_its_own_layer() {
        // The report reads a conversation from the store and writes a document: it needs the
        // log's types and the store, nothing of the loop, of HTTP or of a front end.
        workspace_deps_only("ba-export", &["ba-protocol", "ba-storage"]);
        forbid(
            "ba-export",
            &deps("ba-export", false, &["--all-features"]),
            &[
                "axum",
                "hyper",
                "tower",
                "tower-http",
                "reqwest",
                "ba-agent",
                "ba-server",
            ],
            "the report is a document made from the store; serving it over HTTP is the \
             server's, running the loop the agent's",
        );
        // Only the front ends hand a report out; a library below them taking it would put the
        // document's rendering under the loop. (xtask drives the server, so it comes with it.)
        for package in WORKSPACE.iter().filter(|p| {
            !matches!(
                **p,
                "ba-server" | "ba-cli" | "ba-agent-python" | "ba-export" | "xtask"
            )
        }) {
            forbid(
                package,
                &deps(package, false, &["--all-features"]),
                &["ba-export"],
                "only the front ends (ba-server, ba-cli) use the report layer",
            );
        }
    }

    #[test]
    fn model_providers_are_features() {
        let bare = deps("ba-model", false, &["--no-default-features"]);
        forbid(
            "ba-model --no-default-features",
            &bare,
            &["reqwest", "rand", "hyper"],
            "without a provider the trait and its types need no HTTP client",
        );
        let replay = deps(
            "ba-model",
            false,
            &["--no-default-features", "--features", "replay"],
        );
        forbid(
            "ba-model --features replay",
            &replay,
            &["reqwest", "hyper"],
            "the replay client plays a file; it needs no HTTP client",
        );
    }

    #[test]
    fn builtins_put_sqlite_python_and_the_web_behind_features() {
        let bare = deps("ba-builtins", false, &["--no-default-features"]);
        forbid(
            "ba-builtins --no-default-features",
            &bare,
            &[
                "rusqlite",
                "libsqlite3-sys",
                "rustix",
                "landlock",
                "seccompiler",
                "reqwest",
                "tempfile",
                "calamine",
                "rust_xlsxwriter",
                "zip",
                "scraper",
                "html5ever",
                "tokio-postgres",
            ],
            "file_reader alone (CSV, JSON, text in any encoding) needs neither SQLite, a \
             process, a sandbox, HTTP, HTML, workbooks nor PostgreSQL",
        );
        let defaults = deps("ba-builtins", false, &[]);
        forbid(
            "ba-builtins (default features)",
            &defaults,
            &["tokio-postgres"],
            "PostgreSQL is opt-in (feature `postgres`)",
        );
    }

    #[test]
    fn the_python_package_is_a_front_end() {
        // It builds an agent and serves it as the binary does, from the binary's configuration
        // format; it is not a way into the binary, nor into test support.
        workspace_deps_only(
            "ba-agent-python",
            &[
                "ba-protocol",
                "ba-context",
                "ba-tools",
                "ba-skills",
                "ba-storage",
                "ba-model",
                "ba-builtins",
                "ba-agent",
                "ba-server",
            ],
        );
        forbid(
            "ba-agent-python",
            &deps("ba-agent-python", true, &[]),
            &["clap", "anyhow"],
            "the package raises typed exceptions; it parses no command line",
        );
    }

    #[test]
    fn only_the_binary_has_clap_anyhow_and_yaml_configuration() {
        for package in WORKSPACE
            .iter()
            .filter(|p| !matches!(**p, "ba-cli" | "xtask" | "ba-testkit" | "ba-agent-python"))
        {
            forbid(
                package,
                &deps(package, true, &[]),
                &FRONT_END_ONLY,
                "libraries return typed errors; arguments and configuration belong to the binary",
            );
        }
    }

    #[test]
    fn the_telemetry_sdk_and_exporter_are_the_binarys_feature() {
        // Libraries record through `tracing` and the OpenTelemetry API only; the program picks
        // the SDK, the exporter and the subscriber (ba-cli's `otlp` feature).
        const SDK: [&str; 5] = [
            "opentelemetry_sdk",
            "opentelemetry-otlp",
            "opentelemetry-http",
            "tracing-subscriber",
            "tracing-opentelemetry",
        ];
        for package in WORKSPACE
            .iter()
            .filter(|p| !matches!(**p, "ba-cli" | "xtask" | "ba-testkit"))
        {
            forbid(
                package,
                &deps(package, false, &["--all-features"]),
                &SDK,
                "a library leaves the telemetry SDK and its exporter to the program",
            );
        }
        forbid(
            "ba-cli --no-default-features",
            &deps("ba-cli", false, &["--no-default-features"]),
            &SDK,
            "without the `otlp` feature the binary carries no exporter",
        );
    }

    #[test]
    fn test_support_is_never_a_normal_dependency() {
        for package in WORKSPACE.iter().filter(|p| **p != "ba-testkit") {
            forbid(
                package,
                &deps(package, false, &[]),
                &["ba-testkit"],
                "test support is a dev-dependency only",
            );
        }
    }
}
