//! Keep the last K rounds.

use async_trait::async_trait;

use super::{CompressCx, CompressionStrategy};
use crate::error::Result;
use crate::window::{DropReason, UnitKind, Window};

/// Keeps the last `rounds` user rounds (and summary entries), fewer when they do not fit the
/// target, never fewer than the latest round.
#[derive(Debug, Clone, Copy)]
pub struct Truncate {
    /// Rounds to keep at most.
    pub rounds: usize,
}

impl Default for Truncate {
    fn default() -> Self {
        Self { rounds: 10 }
    }
}

#[async_trait]
impl CompressionStrategy for Truncate {
    fn name(&self) -> &str {
        "truncate"
    }

    async fn compress(&self, mut window: Window, cx: CompressCx<'_>) -> Result<Window> {
        let last = window.last_round();
        let mut k = self.rounds.max(1);
        // The tokens of each round, to find the largest K that fits without rebuilding.
        let mut per_round = vec![0usize; last + 1];
        let mut summaries = 0;
        for u in &window.units {
            if u.kind == UnitKind::Summary {
                summaries += u.tokens;
            } else {
                per_round[u.round] += u.tokens;
            }
        }
        let fits = |k: usize| {
            let from = (last + 1).saturating_sub(k).max(1);
            summaries + per_round[from.min(last)..].iter().sum::<usize>() + window.reply_priming
                <= cx.target
        };
        while k > 1 && !fits(k) {
            k -= 1;
        }
        let first = (last + 1).saturating_sub(k).max(1);
        window.retain(DropReason::OutsideRecentRounds, |_, u| {
            u.kind == UnitKind::Summary || u.round >= first
        });
        window.fit_keeping_pending(cx.target, DropReason::OverBudget);
        Ok(window)
    }
}
