//! Interop with a server we did not write: the npm `@modelcontextprotocol/server-everything`,
//! run with node. Opt-in: skipped with a message when it is not installed — except in CI
//! (`CI=true`), where a missing server fails the test. `.ci/run` installs it with
//! `npm install --prefix target/mcp-interop @modelcontextprotocol/server-everything@2026.8.31`;
//! `BA_MCP_EVERYTHING` may point at its `dist/index.js` instead.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ba_mcp::{CallOptions, McpManager, McpOptions, McpServerConfig};
use serde_json::json;

use crate::support::{assert_group_gone, assert_ready, status};

fn everything() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("BA_MCP_EVERYTHING") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-interop");
    let script = root.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    script.is_file().then_some(script)
}

fn node_available() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The server's script, or `None` after printing why the test is skipped (failing under CI).
fn require_everything() -> Option<PathBuf> {
    let found = everything().filter(|_| node_available());
    if found.is_none() {
        ba_testkit::missing(
            "node or @modelcontextprotocol/server-everything is missing (npm install --prefix \
             target/mcp-interop @modelcontextprotocol/server-everything@2026.8.31)",
        );
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio() {
    let Some(script) = require_everything() else {
        return;
    };
    let config = McpServerConfig::stdio(
        "node",
        [script.to_string_lossy().into_owned(), "stdio".into()],
    )
    .with_required(true);
    let manager = McpManager::start(
        [("everything", config)],
        McpOptions::default().with_shutdown_grace(Duration::from_millis(500)),
    )
    .await;
    assert_ready(&manager, "everything");
    // Its names have dashes, which the model APIs accept as they are.
    assert!(
        manager.tool("everything__get-sum").is_some(),
        "{:?}",
        manager.tools()
    );
    let r = manager
        .call(
            "everything__echo",
            json!({"message": "hi"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.text.contains("hi"), "{r:?}");
    let r = manager
        .call(
            "everything__get-sum",
            json!({"a": 2, "b": 40}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(r.text.contains("42"), "{r:?}");
    let r = manager
        .call(
            "everything__get-structured-content",
            json!({"location": "Chicago"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        r.structured_content
            .as_ref()
            .is_some_and(|s| s.get("temperature").is_some()),
        "{r:?}"
    );
    let r = manager
        .call(
            "everything__get-tiny-image",
            json!({}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        r.binaries
            .iter()
            .any(|b| b.mime_type == "image/png" && b.bytes > 0),
        "{r:?}"
    );
    let progress = Arc::new(AtomicU32::new(0));
    let seen = progress.clone();
    let r = manager
        .call(
            "everything__trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
            CallOptions::default()
                .with_timeout(Duration::from_secs(20))
                .with_progress(move |_| {
                    seen.fetch_add(1, Ordering::Relaxed);
                }),
        )
        .await
        .unwrap();
    assert!(!r.text.is_empty());
    // The last notification may race the answer (rmcp delivers notifications on their own
    // tasks); the ones before it are 250 ms apart.
    assert!(progress.load(Ordering::Relaxed) >= 3);
    let pid = status(&manager, "everything").pid.unwrap();
    manager.shutdown().await;
    assert_group_gone(pid);
}
