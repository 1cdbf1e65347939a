//! Servers that misbehave, written as small scripts: each ends as a clear error or a bounded
//! result, the others go on, and no process is left.

use std::time::Duration;

use ba_mcp::{CallOptions, McpError, McpManager, McpOptions, ServerState};
use ba_protocol::ToolErrorKind;
use serde_json::json;

use crate::support::{
    assert_group_gone, assert_ready, live_members, py_server, sh_server, status, test_server_config,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_is_clear_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let servers = [
        ("good", test_server_config()),
        (
            "hangs",
            py_server(d, "hang_start").with_startup_timeout_ms(3000),
        ),
        ("noisy", py_server(d, "stdout_logs")),
        ("crashes", py_server(d, "exit_mid_call")),
        ("spawner", py_server(d, "grandchild")),
        ("huge", py_server(d, "huge")),
        ("huge_tail", py_server(d, "huge_tail")),
        ("large", py_server(d, "large")),
        ("malformed", py_server(d, "malformed")),
        ("stubborn", py_server(d, "stubborn")),
        (
            "no_token",
            sh_server(
                d,
                "no_token.sh",
                "echo 'error: FOO_TOKEN is not set' >&2\nexit 2",
            ),
        ),
        (
            "missing",
            ba_mcp::McpServerConfig::stdio("ba-mcp-test-no-such-program", ["x"]),
        ),
    ];
    let options = McpOptions::default().with_shutdown_grace(Duration::from_millis(300));
    let manager = McpManager::start(servers, options).await;
    assert!(manager.wait_settled(Duration::from_secs(60)).await);
    let pids: Vec<u32> = manager.servers().iter().filter_map(|s| s.pid).collect();
    assert_eq!(
        pids.len(),
        11,
        "every stdio server but `missing` was spawned"
    );

    // Start-up failures say why, with the stderr tail, and do not hold the others back.
    let hangs = status(&manager, "hangs");
    assert_eq!(hangs.state, ServerState::Failed);
    assert!(
        hangs.reason.as_deref().unwrap().contains("within 3000 ms"),
        "{hangs:?}"
    );
    assert!(
        hangs
            .stderr_tail
            .as_deref()
            .unwrap()
            .contains("loading a very large model")
    );
    let no_token = status(&manager, "no_token");
    assert_eq!(no_token.state, ServerState::Failed);
    assert!(
        no_token
            .reason
            .as_deref()
            .unwrap()
            .contains("exited with status 2"),
        "{no_token:?}"
    );
    assert!(
        no_token
            .stderr_tail
            .as_deref()
            .unwrap()
            .contains("FOO_TOKEN is not set")
    );
    let missing = status(&manager, "missing");
    assert!(
        missing
            .reason
            .as_deref()
            .unwrap()
            .contains("was not found on PATH"),
        "{missing:?}"
    );
    for ready in [
        "good",
        "malformed",
        "noisy",
        "crashes",
        "spawner",
        "huge",
        "huge_tail",
        "large",
        "stubborn",
    ] {
        assert_ready(&manager, ready);
    }
    let err = manager
        .call_server_tool("hangs", "work", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::ResourceError);
    assert!(err.detail().unwrap().contains("loading a very large model"));

    // Logs on stdout are skipped, the answers still arrive.
    let r = manager
        .call("noisy__work", json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, "worked");

    // A server that dies mid-call: a resource error with its exit status and stderr tail.
    let err = manager
        .call("crashes__work", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::ResourceError, "{err:?}");
    assert!(
        err.to_string()
            .contains("exited with status 3 during a call to `work`"),
        "{err}"
    );
    assert!(
        err.stderr_tail()
            .unwrap()
            .contains("lost the database connection")
    );
    assert_eq!(status(&manager, "crashes").state, ServerState::Failed);
    assert!(
        manager.tool("crashes__work").is_none(),
        "a dead server's tools are withdrawn"
    );

    // 20 MB replies are refused as such, whether the id comes first or last, at once.
    for name in ["huge__work", "huge_tail__work"] {
        let err = manager
            .call(
                name,
                json!({}),
                CallOptions::default().with_timeout(Duration::from_secs(60)),
            )
            .await
            .unwrap_err();
        match &err {
            McpError::ReplyTooLarge { bytes, limit, .. } => {
                assert!(*bytes > 20_000_000, "{err}");
                assert_eq!(*limit, 16 * 1024 * 1024);
            }
            other => panic!("{name}: reply-too-large expected, got {other:?}"),
        }
        assert_eq!(err.kind(), ToolErrorKind::ResourceError);
    }
    assert_ready(&manager, "huge");
    // A 3 MB reply is within the message limit and comes back bounded, saying what was cut.
    let r = manager
        .call("large__work", json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text.len(), 1024 * 1024);
    assert_eq!(r.cuts[0].original_bytes, 3_000_000);

    // An answer that is no tool result is an execution error saying so; the server stays.
    let err = manager
        .call("malformed__work", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::BadReply { .. }), "{err:?}");
    assert!(err.to_string().contains("its keys: rows"), "{err}");
    assert_ready(&manager, "malformed");

    // The grandchild lives in its server's group until shutdown.
    let spawner = status(&manager, "spawner").pid.unwrap();
    assert!(
        live_members(spawner).iter().any(|p| p.comm == "sleep"),
        "{:?}",
        live_members(spawner)
    );

    // The good server was never disturbed.
    let r = manager
        .call(
            "good__echo",
            json!({"text": "fine"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.text, "fine");

    // Shutdown: stdin closed, SIGTERM, SIGKILL for the stubborn one; nothing is left.
    let started = std::time::Instant::now();
    manager.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    for pid in pids {
        assert_group_gone(pid);
    }
}
