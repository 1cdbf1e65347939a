//! An agent killed with SIGKILL runs no destructor: the watchdog kills its servers' groups.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use ba_mcp::{McpManager, McpOptions};

use crate::support::{assert_group_gone, live_members, py_server, status};

const CHILD_VAR: &str = "BA_MCP_WATCHDOG_CHILD";

/// Run as a child of `a_killed_agent_leaves_no_server`: starts a server that ignores both the
/// end of its stdin and SIGTERM, prints its pid, waits.
#[test]
fn watchdog_child() {
    let Ok(dir) = std::env::var(CHILD_VAR) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let manager = McpManager::start(
            [(
                "t",
                py_server(std::path::Path::new(&dir), "stubborn").with_required(true),
            )],
            McpOptions::default(),
        )
        .await;
        println!("PID {}", status(&manager, "t").pid.unwrap());
        std::future::pending::<()>().await;
    });
}

#[test]
fn a_killed_agent_leaves_no_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "watchdog::watchdog_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let pid: u32 = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // libtest prints `test NAME ... ` on the same line first.
        .find_map(|l| l.split_once("PID ").map(|(_, p)| p.trim().parse().unwrap()))
        .expect("the child prints its server's pid");
    assert!(!live_members(pid).is_empty());
    // SIGKILL: no destructor, no shutdown; the server would outlive its stdin on its own.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_group_gone(pid);
}
