//! The manager against the rmcp test server (`examples/mcp_test_server.rs`) over stdio.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ba_mcp::{
    BinaryKind, CallOptions, McpError, McpManager, McpOptions, ServerState, StartupMode,
    is_valid_model_name,
};
use ba_protocol::ToolErrorKind;
use serde_json::json;

use crate::support::{assert_group_gone, assert_ready, live_members, status, test_server_config};

fn options() -> McpOptions {
    McpOptions::default().with_shutdown_grace(Duration::from_millis(500))
}

async fn start_one(config: ba_mcp::McpServerConfig) -> McpManager {
    McpManager::start([("t", config.with_required(true))], options()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_page_and_calls_tools() {
    let manager = start_one(test_server_config().with_env("MCP_TEST_FILLER", "6")).await;
    assert_ready(&manager, "t");
    manager.check_required().unwrap();
    // 12 tools and 6 fillers, two a page: nine pages.
    let tools = manager.tools();
    assert_eq!(
        tools.len(),
        18,
        "{:?}",
        tools.iter().map(|t| &t.model_name).collect::<Vec<_>>()
    );
    let echo = manager.tool("t__echo").unwrap();
    assert_eq!(echo.raw_name, "echo");
    assert_eq!(echo.server, "t");
    assert_eq!(echo.input_schema["type"], "object");
    assert_eq!(echo.timeout_ms, 120_000);
    assert!(manager.tool("t__filler_6").is_some());

    let r = manager
        .call("t__echo", json!({"text": "hello"}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, "hello");
    assert_eq!(r.observation_data(), json!("hello"));

    // Text and structured content are both kept.
    let r = manager
        .call("t__add", json!({"a": 2, "b": 3}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, "2 + 3 = 5");
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    assert_eq!(
        r.observation_data(),
        json!({"text": "2 + 3 = 5", "structuredContent": {"sum": 5}})
    );

    // Images and blobs come back decoded, never as base64 in the observation.
    let r = manager
        .call("t__image", json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.binaries.len(), 2);
    assert_eq!(r.binaries[0].kind, BinaryKind::Image);
    assert_eq!(r.binaries[0].mime_type, "image/png");
    assert_eq!(r.binaries[0].data, b"\x89PNG\r\n\x1a\n");
    assert_eq!(r.binaries[1].kind, BinaryKind::Blob);
    assert_eq!(r.binaries[1].data, [0, 1, 2, 3]);
    assert_eq!(r.binaries[1].uri.as_deref(), Some("test://blob"));
    let obs = r.observation_data().to_string();
    assert!(
        !obs.contains("iVBORw0KGgo") && !obs.contains("AAECAw"),
        "{obs}"
    );

    // isError: an execution error carrying the tool's text.
    let err = manager
        .call(
            "t__fail",
            json!({"message": "the table is missing"}),
            CallOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::ToolFailed { .. }), "{err:?}");
    assert_eq!(err.kind(), ToolErrorKind::ExecutionError);
    assert_eq!(err.model_message(), "the table is missing");

    // Arguments must be an object; unknown names are refused before any server is asked.
    let err = manager
        .call("t__echo", json!([1]), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidParameters);
    let err = manager
        .call("t__nope", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::UnknownTool { .. }));

    // A server-side refusal of the arguments (-32602) is an invalid-parameters error.
    let err = manager
        .call_server_tool("t", "no_such_tool", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidParameters, "{err}");

    let pid = status(&manager, "t").pid.unwrap();
    manager.shutdown().await;
    assert_eq!(status(&manager, "t").state, ServerState::Stopped);
    assert!(manager.tools().is_empty());
    assert_group_gone(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_resets_the_idle_timeout_and_is_reported_on_timeout() {
    let manager = start_one(test_server_config()).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    // 25 steps of 100 ms last 2.5 s; the idle timeout is 1 s, ten times a step (a loaded
    // machine that is slower still keeps each step inside it).
    let r = manager
        .call(
            "t__progress",
            json!({"steps": 25, "delay_ms": 100}),
            CallOptions::default()
                .with_timeout(Duration::from_millis(1000))
                .with_progress(move |p| sink.lock().unwrap().push(p.clone())),
        )
        .await
        .unwrap();
    assert_eq!(r.text, "done after 25 steps");
    // The call outlived its idle timeout 2.5 times over: progress kept it alive. The last
    // notification may race the answer (rmcp delivers notifications on their own tasks).
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 24, "{seen:?}");
    assert_eq!(seen[8].progress, 9.0);
    assert_eq!(seen[8].total, Some(25.0));
    assert_eq!(seen[8].message.as_deref(), Some("step 9"));

    // Progress then silence: the timeout says how far it got, and the server is told to stop.
    let err = manager
        .call(
            "t__progress_then_hang",
            json!({"steps": 2}),
            CallOptions::default().with_timeout(Duration::from_millis(1000)),
        )
        .await
        .unwrap_err();
    match &err {
        McpError::Timeout {
            progress,
            progress_count,
            after,
            ..
        } => {
            assert_eq!(*progress_count, 2);
            assert_eq!(progress.as_ref().unwrap().progress, 2.0);
            assert_eq!(*after, Duration::from_millis(1000));
        }
        other => panic!("timeout expected, got {other:?}"),
    }
    assert_eq!(err.kind(), ToolErrorKind::Timeout);
    assert!(
        err.to_string().contains("last progress: 2/4 step 2"),
        "{err}"
    );
    let count = manager
        .call(
            "t__cancelled_count",
            json!({"at_least": 1}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(count.text, "1");

    // A cap on the whole call holds even while progress keeps coming.
    let err = manager
        .call(
            "t__progress",
            json!({"steps": 50, "delay_ms": 50}),
            CallOptions::default()
                .with_timeout(Duration::from_secs(5))
                .with_max_total(Duration::from_millis(400)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, McpError::Timeout { after, .. } if after == Duration::from_millis(400)),
        "{err:?}"
    );
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_is_cancelled_on_the_server() {
    let manager = start_one(test_server_config()).await;
    let call = manager.call("t__hang", json!({}), CallOptions::default());
    // The caller gives up (the tool runtime's own timeout does this).
    assert!(
        tokio::time::timeout(Duration::from_millis(500), call)
            .await
            .is_err()
    );
    let count = manager
        .call(
            "t__cancelled_count",
            json!({"at_least": 1, "within_ms": 10000}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(count.text, "1");
    // The server is still in service.
    let r = manager
        .call(
            "t__echo",
            json!({"text": "still here"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.text, "still here");
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_change_reaches_the_catalogue() {
    let manager = start_one(test_server_config()).await;
    assert!(manager.tool("t__fresh").is_none());
    let mut changes = manager.subscribe();
    changes.borrow_and_update();
    manager
        .call(
            "t__add_tool",
            json!({"name": "fresh"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        changes.wait_for(|_| manager.tool("t__fresh").is_some()),
    )
    .await
    .expect("the new tool within 10 s")
    .unwrap();
    let r = manager
        .call("t__fresh", json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, "fresh ran");
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tools_are_skipped_with_reasons_and_names_fit_the_apis() {
    let manager = start_one(
        test_server_config()
            .with_env("MCP_TEST_BAD_TOOLS", "1")
            .with_env("MCP_TEST_LONG_NAMES", "1")
            .with_disabled_tools(["exit"]),
    )
    .await;
    let s = status(&manager, "t");
    let skipped: Vec<String> = s
        .skipped
        .iter()
        .map(|t| format!("{}: {}", t.name, t.reason))
        .collect();
    assert_eq!(
        skipped,
        [
            "exit: in `disabled_tools`",
            "#16: it has no name",
            "stringly: its input schema's top-level type is \"string\"; the model APIs need \"object\"",
            "either: its input schema has `anyOf` at the top level, which the model APIs refuse",
        ]
    );
    for tool in manager.tools() {
        assert!(is_valid_model_name(&tool.model_name), "{}", tool.model_name);
    }
    let long = manager
        .tools()
        .into_iter()
        .find(|t| t.raw_name.len() == 90)
        .unwrap();
    assert_eq!(long.model_name.len(), 64);
    let dotted = manager
        .tools()
        .into_iter()
        .find(|t| t.raw_name == "a.b")
        .unwrap();
    let underscored = manager
        .tools()
        .into_iter()
        .find(|t| t.raw_name == "a_b")
        .unwrap();
    assert_ne!(dotted.model_name, underscored.model_name);
    // Names map back through the table, whatever they look like.
    let r = manager
        .call(&long.model_name, json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, format!("{} ran", "x".repeat(90)));
    let r = manager
        .call(&dotted.model_name, json!({}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.text, "a.b ran");
    // The JSON of `mcp list --json`.
    let inventory = serde_json::to_value(manager.inventory()).unwrap();
    let server = &inventory["servers"][0];
    assert_eq!(server["name"], "t");
    assert_eq!(server["state"], "ready");
    assert_eq!(server["tools"][0]["name"], "echo");
    assert_eq!(server["tools"][0]["model_name"], "t__echo");
    assert_eq!(server["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(
        server["skipped"][0],
        json!({"name": "exit", "reason": "in `disabled_tools`"})
    );
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_get_a_cleared_environment() {
    let key = "BA_MCP_TEST_SECRET_API_KEY";
    assert!(
        std::env::var(key).is_err(),
        "{key} must not be set for this test"
    );
    let manager = start_one(test_server_config().with_env("GIVEN", "yes")).await;
    let call = |name: &'static str| {
        let manager = manager.clone();
        async move {
            manager
                .call("t__env", json!({"name": name}), CallOptions::default())
                .await
                .unwrap()
                .text
        }
    };
    assert_eq!(call("GIVEN").await, "yes");
    assert_eq!(call("CARGO_PKG_NAME").await, "<unset>");
    assert_eq!(call("CARGO_MANIFEST_DIR").await, "<unset>");
    if std::env::var("HOME").is_ok() {
        assert_eq!(call("HOME").await, std::env::var("HOME").unwrap());
    }
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_server_offers_cached_tools_and_starts_on_first_use() {
    let cache = tempfile::tempdir().unwrap();
    let opts = options().with_tool_cache(cache.path());
    let config = test_server_config().with_startup(StartupMode::Lazy);

    // No cache yet: it starts at once and leaves its list behind.
    let first = McpManager::start([("lazy", config.clone())], opts.clone()).await;
    assert!(first.wait_settled(Duration::from_secs(30)).await);
    assert_ready(&first, "lazy");
    let listed = first.tools().len();
    first.shutdown().await;
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);

    // With the cache: nothing runs until a call.
    let second = McpManager::start([("lazy", config)], opts).await;
    let s = status(&second, "lazy");
    assert_eq!(s.state, ServerState::Lazy);
    assert_eq!(s.pid, None);
    assert_eq!(second.tools().len(), listed);
    let r = second
        .call(
            "lazy__echo",
            json!({"text": "woke up"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.text, "woke up");
    assert_ready(&second, "lazy");
    let pid = status(&second, "lazy").pid.unwrap();
    second.shutdown().await;
    assert_group_gone(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_manager_leaves_no_process() {
    let manager = start_one(test_server_config()).await;
    let pid = status(&manager, "t").pid.unwrap();
    assert!(!live_members(pid).is_empty());
    drop(manager);
    assert_group_gone(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_and_invalid_servers_are_reported_not_started() {
    let manager = McpManager::start(
        [
            ("off", test_server_config().with_enabled(false)),
            ("zero", test_server_config().with_tool_timeout_ms(0)),
            ("ok", test_server_config()),
        ],
        options(),
    )
    .await;
    assert!(manager.wait_settled(Duration::from_secs(30)).await);
    assert_eq!(status(&manager, "off").state, ServerState::Disabled);
    let zero = status(&manager, "zero");
    assert_eq!(zero.state, ServerState::Failed);
    assert!(zero.reason.unwrap().contains("`tool_timeout_ms` is 0"));
    assert_ready(&manager, "ok");
    let err = manager
        .call_server_tool("off", "echo", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("disabled"), "{err}");
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_while_idle_is_reported_and_its_tools_leave() {
    let manager = start_one(test_server_config()).await;
    assert_ready(&manager, "t");
    assert!(manager.tools().iter().any(|t| t.server == "t"));
    let pid = status(&manager, "t").pid.unwrap();
    // Killed between calls: nobody is waiting on it.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let start = std::time::Instant::now();
    while status(&manager, "t").state != ServerState::Failed {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still {:?}",
            status(&manager, "t")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = status(&manager, "t");
    assert_eq!(
        s.reason.as_deref(),
        Some("it was killed by signal 9"),
        "{s:?}"
    );
    assert!(manager.tools().iter().all(|t| t.server != "t"));
    // The next call says which server is gone and why, at once.
    let err = manager
        .call("t__echo", json!({"text": "hi"}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, McpError::ServerUnavailable { server, reason, .. }
            if server == "t" && reason.contains("killed by signal 9")),
        "{err:?}"
    );
    assert_group_gone(pid);
    manager.shutdown().await;
}
