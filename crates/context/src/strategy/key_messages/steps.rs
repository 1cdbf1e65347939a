//! The steps of key-messages that shrink a window, each until a goal is met: previews of
//! protected results, traces shrunk a level, older user messages cut to their key sentences,
//! older answers and rounds dropped, the pending results previewed, the last rounds kept.

use ba_protocol::{Content, LogRole};

use super::KeyMessages;
use super::trace::{TraceLevel, call_names, full_output, tool_of};
use crate::message::MessageCounter;
use crate::salience::{Rarity, cut_parts, sentence_salience, sentences, trace_text};
use crate::strategy::CompressCx;
use crate::window::{
    ChangeKind, Changed, DropReason, Unit, UnitKind, Window, holds_provider_compaction,
};

/// The opening characters a user message keeps when none of its sentences is chosen.
const QUESTION_HEAD_CHARS: usize = 100;

impl KeyMessages {
    /// Units kept whole whatever happens in step 1: user messages, summaries, the current
    /// task's work and the most recent units.
    pub(super) fn protected(&self, window: &Window) -> Vec<bool> {
        let n = window.units.len();
        let latest = window.latest_user();
        window
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                matches!(u.kind, UnitKind::User | UnitKind::Summary)
                    || i + self.recent >= n
                    || latest.is_some_and(|l| i >= l)
            })
            .collect()
    }

    /// Replaces unit `i` by `reduced`, recording its changes; `total` (the window's tokens)
    /// follows.
    /// Entries of the old unit that the new one no longer holds (the results of a folded
    /// group) are recorded as dropped, folded.
    pub(super) fn apply(
        window: &mut Window,
        i: usize,
        reduced: (Unit, Vec<Changed>),
        total: &mut usize,
    ) {
        let (unit, changes) = reduced;
        *total = *total + unit.tokens - window.units[i].tokens;
        let gone: Vec<String> = window.units[i]
            .entries
            .iter()
            .filter(|e| !unit.entries.iter().any(|n| n.id == e.id))
            .filter(|e| {
                !window
                    .changed
                    .iter()
                    .any(|c| c.id == e.id && c.kind == ChangeKind::AbortedResult)
            })
            .map(|e| e.id.clone())
            .collect();
        // What changed in an entry that left is no longer a change of the window.
        window.changed.retain(|c| !gone.contains(&c.id));
        for id in gone {
            window.drop_id(&id, DropReason::Folded);
        }
        window.units[i] = unit;
        // An entry changed the same way twice (folded, then folded further) is one change.
        // A folded entry was traced before: the fold is what it is now.
        for c in changes {
            if c.kind == ChangeKind::Folded {
                window.changed.retain(|o| o.id != c.id || o.kind == c.kind);
            }
            if !window.changed.contains(&c) {
                window.changed.push(c);
            }
        }
    }

    /// Step 2: previews of protected tool results (not the pending ones) and key sentences of
    /// long protected assistant texts, oldest first, until the target is met.
    pub(super) fn shrink_protected(
        &self,
        window: &mut Window,
        target: usize,
        counter: &MessageCounter,
    ) {
        let end = window.pending_start().unwrap_or(window.units.len());
        let mut total = window.tokens();
        for i in 0..end {
            if total <= target {
                return;
            }
            let unit = &window.units[i];
            let changed = match unit.kind {
                UnitKind::ToolGroup => {
                    let mut out = unit.clone();
                    let mut changes = Vec::new();
                    let names = call_names(unit);
                    for e in out.entries.iter_mut().filter(|e| e.role == LogRole::Tool) {
                        let text = e.text();
                        let tool = tool_of(e, &names);
                        let ok = e.is_error != Some(true);
                        if let Some(t) =
                            trace_text(&text, tool, ok, &full_output(e), self.preview_chars)
                        {
                            e.content = Some(Content::Text(t));
                            changes.push(Changed {
                                id: e.id.clone(),
                                kind: ChangeKind::ToolResultPreview,
                            });
                        }
                    }
                    out.recount(counter);
                    (!changes.is_empty()).then_some((out, changes))
                }
                UnitKind::Assistant => self.reduced(unit, TraceLevel::Lines, counter),
                _ => None,
            };
            if let Some(c) = changed {
                Self::apply(window, i, c, &mut total);
            }
        }
    }

    /// Traces (and cut texts) shrink to `level` until the window is within `goal`. The current
    /// task's work keeps its calls paired.
    ///
    /// The front a previous compaction settled (see `settled`) is what a prompt cache
    /// holds: a change there makes the whole request after it uncached. So the units after it —
    /// rewritten by this compaction anyway — shrink first, oldest first; only if that is not
    /// enough does the front shrink, oldest first, and then down to `front_goal` (below the
    /// goal): a front rewritten once leaves room for the next compactions, which then touch
    /// only what came after it.
    pub(super) fn shrink_traces(
        &self,
        window: &mut Window,
        level: TraceLevel,
        goal: usize,
        front_goal: usize,
        counter: &MessageCounter,
    ) {
        self.shrink_traces_with(window, level, goal, front_goal, false, counter);
    }

    /// [`Self::shrink_traces`]; with `fold_current`, the current task's older work (all but
    /// its most recent units) is reduced at `level` as older rounds are — folded — instead of
    /// keeping its calls paired.
    pub(super) fn shrink_traces_with(
        &self,
        window: &mut Window,
        level: TraceLevel,
        goal: usize,
        front_goal: usize,
        fold_current: bool,
        counter: &MessageCounter,
    ) {
        let end = window.pending_start().unwrap_or(window.units.len());
        let latest = window.latest_user();
        let front = self.settled(window, counter).min(end);
        let recent_from = end.saturating_sub(self.recent);
        let mut total = window.tokens();
        for (range, goal) in [(front..end, goal), (0..front, front_goal.min(goal))] {
            // A front that must change goes to the folded level at once: one rewrite, not one
            // a level.
            let deepest = if range.start == 0 && level == TraceLevel::Top {
                TraceLevel::Key
            } else {
                level
            };
            for i in range {
                if total <= goal {
                    break;
                }
                let current = latest.is_some_and(|l| i > l);
                let level = deepest;
                let level = if current && !(fold_current && i < recent_from) {
                    level.paired()
                } else {
                    level
                };
                if let Some(c) = self.reduced(&window.units[i], level, counter) {
                    Self::apply(window, i, c, &mut total);
                }
            }
            // The front is touched only when what follows it could not meet the goal.
            if total <= goal.max(front_goal) {
                return;
            }
        }
    }

    /// How many units at the start of `window` an earlier compaction settled: the front up to
    /// the first unit a trace would still change (a tool result or an answer longer than its
    /// trace). A window never compacted settles nothing before its first large output.
    pub(super) fn settled(&self, window: &Window, counter: &MessageCounter) -> usize {
        window
            .units
            .iter()
            .position(|u| self.reduced(u, TraceLevel::Lines, counter).is_some())
            .unwrap_or(window.units.len())
    }

    /// Step 5: the older user messages (never the latest) keep their key sentences until the
    /// window fits `limit`.
    pub(super) fn cut_old_users(
        &self,
        window: &mut Window,
        limit: usize,
        counter: &MessageCounter,
    ) {
        let total = window.tokens();
        self.cut_users(window, total, limit, counter);
    }

    /// The older user messages keep their key sentences until the floor (what only the last
    /// steps can take out) is within `goal`.
    pub(super) fn cut_old_users_to(
        &self,
        window: &mut Window,
        goal: usize,
        counter: &MessageCounter,
    ) {
        let floor = Self::floor(window);
        self.cut_users(window, floor, goal, counter);
    }

    /// Cuts the older user messages (never the latest) to their key sentences while `total`
    /// (kept up to date) is over `goal`. The sentences are chosen across all those messages
    /// at once, best first: what salience says (requirements, figures, codes, names, paths)
    /// and what only one message of the conversation says (see `Rarity`), a sentence said in
    /// several turns kept once — so a message of small talk gives up its room to one that
    /// states a constraint. Sentences a compaction kept before are kept first, so a later
    /// compaction leaves the cut messages as they are while it can. Each message keeps at most
    /// `user_key_chars` characters; the room shrinks until the goal is met.
    pub(super) fn cut_users(
        &self,
        window: &mut Window,
        total: usize,
        goal: usize,
        counter: &MessageCounter,
    ) {
        if total <= goal {
            return;
        }
        let latest = window.latest_user();
        let eligible: Vec<usize> = (0..window.units.len())
            .take_while(|&i| Some(i) != latest)
            .filter(|&i| {
                window.units[i].kind == UnitKind::User && !window.units[i].entries.is_empty()
            })
            .collect();
        if eligible.is_empty() {
            return;
        }
        let texts: Vec<String> = eligible
            .iter()
            .map(|&i| window.units[i].entries[0].text().into_owned())
            .collect();
        let all_users: Vec<String> = window
            .units
            .iter()
            .filter(|u| u.kind == UnitKind::User)
            .filter_map(|u| u.entries.first())
            .map(|e| e.text().into_owned())
            .collect();
        let rarity = Rarity::of(all_users.iter().map(String::as_str));
        // (message, sentence index, score, chars)
        let mut pool: Vec<(usize, usize, i32, usize)> = Vec::new();
        let mut parsed: Vec<(Vec<&str>, usize, bool)> = Vec::new();
        for (m, text) in texts.iter().enumerate() {
            let (kept, before) = cut_parts(text);
            let list = sentences(kept);
            let was_cut = before > 0 || kept.len() != text.len();
            for (k, sentence) in list.iter().enumerate() {
                let mut score = sentence_salience(sentence).total + rarity.novelty(sentence);
                if was_cut {
                    score += 2;
                }
                pool.push((m, k, score, sentence.chars().count() + 1));
            }
            parsed.push((list, before, was_cut));
        }
        // Best first; a tie goes to the later message, then to the earlier sentence.
        pool.sort_by(|a, b| b.2.cmp(&a.2).then(b.0.cmp(&a.0)).then(a.1.cmp(&b.1)));
        let user_tokens: usize = eligible.iter().map(|&i| window.units[i].tokens).sum();
        let user_chars: usize = texts.iter().map(|t| t.chars().count()).sum();
        let keep_tokens = user_tokens.saturating_sub(total - goal);
        let mut room = user_chars * keep_tokens / user_tokens.max(1);
        for _ in 0..8 {
            let mut chosen: Vec<Vec<usize>> = vec![Vec::new(); texts.len()];
            let mut per_message = vec![0usize; texts.len()];
            let mut said: Vec<&str> = Vec::new();
            let mut used = 0;
            for &(m, k, score, n) in &pool {
                let sentence = parsed[m].0[k];
                if score <= 0 || said.contains(&sentence) {
                    continue;
                }
                if used + n > room || per_message[m] + n > self.user_key_chars {
                    continue;
                }
                used += n;
                per_message[m] += n;
                said.push(sentence);
                chosen[m].push(k);
            }
            let mut new_total = total;
            let mut rewritten: Vec<(usize, String)> = Vec::new();
            for (m, &i) in eligible.iter().enumerate() {
                let (list, before, _) = &parsed[m];
                if chosen[m].len() == list.len() {
                    continue;
                }
                chosen[m].sort_unstable();
                let left_out = list.len() - chosen[m].len() + before;
                let kept: Vec<&str> = chosen[m].iter().map(|&k| list[k]).collect();
                let text = if kept.is_empty() {
                    // A question never leaves the window wholly: its opening words stay (what
                    // it was about), as a trace keeps the head of an output.
                    let first = list.first().copied().unwrap_or_default();
                    let head: String = first.chars().take(QUESTION_HEAD_CHARS).collect();
                    if head.is_empty() {
                        format!("[… {left_out} sentence(s) left out]")
                    } else if head.len() < first.len() {
                        format!("{}… [… {left_out} sentence(s) left out]", head.trim_end())
                    } else {
                        format!("{head} [… {} sentence(s) left out]", left_out - 1)
                    }
                } else {
                    format!("{} [… {left_out} sentence(s) left out]", kept.join(" "))
                };
                let mut unit = window.units[i].clone();
                unit.entries[0].content = Some(Content::Text(text.clone()));
                unit.recount(counter);
                new_total = new_total + unit.tokens - window.units[i].tokens;
                rewritten.push((i, text));
            }
            if new_total <= goal || room == 0 {
                for (i, text) in rewritten {
                    let unit = &mut window.units[i];
                    let e = &mut unit.entries[0];
                    if e.text() == text {
                        continue;
                    }
                    e.content = Some(Content::Text(text));
                    if !window
                        .changed
                        .iter()
                        .any(|c| c.id == e.id && c.kind == ChangeKind::KeySentences)
                    {
                        window.changed.push(Changed {
                            id: e.id.clone(),
                            kind: ChangeKind::KeySentences,
                        });
                    }
                    unit.recount(counter);
                }
                return;
            }
            room = room * 3 / 4;
        }
    }

    /// Step 6: the results of the pending tool group become previews, then traces, until the
    /// window fits `limit`.
    pub(super) fn shrink_pending(
        &self,
        window: &mut Window,
        limit: usize,
        counter: &MessageCounter,
    ) {
        let Some(p) = window.pending_start() else {
            return;
        };
        for chars in [self.preview_chars, self.trace_chars, self.trace_top_chars] {
            if window.tokens() <= limit {
                return;
            }
            let unit = &mut window.units[p];
            let mut changed = Vec::new();
            let names = call_names(unit);
            for e in unit.entries.iter_mut().filter(|e| e.role == LogRole::Tool) {
                let text = e.text();
                let tool = tool_of(e, &names);
                let ok = e.is_error != Some(true);
                if let Some(t) = trace_text(&text, tool, ok, &full_output(e), chars) {
                    e.content = Some(Content::Text(t));
                    changed.push(Changed {
                        id: e.id.clone(),
                        kind: ChangeKind::ToolResultPreview,
                    });
                }
            }
            unit.recount(counter);
            window.changed.extend(changed);
        }
    }

    /// Step 4: whole units of the oldest rounds leave — traces and answers, never user
    /// messages or summaries, never the current task's work — until the window fits `limit`.
    pub(super) fn drop_old_traces(&self, window: &mut Window, limit: usize) {
        Self::drop_oldest(window, limit, |k| {
            matches!(k, UnitKind::ToolGroup | UnitKind::Assistant)
        });
    }

    /// The answers of older rounds (assistant text without calls, before the latest user
    /// message) leave, oldest first, until the window fits `limit`.
    pub(super) fn drop_old_answers(&self, window: &mut Window, limit: usize) {
        Self::drop_oldest(window, limit, |k| k == UnitKind::Assistant);
    }

    /// Units of a kind `leaves` accepts, before the latest user message, leave oldest first
    /// until the window fits `limit`.
    pub(super) fn drop_oldest(
        window: &mut Window,
        limit: usize,
        leaves: impl Fn(UnitKind) -> bool,
    ) {
        let latest = window.latest_user().unwrap_or(0);
        let mut total = window.tokens();
        let mut gone = vec![false; window.units.len()];
        for (i, unit) in window.units.iter().enumerate().take(latest) {
            if total <= limit {
                break;
            }
            if leaves(unit.kind) && !unit.entries.iter().any(holds_provider_compaction) {
                gone[i] = true;
                total -= unit.tokens;
            }
        }
        window.retain(DropReason::OlderRound, |i, _| !gone[i]);
    }

    /// The tokens no step before the last ones can take out: user messages, summaries, the
    /// results the model is about to read, and the reply priming.
    pub(super) fn floor(window: &Window) -> usize {
        let pending = window.pending_start();
        window.reply_priming
            + window
                .units
                .iter()
                .enumerate()
                .filter(|(i, u)| {
                    matches!(u.kind, UnitKind::User | UnitKind::Summary)
                        || pending.is_some_and(|p| *i >= p)
                })
                .map(|(_, u)| u.tokens)
                .sum::<usize>()
    }

    /// The current task's work before the pending results (what follows the latest user
    /// message) is reduced to header traces, oldest first, until the window fits `limit`.
    pub(super) fn shrink_current_work(
        &self,
        window: &mut Window,
        limit: usize,
        counter: &MessageCounter,
    ) {
        let Some(latest) = window.latest_user() else {
            return;
        };
        let end = window.pending_start().unwrap_or(window.units.len());
        let mut total = window.tokens();
        for i in latest + 1..end {
            if total <= limit {
                return;
            }
            if let Some(c) = self.reduced(&window.units[i], TraceLevel::PairedHeader, counter) {
                Self::apply(window, i, c, &mut total);
            }
        }
    }

    /// The steps that act only over the limit: older rounds leave, the oldest user messages
    /// are cut to their key sentences, the pending results are previewed, and last the window
    /// keeps its last rounds only.
    pub(super) fn over_the_limit(&self, mut window: Window, cx: CompressCx<'_>) -> Window {
        if window.tokens() > cx.limit {
            self.drop_old_traces(&mut window, cx.limit);
        }
        if window.tokens() > cx.limit {
            self.shrink_current_work(&mut window, cx.limit, cx.counter);
        }
        if window.tokens() > cx.limit {
            self.cut_old_users(&mut window, cx.limit, cx.counter);
        }
        if window.tokens() > cx.limit {
            self.shrink_pending(&mut window, cx.limit, cx.counter);
        }
        if window.tokens() > cx.limit {
            let first = (window.last_round() + 1)
                .saturating_sub(self.fallback_rounds)
                .max(1);
            window.retain(DropReason::OutsideRecentRounds, |_, u| {
                u.kind == UnitKind::Summary || u.round >= first
            });
        }
        window
    }
}
