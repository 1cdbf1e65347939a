//! OpenTelemetry metrics (feature `otel`): every call record is also published through the
//! OpenTelemetry metrics API on the global meter provider, as
//! `ba_tools.calls` (count, by tool, outcome and level), `ba_tools.call.duration` (ms),
//! `ba_tools.retries` and `ba_tools.tokens` (by direction).
//!
//! Only the API crate is used, as libraries should: the binary installs the SDK and the
//! exporter it wants (OTLP, Prometheus, …). Without one, the global provider is a no-op.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};

use crate::metrics::ToolMetrics;

/// The instruments, built once per recorder.
#[derive(Debug)]
pub(crate) struct Instruments {
    calls: Counter<u64>,
    duration: Histogram<f64>,
    retries: Counter<u64>,
    tokens: Counter<u64>,
}

impl Instruments {
    pub(crate) fn new() -> Self {
        let meter = opentelemetry::global::meter("ba-tools");
        Self {
            calls: meter
                .u64_counter("ba_tools.calls")
                .with_description("Tool calls by tool, outcome and level")
                .build(),
            duration: meter
                .f64_histogram("ba_tools.call.duration")
                .with_unit("ms")
                .with_description("Wall time of a tool call, all attempts included")
                .build(),
            retries: meter
                .u64_counter("ba_tools.retries")
                .with_description("Retried tool attempts")
                .build(),
            tokens: meter
                .u64_counter("ba_tools.tokens")
                .with_description("Tokens of tool arguments (in) and observations (out)")
                .build(),
        }
    }

    pub(crate) fn record(&self, m: &ToolMetrics) {
        let outcome = m.error_kind.map_or("ok", |k| k.as_str());
        let attrs = [
            KeyValue::new("tool", m.tool.clone()),
            KeyValue::new("outcome", outcome),
            KeyValue::new("level", m.level.as_str()),
        ];
        self.calls.add(1, &attrs);
        self.duration.record(m.duration_ms as f64, &attrs[..1]);
        if m.retries > 0 {
            self.retries.add(u64::from(m.retries), &attrs[..1]);
        }
        for (direction, n) in [("in", m.tokens_in), ("out", m.tokens_out)] {
            if let Some(n) = n {
                self.tokens.add(
                    n,
                    &[
                        KeyValue::new("tool", m.tool.clone()),
                        KeyValue::new("direction", direction),
                    ],
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::OutputLevel;
    use ba_protocol::ToolErrorKind;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};

    /// No other test uses this tool name, so what other tests record on the global provider
    /// (once this test installed it) is told apart.
    const TOOL: &str = "otel-probe";

    fn call(retries: u32, duration_ms: u64, error_kind: Option<ToolErrorKind>) -> ToolMetrics {
        ToolMetrics {
            tool: TOOL.into(),
            call_id: "c1".into(),
            conversation_id: None,
            duration_ms,
            tokens_in: Some(3),
            tokens_out: Some(40),
            success: error_kind.is_none(),
            retries,
            level: OutputLevel::Standard,
            error_kind,
            cached: false,
            spilled: false,
        }
    }

    fn attrs<'a>(kvs: impl Iterator<Item = &'a KeyValue>) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = kvs
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        out.sort();
        out
    }

    fn probe(kvs: &[(String, String)]) -> bool {
        kvs.iter().any(|(k, v)| k == "tool" && v == TOOL)
    }

    /// The u64 sums of `name` recorded for the probe tool: (attributes, value).
    fn sums(all: &[ResourceMetrics], name: &str) -> Vec<(Vec<(String, String)>, u64)> {
        let mut out = Vec::new();
        for metric in all
            .iter()
            .flat_map(ResourceMetrics::scope_metrics)
            .flat_map(|s| s.metrics())
            .filter(|m| m.name() == name)
        {
            if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                for p in sum.data_points() {
                    let kvs = attrs(p.attributes());
                    if probe(&kvs) {
                        out.push((kvs, p.value()));
                    }
                }
            }
        }
        out.sort();
        out
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn call_records_reach_the_installed_meter_provider() {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_periodic_exporter(exporter.clone())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());

        // Through the recorder the runtime uses, so its wiring to the instruments is covered.
        let recorder = crate::MetricsRecorder::new();
        recorder.record(&call(1, 12, None));
        recorder.record(&call(0, 30, Some(ToolErrorKind::Timeout)));
        provider.force_flush().unwrap();
        let all = exporter.get_finished_metrics().unwrap();

        assert_eq!(
            sums(&all, "ba_tools.calls"),
            [
                (
                    kv(&[("level", "standard"), ("outcome", "ok"), ("tool", TOOL)]),
                    1
                ),
                (
                    kv(&[
                        ("level", "standard"),
                        ("outcome", "timeout"),
                        ("tool", TOOL)
                    ]),
                    1
                ),
            ]
        );
        assert_eq!(sums(&all, "ba_tools.retries"), [(kv(&[("tool", TOOL)]), 1)]);
        assert_eq!(
            sums(&all, "ba_tools.tokens"),
            [
                (kv(&[("direction", "in"), ("tool", TOOL)]), 6),
                (kv(&[("direction", "out"), ("tool", TOOL)]), 80),
            ]
        );
        let durations: Vec<(u64, f64)> = all
            .iter()
            .flat_map(ResourceMetrics::scope_metrics)
            .flat_map(|s| s.metrics())
            .filter(|m| m.name() == "ba_tools.call.duration")
            .filter_map(|m| match m.data() {
                AggregatedMetrics::F64(MetricData::Histogram(h)) => Some(
                    h.data_points()
                        .filter(|p| probe(&attrs(p.attributes())))
                        .map(|p| (p.count(), p.sum()))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(durations, [(2, 42.0)]);
    }
}
