//! A person in the loop: which calls wait for a decision, read from the log alone, and what
//! a run does with each call of a round — run it, refuse it, or leave it waiting.
//!
//! A pause is a hidden entry of kind `approval_request` naming the waiting calls; a decision
//! is a hidden entry of kind `approval_decision`. Nothing else holds the state, so a decision
//! taken on any server, after any restart, resumes the run from the log.

use std::collections::{BTreeMap, HashMap, HashSet};

use ba_protocol::{
    ApprovalDecision, ApprovalMode, Decision, EntryKind, LogEntry, LogToolCall, PendingApproval,
    ToolApproval,
};
use ba_tools::ToolCapabilities;
use serde_json::Value;

/// The approval settings of an agent: the session's mode and the policy of named tools
/// (a tool not named follows its own declared [`ToolCapabilities::approval`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// The session's mode (default `ask`).
    pub mode: ApprovalMode,
    /// Policies by tool name (the name the model calls).
    pub tools: BTreeMap<String, ToolApproval>,
    /// Calls that run without asking whatever the policy, by tool name: those whose arguments
    /// have every value given here (`query_database: {database: sample}` asks only for the
    /// other databases).
    pub unless: BTreeMap<String, serde_json::Map<String, Value>>,
}

/// What the approval settings say about one call made outside a run (a front end that
/// serves the tools to another program): no log holds decisions there, so only the mode and
/// the policies decide.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalCheck {
    /// Run it.
    Run,
    /// A person must approve it first.
    Ask,
    /// It may not run at all; the sentence says why.
    Refuse(String),
}

impl ApprovalSettings {
    /// Whether a call of `name` with `arguments` may run, given the tool's declared
    /// `capabilities` (`None` for an unknown tool, which runs into the runtime's own error).
    pub fn check(
        &self,
        name: &str,
        capabilities: Option<ToolCapabilities>,
        arguments: &Value,
    ) -> ApprovalCheck {
        let call = LogToolCall::new("", name, arguments);
        match gate(self, capabilities, &LogApprovals::default(), &call) {
            Gate::Run(_) => ApprovalCheck::Run,
            Gate::Wait => ApprovalCheck::Ask,
            Gate::Refuse { message, .. } => ApprovalCheck::Refuse(message),
        }
    }
}

/// A person's answer about one waiting call: the input of a run that goes on after a pause
/// ([`crate::Input::Decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAnswer {
    /// The waiting call.
    pub call_id: String,
    /// What was decided.
    pub decision: Decision,
    /// Why (a rejection's reason reaches the model).
    pub reason: Option<String>,
    /// An edit's arguments (a JSON object).
    pub arguments: Option<Value>,
}

impl ApprovalAnswer {
    /// Run the call.
    pub fn approve(call_id: impl Into<String>) -> Self {
        Self::new(call_id, Decision::Approve)
    }

    /// Run the call and every later call of its tool in the conversation without asking.
    pub fn approve_for_conversation(call_id: impl Into<String>) -> Self {
        Self::new(call_id, Decision::ApproveForConversation)
    }

    /// Do not run the call; the model reads `reason`.
    pub fn reject(call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            reason: Some(reason.into()),
            ..Self::new(call_id, Decision::Reject)
        }
    }

    /// Run the call with `arguments` instead of the model's.
    pub fn edit(call_id: impl Into<String>, arguments: Value) -> Self {
        Self {
            arguments: Some(arguments),
            ..Self::new(call_id, Decision::Edit)
        }
    }

    fn new(call_id: impl Into<String>, decision: Decision) -> Self {
        Self {
            call_id: call_id.into(),
            decision,
            reason: None,
            arguments: None,
        }
    }
}

/// What the log says about approvals.
#[derive(Debug, Default)]
pub(crate) struct LogApprovals {
    /// Calls a pause named (they waited, or wait).
    requested: HashMap<String, PendingApproval>,
    /// Decisions by call id.
    decisions: HashMap<String, ApprovalDecision>,
    /// Tools approved for the rest of the conversation.
    for_conversation: HashSet<String>,
}

impl LogApprovals {
    pub(crate) fn read(entries: &[LogEntry]) -> Self {
        let mut out = Self::default();
        for e in entries {
            match e.records.kind {
                Some(EntryKind::ApprovalRequest) => {
                    for p in e.records.approval_request.iter().flatten() {
                        out.requested.insert(p.call_id.clone(), p.clone());
                    }
                }
                Some(EntryKind::ApprovalDecision) => {
                    if let Some(d) = &e.records.approval_decision {
                        if d.decision == Decision::ApproveForConversation {
                            out.for_conversation.insert(d.tool.clone());
                        }
                        out.decisions.insert(d.call_id.clone(), d.clone());
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The decision about a call, if one was taken.
    pub(crate) fn decision(&self, call_id: &str) -> Option<&ApprovalDecision> {
        self.decisions.get(call_id)
    }

    /// The calls among `pending` that a pause named and nobody decided on yet.
    pub(crate) fn waiting(&self, pending: &[LogToolCall]) -> Vec<PendingApproval> {
        pending
            .iter()
            .filter(|c| !self.decisions.contains_key(&c.id))
            .filter_map(|c| self.requested.get(&c.id).cloned())
            .collect()
    }
}

/// What a round does with one call.
#[derive(Debug)]
pub(crate) enum Gate {
    /// Run it (with a person's arguments when they edited them).
    Run(Option<Value>),
    /// Do not run it: the model reads the message as the call's error.
    Refuse { code: &'static str, message: String },
    /// Wait for a person.
    Wait,
}

/// Decides what happens to `call`: a decision in the log wins; else the session's mode and
/// the tool's policy (the configuration's, else the tool's own).
pub(crate) fn gate(
    settings: &ApprovalSettings,
    caps: Option<ToolCapabilities>,
    log: &LogApprovals,
    call: &LogToolCall,
) -> Gate {
    let name = call.function.name.as_str();
    if let Some(d) = log.decision(&call.id) {
        return match d.decision {
            Decision::Approve | Decision::ApproveForConversation => Gate::Run(None),
            Decision::Edit => Gate::Run(d.arguments.clone()),
            Decision::Reject => Gate::Refuse {
                code: "REJECTED",
                message: format!(
                    "a person rejected this call of {name}: {}",
                    d.reason.as_deref().unwrap_or("no reason given")
                ),
            },
        };
    }
    // An unknown tool runs into the runtime's own error.
    let Some(caps) = caps else {
        return Gate::Run(None);
    };
    if settings.mode == ApprovalMode::ReadOnly && caps.writes {
        return Gate::Refuse {
            code: "READ_ONLY",
            message: format!(
                "{name} changes something and this conversation is read-only; \
                 it was not run"
            ),
        };
    }
    let mut policy = settings.tools.get(name).copied().unwrap_or(caps.approval);
    if let Some((key, value)) = caps.reads_when
        && call
            .arguments_json()
            .is_ok_and(|args| args.get(key).and_then(Value::as_str) == Some(value))
    {
        policy = ToolApproval::Never;
    }
    if let Some(exempt) = settings.unless.get(name).filter(|m| !m.is_empty()) {
        let args = call.arguments_json().unwrap_or(Value::Null);
        if exempt.iter().all(|(k, v)| args.get(k) == Some(v)) {
            policy = ToolApproval::Never;
        }
    }
    let ask = match policy {
        ToolApproval::Never => false,
        ToolApproval::Always => true,
        ToolApproval::Ask => {
            settings.mode != ApprovalMode::Auto && !log.for_conversation.contains(name)
        }
    };
    if ask { Gate::Wait } else { Gate::Run(None) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::LogRole;

    fn call(id: &str, name: &str) -> LogToolCall {
        LogToolCall::new(id, name, &serde_json::json!({}))
    }

    fn decided(call_id: &str, tool: &str, decision: Decision) -> LogEntry {
        let mut e = LogEntry::new("d", LogRole::System, "2026-01-01T00:00:00Z");
        e.records.kind = Some(EntryKind::ApprovalDecision);
        e.records.approval_decision = Some(ApprovalDecision {
            call_id: call_id.into(),
            tool: tool.into(),
            decision,
            reason: None,
            arguments: None,
        });
        e
    }

    #[test]
    fn a_check_outside_a_run_follows_the_mode_the_policies_and_the_exemptions() {
        let asks = ToolCapabilities::default().with_approval(ToolApproval::Ask);
        let args = serde_json::json!({"database": "sample"});
        let mut settings = ApprovalSettings::default();
        assert_eq!(
            settings.check("run_python", Some(ToolCapabilities::default()), &args),
            ApprovalCheck::Run
        );
        assert_eq!(settings.check("q", Some(asks), &args), ApprovalCheck::Ask);
        settings
            .tools
            .insert("run_python".into(), ToolApproval::Always);
        assert_eq!(
            settings.check("run_python", Some(ToolCapabilities::default()), &args),
            ApprovalCheck::Ask
        );
        settings.unless.insert(
            "q".into(),
            serde_json::Map::from_iter([("database".to_owned(), "sample".into())]),
        );
        assert_eq!(settings.check("q", Some(asks), &args), ApprovalCheck::Run);
        settings.mode = ApprovalMode::ReadOnly;
        assert_eq!(
            settings.check(
                "w",
                Some(ToolCapabilities::default().with_writes(true)),
                &args
            ),
            ApprovalCheck::Refuse(
                "w changes something and this conversation is read-only; it was not run".into()
            )
        );
        // An unknown tool runs into the runtime's own error.
        assert_eq!(settings.check("nope", None, &args), ApprovalCheck::Run);
    }

    #[test]
    fn the_mode_and_the_policy_decide_without_a_decision() {
        let caps = |a: ToolApproval, writes: bool| {
            Some(
                ToolCapabilities::default()
                    .with_approval(a)
                    .with_writes(writes),
            )
        };
        let log = LogApprovals::default();
        let c = call("c1", "q");
        let table = [
            (ApprovalMode::Ask, ToolApproval::Never, "run"),
            (ApprovalMode::Ask, ToolApproval::Ask, "wait"),
            (ApprovalMode::Ask, ToolApproval::Always, "wait"),
            (ApprovalMode::Auto, ToolApproval::Ask, "run"),
            (ApprovalMode::Auto, ToolApproval::Always, "wait"),
            (ApprovalMode::ReadOnly, ToolApproval::Ask, "wait"),
        ];
        for (mode, policy, want) in table {
            let settings = ApprovalSettings {
                mode,
                ..ApprovalSettings::default()
            };
            let got = match gate(&settings, caps(policy, false), &log, &c) {
                Gate::Run(_) => "run",
                Gate::Wait => "wait",
                Gate::Refuse { .. } => "refuse",
            };
            assert_eq!(got, want, "{mode:?} {policy:?}");
        }
        let read_only = ApprovalSettings {
            mode: ApprovalMode::ReadOnly,
            ..ApprovalSettings::default()
        };
        assert!(matches!(
            gate(&read_only, caps(ToolApproval::Never, true), &log, &c),
            Gate::Refuse {
                code: "READ_ONLY",
                ..
            }
        ));
        // The configuration's policy wins over the tool's.
        let named = ApprovalSettings {
            tools: BTreeMap::from([("q".to_owned(), ToolApproval::Ask)]),
            ..ApprovalSettings::default()
        };
        assert!(matches!(
            gate(&named, caps(ToolApproval::Never, false), &log, &c),
            Gate::Wait
        ));
    }

    #[test]
    fn an_exception_on_the_arguments_runs_without_asking() {
        let settings = ApprovalSettings {
            tools: BTreeMap::from([("q".to_owned(), ToolApproval::Ask)]),
            unless: BTreeMap::from([(
                "q".to_owned(),
                serde_json::json!({"database": "sample"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            )]),
            ..ApprovalSettings::default()
        };
        let caps = Some(ToolCapabilities::default());
        let log = LogApprovals::default();
        let on =
            |db: &str| LogToolCall::new("c", "q", &serde_json::json!({"database": db, "sql": "x"}));
        assert!(matches!(
            gate(&settings, caps, &log, &on("sample")),
            Gate::Run(None)
        ));
        assert!(matches!(
            gate(&settings, caps, &log, &on("prod")),
            Gate::Wait
        ));
        assert!(matches!(
            gate(&settings, caps, &log, &call("c", "q")),
            Gate::Wait
        ));
    }

    #[test]
    fn approval_for_the_conversation_covers_ask_but_not_always() {
        let log = LogApprovals::read(&[decided("c0", "q", Decision::ApproveForConversation)]);
        let settings = ApprovalSettings::default();
        let ask = Some(ToolCapabilities::default().with_approval(ToolApproval::Ask));
        let always = Some(ToolCapabilities::default().with_approval(ToolApproval::Always));
        assert!(matches!(
            gate(&settings, ask, &log, &call("c1", "q")),
            Gate::Run(None)
        ));
        assert!(matches!(
            gate(&settings, always, &log, &call("c1", "q")),
            Gate::Wait
        ));
        assert!(matches!(
            gate(&settings, ask, &log, &call("c2", "other")),
            Gate::Wait
        ));
    }
}
