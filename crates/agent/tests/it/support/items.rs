//! The items table the recall and retrieval tests read: a tool that prints seventy
//! `item N: value V` lines, and the scripted model's rules that read it and answer a question
//! about one item only from what the request's window shows.

use ba_testkit::model::{Builder, Request, Turn};
use ba_tools::{Tool, typed_tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Items {}

/// The value of item `i`: item 35's is the one most tests ask for.
pub fn value(i: usize) -> String {
    if i == 35 {
        "777123.45".to_owned()
    } else {
        format!("{}.{:02}", 10_000 + (i * 7_919) % 80_000, i % 100)
    }
}

/// The `items` tool.
pub fn tool() -> impl Tool {
    typed_tool("items", "The items table.", |_: Items, _| async move {
        let rows: String = (0..70)
            .map(|i| format!("item {i}: value {}\n", value(i)))
            .collect();
        Ok(Value::String(rows))
    })
}

/// The item the last user message asks about (`… item N …`).
pub fn asked(r: &Request) -> Option<usize> {
    let text = r.last_user_text();
    let at = text.find("item ")? + "item ".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// The rules of a model that reads the table when asked to, then answers a question about an
/// item from its window alone: a window without the item's line matches none of them.
pub fn rules(model: Builder) -> Builder {
    model
        .rule(
            "read the table when asked to",
            |r| r.last_user_text().contains("Read the items") && r.tool_results().is_empty(),
            |_| Turn::call("items", json!({})).with_usage(0, 1),
        )
        .rule(
            "say the table was read",
            |r| r.last_result().is_some_and(|t| t.name == "items"),
            |_| Turn::text("I read the items table.").with_usage(0, 1),
        )
        .rule(
            "answer from the window",
            |r| asked(r).is_some_and(|n| r.shows(&format!("item {n}: value "))),
            |r| {
                let n = asked(r).unwrap_or_default();
                let line = format!("item {n}: value ");
                let body = r.body().to_string();
                let at = body.find(&line).unwrap() + line.len();
                let figure: String = body[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                Turn::text(format!("Item {n} is worth {figure}.")).with_usage(0, 1)
            },
        )
}
