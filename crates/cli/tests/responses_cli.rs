//! `provider: openai-responses` through the CLI, with a model that decides on the Responses
//! wire: `BA_AGENT_PROVIDER` and `BA_AGENT_BASE_URL` pick it, an upload is read by a tool call
//! that goes round by `call_id`, the reasoning comes back on the next request, `inspect` shows
//! the cached tokens, and a follow-up the next day carries the first day's reasoning.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_testkit::model::{ScriptedModel, Turn, Wire};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_inspect_on_the_responses_api() {
    let model = ScriptedModel::builder()
        .rule(
            "answer the follow-up from the history",
            |r| r.last_user_text().contains("the East"),
            |r| {
                let seen = r.shows("Which region leads?") && r.shows("West leads.");
                Turn::text(if seen {
                    "East follows with 7."
                } else {
                    "No history."
                })
            },
        )
        .rule(
            "read the upload",
            |r| r.wire() == Wire::Responses && r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::call("file_reader", json!({"path": r.uploads()[0]}))
                    .with_thinking("The file first.")
            },
        )
        .rule(
            "answer with the rows",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "file_reader" && !t.is_error)
            },
            |r| {
                let west = r.last_result().unwrap().text.contains("West");
                Turn::text(if west { "West leads." } else { "No West row." })
                    .with_usage(700, 12)
                    .with_cached_tokens(512)
            },
        )
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let upload = dir.path().join("regions.csv");
    std::fs::write(&upload, "region,amount\nWest,10\nEast,7\n").unwrap();
    let ba_agent = || {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
        cmd.env_remove("BA_AGENT_CONFIG")
            .env("BA_AGENT_PROVIDER", "openai-responses")
            .env("BA_AGENT_BASE_URL", model.responses_base_url())
            .env("OPENAI_API_KEY", "test-key")
            .env("BA_AGENT_HOME", &home);
        cmd
    };
    let out = ba_agent()
        .arg("run")
        .arg("--upload")
        .arg(&upload)
        .args(["--task", "Which region leads?"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("West leads."), "{stdout}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].model(), "gpt-5", "the provider's default model");
    assert_eq!(requests[1].reasoning_sent_back().len(), 1);
    assert_eq!(requests[1].body()["store"], false);
    let key = requests[0].body()["prompt_cache_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(requests[1].body()["prompt_cache_key"], key.as_str());

    // The conversation id is the cache key; its report has the cached tokens.
    let out = ba_agent()
        .args(["inspect", &key, "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["cache_read_tokens"], 512, "{report}");

    // The next day, a follow-up in the same conversation: the model is sent the whole history,
    // the first day's reasoning included, under the same cache key.
    let out = ba_agent()
        .args(["run", "--conversation", &key, "--task", "And the East?"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("East follows with 7."), "{stdout}");
    let next = model.requests().pop().unwrap();
    assert_eq!(next.body()["prompt_cache_key"], key.as_str());
    assert_eq!(
        next.reasoning_sent_back(),
        requests[1].reasoning_sent_back()
    );
    assert_eq!(next.body()["store"], false);
}
