//! Summary compression: the older part of the window is replaced by one summary-class system
//! entry written by a [`Summarizer`]; hybrid picks what to keep by key messages first.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ba_protocol::claude_code::SUMMARY_PREFIX;
use ba_protocol::{LogEntry, LogRole};

use super::{CompressCx, CompressionStrategy, KeyMessages};
use crate::error::{ContextError, Result};
use crate::message::entry_hash;
use crate::salience::{line_salience, salient_lines, sentence_salience, sentences};
use crate::window::{ChangeKind, Changed, DropReason, Unit, UnitKind, Window};

/// The error a summarizer returns.
pub type SummaryError = Box<dyn std::error::Error + Send + Sync>;

/// Writes the summary of entries leaving the window. The orchestrator implements it with a
/// model; [`ExtractiveSummarizer`] is the deterministic offline one.
#[async_trait]
pub trait Summarizer: Send + Sync + std::fmt::Debug {
    /// A summary of `entries` in about `max_tokens` tokens, without the summary prefix.
    async fn summarize(
        &self,
        entries: &[LogEntry],
        max_tokens: usize,
    ) -> std::result::Result<String, SummaryError>;

    /// A short title (a few words) for a conversation that starts with `question`, or `None`
    /// when this summarizer writes none — the default, and then the question's first line is
    /// the title.
    async fn title(&self, question: &str) -> std::result::Result<Option<String>, SummaryError> {
        let _ = question;
        Ok(None)
    }
}

#[async_trait]
impl<T: Summarizer + ?Sized> Summarizer for Arc<T> {
    async fn summarize(
        &self,
        entries: &[LogEntry],
        max_tokens: usize,
    ) -> std::result::Result<String, SummaryError> {
        (**self).summarize(entries, max_tokens).await
    }

    async fn title(&self, question: &str) -> std::result::Result<Option<String>, SummaryError> {
        (**self).title(question).await
    }
}

/// A deterministic summarizer that needs no model. It keeps, in this order of priority and
/// within its cap: the user's sentences that carry requirements, numbers, codes, names or
/// paths; the lines of tool results that carry figures, identifiers and totals; the answers'
/// sentences with figures and conclusions. It says which tools ran and how much it left out.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractiveSummarizer;

/// One candidate line of a summary.
struct Candidate {
    /// Where it goes: 0 user, 1 tool figures, 2 answers.
    section: usize,
    /// Entry order, then position in the entry.
    order: (usize, usize),
    score: i32,
    text: String,
}

fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn candidates(entries: &[LogEntry]) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (k, e) in entries.iter().enumerate() {
        let text = e.text();
        match e.role {
            LogRole::User | LogRole::System | LogRole::Developer => {
                for (j, s) in sentences(&text).into_iter().enumerate() {
                    let score = sentence_salience(s).total + if j == 0 { 1 } else { 0 };
                    if score > 0 {
                        // What the user asked for outranks everything else.
                        out.push(Candidate {
                            section: 0,
                            order: (k, j),
                            score: score + 10,
                            text: clip(s, 240),
                        });
                    }
                }
            }
            LogRole::Tool => {
                let tool = e.tool_name.as_deref().unwrap_or("tool");
                for (j, line) in salient_lines(&text, 2).into_iter().enumerate() {
                    out.push(Candidate {
                        section: 1,
                        order: (k, j),
                        score: line_salience(line).total + 5 - j as i32,
                        text: format!("[{tool}] {}", clip(line, 160)),
                    });
                }
            }
            LogRole::Assistant => {
                for (j, s) in sentences(&text).into_iter().enumerate() {
                    let score = sentence_salience(s).total;
                    if score >= 2 {
                        out.push(Candidate {
                            section: 2,
                            order: (k, j),
                            score,
                            text: clip(s, 200),
                        });
                    }
                }
            }
        }
    }
    out
}

#[async_trait]
impl Summarizer for ExtractiveSummarizer {
    async fn summarize(
        &self,
        entries: &[LogEntry],
        max_tokens: usize,
    ) -> std::result::Result<String, SummaryError> {
        // About three characters a token keeps the text near the budget before the exact cut.
        let max_chars = max_tokens.saturating_mul(3);
        let mut tools: Vec<(String, usize)> = Vec::new();
        for e in entries {
            for call in e.calls() {
                match tools.iter_mut().find(|(n, _)| *n == call.function.name) {
                    Some((_, c)) => *c += 1,
                    None => tools.push((call.function.name.clone(), 1)),
                }
            }
        }
        let mut head = format!("{} earlier entries.", entries.len());
        if !tools.is_empty() {
            let list: Vec<String> = tools.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
            head.push_str(&format!("\nTools used: {}.", list.join(", ")));
        }
        let mut all = candidates(entries);
        let total = all.len();
        // Best first; among equals the newer one, which matters most for what follows.
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by(|&a, &b| {
            all[b]
                .score
                .cmp(&all[a].score)
                .then(all[b].order.cmp(&all[a].order))
        });
        const TITLES: [&str; 3] = ["The user asked and required:", "Figures found:", "Answers:"];
        let reserve = 80; // the closing "left out" line
        let mut used = head.chars().count() + reserve;
        let mut keep = vec![false; all.len()];
        let mut opened = [false; 3];
        for i in order {
            let section = all[i].section;
            let title = if opened[section] {
                0
            } else {
                TITLES[section].chars().count() + 1
            };
            let n = all[i].text.chars().count() + 3 + title;
            if used + n <= max_chars {
                used += n;
                keep[i] = true;
                opened[section] = true;
            }
        }
        let kept = keep.iter().filter(|k| **k).count();
        let mut out = head;
        for (section, title) in TITLES.iter().enumerate() {
            let mut lines: Vec<&Candidate> = all
                .iter()
                .zip(&keep)
                .filter(|(c, k)| **k && c.section == section)
                .map(|(c, _)| c)
                .collect();
            if lines.is_empty() {
                continue;
            }
            lines.sort_by_key(|c| c.order);
            out.push('\n');
            out.push_str(title);
            for c in lines {
                out.push_str("\n- ");
                out.push_str(&c.text);
            }
        }
        if kept < total {
            let mut left = [0usize; 3];
            for (c, k) in all.iter().zip(&keep) {
                if !k {
                    left[c.section] += 1;
                }
            }
            out.push_str(&format!(
                "\nLeft out: {} user sentence(s), {} tool line(s), {} answer sentence(s).",
                left[0], left[1], left[2]
            ));
        }
        all.clear();
        Ok(out)
    }
}

/// How the summary strategy chooses what stays verbatim.
#[derive(Debug, Clone)]
enum Selector {
    /// The most recent units.
    Recent,
    /// Key messages.
    Key(KeyMessages),
}

/// Replaces what does not fit by a `CONVERSATION_SUMMARY` system entry; summaries are cached
/// by the hash of the entries they summarise.
#[derive(Debug, Clone)]
pub struct SummaryStrategy {
    summarizer: Arc<dyn Summarizer>,
    selector: Selector,
    /// Fraction of the target the summary may take.
    pub share: f64,
    cache: Arc<Mutex<HashMap<u64, String>>>,
}

impl SummaryStrategy {
    /// Summary of the older part; the most recent units stay verbatim.
    pub fn new(summarizer: Arc<dyn Summarizer>) -> Self {
        Self {
            summarizer,
            selector: Selector::Recent,
            share: 0.2,
            cache: Arc::default(),
        }
    }

    /// Hybrid: key messages stay verbatim, the rest is summarised.
    pub fn hybrid(summarizer: Arc<dyn Summarizer>) -> Self {
        Self {
            selector: Selector::Key(KeyMessages::default()),
            ..Self::new(summarizer)
        }
    }

    /// How many summaries are cached.
    pub fn cached(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.len())
    }

    async fn summary_text(&self, entries: &[LogEntry], max_tokens: usize) -> Result<String> {
        let mut h = DefaultHasher::new();
        max_tokens.hash(&mut h);
        for e in entries {
            entry_hash(e).hash(&mut h);
        }
        let key = h.finish();
        if let Some(hit) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(hit);
        }
        let text = self
            .summarizer
            .summarize(entries, max_tokens)
            .await
            .map_err(|e| ContextError::Summary {
                entries: entries.len(),
                message: e.to_string(),
            })?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, text.clone());
        }
        Ok(text)
    }
}

#[async_trait]
impl CompressionStrategy for SummaryStrategy {
    fn name(&self) -> &str {
        match self.selector {
            Selector::Recent => "summary",
            Selector::Key(_) => "hybrid",
        }
    }

    async fn compress(&self, window: Window, cx: CompressCx<'_>) -> Result<Window> {
        let allowance = ((cx.target as f64) * self.share) as usize;
        let verbatim_target = cx.target.saturating_sub(allowance);
        let before: Vec<Unit> = window.units.clone();
        let dropped_before = window.dropped.len();
        let inner = CompressCx {
            target: verbatim_target,
            ..cx
        };
        let mut window = match &self.selector {
            Selector::Recent => {
                let mut w = window;
                w.fit_keeping_pending(verbatim_target, DropReason::Summarized);
                w
            }
            Selector::Key(km) => km.compress(window, inner).await?,
        };
        // The units that left in this step, in log order, are what the summary covers (not
        // the results of folded groups: their notes stay in the window).
        let gone: Vec<LogEntry> = {
            let ids: std::collections::HashSet<&str> = window.dropped[dropped_before..]
                .iter()
                .filter(|d| d.reason != DropReason::Folded)
                .map(|d| d.id.as_str())
                .collect();
            before
                .iter()
                .flat_map(|u| u.entries.iter())
                .filter(|e| ids.contains(e.id.as_str()))
                .cloned()
                .collect()
        };
        if gone.is_empty() || allowance < 16 {
            return Ok(window);
        }
        for d in &mut window.dropped[dropped_before..] {
            if d.reason != DropReason::Folded {
                d.reason = DropReason::Summarized;
            }
        }
        let body_budget = allowance.saturating_sub(16);
        let mut text = self.summary_text(&gone, body_budget).await?;
        let id = {
            let mut h = DefaultHasher::new();
            for e in &gone {
                e.id.hash(&mut h);
            }
            format!("summary-{:016x}", h.finish())
        };
        let created_at = gone
            .last()
            .map_or_else(String::new, |e| e.created_at.clone());
        let make = |text: &str| {
            LogEntry::new(id.clone(), LogRole::System, created_at.clone())
                .with_text(format!("{SUMMARY_PREFIX}\n{text}"))
        };
        let mut entry = make(&text);
        // Cut a summary that came back longer than asked, by whole characters from the end.
        while cx.counter.entry_uncached(&entry) > allowance && !text.is_empty() {
            let keep = text.chars().count() * 3 / 4;
            text = text.chars().take(keep).collect();
            entry = make(&text);
        }
        let unit = Unit {
            tokens: cx.counter.entry(&entry),
            entries: vec![entry],
            kind: UnitKind::Summary,
            round: 0,
        };
        window.changed.push(Changed {
            id,
            kind: ChangeKind::SummaryInserted,
        });
        window.units.insert(0, unit);
        Ok(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageCounter;
    use crate::tokens::Encoding;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Default)]
    struct Counting(AtomicUsize, bool);

    #[async_trait]
    impl Summarizer for Counting {
        async fn summarize(
            &self,
            entries: &[LogEntry],
            _max_tokens: usize,
        ) -> std::result::Result<String, SummaryError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            if self.1 {
                return Err("model unavailable".into());
            }
            Ok(format!("{} entries about revenue", entries.len()))
        }
    }

    fn long_log() -> Vec<LogEntry> {
        (0..30)
            .map(|i| {
                let role = if i % 2 == 0 {
                    LogRole::User
                } else {
                    LogRole::Assistant
                };
                LogEntry::new(format!("m{i}"), role, "t")
                    .with_text("revenue grew in the north ".repeat(20))
            })
            .collect()
    }

    #[tokio::test]
    async fn summaries_are_cached_and_marked() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let summarizer = Arc::new(Counting::default());
        let strategy = SummaryStrategy::new(summarizer.clone());
        let cx = CompressCx {
            counter: &counter,
            target: 1_000,
            trigger: 1_600,
            limit: 2_000,
        };
        let log = long_log();
        let a = strategy
            .compress(Window::prepare(&log, &counter), cx)
            .await
            .unwrap();
        let b = strategy
            .compress(Window::prepare(&log, &counter), cx)
            .await
            .unwrap();
        assert_eq!(
            summarizer.0.load(Ordering::SeqCst),
            1,
            "second run served from the cache"
        );
        assert_eq!(strategy.cached(), 1);
        let first = &a.units[0].entries[0];
        assert_eq!(first.role, LogRole::System);
        assert!(first.text().starts_with("CONVERSATION_SUMMARY\n"));
        assert!(a.dropped.iter().all(|d| d.reason == DropReason::Summarized));
        assert_eq!(a.kept_ids(), b.kept_ids());
        assert!(a.tokens() <= 1_000);
    }

    #[tokio::test]
    async fn a_failing_summarizer_is_a_typed_error() {
        let counter = MessageCounter::exact(Encoding::Cl100kBase);
        let strategy = SummaryStrategy::new(Arc::new(Counting(AtomicUsize::new(0), true)));
        let cx = CompressCx {
            counter: &counter,
            target: 1_000,
            trigger: 1_600,
            limit: 2_000,
        };
        let err = strategy
            .compress(Window::prepare(&long_log(), &counter), cx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("model unavailable"), "{err}");
    }

    #[tokio::test]
    async fn extractive_summary_is_deterministic_and_bounded() {
        let log: Vec<LogEntry> = (0..50)
            .map(|i| {
                LogEntry::new(format!("u{i}"), LogRole::User, "t")
                    .with_text(format!("request number {i}"))
            })
            .collect();
        let a = ExtractiveSummarizer.summarize(&log, 100).await.unwrap();
        let b = ExtractiveSummarizer.summarize(&log, 100).await.unwrap();
        assert_eq!(a, b);
        assert!(a.chars().count() <= 300);
        assert!(a.contains("request number 49"));
        assert!(!a.contains("request number 0\n"));
    }
}
