//! Many tools on the page: a source offers sixty tools, so the request sends the pinned ones
//! and the tool search; the model searches, calls what it found and answers. The context
//! dialog then says how many tools the last call sent, how many wait for a search, and what
//! the search found.

use std::sync::Arc;

use ba_agent::{SourceSnapshot, TOOL_SEARCH_TOOL, ToolSearchSettings, ToolSource};
use ba_testkit::model::{ScriptedModel, Turn};
use ba_tools::Tool;
use serde_json::{Value, json};

use crate::harness::*;

/// Sixty tools of two servers; one of them refunds orders.
struct Shop(Vec<Arc<dyn Tool>>);

impl std::fmt::Debug for Shop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shop({} tools)", self.0.len())
    }
}

impl ToolSource for Shop {
    fn generation(&self) -> u64 {
        1
    }
    fn snapshot(&self) -> SourceSnapshot {
        SourceSnapshot::new(self.0.clone(), Vec::new())
    }
}

fn shop() -> Arc<Shop> {
    let tool = |name: String, description: String| -> Arc<dyn Tool> {
        let ran = name.clone();
        Arc::new(ba_tools::dynamic_tool(
            name,
            description,
            json!({"type": "object", "properties": {"order": {"type": "string"}}}),
            move |_input: Value, _ctx| {
                let ran = ran.clone();
                async move { Ok(json!({ "ran": ran })) }
            },
        ))
    };
    let mut tools = vec![tool(
        "orders__refund_order".into(),
        "Refund an order to the card it was paid with.".into(),
    )];
    for i in 0..59 {
        let server = if i % 2 == 0 { "orders" } else { "crm" };
        tools.push(tool(
            format!("{server}__lookup_{i}"),
            format!("Look up record kind {i} by its identifier."),
        ));
    }
    Arc::new(Shop(tools))
}

/// Searches, calls the first tool found, then answers in the structured form.
async fn searching() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "search for the tool",
            |r| r.offers(TOOL_SEARCH_TOOL) && r.tool_results().is_empty(),
            |_| {
                Turn::call(
                    TOOL_SEARCH_TOOL,
                    json!({"query": "refund an order", "limit": 1}),
                )
            },
        )
        .rule(
            "call what was found",
            |r| r.last_result().is_some_and(|t| t.name == TOOL_SEARCH_TOOL),
            |r| {
                let found: Value =
                    serde_json::from_str(&r.last_result().unwrap().text).unwrap_or_default();
                let name = found["found"][0]["name"].as_str().unwrap_or("none");
                Turn::call(name, json!({"order": "A-1001"}))
            },
        )
        .rule(
            "answer",
            |_| true,
            |_| {
                Turn::text(
                    json!({
                        "task_analysis": "The analyst wants order A-1001 refunded.",
                        "execution_plan": "R1: find the refund tool; R2: refund; R3: confirm",
                        "current_round": 3,
                        "action": {"type": "complete", "content": "Order A-1001 is refunded."}
                    })
                    .to_string(),
                )
            },
        )
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_dialog_says_which_tools_were_sent_deferred_and_found() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let model = searching().await;
    let server = Server::start(Options {
        anthropic_base_url: Some(model.anthropic_base_url()),
        tool_source: Some((
            shop(),
            ToolSearchSettings {
                // The scripted model stands for one searching with our tool.
                native: false,
                ..ToolSearchSettings::default()
            },
        )),
        ..Options::default()
    })
    .await;
    open_new(&c, &server).await;
    ask(&c, "Refund order A-1001, please.").await;
    wait_for(
        &c,
        "the answer",
        "return [...document.querySelectorAll('.report')].some(e => e.textContent.includes('A-1001 is refunded'))",
    )
    .await;
    click(&c, "#meter").await;
    let said = wait_for(
        &c,
        "the context dialog with its tools",
        "const d = document.querySelector('#context-dialog'); \
         const t = d.querySelector('.context-tools'); return d.open && t && t.textContent",
    )
    .await;
    // The last call sent what the model server received: the analyst's tools, the search
    // and the found tool; the other 59 of the source wait.
    let requests = model.requests();
    let last = requests.last().unwrap().tools();
    assert!(last.iter().any(|t| t == "orders__refund_order"), "{last:?}");
    assert!(requests[0].tools().len() < 10, "{:?}", requests[0].tools());
    assert_eq!(
        said,
        json!(format!(
            "Tools: {} sent with the last call, 59 deferred until a search finds them; \
             found by search: orders__refund_order.",
            last.len()
        ))
    );
    click(&c, "#context-dialog button").await;
}
