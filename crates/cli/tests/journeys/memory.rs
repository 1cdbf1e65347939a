//! Memory across conversations, as processes: on one server the analyst states a preference
//! and the model writes it down; the server stops; on the next server a new conversation's
//! system prompt carries the index, the model reads the file and its answer follows the
//! preference. Another person sees none of it, through the model's tool or the API, and the
//! `memory` command lists and shows what the analyst's memory holds.

use std::path::Path;

use ba_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::day::{Day, Person, analyst_with, answer};
use crate::support::Served;
use crate::support::files::serve;

fn memory_model() -> ba_testkit::model::Builder {
    ScriptedModel::builder()
        .rule(
            "remember: write the preference down",
            |r| r.last_user_text().starts_with("[remember]") && r.round() == 0,
            |_| {
                Turn::call(
                    "memory",
                    json!({"command": "create", "path": "/memories/preferences.md",
                           "file_text": "Fiscal year starts in April.\n"}),
                )
            },
        )
        .rule(
            "quarter: read the file the index names",
            |r| {
                r.last_user_text().starts_with("[quarter]")
                    && r.round() == 0
                    && r.system().contains("/memories/preferences.md")
            },
            |_| {
                Turn::call(
                    "memory",
                    json!({"command": "view", "path": "/memories/preferences.md"}),
                )
            },
        )
        .rule(
            "quarter: look in memory when the index is empty",
            |r| r.last_user_text().starts_with("[quarter]") && r.round() == 0,
            |_| Turn::call("memory", json!({"command": "view", "path": "/memories"})),
        )
        .rule(
            "quarter: answer by what memory said",
            |r| r.last_user_text().starts_with("[quarter]") && r.last_result().is_some(),
            |r| {
                let read = r.last_result().unwrap();
                if read.text.contains("starts in April") {
                    Turn::text("Q1 is April to June (fiscal year).")
                } else {
                    Turn::text(format!("Q1 is January to March. Memory: {}", read.text))
                }
            },
        )
}

/// `ba-agent users add NAME --home HOME`: the token printed on the last line (leaked: the
/// server keeps a `'static` one).
fn add_user(home: &Path, name: &str, role: &str) -> &'static str {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .args(["users", "add", name, "--role", role, "--home"])
        .arg(home)
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    Box::leak(
        text.lines()
            .last()
            .unwrap()
            .trim()
            .to_owned()
            .into_boxed_str(),
    )
}

/// `ba-agent memory ARGS… --home HOME`: its stdout.
fn memory_cli(home: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .arg("memory")
        .args(args)
        .arg("--home")
        .arg(home)
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A conversation of the server's person, asked `text`: the answer.
async fn ask(server: &Served, text: &str) -> (String, String) {
    let id = server.create().await;
    let frames = server.question(&id, text, &[]).await;
    (id, answer(&frames))
}

fn as_user(server: &Served, token: &'static str) -> Served {
    Served {
        child: tokio::process::Command::new("true").spawn().unwrap(),
        base: server.base.clone(),
        banner: String::new(),
        http: server.http.clone(),
        token,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_x_restart_x_people() {
    let model = analyst_with(memory_model()).await;
    let day = Day::new(&model, "auth: {mode: users}\n");
    std::fs::create_dir_all(&day.home).unwrap();
    let ann_token = add_user(&day.home, "ann", "analyst");
    let bob_token = add_user(&day.home, "bob", "analyst");

    // Monday: ann states her preference; the model writes it down.
    let server = serve(&day.home, &day.config).await;
    let ann = as_user(&server, ann_token);
    let (_, said) = ask(&ann, "[remember] Our fiscal year starts in April.").await;
    assert!(said.contains("Created /memories/preferences.md"), "{said}");
    server.terminate().await;

    // Tuesday, a new server: a new conversation's prompt carries the index; the model reads
    // the file and follows it.
    let server = serve(&day.home, &day.config).await;
    let ann = as_user(&server, ann_token);
    let before = model.requests().len();
    let (_, said) = ask(&ann, "[quarter] Which months are Q1?").await;
    assert_eq!(said, "Q1 is April to June (fiscal year).");
    let first = &model.requests()[before];
    assert!(
        first
            .system()
            .contains("- /memories/preferences.md: Fiscal year starts in April."),
        "{}",
        first.system()
    );

    // Bob sees none of it: not in his prompt, not through the tool, not through the API.
    let bob = as_user(&server, bob_token);
    let before = model.requests().len();
    let (_, said) = ask(&bob, "[quarter] Which months are Q1?").await;
    assert!(said.starts_with("Q1 is January to March."), "{said}");
    assert!(!said.contains("preferences"), "{said}");
    assert!(!model.requests()[before].system().contains("memory_index"));
    let listed: Value = bob
        .get("/api/v1/memory")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["files"], json!([]), "{listed}");
    let read = bob
        .get("/api/v1/memory/preferences.md")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 404);
    let mine: Value = ann
        .get("/api/v1/memory/preferences.md")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine["text"], "Fiscal year starts in April.\n", "{mine}");
    server.terminate().await;

    // The command line shows the same file, in the contract's shape.
    let listed: Value =
        serde_json::from_str(&memory_cli(&day.home, &["list", "--user", "ann", "--json"])).unwrap();
    let files = listed["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{listed}");
    assert_eq!(files[0]["path"], "/memories/preferences.md");
    assert_eq!(files[0]["size"], 29);
    assert_eq!(files[0]["versions"], 1);
    assert!(files[0]["updated"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        memory_cli(
            &day.home,
            &["show", "/memories/preferences.md", "--user", "ann"]
        ),
        "Fiscal year starts in April.\n"
    );
    let bobs: Value =
        serde_json::from_str(&memory_cli(&day.home, &["list", "--user", "bob", "--json"])).unwrap();
    assert_eq!(bobs, json!({"files": []}));
}
