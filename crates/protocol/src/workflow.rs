//! What a workflow run (the run mode) writes into the log, so that its state — the
//! node it is at, the outputs so far — is read back from the log alone after a crash, a
//! restart, an approval pause or a rewind.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What happened to a workflow run at this entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowEventKind {
    /// The run started (on the user entry that asked for it).
    Started,
    /// A node's outputs were accepted (on the `complete_node` tool result).
    NodeCompleted,
}

/// A workflow run's record on one entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowRecord {
    /// What happened.
    pub event: WorkflowEventKind,
    /// The workflow's name (the entries' `workflow_id`).
    pub workflow: String,
    /// The run's id (the entries' `run_id`): two runs in one conversation are kept apart by it.
    pub run_id: String,
    /// On `started`: the inputs, read by type, defaults applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Map<String, Value>>,
    /// On `started`: the workflow's definition as it was, so the run goes on as it began even
    /// if its `WORKFLOW.md` changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<Value>,
    /// On `node_completed`: the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// On `node_completed`: its outputs, as checked against what it declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Map<String, Value>>,
    /// On `node_completed`: the node that comes next; absent when the run is complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}
