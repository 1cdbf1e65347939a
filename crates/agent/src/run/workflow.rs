//! A run's part in a workflow run: starting one ([`Input::Workflow`](crate::Input::Workflow)),
//! the `complete_node` calls that move it on, the `run_id` / `workflow_id` of its entries, and
//! the node brief and step context of its requests. The state is [`WorkflowRun`], read from
//! the history when the run starts and put in the run scope, where `complete_node` moves it on;
//! the run takes its copy back from there after each completion.

use std::collections::BTreeMap;

use ba_protocol::{Mode, WorkflowRecord};

use super::{Runner, Stop};
use crate::adapters::CompleteNodeTool;
use crate::error::ErrorKind;
use crate::events::{AgentEvent, WorkflowNodeInfo};
use crate::ids::new_id;
use crate::workflow::{WorkflowRun, shown_inputs};

impl Runner {
    /// Reads the conversation's latest workflow run from its history; offers `complete_node`
    /// while a node is active.
    pub(super) fn load_workflow(&mut self) {
        self.workflow = WorkflowRun::from_log(self.history.all());
        CompleteNodeTool::set_state(&self.kit.scope, self.workflow.clone());
    }

    /// Starts a run of the workflow `name`: the definition and inputs checked (an unknown
    /// workflow or a bad input ends the run as bad input, naming it), the conversation put in
    /// run mode, and the user entry that asks for it appended with the start's record.
    pub(super) async fn start_workflow(
        &mut self,
        name: &str,
        given: &BTreeMap<String, String>,
    ) -> Result<(), Stop> {
        let workflows = std::sync::Arc::clone(&self.inner.workflows);
        let (definition, inputs) = workflows.start(name, given).map_err(|e| Stop {
            kind: ErrorKind::Input,
            message: e.to_string(),
        })?;
        let definition = definition.clone();
        if self.mode != Mode::Run {
            self.mode = Mode::Run;
            let update = ba_storage::MetaUpdate {
                mode: Some(Mode::Run),
                ..ba_storage::MetaUpdate::default()
            };
            self.inner.store.update_metadata(&self.id, update).await?;
        }
        let id = new_id();
        let run = WorkflowRun::start(
            definition,
            format!("wfr_{}", id.trim_start_matches("e_")),
            inputs,
        );
        let shown = shown_inputs(&run.inputs);
        let text = format!(
            "Run the workflow `{}` ({}) with {}.",
            run.workflow,
            run.definition.description.trim(),
            if shown.is_empty() {
                "no inputs".to_owned()
            } else {
                shown.join(", ")
            }
        );
        if self.naming.take_untitled() {
            let title = format!("{}: {}", run.workflow, shown.join(", "));
            self.title_from(title.trim_end_matches([':', ' '])).await;
        }
        self.record_inventory().await?;
        self.drop_waiting().await?;
        let mut e = self.user_entry(&text, None);
        e.records.workflow = Some(Box::new(run.started_record()));
        let nodes = run
            .definition
            .nodes
            .iter()
            .map(|n| WorkflowNodeInfo {
                id: n.id.clone(),
                title: n.title.clone(),
            })
            .collect();
        let (workflow, run_id, inputs) =
            (run.workflow.clone(), run.run_id.clone(), run.inputs.clone());
        self.workflow = Some(run);
        CompleteNodeTool::set_state(&self.kit.scope, self.workflow.clone());
        self.put_run_ids(&mut e);
        self.append(e).await?;
        self.emit(AgentEvent::WorkflowStarted {
            workflow,
            workflow_run_id: run_id,
            inputs,
            nodes,
        });
        self.emit_node_started();
        self.round = self.history.rounds_in_task();
        Ok(())
    }

    fn emit_node_started(&self) {
        let Some(w) = &self.workflow else { return };
        if let Some(node) = w.active_node() {
            self.emit(AgentEvent::NodeStarted {
                workflow_run_id: w.run_id.clone(),
                node: node.id.clone(),
                title: node.title.clone(),
            });
        }
    }

    /// Tags an entry appended while a workflow run is at a node with the run's ids.
    pub(super) fn put_workflow_ids(&self, entry: &mut ba_protocol::LogEntry) {
        if let Some(w) = self.workflow.as_ref().filter(|w| !w.is_complete()) {
            entry.run_id = Some(w.run_id.clone());
            entry.workflow_id = Some(w.workflow.clone());
        }
    }

    /// After a completion's entry is in the log: the state moves on, and the events say so.
    pub(super) fn node_completed(&mut self, record: &WorkflowRecord) {
        // The call moved the state in the run scope; the run's copy is taken from there.
        self.workflow = CompleteNodeTool::state(&self.kit.scope);
        let Some(w) = self.workflow.as_ref() else {
            return;
        };
        let (run_id, workflow) = (w.run_id.clone(), w.workflow.clone());
        let complete = w.is_complete();
        let outputs = w.outputs();
        self.emit(AgentEvent::NodeCompleted {
            workflow_run_id: run_id.clone(),
            node: record.node.clone().unwrap_or_default(),
            outputs: record.outputs.clone().unwrap_or_default(),
            next: record.next.clone(),
        });
        if complete {
            self.emit(AgentEvent::WorkflowCompleted {
                workflow,
                workflow_run_id: run_id,
                outputs,
            });
        } else {
            self.emit_node_started();
        }
    }
}
