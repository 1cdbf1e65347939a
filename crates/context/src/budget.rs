//! Budgets and usage.

use serde::Serialize;

use crate::error::{ContextError, Result};

/// How much of the model's window a request may use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ContextBudget {
    /// The model's context window, in tokens.
    pub total: usize,
    /// Tokens kept free for the response.
    pub reserved_for_response: usize,
    /// Fraction of the available tokens above which compression starts (0.8).
    pub trigger: f64,
    /// Fraction of the available tokens compression aims for (0.5).
    pub target: f64,
}

impl ContextBudget {
    /// A budget of `total` tokens with `reserved_for_response` kept free, trigger 0.8, target 0.5.
    pub fn new(total: usize, reserved_for_response: usize) -> Self {
        Self {
            total,
            reserved_for_response,
            trigger: 0.8,
            target: 0.5,
        }
    }

    /// The same budget with other trigger and target fractions (clamped to 0..=1, target ≤ trigger).
    pub fn with_thresholds(mut self, trigger: f64, target: f64) -> Self {
        self.trigger = trigger.clamp(0.0, 1.0);
        self.target = target.clamp(0.0, self.trigger);
        self
    }

    /// Tokens a request may use: the total less the response reserve; an error when none.
    pub fn available(&self) -> Result<usize> {
        match self.total.checked_sub(self.reserved_for_response) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(ContextError::EmptyBudget {
                total: self.total,
                reserved: self.reserved_for_response,
            }),
        }
    }

    fn fraction(&self, f: f64) -> usize {
        let available = self.total.saturating_sub(self.reserved_for_response);
        (available as f64 * f).floor() as usize
    }

    /// Tokens above which compression starts.
    pub fn trigger_tokens(&self) -> usize {
        self.fraction(self.trigger)
    }

    /// Tokens compression aims for.
    pub fn target_tokens(&self) -> usize {
        self.fraction(self.target)
    }

    /// The usage of a request of `used` tokens.
    pub fn usage(&self, used: usize) -> ContextUsage {
        let available = self.total.saturating_sub(self.reserved_for_response);
        let status = if used > self.trigger_tokens() {
            UsageStatus::Compressing
        } else if used as f64 > available as f64 * (self.trigger - 0.1).max(0.0) {
            UsageStatus::Warning
        } else {
            UsageStatus::Normal
        };
        ContextUsage {
            used,
            total: self.total,
            percent: if self.total == 0 {
                100.0
            } else {
                used as f64 * 100.0 / self.total as f64
            },
            remaining: available.saturating_sub(used),
            status,
        }
    }
}

/// Where usage stands against the trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageStatus {
    /// Below the trigger by more than ten points.
    Normal,
    /// Within ten points of the trigger.
    Warning,
    /// Above the trigger: the next build compresses.
    Compressing,
}

/// How much of a budget a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ContextUsage {
    /// Tokens used.
    pub used: usize,
    /// The budget's total.
    pub total: usize,
    /// `used` as a percentage of `total`.
    pub percent: f64,
    /// Tokens left before the response reserve.
    pub remaining: usize,
    /// Normal, warning or compressing.
    pub status: UsageStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        let b = ContextBudget::new(1_000, 0);
        assert_eq!(b.usage(100).status, UsageStatus::Normal);
        assert_eq!(b.usage(750).status, UsageStatus::Warning);
        assert_eq!(b.usage(801).status, UsageStatus::Compressing);
        assert_eq!(b.usage(250).remaining, 750);
        assert!((b.usage(250).percent - 25.0).abs() < 1e-9);
    }

    #[test]
    fn zero_budget_is_an_error() {
        assert!(ContextBudget::new(0, 0).available().is_err());
        assert!(ContextBudget::new(100, 100).available().is_err());
        assert_eq!(ContextBudget::new(100, 10).available().ok(), Some(90));
    }
}
