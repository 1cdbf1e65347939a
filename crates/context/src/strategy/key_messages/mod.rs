//! Key-message extraction: tool groups stay whole or leave a trace, explainable
//! scores choose what stays whole, and fallbacks degrade step by step, stopping as soon as the
//! window fits. The budget is shared, not first-come: user messages keep their key sentences,
//! but not at the cost of every trace's figures.
//!
//! 0. When what only the last steps can take out (user messages, summaries, the results the
//!    model is about to read) is over three fifths of the limit, the oldest user messages (never
//!    the latest) are cut to their key sentences — the constraints, codes, names and numbers
//!    stay — first to a user-message cap, then to a third of it, then to an eighth.
//! 1. The protected set stays whole: user messages, summaries, the current task's work (what
//!    follows the latest user message) and the most recent units. Every other tool group is
//!    reduced to a *trace* — its calls, a preview of each result (the lines carrying totals,
//!    figures and identifiers, long lines cut around their figure, see [`crate::salience`]) and
//!    where the full output is — and every other long assistant text to its key sentences.
//!    Then units are put back whole, highest score first, while the window stays under the
//!    target.
//! 2. Over the target: the protected tool results (not the ones the model is about to read)
//!    become previews and long protected assistant texts their key sentences.
//! 3. Still over: traces shrink, oldest first, to their top lines.
//! 4. Still over halfway from the target to the trigger (a window left above the trigger would
//!    be compacted again at every request), the oldest groups are *folded*: their calls and
//!    results leave and one assistant note stays with each result's header and key line — half
//!    the tokens of a paired trace, so an older round keeps its figure where a paired trace
//!    could keep only its header. Over the limit (the budget itself; the target is only a
//!    preference), the key lines are the last to go: the oldest user messages are cut to their
//!    key sentences, the answers of older rounds leave, and only then do notes shrink to their
//!    headers and notes and answers of the oldest rounds leave.
//! 5. Still over the limit — the user messages alone do not fit — the oldest user messages are
//!    cut to their key sentences.
//! 6. Still over: the results the model is about to read become previews, then traces (a
//!    result larger than the whole budget is better read in part than lost with the rest).
//! 7. Still over: the extreme fallback keeps the last rounds only.
//!
//! Every dropped or shortened entry is recorded with its reason. This file holds the strategy,
//! its scores and the order of the steps; each step is in `steps`, and how a unit becomes its
//! trace or its folded note in `trace`.

mod steps;
mod trace;

use async_trait::async_trait;

use self::trace::TraceLevel;
use super::{CompressCx, CompressionStrategy};
use crate::error::Result;
use crate::salience::has_path;
use crate::window::{Changed, Unit, UnitKind, Window};

/// Characters of each entry the text signals of a score read.
pub const SCORE_CHARS: usize = 2_000;

/// The score of a unit, with the part each signal contributed.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// The sum of the parts.
    pub total: f64,
    /// Each signal and its contribution.
    pub parts: Vec<(&'static str, f64)>,
}

/// Key-message extraction.
#[derive(Debug, Clone)]
pub struct KeyMessages {
    /// Units at the end of the conversation that are always kept whole.
    pub recent: usize,
    /// Words that mark a requirement or a decision.
    pub keywords: Vec<String>,
    /// Tool results above this many tokens are penalised.
    pub large_tool_result: usize,
    /// Characters of lines a trace keeps of each result.
    pub trace_chars: usize,
    /// Characters of lines a reduced trace keeps.
    pub trace_top_chars: usize,
    /// Characters of the one key line a minimal trace keeps.
    pub trace_key_chars: usize,
    /// Characters a preview of a protected tool result keeps.
    pub preview_chars: usize,
    /// Characters above which assistant text outside the protected set is cut to its key
    /// sentences (and protected text too, in the fallbacks).
    pub long_text_chars: usize,
    /// Characters the key sentences of a user message that must shrink keep.
    pub user_key_chars: usize,
    /// Characters a string argument of a traced call keeps.
    pub argument_chars: usize,
    /// Rounds the last-resort fallback keeps.
    pub fallback_rounds: usize,
}

impl Default for KeyMessages {
    fn default() -> Self {
        Self {
            recent: 6,
            keywords: [
                "must",
                "should",
                "need",
                "required",
                "important",
                "decid",
                "必须",
                "需要",
            ]
            .map(str::to_owned)
            .to_vec(),
            large_tool_result: 2_000,
            trace_chars: 320,
            trace_top_chars: 120,
            trace_key_chars: 60,
            preview_chars: 1_200,
            long_text_chars: 1_200,
            user_key_chars: 400,
            argument_chars: 160,
            fallback_rounds: 4,
        }
    }
}

fn has_code(text: &str) -> bool {
    text.contains("```")
        || text.lines().any(|l| {
            let t = l.trim_start();
            t.starts_with("fn ")
                || t.starts_with("def ")
                || t.starts_with("SELECT ")
                || t.starts_with("import ")
        })
}

fn has_numbers(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(2)
        .any(|w| w[0].is_ascii_digit() && w[1].is_ascii_digit())
}

impl KeyMessages {
    /// Scores the unit at `index` of `n` units: keywords, file paths, code, numbers, recency,
    /// final answers and errors raise it; large tool results lower it.
    ///
    /// The text signals are read from the first [`SCORE_CHARS`] characters of each entry: a
    /// keyword or a path far inside a long tool output says little, and reading only the head
    /// keeps scoring a long conversation cheap.
    pub fn score(&self, unit: &Unit, index: usize, n: usize) -> Score {
        let mut text = String::new();
        for e in &unit.entries {
            let t = e.text();
            let end = t
                .char_indices()
                .nth(SCORE_CHARS)
                .map_or(t.len(), |(i, _)| i);
            text.push_str(&t[..end]);
            text.push('\n');
        }
        let text = text.trim_end().to_owned();
        let lower = text.to_lowercase();
        let mut parts = Vec::new();
        let hits = self
            .keywords
            .iter()
            .filter(|k| lower.contains(k.as_str()))
            .count()
            .min(3);
        if hits > 0 {
            parts.push(("keywords", hits as f64));
        }
        if has_path(&text) {
            parts.push(("file_path", 2.0));
        }
        if has_code(&text) {
            parts.push(("code", 2.0));
        }
        if has_numbers(&text) {
            parts.push(("numbers", 1.0));
        }
        if n > 1 {
            parts.push(("recency", 3.0 * index as f64 / (n - 1) as f64));
        }
        if unit.kind == UnitKind::Assistant && !text.is_empty() {
            parts.push(("answer", 1.0));
        }
        if unit
            .entries
            .iter()
            .any(|e| e.is_error == Some(true) || e.llm_error.is_some())
        {
            parts.push(("error", 1.0));
        }
        if unit.kind == UnitKind::ToolGroup {
            if unit.tokens > 4 * self.large_tool_result {
                parts.push(("large_tool_result", -4.0));
            } else if unit.tokens > self.large_tool_result {
                parts.push(("large_tool_result", -2.0));
            }
        }
        Score {
            total: parts.iter().map(|(_, v)| v).sum(),
            parts,
        }
    }
}

#[async_trait]
impl CompressionStrategy for KeyMessages {
    fn name(&self) -> &str {
        "key-messages"
    }

    async fn compress(&self, mut window: Window, cx: CompressCx<'_>) -> Result<Window> {
        // The budget is shared, not first-come: user messages that would leave the tool
        // traces less than their share are cut to their key sentences (oldest first, never
        // the latest) before any trace loses its figures.
        let users_share = cx.limit - cx.limit * 2 / 5;
        if Self::floor(&window) > users_share {
            self.cut_old_users_to(&mut window, users_share, cx.counter);
        }
        if Self::floor(&window) > cx.limit {
            // The user messages and the current work alone are over the budget: every older
            // trace would leave anyway, so none is made.
            return Ok(self.over_the_limit(window, cx));
        }
        let n = window.units.len();
        let protected = self.protected(&window);
        // Step 1: every unprotected unit at its reduced form, then back whole by score.
        let reduced: Vec<Option<(Unit, Vec<Changed>)>> = (0..n)
            .map(|i| {
                (!protected[i])
                    .then(|| self.reduced(&window.units[i], TraceLevel::Lines, cx.counter))
                    .flatten()
            })
            .collect();
        let mut used = window.reply_priming
            + (0..n)
                .map(|i| match &reduced[i] {
                    Some((r, _)) => r.tokens,
                    None => window.units[i].tokens,
                })
                .sum::<usize>();
        let mut whole = vec![true; n];
        for (i, r) in reduced.iter().enumerate() {
            if r.is_some() {
                whole[i] = false;
            }
        }
        if used <= cx.target {
            let mut scored: Vec<(usize, f64)> = (0..n)
                .filter(|&i| !whole[i])
                .map(|i| (i, self.score(&window.units[i], i, n).total))
                .collect();
            // Highest score first; the newer unit wins a tie.
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
            for (i, _) in scored {
                let extra = window.units[i].tokens
                    - reduced[i]
                        .as_ref()
                        .map_or(window.units[i].tokens, |r| r.0.tokens);
                if used + extra <= cx.target {
                    used += extra;
                    whole[i] = true;
                }
            }
        }
        let mut total = window.tokens();
        for (i, r) in reduced.into_iter().enumerate() {
            if let Some(r) = r.filter(|_| !whole[i]) {
                Self::apply(&mut window, i, r, &mut total);
            }
        }
        // Step 2 and the first shrink of the traces aim at the target; what would lose a
        // trace's figures, a round or a user's words only acts over the limit.
        if window.tokens() > cx.target {
            self.shrink_protected(&mut window, cx.target, cx.counter);
        }
        // A front that must change changes once for several compactions: down to halfway
        // between the target and the trigger's distance below it.
        let headroom = cx.trigger.saturating_sub(cx.target) / 2;
        if window.tokens() > cx.target {
            let front_goal = cx.target.saturating_sub(headroom);
            self.shrink_traces(
                &mut window,
                TraceLevel::Top,
                cx.target,
                front_goal,
                cx.counter,
            );
        }
        // Traces reduced to their header keep the pairs and the paths but lose their figures:
        // only to stay clear of the trigger (a window left over it would be compacted again at
        // every request, and its front would never be cached) or within the limit.
        let clear_of_trigger = (cx.target + cx.trigger.min(cx.limit)) / 2;
        if window.tokens() > clear_of_trigger {
            let front_goal = clear_of_trigger.saturating_sub(headroom);
            self.shrink_traces(
                &mut window,
                TraceLevel::Key,
                clear_of_trigger,
                front_goal,
                cx.counter,
            );
            // A long task's own work alone can keep the window over the trigger (a hundred
            // calls after one question): its older groups fold as older rounds do, or every
            // request would compact again.
            if window.tokens() > clear_of_trigger {
                self.shrink_traces_with(
                    &mut window,
                    TraceLevel::Key,
                    clear_of_trigger,
                    front_goal,
                    true,
                    cx.counter,
                );
            }
        }
        // Over the limit, the traces' figure lines are the last to go: the user messages'
        // prose goes first (their key sentences stay), then the answers of older rounds, and
        // only then do traces shrink to their header.
        if window.tokens() > cx.limit {
            self.cut_old_users(&mut window, cx.limit, cx.counter);
        }
        if window.tokens() > cx.limit {
            self.drop_old_answers(&mut window, cx.limit);
        }
        if window.tokens() > cx.limit {
            self.shrink_traces(
                &mut window,
                TraceLevel::Header,
                cx.limit,
                cx.limit,
                cx.counter,
            );
        }
        Ok(self.over_the_limit(window, cx))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageCounter;
    use crate::tokens::Encoding;
    use crate::window::{ChangeKind, DropReason};
    use ba_protocol::LogRole;
    use ba_protocol::{LogEntry, LogToolCall};

    #[test]
    fn scores_are_explained() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let km = KeyMessages::default();
        let log = vec![
            LogEntry::new("a", LogRole::Assistant, "t")
                .with_text("We must fix src/main.rs: 42 tests fail.\n```rust\nfn main() {}\n```"),
        ];
        let w = Window::prepare(&log, &counter);
        let s = km.score(&w.units[0], 0, 1);
        let names: Vec<&str> = s.parts.iter().map(|p| p.0).collect();
        assert_eq!(
            names,
            ["keywords", "file_path", "code", "numbers", "answer"]
        );
        assert!((s.total - 7.0).abs() < 1e-9);
    }

    #[test]
    fn a_traced_group_keeps_its_calls_paired_and_its_total() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let km = KeyMessages::default();
        let mut call = LogEntry::new("a1", LogRole::Assistant, "t").with_text("Let me query.");
        call.tool_calls = Some(vec![LogToolCall::new(
            "c1",
            "query_database",
            &serde_json::json!({"query": format!("SELECT {}", "x, ".repeat(200))}),
        )]);
        let mut rows = String::from("region,amount\n");
        for i in 0..400 {
            rows.push_str(&format!("R{i},{}\n", i * 7));
        }
        rows.push_str("GRAND TOTAL,558600\n");
        let mut result = LogEntry::new("r1", LogRole::Tool, "t").with_text(rows);
        result.tool_call_id = Some("c1".into());
        result.tool_name = Some("query_database".into());
        result.records.data_ref = Some("data/spill/c1_ab.json".into());
        let w = Window::prepare(&[call, result], &counter);
        let (traced, changes) = km
            .reduced(&w.units[0], TraceLevel::Lines, &counter)
            .unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(traced.entries[0].calls()[0].id, "c1");
        assert!(traced.entries[0].calls()[0].arguments_json().is_ok());
        let text = traced.entries[1].text();
        assert!(text.contains("GRAND TOTAL · amount = 558600"), "{text}");
        assert!(
            text.contains("full output: file_reader data/spill/c1_ab.json or recall r1"),
            "{text}"
        );
        assert!(
            traced.tokens * 5 < w.units[0].tokens,
            "{} vs {}",
            traced.tokens,
            w.units[0].tokens
        );
        // Folded, the group is one note: no call, its key line and the way back, cheaper than
        // the paired trace; folded again, the header alone.
        let (folded, changes) = km.reduced(&traced, TraceLevel::Key, &counter).unwrap();
        assert_eq!(folded.entries.len(), 1);
        assert!(folded.entries[0].calls().is_empty());
        assert_eq!(
            changes,
            [Changed {
                id: "a1".into(),
                kind: ChangeKind::Folded
            }]
        );
        let note = folded.entries[0].text();
        assert!(note.contains("GRAND TOTAL · amount = 558600"), "{note}");
        assert!(
            note.starts_with(
                "[trace of query_database; full output: file_reader data/spill/c1_ab.json or recall r1]"
            ),
            "{note}"
        );
        assert!(
            folded.tokens * 2 < traced.tokens,
            "{} vs {}",
            folded.tokens,
            traced.tokens
        );
        let (header, _) = km.reduced(&folded, TraceLevel::Header, &counter).unwrap();
        assert!(
            !header.entries[0].text().contains('\n'),
            "{}",
            header.entries[0].text()
        );
        assert!(km.reduced(&header, TraceLevel::Lines, &counter).is_none());
        // In a window, the results of a folded group are dropped, folded, and the note is the
        // one change of its entry.
        let mut w = w;
        w.changed.extend(changes);
        let mut total = w.tokens();
        KeyMessages::apply(&mut w, 0, (folded, Vec::new()), &mut total);
        assert_eq!(total, w.tokens());
        assert_eq!(
            w.dropped,
            [ba_protocol::Dropped {
                id: "r1".into(),
                reason: DropReason::Folded
            }]
        );
        w.check(None, usize::MAX).unwrap();
    }
}

#[cfg(test)]
mod later_compactions {
    use crate::pipeline::Pipeline;
    use crate::tokens::Encoding;
    use crate::{ContextBudget, MessageCounter, block_on};
    use ba_protocol::{LogEntry, LogRole, LogToolCall};

    /// `rounds` rounds from `from`: a question, a query, 150 rows with a total, an answer.
    fn rounds(from: usize, rounds: usize) -> Vec<LogEntry> {
        let mut log = Vec::new();
        for r in from..from + rounds {
            log.push(
                LogEntry::new(format!("u{r}"), LogRole::User, "t").with_text(format!(
                    "Question {r}: how did region {r} do? Please keep amounts in EUR."
                )),
            );
            let mut call = LogEntry::new(format!("a{r}"), LogRole::Assistant, "t");
            call.tool_calls = Some(vec![LogToolCall::new(
                format!("c{r}"),
                "query_database",
                &serde_json::json!({"query": format!("SELECT * FROM sales WHERE region = {r}")}),
            )]);
            log.push(call);
            let mut rows = String::from("region,month,amount\n");
            for i in 0..150 {
                rows.push_str(&format!(
                    "R{r},2024-{:02},{}.{:02}\n",
                    1 + i % 12,
                    100 + i * 7,
                    i % 100
                ));
            }
            rows.push_str(&format!("TOTAL_R{r},,{}.50", 90_000 + r));
            let mut result = LogEntry::new(format!("t{r}"), LogRole::Tool, "t").with_text(rows);
            result.tool_call_id = Some(format!("c{r}"));
            result.tool_name = Some("query_database".into());
            log.push(result);
            log.push(
                LogEntry::new(format!("s{r}"), LogRole::Assistant, "t")
                    .with_text(format!("Region {r} is steady.")),
            );
        }
        log
    }

    #[test]
    fn a_later_compaction_leaves_the_settled_head_as_it_is() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let budget = ContextBudget::new(24_000, 3_000);
        let pipeline = Pipeline::named("key-messages", None).unwrap();
        let first = block_on(pipeline.run(&rounds(0, 30), "", &budget, &counter)).unwrap();
        let head = first.window.entries();
        assert!(head.iter().any(|e| e.text().starts_with("[trace of ")));
        // The next rounds push the window over the trigger again.
        let mut log = head.clone();
        log.extend(rounds(30, 12));
        let second = block_on(pipeline.run(&log, "", &budget, &counter)).unwrap();
        assert!(!second.window.changed.is_empty(), "no second compaction");
        let again = second.window.entries();
        // What the first compaction shortened stays byte for byte; only what it had kept whole
        // (its most recent rounds, old now) and the new rounds are shortened.
        let settled = head
            .iter()
            .rposition(|e| e.text().starts_with("[trace of "))
            .unwrap()
            + 1;
        let same = head.iter().zip(&again).take_while(|(a, b)| a == b).count();
        assert!(
            same >= settled,
            "the head changed at entry {}",
            head[same].id
        );
        // And the new rounds' totals are still in the window.
        let text: String = again.iter().map(|e| e.text().into_owned()).collect();
        assert!((30..42).all(|r| text.contains(&format!("{}.50", 90_000 + r))));
    }
}
