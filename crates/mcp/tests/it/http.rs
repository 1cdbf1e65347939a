//! The streamable-HTTP transport against the test server on 127.0.0.1.

use std::process::Stdio;
use std::time::Duration;

use ba_mcp::{CallOptions, McpManager, McpOptions, McpServerConfig, ServerState};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::{assert_ready, status, test_server};

/// Starts the test server in an HTTP mode and returns it with its URL.
async fn http_server(mode: &str) -> (Child, String) {
    http_server_at(mode, "127.0.0.1:0").await
}

/// Starts the test server in an HTTP mode on `addr` and returns it with its URL.
async fn http_server_at(mode: &str, addr: &str) -> (Child, String) {
    let mut child = Command::new(test_server())
        .args([mode, addr])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the test server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server prints its address")
        .expect("read")
        .expect("a line");
    let url = line
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("unexpected line {line}"))
        .to_owned();
    (child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_through_streamable_http() {
    let (mut child, url) = http_server("--http").await;
    let config = McpServerConfig::http(&url)
        .with_header("X-Test", "1")
        .with_required(true);
    let manager = McpManager::start([("web", config)], McpOptions::default()).await;
    assert_ready(&manager, "web");
    assert!(manager.tool("web__echo").is_some());
    let r = manager
        .call(
            "web__add",
            json!({"a": 20, "b": 22}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 42})));
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = counter.clone();
    let r = manager
        .call(
            "web__progress",
            json!({"steps": 3, "delay_ms": 100}),
            CallOptions::default().with_progress(move |_| {
                c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }),
        )
        .await
        .unwrap();
    assert_eq!(r.text, "done after 3 steps");
    // The last notification may race the answer; the others are 100 ms apart.
    assert!(counter.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    let err = manager
        .call(
            "web__fail",
            json!({"message": "no"}),
            CallOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.model_message(), "no");
    manager.shutdown().await;
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_asking_for_oauth_is_reported_as_unsupported() {
    let (mut child, url) = http_server("--http-401").await;
    let manager = McpManager::start(
        [("locked", McpServerConfig::http(&url).with_required(true))],
        McpOptions::default(),
    )
    .await;
    let s = status(&manager, "locked");
    assert_eq!(s.state, ServerState::Failed);
    let reason = s.reason.unwrap();
    assert!(
        reason.contains("needs OAuth, which is not supported"),
        "{reason}"
    );
    let err = manager.check_required().unwrap_err();
    assert!(err.to_string().contains("needs OAuth"), "{err}");
    manager.shutdown().await;
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unset_header_variable_is_named() {
    let mut config = McpServerConfig::http("http://127.0.0.1:9/mcp");
    if let ba_mcp::McpTransport::Http(h) = &mut config.transport {
        h.env_headers
            .insert("Authorization".into(), "BA_MCP_TEST_UNSET_TOKEN".into());
    }
    let manager = McpManager::start([("h", config)], McpOptions::default()).await;
    assert!(manager.wait_settled(Duration::from_secs(30)).await);
    let reason = status(&manager, "h").reason.unwrap();
    assert!(
        reason.contains("`BA_MCP_TEST_UNSET_TOKEN`, which is not set"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_goes_away_and_comes_back() {
    let (mut child, url) = http_server("--http").await;
    let manager = McpManager::start(
        [("web", McpServerConfig::http(&url).with_required(true))],
        McpOptions::default(),
    )
    .await;
    assert_ready(&manager, "web");
    let add = |a: i64| {
        manager.call(
            "web__add",
            json!({"a": a, "b": 1}),
            CallOptions::default().with_timeout(Duration::from_secs(30)),
        )
    };
    assert_eq!(
        add(1).await.unwrap().structured_content,
        Some(json!({"sum": 2}))
    );
    // Gone: a call fails at once, saying so.
    child.kill().await.unwrap();
    child.wait().await.unwrap();
    let err = add(2).await.unwrap_err();
    assert!(
        matches!(&err, ba_mcp::McpError::ServerUnavailable { server, reason, .. }
            if server == "web" && reason.contains("cannot send the request")),
        "{err:?}"
    );
    // Back on the same address: the next calls go through again.
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (mut back, url_back) = http_server_at("--http", &addr).await;
    assert_eq!(url_back, url);
    let r = add(3)
        .await
        .expect("the server came back but the call failed");
    assert_eq!(r.structured_content, Some(json!({"sum": 4})));
    assert_eq!(status(&manager, "web").state, ServerState::Ready);
    manager.shutdown().await;
    back.kill().await.unwrap();
}
