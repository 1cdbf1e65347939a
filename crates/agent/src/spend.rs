//! What a conversation and its owner have spent, against the caps of the configuration and of
//! the owner: a run looks before each model call and ends `budget_reached` at a cap, after
//! the call in flight finished.
//!
//! A conversation's spend is read from its log (every call's usage, priced by `prices`; a
//! fork counts its own calls, not its parent's, and a rewind takes nothing back: the calls
//! were made). An owner's month is kept by the store's directory, added to after each call,
//! so the cap holds across conversations and across servers sharing one database.

use std::sync::Arc;

use ba_protocol::LogEntry;
use ba_storage::{
    Clock as _, ConversationId, ConversationStore, Directory, Spend, StoredEntry, month_of,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cost::Prices;

/// Spending caps; a cap left out is no cap. Money is counted at `prices`; a call of a model
/// without a price counts its tokens only.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// US dollars one conversation may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_usd: Option<f64>,
    /// US dollars a person may spend in a calendar month (UTC), over all their conversations.
    /// A person's own cap (set by an admin) takes its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_month_usd: Option<f64>,
    /// Tokens (prompt and output) one conversation may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_tokens: Option<u64>,
    /// Tokens a person may use in a calendar month (UTC). A person's own cap takes its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_month_tokens: Option<u64>,
}

/// A budget that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the budget `{field}` must be a finite amount of zero or more")]
pub struct BudgetError {
    /// The cap that is wrong.
    pub field: &'static str,
}

impl Budgets {
    /// Checks that every money cap is a finite amount of zero or more.
    ///
    /// # Errors
    /// [`BudgetError`] naming the first cap that is not.
    pub fn check(&self) -> Result<(), BudgetError> {
        for (field, value) in [
            ("conversation_usd", self.conversation_usd),
            ("user_month_usd", self.user_month_usd),
        ] {
            if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(BudgetError { field });
            }
        }
        Ok(())
    }

    /// These caps with each of `other`'s set caps in force where it is lower (or where none
    /// was set).
    pub fn tightened(&self, other: &Self) -> Self {
        fn low<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if y < x { y } else { x }),
                (x, y) => x.or(y),
            }
        }
        Self {
            conversation_usd: low(self.conversation_usd, other.conversation_usd),
            user_month_usd: low(self.user_month_usd, other.user_month_usd),
            conversation_tokens: low(self.conversation_tokens, other.conversation_tokens),
            user_month_tokens: low(self.user_month_tokens, other.user_month_tokens),
        }
    }

    /// Whether no cap is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What was spent: money at the configured prices, tokens of every call, and the calls whose
/// model has no price (counted in tokens only).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, JsonSchema)]
pub struct Spent {
    /// US dollars.
    pub usd: f64,
    /// Prompt and output tokens.
    pub tokens: u64,
    /// Calls of a model without a price.
    pub unpriced_calls: u64,
}

impl Spent {
    /// What the call that wrote `entry` spent; `None` for an entry without usage.
    pub(crate) fn of_entry(entry: &LogEntry, prices: &Prices) -> Option<Self> {
        let usage = entry.records.usage?;
        let price = prices.of_entry(entry);
        Some(Self {
            usd: price.unwrap_or(0.0),
            tokens: usage.prompt_tokens() + usage.output_tokens,
            unpriced_calls: u64::from(price.is_none()),
        })
    }

    fn add(&mut self, other: Self) {
        self.usd += other.usd;
        self.tokens += other.tokens;
        self.unpriced_calls += other.unpriced_calls;
    }
}

/// Where a conversation stands against its caps (for `inspect` and the page).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SpendReport {
    /// Whose conversation it is.
    pub owner: String,
    /// What this conversation spent.
    pub conversation: Spent,
    /// Its caps.
    pub conversation_usd_cap: Option<f64>,
    /// Its token cap.
    pub conversation_tokens_cap: Option<u64>,
    /// The month (`2026-11`, UTC) the owner's figures are of.
    pub month: String,
    /// What the owner spent this month over all their conversations; `None` when the store
    /// keeps no directory.
    pub owner_month: Option<MonthSpend>,
    /// The owner's month caps (theirs, else the configuration's).
    pub month_usd_cap: Option<f64>,
    /// The owner's month token cap.
    pub month_tokens_cap: Option<u64>,
    /// The cap reached, as a sentence, when one is.
    pub reached: Option<String>,
}

/// An owner's figures for one month.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct MonthSpend {
    /// US dollars.
    pub usd: f64,
    /// Tokens.
    pub tokens: u64,
}

/// Where conversation `id` of `store` stands against `budgets` (and its owner's own caps),
/// its calls priced at `prices`: what `inspect` and the page show, and what a run checks
/// before each model call.
///
/// # Errors
/// The store's (`NotFound` for an unknown conversation).
pub async fn spend_report(
    store: &Arc<dyn ConversationStore>,
    id: &ConversationId,
    budgets: Budgets,
    prices: &Prices,
) -> Result<SpendReport, ba_storage::StorageError> {
    Meter::open(store, id, budgets, prices.clone())
        .await?
        .report()
        .await
}

/// A run's view of what its conversation and owner spent, kept up to date as calls are
/// appended.
pub(crate) struct Meter {
    budgets: Budgets,
    prices: Prices,
    owner: String,
    directory: Option<Arc<dyn Directory>>,
    conversation: Spent,
}

impl Meter {
    /// The meter of conversation `id`: its owner, and what its own calls spent so far.
    pub(crate) async fn open(
        store: &Arc<dyn ConversationStore>,
        id: &ConversationId,
        budgets: Budgets,
        prices: Prices,
    ) -> Result<Self, ba_storage::StorageError> {
        let meta = store.metadata(id).await?;
        let log = crate::history::whole_log(store.as_ref(), id).await?;
        Ok(Self::of_log(store, &meta, &log, budgets, prices))
    }

    /// The meter of the conversation `meta` describes, from its whole log `log` (read by the
    /// caller, who had it already).
    pub(crate) fn of_log(
        store: &Arc<dyn ConversationStore>,
        meta: &ba_storage::ConversationMeta,
        log: &[StoredEntry],
        budgets: Budgets,
        prices: Prices,
    ) -> Self {
        let own_from = meta.fork.as_ref().map_or(0, |f| f.at_seq);
        let conversation = spent_after(log, own_from, &prices);
        Self {
            budgets,
            prices,
            owner: meta.owner.clone(),
            directory: store.directory(),
            conversation,
        }
    }

    /// Counts the call that wrote `entry` (nothing for an entry without usage): into the
    /// conversation's figures, and into its owner's month in the directory.
    pub(crate) async fn record(&mut self, entry: &LogEntry) {
        let Some(spent) = Spent::of_entry(entry, &self.prices) else {
            return;
        };
        self.conversation.add(spent);
        if let Some(directory) = &self.directory {
            let month = month_of(ba_storage::SystemClock.now_ms());
            let add = Spend {
                usd: spent.usd,
                tokens: spent.tokens,
            };
            if let Err(e) = directory.add_spend(&self.owner, &month, add).await {
                // The call was made and is in the log; a lost month figure must not stop the
                // run, but it is said.
                tracing::warn!(owner = %self.owner, error = %e, "the month's spend was not recorded");
            }
        }
    }

    /// The report of where the conversation stands, with the cap reached, if any.
    pub(crate) async fn report(&self) -> Result<SpendReport, ba_storage::StorageError> {
        let month = month_of(ba_storage::SystemClock.now_ms());
        let (mut usd_cap, mut tokens_cap) =
            (self.budgets.user_month_usd, self.budgets.user_month_tokens);
        let mut owner_month = None;
        if let Some(directory) = &self.directory {
            if let Some(user) = directory.user(&self.owner).await? {
                usd_cap = user.budget.month_usd.or(usd_cap);
                tokens_cap = user.budget.month_tokens.or(tokens_cap);
            }
            let spend = directory.spend(&self.owner, &month).await?;
            owner_month = Some(MonthSpend {
                usd: spend.usd,
                tokens: spend.tokens,
            });
        }
        let mut report = SpendReport {
            owner: self.owner.clone(),
            conversation: self.conversation,
            conversation_usd_cap: self.budgets.conversation_usd,
            conversation_tokens_cap: self.budgets.conversation_tokens,
            month,
            owner_month,
            month_usd_cap: usd_cap,
            month_tokens_cap: tokens_cap,
            reached: None,
        };
        report.reached = reached(&report);
        Ok(report)
    }
}

/// What the calls after entry `own_from` spent (a fork's own calls).
fn spent_after(log: &[StoredEntry], own_from: u64, prices: &Prices) -> Spent {
    let mut spent = Spent::default();
    for stored in log.iter().filter(|s| s.seq > own_from) {
        if let Some(s) = Spent::of_entry(&stored.entry, prices) {
            spent.add(s);
        }
    }
    spent
}

/// The first cap `report` has reached, as the sentence a person reads.
fn reached(report: &SpendReport) -> Option<String> {
    let c = &report.conversation;
    let raise = "raise the cap, then send `continue`";
    if let Some(cap) = report.conversation_usd_cap
        && c.usd >= cap
    {
        return Some(format!(
            "this conversation's budget of ${cap:.2} is reached (${:.2} spent); {raise}",
            c.usd
        ));
    }
    if let Some(cap) = report.conversation_tokens_cap
        && c.tokens >= cap
    {
        return Some(format!(
            "this conversation's budget of {cap} tokens is reached ({} used); {raise}",
            c.tokens
        ));
    }
    let month = report.owner_month?;
    let owner = &report.owner;
    let when = &report.month;
    let turn = "raise the cap or wait for the month to turn, then send `continue`";
    if let Some(cap) = report.month_usd_cap
        && month.usd >= cap
    {
        return Some(format!(
            "{owner}'s monthly budget of ${cap:.2} is reached (${:.2} spent in {when}); {turn}",
            month.usd
        ));
    }
    if let Some(cap) = report.month_tokens_cap
        && month.tokens >= cap
    {
        return Some(format!(
            "{owner}'s monthly budget of {cap} tokens is reached ({} used in {when}); {turn}",
            month.tokens
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{LogRole, ModelRecord, Usage};
    use std::collections::BTreeMap;

    fn call(model: &str, input: u64, output: u64) -> LogEntry {
        let mut e = LogEntry::new("a", LogRole::Assistant, "2026-11-01T00:00:00Z");
        e.records.usage = Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        });
        e.records.model = Some(ModelRecord {
            provider: "anthropic".into(),
            name: Some(model.into()),
        });
        e
    }

    fn prices() -> Prices {
        let mut m = BTreeMap::new();
        m.insert(
            "priced".to_owned(),
            crate::cost::ModelPrice {
                input: 1.0,
                output: 2.0,
                cache_read: None,
                cache_write: None,
            },
        );
        Prices::new(m).unwrap_or_default()
    }

    #[test]
    fn a_call_without_a_price_counts_tokens_only() {
        let p = prices();
        let priced = Spent::of_entry(&call("priced", 1_000_000, 500_000), &p);
        assert_eq!(
            priced,
            Some(Spent {
                usd: 2.0,
                tokens: 1_500_000,
                unpriced_calls: 0
            })
        );
        let free = Spent::of_entry(&call("local", 10, 5), &p);
        assert_eq!(
            free,
            Some(Spent {
                usd: 0.0,
                tokens: 15,
                unpriced_calls: 1
            })
        );
    }

    #[test]
    fn a_fork_counts_its_own_calls() {
        let p = prices();
        let log: Vec<StoredEntry> = (1..=4)
            .map(|seq| StoredEntry {
                seq,
                appended_ms: 0,
                entry: call("priced", 1_000_000, 0),
            })
            .collect();
        assert!((spent_after(&log, 0, &p).usd - 4.0).abs() < 1e-9);
        assert!((spent_after(&log, 3, &p).usd - 1.0).abs() < 1e-9);
    }

    fn report(conversation: Spent, month: Option<MonthSpend>) -> SpendReport {
        SpendReport {
            owner: "alice".into(),
            conversation,
            conversation_usd_cap: Some(1.0),
            conversation_tokens_cap: None,
            month: "2026-11".into(),
            owner_month: month,
            month_usd_cap: Some(5.0),
            month_tokens_cap: Some(1000),
            reached: None,
        }
    }

    #[test]
    fn the_reached_cap_is_named_with_the_spend() {
        let under = Spent {
            usd: 0.5,
            tokens: 10,
            unpriced_calls: 0,
        };
        assert_eq!(reached(&report(under, None)), None);
        let over = Spent { usd: 1.0, ..under };
        let said = reached(&report(over, None)).unwrap_or_default();
        assert!(
            said.contains("$1.00") && said.contains("conversation"),
            "{said}"
        );
        let month = MonthSpend {
            usd: 4.0,
            tokens: 1000,
        };
        let said = reached(&report(under, Some(month))).unwrap_or_default();
        assert!(
            said.contains("alice") && said.contains("1000 tokens") && said.contains("2026-11"),
            "{said}"
        );
    }
}
