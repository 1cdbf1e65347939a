//! A round's calls through the approval gate (see [`crate::approvals`]): those that may run
//! run, those refused get their error as a result, and those that wait are recorded in the
//! log and end the run `awaiting_approval`. A person's decisions come in as a run's input.

use std::collections::{HashMap, HashSet};

use ba_protocol::{
    ApprovalDecision, Decision, EntryKind, HookEvent, LogEntry, LogRole, LogToolCall,
    PendingApproval, ToolErrorKind, ToolResult,
};

use super::tools::{arguments_of, tool_entry};
use super::{Runner, Stop};
use crate::approvals::{ApprovalAnswer, Gate, LogApprovals, gate};
use crate::error::ErrorKind;
use crate::events::{AgentEvent, RunStatus, RunSummary};
use crate::ids::{new_id, now};

impl Runner {
    /// Runs `calls` as the approval gate lets them; `Some` summary when some wait.
    pub(super) async fn run_gated(
        &mut self,
        calls: &[LogToolCall],
    ) -> Result<Option<RunSummary>, Stop> {
        let log = LogApprovals::read(self.history.all());
        let (mut run, mut edits, mut refused, mut wait) =
            (Vec::new(), HashMap::new(), Vec::new(), Vec::new());
        for c in calls {
            let caps = self
                .kit
                .tools
                .runtime
                .registry()
                .get(&c.function.name)
                .map(|t| t.tool().capabilities());
            match gate(&self.inner.settings.approvals, caps, &log, c) {
                Gate::Run(edited) => {
                    if let Some(a) = edited {
                        edits.insert(c.id.clone(), (a, "a person"));
                    }
                    run.push(c.clone());
                }
                Gate::Refuse { code, message } => refused.push((c, code, message)),
                Gate::Wait => wait.push(c),
            }
        }
        // The operator's pre_tool_use hooks, on what is about to run.
        let mut go = Vec::new();
        for c in run {
            let input = edits
                .get(&c.id)
                .map_or_else(|| arguments_of(&c), |e| e.0.clone());
            let said = self
                .hooks(
                    HookEvent::PreToolUse,
                    Some(&c),
                    serde_json::json!({"tool_name": c.function.name, "tool_input": input}),
                )
                .await?;
            if let Some(reason) = said.blocked {
                let message = format!("a pre_tool_use hook blocked this call: {reason}");
                self.refuse(&c, "HOOK_BLOCKED", &message).await?;
                continue;
            }
            if let Some(new) = said.updated_input {
                edits.insert(c.id.clone(), (new, "a hook"));
            }
            go.push(c);
        }
        if !go.is_empty() {
            self.run_calls(&go, &edits).await?;
        }
        for (c, code, message) in refused {
            self.refuse(c, code, &message).await?;
        }
        if wait.is_empty() {
            return Ok(None);
        }
        let waiting: Vec<PendingApproval> = wait
            .iter()
            .map(|c| PendingApproval {
                call_id: c.id.clone(),
                tool: c.function.name.clone(),
                arguments: c
                    .arguments_json()
                    .unwrap_or_else(|_| serde_json::Value::String(c.function.arguments.clone())),
                run_id: self.options.run_id.clone(),
            })
            .collect();
        // The log's last entry says the conversation waits: a request naming every waiting
        // call, written again only when something was appended since the last one.
        let ids = |p: &[PendingApproval]| p.iter().map(|p| p.call_id.clone()).collect::<Vec<_>>();
        let said = self.history.last().is_some_and(|e| {
            e.records.kind == Some(EntryKind::ApprovalRequest)
                && e.records.approval_request.as_deref().map(ids) == Some(ids(&waiting))
        });
        if !said {
            let names: Vec<&str> = waiting.iter().map(|p| p.tool.as_str()).collect();
            let mut e = LogEntry::new(new_id(), LogRole::System, now())
                .with_text(format!("Waiting for approval: {}", names.join(", ")));
            e.include_in_context = false;
            e.records.kind = Some(EntryKind::ApprovalRequest);
            e.records.approval_request = Some(waiting.clone());
            self.append(e).await?;
        }
        self.emit(AgentEvent::ApprovalRequested {
            round: self.round,
            calls: waiting,
        });
        Ok(Some(self.summary(RunStatus::AwaitingApproval, None, None)))
    }

    /// Appends the error result of a call that does not run.
    async fn refuse(&mut self, call: &LogToolCall, code: &str, message: &str) -> Result<(), Stop> {
        let result = ToolResult::failure(
            call.id.clone(),
            ToolErrorKind::PermissionDenied,
            code,
            message,
        );
        self.append(tool_entry(call, &result, None)).await?;
        self.emit(AgentEvent::ToolResult {
            round: self.round,
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            success: false,
            observation: result.observation,
            data_ref: None,
            duration_ms: 0,
        });
        Ok(())
    }

    /// Records a person's decisions, each about a call that waits; any answer naming a call
    /// that does not wait refuses them all (nothing is recorded).
    pub(super) async fn record_decisions(
        &mut self,
        answers: Vec<ApprovalAnswer>,
    ) -> Result<(), Stop> {
        let input = |message: String| Stop {
            kind: ErrorKind::Input,
            message,
        };
        if answers.is_empty() {
            return Err(input("no decision was given".into()));
        }
        let pending = self.history.pending_calls();
        let waiting = LogApprovals::read(self.history.all()).waiting(&pending);
        let mut seen = HashSet::new();
        let mut decisions = Vec::new();
        for a in answers {
            let Some(w) = waiting.iter().find(|w| w.call_id == a.call_id) else {
                return Err(input(format!(
                    "call {:?} is not waiting for approval in this conversation",
                    a.call_id
                )));
            };
            if !seen.insert(a.call_id.clone()) {
                return Err(input(format!("call {:?} was decided twice", a.call_id)));
            }
            let arguments = match a.decision {
                Decision::Edit => match a.arguments {
                    Some(v @ serde_json::Value::Object(_)) => Some(v),
                    _ => {
                        return Err(input(format!(
                            "an edit of call {:?} needs its arguments as a JSON object",
                            a.call_id
                        )));
                    }
                },
                _ => None,
            };
            decisions.push(ApprovalDecision {
                call_id: a.call_id,
                tool: w.tool.clone(),
                decision: a.decision,
                reason: a.reason.filter(|r| !r.trim().is_empty()),
                arguments,
            });
        }
        for d in decisions {
            let mut e = LogEntry::new(new_id(), LogRole::System, now()).with_text(format!(
                "Approval: {} {} ({})",
                d.decision.as_str(),
                d.call_id,
                d.tool
            ));
            e.include_in_context = false;
            e.records.kind = Some(EntryKind::ApprovalDecision);
            e.records.approval_decision = Some(d.clone());
            e.records.actor.clone_from(&self.options.actor);
            self.append(e).await?;
            self.emit(AgentEvent::ApprovalDecided {
                round: self.round,
                decision: d,
            });
        }
        Ok(())
    }

    /// A new message while calls wait: they will not run (the person moved on); each gets an
    /// error result, so the model's calls stay answered.
    pub(super) async fn drop_waiting(&mut self) -> Result<(), Stop> {
        let pending = self.history.pending_calls();
        let waiting = LogApprovals::read(self.history.all()).waiting(&pending);
        for w in waiting {
            if let Some(call) = pending.iter().find(|c| c.id == w.call_id).cloned() {
                self.refuse(
                    &call,
                    "NOT_DECIDED",
                    "not run: the person sent a new message instead of deciding on this call",
                )
                .await?;
            }
        }
        Ok(())
    }
}
