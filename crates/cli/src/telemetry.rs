//! Telemetry: where the traces (runs, rounds, model calls, tool calls) and the tools' call
//! metrics go. Nothing is set up unless an OTLP endpoint is configured; then, with the `otlp`
//! feature, [`otlp`] exports both over OTLP/HTTP (protobuf) until the command ends.
//!
//! Sources, each key on its own, the environment first: `OTEL_EXPORTER_OTLP_ENDPOINT` (a base
//! URL; `/v1/traces` and `/v1/metrics` are appended) or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (used as they are), `OTEL_TRACES_SAMPLER_ARG` (the
//! sampling ratio), `OTEL_SERVICE_NAME` and `OTEL_METRIC_EXPORT_INTERVAL` (ms); then the
//! configuration file's `telemetry` section (`endpoint`, `sample_ratio`, `service_name`,
//! `metrics_interval_secs`). `OTEL_SDK_DISABLED=true` turns it all off.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[cfg(feature = "otlp")]
pub(crate) mod otlp;

/// The base URL of both signals.
pub(crate) const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces' URL, used as it is.
pub(crate) const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The metrics' URL, used as it is.
pub(crate) const METRICS_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// The share of traces kept, 0 to 1.
pub(crate) const SAMPLER_ARG_VAR: &str = "OTEL_TRACES_SAMPLER_ARG";
/// The `service.name` of the exported resource.
pub(crate) const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// Milliseconds between metric exports.
pub(crate) const METRIC_INTERVAL_VAR: &str = "OTEL_METRIC_EXPORT_INTERVAL";
/// `true` turns telemetry off whatever else is set.
pub(crate) const SDK_DISABLED_VAR: &str = "OTEL_SDK_DISABLED";

/// The service name when none is configured.
const DEFAULT_SERVICE_NAME: &str = "ba-agent";
/// Metrics are exported this often (and once more at the end) unless configured.
const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// The configuration file's `telemetry` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct TelemetryConfig {
    /// The collector's base URL (`http://127.0.0.1:4318`); the signal paths are appended.
    pub endpoint: Option<String>,
    /// The share of runs traced, 0 to 1 (default 1); a traced run keeps all its spans.
    pub sample_ratio: Option<f64>,
    /// The `service.name` of the exported resource (default `ba-agent`).
    pub service_name: Option<String>,
    /// Seconds between metric exports (default 60; the last one goes at the end).
    pub metrics_interval_secs: Option<u64>,
}

/// What to export where: an endpoint is configured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TelemetrySettings {
    /// Where spans are posted (`None`: only metrics are exported).
    pub traces_url: Option<String>,
    /// Where metrics are posted (`None`: only traces are exported).
    pub metrics_url: Option<String>,
    /// The share of root spans (runs) sampled; children follow their parent.
    pub sample_ratio: f64,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Time between metric exports.
    pub metrics_interval: Duration,
}

/// A bad telemetry setting, named by its key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TelemetryError {
    /// An endpoint that is not an http(s) URL a path can be appended to.
    #[error("{key}: `{value}` is not an OTLP endpoint: {reason}")]
    Endpoint {
        key: String,
        value: String,
        reason: &'static str,
    },
    /// A sampling ratio outside 0..=1 or not a number.
    #[error("{key}: the sampling ratio must be a number from 0 to 1, not `{value}`")]
    Ratio { key: String, value: String },
    /// A metrics interval that is not a positive whole number.
    #[error("{key}: the metrics interval must be a positive whole number, not `{value}`")]
    Interval { key: String, value: String },
    /// A service name that is empty.
    #[error("{key}: the service name is empty")]
    ServiceName { key: String },
    /// The configuration file's `telemetry` section does not parse.
    #[error("configuration {path}: telemetry: {message}")]
    Section { path: PathBuf, message: String },
    /// The exporter could not be built.
    #[cfg(feature = "otlp")]
    #[error("setting up the OTLP export to {url}: {message}")]
    Exporter { url: String, message: String },
    /// The exporters did not shut down (in time).
    #[cfg(feature = "otlp")]
    #[error("telemetry was not flushed: {0}")]
    Shutdown(String),
}

const FILE_ENDPOINT: &str = "telemetry.endpoint";
const FILE_RATIO: &str = "telemetry.sample_ratio";
const FILE_SERVICE: &str = "telemetry.service_name";
const FILE_INTERVAL: &str = "telemetry.metrics_interval_secs";

/// The `telemetry` section of the configuration file at `path`. A file that cannot be read or
/// is not YAML gives `None`: the commands that use the configuration report it; a `telemetry`
/// section that does not parse is an error naming the file.
pub(crate) fn file_section(path: &Path) -> Result<Option<TelemetryConfig>, TelemetryError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let Ok(serde_yaml_ng::Value::Mapping(map)) = serde_yaml_ng::from_str(&text) else {
        return Ok(None);
    };
    let Some(section) = map.get("telemetry") else {
        return Ok(None);
    };
    serde_yaml_ng::from_value(section.clone())
        .map(Some)
        .map_err(|e| TelemetryError::Section {
            path: path.to_owned(),
            message: e.to_string(),
        })
}

/// The settings from `env` (a variable's value, `None` when unset or blank) and the file's
/// section, the environment winning key by key; `None` when no endpoint is configured or
/// `OTEL_SDK_DISABLED` is `true`.
pub(crate) fn settings(
    file: Option<&TelemetryConfig>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TelemetrySettings>, TelemetryError> {
    if env(SDK_DISABLED_VAR).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let empty = TelemetryConfig::default();
    let file = file.unwrap_or(&empty);
    let base = match env(ENDPOINT_VAR) {
        Some(v) => Some(base_url(ENDPOINT_VAR, &v)?),
        None => match &file.endpoint {
            Some(v) => Some(base_url(FILE_ENDPOINT, v)?),
            None => None,
        },
    };
    let signal = |var: &str, path: &str| -> Result<Option<String>, TelemetryError> {
        match env(var) {
            Some(v) => base_url(var, &v).map(Some),
            None => Ok(base.as_ref().map(|b| format!("{b}{path}"))),
        }
    };
    let traces = signal(TRACES_ENDPOINT_VAR, "/v1/traces")?;
    let metrics = signal(METRICS_ENDPOINT_VAR, "/v1/metrics")?;
    let sample_ratio = match env(SAMPLER_ARG_VAR) {
        Some(v) => ratio(SAMPLER_ARG_VAR, v.trim().parse().ok(), &v)?,
        None => match file.sample_ratio {
            Some(r) => ratio(FILE_RATIO, Some(r), &r.to_string())?,
            None => 1.0,
        },
    };
    let service_name = match env(SERVICE_NAME_VAR) {
        Some(v) => v.trim().to_owned(),
        None => match &file.service_name {
            Some(name) if name.trim().is_empty() => {
                return Err(TelemetryError::ServiceName {
                    key: FILE_SERVICE.to_owned(),
                });
            }
            Some(name) => name.trim().to_owned(),
            None => DEFAULT_SERVICE_NAME.to_owned(),
        },
    };
    let metrics_interval = match env(METRIC_INTERVAL_VAR) {
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                return Err(TelemetryError::Interval {
                    key: METRIC_INTERVAL_VAR.to_owned(),
                    value: v,
                });
            }
        },
        None => match file.metrics_interval_secs {
            Some(0) => {
                return Err(TelemetryError::Interval {
                    key: FILE_INTERVAL.to_owned(),
                    value: "0".to_owned(),
                });
            }
            Some(s) => Duration::from_secs(s),
            None => DEFAULT_METRICS_INTERVAL,
        },
    };
    if traces.is_none() && metrics.is_none() {
        return Ok(None);
    }
    Ok(Some(TelemetrySettings {
        traces_url: traces,
        metrics_url: metrics,
        sample_ratio,
        service_name,
        metrics_interval,
    }))
}

/// `value` as a ratio in 0..=1, or the error naming `key`.
fn ratio(key: &str, parsed: Option<f64>, value: &str) -> Result<f64, TelemetryError> {
    match parsed {
        Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(TelemetryError::Ratio {
            key: key.to_owned(),
            value: value.to_owned(),
        }),
    }
}

/// `value` checked as an http(s) URL with a host and no query or fragment, without its
/// trailing slashes (so a signal path can follow).
fn base_url(key: &str, value: &str) -> Result<String, TelemetryError> {
    let fail = |reason| TelemetryError::Endpoint {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    };
    let url = value.trim();
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| fail("it must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(fail("it has no host"));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(fail("it has spaces or control characters"));
    }
    if url.contains(['?', '#']) {
        return Err(fail("it has a query or fragment"));
    }
    if let Some((_, port)) = host.rsplit_once(':')
        && !host.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Err(fail("its port is not a number from 0 to 65535"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The environment as [`settings`] reads it: unset and blank are alike.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The settings of this process: its environment and the `telemetry` section of the
/// configuration file (`config`, else `BA_AGENT_CONFIG`).
pub(crate) fn from_process(
    config: Option<&Path>,
) -> Result<Option<TelemetrySettings>, TelemetryError> {
    let path = config
        .map(Path::to_owned)
        .or_else(|| process_env("BA_AGENT_CONFIG").map(PathBuf::from));
    let section = match &path {
        Some(p) => file_section(p)?,
        None => None,
    };
    settings(section.as_ref(), &process_env)
}

/// How long the end of a command waits for the last export.
#[cfg(feature = "otlp")]
const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

/// The export of one command, if any; [`Guard::shutdown`] at its end flushes it.
#[derive(Debug)]
pub(crate) struct Guard {
    #[cfg(feature = "otlp")]
    telemetry: Option<otlp::Telemetry>,
}

impl Guard {
    /// No export: nothing was built, nothing runs in the background.
    pub(crate) fn none() -> Self {
        Self {
            #[cfg(feature = "otlp")]
            telemetry: None,
        }
    }

    /// The export this process's settings ask for ([`from_process`]), installed globally; no
    /// export when no endpoint is configured.
    pub(crate) fn start(config: Option<&Path>) -> Result<Self, TelemetryError> {
        Self::with(from_process(config)?)
    }

    /// The export of `settings`, installed globally; none for `None`.
    fn with(settings: Option<TelemetrySettings>) -> Result<Self, TelemetryError> {
        match settings {
            None => Ok(Self::none()),
            Some(settings) => Self::install(&settings),
        }
    }

    #[cfg(feature = "otlp")]
    fn install(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        Ok(Self {
            telemetry: Some(otlp::Telemetry::install(settings)?),
        })
    }

    #[cfg(not(feature = "otlp"))]
    fn install(settings: &TelemetrySettings) -> Result<Self, TelemetryError> {
        let url = settings
            .traces_url
            .as_ref()
            .or(settings.metrics_url.as_ref());
        eprintln!(
            "warning: this ba-agent was built without OTLP export (feature `otlp`): nothing is \
             sent to {}",
            url.map_or("the configured endpoint", String::as_str)
        );
        Ok(Self::none())
    }

    /// Whether an export was set up.
    #[cfg(test)]
    pub(crate) fn is_active(&self) -> bool {
        #[cfg(feature = "otlp")]
        return self.telemetry.is_some();
        #[cfg(not(feature = "otlp"))]
        false
    }

    /// Exports what is left and stops, within a bound; a failure is a warning (the command's
    /// own outcome stands).
    pub(crate) fn shutdown(self) {
        #[cfg(feature = "otlp")]
        if let Some(t) = self.telemetry
            && let Err(e) = t.shutdown(SHUTDOWN_BOUND)
        {
            eprintln!("warning: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn file(yaml: &str) -> TelemetryConfig {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn nothing_configured_installs_nothing() {
        // The settings of a process with no endpoint anywhere are none, and so is the guard:
        // no provider, no exporter, no thread, no global subscriber.
        let guard = Guard::with(settings(None, &env_of(&[])).unwrap()).unwrap();
        assert!(!guard.is_active());
        assert!(!tracing::dispatcher::has_been_set());
        guard.shutdown();
    }

    #[test]
    fn nothing_configured_means_no_settings() {
        assert_eq!(settings(None, &env_of(&[])).unwrap(), None);
        let no_endpoint = file("{sample_ratio: 0.5, service_name: x}");
        assert_eq!(settings(Some(&no_endpoint), &env_of(&[])).unwrap(), None);
        let disabled = env_of(&[
            (ENDPOINT_VAR, "http://127.0.0.1:4318"),
            (SDK_DISABLED_VAR, "TRUE"),
        ]);
        assert_eq!(settings(None, &disabled).unwrap(), None);
    }

    #[test]
    fn the_endpoint_is_a_base_url_with_the_signal_paths_appended() {
        let s = settings(None, &env_of(&[(ENDPOINT_VAR, "http://127.0.0.1:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            s.traces_url.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            s.metrics_url.as_deref(),
            Some("http://127.0.0.1:4318/v1/metrics")
        );
        assert_eq!(s.sample_ratio, 1.0);
        assert_eq!(s.service_name, "ba-agent");
        assert_eq!(s.metrics_interval, Duration::from_secs(60));

        let s = settings(
            None,
            &env_of(&[
                (ENDPOINT_VAR, "https://collector.example/otlp"),
                (TRACES_ENDPOINT_VAR, "http://[::1]:9999/t"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.traces_url.as_deref(), Some("http://[::1]:9999/t"));
        assert_eq!(
            s.metrics_url.as_deref(),
            Some("https://collector.example/otlp/v1/metrics")
        );
        // One signal alone.
        let s = settings(None, &env_of(&[(METRICS_ENDPOINT_VAR, "http://m:1/x")]))
            .unwrap()
            .unwrap();
        assert_eq!(s.traces_url, None);
        assert_eq!(s.metrics_url.as_deref(), Some("http://m:1/x"));
    }

    #[test]
    fn the_environment_wins_over_the_file_key_by_key() {
        let f = file(
            "{endpoint: 'http://file:4318', sample_ratio: 0.25, service_name: from-file, \
             metrics_interval_secs: 5}",
        );
        let s = settings(Some(&f), &env_of(&[])).unwrap().unwrap();
        assert_eq!(s.traces_url.as_deref(), Some("http://file:4318/v1/traces"));
        assert_eq!(s.sample_ratio, 0.25);
        assert_eq!(s.service_name, "from-file");
        assert_eq!(s.metrics_interval, Duration::from_secs(5));

        let s = settings(
            Some(&f),
            &env_of(&[
                (ENDPOINT_VAR, "http://env:4318"),
                (SAMPLER_ARG_VAR, "0"),
                (SERVICE_NAME_VAR, "from-env"),
                (METRIC_INTERVAL_VAR, "250"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.traces_url.as_deref(), Some("http://env:4318/v1/traces"));
        assert_eq!(s.sample_ratio, 0.0);
        assert_eq!(s.service_name, "from-env");
        assert_eq!(s.metrics_interval, Duration::from_millis(250));
    }

    #[test]
    fn bad_values_name_their_key() {
        let endpoint = [(ENDPOINT_VAR, "http://127.0.0.1:4318")];
        for (pairs, yaml, key) in [
            (vec![(SAMPLER_ARG_VAR, "1.5")], "{}", SAMPLER_ARG_VAR),
            (vec![(SAMPLER_ARG_VAR, "half")], "{}", SAMPLER_ARG_VAR),
            (vec![(SAMPLER_ARG_VAR, "NaN")], "{}", SAMPLER_ARG_VAR),
            (vec![], "{sample_ratio: -0.1}", FILE_RATIO),
            (vec![(METRIC_INTERVAL_VAR, "0")], "{}", METRIC_INTERVAL_VAR),
            (vec![], "{metrics_interval_secs: 0}", FILE_INTERVAL),
            (vec![], "{service_name: ' '}", FILE_SERVICE),
        ] {
            let mut all = endpoint.to_vec();
            all.extend(pairs);
            let err = settings(Some(&file(yaml)), &env_of(&all)).unwrap_err();
            assert!(err.to_string().starts_with(key), "{key}: {err}");
        }
        for (value, reason) in [
            ("127.0.0.1:4318", "http://"),
            ("ftp://host", "http://"),
            ("http://", "no host"),
            ("http://:4318", "no host"),
            ("http://host:port", "port"),
            ("http://host:99999", "port"),
            ("http://host/a b", "spaces"),
            ("http://host/?q=1", "query"),
        ] {
            let err = settings(None, &env_of(&[(ENDPOINT_VAR, value)])).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(ENDPOINT_VAR) && text.contains(reason),
                "{value}: {text}"
            );
            let err = settings(
                Some(&file(&format!("{{endpoint: '{value}'}}"))),
                &env_of(&[]),
            )
            .unwrap_err();
            assert!(err.to_string().starts_with(FILE_ENDPOINT), "{err}");
        }
    }

    #[test]
    fn the_file_section_is_read_from_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(
            &path,
            "provider: replay\ntelemetry:\n  endpoint: http://127.0.0.1:4318\n  sample_ratio: 0.5\n",
        )
        .unwrap();
        let section = file_section(&path).unwrap().unwrap();
        assert_eq!(section.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(section.sample_ratio, Some(0.5));

        std::fs::write(&path, "telemetry: {endpoint: x, sampling: 1}\n").unwrap();
        let err = file_section(&path).unwrap_err().to_string();
        assert!(err.contains("telemetry: unknown field `sampling`"), "{err}");

        std::fs::write(&path, "provider: replay\n").unwrap();
        assert_eq!(file_section(&path).unwrap(), None);
        // Not this section's to report: the commands that read the file do.
        std::fs::write(&path, "{{ not yaml").unwrap();
        assert_eq!(file_section(&path).unwrap(), None);
        assert_eq!(
            file_section(&dir.path().join("missing.yaml")).unwrap(),
            None
        );
    }
}
