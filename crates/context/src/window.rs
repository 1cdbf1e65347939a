//! The window: the log cut into units that are kept or dropped whole, the repair on read and
//! the invariants every strategy's output must meet.

use std::collections::{HashMap, HashSet};

use ba_protocol::claude_code::SUMMARY_PREFIX;
pub(crate) use ba_protocol::{ChangeKind, Changed, DropReason, Dropped};
use ba_protocol::{LogEntry, LogRole};
use serde::Serialize;

use crate::message::MessageCounter;

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitKind {
    /// A summary-class system entry (content starting `SUMMARY` or `CONVERSATION_SUMMARY`).
    Summary,
    /// A user message.
    User,
    /// An assistant entry without tool calls.
    Assistant,
    /// An assistant entry with tool calls and the `tool` entries answering them, or the note
    /// such a group was folded into (an assistant entry opening with the trace mark).
    ToolGroup,
}

/// Entries kept or dropped together.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The entries, in order (a tool group: the assistant entry, then one result per call).
    pub entries: Vec<LogEntry>,
    /// Tokens of the entries.
    pub tokens: usize,
    /// What the unit is.
    pub kind: UnitKind,
    /// The user round it belongs to: 0 before the first user message, then 1, 2, …
    pub round: usize,
}

impl Unit {
    fn new(entries: Vec<LogEntry>, kind: UnitKind, round: usize, counter: &MessageCounter) -> Self {
        let tokens = entries.iter().map(|e| counter.entry(e)).sum();
        Self {
            entries,
            tokens,
            kind,
            round,
        }
    }

    /// The id of the first entry.
    pub fn id(&self) -> &str {
        self.entries.first().map_or("", |e| e.id.as_str())
    }

    /// Recounts after the entries were changed.
    pub fn recount(&mut self, counter: &MessageCounter) {
        self.tokens = self.entries.iter().map(|e| counter.entry(e)).sum();
    }

    /// The text of the unit's entries, joined by newlines.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            let t = e.text();
            if !t.is_empty() {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&t);
            }
        }
        out
    }
}

/// A conversation cut into units, with what was dropped and changed on the way.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// The units kept, in order.
    pub units: Vec<Unit>,
    /// Entries dropped, in the order they were dropped.
    pub dropped: Vec<Dropped>,
    /// Entries added or changed.
    pub changed: Vec<Changed>,
    /// Tokens of every entry that could enter the window, before any strategy.
    pub tokens_before: usize,
    /// The strategies applied, in order.
    pub strategies: Vec<String>,
    /// The reply priming of the request.
    pub reply_priming: usize,
}

/// The text of the user entry that opens a window whose older turns were cut away.
pub const RESUME_TEXT: &str =
    "[Earlier turns of this conversation were left out to fit the context window.]";

/// Whether a system entry's text makes it summary-class.
pub fn is_summary_text(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with(SUMMARY_PREFIX) || t.starts_with("SUMMARY")
}

/// Whether `entry` holds a provider's compaction block (Anthropic's server-side compaction
/// answers with one, a `compaction` block, before the rest of its answer). The provider reads
/// nothing before that block from then on, so the window leaves it out too, and the block goes
/// back as it came.
pub fn holds_provider_compaction(entry: &LogEntry) -> bool {
    match &entry.content {
        Some(ba_protocol::Content::Blocks(blocks)) => blocks.iter().any(|b| {
            matches!(b, ba_protocol::ContentBlock::Unknown(map)
                if map.get("type").and_then(serde_json::Value::as_str) == Some("compaction"))
        }),
        _ => false,
    }
}

/// Where a window starts when the log holds a provider's compaction block: at the user
/// message just before the latest entry that holds one (a request opens with a user message),
/// or at that entry. 0 when there is none.
fn provider_compaction_start(entries: &[LogEntry]) -> usize {
    let Some(at) = entries
        .iter()
        .rposition(|e| e.include_in_context && holds_provider_compaction(e))
    else {
        return 0;
    };
    entries[..at]
        .iter()
        .rposition(|e| e.include_in_context && e.role == LogRole::User)
        .unwrap_or(at)
}

/// The content of the result written for a call that never got one.
pub fn aborted_text(tool_name: &str) -> String {
    format!(
        "[aborted] The call to `{tool_name}` did not return a result: it was interrupted before it completed. Do not assume it ran."
    )
}

impl Window {
    /// Reads `entries` into units, repairing on the way: UI-only entries and historical system
    /// entries leave, tool results join their call's group, orphan and duplicate results leave,
    /// and a call without a result gets a synthetic "aborted" result.
    pub fn prepare(entries: &[LogEntry], counter: &MessageCounter) -> Self {
        let mut w = Window {
            reply_priming: counter.reply_priming(),
            ..Self::default()
        };
        // call id → index of the assistant entry that made it, among included entries.
        let mut call_owner: HashMap<&str, usize> = HashMap::new();
        let mut answered: HashSet<&str> = HashSet::new();
        let mut results: HashMap<usize, Vec<&LogEntry>> = HashMap::new();
        let mut skip = vec![false; entries.len()];
        let start = provider_compaction_start(entries);
        for (i, e) in entries.iter().enumerate() {
            if i < start {
                // Summarised by the provider, which reads nothing before its block.
                if e.include_in_context {
                    w.drop_id(&e.id, DropReason::Summarized);
                }
                skip[i] = true;
                continue;
            }
            if !e.include_in_context {
                w.drop_id(&e.id, DropReason::Excluded);
                skip[i] = true;
                continue;
            }
            match e.role {
                LogRole::Assistant => {
                    for call in e.calls() {
                        call_owner.entry(call.id.as_str()).or_insert(i);
                    }
                }
                LogRole::Tool => {
                    skip[i] = true;
                    let id = e.tool_call_id.as_deref().unwrap_or("");
                    match call_owner.get(id) {
                        Some(&owner) if answered.insert(id) => {
                            results.entry(owner).or_default().push(e);
                        }
                        Some(_) => w.drop_id(&e.id, DropReason::DuplicateResult),
                        None => w.drop_id(&e.id, DropReason::OrphanResult),
                    }
                }
                LogRole::System | LogRole::Developer => {
                    if !is_summary_text(&e.text()) {
                        w.drop_id(&e.id, DropReason::HistoricalSystem);
                        skip[i] = true;
                    }
                }
                LogRole::User => {}
            }
        }
        let mut round = 0;
        for (i, e) in entries.iter().enumerate() {
            if skip[i] {
                continue;
            }
            let unit = match e.role {
                LogRole::User => {
                    round += 1;
                    Unit::new(vec![e.clone()], UnitKind::User, round, counter)
                }
                LogRole::System | LogRole::Developer => {
                    Unit::new(vec![e.clone()], UnitKind::Summary, round, counter)
                }
                // The note of a group folded by an earlier compaction is still a tool group:
                // it is no answer to drop, and no text to cut to key sentences.
                LogRole::Assistant
                    if e.calls().is_empty()
                        && e.text().starts_with(crate::salience::TRACE_MARK) =>
                {
                    Unit::new(vec![e.clone()], UnitKind::ToolGroup, round, counter)
                }
                // A provider's compaction block stands for everything before it: kept as
                // it came, like a summary.
                LogRole::Assistant if e.calls().is_empty() && holds_provider_compaction(e) => {
                    Unit::new(vec![e.clone()], UnitKind::Summary, round, counter)
                }
                LogRole::Assistant if e.calls().is_empty() => {
                    Unit::new(vec![e.clone()], UnitKind::Assistant, round, counter)
                }
                LogRole::Assistant => {
                    let mut got: Vec<&LogEntry> = results.remove(&i).unwrap_or_default();
                    let mut group = vec![e.clone()];
                    for call in e.calls() {
                        // A call id repeated inside the log keeps only its first owner.
                        if call_owner.get(call.id.as_str()) != Some(&i) {
                            continue;
                        }
                        if let Some(pos) = got
                            .iter()
                            .position(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()))
                        {
                            group.push(got.remove(pos).clone());
                        } else {
                            let mut r = LogEntry::new(
                                format!("{}#aborted", call.id),
                                LogRole::Tool,
                                e.created_at.clone(),
                            )
                            .with_text(aborted_text(&call.function.name));
                            r.tool_call_id = Some(call.id.clone());
                            r.tool_name = Some(call.function.name.clone());
                            r.is_error = Some(true);
                            w.changed.push(Changed {
                                id: r.id.clone(),
                                kind: ChangeKind::AbortedResult,
                            });
                            group.push(r);
                        }
                    }
                    Unit::new(group, UnitKind::ToolGroup, round, counter)
                }
                LogRole::Tool => continue,
            };
            w.units.push(unit);
        }
        w.tokens_before = w.tokens();
        w
    }

    /// Tokens of the kept units plus the reply priming.
    pub fn tokens(&self) -> usize {
        self.units.iter().map(|u| u.tokens).sum::<usize>() + self.reply_priming
    }

    /// The kept entries, in order.
    pub fn entries(&self) -> Vec<LogEntry> {
        self.units
            .iter()
            .flat_map(|u| u.entries.iter().cloned())
            .collect()
    }

    /// The ids of the kept entries.
    pub fn kept_ids(&self) -> Vec<String> {
        self.units
            .iter()
            .flat_map(|u| u.entries.iter().map(|e| e.id.clone()))
            .collect()
    }

    /// The index of the latest user unit.
    pub fn latest_user(&self) -> Option<usize> {
        self.units.iter().rposition(|u| u.kind == UnitKind::User)
    }

    /// The index of the tool group the model is about to read: the last unit, when it is a
    /// tool group after the latest user message.
    pub fn pending_start(&self) -> Option<usize> {
        let last = self.units.len().checked_sub(1)?;
        let latest = self.latest_user()?;
        (self.units[last].kind == UnitKind::ToolGroup && last > latest).then_some(last)
    }

    /// The highest round number.
    pub fn last_round(&self) -> usize {
        self.units.last().map_or(0, |u| u.round)
    }

    pub(crate) fn drop_id(&mut self, id: &str, reason: DropReason) {
        self.dropped.push(Dropped {
            id: id.to_owned(),
            reason,
        });
    }

    /// Removes the unit at `index`, recording every entry with `reason`. Synthetic entries
    /// (aborted results) are not recorded: they were never in the log.
    pub fn drop_unit(&mut self, index: usize, reason: DropReason) -> Unit {
        let unit = self.units.remove(index);
        self.record_dropped(&unit, reason);
        unit
    }

    /// Keeps only the units for which `keep` is true (given the index and the unit); the
    /// others are dropped with `reason`, recorded in log order.
    pub fn retain(&mut self, reason: DropReason, mut keep: impl FnMut(usize, &Unit) -> bool) {
        let decisions: Vec<bool> = self
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| keep(i, u))
            .collect();
        let units = std::mem::take(&mut self.units);
        for (unit, keep) in units.into_iter().zip(decisions) {
            if keep {
                self.units.push(unit);
            } else {
                self.record_dropped(&unit, reason);
            }
        }
    }

    fn record_dropped(&mut self, unit: &Unit, reason: DropReason) {
        for e in &unit.entries {
            let synthetic = self
                .changed
                .iter()
                .any(|c| c.id == e.id && c.kind == ChangeKind::AbortedResult);
            if !synthetic {
                self.drop_id(&e.id, reason);
            }
        }
    }

    /// Drops units oldest first — everything before the latest user message, then what follows
    /// it — until the window is within `limit` tokens. The latest user message is never dropped.
    /// A tool group that ends the window after it (the results the model is about to read in
    /// an agent loop) goes last. Returns whether the window fits.
    pub fn fit(&mut self, limit: usize, reason: DropReason) -> bool {
        self.fit_inner(limit, reason, true)
    }

    /// [`Window::fit`] that never drops the tool group ending the window after the latest user
    /// message: for strategies aiming at their target, which is not a hard limit.
    pub fn fit_keeping_pending(&mut self, limit: usize, reason: DropReason) -> bool {
        self.fit_inner(limit, reason, false)
    }

    fn fit_inner(&mut self, limit: usize, reason: DropReason, drop_pending: bool) -> bool {
        while self.tokens() > limit {
            let latest = self.latest_user();
            let pending = self
                .units
                .last()
                .is_some_and(|u| u.kind == UnitKind::ToolGroup)
                && latest.is_some_and(|l| l + 1 < self.units.len());
            let protected_tail = usize::from(pending);
            let victim = match latest {
                Some(l) if l > 0 => Some(0),
                Some(l) if self.units.len() > l + 1 + protected_tail => Some(l + 1),
                Some(l) if pending && drop_pending => Some(l + 1),
                Some(_) => None,
                None if !self.units.is_empty() => Some(0),
                None => None,
            };
            match victim {
                Some(i) => {
                    self.drop_unit(i, reason);
                }
                None => return false,
            }
        }
        true
    }

    /// Makes the window open with a user message (summaries aside: they render as system
    /// text), as providers require once older turns were cut away: a short synthetic user
    /// entry saying that earlier turns were left out goes in front of the first assistant
    /// unit, or, when it does not fit within `limit`, opening assistant units leave until it
    /// does or a user message opens the window.
    pub fn open_with_user(&mut self, counter: &MessageCounter, limit: usize) {
        loop {
            let Some(first) = self.units.iter().position(|u| u.kind != UnitKind::Summary) else {
                return;
            };
            if self.units[first].kind == UnitKind::User {
                return;
            }
            let entry = LogEntry::new(
                format!("resume-{}", self.units[first].id()),
                LogRole::User,
                self.units[first]
                    .entries
                    .first()
                    .map_or("", |e| e.created_at.as_str()),
            )
            .with_text(RESUME_TEXT);
            let unit = Unit::new(
                vec![entry],
                UnitKind::User,
                self.units[first].round,
                counter,
            );
            if self.tokens() + unit.tokens <= limit {
                self.changed.push(Changed {
                    id: unit.id().to_owned(),
                    kind: ChangeKind::ResumeInserted,
                });
                self.units.insert(first, unit);
                return;
            }
            self.drop_unit(first, DropReason::OverBudget);
        }
    }

    /// Checks the invariants against a limit for the messages: every call has exactly
    /// one result in its group, no result stands alone, the latest user message of `source`
    /// is kept, no non-summary system entry, and the window fits.
    pub fn check(
        &self,
        latest_user_id: Option<&str>,
        limit: usize,
    ) -> std::result::Result<(), String> {
        for unit in &self.units {
            let mut calls: Vec<&str> = Vec::new();
            let mut results: Vec<&str> = Vec::new();
            for e in &unit.entries {
                calls.extend(e.calls().iter().map(|c| c.id.as_str()));
                if e.role == LogRole::Tool {
                    results.push(e.tool_call_id.as_deref().unwrap_or(""));
                }
                if matches!(e.role, LogRole::System | LogRole::Developer)
                    && !is_summary_text(&e.text())
                {
                    return Err(format!("system entry `{}` is not summary-class", e.id));
                }
            }
            calls.sort_unstable();
            results.sort_unstable();
            if calls != results {
                return Err(format!(
                    "unit `{}` has calls {calls:?} but results {results:?}",
                    unit.id()
                ));
            }
        }
        if let Some(id) = latest_user_id
            && !self
                .units
                .iter()
                .any(|u| u.entries.iter().any(|e| e.id == id))
        {
            return Err(format!("the latest user message `{id}` was dropped"));
        }
        if self.tokens() > limit {
            return Err(format!(
                "the window takes {} tokens, over the limit of {limit}",
                self.tokens()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;
    use ba_protocol::LogToolCall;

    fn e(id: &str, role: LogRole, text: &str) -> LogEntry {
        LogEntry::new(id, role, "t").with_text(text)
    }

    fn call(id: &str, calls: &[&str]) -> LogEntry {
        let mut a = LogEntry::new(id, LogRole::Assistant, "t");
        a.tool_calls = Some(
            calls
                .iter()
                .map(|c| LogToolCall::new(*c, "read_file", &serde_json::json!({"path": "a.rs"})))
                .collect(),
        );
        a
    }

    fn result(id: &str, call: &str) -> LogEntry {
        let mut r = e(id, LogRole::Tool, "ok");
        r.tool_call_id = Some(call.to_owned());
        r
    }

    #[test]
    fn a_provider_compaction_block_starts_the_window_and_stays_as_it_came() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let mut block = ba_protocol::JsonMap::new();
        block.insert("type".into(), "compaction".into());
        block.insert("content".into(), "What was settled so far.".into());
        block.insert("encrypted_content".into(), "opaque".into());
        let mut answer = LogEntry::new("a1", LogRole::Assistant, "t");
        answer.content = Some(ba_protocol::Content::Blocks(vec![
            ba_protocol::ContentBlock::Unknown(block),
            ba_protocol::ContentBlock::text("Here is the next step."),
        ]));
        assert!(holds_provider_compaction(&answer));
        let log = vec![
            e("u0", LogRole::User, "An old question."),
            e("a0", LogRole::Assistant, "An old answer."),
            e(
                "u1",
                LogRole::User,
                "The question the provider compacted at.",
            ),
            answer.clone(),
            e("u2", LogRole::User, "And now?"),
        ];
        let w = Window::prepare(&log, &counter);
        assert_eq!(w.kept_ids(), ["u1", "a1", "u2"]);
        assert_eq!(w.units[1].kind, UnitKind::Summary);
        assert_eq!(
            w.dropped
                .iter()
                .map(|d| (d.id.as_str(), d.reason))
                .collect::<Vec<_>>(),
            [
                ("u0", DropReason::Summarized),
                ("a0", DropReason::Summarized)
            ]
        );
        // Squeezed by key-messages, the block goes back as it came.
        let squeezed = crate::block_on(crate::Pipeline::named("key-messages", None).unwrap().run(
            &log,
            "",
            &crate::ContextBudget::new(200, 20),
            &counter,
        ))
        .unwrap();
        assert!(squeezed.window.entries().contains(&answer));
    }

    #[test]
    fn repair_on_read() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let mut hidden = e("h", LogRole::Assistant, "ui only");
        hidden.include_in_context = false;
        let log = vec![
            e("s", LogRole::System, "You are helpful."),
            e("sum", LogRole::System, "CONVERSATION_SUMMARY\nearlier work"),
            e("u1", LogRole::User, "hi"),
            result("r0", "nowhere"),
            call("a1", &["c1", "c2"]),
            result("r1", "c1"),
            result("r1b", "c1"),
            hidden,
            e("u2", LogRole::User, "next"),
        ];
        let w = Window::prepare(&log, &counter);
        let kinds: Vec<UnitKind> = w.units.iter().map(|u| u.kind).collect();
        assert_eq!(
            kinds,
            [
                UnitKind::Summary,
                UnitKind::User,
                UnitKind::ToolGroup,
                UnitKind::User
            ]
        );
        let group: Vec<&str> = w.units[2].entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(group, ["a1", "r1", "c2#aborted"]);
        assert!(w.units[2].entries[2].text().contains("[aborted]"));
        let dropped: Vec<(&str, DropReason)> = w
            .dropped
            .iter()
            .map(|d| (d.id.as_str(), d.reason))
            .collect();
        assert_eq!(
            dropped,
            [
                ("s", DropReason::HistoricalSystem),
                ("r0", DropReason::OrphanResult),
                ("r1b", DropReason::DuplicateResult),
                ("h", DropReason::Excluded),
            ]
        );
        assert!(w.check(Some("u2"), usize::MAX).is_ok());
    }

    #[test]
    fn fit_keeps_the_latest_user_message() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let log = vec![
            e("u1", LogRole::User, &"old ".repeat(100)),
            e("a1", LogRole::Assistant, &"reply ".repeat(100)),
            e("u2", LogRole::User, "latest"),
            call("a2", &["c8"]),
            result("r8", "c8"),
            call("a3", &["c9"]),
            result("r9", "c9"),
        ];
        let mut w = Window::prepare(&log, &counter);
        let small = w.units[2].tokens + w.units[4].tokens + w.reply_priming;
        assert!(w.fit(small, DropReason::OverBudget));
        assert_eq!(w.kept_ids(), ["u2", "a3", "r9"]);
        // The results the model is about to read stay while a strategy aims at its target…
        assert!(!w.fit_keeping_pending(1, DropReason::OverBudget));
        assert_eq!(w.kept_ids(), ["u2", "a3", "r9"]);
        // …and go last under the hard limit.
        assert!(!w.fit(1, DropReason::OverBudget));
        assert_eq!(w.kept_ids(), ["u2"]);
        let ids: Vec<&str> = w.dropped.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["u1", "a1", "a2", "r8", "a3", "r9"]);
    }

    #[test]
    fn fit_drops_a_final_tool_group_that_is_not_after_the_latest_user_message() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let log = vec![
            call("a1", &["c1"]),
            result("r1", "c1"),
            e("u2", LogRole::User, "latest"),
        ];
        let mut w = Window::prepare(&log, &counter);
        assert!(!w.fit(1, DropReason::OverBudget));
        assert_eq!(w.kept_ids(), ["u2"]);
    }
}
