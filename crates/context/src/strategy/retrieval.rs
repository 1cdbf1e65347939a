//! Retrieval: what a compaction takes out of the window is indexed, and the passages most
//! related to the current task come back, within a share of the budget, marked as recalled.
//!
//! The strategy wraps another one (key-messages by default), which compresses the window
//! within the budget less the recall share. Every entry that the inner strategy dropped or
//! shortened is cut into passages — a tool output into its key items with their labels (see
//! `read_output`) and its lines, each with the call that produced it; a text into its
//! sentences — and scored against the latest user message: BM25 always, and, when an
//! [`Embedder`] is given (any OpenAI-compatible `/v1/embeddings` endpoint, through the
//! orchestrator), the cosine of their embeddings beside it. The best passages not already in
//! the window go back as one assistant entry just before the latest user message, each naming
//! the entry it came from (`recall <id>` returns it whole).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::{Content, LogEntry, LogRole};

use super::{CompressCx, CompressionStrategy, KeyMessages};
use crate::error::Result;
use crate::salience::{sentences, words};
use crate::structure::read_output;
use crate::window::{ChangeKind, Changed, Unit, UnitKind, Window};

/// The error an embedder returns.
pub type EmbedError = Box<dyn std::error::Error + Send + Sync>;

/// Turns texts into vectors for retrieval. The orchestrator implements it over an
/// OpenAI-compatible `/v1/embeddings` endpoint (llama.cpp's server, vLLM, OpenAI).
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, EmbedError>;
}

#[async_trait]
impl<T: Embedder + ?Sized> Embedder for Arc<T> {
    async fn embed(&self, texts: &[String]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
        (**self).embed(texts).await
    }
}

/// The marker that opens the entry of recalled passages.
pub const RECALL_MARK: &str = "[recalled ";

/// Passages embedded at most in one compaction (the best by BM25, then the most recent).
const EMBED_AT_MOST: usize = 256;

/// Characters of the question embedded at most.
const QUERY_CHARS: usize = 2_000;

/// Characters of one passage at most.
const PASSAGE_CHARS: usize = 240;

/// Retrieval over what leaves the window.
#[derive(Debug)]
pub struct RetrievalStrategy {
    inner: Box<dyn CompressionStrategy>,
    /// The share of the window's limit the recalled passages may take.
    pub share: f64,
    embedder: Option<Arc<dyn Embedder>>,
}

impl Default for RetrievalStrategy {
    fn default() -> Self {
        Self::new(Box::new(KeyMessages::default()))
    }
}

impl RetrievalStrategy {
    /// Retrieval around `inner`, a tenth of the window for what it recalls, BM25 alone.
    pub fn new(inner: Box<dyn CompressionStrategy>) -> Self {
        Self {
            inner,
            share: 0.10,
            embedder: None,
        }
    }

    /// Scores passages by embeddings too.
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Another share of the window for the recalled passages (clamped to 0..=0.5).
    pub fn with_share(mut self, share: f64) -> Self {
        self.share = share.clamp(0.0, 0.5);
        self
    }
}

/// A piece of what left the window.
#[derive(Debug, Clone)]
struct Passage {
    /// The entry it came from.
    source: String,
    /// Who wrote it: a tool's name, `user` or `assistant`.
    by: String,
    /// What is shown.
    text: String,
    /// What is searched: the text and its context (the call that produced it).
    search: String,
}

/// The passages of `e`: a tool output's key items (with their labels) and lines, each with
/// `call` (the call that produced it) to search by; a text's sentences.
fn passages(e: &LogEntry, call: &str) -> Vec<Passage> {
    let text = e.text();
    let by = match e.role {
        LogRole::Tool => e.tool_name.clone().unwrap_or_else(|| "tool".to_owned()),
        LogRole::User => "user".to_owned(),
        _ => "assistant".to_owned(),
    };
    let mut shown: Vec<String> = Vec::new();
    if e.role == LogRole::Tool {
        let reading = read_output(&text);
        shown.extend(reading.items.iter().map(|i| i.render(PASSAGE_CHARS)));
        shown.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .take(2_000)
                .map(|l| crate::structure::clip(l, PASSAGE_CHARS)),
        );
    } else {
        shown.extend(
            sentences(&text)
                .into_iter()
                .map(|s| crate::structure::clip(s, PASSAGE_CHARS)),
        );
    }
    let mut seen: Vec<String> = Vec::new();
    shown
        .into_iter()
        .filter(|s| {
            if seen.contains(s) {
                false
            } else {
                seen.push(s.clone());
                true
            }
        })
        .map(|s| Passage {
            source: e.id.clone(),
            by: by.clone(),
            search: format!("{s} {call}"),
            text: s,
        })
        .collect()
}

/// BM25 scores of `docs` for `query` (k1 = 1.2, b = 0.75).
fn bm25(query: &str, docs: &[Vec<String>]) -> Vec<f64> {
    let n = docs.len() as f64;
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0);
    let mut df: HashMap<&str, usize> = HashMap::new();
    for d in docs {
        let mut uniq: Vec<&str> = d.iter().map(String::as_str).collect();
        uniq.sort_unstable();
        uniq.dedup();
        for w in uniq {
            *df.entry(w).or_default() += 1;
        }
    }
    let mut q = words(query);
    q.sort_unstable();
    q.dedup();
    docs.iter()
        .map(|d| {
            let len = d.len() as f64;
            q.iter()
                .map(|t| {
                    let f = d.iter().filter(|w| *w == t).count() as f64;
                    if f == 0.0 {
                        return 0.0;
                    }
                    let df = df.get(t.as_str()).copied().unwrap_or(0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len / avg.max(1.0)))
                })
                .sum()
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[async_trait]
impl CompressionStrategy for RetrievalStrategy {
    fn name(&self) -> &str {
        "retrieval"
    }

    async fn compress(&self, window: Window, cx: CompressCx<'_>) -> Result<Window> {
        let room = (cx.limit as f64 * self.share) as usize;
        let before: Vec<LogEntry> = window.entries();
        let latest_user = window
            .latest_user()
            .and_then(|i| window.units[i].entries.first())
            .map(|e| (e.id.clone(), e.text().into_owned()));
        // The inner strategy keeps its target (what it keeps does not shrink) and leaves the
        // recall share free below the limit.
        let limit = cx.limit.saturating_sub(room);
        let inner_cx = CompressCx {
            counter: cx.counter,
            target: cx.target.min(limit),
            trigger: cx.trigger.min(limit),
            limit,
        };
        let mut window = self.inner.compress(window, inner_cx).await?;
        let Some((latest_id, query)) = latest_user else {
            return Ok(window);
        };
        if room == 0 {
            return Ok(window);
        }
        // What left the window or was shortened, with the call that produced each output.
        let after: HashMap<String, String> = window
            .entries()
            .into_iter()
            .map(|e| (e.id.clone(), e.text().into_owned()))
            .collect();
        let calls: HashMap<&str, String> = before
            .iter()
            .flat_map(|e| e.calls().iter())
            .map(|c| {
                let args: String = c.function.arguments.chars().take(200).collect();
                (c.id.as_str(), format!("{} {args}", c.function.name))
            })
            .collect();
        let mut pool: Vec<Passage> = Vec::new();
        for e in &before {
            if e.id == latest_id || e.text().starts_with(RECALL_MARK) {
                continue;
            }
            let text = e.text();
            if text.trim().is_empty() || after.get(&e.id).is_some_and(|t| *t == text) {
                continue;
            }
            let call = e
                .tool_call_id
                .as_deref()
                .and_then(|id| calls.get(id))
                .cloned()
                .unwrap_or_default();
            pool.extend(passages(e, &call));
        }
        if pool.is_empty() {
            return Ok(window);
        }
        let docs: Vec<Vec<String>> = pool.iter().map(|p| words(&p.search)).collect();
        let lexical = bm25(&query, &docs);
        let top = lexical.iter().copied().fold(0.0_f64, f64::max);
        let mut scores: Vec<f64> = lexical
            .iter()
            .map(|s| if top > 0.0 { s / top } else { 0.0 })
            .collect();
        if let Some(embedder) = &self.embedder {
            // The best by BM25, then the most recent, up to the embedding bound.
            let mut order: Vec<usize> = (0..pool.len()).collect();
            order.sort_by(|&a, &b| lexical[b].total_cmp(&lexical[a]).then(b.cmp(&a)));
            order.truncate(EMBED_AT_MOST);
            // A long question is cut: a server that pools a text's tokens refuses one longer
            // than its batch, and the question's head says what is asked.
            let mut texts = vec![crate::structure::clip(&query, QUERY_CHARS)];
            texts.extend(order.iter().map(|&i| pool[i].search.clone()));
            // An endpoint that fails leaves BM25 alone to choose.
            if let Ok(vectors) = embedder.embed(&texts).await
                && vectors.len() == texts.len()
            {
                for (k, &i) in order.iter().enumerate() {
                    scores[i] += cosine(&vectors[0], &vectors[k + 1]).max(0.0);
                }
            }
        }
        let in_window: String = after.values().map(String::as_str).collect();
        let mut ranked: Vec<usize> = (0..pool.len()).filter(|&i| scores[i] > 0.0).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
        let header = format!(
            "{RECALL_MARK}from what left the window, by relevance to the latest question; `recall <entry>` gives an entry whole]"
        );
        let mut lines: Vec<String> = Vec::new();
        let chars = header.chars().count();
        // Characters for the share's tokens, checked again once counted.
        let mut budget = room * 3;
        let Some(at) = window.latest_user() else {
            return Ok(window);
        };
        loop {
            lines.clear();
            let mut used = chars;
            for &i in &ranked {
                let p = &pool[i];
                if in_window.contains(&p.text) {
                    continue;
                }
                let line = format!("· {} ({}): {}", p.source, p.by, p.text);
                let n = line.chars().count() + 1;
                if used + n > budget {
                    continue;
                }
                used += n;
                lines.push(line);
            }
            if lines.is_empty() {
                return Ok(window);
            }
            let mut note = LogEntry::new(
                format!("{latest_id}#recalled"),
                LogRole::Assistant,
                before
                    .iter()
                    .find(|e| e.id == latest_id)
                    .map_or_else(String::new, |e| e.created_at.clone()),
            );
            note.content = Some(Content::Text(format!("{header}\n{}", lines.join("\n"))));
            let round = window.units[at].round;
            let unit = Unit {
                tokens: cx.counter.entry(&note),
                entries: vec![note],
                kind: UnitKind::Assistant,
                round,
            };
            if window.tokens() + unit.tokens <= cx.limit {
                let id = unit.entries[0].id.clone();
                window.units.insert(at, unit);
                window.changed.push(Changed {
                    id,
                    kind: ChangeKind::Recalled,
                });
                return Ok(window);
            }
            if budget < 200 {
                return Ok(window);
            }
            budget = budget * 3 / 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_prefers_the_passage_that_shares_the_rare_words() {
        let docs: Vec<Vec<String>> = [
            "freight cost by carrier for week 12 came to 4410.20",
            "revenue by region for week 12",
            "revenue by region for week 13",
        ]
        .iter()
        .map(|d| words(d))
        .collect();
        let s = bm25("what was the freight cost in week 12?", &docs);
        assert!(s[0] > s[1] && s[1] > s[2], "{s:?}");
        assert_eq!(bm25("nothing shared", &docs), vec![0.0, 0.0, 0.0]);
    }
}
