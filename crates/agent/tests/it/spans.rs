#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! The spans of a run as a tracing subscriber sees them: a sub-agent's run nests in the call
//! that started it. A test binary of its own: a subscriber set for one thread, with no other
//! test opening spans in the same process meanwhile.

use std::sync::Arc;

use ba_agent::{Input, RunStatus};
use ba_storage::NewConversation;

use crate::support::{delegating_turns, replay_agent};

/// Each span's name and `tool` field, and the names (and tools) of its ancestors, as the
/// span was opened.
#[derive(Clone, Default)]
struct SpanTree(Arc<std::sync::Mutex<Vec<Vec<String>>>>);

/// The `tool` field of a span, kept in its extensions for its descendants to read.
struct ToolField(String);

impl<S> tracing_subscriber::Layer<S> for SpanTree
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Tool(Option<String>);
        impl tracing::field::Visit for Tool {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "tool" {
                    self.0 = Some(value.to_owned());
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "tool" {
                    self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
                }
            }
        }
        let mut tool = Tool(None);
        attrs.record(&mut tool);
        let Some(span) = ctx.span(id) else { return };
        if let Some(tool) = tool.0 {
            span.extensions_mut().insert(ToolField(tool));
        }
        let path = span
            .scope()
            .map(|s| match s.extensions().get::<ToolField>() {
                Some(ToolField(tool)) => format!("{}({tool})", s.name()),
                None => s.name().to_owned(),
            })
            .collect();
        self.0.lock().unwrap().push(path);
    }
}

#[tokio::test]
async fn a_sub_agents_run_is_traced_inside_the_task_call_that_started_it() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let tree = SpanTree::default();
    // While a single subscriber is registered, tracing sizes a callsite's interest by the
    // default of the thread that reaches it first: a test on another thread (no subscriber)
    // reaching `run` first would switch the span off for this one too. A second live
    // subscriber makes every callsite ask all of them.
    let _second = tracing::Dispatch::new(tracing_subscriber::registry());
    let _traced =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(tree.clone()));
    let dir = tempfile::tempdir().unwrap();
    let agent = replay_agent(dir.path(), &delegating_turns(), |b| b.sub_agents(true));
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let summary = agent
        .send(&id, Input::message("Delegate it."))
        .finish()
        .await;
    assert_eq!(summary.status, RunStatus::Answered);
    let paths = tree.0.lock().unwrap().clone();
    let runs: Vec<&Vec<String>> = paths.iter().filter(|p| p[0] == "run").collect();
    assert_eq!(runs.len(), 2, "{paths:#?}");
    assert_eq!(runs[0], &["run"], "the parent's run is a root");
    assert_eq!(
        runs[1],
        &["run", "tool_attempt", "tool_call(task)", "round", "run"],
        "the child's run sits in the task call (its attempt) of the parent's round"
    );
    let child_rounds = paths
        .iter()
        .filter(|p| p.len() == 6 && p[0] == "round")
        .count();
    assert_eq!(
        child_rounds, 1,
        "the child's round is inside its run: {paths:#?}"
    );
}
