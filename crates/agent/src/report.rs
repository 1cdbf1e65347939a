//! The per-conversation metrics report, computed from the log alone, so it is the same at
//! the end of a run and later through `ba-agent inspect`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ba_protocol::{LogEntry, LogRole, ServerInventoryRecord, ServerRecord};
use serde::Serialize;

use crate::history::starts_task;

/// Totals of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolStats {
    /// Calls.
    pub calls: u64,
    /// Failed calls.
    pub failures: u64,
    /// Retries.
    pub retries: u64,
    /// Summed duration, ms.
    pub total_ms: u64,
    /// Longest call, ms.
    pub max_ms: u64,
}

/// One compression.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompressionRecord {
    /// Round it happened in.
    pub round: u64,
    /// Message tokens before.
    pub tokens_before: u64,
    /// Message tokens after.
    pub tokens_after: u64,
    /// Strategies applied.
    pub strategies: Vec<String>,
}

/// A server inventory a run recorded (written when the servers or their tools changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InventoryChange {
    /// Index of its entry in the log.
    pub entry: usize,
    /// When it was written.
    pub at: String,
    /// Tools it has that the previous inventory had not (all of them for the first).
    pub added: Vec<String>,
    /// Tools the previous inventory had that it has not.
    pub removed: Vec<String>,
    /// The servers, their states and tools.
    pub servers: Vec<ServerRecord>,
}

/// What a conversation cost and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConversationReport {
    /// The conversation.
    pub conversation_id: String,
    /// Entries in the log.
    pub entries: usize,
    /// User messages typed (not `continue`s or corrections).
    pub user_messages: usize,
    /// Model calls answered.
    pub model_calls: u64,
    /// Model calls that failed.
    pub model_errors: u64,
    /// Retries of model calls.
    pub model_retries: u64,
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// The share of all input tokens (billed, read from and written to the cache) that was
    /// read from the cache, 0 to 1.
    pub cache_read_share: f64,
    /// Per tool.
    pub tools: BTreeMap<String, ToolStats>,
    /// Skills activated, in order.
    pub skills: Vec<String>,
    /// Compressions.
    pub compressions: Vec<CompressionRecord>,
    /// `/compact`s.
    pub compactions: u64,
    /// Final answers.
    pub final_answers: u64,
    /// The server inventories runs recorded, in order: when the tools of MCP servers changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_servers: Vec<InventoryChange>,
    /// Calls that waited for a person (each once, however many pauses named it).
    #[serde(skip_serializing_if = "is_zero")]
    pub approvals_requested: u64,
    /// A person's decisions, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approval_decisions: Vec<ba_protocol::ApprovalDecision>,
    /// Who made each decision of `approval_decisions` (same order; `None` in logs written
    /// before people were told apart).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decided_by: Vec<Option<String>>,
    /// What each person did in the conversation, by name: runs started, calls decided,
    /// rewinds.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub actors: BTreeMap<String, ActorCounts>,
    /// Every run of a hook, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<ba_protocol::HookRecord>,
    /// What the priced calls cost, in US dollars (see [`ConversationReport::priced`]); absent
    /// when no call's model has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model calls whose model has no price (their tokens are not in `cost_usd`).
    #[serde(skip_serializing_if = "is_zero")]
    pub unpriced_calls: u64,
    /// Every workflow run of the conversation, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workflow_runs: Vec<WorkflowRunReport>,
    /// Model calls whose token figures are the client's own count (the server reported none).
    #[serde(skip_serializing_if = "is_zero")]
    pub estimated_calls: u64,
    /// The window the conversation's requests are sized to since a server named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<ba_protocol::WindowRecord>,
    /// How the latest model's server counts against the local count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::Calibration>,
    /// What the history holds now, when rewinds took entries back (the figures above count
    /// every entry of the log: every call made and paid for, taken back or not). Absent when
    /// the log has no rewind, the history being the whole log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryReport>,
}

/// What one person did in a conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ActorCounts {
    /// Runs they started (a message, `continue`, a workflow).
    pub runs: u64,
    /// Calls they approved or refused.
    pub decisions: u64,
    /// Times they took the history back.
    pub rewinds: u64,
}

/// The history after its rewinds, as [`ConversationReport::history`] tells it: what the model
/// sees now, beside the spend of every call made.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HistoryReport {
    /// Rewinds in the log.
    pub rewinds: u64,
    /// Entries the rewinds took back (they stay in the log).
    pub taken_back_entries: usize,
    /// Model calls the rewinds took back, answered or failed; their tokens and cost are in the
    /// report's totals and not in the history's.
    pub taken_back_calls: u64,
    /// Entries of the history (the rewinds themselves left out).
    pub entries: usize,
    /// User messages typed.
    pub user_messages: usize,
    /// Model calls answered.
    pub model_calls: u64,
    /// Model calls that failed.
    pub model_errors: u64,
    /// Final answers.
    pub final_answers: u64,
    /// Tool calls with a result.
    pub tool_calls: u64,
    /// Input tokens billed for the calls of the history.
    pub input_tokens: u64,
    /// Output tokens of the calls of the history.
    pub output_tokens: u64,
    /// What the calls of the history cost, in US dollars; absent when none has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A workflow run as the metrics report tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkflowRunReport {
    /// The workflow.
    pub workflow: String,
    /// The run's id.
    pub run_id: String,
    /// Its inputs.
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The nodes completed, in order, with their outputs.
    pub completed: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
    /// The node it is at; `None` once complete.
    pub active: Option<String>,
}

/// Takes a workflow record into the runs seen so far.
fn workflow_record(runs: &mut Vec<WorkflowRunReport>, w: &ba_protocol::WorkflowRecord) {
    match w.event {
        ba_protocol::WorkflowEventKind::Started => runs.push(WorkflowRunReport {
            workflow: w.workflow.clone(),
            run_id: w.run_id.clone(),
            inputs: w.inputs.clone().unwrap_or_default(),
            completed: Vec::new(),
            active: w
                .definition
                .as_ref()
                .and_then(|d| d.pointer("/nodes/0/id"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        }),
        ba_protocol::WorkflowEventKind::NodeCompleted => {
            if let Some(run) = runs.iter_mut().rev().find(|r| r.run_id == w.run_id) {
                run.completed.push((
                    w.node.clone().unwrap_or_default(),
                    w.outputs.clone().unwrap_or_default(),
                ));
                run.active = w.next.clone();
            }
        }
    }
}

/// US dollars as the page shows them: cents, or four decimals below ten cents.
pub fn money(usd: f64) -> String {
    if usd >= 0.1 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ConversationReport {
    /// The report of `entries`.
    pub fn from_log(conversation_id: &str, entries: &[LogEntry]) -> Self {
        let mut r = Self {
            conversation_id: conversation_id.to_owned(),
            entries: entries.len(),
            ..Self::default()
        };
        // Tool results of imported sessions carry no tool name; their calls do.
        let mut call_names: std::collections::HashMap<&str, &str> =
            std::collections::HashMap::new();
        let mut last_tools: Vec<String> = Vec::new();
        let mut requested = std::collections::HashSet::new();
        for (index, e) in entries.iter().enumerate() {
            if let Some(w) = e.records.workflow.as_deref() {
                workflow_record(&mut r.workflow_runs, w);
            }
            for p in e.records.approval_request.iter().flatten() {
                requested.insert(p.call_id.as_str());
            }
            if let Some(d) = &e.records.approval_decision {
                r.approval_decisions.push(d.clone());
                r.decided_by.push(e.records.actor.clone());
            }
            if let Some(actor) = &e.records.actor {
                let counts = r.actors.entry(actor.clone()).or_default();
                if e.records.approval_decision.is_some() {
                    counts.decisions += 1;
                } else if e.records.rewind.is_some() {
                    counts.rewinds += 1;
                } else {
                    counts.runs += 1;
                }
            }
            if let Some(h) = &e.records.hook {
                r.hooks.push(h.clone());
            }
            for call in e.calls() {
                call_names.insert(call.id.as_str(), call.function.name.as_str());
            }
            if let Some(inventory) = e.records.server_inventory.clone() {
                let tools: Vec<String> = inventory.tool_names().map(str::to_owned).collect();
                r.tool_servers.push(InventoryChange {
                    entry: index,
                    at: e.created_at.clone(),
                    added: tools
                        .iter()
                        .filter(|t| !last_tools.contains(t))
                        .cloned()
                        .collect(),
                    removed: last_tools
                        .iter()
                        .filter(|t| !tools.contains(t))
                        .cloned()
                        .collect(),
                    servers: inventory.servers,
                });
                last_tools = tools;
            }
            match e.role {
                LogRole::User if starts_task(e) => r.user_messages += 1,
                LogRole::Assistant => {
                    if e.llm_error.is_some() {
                        r.model_errors += 1;
                    } else {
                        r.model_calls += 1;
                        if e.calls().is_empty() {
                            r.final_answers += 1;
                        }
                    }
                    r.model_retries += u64::from(e.records.retries.unwrap_or(0));
                    if let Some(u) = e.records.usage {
                        r.input_tokens += u.input_tokens;
                        r.output_tokens += u.output_tokens;
                        r.cache_read_tokens += u.cache_read_tokens;
                        r.cache_write_tokens += u.cache_write_tokens;
                    }
                    if let Some(c) = e.records.context.clone().filter(|c| c.compressed) {
                        r.compressions.push(CompressionRecord {
                            round: u64::from(e.records.round.unwrap_or(0)),
                            tokens_before: c.tokens_before as u64,
                            tokens_after: c.tokens_after as u64,
                            strategies: c.strategies,
                        });
                    }
                }
                LogRole::Tool => {
                    let name = e
                        .tool_name
                        .clone()
                        .or_else(|| {
                            let id = e.tool_call_id.as_deref()?;
                            call_names.get(id).map(|n| (*n).to_owned())
                        })
                        .unwrap_or_else(|| "(unknown)".into());
                    let t = r.tools.entry(name).or_default();
                    t.calls += 1;
                    if e.is_error == Some(true) {
                        t.failures += 1;
                    }
                    t.retries += u64::from(e.records.tool_retries.unwrap_or(0));
                    let ms = e.duration_ms.unwrap_or(0);
                    t.total_ms += ms;
                    t.max_ms = t.max_ms.max(ms);
                    if let Some(s) = &e.records.skill {
                        let s = s.clone();
                        r.skills.push(s.name);
                    }
                }
                // A `/compact` (version 1 wrote it as a summary entry; it is read as a record).
                LogRole::System
                    if e.records.compaction.as_ref().is_some_and(|c| {
                        c.starts_afresh() && c.strategies.iter().any(|s| s == "compact")
                    }) =>
                {
                    r.compactions += 1;
                }
                _ => {}
            }
        }
        r.approvals_requested = requested.len() as u64;
        r.estimated_calls = entries
            .iter()
            .filter(|e| e.records.usage.is_some_and(|u| u.estimated))
            .count() as u64;
        r.window = crate::window_record(entries).cloned();
        r.calibration = crate::calibration(entries);
        let input = r.input_tokens + r.cache_read_tokens + r.cache_write_tokens;
        if input > 0 {
            r.cache_read_share = r.cache_read_tokens as f64 / input as f64;
        }
        r
    }

    /// The report of a conversation's log as the store gives it, priced at `prices`: the
    /// totals count every entry (every call made, including those a rewind took back), and
    /// [`ConversationReport::history`] says what the history holds after the rewinds.
    pub fn from_stored(
        conversation_id: &str,
        stored: &[ba_storage::StoredEntry],
        prices: &crate::Prices,
    ) -> Self {
        let all: Vec<LogEntry> = stored.iter().map(|s| s.entry.clone()).collect();
        let mut report = Self::from_log(conversation_id, &all).priced(&all, prices);
        let rewinds = all
            .iter()
            .filter(|e| e.records.kind == Some(ba_protocol::EntryKind::Rewind))
            .count() as u64;
        if rewinds == 0 {
            return report;
        }
        let kept: Vec<LogEntry> = ba_storage::after_rewinds(stored.to_vec())
            .into_iter()
            .map(|s| s.entry)
            .collect();
        let now = Self::from_log(conversation_id, &kept).priced(&kept, prices);
        let made = report.model_calls + report.model_errors;
        report.history = Some(HistoryReport {
            rewinds,
            taken_back_entries: all.len() - kept.len() - rewinds as usize,
            taken_back_calls: made.saturating_sub(now.model_calls + now.model_errors),
            entries: kept.len(),
            user_messages: now.user_messages,
            model_calls: now.model_calls,
            model_errors: now.model_errors,
            final_answers: now.final_answers,
            tool_calls: now.tools.values().map(|t| t.calls).sum(),
            input_tokens: now.input_tokens,
            output_tokens: now.output_tokens,
            cost_usd: now.cost_usd,
        });
        report
    }

    /// The report with the cost of `entries` (the log it was made from) at `prices`: each
    /// model call priced by the model that answered it.
    #[must_use]
    pub fn priced(mut self, entries: &[LogEntry], prices: &crate::Prices) -> Self {
        let mut total = None::<f64>;
        self.unpriced_calls = 0;
        for e in entries
            .iter()
            .filter(|e| e.role == LogRole::Assistant && e.records.usage.is_some())
        {
            match prices.of_entry(e) {
                Some(c) => total = Some(total.unwrap_or(0.0) + c),
                None => self.unpriced_calls += 1,
            }
        }
        self.cost_usd = total;
        self
    }

    /// The report as text; `timings: false` leaves durations out (for stable output).
    pub fn render(&self, timings: bool) -> String {
        let mut out = String::new();
        self.write_model(&mut out);
        self.write_history(&mut out);
        self.write_workflows(&mut out);
        self.write_tools(&mut out, timings);
        self.write_context(&mut out);
        self.write_servers(&mut out);
        self.write_actors(&mut out);
        self.write_approvals(&mut out);
        self.write_hooks(&mut out, timings);
        out
    }

    /// The conversation's totals: entries, model calls and tokens, the window the server named,
    /// the calibration and the cost.
    fn write_model(&self, out: &mut String) {
        let _ = writeln!(out, "Metrics of conversation {}", self.conversation_id);
        let _ = writeln!(
            out,
            "  entries {} · user messages {} · final answers {}",
            self.entries, self.user_messages, self.final_answers
        );
        let _ = writeln!(
            out,
            "  model: {} calls, {} failed, {} retries · tokens in {} / out {} · cache read {}, written {} ({:.1} % of input read from the cache)",
            self.model_calls,
            self.model_errors,
            self.model_retries,
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.cache_read_share * 100.0
        );
        if self.estimated_calls > 0 {
            let _ = writeln!(
                out,
                "  {} of the calls' token figures are the client's count: the server reported none",
                self.estimated_calls
            );
        }
        if let Some(w) = &self.window {
            let refused = w
                .refused_tokens
                .map_or_else(String::new, |r| format!(" after refusing {r}"));
            let _ = writeln!(
                out,
                "  context window: {} tokens, as the server said{refused}",
                w.tokens
            );
        }
        if let Some(c) = &self.calibration {
            let _ = writeln!(
                out,
                "  calibration: {} counts {:.2} tokens for each local one (over {} calls)",
                c.model, c.ratio, c.calls
            );
        }
        match (self.cost_usd, self.unpriced_calls) {
            (Some(cost), 0) => {
                let _ = writeln!(out, "  cost: {}", money(cost));
            }
            (Some(cost), n) => {
                let _ = writeln!(out, "  cost: {} ({n} calls without a price)", money(cost));
            }
            (None, _) => {}
        }
    }

    /// What rewinds took back, and the history as it stands.
    fn write_history(&self, out: &mut String) {
        if let Some(h) = &self.history {
            let _ = writeln!(
                out,
                "  rewinds: {} took back {} entries ({} model calls), counted above as spent",
                h.rewinds, h.taken_back_entries, h.taken_back_calls
            );
            let mut line = format!(
                "  history now: {} entries · user messages {} · {} model calls, {} failed · \
             final answers {} · {} tool calls · tokens in {} / out {}",
                h.entries,
                h.user_messages,
                h.model_calls,
                h.model_errors,
                h.final_answers,
                h.tool_calls,
                h.input_tokens,
                h.output_tokens
            );
            if let Some(cost) = h.cost_usd {
                let _ = write!(line, " · cost {}", money(cost));
            }
            let _ = writeln!(out, "{line}");
        }
    }

    /// Each workflow run: where it is and what its nodes gave.
    fn write_workflows(&self, out: &mut String) {
        for w in &self.workflow_runs {
            let done: Vec<&str> = w.completed.iter().map(|(n, _)| n.as_str()).collect();
            let state = match &w.active {
                Some(node) => format!("at node {node}"),
                None => "complete".to_owned(),
            };
            let _ = writeln!(
                out,
                "  workflow {} ({}): {} — nodes done: {}",
                w.workflow,
                w.run_id,
                state,
                if done.is_empty() {
                    "none".to_owned()
                } else {
                    done.join(", ")
                }
            );
            for (node, outputs) in &w.completed {
                let mut text = serde_json::Value::Object(outputs.clone()).to_string();
                if text.chars().count() > 160 {
                    text = text.chars().take(160).collect::<String>() + "…";
                }
                let _ = writeln!(out, "    {node}: {text}");
            }
        }
    }

    /// Calls and failures per tool (with their durations when `timings`).
    fn write_tools(&self, out: &mut String, timings: bool) {
        let calls: u64 = self.tools.values().map(|t| t.calls).sum();
        let failures: u64 = self.tools.values().map(|t| t.failures).sum();
        let _ = writeln!(out, "  tools: {calls} calls, {failures} failed");
        for (name, t) in &self.tools {
            let _ = write!(
                out,
                "    {name:<16} {:>3} calls {:>3} failed {:>3} retries",
                t.calls, t.failures, t.retries
            );
            if timings {
                let mean = t.total_ms.checked_div(t.calls).unwrap_or(0);
                let _ = write!(out, " · mean {mean} ms, max {} ms", t.max_ms);
            }
            out.push('\n');
        }
    }

    /// Skills activated, compressions and compactions.
    fn write_context(&self, out: &mut String) {
        let skills = if self.skills.is_empty() {
            "none".to_owned()
        } else {
            self.skills.join(", ")
        };
        let _ = writeln!(out, "  skills activated: {skills}");
        let _ = writeln!(
            out,
            "  compressions: {} · compactions: {}",
            self.compressions.len(),
            self.compactions
        );
        for c in &self.compressions {
            let _ = writeln!(
                out,
                "    round {}: {} → {} tokens ({})",
                c.round,
                c.tokens_before,
                c.tokens_after,
                c.strategies.join(", ")
            );
        }
    }

    /// The tool servers' inventories, when they changed.
    fn write_servers(&self, out: &mut String) {
        if !self.tool_servers.is_empty() {
            let _ = writeln!(
                out,
                "  tool servers: {} inventories (recorded when they changed)",
                self.tool_servers.len()
            );
            for c in &self.tool_servers {
                let summary = ServerInventoryRecord {
                    servers: c.servers.clone(),
                }
                .summary();
                let _ = write!(out, "    entry {}: {summary}", c.entry);
                if !c.added.is_empty() {
                    let _ = write!(out, " · added {}", c.added.join(", "));
                }
                if !c.removed.is_empty() {
                    let _ = write!(out, " · removed {}", c.removed.join(", "));
                }
                out.push('\n');
            }
        }
    }

    /// Who did what: runs started, calls decided, rewinds, by person.
    fn write_actors(&self, out: &mut String) {
        if self.actors.is_empty() {
            return;
        }
        let people: Vec<String> = self
            .actors
            .iter()
            .map(|(name, c)| {
                let mut did = vec![format!("{} run{}", c.runs, plural(c.runs))];
                if c.decisions > 0 {
                    did.push(format!("{} decision{}", c.decisions, plural(c.decisions)));
                }
                if c.rewinds > 0 {
                    did.push(format!("{} rewind{}", c.rewinds, plural(c.rewinds)));
                }
                format!("{name} ({})", did.join(", "))
            })
            .collect();
        let _ = writeln!(out, "  people: {}", people.join(" · "));
    }

    /// Calls that waited for a person, and the decisions.
    fn write_approvals(&self, out: &mut String) {
        if self.approvals_requested > 0 || !self.approval_decisions.is_empty() {
            let _ = writeln!(
                out,
                "  approvals: {} calls waited · {} decisions",
                self.approvals_requested,
                self.approval_decisions.len()
            );
            for (i, d) in self.approval_decisions.iter().enumerate() {
                let _ = write!(
                    out,
                    "    {} {} ({})",
                    d.decision.as_str(),
                    d.call_id,
                    d.tool
                );
                if let Some(Some(actor)) = self.decided_by.get(i) {
                    let _ = write!(out, " by {actor}");
                }
                if let Some(reason) = &d.reason {
                    let _ = write!(out, ": {reason}");
                }
                out.push('\n');
            }
        }
    }

    /// The hooks that ran and what they said (with durations when `timings`).
    fn write_hooks(&self, out: &mut String, timings: bool) {
        if !self.hooks.is_empty() {
            let _ = writeln!(out, "  hooks: {} runs", self.hooks.len());
            for h in &self.hooks {
                let verdict = match h.verdict {
                    ba_protocol::HookVerdict::Allow => "allowed",
                    ba_protocol::HookVerdict::Block => "blocked",
                    ba_protocol::HookVerdict::Failed => "failed",
                    ba_protocol::HookVerdict::TimedOut => "timed out",
                };
                let _ = write!(out, "    {} `{}`", h.event.as_str(), h.hook);
                if let Some(tool) = &h.tool {
                    let _ = write!(out, " on {tool}");
                }
                let _ = write!(out, ": {verdict}");
                if let Some(code) = h.exit_code {
                    let _ = write!(out, " (exit {code})");
                }
                if timings {
                    let _ = write!(out, " · {} ms", h.duration_ms);
                }
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{ModelRecord, Usage};

    fn call(model: Option<&str>, input: u64, output: u64) -> LogEntry {
        let mut e = LogEntry::new("a", LogRole::Assistant, "2026-01-01T00:00:00Z");
        e.records.usage = Some(Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        });
        e.records.model = Some(ModelRecord {
            provider: "anthropic".into(),
            name: model.map(str::to_owned),
        });
        e
    }

    #[test]
    fn calls_are_priced_by_their_model_and_the_others_counted_apart() {
        let mut m = std::collections::BTreeMap::new();
        m.insert(
            "claude".to_owned(),
            crate::ModelPrice {
                input: 2.0,
                output: 10.0,
                ..crate::ModelPrice::default()
            },
        );
        let prices = crate::Prices::new(m).unwrap_or_default();
        let log = [
            call(Some("claude-x"), 500_000, 100_000),
            call(Some("gpt-4o"), 1_000, 1_000),
            call(None, 1_000, 1_000),
            call(Some("claude-y"), 500_000, 0),
        ];
        let r = ConversationReport::from_log("c", &log).priced(&log, &prices);
        assert_eq!(r.cost_usd, Some(3.0));
        assert_eq!(r.unpriced_calls, 2);
        assert!(
            r.render(false)
                .contains("  cost: $3.00 (2 calls without a price)\n")
        );
        let none = ConversationReport::from_log("c", &log).priced(&log, &crate::Prices::default());
        assert_eq!((none.cost_usd, none.unpriced_calls), (None, 4));
        assert!(!none.render(false).contains("cost:"));
        assert_eq!(money(0.01234), "$0.0123");
        assert_eq!(money(12.345), "$12.35");
    }
}
