//! Plugin folders laid out as Claude Code's (the fixtures under `tests/fixtures/plugins`).

use std::path::PathBuf;

use ba_mcp::{McpTransport, load_plugin_with};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins")
        .join(name)
}

#[test]
fn a_plugin_brings_its_servers_and_skill_folders() {
    let dir = fixture("sales-ops");
    let plugin = load_plugin_with(&dir, |k| (k == "CRM_TOKEN").then(|| "t0k".to_owned())).unwrap();
    assert_eq!(plugin.name, "sales-ops");
    assert_eq!(plugin.version.as_deref(), Some("0.3.0"));
    assert_eq!(
        plugin.servers.keys().collect::<Vec<_>>(),
        ["sales-ops__crm", "sales-ops__warehouse"]
    );
    let McpTransport::Stdio(crm) = &plugin.servers["sales-ops__crm"].transport else {
        panic!("stdio expected")
    };
    assert_eq!(crm.args[0], format!("{}/servers/crm.py", dir.display()));
    let McpTransport::Http(warehouse) = &plugin.servers["sales-ops__warehouse"].transport else {
        panic!("http expected")
    };
    assert_eq!(warehouse.headers["Authorization"], "Bearer t0k");
    assert_eq!(plugin.skill_roots, [dir.join("skills")]);
    assert!(plugin.diagnostics.is_empty(), "{:?}", plugin.diagnostics);

    // A second plugin may ship a skill of the same name; its roots are its own.
    let other = load_plugin_with(&fixture("finance-ops"), |_| None).unwrap();
    assert_eq!(other.name, "finance-ops");
    assert!(other.servers.is_empty());
    assert_eq!(other.skill_roots, [fixture("finance-ops").join("skills")]);
    assert!(other.skill_roots[0].join("forecast/SKILL.md").is_file());
    assert!(plugin.skill_roots[0].join("forecast/SKILL.md").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_server_runs_under_its_namespaced_name() {
    let plugin = load_plugin_with(&fixture("sales-ops"), |_| None).unwrap();
    // Only the stdio server: tests reach no network beyond 127.0.0.1.
    let servers = plugin
        .servers
        .into_iter()
        .filter(|(name, _)| name.ends_with("__crm"));
    let manager = ba_mcp::McpManager::start(servers, ba_mcp::McpOptions::default()).await;
    assert!(
        manager
            .wait_settled(std::time::Duration::from_secs(30))
            .await
    );
    let names: Vec<String> = manager.tools().into_iter().map(|t| t.model_name).collect();
    assert_eq!(names, ["sales-ops__crm__open_deals"]);
    let r = manager
        .call(
            "sales-ops__crm__open_deals",
            serde_json::json!({}),
            ba_mcp::CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.structured_content.unwrap()["deals"][0]["amount"], 42000);
    manager.shutdown().await;
}
