//! A person in the loop on the page: the demo's first `query_database` call waits; the page
//! shows it with its arguments and the decisions, the sidebar says the conversation awaits
//! approval, and "Approve for this conversation", pressed from the keyboard, lets the run go
//! on to its report without asking again. The card shows code as code, an edit as the change
//! it makes, and the person's own change to the arguments before they run.

use std::collections::BTreeMap;
use std::sync::Arc;

use ba_agent::ApprovalSettings;
use ba_protocol::{EntryKind, ToolApproval};
use fantoccini::Locator;
use serde_json::{Value, json};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_is_approved_from_the_page_with_the_keyboard() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let server = Server::start(Options {
        approvals: ApprovalSettings {
            tools: BTreeMap::from([("query_database".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    ask(&c, QUESTION).await;
    wait_for(
        &c,
        "the waiting call",
        "const a = document.querySelector('#approvals [data-component=approval_request]'); \
        return a && !document.querySelector('#approvals').hidden && \
        a.textContent.includes('query_database') && a.querySelector('.arg-code[data-arg=query] .code-view .tk-kw') && \
        document.querySelector('#send').textContent === 'Send'",
    )
    .await;
    wait_for(
        &c,
        "the sidebar's badge",
        &format!(
            "const b = document.querySelector('#conv-list li[data-id=\"{id}\"] .badge'); \
            return b && b.textContent === 'awaiting approval'"
        ),
    )
    .await;
    // Every decision is a labelled button, the reason a labelled field.
    let labels = js(
        &c,
        "return [...document.querySelectorAll('#approvals button')].map(b => b.textContent)",
    )
    .await;
    assert_eq!(
        labels,
        serde_json::json!([
            "Approve",
            "Approve for this conversation",
            "Reject",
            "Edit…"
        ])
    );
    assert!(
        js(
            &c,
            "const r = document.querySelector('#approvals .reason'); \
            return Boolean(r.labels.length || r.getAttribute('aria-label'))"
        )
        .await
        .as_bool()
        .unwrap()
    );
    screenshot(&c, "approval.png").await;
    let button = c
        .find(Locator::Css(
            "#approvals [data-act=approve_for_conversation]",
        ))
        .await
        .unwrap();
    // Reached from the keyboard: focus, then Enter.
    js(
        &c,
        "document.querySelector('#approvals [data-act=approve_for_conversation]').focus(); return true",
    )
    .await;
    assert_eq!(
        js(&c, "return document.activeElement.dataset.act").await,
        "approve_for_conversation"
    );
    button.send_keys("\u{E007}").await.unwrap();
    wait_for(
        &c,
        "the final report after the approval",
        "return document.querySelector('.report') && \
        document.querySelector('.report').textContent.includes('West beat') && \
        document.querySelector('#send').textContent === 'Send' && \
        document.querySelector('#approvals').hidden",
    )
    .await;
    // One pause, one decision: the later calls of the tool were not asked again.
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(id.clone()).unwrap())
        .await
        .unwrap()
        .into_entries();
    let kinds: Vec<EntryKind> = entries
        .iter()
        .filter_map(|e| e.kind())
        .filter(|k| matches!(k, EntryKind::ApprovalRequest | EntryKind::ApprovalDecision))
        .collect();
    assert_eq!(
        kinds,
        [EntryKind::ApprovalRequest, EntryKind::ApprovalDecision]
    );
    let queries = entries
        .iter()
        .filter(|e| e.tool_name.as_deref() == Some("query_database"))
        .count();
    assert!(queries >= 2, "the demo's queries all ran: {queries}");
    c.close().await.unwrap();
}

const REVIEW: &str = "Chart the regions, then fix the report's figure.";

/// Forty lines of Python: long enough to scroll, with a line far wider than the card.
fn long_code() -> String {
    let mut code = String::from(
        "import pandas as pd  # the upload\n\ndef growth(df):\n    \"\"\"Quarter on quarter, by region.\"\"\"\n    return df.pct_change()\n",
    );
    for i in 0..34 {
        code.push_str(&format!(
            "total_{i} = growth(pd.read_csv('sales.csv'))['West'].iloc[{i}] * 100\n"
        ));
    }
    code.push_str(&format!("print('{}')\n", "wide ".repeat(60)));
    code
}

/// The model asks for a Python call, then for an edit of a report (old text → new text); both
/// wait for approval.
fn review_turns() -> Vec<Value> {
    vec![
        call_turn(
            json!({"role": "user", "text": REVIEW}),
            1,
            &[(
                "python_probe",
                "call_code",
                json!({"code": long_code(), "timeout_s": 30}),
            )],
        ),
        call_turn(
            json!({"role": "tool", "tool_call_id": "call_code"}),
            2,
            &[(
                "edit_probe",
                "call_edit",
                json!({"path": "report.md",
                "old_text": "# Sales\nWest grew 12% in Q3.\nEast held.",
                "new_text": "# Sales\nWest grew 14% in Q3.\nEast held."}),
            )],
        ),
        final_turn_after("call_edit", "Charted and fixed."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_shows_code_as_code_and_an_edit_as_its_change() {
    let _one = BROWSER.lock().await;
    let Some(c) = browser().await else { return };
    let ask_for = |t: &str| (t.to_owned(), ToolApproval::Ask);
    let server = Server::start(Options {
        extra_turns: review_turns(),
        extra_tools: vec![
            Arc::new(Probe {
                name: "python_probe",
                latch: None,
            }),
            Arc::new(Probe {
                name: "edit_probe",
                latch: None,
            }),
        ],
        approvals: ApprovalSettings {
            tools: BTreeMap::from([ask_for("python_probe"), ask_for("edit_probe")]),
            ..ApprovalSettings::default()
        },
        ..Options::default()
    })
    .await;
    let id = open_new(&c, &server).await;
    ask(&c, REVIEW).await;
    wait_for(
        &c,
        "the code card",
        "return document.querySelector('#approvals [data-call-id=call_code] .code-view .l')",
    )
    .await;
    // Code as code: one numbered line a line, highlighted, no JSON escapes; long lines wrap,
    // the block scrolls vertically and never sideways.
    let card = js(
        &c,
        "const a = document.querySelector('#approvals [data-call-id=call_code]'); \
        const v = a.querySelector('.arg-code[data-arg=code] .code-view'); const lines = [...v.querySelectorAll('.l')]; \
        return {lines: lines.length, numbers: [lines[0].dataset.n, lines[lines.length - 1].dataset.n], \
          number_shown: getComputedStyle(lines[0], '::before').content, \
          first: lines[0].textContent, kw: [...v.querySelectorAll('.tk-kw')].map((k) => k.textContent).slice(0, 3), \
          strings: v.querySelectorAll('.tk-str').length, comments: [...v.querySelectorAll('.tk-com')].map((k) => k.textContent), \
          escapes: a.textContent.includes('\\\\n'), sideways: v.scrollWidth > v.clientWidth, \
          vertical: v.scrollHeight > v.clientHeight && getComputedStyle(v).overflowY, \
          other: [...a.querySelectorAll('.arg-list dt, .arg-list dd')].map((x) => x.textContent)}",
    )
    .await;
    assert_eq!(card["lines"], 40, "{card}");
    assert_eq!(card["numbers"], json!(["1", "40"]), "{card}");
    assert_eq!(card["number_shown"], "\"1\"", "{card}");
    assert_eq!(card["first"], "import pandas as pd  # the upload", "{card}");
    assert_eq!(card["kw"], json!(["import", "as", "def"]), "{card}");
    assert!(card["strings"].as_u64().unwrap() >= 35, "{card}");
    assert_eq!(card["comments"], json!(["# the upload"]), "{card}");
    assert_eq!(card["escapes"], false, "{card}");
    assert_eq!(card["sideways"], false, "{card}");
    assert_eq!(card["vertical"], "auto", "{card}");
    assert_eq!(card["other"], json!(["timeout_s", "30"]), "{card}");
    screenshot(&c, "approval-code.png").await;

    // The person edits the code before it runs: the box holds real lines, and the card shows
    // what they changed.
    click(&c, "#approvals [data-call-id=call_code] [data-act=edit]").await;
    let text = js(
        &c,
        "return document.querySelector('#approvals .edit-code[data-arg=code]').value",
    )
    .await;
    assert_eq!(text, long_code());
    js(
        &c,
        "const t = document.querySelector('#approvals .edit-code[data-arg=code]'); \
        t.value = t.value.replace('return df.pct_change()', 'return df.pct_change().round(3)'); \
        t.dispatchEvent(new InputEvent('input', {bubbles: true})); return 1",
    )
    .await;
    let change = wait_for(
        &c,
        "the person's change",
        "const d = document.querySelector('#approvals .changes [data-component=diff]'); \
        return d && [...d.querySelectorAll('.d')].map((x) => x.textContent)",
    )
    .await;
    // The change and three lines of context either side; the long unchanged rest folded.
    assert_eq!(
        change,
        json!([
            "  import pandas as pd  # the upload",
            "  ",
            "  def growth(df):",
            "      \"\"\"Quarter on quarter, by region.\"\"\"",
            "-     return df.pct_change()",
            "+     return df.pct_change().round(3)",
            "  total_0 = growth(pd.read_csv('sales.csv'))['West'].iloc[0] * 100",
            "  total_1 = growth(pd.read_csv('sales.csv'))['West'].iloc[1] * 100",
            "  total_2 = growth(pd.read_csv('sales.csv'))['West'].iloc[2] * 100",
            "⋯ 33 unchanged lines"
        ])
    );
    js(
        &c,
        "const b = document.querySelector('#approvals'); b.scrollTop = b.scrollHeight; return 1",
    )
    .await;
    screenshot(&c, "approval-change.png").await;
    // Nothing of the card (its hidden labels included) reaches past the window.
    assert_eq!(
        js(
            &c,
            "const d = document.documentElement; return d.scrollHeight - d.clientHeight"
        )
        .await,
        0
    );
    click(&c, "#approvals [data-call-id=call_code] [data-act=edit]").await;

    // The edit call: old and new text shown as the change.
    let diff = wait_for(
        &c,
        "the edit card",
        "const d = document.querySelector('#approvals [data-call-id=call_edit] .args [data-component=diff]'); \
        return d && [...d.querySelectorAll('.d')].map((x) => [x.dataset.op, x.textContent])",
    )
    .await;
    assert_eq!(
        diff,
        json!([
            [" ", "  # Sales"],
            ["-", "- West grew 12% in Q3."],
            ["+", "+ West grew 14% in Q3."],
            [" ", "  East held."]
        ])
    );
    let rows = js(
        &c,
        "return [...document.querySelectorAll('#approvals [data-call-id=call_edit] .arg-list dt')].map((x) => x.textContent)",
    )
    .await;
    assert_eq!(rows, json!(["path"]));
    screenshot(&c, "approval-edit.png").await;
    click(&c, "#approvals [data-call-id=call_edit] [data-act=approve]").await;
    wait_for(
        &c,
        "the report",
        "return document.querySelector('.report') && document.querySelector('.report').textContent.includes('Charted and fixed')",
    )
    .await;
    // The code that ran is the person's.
    let entries = server
        .agent
        .store()
        .load(&ba_storage::ConversationId::new(id).unwrap())
        .await
        .unwrap()
        .into_entries();
    let ran = entries
        .iter()
        .find(|e| {
            e.tool_call_id.as_deref() == Some("call_code") && e.role == ba_protocol::LogRole::Tool
        })
        .unwrap()
        .text()
        .into_owned();
    assert!(ran.contains("pct_change().round(3)"), "{ran}");
    c.close().await.unwrap();
}
