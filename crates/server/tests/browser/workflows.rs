//! Run mode at the page: the form offers the server's workflows with their inputs, Start runs
//! one, and the turn shows its steps — done with their outputs, skipped where the branch went
//! the other way — then the report; keyboard and labels as everywhere else.

use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::json;

use crate::harness::*;

pub(crate) const REVIEW: &str =
    include_str!("../../../cli/demo/workflows/monthly-sales-review/WORKFLOW.md");

fn at(r: &Request, id: &str) -> bool {
    r.system().contains(&format!(": `{id}` — "))
}

pub(crate) async fn analyst() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "report",
            |r| r.system().contains("POST_RUN_PROTOCOL") && !r.system().contains("NODE_BRIEF"),
            |_| {
                Turn::text(
                    json!({
                        "task_analysis": "The September review is complete.",
                        "execution_plan": "R1-R3: the workflow's nodes; R4: report",
                        "current_round": 4,
                        "action": {"type": "complete",
                            "content": "## September 2024\n\nAll five regions are on track: 1,043,202 sold."}
                    })
                    .to_string(),
                )
            },
        )
        .rule("load", |r| at(r, "load"), |_| {
            Turn::call("complete_node", json!({"node": "load", "outputs": {"rows": 310, "issues": "none"}}))
        })
        .rule("figures", |r| at(r, "figures"), |_| {
            Turn::call("complete_node", json!({"node": "figures", "outputs": {
                "summary": [{"region": "West", "amount": 130688}],
                "chart": "bar chart of the month's amount per region, in the report"}}))
        })
        .rule("targets", |r| at(r, "targets"), |_| {
            Turn::call("complete_node", json!({"node": "targets", "outputs": {
                "verdict": "on_track", "gaps": [{"region": "West", "gap": 0.02}]}}))
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_started_from_the_page_shows_its_steps() {
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
    open_new(&c, &server).await;
    // Run mode shows the form, with the workflow's input and its default.
    click(&c, "#mode input[value=run]").await;
    let month = wait_for(
        &c,
        "the workflow form",
        "const i = document.querySelector('#workflow-start:not([hidden]) #wf-in-month'); return i && i.value",
    )
    .await;
    assert_eq!(month, "2024-09");
    assert_eq!(
        js(
            &c,
            "return document.querySelector('label[for=wf-name]').textContent"
        )
        .await,
        "Workflow"
    );
    click(&c, "#wf-start").await;
    let steps = wait_for(
        &c,
        "the completed steps and the report",
        "const s = document.querySelector('[data-component=workflow_steps][data-state=complete]'); \
         const r = document.querySelector('[data-component=final_report]'); \
         return s && r && r.textContent.includes('All five regions') && \
           [...s.querySelectorAll('li')].map((li) => li.dataset.node + ':' + li.dataset.state)",
    )
    .await;
    assert_eq!(
        steps,
        json!([
            "load:done",
            "figures:done",
            "targets:done",
            "shortfall:skipped"
        ])
    );
    let outputs = js(
        &c,
        "return document.querySelector('[data-node=targets] .wf-out').textContent",
    )
    .await;
    assert!(
        outputs
            .as_str()
            .unwrap()
            .starts_with("gaps: [{\"gap\":0.02,\"region\":\"West\"}] · verdict: on_track"),
        "{outputs}"
    );
    // The conversation is in run mode, titled after the workflow and its input.
    assert_eq!(
        js(
            &c,
            "return document.querySelector('#conv-title').textContent"
        )
        .await,
        "monthly-sales-review: month=2024-09"
    );
    c.execute(
        "document.querySelector('[data-component=workflow_steps]').scrollIntoView({block: 'start'})",
        vec![],
    )
    .await
    .unwrap();
    screenshot(&c, "workflow-steps.png").await;
    c.close().await.unwrap();
}
