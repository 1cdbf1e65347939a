//! Scheduled workflows at the page: the list shows each schedule with its next run; Run now
//! starts it, the list follows the run to its status, and the result's link opens the run's
//! conversation with its report.

use reqwest::Method;
use serde_json::json;

use crate::harness::*;
use crate::workflows::{REVIEW, analyst};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_list_runs_now_and_links_the_result() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let model = analyst().await;
    let mut workflows = ba_skills::WorkflowSet::default();
    workflows.add_text(
        REVIEW,
        std::path::Path::new("monthly-sales-review/WORKFLOW.md"),
    );
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        workflows,
        ..Options::default()
    })
    .await;
    let added = server
        .api(
            Method::POST,
            "/api/v1/schedules",
            Some(json!({
                "name": "Monthly sales review",
                "cron": "0 6 1 * *",
                "time_zone": "Europe/Berlin",
                "workflow": "monthly-sales-review",
                "inputs": {"month": "{{previous_month}}"},
            })),
        )
        .await;
    let id = added["id"].as_str().unwrap().to_owned();
    open_new(&c, &server).await;
    click(&c, "#schedules-open").await;
    let row = format!("#schedules-dialog[open] tr[data-schedule={id}]");
    let shown = wait_for(
        &c,
        "the schedule in the list",
        &format!(
            "const r = document.querySelector('{row}'); return r && [r.querySelector('th').textContent, \
             r.querySelector('.schedule-next').textContent, r.querySelector('.schedule-last').textContent]"
        ),
    )
    .await;
    assert_eq!(shown[0], "Monthly sales review");
    assert_ne!(shown[1], "paused");
    // The next run in the page's language and the browser's time zone, named.
    let next = added["next_run"].as_str().unwrap();
    let expected = js(
        &c,
        &format!(
            "return new Intl.DateTimeFormat('en', {{ dateStyle: 'medium', timeStyle: 'long' }}) \
             .format(new Date({next:?}))"
        ),
    )
    .await;
    assert_eq!(shown[1], expected, "the next run is shown: {shown}");
    assert_eq!(shown[2], "never");
    click(&c, &format!("{row} .schedule-run")).await;
    let status = wait_for(
        &c,
        "the run's end in the list",
        &format!(
            "const r = document.querySelector('{row} .schedule-status'); \
             return r && r.textContent !== 'running' && r.textContent"
        ),
    )
    .await;
    assert_eq!(status, "answered");
    screenshot(&c, "schedules.png").await;
    // Pause: the next run reads paused.
    click(&c, &format!("{row} .schedule-pause")).await;
    wait_for(
        &c,
        "the paused schedule",
        &format!("const r = document.querySelector('{row} .schedule-next'); return r && r.textContent === 'paused'"),
    )
    .await;
    // The result's link opens the run's conversation, with the report.
    click(&c, &format!("{row} .schedule-result")).await;
    let title = wait_for(
        &c,
        "the run's conversation",
        "const r = document.querySelector('[data-component=final_report]'); \
         return r && r.textContent.includes('All five regions') && \
           document.querySelector('#conv-title').textContent",
    )
    .await;
    assert!(
        title
            .as_str()
            .unwrap()
            .starts_with("Monthly sales review — "),
        "{title}"
    );
    c.close().await.unwrap();
}
