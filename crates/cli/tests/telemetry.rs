#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! OTLP export (feature `otlp`) against a collector stand-in on 127.0.0.1: a small axum server
//! that takes `POST /v1/traces` and `/v1/metrics`, decodes the protobuf bodies and keeps them.
//! The binary exports to it; once the binary has exited (which flushes), what arrived is
//! checked: the spans of a run, its rounds, model calls and tool calls with their nesting and
//! attributes, the tools' metrics, the sampling ratio, and errors for bad settings.
#![cfg(feature = "otlp")]

use std::collections::{BTreeSet, HashMap};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

use crate::support::{LIMIT, Served, until_finished};

mod support;

const TOKEN: &str = "otlp-test-token";

/// What the stand-in received.
#[derive(Clone, Default)]
struct Received {
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
}

impl Received {
    fn spans(&self) -> Vec<Span> {
        self.traces
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }

    fn service_names(&self) -> BTreeSet<String> {
        let traces = self.traces.lock().unwrap();
        let metrics = self.metrics.lock().unwrap();
        let from_traces = traces
            .iter()
            .flat_map(|r| &r.resource_spans)
            .filter_map(|r| r.resource.as_ref());
        let from_metrics = metrics
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .filter_map(|r| r.resource.as_ref());
        from_traces
            .chain(from_metrics)
            .filter_map(|r| attr(&r.attributes, "service.name"))
            .collect()
    }

    /// Each metric's name with the `tool` attributes of its data points.
    fn metric_tools(&self) -> HashMap<String, BTreeSet<String>> {
        let mut out: HashMap<String, BTreeSet<String>> = HashMap::new();
        for m in self
            .metrics
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
        {
            let attrs: Vec<&Vec<KeyValue>> = match &m.data {
                Some(metric::Data::Sum(s)) => s.data_points.iter().map(|p| &p.attributes).collect(),
                Some(metric::Data::Histogram(h)) => {
                    h.data_points.iter().map(|p| &p.attributes).collect()
                }
                _ => Vec::new(),
            };
            let tools = out.entry(m.name.clone()).or_default();
            tools.extend(attrs.into_iter().filter_map(|a| attr(a, "tool")));
        }
        out
    }
}

/// An attribute's value as text.
fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    let value = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value {
        AnyValue {
            value: Some(any_value::Value::StringValue(s)),
        } => Some(s.clone()),
        AnyValue {
            value: Some(any_value::Value::IntValue(i)),
        } => Some(i.to_string()),
        AnyValue {
            value: Some(any_value::Value::BoolValue(b)),
        } => Some(b.to_string()),
        AnyValue {
            value: Some(any_value::Value::DoubleValue(d)),
        } => Some(d.to_string()),
        _ => None,
    }
}

fn protobuf_ok() -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Vec::<u8>::new(),
    )
}

async fn take_traces(State(r): State<Received>, body: Bytes) -> axum::response::Response {
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            r.traces.lock().unwrap().push(req);
            protobuf_ok().into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn take_metrics(State(r): State<Received>, body: Bytes) -> axum::response::Response {
    match ExportMetricsServiceRequest::decode(body) {
        Ok(req) => {
            r.metrics.lock().unwrap().push(req);
            protobuf_ok().into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

/// The stand-in on 127.0.0.1:0: its base URL and what it receives (it stops with the test's
/// runtime).
async fn collector() -> (String, Received) {
    let received = Received::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(take_traces))
        .route("/v1/metrics", post(take_metrics))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), received)
}

/// The binary with no telemetry settings of the test's own environment.
fn ba_agent() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(&name);
        }
    }
    cmd.env_remove("BA_AGENT_CONFIG").kill_on_drop(true);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_the_spans_of_a_run_and_the_tool_metrics() {
    let (endpoint, received) = collector().await;
    let home = tempfile::tempdir().unwrap();
    let mut cmd = ba_agent();
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "ba-agent-otlp-test");
    let served = Served::start(cmd, TOKEN, home.path()).await;
    let id = served.create().await;
    let stream = served
        .get(&format!("/api/v1/conversations/{id}/events"))
        .send()
        .await
        .unwrap();
    let run = served.ask(&id, "otlp-1", ba_cli::demo::QUESTION).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    until_finished(stream).await;

    // SIGTERM: the graceful shutdown, then the last export, then exit.
    served.terminate().await;

    let spans = received.spans();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let runs = named("run");
    assert_eq!(runs.len(), 1, "one run: {:?}", names(&spans));
    let run = runs[0];
    assert!(run.parent_span_id.is_empty(), "a run is a root span");
    assert_eq!(
        attr(&run.attributes, "conversation_id").as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        attr(&run.attributes, "run_id").as_deref(),
        Some(run_id.as_str())
    );
    assert_eq!(attr(&run.attributes, "input").as_deref(), Some("message"));
    assert!(attr(&run.attributes, "mode").is_some());
    assert_eq!(attr(&run.attributes, "status").as_deref(), Some("answered"));

    let rounds = named("round");
    assert_eq!(
        attr(&run.attributes, "rounds"),
        Some(rounds.len().to_string()),
        "one round span a round"
    );
    assert!(rounds.len() >= 4, "{}", rounds.len());
    let round_ids: BTreeSet<&[u8]> = rounds.iter().map(|s| s.span_id.as_slice()).collect();
    for r in &rounds {
        assert_eq!(r.parent_span_id, run.span_id, "a round is the run's child");
        assert!(attr(&r.attributes, "round").is_some());
    }
    let calls = named("model_call");
    assert_eq!(calls.len(), rounds.len(), "one model call a round");
    for c in &calls {
        assert!(round_ids.contains(c.parent_span_id.as_slice()));
        assert_eq!(attr(&c.attributes, "provider").as_deref(), Some("replay"));
        assert_eq!(attr(&c.attributes, "outcome").as_deref(), Some("answered"));
        assert!(attr(&c.attributes, "model").is_some());
        assert!(attr(&c.attributes, "input_tokens").is_some());
        assert!(attr(&c.attributes, "output_tokens").is_some());
    }
    let tools = named("tool_call");
    let mut tool_names = BTreeSet::new();
    for t in &tools {
        assert!(
            round_ids.contains(t.parent_span_id.as_slice()),
            "a tool call is the child of the round that asked for it"
        );
        assert!(attr(&t.attributes, "call_id").is_some());
        assert!(attr(&t.attributes, "duration_ms").is_some());
        assert!(attr(&t.attributes, "outcome").is_some());
        tool_names.insert(attr(&t.attributes, "tool").unwrap());
    }
    for tool in [
        "activate_skill",
        "file_reader",
        "query_database",
        "run_python",
    ] {
        assert!(tool_names.contains(tool), "{tool}: {tool_names:?}");
    }
    assert!(
        spans.iter().all(|s| s.trace_id == run.trace_id),
        "the run's spans are one trace"
    );
    // Names and figures only: the question and the code never go on a span.
    for s in &spans {
        for kv in &s.attributes {
            let v = attr(std::slice::from_ref(kv), &kv.key).unwrap_or_default();
            assert!(
                !v.contains("West region") && !v.contains("import json"),
                "{kv:?}"
            );
        }
    }

    let metrics = received.metric_tools();
    let calls = metrics
        .get("ba_tools.calls")
        .expect("ba_tools.calls exported");
    for tool in ["file_reader", "query_database", "run_python"] {
        assert!(calls.contains(tool), "{tool}: {calls:?}");
    }
    assert!(
        metrics.contains_key("ba_tools.call.duration"),
        "{metrics:?}"
    );
    assert_eq!(
        received.service_names(),
        BTreeSet::from(["ba-agent-otlp-test".to_owned()])
    );
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_sampling_ratio_exports_no_spans_but_the_metrics() {
    let (endpoint, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    // The configuration file's section this time, for a command that runs to its end.
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("telemetry:\n  endpoint: {endpoint}\n  sample_ratio: 0\n"),
    )
    .unwrap();
    let out = ba_agent()
        .arg("demo")
        .arg("--dir")
        .arg(dir.path().join("demo"))
        .env("BA_AGENT_CONFIG", &config)
        .stdout(Stdio::null())
        .output();
    let out = tokio::time::timeout(LIMIT, out).await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(received.spans().len(), 0, "{:?}", names(&received.spans()));
    let metrics = received.metric_tools();
    let calls = metrics
        .get("ba_tools.calls")
        .expect("ba_tools.calls exported");
    assert!(calls.contains("run_python"), "{calls:?}");
    assert_eq!(
        received.service_names(),
        BTreeSet::from(["ba-agent".to_owned()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_are_errors_naming_the_key() {
    for (var, value, key) in [
        ("OTEL_TRACES_SAMPLER_ARG", "1.5", "OTEL_TRACES_SAMPLER_ARG"),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "127.0.0.1:4318",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
    ] {
        let mut cmd = ba_agent();
        cmd.arg("demo")
            .arg("--dir")
            .arg(std::env::temp_dir().join("ba-agent-otlp-bad"));
        if var != "OTEL_EXPORTER_OTLP_ENDPOINT" {
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
        }
        let out = cmd.env(var, value).output().await.unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}={value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with(&format!("error: {key}: ")), "{stderr}");
        assert!(
            out.stdout.is_empty(),
            "nothing ran: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
