//! Configuration of the runtime: global defaults matching the specified numbers, and per-tool
//! overrides of the timeout, the retry policy and the default level.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use ba_protocol::OutputLevel;
use ba_protocol::ToolErrorKind;
use serde::{Deserialize, Serialize};

use crate::error::ToolsError;
use crate::levels::FormatBounds;
use crate::retry::{Backoff, RetryPolicy, TimeoutGrowth};

/// The whole configuration of a [`ToolRuntime`](crate::ToolRuntime). Every field has the
/// specified default, so `{}` is a valid configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// Largest serialized arguments accepted, in bytes (default 10 MiB).
    pub max_input_bytes: u64,
    /// Serialized results over this many bytes are spilled (default 1 MiB).
    pub spill_threshold_bytes: u64,
    /// Calls run at once by `run_all` (default 6).
    pub max_concurrency: usize,
    /// Context usage (0..=1) above which calls without an explicit or tool level are shown
    /// `brief` (default 0.8).
    pub brief_above_usage: f64,
    /// The level when nothing else decides (default `standard`).
    pub default_level: OutputLevel,
    /// Size bounds of observations.
    pub format: FormatBounds,
    /// Retry, backoff and timeout growth.
    pub retry: RetryConfig,
    /// The idempotency cache.
    pub idempotency: IdempotencyConfig,
    /// Per-tool overrides, by tool name.
    pub tools: BTreeMap<String, ToolOverride>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            max_input_bytes: 10 * 1024 * 1024,
            spill_threshold_bytes: 1024 * 1024,
            max_concurrency: 6,
            brief_above_usage: 0.8,
            default_level: OutputLevel::Standard,
            format: FormatBounds::default(),
            retry: RetryConfig::default(),
            idempotency: IdempotencyConfig::default(),
            tools: BTreeMap::new(),
        }
    }
}

/// Retry, backoff and timeout growth, with the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// Failure kinds that are retried (default `timeout`, `resource_error`).
    pub retry_on: Vec<ToolErrorKind>,
    /// Delay before the first retry, in ms (default 1000).
    pub initial_delay_ms: u64,
    /// Delay growth per retry (default 1.5).
    pub backoff_multiplier: f64,
    /// Delay cap, in ms (default 10 000).
    pub max_delay_ms: u64,
    /// Timeout growth per retry (default 2).
    pub timeout_multiplier: f64,
    /// Timeout cap, in ms (default 300 000).
    pub max_timeout_ms: u64,
    /// Up to this fraction of each delay is randomly taken off (default 0.1).
    pub jitter: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 3,
            retry_on: vec![ToolErrorKind::Timeout, ToolErrorKind::ResourceError],
            initial_delay_ms: 1000,
            backoff_multiplier: 1.5,
            max_delay_ms: 10_000,
            timeout_multiplier: 2.0,
            max_timeout_ms: 300_000,
            jitter: 0.1,
        }
    }
}

impl RetryConfig {
    /// The retry decision.
    pub fn policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.max_retries,
            retry_on: self.retry_on.clone(),
        }
    }

    /// The retry timing.
    pub fn backoff(&self) -> Backoff {
        Backoff {
            initial: Duration::from_millis(self.initial_delay_ms),
            multiplier: self.backoff_multiplier,
            max: Duration::from_millis(self.max_delay_ms),
        }
    }

    /// The timeout growth.
    pub fn growth(&self) -> TimeoutGrowth {
        TimeoutGrowth {
            multiplier: self.timeout_multiplier,
            max: Duration::from_millis(self.max_timeout_ms),
        }
    }

    fn check(&self, prefix: &str) -> Result<(), ToolsError> {
        for (name, value) in [
            ("backoff_multiplier", self.backoff_multiplier),
            ("timeout_multiplier", self.timeout_multiplier),
        ] {
            if !value.is_finite() || value < 1.0 {
                return Err(invalid(
                    &format!("{prefix}.{name}"),
                    format!("{value} must be a finite number of at least 1"),
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(invalid(
                &format!("{prefix}.jitter"),
                format!("{} must be between 0 and 1", self.jitter),
            ));
        }
        if self.max_delay_ms < self.initial_delay_ms {
            return Err(invalid(
                &format!("{prefix}.max_delay_ms"),
                format!(
                    "{} is below initial_delay_ms ({})",
                    self.max_delay_ms, self.initial_delay_ms
                ),
            ));
        }
        Ok(())
    }
}

/// The idempotency cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdempotencyConfig {
    /// Results kept at most (default 1000).
    pub capacity: u64,
    /// How long a result is reused, in ms (default 10 minutes).
    pub ttl_ms: u64,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            capacity: 1000,
            ttl_ms: 600_000,
        }
    }
}

/// What one tool changes from the global defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolOverride {
    /// Timeout of the first attempt, in ms; wins over the invocation context's timeout.
    pub timeout_ms: Option<u64>,
    /// The level when the call does not ask for one; wins over the tool's own default.
    pub default_level: Option<OutputLevel>,
    /// The retry configuration of this tool (fields left out take the seeds' defaults).
    pub retry: Option<RetryConfig>,
}

impl ToolsConfig {
    /// Reads a configuration from JSON text and checks it.
    ///
    /// # Errors
    /// [`ToolsError::ConfigSyntax`] naming the line and column, or
    /// [`ToolsError::InvalidConfig`] naming the field.
    pub fn from_json(text: &str) -> Result<Self, ToolsError> {
        let config: Self =
            serde_json::from_str(text).map_err(|source| ToolsError::ConfigSyntax { source })?;
        config.check()?;
        Ok(config)
    }

    /// Checks that every value is in range.
    ///
    /// # Errors
    /// [`ToolsError::InvalidConfig`] naming the first bad field.
    pub fn check(&self) -> Result<(), ToolsError> {
        if self.max_concurrency == 0 {
            return Err(invalid("max_concurrency", "0 would run nothing".to_owned()));
        }
        if !(0.0..=1.0).contains(&self.brief_above_usage) {
            return Err(invalid(
                "brief_above_usage",
                format!("{} must be between 0 and 1", self.brief_above_usage),
            ));
        }
        let f = &self.format;
        for (name, value) in [
            ("brief_max_bytes", f.brief_max_bytes),
            ("standard_max_bytes", f.standard_max_bytes),
            ("item_max_bytes", f.item_max_bytes),
            ("full_max_bytes", f.full_max_bytes),
            ("preview_max_bytes", f.preview_max_bytes),
        ] {
            if value < FormatBounds::MIN_BYTES {
                return Err(invalid(
                    &format!("format.{name}"),
                    format!(
                        "{value} is below the minimum of {}",
                        FormatBounds::MIN_BYTES
                    ),
                ));
            }
        }
        if f.standard_max_lines < 3 {
            return Err(invalid(
                "format.standard_max_lines",
                format!("{} is below the minimum of 3", f.standard_max_lines),
            ));
        }
        self.retry.check("retry")?;
        for (tool, o) in &self.tools {
            if let Some(r) = &o.retry {
                r.check(&format!("tools.{tool}.retry"))?;
            }
            if o.timeout_ms == Some(0) {
                return Err(invalid(
                    &format!("tools.{tool}.timeout_ms"),
                    "0 would time out every call".to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// The retry configuration of `tool`.
    pub fn retry_for(&self, tool: &str) -> &RetryConfig {
        self.tools
            .get(tool)
            .and_then(|o| o.retry.as_ref())
            .unwrap_or(&self.retry)
    }

    /// The retry configuration of `tool` when the tool itself allows at most `max_retries`
    /// (its [`ToolCapabilities`](crate::ToolCapabilities)): a per-tool `retry` in the
    /// configuration wins, otherwise the global policy with its retries capped.
    pub fn retry_with(&self, tool: &str, max_retries: Option<u32>) -> Cow<'_, RetryConfig> {
        match (
            self.tools.get(tool).and_then(|o| o.retry.as_ref()),
            max_retries,
        ) {
            (Some(own), _) => Cow::Borrowed(own),
            (None, Some(cap)) if cap < self.retry.max_retries => {
                let mut capped = self.retry.clone();
                capped.max_retries = cap;
                Cow::Owned(capped)
            }
            (None, _) => Cow::Borrowed(&self.retry),
        }
    }
}

fn invalid(field: &str, reason: String) -> ToolsError {
    ToolsError::InvalidConfig {
        field: field.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_has_the_seed_numbers() {
        let c = ToolsConfig::from_json("{}").unwrap();
        assert_eq!(c, ToolsConfig::default());
        assert_eq!(c.max_input_bytes, 10 * 1024 * 1024);
        assert_eq!(c.retry.max_retries, 3);
        assert_eq!(c.retry.backoff().delay(1), Duration::from_millis(1500));
        assert_eq!(c.retry.growth().max, Duration::from_secs(300));
        assert_eq!(c.max_concurrency, 6);
    }

    #[test]
    fn overrides_and_errors_name_their_field() {
        let c = ToolsConfig::from_json(
            r#"{"tools": {"sql": {"timeout_ms": 5000, "default_level": "brief",
                "retry": {"max_retries": 1}}}}"#,
        )
        .unwrap();
        assert_eq!(c.retry_for("sql").max_retries, 1);
        assert_eq!(c.retry_for("sql").initial_delay_ms, 1000);
        assert_eq!(c.retry_for("other").max_retries, 3);

        let err =
            ToolsConfig::from_json(r#"{"tools": {"sql": {"retry": {"jitter": 2}}}}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the configuration field `tools.sql.retry.jitter` is invalid: 2 must be between 0 and 1"
        );
        let err = ToolsConfig::from_json(r#"{"max_concurency": 3}"#).unwrap_err();
        assert!(err.to_string().contains("max_concurency"), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
