//! Helpers: the test server's path, misbehaving servers as scripts, process checks in /proc.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ba_mcp::{McpManager, McpServerConfig, ServerState, ServerStatus};

/// The `mcp_test_server` example, which `cargo test` builds next to the test binaries.
pub fn test_server() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join("mcp_test_server");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test -p ba-mcp` builds it (the example `mcp_test_server`)",
        path.display()
    );
    path
}

/// The test server over stdio.
pub fn test_server_config() -> McpServerConfig {
    McpServerConfig::stdio(test_server().to_string_lossy(), Vec::<String>::new())
}

/// A stdlib-only Python MCP server whose behaviour `mode` picks (see the script).
pub const PY_SERVER: &str = r#"
import json, os, signal, subprocess, sys, time

MODE = sys.argv[1]

def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

if MODE == "hang_start":
    sys.stderr.write("loading a very large model...\n")
    sys.stderr.flush()
    for _ in sys.stdin:
        pass
    sys.exit(0)
if MODE == "grandchild":
    subprocess.Popen(["sleep", "300"])
if MODE == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

for line in sys.stdin:
    if MODE == "stdout_logs":
        print("INFO: a log line on stdout, which is not JSON-RPC", flush=True)
        print("[debug] {still not a message", flush=True)
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "py-" + MODE, "version": "0.1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "work", "description": "Does the work.", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        if MODE == "exit_mid_call":
            sys.stderr.write("fatal: lost the database connection\n")
            sys.stderr.flush()
            os._exit(3)
        elif MODE == "huge":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "z" * 20_000_000}]}})
        elif MODE == "huge_tail":
            send({"result": {"content": [{"type": "text", "text": "z" * 20_000_000}]}, "jsonrpc": "2.0", "id": mid})
        elif MODE == "malformed":
            send({"jsonrpc": "2.0", "id": mid, "result": {"rows": 2}})
        elif MODE == "large":
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "q" * 3_000_000}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "worked"}]}})
    elif mid is not None and method is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}})

if MODE == "stubborn":
    while True:
        time.sleep(1)
"#;

/// Writes the Python server into `dir` and returns a config running it in `mode`.
pub fn py_server(dir: &Path, mode: &str) -> McpServerConfig {
    let script = dir.join("server.py");
    if !script.exists() {
        std::fs::write(&script, PY_SERVER).expect("write server.py");
    }
    McpServerConfig::stdio(
        "python3",
        [script.to_string_lossy().into_owned(), mode.to_owned()],
    )
}

/// A shell script server in `dir`.
pub fn sh_server(dir: &Path, name: &str, body: &str) -> McpServerConfig {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    McpServerConfig::stdio(path.to_string_lossy(), Vec::<String>::new())
}

/// A process as /proc shows it (all fields appear in failure messages).
#[derive(Debug, Clone)]
#[allow(dead_code, reason = "read through Debug in failure messages")]
pub struct Proc {
    pub pid: u32,
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub comm: String,
}

/// Every process, from /proc/*/stat.
pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if rest.len() < 3 {
            continue;
        }
        out.push(Proc {
            pid,
            state: rest[0].chars().next().unwrap_or('?'),
            ppid: rest[1].parse().unwrap_or(0),
            pgrp: rest[2].parse().unwrap_or(0),
            comm,
        });
    }
    out
}

/// Live (not zombie) members of a process group.
pub fn live_members(pgid: u32) -> Vec<Proc> {
    processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.state != 'Z')
        .collect()
}

/// Waits (bounded) until the group has no live member and this process has no unreaped child
/// in it; panics with what is left otherwise.
pub fn assert_group_gone(pgid: u32) {
    let me = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let left: Vec<Proc> = processes()
            .into_iter()
            .filter(|p| p.pgrp == pgid && (p.state != 'Z' || p.ppid == me))
            .collect();
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            panic!("process group {pgid} still has {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status of one server.
pub fn status(manager: &McpManager, name: &str) -> ServerStatus {
    manager
        .servers()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

/// Asserts a server is ready, printing its status otherwise.
pub fn assert_ready(manager: &McpManager, name: &str) {
    let s = status(manager, name);
    assert_eq!(s.state, ServerState::Ready, "{s:#?}");
}
