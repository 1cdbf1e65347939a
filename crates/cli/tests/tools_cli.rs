//! `ba-agent tools list|call` on the demo data: what the model would see, and clear errors.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use ba_testkit::{MockServer, Reply};

fn tools(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .current_dir(dir)
        .env_remove("BA_AGENT_CONFIG")
        .envs(envs.iter().copied())
        .arg("tools")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A folder with the demo data and a configuration over it (plus `extra` lines).
fn setup(extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ba_builtins::demo_data::generate(&data).unwrap();
    std::fs::write(
        dir.path().join("c.yaml"),
        format!(
            "home: {home}\ndata: [{data}]\ndatabase: {db}\nrun_python: false\n{extra}",
            home = dir.path().join("home").display(),
            data = data.display(),
            db = data.join("sales.db").display(),
        ),
    )
    .unwrap();
    dir
}

#[test]
fn list_shows_the_configured_tools() {
    let dir = setup("");
    let out = tools(dir.path(), &["list", "--config", "c.yaml", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let specs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = specs
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["file_reader", "query_database"]);
    assert!(specs[1]["input_schema"]["properties"]["schema"].is_object());
    let out = tools(dir.path(), &["list", "--config", "c.yaml"], &[]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("file_reader\n  Read a file of the conversation"),
        "{shown}"
    );
    assert!(
        shown.contains("parameters: delimiter, encoding, errors"),
        "{shown}"
    );
}

#[test]
fn call_prints_the_observation_at_the_level_asked() {
    let dir = setup("");
    let out = tools(
        dir.path(),
        &[
            "call",
            "file_reader",
            r#"{"path": "sales.xlsx", "sheet": "targets", "nrows": 3}"#,
            "--level",
            "brief",
            "--config",
            "c.yaml",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.starts_with(
            "Success: sales.xlsx (xlsx), sheet `targets` (1 of 2: targets, sales), range A1:D4 \
             (header row 1): 3 data rows shown, more rows follow"
        ),
        "{shown}"
    );
    let out = tools(
        dir.path(),
        &[
            "call",
            "file_reader",
            r#"{"path": "sales_gbk.csv", "encoding": "gbk"}"#,
            "--config",
            "c.yaml",
        ],
        &[],
    );
    let shown = text(&out.stdout);
    assert!(shown.contains("\"目标金额\""), "{shown}");
    let out = tools(
        dir.path(),
        &[
            "call",
            "query_database",
            r#"{"query": "SELECT COUNT(*) AS n FROM regions"}"#,
            "--config",
            "c.yaml",
        ],
        &[],
    );
    assert!(
        text(&out.stdout).contains("\"row_count\": 1"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn bad_input_is_an_error_with_exit_2() {
    let dir = setup("");
    let cases: [(&[&str], &str); 5] = [
        (
            &["call", "file_reader", "{bad"],
            "error: JSON: the arguments are not valid JSON",
        ),
        (&["call", "file_reader", "[1]"], "must be a JSON object"),
        (
            &["call", "nope", "{}"],
            "unknown tool `nope`; this configuration offers: file_reader, query_database",
        ),
        (
            &[
                "call",
                "file_reader",
                r#"{"path": "sales.csv"}"#,
                "--level",
                "loud",
            ],
            "--level: `loud`",
        ),
        (
            &[
                "call",
                "query_database",
                r#"{"query": "DELETE FROM sales"}"#,
            ],
            "the database is read-only",
        ),
    ];
    for (args, expected) in cases {
        let mut all = args.to_vec();
        all.extend(["--config", "c.yaml"]);
        let out = tools(dir.path(), &all, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // GBK is read as GBK without being named; text in an encoding that is neither UTF-8 nor
    // Chinese is refused, naming what was tried and how to ask for another.
    let out = tools(
        dir.path(),
        &[
            "call",
            "file_reader",
            r#"{"path": "sales_gbk.csv"}"#,
            "--config",
            "c.yaml",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("目标金额"),
        "{}",
        text(&out.stdout)
    );
    // `Renée,Zürich` in windows-1252.
    std::fs::write(
        dir.path().join("data/latin.csv"),
        b"name,city\nRen\xe9e,Z\xfcrich\nBeno\xeet,Dijon\n",
    )
    .unwrap();
    let out = tools(
        dir.path(),
        &[
            "call",
            "file_reader",
            r#"{"path": "latin.csv"}"#,
            "--config",
            "c.yaml",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("none of those tried (utf-8, gbk)"),
        "{err}"
    );
}

#[tokio::test]
async fn web_search_runs_on_the_configured_backend() {
    let searx = MockServer::start(vec![Reply::json(
        200,
        r#"{"results": [{"title": "West Q3", "url": "https://a.example/", "content": "up 42%"}]}"#,
    )])
    .await;
    let dir = setup(&format!(
        "web_search: {{backend: searxng, url: \"{}\"}}\n",
        searx.base_url
    ));
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        tools(
            &path,
            &[
                "call",
                "web_search",
                r#"{"query": "west q3"}"#,
                "--config",
                "c.yaml",
            ],
            &[],
        )
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"url\": \"https://a.example/\""));
    assert_eq!(searx.received()[0].path, "/search?q=west+q3&format=json");

    let brave = MockServer::start(vec![Reply::json(401, "{}")]).await;
    let dir = setup(&format!(
        "web_search: {{backend: brave, url: \"{}/res/v1/web/search\", api_key_env: TEST_BRAVE_KEY}}\n",
        brave.base_url
    ));
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        tools(
            &path,
            &[
                "call",
                "web_search",
                r#"{"query": "x"}"#,
                "--config",
                "c.yaml",
            ],
            &[("TEST_BRAVE_KEY", "secret-key-123")],
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("API key was refused") && !err.contains("secret-key-123"),
        "{err}"
    );
    assert_eq!(
        brave.received()[0].header("x-subscription-token"),
        Some("secret-key-123")
    );
    // Without the key in the environment, the configuration says which variable is missing.
    let out = tools(dir.path(), &["list", "--config", "c.yaml"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("$TEST_BRAVE_KEY, which is not set"));
}
