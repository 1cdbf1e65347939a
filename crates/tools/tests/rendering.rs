//! The same raw data rendered at brief, standard and full (inline and spilled).

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ba_protocol::{InvocationContext, OutputLevel, ToolCall};
use ba_tools::{DataSink, FormatBounds, ToolRegistry, ToolRuntime, ToolsConfig, ToolsError};
use ba_tools::{dynamic_tool, typed_tool};
use ba_tools::{format_observation, summarize};
use serde_json::{Value, json};

fn customers() -> Value {
    let names = [
        "Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Gus", "Hana", "Ivo", "Jun",
    ];
    Value::Array(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let region = if i % 2 == 0 { "EMEA" } else { "APAC" };
                json!({"id": i + 1, "name": n, "revenue": (i + 1) * 1250, "region": region})
            })
            .collect(),
    )
}

#[test]
fn list_at_each_level() {
    let data = customers();
    let b = FormatBounds::default();
    insta::assert_snapshot!(
        "list_brief",
        format_observation(&data, OutputLevel::Brief, &b)
    );
    insta::assert_snapshot!(
        "list_standard",
        format_observation(&data, OutputLevel::Standard, &b)
    );
    insta::assert_snapshot!(
        "list_full_inline",
        format_observation(&data, OutputLevel::Full, &b)
    );
    insta::assert_snapshot!("list_summary", summarize(&data));
}

#[test]
fn object_and_text_at_each_level() {
    let status = json!({"success": true, "message": "Saved report q3.xlsx", "rows": 42});
    let b = FormatBounds::default();
    insta::assert_snapshot!(
        "status_brief",
        format_observation(&status, OutputLevel::Brief, &b)
    );
    insta::assert_snapshot!(
        "status_standard",
        format_observation(&status, OutputLevel::Standard, &b)
    );
    let log: String = (1..=300)
        .map(|i| format!("2024-05-01 12:00:{:02} step {i} ok\n", i % 60))
        .collect();
    let text = Value::String(log);
    insta::assert_snapshot!(
        "text_brief",
        format_observation(&text, OutputLevel::Brief, &b)
    );
    let small = FormatBounds {
        standard_max_lines: 12,
        ..b
    };
    insta::assert_snapshot!(
        "text_standard_truncated",
        format_observation(&text, OutputLevel::Standard, &small)
    );
}

#[derive(Debug, Default)]
struct Sink(Mutex<Vec<String>>);

#[async_trait]
impl DataSink for Sink {
    async fn put(&self, name: &str, _bytes: &[u8]) -> Result<String, ToolsError> {
        self.0.lock().unwrap().push(name.to_owned());
        Ok(format!("/srv/ba/{name}"))
    }
}

#[tokio::test]
async fn full_level_spills_with_preview_size_summary_and_path() {
    let mut reg = ToolRegistry::new();
    reg.register(dynamic_tool(
        "customers",
        "List customers.",
        json!({"type": "object"}),
        |_, _| async { Ok(customers()) },
    ))
    .unwrap();
    reg.register(typed_tool("noop", "Nothing.", |_: Value, _| async {
        Ok(())
    }))
    .unwrap();
    let runtime = ToolRuntime::new(reg, ToolsConfig::default())
        .unwrap()
        .with_sink(Arc::new(Sink::default()));
    let mut call = ToolCall::new("call_123", "customers", json!({}));
    call.output_level = Some(OutputLevel::Full);
    let r = runtime.run(&call, &InvocationContext::default()).await;
    assert!(r.success);
    assert_eq!(r.output_level, OutputLevel::Full);
    insta::assert_snapshot!("list_full_spilled", r.observation);
    insta::assert_json_snapshot!("list_full_spilled_result", r, { ".duration_ms" => "[duration]" });
}
