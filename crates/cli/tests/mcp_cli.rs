#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! `ba-agent mcp list|call`, `skills list --plugin` and MCP tools in `run`, against small
//! stdio servers written in Python (as the MCP crate's misbehaving servers are) and the MCP
//! crate's test plugins, laid out as Claude Code's plugin folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

/// A stdlib-only MCP server: `add` (text and structured content), `fail` (`isError`), `die`
/// (exits mid-call after a line on stderr), `bad` (a schema the model APIs refuse, skipped);
/// in mode `broken` it writes to stderr and exits before the handshake.
const SERVER: &str = r#"
import json, os, sys

if len(sys.argv) > 1 and sys.argv[1] == "broken":
    sys.stderr.write("fatal: the API key is missing\n")
    sys.stderr.flush()
    sys.exit(4)

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

TOOLS = [
    {"name": "add", "description": "Adds two numbers.", "inputSchema": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}},
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
    {"name": "die", "description": "Exits mid-call.", "inputSchema": {"type": "object"}},
    {"name": "bad", "description": "An array schema.", "inputSchema": {"type": "array"}},
]

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if name == "add":
            total = args["a"] + args["b"]
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "%d + %d = %d" % (args["a"], args["b"], total)}],
                "structuredContent": {"sum": total}}})
        elif name == "fail":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": "no rows for Q5"}], "isError": True}})
        elif name == "die":
            sys.stderr.write("panic: lost the connection to the ledger\n")
            sys.stderr.flush()
            os._exit(3)
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool " + name}})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}})
"#;

/// Writes the server and a `.mcp.json` naming it twice: `calc` and `broken`.
fn mcp_json(dir: &Path) -> PathBuf {
    let script = dir.join("calc.py");
    std::fs::write(&script, SERVER).unwrap();
    let file = dir.join(".mcp.json");
    let config = json!({"mcpServers": {
        "calc": {"command": "python3", "args": [script]},
        "broken": {"command": "python3", "args": [script, "broken"]},
    }});
    std::fs::write(&file, config.to_string()).unwrap();
    file
}

/// The MCP crate's test plugins.
fn plugin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp/tests/fixtures/plugins")
        .join(name)
}

fn ba_agent(cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.current_dir(cwd)
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_PROVIDER")
        .env_remove("BA_AGENT_HOME")
        // A plugin's HTTP server is reached through a closed loopback port: tests reach no
        // network beyond 127.0.0.1, and the server fails fast.
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("https_proxy", "http://127.0.0.1:9")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

#[test]
fn mcp_list_json_has_the_contract_shape() {
    let dir = tempfile::tempdir().unwrap();
    let file = mcp_json(dir.path());
    let out = ba_agent(dir.path())
        .args(["mcp", "list", "--json", "--mcp-config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = value["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["broken", "calc"]);

    let calc = &servers[1];
    assert_eq!(calc["state"], "ready");
    let tools = calc["tools"].as_array().unwrap();
    let listed: Vec<(&str, &str)> = tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["model_name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("add", "calc__add"),
            ("fail", "calc__fail"),
            ("die", "calc__die")
        ]
    );
    assert_eq!(
        tools[0]["input_schema"],
        json!({"type": "object", "properties": {"a": {"type": "integer"},
            "b": {"type": "integer"}}, "required": ["a", "b"]})
    );
    let skipped = calc["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["name"], "bad");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("object"));

    let broken = &servers[0];
    assert_eq!(broken["state"], "failed");
    assert_eq!(broken["tools"], json!([]));
    assert_eq!(broken["skipped"], json!([]));
    assert!(
        broken["reason"]
            .as_str()
            .unwrap()
            .contains("exited with status 4"),
        "{broken}"
    );
    assert!(
        broken["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("the API key is missing")
    );
}

#[test]
fn mcp_call_exits_0_with_the_result_1_on_is_error_and_2_for_a_failed_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = mcp_json(dir.path());
    let call = |args: &[&str]| {
        ba_agent(dir.path())
            .args(["mcp", "call"])
            .args(args)
            .arg("--mcp-config")
            .arg(&file)
            .output()
            .unwrap()
    };

    let out = call(&["calc", "add", r#"{"a": 2, "b": 3}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("2 + 3 = 5\n"), "{stdout}");
    let structured: Value = serde_json::from_str(stdout.trim_start_matches("2 + 3 = 5\n")).unwrap();
    assert_eq!(structured, json!({"sum": 5}));

    let out = call(&["calc", "fail", "{}"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_eq!(text(&out.stdout), "no rows for Q5\n");

    let out = call(&["broken", "add", r#"{"a": 1, "b": 1}"#]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: MCP server `broken` is unavailable"),
        "{stderr}"
    );
    assert!(stderr.contains("fatal: the API key is missing"), "{stderr}");

    let out = call(&["calc", "die", "{}"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("exited with status 3"), "{stderr}");
    assert!(
        stderr.contains("lost the connection to the ledger"),
        "{stderr}"
    );

    // Bad input: an unknown server, arguments that are not a JSON object.
    let out = call(&["nope", "add", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no MCP server is named `nope` (servers: broken, calc)"));
    let out = call(&["calc", "add", "[1, 2]"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: the arguments must be a JSON object"));
}

#[test]
fn plugins_bring_their_namespaced_skills_and_their_servers() {
    let dir = tempfile::tempdir().unwrap();
    let out = ba_agent(dir.path())
        .args(["skills", "list", "--json", "--plugin"])
        .arg(plugin("sales-ops"))
        .arg("--plugin")
        .arg(plugin("finance-ops"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = value["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    // Both `forecast`s, neither shadowing the other; the nested SKILL.md is no skill.
    assert_eq!(names, ["finance-ops:forecast", "sales-ops:forecast"]);
    assert_eq!(value["diagnostics"], json!([]));

    let out = ba_agent(dir.path())
        .args(["skills", "show", "sales-ops:forecast", "--plugin"])
        .arg(plugin("sales-ops"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(text(&out.stdout).contains("templates/nested/SKILL.md"));

    let out = ba_agent(dir.path())
        .args(["mcp", "list", "--json", "--plugin"])
        .arg(plugin("sales-ops"))
        .arg("--plugin")
        .arg(plugin("finance-ops"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = value["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sales-ops__crm", "sales-ops__warehouse"]);
    assert_eq!(servers[0]["state"], "ready");
    assert_eq!(
        servers[0]["tools"][0]["model_name"],
        "sales-ops__crm__open_deals"
    );
    assert_eq!(servers[1]["transport"], "http");
    assert_eq!(servers[1]["state"], "failed", "no network in tests");
}

#[test]
fn bad_plugin_and_flag_use_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = ba_agent(dir.path())
        .args(["skills", "list", "--plugin", "missing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: "), "{}", show(&out));
    let out = ba_agent(dir.path())
        .args(["tokens", "--plugin"])
        .arg(plugin("sales-ops"))
        .arg("-")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("apply to run, chat, mcp, skills and workflows only"));
}

#[test]
fn a_run_calls_an_mcp_tool_and_inspect_shows_the_servers() {
    let home = tempfile::tempdir().unwrap();
    mcp_json(home.path());
    let replay = home.path().join("recording.json");
    let turns = json!([
        {"expect": {"text": "Add 2 and 3."}, "response": {"message": {"role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "calc__add",
                         "input": {"a": 2, "b": 3}}]}, "stop_reason": "tool_use"}},
        {"expect": {"tool_call_id": "c1"}, "response": {"message": {"role": "assistant",
            "content": "The sum is 5."}, "stop_reason": "end_turn"}}
    ]);
    std::fs::write(&replay, turns.to_string()).unwrap();
    let config = home.path().join("config.yaml");
    // `calc` is required, so the first round waits for it; `extra` is disabled.
    std::fs::write(
        &config,
        format!(
            "provider: replay\nreplay: {}\nhome: {}\nrun_python: false\n\
             mcp_servers:\n  calc:\n    command: python3\n    args: [{}]\n    required: true\n\
             \x20 extra:\n    command: python3\n    args: [{}]\n    enabled: false\n",
            replay.display(),
            home.path().display(),
            home.path().join("calc.py").display(),
            home.path().join("calc.py").display(),
        ),
    )
    .unwrap();
    let out = ba_agent(home.path())
        .env("BA_AGENT_CONFIG", &config)
        .args(["run", "--json", "--task", "Add 2 and 3.", "--plugin"])
        .arg(plugin("finance-ops"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = text(&out.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let result = events
        .iter()
        .find(|e| e["event"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {stdout}"));
    assert_eq!(result["name"], "calc__add");
    assert_eq!(result["success"], true);
    assert!(
        result["observation"]
            .as_str()
            .unwrap()
            .contains("\"sum\": 5"),
        "{result}"
    );
    let conversation = events
        .iter()
        .find_map(|e| e["conversation_id"].as_str())
        .unwrap()
        .to_owned();

    let out = ba_agent(home.path())
        .env("BA_AGENT_CONFIG", &config)
        .args(["inspect", &conversation])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("tool servers: 1 inventories"), "{stdout}");
    assert!(
        stdout.contains("calc (ready: 3 tools), extra (disabled)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("added calc__add, calc__die, calc__fail"),
        "{stdout}"
    );
}

#[test]
fn a_required_server_that_fails_stops_the_run_with_its_stderr() {
    let home = tempfile::tempdir().unwrap();
    mcp_json(home.path());
    let config = home.path().join("config.yaml");
    std::fs::write(&config, format!(
        "provider: replay\nreplay: {}\nhome: {}\nrun_python: false\n\
         mcp_servers:\n  broken:\n    command: python3\n    args: [{}, broken]\n    required: true\n",
        home.path().join("none.json").display(),
        home.path().display(),
        home.path().join("calc.py").display(),
    ))
    .unwrap();
    std::fs::write(home.path().join("none.json"), "[]").unwrap();
    let out = ba_agent(home.path())
        .env("BA_AGENT_CONFIG", &config)
        .args(["run", "--task", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: required MCP server `broken` did not start"),
        "{stderr}"
    );
    assert!(stderr.contains("the API key is missing"), "{stderr}");
}

#[test]
fn the_configuration_names_servers_and_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("calc.py");
    std::fs::write(&script, SERVER).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  calc:\n    command: python3\n    args: [{}]\n    \
             disabled_tools: [die]\nplugins: [{}]\n",
            script.display(),
            plugin("sales-ops").display(),
        ),
    )
    .unwrap();
    let out = ba_agent(dir.path())
        .args(["mcp", "list", "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    let servers = value["servers"].as_array().unwrap();
    let names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calc", "sales-ops__crm", "sales-ops__warehouse"]);
    let calc: Vec<&str> = servers[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["model_name"].as_str().unwrap())
        .collect();
    assert_eq!(calc, ["calc__add", "calc__fail"], "`die` is disabled");
    assert_eq!(servers[1]["state"], "ready");

    // `mcp call` finds a server of a plugin the configuration (`BA_AGENT_CONFIG`) names.
    let out = ba_agent(dir.path())
        .env("BA_AGENT_CONFIG", &config)
        .args(["mcp", "call", "sales-ops__crm", "open_deals", "{}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// A folder for `mcp serve`: a data folder with `sales.csv`, a store, and a configuration
/// with `extra` appended (approvals, say).
struct Served {
    dir: tempfile::TempDir,
    config: PathBuf,
    csv: PathBuf,
}

fn served(extra: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let csv = data.join("sales.csv");
    std::fs::write(&csv, "region,sales\nnorth,10\nsouth,20\n").unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "home: {}\ndata: [{}]\n{extra}",
            dir.path().join("home").display(),
            data.display()
        ),
    )
    .unwrap();
    Served { dir, config, csv }
}

fn serve_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `ba-agent mcp serve` over stdio, started as the MCP crate starts any server.
async fn stdio_client(config: &Path) -> ba_mcp::McpManager {
    let server = ba_mcp::McpServerConfig::stdio(
        env!("CARGO_BIN_EXE_ba-agent"),
        [
            "mcp".to_owned(),
            "serve".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
        ],
    )
    .with_required(true);
    let manager =
        ba_mcp::McpManager::start([("ba".to_owned(), server)], ba_mcp::McpOptions::default()).await;
    assert!(manager.wait_settled(Duration::from_secs(60)).await);
    manager.check_required().unwrap();
    manager
}

async fn call(manager: &ba_mcp::McpManager, tool: &str, args: Value) -> Result<String, String> {
    match manager
        .call_server_tool("ba", tool, args, ba_mcp::CallOptions::default())
        .await
    {
        Ok(result) => Ok(result.text),
        Err(ba_mcp::McpError::ToolFailed { text, .. }) => Err(text),
        Err(other) => panic!("{tool}: {other}"),
    }
}

fn tool_names(manager: &ba_mcp::McpManager) -> Vec<String> {
    let mut names: Vec<String> = manager.tools().into_iter().map(|t| t.raw_name).collect();
    names.sort();
    names
}

/// Code that tries to write outside its folder and says what happened (run_python's own
/// checks already refuse imports such as `socket`; the write is the sandbox's to stop).
const ESCAPE: &str = "import json\nr = {}\ntry:\n    open(OUT, 'w').close()\n    \
     r['write'] = 'ok'\nexcept OSError as e:\n    r['write'] = type(e).__name__\n\
     print(json.dumps(r, sort_keys=True))\n";

/// What `run_python` said the code saw, or `None` (after a skip message, or a failure under
/// CI) where this machine has no sandbox.
fn sandbox_seen(observation: &str) -> Option<Value> {
    if observation.contains("no sandbox") {
        ba_testkit::missing(&format!("run_python has no sandbox here: {observation}"));
        return None;
    }
    let outer: Value =
        serde_json::from_str(observation).unwrap_or_else(|e| panic!("{e}: {observation}"));
    Some(serde_json::from_str(outer["stdout"].as_str().unwrap()).unwrap())
}

#[test]
fn mcp_serve_over_stdio_lists_reads_uploads_and_runs_sandboxed_code() {
    let s = served("");
    let outside = s.dir.path().join("escaped.txt");
    let code = ESCAPE.replace("OUT", &format!("{:?}", outside.display().to_string()));
    serve_runtime().block_on(async {
        let manager = stdio_client(&s.config).await;
        assert_eq!(
            tool_names(&manager),
            ["file_reader", "run_python", "upload_file"]
        );
        let read = call(&manager, "file_reader", json!({"path": s.csv})).await;
        let read = read.unwrap();
        assert!(
            read.contains("\"north\"") && read.contains("\"row_count\": 2"),
            "{read}"
        );
        // A client's file goes into the session's workspace, where the tools find it by name.
        let uploaded = call(
            &manager,
            "upload_file",
            json!({"name": "q3.csv", "content_base64": "bW9udGgsdG90YWwKanVseSw0Mgo="}),
        )
        .await
        .unwrap();
        assert!(
            uploaded.starts_with("stored `q3.csv` as file "),
            "{uploaded}"
        );
        let again = call(&manager, "file_reader", json!({"path": "q3.csv"}))
            .await
            .unwrap();
        assert!(again.contains("\"july\""), "{again}");
        let bad = call(
            &manager,
            "upload_file",
            json!({"name": "x.csv", "content_base64": "%%"}),
        )
        .await
        .unwrap_err();
        assert!(bad.starts_with("`content_base64` is not base64"), "{bad}");
        // A tool's failure is an `isError` result with the observation the model would read.
        let missing = call(&manager, "file_reader", json!({"path": "nowhere.csv"}))
            .await
            .unwrap_err();
        assert!(
            missing.starts_with("Operation failed.") && missing.contains("nowhere.csv"),
            "{missing}"
        );
        let unknown = call(&manager, "task", json!({})).await.unwrap_err();
        assert!(unknown.starts_with("there is no tool `task`"), "{unknown}");
        if ba_testkit::require_tool("python3") {
            let python = call(&manager, "run_python", json!({"code": code})).await;
            let observation = python.unwrap_or_else(|e| panic!("{e}"));
            if let Some(seen) = sandbox_seen(&observation) {
                assert_eq!(seen, json!({"write": "PermissionError"}));
                assert!(!outside.exists());
            }
        }
        manager.shutdown().await;
    });
}

#[test]
fn mcp_serve_refuses_an_approval_a_client_cannot_ask_for_and_says_how_to_allow_it() {
    let s = served("approvals: {tools: {run_python: ask}}\nweb_reader: true\n");
    serve_runtime().block_on(async {
        let manager = stdio_client(&s.config).await;
        // The configuration's tools, as `run` offers them.
        assert_eq!(
            tool_names(&manager),
            ["file_reader", "run_python", "upload_file", "web_reader"]
        );
        let refused = call(&manager, "run_python", json!({"code": "print(1)"}))
            .await
            .unwrap_err();
        assert_eq!(
            refused,
            "run_python needs a person's approval; this client cannot ask (no elicitation): \
             allow it with `approvals: {tools: {run_python: never}}` (or `approvals: {mode: \
             auto}`) in the configuration"
        );
        // A tool that does not ask still runs.
        assert!(
            call(&manager, "file_reader", json!({"path": s.csv}))
                .await
                .is_ok()
        );
        manager.shutdown().await;
    });
}

/// A server process, killed when the test ends, passed or not (a leaked one would hold the
/// test's output open).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `mcp serve --http 127.0.0.1:0 --token TOKEN …`, and the URL it printed.
fn serve_http(config: &Path, token: &str) -> (Killed, String) {
    use std::io::BufRead as _;
    let child = ba_agent(config.parent().unwrap())
        .args([
            "mcp",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--token",
            token,
            "--config",
        ])
        .arg(config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("ba-agent mcp serving on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    (child, url)
}

#[test]
fn mcp_serve_over_http_answers_only_the_token() {
    let s = served("");
    let (child, url) = serve_http(&s.config, "t0ken-for-mcp");
    serve_runtime().block_on(async {
        let http = reqwest::Client::new();
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}});
        for auth in [None, Some("Bearer wrong"), Some("t0ken-for-mcp")] {
            let mut request = http
                .post(&url)
                .header("Accept", "application/json, text/event-stream")
                .json(&initialize);
            if let Some(auth) = auth {
                request = request.header("Authorization", auth);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{auth:?}");
        }
        let server = ba_mcp::McpServerConfig::http(&url)
            .with_header("Authorization", "Bearer t0ken-for-mcp")
            .with_required(true);
        let manager =
            ba_mcp::McpManager::start([("ba".to_owned(), server)], ba_mcp::McpOptions::default())
                .await;
        assert!(manager.wait_settled(Duration::from_secs(60)).await);
        manager.check_required().unwrap();
        assert_eq!(
            tool_names(&manager),
            ["file_reader", "run_python", "upload_file"]
        );
        let read = call(&manager, "file_reader", json!({"path": s.csv}))
            .await
            .unwrap();
        assert!(read.contains("\"south\""), "{read}");
        manager.shutdown().await;
    });
    drop(child);
}

#[test]
fn mcp_serve_refuses_a_wide_bind_without_a_token() {
    let s = served("");
    let out = ba_agent(s.dir.path())
        .args(["mcp", "serve", "--http", "0.0.0.0:0", "--config"])
        .arg(&s.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("(not loopback) needs a token"),
        "{}",
        show(&out)
    );
}

/// The Python `mcp` package (PyPI) in `target/mcp-python`, as `.ci/tools.sh` installs it.
fn python_mcp() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-python/bin/python");
    let imports = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        ba_testkit::missing(&format!(
            "{} cannot import mcp (run `bash .ci/tools.sh`, which installs the Python mcp package)",
            python.display()
        ));
        return None;
    }
    Some(python)
}

/// The script a third-party client runs, and what it saw.
fn python_client(python: &Path, args: &[&str], elicit: Option<&str>) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_serve/client.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).args(args).env_remove("MCP_ELICIT");
    if let Some(answer) = elicit {
        cmd.env("MCP_ELICIT", answer);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    serde_json::from_str(text(&out.stdout).trim()).unwrap_or_else(|e| panic!("{e}: {}", show(&out)))
}

#[test]
fn a_python_mcp_client_drives_mcp_serve_over_stdio_and_http() {
    let Some(python) = python_mcp() else { return };
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let skills = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(skills.path().join("forecast")).unwrap();
    std::fs::write(
        skills.path().join("forecast/SKILL.md"),
        "---\nname: forecast\ndescription: Forecast next quarter's sales.\n---\nFit a trend to \
         the monthly totals.\n",
    )
    .unwrap();
    let s = served(&format!("skills: [{}]\n", skills.path().display()));
    let outside = s.dir.path().join("escaped.txt");
    let code = ESCAPE.replace("OUT", &format!("{:?}", outside.display().to_string()));
    let csv = s.csv.display().to_string();
    let bin = env!("CARGO_BIN_EXE_ba-agent");
    let config = s.config.display().to_string();
    let (child, url) = serve_http(&s.config, "py-t0ken");
    for args in [
        ["stdio", bin, config.as_str(), csv.as_str(), code.as_str()],
        [
            "http",
            url.as_str(),
            "py-t0ken",
            csv.as_str(),
            code.as_str(),
        ],
    ] {
        let seen = python_client(&python, &args, None);
        assert_eq!(seen["server"], "ba-agent", "{seen}");
        assert_eq!(
            seen["tools"],
            json!(["file_reader", "run_python", "upload_file"])
        );
        assert_eq!(seen["file_reader"]["is_error"], false, "{seen}");
        assert!(
            seen["file_reader"]["text"]
                .as_str()
                .unwrap()
                .contains("\"north\""),
            "{seen}"
        );
        // The skills are prompts; the session's own workspace is the user's conversation.
        assert_eq!(
            seen["skills"],
            json!({"forecast": "Fit a trend to the monthly totals.\n"})
        );
        let conversations = seen["conversations"].as_object().unwrap();
        assert!(
            conversations
                .get("MCP session")
                .is_some_and(|c| c["entries"].is_array()),
            "{seen}"
        );
        let observation = seen["run_python"]["text"].as_str().unwrap();
        if let Some(code_saw) = sandbox_seen(observation) {
            assert_eq!(code_saw, json!({"write": "PermissionError"}), "{}", args[0]);
        }
    }
    drop(child);
    assert!(!outside.exists());
    // A client that can ask gets the question; its person's answer decides.
    let ask = served("approvals: {tools: {run_python: ask}}\n");
    let ask_config = ask.config.display().to_string();
    let ask_csv = ask.csv.display().to_string();
    let args = [
        "stdio",
        bin,
        ask_config.as_str(),
        ask_csv.as_str(),
        "print(6 * 7)",
    ];
    let accepted = python_client(&python, &args, Some("accept"));
    assert_eq!(
        accepted["asked"],
        json!(["Run run_python with {\"code\":\"print(6 * 7)\"}?"])
    );
    let observation = accepted["run_python"]["text"].as_str().unwrap();
    if !observation.contains("no sandbox") {
        assert_eq!(accepted["run_python"]["is_error"], false, "{accepted}");
        assert!(observation.contains("\"stdout\": \"42\\n\""), "{accepted}");
    }
    let declined = python_client(&python, &args, Some("decline"));
    assert_eq!(
        declined["run_python"],
        json!({"is_error": true, "text": "a person declined this call of run_python; it was not run"})
    );
}

/// `mcp serve --user USER` over stdio, spoken to in raw JSON-RPC: the answers to `requests`
/// (each `[method, params]`), after the handshake.
fn rpc(config: &Path, user: &str, requests: &[(&str, Value)]) -> Vec<Value> {
    use std::io::{BufRead as _, Write as _};
    let child = ba_agent(config.parent().unwrap())
        .args(["mcp", "serve", "--user", user, "--config"])
        .arg(config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let mut stdin = child.0.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.0.stdout.take().unwrap());
    // A request is answered on the next line; a notification (no id) is not answered.
    let mut send = |message: Value| -> Option<Value> {
        writeln!(stdin, "{message}").unwrap();
        let id = message.get("id")?;
        let mut text = String::new();
        stdout.read_line(&mut text).unwrap();
        let reply: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(&reply["id"], id, "{reply}");
        Some(reply)
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    requests
        .iter()
        .enumerate()
        .filter_map(|(i, (method, params))| {
            send(json!({"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params}))
        })
        .collect()
}

#[test]
fn mcp_serve_lists_and_reads_only_the_users_own_conversations() {
    let s = served("");
    let csv = s.csv.display().to_string();
    // Alice's session makes her workspace at its first call.
    let alice = rpc(
        &s.config,
        "alice",
        &[
            (
                "tools/call",
                json!({"name": "file_reader", "arguments": {"path": csv}}),
            ),
            ("resources/list", json!({})),
        ],
    );
    assert_eq!(alice[0]["result"]["isError"], false, "{}", alice[0]);
    let listed = alice[1]["result"]["resources"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let uri = listed[0]["uri"].as_str().unwrap().to_owned();
    assert!(uri.starts_with("ba-agent://conversations/"), "{uri}");
    let bob = rpc(
        &s.config,
        "bob",
        &[
            ("resources/list", json!({})),
            ("resources/read", json!({"uri": uri})),
        ],
    );
    assert_eq!(bob[0]["result"]["resources"], json!([]), "{}", bob[0]);
    assert_eq!(
        bob[1]["error"]["message"],
        format!("there is no conversation at {uri}"),
        "{}",
        bob[1]
    );
    let again = rpc(
        &s.config,
        "alice",
        &[("resources/read", json!({"uri": uri}))],
    );
    let contents = &again[0]["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "application/json", "{}", again[0]);
    let log: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        log["id"],
        uri.trim_start_matches("ba-agent://conversations/")
    );
    assert!(log["entries"].is_array(), "{log}");
}
