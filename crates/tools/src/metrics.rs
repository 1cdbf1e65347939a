//! Metrics: one [`ToolMetrics`] record per call, aggregated per tool (global) and per
//! conversation, and a human-readable report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ba_protocol::OutputLevel;
use ba_protocol::ToolErrorKind;
use dashmap::DashMap;
use serde::Serialize;

/// What one call cost and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolMetrics {
    /// The tool called (as the model spelled it, for unknown tools).
    pub tool: String,
    /// The call id.
    pub call_id: String,
    /// The conversation, when the invocation context names one.
    pub conversation_id: Option<String>,
    /// Wall time of all attempts and formatting, in ms.
    pub duration_ms: u64,
    /// Tokens of the arguments, when a token counter is configured.
    pub tokens_in: Option<u64>,
    /// Tokens of the observation, when a token counter is configured.
    pub tokens_out: Option<u64>,
    /// Whether the call succeeded.
    pub success: bool,
    /// Attempts after the first.
    pub retries: u32,
    /// The level the observation was rendered at.
    pub level: OutputLevel,
    /// Why it failed.
    pub error_kind: Option<ToolErrorKind>,
    /// Answered from the idempotency cache.
    pub cached: bool,
    /// The data was written to the data sink.
    pub spilled: bool,
}

/// Totals over many calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Aggregate {
    /// Calls seen.
    pub calls: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Retries over all calls.
    pub retries: u64,
    /// Calls answered from the cache.
    pub cached: u64,
    /// Calls whose data was spilled.
    pub spilled: u64,
    /// Sum of durations, in ms.
    pub total_ms: u64,
    /// Longest call, in ms.
    pub max_ms: u64,
    /// Tokens of arguments.
    pub tokens_in: u64,
    /// Tokens of observations.
    pub tokens_out: u64,
    /// Calls per level: brief, standard, full.
    pub levels: [u64; 3],
    /// Failures per error kind.
    pub errors: BTreeMap<String, u64>,
}

impl Aggregate {
    fn add(&mut self, m: &ToolMetrics) {
        self.calls += 1;
        if m.success {
            self.successes += 1;
        } else {
            self.failures += 1;
        }
        self.retries += u64::from(m.retries);
        self.cached += u64::from(m.cached);
        self.spilled += u64::from(m.spilled);
        self.total_ms += m.duration_ms;
        self.max_ms = self.max_ms.max(m.duration_ms);
        self.tokens_in += m.tokens_in.unwrap_or(0);
        self.tokens_out += m.tokens_out.unwrap_or(0);
        let i = match m.level {
            OutputLevel::Brief => 0,
            OutputLevel::Standard => 1,
            OutputLevel::Full => 2,
        };
        self.levels[i] += 1;
        if let Some(kind) = m.error_kind {
            *self.errors.entry(kind.as_str().to_owned()).or_default() += 1;
        }
    }

    /// Mean duration in ms (0 with no calls).
    pub fn mean_ms(&self) -> u64 {
        self.total_ms.checked_div(self.calls).unwrap_or(0)
    }
}

/// Collects call records into aggregates; shared by every call of a runtime, safe to use from
/// many tasks at once. With the `otel` feature, records also go to OpenTelemetry.
#[derive(Debug, Default)]
pub struct MetricsRecorder {
    by_tool: DashMap<String, Aggregate>,
    by_conversation: DashMap<String, Aggregate>,
    tokens_counted: std::sync::atomic::AtomicBool,
    #[cfg(feature = "otel")]
    otel: std::sync::OnceLock<crate::otel::Instruments>,
}

impl MetricsRecorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one call.
    pub fn record(&self, m: &ToolMetrics) {
        #[cfg(feature = "otel")]
        self.otel
            .get_or_init(crate::otel::Instruments::new)
            .record(m);
        if m.tokens_in.is_some() {
            self.tokens_counted
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.by_tool.entry(m.tool.clone()).or_default().add(m);
        if let Some(conv) = &m.conversation_id {
            self.by_conversation.entry(conv.clone()).or_default().add(m);
        }
    }

    /// The totals of one tool.
    pub fn tool(&self, name: &str) -> Option<Aggregate> {
        self.by_tool.get(name).map(|a| a.clone())
    }

    /// The totals of one conversation.
    pub fn conversation(&self, id: &str) -> Option<Aggregate> {
        self.by_conversation.get(id).map(|a| a.clone())
    }

    /// The totals over every call.
    pub fn global(&self) -> Aggregate {
        let mut total = Aggregate::default();
        for entry in &self.by_tool {
            let a = entry.value();
            total.calls += a.calls;
            total.successes += a.successes;
            total.failures += a.failures;
            total.retries += a.retries;
            total.cached += a.cached;
            total.spilled += a.spilled;
            total.total_ms += a.total_ms;
            total.max_ms = total.max_ms.max(a.max_ms);
            total.tokens_in += a.tokens_in;
            total.tokens_out += a.tokens_out;
            for i in 0..3 {
                total.levels[i] += a.levels[i];
            }
            for (k, v) in &a.errors {
                *total.errors.entry(k.clone()).or_default() += v;
            }
        }
        total
    }

    /// Per-tool totals, by tool name.
    pub fn tools(&self) -> BTreeMap<String, Aggregate> {
        self.by_tool
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// Per-conversation totals, by conversation id.
    pub fn conversations(&self) -> BTreeMap<String, Aggregate> {
        self.by_conversation
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// A plain-text report: one row per tool, the totals, errors by kind, and one line per
    /// conversation.
    pub fn report(&self) -> String {
        let tools = self.tools();
        let global = self.global();
        let tokens = self
            .tokens_counted
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Tool calls: {} ({} ok, {} failed, {} retries, {} cached, {} spilled)",
            global.calls,
            global.successes,
            global.failures,
            global.retries,
            global.cached,
            global.spilled
        );
        if tools.is_empty() {
            return out;
        }
        let width = tools.keys().map(String::len).max().unwrap_or(4).max(5);
        let _ = writeln!(
            out,
            "{:<width$}  {:>5}  {:>4}  {:>6}  {:>7}  {:>7}  {:>7}  {:>9}  {:>10}  {:>14}",
            "tool",
            "calls",
            "ok",
            "failed",
            "retries",
            "mean ms",
            "max ms",
            "tokens in",
            "tokens out",
            "brief/std/full"
        );
        let mut row = |name: &str, a: &Aggregate| {
            let (tin, tout) = if tokens {
                (a.tokens_in.to_string(), a.tokens_out.to_string())
            } else {
                ("-".to_owned(), "-".to_owned())
            };
            let _ = writeln!(
                out,
                concat!(
                    "{name:<width$}  {:>5}  {:>4}  {:>6}  {:>7}  {:>7}  {:>7}  ",
                    "{tin:>9}  {tout:>10}  {levels:>14}"
                ),
                a.calls,
                a.successes,
                a.failures,
                a.retries,
                a.mean_ms(),
                a.max_ms,
                name = name,
                width = width,
                tin = tin,
                tout = tout,
                levels = format!("{}/{}/{}", a.levels[0], a.levels[1], a.levels[2]),
            );
        };
        for (name, a) in &tools {
            row(name, a);
        }
        row("total", &global);
        if !global.errors.is_empty() {
            let errors: Vec<String> = global
                .errors
                .iter()
                .map(|(k, v)| format!("{k} ×{v}"))
                .collect();
            let _ = writeln!(out, "Errors: {}", errors.join(", "));
        }
        let conversations = self.conversations();
        if !conversations.is_empty() {
            let _ = writeln!(out, "Conversations:");
            for (id, a) in conversations {
                let _ = writeln!(
                    out,
                    "  {id}: calls {}, failed {}, {} ms in tools",
                    a.calls, a.failures, a.total_ms
                );
            }
        }
        out
    }
}
