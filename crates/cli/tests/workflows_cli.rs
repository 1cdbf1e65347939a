//! `ba-agent workflows …` over the demo's example and generated good and bad workflows.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .current_dir(cwd)
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg("workflows")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

fn write(root: &Path, name: &str, text: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("WORKFLOW.md"), text).unwrap();
    dir
}

const SMALL: &str = "---\nname: small\ndescription: A small one.\nnodes:\n  - {id: only, title: Only, brief: Do it.}\n---\n";

const LOOPED: &str = "---\nname: looped\ndescription: Loops.\nnodes:\n  - {id: a, title: A, brief: b, tools: [sql]}\n  - {id: b, title: B, brief: b, next: a}\n---\n";

#[test]
fn the_demo_example_validates_against_the_demo_tools() {
    let data = tempfile::tempdir().unwrap();
    let tools: BTreeSet<String> = ba_builtins::demo_tools(data.path())
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(tools.len(), 3, "{tools:?}");
    let found = ba_skills::validate_workflow_text(
        ba_cli::demo::WORKFLOW_MD,
        Path::new(ba_cli::demo::WORKFLOW_PATH),
        Some(&tools),
    );
    assert!(found.is_empty(), "{found:#?}");
    let (def, _) = ba_skills::parse_workflow(
        ba_cli::demo::WORKFLOW_MD,
        Path::new(ba_cli::demo::WORKFLOW_PATH),
    );
    let def = def.unwrap();
    let ids: Vec<_> = def.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["load", "figures", "targets", "shortfall"]);
    let targets = def.node("targets").unwrap();
    let behind = targets
        .check_outputs(&serde_json::json!({"verdict": "behind", "gaps": []}))
        .unwrap();
    assert_eq!(targets.next_after(&behind), Ok(Some("shortfall")));
    let on_track = targets
        .check_outputs(&serde_json::json!({"verdict": "on_track", "gaps": []}))
        .unwrap();
    assert_eq!(targets.next_after(&on_track), Ok(None));
}

#[test]
fn list_json_has_the_demo_example() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(tmp.path(), &["list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value = json(&out);
    assert_eq!(
        value.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["diagnostics", "workflows"]
    );
    insta::assert_json_snapshot!("list_json", value);
}

#[test]
fn list_text_with_roots_and_diagnostics_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("flows");
    write(&root, "small", SMALL);
    write(&root, "looped", LOOPED);
    let out = run(tmp.path(), &["list", "--root", "flows"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("list_text", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("flows/looped/WORKFLOW.md: error[no-way-out]: node `a` has no way out"),
        "{err}"
    );
    // Without the demo, only the folder's good workflow.
    let out = run(
        tmp.path(),
        &["list", "--root", "flows", "--no-demo", "--json"],
    );
    let names: Vec<_> = json(&out)["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["small"]);
}

#[test]
fn show_text_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(tmp.path(), &["show", "monthly-sales-review"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("show_text", stdout(&out));
    let out = run(tmp.path(), &["show", "monthly-sales-review", "--json"]);
    let value = json(&out);
    assert_eq!(value["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(
        value["nodes"][2]["next"],
        serde_json::json!({"branch": {"on": "verdict", "cases": {"behind": "shortfall", "on_track": "end"}}})
    );
    let out = run(tmp.path(), &["show", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: no workflow named `nope` (see `ba-agent workflows list`)\n"
    );
}

#[test]
fn validate_exits_one_on_errors() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("good"), "small", SMALL);
    let out = run(tmp.path(), &["validate", "good"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "0 errors, 0 warnings\n");

    write(&tmp.path().join("bad"), "looped", LOOPED);
    let out = run(tmp.path(), &["validate", "bad", "--tool", "run_python"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout(&out),
        "bad/looped/WORKFLOW.md: error[unknown-tool]: node `a`: tool `sql` is not known (the known tools are `run_python`)\n\
         bad/looped/WORKFLOW.md: error[no-way-out]: node `a` has no way out: every path from it loops among `a`, `b` without reaching `end`\n\
         bad/looped/WORKFLOW.md: error[no-way-out]: node `b` has no way out: every path from it loops among `a`, `b` without reaching `end`\n\
         3 errors, 0 warnings\n"
    );
    // Without --tool, tool names are not checked.
    let out = run(
        tmp.path(),
        &["validate", "bad/looped/WORKFLOW.md", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let rules: Vec<_> = json(&out)["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(rules, ["no-way-out", "no-way-out"]);
    let out = run(tmp.path(), &["validate", "missing"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn configuration_roots_and_plugin_folders() {
    let tmp = tempfile::tempdir().unwrap();
    write(&tmp.path().join("configured"), "small", SMALL);
    let plugin = tmp.path().join("plugin");
    write(
        &plugin.join("workflows"),
        "from-plugin",
        &SMALL.replace("name: small", "name: from-plugin"),
    );
    let config = tmp.path().join("config.yaml");
    std::fs::write(&config, "workflows: [configured]\n").unwrap();
    let out = run(
        tmp.path(),
        &[
            "list",
            "--config",
            "config.yaml",
            "--plugin",
            "plugin",
            "--no-demo",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let names: Vec<_> = json(&out)["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["from-plugin", "small"]);
    let out = run(tmp.path(), &["list", "--root", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: --root nowhere: not a readable folder\n"
    );
}

/// The demo's example run end to end by `ba-agent run --workflow` against a model that
/// decides (it completes each node it is briefed on), with a bad input and an unknown name
/// refused before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_workflow_goes_through_the_demo_example() {
    use ba_testkit::model::{Request, ScriptedModel, Turn};
    use serde_json::json;
    fn at(r: &Request, id: &str) -> bool {
        r.system().contains(&format!(": `{id}` — "))
    }
    let model = ScriptedModel::builder()
        .rule(
            "report",
            |r| r.system().contains("POST_RUN_PROTOCOL") && !r.system().contains("NODE_BRIEF"),
            |_| Turn::text("September 2024 is behind in the West: a lost distributor."),
        )
        .rule(
            "load",
            |r| at(r, "load"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "load", "outputs": {"rows": 310, "issues": "none"}}),
                )
            },
        )
        .rule(
            "figures",
            |r| at(r, "figures"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "figures", "outputs": {
                "summary": [{"region": "West", "amount": 130688}],
                "chart": "bar chart of the month's amount per region, in the report"}}),
                )
            },
        )
        .rule(
            "targets",
            |r| at(r, "targets"),
            |r| {
                let verdict = if r.system().contains("\"month\":\"2024-10\"") {
                    "behind"
                } else {
                    "on_track"
                };
                Turn::call(
                    "complete_node",
                    json!({"node": "targets", "outputs": {
                "verdict": verdict, "gaps": [{"region": "West", "gap": -0.12}]}}),
                )
            },
        )
        .rule(
            "shortfall",
            |r| at(r, "shortfall"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "shortfall", "outputs": {"causes": "a lost distributor"}}),
                )
            },
        )
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ba-agent.yaml");
    std::fs::write(
        &config,
        format!(
            "provider: anthropic\nmodel: claude-workflows\nbase_url: {}\nsub_agents: false\nrun_python: false\n",
            model.anthropic_base_url()
        ),
    )
    .unwrap();
    let home = dir.path().join("home");
    let ba_agent = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ba-agent"))
            .env("ANTHROPIC_API_KEY", "test-key")
            .env_remove("BA_AGENT_CONFIG")
            .env_remove("BA_AGENT_HOME")
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--home")
            .arg(&home)
            .args(args)
            .output()
            .unwrap()
    };
    let out = tokio::task::block_in_place(|| {
        ba_agent(&[
            "--workflow",
            "monthly-sales-review",
            "--input",
            "month=2024-10",
            "--json",
        ])
    });
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    for event in [
        "\"workflow_started\"",
        "\"node_started\"",
        "\"node_completed\"",
        "\"workflow_completed\"",
    ] {
        assert!(text.contains(event), "{event} missing: {text}");
    }
    assert!(text.contains("a lost distributor"), "{text}");
    let fired: Vec<String> = model.fired().into_iter().flatten().collect();
    assert_eq!(fired, ["load", "figures", "targets", "shortfall", "report"]);
    let bad = tokio::task::block_in_place(|| {
        ba_agent(&[
            "--workflow",
            "monthly-sales-review",
            "--input",
            "month=September",
        ])
    });
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("workflow \"monthly-sales-review\": "),
        "{}",
        stderr(&bad)
    );
    let unknown = tokio::task::block_in_place(|| ba_agent(&["--workflow", "nope"]));
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("no workflow named \"nope\" (known: monthly-sales-review"),
        "{}",
        stderr(&unknown)
    );
    let odd = tokio::task::block_in_place(|| {
        ba_agent(&["--workflow", "monthly-sales-review", "--input", "month"])
    });
    assert_eq!(odd.status.code(), Some(2));
    assert!(
        stderr(&odd).contains("--input \"month\": expected KEY=VALUE"),
        "{}",
        stderr(&odd)
    );
    assert_eq!(model.requests().len(), 5, "the refusals reached no model");
}

/// A `ba-agent run --workflow` process killed while its model call of node 2 is under way;
/// `run --resume` in a new process goes on at node 2 with node 1's outputs, from the log alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_inside_node_two_resumes_there() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use ba_testkit::model::{Request, ScriptedModel, Turn};
    use serde_json::json;
    use tokio::io::AsyncBufReadExt as _;

    fn at(r: &Request, id: &str) -> bool {
        r.system().contains(&format!(": `{id}` — "))
    }
    let hold = Arc::new(AtomicBool::new(true));
    let held = Arc::clone(&hold);
    let model = ScriptedModel::builder()
        .rule(
            "report",
            |r| r.system().contains("POST_RUN_PROTOCOL") && !r.system().contains("NODE_BRIEF"),
            |_| Turn::text("September 2024 is on track."),
        )
        .rule(
            "load",
            |r| at(r, "load"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "load", "outputs": {"rows": 184, "issues": "none"}}),
                )
            },
        )
        .rule(
            "held at figures",
            move |r| at(r, "figures") && held.load(Ordering::SeqCst),
            |_| Turn::hold(),
        )
        .rule(
            "figures",
            |r| at(r, "figures"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "figures", "outputs": {
                "summary": [{"region": "West", "amount": 130688}], "chart": "the report's chart"}}),
                )
            },
        )
        .rule(
            "targets",
            |r| at(r, "targets"),
            |_| {
                Turn::call(
                    "complete_node",
                    json!({"node": "targets", "outputs": {
                "verdict": "on_track", "gaps": [{"region": "Central", "gap": -0.075}]}}),
                )
            },
        )
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ba-agent.yaml");
    std::fs::write(
        &config,
        format!(
            "provider: anthropic\nmodel: claude-workflows\nbase_url: {}\nsub_agents: false\nrun_python: false\n",
            model.anthropic_base_url()
        ),
    )
    .unwrap();
    let home = dir.path().join("home");
    let command = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env_remove("BA_AGENT_CONFIG")
            .env_remove("BA_AGENT_HOME")
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--home")
            .arg(&home)
            .args(args)
            .kill_on_drop(true);
        cmd
    };
    let mut child = command(&["--workflow", "monthly-sales-review"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let id = first
        .strip_prefix("Conversation ")
        .unwrap()
        .trim()
        .to_owned();
    tokio::time::timeout(Duration::from_secs(120), model.wait_for_requests(2))
        .await
        .unwrap();
    assert_eq!(model.fired()[1].as_deref(), Some("held at figures"));
    child.start_kill().unwrap();
    let _ = child.wait().await;
    hold.store(false, Ordering::SeqCst);
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        command(&["--resume", &id]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let requests = model.requests();
    assert!(
        at(&requests[2], "figures"),
        "the resumed run asks at node 2 first"
    );
    assert!(
        requests[2]
            .system()
            .contains("- load: {\"issues\":\"none\",\"rows\":184}"),
        "{}",
        requests[2].system()
    );
    let fired: Vec<String> = model.fired().into_iter().flatten().collect();
    assert_eq!(
        fired,
        ["load", "held at figures", "figures", "targets", "report"]
    );
    let inspect = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .env_remove("BA_AGENT_CONFIG")
        .args(["inspect", &id, "--json", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let nodes: Vec<&str> = report["workflow_runs"][0]["completed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n[0].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["load", "figures", "targets"]);
    assert_eq!(
        report["workflow_runs"][0]["active"],
        serde_json::Value::Null
    );
}
