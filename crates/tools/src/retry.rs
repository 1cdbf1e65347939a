//! Layer 6: retry. The decision ([`RetryPolicy`]: which failures, how many times) is kept
//! apart from the timing ([`Backoff`], [`Jitter`]) and from the timeout growth
//! ([`TimeoutGrowth`]), so each can be configured and tested alone.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ba_protocol::ToolErrorKind;

use crate::error::ToolError;

/// Whether a failed attempt is tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: u32,
    /// The failure kinds worth retrying (default: timeout, resource error).
    pub retry_on: Vec<ToolErrorKind>,
}

impl RetryPolicy {
    /// Whether to retry after a failure of `kind` when `retries_done` retries have run.
    pub fn should_retry(&self, kind: ToolErrorKind, retries_done: u32) -> bool {
        retries_done < self.max_retries && self.retry_on.contains(&kind)
    }
}

/// How long to wait before a retry: `initial × multiplier^n`, capped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry (default 1 s).
    pub initial: Duration,
    /// Growth per retry (default 1.5).
    pub multiplier: f64,
    /// Cap (default 10 s).
    pub max: Duration,
}

impl Backoff {
    /// The delay before retry number `retry` (0 for the first retry), before jitter.
    pub fn delay(&self, retry: u32) -> Duration {
        grow(self.initial, self.multiplier, retry, self.max)
    }
}

/// How the timeout of a retried attempt grows: `base × multiplier^attempt`, capped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutGrowth {
    /// Growth per retry (default 2).
    pub multiplier: f64,
    /// Cap (default 300 s).
    pub max: Duration,
}

impl TimeoutGrowth {
    /// The timeout of attempt `attempt` (0 for the first attempt) when the first has `base`.
    pub fn timeout(&self, base: Duration, attempt: u32) -> Duration {
        grow(base, self.multiplier, attempt, self.max.max(base))
    }
}

fn grow(start: Duration, multiplier: f64, n: u32, cap: Duration) -> Duration {
    let factor = multiplier.powi(i32::try_from(n).unwrap_or(i32::MAX));
    let ms = start.as_secs_f64() * 1000.0 * factor;
    if !ms.is_finite() || ms >= cap.as_secs_f64() * 1000.0 {
        return cap;
    }
    // Whole milliseconds, as the specified integer arithmetic does: 1 s × 1.5² = 2 250 ms.
    Duration::from_millis(ms as u64)
}

/// Spreads retry delays so that many callers failing together do not retry in lockstep.
/// Injected into the runtime so tests can make it deterministic.
pub trait Jitter: Send + Sync + fmt::Debug {
    /// The delay actually waited before retry `retry`, given the computed `delay`.
    fn apply(&self, delay: Duration, retry: u32) -> Duration;
}

/// No jitter: the computed delay exactly.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJitter;

impl Jitter for NoJitter {
    fn apply(&self, delay: Duration, _retry: u32) -> Duration {
        delay
    }
}

/// Waits a random part of the delay: between `(1 − fraction) × delay` and `delay`. Only
/// shortening keeps the configured cap a true upper bound.
#[derive(Debug)]
pub struct RandomJitter {
    fraction: f64,
    state: AtomicU64,
}

impl RandomJitter {
    /// Jitter of up to `fraction` (clamped to 0..=1) of each delay.
    pub fn new(fraction: f64) -> Self {
        // The std hasher's per-process random keys are a dependency-free seed source.
        let seed = RandomState::new().build_hasher().finish() | 1;
        Self {
            fraction: if fraction.is_finite() {
                fraction.clamp(0.0, 1.0)
            } else {
                0.0
            },
            state: AtomicU64::new(seed),
        }
    }

    fn next_unit(&self) -> f64 {
        // splitmix64: tiny, good enough to decorrelate retry timings.
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Jitter for RandomJitter {
    fn apply(&self, delay: Duration, _retry: u32) -> Duration {
        delay.mul_f64(1.0 - self.fraction * self.next_unit())
    }
}

/// Everything the retry loop needs.
#[derive(Debug, Clone, Copy)]
pub struct RetrySchedule<'a> {
    /// Whether to retry.
    pub policy: &'a RetryPolicy,
    /// How long to wait.
    pub backoff: Backoff,
    /// How the timeout grows.
    pub growth: TimeoutGrowth,
    /// Spread of the waits.
    pub jitter: &'a dyn Jitter,
}

/// What the retry loop did.
#[derive(Debug)]
pub struct RetryOutcome<T> {
    /// The last attempt's result.
    pub result: Result<T, ToolError>,
    /// Attempts after the first.
    pub retries: u32,
}

/// Runs `attempt(n, timeout)` until it succeeds, fails with a kind the policy does not retry,
/// or the retries run out, sleeping the backoff between attempts.
pub async fn run_with_retry<T, F, Fut>(
    schedule: RetrySchedule<'_>,
    base_timeout: Duration,
    mut attempt: F,
) -> RetryOutcome<T>
where
    F: FnMut(u32, Duration) -> Fut,
    Fut: Future<Output = Result<T, ToolError>>,
{
    let mut retries = 0u32;
    loop {
        let timeout = schedule.growth.timeout(base_timeout, retries);
        let result = attempt(retries, timeout).await;
        match result {
            Err(e) if schedule.policy.should_retry(e.kind, retries) => {
                let delay = schedule
                    .jitter
                    .apply(schedule.backoff.delay(retries), retries);
                tracing::debug!(retry = retries + 1, delay_ms = delay.as_millis() as u64,
                    error = %e, "retrying tool call");
                tokio::time::sleep(delay).await;
                retries += 1;
            }
            result => {
                return RetryOutcome { result, retries };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_backoff() -> Backoff {
        Backoff {
            initial: Duration::from_secs(1),
            multiplier: 1.5,
            max: Duration::from_secs(10),
        }
    }

    #[test]
    fn backoff_follows_the_seed_numbers() {
        let b = seed_backoff();
        let ms: Vec<u128> = (0..8).map(|n| b.delay(n).as_millis()).collect();
        assert_eq!(ms, [1000, 1500, 2250, 3375, 5062, 7593, 10000, 10000]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn timeout_doubles_up_to_the_cap() {
        let g = TimeoutGrowth {
            multiplier: 2.0,
            max: Duration::from_secs(300),
        };
        let base = Duration::from_secs(120);
        assert_eq!(g.timeout(base, 0), base);
        assert_eq!(g.timeout(base, 1), Duration::from_secs(240));
        assert_eq!(g.timeout(base, 2), Duration::from_secs(300));
    }

    #[test]
    fn policy_retries_only_listed_kinds_up_to_the_limit() {
        let p = RetryPolicy {
            max_retries: 3,
            retry_on: vec![ToolErrorKind::Timeout, ToolErrorKind::ResourceError],
        };
        assert!(p.should_retry(ToolErrorKind::Timeout, 0));
        assert!(p.should_retry(ToolErrorKind::ResourceError, 2));
        assert!(!p.should_retry(ToolErrorKind::ResourceError, 3));
        assert!(!p.should_retry(ToolErrorKind::ExecutionError, 0));
        assert!(!p.should_retry(ToolErrorKind::InvalidParameters, 0));
    }

    #[test]
    fn random_jitter_stays_within_its_fraction() {
        let j = RandomJitter::new(0.25);
        let d = Duration::from_millis(1000);
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..200 {
            let got = j.apply(d, n);
            assert!(got <= d && got >= Duration::from_millis(750), "{got:?}");
            seen.insert(got);
        }
        assert!(
            seen.len() > 100,
            "jitter should vary, got {} values",
            seen.len()
        );
    }
}
