//! Importance levels: old low-value entries become one-line previews, then whole
//! units leave by level, lowest first.

use async_trait::async_trait;
use ba_protocol::{Content, LogRole};
use serde::Serialize;

use super::{CompressCx, CompressionStrategy};
use crate::error::Result;
use crate::window::{ChangeKind, Changed, DropReason, Unit, UnitKind, Window};

/// How much a unit matters, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Importance {
    /// Assistant text that has no result attached (thoughts, chatter).
    Low,
    /// Assistant answers.
    Medium,
    /// Tool observations and summaries.
    High,
    /// User messages and errors.
    Critical,
}

impl Importance {
    /// The level of a unit: user messages and errors are critical, tool groups and summaries
    /// high, assistant answers medium, assistant text followed by more work low.
    pub fn of(unit: &Unit, next: Option<&Unit>) -> Self {
        let error = unit
            .entries
            .iter()
            .any(|e| e.is_error == Some(true) || e.llm_error.is_some());
        match unit.kind {
            UnitKind::User => Self::Critical,
            _ if error => Self::Critical,
            UnitKind::ToolGroup | UnitKind::Summary => Self::High,
            UnitKind::Assistant if next.is_some_and(|n| n.kind != UnitKind::User) => Self::Low,
            UnitKind::Assistant => Self::Medium,
        }
    }
}

/// Importance-based compression.
#[derive(Debug, Clone, Copy)]
pub struct ImportanceStrategy {
    /// Low units older than this many rounds become previews.
    pub low_after_rounds: usize,
    /// Medium units older than this many rounds become previews.
    pub medium_after_rounds: usize,
    /// Characters a preview keeps.
    pub preview_chars: usize,
}

impl Default for ImportanceStrategy {
    fn default() -> Self {
        Self {
            low_after_rounds: 3,
            medium_after_rounds: 5,
            preview_chars: 200,
        }
    }
}

#[async_trait]
impl CompressionStrategy for ImportanceStrategy {
    fn name(&self) -> &str {
        "importance"
    }

    async fn compress(&self, mut window: Window, cx: CompressCx<'_>) -> Result<Window> {
        let last = window.last_round();
        let levels: Vec<Importance> = (0..window.units.len())
            .map(|i| Importance::of(&window.units[i], window.units.get(i + 1)))
            .collect();
        // Step 1: old low and medium units become one-line previews.
        for (i, unit) in window.units.iter_mut().enumerate() {
            let age = last.saturating_sub(unit.round);
            let old = match levels[i] {
                Importance::Low => age > self.low_after_rounds,
                Importance::Medium => age > self.medium_after_rounds,
                _ => false,
            };
            let Some(e) = unit.entries.first_mut() else {
                continue;
            };
            if !old || e.role != LogRole::Assistant {
                continue;
            }
            let text = e.text().into_owned();
            if text.chars().count() <= self.preview_chars {
                continue;
            }
            let head: String = text.chars().take(self.preview_chars).collect();
            e.content = Some(Content::Text(format!("[assistant, earlier] {head}…")));
            window.changed.push(Changed {
                id: e.id.clone(),
                kind: ChangeKind::Compressed,
            });
            unit.recount(cx.counter);
        }
        // Step 2: drop whole units, lowest level first, oldest first within a level.
        let latest = window.latest_user();
        let mut order: Vec<usize> = (0..window.units.len())
            .filter(|&i| Some(i) != latest)
            .collect();
        order.sort_by_key(|&i| (levels[i], i));
        let mut used = window.tokens();
        let mut keep = vec![true; window.units.len()];
        let mut gone = Vec::new();
        for i in order {
            if used <= cx.target {
                break;
            }
            keep[i] = false;
            used -= window.units[i].tokens;
            gone.push(i);
        }
        // A large unit dropped late may have freed more than needed: bring back, most
        // important first, what fits again.
        for &i in gone.iter().rev() {
            if used + window.units[i].tokens <= cx.target {
                keep[i] = true;
                used += window.units[i].tokens;
            }
        }
        window.retain(DropReason::LowImportance, |i, _| keep[i]);
        Ok(window)
    }
}
