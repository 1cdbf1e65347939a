//! A run's side of its window: the budget of its next request, and
//! the window a server names when it refuses a request as too long, kept in the log (see
//! [`crate::budget`] for how the budget is read from it).

use ba_protocol::{EntryKind, LogEntry, LogRole, WindowRecord};

use super::{Runner, Stop};
use crate::budget::{budget_for, window_record};
use crate::ids::{new_id, now};

impl Runner {
    /// The budget of this run's next window.
    pub(super) fn budget(&self) -> ba_context::ContextBudget {
        budget_for(
            self.inner.settings.budget,
            self.history.all(),
            self.kit.spec_tokens(),
        )
    }

    /// Keeps the window a server named when it refused a request as too long, for the rest of
    /// the conversation (a hidden entry; never sent to a model). `false` when the server named
    /// no window smaller than the one used: a retry would be refused again.
    pub(super) async fn learn_window(
        &mut self,
        limit: Option<u64>,
        refused: Option<u64>,
        model: &str,
    ) -> Result<bool, Stop> {
        let previous = window_record(self.history.all())
            .map_or(self.inner.settings.budget.total as u64, |w| w.tokens);
        let tokens = match (limit, refused) {
            (Some(limit), _) => limit,
            // No window named: what was refused is too much, so a little less than it.
            (None, Some(refused)) => refused.saturating_mul(9) / 10,
            (None, None) => previous.saturating_mul(3) / 4,
        };
        if tokens == 0 || (tokens >= previous && limit.is_none()) {
            return Ok(false);
        }
        let record = WindowRecord {
            tokens,
            model: Some(model.to_owned()),
            refused_tokens: refused,
            previous: Some(previous),
        };
        let mut e = LogEntry::new(new_id(), LogRole::System, now()).with_text(format!(
            "Context window: {tokens} tokens (the server refused {} tokens)",
            refused.map_or_else(|| "a request of".to_owned(), |r| r.to_string())
        ));
        e.include_in_context = false;
        e.records.kind = Some(EntryKind::Window);
        e.records.window = Some(record);
        self.append(e).await?;
        Ok(true)
    }
}
