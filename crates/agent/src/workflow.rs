//! Workflow runs — the run mode that runs something. A run starts from a
//! [`ba_skills::WorkflowDef`] and its inputs; while a node is active every request carries the
//! run directive, the node's brief (`NODE_BRIEF`) and its context (the run's inputs and the
//! outputs of the nodes before it); the model completes a node with the `complete_node` tool,
//! whose outputs are checked against what the node declares (a wrong shape is an error the
//! model reads); after the last node only the directive and the post-run protocol remain.
//!
//! Nothing is kept outside the log: the start (with the definition as it was and the inputs)
//! and each completed node are records of the entries that made them, so [`WorkflowRun::
//! from_log`] rebuilds the state after a crash, a restart, an approval pause or a rewind.

use std::fmt::Write as _;

use ba_protocol::{LogEntry, ToolSpec, WorkflowEventKind, WorkflowRecord};
use ba_skills::{WorkflowDef, WorkflowNode};
use serde_json::{Map, Value, json};

/// The tool a model completes a workflow node with.
pub const COMPLETE_NODE: &str = "complete_node";

/// A workflow run as its conversation's log tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRun {
    /// The workflow's name (the entries' `workflow_id`).
    pub workflow: String,
    /// The run's id (the entries' `run_id`).
    pub run_id: String,
    /// The definition the run started with.
    pub definition: WorkflowDef,
    /// The inputs, read by type.
    pub inputs: Map<String, Value>,
    /// The nodes completed so far, in order, with their outputs.
    pub completed: Vec<(String, Map<String, Value>)>,
    /// The node the run is at; `None` once the run is complete.
    pub active: Option<String>,
}

impl WorkflowRun {
    /// A new run of `definition` with `inputs` (already resolved), at its first node.
    pub fn start(definition: WorkflowDef, run_id: String, inputs: Map<String, Value>) -> Self {
        let active = definition.first_node().map(|n| n.id.clone());
        Self {
            workflow: definition.name.clone(),
            run_id,
            definition,
            inputs,
            completed: Vec::new(),
            active,
        }
    }

    /// The record of the start, for the user entry that asks for it.
    pub fn started_record(&self) -> WorkflowRecord {
        WorkflowRecord {
            event: WorkflowEventKind::Started,
            workflow: self.workflow.clone(),
            run_id: self.run_id.clone(),
            inputs: Some(self.inputs.clone()),
            definition: serde_json::to_value(&self.definition).ok(),
            node: None,
            outputs: None,
            next: None,
        }
    }

    /// The latest workflow run of `entries` (a history with its rewinds applied), if any.
    /// A start whose definition cannot be read back is skipped (and said in the trace).
    pub fn from_log(entries: &[LogEntry]) -> Option<Self> {
        let mut run: Option<Self> = None;
        for e in entries {
            let Some(record) = e.records.workflow.as_deref() else {
                continue;
            };
            match record.event {
                WorkflowEventKind::Started => {
                    let definition = record
                        .definition
                        .clone()
                        .and_then(|d| serde_json::from_value::<WorkflowDef>(d).ok());
                    let Some(definition) = definition else {
                        tracing::warn!(run = %record.run_id, "a workflow start without a readable definition");
                        continue;
                    };
                    run = Some(Self::start(
                        definition,
                        record.run_id.clone(),
                        record.inputs.clone().unwrap_or_default(),
                    ));
                }
                WorkflowEventKind::NodeCompleted => {
                    if let Some(r) = run.as_mut().filter(|r| r.run_id == record.run_id) {
                        r.apply(record);
                    }
                }
            }
        }
        run
    }

    /// Takes a completed node's record into the state.
    pub fn apply(&mut self, record: &WorkflowRecord) {
        let Some(node) = record.node.clone() else {
            return;
        };
        self.completed
            .push((node, record.outputs.clone().unwrap_or_default()));
        self.active = record.next.clone();
    }

    /// Whether every node on the run's path is complete.
    pub fn is_complete(&self) -> bool {
        self.active.is_none()
    }

    /// The active node.
    pub fn active_node(&self) -> Option<&WorkflowNode> {
        self.definition.node(self.active.as_deref()?)
    }

    /// The active node's position on the definition (1-based) and the number of nodes.
    pub fn position(&self) -> Option<(usize, usize)> {
        let id = self.active.as_deref()?;
        let at = self.definition.nodes.iter().position(|n| n.id == id)?;
        Some((at + 1, self.definition.nodes.len()))
    }

    /// The outputs of every completed node, by node.
    pub fn outputs(&self) -> Map<String, Value> {
        self.completed
            .iter()
            .map(|(n, o)| (n.clone(), Value::Object(o.clone())))
            .collect()
    }

    /// The `NODE_BRIEF` of the active node: its title and brief, the tools and skills it is
    /// meant to use, what it must produce and how to say it is done.
    pub fn node_brief(&self) -> Option<String> {
        let node = self.active_node()?;
        let mut out = String::new();
        let (at, of) = self.position().unwrap_or((0, 0));
        let _ = writeln!(
            out,
            "Workflow `{}`, node {at} of {of}: `{}` — {}",
            self.workflow, node.id, node.title
        );
        if !self.definition.body.trim().is_empty() {
            let _ = writeln!(out, "\nFor the whole run: {}", self.definition.body.trim());
        }
        let _ = writeln!(out, "\n{}", node.brief.trim());
        if let Some(tools) = node.tools.as_ref().filter(|t| !t.is_empty()) {
            let _ = writeln!(out, "\nTools for this node: {}.", tools.join(", "));
        }
        if !node.skills.is_empty() {
            let _ = writeln!(out, "Skills for this node: {}.", node.skills.join(", "));
        }
        out.push_str("\nIt must produce:\n");
        for o in &node.outputs {
            let _ = write!(out, "- `{}` ({})", o.name, o.kind.as_str());
            if let Some(d) = &o.description {
                let _ = write!(out, ": {d}");
            }
            if !o.options.is_empty() {
                let _ = write!(out, " — one of: {}", o.options.join(", "));
            }
            out.push('\n');
        }
        let _ = write!(
            out,
            "\nWhen the node is done, call `{COMPLETE_NODE}` with {{\"node\": \"{}\", \"outputs\": \
             {{…}}}} holding every output above (a table as rows of objects, a figure or file by \
             its file id or name, a decision as one of its values). Work only on this node.",
            node.id
        );
        Some(out)
    }

    /// The `STEP_CONTEXT` of the active node: the run's inputs and the outputs of the nodes
    /// before it (kept here, so they survive when their rounds leave the window).
    pub fn step_context(&self) -> Option<String> {
        self.active.as_ref()?;
        let mut out = format!(
            "Run `{}` of workflow `{}`.\nInputs: {}\n",
            self.run_id,
            self.workflow,
            Value::Object(self.inputs.clone())
        );
        if self.completed.is_empty() {
            out.push_str("No node is complete yet.");
        } else {
            out.push_str("Outputs of the completed nodes:\n");
            for (node, outputs) in &self.completed {
                let _ = writeln!(out, "- {node}: {}", Value::Object(outputs.clone()));
            }
        }
        Some(out.trim_end().to_owned())
    }

    /// The tools the active node may call, as a modifier the runtime applies (with a skill's,
    /// both hold: a tool must be in each list); `None` when the node names none or the run is
    /// complete. Tools allowed under any restriction (`complete_node`, `activate_skill`) stay
    /// callable.
    pub fn restrict(
        &self,
        skill: Option<ba_protocol::ContextModifier>,
    ) -> Option<ba_protocol::ContextModifier> {
        let node_tools = self.active_node().and_then(|n| n.tools.clone());
        let Some(tools) = node_tools else {
            return skill;
        };
        let mut modifier = skill.unwrap_or_default();
        modifier.allowed_tools = Some(match modifier.allowed_tools.take() {
            Some(skill_tools) => tools
                .into_iter()
                .filter(|t| skill_tools.contains(t))
                .collect(),
            None => tools,
        });
        Some(modifier)
    }

    /// Puts the run's parts into a run-mode request: the node brief and step context while a
    /// node is active, the post-run protocol once complete.
    pub(crate) fn shape(&self, request: &mut ba_context::BuildRequest<'_>) {
        request.run_state = if self.is_complete() {
            ba_context::RunState::Completed
        } else {
            ba_context::RunState::Active
        };
        request.node_brief = self.node_brief();
        request.step_context = self.step_context();
    }

    /// Checks a `complete_node` call's arguments against the active node: the record of the
    /// completion when they hold, else what was wrong, in sentences the model reads.
    ///
    /// # Errors
    /// The sentences, when the run is complete, the node is not the active one, or the
    /// outputs do not match what the node declares.
    pub fn complete(&self, arguments: &Value) -> Result<WorkflowRecord, String> {
        let Some(node) = self.active_node() else {
            return Err(format!(
                "the workflow run `{}` is complete: there is no node to complete",
                self.run_id
            ));
        };
        let named = arguments.get("node").and_then(Value::as_str);
        if named != Some(node.id.as_str()) {
            return Err(format!(
                "the active node is `{}`; `node` must name it (it was {})",
                node.id,
                named.map_or_else(|| "missing".to_owned(), |n| format!("`{n}`"))
            ));
        }
        let outputs = node
            .check_outputs(arguments.get("outputs").unwrap_or(&Value::Null))
            .map_err(|problems| {
                format!(
                    "node `{}` is not complete: {}. Call `{COMPLETE_NODE}` again with every output.",
                    node.id,
                    problems.join("; ")
                )
            })?;
        let next = node
            .next_after(&outputs)
            .map_err(|e| e.to_string())?
            .map(str::to_owned);
        Ok(WorkflowRecord {
            event: WorkflowEventKind::NodeCompleted,
            workflow: self.workflow.clone(),
            run_id: self.run_id.clone(),
            inputs: None,
            definition: None,
            node: Some(node.id.clone()),
            outputs: Some(outputs),
            next,
        })
    }
}

/// Inputs as people read them: `month=2024-09` (text as it is, numbers and booleans as JSON).
pub fn shown_inputs(inputs: &Map<String, Value>) -> Vec<String> {
    inputs
        .iter()
        .map(|(k, v)| match v {
            Value::String(text) => format!("{k}={text}"),
            other => format!("{k}={other}"),
        })
        .collect()
}

/// The words the model reads about `complete_node`.
pub(crate) const COMPLETE_NODE_DESCRIPTION: &str = "Completes the active node of the workflow \
run with its outputs; the run then moves to the next node (its brief arrives with the next \
request). Refused, with the reason, when an output the node declares is missing or has the \
wrong shape.";

/// The `complete_node` tool as the model sees it.
pub fn complete_node_spec() -> ToolSpec {
    ToolSpec::new(
        COMPLETE_NODE,
        COMPLETE_NODE_DESCRIPTION,
        json!({
            "type": "object",
            "properties": {
                "node": {"type": "string", "description": "The id of the active node."},
                "outputs": {
                    "type": "object",
                    "description": "Every output the node declares, by name.",
                    "additionalProperties": true
                }
            },
            "required": ["node", "outputs"],
            "additionalProperties": false
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::LogRole;

    const DEF: &str = "---\nname: review\ndescription: A review.\ninputs:\n  month: {type: month, default: \"2024-09\"}\nnodes:\n  - id: load\n    title: Load\n    brief: Load the data.\n    outputs: {rows: value}\n  - id: judge\n    title: Judge\n    brief: Decide.\n    outputs:\n      verdict: {kind: decision, options: [good, bad]}\n    next: {on: verdict, cases: {good: end, bad: fix}}\n  - id: fix\n    title: Fix\n    brief: Fix it.\n    outputs: {plan: text}\n---\nBe brief.\n";

    fn run() -> WorkflowRun {
        let (def, diags) = ba_skills::parse_workflow(DEF, std::path::Path::new("WORKFLOW.md"));
        let def = def.unwrap_or_else(|| panic!("{diags:?}"));
        let inputs = def.resolve_inputs(&Default::default()).unwrap_or_default();
        WorkflowRun::start(def, "wfr_1".into(), inputs)
    }

    fn entry(record: WorkflowRecord) -> LogEntry {
        let mut e = LogEntry::new("e", LogRole::Tool, "t");
        e.records.workflow = Some(Box::new(record));
        e
    }

    #[test]
    fn a_run_walks_its_nodes_and_branches_and_reads_back_from_the_log() {
        let mut r = run();
        assert_eq!(r.active.as_deref(), Some("load"));
        assert_eq!(r.inputs.get("month"), Some(&json!("2024-09")));
        let brief = r.node_brief().unwrap_or_default();
        assert!(
            brief.starts_with("Workflow `review`, node 1 of 3: `load` — Load"),
            "{brief}"
        );
        assert!(brief.contains("- `rows` (value)"), "{brief}");
        let missing = r.complete(&json!({"node": "load", "outputs": {}}));
        assert!(
            missing.as_ref().is_err_and(|e| e.contains("rows")),
            "{missing:?}"
        );
        let wrong = r.complete(&json!({"node": "judge", "outputs": {"verdict": "good"}}));
        assert!(wrong.is_err_and(|e| e.contains("the active node is `load`")));
        let mut log = vec![entry(r.started_record())];
        for (node, outputs) in [
            ("load", json!({"rows": 42})),
            ("judge", json!({"verdict": "bad"})),
        ] {
            let record = r
                .complete(&json!({"node": node, "outputs": outputs}))
                .unwrap_or_else(|e| panic!("{e}"));
            r.apply(&record);
            log.push(entry(record));
        }
        assert_eq!(r.active.as_deref(), Some("fix"), "the branch on `bad`");
        let context = r.step_context().unwrap_or_default();
        assert!(context.contains("- load: {\"rows\":42}"), "{context}");
        assert_eq!(WorkflowRun::from_log(&log), Some(r.clone()));
        let record = r
            .complete(&json!({"node": "fix", "outputs": {"plan": "more"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(record.next, None);
        r.apply(&record);
        assert!(r.is_complete() && r.node_brief().is_none() && r.step_context().is_none());
    }
}
