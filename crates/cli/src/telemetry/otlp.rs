//! The OTLP export (feature `otlp`): an SDK tracer provider fed by the `tracing` spans of the
//! workspace's crates (through `tracing-opentelemetry`) and an SDK meter provider, installed as
//! the global one so the tools' `otel` instruments reach it, each with an OTLP/HTTP exporter
//! posting protobuf bodies through the blocking reqwest client.
//!
//! The batch span processor and the periodic metric reader export from threads of their own,
//! so no async runtime is needed and commands keep theirs; [`Telemetry::shutdown`] exports what
//! is left and stops them, waiting a bounded time.

use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{MetricExporter, Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::{TelemetryError, TelemetrySettings};

/// The time one export request may take; an export that fails is dropped (and retried by the
/// exporter a few times first), never blocking a run.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The tracer and meter providers of a configured export. Dropping it without
/// [`Telemetry::shutdown`] loses what was not exported yet.
#[derive(Debug)]
pub(crate) struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Telemetry {
    /// Builds the exporters and providers of `settings` (their export threads start) and
    /// installs nothing global: see [`Telemetry::install`].
    pub(crate) fn start(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let tracer = match &settings.traces_url {
            None => None,
            Some(url) => {
                let exporter = SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url.clone())
                    .with_timeout(EXPORT_TIMEOUT)
                    .build()
                    .map_err(|e| exporter_error(url, &e))?;
                // A run is a root span: the ratio picks runs, and a picked run keeps its rounds
                // and calls (the children follow their parent's decision).
                let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                    settings.sample_ratio,
                )));
                Some(
                    SdkTracerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_sampler(sampler)
                        .with_resource(resource.clone())
                        .build(),
                )
            }
        };
        let meter = match &settings.metrics_url {
            None => None,
            Some(url) => {
                let exporter = MetricExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url.clone())
                    .with_timeout(EXPORT_TIMEOUT)
                    .build()
                    .map_err(|e| exporter_error(url, &e))?;
                let reader = PeriodicReader::builder(exporter)
                    .with_interval(settings.metrics_interval)
                    .build();
                Some(
                    SdkMeterProvider::builder()
                        .with_reader(reader)
                        .with_resource(resource)
                        .build(),
                )
            }
        };
        Ok(Self { tracer, meter })
    }

    /// [`Telemetry::start`], then the span bridge as the global `tracing` subscriber and the
    /// meter provider as the global one (where `ba-tools` records). Once per process.
    pub(crate) fn install(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        let telemetry = Self::start(settings)?;
        if let Some(tracer) = &telemetry.tracer {
            tracing::subscriber::set_global_default(subscriber(tracer)).map_err(|e| {
                TelemetryError::Exporter {
                    url: settings.traces_url.clone().unwrap_or_default(),
                    message: e.to_string(),
                }
            })?;
        }
        if let Some(meter) = &telemetry.meter {
            opentelemetry::global::set_meter_provider(meter.clone());
        }
        Ok(telemetry)
    }

    /// Exports what is left and stops the export threads, waiting `bound` at most (a
    /// collector that does not answer costs that long, and what it did not take is lost).
    pub(crate) fn shutdown(self, bound: Duration) -> Result<(), TelemetryError> {
        let (tx, rx) = mpsc::channel();
        let Self { tracer, meter } = self;
        // On a thread of its own: the metric provider's shutdown takes no timeout, and the
        // blocking HTTP client must not be dropped inside an async runtime.
        let spawned = std::thread::Builder::new()
            .name("telemetry-shutdown".into())
            .spawn(move || {
                let mut problems = Vec::new();
                if let Some(t) = tracer
                    && let Err(e) = t.shutdown_with_timeout(bound)
                {
                    problems.push(format!("traces: {e}"));
                }
                if let Some(m) = meter
                    && let Err(e) = m.shutdown()
                {
                    problems.push(format!("metrics: {e}"));
                }
                let _ = tx.send(problems);
            });
        if let Err(e) = spawned {
            return Err(TelemetryError::Shutdown(e.to_string()));
        }
        match rx.recv_timeout(bound) {
            Ok(problems) if problems.is_empty() => Ok(()),
            Ok(problems) => Err(TelemetryError::Shutdown(problems.join("; "))),
            Err(_) => Err(TelemetryError::Shutdown(format!(
                "the collector did not take the last export within {} s",
                bound.as_secs()
            ))),
        }
    }
}

/// A registry whose one layer turns the spans of the workspace's crates (`ba_*`, level info
/// and above) into OpenTelemetry spans. Events stay out: their messages may quote data.
fn subscriber(provider: &SdkTracerProvider) -> impl tracing::Subscriber + Send + Sync {
    let tracer = provider.tracer("ba-agent");
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.is_span() && meta.target().starts_with("ba_") && *meta.level() <= tracing::Level::INFO
    });
    tracing_subscriber::registry().with(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(ours),
    )
}

fn exporter_error(url: &str, e: &opentelemetry_otlp::ExporterBuildError) -> TelemetryError {
    TelemetryError::Exporter {
        url: url.to_owned(),
        message: e.to_string(),
    }
}
