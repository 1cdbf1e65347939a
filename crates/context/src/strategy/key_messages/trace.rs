//! How a unit of the window becomes its trace: the calls kept (thinking gone, long arguments
//! cut), each result cut to the lines that carry its figures, and the way back to the full
//! output (`recall`, or `file_reader` on spilled data). At the last levels a group is *folded*:
//! its calls and results leave and one assistant note stays, each result's header and key line
//! in it — half the tokens of a paired trace, so an older round keeps its figure where a paired
//! trace could keep only its header.

use ba_protocol::{Content, ContentBlock, LogEntry, LogRole};
use serde_json::Value;

use super::KeyMessages;
use crate::message::MessageCounter;
use crate::salience::{TRACE_MARK, key_sentences, trace_text};
use crate::window::{ChangeKind, Changed, Unit, UnitKind, holds_provider_compaction};

/// How far a trace is reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum TraceLevel {
    /// First and last lines and the salient ones.
    Lines,
    /// The top lines only.
    Top,
    /// Folded: one note with each result's header and the one line that carries its key
    /// figure (a total, say).
    Key,
    /// Folded: one note with each result's header alone — tool, status, size and where the
    /// full output is.
    Header,
    /// The calls kept paired, each result its header and key line: for the current task's
    /// work, whose calls the model is still making (it reads its own calls as calls).
    PairedKey,
    /// The calls kept paired, each result its header alone.
    PairedHeader,
}

impl TraceLevel {
    /// The level for the current task's work: folding levels keep their calls paired.
    pub(super) fn paired(self) -> Self {
        match self {
            Self::Key => Self::PairedKey,
            Self::Header => Self::PairedHeader,
            other => other,
        }
    }
}

/// Whether `unit` is a tool group already folded into its note.
pub(super) fn is_folded(unit: &Unit) -> bool {
    unit.kind == UnitKind::ToolGroup && unit.entries.iter().all(|e| e.calls().is_empty())
}

/// The names of a unit's calls, by call id: a result that does not carry its tool's name
/// (read from an OpenAI request, say) is named by its call.
pub(super) fn call_names(unit: &Unit) -> Vec<(String, String)> {
    unit.entries
        .iter()
        .flat_map(|e| e.calls().iter())
        .map(|c| (c.id.clone(), c.function.name.clone()))
        .collect()
}

/// The tool that wrote result `e`.
pub(super) fn tool_of<'a>(e: &'a LogEntry, names: &'a [(String, String)]) -> &'a str {
    e.tool_name.as_deref().unwrap_or_else(|| {
        names
            .iter()
            .find(|(id, _)| Some(id.as_str()) == e.tool_call_id.as_deref())
            .map_or("tool", |(_, name)| name.as_str())
    })
}

/// How the model gets the full output of a tool entry back: `file_reader` on its spilled data
/// file, or `recall` on the log entry (the agent's tool that reads it whole, paged).
pub(super) fn full_output(e: &LogEntry) -> String {
    match &e.records.data_ref {
        Some(file) => format!("file_reader {file} or recall {}", e.id),
        None => format!("recall {}", e.id),
    }
}

/// `value` with every string longer than `max` characters cut (valid JSON stays valid).
fn cut_strings(value: &Value, max: usize, cut: &mut bool) -> Value {
    match value {
        Value::String(s) if s.chars().count() > max => {
            *cut = true;
            let head: String = s.chars().take(max).collect();
            Value::String(format!("{head}… [{} chars]", s.chars().count()))
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| cut_strings(v, max, cut)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cut_strings(v, max, cut)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl KeyMessages {
    /// The trace of a tool group at `level`, or the key sentences of a long assistant text;
    /// `None` when the unit stays as it is (a user message, a summary, a short text). The
    /// changes are returned with the unit.
    pub(super) fn reduced(
        &self,
        unit: &Unit,
        level: TraceLevel,
        counter: &MessageCounter,
    ) -> Option<(Unit, Vec<Changed>)> {
        if unit.entries.iter().any(holds_provider_compaction) {
            // A provider's compaction block goes back as it came.
            return None;
        }
        let mut out = unit.clone();
        let mut changes = Vec::new();
        match unit.kind {
            UnitKind::ToolGroup if matches!(level, TraceLevel::Key | TraceLevel::Header) => {
                let chars = if level == TraceLevel::Key {
                    self.trace_key_chars
                } else {
                    0
                };
                let note = fold(unit, chars)?;
                out.entries = vec![note];
                changes.push(Changed {
                    id: unit.id().to_owned(),
                    kind: ChangeKind::Folded,
                });
            }
            UnitKind::ToolGroup if is_folded(unit) => return None,
            UnitKind::ToolGroup => {
                let (result_chars, text_chars, arg_chars) = match level {
                    TraceLevel::Lines => (self.trace_chars, 240, self.argument_chars),
                    TraceLevel::Top => (self.trace_top_chars, 120, 80),
                    TraceLevel::PairedKey => (self.trace_key_chars, 0, 40),
                    TraceLevel::Key | TraceLevel::Header | TraceLevel::PairedHeader => (0, 0, 40),
                };
                let names = call_names(unit);
                for e in &mut out.entries {
                    let role = e.role;
                    match role {
                        LogRole::Assistant if self.trace_call_entry(e, text_chars, arg_chars) => {
                            changes.push(Changed {
                                id: e.id.clone(),
                                kind: ChangeKind::Trace,
                            });
                        }
                        LogRole::Tool => {
                            let text = e.text();
                            let tool = tool_of(e, &names);
                            let ok = e.is_error != Some(true);
                            if let Some(t) =
                                trace_text(&text, tool, ok, &full_output(e), result_chars)
                            {
                                e.content = Some(Content::Text(t));
                                changes.push(Changed {
                                    id: e.id.clone(),
                                    kind: ChangeKind::Trace,
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
            UnitKind::Assistant => {
                let max = match level {
                    TraceLevel::Lines => self.long_text_chars / 2,
                    TraceLevel::Top => self.long_text_chars / 4,
                    TraceLevel::Key
                    | TraceLevel::Header
                    | TraceLevel::PairedKey
                    | TraceLevel::PairedHeader => self.long_text_chars / 8,
                };
                let e = out.entries.first_mut()?;
                let text = e.text().into_owned();
                if text.chars().count() <= self.long_text_chars.min(max * 2) {
                    return None;
                }
                let cut = key_sentences(&text, max)?;
                e.content = Some(Content::Text(cut.text));
                changes.push(Changed {
                    id: e.id.clone(),
                    kind: ChangeKind::TextCut,
                });
            }
            UnitKind::User | UnitKind::Summary => return None,
        }
        if changes.is_empty() {
            return None;
        }
        out.recount(counter);
        (out.tokens < unit.tokens).then_some((out, changes))
    }

    /// Reduces the assistant entry of a traced group: thinking goes, text is cut to its key
    /// sentences, long string arguments are cut (the calls themselves stay, paired with their
    /// results). Returns whether anything changed.
    fn trace_call_entry(&self, e: &mut LogEntry, text_chars: usize, arg_chars: usize) -> bool {
        let mut changed = false;
        if let Some(Content::Blocks(blocks)) = &e.content {
            let kept: Vec<ContentBlock> = blocks
                .iter()
                .filter(|b| !matches!(b, ContentBlock::Thinking(_)))
                .cloned()
                .collect();
            if kept.len() != blocks.len() {
                changed = true;
                e.content = Some(Content::Blocks(kept));
            }
        }
        let text = e.text().into_owned();
        if text.chars().count() > text_chars {
            let short = if text_chars == 0 {
                None
            } else {
                key_sentences(&text, text_chars).map(|k| k.text)
            };
            changed = true;
            e.content = short.map(Content::Text);
        }
        if let Some(calls) = &mut e.tool_calls {
            for call in calls {
                let Ok(args) = call.arguments_json() else {
                    continue;
                };
                let mut cut = false;
                let short = cut_strings(&args, arg_chars, &mut cut);
                if cut {
                    call.function.arguments = short.to_string();
                    changed = true;
                }
            }
        }
        changed
    }
}

/// The note a tool group folds into: the assistant entry of the group (its id, its time), its
/// calls gone, its text the trace of each result at `chars` characters of lines (0: the header
/// alone), one after the other. A note folded before is folded again, each trace cut further.
/// `None` when the group has no result to fold or the note would be no shorter.
fn fold(unit: &Unit, chars: usize) -> Option<LogEntry> {
    let first = unit.entries.first()?;
    let traces: Vec<String> = if is_folded(unit) {
        // Each trace of the note opens with the trace mark, at the start of a line.
        let text = first.text();
        let mut blocks: Vec<String> = Vec::new();
        for line in text.lines() {
            match blocks.last_mut() {
                Some(b) if !line.starts_with(TRACE_MARK) => {
                    b.push('\n');
                    b.push_str(line);
                }
                _ => blocks.push(line.to_owned()),
            }
        }
        blocks
            .into_iter()
            .map(|b| trace_text(&b, "tool", true, "", chars).unwrap_or(b))
            .collect()
    } else {
        let names = call_names(unit);
        unit.entries
            .iter()
            .filter(|e| e.role == LogRole::Tool)
            .map(|e| {
                let text = e.text();
                let tool = tool_of(e, &names);
                let ok = e.is_error != Some(true);
                // A note's header is shorter than a trace's: the tool, an error, the way back.
                let status = if ok { "" } else { " · error" };
                let header = format!(
                    "{TRACE_MARK}{tool}{status}; full output: {}]",
                    full_output(e)
                );
                // A result traced by an earlier compaction gives its first lines (best first),
                // not its header; an output not traced yet is read for its key items.
                let lines = match trace_text(&text, tool, ok, "", chars) {
                    Some(t) => t.split_once('\n').map(|(_, lines)| lines.to_owned()),
                    // A result short enough to keep whole is kept under its header.
                    None => Some(match text.strip_prefix(TRACE_MARK) {
                        Some(rest) => rest.split_once('\n').map_or("", |(_, b)| b).to_owned(),
                        None => text.trim().to_owned(),
                    }),
                };
                match lines.filter(|l| chars > 0 && !l.is_empty()) {
                    Some(lines) => format!("{header}\n{lines}"),
                    None => header,
                }
            })
            .collect()
    };
    if traces.is_empty() {
        return None;
    }
    let mut note = first.clone();
    note.tool_calls = None;
    note.content = Some(Content::Text(traces.join("\n")));
    (note.text() != first.text() || !first.calls().is_empty()).then_some(note)
}
