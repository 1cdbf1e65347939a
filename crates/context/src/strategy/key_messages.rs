//! Key-message extraction (seed 002 v1): a mandatory set, explainable scores, a greedy fill,
//! then fallbacks when even the mandatory set is too large.

use async_trait::async_trait;
use ba_protocol::{Content, LogRole};

use super::{CompressCx, CompressionStrategy, head_tail};
use crate::error::Result;
use crate::message::MessageCounter;
use crate::window::{ChangeKind, Changed, DropReason, Unit, UnitKind, Window};

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
    /// Units at the end of the conversation that are always kept.
    pub recent: usize,
    /// Words that mark a requirement or a decision.
    pub keywords: Vec<String>,
    /// Tool results above this many tokens are penalised.
    pub large_tool_result: usize,
    /// Characters a tool result preview keeps.
    pub preview_chars: usize,
    /// Characters above which user and assistant text is cut to its lead and key lines.
    pub long_text_chars: usize,
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
            preview_chars: 1_200,
            long_text_chars: 2_000,
            fallback_rounds: 4,
        }
    }
}

fn has_file_path(text: &str) -> bool {
    const EXT: &[&str] = &[
        ".rs", ".py", ".ts", ".js", ".md", ".json", ".csv", ".xlsx", ".sql", ".toml", ".yaml",
        ".txt",
    ];
    text.split(|c: char| {
        c.is_whitespace() || c == '`' || c == '"' || c == '\'' || c == '(' || c == ')'
    })
    .any(|w| {
        (w.contains('/') && w.contains('.') && !w.starts_with("http"))
            || EXT.iter().any(|e| w.ends_with(e) && w.len() > e.len())
    })
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
        if has_file_path(&text) {
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

    fn mandatory(&self, window: &Window) -> Vec<bool> {
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

    /// Cuts tool results of kept groups to previews (head and tail).
    fn preview_tool_results(&self, window: &mut Window, counter: &MessageCounter) {
        for unit in &mut window.units {
            if unit.kind != UnitKind::ToolGroup {
                continue;
            }
            let mut changed = false;
            for e in unit.entries.iter_mut().filter(|e| e.role == LogRole::Tool) {
                let text = e.text();
                if let Some(short) = head_tail(&text, self.preview_chars, 0.6) {
                    let name = e.tool_name.clone().unwrap_or_else(|| "tool".to_owned());
                    let status = if e.is_error == Some(true) {
                        "error"
                    } else {
                        "ok"
                    };
                    e.content = Some(Content::Text(format!(
                        "[{name} · {status} · preview]\n{short}"
                    )));
                    window.changed.push(Changed {
                        id: e.id.clone(),
                        kind: ChangeKind::ToolResultPreview,
                    });
                    changed = true;
                }
            }
            if changed {
                unit.recount(counter);
            }
        }
    }

    /// Cuts long user and assistant texts (not the latest user message) to their lead
    /// paragraph and key lines.
    fn cut_long_texts(&self, window: &mut Window, counter: &MessageCounter) {
        let latest = window.latest_user();
        for (i, unit) in window.units.iter_mut().enumerate() {
            if Some(i) == latest || !matches!(unit.kind, UnitKind::User | UnitKind::Assistant) {
                continue;
            }
            let Some(e) = unit.entries.first_mut() else {
                continue;
            };
            let text = e.text().into_owned();
            if text.chars().count() <= self.long_text_chars {
                continue;
            }
            e.content = Some(Content::Text(lead_and_key_lines(
                &text,
                self.long_text_chars / 2,
            )));
            window.changed.push(Changed {
                id: e.id.clone(),
                kind: ChangeKind::TextCut,
            });
            unit.recount(counter);
        }
    }
}

/// The first paragraph (at most `lead_chars`) and the lines that look like conclusions or
/// bullet points.
fn lead_and_key_lines(text: &str, lead_chars: usize) -> String {
    let lead_par = text.split("\n\n").next().unwrap_or("");
    let mut out: String = lead_par.chars().take(lead_chars).collect();
    if lead_par.chars().count() > lead_chars {
        out.push('…');
    }
    let mut budget = lead_chars;
    for line in text.lines().skip(lead_par.lines().count()) {
        let t = line.trim_start();
        let lower = t.to_lowercase();
        let key = t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with('#')
            || lower.contains("conclusion")
            || lower.contains("summary")
            || t.contains("结论")
            || t.contains("总结");
        if key && t.chars().count() <= budget {
            out.push('\n');
            out.push_str(t);
            budget -= t.chars().count();
        }
    }
    out.push_str("\n[… cut to the lead and key lines …]");
    out
}

#[async_trait]
impl CompressionStrategy for KeyMessages {
    fn name(&self) -> &str {
        "key-messages"
    }

    async fn compress(&self, mut window: Window, cx: CompressCx<'_>) -> Result<Window> {
        let mandatory = self.mandatory(&window);
        let n = window.units.len();
        let mandatory_tokens: usize = window
            .units
            .iter()
            .zip(&mandatory)
            .filter(|(_, m)| **m)
            .map(|(u, _)| u.tokens)
            .sum::<usize>()
            + window.reply_priming;
        let mut keep = mandatory.clone();
        if mandatory_tokens <= cx.target {
            let mut scored: Vec<(usize, f64)> = (0..n)
                .filter(|&i| !mandatory[i])
                .map(|i| (i, self.score(&window.units[i], i, n).total))
                .collect();
            // Highest score first; the newer unit wins a tie.
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
            let mut used = mandatory_tokens;
            for (i, _) in scored {
                let t = window.units[i].tokens;
                if used + t <= cx.target {
                    used += t;
                    keep[i] = true;
                }
            }
            window.retain(DropReason::LowScore, |i, _| keep[i]);
            return Ok(window);
        }
        // Fallbacks: only the mandatory set, then previews, cut texts, the last rounds.
        window.retain(DropReason::LowScore, |i, _| keep[i]);
        if window.tokens() > cx.target {
            self.preview_tool_results(&mut window, cx.counter);
        }
        if window.tokens() > cx.target {
            self.cut_long_texts(&mut window, cx.counter);
        }
        if window.tokens() > cx.target {
            let first = (window.last_round() + 1)
                .saturating_sub(self.fallback_rounds)
                .max(1);
            window.retain(DropReason::OutsideRecentRounds, |_, u| {
                u.kind == UnitKind::Summary || u.round >= first
            });
        }
        // The target is not a hard limit: the results the model is about to read stay, and the
        // pipeline's final fit decides about them.
        window.fit_keeping_pending(cx.target, DropReason::OverBudget);
        Ok(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;
    use ba_protocol::LogEntry;

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
    fn lead_and_key_lines_keeps_bullets() {
        let text = format!(
            "Lead sentence.\n\n{}\n- keep me\nConclusion: done",
            "filler ".repeat(50)
        );
        let cut = lead_and_key_lines(&text, 100);
        assert!(cut.starts_with("Lead sentence."));
        assert!(cut.contains("- keep me"));
        assert!(cut.contains("Conclusion: done"));
        assert!(!cut.contains("filler"));
    }
}
