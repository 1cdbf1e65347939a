//! The operator's hooks: what the README promises of them, and a cancel while one runs.

use serde_json::json;

use crate::day::{Day, Person, analyst, answer, finished};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_run_with_a_cleared_environment() {
    let model = analyst().await;
    let probe = tempfile::tempdir().unwrap();
    let env = probe.path().join("env.txt");
    let day = Day::new(
        &model,
        &format!(
            "hooks:\n  user_prompt_submit:\n    - command: env > {}\n",
            env.display()
        ),
    );
    // The server's own environment holds a key and a secret of the operator's.
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("OPERATOR_SECRET", "s3cr3t")
        .env("LANG", "C.UTF-8")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME");
    let config = day.config.to_str().unwrap().to_owned();
    let server = crate::support::Served::start_with(
        cmd,
        crate::support::files::TOKEN,
        &day.home,
        &["--config", &config],
    )
    .await;
    let id = server.create().await;
    let frames = server.question(&id, "[q1] West?", &[]).await;
    assert_eq!(finished(&frames), "answered", "{frames:#?}");
    let seen = std::fs::read_to_string(&env).unwrap();
    let names: Vec<&str> = seen
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(
        !seen.contains("s3cr3t"),
        "the hook saw the operator's secret: {seen}"
    );
    assert!(
        !seen.contains("test-key"),
        "the hook saw the API key: {seen}"
    );
    assert!(names.contains(&"PATH"), "{names:?}");
    for name in &names {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "TMPDIR",
                "USER",
                "TZ",
                "BA_AGENT_HOOK_EVENT",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD"
            ]
            .contains(name),
            "the hook's environment holds {name}: {names:?}"
        );
    }
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_sends_the_model_back_at_most_three_times() {
    let model = analyst().await;
    let probe = tempfile::tempdir().unwrap();
    let count = probe.path().join("count");
    let day = Day::new(
        &model,
        &format!(
            "hooks:\n  stop:\n    - command: echo x >> {}; echo 'Check the figures again.' >&2; exit 2\n",
            count.display()
        ),
    );
    let server = day.serve().await;
    let id = server.create().await;
    let before = model.requests().len();
    let frames = server.question(&id, "[q1] West?", &[]).await;
    // The hook blocks every stop; the model goes back three times, then the run ends answered.
    assert_eq!(finished(&frames), "answered", "{frames:#?}");
    assert_eq!(
        model.requests().len() - before,
        4,
        "one answer and three more"
    );
    let runs = std::fs::read_to_string(&count).unwrap().lines().count();
    assert!(
        runs >= 3,
        "the hook ran on each stop it could block: {runs}"
    );
    let last = model.requests().pop().unwrap();
    assert!(
        last.shows("Check the figures again."),
        "the model read the hook's reason"
    );
    assert!(answer(&frames).starts_with("ANSWER"), "{frames:#?}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_x_hooks() {
    let model = analyst().await;
    let probe = tempfile::tempdir().unwrap();
    let pid = probe.path().join("pid");
    let day = Day::new(
        &model,
        &format!(
            "hooks:\n  user_prompt_submit:\n    - command: echo $$ > {}; while true; do sleep 1; done\n      timeout_secs: 600\n",
            pid.display()
        ),
    );
    let server = day.serve().await;
    let id = server.create().await;
    let run = server
        .start(
            &id,
            json!({"request_id": "r", "input": {"type": "message", "text": "[q1] West?"}}),
        )
        .await;
    // The hook runs (it wrote its pid); the person stops the run.
    let hook = tokio::time::timeout(crate::support::LIMIT, async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&pid)
                && let Ok(n) = text.trim().parse::<i32>()
            {
                return n;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let (status, body) = server
        .send(
            &format!("/api/v1/conversations/{id}/runs/{run}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let view = server.settled(&id).await;
    assert_ne!(view["status"], "running", "{view}");
    // The hook's process went with the run.
    tokio::time::timeout(crate::support::LIMIT, async {
        while std::path::Path::new(&format!("/proc/{hook}")).exists()
            && !std::fs::read_to_string(format!("/proc/{hook}/stat"))
                .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the hook still runs after the cancel");
    server.terminate().await;
}
