//! When to retry a failed call (the decision) and how long to wait (the timing).

use std::time::{Duration, SystemTime};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc2822;

use super::error::ModelError;

/// Retry policy for transient failures: HTTP 429, 5xx, connection failures and request
/// timeouts. Failures after a stream has started delivering are never retried, because the
/// caller has already seen part of the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 turns retrying off).
    pub max_retries: u32,
    /// Wait before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Cap on the computed wait.
    pub max_delay: Duration,
    /// Fraction of the wait drawn at random (0 = none, 1 = full jitter), so that many clients
    /// rate-limited together do not come back together.
    pub jitter: f64,
    /// A `retry-after` longer than this is not waited for: the error is returned at once.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            jitter: 0.25,
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Sets the number of retries.
    pub fn with_max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Sets the first wait.
    pub fn with_base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// Sets the jitter fraction (clamped to 0..=1).
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter.clamp(0.0, 1.0);
        self
    }

    /// The wait before retry number `retry` (0-based) of a call that failed with `error`, or
    /// `None` when the call must not be retried.
    pub fn delay_for(&self, error: &ModelError, retry: u32, unit_random: f64) -> Option<Duration> {
        if retry >= self.max_retries || !error.is_transient() {
            return None;
        }
        let u = unit_random.clamp(0.0, 1.0);
        if let ModelError::RateLimited {
            retry_after: Some(wait),
            ..
        } = error
        {
            if *wait > self.max_retry_after {
                return None;
            }
            // The provider knows when capacity returns: jitter only ever adds to its wait,
            // up to a tenth of it.
            return Some(*wait + wait.mul_f64(0.1 * self.jitter * u));
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max_delay);
        Some(exp.mul_f64(1.0 - self.jitter * u))
    }
}

/// Reads a `retry-after` header: delay-seconds (`"3"`, `"1.5"`) or an HTTP date, relative to
/// `now`. A date in the past means no wait. `None` when the value is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = OffsetDateTime::parse(value, &Rfc2822).ok()?;
    let when = SystemTime::from(date);
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Reads the provider's wait hint from response headers: `retry-after-ms` (OpenAI, Anthropic)
/// first, then `retry-after`.
pub(crate) fn retry_after_of(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after").and_then(|v| parse_retry_after(v, SystemTime::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error() -> ModelError {
        ModelError::Server {
            provider: "p".into(),
            status: 503,
            message: "busy".into(),
            attempts: 1,
            partial: None,
        }
    }

    #[test]
    fn retry_after_seconds_and_http_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after(" 1.5 ", now),
            Some(Duration::from_millis(1500))
        );
        // 2015-10-21T07:28:00Z is 1_445_412_480: ten seconds after `now`.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-2", now), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_stops_after_max_retries() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            jitter: 0.0,
            max_retry_after: Duration::from_secs(60),
        };
        let err = server_error();
        let waits: Vec<_> = (0..6)
            .map(|n| policy.delay_for(&err, n, 0.5).unwrap().as_millis())
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(policy.delay_for(&err, 10, 0.5), None);
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let policy = RetryPolicy::default().with_jitter(0.5);
        let err = server_error();
        let low = policy.delay_for(&err, 0, 1.0).unwrap();
        let high = policy.delay_for(&err, 0, 0.0).unwrap();
        assert_eq!(high, Duration::from_millis(500));
        assert_eq!(low, Duration::from_millis(250));
    }

    #[test]
    fn retry_after_is_honoured_and_a_too_long_one_gives_up() {
        let policy = RetryPolicy::default().with_jitter(1.0);
        let limited = |secs| ModelError::RateLimited {
            provider: "p".into(),
            message: "slow".into(),
            retry_after: Some(Duration::from_secs(secs)),
            attempts: 1,
        };
        let wait = policy.delay_for(&limited(4), 0, 1.0).unwrap();
        assert!(wait >= Duration::from_secs(4) && wait <= Duration::from_millis(4400));
        assert_eq!(policy.delay_for(&limited(3600), 0, 0.0), None);
    }

    #[test]
    fn permanent_errors_are_not_retried() {
        let rejected = ModelError::Rejected {
            provider: "p".into(),
            status: 400,
            error_type: "invalid_request_error".into(),
            message: "bad".into(),
        };
        assert_eq!(RetryPolicy::default().delay_for(&rejected, 0, 0.0), None);
    }
}
