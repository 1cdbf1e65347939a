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
    use ba_protocol::tool::OutputLevel;

    #[test]
    fn records_on_the_default_provider_without_failing() {
        let m = ToolMetrics {
            tool: "search".into(),
            call_id: "c1".into(),
            conversation_id: None,
            duration_ms: 12,
            tokens_in: Some(3),
            tokens_out: Some(40),
            success: true,
            retries: 1,
            level: OutputLevel::Standard,
            error_kind: None,
            cached: false,
            spilled: false,
        };
        let recorder = crate::MetricsRecorder::new();
        recorder.record(&m);
        Instruments::new().record(&m);
        assert_eq!(recorder.global().calls, 1);
    }
}
