#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_agent::agent::{AgentEvent, Input};
use ba_agent::demo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_prints() {
    let dir = tempfile::tempdir().unwrap();
    let budget = std::env::var("DEMO_BUDGET")
        .ok()
        .and_then(|b| b.parse().ok());
    let d = demo::setup(dir.path(), budget).await.unwrap();
    let events = d
        .agent
        .send(&d.conversation, Input::message(demo::QUESTION))
        .collect_events()
        .await;
    for e in &events {
        if matches!(e, AgentEvent::TextDelta { .. }) {
            continue;
        }
        let mut s = serde_json::to_string(e).unwrap();
        s.truncate(400);
        println!("{s}");
    }
    let r = d.agent.report(&d.conversation).await.unwrap();
    println!("{}", r.render(true));
}
