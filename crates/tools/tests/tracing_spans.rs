//! Every call runs in a `tool_call` span carrying tool, call id, level, retries and outcome,
//! with one `tool_attempt` span per attempt.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ba_protocol::{InvocationContext, ToolCall};
use ba_tools::{NoJitter, ToolError, ToolRegistry, ToolRuntime, ToolsConfig, typed_tool};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

type Spans = Arc<Mutex<Vec<(String, BTreeMap<String, String>)>>>;

/// Records span names and field values; enough to check what the runtime reports.
struct Capture {
    spans: Spans,
    next: AtomicU64,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push((attrs.metadata().name().to_owned(), fields));
        self.next.fetch_add(1, Ordering::SeqCst);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let i = usize::try_from(span.into_u64()).unwrap() - 1;
        values.record(&mut Fields(&mut spans[i].1));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(start_paused = true)]
async fn spans_carry_tool_call_attempt_level_and_outcome() {
    let spans: Spans = Arc::default();
    let _guard = tracing::subscriber::set_default(Capture {
        spans: spans.clone(),
        next: AtomicU64::new(1),
    });
    let tries = Arc::new(AtomicU64::new(0));
    let t = tries.clone();
    let mut reg = ToolRegistry::new();
    reg.register(typed_tool("flaky", "Fails once.", move |_: Value, _| {
        let t = t.clone();
        async move {
            if t.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(ToolError::resource("busy"))
            } else {
                Ok(json!([1, 2]))
            }
        }
    }))
    .unwrap();
    let runtime = ToolRuntime::new(reg, ToolsConfig::default())
        .unwrap()
        .with_jitter(Arc::new(NoJitter));
    let r = runtime
        .run(
            &ToolCall::new("call_7", "flaky", json!({})),
            &InvocationContext::default(),
        )
        .await;
    assert!(r.success);
    let _ = runtime
        .run(
            &ToolCall::new("call_8", "missing", json!({})),
            &InvocationContext::default(),
        )
        .await;

    let spans = spans.lock().unwrap();
    let calls: Vec<_> = spans.iter().filter(|(n, _)| n == "tool_call").collect();
    assert_eq!(calls.len(), 2);
    let first = &calls[0].1;
    assert_eq!(first["tool"], "flaky");
    assert_eq!(first["call_id"], "call_7");
    assert_eq!(first["level"], "standard");
    assert_eq!(first["retries"], "1");
    assert_eq!(first["outcome"], "ok");
    assert_eq!(calls[1].1["outcome"], "invalid_parameters");
    let attempts: Vec<&str> = spans
        .iter()
        .filter(|(n, _)| n == "tool_attempt")
        .map(|(_, f)| f["attempt"].as_str())
        .collect();
    assert_eq!(attempts, ["0", "1"]);
}
